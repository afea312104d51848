"""The agent workload of serving_sim (issue 29): tool calls over a vocabulary with special tokens, the
grammar switched when the tool is chosen, jump-forward streams, beams and speculative drafts across the
tag boundary — clean runs pass every invariant, each agent fault is caught."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema
import numpy as np
import pytest
import torch

import refdecoder
import serving_sim
from props.backends import load_backend
from props.corpus.structural_tag_check import verdict
from refdecoder.sampler import SamplingParams
from serving_sim import (
    AGENT_FAULTS,
    AGENT_TOOLS,
    FAULTS,
    Engine,
    EngineConfig,
    InvariantChecker,
    Request,
    SwitchingMatcher,
    ToolCallingModel,
    agent_vocabulary,
    agent_workload,
    exit_code,
    format_report,
    run_simulation,
    tool_call_specs,
)
from serving_sim._agent import DELIMITER, END, TRIGGER, agent_draft, special_ids
from serving_sim._trace import TraceSpec, TraceToken
from tokenizers_matrix import Vocabulary

REFERENCE = load_backend("reference")
REQUESTS = 14
MAX_TOKENS = 32
SEEDS = (0, 2)  # workload seeds whose speculative walks cross the switch (the scripted test always does)

# The invariant that must catch each agent fault.
CAUGHT_BY = {"jump_forward_uncertain": "jump_forward", "switch_rollback_keeps_tail": "rollback"}


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return agent_vocabulary()


@pytest.fixture(scope="module")
def names(vocab: Vocabulary) -> dict[str, int]:
    return special_ids(vocab)


def _run(vocab: Vocabulary, seed: int, faults: Sequence[str] = ()) -> tuple[Any, Any, Any, Any]:
    """The agent workload on one engine, watched by the checker and by a recorder of forced tokens and
    of speculative verifies whose walk crossed the delimiter but whose accepted prefix stopped before it."""
    checker = InvariantChecker()
    seen: dict[str, Any] = {"forced": [], "crossings": 0}
    delimiter = special_ids(vocab)[DELIMITER]

    def record(e: object) -> None:
        if isinstance(e, TraceToken) and e.how == "forced":
            seen["forced"].append(e.token)
        elif isinstance(e, TraceSpec) and delimiter in e.draft:
            i = e.draft.index(delimiter)
            seen["crossings"] += e.grammar_ok > i >= e.accepted

    model = ToolCallingModel(vocab, seed=seed)
    config = EngineConfig(max_rows=8, kv_budget_tokens=200, seed=seed)
    engine = Engine(
        model,
        REFERENCE,
        vocab,
        config,
        faults=faults,
        observers=[checker, record],
        draft=agent_draft(model, seed + 1),
    )
    pending = agent_workload(seed, REQUESTS, vocab, max_tokens=MAX_TOKENS)
    handles, step = [], 0
    cancels: dict[int, list[str]] = {}
    while step < 2000:
        while pending and pending[0].step <= step:
            a = pending.pop(0)
            h = engine.submit(a.request)
            handles.append(h)
            if a.cancel_at is not None:
                cancels.setdefault(a.cancel_at, []).append(h.request_id)
        for rid in cancels.pop(step, []):
            engine.cancel(rid)
        if not engine.has_unfinished and not pending:
            break
        engine.step()
        step += 1
    return checker, handles, seen, engine


def test_vocabulary_keeps_its_special_tokens(vocab: Vocabulary, names: dict[str, int]) -> None:
    assert {TRIGGER, DELIMITER, END} <= set(names)
    for name in (TRIGGER, DELIMITER, END):
        assert vocab.is_special(names[name]) and vocab.token_bytes[names[name]] is None
        assert names[name] not in vocab.eos_ids


def test_agent_faults_are_separate_and_switchable() -> None:
    assert set(CAUGHT_BY) == set(AGENT_FAULTS)
    assert not set(AGENT_FAULTS) & set(FAULTS)
    for name, text in AGENT_FAULTS.items():
        assert text and "\n" not in text, name
    with pytest.raises(serving_sim.UnknownFault, match="jump_forward_uncertain"):
        run_simulation(REFERENCE, fault="no_such_fault", requests=1, workload="agent")
    # A mixed workload has no tool calls: an agent fault there would be switched on and never exercised.
    with pytest.raises(serving_sim.UnknownFault, match="agent-workload fault"):
        run_simulation(REFERENCE, fault="jump_forward_uncertain", requests=1)


def test_switch_is_exact_on_hand_written_calls(vocab: Vocabulary, names: dict[str, int]) -> None:
    """The composed language accepts exactly what the head then the named tool's tail accept."""
    composed, switch = tool_call_specs(AGENT_TOOLS, names)
    tg = refdecoder.TokenGrammar(refdecoder.compile(composed), vocab)
    tails = {n: REFERENCE.compile(s, vocab) for n, s in switch.tails}
    head = REFERENCE.compile(switch.head, vocab)

    def switching() -> SwitchingMatcher:
        return SwitchingMatcher(REFERENCE.matcher(head), switch, vocab, lambda n: REFERENCE.matcher(tails[n]))

    def ids(text: str, args: str, tool: str = "get_time") -> list[int]:
        return [
            *vocab.encode(text),
            names[TRIGGER],
            *vocab.encode(tool),
            names[DELIMITER],
            *vocab.encode(args),
            names[END],
            *sorted(vocab.eos_ids)[:1],
        ]

    cases = [
        (ids("let me check ", '{"tz":"utc"}'), True),
        (ids("", '{"tz": "日本"}'), True),
        (ids("hi", '{"city":"x"}'), False),  # another tool's arguments
        (ids("hi", '{"q":"a","k":true}', "search.web"), True),
        (ids("hi", '{"q":"a"}', "search.web"), False),  # a required argument missing
    ]
    for seq, valid in cases:
        ref, sw = refdecoder.Matcher(tg), switching()
        ok = True
        for t in seq:
            assert (sw.mask() == ref.mask()).all(), vocab.decode(seq)  # the same mask at every position
            ok_ref, ok_sw = (isinstance(m.accept(t), refdecoder.Accepted) for m in (ref, sw))
            assert ok_ref == ok_sw
            if not ok_ref:
                ok = False
                break
        assert ok == valid, vocab.decode(seq)
    # A rollback past the switch puts the head back: masks equal a fresh walk of the kept prefix.
    seq = ids("a", '{"tz":"cet"}')
    sw = switching()
    for t in seq[:-3]:
        sw.accept(t)
    assert sw.tool == "get_time"
    back = len(vocab.encode('{"tz":"cet"}')) + 2  # the arguments, the delimiter, the last name token
    sw.rollback(back)
    assert sw.tool is None
    fresh = refdecoder.Matcher(tg)
    for t in seq[: len(seq) - 3 - back]:
        fresh.accept(t)
    assert (sw.mask() == fresh.mask()).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_clean_agent_run_passes_every_invariant(vocab: Vocabulary, names: dict[str, int], seed: int) -> None:
    checker, handles, seen, engine = _run(vocab, seed)
    assert checker.clean, "\n".join(str(v) for v in checker.violations)
    assert all(h.done for h in handles)
    m = engine.metrics
    assert m.spec_steps > 0 and m.spec_grammar_rejections + m.spec_probability_rejections > 0
    assert m.cancellations >= 1
    # Jump-forward ran, across tag text: forced special tokens (the delimiter, the end token) too.
    assert seen["forced"] and {names[DELIMITER], names[END]} & set(seen["forced"])
    assert checker.checked["forced"] == len(seen["forced"])
    # Beams and n > 1 produced outputs; some output made a whole call.
    assert any(h.request.beam_width > 1 and len(h.outputs) == h.request.beam_width for h in handles)
    assert any(h.request.n == 2 and len(h.outputs) == 2 for h in handles)
    # Beams ran across the tag boundary: some beam output went through the switch.
    assert any(
        h.request.beam_width > 1 and any(names[DELIMITER] in c.token_ids for c in h.outputs) for h in handles
    )
    assert checker.checked["validated_toolcalls"] >= 1


