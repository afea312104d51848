"""Compile-time algorithms at scale: a 20,000-rule chain compiles and decides exactly, and each linear-time
replacement of a slower pass agrees with the slow, obvious version it replaced (the slow path is the
oracle). Untimed: the timings are in ``tests/bench_compile.py`` and ``ci/compile_times.py``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

import refdecoder
from refdecoder import Gbnf, Grammar, Limits
from refdecoder._cpset import ALPHABET, complement, normalize
from refdecoder._fsa import (
    DEAD,
    CodepointDFA,
    Edge,
    _full_target,
    _hopcroft,
    _length_range,
    _overlay,
    _revuz,
    byte_literal,
    canonical,
    canonical_bytes,
)
from refdecoder._gbnf import compile_gbnf_network, parse_gbnf
from refdecoder._grammar_analysis import expr_nullable, nullable_rules
from refdecoder._ir import Alt, Lex, Node, Repeat, Seq, _fixpoint, _nullable_rule, _productive_rule
from refdecoder._lexeme import ByteDFA


def chain(n: int) -> str:
    """``rN ::= "a" rN+1 | "b"``: the language a^k b for k < n, a regular chain n rules deep."""
    rules = ["root ::= r0"] + [f'r{i} ::= "a" r{i + 1} | "b"' for i in range(n - 1)]
    return "\n".join([*rules, f'r{n - 1} ::= "b"'])


def test_chain_of_20000_rules_compiles_and_decides_exactly() -> None:
    n = 20_000
    g = refdecoder.compile(Gbnf(chain(n)))
    for k in (0, 1, 2, 1_000, n - 2, n - 1):
        assert g.accepts(b"a" * k + b"b"), k
    assert not g.accepts(b"a" * n + b"b")
    assert not g.accepts(b"")
    assert not g.accepts(b"a" * 10)
    assert not g.accepts(b"ba")
    assert not g.accepts(b"abb")
    s = g.advance(g.initial(), b"a" * (n - 1))
    assert s is not None and not g.is_accepting(s)
    assert g.advance(s, b"a") is None  # a 20,000th 'a' leaves the language
    assert g.advance(s, b"b") is not None


@pytest.mark.parametrize("n", [1, 2, 50, 3_000])
def test_chain_merged_equals_structural(n: int) -> None:
    """Regular rules spliced into their one user (and decided lazily) give the structural language."""
    spec = Gbnf(chain(n))
    merged = Grammar(compile_gbnf_network(spec, Limits()), spec)
    plain = Grammar(compile_gbnf_network(spec, Limits(), merge_regular=False), spec)
    for k in sorted({0, 1, n // 2, max(n - 1, 0), n, n + 1}):
        for tail in (b"b", b"", b"bb", b"ab"):
            data = b"a" * k + tail
            member = data[-1:] == b"b" and data[:-1] == b"a" * (len(data) - 1) and len(data) - 1 < n
            assert merged.accepts(data) == plain.accepts(data) == member, (k, tail)


# Star inside alternation inside star, shared entries and exits: the iterative Thompson construction
# keeps loops on states of their own.
NESTED = [
    'root ::= ("a"* | "b") "c"',
    'root ::= ("a"* | "b")*',
    'root ::= (("a" "b"*)* | "c"+)? "a"',
    'root ::= x y x\nx ::= ("a" | "b"*)\ny ::= "c"{0,2} x',
    'root ::= ("" | "ab" | ("b" "a"?)*){2,3}',
    'root ::= ("a" ("b" ("c" | "")*)?)* "b"',
]


@pytest.mark.parametrize("text", NESTED)
def test_nested_loops_merged_equal_structural(text: str) -> None:
    spec = Gbnf(text)
    merged = Grammar(compile_gbnf_network(spec, Limits()), spec)
    plain = Grammar(compile_gbnf_network(spec, Limits(), merge_regular=False), spec)
    for n in range(6):
        for t in itertools.product(b"abc", repeat=n):
            data = bytes(t)
            assert merged.accepts(data) == plain.accepts(data), data


# -- the fast paths against the slow ones ------------------------------------------------------------


def _random_table(rng: random.Random) -> tuple[dict[int, dict[int, int]], list[int]]:
    n = rng.randint(1, 12)
    alphabet = rng.sample(range(256), rng.randint(1, 4)) + [0, 255]
    table = {
        s: {b: rng.randrange(n) for b in alphabet if rng.random() < 0.6}
        for s in range(n)
        if rng.random() < 0.9
    }
    finals = [s for s in range(n) if rng.random() < 0.3]
    return table, finals


def _rows(table: dict[int, dict[int, int]], n: int) -> list[list[tuple[int, int, int]]]:
    return [[(b, b, t) for b, t in sorted(table.get(s, {}).items())] for s in range(n)]


@pytest.mark.parametrize("seed", range(300))
def test_canonical_bytes_equals_moore_build(seed: int) -> None:
    """Hopcroft + BFS numbering (``canonical_bytes``) gives ``ByteDFA.build``'s table, bit for bit."""
    rng = random.Random(seed)
    table, finals = _random_table(rng)
    n = 1 + max([0, *table, *(t for row in table.values() for t in row.values())])
    got = canonical_bytes(_rows(table, n), 0, finals)
    if ByteDFA.is_empty_language(table, 0, finals):
        assert got is None
        return
    want = ByteDFA.build(table, 0, finals)
    assert got is not None
    d, rows = got
    assert d.key == want.key and d.num_states == want.num_states and d.finals == want.finals
    assert d.transitions() == want.transitions()
    expanded = {s: {b: t for lo, hi, t in row for b in range(lo, hi + 1)} for s, row in enumerate(rows)}
    assert expanded == want.transitions()  # the rows kept for embedding are the same table


