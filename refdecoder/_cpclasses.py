"""Code point sets of regex character classes, exact by construction.

* Python ``re`` classes (``\\d \\w \\s`` and their negations, Unicode or ASCII mode) are measured by
  running ``re`` itself once over every scalar value (lazily, cached): whatever ``re`` matches is
  the set, so there is no table to drift from the running interpreter.
* ECMA-262 classes (with the ``u`` flag and without ``i``) are fixed ASCII sets plus the
  WhiteSpace/LineTerminator set of ECMA-262 §22.2.2.9 (``\\s``), whose Unicode part is the general
  category Zs.
* Unicode general categories (for ECMA ``\\p{...}``) come from :mod:`unicodedata`, i.e. the Unicode
  version of the running Python (``unicodedata.unidata_version``); an ECMAScript engine built on a
  newer Unicode version differs only on code points assigned after that version.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from refdecoder._cpset import ALPHABET, SURROGATE_LO, CPSet, complement, normalize, union

__all__ = [
    "python_category",
    "python_dot",
    "ecma_class",
    "ECMA_LINE_TERMINATORS",
    "general_category",
    "unicode_property",
    "UNICODE_VERSION",
]

UNICODE_VERSION = unicodedata.unidata_version
_GAP = 0x800  # number of surrogates skipped by _all_scalars()


@cache
def _all_scalars() -> str:
    return "".join(map(chr, range(SURROGATE_LO))) + "".join(map(chr, range(0xE000, 0x110000)))


def _cp(pos: int) -> int:
    return pos if pos < SURROGATE_LO else pos + _GAP


@cache
def python_category(letter: str, ascii_only: bool) -> CPSet:
    """The set ``re`` matches with ``\\<letter>`` (letter in ``dDwWsS``) for str patterns."""
    if letter not in "dDwWsS" or len(letter) != 1:
        raise ValueError(f"not a category escape: \\{letter}")
    if letter.isupper():
        return complement(python_category(letter.lower(), ascii_only))
    rx = re.compile(rf"\{letter}+", re.ASCII if ascii_only else 0)
    return normalize((_cp(m.start()), _cp(m.end() - 1)) for m in rx.finditer(_all_scalars()))


def python_dot(dotall: bool) -> CPSet:
    return ALPHABET if dotall else complement(((0x0A, 0x0A),))


ECMA_LINE_TERMINATORS: CPSet = normalize([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
_ECMA_DIGIT: CPSet = ((0x30, 0x39),)
_ECMA_WORD: CPSet = normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
# ECMA-262 WhiteSpace (TAB VT FF ZWNBSP and Zs) + LineTerminator (LF CR LS PS).
_ECMA_SPACE: CPSet = normalize(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)


def ecma_class(letter: str) -> CPSet:
    """``\\d \\D \\w \\W \\s \\S`` of ECMA-262 with the ``u`` flag and without ``i``."""
    base = {"d": _ECMA_DIGIT, "w": _ECMA_WORD, "s": _ECMA_SPACE}[letter.lower()]
    return complement(base) if letter.isupper() else base


@cache
def _categories() -> dict[str, CPSet]:
    runs: dict[str, list[tuple[int, int]]] = {}
    cat = unicodedata.category
    prev = None
    start = 0
    for c in range(0x110000):
        k = cat(chr(c))
        if k != prev:
            if prev is not None:
                runs.setdefault(prev, []).append((start, c - 1))
            prev, start = k, c
    assert prev is not None
    runs.setdefault(prev, []).append((start, 0x10FFFF))
    return {k: normalize(v) for k, v in runs.items()}


_GC_LONG = {
    "Cased_Letter": "LC",
    "Close_Punctuation": "Pe",
    "Connector_Punctuation": "Pc",
    "Control": "Cc",
    "Currency_Symbol": "Sc",
    "Dash_Punctuation": "Pd",
    "Decimal_Number": "Nd",
    "Enclosing_Mark": "Me",
    "Final_Punctuation": "Pf",
    "Format": "Cf",
    "Initial_Punctuation": "Pi",
    "Letter": "L",
    "Letter_Number": "Nl",
    "Line_Separator": "Zl",
    "Lowercase_Letter": "Ll",
    "Mark": "M",
    "Math_Symbol": "Sm",
    "Modifier_Letter": "Lm",
    "Modifier_Symbol": "Sk",
    "Nonspacing_Mark": "Mn",
    "Number": "N",
    "Open_Punctuation": "Ps",
    "Other": "C",
    "Other_Letter": "Lo",
    "Other_Number": "No",
    "Other_Punctuation": "Po",
    "Other_Symbol": "So",
    "Paragraph_Separator": "Zp",
    "Private_Use": "Co",
    "Punctuation": "P",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Spacing_Mark": "Mc",
    "Surrogate": "Cs",
    "Symbol": "S",
    "Titlecase_Letter": "Lt",
    "Unassigned": "Cn",
    "Uppercase_Letter": "Lu",
    "Combining_Mark": "M",
    "cntrl": "Cc",
    "digit": "Nd",
    "punct": "P",
}
_GC_SHORT = {
    "C",
    "Cc",
    "Cf",
    "Cn",
    "Co",
    "Cs",
    "L",
    "LC",
    "Ll",
    "Lm",
    "Lo",
    "Lt",
    "Lu",
    "M",
    "Mc",
    "Me",
    "Mn",
    "N",
    "Nd",
    "Nl",
    "No",
    "P",
    "Pc",
    "Pd",
    "Pe",
    "Pf",
    "Pi",
    "Po",
    "Ps",
    "S",
    "Sc",
    "Sk",
    "Sm",
    "So",
    "Z",
    "Zl",
    "Zp",
    "Zs",
}


def general_category(value: str) -> CPSet | None:
    """Code points of a General_Category value (short or long alias); None if not a GC value."""
    short = _GC_LONG.get(value, value)
    if short not in _GC_SHORT:
        return None
    cats = _categories()
    if short == "LC":
        return union(*(cats.get(k, ()) for k in ("Lu", "Ll", "Lt")))
    if len(short) == 1:
        return union(*(v for k, v in cats.items() if k[0] == short))
    return cats.get(short, ())


def unicode_property(name: str, value: str | None) -> CPSet | None:
    """ECMA-262 ``\\p{name}`` / ``\\p{name=value}``; None when we do not support it exactly."""
    if value is not None:
        if name in ("General_Category", "gc"):
            return general_category(value)
        return None
    gc = general_category(name)
    if gc is not None:
        return gc
    if name == "Any":
        return ALPHABET
    if name == "ASCII":
        return ((0, 0x7F),)
    if name == "Assigned":
        return complement(general_category("Cn") or ())
    if name in ("ASCII_Hex_Digit", "AHex"):
        return normalize([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])
    return None
