"""Sets of Unicode scalar values as sorted tuples of disjoint, non-adjacent closed intervals.

The alphabet of every code point automaton in maskcert is the set of Unicode *scalar values*:
U+0000..U+10FFFF without the surrogate block U+D800..U+DFFF. A well-formed Python ``str`` from UTF-8
or from ``json.loads`` of a valid JSON text (without lone ``\\u`` surrogate escapes) consists of
scalar values only. :func:`normalize` clips every set to the alphabet, so a set never contains a
surrogate, and its representation is unique: intervals are maximal runs of consecutive code points
(``(0xD000, 0xD7FF)`` and ``(0xE000, 0xE0FF)`` stay two intervals because the surrogates between
them are not in the alphabet). Equal sets therefore have equal tuples.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "CPSet",
    "MAX_CODEPOINT",
    "SURROGATE_LO",
    "SURROGATE_HI",
    "ALPHABET",
    "normalize",
    "complement",
    "union",
    "intersect",
    "difference",
    "contains",
    "from_chars",
]

CPSet = tuple[tuple[int, int], ...]

MAX_CODEPOINT = 0x10FFFF
SURROGATE_LO = 0xD800
SURROGATE_HI = 0xDFFF
ALPHABET: CPSet = ((0, SURROGATE_LO - 1), (SURROGATE_HI + 1, MAX_CODEPOINT))


def normalize(intervals: Iterable[tuple[int, int]]) -> CPSet:
    """Sort, merge overlapping/adjacent intervals, clip to the alphabet (drop surrogates)."""
    ivs = sorted((max(lo, 0), min(hi, MAX_CODEPOINT)) for lo, hi in intervals)
    merged: list[list[int]] = []
    for lo, hi in ivs:
        if lo > hi:
            continue
        if merged and lo <= merged[-1][1] + 1:
            if hi > merged[-1][1]:
                merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    out: list[tuple[int, int]] = []
    for lo, hi in merged:
        if hi < SURROGATE_LO or lo > SURROGATE_HI:
            out.append((lo, hi))
            continue
        if lo < SURROGATE_LO:
            out.append((lo, SURROGATE_LO - 1))
        if hi > SURROGATE_HI:
            out.append((SURROGATE_HI + 1, hi))
    return tuple(out)


def from_chars(chars: Iterable[int]) -> CPSet:
    return normalize((c, c) for c in chars)


def complement(s: CPSet) -> CPSet:
    """The scalar values not in ``s`` (``s`` normalized)."""
    out: list[tuple[int, int]] = []
    pos = 0
    for lo, hi in s:
        if lo > pos:
            out.append((pos, lo - 1))
        pos = hi + 1
    if pos <= MAX_CODEPOINT:
        out.append((pos, MAX_CODEPOINT))
    return normalize(out)


def union(*sets: CPSet) -> CPSet:
    return normalize(iv for s in sets for iv in s)


def intersect(a: CPSet, b: CPSet) -> CPSet:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return normalize(out)


def difference(a: CPSet, b: CPSet) -> CPSet:
    return intersect(a, complement(b))


def contains(s: CPSet, c: int) -> bool:
    lo_i, hi_i = 0, len(s)
    while lo_i < hi_i:
        mid = (lo_i + hi_i) // 2
        if s[mid][1] < c:
            lo_i = mid + 1
        else:
            hi_i = mid
    return lo_i < len(s) and s[lo_i][0] <= c
