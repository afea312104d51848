"""Exact languages of JSON Schema ``format`` values (draft 2020-12 §7.3) as code point DFAs.

Each format is the language of its RFC grammar (ABNF, RFC 5234), built from Python-flavour
regular expressions over explicit ASCII classes (never ``\\d``/``\\w``, which are Unicode in
``re``) plus the DFA algebra where a rule is not a plain grammar (days per month, leap seconds,
length limits). ABNF quoted strings are case-insensitive (RFC 5234 §2.3), so literal letters such
as RFC 3339's ``T``/``Z``, the duration designators and ``IPv6:`` accept either case.

The two large ones are written directly as minimal automata, which only need renumbering (a tenth
of a second each, where regexes, products and minimization took seconds): ``time`` (leap seconds
make it 11,017 states; ``date-time`` glues ``full-date`` in front of it without a product) and
``hostname`` (23,809 states). Their docstrings argue minimality; the tests check each against the
old construction and the full canonicalization. The JSON front-end reads such large languages
lazily at the byte level (``refdecoder._jsonstring``), so none of them needs a byte table.

:func:`format_dfa` returns ``None`` for a format we do not implement exactly (``idn-hostname``,
with its reason in :data:`UNSUPPORTED`; unknown names) or that no automaton holds (``regex``, a
context-free language with early errors: ``refdecoder._ecma_pattern`` decides it, and the JSON Schema
front-end reads it through ``_shapes.CheckedStrings``): the
caller refuses it (validation 2020-12 §7.2.3: an implementation asserting formats that cannot
validate one fully must refuse the schema) or treats it as an annotation. Where a Python checker
(the ones ``jsonschema`` uses) disagrees with the RFC, the RFC wins; each function lists the known
differences.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from functools import lru_cache
from typing import Any, Literal

from refdecoder._fsa import CodepointDFA, dfa_bound, from_minimal, walk_minimal
from refdecoder._idna import idn_name_dfa
from refdecoder._limits import spend
from refdecoder._regex import compile_regex_dfa
from refdecoder.errors import LimitExceeded

__all__ = ["format_dfa", "FORMATS", "UNSUPPORTED", "HOSTNAME_STATES", "LeapSeconds"]

LeapSeconds = Literal["utc", "never"]

#: States of the minimal hostname automaton (253-character names of 63-character labels); the
#: test suite checks this number.
HOSTNAME_STATES = 23_809
#: The bound the fixed constructions here run under (they are not spec input; the result's size is
#: then checked against the caller's ``dfa_states``).
_BUILD_STATES = 100_000


def _rx(pattern: str) -> CodepointDFA:
    """A format's regex (fixed text, never from a spec): built under its own generous bound, so
    that the result does not depend on the caller's limits; :func:`format_dfa` checks its size."""
    return compile_regex_dfa(pattern, flavor="python", mode="fullmatch", max_states=_BUILD_STATES)


def _ci(text: str) -> str:
    """A regex for ``text`` with ASCII letters in either case (an ABNF quoted string)."""
    out = []
    for ch in text:
        if ch.isascii() and ch.isalpha():
            out.append(f"[{ch.upper()}{ch.lower()}]")
        else:
            out.append("\\" + ch if ch in r".^$*+?{}[]\|()-" else ch)
    return "".join(out)


# -- shared ABNF pieces (RFC 5234 core rules, RFC 3986 Appendix A) ---------------------------------
_DIGIT = "[0-9]"
_HEXDIG = "[0-9A-Fa-f]"
_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = f"{_HEXDIG}{{1,4}}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    "(?:"
    + "|".join(
        [
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)


# -- RFC 3339 §5.6 date and time ---------------------------------------------------------------
# Appendix C: a leap year is divisible by 4 and not by 100, or divisible by 400 (so 0000 is one).
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[048]|[2468][048]|[13579][26])00)"
_FULL_DATE = (
    "(?:[0-9]{4}-(?:"
    "(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    f"|{_LEAP_YEAR}-02-29)"
)
_SECFRAC = r"(?:\.[0-9]+)?"
_NUMOFFSET = "[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]"
_TIME_NO_LEAP = f"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_SECFRAC}(?:[Zz]|{_NUMOFFSET})"


