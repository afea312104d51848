"""The grammar IR's static checks: left recursion is refused, productivity pruning keeps no dead ends."""

from __future__ import annotations

import pytest

from refdecoder import Regex, Unsupported
from refdecoder._ir import Alt, GrammarBuilder, Seq, find_cycle
from refdecoder._lexeme import ByteDFA
from refdecoder.grammar import Grammar


def test_find_cycle() -> None:
    assert find_cycle([1, 2, 3], {1: [2], 2: [3], 3: []}.__getitem__) is None
    assert find_cycle([1, 2, 3], {1: [2], 2: [3], 3: [2]}.__getitem__) == [2, 3, 2]
    assert find_cycle(["a"], {"a": ["a"]}.__getitem__) == ["a", "a"]


def test_left_recursion_is_refused() -> None:
    b = GrammarBuilder()
    x = b.reserve()
    a = b.lex(ByteDFA.literal(b"a"))
    b.define(x, Alt((b.add(Seq((x, a))), a)))  # x ::= x "a" | "a"
    with pytest.raises(Unsupported) as e:
        b.finish(x)
    assert e.value.keyword == "left-recursion"


def test_unproductive_options_are_pruned() -> None:
    b = GrammarBuilder()
    dead = b.reserve()
    a = b.lex(ByteDFA.literal(b"a"))
    b.define(dead, Seq((a, dead)))  # dead ::= "a" dead: derives no finite string
    root = b.alt([b.seq([a, b.lex(ByteDFA.literal(b"b"))]), dead])
    g = Grammar(b.finish(root), Regex("ab"))
    s = g.advance(g.initial(), b"a")
    assert s is not None and g.live_bytes(s) == b"b"  # no stack left in the unproductive branch
    assert g.accepts(b"ab") and not g.accepts(b"aa")
