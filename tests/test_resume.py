"""Resumable certify runs: a run killed in the middle continues with ``--resume DIR``
without redoing finished (spec, tokenizer) pairs, and its report equals an uninterrupted run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from maskcert.cli import main

REGEXES = ["a|ab", "[0-9]{2,3}", "x+y?", "(ab)*c", "[a-c]{1,4}d"]
ARGS = [
    "--backend",
    "tests._toys:DiesOnThirdCompile",
    "--tokenizer",
    "byte",
    "--examples",
    "1",
    "--in-process",
]


def _cli(out: Path | None, *extra: str, die: bool = False) -> subprocess.CompletedProcess[str]:
    """``maskcert certify`` in a subprocess: the run's arguments into ``out``, or only ``extra``."""
    argv = [sys.executable, "-c", "import sys; from maskcert.cli import main; sys.exit(main(sys.argv[1:]))"]
    regexes = [x for r in REGEXES for x in ("--regex", r)]
    run = [] if out is None else [*ARGS, *regexes, "--out", str(out)]
    env = {**os.environ, "MASKCERT_TEST_DIE": "1" if die else ""}
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [*argv, "certify", *run, "--minimize-seconds", "0", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=root,
    )


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on an interruption: everything but times and the resume count."""
    drop = {"created", "elapsed_s", "timings", "resumed", "profile"}
    return {k: v for k, v in report.items() if k not in drop}


def test_a_killed_run_resumes_to_the_same_report(tmp_path: Path) -> None:
    whole = _cli(tmp_path / "whole")
    assert whole.returncode == 1, whole.stderr  # NoEos: eos findings
    killed = _cli(tmp_path / "killed", die=True)
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    saved = list((tmp_path / "killed" / "checkpoint" / "results").glob("*.pkl"))
    assert len(saved) == 2  # the two pairs finished before the third compile killed it
    assert not (tmp_path / "killed" / "report.json").exists()

    resumed = _cli(None, "--resume", str(tmp_path / "killed"))
    assert resumed.returncode == 1, resumed.stderr
    assert "resumed: 2 (spec, tokenizer) pairs came from the checkpoint" in resumed.stdout
    a = json.loads((tmp_path / "whole" / "report.json").read_text())
    b = json.loads((tmp_path / "killed" / "report.json").read_text())
    assert b["resumed"] == 2 and a["resumed"] == 0
    assert a["findings"] and _stable(a) == _stable(b)


def test_resume_refuses_other_parameters_and_missing_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["certify", "--resume", str(tmp_path / "nothing")]) == 2
    assert "expected the report directory of a run" in capsys.readouterr().err
    assert main(["certify", "--resume", str(tmp_path), "--seed", "3"]) == 2
    assert "expected no --seed" in capsys.readouterr().err


def test_a_checkpoint_of_another_run_is_not_mixed_in(tmp_path: Path) -> None:
    from maskcert.certification import CertifyError, certify
    from props.contract.findings import SpecKind, SpecRef
    from props.corpus import Case

    from ._toys import NoEos

    case = Case(SpecRef(SpecKind.REGEX, "ab", "ab", "t"), valid=("ab",))
    certify(NoEos, tokenizers=["byte"], corpus=(), cases=[case], examples=0, out=tmp_path, minimize_s=0)
    with pytest.raises(CertifyError, match="other parameters .*seed"):
        certify(
            NoEos, tokenizers=["byte"], corpus=(), cases=[case], examples=0, out=tmp_path, seed=1, resume=True
        )
    again = certify(
        NoEos,
        tokenizers=["byte"],
        corpus=(),
        cases=[case],
        examples=0,
        out=tmp_path,
        minimize_s=0,
        resume=True,
    )
    assert again.data["resumed"] == 1 and again.findings


def test_certify_takes_the_references_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--limit`` reaches the reference's compile in every shard: past it the spec is refused there."""
    argv = [
        "certify",
        "--regex",
        "[a-z]{50}",
        "--tokenizer",
        "byte",
        "--examples",
        "0",
        "--minimize-seconds",
        "0",
    ]
    assert main([*argv, "--out", str(tmp_path / "a"), "--limit", "repeat_bound=10"]) == 0
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["specs"]["refused_by_reference"] == 1
    assert "repeat_bound" in report["refusals"][0]["reason"]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "b" / "report.json").read_text())["specs"]["checked"] == 1
    assert main([*argv, "--out", str(tmp_path / "c"), "--limit", "no_such=1"]) == 2
    assert "--limit" in capsys.readouterr().err
