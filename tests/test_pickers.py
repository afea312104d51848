"""The adversarial pickers' vectorized token weights against the one-token definition (_weight)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tokenizers_matrix as tm
from props.backends.reference import ReferenceBackend
from props.checks.invariants import (
    Target,
    _weight,
    by_weight,
    extra_order,
    missing_order,
    prepare,
    token_weights,
)
from props.contract.findings import SpecKind, SpecRef


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
    ids = [i % t.size for i in ids]
    assert by_weight(t, ids) == sorted(ids, key=lambda i: (-_weight(t, i), i))


@given(st.lists(st.integers(0, 10_000), unique=True, max_size=60), st.none() | st.integers(0, 10_000))
def test_certification_orders_are_the_sorted_definitions(ids: list[int], next_id: int | None) -> None:
    t = _target("sp-bpe-bytefallback")
    arr = np.array(sorted({i % t.size for i in ids}), dtype=np.int64)
    nxt = None if next_id is None else next_id % t.size
    n = [len(t.vocab.token_bytes[i] or b"") for i in range(t.size)]
    assert extra_order(t, arr) == sorted(arr.tolist(), key=lambda i: (n[i], i))
    assert missing_order(t, arr, nxt) == sorted(arr.tolist(), key=lambda i: (i != nxt, n[i], i))
