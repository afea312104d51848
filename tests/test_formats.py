"""Exact format languages (``refdecoder._formats``) against independent checks.

Each format is compared with (a) the JSON-Schema-Test-Suite draft2020-12 ``optional/format``
cases, (b) an independent Python check — the standard library or the checker jsonschema uses,
restricted to where it follows the RFC, or a hand-written parser of the RFC's ABNF — on
generated members (random walks of the automaton and values built by Python) and on mutated
strings. Known deviations of the Python checkers are predicates with a reason.
"""

from __future__ import annotations

import calendar
import datetime
import ipaddress
import json
import random
import re
import uuid as uuidlib
from collections.abc import Callable

import pytest

from refdecoder._formats import HOSTNAME_STATES, format_dfa
from refdecoder._fsa import CodepointDFA
from refdecoder.errors import LimitExceeded

from ._data import shared_data

# -- generation helpers --------------------------------------------------------------------------------
_DIST: dict[object, list[int]] = {}


def distances(dfa: CodepointDFA) -> list[int]:
    """Shortest distance from each state to a final state (memoized per language)."""
    got = _DIST.get(dfa.key)
    if got is not None:
        return got
    n = dfa.num_states
    preds: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for _, _, t in dfa.row(s):
            preds[t].append(s)
    dist = [1 << 30] * n
    queue = sorted(dfa.finals)
    for f in queue:
        dist[f] = 0
    for t in queue:
        for s in preds[t]:
            if dist[s] == 1 << 30:
                dist[s] = dist[t] + 1
                queue.append(s)
    _DIST[dfa.key] = dist
    return dist


def sample(dfa: CodepointDFA, rng: random.Random, soft_len: int = 40) -> str:
    """A random member: a random walk that heads for a final state once past ``soft_len``."""
    dist = distances(dfa)
    out: list[str] = []
    s = 0
    while True:
        if dfa.is_final(s) and (rng.random() < 0.15 or len(out) >= soft_len or not dfa.row(s)):
            return "".join(out)
        row = dfa.row(s)
        if len(out) >= soft_len:
            row = tuple(e for e in row if dist[e[2]] < dist[s])
        lo, hi, t = rng.choice(row)
        if rng.random() < 0.8 and lo < 0x7F:
            hi = min(hi, 0x7E)
        out.append(chr(rng.randint(lo, hi)))
        s = t


def mutate(s: str, rng: random.Random, chars: str, n: int = 8) -> list[str]:
    out = []
    for _ in range(n):
        i = rng.randint(0, len(s))
        op = rng.randrange(4)
        c = rng.choice(chars)
        if op == 0:
            out.append(s[:i] + c + s[i:])
        elif op == 1 and s:
            out.append(s[: max(i - 1, 0)] + s[i:])
        elif op == 2 and s:
            j = min(i, len(s) - 1)
            out.append(s[:j] + c + s[j + 1 :])
        elif s:
            j = min(i, len(s) - 1)
            out.append(s[:j] + s[j] + s[j:])  # duplicate a character
    return out


def check(
    name: str,
    oracle: Callable[[str], bool],
    extra: list[str],
    chars: str,
    *,
    walks: int = 40,
    dfa: CodepointDFA | None = None,
) -> int:
    d = dfa if dfa is not None else format_dfa(name)
    assert d is not None
    rng = random.Random(name)
    cands = list(extra) + [sample(d, rng) for _ in range(walks)] + d.examples(5)
    cands += [m for c in list(cands) for m in mutate(c, rng, chars)]
    for s in cands:
        assert d.accepts(s) == oracle(s), (name, s, d.accepts(s))
    return len(cands)


# -- JSON-Schema-Test-Suite ----------------------------------------------------------------------------
SUITE_FORMATS = [
    "date",
    "time",
    "date-time",
    "duration",
    "email",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
    "uri-reference",
    "json-pointer",
    "hostname",
    "iri",
    "iri-reference",
    "uri-template",
    "relative-json-pointer",
]


def hostname_suite_deviation(data: str) -> str | None:
    """Cases the RFC 1123 language does not decide the way draft 2020-12's IDNA reading does."""
    labels = data.lower().split(".")
    if any(label.startswith("xn--") for label in labels):
        return "A-labels are not checked against RFC 5891 (punycode, contextual rules)"
    if any(len(label) >= 4 and label[2:4] == "--" for label in labels):
        return "RFC 5891 '--' in positions 3-4 is not applied"
    return None


