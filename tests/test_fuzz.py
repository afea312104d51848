"""``maskcert fuzz`` (maskcert.fuzz): campaigns find a toy backend's defects, keep them in the example
database and findings.jsonl, replay them first, survive SIGTERM, share a database between workers,
run on Ray when it is installed; the real targets catch deliberately broken code; bad options exit 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
import tokenizers_matrix
from maskcert.cli import main as cli_main
from maskcert.fuzz import (
    CampaignConfig,
    FuzzUsageError,
    Property,
    TargetContext,
    parse_budget,
    read_findings,
    run_campaign,
    serving_properties,
)
from props.contract.findings import Finding, FindingFailure, Invariant, SpecKind, SpecRef
from refdecoder import Choice, TokenGrammar
from refdecoder._tokens import unpack_mask

ROOT = Path(__file__).resolve().parents[1]

# -- a deliberately broken toy backend -------------------------------------------------------------
TOY_SPEC = Choice(["yes", "no"])


def bits(tg: TokenGrammar, state: refdecoder.State) -> np.ndarray:
    out = np.zeros(tg.vocab_size, dtype=bool)
    out[unpack_mask(np.asarray(tg.mask(state)), tg.vocab_size)] = True
    return out


def _toy_masks(tg: TokenGrammar, prefix: bytes, state: refdecoder.State) -> np.ndarray:
    """The reference's mask, plus two bugs: ``!`` allowed after ``ye``; EOS offered after ``n``."""
    allowed = bits(tg, state)
    if prefix == b"ye":
        allowed[ord("!")] = True
    if prefix == b"n":
        for e in tg.eos_ids:
            allowed[e] = True
    return allowed


def toy_properties(ctx: TargetContext) -> list[Property]:
    vocab = tokenizers_matrix.get("byte")
    tg = TokenGrammar(refdecoder.compile(TOY_SPEC), vocab)
    ref = SpecRef(SpecKind.CHOICE, list(TOY_SPEC.options), name="yes-no")

    @given(st.lists(st.integers(0, 7), max_size=4))
    def toy_masks_match(choices: list[int]) -> None:
        state, prefix = tg.initial(), b""
        ids: list[int] = []
        for c in [*choices, 0]:
            want = bits(tg, state)
            got = _toy_masks(tg, prefix, state)
            for t in np.flatnonzero(got != want).tolist():
                raise FindingFailure(
                    [
                        Finding(
                            invariant=Invariant.EOS if t in tg.eos_ids else Invariant.SOUNDNESS,
                            backend="toy",
                            backend_version="0",
                            spec=ref,
                            tokenizer=vocab.name,
                            tokenizer_fingerprint=vocab.fingerprint,
                            prefix_ids=tuple(ids),
                            token_id=t,
                            token_bytes=tg.token_bytes(t),
                            backend_verdict="allowed",
                            reference_verdict="masked",
                            message="toy mask allows too much",
                            prefix_bytes=prefix,
                        )
                    ]
                )
            text_ids = [t for t in np.flatnonzero(want).tolist() if t not in tg.eos_ids]
            if not text_ids:
                return
            t = text_ids[c % len(text_ids)]
            nxt = tg.advance(state, t)
            assert nxt is not None
            state, prefix, ids = nxt, prefix + (tg.token_bytes(t) or b""), [*ids, t]

    return [Property("toy/masks", toy_masks_match)]


TOY = "tests.test_fuzz:toy_properties"
TOY_DEFECTS = {("soundness", b"!"), ("eos", None)}


def toy_config(tmp: Path, **kw: object) -> CampaignConfig:
    values: dict[str, object] = {
        "target": TOY,
        "budget_s": 2.0,
        "out_dir": str(tmp / "out"),
        "seed": 1,
        "progress": False,
    }
    values.update(kw)
    return CampaignConfig(**values)  # type: ignore[arg-type]


def lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "a partial last line"
    return text.splitlines()


def defects(findings: list[Finding]) -> set[tuple[str, bytes | None]]:
    return {(f.invariant, f.token_bytes if f.invariant == "soundness" else None) for f in findings}