def test_speculative_walks_cross_the_switch_in_the_workload(vocab: Vocabulary) -> None:
    crossings = sum(_run(vocab, seed)[2]["crossings"] for seed in SEEDS)
    assert crossings >= 1


class _ScriptedTarget(ToolCallingModel):
    """Greedy-friendly logits: the next token of ``script`` after the prompt, far above the rest."""

    def __init__(self, vocab: Vocabulary, prompt_len: int, script: list[int]) -> None:
        super().__init__(vocab, seed=0)
        self.prompt_len, self.script = prompt_len, script

    def logits_for(self, context: Sequence[int]) -> np.ndarray:
        x = np.full(self.vocab_size, -4.0, dtype=np.float32)
        pos = len(context) - self.prompt_len
        x[self.script[pos] if pos < len(self.script) else int(self.eos_ids[0])] = 8.0
        return x


class _ScriptedDraft:
    """Proposes the next ``k`` tokens of its own script (a grammar-valid call of another tool)."""

    name = "scripted"

    def __init__(self, vocab: Vocabulary, prompt_len: int, script: list[int]) -> None:
        self.v, self.prompt_len, self.script = len(vocab), prompt_len, script

    def propose(
        self, context: Sequence[int], k: int, params: Any, generator: Any, guide: Any = None
    ) -> tuple[list[int], torch.Tensor]:
        pos = len(context) - self.prompt_len
        drafts = (self.script[pos:] + [0] * k)[:k]
        q = torch.zeros((k, self.v), dtype=torch.float64)
        q[torch.arange(k), torch.tensor(drafts)] = 1.0
        return drafts, q