@pytest.mark.parametrize("data", [b"", b"a", b"abc", "héllo 😀".encode(), bytes(range(256))])
def test_byte_literal_equals_build(data: bytes) -> None:
    assert byte_literal(data).key == ByteDFA.literal(data).key


def _iterate(nodes: list[Node], rule: Callable[[Node, list[bool]], bool]) -> list[bool]:
    """The old least-fixpoint iteration: every node, again and again, until nothing changes."""
    known = [False] * len(nodes)
    changed = True
    while changed:
        changed = False
        for i, n in enumerate(nodes):
            if not known[i] and rule(n, known):
                known[i] = changed = True
    return known


def _random_nodes(rng: random.Random) -> list[Node]:
    n = rng.randint(1, 30)
    lex = [Lex(ByteDFA.literal(b"x")), Lex(ByteDFA.build({0: {}}, 0, [0]))]  # non-empty, and {ε}
    nodes: list[Node] = []
    for _ in range(n):
        k = rng.random()
        kids = tuple(rng.randrange(n) for _ in range(rng.randint(0, 4)))
        if k < 0.2:
            nodes.append(rng.choice(lex))
        elif k < 0.5:
            nodes.append(Seq(kids))
        elif k < 0.8:
            nodes.append(Alt(kids))
        else:
            nodes.append(Repeat(rng.randrange(n), rng.randint(0, 2), rng.choice([None, 0, 1, 3])))
    return nodes


@pytest.mark.parametrize("seed", range(300))
def test_worklist_fixpoint_equals_iteration(seed: int) -> None:
    nodes = _random_nodes(random.Random(seed))
    for rule in (_nullable_rule, _productive_rule):
        assert _fixpoint(nodes, rule) == _iterate(nodes, rule)


@pytest.mark.parametrize("seed", range(100))
def test_nullable_rules_equals_iteration(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"r{i}" for i in range(rng.randint(1, 8))]

    def expr() -> str:
        parts = []
        for _ in range(rng.randint(1, 3)):
            k = rng.random()
            parts.append(rng.choice(names) if k < 0.5 else '""' if k < 0.7 else '"a"' if k < 0.85 else '"b"?')
        return " ".join(parts)

    text = "\n".join(f"{n} ::= " + " | ".join(expr() for _ in range(rng.randint(1, 2))) for n in names)
    rules = parse_gbnf(text)
    null = dict.fromkeys(rules, False)
    changed = True
    while changed:
        changed = False
        for name, r in rules.items():
            if not null[name] and expr_nullable(r.body, null.__getitem__):
                null[name] = changed = True
    assert nullable_rules(rules) == null


# -- code point automata: shortcuts of the Boolean algebra against the general constructions ---------

_CUTS = [0, 0x61, 0x62, 0x63, 0x80, 0xD7FF, 0xE000, 0x10FFFF]


