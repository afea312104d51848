"""Reader for Lark grammar text in llguidance's dialect (docs/design.md §2 "Lark"): text in, a syntax
tree of :class:`Definition` values out. Meaning (terminals, lexemes, ``%ignore``) is ``_lark``'s job.

The syntax follows lark's own ``lark.lark`` with llguidance's extensions (its docs/syntax.md):
``//`` and ``#`` comments, ``-`` in names, ``x{n}``/``x{n,m}`` as ``x ~ n..m``, ``%json {...}``,
``%regex {...}``, special tokens ``<|name|>`` / ``<[ids]>``, rule attributes ``name[lazy]: ...``.
A definition ends at a newline outside brackets unless the next line starts with ``|``.
Every syntax error is a :class:`SpecError` naming the line and column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import LimitExceeded, SpecError, Unsupported

__all__ = [
    "LStr",
    "LRange",
    "LRegex",
    "LName",
    "LSpecial",
    "LJson",
    "LRegexExt",
    "LSeq",
    "LAlt",
    "LRep",
    "LExpr",
    "Definition",
    "Import",
    "LarkText",
    "read_lark",
]


@dataclass(frozen=True)
class LStr:
    """A string literal (``icase``: the ``"..."i`` flag)."""

    text: str
    icase: bool
    line: int
    col: int


@dataclass(frozen=True)
class LRange:
    """``"a".."z"``: one code point between two one-character literals."""

    lo: int
    hi: int
    line: int
    col: int


@dataclass(frozen=True)
class LRegex:
    """``/pattern/flags``."""

    pattern: str
    flags: str
    line: int
    col: int


@dataclass(frozen=True)
class LName:
    """A reference to a rule (lowercase) or a terminal (uppercase)."""

    name: str
    line: int
    col: int

    @property
    def is_terminal(self) -> bool:
        return is_terminal_name(self.name)


@dataclass(frozen=True)
class LSpecial:
    """A special token ``<...>``; ``text`` is what is between the angle brackets."""

    text: str
    line: int
    col: int


@dataclass(frozen=True)
class LJson:
    """``%json {schema}``."""

    schema: Any
    line: int
    col: int


@dataclass(frozen=True)
class LRegexExt:
    """``%regex {...}`` (structured regex)."""

    spec: Any
    line: int
    col: int


@dataclass(frozen=True)
class LSeq:
    items: tuple[LExpr, ...]


@dataclass(frozen=True)
class LAlt:
    options: tuple[LExpr, ...]


@dataclass(frozen=True)
class LRep:
    """``item`` repeated ``lo`` to ``hi`` times (``None``: unbounded)."""

    item: LExpr
    lo: int
    hi: int | None


LExpr = LStr | LRange | LRegex | LName | LSpecial | LJson | LRegexExt | LSeq | LAlt | LRep


@dataclass(frozen=True)
class Definition:
    """``name[attrs]: body`` (a rule, or a terminal when ``name`` is uppercase)."""

    name: str
    body: LExpr
    attrs: tuple[tuple[str, Any], ...]
    line: int
    col: int


@dataclass(frozen=True)
class Import:
    """``%import common.NAME [-> ALIAS]``."""

    name: str
    alias: str
    line: int
    col: int


@dataclass
class LarkText:
    """A read grammar: definitions in order, ``%ignore`` bodies, imports."""

    definitions: list[Definition] = field(default_factory=list)
    ignores: list[LExpr] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)


def is_terminal_name(name: str) -> bool:
    """Lark's rule: a name with no lowercase letter (after leading underscores) names a terminal."""
    stripped = name.lstrip("_")
    return bool(stripped) and stripped[0].isupper()


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:-(?!>)[A-Za-z0-9_]+)*")
_NUMBER = re.compile(r"[0-9]+")
_SPACE = re.compile(r"[ \t\f\r]+|\\\r?\n")
_STRING_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "f": "\f",
    "v": "\v",
    "0": "\0",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


@dataclass(frozen=True)
class _Tok:
    kind: str  # NAME NUMBER STRING REGEX SPECIAL DIRECTIVE JSON OP NL EOF
    value: Any
    line: int
    col: int


