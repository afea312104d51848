"""Independent ``format`` checkers, used only to check the reference (docs/design.md §4, invariant 1).

When a profile asserts formats, the independent validator (``props.corpus._validate``) judges each
``format`` with these functions instead of ``jsonschema``'s own checkers, which it keeps only for
the formats the reference refuses (``idn-hostname``). ``regex`` is ECMA-262 patterns read by
``props.corpus.ecma_pattern_check`` (jsonschema's own checker compiles them with Python's ``re``). jsonschema's
checkers are not RFC readings everywhere: ``email`` and ``idn-email`` only look for an ``@``;
``date-time`` and ``time`` reject every leap second; ``date`` rejects year 0000; ``hostname``
(``fqdn``) accepts a trailing dot and a trailing newline; ``duration``, ``iri``, ``iri-reference``
and ``uri-template`` are not checked at all without optional packages; ``relative-json-pointer``
follows an older draft. A validator that says "valid" where the RFC says "invalid" cannot certify
a finding, and one that disagrees with the reference is a self-check note on every output.

Each checker here is the RFC's grammar written again, without ``refdecoder``: Python ``re`` with
explicit ASCII classes (``re.ASCII`` is not enough: ``[0-9]`` spelled out, no ``\\d``), ``fullmatch``
(never ``$``, which matches before a final newline), and arithmetic for what a grammar does not say
(days per month, leap seconds, lengths). The readings are the reference's, listed in
``refdecoder._formats``: RFC 3339 with leap seconds at 23:59:60 UTC, RFC 5321 mailboxes, RFC 1123
host names (A-labels not decoded), RFC 3986/3987 URIs and IRIs, RFC 6570 templates (with the
apostrophe), RFC 6901 pointers and draft-bhutton-relative-json-pointer-00.

:data:`CHECKS` maps a format name to ``str -> bool``; :func:`format_checker` is ``jsonschema``'s
2020-12 ``FormatChecker`` with them in place.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from props.corpus.ecma_pattern_check import ecma_pattern_valid

__all__ = ["CHECKS", "format_checker"]


# -- RFC 3339 §5.6, Appendix A (dates, times, durations) -------------------------------------------
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))")


def _days_in_month(year: int, month: int) -> int:
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)  # Appendix C: 0000 is a leap year
    return (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


def is_date(s: str) -> bool:
    """``full-date``; §5.7 day limits per month and leap year."""
    m = _DATE.fullmatch(s)
    if m is None:
        return False
    year, month, day = (int(g) for g in m.groups())
    return 1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)


def is_time(s: str) -> bool:
    """``full-time``; second 60 only when the time in UTC (local minus offset) is 23:59:60."""
    m = _TIME.fullmatch(s)
    if m is None:
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    if hour > 23 or minute > 59 or second > 60:
        return False
    offset = 0
    if m[4] is not None:
        oh, om = int(m[5]), int(m[6])
        if oh > 23 or om > 59:
            return False
        offset = (oh * 60 + om) * (1 if m[4] == "+" else -1)
    return second < 60 or (hour * 60 + minute - offset) % 1440 == 23 * 60 + 59


def is_date_time(s: str) -> bool:
    """``full-date "T" full-time``, ``T`` in either case."""
    return len(s) > 11 and s[10] in "Tt" and is_date(s[:10]) and is_time(s[11:])


def is_duration(s: str) -> bool:
    """Appendix A ``duration``, designators in either case (RFC 5234 §2.3)."""
    if not s.isascii() or s[:1] not in ("P", "p"):
        return False
    body = s[1:].upper()
    if re.fullmatch(r"[0-9]+W", body):
        return True
    date_part, t, time_part = body.partition("T")

    def units(text: str, order: str) -> bool:
        """``text`` is one or more ``<digits><unit>`` with units consecutive in ``order``."""
        got = re.findall(r"[0-9]+([A-Z])", text)
        return bool(got) and re.fullmatch(r"(?:[0-9]+[A-Z])+", text) is not None and "".join(got) in order

    if t and not units(time_part, "HMS"):
        return False
    if date_part:
        return units(date_part, "YMD")
    return bool(t)


# -- RFC 5321 §4.1.2 mailboxes ------------------------------------------------------------------------
_ATEXT = "A-Za-z0-9!#$%&'*+/=?^_`{|}~-"
_LOCAL = re.compile(rf"[{_ATEXT}]+(?:\.[{_ATEXT}]+)*|\"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*\"")
_SUBDOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_SNUM = r"(?:25[0-5]|2[0-4][0-9]|[01][0-9]{2}|[0-9]{1,2})"
_IPV4_LITERAL = rf"{_SNUM}(?:\.{_SNUM}){{3}}"


def _ipv6_literal(text: str) -> bool:
    """RFC 5321 §4.1.3 ``IPv6-addr``: 8 groups, or ``::`` standing for at least two (at most 6
    explicit groups), each form optionally ending in an IPv4 literal that counts as 2 groups."""
    v4 = False
    if "." in text:
        head, _, tail = text.rpartition(":")
        if not re.fullmatch(_IPV4_LITERAL, tail):
            return False
        text, v4 = head + ":", True
    hexes = r"[0-9A-Fa-f]{1,4}"
    limit = 6 if v4 else 8
    if "::" in text:
        left, _, right = text.partition("::")
        if v4 and right:  # the IPv4 part follows "::" directly or the colon after a group
            if len(right) < 2 or not right.endswith(":"):
                return False
            right = right[:-1]
        if "::" in right:
            return False
        groups = (left.split(":") if left else []) + (right.split(":") if right else [])
        return all(re.fullmatch(hexes, g) for g in groups) and len(groups) <= limit - 2
    body = text[:-1] if v4 else text
    groups = body.split(":")
    return all(re.fullmatch(hexes, g) for g in groups) and len(groups) == limit


def is_email(s: str) -> bool:
    """``Mailbox = Local-part "@" ( Domain / address-literal )``, ASCII, without the
    General-address-literal and the §4.5.3.1 size limits (as the reference)."""
    at = s.rfind("@")
    if at < 0 or not _LOCAL.fullmatch(s[:at]):
        return False
    domain = s[at + 1 :]
    if domain.startswith("[") and domain.endswith("]"):
        inner = domain[1:-1]
        if inner[:5].lower() == "ipv6:":
            return _ipv6_literal(inner[5:])
        return re.fullmatch(_IPV4_LITERAL, inner) is not None
    return re.fullmatch(rf"{_SUBDOMAIN}(?:\.{_SUBDOMAIN})*", domain) is not None


# -- RFC 6531 mailboxes and IDNA2008 names, through the ``idna`` package ----------------------------
_UTF8_NON_ASCII = "\x80-\ud7ff\ue000-\U0010ffff"  # RFC 6532 §3.1, scalar values only
_LOCAL_6531 = re.compile(
    rf"[{_UTF8_NON_ASCII}{_ATEXT}]+(?:\.[{_UTF8_NON_ASCII}{_ATEXT}]+)*"
    rf"|\"(?:[\x20\x21\x23-\x5b\x5d-\x7e{_UTF8_NON_ASCII}]|\\[\x20-\x7e])*\""
)
#: FULL STOP and the dots RFC 3490 §3.1 maps to it (``idna``'s ``_unicode_dots_re``).
IDN_SEPARATORS = ".\u3002\uff0e\uff61"


def _u_label_ok(label: str) -> bool:
    """IDNA2008's code point rules for one U-label by ``idna``'s own tables and functions (an
    implementation independent of the reference's): RFC 5891 §4.2.3.1 hyphens, §4.2.3.2 no leading
    mark, RFC 5892 PVALID / CONTEXTJ / CONTEXTO with Appendix A. Not NFC, not the length of the
    A-label (the reference's readings). Code points unassigned in this Python's ``unicodedata`` are
    rejected: ``idna``'s tables are of a newer Unicode, and the reference's are pinned to Python
    3.11's (14.0.0), so the two agree on code points assigned in both."""
    import unicodedata

    from idna import core, idnadata
    from idna.intranges import intranges_contain

    try:
        core.check_hyphen_ok(label)
        core.check_initial_combiner(label)
    except core.IDNAError:
        return False
    classes = idnadata.codepoint_classes
    for pos, ch in enumerate(label):
        cp = ord(ch)
        if unicodedata.category(ch) == "Cn" and cp not in (0xFFFE, 0xFFFF):
            return False
        if intranges_contain(cp, classes["PVALID"]):
            continue
        if intranges_contain(cp, classes["CONTEXTJ"]) and core.valid_contextj(label, pos):
            continue
        if intranges_contain(cp, classes["CONTEXTO"]) and core.valid_contexto(label, pos):
            continue
        return False
    return True


def _bidi_name_ok(labels: list[str]) -> bool:
    """RFC 5893 §2 in a Bidi domain name (an R, AL or AN character anywhere, §1.4): every label
    passes rules 1-6 (``idna.core.check_bidi`` with ``check_ltr``; ``idna.encode`` itself only
    checks labels that hold such a character)."""
    import unicodedata

    from idna import core

    if not any(unicodedata.bidirectional(ch) in ("R", "AL", "AN") for label in labels for ch in label):
        return True
    for label in labels:
        try:
            core.check_bidi(label, check_ltr=True)
        except core.IDNAError:
            return False
    return True


def idn_name_ok(s: str, mode: str) -> bool:
    """The reference's IDNA2008 names without lengths (``refdecoder._idna``): ``"hostname"``
    splits at the four dots; an ASCII label is letters, digits and inner hyphens, ``--`` in the
    third and fourth positions only after ``xn`` (read as LDH, not decoded); ``"mail"`` splits at
    ``.``, ASCII labels as RFC 5321 ``Let-dig [Ldh-str]``. Any other label is a U-label."""
    labels = re.split(f"[{IDN_SEPARATORS}]", s) if mode == "hostname" else s.split(".")
    for label in labels:
        if label.isascii():
            if not re.fullmatch(_SUBDOMAIN, label):
                return False
            if mode == "hostname" and label[2:4] == "--" and label[:2].lower() != "xn":
                return False
        elif not _u_label_ok(label):
            return False
    return _bidi_name_ok(labels)


def is_idn_email(s: str) -> bool:
    """RFC 6531 §3.3: RFC 5321's ``Mailbox`` with ``UTF8-non-ascii`` in ``atext`` and
    ``qtextSMTP`` and U-labels in the domain (:func:`idn_name_ok`, ``"mail"``)."""
    at = s.rfind("@")
    if at < 0 or not _LOCAL_6531.fullmatch(s[:at]):
        return False
    domain = s[at + 1 :]
    if domain.startswith("[") and domain.endswith("]"):
        return is_email("a@" + domain)
    return idn_name_ok(domain, "mail")


# -- host names and addresses ------------------------------------------------------------------------
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def is_hostname(s: str) -> bool:
    """RFC 1123 §2.1: labels of 1-63 letters, digits and inner hyphens; 253 characters at most."""
    return 1 <= len(s) <= 253 and all(_LABEL.fullmatch(label) for label in s.split("."))


def is_ipv4(s: str) -> bool:
    """Dotted quad of decimal octets without leading zeros (``ipaddress``, Python >= 3.9.5)."""
    try:
        ipaddress.IPv4Address(s)
    except ValueError:
        return False
    return True


def is_ipv6(s: str) -> bool:
    """RFC 4291 §2.2 text forms (``ipaddress``), no zone id."""
    if "%" in s:
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def is_uuid(s: str) -> bool:
    """RFC 4122 §3 string form, any version and variant, hex digits in either case."""
    return re.fullmatch(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}", s) is not None


# -- RFC 3986 URIs and RFC 3987 IRIs -------------------------------------------------------------------
def _uri_grammar(ucs: str, private: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(absolute, reference) patterns of RFC 3986 §3/§4.1, or of RFC 3987 §2.2 when ``ucs`` and
    ``private`` add ``ucschar`` to the unreserved characters and ``iprivate`` to the query."""
    hexdig = "[0-9A-Fa-f]"
    pct = f"%{hexdig}{hexdig}"
    unreserved = f"A-Za-z0-9._~\\-{ucs}"
    sub_delims = "!$&'()*+,;="
    pchar = f"(?:[{unreserved}{sub_delims}:@]|{pct})"
    dec_octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
    ipv4 = rf"{dec_octet}(?:\.{dec_octet}){{3}}"
    h16 = f"{hexdig}{{1,4}}"
    ls32 = f"(?:{h16}:{h16}|{ipv4})"
    ipv6 = "|".join(  # RFC 3986 §3.2.2 IPv6address, its nine forms
        [
            f"(?:{h16}:){{6}}{ls32}",
            f"::(?:{h16}:){{5}}{ls32}",
            f"(?:{h16})?::(?:{h16}:){{4}}{ls32}",
            f"(?:(?:{h16}:){{0,1}}{h16})?::(?:{h16}:){{3}}{ls32}",
            f"(?:(?:{h16}:){{0,2}}{h16})?::(?:{h16}:){{2}}{ls32}",
            f"(?:(?:{h16}:){{0,3}}{h16})?::{h16}:{ls32}",
            f"(?:(?:{h16}:){{0,4}}{h16})?::{ls32}",
            f"(?:(?:{h16}:){{0,5}}{h16})?::{h16}",
            f"(?:(?:{h16}:){{0,6}}{h16})?::",
        ]
    )
    ip_literal = rf"\[(?:{ipv6}|[Vv]{hexdig}+\.[A-Za-z0-9._~\-{sub_delims}:]+)\]"
    reg_name = f"(?:[{unreserved}{sub_delims}]|{pct})*"
    userinfo = f"(?:[{unreserved}{sub_delims}:]|{pct})*"
    authority = f"(?:{userinfo}@)?(?:{ip_literal}|{ipv4}|{reg_name})(?::[0-9]*)?"
    segment, segment_nz = f"{pchar}*", f"{pchar}+"
    segment_nz_nc = f"(?:[{unreserved}{sub_delims}@]|{pct})+"
    abempty = f"(?:/{segment})*"
    absolute = f"/(?:{segment_nz}(?:/{segment})*)?"
    rootless = f"{segment_nz}(?:/{segment})*"
    noscheme = f"{segment_nz_nc}(?:/{segment})*"
    query = f"(?:{pchar}|[/?{private}])*"
    fragment = f"(?:{pchar}|[/?])*"
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    scheme = "[A-Za-z][A-Za-z0-9+.\\-]*"
    absolute_uri = f"{scheme}:(?://{authority}{abempty}|{absolute}|{rootless}|){tail}"
    relative = f"(?://{authority}{abempty}|{absolute}|{noscheme}|){tail}"
    return re.compile(absolute_uri), re.compile(f"{absolute_uri}|{relative}")


_UCSCHAR = "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef" + "".join(
    f"{chr(p << 16)}-{chr((p << 16) | 0xFFFD)}" for p in range(1, 14)
)
_UCSCHAR += "\U000e1000-\U000efffd"
_IPRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_URI, _URI_REFERENCE = _uri_grammar("", "")
_IRI, _IRI_REFERENCE = _uri_grammar(_UCSCHAR, _IPRIVATE)


# -- RFC 6570 URI templates -------------------------------------------------------------------------
_PCT = "%[0-9A-Fa-f]{2}"
_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = re.compile(
    rf"(?:[!#$&-;=?-\[\]_a-z~{_UCSCHAR}{_IPRIVATE}]|{_PCT}|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"
)


def is_uri_template(s: str) -> bool:
    """RFC 6570 §2.1-2.4 (level 4), ``literals`` with the apostrophe."""
    return _URI_TEMPLATE.fullmatch(s) is not None


# -- RFC 6901 pointers ------------------------------------------------------------------------------------
def is_json_pointer(s: str) -> bool:
    """``*( "/" reference-token )``, ``~`` only in ``~0`` and ``~1``."""
    if s and not s.startswith("/"):
        return False
    return all(re.fullmatch(r"(?:[^~]|~[01])*", token, re.DOTALL) for token in s.split("/")[1:])


def is_relative_json_pointer(s: str) -> bool:
    """draft-bhutton-relative-json-pointer-00 §3: a non-negative integer, an optional
    ``+``/``-`` and positive integer, then ``#`` or a JSON pointer."""
    m = re.match(r"(?:0|[1-9][0-9]*)(?:[+-][1-9][0-9]*)?", s)
    if m is None:
        return False
    rest = s[m.end() :]
    return rest == "#" or is_json_pointer(rest)


#: The reference's formats, each as a ``str -> bool``.
CHECKS: dict[str, Callable[[str], bool]] = {
    "date": is_date,
    "time": is_time,
    "date-time": is_date_time,
    "duration": is_duration,
    "email": is_email,
    "idn-email": is_idn_email,
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "uuid": is_uuid,
    "uri": lambda s: _URI.fullmatch(s) is not None,
    "uri-reference": lambda s: _URI_REFERENCE.fullmatch(s) is not None,
    "iri": lambda s: _IRI.fullmatch(s) is not None,
    "iri-reference": lambda s: _IRI_REFERENCE.fullmatch(s) is not None,
    "uri-template": is_uri_template,
    "json-pointer": is_json_pointer,
    "relative-json-pointer": is_relative_json_pointer,
    "regex": ecma_pattern_valid,
}


@lru_cache(maxsize=1)
def format_checker() -> Any:
    """``jsonschema``'s draft 2020-12 ``FormatChecker`` with :data:`CHECKS` in place of its own
    checkers (non-strings pass, as every format ignores them); one shared instance."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    for name, check in CHECKS.items():
        checker.checkers[name] = (_strings_only(check), ())
    return checker


def _strings_only(check: Callable[[str], bool]) -> Callable[[object], bool]:
    def run(instance: object) -> bool:
        return not isinstance(instance, str) or check(instance)

    return run
