"""props.output.repro: reproducer scripts are written, are safe to generate from hostile data, and, run in a
subprocess, reproduce real defects (exit 1) and clear claims that are not real (exit 0)."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refdecoder
from props.contract.backend import Compiled
from props.contract.findings import Finding, SpecRef
from props.output.repro import (
    ADAPTER_DEFAULTS,
    ReproError,
    render_reproducer,
    verdict_allows,
    write_reproducers,
)
from refdecoder import Matcher, Regex, TokenGrammar
from tokenizers_matrix import Vocabulary, byte_vocabulary

REPO = Path(__file__).resolve().parent.parent
A, B, EOS = 97, 98, 256


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return byte_vocabulary()


def _finding(vocab: Vocabulary, invariant: str, backend: str, **kw: Any) -> Finding:
    defaults: dict[str, Any] = {
        "backend_version": "test",
        "spec": SpecRef("regex", "a|ab", name="a-or-ab"),
        "tokenizer": vocab.name,
        "tokenizer_fingerprint": vocab.fingerprint,
    }
    defaults.update(kw)
    return Finding(invariant, backend, **defaults)


def _run(script: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))  # the reference's script imports refdecoder
    return subprocess.run(
        [sys.executable, str(script)], cwd=script.parent, capture_output=True, text=True, timeout=timeout, env=env
    )


def _write_and_run(tmp_path: Path, vocab: Vocabulary, f: Finding) -> subprocess.CompletedProcess[str]:
    (out,) = write_reproducers([f], {vocab.fingerprint: vocab}, tmp_path)
    proc = _run(tmp_path / out.repro)
    print(proc.stdout, proc.stderr)
    return proc


def _allowed(mask: np.ndarray, token_id: int) -> bool:
    return bool((int(mask[token_id >> 5]) >> (token_id & 31)) & 1)


# -- files --------------------------------------------------------------------------------------------


def test_files_and_repro_paths(tmp_path: Path, vocab: Vocabulary) -> None:
    fs = [
        _finding(vocab, "completeness_token", "reference", prefix_ids=(A,), token_id=B, token_bytes=b"b",
                 backend_verdict="masked", reference_verdict="allowed"),
        _finding(vocab, "eos", "reference", prefix_ids=(A,), token_id=EOS, backend_verdict="eos not offered",
                 reference_verdict="eos offered"),
    ]  # fmt: skip
    out = write_reproducers(fs, {vocab.fingerprint: vocab}, tmp_path)
    assert [f.repro for f in out] == [f"repro/{f.id}.py" for f in fs]
    assert [f.with_(repro="") for f in out] == fs
    files = sorted(p.name for p in (tmp_path / "repro").iterdir())
    assert files == sorted([f"{fs[0].id}.py", f"{fs[1].id}.py", f"vocab-{vocab.fingerprint[:12]}.json"])
    data = json.loads((tmp_path / "repro" / f"vocab-{vocab.fingerprint[:12]}.json").read_text())
    assert data["name"] == "byte" and data["kind"] == "byte"
    assert data["eos_ids"] == [EOS] and data["special_ids"] == [EOS]
    assert data["token_bytes"][A] == "61" and data["token_bytes"][EOS] is None
    assert len(data["token_bytes"]) == len(vocab)
    script = (tmp_path / out[0].repro).read_text()
    doc = ast.get_docstring(ast.parse(script)) or ""
    assert "completeness_token" in doc and "python3" in doc and "REPRODUCED" in doc
    imports = {
        ((node.module or "") if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(ast.parse(script))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imports - {"refdecoder"} <= set(sys.stdlib_module_names) and "refdecoder" in imports


def test_missing_vocabulary_is_a_typed_error(tmp_path: Path, vocab: Vocabulary) -> None:
    f = _finding(vocab, "eos", "reference", token_id=EOS)
    with pytest.raises(ReproError, match="fingerprint"):
        write_reproducers([f], {}, tmp_path)


def test_hostile_spec_is_data_not_code(tmp_path: Path, vocab: Vocabulary) -> None:
    evil = "a'''\"\"\"\\\nimport os; os.system('false')  # \u2028 <script>"
    f = _finding(vocab, "eos", "xgrammar", spec=SpecRef("regex", evil, name=evil), token_id=EOS,
                 backend_verdict="eos offered", reference_verdict="eos not offered", message=evil)  # fmt: skip
    src = render_reproducer(f, "vocab-x.json")
    tree = ast.parse(src)
    doc = ast.get_docstring(tree) or ""
    for bad in ('"""', "'''", "\\", "\u2028", "<script", "('false')"):
        assert bad not in doc  # the spec name reaches the docstring only through a safe character set
    # the finding comes back exactly from the embedded literal
    assign = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "FINDING")
    assert isinstance(assign.value, ast.Call)
    arg = assign.value.args[0]
    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    assert json.loads(arg.value) == f.to_json()
    assert not any(isinstance(n, ast.Import) and any(a.name == "os" for a in n.names) for n in ast.walk(tree))


def test_verdict_words() -> None:
    for word in ("allowed", "accepted", "eos offered", "offered"):
        assert verdict_allows(word) is True
    for word in ("masked", "rejected", "eos not offered", "not offered", "blocked"):
        assert verdict_allows(word) is False
    assert verdict_allows("") is None and verdict_allows("differs") is None


