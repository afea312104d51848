"""The llama.cpp GBNF reader: grammar text to the syntax tree (``_grammar_ast``).

:class:`GbnfReader` follows llama.cpp's ``llama_grammar_parser`` (``src/llama-grammar.cpp``:
``parse_rule`` / ``parse_alternates`` / ``parse_sequence`` / ``parse_char`` / ``parse_space``) function by
function, so layout rules are llama.cpp's: a rule ends at a newline that is not inside parentheses and
does not follow ``|`` or ``::=``; ``#`` comments run to the end of the line; a postfix operator
(``* + ? {m} {m,} {m,n}``) applies to the last symbol, a whole string literal being one symbol, and
operators chain (``x{2}*`` is ``(x{2})*``). Rule names are ``[a-zA-Z0-9_-]+`` (``_`` is
transformers-cfg's extension). Its positions, errors and scalar check also serve the xgrammar reader
(``_xgrammar_reader``).

Refused here (never approximated): ``[]`` / ``[^]`` (llama.cpp reads them as *no symbol at all*),
``{m,n}`` with ``n < m`` (llama.cpp silently reads ``{m}``), a count above ``Limits.repetition_count``
(llama.cpp's ``stoul``/``int`` would wrap), a rule defined twice (llama.cpp silently keeps the last), a
single code point that is a surrogate or beyond U+10FFFF in a literal or class, token terminals
(``<...>``, ``!<...>``), NUL characters, and nesting deeper than ``Limits.nesting_depth``.
"""

from __future__ import annotations

from collections.abc import Callable

from ._grammar_ast import MAX_CODE_POINT, AltE, Chars, Expr, Lit, ParsedGrammar, Ref, RepE, Rule, SeqE
from ._limits import Limits
from .errors import LimitExceeded, SpecError, Unsupported

__all__ = ["GbnfReader", "read_llama_cpp"]


def _is_word_char(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") or c == "-" or c == "_"


_SIMPLE_ESCAPES = {"t": 0x09, "r": 0x0D, "n": 0x0A, "\\": 0x5C, '"': 0x22, "[": 0x5B, "]": 0x5D}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class GbnfReader:
    """llama.cpp's grammar parser over ``text``; :meth:`parse` returns the rules and collects every
    reference in ``refs``. ``where``/``at``/``error``/``scalar`` are shared with the xgrammar reader."""

    def __init__(self, text: str, limits: Limits) -> None:
        self.text = text
        self.n = len(text)
        self.limits = limits
        self.rules: dict[str, Rule] = {}
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
                "repetition_count",
                self.text[pos : pos + 20] + "...",
                self.limits.repetition_count,
                self.at(pos),
            )
        value = int(self.text[pos:end])
        if value > self.limits.repetition_count:
            raise LimitExceeded("repetition_count", value, self.limits.repetition_count, self.at(pos))
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
    def parse(self) -> dict[str, Rule]:
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
        self.rules[name] = Rule(name, body, line, col)
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
            reader = self._SYMBOLS.get(c) or (GbnfReader.rule_ref if _is_word_char(c) else None)
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

    _SYMBOLS: dict[str, Callable[[GbnfReader, int, int], tuple[int, Expr | None]]] = {
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


def read_llama_cpp(text: str, limits: Limits) -> ParsedGrammar:
    """Read llama.cpp GBNF text (syntax only: names are not resolved). Raises ``SpecError``."""
    reader = GbnfReader(text, limits)
    return ParsedGrammar(reader.parse(), reader.refs, {})