@pytest.mark.parametrize("fault", [None, "switch_rollback_keeps_tail"])
def test_rollback_past_the_switch_restores_the_head(
    vocab: Vocabulary, names: dict[str, int], fault: str | None
) -> None:
    """The draft calls get_time, the target get_weather: the verify rejects the draft inside the name
    after walking through the delimiter into get_time's arguments, so the rollback crosses the switch.
    Clean: every invariant holds and the output calls get_weather. With the fault: ``rollback``."""
    composed, switch = tool_call_specs(AGENT_TOOLS[:2], names)

    def call(tool: str, args: str) -> list[int]:
        return [
            *vocab.encode("ok "),
            names[TRIGGER],
            *vocab.encode(tool),
            names[DELIMITER],
            *vocab.encode(args),
            names[END],
        ]

    prompt = tuple(vocab.encode("weather?"))
    target, draft = call("get_weather", '{"city":"oslo"}'), call("get_time", '{"tz":"utc"}')
    assert target[: len(vocab.encode("ok ")) + 1] == draft[: len(vocab.encode("ok ")) + 1]
    checker = InvariantChecker()
    crossings = [0]

    def record(e: object) -> None:
        if isinstance(e, TraceSpec) and names[DELIMITER] in e.draft:
            crossings[0] += e.grammar_ok > e.draft.index(names[DELIMITER]) >= e.accepted

    model = _ScriptedTarget(vocab, len(prompt), target)
    engine = Engine(
        model,
        REFERENCE,
        vocab,
        EngineConfig(seed=0),
        faults=[fault] if fault else [],
        observers=[checker, record],
        draft=_ScriptedDraft(vocab, len(prompt), draft),
    )
    greedy = SamplingParams(temperature=0.0)
    handles = [
        engine.submit(
            Request(prompt, composed, greedy, speculative=k, max_tokens=40, tools=switch, stream=True)
        )
        for k in (2, 3, 4, 5)
    ]
    engine.run(200)
    assert crossings[0] >= 1
    if fault is None:
        assert checker.clean, "\n".join(str(v) for v in checker.violations)
        for h in handles:
            assert [c.finish_reason for c in h.outputs] == ["stop"]
            assert list(h.outputs[0].token_ids) == [*target, *sorted(vocab.eos_ids)[:1]]
    else:
        assert "rollback" in checker.by_invariant(), checker.by_invariant()