@pytest.mark.parametrize("name", SUITE_FORMATS)
def test_json_schema_test_suite(name):
    path = shared_data() / "json-schema-test-suite/tests/draft2020-12/optional/format" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    dfa = format_dfa(name)
    assert dfa is not None
    n = 0
    for group in json.loads(path.read_text()):
        for t in group["tests"]:
            if not isinstance(t["data"], str):
                continue
            got = dfa.accepts(t["data"])
            if got != t["valid"] and name == "hostname" and hostname_suite_deviation(t["data"]):
                assert got and not t["valid"]  # the only direction we deviate in
                continue
            assert got == t["valid"], (name, t["data"], t["description"])
            n += 1
    assert n > 0


# -- dates and times (RFC 3339) --------------------------------------------------------------------------
def days_in_month(y: int, m: int) -> int:
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    return [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]


def date_oracle(s: str) -> bool:
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", s)
    if not m:
        return False
    y, mo, d = map(int, m.groups())
    ok = 1 <= mo <= 12 and 1 <= d <= days_in_month(y, mo)
    if y >= 1:  # the standard library agrees wherever it has the year
        try:
            datetime.date.fromisoformat(s)
            assert ok
        except ValueError:
            assert not ok
    return ok


def time_oracle(s: str) -> bool:
    m = re.fullmatch(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))", s)
    if not m:
        return False
    h, mi, sec = int(m[1]), int(m[2]), int(m[3])
    if h > 23 or mi > 59 or sec > 60:
        return False
    off = 0
    if m[4]:
        oh, om = int(m[5]), int(m[6])
        if oh > 23 or om > 59:
            return False
        off = (1 if m[4] == "+" else -1) * (oh * 60 + om)
    if sec == 60:
        return (h * 60 + mi - off) % 1440 == 23 * 60 + 59
    return True


def test_date():
    rng = random.Random(1)
    values = [
        f"{y:04d}-{m:02d}-{d:02d}"
        for y, m, d in [(rng.randint(0, 9999), rng.randint(0, 13), rng.randint(0, 32)) for _ in range(400)]
    ]
    values += ["0000-02-29", "1900-02-29", "2000-02-29", "2004-02-29", "2100-02-29", "2400-02-29"]
    for y in (1, 4, 100, 400, 1900, 2000, 2023, 2024):
        for m in range(1, 13):
            values.append(f"{y:04d}-{m:02d}-{calendar.monthrange(y, m)[1]:02d}")
    check("date", date_oracle, values, "0123456789-T:/", walks=60)
    d = format_dfa("date")
    assert d is not None and d.accepts("0000-02-29") and not d.accepts("0100-02-29")


def rfc3339_validator_agrees(s: str) -> bool | None:
    """jsonschema's date-time/time checker, where it follows the RFC (None: a known deviation)."""
    validate_rfc3339 = pytest.importorskip("rfc3339_validator").validate_rfc3339
    if s.endswith("\n"):
        return None  # its regex ends in '$', which also matches before a final newline
    return validate_rfc3339(s.upper())


def test_time():
    rng = random.Random(2)
    values = []
    for _ in range(300):
        h, mi, sec = rng.randint(0, 24), rng.randint(0, 60), rng.choice([rng.randint(0, 61), 60, 59])
        frac = rng.choice(["", ".5", ".123456789"])
        off = rng.choice(["Z", "z", f"{rng.choice('+-')}{rng.randint(0, 24):02d}:{rng.randint(0, 60):02d}"])
        values.append(f"{h:02d}:{mi:02d}:{sec:02d}{frac}{off}")
    for minute in range(0, 1440, 7):  # every leap second form, and one minute off
        loc = (23 * 60 + 59 + minute) % 1440
        values += [
            f"{loc // 60:02d}:{loc % 60:02d}:60+{minute // 60:02d}:{minute % 60:02d}",
            f"{(loc + 1) % 1440 // 60:02d}:{(loc + 1) % 60:02d}:60-{minute // 60:02d}:{minute % 60:02d}",
        ]
    check("time", time_oracle, values, "0123456789:.+-Zz6", walks=60)
    d = format_dfa("time")
    assert d is not None
    for s in values:
        py = rfc3339_validator_agrees("1970-01-01T" + s)
        if py is not None and ":60" not in s[:9]:
            assert d.accepts(s) == bool(py), s
    never = format_dfa("time", leap_seconds="never")
    assert never is not None and never.accepts("23:59:59Z") and not never.accepts("23:59:60Z")
    assert never.size < 100


