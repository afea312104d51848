"""An interrupted run never passes: SIGINT/SIGTERM stop ``certify``, ``matrix`` and ``bisect`` promptly,
the report says it was interrupted, by which signal and what was not finished, the process exits
128 + the signal, nothing is left running, and ``--resume`` finishes the run with the findings an
uninterrupted run has. A run cut short by ``--budget`` says so instead, and ``--require-complete``
fails it with its own exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGEXES = ["a|ab", "[0-9]{2,3}", "x+y?", "(ab)*c", "[a-c]{1,4}d", "q(rs)?t"]
SLOW_TOY = ["--backend", "tests._toys:SlowNoEos", "--tokenizer", "byte", "--examples", "1"]
pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


def _env(tag: str, slow: float) -> dict[str, str]:
    env = {**os.environ, "MASKCERT_TEST_TAG": tag, "MASKCERT_TEST_SLOW": str(slow)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _argv(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from maskcert.cli import main; sys.exit(main(sys.argv[1:]))",
        *args,
    ]


def _certify_args(out: Path, *extra: str) -> list[str]:
    regexes = [x for r in REGEXES for x in ("--regex", r)]
    return ["certify", *SLOW_TOY, *regexes, "--minimize-seconds", "0", "--out", str(out), *extra]


def _run(args: list[str], tag: str, slow: float = 0.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(*args), capture_output=True, text=True, timeout=600, env=_env(tag, slow), cwd=ROOT
    )


def _leftovers(tag: str) -> list[int]:
    """Processes still running that were started by the run tagged ``tag`` (they inherit its
    environment): workers, backend workers, reproducers."""
    marker = f"MASKCERT_TEST_TAG={tag}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _no_leftovers(tag: str) -> None:
    deadline = time.monotonic() + 5  # the kernel delivers the parent-death SIGKILL asynchronously
    while _leftovers(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _leftovers(tag), f"processes left running: {_leftovers(tag)}"


def _checkpointed(out: Path) -> int:
    return len(list((out / "checkpoint" / "results").glob("*.pkl")))


def _interrupt_after(
    args: list[str], tag: str, out: Path, n: int, signals: list[signal.Signals], slow: float = 1.5
) -> tuple[subprocess.Popen[str], str, str, float]:
    """Start the run, wait until ``n`` pairs are checkpointed, send ``signals`` (to the main process
    only, as a runner that knows its pid does), and wait for the end: (process, out, err, seconds)."""
    proc = subprocess.Popen(
        _argv(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tag, slow),
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 240
        while _checkpointed(out) < n and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, f"the run ended before it was interrupted: {proc.communicate()}"
        sent = time.monotonic()
        for s in signals:
            proc.send_signal(s)
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=60)
        return proc, stdout, stderr, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on an interruption: everything but times and the resume count."""
    drop = {"created", "elapsed_s", "timings", "resumed", "profile"}
    return {k: v for k, v in report.items() if k not in drop}


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run the interrupted ones must end up equal to."""
    out = tmp_path_factory.mktemp("whole")
    done = _run(_certify_args(out), uuid.uuid4().hex)
    assert done.returncode == 1, done.stderr  # NoEos: eos findings
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    assert report["complete"] and "incomplete" not in report
    return report


@pytest.mark.parametrize(
    ("sig", "extra"),
    [(signal.SIGTERM, ()), (signal.SIGINT, ("--workers", "2"))],
    ids=["sigterm-one-shard", "sigint-two-workers"],
)
def test_a_signal_stops_certify_and_resume_finishes_it(
    tmp_path: Path, whole: dict[str, Any], sig: signal.Signals, extra: tuple[str, ...]
) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "run"
    proc, stdout, stderr, waited = _interrupt_after(_certify_args(out, *extra), tag, out, 2, [sig])
    assert proc.returncode == 128 + sig, (proc.returncode, stdout, stderr)
    assert waited < 30, f"took {waited:.1f} s to stop"
    _no_leftovers(tag)
    report = json.loads((out / "report.json").read_text())
    assert not report["complete"]
    why = report["incomplete"]
    assert why["interrupted"] == sig.name and not why["budget_spent"] and not why["lost_shards"]
    assert report["exit_code"] == 128 + sig
    done = {(r["spec"], r["tokenizer"]) for r in report["instances"]["per_spec"]}
    unfinished = {(u["spec"], u["tokenizer"]) for u in why["unfinished"]}
    assert unfinished and not (unfinished & done)
    assert len(unfinished) + _checkpointed(out) == len(REGEXES)
    assert f"interrupted by {sig.name}" in (out / "report.md").read_text()
    assert f"interrupted by {sig.name}" in stdout
    assert "budget of" not in (out / "report.md").read_text()  # no budget was given: none is blamed

    resumed = _run(["certify", "--resume", str(out), "--minimize-seconds", "0"], tag)
    assert resumed.returncode == 1, resumed.stderr
    again = json.loads((out / "report.json").read_text())
    assert again["complete"] and "incomplete" not in again and again["resumed"] >= 2
    assert _stable(again) == _stable(whole)
    _no_leftovers(tag)


def test_a_second_signal_ends_certify_at_once(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "run"
    proc, stdout, stderr, waited = _interrupt_after(
        _certify_args(out, "--workers", "2"), tag, out, 1, [signal.SIGINT, signal.SIGTERM], slow=8.0
    )
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, stdout, stderr)
    assert waited < 15, f"took {waited:.1f} s to stop"
    assert "again: stopped at once" in stderr
    _no_leftovers(tag)


def test_a_budget_is_not_an_interruption_and_require_complete_fails_it(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "run"
    cut = _run(_certify_args(out, "--budget", "3"), tag, slow=1.5)
    assert cut.returncode == 1, cut.stderr  # NoEos findings among what was checked still fail
    report = json.loads((out / "report.json").read_text())
    why = report["incomplete"]
    assert not report["complete"] and why["budget_spent"] and why["interrupted"] is None
    assert why["budget_s"] == 3 and why["unfinished"]
    assert "the budget of 3 s spent" in (out / "report.md").read_text()

    clean = tmp_path / "clean"
    args = ["certify", "--tokenizer", "byte", "--examples", "1", "--minimize-seconds", "0"]
    args += [x for r in REGEXES for x in ("--regex", r)]
    ok = _run([*args, "--out", str(clean), "--budget", "0"], tag)
    assert ok.returncode == 0, ok.stderr  # nothing failing among what was checked: the budget's meaning
    strict = _run([*args, "--out", str(clean), "--budget", "0", "--require-complete"], tag)
    assert strict.returncode == 4, strict.stderr
    assert "incomplete" in strict.stderr


def test_a_signal_stops_bisect_and_kills_the_running_reproducer(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    started = tmp_path / "started"
    repro = tmp_path / "repro.py"
    repro.write_text(f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(120)\n")
    driver = (
        "import json, sys\nfrom pathlib import Path\nfrom maskcert.bisect import bisect\n"
        f"r = bisect('xgrammar', Path({str(repro)!r}), ['0.1.0', '0.2.0', '0.3.0'], prepare=lambda v: None)\n"
        "print(json.dumps(r.to_json()))\nsys.exit(0 if r.interrupted is None else 128 + r.interrupted)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tag, 0.0),
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate()
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, (stdout, stderr)
    assert waited < 10, f"took {waited:.1f} s to stop"
    result = json.loads(stdout)
    assert result["interrupted"] == "SIGTERM" and result["runs"] == []  # the one in progress is not a verdict
    _no_leftovers(tag)


MATRIX = ["--feature", "regex/literal", "--feature", "regex/class", "--feature", "regex/alternation"]


def _matrix_args(out: Path) -> list[str]:
    backends = ["--backend", "tests._toys:SlowNoEos", "--backend", "reference"]
    return ["matrix", *backends, "--tokenizer", "byte", *MATRIX, "--out", str(out)]


def _matrix_stable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in {"created", "seconds"}}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_stops_matrix_and_resume_finishes_it(tmp_path: Path, sig: signal.Signals) -> None:
    tag = uuid.uuid4().hex
    whole = tmp_path / "whole"
    done = _run(_matrix_args(whole), tag)
    assert done.returncode == 0, done.stderr  # SlowNoEos withholds EOS: incomplete cells, none unsound
    assert "incomplete" in done.stdout
    out = tmp_path / "run"
    first = out / "tests._toys:SlowNoEos"
    proc, stdout, stderr, waited = _interrupt_after(_matrix_args(out), tag, first, 2, [sig])
    assert proc.returncode == 128 + sig, (proc.returncode, stdout, stderr)
    assert waited < 30, f"took {waited:.1f} s to stop"
    _no_leftovers(tag)
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["interrupted"] == sig.name and matrix["not_run"] == ["reference"]
    assert f"Interrupted by {sig.name}" in (out / "matrix.md").read_text()
    engine = json.loads((first / "report.json").read_text())
    assert engine["incomplete"]["interrupted"] == sig.name and engine["incomplete"]["unfinished"]

    resumed = _run(["matrix", "--resume", str(out)], tag)
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads((out / "matrix.json").read_text())
    assert "interrupted" not in again
    assert _matrix_stable(again) == _matrix_stable(json.loads((whole / "matrix.json").read_text()))
    _no_leftovers(tag)


def test_sigterm_stops_the_main_job_with_143_and_the_unfinished_specs(tmp_path: Path) -> None:
    """The README's main job itself (``maskcert certify`` on the built-in defaults), not a toy: SIGTERM
    mid-run exits 143 with a report that names the signal and the pairs not checked. Its resume to the
    uninterrupted report is the toy tests' (the whole main job takes minutes)."""
    tag = uuid.uuid4().hex
    out = tmp_path / "main"
    proc, stdout, stderr, waited = _interrupt_after(
        ["certify", "--out", str(out)], tag, out, 3, [signal.SIGTERM]
    )
    assert proc.returncode == 143, (stdout, stderr)
    assert waited < 30, f"took {waited:.1f} s to stop"
    _no_leftovers(tag)
    report = json.loads((out / "report.json").read_text())
    assert report["interrupted"] == "SIGTERM" and report["exit_code"] == 143 and not report["complete"]
    why = report["incomplete"]
    assert why["reasons"] == ["interrupted by SIGTERM"] and why["unfinished"]
    from props.corpus import load_corpus

    pairs = 2 * len(list(load_corpus("builtin")))  # two default tokenizers
    assert len(why["unfinished"]) + _checkpointed(out) == pairs
    assert len({(u["spec"], u["tokenizer"]) for u in why["unfinished"]}) == len(why["unfinished"])


