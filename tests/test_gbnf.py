"""GBNF front-end: syntax, errors, refusals, and properties against an independent recognizer.

The independent checker (``props.corpus.gbnf_check``) is a second GBNF reader plus an Earley recognizer
over code points; it shares no code with ``refdecoder._gbnf``. Properties run over hand-written grammars
and llama.cpp / transformers-cfg sample grammars (shared data, skipped when absent). The sample files
ratchet against ``tests/baselines/gbnf.json`` (docs/style.md §11).
"""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
from props.checks.witness import breadth_first_completion as shortest_completion
from props.corpus.gbnf_check import gbnf_accepts, gbnf_generate, gbnf_viable_bytes
from refdecoder import Gbnf, Grammar, LimitExceeded, Limits, MaskcertError, SpecError, Unsupported
from refdecoder._gbnf import compile_gbnf_network

from ._data import ratchet, shared_data

REPO = Path(__file__).resolve().parent.parent

# -- helpers -----------------------------------------------------------------------------------------


def compiled(text: str, root: str = "root", merge: bool = True) -> Grammar:
    return _compiled(text, root, merge)


@functools.cache
def _compiled(text: str, root: str, merge: bool) -> Grammar:
    spec = Gbnf(text, root)
    return Grammar(compile_gbnf_network(spec, Limits(), merge_regular=merge), spec)


def accepts_both(text: str, s: str, root: str = "root") -> tuple[bool, bool, bool]:
    """(reference, reference without regular merging, independent checker)."""
    data = s.encode("utf-8")
    return (
        compiled(text, root).accepts(data),
        compiled(text, root, False).accepts(data),
        gbnf_accepts(s, text, root),
    )


def sample_files() -> list[Path]:
    root = shared_data() / "grammars" / "gbnf"
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.suffix in (".gbnf", ".ebnf"))


def sample_id(p: Path) -> str:
    return p.relative_to(shared_data() / "grammars" / "gbnf").as_posix()


# -- syntax: each construct, as (grammar, accepted, rejected) -------------------------------------------

