"""The adversarial pickers' vectorized token weights against the one-token definition (_weight)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizers_matrix as tm
from props.backends.reference import ReferenceBackend
from props.checks.invariants import (
    Target,
    _by_rank,
    _weight,
    by_weight,
    extra_order,
    in_order,
    missing_order,
    prepare,
    token_weights,
    weighted_picker,
)
from props.checks.stateful import draw_index, draw_list, draw_one
from props.contract.findings import SpecKind, SpecRef
from refdecoder.errors import StateError


def _target(name: str) -> Target:
    t = prepare(
        ReferenceBackend(), SpecRef(SpecKind.JSON_SCHEMA, {"type": "string"}, "s", "test"), tm.get(name)
    )
    assert isinstance(t, Target)
    return t


def test_token_weights_are_the_definition_for_every_token() -> None:
    for name in ("bpe", "sp-bpe-bytefallback", "byte"):
        t = _target(name)
        w = token_weights(t)
        assert len(w) == t.size
        assert [float(x) for x in w] == [_weight(t, i) for i in range(t.size)]


@given(st.lists(st.integers(0, 10_000), unique=True, max_size=60))
def test_by_weight_orders_as_sorting_by_the_definition(ids: list[int]) -> None:
    t = _target("bpe")
    ids = list(dict.fromkeys(i % t.size for i in ids))
    assert by_weight(t, ids).tolist() == sorted(ids, key=lambda i: (-_weight(t, i), i))
    assert by_weight(t, np.array(sorted(ids), dtype=np.int64)).tolist() == by_weight(t, ids).tolist()


@given(
    st.sampled_from(["bpe", "byte", "sp-bpe-bytefallback"]),
    st.lists(st.integers(0, 10_000), max_size=400),
)
def test_by_weight_sorts_few_ids_by_rank_as_the_definition(name: str, ids: list[int]) -> None:
    """Both ways of :func:`by_weight` (few ids sorted by rank, many kept in the preference order),
    on lists with repeats, on either side of the threshold: the distinct ids sorted by the definition."""
    t = _target(name)
    ids = [i % t.size for i in ids]
    want = sorted(set(ids), key=lambda i: (-_weight(t, i), i))
    assert _by_rank(t, np.array(ids, dtype=np.int64)).tolist() == want
    assert by_weight(t, ids).tolist() == want


@given(st.lists(st.integers(0, 10_000), unique=True, min_size=1, max_size=300), st.integers(0, 2**32))
def test_weighted_picker_is_random_choices(ids: list[int], seed: int) -> None:
    """The vectorized picker takes the token ``random.choices`` takes from the same RNG state."""
    t = _target("bpe")
    allowed = np.array(sorted({i % t.size for i in ids}), dtype=np.int64)
    mine, theirs = random.Random(seed), random.Random(seed)
    pick = weighted_picker(mine)
    for _ in range(5):
        want = theirs.choices(allowed.tolist(), weights=[_weight(t, i) for i in allowed.tolist()])[0]
        assert pick(t, allowed) == want


@given(
    st.lists(st.integers(0, 10_000), unique=True, max_size=60),
    st.none() | st.integers(0, 10_000),
    st.integers(1, 7),
    st.randoms(use_true_random=False),
)
def test_certification_orders_are_the_sorted_definitions(
    ids: list[int], next_id: int | None, chunk: int, rng: random.Random
) -> None:
    """Both orders, for ids given ascending (the radix path) and shuffled (np.lexsort), read back a
    chunk at a time, are the sorted definitions."""
    t = _target("sp-bpe-bytefallback")
    ascending = sorted({i % t.size for i in ids})
    shuffled = rng.sample(ascending, len(ascending))
    nxt = None if next_id is None else next_id % t.size
    n = [len(t.vocab.token_bytes[i] or b"") for i in range(t.size)]
    for given_ids in (ascending, shuffled):
        arr = np.array(given_ids, dtype=np.int64)
        assert list(in_order(extra_order(t, arr), chunk)) == sorted(given_ids, key=lambda i: (n[i], i))
        assert list(in_order(missing_order(t, arr, nxt), chunk)) == sorted(
            given_ids, key=lambda i: (i != nxt, n[i], i)
        )


def test_draw_one_draws_every_option_and_shrinks_to_the_first() -> None:
    """``draw_one`` is ``sampled_from`` without its labels: every option can be drawn, and a failing
    draw shrinks to the first option (the most preferred token)."""
    options = [7, 3, 9, 1]
    seen: set[int] = set()

    @settings(max_examples=200, database=None)
    @given(st.data())
    def draws(data: st.DataObject) -> None:
        seen.add(draw_one(data, options))

    draws()
    assert seen == set(options)

    last: list[int] = []

    @settings(max_examples=50, database=None)
    @given(st.data())
    def fails(data: st.DataObject) -> None:
        last.append(draw_one(data, options))
        raise AssertionError("always")  # Hypothesis shrinks it and replays the smallest draw last

    with pytest.raises(AssertionError, match="always"):
        fails()
    assert last[-1] == options[0]


def test_draw_list_draws_every_length_and_shrinks_to_the_shortest_of_first_options() -> None:
    """``draw_list`` is ``st.lists(st.sampled_from(options), max_size=k)`` on bare choices: every length
    from 0 to ``k`` and every option occur, and a failure that needs two elements shrinks to two
    copies of the first option."""
    options = ["a", "b", "c"]
    lengths: set[int] = set()
    seen: set[str] = set()

    @settings(max_examples=300, database=None)
    @given(st.data())
    def draws(data: st.DataObject) -> None:
        got = draw_list(data, options, 4)
        lengths.add(len(got))
        seen.update(got)

    draws()
    assert lengths == {0, 1, 2, 3, 4} and seen == set(options)

    last: list[list[str]] = []

    @settings(max_examples=100, database=None)
    @given(st.data())
    def fails(data: st.DataObject) -> None:
        got = draw_list(data, options, 4)
        last.append(got)
        assert len(got) < 2

    with pytest.raises(AssertionError):
        fails()
    assert last[-1] == ["a", "a"]


def test_draw_index_stays_in_range() -> None:
    @settings(max_examples=100, database=None)
    @given(st.data(), st.integers(1, 50))
    def draws(data: st.DataObject, n: int) -> None:
        assert 0 <= draw_index(data, n) < n

    draws()


def test_a_state_machine_run_does_not_keep_its_target() -> None:
    """Hypothesis keeps every state machine class it has run; the class holds its target weakly, so
    the target (the spec's compiled reference and its caches) goes when certification lets it go, and
    a JSONSchemaBench shard no longer grows by megabytes a spec."""
    import gc
    import weakref

    from hypothesis.stateful import run_state_machine_as_test

    from props.checks.invariants import Target, prepare
    from props.checks.stateful import machine_for

    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "array", "items": {"type": "integer"}}, "ints", "t")
    t = prepare(ReferenceBackend(), spec, tm.byte_vocabulary())
    assert isinstance(t, Target)
    machine = machine_for(t)
    run_state_machine_as_test(
        machine, settings=settings(max_examples=3, stateful_step_count=4, database=None)
    )
    gone = weakref.ref(t)
    del t
    gc.collect()
    assert gone() is None
    with pytest.raises(StateError, match="released"):
        machine()
