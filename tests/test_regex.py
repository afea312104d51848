"""Regex front ends (``refdecoder._regex``) against Python's ``re`` as the oracle.

* python flavour: ``re.fullmatch`` / ``re.search`` on Hypothesis ``from_regex`` positives, mutated
  negatives and random strings, for hand-picked patterns;
* ecma flavour: hand-written ECMA-262 semantics, the 489 JSONSchemaBench patterns (compile rate,
  time, and agreement with ``re.search`` wherever Python provably means the same thing), and a
  bounded run over the rust-regex test data;
* refusals (``Unsupported``) and malformed patterns (``SpecError`` at the offset).
"""

from __future__ import annotations

import json
import random
import re
import time
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import refdecoder
from refdecoder._cpclasses import python_category
from refdecoder._regex import compile_regex_dfa, regex_byte_dfa
from refdecoder.errors import LimitExceeded, SpecError, Unsupported

from ._data import require_shared

MUTATION_CHARS = "a0 _-.\n/é😀Z9:"


def mutations(s: str, rng: random.Random, n: int = 6, chars: str = MUTATION_CHARS) -> list[str]:
    out = []
    for _ in range(n):
        i = rng.randint(0, len(s))
        op = rng.randrange(3)
        c = rng.choice(chars)
        if op == 0:
            out.append(s[:i] + c + s[i:])
        elif op == 1 and s:
            out.append(s[: max(i - 1, 0)] + s[i:])
        elif s:
            j = min(i, len(s) - 1)
            out.append(s[:j] + c + s[j + 1 :])
    return out


# -- python flavour ----------------------------------------------------------------------------------
PY_PATTERNS = [
    r"[a-z]+@[a-z]+\.(com|org)",
    r"(ab|a[0-9]{1,3}|é+)-?[xy]*",
    r"\d+(\.\d*)?",
    r"\w+\s?\W",
    r"[^\W\d_]+",
    r"(?s).{2,4}",
    r".*",
    r"a{,3}b{2,}?c{1}",
    r"x{",
    r"[]a-]+",
    r"[^]a]",
    r"\x41\u00e9\U0001F600\N{EM DASH}\101\0",
    r"(?P<word>[a-c]+)(?:,x)?",
    r"(?x) a  b # comment",
    r"(?a)\w+\d",
    r"(?:(?:a|b)*c)+",
    r"a$",
    r"a$\n",
    r"^a|b$",
    r"\Aa\Z|b",
    r"(a$|b)c?",
    r"$^",
    r"(?s:.)+(?-s:.)",
    r"[\d\s]{2,3}",
    r"\S\D",
    r"😀+|中{2}",
    r"(?#comment)a",
]


@given(st.sampled_from(PY_PATTERNS), st.data())
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_python_fullmatch_agrees_with_re(p, data):
    dfa = compile_regex_dfa(p, flavor="python", mode="fullmatch")
    rng = random.Random(len(p))
    cands = [data.draw(st.from_regex(p, fullmatch=True)) for _ in range(3)]
    cands += dfa.examples(4) + dfa.complement().examples(3)
    cands += [m for c in list(cands) for m in mutations(c, rng, 3)]
    cands += [data.draw(st.text(alphabet="ab\né_😀 9", max_size=6))]
    for s in cands:
        assert dfa.accepts(s) == (re.fullmatch(p, s) is not None), (p, s)


@given(st.sampled_from(PY_PATTERNS), st.data())
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_python_search_agrees_with_re(p, data):
    dfa = compile_regex_dfa(p, flavor="python", mode="search")
    rng = random.Random(len(p) + 1)
    cands = [data.draw(st.from_regex(p)) for _ in range(3)]
    cands += dfa.examples(3) + dfa.complement().examples(3)
    cands += [m for c in list(cands) for m in mutations(c, rng, 3)]
    for s in cands:
        assert dfa.accepts(s) == (re.search(p, s) is not None), (p, s)


ANCHOR_CASES = {
    r"a$\n": ["a\n", "a", "a\n\n", ""],
    r"a$": ["a", "a\n", "a\n\n"],
    r"a\Z": ["a", "a\n"],
    r"^a$|^$": ["", "\n", "a", "a\n", "b"],
    r"(a|$)(b|\n)": ["a\n", "\n", "ab", "b"],
    r"x*$\n?$": ["", "\n", "x\n", "xx", "\n\n"],
    r"(?:^|a)b": ["b", "ab", "cb"],
    r"a^b": ["ab", "a^b"],
}


