"""``certify --limits-probes``: run the growth probes of :mod:`props.checks.growth_probes` on the
certified backend and add their curves and ``limits`` findings to a report.

The backend is the one certify built: a :class:`~props.backends.worker.WorkerBackend` for engines
(its child has an address-space limit; here its compile timeout is set to ``limit_s`` for the probes
and restored after), the reference in-process (its own compile budget bounds it).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from props.checks.growth_probes import FAMILIES, Curve, Family, Point, probe

__all__ = ["ProbedReport", "attach_limits_probes", "run_limits_probes"]

R = TypeVar("R", bound="ProbedReport")


class ProbedReport(Protocol):
    """What the probes need of a report (:class:`maskcert.certification.Report`): a new value with them."""

    def with_limits_probes(
        self: R,
        tokenizer: str,
        limit_s: float,
        curves: Sequence[Mapping[str, Any]],
        findings: Sequence[Any],
        checks: int,
    ) -> R: ...


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


def attach_limits_probes(report: R, backend: Any, vocabulary: Any, *, limit_s: float = 20.0) -> R:
    """``report`` with the probes run: ``limits_probes`` (the curves) in report.json, the findings
    with the others (``limits`` findings do not fail a run), defects regrouped (a new value)."""
    curves, findings = run_limits_probes(backend, vocabulary, limit_s=limit_s)
    return report.with_limits_probes(
        vocabulary.name,
        limit_s,
        [c.to_json() for c in curves],
        findings,
        sum(len(c.points) for c in curves),
    )
