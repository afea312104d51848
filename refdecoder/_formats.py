"""Exact languages of JSON Schema ``format`` values (draft 2020-12 §7.3) as code point DFAs.

Each format is the language of its RFC grammar (ABNF, RFC 5234), built from Python-flavour
regular expressions over explicit ASCII classes (never ``\\d``/``\\w``, which are Unicode in
``re``) plus the DFA algebra where a rule is not a plain grammar (days per month, leap seconds,
length limits). ABNF quoted strings are case-insensitive (RFC 5234 §2.3), so literal letters such
as RFC 3339's ``T``/``Z``, the duration designators and ``IPv6:`` accept either case.

:func:`format_dfa` returns ``None`` for a format we do not implement exactly (``idn-*``,
``iri*``, ``uri-template``, ``regex``, ``relative-json-pointer``, unknown names): the caller
refuses it or treats it as an annotation. Where a Python checker (the ones ``jsonschema`` uses)
disagrees with the RFC, the RFC wins; each function lists the known differences.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal

from refdecoder._fsa import MAX_STATES, CodepointDFA, _canonical
from refdecoder._regex import compile_regex_dfa
from refdecoder.errors import LimitExceeded

__all__ = ["format_dfa", "FORMATS", "HOSTNAME_STATES", "LeapSeconds"]

LeapSeconds = Literal["utc", "never"]

#: States of the minimal hostname automaton (253-character names of 63-character labels); the
#: test suite checks this number. Above the default bound: pass ``max_states`` to build it.
HOSTNAME_STATES = 23_809


def _rx(pattern: str, max_states: int = 20_000) -> CodepointDFA:
    return compile_regex_dfa(pattern, flavor="python", mode="fullmatch", max_states=max_states)


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


def _leap_second_times() -> CodepointDFA:
    """``HH:MM:60[frac]offset`` where the local time HH:MM minus the offset is 23:59 UTC.

    A direct DFA: after the local time the state remembers the minute of the day L (1440
    values); the only offsets accepted are those with L - offset ≡ 23:59 (mod 24 h).
    """
    names: dict[object, int] = {}
    rows: list[dict[int, int]] = []

    def st(name: object) -> int:
        got = names.get(name)
        if got is None:
            got = names[name] = len(rows)
            rows.append({})
        return got

    def edge(a: object, chars: str, b: object) -> None:
        sa, sb = st(a), st(b)
        for ch in chars:
            assert rows[sa].get(ord(ch), sb) == sb, "the construction is deterministic"
            rows[sa][ord(ch)] = sb

    def expect(text: str) -> object:
        """A state that accepts exactly ``text`` then ends (shared by suffix)."""
        name = ("expect", text)
        if text and name not in names:
            edge(name, text[0], expect(text[1:]))
        st(name)
        return name

    end = expect("")
    digits = "0123456789"
    for minute in range(1440):
        local = f"{minute // 60:02d}:{minute % 60:02d}"
        for i, ch in enumerate(local):
            edge(("local", local[:i]), ch, ("local", local[: i + 1]))
        edge(("local", local), ":", ("s", minute))
        edge(("s", minute), "6", ("s6", minute))
        edge(("s6", minute), "0", ("w", minute))
        edge(("w", minute), ".", ("f", minute))
        edge(("f", minute), digits, ("g", minute))
        edge(("g", minute), digits, ("g", minute))
        plus = (minute - 1439) % 1440
        minus = (1439 - minute) % 1440
        for state in (("w", minute), ("g", minute)):
            if minute == 1439:
                edge(state, "Zz", end)
            edge(state, "+", expect(f"{plus // 60:02d}:{plus % 60:02d}"))
            edge(state, "-", expect(f"{minus // 60:02d}:{minus % 60:02d}"))
    table = [[(c, c, t) for c, t in sorted(r.items())] for r in rows]
    return _canonical(table, st(("local", "")), [st(end)])


@lru_cache(maxsize=2)
def time(leap_seconds: LeapSeconds = "utc") -> CodepointDFA:
    """RFC 3339 §5.6 ``full-time``: ``partial-time time-offset``, ``Z`` in either case.

    Leap seconds (``time-second`` 60): accepted exactly when the time converted to UTC by the
    offset is 23:59:60, the rule of RFC 3339 §5.7 as the JSON-Schema-Test-Suite reads it;
    ``-00:00`` counts as UTC. We do not consult the leap second table (Appendix D), which a
    time without a date could not use anyway. Differences from Python: jsonschema's checker
    (``rfc3339_validator`` on ``1970-01-01T`` + value) rejects every leap second.
    """
    no_leap = _rx(_TIME_NO_LEAP)
    return no_leap if leap_seconds == "never" else no_leap.union(_leap_second_times())


def date_time(leap_seconds: LeapSeconds = "utc") -> CodepointDFA:
    """RFC 3339 §5.6 ``date-time`` = ``full-date "T" full-time``, ``T`` in either case.

    Leap seconds as in :func:`time` on any date (no leap second table). Differences from Python:
    ``rfc3339_validator`` rejects leap seconds and year 0000.
    """
    return _rx(_FULL_DATE + "[Tt]").concat(time(leap_seconds))


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
    atext = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
    dot_string = rf"{atext}+(?:\.{atext}+)*"
    quoted_string = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"'
    let_dig = "[A-Za-z0-9]"
    sub_domain = f"{let_dig}(?:[A-Za-z0-9-]*{let_dig})?"
    domain = rf"{sub_domain}(?:\.{sub_domain})*"
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
    literal = rf"\[(?:{ipv4}|{_ci('IPv6:')}{ipv6})\]"
    return _rx(f"(?:{dot_string}|{quoted_string})@(?:{domain}|{literal})")


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


def hostname(max_states: int = MAX_STATES) -> CodepointDFA:
    """RFC 1123 §2.1 host name: dot-separated labels of letters, digits and hyphens, 1-63
    characters, not starting or ending with a hyphen (a leading digit is allowed), at most 253
    characters in all (RFC 1035's 255-octet wire limit), no trailing dot.

    Not exact for draft 2020-12's IDNA reading: ``xn--`` labels are accepted without checking
    that they are valid A-labels (RFC 5891), and RFC 5891's "no ``--`` in positions 3-4" rule is
    not applied. Differences from Python's ``fqdn`` (jsonschema's checker): it accepts a trailing
    dot, a trailing newline (its regex ends in ``$``) and non-ASCII digits and letters that match
    ``\\d`` or case-fold to ASCII (e.g. U+212A KELVIN SIGN).
    """
    if max_states < HOSTNAME_STATES:  # fail fast instead of building 20,000 states first
        raise LimitExceeded("dfa_states", HOSTNAME_STATES, max_states, "format 'hostname'")
    label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    names = _rx(rf"{label}(?:\.{label})*")
    # the product visits a few more (pairs of) states than the minimal automaton keeps
    out = names.length_between(1, 253, max_states=2 * max_states)
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


def json_pointer() -> CodepointDFA:
    """RFC 6901 §3: ``*( "/" reference-token )``, ``~`` only as ``~0`` or ``~1``."""
    return _rx("(?:/(?:[^/~]|~[01])*)*")


#: Builders by format name, called with (leap_seconds, max_states).
FORMATS: dict[str, Callable[[LeapSeconds, int], CodepointDFA]] = {
    "date": lambda leap, n: date(),
    "time": lambda leap, n: time(leap),
    "date-time": lambda leap, n: date_time(leap),
    "duration": lambda leap, n: duration(),
    "email": lambda leap, n: email(),
    "ipv4": lambda leap, n: ipv4(),
    "ipv6": lambda leap, n: ipv6(),
    "uuid": lambda leap, n: uuid(),
    "hostname": lambda leap, n: hostname(n),
    "uri": lambda leap, n: uri(),
    "uri-reference": lambda leap, n: uri_reference(),
    "json-pointer": lambda leap, n: json_pointer(),
}


_CACHE: dict[tuple[str, str, int], CodepointDFA | None | LimitExceeded] = {}


def format_dfa(
    name: str, *, leap_seconds: LeapSeconds = "utc", max_states: int = MAX_STATES
) -> CodepointDFA | None:
    """The exact language of format ``name``, or None when it has no exact implementation here.

    ``leap_seconds`` (``time``, ``date-time``): ``"utc"`` accepts second 60 exactly when the
    time is 23:59:60 UTC (RFC 3339 §5.7 as the JSON-Schema-Test-Suite reads it; ~11,000 states),
    ``"never"`` rejects it (Python's ``rfc3339_validator``, which jsonschema uses; ~60 states).
    Raises :class:`LimitExceeded` when the exact automaton has more than ``max_states`` states
    (``hostname`` needs :data:`HOSTNAME_STATES`). Results, and limit failures, are memoized.
    """
    if leap_seconds not in ("utc", "never"):
        raise ValueError(f"leap_seconds must be 'utc' or 'never', not {leap_seconds!r}")
    key = (name, leap_seconds if name in ("time", "date-time") else "utc", max_states)
    got = _CACHE.get(key, _MISSING)
    if got is _MISSING:
        build = FORMATS.get(name)
        try:
            got = None if build is None else build(leap_seconds, max_states)
        except LimitExceeded as e:
            got = LimitExceeded(e.limit, e.value, e.bound, f"format {name!r}")
        _CACHE[key] = got
    if isinstance(got, LimitExceeded):
        raise got
    assert got is None or isinstance(got, CodepointDFA)
    return got


_MISSING: Any = object()