CONSTRUCTS: list[tuple[str, str, list[str], list[str]]] = [
    ("literal", 'root ::= "abc"', ["abc"], ["", "ab", "abcd", "abC"]),
    ("empty-literal", 'root ::= "a" "" "b"', ["ab"], ["a", "a b"]),
    ("escapes", r'root ::= "\n\t\r\\\"\[\]"', ['\n\t\r\\"[]'], ["\\n"]),
    ("hex-escapes", r'root ::= "\x41\u00e9\U0001F600"', ["Aé😀"], ["A", "Ae😀"]),
    ("x85-is-a-code-point", r'root ::= "\x85"', ["\x85"], ["", "\x05"]),
    ("raw-utf8", 'root ::= "中文😀"', ["中文😀"], ["中文", "中"]),
    ("alternation", 'root ::= "a" | "bc" | ""', ["a", "bc", ""], ["b", "abc"]),
    ("grouping", 'root ::= "x" ("a" | "b") "y"', ["xay", "xby"], ["xy", "xaby"]),
    ("class", "root ::= [a-cx0-1]", ["a", "b", "c", "x", "0", "1"], ["d", "2", "", "ab"]),
    ("class-escapes", r"root ::= [\]\[\\\n\x41-\x43]", ["]", "[", "\\", "\n", "A", "C"], ["D", "n"]),
    ("class-dash-edges", "root ::= [a-] [-b]", ["a-", "--", "ab", "-b"], ["bb", "aa"]),
    ("class-range-then-dash", "root ::= [a-b-d]", ["a", "b", "-", "d"], ["c"]),
    ("class-caret-not-first", "root ::= [a^]", ["a", "^"], ["b"]),
    ("class-reversed-range-is-empty", 'root ::= [z-a] | "q"', ["q"], ["a", "m", "z"]),
    # llama.cpp's quirk kept exactly: in ["+"|"-"] the '"-"' is a range from '"' to '"'.
    ("class-quotes-quirk", """root ::= ["+"|"-"]""", ['"', "+", "|"], ["-"]),
    ("negated-class", "root ::= [^a-c]", ["d", "é", "中", "😀", "\n", "\x00"], ["a", "c", "", "dd"]),
    ("negated-multibyte", r"root ::= [^\u00e9\U0001F600]+", ["e", "e\u0301", "😁中"], ["é", "a😀"]),
    ("dot", "root ::= . .", ["ab", "é😀", "\n\x00"], ["a", "abc"]),
    ("star", 'root ::= "ab"*', ["", "ab", "abab"], ["a", "aba"]),
    ("plus", 'root ::= "ab"+', ["ab", "abab"], ["", "a"]),
    ("optional", 'root ::= "a" "b"?', ["a", "ab"], ["b", "abb"]),
    ("count", 'root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
    ("count-min", 'root ::= "a"{2,}', ["aa", "aaaaa"], ["a"]),
    ("count-range", 'root ::= [0-9]{1,3} "x"', ["1x", "123x"], ["x", "1234x"]),
    ("count-spaces", 'root ::= "a"{ 1 , 2 }', ["a", "aa"], ["", "aaa"]),
    ("count-zero", 'root ::= "a" "b"{0} "c"', ["ac"], ["abc"]),
    ("chained-postfix", 'root ::= "a"{2}*', ["", "aa", "aaaa"], ["a", "aaa"]),
    ("nullable-star", 'root ::= ("a"? "b"?)* "c"', ["c", "abc", "bac", "aabbc"], ["", "ca"]),
    ("rule-ref", 'root ::= x "-" x\nx ::= [0-9]+', ["1-2", "12-345"], ["1-", "-2"]),
    ("names", 'root ::= a-1 A_2 9z\na-1 ::= "a"\nA_2 ::= "b"\n9z ::= "c"', ["abc"], ["ab"]),
    ("empty-rule", 'root ::= "a" ws "b"\nws ::=', ["ab"], ["a b"]),
    ("empty-alternative", 'root ::= "a" ws "b"\nws ::= | " "', ["ab", "a b"], ["a  b"]),
    ("recursion", 'root ::= "(" root ")" | ""', ["", "()", "(())"], ["(", "())"]),
    ("right-recursion", 'root ::= "a" root | "b"', ["b", "aaab"], ["a", ""]),
    ("mutual-recursion", 'root ::= "a" x | "e"\nx ::= "b" root', ["e", "abe", "ababe"], ["ab", "abab"]),
    (
        "layout",
        '# leading comment\n\nroot ::= # after ::=\n  "a" (  # in a group\n    "b" |\n    "c"\n  ) x |\n'
        '  "z"   # trailing\n\n\nx ::= "!"\n',
        ["ab!", "ac!", "z"],
        ["a!", "abc!"],
    ),
    ("crlf", 'root ::= "a" x\r\nx ::= "b" |\r\n  "c"\r\n', ["ab", "ac"], ["a"]),
    ("big-count", 'root ::= "a"{0,300} "b"', ["b", "a" * 300 + "b"], ["a", "a" * 301 + "b"]),
    # left recursion, rewritten exactly (refdecoder/_gbnf_rewrite.py; llama.cpp refuses these)
    ("left-recursion", 'root ::= root "a" | "b"', ["b", "ba", "baa"], ["", "a", "ab"]),
    (
        "indirect-hidden-left-recursion",
        'root ::= x "a"\nx ::= y? root | "b"\ny ::= "c"',
        ["ba", "baa", "cbaa", "ccbaaa"],
        ["", "b", "cba", "bca"],
    ),
    ("left-recursion-without-base", 'root ::= "a" x\nx ::= "" z\nz ::= ("q"*) x "b"', [], ["a", "ab", "aqb"]),
    ("left-recursion-in-count", 'root ::= "a" x\nx ::= x{0,3} "b"', ["ab", "abb", "abbbbbb"], ["", "a"]),
    ("left-recursion-unused", 'root ::= "a"\nunused ::= unused "b"', ["a"], ["", "ab"]),
]


@pytest.mark.parametrize("text,good,bad", [c[1:] for c in CONSTRUCTS], ids=[c[0] for c in CONSTRUCTS])
def test_construct(text: str, good: list[str], bad: list[str]) -> None:
    for s in good:
        assert accepts_both(text, s) == (True, True, True), s
    for s in bad:
        assert accepts_both(text, s) == (False, False, False), s


def test_public_api_and_root_option() -> None:
    g = refdecoder.compile_gbnf('start ::= "x" y\ny ::= "y"', root="start")
    assert g.accepts(b"xy") and not g.accepts(b"x")
    assert isinstance(refdecoder.compile(Gbnf('root ::= "a"')), Grammar)


def test_utf8_byte_level() -> None:
    g = compiled("root ::= [^a]")
    assert g.accepts("é".encode()) and g.accepts("😀".encode())
    for bad in (b"\xed\xa0\x80", b"\xc0\x80", b"\xc3", b"\x80", b"\xf4\x90\x80\x80"):
        assert not g.accepts(bad), bad
    s = g.advance(g.initial(), b"\xf0\x9f")
    assert s is not None and not s.accepting
    assert g.advance(g.initial(), b"\xed\xa0") is None  # only surrogates continue ED A0
    assert g.advance(g.initial(), b"a") is None


def test_empty_language_is_not_an_error() -> None:
    g = compiled("root ::= [b-a]")
    assert g.initial().is_dead and not g.accepts(b"")


# -- errors ----------------------------------------------------------------------------------------------

SPEC_ERRORS: list[tuple[str, str, str]] = [
    # (grammar, substring of ``where``, substring of ``what``)
    ('root ::= "abc', "line 1 col 10 (rule root)", "unterminated string"),
    ("root ::= [abc", "line 1 col 10", "unterminated character class"),
    ('root := "a"', "line 1 col 6", "'::='"),
    ('root ::= "a" )', "line 1 col 14", "unbalanced"),
    ('root ::= ( "a"\n', "line 2 col 1", "expecting ')'"),
    ("root ::= *", "line 1 col 10", "no symbol before"),
    ('root ::= "" *', "line 1 col 13", "no symbol before"),
    ('root ::= "a"{0}*', "line 1 col 16", "no symbol before"),
    (r'root ::= "\q"', "line 1 col 11", "unknown escape"),
    (r'root ::= "\x4"', "line 1 col 11", "hex digits"),
    ('root ::= "a"\n  | "b"', "line 2 col 3", "expecting a rule name"),  # '|' must end a line
    ('root ::= "a" {2', "line 1 col 16", "expecting ',' or '}'"),
    ('root ::= "a" {2,x}', "line 1 col 17", "expecting '}'"),
    ('root ::= "a" @', "line 1 col 14", "unexpected character"),
    ('root ::= "a"\nroot ::= "b"', "line 2 col 1", "defined twice"),
    ('root ::= "a" undefined-rule', "line 1 col 14 (rule root)", "undefined rule 'undefined-rule'"),
    ('root ::= "a" x{0}', "line 1 col 14", "undefined rule 'x'"),
    ('root ::= "a"\nx ::= y', "line 2 col 7 (rule x)", "undefined rule 'y'"),
    ('other ::= "a"', "grammar", "root rule 'root' is not defined"),
    ("", "grammar", "root rule 'root' is not defined"),
    ('root ::= "a\0"', "line 1 col 12", "NUL"),
]


@pytest.mark.parametrize("text,where,what", SPEC_ERRORS)
def test_spec_errors(text: str, where: str, what: str) -> None:
    with pytest.raises(SpecError) as ei:
        refdecoder.compile_gbnf(text)
    assert where in ei.value.where and what in ei.value.what, (ei.value.where, ei.value.what)


UNSUPPORTED: list[tuple[str, str, str]] = [
    ('root ::= "a" []', "gbnf-empty-class", "root"),
    ('root ::= "a" [^]', "gbnf-empty-class", "root"),
    ('root ::= "a"{3,1}', "gbnf-repetition", "root"),
    ('root ::= "a" <[12]>', "gbnf-token", "root"),
    ('root ::= "a" !<[12]>', "gbnf-token", "root"),
    (r'root ::= "\uD800"', "gbnf-code-point", "root"),
    (r"root ::= [a\uDFFF]", "gbnf-code-point", "root"),
    (r'root ::= "\U00110000"', "gbnf-code-point", "root"),
]


@pytest.mark.parametrize("text,keyword,pointer", UNSUPPORTED)
def test_refusals(text: str, keyword: str, pointer: str) -> None:
    with pytest.raises(Unsupported) as ei:
        refdecoder.compile_gbnf(text)
    assert (ei.value.keyword, ei.value.where) == (keyword, pointer)


def test_left_recursion_is_a_language_the_checker_still_decides() -> None:
    text = 'root ::= root "a" | "b"'
    assert gbnf_accepts("baa", text) and not gbnf_accepts("ab", text)
    assert compiled(text).accepts(b"baa") and not compiled(text).accepts(b"ab")


def test_surrogate_spanning_ranges_are_clipped() -> None:
    g = compiled(r"root ::= [\uD000-\uE000]")
    assert g.accepts("\ud7ff".encode()) and g.accepts("\ue000".encode())
    assert not g.accepts(b"\xed\xa0\x80")
    assert compiled(r"root ::= [\u0000-\UFFFFFFFF]").accepts("😀".encode())


def test_limits() -> None:
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile_gbnf("root ::= " + "(" * 300 + '"a"' + ")" * 300)
    assert ei.value.limit == "nesting_depth"
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile_gbnf('root ::= "a"' + "?" * 300)
    assert ei.value.limit == "nesting_depth"
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile_gbnf('root ::= "a"{0,99999999999}')
    assert ei.value.limit == "repetition_count"
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile_gbnf('root ::= "abc" [^a]* x\nx ::= "b" x?', limits=Limits(automaton_states=8))
    assert ei.value.limit == "automaton_states"
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile_gbnf('root ::= "' + "a" * 100 + '"', limits=Limits(schema_bytes=50))
    assert ei.value.limit == "schema_bytes"


@pytest.mark.parametrize("dialect", ["llama.cpp", "xgrammar"])
def test_repetition_count_is_a_limits_field(dialect: str) -> None:
    text = 'root ::= "a"{0,50} "b"'
    assert refdecoder.compile(Gbnf(text, dialect=dialect)).accepts(b"aab")  # the default compiles it
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile(Gbnf(text, dialect=dialect), limits=Limits(repetition_count=49))
    assert ei.value.limit == "repetition_count" and ei.value.bound == 49


def test_byte_dfa_states_bounds_a_class_automaton() -> None:
    text = "root ::= [^a] [0-9]"
    assert refdecoder.compile_gbnf(text).accepts("é1".encode())  # the default compiles it
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile_gbnf(text, limits=Limits(byte_dfa_states=3))
    assert ei.value.limit == "byte_dfa_states"


def test_hostile_sizes_compile_quickly() -> None:
    # Quickly, because nothing is expanded: each grammar fits a 200-state automaton budget (a 1000-word
    # alternation needs 126 states; a counted repeat the same few states whatever its bounds).
    small = Limits(automaton_states=200)
    words = " | ".join(f'"w{i:04d}"' for i in range(1000))
    g = refdecoder.compile_gbnf(f'root ::= {words} | "(" root ")"', limits=small)
    assert g.accepts(b"((w0123))") and not g.accepts(b"w1000")
    g = refdecoder.compile_gbnf('root ::= ([a-z] [0-9]{0,40000}){2,30000} "!"', limits=small)
    assert g.accepts(b"a12b!") and not g.accepts(b"!")
    g = refdecoder.compile_gbnf('root ::= "a"{0,100000} "b"', limits=small)  # a native Repeat: no expansion
    assert g.accepts(b"a" * 3000 + b"b") and not g.accepts(b"a")
    g = refdecoder.compile_gbnf("root ::= " + "(" * 200 + '"a" root?' + ")" * 200, limits=small)
    assert g.accepts(b"aaa")


# -- properties against the independent checker --------------------------------------------------------

HAND: dict[str, str] = {
    "nested": r"""
root ::= item ("," ws item)*
item ::= "[" ws (item (ws "," ws item)*)? ws "]" | word | num
word ::= [a-zA-Zé中]+ | "\"" [^"\\]* "\""
num  ::= "-"? [0-9]{1,3} ("." [0-9]+)?
ws   ::= [ \t\n]*
""",
    "unicode": r'root ::= ([^\x00-\x7F] | [a-c])+ "." [\u00e0-\u00ff\U0001F600-\U0001F64F]{0,3}',
    "balanced": 'root ::= "(" root ")" root | "[" root "]" root | ""',
    "ambiguous": 'root ::= a* a\na ::= "x" | "xx" | "x" "y"?',
    "nullable-rep": 'root ::= ("a"? "b"?)* "c" ("" | "d"){0,3}',
    "mutual": 'root ::= x\nx ::= "a" y | "e"\ny ::= "b" x | "c" x?',
    "counted": 'root ::= ("ab" | [0-9]){2,5} "-" .{1,2}',
    "expr": """
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
""",
}

# Sample grammars that the properties also run on (kept few: the checker is a Python Earley parser).
SAMPLES = [
    "llama.cpp/json.gbnf",
    "llama.cpp/arithmetic.gbnf",
    "llama.cpp/c.gbnf",
    "llama.cpp/chess.gbnf",
    "llama.cpp/list.gbnf",
    "llama.cpp/english.gbnf",
    "llama.cpp/japanese.gbnf",
    "transformers-cfg/custom_json_grammars/grammars/student.ebnf",
    "transformers-cfg/SMILES/generic.ebnf",
    "transformers-cfg/overnight.ebnf",
]


def _grammar_params() -> list[Any]:
    out = [pytest.param(text, id=f"hand:{name}") for name, text in HAND.items()]
    base = shared_data() / "grammars" / "gbnf"
    for rel in SAMPLES:
        p = base / rel
        if p.exists():
            out.append(pytest.param(p.read_text(encoding="utf-8"), id=rel))
        else:
            out.append(pytest.param("", id=rel, marks=pytest.mark.skip(reason=f"shared data {p} is absent")))
    return out


GRAMMARS = _grammar_params()
MUTATION_CHARS = 'a0 "(){}[],.-+é中😀\n\\'


@pytest.mark.parametrize("text", GRAMMARS)
@given(seed=st.integers(0, 2**32 - 1))
def test_generated_strings_accepted_and_mutations_agree(text: str, seed: int) -> None:
    rng = random.Random(seed)
    s = gbnf_generate(text, rng, max_depth=rng.randint(2, 8), max_len=120)
    assert accepts_both(text, s) == (True, True, True), s
    for _ in range(4):
        i = rng.randrange(len(s) + 1)
        op = rng.choice(("insert", "delete", "replace"))
        c = rng.choice(MUTATION_CHARS)
        m = s[:i] + c + s[i:] if op == "insert" else s[:i] + ("" if op == "delete" else c) + s[i + 1 :]
        ref, unmerged, checker = accepts_both(text, m)
        assert ref == unmerged == checker, (
            f"{op} at {i}: {m!r}: ref={ref} unmerged={unmerged} checker={checker}"
        )


@pytest.mark.parametrize("text", GRAMMARS)
@given(seed=st.integers(0, 2**32 - 1))
def test_prefix_viability_matches_checker(text: str, seed: int) -> None:
    """Every byte prefix of a member is viable; prefix + byte is viable iff the checker says a completion
    exists; and a completion found by searching the Grammar is accepted by the checker."""
    rng = random.Random(seed)
    g = compiled(text)
    data = gbnf_generate(text, rng, max_depth=rng.randint(2, 6), max_len=60).encode("utf-8")
    states = [g.initial()]
    for b in data:
        nxt = g.advance_byte(states[-1], b)
        assert nxt is not None, f"member {data!r} not viable after {len(states) - 1} bytes"
        states.append(nxt)
    assert states[-1].accepting
    probes = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, 3)))
    for i in probes:
        live = g.live_bytes(states[i])
        candidates = [rng.randrange(256), rng.choice(b'"})]:,\xc3\xe4\xf0\x80\xbf')]
        if live:
            candidates.append(rng.choice(live))
        for k, b in enumerate(candidates):
            probe = data[:i] + bytes([b])
            ref = g.advance_byte(states[i], b) is not None
            assert ref == (b in live)
            assert ref == gbnf_viable_bytes(probe, text), f"{probe!r}: reference viable={ref}"
            if ref and k == len(candidates) - 1:
                nxt = g.advance_byte(states[i], b)
                assert nxt is not None
                tail = shortest_completion(g, nxt, max_states=60)
                if tail is not None:
                    full = probe + tail
                    assert g.accepts(full)
                    assert gbnf_accepts(full.decode("utf-8"), text), f"completion {full!r}"


