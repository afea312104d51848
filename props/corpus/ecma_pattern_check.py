"""An independent validator of ECMAScript regular-expression *patterns* (the text between the slashes).

It shares no code with ``refdecoder``: it is the oracle that checks the reference's reading of JSON
Schema's ``format: "regex"`` (validation 2020-12 §7.3.8: "a regular expression, which SHOULD be valid
according to the ECMA-262 regular expression dialect"), ``refdecoder._ecma_pattern``. The reading,
exactly:

* ECMA-262 11th edition (ES2020), §21.2.1 "Patterns" (the grammar) and §21.2.1.1 "Static Semantics: Early
  Errors", **without** Annex B (B.1.4, the web-compatibility extensions), in non-unicode mode (``[~U]``).
  Per §21.2.3.2.2 the pattern is parsed as ``Pattern[~U, ~N]`` and re-parsed as ``Pattern[~U, +N]`` when it
  contains a GroupName; without Annex B the only difference is ``AtomEscape :: [+N] k GroupName``, so
  ``\\k`` is valid exactly as ``\\k<Name>`` naming a group of the pattern (before or after it).
* The pattern is a sequence of UTF-16 code units (§21.2.1: in a non-unicode pattern an astral code point
  is its two surrogates): ``[😀-😂]`` ranges from the trail surrogate of 😀 to the lead surrogate of 😂,
  out of order. A lone surrogate of the Python ``str`` is one unit.
* Group names (RegExpIdentifierName) are read per *code point*, as ES2021 clarified (tc39/ecma262#1869):
  a literal surrogate pair, or a ``\\uLEAD\\uTRAIL`` escape pair, stands for its astral code point. The
  escape is ``\\u`` Hex4Digits only (``\\u{...}`` is ``[+U]``). Names are equal when their StringValues are.
* UnicodeIDStart / UnicodeIDContinue are the ``regex`` package's ``\\p{ID_Start}`` / ``\\p{ID_Continue}``,
  restricted to the code points assigned (General_Category not ``Cn``) in Python's ``unicodedata``.
  The package's Unicode is newer than the reference's pinned 14.0: the code points whose identifier
  properties changed since (``tests/test_ecma_pattern.py`` lists them, e.g. ZWNJ and ZWJ, which
  joined ID_Continue in 15.1) are read differently by the two, and the comparisons leave them out.

The early errors checked (§21.2.1.1): NcapturingParens ≥ 2³² − 1; duplicate group names; ``{n,m}`` with n > m (exact integers, any
number of digits); a DecimalEscape greater than the number of capturing groups of the whole pattern; a
``\\k<Name>`` with no such group; a class range with a class escape (``\\d`` ...) at either end, or with
CharacterValue(X) > CharacterValue(Y); the SV of a ``\\u`` escape in a group name not being an identifier
start / part.

The parser is recursive descent over the code units in which the Disjunction → Term → Atom → group
recursion is replaced by an explicit stack of open groups, so depth costs no Python stack.

API: :func:`ecma_pattern_valid` and :func:`ecma_pattern_error` (``None`` when valid, else a short message
naming the offset in code units and what was expected).
"""

from __future__ import annotations

import bisect
import unicodedata
from dataclasses import dataclass, field
from functools import cache

import regex

__all__ = ["ecma_pattern_valid", "ecma_pattern_error"]

_MAX_CP = 0x110000
_DOLLAR, _UNDERSCORE, _ZWNJ, _ZWJ = 0x24, 0x5F, 0x200C, 0x200D

# SyntaxCharacter :: one of ^ $ \ . * + ? ( ) [ ] { } |
_SYNTAX = frozenset(map(ord, "^$\\.*+?()[]{}|"))
_CONTROL_ESCAPE = {ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("v"): 0x0B}
_CLASS_ESCAPE = frozenset(map(ord, "dDsSwW"))
_DIGITS = frozenset(range(0x30, 0x3A))
_HEX = frozenset(map(ord, "0123456789abcdefABCDEF"))
_LETTERS = frozenset(list(range(0x41, 0x5B)) + list(range(0x61, 0x7B)))


