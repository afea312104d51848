"""What maskcert runs on: dependency versions, known incompatibilities between them, and a live probe
for each.

A conformance suite must never degrade silently when an upstream release changes behaviour. Each
known incompatibility is listed here once, with:

* the version ranges it is known for (so ``maskcert doctor`` can say whether it *should* apply),
* a **probe** that exercises the broken path for real (so ``doctor`` says whether it *does* apply:
  a range is a claim, the probe is the evidence), and
* the install cap that works around it (in ``pyproject.toml``, next to the same reason).

Lifting a cap: when an upstream release fixes the problem, ``ci/latest-deps.sh`` installs the newest
release of every dependency (ignoring maskcert's caps) and runs ``maskcert doctor --strict``; once the
probe passes there, the cap in ``pyproject.toml`` and the entry's ``fixed_in`` can be updated.
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from refdecoder.errors import MaskcertError

__all__ = [
    "Incompatibility",
    "INCOMPATIBILITIES",
    "DependencyError",
    "dependency_versions",
    "version_of",
    "versions_line",
    "Diagnosis",
    "diagnose",
    "known_for",
    "format_doctor",
]

#: Distributions whose versions matter to a report, besides maskcert's own ``Requires-Dist``.
_ALWAYS = ("maskcert", "hypothesis", "hypothesis-jsonschema", "jsonschema", "numpy", "torch")


class DependencyError(MaskcertError, RuntimeError):
    """A dependency failed in a way maskcert does not expect: a broken or incompatible install.

    ``dependency`` names the distribution, ``versions`` the installed versions that matter, and
    ``known`` the known incompatibilities whose probe fails on this install (empty if none is known)."""

    def __init__(self, dependency: str, what: str, versions: dict[str, str | None], known: list[str]) -> None:
        self.dependency = dependency
        self.what = what
        self.versions = versions
        self.known = known
        hint = (
            "known incompatibility: " + "; ".join(known)
            if known
            else "not a known incompatibility: run `maskcert doctor` and report it"
        )
        super().__init__(f"{dependency} failed unexpectedly: {what} [{versions_line(versions)}] ({hint})")


def version_of(dist: str) -> str | None:
    """The installed version of distribution ``dist``, None when it is not installed."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def dependency_versions(extras: bool = True) -> dict[str, str | None]:
    """Installed versions of maskcert's dependencies (``Requires-Dist``; with ``extras`` the optional
    ones too: engines, test tools) plus a few that always matter, by distribution name; None for one
    that is not installed."""
    names: list[str] = list(_ALWAYS)
    try:
        for line in md.requires("maskcert") or []:
            req = Requirement(line)
            if extras or req.marker is None or req.marker.evaluate({"extra": ""}):
                names.append(req.name)
    except md.PackageNotFoundError:  # running from a source tree that is not installed
        pass
    out: dict[str, str | None] = {}
    for name in names:
        key = name.lower().replace("_", "-")
        if key not in out:
            out[key] = version_of(key)
    return out


def versions_line(versions: dict[str, str | None]) -> str:
    return ", ".join(f"{k} {v or 'not installed'}" for k, v in versions.items())


@dataclass(frozen=True)
class Incompatibility:
    """A known break between dependency releases. ``affected`` maps each distribution to the version
    range the break is known for; ``probe`` returns None when the broken path works on this install,
    else what went wrong."""

    id: str
    summary: str
    affected: dict[str, str]
    workaround: str
    probe: Callable[[], str | None]
    fixed_in: str = "not yet fixed upstream"

    def in_range(self, versions: dict[str, str | None]) -> bool:
        """Whether every installed distribution named in ``affected`` lies in its range."""
        for dist, spec in self.affected.items():
            v = versions.get(dist) or version_of(dist)
            if v is None:
                return False
            try:
                if Version(v) not in SpecifierSet(spec):
                    return False
            except InvalidVersion:
                return False
        return True


def _probe_hypothesis_jsonschema_objects() -> str | None:
    """Draw one instance of an object schema with hypothesis-jsonschema (the path that Hypothesis
    6.170.10 broke: ``'many' object has no attribute 'more'`` in ``from_object_schema``)."""
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis_jsonschema import from_schema
    except ImportError as e:
        return f"cannot import: {e}"
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    drawn: list[object] = []

    @settings(max_examples=3, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema))
    def draw(value: object) -> None:
        drawn.append(value)

    try:
        draw()
    except Exception as e:  # noqa: BLE001 - any failure is the probe's answer
        return f"{type(e).__name__}: {e}"
    if not drawn or not all(isinstance(v, dict) and isinstance(v.get("a"), int) for v in drawn):
        return f"drew {drawn[:3]!r}, expected objects with an integer 'a'"
    return None


INCOMPATIBILITIES: tuple[Incompatibility, ...] = (
    Incompatibility(
        id="hypothesis-6.170.10-many-more",
        summary="Hypothesis 6.170.10 removed `many.more()`, which hypothesis-jsonschema's "
        "from_object_schema calls: every object schema fails to draw (AttributeError: 'many' object "
        "has no attribute 'more')",
        affected={"hypothesis": ">=6.170.10", "hypothesis-jsonschema": "<=0.23.1"},
        workaround="pyproject.toml caps hypothesis<6.170.10",
        probe=_probe_hypothesis_jsonschema_objects,
    ),
)


@dataclass(frozen=True)
class Diagnosis:
    """One incompatibility on this install: whether the versions are in its range and what its probe said."""

    incompatibility: Incompatibility
    in_range: bool
    probe_error: str | None

    @property
    def applies(self) -> bool:
        return self.probe_error is not None

    def line(self) -> str:
        inc = self.incompatibility
        if self.applies:
            state = f"APPLIES: {self.probe_error}"
            if not self.in_range:
                state += " (outside the known version range: the range needs widening)"
        elif self.in_range:
            state = "in the known range but the probe passes: fixed upstream? the cap may be lifted"
        else:
            state = "does not apply"
        return f"{inc.id}: {state}\n    {inc.summary}\n    workaround: {inc.workaround}; fixed in: {inc.fixed_in}"


def diagnose(versions: dict[str, str | None] | None = None) -> list[Diagnosis]:
    """Every known incompatibility, judged on this install (the probes run for real)."""
    versions = dependency_versions() if versions is None else versions
    return [Diagnosis(inc, inc.in_range(versions), inc.probe()) for inc in INCOMPATIBILITIES]


def known_for(versions: dict[str, str | None]) -> list[str]:
    """The known incompatibilities (id and summary) whose version range covers ``versions``, without
    running their probes: for explaining a failure that has just happened (a probe may not run inside
    a Hypothesis test, where such failures surface)."""
    return [f"{inc.id}: {inc.summary}" for inc in INCOMPATIBILITIES if inc.in_range(versions)]


def format_doctor(versions: dict[str, str | None], diagnoses: list[Diagnosis]) -> str:
    """``maskcert doctor``'s text: one line per dependency, then each known incompatibility."""
    width = max(len(k) for k in versions)
    lines = ["dependencies:"]
    lines += [f"  {k:<{width}}  {v or 'not installed'}" for k, v in versions.items()]
    lines.append("known incompatibilities:")
    lines += ["  " + d.line() for d in diagnoses]
    return "\n".join(lines)
