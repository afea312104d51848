"""``maskcert bench certify`` and the clock under it: every second of a checked spec is maskcert's own
or the engine's, per exclusive phase; the benchmark reports both per engine and per phase."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import props.checks.clock as clock_module
from maskcert.bench.certify import format_table, run_certify_bench
from maskcert.certification import certify
from maskcert.cli import main
from props.checks.clock import Clock, engine_call, phase, running
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """perf_counter as a counter the test advances by hand."""
    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])
    yield now


def test_the_clock_charges_each_interval_once_to_the_innermost_phase(ticks: list[float]) -> None:
    c = Clock()
    with running(c):
        ticks[0] += 1  # other, own
        with phase("walks"):
            ticks[0] += 2  # walks, own
            with engine_call():
                ticks[0] += 4  # walks, engine
                with engine_call():  # a nested call is still one call's time
                    ticks[0] += 8
            with phase("witnesses"):
                ticks[0] += 16  # witnesses, own; not walks'
            ticks[0] += 32  # walks, own
    assert c.own == {"other": 1, "walks": 34, "witnesses": 16}
    assert c.engine == {"walks": 12}
    assert c.calls == {"walks": 1}
    assert c.own_s + c.engine_s == ticks[0]  # a breakdown that adds up
    j = c.to_json()
    assert j["engine_calls"] == 1 and list(j["phases"]) == ["walks", "witnesses", "other"]


def test_without_a_clock_phases_and_engine_calls_cost_nothing_and_record_nothing() -> None:
    assert clock_module.current() is None
    with phase("walks"), engine_call():
        pass
    assert clock_module.current() is None


_CASE = Case(
    SpecRef(
        SpecKind.JSON_SCHEMA,
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        "obj",
        "test",
    ),
    valid=({"a": 12},),
    invalid=({"a": "x"},),
)


def test_certify_profiles_own_and_engine_seconds_per_spec_and_phase() -> None:
    report = certify("reference", tokenizers=["bpe"], corpus=(), cases=[_CASE], examples=1, strings=1)
    p = report.to_json()["profile"]
    for key in ("own_s", "engine_s"):
        assert set(p[key]) == {"median", "p90", "p95", "max", "total"}
        assert p[key]["total"] > 0
    assert p["engine_calls"] > 0
    split = p["split_s"]
    assert {"reference compile", "engine compile", "valid walks"} <= set(split)
    assert split["engine compile"]["engine_calls"] == 1
    assert sum(s["engine_calls"] for s in split.values()) == p["engine_calls"]
    # Exclusive phases add up to the per-spec totals (rounding apart).
    assert sum(s["own_s"] for s in split.values()) == pytest.approx(p["own_s"]["total"], abs=1e-3)


def _schemas(tmp_path: Path) -> Path:
    folder = tmp_path / "schemas"
    folder.mkdir()
    doc = {
        "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "tests": [{"data": {"n": 3}, "valid": True}, {"data": {"n": "x"}, "valid": False}],
    }
    (folder / "one.json").write_text(json.dumps(doc))
    return folder


def test_bench_certify_reports_own_engine_marginal_and_phases(tmp_path: Path) -> None:
    result = run_certify_bench(
        "bpe", 1, examples=1, engines=["reference"], schemas=_schemas(tmp_path), minimize_s=0
    )
    b = result["backends"]["reference"]
    assert b["specs"]["checked"] == 1
    for key in ("own_s", "engine_s"):
        assert set(b[key]) == {"median", "p90", "mean"}
    assert set(b["marginal_s"]) == {"median", "mean", "mean_all"}
    assert b["marginal_s"]["mean_all"] >= b["marginal_s"]["mean"]
    assert {"reference compile", "valid walks", "minimization", "report writing"} <= set(b["phases"])
    assert all(set(p) == {"own_s", "engine_s", "engine_calls"} for p in b["phases"].values())
    table = format_table(result)
    assert "own s/spec median" in table and "| reference compile |" in table
    json.dumps(result, allow_nan=False)


def test_bench_certify_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "certify",
            "--vocab",
            "bpe",
            "--limit",
            "1",
            "--backend",
            "reference",
            "--schemas",
            str(_schemas(tmp_path)),
            "--minimize-seconds",
            "0",
            "--examples",
            "1",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "where reference's time goes per spec" in printed and "| minimization |" in printed
    assert out.exists()