def test_python_anchors_exact():
    for p, strings in ANCHOR_CASES.items():
        full = compile_regex_dfa(p, flavor="python", mode="fullmatch")
        srch = compile_regex_dfa(p, flavor="python", mode="search")
        for s in strings + [x + y for x in ["", "\n", "z"] for y in strings]:
            assert full.accepts(s) == (re.fullmatch(p, s) is not None), (p, s)
            assert srch.accepts(s) == (re.search(p, s) is not None), (p, s)


def test_python_categories_are_res():
    rng = random.Random(7)
    cps = [c for c in (rng.randrange(0x110000) for _ in range(4000)) if not 0xD800 <= c <= 0xDFFF]
    cps += list(range(0x100)) + [0x660, 0x1D7CE, 0x2028, 0x3000, 0xFEFF, 0x85, 0x1C, 0x10FFFF]
    for letter in "dDwWsS":
        for ascii_only in (False, True):
            dfa = compile_regex_dfa(
                ("(?a)" if ascii_only else "") + "\\" + letter, flavor="python", mode="fullmatch"
            )
            rx = re.compile("\\" + letter, re.ASCII if ascii_only else 0)
            for c in cps:
                assert dfa.accepts(chr(c)) == (rx.fullmatch(chr(c)) is not None), (letter, hex(c))
    assert python_category("d", False) != python_category("d", True)


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",
        r"(?P<n>a)(?P=n)",
        r"a(?=b)",
        r"a(?!b)",
        r"(?<=a)b",
        r"(?<!a)b",
        r"\bword",
        r"a\B",
        r"(?>a+)b",
        r"a*+",
        r"a++",
        r"(a)?(?(1)b|c)",
        r"(?i)a",
        r"(?i:a)b",
        r"(?m)^a",
    ],
)
def test_python_refusals(pattern):
    with pytest.raises(Unsupported) as e:
        compile_regex_dfa(pattern, flavor="python", mode="fullmatch", where="/x")
    assert e.value.keyword == "regex" and e.value.where == "/x"


@pytest.mark.parametrize(
    "pattern", ["a(", "[a", "*a", "a{3,2}", r"\q", "(?P<1>a)", "a)", "a**", "(?z)", "x\\"]
)
def test_python_malformed_names_the_offset(pattern):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(re.error) as py:
            re.compile(pattern)
    with pytest.raises(SpecError) as e:
        compile_regex_dfa(pattern, flavor="python", mode="fullmatch")
    assert e.value.where == f"offset {py.value.pos}"
    with pytest.raises(SpecError) as e2:
        compile_regex_dfa(pattern, flavor="python", mode="fullmatch", where="/pattern")
    assert e2.value.where == f"/pattern (offset {py.value.pos})"


def test_regex_byte_dfa_is_utf8_of_fullmatch():
    b = regex_byte_dfa(r"(ab|a[0-9]{1,3}|é+)-?[xy]*")
    for s in ["ab", "a12-x", "ééé", "é-", "a1234", "abx", ""]:
        assert b.accepts(s.encode()) == (re.fullmatch(r"(ab|a[0-9]{1,3}|é+)-?[xy]*", s) is not None)
    assert not b.accepts(b"\xc3")  # half of 'é'
    with pytest.raises(ValueError):
        regex_byte_dfa(r"[^\s\S]")  # the empty language has no ByteDFA


def test_limits():
    with pytest.raises(LimitExceeded):
        compile_regex_dfa("(a|b)*a(a|b){14}", flavor="python", mode="fullmatch", max_states=1000)
    with pytest.raises(LimitExceeded) as e:
        compile_regex_dfa("a{100001}", flavor="ecma", mode="fullmatch", where="/p")
    assert e.value.where == "/p"


# -- ecma flavour ----------------------------------------------------------------------------------
def E(p: str, mode: str = "search") -> Any:
    return compile_regex_dfa(p, flavor="ecma", mode=mode)  # type: ignore[arg-type]


