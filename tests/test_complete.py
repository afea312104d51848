"""The structural completion (refdecoder/_complete.py) against the slow, obvious path: the matcher
accepts every completion it gives, and it is as short as breadth-first search over states finds."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
from props.checks.witness import breadth_first_completion, shortest_completion
from props.corpus import load_corpus, reference_spec
from refdecoder._ir import Lex
from refdecoder._numbers import NumberLexeme
from refdecoder._valuememory import AnyValueLexeme, ScalarValueLexeme


@cache
def _grammars() -> tuple[refdecoder.Grammar, ...]:
    out = []
    for case in load_corpus("builtin"):
        try:
            out.append(refdecoder.compile(reference_spec(case.spec)))
        except refdecoder.MaskcertError:
            continue
    out.append(
        refdecoder.compile(
            refdecoder.Gbnf('root ::= "(" root ")" | "x" | "[" list "]"\nlist ::= root ("," root)*')
        )
    )
    return tuple(out)


def _has_numbers(g: refdecoder.Grammar) -> bool:
    """Number lexemes, and the value lexemes of unique arrays (which read numbers and any value),
    complete constructively rather than shortest."""
    kinds = (NumberLexeme, ScalarValueLexeme, AnyValueLexeme)
    return any(isinstance(n, Lex) and isinstance(n.lexeme, kinds) for n in g.network.nodes)


def _walk(g: refdecoder.Grammar, picks: list[int]) -> Any:
    s = g.initial()
    for k in picks:
        live = g.live_bytes(s)
        if not live:
            break
        nxt = g.advance_byte(s, live[k % len(live)])
        assert nxt is not None
        s = nxt
    return s


@given(st.integers(0, 10_000), st.lists(st.integers(0, 255), max_size=40))
def test_completion_is_accepted_and_shortest(which: int, picks: list[int]) -> None:
    grammars = _grammars()
    g = grammars[which % len(grammars)]
    s = _walk(g, picks)
    word = g.completion(s)  # Grammar.completion raises if the matcher does not accept it
    bfs = breadth_first_completion(g, s, max_states=3_000) if not s.accepting else b""
    if bfs is None:
        return  # breadth-first search gave up: nothing to compare with
    assert word is not None, f"no structural completion where BFS finds {bfs!r}"
    end = g.advance(s, word)
    assert end is not None and end.accepting
    if _has_numbers(g):
        # A number lexeme's witness is constructive, not always shortest: only acceptance is claimed.
        return
    assert len(word) == len(bfs), (word, bfs)


def test_required_keys_complete_where_depth_first_search_gave_up() -> None:
    schema = {
        "type": "object",
        "properties": {f"k{i}": {"type": "string", "minLength": 3} for i in range(12)},
        "required": [f"k{i}" for i in range(12)],
        "additionalProperties": False,
    }
    g = refdecoder.compile(refdecoder.JsonSchema(schema))
    s = g.advance(g.initial(), b'{"k3":"ab')
    assert s is not None
    word = g.completion(s)
    assert word is not None
    end = g.advance(s, word)
    assert end is not None and end.accepting
    assert shortest_completion(g, s) == word


@pytest.mark.parametrize("source", ['root ::= "a" root | "b"', 'root ::= [a-c]{2,4} "!"'])
def test_completion_of_the_initial_state(source: str) -> None:
    g = refdecoder.compile(refdecoder.Gbnf(source))
    word = g.completion(g.initial())
    assert word is not None and g.accepts(word)
    assert len(word) == len(breadth_first_completion(g, g.initial(), 10_000) or b"")


@given(st.integers(0, 10_000), st.lists(st.integers(0, 255), max_size=40))
def test_live_bytes_are_the_bytes_a_step_takes(which: int, picks: list[int]) -> None:
    """``Grammar.live_bytes`` (which takes a byte a top lexeme reads on as live without a parser
    step) against its definition: every byte stepped, on a fresh grammar whose step memo holds
    nothing the fast path put there."""
    grammars = _grammars()
    g = grammars[which % len(grammars)]
    s = _walk(g, picks)
    fresh = refdecoder.Grammar(g.network, g.spec, g.limits)
    want = bytes(b for b in range(256) if fresh.advance_byte(s, b) is not None)
    assert g.live_bytes(s) == want
    readable, onward = g._parser.byte_candidates(s)
    assert onward <= set(want) <= set(readable)  # the fast path's claim, and the candidates' superset
    bound = g.readable_bound(s)  # what TokenGrammar marks dead before a walk: never a live byte
    assert bound is None or set(want) <= set(bound)
    firsts: dict[Any, int] = {}  # bytes with one step key step to one result (TokenGrammar shares it)
    for b in range(256):
        first = firsts.setdefault(g.step_key(s, b), b)
        assert fresh.advance_byte(s, b) == fresh.advance_byte(s, first), (b, first)


_DISTANCES: dict[Any, tuple[dict[Any, dict[int, Any]], dict[Any, int]]] = {}


def _dfa_distances(lexeme: Any) -> tuple[dict[Any, dict[int, Any]], dict[Any, int]]:
    """A ByteDFA's edges (every byte tried from every state reachable from its start; a trim DFA
    numbered from its start reaches them all) and each state's distance to a final state, breadth
    first backwards from the finals."""
    if lexeme.key not in _DISTANCES:
        edges: dict[Any, dict[int, Any]] = {}
        todo = [lexeme.start()]
        while todo:
            s = todo.pop()
            if s not in edges:
                edges[s] = {b: t for b in range(256) if (t := lexeme.step(s, b)) is not None}
                todo.extend(edges[s].values())
        into: dict[Any, list[Any]] = {s: [] for s in edges}
        for s, out in edges.items():
            for t in out.values():
                into[t].append(s)
        dist = {s: 0 for s in edges if lexeme.is_final(s)}
        layer = list(dist)
        while layer:
            below = []
            for t in layer:
                for p in into[t]:
                    if p not in dist:
                        dist[p] = dist[t] + 1
                        below.append(p)
            layer = below
        _DISTANCES[lexeme.key] = (edges, dist)
    return _DISTANCES[lexeme.key]


def _smallest_shortest_word(lexeme: Any, lstate: Any) -> bytes | None:
    """By definition, without a search from ``lstate``: from it, the first byte in _ORDER that goes
    one step closer to a final state (:func:`_dfa_distances`), until a final state: the shortest
    word, smallest in _ORDER's order."""
    from refdecoder._complete import _ORDER

    edges, dist = _dfa_distances(lexeme)
    if lstate not in dist:
        return None
    word, s = bytearray(), lstate
    while dist[s]:
        b = next(b for b in _ORDER if b in edges[s] and dist.get(edges[s][b]) == dist[s] - 1)
        word.append(b)
        s = edges[s][b]
    return bytes(word)