@pytest.mark.parametrize("seed", SEEDS)
def test_tool_call_outputs_are_valid(vocab: Vocabulary, names: dict[str, int], seed: int) -> None:
    """Every stop output is in the composed language per the reference and per the independent
    structural-tag recognizer, and each call's arguments are valid JSON for its tool's schema."""
    _, handles, _, _ = _run(vocab, seed)
    schemas = dict(AGENT_TOOLS)
    calls = 0
    for h in handles:
        spec = h.request.spec
        tg = refdecoder.TokenGrammar(refdecoder.compile(spec), vocab)
        for c in h.outputs:
            if c.finish_reason != "stop":
                continue
            m = refdecoder.Matcher(tg)
            assert all(isinstance(m.accept(t), refdecoder.Accepted) for t in c.token_ids), c
            parts, run = [], b""
            for t in c.token_ids[:-1]:
                data = vocab.token_bytes[t]
                if data is None:
                    parts += [run.decode(), t] if run else [t]
                    run = b""
                else:
                    run += data
            parts += [run.decode()] if run else []
            assert verdict(spec.tag, parts, spec.special_tokens) is True, parts
            if names[DELIMITER] in c.token_ids:
                i, j = c.token_ids.index(names[TRIGGER]), c.token_ids.index(names[DELIMITER])
                k = c.token_ids.index(names[END])
                tool = vocab.decode(c.token_ids[i + 1 : j]).decode()
                jsonschema.validate(json.loads(vocab.decode(c.token_ids[j + 1 : k])), schemas[tool])
                calls += 1
            assert c.valid
    assert calls >= 1


@pytest.mark.parametrize("fault", sorted(AGENT_FAULTS))
def test_agent_fault_is_caught(vocab: Vocabulary, fault: str) -> None:
    for seed in SEEDS:
        clean = _run(vocab, seed)[0]
        assert clean.clean, "\n".join(str(v) for v in clean.violations)
        faulty = _run(vocab, seed, faults=[fault])[0]
        assert CAUGHT_BY[fault] in faulty.by_invariant(), (seed, faulty.by_invariant())
        assert all(v.message for v in faulty.violations)
    if fault == "jump_forward_uncertain":
        assert any("jump-forward" in v.message for v in faulty.violations)


def test_run_simulation_agent_workload() -> None:
    r = run_simulation(REFERENCE, seed=0, requests=REQUESTS, max_tokens=MAX_TOKENS, workload="agent")
    assert r.violation_counts == {} and r.unfinished == 0, format_report(r)
    assert exit_code(r) == 0 and r.checked["forced"] > 0
    assert r.metrics["preemptions"] >= 1 and r.metrics["resumes"] >= 1
    r = run_simulation(
        REFERENCE,
        fault="switch_rollback_keeps_tail",
        seed=0,
        requests=REQUESTS,
        max_tokens=MAX_TOKENS,
        workload="agent",
    )
    assert "rollback" in r.violation_counts and exit_code(r) == 1


def test_snapshot_resume_across_the_switch() -> None:
    """Preempted agent requests resume from matcher snapshots (a fork of the switching matcher)."""
    r = run_simulation(
        REFERENCE, seed=2, requests=REQUESTS, max_tokens=MAX_TOKENS, workload="agent", resume_mode="snapshot"
    )
    assert r.violation_counts == {} and r.unfinished == 0, format_report(r)
    assert r.metrics["resumes"] >= 1


def test_tools_without_a_spec_are_refused(vocab: Vocabulary, names: dict[str, int]) -> None:
    _, switch = tool_call_specs(AGENT_TOOLS, names)
    engine = Engine(ToolCallingModel(vocab), REFERENCE, vocab)
    h = engine.submit(Request(tuple(vocab.encode("hi")), None, tools=switch))
    assert h.refusal is not None and "tools" in h.refusal


def test_cli_simulate_agent_workload(capsys: pytest.CaptureFixture[str]) -> None:
    from maskcert.cli import main

    assert main(["simulate", "--workload", "agent", "--requests", "4"]) == 0
    assert "no invariant violations" in capsys.readouterr().out
    assert (
        main(["simulate", "--workload", "agent", "--requests", "8", "--fault", "jump_forward_uncertain"]) == 1
    )
    assert "[jump_forward]" in capsys.readouterr().out
    # An agent fault needs the agent workload: a usage error naming it.
    assert main(["simulate", "--fault", "jump_forward_uncertain"]) == 2
    assert "--workload agent" in capsys.readouterr().err
    assert main(["simulate", "--list-faults"]) == 0
    assert "(--workload agent)" in capsys.readouterr().out
