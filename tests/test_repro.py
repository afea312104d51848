"""props.output.repro: reproducer scripts are written, are safe to generate from hostile data, and, run in a
subprocess, reproduce real defects (exit 1) and clear claims that are not real (exit 0)."""

from __future__ import annotations

import ast
import importlib
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
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
from props.output.repro import (
    ADAPTER_DEFAULTS,
    BACKEND_PACKAGES,
    ReproError,
    render_reproducer,
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
        "spec": SpecRef(SpecKind.REGEX, "a|ab", name="a-or-ab"),
        "tokenizer": vocab.name,
        "tokenizer_fingerprint": vocab.fingerprint,
    }
    defaults.update(kw)
    return Finding(Invariant(invariant), backend, **defaults)


def _run(script: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))  # the reference's script imports refdecoder
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _write_and_run(tmp_path: Path, vocab: Vocabulary, f: Finding) -> subprocess.CompletedProcess[str]:
    (out,) = write_reproducers([f], {vocab.fingerprint: vocab}, tmp_path)
    proc = _run(tmp_path / out.repro)
    print(proc.stdout, proc.stderr)
    return proc


def _allowed(mask: np.ndarray, token_id: int) -> bool:
    return bool((int(mask[token_id >> 5]) >> (token_id & 31)) & 1)


