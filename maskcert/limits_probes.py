"""``certify --limits-probes``: run the growth probes of :mod:`props.checks.limits_probe` on the
certified backend and add their curves and ``limits`` findings to a report.

The backend is the one certify built: a :class:`~props.backends.worker.WorkerBackend` for engines
(its child has an address-space limit; here its compile timeout is set to ``limit_s`` for the probes
and restored after), the reference in-process (its own compile budget bounds it).
"""

from __future__ import annotations

import sys
from typing import Any

from props.checks.defects import group
from props.checks.limits_probe import FAMILIES, Curve, Family, Point, probe

__all__ = ["attach_limits_probes", "run_limits_probes"]


def run_limits_probes(
    backend: Any,
    vocabulary: Any,
    *,
    limit_s: float = 20.0,
    families: tuple[Family, ...] | None = None,
    verbose: bool = False,
) -> tuple[list[Curve], list[Any]]:
    """Curves and findings of every family on ``backend`` (compile timeout ``limit_s`` when the
    backend is a worker)."""
    had = getattr(backend, "compile_timeout_s", None)
    if had is not None:
        backend.compile_timeout_s = limit_s

    def show(family: str, p: Point) -> None:
        if verbose:
            print(f"  limits probe {family} size {p.size}: {p.outcome} in {p.seconds:.2f} s", file=sys.stderr)

    try:
        return probe(
            backend, vocabulary, FAMILIES if families is None else families, limit_s=limit_s, on_point=show
        )
    finally:
        if had is not None:
            backend.compile_timeout_s = had


def attach_limits_probes(report: Any, backend: Any, vocabulary: Any, *, limit_s: float = 20.0) -> None:
    """Run the probes and put them in ``report``: ``limits_probes`` (the curves) in report.json, the
    findings with the others (``limits`` findings do not fail a run), defects regrouped."""
    curves, findings = run_limits_probes(backend, vocabulary, limit_s=limit_s)
    report.data["limits_probes"] = {
        "tokenizer": vocabulary.name,
        "limit_s": limit_s,
        "curves": [c.to_json() for c in curves],
    }
    if findings:
        report.findings = [*report.findings, *findings]
        report.data["findings"] = [f.to_json() for f in report.findings]
        counts = report.data.get("counts", {}).get("limits")
        if isinstance(counts, dict):
            cell = counts.setdefault(vocabulary.name, {"checks": 0, "findings": 0})
            cell["findings"] += len(findings)
        report.defects = group(report.findings, report.grammar_of)
    counts = report.data.get("counts", {}).get("limits")
    if isinstance(counts, dict):
        cell = counts.setdefault(vocabulary.name, {"checks": 0, "findings": 0})
        cell["checks"] += sum(len(c.points) for c in curves)