# -- Unicode identifier properties ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Intervals:
    """A set of code points as sorted disjoint closed intervals."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def __contains__(self, cp: object) -> bool:
        if not isinstance(cp, int):
            return False
        i = bisect.bisect_right(self.starts, cp) - 1
        return i >= 0 and cp <= self.ends[i]


def _assigned(cp: int) -> bool:
    return unicodedata.category(chr(cp)) != "Cn"


@cache
def _property(name: str) -> _Intervals:
    """The code points with binary property ``name`` (per ``regex``) that ``unicodedata`` has assigned."""
    every = "".join(chr(cp) for cp in range(_MAX_CP) if not 0xD800 <= cp <= 0xDFFF)
    starts: list[int] = []
    ends: list[int] = []
    for m in regex.finditer(r"\p{" + name + "}+", every):
        for ch in m.group():
            cp = ord(ch)
            if not _assigned(cp):
                continue
            if ends and ends[-1] == cp - 1:
                ends[-1] = cp
            else:
                starts.append(cp)
                ends.append(cp)
    return _Intervals(tuple(starts), tuple(ends))


def _id_start(cp: int) -> bool:
    """UnicodeIDStart."""
    return cp in _property("ID_Start")


def _id_continue(cp: int) -> bool:
    """UnicodeIDContinue."""
    return cp in _property("ID_Continue")


# -- the parser -----------------------------------------------------------------------------------------


class _PatternError(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(offset, message)
        self.offset = offset
        self.message = message


def _utf16(pattern: str) -> list[int]:
    """The UTF-16 code units of ``pattern``; a lone surrogate stays one unit."""
    data = pattern.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _is_lead(u: int) -> bool:
    return 0xD800 <= u <= 0xDBFF


def _is_trail(u: int) -> bool:
    return 0xDC00 <= u <= 0xDFFF


def _greater(a: str, b: str) -> bool:
    """``a > b`` for canonical decimal numerals (no leading zeros)."""
    return (len(a), a) > (len(b), b)


def _short(digits: str) -> str:
    return digits if len(digits) <= 24 else f"{digits[:10]}…({len(digits)} digits)"


# Kinds of open group on the explicit stack.
_CAPTURE, _NONCAPTURE, _LOOKAHEAD, _LOOKBEHIND = range(4)
_QUANTIFIABLE = (_CAPTURE, _NONCAPTURE)


@dataclass
class _Parser:
    units: list[int]
    pos: int = 0
    n_capturing: int = 0  # NcapturingParens
    group_names: dict[str, int] = field(default_factory=dict)  # StringValue -> offset of its GroupName
    backref_names: list[tuple[str, int]] = field(default_factory=list)  # (StringValue, offset of \k)
    max_decimal: tuple[str, int] = ("0", 0)  # (largest DecimalEscape MV, canonical decimal; its offset)

    # -- low level

    def peek(self, k: int = 0) -> int:
        """The code unit at ``pos + k``, or -1 past the end."""
        i = self.pos + k
        return self.units[i] if i < len(self.units) else -1

    def fail(self, message: str, offset: int | None = None) -> _PatternError:
        return _PatternError(self.pos if offset is None else offset, message)

    def expect(self, ch: str) -> None:
        if self.peek() != ord(ch):
            raise self.fail(f"expected {ch!r}")
        self.pos += 1

    def hex_digits(self, count: int) -> int:
        """``count`` HexDigits (Hex4Digits / HexEscapeSequence), their MV."""
        value = 0
        for _ in range(count):
            u = self.peek()
            if u not in _HEX:
                raise self.fail(f"expected a hex digit ({count} after the escape letter)")
            value = value * 16 + int(chr(u), 16)
            self.pos += 1
        return value

    def decimal_digits(self) -> str | None:
        """DecimalDigits, greedily, as their MV in canonical decimal (no leading zeros; exact, and not
        through ``int``, whose string conversion is bounded); ``None`` (nothing consumed) without a digit."""
        start = self.pos
        while self.peek() in _DIGITS:
            self.pos += 1
        if self.pos == start:
            return None
        return "".join(map(chr, self.units[start : self.pos])).lstrip("0") or "0"

    # -- Pattern :: Disjunction (iterative: the open groups are an explicit stack)

    def pattern(self) -> None:
        stack: list[tuple[int, int]] = []  # (kind, offset of its "(")
        while True:
            u = self.peek()
            if u == -1:
                if stack:
                    raise self.fail(f"expected ')' closing the group opened at {stack[-1][1]}")
                break
            if u == ord("|"):
                self.pos += 1
            elif u == ord(")"):
                if not stack:
                    raise self.fail("unmatched ')'")
                kind, _ = stack.pop()
                self.pos += 1
                if kind in _QUANTIFIABLE:
                    self.quantifier()
            elif u == ord("("):
                at = self.pos
                stack.append((self.group_open(), at))
            elif self.term():
                self.quantifier()
        self.early_errors()

    def group_open(self) -> int:
        """``(`` GroupSpecifier, ``(?:``, ``(?=``, ``(?!``, ``(?<=``, ``(?<!``: consume it, return its kind."""
        self.pos += 1
        if self.peek() != ord("?"):
            self.n_capturing += 1
            return _CAPTURE
        self.pos += 1
        u = self.peek()
        if u == ord(":"):
            self.pos += 1
            return _NONCAPTURE
        if u in (ord("="), ord("!")):
            self.pos += 1
            return _LOOKAHEAD
        if u == ord("<"):
            if self.peek(1) in (ord("="), ord("!")):
                self.pos += 2
                return _LOOKBEHIND
            offset = self.pos
            name = self.group_name()
            if name in self.group_names:
                raise self.fail(
                    f"duplicate group name {name!r} (first named at {self.group_names[name]})", offset
                )
            self.group_names[name] = offset
            self.n_capturing += 1
            return _CAPTURE
        raise self.fail("expected ':', '=', '!', '<=', '<!' or '<Name>' after '(?'")

    def term(self) -> bool:
        """One Term other than a group: consume it; return whether it is a (quantifiable) Atom."""
        u = self.peek()
        if u in (ord("^"), ord("$")):
            self.pos += 1
            return False
        if u == ord("."):
            self.pos += 1
            return True
        if u == ord("["):
            self.character_class()
            return True
        if u == ord("\\"):
            return self.atom_escape()
        if u in (ord("*"), ord("+"), ord("?"), ord("{")):
            raise self.fail(f"nothing to repeat: {chr(u)!r} must follow an atom")
        if u in _SYNTAX:  # "]" and "}" (the others are handled above or by the caller)
            raise self.fail(f"expected a pattern character, not the syntax character {chr(u)!r}")
        self.pos += 1  # PatternCharacter
        return True

    def quantifier(self) -> None:
        """An optional Quantifier after an Atom."""
        u = self.peek()
        if u in (ord("*"), ord("+"), ord("?")):
            self.pos += 1
        elif u == ord("{"):
            start = self.pos
            self.pos += 1
            low = self.decimal_digits()
            if low is None:
                raise self.fail("expected a digit in the quantifier '{n}', '{n,}' or '{n,m}'")
            high: str | None = low
            if self.peek() == ord(","):
                self.pos += 1
                high = self.decimal_digits()
            self.expect("}")
            if high is not None and _greater(low, high):
                raise self.fail(f"quantifier {{{_short(low)},{_short(high)}}}: numbers out of order", start)
        else:
            return
        if self.peek() == ord("?"):
            self.pos += 1

    def atom_escape(self) -> bool:
        """``\\`` AtomEscape, or the assertions ``\\b`` / ``\\B``; return whether it is an Atom."""
        start = self.pos
        self.pos += 1
        u = self.peek()
        if u in (ord("b"), ord("B")):
            self.pos += 1
            return False
        if u in _DIGITS and u != ord("0"):  # DecimalEscape :: NonZeroDigit DecimalDigits?
            value = self.decimal_digits()
            assert value is not None
            if _greater(value, self.max_decimal[0]):
                self.max_decimal = (value, start)
            return True
        if u in _CLASS_ESCAPE:
            self.pos += 1
            return True
        if u == ord("k"):  # [+N] k GroupName
            self.pos += 1
            if self.peek() != ord("<"):
                raise self.fail("expected '<Name>' after '\\k'")
            self.backref_names.append((self.group_name(), start))
            return True
        self.character_escape()
        return True

    def character_escape(self) -> int:
        """CharacterEscape[~U] (after the backslash): consume it and return its CharacterValue."""
        u = self.peek()
        if u == -1:
            raise self.fail("expected an escape after '\\'")
        if u in _CONTROL_ESCAPE:
            self.pos += 1
            return _CONTROL_ESCAPE[u]
        if u == ord("c"):
            if self.peek(1) not in _LETTERS:
                raise self.fail("expected an ASCII letter after '\\c'", self.pos + 1)
            self.pos += 2
            return self.units[self.pos - 1] % 32
        if u == ord("0"):
            if self.peek(1) in _DIGITS:
                raise self.fail("'\\0' must not be followed by a decimal digit", self.pos + 1)
            self.pos += 1
            return 0
        if u == ord("x"):
            self.pos += 1
            return self.hex_digits(2)
        if u == ord("u"):
            self.pos += 1
            return self.hex_digits(4)
        # IdentityEscape[~U] :: SourceCharacter but not UnicodeIDContinue (a surrogate unit never is)
        if _id_continue(u):
            raise self.fail(f"invalid identity escape '\\{chr(u)}' (an identifier character)")
        self.pos += 1
        return u

    # -- CharacterClass

    def character_class(self) -> None:
        start = self.pos
        self.pos += 1
        if self.peek() == ord("^"):
            self.pos += 1
        while True:
            u = self.peek()
            if u == -1:
                raise self.fail(f"expected ']' closing the class opened at {start}")
            if u == ord("]"):
                self.pos += 1
                return
            left_at = self.pos
            left = self.class_atom()
            if self.peek() == ord("-") and self.peek(1) not in (ord("]"), -1):
                self.pos += 1
                right_at = self.pos
                right = self.class_atom()
                if left is None or right is None:
                    at = left_at if left is None else right_at
                    raise self.fail("a class escape cannot be an end of a class range", at)
                if left > right:
                    raise self.fail(
                        f"class range out of order: {left:#06x} > {right:#06x} (code units)", left_at
                    )

    def class_atom(self) -> int | None:
        """ClassAtom: its CharacterValue, or ``None`` for a CharacterClassEscape (IsCharacterClass)."""
        u = self.peek()
        if u != ord("\\"):
            self.pos += 1
            return u
        self.pos += 1
        u = self.peek()
        if u == ord("b"):
            self.pos += 1
            return 0x08
        if u in _CLASS_ESCAPE:
            self.pos += 1
            return None
        return self.character_escape()

    # -- GroupName :: < RegExpIdentifierName >

    def group_name(self) -> str:
        """``<`` RegExpIdentifierName ``>``: consume it and return the name's StringValue."""
        self.expect("<")
        cps: list[int] = []
        while True:
            at = self.pos
            u = self.peek()
            if u == ord(">") and cps:
                self.pos += 1
                return "".join(map(chr, cps))
            if u == -1:
                raise self.fail("expected '>' closing the group name")
            cp = self.identifier_code_point()
            if cps:
                ok = _id_continue(cp) or cp in (_DOLLAR, _ZWNJ, _ZWJ)
                what = "identifier part"
            else:
                ok = _id_start(cp) or cp in (_DOLLAR, _UNDERSCORE)
                what = "identifier start"
            if not ok:
                shown = f"U+{cp:04X}" if 0xD800 <= cp <= 0xDFFF else repr(chr(cp))
                raise self.fail(f"expected a group-name {what}, not {shown}", at)
            cps.append(cp)

    def identifier_code_point(self) -> int:
        """One code point of a RegExpIdentifierName: a literal one or a ``\\u`` Hex4Digits escape."""
        u = self.peek()
        if u == ord("\\"):
            self.pos += 1
            self.expect("u")
            cp = self.hex_digits(4)
            if (
                _is_lead(cp)
                and self.peek() == ord("\\")
                and self.peek(1) == ord("u")
                and all(self.peek(k) in _HEX for k in range(2, 6))
            ):
                trail = int("".join(chr(self.peek(k)) for k in range(2, 6)), 16)
                if _is_trail(trail):
                    self.pos += 6
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (trail - 0xDC00)
            return cp
        self.pos += 1
        if _is_lead(u) and _is_trail(self.peek()):
            trail = self.peek()
            self.pos += 1
            return 0x10000 + ((u - 0xD800) << 10) + (trail - 0xDC00)
        return u

    # -- §21.2.1.1 early errors that need the whole pattern

    def early_errors(self) -> None:
        if self.n_capturing >= 2**32 - 1:
            raise self.fail("too many capturing groups (NcapturingParens ≥ 2³² − 1)", 0)
        value, offset = self.max_decimal
        if _greater(value, str(self.n_capturing)):
            raise self.fail(
                f"backreference \\{_short(value)} but the pattern has {self.n_capturing} capturing group(s)",
                offset,
            )
        for name, at in self.backref_names:
            if name not in self.group_names:
                raise self.fail(f"expected a group named {name!r} for '\\k<{name}>'", at)


def ecma_pattern_error(pattern: str) -> str | None:
    """``None`` if ``pattern`` is a valid ES2020 (no Annex B, non-unicode) pattern, else why not."""
    parser = _Parser(_utf16(pattern))
    try:
        parser.pattern()
    except _PatternError as e:
        return f"at code unit {e.offset}: {e.message}"
    return None


def ecma_pattern_valid(pattern: str) -> bool:
    """Whether ``pattern`` is a valid ES2020 (no Annex B, non-unicode) regular-expression pattern."""
    return ecma_pattern_error(pattern) is None
