"""``maskcert bisect``: which release of an engine first shows a defect, and which first fixes it.

A defect's reproducer (``repro/<id>.py`` of a certify report: it imports only the engine and the
standard library, and exits 1 while the defect is there, 0 when it is not, 2 when the step cannot be
reached) is run on released versions of the engine, each from the engine cache
(:mod:`props.backends.engines`: installed once into its own directory, put first on the script's
``PYTHONPATH``; the user's environment is untouched).

The versions are the engine's releases on the package index (``pip index versions``), inside the
adapter's supported range (:data:`props.backends.REGISTRY` ``tested``; the reproducers work across
it) and inside ``--versions A..B`` when given (either end may be left open: ``0.1.19..``). The
search assumes one transition between the two ends (the question a maintainer asks first): both
ends are run; when they differ, binary search finds the adjacent pair of releases where the verdict
changes, which is the first release showing the defect (absent -> present) or the first fixing it
(present -> absent). ``exhaustive=True`` runs every release instead and reports every transition.
A release whose reproducer neither reproduces nor clears (exit 2, an import error, a timeout) is
``inconclusive`` and is stepped over.

SIGINT or SIGTERM (:func:`maskcert.sharding.signals`) stops the search at once: the reproducer or
install in progress is killed, and the result holds the releases run so far with ``interrupted`` set
(``maskcert bisect`` prints it and exits 128 + the signal). Reproducers die with maskcert even when it
is killed (:mod:`props.backends.lifetime`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from maskcert.sharding import Interrupted, signal_name, signals
from props.backends.lifetime import die_with_parent
from refdecoder.errors import MaskcertError

__all__ = ["BisectError", "Run", "BisectResult", "resolve_repro", "versions_between", "bisect", "run_repro"]

PRESENT, ABSENT, INCONCLUSIVE = "present", "absent", "inconclusive"


class BisectError(MaskcertError, ValueError):
    """Bad bisect input (defect, reproducer, backend or version range), naming it and what was expected."""


@dataclass(frozen=True)
class Run:
    """One release's verdict: ``present`` (exit 1), ``absent`` (exit 0) or ``inconclusive``."""

    version: str
    verdict: str
    exit_code: int
    last_line: str

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "verdict": self.verdict,
            "exit": self.exit_code,
            "output": self.last_line,
        }


@dataclass
class BisectResult:
    backend: str
    repro: str
    versions: list[str]
    runs: dict[str, Run] = field(default_factory=dict)
    #: (from_version, to_version, "introduced" | "fixed") for each verdict change between neighbours run
    transitions: list[tuple[str, str, str]] = field(default_factory=list)
    #: the signal that stopped the search before it finished, None when it finished
    interrupted: int | None = None

    @property
    def first_showing(self) -> str | None:
        hits = [b for a, b, kind in self.transitions if kind == "introduced"]
        if hits:
            return hits[0]
        first = self._ordered()
        return first[0].version if first and first[0].verdict == PRESENT else None

    @property
    def first_fixing(self) -> str | None:
        hits = [b for a, b, kind in self.transitions if kind == "fixed"]
        return hits[-1] if hits else None

    def _ordered(self) -> list[Run]:
        return [
            self.runs[v] for v in self.versions if v in self.runs and self.runs[v].verdict != INCONCLUSIVE
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "repro": self.repro,
            "versions": self.versions,
            "runs": [self.runs[v].to_json() for v in self.versions if v in self.runs],
            "transitions": [{"from": a, "to": b, "kind": k} for a, b, k in self.transitions],
            "first_showing": self.first_showing,
            "first_fixing": self.first_fixing,
            "interrupted": None if self.interrupted is None else signal_name(self.interrupted),
        }

    def summary(self) -> str:
        lines = [f"{self.backend}: {len(self.runs)} of {len(self.versions)} releases run ({self.repro})"]
        if self.interrupted is not None:
            lines.append(f"interrupted by {signal_name(self.interrupted)}: the search did not finish")
        for v in self.versions:
            if v in self.runs:
                r = self.runs[v]
                lines.append(f"  {v:<12} {r.verdict:<12} {r.last_line[:100]}")
        shows = self.first_showing or "none of those run"
        if self.first_showing is not None and not any(k == "introduced" for _a, _b, k in self.transitions):
            shows += " (the oldest release searched: it may go back further)"
        lines.append(f"first release showing it: {shows}")
        ordered = self._ordered()
        if self.first_fixing is not None:
            lines.append(f"first release fixing it: {self.first_fixing}")
        elif ordered and ordered[-1].verdict == PRESENT:
            lines.append(f"first release fixing it: none yet (still present in {ordered[-1].version})")
        else:
            lines.append(
                "first release fixing it: not found (no present -> absent change among the releases run)"
            )
        return "\n".join(lines)


def resolve_repro(target: str) -> Path:
    """A reproducer script from ``SCRIPT.py``, ``REPORT.json:DEFECT_ID`` or ``REPORT_DIR:DEFECT_ID``
    (a defect of a certify report's ``defects``, or a finding id)."""
    path = Path(target)
    if path.suffix == ".py" and path.is_file():
        return path
    report_part, sep, defect_id = target.rpartition(":")
    if not sep or not report_part or not defect_id:
        raise BisectError(
            f"{target!r}: expected a reproducer script (repro/<id>.py) or REPORT.json:DEFECT_ID "
            "(a report.json or its directory, and an id from its 'defects')"
        )
    report = Path(report_part)
    if report.is_dir():
        report = report / "report.json"
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise BisectError(f"{report}: expected a certify report.json ({e})") from e
    for entry in list(data.get("defects") or []) + list(data.get("findings") or []):
        if isinstance(entry, dict) and entry.get("id") == defect_id and entry.get("repro"):
            script = report.parent / str(entry["repro"])
            if not script.is_file():
                raise BisectError(f"{report}: defect {defect_id}'s reproducer {script} is missing")
            return script
    known = [str(d.get("id")) for d in data.get("defects") or [] if isinstance(d, dict)]
    raise BisectError(
        f"{report}: no defect or finding {defect_id!r} with a reproducer (defects: {known[:20]})"
    )


