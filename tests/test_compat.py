"""Dependency health: a broken hypothesis-jsonschema is loud, never a silent loss of
instances; the report counts instances by source; ``maskcert doctor`` names versions and known
incompatibilities."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

import props.checks.properties
import tokenizers_matrix as tm
from maskcert.certification import certify
from maskcert.cli import main
from props.contract.compat import (
    INCOMPATIBILITIES,
    DependencyError,
    Diagnosis,
    Incompatibility,
    dependency_versions,
    diagnose,
)
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case

OBJECT = Case(
    SpecRef(
        SpecKind.JSON_SCHEMA,
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        "object",
        "test",
    ),
    valid=({"a": 1},),
)
RECURSIVE = Case(
    SpecRef(
        SpecKind.JSON_SCHEMA,
        {
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node",
        },
        "recursive",
        "test",
    ),
    valid=({"next": {}},),
)


@pytest.fixture(scope="module")
def byte() -> tm.Vocabulary:
    return tm.byte_vocabulary()


@pytest.fixture
def fresh_strategies(monkeypatch: pytest.MonkeyPatch) -> None:
    """hypothesis-jsonschema strategies are cached per schema; each test starts without them."""
    monkeypatch.setattr(props.checks.properties, "_STRATEGIES", {})


def _broken_from_schema(schema: Any, **_: Any) -> st.SearchStrategy[Any]:
    """What hypothesis-jsonschema 0.23.1 does under Hypothesis >= 6.170.10: an object schema's
    strategy raises while drawing."""

    def boom(_: Any) -> Any:
        raise AttributeError("'many' object has no attribute 'more'")

    return st.just(None).map(boom)


def test_a_broken_hypothesis_jsonschema_makes_certify_fail_loudly(
    monkeypatch: pytest.MonkeyPatch, byte: tm.Vocabulary, fresh_strategies: None
) -> None:
    import hypothesis_jsonschema

    monkeypatch.setattr(hypothesis_jsonschema, "from_schema", _broken_from_schema)
    report = certify("reference", tokenizers=[byte], corpus=[], cases=[OBJECT], examples=4)
    assert report.exit_code == 3
    [error] = report.data["internal_errors"]
    assert "DependencyError" in error and "hypothesis-jsonschema failed unexpectedly" in error
    assert "'many' object has no attribute 'more'" in error
    assert "hypothesis " in error and "hypothesis-jsonschema " in error  # the versions that matter
    assert report.data["specs"]["internal_error"] == 1


def test_certify_cli_prints_the_dependency_failure(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fresh_strategies: None,
) -> None:
    import hypothesis_jsonschema

    monkeypatch.setattr(hypothesis_jsonschema, "from_schema", _broken_from_schema)
    schema = tmp_path / "object.json"
    schema.write_text(json.dumps(OBJECT.spec.source), encoding="utf-8")
    code = main(
        [
            "certify",
            "--schema",
            str(schema),
            "--tokenizer",
            "byte",
            "--examples",
            "4",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 3
    assert "DependencyError" in capsys.readouterr().err
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Internal errors" in md and "'many' object has no attribute 'more'" in md


def test_documented_refusals_are_noted_not_errors(byte: tm.Vocabulary, fresh_strategies: None) -> None:
    report = certify("reference", tokenizers=[byte], corpus=[], cases=[RECURSIVE, OBJECT], examples=6)
    assert report.exit_code == 0, report.data["internal_errors"]
    per_spec = {e["spec"]: e for e in report.data["instances"]["per_spec"]}
    assert any("unresolvable $ref" in n for n in per_spec["recursive"]["notes"])
    assert per_spec["recursive"]["counts"].get("valid/hypothesis-jsonschema", 0) == 0
    # The object schema did get instances from hypothesis-jsonschema, the corpus and the reference.
    counts = per_spec["object"]["counts"]
    assert counts["valid/hypothesis-jsonschema"] > 0
    assert counts["valid/corpus"] >= 1  # strings: each instance in up to `strings` serializations
    total = report.data["instances"]["total"]
    assert total["valid/hypothesis-jsonschema"] == counts["valid/hypothesis-jsonschema"]


def _rejecting_from_schema(draws: list[int]) -> Any:
    """A hypothesis-jsonschema whose every draw is rejected by a filter (as on schemas whose ``not``
    it cannot satisfy), counting the draws in ``draws``."""

    @st.composite
    def rejected(draw: st.DrawFn) -> Any:
        draws.append(1)
        return draw(st.integers().filter(lambda _: False))

    def from_schema(schema: Any, **_: Any) -> st.SearchStrategy[Any]:
        return rejected()

    return from_schema


NO_STRINGS = Case(OBJECT.spec, valid=())


def test_a_search_gives_up_on_instances_that_never_come(
    monkeypatch: pytest.MonkeyPatch, byte: tm.Vocabulary, fresh_strategies: None
) -> None:
    """Every hypothesis-jsonschema draw rejected and no corpus string: each example is invalid, and
    the valid-walks search gives up after ``FRUITLESS_DRAWS`` draws in a row, saying so (Hypothesis
    alone went on for hundreds on a real schema). With corpus strings the search walks them and
    ends with its examples: the streak never reaches the limit before."""
    import hypothesis_jsonschema

    draws: list[int] = []
    monkeypatch.setattr(hypothesis_jsonschema, "from_schema", _rejecting_from_schema(draws))
    report = certify("reference", tokenizers=[byte], corpus=[], cases=[NO_STRINGS], examples=40)
    assert report.exit_code == 0, report.data["internal_errors"]
    assert len(draws) == props.checks.properties.FRUITLESS_DRAWS
    [spec] = report.data["instances"]["per_spec"]
    assert any("the valid-walks search stopped" in n for n in spec["notes"]), spec["notes"]
    draws.clear()
    report = certify("reference", tokenizers=[byte], corpus=[], cases=[OBJECT], examples=8)
    [spec] = report.data["instances"]["per_spec"]
    assert 0 < len(draws) < props.checks.properties.FRUITLESS_DRAWS
    assert not any("stopped" in n for n in spec["notes"]), spec["notes"]


def test_draw_streaks_count_misses_in_a_row_per_target_until_frozen() -> None:
    """``DrawStreak``: misses in a row per target reach ``FRUITLESS_DRAWS`` once, a usable draw
    starts the count again, and after ``freeze`` (an example failed) nothing counts."""
    from props.checks.properties import FRUITLESS_DRAWS, DrawStreak

    streak = DrawStreak()
    for _ in range(FRUITLESS_DRAWS - 1):
        assert not streak.record(0, False)
    assert not streak.record(0, True)  # a usable draw: the count restarts
    ends = [streak.record(0, False) for _ in range(FRUITLESS_DRAWS)]
    assert ends == [False] * (FRUITLESS_DRAWS - 1) + [True]
    assert not streak.record(1, False)  # per target
    for _ in range(FRUITLESS_DRAWS - 2):
        streak.record(1, False)
    streak.freeze()
    assert not streak.record(1, False)


def test_instances_are_in_every_rendering(byte: tm.Vocabulary, tmp_path: Path) -> None:
    report = certify("reference", tokenizers=[byte], corpus=[], cases=[OBJECT], examples=4, out=tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "## Instances walked" in md and "valid/hypothesis-jsonschema" in md
    assert "Instances walked" in html and "valid/hypothesis-jsonschema" in html
    assert json.loads((tmp_path / "report.json").read_text())["instances"] == report.data["instances"]


def test_the_installed_versions_avoid_every_known_incompatibility() -> None:
    """The install caps work: on this install no known incompatibility's probe fails."""
    for d in diagnose():
        assert not d.applies, d.line()