def _imports(tree: ast.AST) -> set[str]:
    return {
        ((node.module or "") if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }


# -- files --------------------------------------------------------------------------------------------


def test_files_and_repro_paths(tmp_path: Path, vocab: Vocabulary) -> None:
    fs = [
        _finding(
            vocab,
            "completeness_token",
            "reference",
            prefix_ids=(A,),
            token_id=B,
            token_bytes=b"b",
            backend_verdict="masked",
            reference_verdict="allowed",
            reference_allows=True,
        ),
        _finding(
            vocab,
            "eos",
            "reference",
            prefix_ids=(A,),
            token_id=EOS,
            backend_verdict="eos not offered",
            reference_verdict="eos offered",
            reference_allows=True,
        ),
    ]
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
    imports = _imports(ast.parse(script))
    assert imports - {"refdecoder"} <= set(sys.stdlib_module_names) and "refdecoder" in imports


@pytest.mark.parametrize("backend", sorted(BACKEND_PACKAGES))
def test_rendered_script_is_one_module_without_template_marks(vocab: Vocabulary, backend: str) -> None:
    """A script is the templates with their markers gone: one module that compiles, the data
    assigned once each, one Engine and one Matcher, importing only the engine and the stdlib."""
    f = _finding(vocab, "rollback", backend, certificate={"operations": [["mask"]], "expected": []})
    src = render_reproducer(f, "vocab-x.json")
    for mark in ("@substitute", "@template-only", "@backend"):
        assert mark not in src
    compile(src, f"{f.id}.py", "exec")  # also: ``from __future__`` comes first, once
    tree = ast.parse(src)
    assigned = [
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    ]
    for name in (
        "FINDING",
        "OPTIONS",
        "VOCAB_FILE",
        "REFERENCE_ALLOWS",
        "TOKEN_INVARIANTS",
        "SERVING_INVARIANTS",
    ):
        assert assigned.count(name) == 1, name
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert classes.count("Engine") == 1 and classes.count("Matcher") == 1
    module = BACKEND_PACKAGES[backend][0]
    assert _imports(tree) - {module} <= set(sys.stdlib_module_names) and module in _imports(tree)


def test_common_template_imports_cleanly() -> None:
    """The shared template is a real module (its placeholders are valid values)."""
    common = importlib.import_module("props.output.repro_templates.common")
    assert common.INVARIANT == "" and callable(common.main)


def test_missing_vocabulary_is_a_typed_error(tmp_path: Path, vocab: Vocabulary) -> None:
    f = _finding(vocab, "eos", "reference", token_id=EOS)
    with pytest.raises(ReproError, match="fingerprint"):
        write_reproducers([f], {}, tmp_path)


def test_hostile_spec_is_data_not_code(tmp_path: Path, vocab: Vocabulary) -> None:
    evil = "a'''\"\"\"\\\nimport os; os.system('false')  # \u2028 <script>"
    f = _finding(
        vocab,
        "eos",
        "xgrammar",
        spec=SpecRef(SpecKind.REGEX, evil, name=evil),
        token_id=EOS,
        backend_verdict="eos offered",
        reference_verdict="eos not offered",
        reference_allows=False,
        message=evil,
    )
    src = render_reproducer(f, "vocab-x.json")
    tree = ast.parse(src)
    doc = ast.get_docstring(tree) or ""
    for bad in ('"""', "'''", "\\", "\u2028", "<script", "('false')"):
        assert bad not in doc  # the spec name reaches the docstring only through a safe character set
    # the finding comes back exactly from the embedded literal
    assign = next(
        n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "FINDING"
    )
    assert isinstance(assign.value, ast.Call)
    arg = assign.value.args[0]
    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    assert json.loads(arg.value) == f.to_json()
    assert not any(isinstance(n, ast.Import) and any(a.name == "os" for a in n.names) for n in ast.walk(tree))


def test_reference_allows_is_typed_and_old_findings_read_back() -> None:
    """A finding carries ``reference_allows`` itself; a findings file written before the field
    existed gets it from the verdict words, as the reproducers of that time read them."""
    f = Finding(
        Invariant.SOUNDNESS,
        "x",
        "1",
        SpecRef(SpecKind.REGEX, "a"),
        "t",
        "fp",
        token_id=1,
        backend_verdict="allowed",
        reference_verdict="masked: nothing continues",
        reference_allows=False,
    )
    assert Finding.from_json(f.to_json()).reference_allows is False
    old = {k: v for k, v in f.to_json().items() if k != "reference_allows"}
    for words, want in [
        (("allowed", "masked"), False),
        (("masked", "allowed: 'ab' continues"), True),
        (("eos offered", "eos not offered"), False),
        (("eos not offered", "eos offered"), True),
        (("differs", ""), None),
    ]:
        entry = {**old, "backend_verdict": words[0], "reference_verdict": words[1]}
        assert Finding.from_json(entry).reference_allows is want, words
    assert Finding.from_json({**old, "invariant": "fork"}).reference_allows is None  # not about one token


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


def test_outlines_core_drops_a_continuation_from_an_accepting_state(
    tmp_path: Path, vocab: Vocabulary
) -> None:
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
    f = _finding(
        vocab,
        "completeness_token",
        "outlines-core",
        backend_version=backend.version,
        prefix_ids=(A,),
        token_id=B,
        token_bytes=b"b",
        prefix_bytes=b"a",
        backend_verdict="masked",
        reference_verdict="allowed",
        reference_allows=True,
        message="b is masked after a, though 'ab' matches",
        certificate={"witness": "ab", "witness_ids": [A, B, EOS], "validated_by": "re.fullmatch"},
    )
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 1
    assert "REPRODUCED: " in proc.stdout and "NOT REPRODUCED" not in proc.stdout
    assert "'ab'" in proc.stdout and "[97, 98, 256]" in proc.stdout


def test_reference_claim_that_is_not_real(tmp_path: Path, vocab: Vocabulary) -> None:
    """(b) The reference does allow 'b' after 'a': the claimed masking does not reproduce."""
    f = _finding(
        vocab,
        "completeness_token",
        "reference",
        prefix_ids=(A,),
        token_id=B,
        token_bytes=b"b",
        backend_verdict="masked",
        reference_verdict="allowed",
        reference_allows=True,
        certificate={"witness": "ab", "witness_ids": [A, B, EOS]},
    )
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 0
    assert "NOT REPRODUCED: " in proc.stdout


def test_reference_claim_that_is_real_per_its_own_mask(tmp_path: Path, vocab: Vocabulary) -> None:
    """The same script judges against the recorded reference verdict: a claim that the reference
    should have masked 'b' (it allows it) shows as reproduced — the script really asks the backend."""
    f = _finding(
        vocab,
        "soundness",
        "reference",
        prefix_ids=(A,),
        token_id=B,
        token_bytes=b"b",
        backend_verdict="allowed",
        reference_verdict="masked",
        reference_allows=False,
    )
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 1 and "REPRODUCED: " in proc.stdout


def _rollback_finding(vocab: Vocabulary, backend: str, expected: list[int]) -> Finding:
    ops = [["accept", A], ["fork"], ["accept", B], ["rollback", 1], ["mask"]]
    return _finding(
        vocab,
        "rollback",
        backend,
        spec=SpecRef(SpecKind.REGEX, "a(b|c)d?", name="abcd"),
        message="rollback(1) differs from replay",
        certificate={"operations": ops, "observed": [B], "expected": expected},
    )


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
    spec = SpecRef(
        SpecKind.JSON_SCHEMA,
        {"type": "object", "properties": {"x": {"type": "integer", "minimum": 3}}, "required": ["x"]},
        name="min",
    )
    f = _finding(
        vocab,
        "refusal",
        "outlines-core",
        spec=spec,
        message="minimum ignored",
        certificate={"keyword": "minimum", "invalid_instance": {"x": 1}, "valid_instance": {"x": 3}},
    )
    proc = _write_and_run(tmp_path, vocab, f)
    assert proc.returncode == 1 and "REPRODUCED: the backend accepts the invalid instance" in proc.stdout


def test_an_accept_eos_finding_is_replayed_through_accept(tmp_path: Path, vocab: Vocabulary) -> None:
    """A finding recorded as "accept(EOS) rejected" is judged by accept(EOS), not by the mask's EOS bit:
    on the reference (whose accept takes EOS after "a" in a|ab) it does not reproduce, and says why."""
    f = _finding(
        vocab,
        "eos",
        "reference",
        prefix_ids=(A,),
        token_id=EOS,
        backend_verdict="accept(EOS) rejected",
        reference_verdict="the prefix is in the language",
        reference_allows=True,
        message="claimed: accept(EOS) rejected after 'a'",
    )
    proc = _write_and_run(tmp_path, vocab, f)
    assert "now asking accept(" in proc.stdout, proc.stdout
    assert proc.returncode == 0 and "NOT REPRODUCED" in proc.stdout, proc.stdout
