"""``run_simulation``: a mixed workload on one or more engines, watched by the invariant checker.

This is what ``maskcert simulate`` runs, on the backend adapter instance the application resolved.
Two engines (by default a trained vocabulary and its permutation) share one compile cache, as model
replicas behind one grammar service would; requests arrive over time, some are cancelled or
preempted, and every trace record goes to one :class:`InvariantChecker`. The report carries the
metrics of docs/design.md §5 and every violation seen; :func:`exit_code` is 1 when there is any
violation, else 0.

``workload="agent"`` runs the tool-call workload instead (``_agent``, ``agent_workload``): one engine
over the tool-call vocabulary (special tokens added), a model that reaches for the trigger token, and
the agent faults of :data:`~serving_sim._faults.AGENT_FAULTS` available besides :data:`FAULTS`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from props.contract.backend import Backend
from refdecoder import JsonProfile, Spec

from ._agent import ToolCallingModel, agent_draft, agent_vocabulary
from ._caches import CompileCache
from ._checker import InvariantChecker, Violation
from ._engine import Engine, EngineConfig
from ._faults import check_faults
from ._metrics import Metrics
from ._models import AdversarialModel, Model, TinyLlamaModel
from ._request import RequestHandle
from ._workload import (
    Arrival,
    agent_workload,
    available_specs,
    candidate_specs,
    default_vocabularies,
    make_workload,
)

__all__ = ["SimulationReport", "run_simulation", "format_report", "exit_code"]


@dataclass
class SimulationReport:
    backend: str
    faults: tuple[str, ...]
    seed: int
    model: str
    engines: list[str]
    specs: int
    skipped_specs: list[str]
    submitted: int
    refused: int
    metrics: dict[str, Any]
    compile_cache: dict[str, float]
    prefix_cache: dict[str, float]
    checked: dict[str, int]
    violations: list[Violation]
    violation_counts: dict[str, int]
    wall_s: float
    steps: int
    unfinished: int = 0
    handles: list[RequestHandle] = field(default_factory=list, repr=False)

    @property
    def clean(self) -> bool:
        return not self.violation_counts and self.unfinished == 0

    @property
    def invariants_violated(self) -> set[str]:
        return set(self.violation_counts)

    @property
    def serving_violations(self) -> dict[str, int]:
        """Violation counts of the serving invariants (the backend's conformance findings left out)."""
        return {k: v for k, v in self.violation_counts.items() if not k.startswith("backend:")}


def _json_profile(backend: Backend) -> JsonProfile:
    declared = getattr(getattr(backend, "profile", None), "json", None) or JsonProfile(
        allow_duplicate_keys=True
    )
    if getattr(backend, "name", "") == "reference":
        # The reference implements any profile exactly; a short whitespace bound keeps outputs finishing.
        return dataclasses.replace(declared, whitespace=1)
    return declared


def run_simulation(
    backend: Backend,
    fault: str | None = None,
    seed: int = 0,
    requests: int = 24,
    *,
    faults: Iterable[str] = (),
    model: Literal["adversarial", "tiny-llama"] = "adversarial",
    vocabularies: Sequence[Any] | None = None,
    specs: Sequence[Spec] | None = None,
    max_tokens: int = 24,
    max_rows: int = 8,
    kv_budget_tokens: int = 160,
    resume_mode: Literal["replay", "snapshot"] = "replay",
    max_steps: int = 2_000,
    workload: Literal["mixed", "agent"] = "mixed",
) -> SimulationReport:
    """Run a mixed workload of ``requests`` requests on ``backend`` and check every serving invariant.

    ``backend`` is an adapter instance (resolving a name to one is the application's job).
    ``fault`` (or several in ``faults``) switches on named faults from :data:`FAULTS`. Deterministic by
    ``seed`` (wall-clock metrics aside).
    """
    agent = workload == "agent"
    active = check_faults(([fault] if fault else []) + list(faults), agent=agent)
    chosen: list[Spec]
    skipped: list[str]
    if agent:
        vocabs = list(vocabularies)[:1] if vocabularies is not None else [agent_vocabulary()]
        chosen, skipped = [], []
    else:
        vocabs = list(vocabularies) if vocabularies is not None else default_vocabularies()
        chosen, skipped = available_specs(
            specs if specs is not None else candidate_specs(_json_profile(backend))
        )
    checker = InvariantChecker()
    cache = CompileCache()
    engines: list[Engine] = []
    for i, vocab in enumerate(vocabs):
        config = EngineConfig(
            name=f"E{i}:{getattr(vocab, 'name', '') or 'vocab'}",
            max_rows=max_rows,
            kv_budget_tokens=kv_budget_tokens,
            resume_mode=resume_mode,
            seed=seed,
        )
        mdl = (
            ToolCallingModel(vocab, seed=seed)
            if agent and model == "adversarial"
            else _model(model, vocab, seed, i)
        )
        draft = agent_draft(mdl, seed + 1) if agent else None
        engines.append(
            Engine(
                mdl,
                backend,
                vocab,
                config,
                faults=active,
                observers=[checker],
                compile_cache=cache,
                draft=draft,
            )
        )
    arrivals = (
        agent_workload(seed, requests, vocabs[0], max_tokens=max_tokens)
        if agent
        else make_workload(seed, requests, vocabs, chosen, max_tokens=max_tokens)
    )
    t0 = time.perf_counter()
    handles, steps = _drive(engines, arrivals, max_steps)
    wall = time.perf_counter() - t0
    return SimulationReport(
        backend=str(backend.name),
        faults=tuple(sorted(active)),
        seed=seed,
        model=model,
        engines=[f"{eng.name} ({eng.vocab_size} ids)" for eng in engines],
        specs=len(chosen),
        skipped_specs=skipped,
        submitted=len(handles),
        refused=sum(1 for h in handles if h.refusal is not None),
        metrics=_metrics(engines, wall),
        compile_cache=cache.stats(),
        prefix_cache=_prefix_cache_stats(engines),
        checked=dict(checker.checked),
        violations=list(checker.violations),
        violation_counts=checker.by_invariant(),
        wall_s=wall,
        steps=steps,
        unfinished=sum(1 for h in handles if not h.done),
        handles=handles,
    )


def _model(kind: Literal["adversarial", "tiny-llama"], vocab: Any, seed: int, i: int) -> Model:
    """Engine ``i``'s model."""
    if kind == "tiny-llama":
        return TinyLlamaModel(len(vocab), seed=seed + i)
    return AdversarialModel(vocab, seed=seed * 1000 + i)


def _drive(
    engines: list[Engine], arrivals: Sequence[Arrival], max_steps: int
) -> tuple[list[RequestHandle], int]:
    """Step the engines until every request is done (or ``max_steps``): each step first submits the
    arrivals due, then the cancellations due and the preemptions whose request has made enough
    progress. ``(every handle, in submission order; steps taken)``."""
    handles: list[RequestHandle] = []
    cancels: dict[int, list[tuple[int, str]]] = {}
    preempts: list[tuple[int, str, int]] = []
    pending = list(arrivals)
    step = 0
    while step < max_steps:
        while pending and pending[0].step <= step:
            a = pending.pop(0)
            h = engines[a.engine].submit(a.request)
            handles.append(h)
            if a.cancel_at is not None:
                cancels.setdefault(a.cancel_at, []).append((a.engine, h.request_id))
            if a.preempt_after is not None:
                preempts.append((a.engine, h.request_id, a.preempt_after))
        for e, rid in cancels.pop(step, []):
            engines[e].cancel(rid)
        _preempt_due(engines, preempts)
        busy = [eng for eng in engines if eng.has_unfinished]
        if not busy and not pending:
            break
        for eng in busy:
            eng.step()
        step += 1
    return handles, step


def _preempt_due(engines: list[Engine], preempts: list[tuple[int, str, int]]) -> None:
    """Preempt each listed request that has generated its ``preempt_after`` tokens (dropping it from
    ``preempts``; also a request that is already done)."""
    for item in list(preempts):
        e, rid, after = item
        progress = engines[e].progress(rid)
        if progress is None or progress >= after:
            preempts.remove(item)
            if progress is not None:
                engines[e].preempt(rid)


def _metrics(engines: list[Engine], wall: float) -> dict[str, Any]:
    """The engines' metrics merged, with throughput over ``wall`` seconds."""
    merged = Metrics()
    for eng in engines:
        merged = merged.merge(eng.metrics)
    summary = merged.summary()
    summary["tokens_per_s"] = merged.tokens / wall if wall > 0 else 0.0
    return summary


def _prefix_cache_stats(engines: list[Engine]) -> dict[str, float]:
    looked = sum(eng.prefix_cache.lookups for eng in engines)
    hits = sum(eng.prefix_cache.hits for eng in engines)
    requested = sum(eng.prefix_cache.tokens_requested for eng in engines)
    reused = sum(eng.prefix_cache.tokens_reused for eng in engines)
    return {
        "lookups": looked,
        "hits": hits,
        "hit_rate": hits / looked if looked else 0.0,
        "token_reuse": reused / requested if requested else 0.0,
    }


def _dist(d: dict[str, float], unit: str = "ms") -> str:
    if not d.get("n"):
        return "-"
    return (
        f"mean {d['mean']:.3f} p50 {d['p50']:.3f} p95 {d['p95']:.3f} max {d['max']:.3f} {unit} (n={d['n']})"
    )


def format_report(report: SimulationReport, max_violations: int = 20) -> str:
    """The metrics and every violation, as ``maskcert simulate`` prints them."""
    m = report.metrics
    spec = m["speculative"]
    cc, pc = report.compile_cache, report.prefix_cache
    lines = [
        f"maskcert simulate: backend={report.backend} fault={','.join(report.faults) or 'none'} "
        f"seed={report.seed} model={report.model}",
        f"engines: {', '.join(report.engines)}",
        f"specs: {report.specs} in the workload"
        + (
            f"; {len(report.skipped_specs)} skipped (the reference cannot compile them here)"
            if report.skipped_specs
            else ""
        ),
        f"requests: {report.submitted} submitted, {report.refused} refused at admission, "
        f"{report.unfinished} unfinished; outputs: "
        + (", ".join(f"{k} {v}" for k, v in m["finish_reasons"].items()) or "none"),
        f"steps {report.steps}, tokens {m['tokens']}, wall {report.wall_s:.2f} s, {m['tokens_per_s']:.1f} tokens/s",
        "",
        f"compile ms cold:        {_dist(m['compile_ms_cold'])}",
        f"compile ms warm:        {_dist(m['compile_ms_warm'])}",
        f"mask ms per step:       {_dist(m['mask_ms_per_step'])}",
        f"forward ms per step:    {_dist(m['forward_ms_per_step'])}",
        f"sampling ms per step:   {_dist(m['sample_ms_per_step'])}",
        f"model waited for masks: {m['model_waited_for_masks_ms']:.2f} ms in all",
        f"TTFT:                   {_dist(m['ttft_ms'])}; in steps {_dist(m['ttft_steps'], 'steps')}",
        f"inter-token latency:    {_dist(m['inter_token_ms'])}",
        f"mask density:           {_dist(m['mask_density'], '')}",
        f"grammar-removed mass:   {_dist(m['grammar_removed_mass'], '')}",
        f"compile cache:          hits {cc['hits']} misses {cc['misses']} evictions {cc['evictions']} "
        f"hit rate {cc['hit_rate']:.2f}",
        f"prefix cache:           lookups {pc['lookups']} hits {pc['hits']} hit rate {pc['hit_rate']:.2f} "
        f"token reuse {pc['token_reuse']:.2f}",
        f"speculative:            steps {spec['steps']} proposed {spec['proposed']} accepted {spec['accepted']} "
        f"(rate {spec['acceptance_rate']:.2f}); grammar rejections {spec['grammar_rejections']}, "
        f"probability rejections {spec['probability_rejections']}",
        f"preemptions {m['preemptions']}, resumes {m['resumes']}, cancellations {m['cancellations']}, "
        f"NaN logits {m['nan_logits']}",
        "checked: " + ", ".join(f"{k} {v}" for k, v in sorted(report.checked.items())),
        "",
    ]
    if report.skipped_specs:
        lines.extend(f"  skipped spec: {note}" for note in report.skipped_specs)
        lines.append("")
    total = sum(report.violation_counts.values())
    if total:
        serving = {k: v for k, v in report.violation_counts.items() if not k.startswith("backend:")}
        backend = {k: v for k, v in report.violation_counts.items() if k.startswith("backend:")}
        lines.append(f"VIOLATIONS: {total}")
        lines.append("  serving invariants: " + (", ".join(f"{k} {v}" for k, v in serving.items()) or "none"))
        if backend:
            lines.append(
                f"  {report.backend} against the reference: "
                + ", ".join(f"{k} {v}" for k, v in backend.items())
            )
        shown = sorted(report.violations, key=lambda v: v.invariant.startswith("backend:"))[:max_violations]
        for v in shown:
            lines.append("  " + str(v).replace("\n", "\n  "))
        if len(report.violations) > max_violations:
            lines.append(f"  ... {len(report.violations) - max_violations} more distinct violations")
    else:
        lines.append("no invariant violations")
    if report.unfinished:
        lines.append(f"{report.unfinished} requests did not finish within the step limit")
    return "\n".join(lines)


def exit_code(report: SimulationReport) -> int:
    """1 when the run saw any violation (or left requests unfinished), else 0."""
    return 0 if report.clean else 1