def date() -> CodepointDFA:
    """RFC 3339 §5.6 ``full-date`` with the §5.7 day limits per month and leap year.

    Differences from Python: ``datetime.date.fromisoformat`` (used by jsonschema) and
    ``rfc3339_validator`` reject year 0000, which RFC 3339 allows (``date-fullyear = 4DIGIT``;
    Appendix C makes 0000 a leap year).
    """
    return _rx(_FULL_DATE)


class _Table:
    """A deterministic automaton written by hand: states named by hashable values, edges on code
    points (characters) or on code point intervals; :meth:`dfa` makes it a value."""

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self._rows: list[list[tuple[int, int, int]]] = []

    def state(self, name: Hashable) -> int:
        got = self._ids.get(name)
        if got is None:
            got = self._ids[name] = len(self._rows)
            self._rows.append([])
        return got

    def edge(self, a: Hashable, chars: str, b: Hashable) -> None:
        """``a`` reads any character of ``chars`` to ``b`` (an edge given twice is kept once; one
        character to two states is a construction error)."""
        sa, sb = self.state(a), self.state(b)
        row = self._rows[sa]
        for ch in chars:
            c = ord(ch)
            old = [t for lo, hi, t in row if lo <= c <= hi]
            if not old:
                row.append((c, c, sb))
            elif old != [sb]:
                raise AssertionError(f"the table is not deterministic at {a!r} on {ch!r}")

    def dfa(self, start: Hashable, finals: Iterable[Hashable]) -> CodepointDFA:
        """The canonical automaton of a table written trim and minimal (the builder argues why):
        :func:`~refdecoder._fsa.from_minimal` only renumbers it."""
        spend(len(self._rows))
        return from_minimal(self._rows, self.state(start), [self._ids[f] for f in finals])


_DIGITS = "0123456789"
_END = ("expect", "")


def _expect(t: _Table, text: str) -> Hashable:
    """The state that reads exactly ``text`` and ends (states shared by suffix)."""
    name = ("expect", text)
    if text and name not in t._ids:
        t.edge(name, text[0], _expect(t, text[1:]))
    return name


def _time_table(t: _Table) -> Hashable:
    """RFC 3339 ``full-time`` with leap seconds into ``t``, ending in :data:`_END`; returns the
    start state's name.

    Written directly (no regex, no product): ``HH:MM`` is a tree of the 1,440 local times, and
    the state after it remembers the minute, which second 60 needs: it leads to states that accept
    exactly the offsets that make the time 23:59:60 UTC (``+hh:mm`` with ``m - (hh*60+mm) ≡
    23:59`` mod 24 h, ``-hh:mm`` with ``m + (hh*60+mm) ≡ 23:59``, and ``Z``/``z`` at 23:59);
    seconds 00-59 go to states shared by every minute.

    The table is minimal as written: states of different minutes accept different leap second
    offsets; the tree's states lead to different sets of minutes; the per-minute states (after
    ``:``, ``6``, ``60``, ``60.``, ``60.d``) read different next characters or, within one kind,
    accept different offsets; the shared tail (seconds, fraction, any offset) accepts offsets
    that no single-offset state does; and the offset chains ``_expect`` shares by suffix read
    different fixed texts. So it is only renumbered (11,017 states, tests check it against the
    full canonicalization), in a few hundredths of a second.
    """
    for minute in range(1440):
        local = f"{minute // 60:02d}:{minute % 60:02d}"
        for i, ch in enumerate(local):
            t.edge(("local", local[:i]), ch, ("local", local[: i + 1]))
        t.edge(("local", local), ":", ("sec", minute))
        t.edge(("sec", minute), "012345", "s1")
        t.edge(("sec", minute), "6", ("s6", minute))
        t.edge(("s6", minute), "0", ("s60", minute))
        t.edge(("s60", minute), ".", ("frac1", minute))
        t.edge(("frac1", minute), _DIGITS, ("frac", minute))
        t.edge(("frac", minute), _DIGITS, ("frac", minute))
        plus = (minute - 1439) % 1440
        minus = (1439 - minute) % 1440
        for state in (("s60", minute), ("frac", minute)):
            if minute == 1439:
                t.edge(state, "Zz", _END)
            t.edge(state, "+", _expect(t, f"{plus // 60:02d}:{plus % 60:02d}"))
            t.edge(state, "-", _expect(t, f"{minus // 60:02d}:{minus % 60:02d}"))
    # seconds 00-59: time-secfrac, then time-offset = "Z" / time-numoffset
    t.edge("s1", _DIGITS, "s2")
    t.edge("s2", ".", "f1")
    t.edge("f1", _DIGITS, "f")
    t.edge("f", _DIGITS, "f")
    for tail in ("s2", "f"):
        t.edge(tail, "Zz", _END)
        t.edge(tail, "+-", "o0")
    t.edge("o0", "01", "o1")
    t.edge("o0", "2", "o1b")
    t.edge("o1", _DIGITS, "o2")
    t.edge("o1b", "0123", "o2")
    t.edge("o2", ":", "o3")
    t.edge("o3", "012345", "o4")
    t.edge("o4", _DIGITS, _END)
    return ("local", "")


