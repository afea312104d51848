"""IDNA2008 domain names as code point automata: the rules of RFC 5890-5893 that are properties of
the code point sequence, decided exactly.

A name is labels joined by separators; each label is an ASCII label or a U-label. The rules, each a
function of the state below and cited where it is applied:

* RFC 5892 categories (``refdecoder._idna_tables``, derived at Unicode 14.0.0 by
  ``refdecoder._idna_rules``): every code point of a U-label PVALID, or CONTEXTJ/CONTEXTO where its
  Appendix A rule holds; DISALLOWED and UNASSIGNED code points nowhere. ASCII capitals are
  DISALLOWED in a U-label (they are not NFKC_Casefold-stable) but allowed in an ASCII (LDH) label,
  whose letters are case-insensitive (RFC 5890 §2.3.1).
* RFC 5892 Appendix A: ZWNJ (A.1) after a virama, or inside ``(Joining_Type:{L,D})(Joining_Type:T)*
  ZWNJ (Joining_Type:T)*(Joining_Type:{R,D})``; ZWJ (A.2) after a virama; MIDDLE DOT (A.3) between
  two ``l``; Greek KERAIA (A.4) before a Greek character; Hebrew GERESH/GERSHAYIM (A.5, A.6) after a
  Hebrew one; KATAKANA MIDDLE DOT (A.7) in a label with a Hiragana, Katakana or Han character;
  Arabic-Indic digits (A.8) and Extended Arabic-Indic digits (A.9) not in one label together.
  The label-wide ones are flags of the state: a regular language each, intersected by the product.
* RFC 5891 §4.2.3.1: no hyphen first or last, no ``--`` in the third and fourth positions (an
  ASCII label with them is an R-LDH label, RFC 5890 §2.3.1: only ``xn--`` ones are A-labels);
  §4.2.3.2: no combining mark (General_Category M) first.
* RFC 5893 §2, the Bidi rule: in a Bidi domain name (one with an R, AL or AN character anywhere,
  §1.4) every label satisfies rules 1-6; elsewhere no label needs to.

Not decided here, and why (the readings of ``refdecoder._formats``): NFC (RFC 5891 §5 has lookup
normalize its input first; the JSON-Schema-Test-Suite's ``idn-email`` group reads a non-NFC label
as valid: the rules apply to the label as written);
the Punycode of ``xn--`` labels (an A-label must decode to a U-label, RFC 5890 §2.3.2.1: its decoder
state, a growing list of inserted code points, is no finite automaton of practical size); label and
name lengths, which DNS (RFC 1034 §3.1) counts in octets of the A-label, a Punycode length that
depends on the sorted code points of the whole label.

The construction: the code points split into classes of equal features (about 45 at Unicode 14.0.0); a
breadth-first walk over hashable states (:func:`_label_step`, :func:`_separator`) builds the
automaton over class numbers, :func:`~refdecoder._fsa.canonical` minimizes it there, and each class
edge becomes the class's intervals (a minimal automaton over classes is minimal over code points,
since code points of one class are interchangeable).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from refdecoder import _idna_tables as T
from refdecoder._cpset import CPSet, contains, normalize, union
from refdecoder._fsa import CodepointDFA, canonical, from_minimal

__all__ = ["idn_name_dfa", "SEPARATORS", "Mode"]

#: Label separators of an ``idn-hostname``: FULL STOP and the three dots RFC 3490 §3.1 maps to it
#: (IDEOGRAPHIC, FULLWIDTH and HALFWIDTH IDEOGRAPHIC FULL STOP), as the JSON-Schema-Test-Suite does.
SEPARATORS = (0x2E, 0x3002, 0xFF0E, 0xFF61)

#: ``"hostname"``: labels are NR-LDH labels, ``xn--`` labels (read as LDH) or U-labels, any of the
#: four separators. ``"mail"``: RFC 6531 §3.3 ``sub-domain = Let-dig [Ldh-str] / U-label`` (any
#: LDH label, ``--`` included), ``.`` only.
Mode = Literal["hostname", "mail"]

_BIDI = ("L", "R", "AL", "AN", "EN", "ES", "CS", "ET", "ON", "BN", "NSM")
_LTR_ALLOWED = frozenset({"L", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"})  # RFC 5893 §2 rule 5
_RTL_ALLOWED = frozenset({"R", "AL", "AN", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"})  # rule 2


@dataclass(frozen=True)
class Feat:
    """What the rules read of one code point."""

    kind: str  # "sep", "hyphen", "digit", "lower", "upper" (ASCII); "u" (non-ASCII PVALID) or a
    # contextual one: "zwnj", "zwj", "middot", "keraia", "geresh", "kmd", "ai", "eai"
    letter: str = ""  # "l", "x", "n" (either case) for ASCII letters the rules name
    mark: bool = False
    virama: bool = False
    joining: str = "U"  # Joining_Type D, L, R, T or U (the rest)
    script: str = ""  # "greek", "hebrew", "hkh" (Hiragana, Katakana, Han) or ""
    bidi: str = "other"


_CONTEXTUAL = {
    0x200C: "zwnj",
    0x200D: "zwj",
    0x00B7: "middot",
    0x0375: "keraia",
    0x05F3: "geresh",
    0x05F4: "geresh",
    0x30FB: "kmd",
    **{cp: "ai" for cp in range(0x0660, 0x066A)},
    **{cp: "eai" for cp in range(0x06F0, 0x06FA)},
}


def _feature(cp: int, seps: tuple[int, ...]) -> Feat | None:
    if cp in seps:
        return Feat("sep")
    if cp < 0x80:
        letter = chr(cp).lower() if chr(cp).lower() in "lxn" else ""
        if cp == 0x2D:
            return Feat("hyphen", bidi="ES")
        if 0x30 <= cp <= 0x39:
            return Feat("digit", bidi="EN")
        if 0x61 <= cp <= 0x7A:
            return Feat("lower", letter, bidi="L")
        if 0x41 <= cp <= 0x5A:
            return Feat("upper", letter, bidi="L")
        return None
    if not (contains(T.PVALID, cp) or cp in _CONTEXTUAL):
        return None  # DISALLOWED or UNASSIGNED (RFC 5892 §3)
    joining = next((j for j in "DLRT" if contains(getattr(T, f"JOINING_{j}"), cp)), "U")
    script = next(
        (s for s, t in (("greek", T.SCRIPT_GREEK), ("hebrew", T.SCRIPT_HEBREW)) if contains(t, cp)), ""
    )
    if any(contains(t, cp) for t in (T.SCRIPT_HIRAGANA, T.SCRIPT_KATAKANA, T.SCRIPT_HAN)):
        script = "hkh"
    bidi = next((b for b in _BIDI if contains(getattr(T, f"BIDI_{b}"), cp)), "other")
    return Feat(
        _CONTEXTUAL.get(cp, "u"),
        mark=contains(T.MARK, cp),
        virama=contains(T.VIRAMA, cp),
        joining=joining,
        script=script,
        bidi=bidi,
    )


def _classes(seps: tuple[int, ...]) -> list[tuple[Feat, CPSet]]:
    """The code points any label or separator may hold, grouped by :class:`Feat`: the features
    are constant between consecutive interval ends of the tables, so one look-up per segment."""
    sets = [T.PVALID, T.CONTEXTJ, T.CONTEXTO, T.MARK, T.VIRAMA, ((0, 0x7F),)]
    sets += [getattr(T, f"BIDI_{b}") for b in _BIDI] + [getattr(T, f"JOINING_{j}") for j in "DLRT"]
    sets += [T.SCRIPT_GREEK, T.SCRIPT_HEBREW, T.SCRIPT_HIRAGANA, T.SCRIPT_KATAKANA, T.SCRIPT_HAN]
    sets += [tuple((c, c) for c in seps), tuple((c, c) for c in range(0x80))]
    sets += [tuple((c, c) for c in sorted(_CONTEXTUAL))]  # CONTEXTJ is one interval of two kinds
    cuts = sorted({lo for s in sets for lo, _ in s} | {hi + 1 for s in sets for _, hi in s})
    grouped: dict[Feat, list[tuple[int, int]]] = {}
    domain = union(T.PVALID, T.CONTEXTJ, T.CONTEXTO, ((0, 0x7F),), tuple((c, c) for c in seps))
    for lo, hi in zip(cuts, cuts[1:]):
        if not contains(domain, lo):
            continue
        f = _feature(lo, seps)
        if f is not None:
            grouped.setdefault(f, []).append((lo, hi - 1))
    return [(f, normalize(ivs)) for f, ivs in grouped.items()]


@dataclass(frozen=True, slots=True)
class Label:
    """The state inside a label (``pos`` capped at 4: the hyphen rules look at positions 1-4)."""

    pos: int = 0
    xn: bool = False  # the first two characters are x, n (either case)
    rldh: bool = False  # "--" in the third and fourth positions
    hyphen: bool = False  # the last character is a hyphen
    upper: bool = False  # an ASCII capital
    nonascii: bool = False
    prev: str = ""  # "virama", "l", "hebrew" or "" (Before(cp) of Appendix A)
    joins_left: bool = False  # A.1: (Joining_Type:{L,D})(Joining_Type:T)* ends here
    pending: str = ""  # what After(cp) must be: "l" (A.3), "greek" (A.4), "RD" (A.1)
    kmd: bool = False  # A.7: KATAKANA MIDDLE DOT seen
    hkh: bool = False  # A.7: Hiragana, Katakana or Han seen
    digits: str = ""  # A.8/A.9: "ai" or "eai" seen
    bidi: tuple[object, ...] = ()  # RFC 5893: () empty, ("FAIL",), ("L", end_ok), ("R", end_ok, en, an)


@dataclass(frozen=True, slots=True)
class Name:
    label: Label = Label()
    rtl: bool = False  # RFC 5893 §1.4: an R, AL or AN character so far: a Bidi domain name
    failed: bool = False  # an earlier label breaks the Bidi rule


def _bidi_step(state: tuple[object, ...], b: str) -> tuple[object, ...]:
    """RFC 5893 §2 rules 1-6 for one more character of Bidi class ``b``."""
    if not state:  # rule 1: the first character is L, R or AL
        return ("L", True) if b == "L" else ("R", True, False, False) if b in ("R", "AL") else ("FAIL",)
    if state[0] == "FAIL":
        return state
    if state[0] == "L":  # rules 5, 6
        if b not in _LTR_ALLOWED:
            return ("FAIL",)
        return ("L", state[1] if b == "NSM" else b in ("L", "EN"))
    if b not in _RTL_ALLOWED:  # rules 2, 3, 4
        return ("FAIL",)
    en, an = bool(state[2]) or b == "EN", bool(state[3]) or b == "AN"
    if en and an:
        return ("FAIL",)
    return ("R", state[1] if b == "NSM" else b in ("R", "AL", "EN", "AN"), en, an)


def _bidi_ok(state: tuple[object, ...]) -> bool:
    return bool(state) and state[0] != "FAIL" and bool(state[1])


def _context(lab: Label, f: Feat) -> tuple[str, bool, str, bool, bool, str] | None:
    """RFC 5892 Appendix A for the character ``f`` after the label so far: the new ``prev``,
    ``joins_left``, ``pending``, ``kmd``, ``hkh``, ``digits``, or None if a rule fails."""
    if lab.pending == "l" and f.letter != "l" or lab.pending == "greek" and f.script != "greek":
        return None  # A.3 After(cp) = l; A.4 After(cp) is Greek
    pending = ""
    if lab.pending == "RD":  # A.1: (Joining_Type:T)* (Joining_Type:{R,D}) after the ZWNJ
        if f.joining == "T":
            pending = "RD"
        elif f.joining not in ("R", "D"):
            return None
    if f.kind == "zwnj":  # A.1: after a virama, or after (Joining_Type:{L,D})(Joining_Type:T)*
        if lab.prev != "virama":
            if not lab.joins_left:
                return None
            pending = "RD"
    elif f.kind == "zwj" and lab.prev != "virama":  # A.2
        return None
    elif f.kind == "middot":  # A.3
        if lab.prev != "l":
            return None
        pending = "l"
    elif f.kind == "keraia":  # A.4
        pending = "greek"
    elif f.kind == "geresh" and lab.prev != "hebrew":  # A.5, A.6
        return None
    digits = lab.digits
    if f.kind in ("ai", "eai"):  # A.8, A.9
        if digits and digits != f.kind:
            return None
        digits = f.kind
    prev = "virama" if f.virama else "l" if f.letter == "l" else "hebrew" if f.script == "hebrew" else ""
    joins_left = f.joining in ("L", "D") or (lab.joins_left and f.joining == "T")
    return prev, joins_left, pending, lab.kmd or f.kind == "kmd", lab.hkh or f.script == "hkh", digits


def _label_step(lab: Label, f: Feat) -> Label | None:
    """One more character of a label (RFC 5891 §4.2.3.1-2, RFC 5892, RFC 5893)."""
    if lab.pos == 0 and (f.kind == "hyphen" or f.mark):
        return None  # §4.2.3.1 no leading hyphen; §4.2.3.2 no leading combining mark
    nonascii = lab.nonascii or f.kind not in ("hyphen", "digit", "lower", "upper")
    upper = lab.upper or f.kind == "upper"
    if nonascii and upper:
        return None  # ASCII capitals are DISALLOWED in a U-label (RFC 5892 §2.2)
    got = _context(lab, f)
    if got is None:
        return None
    rldh = lab.rldh or (lab.pos == 3 and lab.hyphen and f.kind == "hyphen")
    xn = f.letter == "x" if lab.pos == 0 else (lab.xn and f.letter == "n") if lab.pos == 1 else lab.xn
    return Label(
        min(lab.pos + 1, 4),
        xn and (lab.pos < 3 or rldh),  # past the fourth position only an R-LDH label reads it
        rldh,
        f.kind == "hyphen",
        upper,
        nonascii,
        *got,
        _bidi_step(lab.bidi, f.bidi),
    )


def _label_ends(lab: Label, mode: Mode) -> bool:
    """Whether the label may end here: not empty, not ending in a hyphen (§4.2.3.1), no
    After(cp) pending (A.1, A.3, A.4), A.7's Hiragana/Katakana/Han, and the ``--`` rule: an
    R-LDH label is a U-label's error and an ASCII label's only as ``xn--`` (``hostname``)."""
    if lab.pos == 0 or lab.hyphen or lab.pending or (lab.kmd and not lab.hkh):
        return False
    if lab.rldh:
        return not lab.nonascii and (mode == "mail" or lab.xn)
    return True


def _name_step(st: Name, f: Feat, mode: Mode) -> Name | None:
    if f.kind == "sep":
        if not _label_ends(st.label, mode):
            return None
        failed = st.failed or not _bidi_ok(st.label.bidi)
        return None if st.rtl and failed else Name(Label(), st.rtl, failed)
    lab = _label_step(st.label, f)
    if lab is None:
        return None
    rtl = st.rtl or f.bidi in ("R", "AL", "AN")
    if rtl and (st.failed or lab.bidi == ("FAIL",)):
        return None  # a Bidi domain name whose labels must all pass the Bidi rule
    return Name(lab, rtl, st.failed)


def _name_final(st: Name, mode: Mode) -> bool:
    return _label_ends(st.label, mode) and not (st.rtl and (st.failed or not _bidi_ok(st.label.bidi)))


@lru_cache(maxsize=2)
def idn_name_dfa(mode: Mode) -> CodepointDFA:
    """The names of ``mode`` (see :data:`Mode`) under the rules of the module docstring, without
    length limits."""
    seps = SEPARATORS if mode == "hostname" else (0x2E,)
    classes = _classes(seps)
    start: Hashable = Name()
    ids: dict[Hashable, int] = {start: 0}
    queue: list[Name] = [Name()]
    rows: list[list[tuple[int, int, int]]] = []
    finals: list[int] = []
    qi = 0
    while qi < len(queue):
        st = queue[qi]
        if _name_final(st, mode):
            finals.append(qi)
        row = []
        for cid, (f, _) in enumerate(classes):
            nxt = _name_step(st, f, mode)
            if nxt is None:
                continue
            j = ids.get(nxt)
            if j is None:
                j = ids[nxt] = len(queue)
                queue.append(nxt)
            row.append((cid, cid, j))
        rows.append(row)
        qi += 1
    small = canonical(rows, 0, finals)
    out_rows = []
    for s in range(small.num_states):
        edges = [
            (lo, hi, t)
            for clo, chi, t in small.row(s)
            for c in range(clo, chi + 1)
            for lo, hi in classes[c][1]
        ]
        out_rows.append(sorted(edges))
    return from_minimal(out_rows, 0, small.finals)
