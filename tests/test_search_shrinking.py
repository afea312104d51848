"""Certify's Hypothesis searches record a failure as first met, and shrink it only when asked
(``shrink_searches``): each defect is minimized once after the checks either way."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase

import maskcert.certification as certification
from maskcert.cli import main
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case

CASES = [
    Case(
        SpecRef(SpecKind.JSON_SCHEMA, {"type": "object", "properties": {"a": {"type": "integer"}}}, "o", "t")
    )
]
KW: dict[str, Any] = {"tokenizers": ["byte"], "corpus": (), "cases": CASES, "examples": 4, "minimize_s": 0}


def test_search_settings_shrink_only_when_asked() -> None:
    assert Phase.shrink not in certification._search_settings(8).phases
    assert Phase.shrink in certification._search_settings(8, shrink=True).phases
    assert Phase.generate in certification._search_settings(8).phases


@pytest.mark.parametrize("shrink", [False, True])
def test_every_search_runs_as_configured_and_finds_the_toy_defect(
    shrink: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bool] = []
    run_search = certification._run_search

    def spy(prop: Any, examples: int, seed: int, t: Any, shrink: bool = False) -> Any:
        asked.append(shrink)
        return run_search(prop, examples, seed, t, shrink)

    monkeypatch.setattr(certification, "_run_search", spy)
    report = certification.certify("tests._toys:ExtraClosingBrace", shrink_searches=shrink, **KW)
    assert asked == [shrink] * 3  # valid walks, adversarial, stateful
    assert {d["invariant"] for d in report.data["defects"]} >= {"soundness"}


def test_a_run_that_shrinks_is_another_run_for_resume() -> None:
    config = certification.CertifyConfig(**KW)
    plain = config.run_params("reference", [], CASES)
    assert "shrink_searches" not in plain
    assert config.case_options()["shrink_searches"] is False
    shrinking = certification.CertifyConfig(**KW, shrink_searches=True)
    assert shrinking.run_params("reference", [], CASES)["shrink_searches"] is True


def test_resume_refuses_a_new_shrink_flag(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--resume", str(tmp_path), "--shrink-searches"]) == 2
    assert "--shrink-searches" in capsys.readouterr().err