def _random_cpdfa(rng: random.Random) -> CodepointDFA:
    n = rng.randint(1, 6)
    rows = []
    for _ in range(n):
        points = sorted(rng.sample(_CUTS, rng.randint(0, 4)))
        ivs = normalize((a, b) for a, b in zip(points, points[1:]) if a <= b)
        rows.append([(lo, hi, rng.randrange(n)) for lo, hi in ivs if rng.random() < 0.8])
    return canonical(rows, 0, [s for s in range(n) if rng.random() < 0.4])


@pytest.mark.parametrize("seed", range(200))
def test_complement_without_hopcroft_equals_canonical(seed: int) -> None:
    """``complement`` skips Hopcroft's pass (the complement of a minimal DFA is minimal): the table is
    the one ``canonical`` computes from the same completed automaton."""
    a = _random_cpdfa(random.Random(seed))
    for d in (a, CodepointDFA.empty(), CodepointDFA.any_string(), CodepointDFA.epsilon()):
        n = d.num_states
        rows = []
        for s in range(n):
            missing = complement(normalize(r[:2] for r in d.row(s)))
            rows.append(list(d.row(s)) + [(lo, hi, n) for lo, hi in missing])
        rows.append([(lo, hi, n) for lo, hi in ALPHABET])
        want = canonical(rows, 0, [s for s in range(n + 1) if not d.is_final(s)])
        assert d.complement() == want
        assert d.complement().key == want.key


@pytest.mark.parametrize(("lo", "hi"), [(0, 0), (0, 1), (3, 3), (2, 40), (0, None), (1, None), (7, None)])
def test_length_chains_equal_canonical(lo: int, hi: int | None) -> None:
    """``_lengths`` builds its chain without Hopcroft's pass; ``canonical`` of the same rows agrees."""
    top = lo if hi is None else hi
    if hi is None:
        rows = [[(a, b, min(i + 1, lo)) for a, b in ALPHABET] for i in range(lo + 1)]
        want = canonical(rows, 0, [lo])
    else:
        rows = [[(a, b, i + 1) for a, b in ALPHABET] for i in range(top)] + [[]]
        want = canonical(rows, 0, range(lo, hi + 1))
    got = CodepointDFA.any_string().length_between(lo, hi)
    assert got == want and got.key == want.key
    assert _length_range(got) == (lo, hi)


@pytest.mark.parametrize("seed", range(200))
def test_length_intersection_and_full_rows_equal_the_product(seed: int) -> None:
    """minLength ∩ maxLength without a product, and a product row against a length counter's row
    without ``_overlay``, agree with the general construction."""
    rng = random.Random(seed)
    a_lo, b_lo = rng.randint(0, 6), rng.randint(0, 6)
    a = CodepointDFA.any_string().length_between(a_lo, rng.choice([None, a_lo + rng.randint(0, 5)]))
    b = CodepointDFA.any_string().length_between(b_lo, rng.choice([None, b_lo + rng.randint(0, 5)]))
    c = _random_cpdfa(rng)
    for x, y in ((a, b), (a, c), (c, b)):
        fast = x.intersection(y)
        for n in range(12):
            s = "".join(rng.choice("abc\u00e9") for _ in range(n))
            assert fast.accepts(s) == (x.accepts(s) and y.accepts(s)), (x, y, s)
    found = _length_range(c)
    if found is not None:  # a random automaton that is a length language is recognized as that one
        assert c == CodepointDFA.any_string().length_between(*found)
    for _ in range(20):
        ra = tuple(_random_cpdfa(rng).row(0))
        rb = tuple((lo, hi, 7) for lo, hi in ALPHABET)
        assert _full_target(rb) == 7
        assert [seg for seg in _overlay(ra, rb) if seg[2] != DEAD] == [(lo, hi, t, 7) for lo, hi, t in ra]
        assert [seg for seg in _overlay(rb, ra) if seg[3] != DEAD] == [(lo, hi, 7, t) for lo, hi, t in ra]


@pytest.mark.parametrize("seed", range(300))
def test_revuz_classes_equal_hopcroft(seed: int) -> None:
    """On a trim acyclic automaton, Revuz's bottom-up classes are Hopcroft's partition."""
    rng = random.Random(seed)
    n = rng.randint(1, 25)
    rows: list[list[tuple[int, int, int]]] = []
    finals: set[int] = set()
    for s in range(n):
        row: list[tuple[int, int, int]] = []
        if s < n - 1:
            for lo in sorted(rng.sample(range(0, 40, 4), rng.randint(0, 4))):
                row.append((lo, lo + rng.choice([0, 3]), rng.randint(s + 1, min(n - 1, s + 4))))
        if not row or rng.random() < 0.3:
            finals.add(s)
        rows.append(row)
    revuz = _revuz(n, rows, finals)
    hopcroft = _hopcroft(n, rows, finals)
    assert revuz is not None
    for s, t in itertools.product(range(n), repeat=2):
        assert (revuz[s] == revuz[t]) == (hopcroft[s] == hopcroft[t]), (s, t)
    assert _revuz(2, [[(0, 0, 1)], [(0, 0, 0)]], {0}) is None  # a cycle: Hopcroft's case


