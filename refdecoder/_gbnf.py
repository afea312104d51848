"""GBNF front-end: llama.cpp's grammar syntax compiled to the grammar IR (docs/design.md §2).

Theory of operation
-------------------
1. **Parse** (:func:`parse_gbnf`). The reader follows llama.cpp's ``llama_grammar_parser``
   (``src/llama-grammar.cpp``: ``parse_rule`` / ``parse_alternates`` / ``parse_sequence`` /
   ``parse_char`` / ``parse_space``) function by function, so layout rules are llama.cpp's: a rule ends at
   a newline that is not inside parentheses and does not follow ``|`` or ``::=``; ``#`` comments run to the
   end of the line; a postfix operator (``* + ? {m} {m,} {m,n}``) applies to the last symbol, a whole
   string literal being one symbol, and operators chain (``x{2}*`` is ``(x{2})*``). Rule names are
   ``[a-zA-Z0-9_-]+`` (``_`` is transformers-cfg's extension). The AST is over code points.
2. **Check**: the root rule exists, every referenced rule is defined, no rule is defined twice.
   **Left recursion** (a rule that reaches itself through calls that may read nothing: llama.cpp's
   ``llama_grammar_detect_left_recursion``, which refuses it) is rewritten away with the language kept
   exactly (``_gbnf_rewrite``: Paull's algorithm with ε-separation), or refused there when the rewrite
   would be too large; ``_check_left_recursion`` then checks that none is left.
3. **Regular merging.** A sub-expression without references to recursive rules denotes a regular language;
   it is compiled to *one* minimal :class:`ByteDFA` (Thompson NFA over the parts' DFAs, subset
   construction, Moore minimization in ``ByteDFA.build``) as long as the subset construction stays under
   ``_MERGE_CAP`` states. This is exact: a ``Lex`` node's language is all the parser uses, and
   ``L(Lex(A·B)) = L(Seq(Lex A, Lex B))``. It only shrinks the parser's stack sets. Anything larger, or
   recursive, becomes ``Seq`` / ``Alt`` / ``Repeat`` nodes (``Repeat`` counts natively, so ``x{0,100000}``
   costs one node, never an expansion).

Dialects (``Gbnf.dialect``): ``"llama.cpp"`` (the default, above) and ``"xgrammar"`` (:class:`_XgReader`,
mirroring xgrammar 0.2.9's ``cpp/grammar_parser.cc``: token-based layout, C escapes, ``( )`` and ``""`` as
the empty string, one postfix operator per element, ``[^]`` any character, ``[z-a]`` an error) compile
to the same AST. xgrammar's lookahead assertions (``rule ::= body (= sequence)``) are decided by a
follow analysis (:class:`_LookaheadProof`): accepted where the grammar already implies them (the language
is then the one without them), else ``Unsupported("lookahead", rule, why)``; its macros (``Regex``,
``TagDispatch``, ``Token``, ...) and rule options (``name[max_tokens=..] ::=``) are refused.

Semantics: the language is over Unicode scalar values written as UTF-8. ``.`` is any scalar value; a
negated class ``[^...]`` is every scalar value not listed; a class range ``[a-b]`` with ``a > b`` is empty
(as llama.cpp compares ``a <= c <= b``); ranges are clipped to scalar values (surrogates excluded).

Refused (never approximated): ``[]`` / ``[^]`` (llama.cpp reads them as *no symbol at all*),
``{m,n}`` with ``n < m`` (llama.cpp silently reads ``{m}``), a rule defined twice (llama.cpp silently keeps
the last), a single code point that is a surrogate or beyond U+10FFFF in a literal or class, token
terminals (``<...>``, ``!<...>``), NUL characters, and left recursion whose rewrite would exceed
``_gbnf_rewrite.REWRITE_SYMBOLS``.

Accepted where llama.cpp refuses: left recursion (above), and ``x*`` / ``x+`` / ``x{m,}`` with a
nullable ``x`` (e.g. ``("a"?)*``).
llama.cpp rewrites ``x*`` to ``x' ::= x x' | ε``, which is left-recursive when ``x`` is nullable; the
language is still well defined and the ``Repeat`` node decides it exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import _cpset
from ._ir import Alt, GrammarBuilder, Lex, Network, Seq, find_cycle
from ._lexeme import ByteDFA, utf8_sequences
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import Deadline, Limits

__all__ = [
    "parse_gbnf",
    "GbnfRule",
    "Chars",
    "Lit",
    "Ref",
    "SeqE",
    "AltE",
    "RepE",
    "Expr",
]

MAX_CODE_POINT = 0x10FFFF
_MAX_REPEAT_COUNT = 1_000_000  # larger counts are refused (llama.cpp's stoul/int would wrap)
_MERGE_CAP = 1_500  # subset-construction states above which a regular piece is left structural
_HUGE = 1 << 40  # size of a non-regular piece

# -- AST ------------------------------------------------------------------------------------------
# Nodes compare by identity (eq=False): the compiler memoizes per node object.


@dataclass(frozen=True, eq=False)
class Chars:
    """One code point from ``ranges`` (inclusive, possibly empty when lo > hi), or not, if negated."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool


@dataclass(frozen=True, eq=False)
class Lit:
    """A string literal as code points (never empty: an empty literal is no symbol)."""

    cps: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Ref:
    name: str
    line: int
    col: int


@dataclass(frozen=True, eq=False)
class SeqE:
    items: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class AltE:
    options: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class RepE:
    item: Expr
    min: int
    max: int | None


Expr = Chars | Lit | Ref | SeqE | AltE | RepE


@dataclass(frozen=True)
class GbnfRule:
    name: str
    body: Expr
    line: int
    col: int


# -- parsing (mirrors llama-grammar.cpp) --------------------------------------------------------------