# -- options -----------------------------------------------------------------------------------------
def test_parse_budget():
    assert parse_budget("90") == 90 and parse_budget("30s") == 30 and parse_budget("10m") == 600
    assert parse_budget("2h") == 7200 and parse_budget("1h30m") == 5400 and parse_budget("250ms") == 0.25
    for bad in ["", "5x", "m", "-3s", "0", "1h 2m", "3s4"]:
        with pytest.raises(FuzzUsageError, match="--budget"):
            parse_budget(bad)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget", "ten"], "--budget"),
        (["--budget", "0s"], "--budget"),
        (["--db", "ftp://host/x"], "--db"),
        (["--db", "redis://"], "--db"),
        (["--db", "redis://host:notaport"], "--db"),
        (["--target", "nope"], "--target"),
        (["--target", "no_such_module_xyz:f"], "--target"),
        (["--target", "tests.test_fuzz:no_such_function"], "--target"),
        (["--workers", "0"], "--workers"),
        (["--target", "serving", "--backend", "no-such-backend"], "no-such-backend"),
    ],
)
def test_bad_options_exit_2(tmp_path, capsys, argv, message):
    assert cli_main(["fuzz", "--target", "reference", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("maskcert fuzz:") and message in err
    assert not (tmp_path / "findings.jsonl").exists()


def test_db_that_is_a_file_exits_2(tmp_path, capsys):
    (tmp_path / "db").write_text("x")
    assert (
        cli_main(["fuzz", "--target", "sampler", "--db", str(tmp_path / "db"), "--out", str(tmp_path)]) == 2
    )
    assert "--db" in capsys.readouterr().err


# -- campaigns -------------------------------------------------------------------------------------
def test_campaign_finds_records_and_replays_first(tmp_path):
    first = run_campaign(toy_config(tmp_path))
    assert defects(first.findings) == TOY_DEFECTS, first.errors
    assert first.replayed == 0 and not first.errors and first.exit_code == 1
    path = first.findings_path
    on_file = [Finding.from_json(json.loads(line)) for line in lines(path)]
    assert sorted(f.id for f in on_file) == sorted(first.new_ids) == sorted(f.id for f in first.findings)
    db = tmp_path / "out" / "hypothesis-db"
    assert any(p.is_file() for p in db.rglob("*")), "no example saved in the database"
    summary = json.loads((tmp_path / "out" / "campaign.json").read_text())
    assert summary["examples"] > 0 and summary["stopped"] == "budget"
    # The findings grouped by root cause: every finding in exactly one defect.
    grouped = [fid for d in summary["defects"] for fid in d["findings"]]
    assert sorted(grouped) == sorted(f.id for f in first.findings) and summary["defects"][0]["signature"]

    second = run_campaign(toy_config(tmp_path, budget_s=1.5, seed=2))
    assert second.replayed >= 1
    assert second.events[0].phase == "reuse", second.events
    replayed = {e.id for e in second.events if e.phase == "reuse"}
    assert replayed <= {f.id for f in first.findings}
    assert second.new_ids == [] and lines(path) == [
        json.dumps(f.to_json(), ensure_ascii=True, sort_keys=True) for f in on_file
    ]
    assert any(e.phase == "explore" for e in second.events) or second.examples > len(replayed), (
        "no exploration"
    )


def test_two_workers_share_one_database(tmp_path):
    result = run_campaign(toy_config(tmp_path, workers=2, budget_s=5.0))
    assert not result.errors, result.errors
    assert result.shards_done == 2
    assert {e.shard for e in result.events} <= {0, 1}
    ids = [json.loads(line)["id"] for line in lines(result.findings_path)]
    assert len(ids) == len(set(ids)), "a finding written twice"
    assert set(ids) == {e.id for e in result.events} == {f.id for f in result.findings}
    assert defects(result.findings) == TOY_DEFECTS
    again = run_campaign(toy_config(tmp_path, workers=2, budget_s=1.5, seed=5))
    assert again.replayed >= 1 and again.new_ids == []
    assert len(lines(result.findings_path)) == len(ids)


def test_sigterm_keeps_every_finding(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "maskcert.cli",
            "fuzz",
            "--target",
            TOY,
            "--budget",
            "120s",
            "--workers",
            "2",
            "--out",
            str(out),
            "--seed",
            "7",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    path = out / "findings.jsonl"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (path.exists() and path.read_text().count("\n") >= 1):
            time.sleep(0.2)
        before = path.read_text().splitlines() if path.exists() else []
        assert before, "no finding within 60 s"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, (stdout, stderr)  # as shells expect
    after = lines(path)
    assert after[: len(before)] == before
    assert all(Finding.from_json(json.loads(line)).id for line in after)
    assert len(read_findings(path)) == len(after)
    summary = json.loads((out / "campaign.json").read_text())
    assert summary["stopped"] == "signal" and summary["signal"] == "SIGTERM"  # not the 120 s budget
    assert {json.loads(line)["id"] for line in before} <= set(summary["findings"])
    assert "stopped by SIGTERM" in stdout


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install 'maskcert[ray]')"
)
def test_ray_campaign_end_to_end(tmp_path):
    result = run_campaign(toy_config(tmp_path, cluster="local", workers=2, budget_s=20.0))
    assert not result.errors, result.errors
    assert result.shards_done == 2
    assert defects(result.findings) == TOY_DEFECTS
    ids = [json.loads(line)["id"] for line in lines(result.findings_path)]
    assert len(ids) == len(set(ids)) and set(ids) == {f.id for f in result.findings}


# -- the real targets catch broken code, and are clean on the real code ------------------------------
def test_sampler_target_catches_a_broken_bitmask(tmp_path, monkeypatch):
    import refdecoder.sampler as sampler

    real = sampler.apply_token_bitmask

    def drops_the_last_word(logits, bitmask, indices=None):
        bm = bitmask.clone()
        if bm.dim() == 2 and bm.shape[1] > 1:
            bm[:, -1] = -1  # every token of the last word allowed
        return real(logits, bm, indices)

    monkeypatch.setattr(sampler, "apply_token_bitmask", drops_the_last_word)
    result = run_campaign(
        CampaignConfig(
            target="sampler",
            budget_s=2.0,
            out_dir=str(tmp_path),
            seed=3,
            progress=False,
            properties=("sampler/apply*",),
        )
    )
    assert {f.invariant for f in result.findings} == {"soundness"}, result.errors
    assert all(
        f.backend == "reference" and f.spec.name == "sampler:apply_token_bitmask" for f in result.findings
    )


def test_reference_masks_catch_a_broken_fast_path(tmp_path, monkeypatch):
    real = TokenGrammar.mask

    def leaky(self, state):
        m = np.array(real(self, state))
        m[0] |= 1 << 5  # token 5 always allowed
        return m

    monkeypatch.setattr(TokenGrammar, "mask", leaky)
    result = run_campaign(
        CampaignConfig(
            target="reference",
            budget_s=3.0,
            out_dir=str(tmp_path),
            seed=3,
            progress=False,
            properties=("reference/masks",),
            tokenizers=("byte",),
        )
    )
    assert result.findings, result.errors
    assert {f.invariant for f in result.findings} <= {"soundness", "eos"}
    assert all(f.token_id == 5 and f.backend == "reference" for f in result.findings)


def test_reference_target_is_clean_and_covers_keywords(tmp_path):
    result = run_campaign(
        CampaignConfig(
            target="reference",
            budget_s=4.5,
            out_dir=str(tmp_path),
            seed=11,
            progress=False,
            properties=("reference/jsonschema", "reference/regex", "reference/gbnf"),
        )
    )
    assert not result.findings and not result.errors, (result.findings, result.errors)
    assert len(result.coverage.get("keyword", {})) >= 5
    assert {"soundness", "completeness_byte"} <= set(result.coverage.get("invariant", {}))
    assert result.property_examples.get("reference/jsonschema", 0) > 0  # round-robin starts there
    assert set(result.property_examples) <= {"reference/jsonschema", "reference/regex", "reference/gbnf"}


def faulty_serving(ctx: TargetContext) -> list[Property]:
    return serving_properties(ctx, faults=("eos_always_allowed",))[:1]


def test_serving_target_catches_an_injected_fault(tmp_path):
    result = run_campaign(
        CampaignConfig(
            target="tests.test_fuzz:faulty_serving",
            budget_s=3.0,
            out_dir=str(tmp_path),
            seed=0,
            progress=False,
        )
    )
    assert "eos" in {f.invariant for f in result.findings}, (result.findings, result.errors)
    assert all("eos_always_allowed" in f.message for f in result.findings)