def _parse_range(text: str | None) -> tuple[Version | None, Version | None]:
    if not text:
        return None, None
    lo, sep, hi = text.partition("..")
    if not sep:
        raise BisectError(f"--versions {text!r}: expected A..B (either end may be empty: A.. or ..B)")
    try:
        return (Version(lo) if lo.strip() else None, Version(hi) if hi.strip() else None)
    except InvalidVersion as e:
        raise BisectError(f"--versions {text!r}: {e}") from e


def versions_between(released: Sequence[str], tested: str, span: str | None) -> list[str]:
    """The final releases in ``released`` that lie in the adapter's ``tested`` range and in ``span``
    (``A..B``, inclusive), oldest first."""
    lo, hi = _parse_range(span)
    spec = SpecifierSet(tested)
    out = []
    for v in released:
        try:
            ver = Version(v)
        except InvalidVersion:
            continue
        if ver.is_prerelease or ver.is_devrelease or ver not in spec:
            continue
        if (lo is not None and ver < lo) or (hi is not None and ver > hi):
            continue
        out.append(v)
    return sorted(out, key=Version)


def run_repro(script: Path, engine_path: Path | None, timeout_s: float = 300.0) -> tuple[str, int, str]:
    """Run ``script`` with ``engine_path`` first on its ``PYTHONPATH``: (verdict, exit code, last line)."""
    env = dict(os.environ)
    if engine_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(engine_path), *filter(None, [env.get("PYTHONPATH", "")])])
    parent = os.getpid()
    dies_with_us = threading.current_thread() is threading.main_thread()
    try:
        proc = subprocess.run(
            [sys.executable, script.name],
            cwd=script.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            preexec_fn=(lambda: die_with_parent(parent)) if dies_with_us else None,  # noqa: PLW1509
        )
    except subprocess.TimeoutExpired:
        return INCONCLUSIVE, 124, f"no verdict within {timeout_s:g} s"
    lines = [ln for ln in (proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
    verdict_lines = [ln for ln in lines if ln.startswith(("REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"))]
    last = (verdict_lines or lines or [""])[-1].strip()
    if proc.returncode == 1 and last.startswith("REPRODUCED"):
        return PRESENT, 1, last
    if proc.returncode == 0 and last.startswith("NOT REPRODUCED"):
        return ABSENT, 0, last
    return INCONCLUSIVE, proc.returncode, last


def bisect(
    backend: str,
    repro: Path,
    versions: Sequence[str],
    *,
    prepare: Callable[[str], Path | None],
    exhaustive: bool = False,
    timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> BisectResult:
    """Run ``repro`` on ``versions`` (oldest first); ``prepare(version)`` gives the directory holding
    that release (:func:`props.backends.engines.install_engine`). See the module docstring: a signal
    ends the search with ``interrupted`` set."""
    if not versions:
        raise BisectError(
            f"{backend}: no released version to run (check --versions against the supported range)"
        )
    result = BisectResult(backend, str(repro), list(versions))

    def verdict(i: int) -> str:
        v = versions[i]
        if v not in result.runs:
            if progress is not None:
                progress(f"{backend}=={v} ...")
            state, code, last = run_repro(repro, prepare(v), timeout_s)
            result.runs[v] = Run(v, state, code, last)
        return result.runs[v].verdict

    with signals() as stop:
        try:
            with stop.abortable():
                if exhaustive:
                    for i in range(len(versions)):
                        verdict(i)
                else:
                    _search(verdict, 0, len(versions) - 1)
        except Interrupted as e:
            result.interrupted = e.signum if e.signum is not None else int(signal.SIGTERM)
    _transitions(result)
    return result


def _conclusive(verdict: Callable[[int], str], i: int, lo: int, step: int) -> int | None:
    """The nearest index from ``i`` toward ``lo``'s side (``step`` +1/-1) with a conclusive verdict."""
    j = i
    while lo <= j if step < 0 else j <= lo:
        if verdict(j) != INCONCLUSIVE:
            return j
        j += step
    return None


def _search(verdict: Callable[[int], str], lo: int, hi: int) -> None:
    a = _conclusive(verdict, lo, hi, +1)
    b = _conclusive(verdict, hi, lo, -1)
    if a is None or b is None or a >= b:
        return
    va, vb = verdict(a), verdict(b)
    if va == vb:
        return  # one transition assumed: none between equal ends
    while b - a > 1:
        mid = (a + b) // 2
        vm = verdict(mid)
        if vm == INCONCLUSIVE:
            m2 = _conclusive(verdict, mid, b - 1, +1) or _conclusive(verdict, mid, a + 1, -1)
            if m2 is None or m2 in (a, b):
                return
            mid, vm = m2, verdict(m2)
        if vm == va:
            a = mid
        else:
            b = mid


def _transitions(result: BisectResult) -> None:
    ordered = result._ordered()
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        if prev.verdict != cur.verdict:
            kind = "introduced" if cur.verdict == PRESENT else "fixed"
            result.transitions.append((prev.version, cur.version, kind))
