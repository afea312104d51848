"""Left-recursion removal (``refdecoder._gbnf_rewrite``) against a naive independent recognizer.

The oracle shares no code with refdecoder: random left-recursive grammars are built as data, printed
as GBNF for the reference, and desugared here to plain BNF (``x?`` and ``(x)*`` as fresh rules, the
star *left*-recursive on purpose) for a span recognizer — the least fixpoint of "rule ``N`` derives
``w[i:j]``" over all spans of one word, which decides left recursion, ε-rules and cycles alike — and a
prefix recognizer ("``w[i:]`` is a prefix of a word of ``N``", the same kind of fixpoint). Every word
over the alphabet up to a small length is compared: membership with ``Grammar.accepts`` and
viability with ``Grammar.advance``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
from props.corpus.gbnf_check import gbnf_accepts
from refdecoder import Gbnf, Grammar, LimitExceeded, Limits, Unsupported
from refdecoder._gbnf import compile_gbnf_network

ALPHABET = "ab"
MAX_LEN = 6

# -- grammars as data -----------------------------------------------------------------------------------
# An item is ("t", char) | ("n", rule) | ("opt", seq) | ("star", seq) | ("alt", [seq, seq]);
# a sequence is a list of items; a rule is a list of alternatives (sequences).

Item = tuple[str, Any]  # the value's type follows the kind
Seq = list[Item]


@dataclass
class Bnf:
    rules: dict[str, list[list[str]]]  # rule -> productions; a symbol is a rule name or a 1-char terminal

    def is_rule(self, s: str) -> bool:
        return s in self.rules


def render(grammar: dict[str, list[Seq]]) -> str:
    def item(x: Item) -> str:
        kind, v = x
        if kind == "t":
            return f'"{v}"'
        if kind == "n":
            return str(v)
        if kind == "opt":
            return "(" + seq(v) + ")?"
        if kind == "star":
            return "(" + seq(v) + ")*"
        return "(" + " | ".join(seq(s) for s in v) + ")"

    def seq(s: Seq) -> str:
        return " ".join(item(x) for x in s) if s else '""'

    return "\n".join(f"{name} ::= " + " | ".join(seq(a) for a in alts) for name, alts in grammar.items())


def desugar(grammar: dict[str, list[Seq]]) -> Bnf:
    rules: dict[str, list[list[str]]] = {}
    fresh = itertools.count()

    def seq(s: Seq) -> list[str]:
        out: list[str] = []
        for kind, v in s:
            if kind == "t" or kind == "n":
                out.append(str(v))
                continue
            name = f"_{next(fresh)}"
            if kind == "opt":
                rules[name] = [[], seq(v)]
            elif kind == "star":
                rules[name] = [[], [name, *seq(v)]]
            else:
                rules[name] = [seq(a) for a in v]
            out.append(name)
        return out

    for name, alts in grammar.items():
        rules[name] = [seq(a) for a in alts]
    return Bnf(rules)


def random_left_recursive(rng: random.Random) -> dict[str, list[Seq]]:
    """1-4 rules; nonterminals are drawn often at the front (direct, indirect and hidden left
    recursion), ε-alternatives and unit cycles occur."""
    names = ["root"] + [f"r{i}" for i in range(1, rng.randint(1, 4))]

    def item(depth: int) -> Item:
        k = rng.random()
        if depth < 1 and k < 0.15:
            return (rng.choice(["opt", "star"]), seq(depth + 1, 2))
        if depth < 1 and k < 0.22:
            return ("alt", [seq(depth + 1, 2), seq(depth + 1, 2)])
        if k < 0.6:
            return ("n", rng.choice(names))
        return ("t", rng.choice(ALPHABET))

    def seq(depth: int, most: int = 3) -> Seq:
        return [item(depth) for _ in range(rng.randint(0 if rng.random() < 0.3 else 1, most))]

    grammar = {name: [seq(0) for _ in range(rng.randint(1, 3))] for name in names}
    if rng.random() < 0.8:  # make sure some rule is left-recursive
        name = rng.choice(names)
        grammar[name].append([("n", rng.choice(names)), *seq(0, 2)])
    return grammar


# -- the naive recognizer -------------------------------------------------------------------------------


def spans(g: Bnf, w: str) -> dict[str, set[tuple[int, int]]]:
    """Least fixpoint: ``(i, j)`` in ``out[N]`` iff ``N`` derives ``w[i:j]``."""
    n = len(w)
    out: dict[str, set[tuple[int, int]]] = {name: set() for name in g.rules}

    def ends(sym: str, i: int) -> set[int]:
        if g.is_rule(sym):
            return {j for (a, j) in out[sym] if a == i}
        return {i + 1} if i < n and w[i] == sym else set()

    changed = True
    while changed:
        changed = False
        for name, prods in g.rules.items():
            for prod in prods:
                for i in range(n + 1):
                    cur = {i}
                    for sym in prod:
                        cur = {j for k in cur for j in ends(sym, k)}
                    for j in cur:
                        if (i, j) not in out[name]:
                            out[name].add((i, j))
                            changed = True
    return out


def productive(g: Bnf) -> dict[str, bool]:
    prod = dict.fromkeys(g.rules, False)
    changed = True
    while changed:
        changed = False
        for name, prods in g.rules.items():
            if not prod[name] and any(all(prod.get(s, True) for s in p) for p in prods):
                prod[name] = changed = True
    return prod


def oracle_member(g: Bnf, w: str) -> bool:
    return (0, len(w)) in spans(g, w)["root"]


def oracle_viable(g: Bnf, w: str) -> bool:
    """Is ``w`` a prefix of some word of ``root``? Least fixpoint of ``pf[N]``: the ``i`` with
    ``w[i:]`` a prefix of a word of ``N``."""
    n = len(w)
    sp = spans(g, w)
    prod = productive(g)
    pf: dict[str, set[int]] = {name: set() for name in g.rules}

    def full(sym: str, i: int) -> set[int]:
        if g.is_rule(sym):
            return {j for (a, j) in sp[sym] if a == i}
        return {i + 1} if i < n and w[i] == sym else set()

    def prefix(sym: str, i: int) -> bool:
        if g.is_rule(sym):
            return i in pf[sym]
        return i == n or (i == n - 1 and w[i] == sym)

    changed = True
    while changed:
        changed = False
        for name, prods in g.rules.items():
            for p in prods:
                for i in range(n + 1):
                    if i in pf[name]:
                        continue
                    ok = not p and i == n
                    cur = {i}
                    for m, sym in enumerate(p):
                        if any(prefix(sym, k) for k in cur) and all(prod.get(s, True) for s in p[m + 1 :]):
                            ok = True
                            break
                        cur = {j for k in cur for j in full(sym, k)}
                    if ok:
                        pf[name].add(i)
                        changed = True
    return 0 in pf["root"]


def words(max_len: int) -> list[str]:
    return ["".join(t) for n in range(max_len + 1) for t in itertools.product(ALPHABET, repeat=n)]


WORDS = words(MAX_LEN)


def compiled(text: str, merge: bool = True) -> Grammar:
    spec = Gbnf(text)
    return Grammar(compile_gbnf_network(spec, Limits(), merge_regular=merge), spec)


def reference_viable(g: Grammar, w: str) -> bool:
    s = g.advance(g.initial(), w.encode())
    return s is not None and not s.is_dead


# -- the property -----------------------------------------------------------------------------------------


def check_against_oracle(grammar: dict[str, list[Seq]]) -> None:
    text = render(grammar)
    bnf = desugar(grammar)
    try:
        refs = [compiled(text), compiled(text, merge=False)]
    except LimitExceeded as e:  # a highly ambiguous grammar may exceed the parser's stack budget
        assert e.limit == "parser_stacks", text
        return
    for w in WORDS:
        member = oracle_member(bnf, w)
        viable = oracle_viable(bnf, w)
        for g in refs:
            try:
                got = (g.accepts(w.encode()), reference_viable(g, w))
            except LimitExceeded as e:
                assert e.limit == "parser_stacks", text
                return
            assert got == (member, viable), f"{text!r} on {w!r}: reference {got}, oracle {(member, viable)}"


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_left_recursive_grammars_match_the_naive_recognizer(seed: int) -> None:
    check_against_oracle(random_left_recursive(random.Random(seed)))


HAND: dict[str, dict[str, list[Seq]]] = {
    "direct": {"root": [[("n", "root"), ("t", "a")], [("t", "b")]]},
    "indirect": {
        "root": [[("n", "r1"), ("t", "a")], [("t", "b")]],
        "r1": [[("n", "root"), ("t", "b")], [("t", "a")]],
    },
    "hidden-by-nullable-rule": {
        "root": [[("n", "r1"), ("n", "root"), ("t", "a")], [("t", "b")]],
        "r1": [[], [("t", "b")]],
    },
    "hidden-by-optional": {"root": [[("opt", [("t", "a")]), ("n", "root"), ("t", "b")], [("t", "a")]]},
    "cycle": {"root": [[("n", "root")], [("n", "r1")]], "r1": [[("n", "root")], [("t", "a"), ("t", "b")]]},
    "cycle-only": {"root": [[("n", "root")]]},
    "epsilon-and-cycle": {"root": [[("n", "root")], []]},
    "nullable-left-recursive": {"root": [[("n", "root"), ("t", "a")], []]},
    "left-in-star": {"root": [[("star", [("n", "root"), ("t", "a")]), ("t", "b")]]},
    "mutual-nullable": {
        "root": [[("n", "r1"), ("t", "a")], []],
        "r1": [[("n", "root"), ("n", "r2")], [("t", "b")]],
        "r2": [[("n", "r1")], []],
    },
    "two-components": {
        "root": [[("n", "root"), ("n", "r1")], [("n", "r1")]],
        "r1": [[("n", "r1"), ("t", "b")], [("t", "a")], []],
    },
}


@pytest.mark.parametrize("name", list(HAND))
def test_hand_written_left_recursion_matches_the_naive_recognizer(name: str) -> None:
    check_against_oracle(HAND[name])


def test_oracle_is_not_vacuous() -> None:
    """The oracle decides left recursion (it would be useless if it agreed by saying no to all)."""
    bnf = desugar(HAND["direct"])
    assert oracle_member(bnf, "baa") and not oracle_member(bnf, "ab") and not oracle_member(bnf, "")
    assert oracle_viable(bnf, "") and oracle_viable(bnf, "ba") and not oracle_viable(bnf, "a")
    assert not oracle_viable(desugar(HAND["cycle-only"]), "")
    assert oracle_member(desugar(HAND["epsilon-and-cycle"]), "")


EXPR = """
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" factor | factor
factor ::= [0-9]+ | "(" expr ")" | "-" factor
"""


def test_textbook_expression_grammar_agrees_with_the_earley_checker() -> None:
    g = refdecoder.compile_gbnf(EXPR, root="expr")
    rng = random.Random(3)
    for _ in range(300):
        s = "".join(rng.choice("12+-*()") for _ in range(rng.randint(0, 9)))
        assert g.accepts(s.encode()) == gbnf_accepts(s, EXPR, "expr"), s
    assert g.accepts(b"1+2*(3-4)*-5") and not g.accepts(b"1+") and not g.accepts(b"(1")


def test_size_bound_is_a_precise_refusal() -> None:
    # r_i ::= r_{i+1} "a" | r_{i+1} "b" | "c" closing back to r_0: substitution doubles at each step.
    n = 24
    lines = [f'r{i} ::= r{(i + 1) % n} "a" | r{(i + 1) % n} "b" | "c"' for i in range(n)]
    text = "root ::= r0\n" + "\n".join(lines)
    with pytest.raises(Unsupported) as ei:
        refdecoder.compile_gbnf(text)
    e = ei.value
    assert e.keyword == "gbnf-left-recursion"
    assert e.where.startswith("r") and str(Limits().rewrite_symbols) in e.reason


def test_rewrite_symbols_is_a_limits_field() -> None:
    n = 4
    lines = [f'r{i} ::= r{(i + 1) % n} "a" | r{(i + 1) % n} "b" | "c"' for i in range(n)]
    text = "root ::= r0\n" + "\n".join(lines)
    assert refdecoder.compile_gbnf(text).accepts(b"cab")  # the default compiles it
    with pytest.raises(Unsupported) as ei:  # refused as the rewrite's own refusal, naming the bound
        refdecoder.compile_gbnf(text, limits=Limits(rewrite_symbols=10))
    e = ei.value
    assert e.keyword == "gbnf-left-recursion" and "more than 10 symbols" in e.reason


def test_small_rings_are_rewritten() -> None:
    n = 4
    lines = [f'r{i} ::= r{(i + 1) % n} "a" | r{(i + 1) % n} "b" | "c"' for i in range(n)]
    text = "root ::= r0\n" + "\n".join(lines)
    g = refdecoder.compile_gbnf(text)
    for s in ("c", "ca", "cabab", "cbbbbbbba"):
        assert g.accepts(s.encode()) == gbnf_accepts(s, text), s
