"""RFC 5892 (IDNA2008 code points): the derivation of each code point's category from Unicode data.

The reference does not derive at run time: ``ci/gen_idna_tables.py`` runs :func:`derive` over
Python's ``unicodedata`` at :data:`UNICODE_VERSION` and writes ``refdecoder/_idna_tables.py``
(``tests/test_idna.py`` derives again and compares, where this Python's ``unicodedata`` has that
version). :func:`derive` is RFC 5892 §3's algorithm, one function per rule of §2, in §3's order::

    If .cp. .in. Exceptions Then Exceptions(cp);               (F, §2.6)
    Else If .cp. .in. BackwardCompatible Then BackwardCompatible(cp);   (G, §2.7: empty)
    Else If .cp. .in. Unassigned Then UNASSIGNED;              (J, §2.10)
    Else If .cp. .in. LDH Then PVALID;                         (K, §2.11)
    Else If .cp. .in. JoinControl Then CONTEXTJ;               (H, §2.8)
    Else If .cp. .in. Unstable Then DISALLOWED;                (B, §2.2)
    Else If .cp. .in. IgnorableProperties Then DISALLOWED;     (C, §2.3)
    Else If .cp. .in. IgnorableBlocks Then DISALLOWED;         (D, §2.4)
    Else If .cp. .in. OldHangulJamo Then DISALLOWED;           (I, §2.9)
    Else If .cp. .in. LetterDigits Then PVALID;                (A, §2.1)
    Else DISALLOWED;

What ``unicodedata`` gives and what it lacks: General_Category (``category``), NFKC
(``normalize``) and full case folding (``str.casefold``, the same Unicode version) are exact;
Default_Ignorable_Code_Point is not in ``unicodedata`` and comes in as a set (the generator takes
it from the ``regex`` package's tables, restricted to code points assigned at
:data:`UNICODE_VERSION`); Noncharacter_Code_Point is arithmetic (U+FDD0..U+FDEF and the last two
of each plane); White_Space is not needed: every White_Space character is Zs, Zl, Zp or Cc, never
in LetterDigits, so rule C adds nothing rule A's ``Else DISALLOWED`` does not. Hangul_Syllable_Type
L/V/T (rule I) are the fixed ranges of HangulSyllableType.txt, unchanged since Unicode 5.2.
"""

from __future__ import annotations

from collections.abc import Callable, Container

__all__ = [
    "UNICODE_VERSION",
    "PVALID",
    "CONTEXTJ",
    "CONTEXTO",
    "DISALLOWED",
    "UNASSIGNED",
    "EXCEPTIONS",
    "derive",
    "is_noncharacter",
]

#: The Unicode version the vendored tables are derived at (Python 3.11's ``unicodedata``).
UNICODE_VERSION = "14.0.0"

PVALID, CONTEXTJ, CONTEXTO, DISALLOWED, UNASSIGNED = (
    "PVALID",
    "CONTEXTJ",
    "CONTEXTO",
    "DISALLOWED",
    "UNASSIGNED",
)

#: RFC 5892 §2.6 Exceptions (F).
EXCEPTIONS: dict[int, str] = {
    # PVALID: sharp s, final sigma, Arabic signs, Tibetan tsheg, ideographic zero
    0x00DF: PVALID,
    0x03C2: PVALID,
    0x06FD: PVALID,
    0x06FE: PVALID,
    0x0F0B: PVALID,
    0x3007: PVALID,
    # CONTEXTO: middle dot, Greek keraia, Hebrew geresh/gershayim, katakana middle dot, digits
    0x00B7: CONTEXTO,
    0x0375: CONTEXTO,
    0x05F3: CONTEXTO,
    0x05F4: CONTEXTO,
    0x30FB: CONTEXTO,
    **{cp: CONTEXTO for cp in range(0x0660, 0x066A)},
    **{cp: CONTEXTO for cp in range(0x06F0, 0x06FA)},
    # DISALLOWED: tatweel, NKo lajanyalan, Hangul/Japanese marks and repeaters
    0x0640: DISALLOWED,
    0x07FA: DISALLOWED,
    0x302E: DISALLOWED,
    0x302F: DISALLOWED,
    **{cp: DISALLOWED for cp in range(0x3031, 0x3036)},
    0x303B: DISALLOWED,
}

_LETTER_DIGITS = frozenset({"Ll", "Lu", "Lo", "Nd", "Lm", "Mn", "Mc"})  # §2.1
_IGNORABLE_BLOCKS = ((0x20D0, 0x20FF), (0x1D100, 0x1D1FF), (0x1D200, 0x1D24F))  # §2.4
_OLD_HANGUL_JAMO = (  # §2.9: Hangul_Syllable_Type L, V, T
    (0x1100, 0x115F),
    (0xA960, 0xA97C),
    (0x1160, 0x11A7),
    (0xD7B0, 0xD7C6),
    (0x11A8, 0x11FF),
    (0xD7CB, 0xD7FB),
)


def is_noncharacter(cp: int) -> bool:
    """Noncharacter_Code_Point (Unicode §23.7): U+FDD0..U+FDEF and U+nFFFE, U+nFFFF."""
    return 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE


def unassigned(cp: int, category: str) -> bool:
    """§2.10 (J): General_Category Cn and not a noncharacter."""
    return category == "Cn" and not is_noncharacter(cp)


def ldh(cp: int) -> bool:
    """§2.11 (K): ``-``, ``0-9``, ``a-z``."""
    return cp == 0x2D or 0x30 <= cp <= 0x39 or 0x61 <= cp <= 0x7A


def join_control(cp: int) -> bool:
    """§2.8 (H): Join_Control, ZWNJ and ZWJ."""
    return cp in (0x200C, 0x200D)


def unstable(ch: str, nfkc: Callable[[str], str]) -> bool:
    """§2.2 (B): ``toNFKC(toCaseFold(toNFKC(cp))) != cp``."""
    return nfkc(nfkc(ch).casefold()) != ch


def ignorable_properties(cp: int, default_ignorable: Container[int]) -> bool:
    """§2.3 (C): Default_Ignorable_Code_Point, White_Space (see the module docstring) or
    Noncharacter_Code_Point."""
    return cp in default_ignorable or is_noncharacter(cp)


def ignorable_blocks(cp: int) -> bool:
    """§2.4 (D): Combining Diacritical Marks for Symbols, Musical Symbols, Ancient Greek Musical
    Notation."""
    return any(lo <= cp <= hi for lo, hi in _IGNORABLE_BLOCKS)


def old_hangul_jamo(cp: int) -> bool:
    """§2.9 (I): conjoining jamo (Hangul_Syllable_Type L, V or T)."""
    return any(lo <= cp <= hi for lo, hi in _OLD_HANGUL_JAMO)


def derive(
    cp: int,
    category: Callable[[str], str],
    nfkc: Callable[[str], str],
    default_ignorable: Container[int],
) -> str:
    """RFC 5892 §3: the category of ``cp`` (surrogates are Cs: DISALLOWED)."""
    if cp in EXCEPTIONS:
        return EXCEPTIONS[cp]
    ch = chr(cp)
    gc = category(ch)
    if unassigned(cp, gc):
        return UNASSIGNED
    if ldh(cp):
        return PVALID
    if join_control(cp):
        return CONTEXTJ
    if 0xD800 <= cp <= 0xDFFF or unstable(ch, nfkc):
        return DISALLOWED
    if ignorable_properties(cp, default_ignorable) or ignorable_blocks(cp) or old_hangul_jamo(cp):
        return DISALLOWED
    return PVALID if gc in _LETTER_DIGITS else DISALLOWED