def test_ecma_semantics():
    dot = E("^.$")
    assert all(dot.accepts(c) for c in "a\t😀\x85\u00a0") and not any(
        dot.accepts(c) for c in "\n\r\u2028\u2029"
    )
    space = E(r"^\s$")
    assert all(
        space.accepts(c) for c in "\t\n\v\f\r \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
    )
    assert not space.accepts("\x85") and not space.accepts("\u180e") and not space.accepts("a")
    assert E(r"^\d$").accepts("7") and not E(r"^\d$").accepts("٣")  # ASCII only
    assert E(r"^\w+$").accepts("a_Z9") and not E(r"^\w$").accepts("é")
    assert E("a$").accepts("ba") and not E("a$").accepts("a\n")  # no newline before the end
    assert E("^a").accepts("ab") and not E("^a").accepts("ba")
    assert E("b", "search").accepts("abc") and not E("b", "fullmatch").accepts("abc")
    assert E("[]").is_empty() and E("^[^]$").accepts("\n")
    assert E(r"^\u{1F600}$").accepts("😀") and E(r"^\uD83D\uDE00$").accepts("😀")
    assert E(r"^[\uD83D\uDE00-\uD83D\uDE4F]$").accepts("😃")
    assert E(r"\uD800").is_empty()  # a lone surrogate matches no string of scalar values
    assert E(r"^\p{Lu}+$").accepts("ÀB") and not E(r"^\p{Lu}$").accepts("a")
    assert E(r"^\P{L}$").accepts("1") and E(r"^\p{gc=Nd}$").accepts("٣")
    assert E(r"^\p{General_Category=Letter}$").accepts("中")
    assert E(r"^[\p{N}\-]+$").accepts("1-٣")
    assert E(r"^\:\/\-$").accepts(":/-")  # Annex B identity escapes of punctuation
    assert E("^a]}{$").accepts("a]}{") and E("^x{1,$").accepts("x{1,")  # Annex B literals
    assert E(r"^[\w-.]$").accepts("-") and E(r"^[\w-.]$").accepts(".")  # '-' literal after \w
    assert E(r"^\cJ\0\x41\t$").accepts("\n\x00A\t")
    assert E("^(?<year>[0-9]{4})$").accepts("2024")
    assert E("a{2}?", "fullmatch") == E("a{2}", "fullmatch")  # lazy = greedy as a language
    assert E("^$|^a") == E("^(?:$|a)") and E("^(?:|a)").is_universal()


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",
        r"\k<x>(?<x>a)",
        "a(?=b)",
        "(?<!a)b",
        r"\bx",
        r"x\B",
        "(?i:a)",
        r"\p{Script=Latin}",
        r"\p{Alphabetic}",
        r"\a",
        r"\z",
        r"[\1]",
        r"\c1",
        r"\u12",
        r"\x4",
        r"\01",
        r"[\B]",
    ],
)
def test_ecma_refusals(pattern):
    with pytest.raises(Unsupported):
        E(pattern)


@pytest.mark.parametrize(
    ("pattern", "offset"),
    [
        ("a(", 2),
        ("[a", 0),
        ("*", 0),
        ("a**", 2),
        ("a{2,1}", 1),
        ("(?<1>a)", 0),
        ("a)", 1),
        (r"\u{110000}", 0),
        ("[b-a]", 1),
        ("(?a)", 0),
        ("x|?", 2),
        ("^*", 1),
        ("a{1}{2}", 4),
    ],
)
def test_ecma_malformed_names_the_offset(pattern, offset):
    with pytest.raises(SpecError) as e:
        E(pattern)
    assert e.value.where == f"offset {offset}", e.value


# -- JSONSchemaBench patterns ------------------------------------------------------------------------
def bench_patterns() -> list[str]:
    path = require_shared("regex/jsonschemabench-dev-patterns.json")
    return [p["pattern"] for p in json.loads(path.read_text())["patterns"]]


