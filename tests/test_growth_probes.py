"""The ``limits`` growth probes (props/checks/growth_probes.py), ``certify --limits-probes`` glue and its
report section, against toy backends whose compile time and failures are known."""

from __future__ import annotations

import time
from typing import Any

import pytest

import tokenizers_matrix
from props.checks.growth_probes import FAMILIES, Family, Point, judge, probe
from props.contract.backend import Compiled, DeclaredProfile, Refused
from props.contract.findings import Invariant
from props.output.report import render_html, render_markdown
from refdecoder import Regex, Spec


class _Hang(Exception):
    kind = "limits"


class _Toy:
    """Compile time ``cost(size)`` seconds (the size is the regex's count), or a failure from
    ``fail(size)``."""

    name = "toy"
    version = "0"
    profile = DeclaredProfile()

    def __init__(self, cost: Any, fail: Any = None) -> None:
        self.cost = cost
        self.fail = fail
        self.calls: list[int] = []

    def compile(self, spec: Spec, vocabulary: Any) -> Any:
        assert isinstance(spec, Regex)
        size = int(spec.pattern.split("{")[1].rstrip("}")) if "{" in spec.pattern else 0
        self.calls.append(size)
        if self.fail is not None and size and self.fail(size):
            raise self.fail(size)
        time.sleep(self.cost(size) if size else 0)
        return Refused("too big") if size > 1000 else Compiled(None)


FAM = (Family("toy-repeat", (10, 20, 40, 80), lambda n: Regex(f"a{{{n}}}"), "a{n}"),)


@pytest.fixture(scope="module")
def vocab() -> Any:
    return tokenizers_matrix.resolve("byte")


def test_judge_verdicts() -> None:
    def pts(*secs: float, outcome: str = "compiled") -> list[Point]:
        return [Point(10 * 2**i, 100 * 2**i, s, outcome) for i, s in enumerate(secs)]

    assert judge(pts(0.01, 0.02, 0.04, 0.08))[0] == "ok"  # linear
    assert judge(pts(0.01, 0.2, 0.5, 0.9))[0] == "ok"  # superlinear but never slow: noise
    verdict, why, at = judge(pts(0.01, 0.05, 0.3, 1.5))
    assert (verdict, at) == ("blowup", 3) and "exponent 2.3" in why
    assert judge(pts(0.5, 1.0, 2.0, 4.1))[0] == "ok"  # slow but linear
    hang = [*pts(0.01, 0.02), Point(40, 400, 20.0, "timeout")]
    assert judge(hang)[:1] == ("hang",) and judge(hang)[2] == 2
    assert judge([Point(1, 1, 0.1, "crash", "segfault")])[0] == "crash"


def test_probe_finds_a_blowup_with_its_curve(vocab: Any) -> None:
    toy = _Toy(lambda n: (n / 40) ** 3 * 0.5)  # 10: ~0.008 s, 40: 0.5 s, 80: 4 s
    curves, findings = probe(toy, vocab, FAM, limit_s=30)
    (curve,) = curves
    assert curve.verdict == "blowup" and [p.size for p in curve.points] == [10, 20, 40, 80]
    (f,) = findings
    assert f.invariant == Invariant.LIMITS and f.backend == "toy"
    assert f.spec.source == "a{80}" and [p["size"] for p in f.certificate["curve"]] == [10, 20, 40, 80]
    assert 1.0 <= f.certificate["budget_s"] < curve.points[-1].seconds