def _overlay_sweep(ra: tuple[Edge, ...], rb: tuple[Edge, ...]) -> list[tuple[int, int, int, int]]:
    """The plain sweep ``_overlay`` replaced: the oracle."""
    inf = 1 << 40
    out: list[tuple[int, int, int, int]] = []
    i = j = 0
    pos = 0
    while i < len(ra) or j < len(rb):
        alo, ahi, at = ra[i] if i < len(ra) else (inf, inf, DEAD)
        blo, bhi, bt = rb[j] if j < len(rb) else (inf, inf, DEAD)
        alo, blo = max(alo, pos), max(blo, pos)
        lo = min(alo, blo)
        if alo == lo and blo == lo:
            hi = min(ahi, bhi)
            out.append((lo, hi, at, bt))
        elif alo == lo:
            hi = min(ahi, blo - 1)
            out.append((lo, hi, at, DEAD))
        else:
            hi = min(bhi, alo - 1)
            out.append((lo, hi, DEAD, bt))
        pos = hi + 1
        if i < len(ra) and ahi <= hi:
            i += 1
        if j < len(rb) and bhi <= hi:
            j += 1
    return out


def _random_row(rng: random.Random) -> tuple[Edge, ...]:
    points = sorted(rng.sample(range(60), 2 * rng.randint(0, 5)))
    row = []
    for lo, hi in zip(points[::2], points[1::2]):
        hi = rng.choice([lo, hi])
        row.append((lo, hi, rng.randrange(4)))
    return tuple(row)


@pytest.mark.parametrize("seed", range(500))
def test_overlay_equals_sweep(seed: int) -> None:
    rng = random.Random(seed)
    ra, rb = _random_row(rng), _random_row(rng)
    assert _overlay(ra, rb) == _overlay_sweep(ra, rb)


# -- no full garbage collection during a compile ---------------------------------------------------


def test_a_compile_makes_no_full_collection_and_restores_the_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a compile runs, the collector's third threshold is raised (no full collection), and it is
    restored after the compile, whether the compile succeeds or is refused."""
    import gc

    from refdecoder import _compile

    seen: list[tuple[int, int, int]] = []
    real = _compile._compile

    def spy(spec: object, limits: Limits) -> Grammar:
        seen.append(gc.get_threshold())
        return real(spec, limits)  # type: ignore[arg-type]

    monkeypatch.setattr(_compile, "_compile", spy)
    before = gc.get_threshold()
    refdecoder.compile(Gbnf(chain(30) + "\n# collector test"))
    assert len(seen) == 1
    assert seen[-1][2] == _compile.NO_FULL_COLLECTIONS and seen[-1][:2] == before[:2]
    assert gc.get_threshold() == before
    with pytest.raises(refdecoder.SpecError):
        refdecoder.compile(Gbnf("root ::= missing-rule-collector-test"))
    assert len(seen) == 2  # the refused spec reached the compile too: its threshold is the one read
    assert seen[-1][2] == _compile.NO_FULL_COLLECTIONS
    assert gc.get_threshold() == before


def test_overlapping_compiles_restore_the_threshold_once_the_last_one_ends() -> None:
    """Compiles that overlap (nested, or in two threads) restore the threshold when the last one
    ends, in whatever order they end."""
    import gc
    import threading

    from refdecoder._compile import NO_FULL_COLLECTIONS, no_full_collections

    before = gc.get_threshold()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    during: list[int] = []

    def a() -> None:
        with no_full_collections():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b() -> None:
        a_in.wait(10)
        with no_full_collections():
            b_in.set()
            a_out.wait(10)  # a ends first: b is still compiling
            during.append(gc.get_threshold()[2])

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert during == [NO_FULL_COLLECTIONS]
    assert gc.get_threshold() == before
    with no_full_collections(), no_full_collections():
        assert gc.get_threshold()[2] == NO_FULL_COLLECTIONS
    assert gc.get_threshold() == before