RANDOM_ATOMS = [
    '"a"',
    '"b"',
    '"ab"',
    '"é"',
    '"😀"',
    '""',
    "[a-b]",
    "[^a]",
    "[é-ê]",
    ".",
    r"[^\u00e9-\U0001F600]",
    "[b-a]",
]


def random_grammar(rng: random.Random) -> str:
    """A small random grammar: literals, classes, groups, alternation, repetition, (mutual) recursion."""
    names = ["root"] + [f"r{i}" for i in range(1, rng.randint(1, 4))]

    def expr(depth: int) -> str:
        k = rng.random()
        if depth >= 3 or k < 0.4:
            if rng.random() < 0.25:
                x = ('"c" ' if rng.random() < 0.6 else "") + rng.choice(names)
            else:
                x = rng.choice(RANDOM_ATOMS)
        elif k < 0.7:
            x = "(" + " ".join(expr(depth + 1) for _ in range(rng.randint(1, 3))) + ")"
        else:
            x = "(" + " | ".join(expr(depth + 1) for _ in range(rng.randint(2, 3))) + ")"
        if rng.random() < 0.3 and x != '""':
            x += rng.choice(["*", "+", "?", "{2}", "{0,2}", "{1,}", "{1,3}"])
        return x

    return "\n".join(f"{name} ::= {expr(0)}" for name in names)