@lru_cache(maxsize=2)
def time(leap_seconds: LeapSeconds = "utc") -> CodepointDFA:
    """RFC 3339 §5.6 ``full-time``: ``partial-time time-offset``, ``Z`` in either case.

    Leap seconds (``time-second`` 60): accepted exactly when the time converted to UTC by the
    offset is 23:59:60, the rule of RFC 3339 §5.7 as the JSON-Schema-Test-Suite reads it;
    ``-00:00`` counts as UTC. We do not consult the leap second table (Appendix D), which a
    time without a date could not use anyway. Differences from Python: jsonschema's checker
    (``rfc3339_validator`` on ``1970-01-01T`` + value) rejects every leap second.
    With leap seconds: :func:`_time_table` (11,017 states); without: a regex (~20 states).
    """
    if leap_seconds == "never":
        return _rx(_TIME_NO_LEAP)
    t = _Table()
    return t.dfa(_time_table(t), [_END])


@lru_cache(maxsize=2)
def date_time(leap_seconds: LeapSeconds = "utc") -> CodepointDFA:
    """RFC 3339 §5.6 ``date-time`` = ``full-date "T" full-time``, ``T`` in either case.

    Leap seconds as in :func:`time` on any date (no leap second table). Differences from Python:
    ``rfc3339_validator`` rejects leap seconds and year 0000.

    Product-free: ``full-date`` has a fixed length, so its final states read nothing; gluing
    ``T``/``t`` edges from them to the start of ``full-time`` is already deterministic. The glue of
    two minimal automata is minimal here: date states at different depths have residuals of
    different lengths up to the ``T`` and at one depth different date suffixes, and no time state
    reads ``T``; so it is only renumbered.
    """
    return _glue(date(), "Tt", time(leap_seconds))


def _glue(first: CodepointDFA, sep: str, second: CodepointDFA) -> CodepointDFA:
    """``first · [sep] · second`` where no final state of ``first`` reads anything."""
    n = first.num_states
    rows: list[list[tuple[int, int, int]]] = [list(first.row(s)) for s in range(n)]
    start2 = n + 1
    for f in first.finals:
        assert not rows[f], "the first part must end at final states that read nothing"
        rows[f] = [(ord(ch), ord(ch), start2) for ch in sorted(sep)]
    rows.append([])  # n: unused
    rows.extend([(lo, hi, t + start2) for lo, hi, t in second.row(s)] for s in range(second.num_states))
    spend(len(rows))
    return from_minimal(rows, 0, [start2 + f for f in second.finals])


def duration() -> CodepointDFA:
    """RFC 3339 Appendix A ``duration``; designators in either case (ABNF quoted strings).

    ``P`` (dur-date / dur-time / dur-week), with dur-date = (day / month [day] / year [month
    [day]]) [dur-time], dur-time = ``T`` (hour [minute [second]] / minute [second] / second).
    """
    num = "[0-9]+"
    second = f"{num}{_ci('S')}"
    minute = f"{num}{_ci('M')}(?:{second})?"
    hour = f"{num}{_ci('H')}(?:{minute})?"
    dtime = f"{_ci('T')}(?:{hour}|{minute}|{second})"
    day = f"{num}{_ci('D')}"
    month = f"{num}{_ci('M')}(?:{day})?"
    year = f"{num}{_ci('Y')}(?:{month})?"
    ddate = f"(?:{day}|{month}|{year})(?:{dtime})?"
    week = f"{num}{_ci('W')}"
    return _rx(f"{_ci('P')}(?:{ddate}|{dtime}|{week})")