def test_version_ranges_are_judged_per_distribution() -> None:
    inc = INCOMPATIBILITIES[0]
    assert inc.in_range({"hypothesis": "6.170.17", "hypothesis-jsonschema": "0.23.1"})
    assert inc.in_range({"hypothesis": "6.170.10", "hypothesis-jsonschema": "0.23.1"})
    assert not inc.in_range({"hypothesis": "6.170.9", "hypothesis-jsonschema": "0.23.1"})
    assert not inc.in_range({"hypothesis": "6.170.17", "hypothesis-jsonschema": "0.24.0"})
    probe_fails = Incompatibility("x", "s", {"hypothesis": ">=1"}, "none", probe=lambda: "broken")
    d = Diagnosis(probe_fails, probe_fails.in_range({"hypothesis": "2"}), probe_fails.probe())
    assert d.applies and "APPLIES: broken" in d.line()


def test_dependency_error_names_versions_and_known_incompatibility() -> None:
    e = DependencyError(
        "hypothesis-jsonschema", "AttributeError: x", {"hypothesis": "6.170.17"}, ["id: summary"]
    )
    assert "hypothesis 6.170.17" in str(e) and "known incompatibility: id: summary" in str(e)
    unknown = DependencyError("dep", "boom", {"dep": None}, [])
    assert "dep not installed" in str(unknown) and "maskcert doctor" in str(unknown)


def test_doctor_lists_versions_and_incompatibilities(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--strict"]) == 0
    out = capsys.readouterr().out
    versions = dependency_versions()
    assert str(versions["hypothesis"]) in out and INCOMPATIBILITIES[0].id in out
    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dependencies"]["hypothesis-jsonschema"] == versions["hypothesis-jsonschema"]
    assert [i["id"] for i in doc["incompatibilities"]] == [i.id for i in INCOMPATIBILITIES]
    assert all(i["applies"] is False for i in doc["incompatibilities"])


@pytest.mark.slow
def test_the_real_broken_hypothesis_release_makes_certify_fail_loudly(tmp_path: Path) -> None:
    """Hypothesis 6.170.17 (a release known to break hypothesis-jsonschema 0.23.1) installed beside
    this install: certify exits 3 naming the known incompatibility, and doctor --strict exits 1."""
    target = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
            str(target),
            "hypothesis==6.170.17",
        ],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        pytest.skip(f"cannot install hypothesis 6.170.17 here: {pip.stderr[-300:]}")
    env = {**os.environ, "PYTHONPATH": str(target)}
    schema = tmp_path / "object.json"
    schema.write_text(json.dumps(OBJECT.spec.source), encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "maskcert.cli",
            "certify",
            "--schema",
            str(schema),
            "--tokenizer",
            "byte",
            "--examples",
            "4",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 3, run.stdout + run.stderr
    assert "hypothesis-6.170.10-many-more" in run.stderr and "6.170.17" in run.stderr
    doctor = subprocess.run(
        [sys.executable, "-m", "maskcert.cli", "doctor", "--strict"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert doctor.returncode == 1 and "APPLIES" in doctor.stdout
