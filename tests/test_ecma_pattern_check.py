"""The independent ECMAScript pattern validator (``props.corpus.ecma_pattern_check``).

Hand-written cases for every rule of its reading (ES2020 §21.2.1 without Annex B, non-unicode, UTF-16
code units), the JSON-Schema-Test-Suite ``format: regex`` cases among them; then node's ``RegExp`` as a
second opinion where ``node`` is on PATH: node is a superset (Annex B, later editions), so every pattern we
accept must compile there and every pattern node rejects must be rejected by us.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import subprocess
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from props.corpus.ecma_pattern_check import ecma_pattern_error, ecma_pattern_valid

CASES: list[tuple[str, bool]] = [
    # JSON-Schema-Test-Suite (format: regex, and the optional ecmascript-regex tests)
    (r"([abc])+\s+$", True),
    (r"(?<name>x)", True),
    (r"(?<n>a)\k<n>", True),
    (r"(?<=a+)b", True),
    (r"[]", True),
    (r"[^]", True),
    (r"\cA", True),
    (r"^(abc]", False),
    (r"\a", False),
    (r"(?P<name>x)", False),
    (r"(?P<n>a)(?P=n)", False),
    (r"(?#comment)a", False),
    (r"(?i)abc", False),
    (r"(?ims)abc", False),
    # empty alternatives, groups, assertions
    ("", True),
    ("a||b", True),
    ("|", True),
    ("()", True),
    ("(|)", True),
    ("(?:)", True),
    ("^$", True),
    ("a.b", True),
    (r"\b\B", True),
    ("(?=a)(?!b)(?<=c)(?<!d)", True),
    ("(", False),
    (")", False),
    ("(a))", False),
    ("(?", False),
    ("(?<", False),
    ("(?<=a", False),
    # syntax characters are not pattern characters
    ("]", False),
    ("{", False),
    ("}", False),
    ("a{", False),
    ("a{1", False),
    ("a{,1}", False),
    ("a{1,2", False),
    ("a}", False),
    # quantifiers
    ("a*b+c?", True),
    ("a*?b+?c??", True),
    ("a{3}", True),
    ("a{3,}", True),
    ("a{3,5}?", True),
    ("a{0,0}", True),
    ("a{05,5}", True),
    ("a{1,0010}", True),
    ("a{2,1}", False),
    ("a{010,9}", False),
    ("a{100000000000000000000,99999999999999999999}", False),
    ("a{99999999999999999999,100000000000000000000}", True),
    ("a{" + "1" * 5000 + "}", True),
    ("a{" + "2" + "0" * 5000 + ",1" + "0" * 5000 + "}", False),
    ("a{" + "1" + "0" * 5000 + ",2" + "0" * 5000 + "}", True),
    ("a{" + "0" * 5000 + "9,10}", True),
    ("a**", False),
    ("a{1}{2}", False),
    ("*", False),
    ("+a", False),
    ("?", False),
    ("|*", False),
    ("(*)", False),
    ("^*", False),
    ("$+", False),
    (r"\b*", False),
    (r"\B?", False),
    ("(?=a)*", False),
    ("(?!a)+", False),
    ("(?<=a)?", False),
    ("(?<!a){1}", False),
    ("(a)*", True),
    ("(?:a){2}", True),
    ("(?<x>a)+", True),
    ("[a]*", True),
    (r"\d+", True),
    (r"(a)\1*", True),
    # group syntax
    ("(?<a>x)", True),
    ("(?<$_a1>x)", True),
    ("(?<_>x)", True),
    ("(?<é>x)", True),
    ("(?<aé>x)", True),
    ("(?<>x)", False),
    ("(?<1a>x)", False),
    ("(?<a-b>x)", False),
    ("(?<a>x)(?<a>y)", False),
    ("(?<a>x)|(?<a>y)", False),
    ("(?<a>x)(?<b>y)", True),
    ("(?<a\u200c\u200d>x)", True),
    ("(?<\u200c>x)", False),
    (r"(?<\u0061>x)(?<a>y)", False),  # same StringValue
    (r"(?<\u0061b>x)\k<ab>", True),
    (r"(?<\u0031>x)", False),  # "1" is not an identifier start
    (r"(?<a\u0031>x)", True),
    (r"(?<\u{61}>x)", False),  # \u{...} is [+U]
    (r"(?<\x61>x)", False),
    ("(?<😀>x)", False),  # an astral non-identifier character
    ("(?<𝒜>x)", True),  # U+1D49C, ID_Start, a literal surrogate pair
    (r"(?<\uD835\uDC9C>x)", True),  # the same as an escape pair
    (r"(?<\uD835>x)", False),  # a lone surrogate
    ("(?<\ud835>x)", False),
    ("(?<a𝒜>x)\\k<a\\uD835\\uDC9C>", True),
    # \k
    (r"\k<n>(?<n>a)", True),  # forward reference
    (r"(?<n>a)\k<m>", False),
    (r"\k<n>", False),
    (r"\k", False),
    (r"(?<n>a)\k", False),
    (r"(?<n>a)\kn", False),
    (r"(?<n>a)\k<n", False),
    # DecimalEscape
    (r"(a)\1", True),
    (r"\1(a)", True),
    (r"\1", False),
    (r"(a)\2", False),
    (r"(?:a)\1", False),
    (r"(?=(a))\1", True),
    (r"(?<x>a)\1", True),
    (r"(a)\10", False),
    ("(a)" * 10 + r"\10", True),
    ("(a)" * 9 + r"\10", False),
    (r"()\8", False),
    (r"(a)\1\99999999999999999999", False),
    ("(a)\\" + "1" * 5000, False),  # more digits than int() converts by default
    ("(a)\\1{" + "0" * 5000 + "1}", True),
    # character escapes
    (r"\0", True),
    (r"\0a", True),
    (r"\00", False),
    (r"\01", False),
    (r"\f\n\r\t\v", True),
    (r"\cz\cZ", True),
    (r"\c", False),
    (r"\c1", False),
    (r"\c_", False),
    (r"\x41", True),
    (r"\x4", False),
    (r"\xg0", False),
    (r"\u0041", True),
    (r"\u004", False),
    (r"\u{41}", False),
    (r"\p{L}", False),
    (r"\P{L}", False),
    (r"\d\D\s\S\w\W", True),
    (r"\$\^\.\*\+\?\(\)\[\]\{\}\|\\\/\-", True),
    (r"\ ", True),
    (r"\é", False),  # é is ID_Continue
    (r"\_", False),
    (r"\z", False),
    ("\\", False),
    ("a\\", False),
    ("\\😀", True),  # the escape takes the lead surrogate, which is not ID_Continue
    # character classes
    ("[abc]", True),
    ("[a-z]", True),
    ("[^a-z]", True),
    ("[z-a]", False),
    ("[a-a]", True),
    ("[-a]", True),
    ("[a-]", True),
    ("[--]", True),
    ("[---]", True),
    ("[a--]", False),
    ("[!--]", True),
    ("[a-b-c]", True),
    ("[^-]", True),
    ("[[]", True),
    ("[(){}|*+?.$^]", True),
    ("[", False),
    ("[a", False),
    ("[a-", False),
    ("[]]", False),
    (r"[\]]", True),
    (r"[\b]", True),
    (r"[\b-\n]", True),  # 8..10
    (r"[\n-\b]", False),
    (r"[\B]", False),
    (r"[\d]", True),
    (r"[\d-z]", False),
    (r"[a-\d]", False),
    (r"[\s-\S]", False),
    (r"[\d-]", True),
    (r"[-\d]", True),
    (r"[\1]", False),
    (r"(a)[\1]", False),
    (r"[\0]", True),
    (r"[\00]", False),
    (r"[\cA]", True),
    (r"[\c1]", False),
    (r"[\c]", False),
    (r"[\k]", False),
    (r"[\-]", True),
    (r"[\x00-\x7f]", True),
    (r"[\x7f-\x00]", False),
    (r"[\u0100-\u00ff]", False),
    (r"[\u00ff-\u0100]", True),
    (r"[\0-\cA]", True),  # 0..1
    (r"[\cB-\cA]", False),
    (r"[\t-\r]", True),
    ("[😀]", True),
    ("[😀-😂]", False),  # trail surrogate of 😀 > lead surrogate of 😂
    ("[😀-\ude02]", True),  # trail of 😀 (DE00) .. DE02
    (r"[\uD83D\uDE00-\uD83D\uDE02]", False),
    ("[é-ü]", True),
    ("[ü-é]", False),
    (r"[\p]", False),
]


def test_cases_cover_enough() -> None:
    assert len(CASES) >= 60
    assert len({p for p, _ in CASES}) == len(CASES), "duplicate case"


@pytest.mark.parametrize(
    ("pattern", "expected"), CASES, ids=[f"{i}-{p[:24]!a}" for i, (p, _) in enumerate(CASES)]
)
def test_case(pattern: str, expected: bool) -> None:
    error = ecma_pattern_error(pattern)
    assert (error is None) is expected, (pattern, error)
    assert ecma_pattern_valid(pattern) is expected


def test_error_names_the_offset() -> None:
    assert ecma_pattern_error("ab]") == (
        "at code unit 2: expected a pattern character, not the syntax character ']'"
    )
    error = ecma_pattern_error("😀]")
    assert error is not None and error.startswith("at code unit 2:")  # code units, not code points
    error = ecma_pattern_error(r"(a)\2")
    assert error is not None and error.startswith("at code unit 3:")


def test_deep_nesting() -> None:
    start = time.perf_counter()
    assert ecma_pattern_valid("(" * 5000 + ")" * 5000)
    assert ecma_pattern_valid("(?:" * 5000 + "a" + ")*" * 5000)
    assert not ecma_pattern_valid("(" * 5000)
    assert not ecma_pattern_valid("(" * 5000 + ")" * 5001)
    assert ecma_pattern_valid("(" * 5000 + ")" * 5000 + "\\5000")
    assert not ecma_pattern_valid("(" * 5000 + ")" * 5000 + "\\5001")
    assert time.perf_counter() - start < 5.0


def test_capture_count_has_no_implementation_limit() -> None:
    """ES2020 bounds NcapturingParens only at 2³² − 1; V8 (node 20) refuses more than 32,767 groups.

    That V8 limit is the one known place where node is not a superset of this reading: the node
    corpus below stays far under it.
    """
    assert ecma_pattern_valid("()" * 40_000 + "\\40000")
    assert not ecma_pattern_valid("()" * 40_000 + "\\40001")


@given(
    st.text(alphabet=st.sampled_from(list("ab()[]{}|*+?^$.\\-,:=!<>0123456789cdkux\u00e9😀")), max_size=30)
)
def test_total(pattern: str) -> None:
    """Never raises; the two functions agree."""
    error = ecma_pattern_error(pattern)
    assert error is None or error.startswith("at code unit ")
    assert ecma_pattern_valid(pattern) is (error is None)


@given(st.text(max_size=20))
def test_total_any_text(pattern: str) -> None:
    error = ecma_pattern_error(pattern)
    assert ecma_pattern_valid(pattern) is (error is None)


# -- node's RegExp as a superset ------------------------------------------------------------------------

_NODE_SCRIPT = """
const patterns = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(patterns.map((p) => {
  try { new RegExp(p); return true; }
  catch (e) { return e instanceof SyntaxError ? false : String(e); }
})));
"""

_ALPHABET = list("ab()[]{}|*+?^$.\\-,:=!<>0123456789cdkuxPn\u00e9😀")


def _node_compiles(patterns: list[str]) -> list[bool]:
    """``new RegExp(p)`` for each pattern, in one node process (JSON in, JSON out)."""
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, "-e", _NODE_SCRIPT],
        input=json.dumps(patterns),  # ASCII: lone surrogates travel as \\udXXX escapes
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    results = json.loads(done.stdout)
    assert len(results) == len(patterns)
    for p, r in zip(patterns, results):
        assert isinstance(r, bool), f"node failed on {p!r} with a non-syntax error: {r}"
    return [bool(r) for r in results]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))


_ATOMS = [
    "a", "b", ".", "é", "😀", r"\d", r"\W", r"\b", r"\B", "^", "$", r"\0", r"\cJ", r"\x4a", r"\u00e9",
    r"\-", r"\$", r"\/", r"\.", "[a-z]", "[^0-9]", "[]", "[^]", r"[\d-]", r"[\b]", "[😀]", "[a-]",
    r"[\u0000-\uffff]", "[--]", r"\k<g>", r"\1", r"\2",
]  # fmt: skip
_QUANTS = ["", "", "", "*", "+", "?", "{2}", "{1,}", "{0,3}", "*?", "{2,3}?", "{3,2}"]
_OPENS = ["(", "(?:", "(?=", "(?!", "(?<=", "(?<!", "(?<g>", "(?<h>", "(?<é>"]


def _random_structured(rng: random.Random, depth: int = 0) -> str:
    """A pattern built from terms, mostly well formed (to exercise the accepting direction)."""
    out: list[str] = []
    for _ in range(rng.randint(0, 4)):
        r = rng.random()
        if r < 0.25 and depth < 4:
            out.append(rng.choice(_OPENS) + _random_structured(rng, depth + 1) + ")")
        elif r < 0.32:
            out.append("|")
        else:
            out.append(rng.choice(_ATOMS))
        out.append(rng.choice(_QUANTS))
    text = "".join(out)
    if rng.random() < 0.1 and text:  # an occasional point mutation
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(_ALPHABET) + text[i + 1 :]
    return text


def _identifier_names(step: int) -> list[str]:
    """Group names from every ``step``-th code point the checker calls ID_Start / ID_Continue."""
    names: list[str] = []
    for cp in range(0, 0x110000, step):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        for pattern in (f"(?<{chr(cp)}>)", f"(?<a{chr(cp)}>)"):
            if ecma_pattern_valid(pattern):
                names.append(pattern)
                if cp < 0x10000:
                    names.append(pattern.replace(chr(cp), f"\\u{cp:04x}"))
    return names


@functools.cache
def _corpus() -> list[str]:
    rng = random.Random(0)
    patterns = [p for p, _ in CASES]
    patterns += [_random_text(rng) for _ in range(2000)]
    patterns += [_random_structured(rng) for _ in range(2000)]
    patterns += _identifier_names(61)
    return list(dict.fromkeys(patterns))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
def test_node_is_a_superset() -> None:
    """We accept ⇒ node compiles; equivalently, node rejects ⇒ we reject (both listed on failure)."""
    patterns = _corpus()
    ours = [ecma_pattern_valid(p) for p in patterns]
    node = _node_compiles(patterns)
    disagreements = [p for p, o, n in zip(patterns, ours, node) if o and not n]
    assert not disagreements, f"accepted here but rejected by node's RegExp: {disagreements[:20]}"
    # the hand-written table agrees with node wherever node rejects
    expected = dict(CASES)
    assert all(not expected[p] for p, n in zip(patterns, node) if not n and p in expected)
    # the corpus exercises both sides, and Annex B / later-edition extensions that we reject
    assert sum(ours) >= 500
    assert sum(not n for n in node) >= 500
    assert sum(n and not o for o, n in zip(ours, node)) >= 50