# -- RFC 5321 §4.1.2 / §4.1.3 email ---------------------------------------------------------------
def email() -> CodepointDFA:
    """RFC 5321 ``Mailbox = Local-part "@" ( Domain / address-literal )`` (ASCII).

    Local-part = Dot-string / Quoted-string (RFC 5322 ``atext``; ``qtextSMTP``,
    ``quoted-pairSMTP``); Domain = sub-domain *("." sub-domain) with sub-domain = Let-dig
    [Ldh-str]; address-literal = ``[`` IPv4-address-literal (``Snum``: 1-3 digits, 0-255,
    leading zeros allowed) or ``IPv6:`` IPv6-addr ``]``, with the §4.1.3 group counts ("::"
    stands for at least two groups: at most 6 explicit groups, or 4 before an IPv4 part).
    Not included: General-address-literal (``[tag:content]``; no tag other than IPv6 is
    registered, and its grammar would swallow invalid IPv6 literals) and the §4.5.3.1 size
    limits (64-octet local part, 255-octet domain). jsonschema's own checker only asks for an
    ``@``.
    """
    let_dig = "[A-Za-z0-9]"
    sub_domain = f"{let_dig}(?:[A-Za-z0-9-]*{let_dig})?"
    domain = rf"{sub_domain}(?:\.{sub_domain})*"
    return _rx(f"{_local_part()}@(?:{domain}|{_address_literal()})")


def _local_part(extra: str = "") -> str:
    """RFC 5321 §4.1.2 ``Local-part = Dot-string / Quoted-string`` (RFC 5322 ``atext``;
    ``qtextSMTP``, ``quoted-pairSMTP``); ``extra``, a class body, extends ``atext`` and
    ``qtextSMTP`` (RFC 6531 §3.3)."""
    atext = rf"[A-Za-z0-9!#$%&'*+\-/=?^_`{{|}}~{extra}]"
    dot_string = rf"{atext}+(?:\.{atext}+)*"
    quoted_string = rf'"(?:[\x20\x21\x23-\x5b\x5d-\x7e{extra}]|\\[\x20-\x7e])*"'
    return f"(?:{dot_string}|{quoted_string})"


def _address_literal() -> str:
    """RFC 5321 §4.1.3 ``address-literal`` without General-address-literal (see :func:`email`)."""
    snum = "(?:[0-9]{1,2}|[01][0-9]{2}|2[0-4][0-9]|25[0-5])"
    ipv4 = rf"{snum}(?:\.{snum}){{3}}"
    h = f"{_HEXDIG}{{1,4}}"

    def groups(k: int, trailing_colon: bool = False) -> str:
        if k == 0:
            return ""
        if trailing_colon:
            return f"(?:{h}:){{{k}}}"
        return f"{h}(?::{h}){{{k - 1}}}"

    full = f"{h}(?::{h}){{7}}"
    comp = "|".join(f"{groups(i)}::{groups(j)}" for i in range(7) for j in range(7 - i))
    v4full = f"{h}(?::{h}){{5}}:{ipv4}"
    v4comp = "|".join(
        f"{groups(i)}::{groups(j, trailing_colon=True)}{ipv4}" for i in range(5) for j in range(5 - i)
    )
    ipv6 = f"(?:{full}|{comp}|{v4full}|{v4comp})"
    return rf"\[(?:{ipv4}|{_ci('IPv6:')}{ipv6})\]"