def test_date_time():
    rng = random.Random(3)
    dates = [
        f"{rng.randint(0, 9999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}" for _ in range(100)
    ]
    times = ["23:59:60Z", "15:59:60-08:00", "00:00:00.1+01:00", "12:30:00z", "23:59:60+00:01", "24:00:00Z"]
    values = [f"{d}{rng.choice('Tt ')}{t}" for d in dates for t in rng.sample(times, 2)]

    def oracle(s: str) -> bool:
        if len(s) < 11 or s[10] not in "Tt":
            return False
        return date_oracle(s[:10]) and time_oracle(s[11:])

    check("date-time", oracle, values, "0123456789:.+-TtZz6 ", walks=60)
    d = format_dfa("date-time")
    assert d is not None
    for s in values:
        py = rfc3339_validator_agrees(s)
        if py is not None and not s.startswith("0000") and ":60" not in s:
            assert d.accepts(s) == bool(py), s


def duration_oracle(s: str) -> bool:
    """RFC 3339 Appendix A, letters case-insensitive (RFC 5234 §2.3)."""
    if not s.isascii() or not s.upper().startswith("P"):
        return False
    body = s.upper()[1:]
    if re.fullmatch(r"[0-9]+W", body):
        return True
    date_part, t, time_part = body.partition("T")

    def chain(text: str, units: str) -> bool:
        parts = re.findall(r"([0-9]+)([A-Z])", text)
        if "".join(n + u for n, u in parts) != text or not parts:
            return False
        got = "".join(u for _, u in parts)
        return got in [units[i:j] for i in range(len(units)) for j in range(i + 1, len(units) + 1)]

    if t and not chain(time_part, "HMS"):
        return False
    if date_part:
        return chain(date_part, "YMD")
    return bool(t)


def test_duration():
    values = [
        "P1Y2M3DT4H5M6S",
        "p1y",
        "PT1m",
        "P1W",
        "p2w",
        "P1Y2D",
        "PT1H2S",
        "P",
        "PT",
        "P1YT",
        "P0D",
        "pt36h",
    ]
    check("duration", duration_oracle, values, "0123456789PYMDTHSWpymdthsw", walks=60)


# -- email (RFC 5321) --------------------------------------------------------------------------------------
ATEXT = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~")
HEX = set("0123456789abcdefABCDEF")


def _snum(x: str) -> bool:
    return 1 <= len(x) <= 3 and x.isascii() and x.isdigit() and int(x) <= 255


def _ipv4_literal(x: str) -> bool:
    parts = x.split(".")
    return len(parts) == 4 and all(_snum(p) for p in parts)


def _groups(x: str) -> list[str] | None:
    gs = x.split(":") if x else []
    return gs if all(1 <= len(g) <= 4 and set(g) <= HEX for g in gs) else None


def _ipv6_5321(x: str) -> bool:
    if "." in x:
        cut = x.rfind(":")
        if cut < 0 or not _ipv4_literal(x[cut + 1 :]):
            return False
        head = x[: cut + 1]
        if "::" not in head:
            gs = _groups(head[:-1])
            return gs is not None and len(gs) == 6
        left, _, right = head.partition("::")
        if "::" in right or (right and not right.endswith(":")):
            return False
        lg, rg = _groups(left), _groups(right[:-1])
        return lg is not None and rg is not None and len(lg) + len(rg) <= 4
    if "::" not in x:
        gs = _groups(x)
        return gs is not None and len(gs) == 8
    left, _, right = x.partition("::")
    if "::" in right:
        return False
    lg, rg = _groups(left), _groups(right)
    return lg is not None and rg is not None and len(lg) + len(rg) <= 6


def _domain(x: str) -> bool:
    for sub in x.split("."):
        if not sub or not sub.isascii() or not (sub[0].isalnum() and sub[-1].isalnum()):
            return False
        if not all(c.isalnum() or c == "-" for c in sub):
            return False
    return True


