"""``finish_within_max_tokens`` in the serving loop (issue 30, docs/design.md §5): a budgeted request whose
spec's shortest output fits ends with ``stop`` and valid output within ``max_tokens`` under every
decoding shape (sampled, ``n > 1``, beams, speculative, preempted and resumed), judged by independent
validators; one that does not fit, or whose grammar the budget refuses, is refused at admission with
the reason; the ``budget_ignored`` fault is caught."""

from __future__ import annotations

import json
import re
from typing import Any, cast

import jsonschema
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
import tokenizers_matrix
from props.backends import load_backend
from refdecoder import Accepted, Choice, JsonProfile, JsonSchema, Regex, Spec
from refdecoder.sampler import SamplingParams
from serving_sim import (
    AdversarialModel,
    Engine,
    EngineConfig,
    InvariantChecker,
    Request,
    RequestHandle,
    shortest_output,
)

PROFILE = JsonProfile(allow_duplicate_keys=True, whitespace=1)
SPECS: list[Spec] = [
    Choice(["yes", "no", "maybe"]),
    Choice(["café", "日本語", "🙂 ok"]),
    Regex(r"[a-z]{1,8}(-[0-9]{1,3})?"),
    Regex(r"(é|ü|ß|中文)+!"),
    JsonSchema(
        {
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        },
        PROFILE,
    ),
    JsonSchema({"type": "array", "items": {"enum": ["a", "ü", 1, None]}, "maxItems": 3}, PROFILE),
    JsonSchema({"type": "object", "required": ["k"]}, PROFILE),  # undeclared keys, duplicates allowed
]
VOCABS = ("bpe", "byte")
CAP = 40  # shortest outputs above this are not tried
SHAPES: list[dict[str, Any]] = [
    {},
    {"n": 2},
    {"beam_width": 2},
    {"speculative": 2},
    {"speculative": 4, "stream": True},
]
PARAMS = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=1.3),
    SamplingParams(temperature=0.9, top_k=20),
    SamplingParams(temperature=1.0, top_p=0.9, min_p=0.01),
]


def vocabulary(name: str) -> Any:
    return tokenizers_matrix.get(name)


def engine(vocab: Any, *, seed: int = 0, faults: tuple[str, ...] = ()) -> tuple[Engine, InvariantChecker]:
    checker = InvariantChecker()
    # No collapsed or NaN positions: every budget-allowed token has a finite logit, so each output
    # must end with EOS (a model that forbids them all is the constraint_violation path, tested apart).
    model = AdversarialModel(vocab, seed=seed, collapse_rate=0.0, nan_rate=0.0)
    eng = Engine(
        model,
        load_backend("reference"),
        vocab,
        EngineConfig(max_rows=8, seed=seed),
        faults=faults,
        observers=[checker],
    )
    return eng, checker


def prompt(vocab: Any) -> tuple[int, ...]:
    ids = [i for i, b in enumerate(vocab.token_bytes) if b is not None and b.isascii() and b.isalpha()]
    return tuple(ids[:3])