@lru_cache(maxsize=1)
def idn_email() -> CodepointDFA:
    """RFC 6531 §3.3 ``Mailbox``: RFC 5321's (:func:`email`) with ``atext =/ UTF8-non-ascii``,
    ``qtextSMTP =/ UTF8-non-ascii`` and ``sub-domain =/ U-label``.

    The domain is :func:`refdecoder._idna.idn_name_dfa` (``"mail"``): ASCII sub-domains as in
    RFC 5321 (``Let-dig [Ldh-str]``), U-labels under IDNA2008's code point rules (RFC 5892
    categories at Unicode 14.0.0 and contextual rules, RFC 5891 §4.2.3 hyphens and leading marks,
    RFC 5893's Bidi rule across the domain), ``.`` between labels; or an address literal. Readings:
    no length limits (as :func:`email`: RFC 5321 §4.5.3.1's, and RFC 1034 §3.1's 63-octet label,
    which counts the A-label's Punycode octets); a U-label need not be NFC: the code point rules
    apply to the label as written, not to its NFC form (the JSON-Schema-Test-Suite's reading, "a
    domain label that is not in Unicode NFC is valid", where RFC 5890 §2.3.2.1 asks NFC of a
    U-label and RFC 5891 §5 has lookup normalize its input first); an ``xn--`` sub-domain is an LDH
    one (RFC 5321's grammar; its Punycode is not decoded). The local part is not normalized either (RFC 6532 §3.1 recommends
    NFC but the grammar takes any ``UTF8-non-ascii``): C1 controls and noncharacters are in it.
    jsonschema's checker only asks for an ``@``.
    """
    utf8_non_ascii = _cp_class((0x80, 0xD7FF), (0xE000, 0x10FFFF))  # RFC 6532 §3.1: UTF8-2/3/4
    local = _rx(f"{_local_part(utf8_non_ascii)}@")
    domain = idn_name_dfa("mail").union(_rx(_address_literal()), max_states=_BUILD_STATES)
    return local.concat(domain, max_states=_BUILD_STATES)


# -- addresses and identifiers ------------------------------------------------------------------
def ipv4() -> CodepointDFA:
    """RFC 2673 §3.2 dotted-quad (as JSON Schema cites): four decimal octets 0-255 without leading
    zeros, ASCII digits. Same language as ``ipaddress.IPv4Address`` (Python >= 3.9.5)."""
    return _rx(_IPV4)


def ipv6() -> CodepointDFA:
    """RFC 4291 §2.2 text forms, as the RFC 3986 §3.2.2 ``IPv6address`` ABNF: ``::``
    compression (one or more zero groups), embedded dotted-quad in the last 32 bits, hex digits
    in either case; no zone id (RFC 6874) and no prefix length. Same language as
    ``ipaddress.IPv6Address`` without a scope id, which jsonschema's checker rejects."""
    return _rx(_IPV6)


def uuid() -> CodepointDFA:
    """RFC 4122 §3 ``UUID`` string: 8-4-4-4-12 hex digits, either case, any version/variant.

    Differences from Python: ``uuid.UUID`` also accepts braces, a ``urn:uuid:`` prefix and dashes
    anywhere (jsonschema adds a dash-position check, which still lets through e.g. extra dashes
    after position 23 and a trailing ``}``)."""
    hx = _HEXDIG
    return _rx(f"{hx}{{8}}-{hx}{{4}}-{hx}{{4}}-{hx}{{4}}-{hx}{{12}}")


_LET_DIG = ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A))


