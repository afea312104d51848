"""Slow engines still get covered (issue 34): ``--compare-at branching`` (and ``auto`` once an engine's
masks prove slow) compares masks only where the language branches, walks the forced steps without
comparing, counts them, and the report says how much time the engine's own calls took."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maskcert.certification import (
    CertifyConfig,
    CertifyError,
    certify,
    certify_case,
    load_vocabularies,
    resolve_backend,
)
from props.checks import invariants
from props.contract.findings import Invariant, SpecKind, SpecRef
from props.corpus import Case

PATTERN = "ab[cd]e"  # forced a, b; a branch between c and d; forced e; the end


def _run(toy: str, compare_at: str) -> tuple[int, set[Invariant]]:
    backend = resolve_backend(f"tests._toys:{toy}", isolate=False)
    vocab = load_vocabularies(["byte"])[0]
    case = Case(SpecRef(SpecKind.REGEX, PATTERN, "forced", "test"))
    result = certify_case(backend, case, vocab, seed=0, examples=0, strings=2, compare_at=compare_at)
    assert result.status == "checked"
    return int(result.instances.get("compare/steps-forced-skipped", 0)), {
        f.invariant for f in result.findings
    }


def test_branching_mode_skips_forced_steps_and_still_finds_defects() -> None:
    skipped_every, found_every = _run("ExtraClosingBrace", "every")
    skipped_branch, found_branch = _run("ExtraClosingBrace", "branching")
    assert skipped_every == 0 and skipped_branch > 0
    # '}' is allowed everywhere: the first step and the branch still show it.
    assert Invariant.SOUNDNESS in found_every and Invariant.SOUNDNESS in found_branch
    # A defect at the end (EOS never offered: an empty mask there) is found: the end is never skipped.
    _, no_eos = _run("NoEos", "branching")
    assert no_eos & {Invariant.EOS, Invariant.LIVENESS}


def test_auto_mode_switches_once_masks_are_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run("ExtraClosingBrace", "auto")[0] == 0  # a toy's masks are fast: every step compared
    monkeypatch.setattr(invariants, "SLOW_MASK_MS", 0.0)
    monkeypatch.setattr(invariants, "SLOW_MASK_SAMPLES", 1)
    assert _run("ExtraClosingBrace", "auto")[0] > 0


def test_report_says_where_the_time_went(tmp_path: Path) -> None:
    certify(
        "tests._toys:ExtraClosingBrace",
        tokenizers=["byte"],
        corpus=(),
        regexes=[PATTERN],
        examples=0,
        compare_at="branching",
        minimize_s=0,
        out=tmp_path,
    )
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "Time: the engine's own calls took" in md and "were walked without comparing masks" in md
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["profile"]["per_spec"] and all(
        "engine_s" in e and "own_s" in e for e in report["profile"]["per_spec"]
    )
    # Times live in the profile, never among the instances (a resumed or sharded run must equal a whole one).
    assert all("engine_s" not in e for e in report["instances"]["per_spec"])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "the engine&#x27;s own calls took" in html or "the engine's own calls took" in html


def test_compare_at_is_checked() -> None:
    with pytest.raises(CertifyError, match="compare_at='sometimes'"):
        CertifyConfig(compare_at="sometimes")
    assert CertifyConfig(compare_at="branching").case_options()["compare_at"] == "branching"
