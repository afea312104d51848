"""Minimization's replays skip the segmentation search (the completeness levels are one signature), and
the finding a minimization keeps is classified with the search on, as certify classifies it."""

from __future__ import annotations

import time
from typing import Any

import tokenizers_matrix as tm
from props.checks.defects import for_replay, reference_grammars, shorten_witness, signature
from props.checks.invariants import Target, check_walk, prepare
from props.contract.backend import Rejected
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef

from ._toys import _NoBackslash, _Toy

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
