"""The serving loop's parts: lifecycle table, admission, caches, snapshots, streaming, finish reasons,
beams, speculation, preemption, the tiny transformer, and a third-party adapter."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
import serving_sim
from props.backends import BackendUnavailable, load_backend
from props.contract.backend import Compiled
from props.corpus import reference_spec, validate_output
from refdecoder import Choice, JsonProfile, JsonSchema, Regex
from refdecoder.sampler import SamplingParams
from serving_sim import (
    AdmissionRefused,
    AdversarialModel,
    CacheEntry,
    CompileCache,
    Delta,
    Engine,
    EngineConfig,
    Event,
    Finished,
    InvariantChecker,
    LifecycleError,
    MatcherSnapshot,
    PrefixCache,
    Request,
    SnapshotMismatch,
    Status,
    permuted_vocabulary,
    transition,
)
from serving_sim._stream import TextStream
from tokenizers_matrix import byte_vocabulary

WORDS = Choice(["café", "naïve", "日本語", "yes"])


@pytest.fixture(scope="module")
def vocab():
    return byte_vocabulary()


def make_engine(vocab, *, faults=(), config=None, model=None, **kw):
    checker = InvariantChecker()
    eng = Engine(
        model or AdversarialModel(vocab, seed=3),
        load_backend("reference"),
        vocab,
        config or EngineConfig(max_rows=8),
        faults=faults,
        observers=[checker],
        **kw,
    )
    return eng, checker


def prompt(n=3):
    return tuple(range(65, 65 + n))


# -- lifecycle ---------------------------------------------------------------------------------------


def test_lifecycle_table():
    s = transition("r", Status.NEW, Event.ADMIT)
    assert s is Status.WAITING
    assert transition("r", s, Event.SCHEDULE) is Status.RUNNING
    assert transition("r", Status.RUNNING, Event.PREEMPT) is Status.PREEMPTED
    assert transition("r", Status.PREEMPTED, Event.RESUME) is Status.RUNNING
    with pytest.raises(LifecycleError, match="no transition for event 'schedule' from status 'finished'"):
        transition("r", Status.FINISHED, Event.SCHEDULE)
    with pytest.raises(LifecycleError):
        transition("r", Status.REFUSED, Event.CANCEL)
    # The docstring's diagram is the table.
    assert serving_sim.diagram() in "\n".join(
        line.strip() for line in (serving_sim._lifecycle.__doc__ or "").splitlines()
    )


# -- admission control -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_, why",
    [
        (Request(prompt(), WORDS, n=9), "rows"),
        (Request(prompt(), WORDS, stop_ids=(65,)), "stop_ids"),
        (Request((), WORDS), "empty"),
        (Request(prompt(), WORDS, max_tokens=0), "max_tokens"),
        (Request(prompt(), WORDS, beam_width=2, speculative=2), "speculative"),
        (
            Request(prompt(), JsonSchema({"items": {"items": {"items": {"items": {}}}}}, JsonProfile())),
            "nests",
        ),
        (Request(prompt(), Regex("(a")), "invalid spec"),
    ],
)
def test_refused_requests_never_take_a_slot(vocab, request_, why):
    limits = serving_sim.AdmissionLimits(max_spec_depth=3)
    eng, checker = make_engine(vocab, config=EngineConfig(max_rows=4, admission=limits))
    h = eng.submit(request_)
    assert h.status is Status.REFUSED and h.done
    assert why in (h.refusal or "")
    assert [type(e) for e in h.events] == [AdmissionRefused]
    assert not eng.has_unfinished
    eng.step()
    assert eng.metrics.refused == 1 and checker.clean


class SlowBackend:
    name = "slow"
    version = "0"
    profile = load_backend("reference").profile

    def compile(self, spec, vocabulary):
        time.sleep(1.0)
        return Compiled(None)

    def matcher(self, compiled):  # pragma: no cover - never reached
        raise AssertionError


def test_compile_budget_refuses(vocab):
    config = EngineConfig(admission=serving_sim.AdmissionLimits(compile_budget_s=0.05))
    eng = Engine(AdversarialModel(vocab), SlowBackend(), vocab, config)
    h = eng.submit(Request(prompt(), WORDS))
    assert h.status is Status.REFUSED and "budget" in (h.refusal or "")
    # The engine gave up at the 0.05 s budget instead of waiting for the 1 s compile: the refusal names
    # that limit, and no compile was recorded as finished.
    assert "budget of 0.05s" in (h.refusal or "") and "limit:compile_seconds" in (h.refusal or "")
    assert eng.metrics.compile_cold_ms == [] and eng.metrics.refused == 1


# -- caches and snapshots ----------------------------------------------------------------------------


def test_compile_cache_key_counters_and_eviction(vocab):
    backend = load_backend("reference")
    other = permuted_vocabulary(vocab, 5)
    assert other.fingerprint != vocab.fingerprint and len(other) == len(vocab)
    cache = CompileCache(max_bytes=3 * (4096 + 64 * 40 + 4 * len(vocab)))
    specs = [Choice(["a"]), Choice(["b"]), Choice(["c"]), Choice(["d"])]
    for s in specs:
        entry, hit, _ = cache.get_or_compile(s, backend, vocab, budget_s=10)
        assert not hit and isinstance(entry, CacheEntry) and entry.vocab_fingerprint == vocab.fingerprint
    assert cache.evictions >= 1 and cache.bytes <= cache.max_bytes
    _, hit, _ = cache.get_or_compile(specs[-1], backend, vocab, budget_s=10)
    assert hit
    # The vocabulary fingerprint is part of the key: another vocabulary misses.
    entry, hit, _ = cache.get_or_compile(specs[-1], backend, other, budget_s=10)
    assert not hit and isinstance(entry, CacheEntry) and entry.vocab_fingerprint == other.fingerprint
    k1 = CompileCache.key(specs[0], backend, vocab)
    assert k1 != CompileCache.key(specs[0], backend, other)
    assert CompileCache.key(specs[0], backend, vocab, include_vocabulary=False).vocabulary == ""
    stats = cache.stats()
    assert stats["hits"] == 1 and stats["misses"] == 5 and 0 < stats["hit_rate"] < 1


def test_prefix_cache_longest_prefix(vocab):
    model = AdversarialModel(vocab)
    pc = PrefixCache(model, max_entries=2)
    kv = model.new_kv()
    model.forward([(kv, [1, 2, 3])], [1])
    pc.put(kv)
    got = pc.lookup((1, 2, 3, 4, 5))
    assert got is not None and got.tokens == [1, 2, 3] and got is not kv
    got.tokens.append(9)
    again = pc.lookup((1, 2, 3))
    assert again is not None and again.tokens == [1, 2, 3]  # stored entries are never shared
    assert pc.lookup((2, 3)) is None
    assert pc.stats()["hits"] == 2 and pc.stats()["lookups"] == 3


def test_snapshot_is_bound_to_grammar_and_vocabulary(vocab):
    backend = load_backend("reference")
    cache = CompileCache()
    entry, _, _ = cache.get_or_compile(WORDS, backend, vocab, budget_s=10)
    assert isinstance(entry, CacheEntry)
    m = backend.matcher(entry.compiled)
    m.accept(vocab.encode("ca")[0])
    snap = MatcherSnapshot.take(m, entry, 1)
    restored = snap.restore(entry.spec_fingerprint, vocab.fingerprint, "reference")
    assert np.array_equal(restored.mask(), m.mask())
    with pytest.raises(SnapshotMismatch, match="vocabulary fingerprint"):
        snap.restore(entry.spec_fingerprint, permuted_vocabulary(vocab).fingerprint, "reference")
    with pytest.raises(SnapshotMismatch, match="spec fingerprint"):
        snap.restore(serving_sim.spec_fingerprint(Choice(["x"])), vocab.fingerprint, "reference")


# -- streaming ---------------------------------------------------------------------------------------


@given(st.binary(max_size=24), st.lists(st.integers(1, 4), max_size=24))
def test_stream_deltas_never_split_a_character(data, cuts):
    stream = TextStream()
    deltas: list[str] = []
    pos = 0
    for c in [*cuts, len(data)]:
        deltas.append(stream.feed(data[pos : pos + c]))
        pos += c
    deltas.append(stream.flush())
    assert "".join(deltas) == data.decode("utf-8", errors="replace")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return
    assert all("\ufffd" not in d for d in deltas)


def test_streamed_outputs_equal_final_text(vocab):
    eng, checker = make_engine(vocab)
    handles = [
        eng.submit(
            Request(prompt(), WORDS, SamplingParams(temperature=1.0, seed=i), max_tokens=30, stream=True)
        )
        for i in range(4)
    ]
    eng.run()
    assert checker.clean, checker.violations
    for h in handles:
        assert h.status is Status.FINISHED
        (out,) = h.outputs
        assert h.text(0) == out.text
        assert isinstance(h.events[-1], Finished) and h.events[-1].finish_reason == out.finish_reason
        assert all(isinstance(e, Delta) for e in h.events[:-1])
        if out.finish_reason == "stop":
            assert out.valid and out.text in WORDS.options
            assert "\ufffd" not in "".join(e.text for e in h.events if isinstance(e, Delta))


# -- finish reasons ----------------------------------------------------------------------------------


def test_max_tokens_is_length_and_never_valid(vocab):
    eng, checker = make_engine(vocab)
    h = eng.submit(Request(prompt(), WORDS, max_tokens=1))
    eng.run()
    (out,) = h.outputs
    assert out.finish_reason == "length" and not out.valid and len(out.token_ids) == 1
    assert checker.clean


class OnlyDisallowed:
    """Every logit -inf except one token no spec here allows."""

    name = "only-disallowed"

    def __init__(self, vocab, token):
        self.inner = AdversarialModel(vocab)
        self.vocab_size = len(vocab)
        self.token = token

    def new_kv(self):
        return self.inner.new_kv()

    def forward(self, rows, n_out):
        outs = self.inner.forward(rows, n_out)
        for o in outs:
            o.fill_(float("-inf"))
            o[:, self.token] = 5.0
        return outs

    def fork_kv(self, kv):
        return self.inner.fork_kv(kv)

    def truncate_kv(self, kv, length):
        self.inner.truncate_kv(kv, length)


@pytest.mark.parametrize("shape", [{}, {"beam_width": 2}, {"speculative": 2}])
def test_empty_allowed_set_is_constraint_violation(vocab, shape):
    eng, checker = make_engine(vocab, model=OnlyDisallowed(vocab, ord("z")))
    h = eng.submit(Request(prompt(), WORDS, max_tokens=5, **shape))
    eng.run()
    assert h.outputs
    for out in h.outputs:
        assert out.finish_reason == "constraint_violation"
        assert out.error.startswith("NO_VALID_TOKEN") and out.error_step == 1 and out.state_id
    assert checker.clean, checker.violations


def test_soft_filter_fault_samples_the_disallowed_token(vocab):
    eng, checker = make_engine(
        vocab, model=OnlyDisallowed(vocab, ord("z")), faults={"soft_filter_after_mask_dropped"}
    )
    eng.submit(Request(prompt(), WORDS, max_tokens=5))
    eng.run()
    assert "soundness" in checker.by_invariant()


def test_cancel_waiting_and_running(vocab):
    eng, checker = make_engine(vocab, config=EngineConfig(max_rows=1))
    running = eng.submit(Request(prompt(), WORDS, max_tokens=30, stream=True))
    waiting = eng.submit(Request(prompt(), WORDS, n=1))
    eng.step()
    assert running.status is Status.RUNNING and waiting.status is Status.WAITING
    assert eng.cancel(waiting.request_id) and eng.cancel(running.request_id)
    assert not eng.cancel(running.request_id)
    for h in (running, waiting):
        assert h.status is Status.CANCELLED
        assert [o.finish_reason for o in h.outputs] == ["cancelled"]
    assert not eng.has_unfinished and checker.clean


# -- beams, n > 1, speculation, preemption ----------------------------------------------------------


def test_beam_search_and_n(vocab):
    eng, checker = make_engine(vocab)
    beam = eng.submit(Request(prompt(), WORDS, SamplingParams(temperature=0.0), beam_width=3, max_tokens=20))
    many = eng.submit(Request(prompt(), WORDS, SamplingParams(temperature=1.0), n=3, max_tokens=20))
    eng.run()
    assert checker.clean, checker.violations
    assert [o.index for o in beam.outputs] == [0, 1, 2]
    scores = [o.score for o in beam.outputs]
    assert scores == sorted(scores, reverse=True)
    assert len(many.outputs) == 3
    for o in beam.outputs + many.outputs:
        assert o.finish_reason != "stop" or o.text in WORDS.options


def test_speculation_matches_one_by_one_walk(vocab):
    eng, checker = make_engine(vocab)
    for i in range(6):
        params = SamplingParams(temperature=0.0 if i % 2 else 1.0, seed=i)
        eng.submit(
            Request(prompt(), Regex(r"[a-z]{2,9}(-[0-9]{1,3})?"), params, speculative=3, max_tokens=16)
        )
    eng.run()
    assert checker.clean, checker.violations
    spec = eng.metrics.summary()["speculative"]
    assert spec["steps"] > 0 and spec["proposed"] > 0
    assert checker.checked["speculative"] == spec["steps"]


def test_preemption_resumes_to_the_same_output(vocab):
    def run(preempt: bool, mode: str) -> list[tuple[int, ...]]:
        calm = AdversarialModel(vocab, seed=3, collapse_rate=0.0, nan_rate=0.0)
        config = EngineConfig(max_rows=8, resume_mode=mode)  # type: ignore[arg-type]
        eng, checker = make_engine(vocab, config=config, model=calm)
        hs = [
            eng.submit(Request(prompt(), WORDS, SamplingParams(temperature=1.0, seed=7), n=2, max_tokens=12)),
            eng.submit(
                Request(
                    prompt(4), Regex("[a-z]{6,12}"), SamplingParams(temperature=1.0, seed=8), max_tokens=12
                )
            ),
        ]
        eng.step()
        eng.step()
        if preempt:
            assert eng.preempt(hs[0].request_id) and eng.preempt(hs[1].request_id)
            assert hs[0].status is Status.PREEMPTED
        eng.run()
        assert checker.clean, checker.violations
        if preempt:
            assert eng.metrics.resumes == 2 and eng.prefix_cache.hits >= 2
        return [o.token_ids for h in hs for o in h.outputs]

    base = run(False, "replay")
    assert run(True, "replay") == base
    assert run(True, "snapshot") == base


def test_kv_budget_preempts_and_everything_finishes(vocab):
    eng, checker = make_engine(vocab, config=EngineConfig(max_rows=8, kv_budget_tokens=24))
    hs = [
        eng.submit(Request(prompt(), Regex("[a-z]{4,20}"), SamplingParams(seed=i), max_tokens=16))
        for i in range(4)
    ]
    eng.run()
    assert all(h.done for h in hs)
    assert eng.metrics.preemptions >= 1 and checker.clean, checker.violations


def test_unconstrained_stop_ids(vocab):
    eng, checker = make_engine(vocab)
    h = eng.submit(
        Request(
            prompt(), None, SamplingParams(seed=1), max_tokens=40, stop_ids=tuple(range(97, 123)), stream=True
        )
    )
    eng.run()
    (out,) = h.outputs
    assert checker.clean, checker.violations
    if out.finish_reason == "stop" and out.token_ids[-1] not in vocab.eos_ids:
        assert out.token_ids[-1] in range(97, 123)
        assert out.text == vocab.decode(out.token_ids[:-1]).decode("utf-8", "replace") == h.text(0)


# -- models ------------------------------------------------------------------------------------------


def test_adversarial_model_is_deterministic_and_adversarial(vocab):
    m = AdversarialModel(vocab, seed=1)
    a, b = m.logits_for((1, 2, 3)), m.logits_for((1, 2, 3))
    assert np.array_equal(a, b, equal_nan=True)
    eos = sorted(vocab.eos_ids)[0]
    tops = [int(np.nanargmax(m.logits_for((i,)))) for i in range(200)]
    assert eos in tops  # EOS gets the top logit at some positions
    assert sum(t >= 0x80 for t in tops) > 20  # and so do bytes that split characters


def test_tiny_llama_has_a_real_kv_cache_and_runs_clean():
    vocab = byte_vocabulary()
    model = serving_sim.TinyLlamaModel(len(vocab), seed=0)
    kv = model.new_kv()
    (first,) = model.forward([(kv, [1, 2, 3])], [1])
    (step,) = model.forward([(kv, [4])], [1])
    full = model.new_kv()
    (whole,) = model.forward([(full, [1, 2, 3, 4])], [2])
    assert torch.allclose(step[-1], whole[-1], atol=1e-4) and torch.allclose(first[-1], whole[0], atol=1e-4)
    fork = model.fork_kv(kv)
    model.truncate_kv(kv, 3)
    (again,) = model.forward([(kv, [4])], [1])
    assert torch.allclose(again[-1], step[-1], atol=1e-4) and fork.tokens == [1, 2, 3, 4]
    r = serving_sim.run_simulation(
        load_backend("reference"),
        model="tiny-llama",
        requests=11,
        max_tokens=10,
        vocabularies=[vocab, permuted_vocabulary(vocab)],
    )
    assert r.violation_counts == {} and r.unfinished == 0, serving_sim.format_report(r)
    assert r.metrics["tokens"] > 0


# -- a third-party adapter ---------------------------------------------------------------------------


def _third_party(name):
    try:
        return load_backend(name)
    except BackendUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", ["xgrammar", "llguidance"])
def test_third_party_backend_serves_mixed_workload(name):
    backend = _third_party(name)
    r = serving_sim.run_simulation(backend, requests=12)
    assert r.backend == name and r.unfinished == 0
    # Differences from the reference are the backend's conformance findings, never serving bugs.
    assert r.serving_violations == {}, serving_sim.format_report(r)
    assert all(k.startswith("backend:") for k in r.violation_counts)
    faulty = serving_sim.run_simulation(backend, requests=12, fault="shared_beam_matcher")
    assert "fork" in faulty.serving_violations


@pytest.mark.parametrize(
    "spec, good, bad",
    [
        (Choice(["a", "b"]), "a", "c"),
        (Regex("[0-9]+"), "12", "12a"),
        (JsonSchema({"type": "object", "required": ["a"]}, JsonProfile()), '{"a": 1}', "{}"),
        (refdecoder.Gbnf('start ::= "x" [0-9]+', "start"), "x12", "x"),
    ],
)
def test_outputs_are_validated_independently(spec, good, bad):
    # The checker judges stop outputs with props.corpus.validate_output (not the reference grammar),
    # on the spec as it reads it back.
    from props.contract import SpecRef

    ref = SpecRef.of(spec)
    assert reference_spec(ref).canonical() == spec.canonical()
    assert validate_output(ref, good.encode()) is None
    assert validate_output(ref, bad.encode())
