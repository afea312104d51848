"""Minimization's replays skip the segmentation search (the completeness levels are one signature), and
the finding a minimization keeps is classified with the search on, as certify classifies it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizers_matrix as tm
from props.backends import worker
from props.backends.worker import WorkerBackend
from props.checks import invariants
from props.checks.defects import for_replay, reference_grammars, shorten_witness, signature
from props.checks.invariants import (
    _SEGMENTATION_FORKS,
    BackendFault,
    Target,
    _search_segmentations,
    check_walk,
    mask_bits,
    prepare,
)
from props.checks.segments import candidates
from props.contract.backend import Rejected
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef

from ._toys import CrashAfterThree, _NoBackslash, _Toy, _Wrapped

_SPEC = SpecRef(SpecKind.JSON_SCHEMA, {"type": "array", "items": {"type": "string"}}, "strings", "t")
_TEXT = b'["a\\u0041"]'


class _Refuses(_NoBackslash):
    def accept(self, token_id: int) -> Any:
        if token_id == ord("\\"):
            return Rejected(token_id, b"\\", "", "no escapes here")
        return self.inner.accept(token_id)


class NoEscapes(_Toy):
    """Masks and rejects ``\\`` (byte id 92): no segmentation of a string with an escape passes."""

    matcher_class = _Refuses


def _blocked_escape(t: Target) -> list[Finding]:
    return [x for x in check_walk(t, list(_TEXT), "canonical") if x.token_bytes == b"\\"]


def test_a_replay_target_does_not_search_and_says_so_with_the_same_signature() -> None:
    vocab, backend, grammar_of = tm.byte_vocabulary(), NoEscapes(), reference_grammars()
    searched = prepare(backend, _SPEC, vocab)
    replayed = prepare(backend, _SPEC, vocab)
    assert isinstance(searched, Target) and isinstance(replayed, Target)
    assert for_replay(replayed) is replayed and not replayed.segmentation_search
    full = _blocked_escape(searched)[0]  # the first step whose mask blocks it (then accept() too)
    quick = _blocked_escape(replayed)[0]
    assert (full.step, full.token_id) == (quick.step, quick.token_id)
    assert full.invariant == Invariant.COMPLETENESS_BYTE  # the search exhausted every segmentation
    assert (full.certificate or {})["segmentation_search"] == "exhausted"
    assert (quick.certificate or {})["segmentation_search"] == "not searched"
    assert quick.invariant != Invariant.COMPLETENESS_BYTE  # the level only the search can prove
    assert signature(quick, grammar_of(quick)) == signature(full, grammar_of(full))


def test_the_shortened_finding_is_classified_with_the_search() -> None:
    vocab, backend, grammar_of = tm.byte_vocabulary(), NoEscapes(), reference_grammars()
    t = prepare(backend, _SPEC, vocab)
    assert isinstance(t, Target)
    f = _blocked_escape(for_replay(t))[0]  # as minimization hands it over: not searched
    sig = signature(f, grammar_of(f))
    short = shorten_witness(f, sig, backend, vocab, grammar_of, deadline=time.monotonic() + 60)
    g = short.finding
    assert signature(g, grammar_of(g)) == sig
    assert g.invariant == Invariant.COMPLETENESS_BYTE
    assert (g.certificate or {})["segmentation_search"] == "exhausted"


def test_a_witness_is_searched_once_per_target() -> None:
    vocab, backend = tm.byte_vocabulary(), NoEscapes()
    t = prepare(backend, _SPEC, vocab)
    assert isinstance(t, Target)
    first = _blocked_escape(t)
    searched = dict(t.segmentations)
    assert len(searched) == len(first) and set(searched.values()) == {False}  # each exhausted
    before = t.checks["completeness_byte"]
    t.fresh()  # a Hypothesis replay forgets what it saw, not what the backend does
    again = _blocked_escape(t)
    assert [f.invariant for f in again] == [f.invariant for f in first]
    assert t.segmentations == searched  # answered from the memo, not searched again
    assert t.checks["completeness_byte"] > before  # the walk was checked again


class _Bans(_Wrapped):
    """Masks the token ids in ``backend.banned``, and logs every call the search makes."""

    def mask(self) -> np.ndarray:
        self.backend.log.append(("mask",))
        return self._pack(i for i in self._ids() if i not in self.backend.banned)

    def accept(self, token_id: int) -> Any:
        self.backend.log.append(("accept", token_id))
        return self.inner.accept(token_id)

    def fork(self) -> Any:
        self.backend.log.append(("fork",))
        return super().fork()


class Bans(_Toy):
    matcher_class = _Bans

    def __init__(self, banned: Iterable[int] = ()) -> None:
        super().__init__()
        self.banned = frozenset(banned)
        self.log: list[tuple[Any, ...]] = []


def _plain_search(t: Target, data: bytes) -> bool | None:
    """The segmentation search as first written (the definition): every mask unpacked, the matches
    at a position sorted on each visit."""
    index = t.vocab.index
    reach = index.reach(data)
    budget = [invariants._SEGMENTATION_FORKS]

    def dfs(m: Any, i: int, bits: np.ndarray) -> bool | None:
        if i == len(data):
            return t.eos_of(bits)
        unknown = False
        for tok, end in sorted(index.matches(data, i), key=lambda te: -te[1]):
            if not reach[end] or not bits[tok]:
                continue
            if budget[0] <= 0:
                return None
            budget[0] -= 1
            child, outcome, packed = t.fork_accept_mask(m, tok)
            if type(outcome).__name__ == "Rejected":
                continue
            found = dfs(child, end, mask_bits(packed, t.size))
            if found:
                return True
            unknown = unknown or found is None
        return None if unknown else False

    m = t.matcher()
    return dfs(m, 0, t.backend_mask(m))


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet='ab "\\é', max_size=12), data=st.data())
def test_the_segmentation_search_is_the_plain_dfs(text: str, data: st.DataObject) -> None:
    """``_search_segmentations`` reads masks at the candidate ids only and lists a position's
    candidates once: the same verdict, and the same engine calls in the same order, as the plain
    depth-first search, whatever tokens the backend bans and whatever the budget (exhausted, found,
    or out of forks)."""
    vocab = tm.get("bpe")
    raw = json.dumps(text, ensure_ascii=False).encode()
    matching = sorted({tok for i in range(len(raw)) for tok, _ in vocab.index.matches(raw, i)})
    banned = frozenset(data.draw(st.sets(st.sampled_from(matching), max_size=6)) if matching else ())
    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "string"}, "string", "t")
    forks = data.draw(st.sampled_from([3, 12, _SEGMENTATION_FORKS]))  # small: the budget runs out
    verdicts, logs = [], []
    for search in (_search_segmentations, _plain_search):
        backend = Bans(banned)
        t = prepare(backend, spec, vocab)
        assert isinstance(t, Target)
        backend.log.clear()
        with mock.patch.object(invariants, "_SEGMENTATION_FORKS", forks):
            verdicts.append(search(t, raw))
        logs.append(backend.log)
    assert verdicts[0] == verdicts[1]
    assert logs[0] == logs[1]


_WORKER_CASES = [  # text, the backend bans every token holding these bytes, forks
    ("ab ba", b"\x00", 256),  # found
    ("ab ba é", b"\xa9", 256),  # no token may read é: exhausted
    ("ab ba é", b"\xa9", 3),  # out of forks first
]


@pytest.mark.parametrize(("text", "banned", "forks"), _WORKER_CASES)
@pytest.mark.parametrize("slice_s", [0.0, 0.25])  # 0: the worker answers after every fork
def test_the_worker_runs_the_segmentation_search_as_it_runs_here(
    text: str, banned: bytes, forks: int, slice_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker runs the whole search over its engine matcher, in slices: the verdict, the engine
    calls and the masks it reads are those of the search run here over the same backend."""
    vocab = tm.get("bpe")
    ids = [i for i, b in enumerate(vocab.token_bytes) if b is not None and banned in b]
    raw = json.dumps(text, ensure_ascii=False).encode()
    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "string"}, "string", "t")
    monkeypatch.setattr(worker, "SEARCH_SLICE_S", slice_s)
    here = Bans(ids)
    t = prepare(here, spec, vocab)
    assert isinstance(t, Target)
    here.log.clear()
    with mock.patch.object(invariants, "_SEGMENTATION_FORKS", forks):
        expected = _search_segmentations(t, raw)
    with WorkerBackend(f"{__name__}:Bans", options={"banned": ids}, timeout_s=20) as w:
        tw = prepare(w, spec, vocab)
        assert isinstance(tw, Target)
        m = tw.matcher()
        verdict, calls, mask_ms = m.inner.segment_search(
            candidates(vocab.index, raw), len(raw), tw.eos, tw.size, forks
        )
    assert verdict == expected
    assert calls == len(here.log) and len(mask_ms) == here.log.count(("mask",))


def test_a_failing_engine_call_in_the_worker_search_is_named() -> None:
    """An engine call that raises inside the worker's search comes back as the fault of that call
    (``mask``), as it does when the search runs here."""
    vocab = tm.get("bpe")
    raw = json.dumps("abcdef").encode()
    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "string"}, "string", "t")
    faults = []
    here = CrashAfterThree()
    with WorkerBackend(f"{CrashAfterThree.__module__}:CrashAfterThree", timeout_s=20) as w:
        for backend in (here, w):
            t = prepare(backend, spec, vocab)
            assert isinstance(t, Target)
            with pytest.raises(BackendFault) as caught:
                _search_segmentations(t, raw)
            faults.append((caught.value.operation, str(caught.value.error)))
    assert faults[0] == faults[1] == ("mask", "toy backend: internal error after three tokens")