@lru_cache(maxsize=1)
def hostname() -> CodepointDFA:
    """RFC 1123 §2.1 host name: dot-separated labels of letters, digits and hyphens, 1-63
    characters, not starting or ending with a hyphen (a leading digit is allowed), at most 253
    characters in all (RFC 1035's 255-octet wire limit), no trailing dot.

    A-labels (RFC 5890 §2.3.2.1: ``xn--`` + Punycode) are LDH labels and accepted as such; their
    Punycode is not decoded, so draft 2020-12's reading that they must decode to valid IDNA2008
    U-labels (RFC 5891 §4.4; the JSON-Schema-Test-Suite's "A-label" group) is not applied: that
    language is not a code point automaton of any practical size (see ``idn-hostname``). This is
    the language of jsonschema's checker (``fqdn``) apart from its own differences: ``fqdn``
    accepts a trailing dot, a trailing newline (its regex ends in ``$``) and non-ASCII digits and
    letters that match ``\\d`` or case-fold to ASCII (e.g. U+212A KELVIN SIGN).

    Built directly: the state after a prefix is (characters left of the 253, characters the
    current label may still take, capped by the former, whether it ended in a hyphen), or "at a
    label start" with the characters left. Distinct such values have distinct residual languages
    (the longest continuation without a dot measures the room, the longest one with a dot the
    characters left, the hyphen forbids the end) except for the two coincidences ``inside``
    merges, so the table is minimal as written and only renumbered: :data:`HOSTNAME_STATES`
    states in about a tenth of a second (the tests compare it with the full canonicalization and
    with RFC 1123's regex intersected with the length bound).
    """
    total, label = 253, 63
    hyphen_edge, dot_edge = (0x2D, 0x2D), (0x2E, 0x2E)

    def inside(left: int, room: int, hyphen: bool) -> Hashable:
        # the two coincidences of residuals: nothing more to read but the end; one letter or
        # digit and then the end (also what a label start with one character left reads)
        if room == 0 and left < 2:
            return ("in", 0, 0, False)
        if room == 1 and hyphen and left <= 2:
            return ("start", 1)
        return ("in", left, room, hyphen)

    def edges(state: Any) -> list[tuple[int, int, Hashable]]:
        if state[0] == "start":  # a label must begin: a letter or a digit
            left = state[1]
            t = inside(left - 1, min(label - 1, left - 1), False)
            return [(lo, hi, t) for lo, hi in _LET_DIG]
        _, left, room, hyphen = state
        out: list[tuple[int, int, Hashable]] = []
        if room >= 2:  # a hyphen needs a letter or digit after it in the same label
            out.append((*hyphen_edge, inside(left - 1, min(room - 1, left - 1), True)))
        if not hyphen and left >= 2:
            out.append((*dot_edge, ("start", left - 1)))
        if room >= 1:
            t = inside(left - 1, min(room - 1, left - 1), False)
            out.extend((lo, hi, t) for lo, hi in _LET_DIG)
        return out

    out = walk_minimal(("start", total), edges, lambda state: state[0] == "in" and not state[3])
    assert out.size == HOSTNAME_STATES, "the minimal hostname automaton changed size"
    return out


# -- RFC 3986 URIs ---------------------------------------------------------------------------------
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = f"%{_HEXDIG}{_HEXDIG}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_SEGMENT_NZ_NC = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_PATH_NOSCHEME = f"{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*"
_PATH_ROOTLESS = f"{_SEGMENT_NZ}(?:/{_SEGMENT})*"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_USERINFO = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_IPVFUTURE = rf"[Vv]{_HEXDIG}+\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
_IP_LITERAL = rf"\[(?:{_IPV6}|{_IPVFUTURE})\]"
_REG_NAME = f"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_HOST = f"(?:{_IP_LITERAL}|{_IPV4}|{_REG_NAME})"
_AUTHORITY = f"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_QUERY = f"(?:{_PCHAR}|[/?])*"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
_URI = f"{_SCHEME}:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS}|){_TAIL}"
_RELATIVE_REF = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|){_TAIL}"


def uri() -> CodepointDFA:
    """RFC 3986 §3 ``URI = scheme ":" hier-part [ "?" query ] [ "#" fragment ]`` (ASCII only;
    IP-literal with IPv6address / IPvFuture, percent-encodings with two hex digits)."""
    return _rx(_URI)


def uri_reference() -> CodepointDFA:
    """RFC 3986 §4.1 ``URI-reference = URI / relative-ref`` (ASCII only)."""
    return _rx(f"(?:{_URI}|{_RELATIVE_REF})")


_JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"


def json_pointer() -> CodepointDFA:
    """RFC 6901 §3: ``*( "/" reference-token )``, ``~`` only as ``~0`` or ``~1``."""
    return _rx(_JSON_POINTER)


def relative_json_pointer() -> CodepointDFA:
    """Relative JSON Pointer, draft-bhutton-relative-json-pointer-00 §3 (the draft JSON Schema
    2020-12 cites)::

        relative-json-pointer =  non-negative-integer [index-manipulation] <json-pointer>
        relative-json-pointer =/ non-negative-integer [index-manipulation] "#"
        index-manipulation    =  ("+" / "-") positive-integer
        non-negative-integer  =  %x30 / %x31-39 *( %x30-39 )
        positive-integer      =  %x31-39 *( %x30-39 )

    ASCII digits only. Differences from Python: jsonschema's checker follows the earlier
    draft-handrews-relative-json-pointer-01, without index manipulation (it rejects ``0+1/a``).
    """
    return _rx(f"(?:0|[1-9][0-9]*)(?:[+-][1-9][0-9]*)?(?:#|{_JSON_POINTER})")


