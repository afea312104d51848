"""xgrammar's EBNF dialect (``Gbnf(text, dialect="xgrammar")``) read to the syntax tree (``_grammar_ast``).

:class:`XgrammarReader` mirrors xgrammar 0.2.9's ``cpp/grammar_parser.cc`` (``EBNFLexer`` /
``EBNFParser``): token-based layout, C escapes, ``( )`` and ``""`` as the empty string, one postfix
operator per element, ``[^]`` any character, ``[z-a]`` an error. Lookahead assertions
(``rule ::= body (= sequence)``) are returned with the rules; the pipeline (``_gbnf``) has them decided
by the lookahead prover (``_grammar_lookahead``). Macros (``Regex``, ``TagDispatch``, ``Token``, ...)
and rule options (``name[max_tokens=..] ::=``) are refused. Positions, errors and the scalar-value
check are the llama.cpp reader's (:class:`~refdecoder._gbnf_reader.GbnfReader`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ._gbnf_reader import GbnfReader
from ._grammar_ast import MAX_CODE_POINT, AltE, Chars, Expr, Lit, ParsedGrammar, Ref, RepE, Rule, SeqE
from ._limits import Limits
from .errors import LimitExceeded, SpecError, Unsupported

__all__ = ["XgrammarReader", "read_xgrammar"]


_XG_ESCAPES = {
    "'": 0x27, '"': 0x22, "?": 0x3F, "\\": 0x5C, "/": 0x2F, "a": 0x07, "b": 0x08, "f": 0x0C,
    "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B, "0": 0x00, "e": 0x1B,
}  # fmt: skip
_XG_CLASS_ESCAPES = {c: ord(c) for c in "^$\\.*+?()[]{}|/-"}  # EBNFLexer::ParseCharClassToken
_XG_MACROS = ("TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch", "Regex", "Substring")
_POSTFIX: dict[str, tuple[int, int | None]] = {"*": (0, None), "+": (1, None), "?": (0, 1)}


@dataclass(frozen=True)
class _XgToken:
    kind: str  # "name", "rule", "bool", "int", "str", "class", "eof", or the punctuation ("(=", "::=", ...)
    value: Any  # str (names), int, tuple of code points (strings), Chars (classes), None
    pos: int


class XgrammarReader:
    """xgrammar's EBNF (``EBNFLexer`` / ``EBNFParser``): a token stream in which whitespace and newlines
    are insignificant except that a rule name must start its line; names are ``[a-zA-Z_.-][a-zA-Z0-9_.-]*``;
    ``""`` and ``( )`` are the empty string; C escapes (``\\0 \\a \\b \\e \\f \\v \\' \\? \\/``, ``\\x`` with
    any number of hex digits); classes may escape ``^ $ \\ . * + ? ( ) [ ] { } | / -``, ``[^]`` is any
    character, ``[z-a]`` is an error; one postfix operator per element (``*``, ``+``, ``?``, ``{m}``,
    ``{m,}``, ``{m,n}``, ``{m,-1}``); a rule may end with a lookahead assertion ``(= sequence)``
    (``lookaheads``). Macros (``Regex(...)``, ``TagDispatch(...)``, ``Token(...)``, ...) and rule
    options (``name[max_tokens=..] ::=``) are refused: they are token- or engine-level features."""

    def __init__(self, text: str, limits: Limits) -> None:
        self.base = GbnfReader(text, limits)  # positions, errors, limits
        self.text = text
        self.limits = limits
        self.rules: dict[str, Rule] = {}
        self.refs: list[tuple[Ref, str]] = []
        self.lookaheads: dict[str, Expr] = {}
        self.tokens: list[_XgToken] = []
        self.i = 0

    def error(self, what: str, pos: int, expected: str) -> SpecError:
        return self.base.error(what, pos, expected)

    # -- lexer
    def tokenize(self) -> None:
        text, n = self.text, len(self.text)
        pos = 0
        while True:
            while pos < n and text[pos] in " \t\r\n#":
                if text[pos] == "#":
                    while pos < n and text[pos] not in "\r\n":
                        pos += 1
                else:
                    pos += 1
            if pos >= n:
                self.tokens.append(_XgToken("eof", None, pos))
                break
            c = text[pos]
            if text.startswith("(=", pos):
                self.tokens.append(_XgToken("(=", None, pos))
                pos += 2
            elif text.startswith("::=", pos):
                self.tokens.append(_XgToken("::=", None, pos))
                pos += 3
            elif c in "(){}|,*+?=":
                self.tokens.append(_XgToken(c, None, pos))
                pos += 1
            elif c == '"':
                pos = self.string(pos)
            elif c == "[":
                pos = self.char_class(pos)
            elif c == "_" or c == "-" or c == "." or c.isascii() and c.isalpha():
                end = pos + 1
                while end < n and (text[end] in "_-." or text[end].isascii() and text[end].isalnum()):
                    end += 1
                if text[end : end + 1] == "[" and re.match(r"\[[^\]\r\n]*\][ \t]*::=", text[end:]):
                    raise Unsupported(
                        "xgrammar-rule-option",
                        text[pos:end],
                        f"rule options at {self.base.at(end)} (max_tokens, max_chars, capture, lazy, "
                        "temperature, ...) are token- or engine-level; the reference decides languages",
                    )
                word = text[pos:end]
                self.tokens.append(_XgToken("bool" if word in ("true", "false") else "name", word, pos))
                pos = end
            elif "0" <= c <= "9":
                end = pos
                while end < n and "0" <= text[end] <= "9":
                    end += 1
                # xgrammar reads up to 1e15 and casts counts to int32 (larger ones wrap); the reference
                # takes counts up to the llama.cpp dialect's bound
                if end - pos > 18 or int(text[pos:end]) > self.limits.repetition_count:
                    raise LimitExceeded(
                        "repetition_count", text[pos:end], self.limits.repetition_count, self.base.at(pos)
                    )
                self.tokens.append(_XgToken("int", int(text[pos:end]), pos))
                pos = end
            else:
                raise self.error("unexpected character", pos, "a rule, symbol or operator")
        for k, t in enumerate(self.tokens):  # ConvertIdentifierToRuleName
            if t.kind == "::=":
                prev = self.tokens[k - 1] if k else None
                if prev is None or prev.kind != "name":
                    raise self.error("'::=' not after a rule name", t.pos, "'name ::= ...'")
                if k >= 2 and self.base.where(self.tokens[k - 2].pos)[0] == self.base.where(prev.pos)[0]:
                    raise self.error("a rule name must start its line", prev.pos, "a newline before it")
                self.tokens[k - 1] = _XgToken("rule", prev.value, prev.pos)

    def escaped(self, pos: int, extra: dict[str, int]) -> tuple[int, int]:
        """One code point, UTF-8 or escaped (ParseNextUTF8OrEscaped) -> (code point, next position)."""
        text = self.text
        if text[pos] != "\\":
            return ord(text[pos]), pos + 1
        e = text[pos + 1 : pos + 2]
        if e in extra:
            return extra[e], pos + 2
        if e in _XG_ESCAPES:
            return _XG_ESCAPES[e], pos + 2
        if e == "x":
            end = pos + 2
            while end < len(text) and text[end] in "0123456789abcdefABCDEF":
                end += 1
            if end == pos + 2:
                raise self.error("expecting hex digits after \\x", pos, "\\x and hex digits")
            if end - pos - 2 > 8:
                return MAX_CODE_POINT + 1, end  # refused by scalar()
            return int(text[pos + 2 : end], 16), end
        if e in ("u", "U"):
            size = 4 if e == "u" else 8
            digits = text[pos + 2 : pos + 2 + size]
            if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(
                    f"expecting {size} hex digits after \\{e}", pos, f"\\{e} and {size} hex digits"
                )
            return int(digits, 16), pos + 2 + size
        raise self.error("invalid escape sequence", pos, "an escape xgrammar knows (its EBNF docs)")

    def string(self, pos: int) -> int:
        start = pos
        pos += 1
        cps: list[int] = []
        while pos < len(self.text) and self.text[pos] not in '"\r\n':
            cp_pos = pos
            cp, pos = self.escaped(pos, {})
            cps.append(self.base.scalar(cp, cp_pos))
        if self.text[pos : pos + 1] != '"':
            raise self.error("unterminated string literal", start, "a closing '\"' on the same line")
        self.tokens.append(_XgToken("str", tuple(cps), start))
        return pos + 1

    def char_class(self, pos: int) -> int:
        start = pos
        pos += 1
        negated = self.text[pos : pos + 1] == "^"
        if negated:
            pos += 1
        items: list[int | None] = []  # code points; None for an unescaped dash
        while pos < len(self.text) and self.text[pos] != "]":
            c = self.text[pos]
            if c in "\r\n":
                raise self.error("newline in a character class", pos, "'\\n' instead")
            if c == "-":
                items.append(None)
                pos += 1
            elif c == "\\" and self.text[pos + 1 : pos + 2] in ("d", "D", "s", "S", "w", "W"):
                raise self.error("class escape", pos, "explicit ranges (xgrammar refuses \\d \\s \\w)")
            else:
                cp_pos = pos
                cp, pos = self.escaped(pos, _XG_CLASS_ESCAPES)
                items.append(self.base.scalar(cp, cp_pos))
        if pos >= len(self.text):
            raise self.error("unterminated character class", start, "a closing ']'")
        ranges: list[tuple[int, int]] = []
        k = 0
        while k < len(items):  # EBNFParser::ParseCharClass
            lo = items[k]
            lo_cp = 0x2D if lo is None else lo
            if k + 2 < len(items) and items[k + 1] is None:
                hi = items[k + 2]
                hi_cp = 0x2D if hi is None else hi
                if lo_cp > hi_cp:
                    raise self.error(
                        "class range with lower bound above upper bound", start, "'[a-z]' with a <= z"
                    )
                ranges.append((lo_cp, hi_cp))
                k += 3
            else:
                ranges.append((lo_cp, lo_cp))
                k += 1
        self.tokens.append(_XgToken("class", Chars(tuple(ranges), negated), start))
        return pos + 1

    # -- parser
    def peek(self, delta: int = 0) -> _XgToken:
        return self.tokens[min(self.i + delta, len(self.tokens) - 1)]

    def expect(self, kind: str, expected: str) -> _XgToken:
        t = self.peek()
        if t.kind != kind:
            raise self.error(f"expecting {kind!r}", t.pos, expected)
        self.i += 1
        return t

    def parse(self) -> dict[str, Rule]:
        if "\0" in self.text:
            raise self.error("NUL character in grammar text", self.text.index("\0"), "no NUL")
        self.tokenize()
        names: set[str] = set()
        for t in self.tokens:
            if t.kind == "rule":
                if t.value in names:
                    raise SpecError(
                        f"rule {t.value!r} defined twice", self.base.at(t.pos), "one definition per rule"
                    )
                names.add(str(t.value))
        self.names = names
        while self.peek().kind != "eof":
            t = self.expect("rule", "a rule 'name ::= ...'")
            name = str(t.value)
            self.base.rule = name
            self.i += 1  # '::='
            body = self.choices(0)
            if self.peek().kind == "(=":
                la_pos = self.peek().pos
                self.i += 1
                la = self.lookaheads[name] = self.choices(1)
                if isinstance(
                    la, AltE
                ):  # grammar_functor.cc: "Choices in lookahead assertion are not supported"
                    raise self.error(
                        "choices in a lookahead assertion", la_pos, "a sequence (xgrammar refuses '|')"
                    )
                self.expect(")", "')' closing the lookahead assertion")
            line, col = self.base.where(t.pos)
            self.rules[name] = Rule(name, body, line, col)
        return self.rules

    def choices(self, depth: int) -> Expr:
        if depth > self.limits.nesting_depth:
            raise LimitExceeded(
                "nesting_depth", depth, self.limits.nesting_depth, self.base.at(self.peek().pos)
            )
        options = [self.sequence(depth)]
        while self.peek().kind == "|":
            self.i += 1
            options.append(self.sequence(depth))
        return options[0] if len(options) == 1 else AltE(tuple(options))

    def sequence(self, depth: int) -> Expr:
        items = [self.quantified(depth)]
        while self.peek().kind not in ("|", ")", "(=", "rule", "eof"):
            items.append(self.quantified(depth))
        return items[0] if len(items) == 1 else SeqE(tuple(items))

    def quantified(self, depth: int) -> Expr:
        e = self.element(depth)
        t = self.peek()
        if t.kind in ("*", "+", "?"):
            self.i += 1
            return RepE(e, *_POSTFIX[t.kind])
        if t.kind == "{":
            self.i += 1
            lo_t = self.expect("int", "'{m}', '{m,}' or '{m,n}'")
            lo: int = lo_t.value
            hi: int | None = lo
            if self.peek().kind == ",":
                self.i += 1
                nxt = self.peek()
                if nxt.kind == "}":
                    hi = None
                elif nxt.kind == "name" and nxt.value == "-1":
                    self.i += 1
                    hi = None
                else:
                    hi = self.expect("int", "an upper bound").value
                    if hi < lo:
                        raise self.error("repetition with max < min", lo_t.pos, "'{m,n}' with m <= n")
            self.expect("}", "'}' closing the repetition")
            return RepE(e, lo, hi) if hi != 0 else SeqE(())
        return e

    def element(self, depth: int) -> Expr:
        t = self.peek()
        self.i += 1
        if t.kind == "(":
            if self.peek().kind == ")":
                self.i += 1
                return SeqE(())
            body = self.choices(depth + 1)
            self.expect(")", "')'")
            return body
        if t.kind == "class":
            assert isinstance(t.value, Chars)
            return t.value
        if t.kind == "str":
            assert isinstance(t.value, tuple)
            return Lit(t.value) if t.value else SeqE(())
        if t.kind == "name":
            name = str(t.value)
            if name in _XG_MACROS:
                raise Unsupported(
                    "xgrammar-macro",
                    self.base.rule,
                    f"macro {name}(...) at {self.base.at(t.pos)}: token-level or engine-specific; the "
                    "reference reads plain EBNF only (write a Regex as rules)",
                )
            if name in ("true", "false"):
                raise self.error("a boolean is no element", t.pos, "a rule name, string, class or group")
            line, col = self.base.where(t.pos)
            ref = Ref(name, line, col)
            self.refs.append((ref, self.base.rule))
            return ref
        raise self.error("expecting an element", t.pos, "a rule name, string, class or group")


def read_xgrammar(text: str, limits: Limits) -> ParsedGrammar:
    """Read xgrammar EBNF text (syntax only: names are not resolved). Raises ``SpecError``."""
    reader = XgrammarReader(text, limits)
    return ParsedGrammar(reader.parse(), reader.refs, reader.lookaheads)
