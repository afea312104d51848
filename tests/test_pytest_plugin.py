"""The pytest plugin (``pytest --maskcert-backend module:Class``) as a backend's CI would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ._data import REPO


def _run(tmp_path: Path, backend: str) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "specs.regex"
    corpus.write_text("a|ab\n[0-9]{1,2}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--maskcert-backend",
            backend,
            "--maskcert-tokenizer",
            "byte",
            "--maskcert-corpus",
            str(corpus),
            "--maskcert-examples",
            "2",
            "--maskcert-in-process",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plugin_passes_the_reference(tmp_path: Path) -> None:
    run = _run(tmp_path, "reference")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


def test_plugin_fails_a_broken_backend_with_the_finding(tmp_path: Path) -> None:
    run = _run(tmp_path, "tests._toys:NoEos")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[eos] does not offer EOS" in run.stdout
    assert "2 failed" in run.stdout


def test_plugin_is_inert_without_its_option(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert True\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
