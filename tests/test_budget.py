"""A budget is a promise (issue 28): ``certify --budget S`` ends within S plus report writing whatever the
engine does. An engine call still running at the deadline is cut (its worker killed) and becomes a
``limits`` finding naming the call and how long it ran; the report lists the specs not finished, and
nothing is left running. ``--compile-limit`` turns a compile slower than the limit into a ``limits``
finding with its time, and the run goes on with a fresh worker.

The engine is ``tests._toys:Stalls``, the reference with a hang (an hour) or a slow compile on the
specs containing ``MASKCERT_TEST_STALL_ON``, in its worker subprocess, on the byte vocabulary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from maskcert.certification import COMPILE_LIMIT_S, CertifyConfig, CertifyError
from tests.test_interrupt import _no_leftovers

ROOT = Path(__file__).resolve().parent.parent
STALLS = ["--backend", "tests._toys:Stalls", "--tokenizer", "byte", "--examples", "1"]
HANG_S = 3600  # what Stalls sleeps when it hangs
# Generous for a loaded 2-core CI machine (interpreter and worker start-up, report writing), and far
# below the hang.
MARGIN_S = 30.0
pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


def _run(args: list[str], tag: str, stall: str, on: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "MASKCERT_TEST_TAG": tag, "MASKCERT_TEST_STALL": stall, "MASKCERT_TEST_STALL_ON": on}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-c", "import sys; from maskcert.cli import main; sys.exit(main(sys.argv[1:]))"]
    t0 = time.monotonic()
    done = subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=HANG_S / 4, env=env, cwd=ROOT
    )
    return done, time.monotonic() - t0


def _certify(out: Path, regexes: list[str], *extra: str) -> list[str]:
    specs = [x for r in regexes for x in ("--regex", r)]
    return ["certify", *STALLS, *specs, "--minimize-seconds", "0", "--out", str(out), *extra]


def _limits(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["invariant"] == "limits"]


def _unfinished(report: dict[str, Any]) -> set[str]:
    return {u["spec"] for u in report["incomplete"]["unfinished"]}


@pytest.mark.parametrize("workers", ["1", "2"], ids=["in-one-shard", "two-workers"])
def test_a_hanging_compile_ends_on_the_budget_with_a_limits_finding(tmp_path: Path, workers: str) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "run"
    budget = 5.0
    regexes = ["zz[0-9]", "a|ab", "x+y?", "q(rs)?t"]  # the first one hangs in compile
    args = _certify(out, regexes, "--budget", str(budget), "--workers", workers)
    done, took = _run(args, tag, "compile", "zz")
    assert took < budget + MARGIN_S < HANG_S, f"took {took:.1f} s on a budget of {budget} s"
    assert done.returncode == 0, done.stderr  # a limits finding does not fail a run; the budget's meaning
    _no_leftovers(tag)  # the hung worker was killed, and every other child ended

    report = json.loads((out / "report.json").read_text())
    assert not report["complete"] and report["exit_code"] == 0
    why = report["incomplete"]
    assert why["budget_spent"] and why["budget_s"] == budget and why["interrupted"] is None
    assert "regex:zz[0-9]" in _unfinished(report)  # cut: reported, but not finished (resume redoes it)
    saved = out / "checkpoint" / "results"
    checkpointed = len(list(saved.iterdir())) if saved.exists() else 0
    assert checkpointed == len(regexes) - len(_unfinished(report))  # the cut pair is not among them
    [cut] = [f for f in _limits(report) if f["spec"]["source"] == "zz[0-9]"]
    cert = cut["certificate"]
    assert cert["operation"] == "compile" and cert["limit"] == "budget" and cert["run_budget_s"] == budget
    assert 0 < cert["seconds"] <= budget + MARGIN_S  # the time the compile ran until it was cut
    assert "compile" in cut["message"] and "budget" in cut["message"]
    md = (out / "report.md").read_text()
    assert "the budget of 5 s spent" in md and "zz[0-9]" in md
    # Every spec is accounted for: checked before the deadline, or listed as not finished.
    checked = {r["spec"] for r in report["instances"]["per_spec"] if r["spec"] != "regex:zz[0-9]"}
    assert checked | _unfinished(report) == {f"regex:{r}" for r in regexes}

    # The engine fixed (no stall): --resume checks what the budget left, the cut spec included.
    resumed, _ = _run(["certify", "--resume", str(out), "--minimize-seconds", "0"], tag, "", "")
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads((out / "report.json").read_text())
    assert again["complete"] and not again["findings"] and again["resumed"] == checkpointed
    _no_leftovers(tag)


@pytest.mark.parametrize("stall", ["mask", "mask@30"], ids=["first-mask", "deep-in-the-checks"])
def test_a_hanging_mask_is_cut_and_the_pairs_before_it_stand(tmp_path: Path, stall: str) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "run"
    budget = 8.0
    regexes = ["a|ab", "x+y?", "q(rs)?t"]  # the second one hangs in its first (or 30th) mask
    done, took = _run(_certify(out, regexes, "--budget", str(budget)), tag, stall, "x+")
    assert took < budget + MARGIN_S, f"took {took:.1f} s on a budget of {budget} s"
    assert done.returncode == 0, done.stderr
    _no_leftovers(tag)
    report = json.loads((out / "report.json").read_text())
    [cut] = _limits(report)
    assert cut["spec"]["source"] == "x+y?" and cut["certificate"]["operation"] == "mask"
    assert cut["certificate"]["seconds"] > 0
    assert _unfinished(report) == {"regex:x+y?", "regex:q(rs)?t"}  # a|ab was checked before the hang
    assert len(list((out / "checkpoint" / "results").iterdir())) == 1


def test_a_compile_slower_than_the_limit_is_a_limits_finding_and_the_run_goes_on(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "run"
    slow, limit = 20.0, 1.5  # the compile would finish after 20 s; the limit kills it at 1.5 s
    regexes = ["a|ab", "x+y?", "q(rs)?t"]
    done, took = _run(_certify(out, regexes, "--compile-limit", str(limit)), tag, str(slow), "x+")
    assert done.returncode == 0, done.stderr
    assert took < slow, f"took {took:.1f} s: the slow compile was waited for"
    _no_leftovers(tag)
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] and "incomplete" not in report  # the run went on past the slow spec
    [f] = _limits(report)
    assert f["spec"]["source"] == "x+y?"
    cert = f["certificate"]
    assert cert["operation"] == "compile" and cert["limit"] == "compile_limit" and cert["limit_s"] == limit
    assert limit <= cert["seconds"] < slow  # its time: how long it ran before the worker was killed
    assert "compile limit of 1.5 s" in f["message"]
    assert report["specs"]["checked"] == 2 and report["specs"]["failed"] == 1  # a fresh worker for the rest


def test_a_worker_cuts_a_call_at_its_deadline_and_none_runs_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import tokenizers_matrix as tm
    from props.backends.worker import DEADLINE_GRACE_S, DeadlineReached, WorkerBackend
    from refdecoder import Regex

    monkeypatch.setenv("MASKCERT_TEST_STALL", "compile")
    monkeypatch.setenv("MASKCERT_TEST_STALL_ON", "zz")
    vocab = tm.resolve("byte")
    with WorkerBackend("tests._toys:Stalls", compile_timeout_s=HANG_S) as w:
        w.compile(Regex("ab"), vocab)  # before the deadline: as ever
        w.deadline = time.monotonic() + 1.0
        t0 = time.monotonic()
        with pytest.raises(DeadlineReached) as cut:
            w.compile(Regex("zz"), vocab)
        took = time.monotonic() - t0
        assert cut.value.operation == "compile" and cut.value.kind == "limits"
        assert cut.value.seconds is not None and 1.0 <= cut.value.seconds <= took < 1.0 + DEADLINE_GRACE_S + 5
        assert not w.alive  # the hung worker was killed
        with pytest.raises(DeadlineReached) as after:  # nothing is sent, no worker is started
            w.compile(Regex("ab"), vocab)
        assert after.value.seconds is None and not w.alive
        w.deadline = None
        w.compile(Regex("ab"), vocab)  # without a deadline a fresh worker serves again
        assert w.alive


def test_budget_and_compile_limit_are_checked_when_the_config_is_built(tmp_path: Path) -> None:
    assert CertifyConfig().compile_limit_s == COMPILE_LIMIT_S == 10.0
    for bad in ({"compile_limit_s": 0}, {"compile_limit_s": float("inf")}, {"budget_s": -1.0}):
        with pytest.raises(CertifyError, match="expected a finite number of seconds"):
            CertifyConfig(**bad)
    assert CertifyConfig(budget_s=0).budget_s == 0  # a zero budget is allowed: nothing is checked
    args = ["certify", "--backend", "tests._toys:Stalls", "--in-process", "--budget", "5", "--regex", "a"]
    done, _ = _run([*args, "--out", str(tmp_path / "r")], uuid.uuid4().hex, "", "")
    assert done.returncode == 2 and "cannot be cut when the budget ends" in done.stderr
    assert not (tmp_path / "r").exists()  # a usage error starts nothing
