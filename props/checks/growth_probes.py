"""Engines' denial of service as findings: the ``limits`` invariant's growth probes.

Each :class:`Family` is a hostile spec of growing size: nested ``anyOf``/``oneOf`` at depth 2, 4, 8
and 16, repetition bounds around engines' internal thresholds (regex ``{n}``, ``minItems``,
``minLength``), long ``enum``s, deep ``$ref`` chains and left-recursive GBNF. :func:`probe` compiles
each size on a backend — meant to be a ``WorkerBackend`` (``props.backends.worker``), whose child has
an address-space limit and whose ``compile`` has a timeout, so a hang or a memory blow-up comes back
as an exception with ``kind == "limits"`` and a death as ``kind == "crash"`` — and measures the wall
time of each compile. The sizes of a family run from small to large and stop at the first one that
hangs or dies (larger ones would only take longer).

A family becomes one ``limits`` :class:`~props.contract.findings.Finding` when the engine

* **hangs**: the compile outlived its time limit (``timeout``), or ran out of memory (``memory``);
* **crashes**: its worker died or the engine raised something that is not a refusal (``crash``);
* **blows up**: between two consecutive sizes whose larger compile took at least
  :data:`SLOW_S`, time grew at least as the square of the family's size parameter (depth, count,
  entries; each spec's text grows linearly in it or less): exponent :data:`SUPERLINEAR` or more,
  quadratic or worse, where a linear compiler would grow with exponent 1.

The finding's certificate is the growth curve (``curve``: size, spec bytes, seconds and outcome per
point) with the spec of the point that shows the failure; ``budget_s`` is what the reproducer holds
the engine to (the time limit for a hang; for a blow-up, twice what linear growth from the previous
point allows). Refusing a spec (``Refused``) is a fine outcome at any size.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from props.contract.backend import Refused
from props.contract.findings import Finding, Invariant, SpecRef
from refdecoder import Gbnf, JsonProfile, JsonSchema, Regex, Spec

__all__ = ["Family", "FAMILIES", "Point", "Curve", "probe", "judge", "SLOW_S", "SUPERLINEAR"]

SLOW_S = 1.0
SUPERLINEAR = 2.0
_PROFILE = JsonProfile(allow_duplicate_keys=True)


@dataclass(frozen=True)
class Family:
    name: str
    sizes: tuple[int, ...]
    build: Callable[[int], Spec]
    about: str


def _nested(keyword: str) -> Callable[[int], Spec]:
    def build(depth: int) -> Spec:
        node: dict[str, Any] = {"type": "integer"}
        for i in range(depth):
            node = {
                keyword: [
                    {"type": "object", "properties": {f"a{i}": {"type": "integer"}}, "required": [f"a{i}"]},
                    {"type": "object", "properties": {f"b{i}": node}, "required": [f"b{i}"]},
                    {"type": "array", "items": node},
                ]
            }
        return JsonSchema(node, _PROFILE)

    return build


def _ref_chain(n: int) -> Spec:
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "object", "properties": {"x": {"type": "integer"}}}
    return JsonSchema({"$ref": "#/$defs/d0", "$defs": defs}, _PROFILE)


def _left_recursive(levels: int) -> Spec:
    """An expression grammar with ``levels`` left-recursive precedence levels (``e0 ::= e0 "+0" e1 |
    e1``); llama.cpp's GBNF parser rejects or loops on left recursion, engines differ (the reference
    rewrites it, ``refdecoder/_gbnf_rewrite.py``)."""
    rules = ["root ::= e0"]
    for i in range(levels):
        rules.append(f'e{i} ::= e{i} "+{i}" e{i + 1} | e{i + 1}')
    rules.append(f'e{levels} ::= [0-9]+ | "(" e0 ")"')
    return Gbnf("\n".join(rules))


FAMILIES: tuple[Family, ...] = (
    Family("anyOf-depth", (2, 4, 8, 16), _nested("anyOf"), "nested anyOf of objects and arrays"),
    Family("oneOf-depth", (2, 4, 8, 16), _nested("oneOf"), "nested oneOf of objects and arrays"),
    Family(
        "regex-repeat",
        (64, 256, 1024, 4096, 16384),
        lambda n: Regex(f"[a-z]{{{n}}}"),
        "a counted repeat around engines' unrolling thresholds",
    ),
    Family(
        "string-minLength",
        (64, 256, 1024, 4096, 16384),
        lambda n: JsonSchema({"type": "string", "minLength": n, "maxLength": n}, _PROFILE),
        "minLength = maxLength = n",
    ),
    Family(
        "array-minItems",
        (16, 64, 256, 1024, 4096),
        lambda n: JsonSchema(
            {"type": "array", "items": {"type": "integer"}, "minItems": n, "maxItems": n}, _PROFILE
        ),
        "minItems = maxItems = n",
    ),
    Family(
        "enum-size",
        (100, 1000, 10000, 50000),
        lambda n: JsonSchema({"enum": [f"value-{i:06d}" for i in range(n)]}, _PROFILE),
        "a string enum of n entries",
    ),
    Family("ref-chain", (4, 16, 64, 256), _ref_chain, "a chain of n $refs"),
    Family("gbnf-left-recursion", (1, 2, 4, 8), _left_recursive, "n left-recursive precedence levels"),
)


@dataclass(frozen=True)
class Point:
    size: int
    spec_bytes: int
    seconds: float
    outcome: str  # compiled | refused | timeout | memory | crash
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "spec_bytes": self.spec_bytes,
            "seconds": round(self.seconds, 4),
            "outcome": self.outcome,
            "detail": self.detail[:300],
        }


@dataclass(frozen=True)
class Curve:
    family: str
    about: str
    points: tuple[Point, ...]
    verdict: str  # ok | hang | crash | blowup
    why: str = ""
    at: int | None = None  # index of the point that shows the verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "about": self.about,
            "verdict": self.verdict,
            "why": self.why,
            "points": [p.to_json() for p in self.points],
        }


def _bytes(spec: Spec) -> int:
    if isinstance(spec, JsonSchema):
        return len(json.dumps(spec.schema))
    if isinstance(spec, Regex):
        return len(spec.pattern.encode())
    if isinstance(spec, Gbnf):
        return len(spec.text.encode())
    return len(spec.canonical())


def judge(points: Sequence[Point]) -> tuple[str, str, int | None]:
    """(verdict, why, index of the point) for a growth curve (see the module docstring)."""
    for i, p in enumerate(points):
        if p.outcome in ("timeout", "memory"):
            return "hang", f"{p.outcome} at size {p.size} after {p.seconds:.1f} s", i
        if p.outcome == "crash":
            return "crash", f"crashed at size {p.size}: {p.detail[:200]}", i
    for i in range(1, len(points)):
        a, b = points[i - 1], points[i]
        if b.seconds < SLOW_S or a.seconds <= 0 or b.size <= a.size:
            continue
        k = math.log(b.seconds / max(a.seconds, 1e-3)) / math.log(b.size / a.size)
        if k >= SUPERLINEAR:
            return (
                "blowup",
                f"compile time grew with exponent {k:.1f} of the size from size {a.size} "
                f"({a.seconds:.2f} s) to {b.size} ({b.seconds:.2f} s)",
                i,
            )
    return "ok", "", None


def probe(
    backend: Any,
    vocabulary: Any,
    families: Sequence[Family] = FAMILIES,
    *,
    limit_s: float = 20.0,
    on_point: Callable[[str, Point], None] | None = None,
) -> tuple[list[Curve], list[Finding]]:
    """Run each family's sizes on ``backend`` (largest last; stop at the first hang or crash) and
    judge the curves; ``limit_s`` is the per-compile time limit the backend enforces (recorded in
    certificates)."""
    curves: list[Curve] = []
    findings: list[Finding] = []
    for fam in families:
        # Untimed warm-up: a worker restarted after the previous family's hang pays its start-up (and
        # the engine its per-vocabulary set-up) here, not in the first point of the curve.
        with contextlib.suppress(Exception):  # a backend that fails here fails the first point too
            backend.compile(Regex("a"), vocabulary)
        points: list[Point] = []
        specs: list[Spec] = []
        for size in fam.sizes:
            spec = fam.build(size)
            specs.append(spec)
            t0 = time.perf_counter()
            try:
                got = backend.compile(spec, vocabulary)
                outcome, detail = (
                    ("refused", str(got.reason)) if isinstance(got, Refused) else ("compiled", "")
                )
            except Exception as e:  # noqa: BLE001 - the backend's failure is what is measured
                kind = getattr(e, "kind", "crash")
                outcome = (
                    "memory" if "Memory" in type(e).__name__ else ("timeout" if kind == "limits" else "crash")
                )
                detail = f"{type(e).__name__}: {e}"
            point = Point(size, _bytes(spec), time.perf_counter() - t0, outcome, detail)
            points.append(point)
            if on_point is not None:
                on_point(fam.name, point)
            if outcome in ("timeout", "memory", "crash"):
                break
        verdict, why, at = judge(points)
        curve = Curve(fam.name, fam.about, tuple(points), verdict, why, at)
        curves.append(curve)
        if at is not None:
            findings.append(_finding(backend, vocabulary, fam, curve, specs[at], limit_s))
    return curves, findings


def _finding(backend: Any, vocabulary: Any, fam: Family, curve: Curve, spec: Spec, limit_s: float) -> Finding:
    assert curve.at is not None
    p = curve.points[curve.at]
    if curve.verdict == "blowup":
        prev = curve.points[curve.at - 1]
        budget = max(1.0, 2 * prev.seconds * p.size / prev.size)
    else:
        budget = limit_s
    return Finding(
        invariant=Invariant.LIMITS,
        backend=backend.name,
        backend_version=backend.version,
        spec=SpecRef.of(spec, f"limits-probe:{fam.name}:{p.size}", "limits-probe"),
        tokenizer=vocabulary.name,
        tokenizer_fingerprint=vocabulary.fingerprint,
        backend_verdict=p.outcome,
        reference_verdict="bounded",
        message=f"{fam.name} ({fam.about}): {curve.why}",
        certificate={
            "family": fam.name,
            "verdict": curve.verdict,
            "curve": [q.to_json() for q in curve.points],
            "budget_s": round(budget, 3),
            "limit_s": limit_s,
        },
        walk="limits-probe",
    )