def email_oracle(s: str) -> bool:
    """RFC 5321 §4.1.2 Mailbox, by hand (no General-address-literal, no size limits)."""
    if s.startswith('"'):
        i = 1
        while True:
            if i >= len(s):
                return False
            c = s[i]
            if c == "\\":
                if i + 1 >= len(s) or not 32 <= ord(s[i + 1]) <= 126:
                    return False
                i += 2
                continue
            if c == '"':
                break
            if not 32 <= ord(c) <= 126:
                return False
            i += 1
        at = i + 1
    else:
        at = s.find("@")
        if at < 0:
            return False
        atoms = s[:at].split(".")
        if not all(a and set(a) <= ATEXT for a in atoms):
            return False
    if at >= len(s) or s[at] != "@":
        return False
    dom = s[at + 1 :]
    if dom.startswith("[") and dom.endswith("]"):
        inner = dom[1:-1]
        if inner[:5].lower() == "ipv6:":
            return _ipv6_5321(inner[5:])
        return _ipv4_literal(inner)
    return _domain(dom)


def test_email():
    values = [
        '"a\\"b"@x.y',
        '""@a',
        "a.b@[1.2.3.004]",
        "a@[IPv6:1::2]",
        "a@[ipv6:1:2:3:4:5:6::]",
        "a@[IPv6:1:2:3:4:5:6:7::]",
        "a@[IPv6::1.2.3.4]",
        "a@[IPv6:a:b:c:d::1.2.3.4]",
        "a@[IPv6:a:b:c:d:e::1.2.3.4]",
        "a@[IPv6:1:2:3:4:5:6:1.2.3.4]",
        "a@b-c.d",
        "a@-b.c",
        "a@b-.c",
        "x@[1.2.3]",
        "a..b@c",
        "é@x.y",
        "a@[IPv6:1:2:3:4:5:6:7:8]",
    ]
    check("email", email_oracle, values, 'a0.@"\\[]:-IPv6 é', walks=80)


# -- addresses and identifiers ------------------------------------------------------------------------------
def ipv4_oracle(s: str) -> bool:
    try:
        ipaddress.IPv4Address(s)
        return True
    except ValueError:
        return False


def ipv6_oracle(s: str) -> bool:
    if "%" in s:  # a scope id: jsonschema rejects it, RFC 4291 text forms have none
        return False
    try:
        ipaddress.IPv6Address(s)
        return True
    except ValueError:
        return False


def test_ipv4():
    rng = random.Random(4)
    values = [str(ipaddress.IPv4Address(rng.getrandbits(32))) for _ in range(100)]
    values += ["01.2.3.4", "1.2.3", "256.1.1.1", "1.2.3.4.", "١.2.3.4"]
    check("ipv4", ipv4_oracle, values, "0123456789.a ١", walks=60)