def in_language(spec: Spec, text: str) -> bool:
    """Independent of the reference: membership, ``re.fullmatch``, ``json`` + ``jsonschema``."""
    if isinstance(spec, Choice):
        return text in spec.options
    if isinstance(spec, Regex):
        return re.fullmatch(spec.pattern, text) is not None
    assert isinstance(spec, JsonSchema)
    try:
        jsonschema.validate(json.loads(text), spec.schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def run_to_end(eng: Engine, handle: RequestHandle, preempt_at: int | None) -> None:
    steps = 0
    while eng.has_unfinished and steps < 500:
        eng.step()
        steps += 1
        if steps == preempt_at:
            eng.preempt(handle.request_id)
    assert handle.done


@given(
    spec_i=st.integers(0, len(SPECS) - 1),
    vocab_name=st.sampled_from(VOCABS),
    params=st.sampled_from(PARAMS),
    shape=st.sampled_from(SHAPES),
    slack=st.integers(0, 3),
    seed=st.integers(0, 2**16),
    preempt_at=st.sampled_from([None, None, 1, 2]),
)
def test_budgeted_requests_end_with_valid_stop(spec_i, vocab_name, params, shape, slack, seed, preempt_at):
    spec, vocab = SPECS[spec_i], vocabulary(vocab_name)
    need = shortest_output(spec, vocab, CAP)
    if need is None:
        return  # does not fit CAP here (or refused by the budget): the refusal tests cover it
    max_tokens = need + slack
    eng, checker = engine(vocab, seed=seed)
    h = eng.submit(
        Request(prompt(vocab), spec, params, max_tokens=max_tokens, finish_within_max_tokens=True, **shape)
    )
    assert h.refusal is None, h.refusal
    run_to_end(eng, h, preempt_at)
    if "beam_width" in shape:  # fewer beams when fewer tokens can still end in time
        assert 1 <= len(h.outputs) <= shape["beam_width"]
    else:
        assert len(h.outputs) == shape.get("n", 1)
    for out in h.outputs:
        assert out.finish_reason == "stop", (out, max_tokens)
        assert len(out.token_ids) <= max_tokens and out.token_ids[-1] in vocab.eos_ids
        text = vocab.decode(list(out.token_ids)).decode("utf-8")
        assert out.valid and in_language(spec, text), (text, spec)
    assert checker.clean, [str(v) for v in checker.violations]


@pytest.mark.parametrize("vocab_name", VOCABS)
@pytest.mark.parametrize("spec_i", range(len(SPECS)))
def test_unfittable_request_is_refused_with_the_budget_reason(spec_i, vocab_name):
    spec, vocab = SPECS[spec_i], vocabulary(vocab_name)
    need = shortest_output(spec, vocab, CAP)
    if need is None or need < 2:
        pytest.skip("no shorter budget to try")
    tg = refdecoder.TokenGrammar(refdecoder.compile(spec), vocab)
    with pytest.raises(refdecoder.TokenBudgetError) as err:
        refdecoder.budget_distances(tg, need - 1)
    assert err.value.needed == need and err.value.budget == need - 1
    eng, checker = engine(vocab)
    h = eng.submit(Request(prompt(vocab), spec, max_tokens=need - 1, finish_within_max_tokens=True))
    assert h.refusal is not None and str(err.value) in h.refusal and "finish_within_max_tokens" in h.refusal
    assert h.outputs == [] and not eng.has_unfinished
    # Exactly the shortest output fits: admitted.
    fits = eng.submit(Request(prompt(vocab), spec, max_tokens=need, finish_within_max_tokens=True))
    assert fits.refusal is None
    eng.run()
    assert checker.clean, [str(v) for v in checker.violations]


def test_grammar_the_budget_refuses_and_unconstrained_are_refused():
    vocab = vocabulary("bpe")
    eng, checker = engine(vocab)
    keyed = JsonSchema({"type": "object"}, JsonProfile())  # unique undeclared keys: key memory
    tg = refdecoder.TokenGrammar(refdecoder.compile(keyed), vocab)
    with pytest.raises(refdecoder.Unsupported) as err:
        refdecoder.budget_distances(tg, 16)
    h = eng.submit(Request(prompt(vocab), keyed, max_tokens=16, finish_within_max_tokens=True))
    assert h.refusal is not None and str(err.value) in h.refusal
    free = eng.submit(Request(prompt(vocab), None, max_tokens=16, finish_within_max_tokens=True))
    assert free.refusal is not None and "finish_within_max_tokens" in free.refusal
    # Without the flag the same spec is served as before.
    assert eng.submit(Request(prompt(vocab), keyed, max_tokens=16)).refusal is None
    eng.run()
    assert checker.clean, [str(v) for v in checker.violations]


class LooseMatcher:
    """A reference matcher that also allows, and "accepts" without moving, one token it forbids."""

    def __init__(self, inner: Any, token: int) -> None:
        self.inner = inner
        self.token = token

    @property
    def state(self) -> Any:
        return self.inner.state

    def mask(self) -> np.ndarray:
        row = np.array(self.inner.mask(), dtype=np.int32)
        row[self.token >> 5] |= np.uint32(1 << (self.token & 31)).view(np.int32)
        return row

    def accept(self, token_id: int) -> Any:
        if token_id == self.token:
            return Accepted(token_id, None, "")
        return self.inner.accept(token_id)

    def fork(self) -> LooseMatcher:
        return LooseMatcher(self.inner.fork(), self.token)

    def rollback(self, k: int) -> None:
        self.inner.rollback(k)


class LooseBackend:
    """The reference with one unsound token (a third-party backend's defect, for the checker)."""

    name = "loose"
    version = "0"

    def __init__(self, token: int) -> None:
        self.inner = load_backend("reference")
        self.profile = self.inner.profile
        self.token = token

    def compile(self, spec: Spec, vocabulary: Any) -> Any:
        return self.inner.compile(spec, vocabulary)

    def matcher(self, compiled: Any) -> LooseMatcher:
        return LooseMatcher(self.inner.matcher(compiled), self.token)


class Favouring(AdversarialModel):
    """Adversarial logits with one token far ahead of the rest."""

    def __init__(self, vocab: Any, token: int) -> None:
        super().__init__(vocab, seed=5, collapse_rate=0.0, nan_rate=0.0)
        self.token = token

    def logits_for(self, context: Any) -> np.ndarray:
        x = super().logits_for(context)
        x[self.token] = 40.0
        return x


@pytest.mark.parametrize("shape", [{}, {"n": 2}, {"beam_width": 2}, {"speculative": 3}])
def test_backend_unsoundness_is_neither_hidden_nor_a_crash(shape):
    vocab = vocabulary("byte")
    bad = ord("z")  # no spec here allows it
    checker = InvariantChecker()
    eng = Engine(
        Favouring(vocab, bad),
        cast(Any, LooseBackend(bad)),
        vocab,
        EngineConfig(max_rows=8),
        observers=[checker],
    )
    spec = SPECS[0]
    need = shortest_output(spec, vocab, CAP)
    assert need is not None
    h = eng.submit(Request(prompt(vocab), spec, max_tokens=need + 1, finish_within_max_tokens=True, **shape))
    eng.run()
    # The budget, which is the reference's, keeps the unsound token out of the outputs ...
    assert h.outputs and all(o.finish_reason == "stop" and bad not in o.token_ids for o in h.outputs)
    # ... and the checker still reports the backend's mask as unsound (a conformance finding).
    assert "backend:soundness" in checker.by_invariant()
    assert not {k for k in checker.by_invariant() if not k.startswith("backend:")}, checker.violations


@pytest.mark.parametrize("shape", [{}, {"beam_width": 2}, {"speculative": 3}])
def test_budget_ignored_fault_is_caught(shape):
    vocab = vocabulary("bpe")
    spec = SPECS[4]
    need = shortest_output(spec, vocab, CAP)
    assert need is not None

    def run(faults: tuple[str, ...]) -> InvariantChecker:
        eng, checker = engine(vocab, seed=1, faults=faults)
        hot = SamplingParams(temperature=1.0)
        for _ in range(3):
            eng.submit(
                Request(prompt(vocab), spec, hot, max_tokens=need + 1, finish_within_max_tokens=True, **shape)
            )
        eng.run()
        return checker

    assert run(()).clean
    faulty = run(("budget_ignored",))
    assert "budget" in faulty.by_invariant(), faulty.violations
    assert all("finish_within_max_tokens" in v.message for v in faulty.violations if v.invariant == "budget")