@given(seed=st.integers(0, 2**32 - 1))
def test_random_grammars_agree_with_checker(seed: int) -> None:
    """Merged, unmerged and the independent checker agree on members, mutants and prefix viability."""
    rng = random.Random(seed)
    text = random_grammar(rng)
    g = compiled(text)  # left recursion included (refdecoder/_gbnf_rewrite.py)
    try:
        strings = [gbnf_generate(text, rng, max_depth=5, max_len=30) for _ in range(3)]
    except ValueError:  # the language is empty
        assert g.initial().is_dead and compiled(text, merge=False).initial().is_dead
        return
    for s in list(strings):
        i = rng.randrange(len(s) + 1)
        strings.append(s[:i] + rng.choice("abcé😀") + s[i + rng.randrange(2) :])
    try:
        for k, s in enumerate(strings):
            verdicts = accepts_both(text, s)
            assert len(set(verdicts)) == 1, f"{text!r}: {s!r}: {verdicts}"
            assert k >= 3 or verdicts[0], s
        data = strings[0].encode("utf-8")
        for i in sorted(rng.sample(range(len(data) + 1), min(3, len(data) + 1))):
            state = g.advance(g.initial(), data[:i])
            assert state is not None
            for b in (rng.randrange(256), rng.choice(b"abc\xc3\xf0\x9f\x80\xa9")):
                probe = data[:i] + bytes([b])
                assert (g.advance_byte(state, b) is not None) == gbnf_viable_bytes(probe, text), probe
    except LimitExceeded as e:  # highly ambiguous grammars may exceed the parser's stack budget: a refusal
        assert e.limit == "parser_stacks"