def test_byte_dfa_words_are_the_obvious_search_and_shared_across_grammars() -> None:
    """A ByteDFA's shortest word from each of its states, through a Completer whose shared table
    (_DFA_WORDS, keyed by the DFA's digest) other grammars filled first, is the shortest word that
    comes first in _ORDER's order (which breadth-first search with first-visit parents finds), and
    the same as with the table emptied."""
    import refdecoder._complete as complete
    from refdecoder._lexeme import ByteDFA

    complete._DFA_WORDS.clear()
    grammars = _grammars()
    warm: dict[tuple[int, int, Any], bytes | None] = {}
    for which, g in enumerate(grammars):  # every grammar's completer fills the shared table in turn
        completer = complete.Completer(g.network)
        for node_id, node in enumerate(g.network.nodes):
            if isinstance(node, Lex) and isinstance(node.lexeme, ByteDFA):
                for q in range(min(node.lexeme.num_states, 40)):
                    warm[(which, node_id, q)] = completer._lexeme_word(node_id, node, q)
    assert len(complete._DFA_WORDS) < len(warm)  # grammars did share lexemes
    complete._DFA_WORDS.clear()
    for (which, node_id, q), word in warm.items():
        node = grammars[which].network.nodes[node_id]
        assert isinstance(node, Lex)
        assert word == _smallest_shortest_word(node.lexeme, q)
        assert word == complete.Completer(grammars[which].network)._lexeme_word(node_id, node, q)
