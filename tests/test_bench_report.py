"""The gathered benchmark report (``maskcert bench all``) on small synthetic part results: no timing;
and ``maskcert bench compile``'s outcomes through the worker process, on a toy backend."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

from maskcert.bench.compile import run_compile_bench
from maskcert.bench.report import PARTS, format_markdown, gather
from props.backends.reference import ReferenceBackend


def _summary(median: float) -> dict[str, float]:
    return {"count": 3, "median_ms": median, "p90_ms": median * 2, "max_ms": median * 3, "mean_ms": median}


def _masks() -> dict:
    result = {
        "vocab": {"name": "tiny", "size": 300, "trie_nodes": 400},
        "schemas": {"total": 4, "compiled": 3, "refused": 1, "refused_by": {}, "errors": 0, "errors_by": {}},
        "walks": 5,
        "reference": {"steps": {"count": 10, "median_ms": 2.0}, "cold": {"count": 2, "median_ms": 8.0}},
        "engines": {
            "xgrammar": {
                "steps": {"count": 10, "median_ms": 0.5},
                "reference_over_engine_median": 4.0,
                "disagreeing_steps": 2,
            },
            "llguidance": {
                "steps": {"count": 10, "median_ms": 1.0},
                "reference_over_engine_median": math.nan,
                "disagreeing_steps": 0,
            },
        },
        "engine_errors": {"outlines-core": "ImportError('no')"},
    }
    return {"tiny": result}


def _compile() -> dict:
    def rec(median: float, compiled: int, **extra: object) -> dict:
        return {
            "compiled": compiled,
            "refused": 0,
            "timeouts": 0,
            "errors": 0,
            "compile": _summary(median),
            "first_mask": _summary(1.0),
            "ready": _summary(median + 1),
            **extra,
        }

    return {
        "vocab": "tiny",
        "schemas": 4,
        "timeout_s": 5.0,
        "reference": rec(30.0, 3),
        "engines": {
            "xgrammar": rec(10.0, 4, ratio_compile=3.0, ratio_ready=2.5, paired=3),
            "outlines-core": rec(3000.0, 1, ratio_compile=0.01, ratio_ready=0.01, paired=1, timeouts=2),
        },
        "unavailable": {"lm-format-enforcer": "not installed"},
    }


def _sampler() -> list[dict]:
    def row(op: str, impl: str, median: float) -> dict:
        return {
            "op": op,
            "impl": impl,
            "batch": 8,
            "vocab": 32000,
            "threads": 1,
            "cold_ms": median,
            "median_ms": median,
            "min_ms": median,
            "ratio": None,
            "ratio_min": None,
        }

    return [
        row("apply_token_bitmask", "maskcert", 0.3),
        row("apply_token_bitmask", "xgrammar", 0.6),
        row("apply_token_bitmask", "llguidance", 0.1),
        row("sample", "maskcert [greedy]", 1.5),
    ]


def _serving() -> dict:
    def rec(tps: float, mask_mean: float) -> dict:
        return {
            "steps": 20,
            "tokens": 100,
            "wall_s": 1.0,
            "steps_per_s": 20.0,
            "tokens_per_s": tps,
            "mask_ms_p50": mask_mean / 2,
            "mask_ms_mean": mask_mean,
            "mask_ms_p95": mask_mean * 2,
            "violations": 0,
        }

    return {
        "requests": 8,
        "seed": 0,
        "reference": rec(100.0, 4.0),
        "engines": {"xgrammar": {**rec(200.0, 1.0), "violations": 3}},
        "unavailable": {},
    }


def _certify() -> dict:
    def backend(median: float, start: float) -> dict:
        return {
            "version": "1",
            "wall_s": 10.0,
            "specs": {"total": 3, "checked": 3},
            "findings": 0,
            "profile": {
                "wall_s": 10.0,
                "setup_s": {"load vocabularies": 1.0, "start backend": start},
                "spec_s": {"median": median, "p95": median * 2, "max": median * 3, "n": 3},
                "phases_s": {"valid walks": 2.0},
            },
        }

    return {
        "tokenizer": "tiny",
        "limit": 3,
        "examples": 2,
        "backends": {"reference": backend(1.0, 0.0), "xgrammar": backend(4.0, 2.0)},
        "unavailable": {"llguidance": "not installed"},
    }


def _row(gathered: dict, part: str, measure: str) -> dict:
    (row,) = [r for r in gathered["rows"] if r["part"] == part and r["measure"] == measure]
    return row


def test_all_parts_gathered_with_ratios() -> None:
    g = gather(
        {
            "masks": _masks(),
            "compile": _compile(),
            "sampler": _sampler(),
            "serving": _serving(),
            "certify": _certify(),
        }
    )
    assert g["status"] == dict.fromkeys(PARTS, "ok")
    assert g["engines"] == ["xgrammar", "llguidance", "outlines-core"]  # in the fixed order, seen ones only

    masks = _row(g, "masks", "mask step, median")
    assert masks["reference"] == 2.0
    assert masks["engines"]["xgrammar"] == {"value": 0.5, "ratio": 4.0}  # the part's paired ratio
    assert masks["engines"]["llguidance"]["ratio"] is None  # NaN never reaches the report

    comp = _row(g, "compile", "compile, median")
    assert comp["engines"]["xgrammar"] == {"value": 10.0, "ratio": 3.0}
    assert comp["engines"]["outlines-core"]["ratio"] == pytest.approx(0.01)

    apply = _row(g, "sampler", "apply_token_bitmask, median")
    assert apply["engines"]["xgrammar"]["ratio"] == pytest.approx(0.5)  # 0.3 / 0.6: maskcert faster
    assert apply["engines"]["llguidance"]["ratio"] == pytest.approx(3.0)

    tps = _row(g, "serving", "throughput")
    assert tps["engines"]["xgrammar"]["ratio"] == pytest.approx(2.0)  # engine / reference for a rate
    mask = _row(g, "serving", "mask per step, mean")
    assert mask["engines"]["xgrammar"]["ratio"] == pytest.approx(4.0)  # reference / engine for a time

    per_spec = _row(g, "certify", "certify per spec, median")
    assert per_spec["reference"] == 1.0 and per_spec["engines"]["xgrammar"] == {"value": 4.0, "ratio": 0.25}
    assert _row(g, "certify", "one-time: backend start")["engines"]["xgrammar"]["value"] == 2.0

    notes = "\n".join(g["notes"])
    assert "outlines-core unavailable" in notes and "lm-format-enforcer unavailable" in notes
    assert "differs from the reference on 2 steps" in notes
    json.dumps(g, allow_nan=False)  # strict JSON


def test_markdown_has_a_ratio_column_per_engine() -> None:
    g = gather(
        {
            "masks": _masks(),
            "compile": _compile(),
            "sampler": _sampler(),
            "serving": _serving(),
            "certify": _certify(),
        }
    )
    md = format_markdown(g)
    header = next(line for line in md.splitlines() if line.startswith("| part | measure"))
    for name in g["engines"]:
        assert f"| {name} | ratio {name} |" in header
    width = header.count("|")
    table = md.split(header)[1].split("Notes:")[0].strip().splitlines()[1:]
    assert len(table) == len(g["rows"])
    assert all(line.count("|") == width for line in table)
    assert "4.00x" in md and "0.50x" in md


@pytest.mark.parametrize("missing", PARTS)
def test_a_missing_part_is_not_run(missing: str) -> None:
    parts = {
        "masks": _masks(),
        "compile": _compile(),
        "sampler": _sampler(),
        "serving": _serving(),
        "certify": _certify(),
    }
    del parts[missing]
    g = gather(parts)
    assert g["status"][missing] == "not run"
    assert not [r for r in g["rows"] if r["part"] == missing]
    assert f"| {missing} | not run |" in format_markdown(g)


def test_skipped_failed_and_unreadable_parts() -> None:
    g = gather(
        {
            "masks": {"skipped": "no schemas"},
            "compile": {"error": "boom"},
            "sampler": None,
            "serving": {"garbage": 1},
        }
    )
    assert g["status"] == {
        "masks": "not run: no schemas",
        "compile": "failed: boom",
        "sampler": "not run",
        "serving": g["status"]["serving"],
        "certify": "not run",
    }
    assert g["status"]["serving"].startswith("failed: unreadable result")
    md = format_markdown(g)
    assert "(no part ran)" in md and g["engines"] == []


def test_reference_only_sampler_has_no_ratio() -> None:
    g = gather({"sampler": [r for r in _sampler() if r["impl"] == "maskcert" or r["op"] == "sample"]})
    assert g["engines"] == []
    assert all(not r["engines"] for r in g["rows"])
    assert "ratio" not in format_markdown(g).split("| part | measure")[1].splitlines()[0]


class HangsOrDies(ReferenceBackend):
    """The reference, except that a schema described ``hang`` hangs and one described ``abort`` aborts."""

    name = "hangs-or-dies"

    def compile(self, spec: Any, vocabulary: Any) -> Any:
        what = spec.schema.get("description") if isinstance(getattr(spec, "schema", None), dict) else None
        if what == "hang":
            time.sleep(3600)
        elif what == "abort":
            os.abort()
        return super().compile(spec, vocabulary)


def test_compile_bench_outcomes_through_the_worker(tmp_path: Path) -> None:
    schemas = {
        "a": {"type": "integer"},
        "b": {"description": "hang"},
        "c": {"type": "string"},
        "d": {"description": "abort"},
        "e": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},  # the reference refuses it
    }
    (tmp_path / "cat").mkdir()
    for name, schema in schemas.items():
        (tmp_path / "cat" / f"{name}.json").write_text(json.dumps({"schema": schema}))
    toy = f"{HangsOrDies.__module__}:HangsOrDies"
    unknown = "maskcert_no_such_module:B"
    result = run_compile_bench("byte", tmp_path, None, backends=[toy, unknown], timeout_s=1.5)

    ref = result["reference"]
    assert {n: r["status"] for n, r in ref["schemas"].items()} == {
        "cat/a": "compiled",
        "cat/b": "compiled",
        "cat/c": "compiled",
        "cat/d": "compiled",
        "cat/e": "refused",
    }
    a = ref["schemas"]["cat/a"]
    assert a["compile_ms"] > 0 and a["first_mask_ms"] > 0
    assert a["ready_ms"] == a["compile_ms"] + a["first_mask_ms"]
    engine = result["engines"][toy]
    assert {n: r["status"] for n, r in engine["schemas"].items()} == {
        "cat/a": "compiled",
        "cat/b": "timeout",
        "cat/c": "compiled",
        "cat/d": "error",
        "cat/e": "refused",
    }
    assert engine["schemas"]["cat/b"]["note"] == "over 1.5s"
    assert engine["schemas"]["cat/d"]["note"].startswith("worker died (exit -6)")  # SIGABRT
    assert (engine["compiled"], engine["timeouts"], engine["errors"], engine["refused"]) == (2, 1, 1, 1)
    assert engine["restarts"] == 2 and engine["paired"] == 2  # a fresh worker after the hang and the abort
    assert "BackendUnavailable" in result["unavailable"][unknown]

    g = gather({"compile": result})
    assert g["status"]["compile"] == "ok"
    assert any("timed out on 1 and raised on 1" in note for note in g["notes"])