@pytest.mark.parametrize("backend", sorted(ADAPTER_DEFAULTS))
def test_adapter_defaults_match_the_adapters(backend: str) -> None:
    from props.backends import ADAPTERS

    mod_name, cls_name = ADAPTERS[backend].split(":")
    try:
        mod = __import__(mod_name, fromlist=[cls_name])
    except ImportError as e:
        pytest.skip(f"{backend} not installed: {e}")
    params = inspect.signature(getattr(mod, cls_name).__init__).parameters
    for key, value in ADAPTER_DEFAULTS[backend].items():
        assert params[key].default == value, key


# -- reproducers run ----------------------------------------------------------------------------------


def test_outlines_core_drops_a_continuation_from_an_accepting_state(tmp_path: Path, vocab: Vocabulary) -> None:
    """(a) A real defect: regex a|ab, after 'a' outlines-core masks 'b' though 'ab' is valid."""
    pytest.importorskip("outlines_core")
    from props.backends.outlines_core import OutlinesCoreBackend

    ref = Matcher(TokenGrammar(refdecoder.compile(Regex("a|ab")), vocab))
    assert isinstance(ref.accept(A), refdecoder.Accepted)
    assert _allowed(ref.mask(), B)
    backend = OutlinesCoreBackend()
    compiled = backend.compile(Regex("a|ab"), vocab)
    assert isinstance(compiled, Compiled)
    m = backend.matcher(compiled)
    m.accept(A)
    assert not _allowed(m.mask(), B), "outlines-core no longer shows the known defect"
    f = _finding(vocab, "completeness_token", "outlines-core", backend_version=backend.version, prefix_ids=(A,),
                 token_id=B, token_bytes=b"b", prefix_bytes=b"a", backend_verdict="masked",
                 reference_verdict="allowed", message="b is masked after a, though 'ab' matches",
                 certificate={"witness": "ab", "witness_ids": [A, B, EOS], "validated_by": "re.fullmatch"})  # fmt: skip
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 1
    assert "REPRODUCED: " in proc.stdout and "NOT REPRODUCED" not in proc.stdout
    assert "'ab'" in proc.stdout and "[97, 98, 256]" in proc.stdout


def test_reference_claim_that_is_not_real(tmp_path: Path, vocab: Vocabulary) -> None:
    """(b) The reference does allow 'b' after 'a': the claimed masking does not reproduce."""
    f = _finding(vocab, "completeness_token", "reference", prefix_ids=(A,), token_id=B, token_bytes=b"b",
                 backend_verdict="masked", reference_verdict="allowed",
                 certificate={"witness": "ab", "witness_ids": [A, B, EOS]})  # fmt: skip
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 0
    assert "NOT REPRODUCED: " in proc.stdout


def test_reference_claim_that_is_real_per_its_own_mask(tmp_path: Path, vocab: Vocabulary) -> None:
    """The same script judges against the recorded reference verdict: a claim that the reference
    should have masked 'b' (it allows it) shows as reproduced — the script really asks the backend."""
    f = _finding(vocab, "soundness", "reference", prefix_ids=(A,), token_id=B, token_bytes=b"b",
                 backend_verdict="allowed", reference_verdict="masked")  # fmt: skip
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 1 and "REPRODUCED: " in proc.stdout


def _rollback_finding(vocab: Vocabulary, backend: str, expected: list[int]) -> Finding:
    ops = [["accept", A], ["fork"], ["accept", B], ["rollback", 1], ["mask"]]
    return _finding(vocab, "rollback", backend, spec=SpecRef("regex", "a(b|c)d?", name="abcd"),
                    message="rollback(1) differs from replay", certificate={
                        "operations": ops, "observed": [B], "expected": expected})  # fmt: skip


@pytest.mark.parametrize("backend", ["reference", "xgrammar"])
def test_rollback_ops_not_reproduced(tmp_path: Path, vocab: Vocabulary, backend: str) -> None:
    """(c) Serving ops: after accept a, b, rollback 1, the mask is the mask after a: {b, c}."""
    if backend != "reference":
        pytest.importorskip(backend)
    proc = _write_and_run(tmp_path, vocab, _rollback_finding(vocab, backend, [B, ord("c")]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT REPRODUCED: " in proc.stdout and '["rollback", 1]' in proc.stdout


def test_rollback_ops_compare_for_real(tmp_path: Path, vocab: Vocabulary) -> None:
    """A wrong expectation ({b} only) makes the same replay report a difference."""
    proc = _write_and_run(tmp_path, vocab, _rollback_finding(vocab, "reference", [B]))
    assert proc.returncode == 1 and "REPRODUCED: " in proc.stdout


def test_crash_not_reproduced_runs_in_a_child(tmp_path: Path, vocab: Vocabulary) -> None:
    f = _finding(vocab, "crash", "reference", prefix_ids=(A,), message="claimed crash")
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 0 and "NOT REPRODUCED: the backend ran to the end" in proc.stdout


def test_outlines_core_ignores_minimum(tmp_path: Path, vocab: Vocabulary) -> None:
    """Refusal hygiene, a real finding: outlines-core drops ``minimum`` instead of refusing it."""
    pytest.importorskip("outlines_core")
    spec = SpecRef("json_schema", {"type": "object", "properties": {"x": {"type": "integer", "minimum": 3}},
                                   "required": ["x"]}, name="min")  # fmt: skip
    f = _finding(vocab, "refusal", "outlines-core", spec=spec, message="minimum ignored",
                 certificate={"keyword": "minimum", "invalid_instance": {"x": 1}, "valid_instance": {"x": 3}})  # fmt: skip
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 1 and "REPRODUCED: the backend accepts the invalid instance" in proc.stdout
