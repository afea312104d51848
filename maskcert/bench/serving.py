"""Serving-simulation throughput: ``serving_sim.run_simulation`` with each backend as the grammar engine.

Behind ``maskcert bench serving``. The simulation runs on its built-in defaults (two engines over a
trained SentencePiece vocabulary and its permutation, the adversarial model, the mixed workload of
``maskcert simulate``) with ``requests`` requests, once per backend: the reference first, then each
installed third-party adapter (``serving_sim`` drives any ``Backend``). A missing backend is omitted
with its reason.

What the numbers mean. ``steps_per_s`` and ``tokens_per_s`` are over the run's wall time, which also
pays the simulated model, the sampler and the invariant checker replaying every sequence on the
reference — the same work for every backend, so these ratios understate the difference between the
engines. ``mask_ms_per_step`` is the backend's own mask time per batch step: the median is the typical
step, the mean also carries the rare slow ones (a first mask on a new grammar state, lazily built
lexer tables), which dominate it on runs this short. The
arrivals are the same for every backend (same seed), but the generated tokens are not: each engine's
masks steer the model differently, so outputs, lengths and step counts differ a little.

Ratios read as the other benchmarks do — how many times the reference costs the engine, above 1 the
reference is slower: ``mask_ms`` reference / engine, throughput engine / reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_BACKENDS", "run_serving_bench", "format_table"]

DEFAULT_BACKENDS = ("xgrammar", "llguidance", "outlines-core", "lm-format-enforcer")


def _one(name: str, requests: int, seed: int, max_tokens: int) -> dict[str, Any]:
    from props.backends import load_backend
    from serving_sim import run_simulation

    report = run_simulation(load_backend(name), None, seed, requests, max_tokens=max_tokens)
    m = report.metrics
    mask = m["mask_ms_per_step"]
    return {
        "steps": report.steps,
        "tokens": m["tokens"],
        "wall_s": report.wall_s,
        "steps_per_s": report.steps / report.wall_s if report.wall_s > 0 else 0.0,
        "tokens_per_s": m["tokens_per_s"],
        "mask_ms_p50": mask["p50"],
        "mask_ms_mean": mask["mean"],
        "mask_ms_p95": mask["p95"],
        "submitted": report.submitted,
        "refused": report.refused,
        "unfinished": report.unfinished,
        "violations": sum(report.violation_counts.values()),
        "violations_by": dict(report.violation_counts),
    }


def _ratios(ref: Mapping[str, Any], eng: Mapping[str, Any]) -> dict[str, float | None]:
    def div(a: float, b: float) -> float | None:
        return a / b if b > 0 else None

    return {
        "steps_per_s": div(eng["steps_per_s"], ref["steps_per_s"]),
        "tokens_per_s": div(eng["tokens_per_s"], ref["tokens_per_s"]),
        "mask_ms_p50": div(ref["mask_ms_p50"], eng["mask_ms_p50"]),
        "mask_ms_mean": div(ref["mask_ms_mean"], eng["mask_ms_mean"]),
    }


def run_serving_bench(
    requests: int = 16,
    *,
    backends: Iterable[str] = DEFAULT_BACKENDS,
    seed: int = 0,
    max_tokens: int = 24,
) -> dict[str, Any]:
    """Run the simulation once on the reference and once per installed backend in ``backends``.

    Returns a JSON-serializable dict: ``requests``, ``seed``, ``reference`` and ``engines`` (per
    backend: steps, tokens, wall, ``steps_per_s``, ``tokens_per_s``, ``mask_ms_p50/mean/p95``,
    admission refusals, violations; engines also ``ratios``), ``unavailable`` (backend -> why).
    """
    from props.backends import BackendUnavailable

    result: dict[str, Any] = {
        "requests": requests,
        "seed": seed,
        "max_tokens": max_tokens,
        "reference": _one("reference", requests, seed, max_tokens),
        "engines": {},
        "unavailable": {},
    }
    for name in backends:
        try:
            rec = _one(name, requests, seed, max_tokens)
        except BackendUnavailable as e:
            result["unavailable"][name] = str(e)[:200]
            continue
        rec["ratios"] = _ratios(result["reference"], rec)
        result["engines"][name] = rec
    return result


def _x(r: float | None) -> str:
    return "" if r is None else f"{r:.2f}x"


def format_table(result: Mapping[str, Any]) -> str:
    """A Markdown table of :func:`run_serving_bench`'s result."""
    lines = [
        f"serving simulation: {result['requests']} requests, seed {result['seed']}; wall time includes the "
        "model, sampler and invariant checker (the same for every backend); ratios: above 1 the reference is slower",
        "",
        "| backend | steps | tokens | steps/s | tokens/s | mask ms p50 | mask ms mean | violations "
        "| ratio tokens/s | ratio mask p50 | ratio mask mean |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(name: str, r: Mapping[str, Any]) -> str:
        q = r.get("ratios", {})
        return (
            f"| {name} | {r['steps']} | {r['tokens']} | {r['steps_per_s']:.1f} | {r['tokens_per_s']:.1f} "
            f"| {r['mask_ms_p50']:.3f} | {r['mask_ms_mean']:.3f} | {r['violations']} "
            f"| {_x(q.get('tokens_per_s'))} | {_x(q.get('mask_ms_p50'))} | {_x(q.get('mask_ms_mean'))} |"
        )

    lines.append(row("reference", result["reference"]))
    for name, rec in result["engines"].items():
        lines.append(row(name, rec))
    for name, why in result.get("unavailable", {}).items():
        lines.append(f"| {name} | — | | | | | | | | | omitted: {why} |")
    if any(rec["violations"] for rec in result["engines"].values()):
        lines += [
            "",
            "violations are the engines' differences from the reference (backend:*) and what they "
            "caused; `maskcert simulate --backend NAME` lists them",
        ]
    return "\n".join(lines)