def _is_word_char(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") or c == "-" or c == "_"


_SIMPLE_ESCAPES = {"t": 0x09, "r": 0x0D, "n": 0x0A, "\\": 0x5C, '"': 0x22, "[": 0x5B, "]": 0x5D}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Reader:
    def __init__(self, text: str, limits: Limits) -> None:
        self.text = text
        self.n = len(text)
        self.limits = limits
        self.rules: dict[str, GbnfRule] = {}
        self.refs: list[tuple[Ref, str]] = []  # (reference, rule it occurs in)
        self.rule = ""
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    # -- positions and errors
    def where(self, pos: int) -> tuple[int, int]:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, pos - self._line_starts[lo] + 1

    def at(self, pos: int) -> str:
        line, col = self.where(pos)
        return f"line {line} col {col}" + (f" (rule {self.rule})" if self.rule else "")

    def error(self, what: str, pos: int, expected: str) -> SpecError:
        if pos < self.n:
            what = f"{what} (found {self.text[pos : pos + 12]!r})"
        else:
            what = f"{what} (found end of input)"
        return SpecError(what, self.at(pos), expected)

    def ch(self, pos: int) -> str:
        return self.text[pos] if pos < self.n else ""

    # -- llama.cpp's helpers
    def parse_space(self, pos: int, newline_ok: bool) -> int:
        text, n = self.text, self.n
        while pos < n:
            c = text[pos]
            if c == "#":
                while pos < n and text[pos] not in "\r\n":
                    pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                pos += 1
            else:
                break
        return pos

    def parse_name(self, pos: int) -> int:
        end = pos
        while end < self.n and _is_word_char(self.text[end]):
            end += 1
        if end == pos:
            raise self.error("expecting a rule name", pos, "a name of letters, digits, '-' or '_'")
        return end

    def parse_int(self, pos: int) -> tuple[int, int]:
        end = pos
        while end < self.n and "0" <= self.text[end] <= "9":
            end += 1
        if end == pos:
            raise self.error("expecting an integer", pos, "a decimal count")
        if end - pos > 18:  # before int(): no 4300-digit parse
            raise LimitExceeded(
                "repetition_count", self.text[pos : pos + 20] + "...", _MAX_REPEAT_COUNT, self.at(pos)
            )
        value = int(self.text[pos:end])
        if value > _MAX_REPEAT_COUNT:
            raise LimitExceeded("repetition_count", value, _MAX_REPEAT_COUNT, self.at(pos))
        return value, end

    def parse_char(self, pos: int) -> tuple[int, int]:
        """One (possibly escaped) code point; returns (code point, next position)."""
        c = self.ch(pos)
        if c == "":
            raise self.error("unexpected end of input", pos, "a character")
        if c != "\\":
            return ord(c), pos + 1
        e = self.ch(pos + 1)
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e], pos + 2
        if e in _HEX_ESCAPES:
            size = _HEX_ESCAPES[e]
            digits = self.text[pos + 2 : pos + 2 + size]
            if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(
                    f"expecting {size} hex digits after \\{e}", pos, f"\\{e} and {size} hex digits"
                )
            return int(digits, 16), pos + 2 + size
        raise self.error(
            "unknown escape", pos, 'one of \\n \\r \\t \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH'
        )

    def scalar(self, cp: int, pos: int) -> int:
        if cp > MAX_CODE_POINT or 0xD800 <= cp <= 0xDFFF:
            raise Unsupported(
                "gbnf-code-point",
                self.rule,
                f"code point {cp:#x} at {self.at(pos)} is not a Unicode scalar value, so no UTF-8 text "
                "contains it; remove it (ranges that merely span surrogates are fine)",
            )
        return cp

    # -- grammar structure
    def parse(self) -> dict[str, GbnfRule]:
        if "\0" in self.text:
            raise self.error(
                "NUL character in grammar text", self.text.index("\0"), "no NUL (llama.cpp stops there)"
            )
        pos = self.parse_space(0, True)
        while pos < self.n:
            pos = self.parse_rule(pos)
        return self.rules

    def parse_rule(self, pos: int) -> int:
        self.rule = ""
        name_end = self.parse_name(pos)
        name = self.text[pos:name_end]
        line, col = self.where(pos)
        self.rule = name
        if name in self.rules:
            first = self.rules[name]
            raise SpecError(
                f"rule {name!r} defined twice (first at line {first.line} col {first.col})",
                self.at(pos),
                "one definition per rule (llama.cpp would silently keep the last one)",
            )
        pos = self.parse_space(name_end, False)
        if self.text[pos : pos + 3] != "::=":
            raise self.error("expecting '::='", pos, "'name ::= alternatives'")
        pos = self.parse_space(pos + 3, True)
        pos, body = self.parse_alternates(pos, False, 0)
        self.rules[name] = GbnfRule(name, body, line, col)
        c = self.ch(pos)
        if c == "\r":
            pos += 2 if self.ch(pos + 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c != "":
            if c == ")":
                raise self.error("unbalanced ')'", pos, "newline or end of input after a rule")
            raise self.error("unexpected character", pos, "a symbol, '|', or a newline ending the rule")
        return self.parse_space(pos, True)

    def parse_alternates(self, pos: int, nested: bool, depth: int) -> tuple[int, Expr]:
        if depth > self.limits.nesting_depth:
            raise LimitExceeded("nesting_depth", depth, self.limits.nesting_depth, self.at(pos))
        pos, seq = self.parse_sequence(pos, nested, depth)
        options = [seq]
        while self.ch(pos) == "|":
            pos = self.parse_space(pos + 1, True)
            pos, seq = self.parse_sequence(pos, nested, depth)
            options.append(seq)
        return pos, options[0] if len(options) == 1 else AltE(tuple(options))

    def parse_sequence(self, pos: int, nested: bool, depth: int) -> tuple[int, Expr]:
        """Symbols and postfix operators up to ``|``, ``)``, or (outside parentheses) a newline."""
        items: list[Expr] = []
        # llama.cpp's ``last_sym_start == rule.size()``: is there a symbol a postfix operator can take?
        has_last = False
        postfix_depth = 0
        while pos < self.n:
            c = self.text[pos]
            if c in "*+?{":
                if not has_last:
                    raise self.error("no symbol before a repetition operator", pos, "a symbol before */+/?/{")
                postfix_depth += 1
                if depth + postfix_depth > self.limits.nesting_depth:
                    raise LimitExceeded(
                        "nesting_depth", depth + postfix_depth, self.limits.nesting_depth, self.at(pos)
                    )
                pos, lo, hi = self.repetition(pos, nested)
                last = items.pop()
                if hi == 0:
                    has_last = False  # llama.cpp drops the symbol: nothing is left to repeat
                else:
                    items.append(RepE(last, lo, hi))
                continue
            reader = self._SYMBOLS.get(c) or (_Reader.rule_ref if _is_word_char(c) else None)
            if reader is None:
                if c in "<!":
                    raise Unsupported(
                        "gbnf-token",
                        self.rule,
                        f"token terminal at {self.at(pos)}: token ids depend on a vocabulary; the reference "
                        "matches bytes only",
                    )
                break
            pos, symbol = reader(self, pos, depth)
            has_last = symbol is not None
            if symbol is not None:
                items.append(symbol)
            pos = self.parse_space(pos, nested)
            postfix_depth = 0
        return pos, items[0] if len(items) == 1 else SeqE(tuple(items))

    # One reader per symbol kind: (position at the symbol, depth) -> (position after it, symbol or None).
    def string_literal(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        start = pos
        pos += 1
        cps: list[int] = []
        while self.ch(pos) != '"':
            if self.ch(pos) == "":
                raise self.error("unterminated string literal", start, "a closing '\"'")
            cp_pos = pos
            cp, pos = self.parse_char(pos)
            cps.append(self.scalar(cp, cp_pos))
        return pos + 1, Lit(tuple(cps)) if cps else None  # "" is no symbol at all in llama.cpp

    def char_class(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        start = pos
        pos += 1
        negated = self.ch(pos) == "^"
        if negated:
            pos += 1
        ranges: list[tuple[int, int]] = []
        while self.ch(pos) != "]":
            if self.ch(pos) == "":
                raise self.error("unterminated character class", start, "a closing ']'")
            lo_pos = pos
            lo, pos = self.parse_char(pos)
            if self.ch(pos) == "-" and self.ch(pos + 1) not in ("]", ""):
                upper, pos = self.parse_char(pos + 1)
                ranges.append((lo, upper))  # lo > upper is an empty range; ends are clipped later
            elif self.ch(pos) == "-" and self.ch(pos + 1) == "":
                raise self.error("unexpected end of input", pos + 1, "a range end")
            else:
                lo = self.scalar(lo, lo_pos)
                ranges.append((lo, lo))
        if not ranges:
            raise Unsupported(
                "gbnf-empty-class",
                self.rule,
                f"'{self.text[start : pos + 1]}' at {self.at(start)}: llama.cpp reads an empty class as no "
                "symbol at all (matching the empty string), other engines as no character; "
                'write "" or remove it',
            )
        return pos + 1, Chars(tuple(ranges), negated)

    def rule_ref(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        end = self.parse_name(pos)
        line, col = self.where(pos)
        ref = Ref(self.text[pos:end], line, col)
        self.refs.append((ref, self.rule))
        return end, ref

    def group(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        open_pos = pos
        pos = self.parse_space(pos + 1, True)
        pos, body = self.parse_alternates(pos, True, depth + 1)
        if self.ch(pos) != ")":
            raise self.error("expecting ')'", pos, f"')' closing the '(' at {self.at(open_pos)}")
        return pos + 1, body

    def any_char(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        return pos + 1, Chars(((0, MAX_CODE_POINT),), False)

    _SYMBOLS: dict[str, Callable[[_Reader, int, int], tuple[int, Expr | None]]] = {
        '"': string_literal,
        "[": char_class,
        "(": group,
        ".": any_char,
    }

    def repetition(self, pos: int, nested: bool) -> tuple[int, int, int | None]:
        """``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}`` -> (position after it, min, max or None)."""
        c = self.text[pos]
        hi: int | None
        if c != "{":
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            return self.parse_space(pos + 1, nested), lo, hi
        op_pos = pos
        pos = self.parse_space(pos + 1, nested)
        lo, pos = self.parse_int(pos)
        pos = self.parse_space(pos, nested)
        if self.ch(pos) == "}":
            hi = lo
        elif self.ch(pos) == ",":
            pos = self.parse_space(pos + 1, nested)
            hi = None
            if "0" <= self.ch(pos) <= "9":
                hi, pos = self.parse_int(pos)
                pos = self.parse_space(pos, nested)
            if self.ch(pos) != "}":
                raise self.error("expecting '}'", pos, "'{m}', '{m,}' or '{m,n}'")
        else:
            raise self.error("expecting ',' or '}'", pos, "'{m}', '{m,}' or '{m,n}'")
        if hi is not None and hi < lo:
            raise Unsupported(
                "gbnf-repetition",
                self.rule,
                f"'{{{lo},{hi}}}' at {self.at(op_pos)} has max < min (llama.cpp silently reads "
                f"'{{{lo}}}'); write the count you mean",
            )
        return self.parse_space(pos + 1, nested), lo, hi


# -- xgrammar's dialect (mirrors xgrammar 0.2.9 cpp/grammar_parser.cc) -----------------------------------

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


class _XgReader:
    """xgrammar's EBNF (``EBNFLexer`` / ``EBNFParser``): a token stream in which whitespace and newlines
    are insignificant except that a rule name must start its line; names are ``[a-zA-Z_.-][a-zA-Z0-9_.-]*``;
    ``""`` and ``( )`` are the empty string; C escapes (``\\0 \\a \\b \\e \\f \\v \\' \\? \\/``, ``\\x`` with
    any number of hex digits); classes may escape ``^ $ \\ . * + ? ( ) [ ] { } | / -``, ``[^]`` is any
    character, ``[z-a]`` is an error; one postfix operator per element (``*``, ``+``, ``?``, ``{m}``,
    ``{m,}``, ``{m,n}``, ``{m,-1}``); a rule may end with a lookahead assertion ``(= sequence)``
    (``lookaheads``). Macros (``Regex(...)``, ``TagDispatch(...)``, ``Token(...)``, ...) and rule
    options (``name[max_tokens=..] ::=``) are refused: they are token- or engine-level features."""

    def __init__(self, text: str, limits: Limits) -> None:
        self.base = _Reader(text, limits)  # positions, errors, limits
        self.text = text
        self.limits = limits
        self.rules: dict[str, GbnfRule] = {}
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
                if end - pos > 18 or int(text[pos:end]) > _MAX_REPEAT_COUNT:
                    raise LimitExceeded(
                        "repetition_count", text[pos:end], _MAX_REPEAT_COUNT, self.base.at(pos)
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

    def parse(self) -> dict[str, GbnfRule]:
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
            self.rules[name] = GbnfRule(name, body, line, col)
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


def parse_gbnf(text: str, limits: Limits | None = None, dialect: str = "llama.cpp") -> dict[str, GbnfRule]:
    """Parse GBNF text into rules (syntax only; names are not resolved). Raises ``SpecError``."""
    return _parse(text, limits or Limits(), dialect)[0]


def _parse(
    text: str, limits: Limits, dialect: str = "llama.cpp"
) -> tuple[dict[str, GbnfRule], list[tuple[Ref, str]], dict[str, Expr]]:
    """(rules, every reference with the rule it occurs in, lookahead assertions by rule)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.schema_bytes:
        raise LimitExceeded("schema_bytes", size, limits.schema_bytes, "gbnf")
    if dialect == "xgrammar":
        xg = _XgReader(text, limits)
        return xg.parse(), xg.refs, xg.lookaheads
    reader = _Reader(text, limits)
    return reader.parse(), reader.refs, {}


# -- static checks ----------------------------------------------------------------------------------


def _nullable(e: Expr, rule_nullable: Callable[[str], bool]) -> bool:
    if isinstance(e, Lit):
        return False  # literals are never empty (an empty literal is no symbol)
    if isinstance(e, Chars):
        return False
    if isinstance(e, Ref):
        return rule_nullable(e.name)
    if isinstance(e, SeqE):
        return all(_nullable(i, rule_nullable) for i in e.items)
    if isinstance(e, AltE):
        return any(_nullable(o, rule_nullable) for o in e.options)
    return e.min == 0 or _nullable(e.item, rule_nullable)


def _left_refs(e: Expr, nullable: Callable[[Expr], bool], out: list[str]) -> None:
    """Rules ``e`` may call before reading anything (as ``_ir._left_calls``)."""
    if isinstance(e, Ref):
        out.append(e.name)
    elif isinstance(e, SeqE):
        for i in e.items:
            _left_refs(i, nullable, out)
            if not nullable(i):
                break
    elif isinstance(e, AltE):
        for o in e.options:
            _left_refs(o, nullable, out)
    elif isinstance(e, RepE):
        _left_refs(e.item, nullable, out)


def _refs(e: Expr, out: list[str]) -> None:
    if isinstance(e, Ref):
        out.append(e.name)
    elif isinstance(e, SeqE):
        for i in e.items:
            _refs(i, out)
    elif isinstance(e, AltE):
        for o in e.options:
            _refs(o, out)
    elif isinstance(e, RepE):
        _refs(e.item, out)


def nullable_rules(rules: dict[str, GbnfRule]) -> dict[str, bool]:
    """Which rules derive the empty string (least fixpoint)."""
    null = dict.fromkeys(rules, False)
    changed = True
    while changed:
        changed = False
        for name, r in rules.items():
            if not null[name] and _nullable(r.body, null.__getitem__):
                null[name] = changed = True
    return null


def left_call_graph(rules: dict[str, GbnfRule], null: dict[str, bool]) -> dict[str, list[str]]:
    """``A -> B`` when ``A`` may call ``B`` before reading a character."""

    def nullable(e: Expr) -> bool:
        return _nullable(e, null.__getitem__)

    graph: dict[str, list[str]] = {}
    for name, r in rules.items():
        calls: list[str] = []
        _left_refs(r.body, nullable, calls)
        graph[name] = list(dict.fromkeys(calls))
    return graph


def _check_left_recursion(rules: dict[str, GbnfRule]) -> None:
    graph = left_call_graph(rules, nullable_rules(rules))
    cycle = find_cycle(list(rules), graph.__getitem__)
    if cycle is not None:
        w = cycle[0]
        r = rules[w]
        raise Unsupported(
            "gbnf-left-recursion",
            w,
            f"rule {w!r} (line {r.line}) reaches itself without reading a character: "
            f"{' -> '.join(cycle)} after the left-recursion rewrite (a bug of refdecoder._gbnf_rewrite: "
            "please report it); rewrite it with repetition, e.g. 'expr ::= term (\"+\" term)*'",
        )


def _sccs(names: list[str], graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative; emitted dependencies-first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in names:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            succ = graph[v]
            if i < len(succ):
                work[-1] = (v, i + 1)
                w = succ[i]
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp: list[str] = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


# -- xgrammar's lookahead assertions: decided by a follow analysis ------------------------------------------
#
# ``rule ::= body (= la)`` says: whatever text follows a completion of ``rule``, up to the end of the
# text, must be consistent with ``L(la)·Σ*`` (a prefix of some string starting with a string of
# ``L(la)``). That is how xgrammar uses it: when it builds a mask it checks the bytes of a token that
# lie beyond the rule's end against ``la`` (``GrammarMatcherForTokenMaskCache::AdaptCacheWithLookahead``),
# and bytes that are not there are not checked. The reference never compiles the assertion: it accepts a
# grammar only where the assertion removes nothing — every continuation of every use of the rule is
# already consistent with it — and refuses otherwise. The proof (``_LookaheadProof.consistent``) walks
# the continuation (the rest of the using rule's body, then, through ``_Follow``, what follows that rule
# at each of its own uses) against ``la``: universally over the continuation's alternatives, existentially
# over ``la``'s. Every step is a language inclusion (below); a cycle through ``_Follow`` is assumed
# (coinduction: a string of the least fixpoint has a finite derivation, so it is checked through a
# finite unfolding); out of steps means no proof, hence a refusal.

_LOOKAHEAD_STEPS = 200_000


@dataclass(frozen=True)
class _Follow:
    """Whatever may follow a completion of ``rule`` (the end of the text included)."""

    rule: str


_Item = Expr | _Follow


class _NoProof(Exception):
    pass


def _flat(e: Expr) -> tuple[Expr, ...]:
    return e.items if isinstance(e, SeqE) else (e,)


def _same(a: Expr, b: Expr) -> bool:
    """Syntactic equality (hence equal languages)."""
    if a is b:
        return True
    if isinstance(a, Chars) and isinstance(b, Chars):
        return _scalar_ranges(a) == _scalar_ranges(b)
    if isinstance(a, Lit) and isinstance(b, Lit):
        return a.cps == b.cps
    if isinstance(a, Ref) and isinstance(b, Ref):
        return a.name == b.name
    if isinstance(a, SeqE) and isinstance(b, SeqE):
        return len(a.items) == len(b.items) and all(map(_same, a.items, b.items))
    if isinstance(a, AltE) and isinstance(b, AltE):
        return len(a.options) == len(b.options) and all(map(_same, a.options, b.options))
    if isinstance(a, RepE) and isinstance(b, RepE):
        return (a.min, a.max) == (b.min, b.max) and _same(a.item, b.item)
    return False


def _shape(e: Expr) -> object:
    """A hashable value equal for syntactically equal expressions (as ``_same``)."""
    if isinstance(e, Chars):
        return ("chars", _scalar_ranges(e))
    if isinstance(e, Lit):
        return ("lit", e.cps)
    if isinstance(e, Ref):
        return ("ref", e.name)
    if isinstance(e, SeqE):
        return ("seq", tuple(map(_shape, e.items)))
    if isinstance(e, AltE):
        return ("alt", tuple(map(_shape, e.options)))
    return ("rep", e.min, e.max, _shape(e.item))


def _within(small: Chars, big: Chars) -> bool:
    s, b = _scalar_ranges(small), _scalar_ranges(big)
    return _cpset.union(s, b) == b


class _LookaheadProof:
    def __init__(self, rules: dict[str, GbnfRule], root: str) -> None:
        self.rules = rules
        self.uses: dict[str, list[tuple[tuple[_Item, ...], str]]] = {name: [] for name in rules}
        reachable = [root]
        seen = {root}
        for name in reachable:
            self.walk(rules[name].body, (_Follow(name),), name)
            refs: list[str] = []
            _refs(rules[name].body, refs)
            for w in refs:
                if w not in seen:
                    seen.add(w)
                    reachable.append(w)
        self.reachable = seen
        self.steps = 0
        self.assumed: set[tuple[str, tuple[object, ...]]] = set()

    def walk(self, e: Expr, cont: tuple[_Item, ...], in_rule: str) -> None:
        """Record, for each reference in ``e``, the continuation after it."""
        if isinstance(e, Ref):
            self.uses[e.name].append((cont, in_rule))
        elif isinstance(e, SeqE):
            for i, item in enumerate(e.items):
                self.walk(item, e.items[i + 1 :] + cont, in_rule)
        elif isinstance(e, AltE):
            for o in e.options:
                self.walk(o, cont, in_rule)
        elif isinstance(e, RepE) and e.max != 0:
            # after one copy: up to max-1 more (fewer than min-1 more over-approximates: still sound)
            more = () if e.max == 1 else (RepE(e.item, 0, None if e.max is None else e.max - 1),)
            self.walk(e.item, more + cont, in_rule)

    def check(self, rule: str, la: Expr) -> None:
        """Raise ``Unsupported("lookahead", ...)`` unless every use of ``rule`` implies ``la``."""
        if rule not in self.reachable:
            return
        r = self.rules[rule]
        for cont, in_rule in self.uses[rule]:
            if in_rule not in self.reachable:
                continue
            self.steps = 0
            self.assumed = set()
            try:
                ok = self.consistent(cont, _flat(la))
            except _NoProof:
                ok = False
            if not ok:
                raise Unsupported(
                    "lookahead",
                    rule,
                    f"the lookahead assertion of rule {rule!r} (line {r.line}) restricts what may follow "
                    f"it, and the grammar does not imply it where rule {in_rule!r} "
                    f"(line {self.rules[in_rule].line}) uses it; the reference accepts a lookahead only "
                    "when the grammar already implies it (an assertion that removes text would make the "
                    "language depend on how it is tokenized)",
                )

    def consistent(self, seq: tuple[_Item, ...], la: tuple[Expr, ...]) -> bool:
        """Every text ``seq`` may stand for is consistent with ``L(la)·Σ*`` (a sufficient test)."""
        self.steps += 1
        if self.steps > _LOOKAHEAD_STEPS:
            raise _NoProof
        if not la or not seq:  # la satisfied; or the text ends here (prefixes are consistent)
            return True
        head, rest = seq[0], seq[1:]
        if isinstance(head, _Follow):
            key = (head.rule, tuple(map(_shape, la)))
            if key in self.assumed:
                return True
            self.assumed.add(key)
            return all(self.consistent(cont, la) for cont, w in self.uses[head.rule] if w in self.reachable)
        if _same(head, la[0]):
            return self.consistent(rest, la[1:])
        # the continuation's alternatives: all of them
        if isinstance(head, Ref):
            return self.consistent(_flat(self.rules[head.name].body) + rest, la)
        if isinstance(head, SeqE):
            return self.consistent(head.items + rest, la)
        if isinstance(head, AltE):
            return all(self.consistent((o, *rest), la) for o in head.options)
        if isinstance(head, RepE):
            if head.max == 0:
                return self.consistent(rest, la)
            more = (
                ()
                if head.max == 1
                else (RepE(head.item, max(head.min - 1, 0), None if head.max is None else head.max - 1),)
            )
            once = self.consistent((head.item, *more, *rest), la)
            return once and (head.min > 0 or self.consistent(rest, la))
        # a terminal against la's first piece
        first, la_rest = la[0], la[1:]
        if isinstance(first, Chars):
            if isinstance(head, Chars):
                return _within(head, first) and self.consistent(rest, la_rest)
            assert isinstance(head, Lit)
            return _cpset.contains(_scalar_ranges(first), head.cps[0]) and self.consistent(
                ((Lit(head.cps[1:]),) if len(head.cps) > 1 else ()) + rest, la_rest
            )
        if isinstance(first, Lit):
            if isinstance(head, Lit):
                n = min(len(head.cps), len(first.cps))
                if head.cps[:n] != first.cps[:n]:
                    return False
                head_left = ((Lit(head.cps[n:]),) if len(head.cps) > n else ()) + rest
                la_left = ((Lit(first.cps[n:]),) if len(first.cps) > n else ()) + la_rest
                return self.consistent(head_left, la_left)
            assert isinstance(head, Chars)
            single = _scalar_ranges(head)
            return (
                len(single) == 1
                and single[0][0] == single[0][1] == first.cps[0]
                and self.consistent(rest, ((Lit(first.cps[1:]),) if len(first.cps) > 1 else ()) + la_rest)
            )
        # la's alternatives: one of them must do
        if isinstance(first, Ref):
            return self.consistent(seq, _flat(self.rules[first.name].body) + la_rest)
        if isinstance(first, SeqE):
            return self.consistent(seq, first.items + la_rest)
        if isinstance(first, AltE):
            return any(self.consistent(seq, (o, *la_rest)) for o in first.options)
        assert isinstance(first, RepE)
        if first.max == 0:
            return self.consistent(seq, la_rest)
        more = (
            ()
            if first.max == 1
            else (RepE(first.item, max(first.min - 1, 0), None if first.max is None else first.max - 1),)
        )
        if first.min > 0:
            return self.consistent(seq, (first.item, *more, *la_rest))
        absorbed = (
            first.max is None
            and isinstance(first.item, Chars)
            and isinstance(head, Chars)
            and _within(head, first.item)
            and self.consistent(rest, la)
        )
        return (
            absorbed or self.consistent(seq, la_rest) or self.consistent(seq, (first.item, *more, *la_rest))
        )


def _check_lookaheads(rules: dict[str, GbnfRule], lookaheads: dict[str, Expr], root: str) -> None:
    proof = _LookaheadProof(rules, root)
    for rule, la in lookaheads.items():
        proof.check(rule, la)


# -- regular pieces: NFA over component DFAs, subset construction ----------------------------------------


class _TooBig(Exception):
    pass


class _Empty:
    """The empty language (no string at all); distinct from the empty string."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()
_NOT_REGULAR = object()
RegValue = ByteDFA | _Empty


class _Nfa:
    """Thompson-style NFA over bytes with epsilon moves; fragments are (entry, exit) pairs."""

    def __init__(self) -> None:
        self.trans: list[dict[int, list[int]]] = []
        self.eps: list[list[int]] = []

    def state(self) -> int:
        self.trans.append({})
        self.eps.append([])
        return len(self.trans) - 1

    def embed(self, rows: list[dict[int, int]], finals: Iterable[int]) -> tuple[int, int]:
        base = len(self.trans)
        for row in rows:
            self.trans.append({b: [base + t] for b, t in row.items()})
            self.eps.append([])
        end = self.state()
        for f in finals:
            self.eps[base + f].append(end)
        return base, end


def _determinize(nfa: _Nfa, start: int, final: int, cap: int, deadline: Deadline) -> RegValue:
    """Subset construction (Rabin & Scott 1959) over bytes, then ``ByteDFA.build`` minimizes."""
    eps = nfa.eps
    closures: dict[frozenset[int], frozenset[int]] = {}

    def closure(states: frozenset[int]) -> frozenset[int]:
        got = closures.get(states)
        if got is None:
            seen = set(states)
            todo = list(states)
            while todo:
                for t in eps[todo.pop()]:
                    if t not in seen:
                        seen.add(t)
                        todo.append(t)
            got = closures[states] = frozenset(seen)
        return got

    s0 = closure(frozenset((start,)))
    ids = {s0: 0}
    order = [s0]
    table: dict[int, dict[int, int]] = {}
    finals: list[int] = []
    i = 0
    while i < len(order):
        cur = order[i]
        if final in cur:
            finals.append(i)
        row: dict[int, set[int]] = {}
        for q in cur:
            for b, ts in nfa.trans[q].items():
                row.setdefault(b, set()).update(ts)
        out: dict[int, int] = {}
        by_targets: dict[frozenset[int], int] = {}
        for b, targets in row.items():
            key = frozenset(targets)
            j = by_targets.get(key)
            if j is None:
                nxt = closure(key)
                j = ids.get(nxt)
                if j is None:
                    j = ids[nxt] = len(order)
                    order.append(nxt)
                    if len(order) > cap:
                        raise _TooBig
                by_targets[key] = j
            out[b] = j
        table[i] = out
        i += 1
        if i % 256 == 0:
            deadline.check("gbnf subset construction")
    if not finals or ByteDFA.is_empty_language(table, 0, finals):
        return EMPTY
    return ByteDFA.build(table, 0, finals)


class _Regular:
    """Thompson NFAs over AST pieces whose leaves are lexeme DFAs; one subset construction per piece."""

    def __init__(self, deadline: Deadline, cap: int, leaf: Callable[[Expr], RegValue]) -> None:
        self.deadline = deadline
        self.cap = cap
        self.leaf = leaf  # the DFA (or EMPTY) of a Chars / Lit / regular Ref
        self._rows: dict[object, tuple[list[dict[int, int]], frozenset[int]]] = {}
        self._classes: dict[tuple[tuple[int, int], ...], RegValue] = {}

    def rows(self, d: ByteDFA) -> tuple[list[dict[int, int]], frozenset[int]]:
        got = self._rows.get(d.key)
        if got is None:
            t = d.transitions()
            got = self._rows[d.key] = ([t[s] for s in range(d.num_states)], d.finals)
        return got

    def chars(self, c: Chars) -> RegValue:
        ranges = _scalar_ranges(c)
        got = self._classes.get(ranges)
        if got is None:
            nfa = _Nfa()
            start, end = nfa.state(), nfa.state()
            for lo, hi in ranges:
                for seq in utf8_sequences(lo, hi):
                    prev = start
                    for k, (blo, bhi) in enumerate(seq):
                        nxt = end if k == len(seq) - 1 else nfa.state()
                        for byte in range(blo, bhi + 1):
                            nfa.trans[prev].setdefault(byte, []).append(nxt)
                        prev = nxt
            got = self._classes[ranges] = _determinize(nfa, start, end, 1 << 30, self.deadline)
        return got

    def frag(self, nfa: _Nfa, e: Expr) -> tuple[int, int]:
        """Thompson's construction (Thompson 1968): a fragment with one entry and one exit."""
        if isinstance(e, Lit):
            start = cur = nfa.state()
            for byte in _utf8(e):
                nxt = nfa.state()
                nfa.trans[cur][byte] = [nxt]
                cur = nxt
            return start, cur
        if isinstance(e, (Chars, Ref)):
            v = self.leaf(e)
            if isinstance(v, _Empty):
                return nfa.state(), nfa.state()  # no path from entry to exit
            rows, finals = self.rows(v)
            return nfa.embed(rows, finals)
        if isinstance(e, SeqE):
            start = cur = nfa.state()
            for item in e.items:
                s, t = self.frag(nfa, item)
                nfa.eps[cur].append(s)
                cur = t
            return start, cur
        if isinstance(e, AltE):
            start, end = nfa.state(), nfa.state()
            for o in e.options:
                s, t = self.frag(nfa, o)
                nfa.eps[start].append(s)
                nfa.eps[t].append(end)
            return start, end
        start = cur = nfa.state()
        for _ in range(e.min):
            s, t = self.frag(nfa, e.item)
            nfa.eps[cur].append(s)
            cur = t
        end = nfa.state()
        nfa.eps[cur].append(end)
        if e.max is None:  # item* : loop back through one more copy
            s, t = self.frag(nfa, e.item)
            nfa.eps[cur].append(s)
            nfa.eps[t].append(cur)
        else:  # item (item (item)?)? ... : every further copy may stop
            for _ in range(e.max - e.min):
                s, t = self.frag(nfa, e.item)
                nfa.eps[cur].append(s)
                nfa.eps[t].append(end)
                cur = t
        return start, end

    def dfa(self, e: Expr) -> RegValue:
        """The minimal DFA of ``e`` (all of whose references are regular); ``_TooBig`` over the cap."""
        nfa = _Nfa()
        s, t = self.frag(nfa, e)
        return _determinize(nfa, s, t, self.cap, self.deadline)


def _utf8(e: Lit) -> bytes:
    return "".join(map(chr, e.cps)).encode("utf-8")


def _scalar_ranges(c: Chars) -> tuple[tuple[int, int], ...]:
    """The class as a normalized set of scalar values (negation applied; see ``_cpset``)."""
    ranges = _cpset.normalize(c.ranges)
    return _cpset.complement(ranges) if c.negated else ranges


# -- the compiler ------------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, rules: dict[str, GbnfRule], limits: Limits, merge: bool) -> None:
        self.rules = rules
        self.limits = limits
        self.merge = merge
        self.deadline = Deadline(limits.compile_seconds)
        self.reg = _Regular(self.deadline, min(_MERGE_CAP, limits.automaton_states), self.leaf)
        self.builder = GrammarBuilder()
        self.rule_value: dict[str, object] = {}  # RegValue, or _NOT_REGULAR
        self.rule_nodes: dict[str, int] = {}
        self.pending: list[str] = []
        self._reg_memo: dict[int, object] = {}
        self._size_memo: dict[int, int] = {}
        self._node_memo: dict[int, int] = {}
        self._unproductive: int | None = None

    # -- regular values
    def leaf(self, e: Expr) -> RegValue:
        if isinstance(e, Chars):
            return self.reg.chars(e)
        if isinstance(e, Lit):
            return ByteDFA.literal(_utf8(e))
        assert isinstance(e, Ref)
        v = self.rule_value[e.name]
        assert isinstance(v, (ByteDFA, _Empty))
        return v

    def size(self, e: Expr) -> int:
        """An upper bound on the Thompson NFA's states; ``_HUGE`` when ``e`` is not regular."""
        got = self._size_memo.get(id(e))
        if got is None:
            got = self._size_memo[id(e)] = min(self._size(e), _HUGE)
        return got

    def _size(self, e: Expr) -> int:
        if isinstance(e, Lit):
            return len(_utf8(e)) + 1
        if isinstance(e, Chars) or (isinstance(e, Ref) and self.rule_value[e.name] is not _NOT_REGULAR):
            v = self.leaf(e)
            return v.num_states + 1 if isinstance(v, ByteDFA) else 2
        if isinstance(e, Ref):
            return _HUGE
        if isinstance(e, SeqE):
            return sum(self.size(i) for i in e.items) + 1
        if isinstance(e, AltE):
            return sum(self.size(o) for o in e.options) + 2
        copies = e.min + (1 if e.max is None else e.max - e.min)
        return max(copies, 1) * self.size(e.item) + 2

    def regular(self, e: Expr) -> object:
        """``e``'s language as a DFA or EMPTY, or ``_NOT_REGULAR`` (recursive, too big, or merging off)."""
        got = self._reg_memo.get(id(e))
        if got is None:
            got = self._reg_memo[id(e)] = self._regular(e)
        return got

    def _regular(self, e: Expr) -> object:
        if isinstance(e, (Chars, Lit)):
            return self.leaf(e)
        if isinstance(e, Ref):
            return self.rule_value[e.name]
        if not self.merge or self.size(e) > 4 * self.reg.cap:
            return _NOT_REGULAR
        try:
            return self.reg.dfa(e)
        except _TooBig:
            return _NOT_REGULAR

    # -- nodes
    def unproductive(self) -> int:
        if self._unproductive is None:
            self._unproductive = self.builder.add(_alt_none())
        return self._unproductive

    def value_node(self, v: object) -> int:
        if v is EMPTY:
            return self.unproductive()
        assert isinstance(v, ByteDFA)
        return self.builder.lex(v)

    def node(self, e: Expr) -> int:
        got = self._node_memo.get(id(e))
        if got is None:
            got = self._node_memo[id(e)] = self._node(e)
        return got

    def _node(self, e: Expr) -> int:
        v = self.regular(e)
        if v is not _NOT_REGULAR:
            return self.value_node(v)
        b = self.builder
        if isinstance(e, Ref):
            return self.rule_node(e.name)
        if isinstance(e, SeqE):
            items: list[int] = []
            run: list[Expr] = []
            for item in e.items:
                if self.size(item) < _HUGE:
                    run.append(item)
                else:
                    items.extend(self.merged_runs(run, SeqE))
                    run = []
                    items.append(self.node(item))
            items.extend(self.merged_runs(run, SeqE))
            return b.seq(items)
        if isinstance(e, AltE):
            options = self.merged_runs([o for o in e.options if self.size(o) < _HUGE], AltE)
            options += [self.node(o) for o in e.options if self.size(o) >= _HUGE]
            return b.alt(options) if options else self.unproductive()
        assert isinstance(e, RepE)
        return b.repeat(self.node(e.item), e.min, e.max)

    def merged_runs(self, run: list[Expr], kind: Callable[[tuple[Expr, ...]], Expr]) -> list[int]:
        """Nodes for consecutive regular pieces, combined (by ``SeqE`` or ``AltE``) into as few DFAs as
        fit under the cap: batches by size estimate, halved while a batch's DFA is still too big."""
        if not self.merge:
            return [self.node(e) for e in run]
        batches: list[list[Expr]] = []
        size = 0
        for e in run:
            if not batches or size + self.size(e) > 4 * self.reg.cap:
                batches.append([])
                size = 0
            batches[-1].append(e)
            size += self.size(e)
        out: list[int] = []
        while batches:
            batch = batches.pop(0)
            if len(batch) == 1:
                out.append(self.node(batch[0]))
                continue
            try:
                v = self.reg.dfa(kind(tuple(batch)))
            except _TooBig:
                half = len(batch) // 2
                batches[:0] = [batch[:half], batch[half:]]
                continue
            out.append(self.value_node(v))
        return out

    def rule_node(self, name: str) -> int:
        nid = self.rule_nodes.get(name)
        if nid is None:
            v = self.rule_value[name]
            if v is not _NOT_REGULAR:
                nid = self.value_node(v)
            else:
                nid = self.builder.reserve()
                self.pending.append(name)
            self.rule_nodes[name] = nid
        return nid

    # -- driver
    def compile(self, root: str) -> Network:
        rules = self.rules
        graph: dict[str, list[str]] = {}
        for name, r in rules.items():
            refs: list[str] = []
            _refs(r.body, refs)
            graph[name] = list(dict.fromkeys(refs))
        reachable = [root]
        seen = {root}
        for name in reachable:
            for w in graph[name]:
                if w not in seen:
                    seen.add(w)
                    reachable.append(w)
        for comp in _sccs(reachable, graph):
            self.deadline.check("gbnf rules")
            recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
            for name in comp:
                if recursive or any(self.rule_value[w] is _NOT_REGULAR for w in graph[name]):
                    self.rule_value[name] = _NOT_REGULAR
                else:
                    self.rule_value[name] = self.regular(rules[name].body)
        root_node = self.rule_node(root)
        while self.pending:
            self.deadline.check("gbnf rules")
            name = self.pending.pop()
            body = self.node(rules[name].body)
            self.builder.define(self.rule_nodes[name], _call(body))
        try:
            network = self.builder.finish(root_node)
        except Unsupported as e:  # the AST check refuses first; this is a safety net
            raise Unsupported("gbnf-left-recursion", root, e.reason) from e
        self.check_size(network)
        return network

    def check_size(self, network: Network) -> None:
        keys: dict[object, int] = {}
        for n in network.nodes:
            if isinstance(n, Lex) and isinstance(n.lexeme, ByteDFA):
                keys[n.lexeme.key] = n.lexeme.num_states
        total = sum(keys.values()) + len(network.nodes)
        if total > self.limits.automaton_states:
            raise LimitExceeded("automaton_states", total, self.limits.automaton_states, "gbnf")


def _alt_none() -> Alt:
    return Alt(())


def _call(body: int) -> Seq:
    return Seq((body,))