_GC_SIGNAL_SCRIPT = """
import gc, os, signal, sys
from maskcert.sharding import Interrupted, abortable, signals

where = sys.argv[1]
armed = [True]

def on_gc(phase, info):
    if phase == "start" and armed and where == "gc":
        armed.clear()
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100))  # Python code in the callback: the handler runs here

gc.callbacks.append(on_gc)
with signals() as flag:
    try:
        with abortable():
            if where == "work":
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(100))
            gc.collect()
            print("work finished", flag(), flush=True)
    except Interrupted as e:
        print("abandoned", e.signum, flush=True)
    try:
        with abortable():
            print("next work ran", flush=True)
    except Interrupted as e:
        print("next work refused", e.signum, flush=True)
"""


@pytest.mark.parametrize("where", ["gc", "work"])
def test_a_signal_inside_a_gc_callback_sets_the_flag_without_a_swallowed_traceback(where: str) -> None:
    """A stop signal that lands in a garbage-collector callback (Hypothesis registers one) must not
    raise there: Python would print "Exception ignored in" with a traceback and drop the exception.
    The flag is set, the work in progress finishes, and the next abortable work is refused. Landing
    in the work itself, the signal abandons it at once, as before."""
    done = subprocess.run(
        [sys.executable, "-c", _GC_SIGNAL_SCRIPT, where],
        env=_env("gc-signal", 0.0),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    first = "work finished True" if where == "gc" else "abandoned 15"
    assert done.stdout.splitlines() == [first, "next work refused 15"], done.stdout
