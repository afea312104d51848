"""Certification: the reference certifies clean; each deliberately broken backend is caught with the
right invariant and a certificate; the report, reproducers and CLI behave."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import maskcert
import tokenizers_matrix as tm
from maskcert.certification import certify, declared_restrictions
from maskcert.cli import main
from props.contract.findings import FAILING, TOKEN_INVARIANTS, Finding, SpecKind, SpecRef
from props.corpus import Case, load_corpus, validate_output
from props.output.report import load_report

from ._toys import TOYS, NeverAccepting, _Toy, _Wrapped

SMALL = [
    Case(SpecRef(SpecKind.REGEX, "a|ab|abc", "prefixes", "test"), valid=("a", "ab", "abc"), invalid=("b",)),
    Case(SpecRef(SpecKind.CHOICE, ["yes", "yesno", "née"], "choices", "test"), valid=("yes", "née")),
    Case(
        SpecRef(
            SpecKind.JSON_SCHEMA,
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}},
                "required": ["a"],
            },
            "object",
            "test",
        ),
        valid=({"a": 1, "b": "é€😀"}, {"a": -20}),
        invalid=({"b": "x"}, {"a": 1, "b": "long"}),
    ),
    Case(
        SpecRef(
            SpecKind.JSON_SCHEMA,
            {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
            "unique",
            "test",
        ),
        valid=([1, 2],),
        invalid=([1, 1],),
    ),
]


@pytest.fixture(scope="module")
def byte() -> tm.Vocabulary:
    return tm.byte_vocabulary()


def _check_certificates(findings: Sequence[Finding]) -> None:
    """Every finding carries the evidence its invariant promises, checked independently here."""
    for f in findings:
        c = f.certificate
        if f.invariant.startswith("completeness") or f.invariant == "utf8":
            witness = c["witness"]
            assert validate_output(f.spec, witness) is None, f
            assert witness.startswith(f.prefix_bytes + (f.token_bytes or b"")), f
        if f.invariant == "soundness" and "completion" in c:
            assert validate_output(f.spec, c["completion"]) is not None, f
        if f.invariant in ("fork", "rollback", "speculative", "jump_forward"):
            assert c["operations"] and "observed" in c and "expected" in c, f
        if f.invariant in TOKEN_INVARIANTS and f.invariant != "liveness":
            # The typed verdict a reproducer replays: the opposite of the backend's mask verdict.
            assert f.reference_allows is not None, f
            if f.backend_verdict in ("allowed", "masked", "EOS offered", "EOS masked"):
                assert f.reference_allows is (f.backend_verdict in ("masked", "EOS masked")), f


def test_reference_certifies_clean_on_the_builtin_corpus_slice() -> None:
    cases = load_corpus("builtin")[::7]
    report = certify("reference", tokenizers=["bpe"], corpus=(), cases=cases, examples=2, strings=2)
    assert report.findings == (), [f.message for f in report.findings]
    assert report.exit_code == 0
    d = report.data
    assert d["specs"]["checked"] >= len(cases) - 2
    assert d["counts"]["soundness"]["bpe"]["checks"] > 100
    assert d["self_check"] == [], d["self_check"]


@pytest.mark.parametrize("invariant", sorted(TOYS))
def test_each_broken_backend_is_caught_with_a_certificate(invariant: str, byte: tm.Vocabulary) -> None:
    cls, _ = TOYS[invariant]
    report = maskcert.certify(cls, tokenizers=[byte], corpus=(), cases=SMALL, examples=4, strings=2)
    found = {f.invariant for f in report.findings}
    assert invariant in found, (invariant, found, [f.message for f in report.findings][:5])
    _check_certificates(report.findings)
    assert report.exit_code == (1 if found & FAILING else 0)
    # Every invariant with findings was checked: the report never says "0 checks, N findings".
    for inv, per_vocab in report.data["counts"].items():
        for name, c in per_vocab.items() if inv != "defects" else ():
            assert c["findings"] == 0 or c["checks"] > 0, (inv, name, c)


def test_report_files_and_reproducers(tmp_path: Path, byte: tm.Vocabulary) -> None:
    cls, _ = TOYS["eos"]
    report = certify(cls, tokenizers=[byte], corpus=(), cases=SMALL[:2], examples=2, out=tmp_path)
    data = load_report(tmp_path / "report.json")
    assert data["exit_code"] == 1 and data["findings"]
    assert data["backend"]["name"] == "toy-NoEos"
    assert {t["fingerprint"] for t in data["tokenizers"]} == {byte.fingerprint}
    for name in ("report.md", "report.html"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert all(f["id"] in text for f in data["findings"])
    assert report.findings[0].invariant == "eos"


def test_the_report_is_a_value_and_writing_returns_the_written_one(
    tmp_path: Path, byte: tm.Vocabulary
) -> None:
    """Issue 27: the report is frozen; report.json is its one serialization (fresh each time, equal to
    the file written); writing returns a new value whose findings carry their reproducers."""
    import dataclasses

    from maskcert.certification import CertifyConfig

    cls, _ = TOYS["eos"]
    config = CertifyConfig(tokenizers=[byte], corpus=(), cases=SMALL[:2], examples=2, minimize_s=0)
    report = certify(cls, config)
    assert config.tokenizers == (byte,) and config.cases == tuple(SMALL[:2])
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.exit_code = 0  # type: ignore[misc]
    assert isinstance(report.findings, tuple) and isinstance(report.defects, tuple)
    report.data["findings"].clear()  # a copy: the report is unchanged
    assert report.data["findings"] and report.exit_code == report.data["exit_code"] == 1
    written = report.write(tmp_path)  # a toy has no reproducer script: its findings keep repro ""
    assert written.repro == {f.id: f.repro for f in written.findings} and report.repro == {}
    assert load_report(tmp_path / "report.json") == json.loads(json.dumps(written.to_json()))
    # The exit code is derived from the fields, never stored: internal errors give 3.
    assert dataclasses.replace(report, internal_errors=("boom",)).exit_code == 3


def test_certify_config_is_checked_once_and_overridden_by_keywords(byte: tm.Vocabulary) -> None:
    from maskcert.certification import CertifyConfig, CertifyError

    with pytest.raises(CertifyError, match="workers=0"):
        CertifyConfig(workers=0)
    with pytest.raises(CertifyError, match="progress="):
        CertifyConfig(progress="loud")
    with pytest.raises(CertifyError, match="resume=True needs out="):
        CertifyConfig(resume=True)
    with pytest.raises(CertifyError, match="workers=0"):
        certify("reference", CertifyConfig(tokenizers=[byte]), workers=0)
    config = CertifyConfig(tokenizers=[byte], corpus=(), cases=SMALL[:1], examples=0, strings=1)
    assert config.run_params("reference", [byte], SMALL[:1]) == {
        "backend": "reference",
        "options": {},
        "vocabularies": [byte.fingerprint],
        "cases": [[SMALL[0].name, SMALL[0].spec.digest]],
        "seed": 0,
        "examples": 0,
        "strings": 1,
    }
    given = certify("reference", config, seed=3)
    assert given.seed == 3 and given.data["seed"] == 3 and config.seed == 0


def test_a_real_defect_reproduces_standalone(tmp_path: Path, byte: tm.Vocabulary) -> None:
    """outlines-core drops a non-accepting continuation from an accepting state (``a|ab`` after
    ``a``): certify finds it, and its reproducer, run alone, shows it."""
    pytest.importorskip("outlines_core")
    case = Case(SpecRef(SpecKind.REGEX, "a|ab", "a-or-ab", "test"), valid=("a", "ab"))
    report = certify("outlines-core", tokenizers=[byte], corpus=(), cases=[case], examples=0, out=tmp_path)
    hits = [f for f in report.findings if f.invariant.startswith("completeness") and f.token_bytes == b"b"]
    assert hits, [f.message for f in report.findings]
    script = tmp_path / hits[0].repro
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "REPRODUCED" in run.stdout, run.stdout + run.stderr


def test_declared_restrictions_are_listed_not_found() -> None:
    pytest.importorskip("xgrammar")
    from props.backends.xgrammar import declared_profile

    listed = {r["option"] for r in declared_restrictions(declared_profile())}
    assert {"property_order", "top_level_whitespace", "additional_properties_default"} <= listed


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--backend", "no_such_module:Backend", "--out", str(tmp_path)]) == 2
    assert "not available" in capsys.readouterr().err
    assert main(["certify", "--tokenizer", "no-such-tokenizer", "--out", str(tmp_path)]) == 2
    assert "expected a matrix name" in capsys.readouterr().err
    assert main(["certify", "--corpus", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2


def test_cli_writes_the_report_and_exits_by_severity(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "boolean"}))
    code = main(
        [
            "certify",
            "--backend",
            TOYS["eos"][1],
            "--tokenizer",
            "byte",
            "--schema",
            str(schema),
            "--examples",
            "1",
            "--in-process",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 1
    assert load_report(tmp_path / "r" / "report.json")["findings"][0]["invariant"] == "eos"
    code = main(
        [
            "certify",
            "--tokenizer",
            "byte",
            "--regex",
            "[ab]{1,3}",
            "--examples",
            "1",
            "--out",
            str(tmp_path / "clean"),
        ]
    )
    assert code == 0


def test_a_maskcert_bug_on_one_case_is_reported_and_the_rest_stands(
    tmp_path: Path, byte: tm.Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    import maskcert.certification as pc

    real = pc.certify_case

    def broken_on_choices(backend: object, case: Case, vocab: object, **kw: object) -> pc.CaseResult:
        if case.name == "choices":
            raise KeyError("a bug in maskcert")
        return real(backend, case, vocab, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(pc, "certify_case", broken_on_choices)
    report = certify(TOYS["eos"][0], tokenizers=[byte], corpus=(), cases=SMALL[:2], examples=1, out=tmp_path)
    assert report.exit_code == 3
    assert (
        len(report.data["internal_errors"]) == 1 and "a bug in maskcert" in report.data["internal_errors"][0]
    )
    assert {f.spec.name for f in report.findings} == {"prefixes"}
    assert load_report(tmp_path / "report.json")["exit_code"] == 3


def test_a_serving_defect_reproduces_with_whole_masks(tmp_path: Path, byte: tm.Vocabulary) -> None:
    """llguidance's rollback across EOS also undoes a text token: the certificate records both whole
    masks, and the reproducer recomputes the backend's and finds exactly the recorded one."""
    pytest.importorskip("llguidance")
    case = Case(SpecRef(SpecKind.REGEX, "a|ab", "a-or-ab", "test"), valid=("ab",))
    report = certify("llguidance", tokenizers=[byte], corpus=(), cases=[case], examples=0, out=tmp_path)
    hits = [f for f in report.findings if f.invariant == "rollback"]
    assert hits, [f.message for f in report.findings]
    run = subprocess.run(
        [sys.executable, str(tmp_path / hits[0].repro)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1 and "(as recorded)" in run.stdout, run.stdout + run.stderr


def test_is_accepting_is_checked_against_the_reference(byte: tm.Vocabulary) -> None:
    report = certify(NeverAccepting, tokenizers=[byte], corpus=(), cases=SMALL[:1], examples=1)
    hits = [f for f in report.findings if f.invariant == "eos" and "is_accepting()" in f.message]
    assert hits and hits[0].certificate["expected"] is True, [f.message for f in report.findings]


class _CrashOnThirdAccept(_Wrapped):
    def accept(self, token_id: int) -> Any:
        if len(self.inner.accepted_ids()) == 2:
            raise RuntimeError("toy engine bug on the third token")
        return self.inner.accept(token_id)


class CrashOnThirdAccept(_Toy):
    """``accept()`` raises on the third token (crash)."""

    matcher_class = _CrashOnThirdAccept


@pytest.mark.parametrize("isolate", [False, True])
def test_a_mask_crash_names_the_prefix_it_came_after(
    tmp_path: Path, byte: tm.Vocabulary, isolate: bool
) -> None:
    """``mask()`` raising after three tokens is a crash finding after exactly those three, with no
    token being accepted: in this process, and in a worker, where the walks fetch the next mask
    with each accept (one round trip) and the failure arrives with the accept."""
    report = certify(
        "tests._toys:CrashAfterThree",
        tokenizers=[byte],
        corpus=(),
        cases=SMALL[:2],
        examples=2,
        isolate=isolate,
        out=tmp_path,
    )
    # (A crash that ends a case outside a walk, e.g. in a serving check, carries no prefix.)
    walked = [f for f in report.findings if f.invariant == "crash" and f.prefix_ids]
    assert walked, [f.message for f in report.findings]
    for f in walked:
        assert len(f.prefix_ids) == 3 and f.token_id is None and f.message.startswith("mask:"), f


def test_an_accept_crash_names_the_prefix_and_the_token(tmp_path: Path, byte: tm.Vocabulary) -> None:
    """A crash finding replays exactly: the ids accepted before it and the token being accepted."""
    report = certify(
        CrashOnThirdAccept, tokenizers=[byte], corpus=(), cases=SMALL[:2], examples=0, out=tmp_path
    )
    crashes = [f for f in report.findings if f.invariant == "crash"]
    assert crashes, [f.message for f in report.findings]
    f = crashes[0]
    assert len(f.prefix_ids) == 2 and f.token_id is not None, f
    assert f.prefix_bytes == byte.decode(list(f.prefix_ids))
    assert f.token_bytes == byte.token_bytes[f.token_id]