@pytest.mark.parametrize("text", [HAND["nested"], HAND["unicode"], 'root ::= [^"\\\\]* "\\"" .'])
def test_live_bytes_equal_checker_viability(text: str) -> None:
    rng = random.Random(7)
    g = compiled(text)
    for _ in range(3):
        data = gbnf_generate(text, rng, max_depth=4, max_len=12).encode("utf-8")
        for i in (0, len(data) // 2, len(data)):
            st_ = g.advance(g.initial(), data[:i])
            assert st_ is not None
            want = bytes(b for b in range(256) if gbnf_viable_bytes(data[:i] + bytes([b]), text))
            assert g.live_bytes(st_) == want, data[:i]


# -- sample grammars: baseline ratchet + a quick membership check -------------------------------------------


@pytest.fixture(scope="module")
def sample_results() -> dict[str, str]:
    files = sample_files()
    if not files:
        pytest.skip(f"shared data {shared_data() / 'grammars' / 'gbnf'} is absent (set MASKCERT_SHARED_DATA)")
    out: dict[str, str] = {}
    for p in files:
        text = p.read_text(encoding="utf-8")
        try:
            compiled(text)
        except MaskcertError as e:
            out[sample_id(p)] = f"refused: {type(e).__name__}: {e}"
        else:
            out[sample_id(p)] = "compiled"
    return out


def test_samples_ratchet_against_baseline(
    sample_results: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    ratchet("gbnf.json", sample_results, "GBNF sample grammars", capsys)


def test_samples_accept_generated_strings(sample_results: dict[str, str]) -> None:
    base = shared_data() / "grammars" / "gbnf"
    rng = random.Random(0)
    for rel, r in sample_results.items():
        if r != "compiled":
            continue
        text = (base / rel).read_text(encoding="utf-8")
        for _ in range(3):
            s = gbnf_generate(text, rng, max_depth=6, max_len=100)
            assert compiled(text).accepts(s.encode("utf-8")), (rel, s)
            assert gbnf_accepts(s, text), (rel, s)