# -- RFC 3987 IRIs --------------------------------------------------------------------------------
def _cp_class(*ranges: tuple[int, int]) -> str:
    return "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in ranges)


_UCSCHAR = _cp_class(
    (0xA0, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFEF),
    *((p << 16, (p << 16) | 0xFFFD) for p in range(1, 14)),
    (0xE1000, 0xEFFFD),
)
_IPRIVATE = _cp_class((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_IUNRESERVED = _UNRESERVED + _UCSCHAR
_IPCHAR = f"(?:[{_IUNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_ISEGMENT = f"{_IPCHAR}*"
_ISEGMENT_NZ = f"{_IPCHAR}+"
_ISEGMENT_NZ_NC = f"(?:[{_IUNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_IPATH_ABEMPTY = f"(?:/{_ISEGMENT})*"
_IPATH_ABSOLUTE = f"/(?:{_ISEGMENT_NZ}(?:/{_ISEGMENT})*)?"
_IPATH_NOSCHEME = f"{_ISEGMENT_NZ_NC}(?:/{_ISEGMENT})*"
_IPATH_ROOTLESS = f"{_ISEGMENT_NZ}(?:/{_ISEGMENT})*"
_IUSERINFO = f"(?:[{_IUNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_IREG_NAME = f"(?:[{_IUNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_IHOST = f"(?:{_IP_LITERAL}|{_IPV4}|{_IREG_NAME})"
_IAUTHORITY = f"(?:{_IUSERINFO}@)?{_IHOST}(?::[0-9]*)?"
_IQUERY = f"(?:{_IPCHAR}|[{_IPRIVATE}/?])*"
_IFRAGMENT = f"(?:{_IPCHAR}|[/?])*"
_ITAIL = rf"(?:\?{_IQUERY})?(?:#{_IFRAGMENT})?"
_IRI = f"{_SCHEME}:(?://{_IAUTHORITY}{_IPATH_ABEMPTY}|{_IPATH_ABSOLUTE}|{_IPATH_ROOTLESS}|){_ITAIL}"
_IRELATIVE_REF = f"(?://{_IAUTHORITY}{_IPATH_ABEMPTY}|{_IPATH_ABSOLUTE}|{_IPATH_NOSCHEME}|){_ITAIL}"


def iri() -> CodepointDFA:
    """RFC 3987 §2.2 ``IRI = scheme ":" ihier-part [ "?" iquery ] [ "#" ifragment ]``: RFC 3986's
    grammar with ``iunreserved`` adding ``ucschar`` (the non-ASCII ranges of §2.2) and
    ``iquery`` (not ``ifragment``) adding ``iprivate``; ``IP-literal``, ``IPv4address``,
    ``scheme`` and ``port`` stay ASCII. No checker in jsonschema without ``rfc3987``."""
    return _rx(_IRI)


def iri_reference() -> CodepointDFA:
    """RFC 3987 §2.2 ``IRI-reference = IRI / irelative-ref``."""
    return _rx(f"(?:{_IRI}|{_IRELATIVE_REF})")


# -- RFC 6570 URI templates ---------------------------------------------------------------------------
def uri_template() -> CodepointDFA:
    """RFC 6570 §2 ``URI-Template = *( literals / expression )`` (level 4, the whole grammar)::

        literals      = %x21 / %x23-24 / %x26-3B / %x3D / %x3F-5B / %x5D / %x5F / %x61-7A
                      / %x7E / ucschar / iprivate / pct-encoded
        expression    = "{" [ operator ] variable-list "}"
        operator      = "+" / "#" / "." / "/" / ";" / "?" / "&" / "=" / "," / "!" / "@" / "|"
        variable-list = varspec *( "," varspec )
        varspec       = varname [ ":" max-length / "*" ]
        varname       = varchar *( ["."] varchar ),  varchar = ALPHA / DIGIT / "_" / pct-encoded
        max-length    = %x31-39 0*3DIGIT

    ``literals`` includes the apostrophe (%x27), an RFC 3986 sub-delim, as the RFC's errata and
    the JSON-Schema-Test-Suite read it (the RFC's first printing lists %x26 and %x28-3B). The
    operators ``=`` ``,`` ``!`` ``@`` ``|`` are reserved but in the grammar. No checker in
    jsonschema without ``uri_template``.
    """
    literal = rf"(?:[\x21\x23\x24\x26-\x3b\x3d\x3f-\x5b\x5d\x5f\x61-\x7a\x7e{_UCSCHAR}{_IPRIVATE}]|{_PCT})"
    varchar = f"(?:[A-Za-z0-9_]|{_PCT})"
    varspec = rf"{varchar}(?:\.?{varchar})*(?::[1-9][0-9]{{0,3}}|\*)?"
    expression = rf"\{{[+#./;?&=,!@|]?{varspec}(?:,{varspec})*\}}"
    return _rx(f"(?:{literal}|{expression})*")


#: Builders by format name, called with the leap second reading (``time`` and ``date-time``).
FORMATS: dict[str, Callable[[LeapSeconds], CodepointDFA]] = {
    "date": lambda leap: date(),
    "time": time,
    "date-time": date_time,
    "duration": lambda leap: duration(),
    "email": lambda leap: email(),
    "idn-email": lambda leap: idn_email(),
    "ipv4": lambda leap: ipv4(),
    "ipv6": lambda leap: ipv6(),
    "uuid": lambda leap: uuid(),
    "hostname": lambda leap: hostname(),
    "uri": lambda leap: uri(),
    "uri-reference": lambda leap: uri_reference(),
    "iri": lambda leap: iri(),
    "iri-reference": lambda leap: iri_reference(),
    "uri-template": lambda leap: uri_template(),
    "json-pointer": lambda leap: json_pointer(),
    "relative-json-pointer": lambda leap: relative_json_pointer(),
}

#: Formats of the 2020-12 vocabulary (validation §7.3) with no exact implementation, and why.
UNSUPPORTED: dict[str, str] = {
    "idn-hostname": (
        "DNS (RFC 1034 §3.1) limits a label to 63 octets and a name to 253, in the A-label form "
        "(RFC 5891 §4.2.4), and "
        "an xn-- label must decode to a U-label (RFC 5890 §2.3.2.1): the A-label's length is a Punycode "
        "length (RFC 3492) that depends on the sorted code points of the whole label and can shrink "
        "when a code point is appended (its bias adapts), so a prefix's viability is a search over "
        "completions with no bound found, and the "
        "decoder's state is the growing list of inserted code points; neither is a code point "
        "automaton of practical size (the code point rules of RFC 5891-5893 are one of about 250 "
        "states, refdecoder._idna, but their product with even a 63/253 count of code points "
        "would have millions)"
    ),
}


@lru_cache(maxsize=64)
def _build(name: str, leap_seconds: LeapSeconds) -> CodepointDFA | None:
    build = FORMATS.get(name)
    return None if build is None else build(leap_seconds)


def format_dfa(
    name: str, *, leap_seconds: LeapSeconds = "utc", max_states: int | None = None
) -> CodepointDFA | None:
    """The exact language of format ``name``, or None when it has no exact implementation here
    (:data:`UNSUPPORTED` says why for the formats of the 2020-12 vocabulary).

    ``leap_seconds`` (``time``, ``date-time``): ``"utc"`` accepts second 60 exactly when the
    time is 23:59:60 UTC (RFC 3339 §5.7 as the JSON-Schema-Test-Suite reads it; ~11,000 states),
    ``"never"`` rejects it (Python's ``rfc3339_validator``, which jsonschema uses; ~60 states).
    Raises :class:`LimitExceeded` when the exact automaton has more than ``max_states`` states
    (default: the running compilation's ``Limits.dfa_states``; ``hostname`` needs
    :data:`HOSTNAME_STATES`). Each automaton is built once per process, whatever the bound (the
    constructions are fixed work, a fraction of a second each), and compared with it.
    """
    if leap_seconds not in ("utc", "never"):
        raise ValueError(f"leap_seconds must be 'utc' or 'never', not {leap_seconds!r}")
    bound = dfa_bound(max_states)
    got = _build(name, leap_seconds if name in ("time", "date-time") else "utc")
    if got is not None and got.size > bound:
        raise LimitExceeded("dfa_states", got.size, bound, f"format {name!r}")
    return got
