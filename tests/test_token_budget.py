"""Token budgets (refdecoder/_budget.py) against the slow, obvious path: breadth-first search over every
token path on a small vocabulary, for the exact distance and for the budget mask."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
import tokenizers_matrix
from refdecoder import TERMINATED, JsonProfile, JsonSchema, Matcher, Regex, TokenBudgetError, TokenGrammar
from refdecoder._budget import TokenDistances
from refdecoder._tokens import pack_ids

_NONE = JsonProfile(whitespace="none", top_level_whitespace=False)
SPECS = (
    Regex(r"[a-z]{3,6}@[a-z]{2}\.(com|org)"),
    Regex(r"(ab|cd)*e{2,4}"),
    Regex(r"x{12}|y"),
    JsonSchema(
        {
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 4}, "ok": {"type": "boolean"}},
            "required": ["name", "ok"],
            "additionalProperties": False,
        },
        _NONE,
    ),
    JsonSchema({"enum": ["alpha", "beta", [1, 2]]}),
    # undeclared keys, repeats allowed (no key memory: see test_key_memory_is_refused_with_a_reason)
    JsonSchema(
        {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2},
        JsonProfile(whitespace="none", top_level_whitespace=False, allow_duplicate_keys=True),
    ),
    JsonSchema({"type": "array", "items": {"type": "number", "minimum": 10}, "minItems": 1}, _NONE),
    # integer digits no constraint can tell apart share one memo key (NumberLexeme.future_key)
    JsonSchema({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, JsonProfile.generation()),
)


@cache
def token_grammar(which: int, vocab: str) -> TokenGrammar:
    return TokenGrammar(refdecoder.compile(SPECS[which]), tokenizers_matrix.get(vocab))


def bfs_distance(tg: TokenGrammar, state: refdecoder.State, cap: int) -> int | None:
    """The fewest tokens (EOS included) from ``state`` to the end, by breadth-first search; None past cap."""
    layer = {state}
    seen = {state}
    for d in range(cap + 1):
        if any(s is TERMINATED for s in layer):
            return d
        nxt: set[refdecoder.State] = set()
        for s in layer:
            for t in tg.allowed_ids(s):
                n = tg.advance(s, t)
                assert n is not None
                if n not in seen:
                    seen.add(n)
                    nxt.add(n)
        layer = nxt
    return None


def walk(tg: TokenGrammar, picks: list[int]) -> refdecoder.State:
    m = Matcher(tg)
    for k in picks:
        text = [t for t in m.allowed_ids() if t not in tg.eos_ids]
        if not text:
            break
        m.accept(text[k % len(text)])
    return m.state


def expected_mask(tg: TokenGrammar, state: refdecoder.State, left: int) -> np.ndarray:
    """Each allowed token whose successor ends within ``left - 1`` tokens by breadth-first search (one
    search per distinct successor state)."""
    distance: dict[refdecoder.State, int | None] = {}
    ids = []
    for t in tg.allowed_ids(state):
        nxt = tg.advance(state, t)
        assert nxt is not None
        if nxt not in distance:
            distance[nxt] = bfs_distance(tg, nxt, left - 1)
        d = distance[nxt]
        if d is not None and 1 + d <= left:
            ids.append(t)
    return pack_ids(ids, tg.vocab_size)


# Breadth-first search over token paths grows as (allowed tokens) ** depth: deep on the byte vocabulary,
# shallow on the BPE one.
DEPTH = {"byte": 3, "bpe": 2}


@settings(max_examples=10, deadline=None)
@given(
    st.integers(0, len(SPECS) - 1),
    st.sampled_from(sorted(DEPTH)),
    st.lists(st.integers(0, 10_000), max_size=6),
    st.integers(1, 5),
)
def test_distance_and_budget_mask_match_breadth_first(
    which: int, vocab: str, picks: list[int], left: int
) -> None:
    tg = token_grammar(which, vocab)
    state = walk(tg, picks)
    cap = DEPTH[vocab]
    left = min(left, cap)
    dist = TokenDistances(tg, max_work=1_000_000)
    assert dist.distance(state, cap) == bfs_distance(tg, state, cap)
    got = dist.budget_mask(state, left)
    assert np.array_equal(got, expected_mask(tg, state, left)), (left, state)


def test_a_search_past_its_bound_raises_and_never_guesses() -> None:
    tg = TokenGrammar(refdecoder.compile(Regex("(abcdefghij|k{30})")), tokenizers_matrix.get("bpe"))
    start = tg.initial()
    exact = bfs_distance(tg, start, 12)
    assert exact is not None and exact > 2
    with pytest.raises(TokenBudgetError, match="max_work"):
        TokenDistances(tg, max_work=0).within(start, exact - 1)
    assert TokenDistances(tg).distance(start, 40) == exact


def test_a_budget_the_spec_cannot_fit_is_refused_before_generation() -> None:
    from refdecoder.hf import ReferenceLogitsProcessor

    vocabulary = tokenizers_matrix.get("byte")
    with pytest.raises(TokenBudgetError, match="needs at least 6 tokens") as info:
        ReferenceLogitsProcessor(Regex("abcde"), vocabulary, max_new_tokens=5)
    assert info.value.budget == 5 and info.value.needed == 6
    assert ReferenceLogitsProcessor(Regex("abcde"), vocabulary, max_new_tokens=6).distances is not None


def test_key_memory_is_refused_with_a_reason() -> None:
    from refdecoder import Unsupported

    tg = TokenGrammar(refdecoder.compile(JsonSchema({"type": "object"}, _NONE)), tokenizers_matrix.get("bpe"))
    with pytest.raises(Unsupported, match="KeyLexeme.*additionalProperties: false"):
        refdecoder.budget_distances(tg, 40)
    unique = JsonSchema({"type": "array", "uniqueItems": True}, _NONE)
    with pytest.raises(Unsupported, match="ValueLexeme"):
        refdecoder.budget_distances(
            TokenGrammar(refdecoder.compile(unique), tokenizers_matrix.get("bpe")), 40
        )