class _Lexer:
    """Splits grammar text into tokens; newlines are tokens (they end definitions)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.line_start = 0
        self.depth = 0  # open brackets: newlines inside them are spaces

    def error(self, what: str, expected: str, i: int | None = None) -> SpecError:
        i = self.i if i is None else i
        line = self.text.count("\n", 0, i) + 1
        col = i - (self.text.rfind("\n", 0, i) + 1) + 1
        return SpecError(what, f"line {line} col {col}", expected)

    def _pos(self, i: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, i) + 1
        return line, i - (self.text.rfind("\n", 0, i) + 1) + 1

    def tokens(self) -> list[_Tok]:
        out: list[_Tok] = []
        text = self.text
        n = len(text)
        i = 0
        while i < n:
            m = _SPACE.match(text, i)
            if m:
                i = m.end()
                continue
            c = text[i]
            line, col = self._pos(i)
            if c == "\n":
                if self.depth == 0:
                    out.append(_Tok("NL", None, line, col))
                i += 1
                continue
            if c == "#" or text.startswith("//", i):
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            if c == '"':
                value, i = self._string(i)
                icase = (
                    i < n
                    and text[i] == "i"
                    and not (i + 1 < n and (text[i + 1].isalnum() or text[i + 1] == "_"))
                )
                if icase:
                    i += 1
                out.append(_Tok("STRING", (value, icase), line, col))
                continue
            if c == "/":
                pattern, flags, i = self._regex(i)
                out.append(_Tok("REGEX", (pattern, flags), line, col))
                continue
            if c == "<":
                j = text.find(">", i + 1)
                if j < 0 or "\n" in text[i:j]:
                    raise self.error("unterminated special token", "'<name>' on one line", i)
                out.append(_Tok("SPECIAL", text[i + 1 : j], line, col))
                i = j + 1
                continue
            if c == "%":
                m = _NAME.match(text, i + 1)
                if not m:
                    raise self.error("bad directive", "'%' followed by a name (ignore, import, json, ...)", i)
                name = m.group(0)
                out.append(_Tok("DIRECTIVE", name, line, col))
                i = m.end()
                if name in ("json", "regex", "llguidance"):
                    i = self._json_blob(i, out, name)
                continue
            m = _NAME.match(text, i)
            if m:
                out.append(_Tok("NAME", m.group(0), line, col))
                i = m.end()
                continue
            m = _NUMBER.match(text, i)
            if m:
                out.append(_Tok("NUMBER", int(m.group(0)), line, col))
                i = m.end()
                continue
            for op in (
                "->",
                "..",
                ":",
                "|",
                "(",
                ")",
                "[",
                "]",
                "?",
                "*",
                "+",
                "~",
                ",",
                "{",
                "}",
                ".",
                "!",
                "=",
                "@",
                "&",
                "-",
            ):
                if text.startswith(op, i):
                    if op in "([{":
                        self.depth += 1
                    elif op in ")]}":
                        self.depth = max(0, self.depth - 1)
                    out.append(_Tok("OP", op, line, col))
                    i += len(op)
                    break
            else:
                raise self.error(f"unexpected character {c!r}", "a Lark grammar token", i)
        line, col = self._pos(n)
        out.append(_Tok("NL", None, line, col))
        out.append(_Tok("EOF", None, line, col))
        return out

    def _string(self, i: int) -> tuple[str, int]:
        text = self.text
        j = i + 1
        chars: list[str] = []
        while True:
            if j >= len(text) or text[j] == "\n":
                raise self.error("unterminated string literal", 'a closing "', i)
            c = text[j]
            if c == '"':
                return "".join(chars), j + 1
            if c != "\\":
                chars.append(c)
                j += 1
                continue
            e = text[j + 1] if j + 1 < len(text) else ""
            if e in _STRING_ESCAPES:
                chars.append(_STRING_ESCAPES[e])
                j += 2
            elif e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                digits = text[j + 2 : j + 2 + width]
                if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise self.error(f"bad \\{e} escape in string", f"{width} hex digits", j)
                cp = int(digits, 16)
                if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                    raise self.error(
                        "escape is not a Unicode scalar value", "a code point outside surrogates", j
                    )
                chars.append(chr(cp))
                j += 2 + width
            else:
                raise Unsupported(
                    "lark-string-escape",
                    f"line {self._pos(j)[0]} col {self._pos(j)[1]}",
                    f"the escape \\{e} in a string literal is read differently by lark and llguidance "
                    "(llguidance issue 54); write the character itself or use a /regex/",
                )

    def _regex(self, i: int) -> tuple[str, str, int]:
        text = self.text
        j = i + 1
        in_class = False
        while True:
            if j >= len(text) or text[j] == "\n":
                raise self.error("unterminated regex literal", "a closing /", i)
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == "[":
                in_class = True
            elif c == "]":
                in_class = False
            elif c == "/" and not in_class:
                break
            j += 1
        pattern = text[i + 1 : j].replace("\\/", "/")
        k = j + 1
        while k < len(text) and text[k] in "imslux":
            k += 1
        return pattern, text[j + 1 : k], k

    def _json_blob(self, i: int, out: list[_Tok], name: str) -> int:
        m = re.compile(r"[ \t\r\n]*").match(self.text, i)
        assert m is not None
        start = m.end()
        line, col = self._pos(start)
        try:
            value, end = _DECODER.raw_decode(self.text, start)
        except json.JSONDecodeError as e:
            raise self.error(f"%{name} needs a JSON value", f"valid JSON ({e.msg})", e.pos) from None
        out.append(_Tok("JSON", value, line, col))
        return int(end)


_DECODER = json.JSONDecoder()


class _Parser:
    """Recursive descent over the tokens (lark.lark's ``expansions``/``alias``/``expr``/``atom``)."""

    def __init__(self, text: str, max_depth: int) -> None:
        self.lexer = _Lexer(text)
        self.toks = self.lexer.tokens()
        self.k = 0
        self.result = LarkText()
        self.depth = 0
        self.max_depth = max_depth

    @property
    def tok(self) -> _Tok:
        return self.toks[self.k]

    def error(self, what: str, expected: str, tok: _Tok | None = None) -> SpecError:
        t = tok or self.tok
        return SpecError(what, f"line {t.line} col {t.col}", expected)

    def at_op(self, op: str) -> bool:
        return self.tok.kind == "OP" and self.tok.value == op

    def expect_op(self, op: str) -> _Tok:
        if not self.at_op(op):
            raise self.error(f"unexpected {self._describe()}", repr(op))
        t = self.tok
        self.k += 1
        return t

    def _describe(self) -> str:
        t = self.tok
        return {"NL": "end of line", "EOF": "end of grammar"}.get(t.kind, f"{t.kind.lower()} {t.value!r}")

    def parse(self) -> LarkText:
        while self.tok.kind != "EOF":
            if self.tok.kind == "NL":
                self.k += 1
                continue
            if self.tok.kind == "DIRECTIVE":
                self.directive()
            else:
                self.definition()
        return self.result

    def end_of_statement(self) -> None:
        if self.tok.kind not in ("NL", "EOF"):
            raise self.error(f"unexpected {self._describe()}", "the end of the definition (a new line)")

    def definition(self) -> None:
        t = self.tok
        while self.at_op("?") or self.at_op("!"):
            self.k += 1
        if self.tok.kind != "NAME":
            raise self.error(f"unexpected {self._describe()}", "a rule or terminal definition 'name: ...'")
        name_tok = self.tok
        self.k += 1
        if self.at_op("{"):
            raise Unsupported(
                "lark-template", name_tok.value, "Lark templates are not supported by llguidance"
            )
        if self.at_op("."):
            raise Unsupported(
                "lark-priority",
                name_tok.value,
                "priorities change which parse or lexeme lark picks; llguidance does not support them",
            )
        attrs: tuple[tuple[str, Any], ...] = ()
        if self.at_op("["):
            attrs = self.attributes()
        self.expect_op(":")
        body = self.expansions()
        self.end_of_statement()
        self.result.definitions.append(Definition(name_tok.value, body, attrs, t.line, t.col))

    def attributes(self) -> tuple[tuple[str, Any], ...]:
        self.expect_op("[")
        out: list[tuple[str, Any]] = []
        while True:
            if self.tok.kind != "NAME":
                raise self.error(f"unexpected {self._describe()}", "an attribute name (lazy, capture, ...)")
            key = self.tok.value
            self.k += 1
            value: Any = True
            if self.at_op("="):
                self.k += 1
                t = self.tok
                if t.kind == "STRING":
                    value = t.value[0]
                elif t.kind == "NUMBER":
                    value = t.value
                    if self.toks[self.k + 1].kind == "OP" and self.toks[self.k + 1].value == ".":
                        if self.toks[self.k + 2].kind != "NUMBER":
                            raise self.error("bad number", "digits after '.'", self.toks[self.k + 1])
                        value = float(f"{value}.{self.toks[self.k + 2].value}")
                        self.k += 2
                elif t.kind in ("REGEX", "NAME"):
                    value = t.value
                else:
                    raise self.error(f"unexpected {self._describe()}", "an attribute value")
                self.k += 1
            out.append((key, value))
            if self.at_op(","):
                self.k += 1
                continue
            self.expect_op("]")
            return tuple(out)

    def directive(self) -> None:
        t = self.tok
        name = t.value
        self.k += 1
        if name == "ignore":
            if self.tok.kind in ("NL", "EOF"):
                raise self.error("%ignore needs a terminal", "a terminal name, string or regex")
            self.result.ignores.append(self.expansions())
        elif name == "import":
            self.import_()
        elif name == "llguidance":
            blob = self.tok
            self.k += 1
            if blob.value != {}:
                raise Unsupported(
                    "%llguidance",
                    f"line {t.line}",
                    f"grammar options {sorted(blob.value) if isinstance(blob.value, dict) else blob.value!r} "
                    "change the parser's behaviour in ways the reference does not model",
                )
        elif name in ("json", "regex"):
            raise self.error(f"%{name} outside a definition", "it inside a rule or terminal body", t)
        else:
            raise Unsupported(
                f"%{name}",
                f"line {t.line} col {t.col}",
                "llguidance supports %ignore, %import common, %json, %regex, %llguidance",
            )
        self.end_of_statement()

    def import_(self) -> None:
        t = self.tok
        if self.tok.kind != "NAME":
            if self.at_op("."):
                raise Unsupported(
                    "%import",
                    f"line {t.line} col {t.col}",
                    "relative imports read other files; only '%import common' is built in",
                )
            raise self.error(f"unexpected {self._describe()}", "'common.NAME'")
        module = self.tok.value
        self.k += 1
        if module != "common":
            raise Unsupported(
                "%import", f"line {t.line} col {t.col}", f"only '%import common' is built in (not {module!r})"
            )
        if self.at_op("("):
            self.k += 1
            while True:
                if self.tok.kind != "NAME":
                    raise self.error(f"unexpected {self._describe()}", "a name to import")
                n = self.tok
                self.result.imports.append(Import(n.value, n.value, n.line, n.col))
                self.k += 1
                if self.at_op(","):
                    self.k += 1
                    continue
                self.expect_op(")")
                return
        self.expect_op(".")
        if self.tok.kind != "NAME":
            raise self.error(f"unexpected {self._describe()}", "a name after 'common.'")
        n = self.tok
        self.k += 1
        alias = n.value
        if self.at_op("->"):
            self.k += 1
            if self.tok.kind != "NAME":
                raise self.error(f"unexpected {self._describe()}", "an alias name")
            alias = self.tok.value
            self.k += 1
        self.result.imports.append(Import(n.value, alias, n.line, n.col))

    # -- expressions ----------------------------------------------------------------------------------

    def expansions(self) -> LExpr:
        options = [self.alias()]
        while True:
            if self.at_op("|"):
                self.k += 1
                options.append(self.alias())
                continue
            # a '|' on the next line continues the definition (lark.lark's _VBAR: _NL? "|")
            j = self.k
            while self.toks[j].kind == "NL":
                j += 1
            if j > self.k and self.toks[j].kind == "OP" and self.toks[j].value == "|":
                self.k = j
                continue
            break
        return options[0] if len(options) == 1 else LAlt(tuple(options))

    def alias(self) -> LExpr:
        items: list[LExpr] = []
        while self.starts_atom():
            items.append(self.expr())
        if self.at_op("->"):  # a tree alias: no effect on the language
            self.k += 1
            if self.tok.kind != "NAME":
                raise self.error(f"unexpected {self._describe()}", "an alias name after '->'")
            self.k += 1
        return items[0] if len(items) == 1 else LSeq(tuple(items))

    def starts_atom(self) -> bool:
        t = self.tok
        if t.kind in ("NAME", "STRING", "REGEX", "SPECIAL"):
            return True
        if t.kind == "DIRECTIVE" and t.value in ("json", "regex"):
            return True
        return t.kind == "OP" and t.value in ("(", "[", "@", "~", "&")

    def expr(self) -> LExpr:
        item = self.atom()
        while True:
            if self.at_op("?"):
                self.k += 1
                item = LRep(item, 0, 1)
            elif self.at_op("*"):
                self.k += 1
                item = LRep(item, 0, None)
            elif self.at_op("+"):
                self.k += 1
                item = LRep(item, 1, None)
            elif self.at_op("~") and self.toks[self.k + 1].kind == "NUMBER":
                self.k += 1
                lo = self.number()
                hi: int | None = lo
                if self.at_op(".."):
                    self.k += 1
                    hi = self.number()
                item = self._rep(item, lo, hi)
            elif self.at_op("{"):
                if self.toks[self.k + 1].kind == "NAME":
                    t = self.tok
                    raise Unsupported(
                        "lark-template",
                        f"line {t.line} col {t.col}",
                        "Lark templates are not supported by llguidance",
                    )
                self.k += 1
                lo_opt = self.number() if self.tok.kind == "NUMBER" else None
                hi = lo_opt
                if self.at_op(","):
                    self.k += 1
                    hi = self.number() if self.tok.kind == "NUMBER" else None
                self.expect_op("}")
                item = self._rep(item, lo_opt or 0, hi)
            else:
                return item

    def _rep(self, item: LExpr, lo: int, hi: int | None) -> LRep:
        if hi is not None and hi < lo:
            raise self.error("bad repetition range", f"a maximum >= the minimum {lo}", self.toks[self.k - 1])
        return LRep(item, lo, hi)

    def number(self) -> int:
        if self.tok.kind != "NUMBER":
            raise self.error(f"unexpected {self._describe()}", "a repetition count")
        v = int(self.tok.value)
        self.k += 1
        return v

    def atom(self) -> LExpr:
        t = self.tok
        if t.kind == "OP":
            if t.value in "([":
                self.depth += 1
                if self.depth > self.max_depth:
                    raise LimitExceeded(
                        "nesting_depth", self.depth, self.max_depth, f"line {t.line} col {t.col}"
                    )
                self.k += 1
                body = self.expansions()
                self.expect_op(")" if t.value == "(" else "]")
                self.depth -= 1
                return body if t.value == "(" else LRep(body, 0, 1)
            if t.value == "@":
                raise Unsupported(
                    "lark-subgrammar",
                    f"line {t.line} col {t.col}",
                    "@name refers to a grammar outside this text",
                )
            raise Unsupported(
                "lark-regex-operator",
                f"line {t.line} col {t.col}",
                f"llguidance's terminal operator {t.value!r} (and/not) is not supported by the reference",
            )
        self.k += 1
        if t.kind == "NAME":
            return LName(t.value, t.line, t.col)
        if t.kind == "STRING":
            text, icase = t.value
            if self.at_op(".."):
                self.k += 1
                hi = self.tok
                if hi.kind != "STRING":
                    raise self.error(f"unexpected {self._describe()}", "a one-character string after '..'")
                self.k += 1
                lo_s, hi_s = text, hi.value[0]
                if len(lo_s) != 1 or len(hi_s) != 1 or ord(lo_s) > ord(hi_s):
                    raise self.error("bad character range", "two one-character strings, low..high", t)
                return LRange(ord(lo_s), ord(hi_s), t.line, t.col)
            return LStr(text, icase, t.line, t.col)
        if t.kind == "REGEX":
            pattern, flags = t.value
            return LRegex(pattern, flags, t.line, t.col)
        if t.kind == "SPECIAL":
            return LSpecial(t.value, t.line, t.col)
        if t.kind == "DIRECTIVE":
            blob = self.tok
            self.k += 1
            if t.value == "json":
                return LJson(blob.value, t.line, t.col)
            return LRegexExt(blob.value, t.line, t.col)
        raise self.error(f"unexpected {t.kind.lower()}", "an expression")  # pragma: no cover


def read_lark(text: str, max_depth: int = 256) -> LarkText:
    """Read Lark grammar text (llguidance's dialect) into definitions; syntax errors are ``SpecError``
    with the line and column; brackets nested deeper than ``max_depth`` are
    ``LimitExceeded("nesting_depth")``."""
    return _Parser(text, max_depth).parse()
