"""Certify's set-up: what every spec reads of a vocabulary is built before the first spec, and the
objects alive then are kept out of the garbage collector's reach while the checks run."""

from __future__ import annotations

import gc
from typing import Any

import pytest

import maskcert.certification as certification
from props.checks import invariants
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case
from refdecoder._tokens import _TRIES, vocabulary_key

CASES = [
    Case(SpecRef(SpecKind.JSON_SCHEMA, {"type": "boolean"}, "bool", "test")),
    Case(SpecRef(SpecKind.JSON_SCHEMA, {"enum": ["a", "bc"]}, "enum", "test")),
]
KW: dict[str, Any] = {"tokenizers": ["byte"], "corpus": (), "cases": CASES, "examples": 1, "minimize_s": 0}


def _clear_vocabulary_tables() -> None:
    for store in (invariants._TEXT, invariants._LENGTHS, invariants._LENGTH_KEYS, invariants._WEIGHTS):
        store.clear()
    invariants._ORDERS.clear()
    invariants._RANKS.clear()
    _TRIES.clear()


def test_the_vocabulary_tables_are_built_before_the_first_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_vocabulary_tables()
    vocab = certification.load_vocabularies(["byte"])[0]
    vars(vocab).pop("index", None)  # a cached property: built on first use, by whoever uses it first
    seen: list[tuple[bool, bool, bool]] = []
    run_case = certification._guarded_case

    def spy(backend: Any, case: Case, vocab: Any, kw: dict[str, Any]) -> Any:
        key = (vocab.fingerprint, len(vocab))
        seen.append((vocabulary_key(vocab) in _TRIES, key in invariants._ORDERS, "index" in vars(vocab)))
        return run_case(backend, case, vocab, kw)

    monkeypatch.setattr(certification, "_guarded_case", spy)
    report = certification.certify("reference", **{**KW, "tokenizers": [vocab]})
    assert seen == [(True, True, True)] * len(CASES)
    setup = report.data["profile"]["setup_s"]
    assert list(setup) == ["load vocabularies", "vocabulary tables", "load corpus", "start backend"]
    assert all(v >= 0 for v in setup.values())


def test_the_checks_run_with_the_set_up_frozen_and_thaw_it_after(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gc.get_freeze_count() == 0
    during: list[int] = []
    run_case = certification._guarded_case

    def spy(backend: Any, case: Case, vocab: Any, kw: dict[str, Any]) -> Any:
        during.append(gc.get_freeze_count())
        return run_case(backend, case, vocab, kw)

    monkeypatch.setattr(certification, "_guarded_case", spy)
    certification.certify("reference", **KW)
    assert len(during) == len(CASES) and all(n > 0 for n in during)
    assert gc.get_freeze_count() == 0


def test_a_run_inside_a_frozen_one_leaves_the_outer_freeze_alone() -> None:
    gc.freeze()
    try:
        assert certification._freeze_set_up() is False
        certification.certify("reference", **KW)
        assert gc.get_freeze_count() > 0  # still frozen (unfreezing would empty it; refcounts free a few)
    finally:
        gc.unfreeze()