def python_equivalent(p: str) -> tuple[str | None, str]:
    """(reason to skip, Python pattern): Python's re.search with re.ASCII means the same as ECMA
    on ASCII subjects without CR and LF unless the pattern uses syntax the two read differently."""
    if not p.isascii():
        return "non-ASCII pattern", p
    for token, why in [
        ("{,", "'{,n}' is a quantifier in Python, a literal in ECMA"),
        ("\\u{", "ECMA-only escape"),
        ("\\p", "ECMA-only escape"),
        ("\\P", "ECMA-only escape"),
        ("\\c", "ECMA-only escape"),
        ("\\k", "ECMA-only escape"),
        ("[]", "'[]' differs"),
        ("[^]", "'[^]' differs"),
    ]:
        if token in p:
            return why, p
    py = re.sub(r"\(\?<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P<\1>", p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(py, re.ASCII)
        except re.error as e:
            return f"Python rejects it: {e.msg}", py
    return None, py


SUBJECT = "".join(chr(c) for c in range(0x20, 0x7F)) + "\t\v\f"


def test_jsonschemabench_patterns_compile_fast_and_agree(capsys):
    patterns = bench_patterns()
    compiled: dict[str, Any] = {}
    refused: dict[str, str] = {}
    t = time.perf_counter()
    for p in patterns:
        try:
            compiled[p] = E(p)
        except (Unsupported, SpecError, LimitExceeded) as e:
            refused[p] = f"{type(e).__name__}: {e}"
    elapsed = time.perf_counter() - t
    n_ok = sum(1 for p in patterns if p in compiled)  # the list repeats some patterns
    skips: dict[str, str] = {}
    checked = 0
    rng = random.Random(0)
    for p, dfa in compiled.items():
        reason, py = python_equivalent(p)
        if reason:
            skips[p] = reason
            continue
        rx = re.compile(py, re.ASCII)
        cands = dfa.examples(4) + dfa.complement().examples(4)
        cands += [m for c in list(cands) for m in mutations(c, rng, 4, chars="a0Z-._/@:#")]
        cands += ["".join(rng.choice(SUBJECT) for _ in range(rng.randint(0, 12))) for _ in range(4)]
        for s in cands:
            if not s.isascii() or "\n" in s or "\r" in s:
                continue
            assert dfa.accepts(s) == (rx.search(s) is not None), (p, s)
            checked += 1
    with capsys.disabled():
        print(
            f"\nJSONSchemaBench patterns: {n_ok}/{len(patterns)} compiled "
            f"({n_ok / len(patterns):.1%}) in {elapsed:.2f}s; {len(refused)} distinct refused; "
            f"{len(compiled) - len(skips)} compared with re.search on {checked} strings, "
            f"{len(skips)} skipped"
        )
        for p, r in list(refused.items())[:10]:
            print(f"  refused {p!r}: {r}")
    assert n_ok / len(patterns) >= 0.97
    # Fast because small: no pattern ran into a limit, and the largest automaton (a counted repeat,
    # about 860 states) stays far below the state limit.
    assert not any(r.startswith("LimitExceeded") for r in refused.values()), refused
    assert max(d.num_states for d in compiled.values()) < 2_000


@given(st.data())
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_jsonschemabench_from_regex_positives(data):
    usable = []
    for p in bench_patterns():
        reason, py = python_equivalent(p)
        if reason is None:
            usable.append((p, py))
    p, py = data.draw(st.sampled_from(usable))
    alphabet = st.characters(codec="ascii", exclude_characters="\r\n")
    s = data.draw(st.from_regex(re.compile(py, re.ASCII), alphabet=alphabet))
    assume("\n" not in s)  # from_regex may end a `$` match with a newline
    assert E(p).accepts(s) == (re.search(py, s, re.ASCII) is not None), (p, s)


# -- rust-regex test data ------------------------------------------------------------------------------
UNICODE_CLASS = re.compile(r"\\[pPdDwWsSbB]|\[\[:|\(\?[a-zA-Z]*[imsxuU]")


def rust_skip(case_regex: str) -> str | None:
    if UNICODE_CLASS.search(case_regex):
        return "Unicode class, word boundary or flag"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(case_regex)
        except (re.error, OverflowError) as e:
            return f"not Python syntax: {e}"
    return None


def test_rust_regex_testdata_search_agrees_with_re(capsys):
    root = require_shared("regex/rust-regex-testdata")
    agree = skipped = refused = 0
    t = time.perf_counter()
    for f in sorted(root.rglob("*.json")):
        for case in json.loads(f.read_text())["test"]:
            rx, hay = case["regex"], case["haystack"]
            if not isinstance(rx, str) or not isinstance(hay, str):
                skipped += 1
                continue
            if any(case.get(k) for k in ("case-insensitive", "bounds", "line-terminator", "unescape")) or (
                case.get("unicode") is False or case.get("utf8") is False or case.get("compiles") is False
            ):
                skipped += 1
                continue
            if rust_skip(rx):
                skipped += 1
                continue
            try:
                dfa = compile_regex_dfa(rx, flavor="python", mode="search", max_states=3000)
            except (Unsupported, LimitExceeded):
                refused += 1
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = re.search(rx, hay) is not None
            assert dfa.accepts(hay) == want, (f.name, case["name"], rx, hay)
            agree += 1
            if time.perf_counter() - t > 30:
                break
    with capsys.disabled():
        print(
            f"\nrust-regex testdata: {agree} cases agree with re.search, {refused} refused, {skipped} skipped"
        )
    assert agree >= 300


def test_nfa_states_is_a_limit_field() -> None:
    """The Thompson automaton's bound comes from ``Limits.nfa_states`` (a fifth of it), not a constant."""
    spec = refdecoder.Regex("a{301}")  # refused first: a pattern's DFA, once built, is cached
    with pytest.raises(refdecoder.LimitExceeded) as e:
        refdecoder.compile(spec, refdecoder.Limits(nfa_states=1000))
    assert e.value.limit == "nfa_states" and e.value.bound == 200
    assert refdecoder.compile(spec).accepts(b"a" * 301)