def test_probe_stops_at_a_hang_and_passes_a_linear_engine(vocab: Any) -> None:
    toy = _Toy(lambda n: 0.0, fail=lambda n: _Hang("no answer") if n >= 40 else None)
    curves, findings = probe(toy, vocab, FAM, limit_s=5)
    assert [p.outcome for p in curves[0].points] == ["compiled", "compiled", "timeout"]
    assert 80 not in toy.calls and findings[0].certificate["verdict"] == "hang"
    assert findings[0].certificate["budget_s"] == 5
    crash = _Toy(lambda n: 0.0, fail=lambda n: RuntimeError("boom"))
    curves, findings = probe(crash, vocab, FAM)
    assert curves[0].verdict == "crash" and "boom" in findings[0].message
    fine = _Toy(lambda n: 0.001 * n / 10)
    curves, findings = probe(fine, vocab, FAM)
    assert curves[0].verdict == "ok" and not findings


def test_families_build_specs_of_growing_size() -> None:
    assert {f.name for f in FAMILIES} >= {
        "anyOf-depth",
        "oneOf-depth",
        "regex-repeat",
        "enum-size",
        "ref-chain",
        "gbnf-left-recursion",
    }
    for fam in FAMILIES:
        sizes = [len(fam.build(n).canonical()) for n in fam.sizes]
        assert sizes == sorted(sizes) and sizes[0] < sizes[-1], fam.name
    assert list(next(f for f in FAMILIES if f.name == "anyOf-depth").sizes) == [2, 4, 8, 16]


def test_attach_adds_curves_findings_and_defects(vocab: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import maskcert.limits_probes
    from maskcert.certification import _assemble, resolve_backend

    empty = _assemble(resolve_backend("reference", isolate=False), [vocab], [], [], None, 0, 0.0, True)
    assert empty.data["counts"]["limits"] == {} and empty.data["findings"] == []
    monkeypatch.setattr(maskcert.limits_probes, "FAMILIES", FAM)
    report = maskcert.limits_probes.attach_limits_probes(
        empty, _Toy(lambda n: (n / 40) ** 3 * 0.5), vocab, limit_s=9
    )
    assert "limits_probes" not in empty.data  # a new value: the report it was given is unchanged
    assert report.data["limits_probes"]["limit_s"] == 9
    assert [c["verdict"] for c in report.data["limits_probes"]["curves"]] == ["blowup"]
    assert [f["invariant"] for f in report.data["findings"]] == ["limits"]
    assert report.data["counts"]["limits"][vocab.name] == {"checks": 4, "findings": 1}
    assert [d.invariant for d in report.defects] == ["limits"]
    md = render_markdown(report.data)
    assert "## Limits probes" in md and "toy-repeat" in md and "blowup" in md and "80: " in md


@pytest.mark.slow  # a whole certify run (about a minute here)
def test_report_shows_the_curves(monkeypatch: pytest.MonkeyPatch) -> None:
    import maskcert.limits_probes
    from maskcert.certification import certify

    small = (
        Family("ref-repeat", (2, 4), lambda n: Regex(f"a{{{n}}}"), "a{n} on the reference"),
        Family("ref-enum", (3, 30), lambda n: Regex("|".join(f"w{i}" for i in range(n))), "n words"),
    )
    monkeypatch.setattr(maskcert.limits_probes, "FAMILIES", small)
    report = certify(
        _ToyAdapter,
        tokenizers=["byte"],
        regexes=["ab"],
        examples=1,
        budget_s=5,
        minimize_s=0,
        limits_probes=True,
    )
    probes = report.data["limits_probes"]
    assert probes["tokenizer"] == "byte"
    assert [c["family"] for c in probes["curves"]] == ["ref-repeat", "ref-enum"]
    assert all(c["verdict"] == "ok" for c in probes["curves"]) and report.exit_code == 0
    md = render_markdown(report.data)
    assert "## Limits probes" in md and "ref-enum" in md and "3: " in md
    assert "<h2>Limits probes</h2>" in render_html(report.data)
    without = {k: v for k, v in report.data.items() if k != "limits_probes"}
    assert "## Limits probes" not in render_markdown(without)


class _ToyAdapter:
    """The reference, under another name (a backend certify can build in-process)."""

    def __new__(cls) -> Any:
        from props.backends.reference import ReferenceBackend

        return ReferenceBackend()