def test_ipv6():
    rng = random.Random(5)
    values = []
    for _ in range(150):
        bits = rng.getrandbits(128) >> rng.choice([0, 16, 64, 112]) << rng.choice([0, 16, 48])
        a = ipaddress.IPv6Address(bits & ((1 << 128) - 1))
        values += [a.compressed, a.exploded, a.compressed.upper()]
        parts = a.exploded.split(":")
        values.append(":".join(parts[:6]) + ":" + str(ipaddress.IPv4Address(rng.getrandbits(32))))
    values += ["::", "::1", "1::", "::ffff:1.2.3.4", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1::2::3", ":::"]
    check("ipv6", ipv6_oracle, values, "0123456789abcdefABCDEF:.%g", walks=80)


def uuid_oracle(s: str) -> bool:
    if not re.fullmatch(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", s):
        return False
    uuidlib.UUID(s)  # must not raise where the RFC 4122 syntax holds
    return True


def test_uuid():
    rng = random.Random(6)
    values = [str(uuidlib.UUID(int=rng.getrandbits(128))) for _ in range(50)]
    values += [v.upper() for v in values[:10]] + [
        "{" + values[0] + "}",
        "urn:uuid:" + values[1],
        values[2].replace("-", ""),
    ]
    check("uuid", uuid_oracle, values, "0123456789abcdefABCDEF-g{}", walks=30)


def hostname_oracle(s: str) -> bool:
    if not s.isascii() or not 1 <= len(s) <= 253:
        return False
    return all(
        re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) for label in s.split(".")
    )


def test_hostname():
    with pytest.raises(LimitExceeded) as ei:
        format_dfa("hostname", max_states=HOSTNAME_STATES - 1)  # a bound below its size: refused
    assert ei.value.limit == "dfa_states" and "hostname" in str(ei.value)
    d = format_dfa("hostname")  # within the default Limits.dfa_states
    assert d is not None and d.size == HOSTNAME_STATES
    rng = random.Random(7)
    labels = ["a", "a-b", "x" * 63, "x" * 64, "-a", "a-", "1", "a1-2"]
    values = [".".join(rng.choice(labels) for _ in range(rng.randint(1, 5))) for _ in range(60)]
    values += [".".join(["a" * 63] * 4)[: 253 + k] for k in (-1, 0, 1)] + [("a" * 62 + ".") * 4 + "ab"]
    values += ["example.", "ex_ample.com", "Kelvin.com"]
    n = check("hostname", hostname_oracle, values, "a-.9Z_", walks=40, dfa=d)
    assert n > 100
    FQDN = pytest.importorskip("fqdn").FQDN
    for s in values:
        if s.endswith(".") or not s.isascii():  # fqdn accepts a trailing dot; it also folds U+212A
            continue
        assert d.accepts(s) == FQDN(s, min_labels=1).is_valid, s


def uri_oracle(rule: str) -> Callable[[str], bool]:
    validate_rfc3986 = pytest.importorskip("rfc3986_validator").validate_rfc3986

    def deviation(s: str) -> bool:
        """rfc3986_validator's known departures from RFC 3986."""
        if s.endswith("\n"):
            return True  # '^...$' matches before a final newline
        lit = re.search(r"\[([^\]]*)\]", s)
        return bool(lit and (re.search(r"(^|[:.])0[0-9]", lit.group(1)) or lit.group(1).startswith("V")))

    def oracle(s: str) -> bool:
        got = bool(validate_rfc3986(s, rule=rule))
        if deviation(s):
            return format_dfa("uri" if rule == "URI" else "uri-reference").accepts(s)  # type: ignore[union-attr]
        return got

    return oracle


def test_uri():
    values = [
        "http://[::ffff:1.2.3.4]/",
        "http://[::ffff:01.2.3.4]/",
        "http://[v1.x]/",
        "http://[V1.x]/",
        "a:",
        "a:/b",
        "a://u:p@h:80/p?q#f",
        "a://h:x",
        "a:%4",
        "a:%41",
        "1a:b",
        "a:b c",
        "a:#%zz",
    ]
    check("uri", uri_oracle("URI"), values, "a:/?#[]@%1.V", walks=80)


def test_uri_reference():
    values = ["", "//", "/a", "a", "a:b", "./a:b", "1:b", "?x", "#f", "//[::1]:8/x", "//a@b@c/", "/%zz"]
    check("uri-reference", uri_oracle("URI_reference"), values, "a:/?#[]@%1.", walks=80)


def test_json_pointer():
    jsonpointer = pytest.importorskip("jsonpointer")

    def oracle(s: str) -> bool:
        try:
            jsonpointer.JsonPointer(s)
            return True
        except jsonpointer.JsonPointerException:
            return False

    values = ["", "/", "/a~0b~1", "/~2", "/~", "a/b", "/a\n/😀", "//"]
    check("json-pointer", oracle, values, "/~01a😀\n", walks=60)


def test_unknown_formats_are_none():
    for name in ("idn-hostname", "regex", "color", ""):
        assert format_dfa(name) is None
    with pytest.raises(ValueError):
        format_dfa("time", leap_seconds="sometimes")  # type: ignore[arg-type]


def test_formats_are_memoized_and_convert():
    a = format_dfa("email")
    assert a is format_dfa("email")
    assert a is not None
    j = a.to_json_string()
    assert j.accepts(b'"a@b"') and j.accepts(b'"\\u0061@b"') and not j.accepts(b'"a@"')


@pytest.mark.parametrize("name", ["date-time", "uri", "ipv6"])
def test_json_string_views_of_formats(name, capsys):
    d = format_dfa(name)
    assert d is not None
    j = d.to_json_string()
    rng = random.Random(name)
    for _ in range(20):
        s = sample(d, rng)
        assert j.accepts(json.dumps(s).encode()) and j.accepts(json.dumps(s, ensure_ascii=False).encode())
        assert j.accepts(('"' + "".join(f"\\u{ord(c):04x}" for c in s) + '"').encode())
        for m in mutate(s, rng, "0aZ:-/\n"):
            assert j.accepts(json.dumps(m).encode()) == d.accepts(m)
    with capsys.disabled():
        print(f"\n{name}: {d.size} code point states, JSON string byte DFA {j.num_states} states")
