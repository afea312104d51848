"""props.output.report: report.json round trip, Markdown/HTML rendering of hostile data, histograms, typed
errors for files that are not maskcert reports."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import props.output.report as report_mod
from props.contract.findings import INVARIANTS, Finding, Invariant, SpecKind, SpecRef
from props.output.report import (
    HISTOGRAM_EDGES_MS,
    REPORT_FIELDS,
    ReportError,
    histogram,
    load_report,
    render_html,
    render_markdown,
    write_report,
)
from refdecoder.errors import MaskcertError

HOSTILE = "<script>alert('x')</script>"


def _findings() -> list[Finding]:
    spec = SpecRef(SpecKind.REGEX, f"a|ab|{HOSTILE}", name=f"evil{HOSTILE}", corpus="builtin")
    schema = SpecRef(
        SpecKind.JSON_SCHEMA, {"type": "string", "pattern": HOSTILE, "description": "| x | ``` y"}, name="s1"
    )
    return [
        Finding(
            Invariant.COMPLETENESS_TOKEN,
            "outlines-core",
            "0.2.14",
            spec,
            "byte",
            "f" * 64,
            (97,),
            98,
            b"b",
            "masked",
            "allowed",
            "token b is masked after a",
            {"witness": "ab", "witness_ids": [97, 98, 256], "validated_by": "re.fullmatch"},
            prefix_bytes=b"a",
            walk="canonical",
            repro="repro/x.py",
        ),
        Finding(
            Invariant.SOUNDNESS,
            "outlines-core",
            "0.2.14",
            schema,
            "byte",
            "f" * 64,
            (34,),
            60,
            b"<script>",
            "allowed",
            "masked",
            f"token {HOSTILE} allowed",
            {"completion": b'<script>\xff"', "validator_error": f"{HOSTILE} does not match"},
        ),
        Finding(
            Invariant.ROLLBACK,
            "outlines-core",
            "0.2.14",
            spec,
            "byte",
            "f" * 64,
            (),
            None,
            None,
            "",
            "",
            "rollback differs",
            {
                "operations": [["accept", 97], ["rollback", 1], ["mask"]],
                "observed": [256],
                "expected": [97, 256],
            },
        ),
    ]


def _report(findings: list[Finding] | None = None) -> dict[str, Any]:
    fs = _findings() if findings is None else findings
    counts: dict[str, Any] = {inv: {"byte": {"checks": 10, "findings": 0}} for inv in INVARIANTS}
    counts["soundness"]["byte"] = {"checks": 10, "findings": 1}
    counts["completeness_token"]["byte"] = {"checks": 10, "findings": 1}
    counts["rollback"]["byte"] = {"checks": 3, "findings": 1}
    del counts["limits"]["byte"]
    counts["crash"]["byte"] = {"checks": 0, "findings": 0}
    return {
        "schema_version": 1,
        "tool": {"name": "maskcert", "version": "0.1.0"},
        "created": "2025-01-01T00:00:00+00:00",
        "backend": {
            "name": "outlines-core",
            "version": "0.2.14",
            "profile": {
                "json": {
                    "whitespace": 1,
                    "property_order": "schema",
                    "additional_properties_default": False,
                    "allow_duplicate_keys": True,
                    "unicode_escapes": False,
                    "formats": "assert",
                },
                "canonical_tokenization_only": False,
                "notes": [f"note with {HOSTILE}"],
            },
            "declared_restrictions": [
                {
                    "option": "whitespace_pattern",
                    "value": "[ \\t\\n\\r]?",
                    "default": "[ ]?",
                    "meaning": "at most one whitespace character",
                },
            ],
        },
        "tokenizers": [
            {"name": "byte", "kind": "byte", "size": 257, "fingerprint": "f" * 64, "eos_ids": [256]}
        ],
        "corpus": [{"name": "builtin", "specs": 3}],
        "budget_s": 60.0,
        "seed": 0,
        "elapsed_s": 1.5,
        "complete": True,
        "specs": {
            "total": 3,
            "checked": 2,
            "refused_by_backend": 1,
            "refused_by_reference": 0,
            "refused_by_both": 0,
        },
        "counts": counts,
        "findings": [f.to_json() for f in fs],
        "refusals": [{"spec": "g1", "tokenizer": "byte", "side": "backend", "reason": f"</td>{HOSTILE}"}],
        "timings": {
            "byte": {
                "backend_mask_ms": histogram([0.02, 0.05, 0.3, 1.0]),
                "reference_mask_ms": histogram([0.5, 2.0, 3.0]),
                "backend_compile_ms": histogram([10.0]),
            }
        },
        "exit_code": 1,
    }


def _outside_fences(md: str) -> str:
    return re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", md)


def test_round_trip(tmp_path: Path) -> None:
    rep = _report()
    paths = write_report(rep, tmp_path / "out")
    assert set(paths) == {"json", "md", "html"}
    assert all(p.exists() for p in paths.values())
    loaded = load_report(paths["json"])
    assert loaded == json.loads(json.dumps(rep))
    assert [Finding.from_json(d).to_json() for d in loaded["findings"]] == [f.to_json() for f in _findings()]
    # stable: writing the loaded report again gives the same bytes
    again = write_report(loaded, tmp_path / "again")
    assert again["json"].read_bytes() == paths["json"].read_bytes()
    assert again["md"].read_text() == paths["md"].read_text()


def test_every_finding_appears_and_data_is_escaped(tmp_path: Path) -> None:
    rep = _report()
    paths = write_report(rep, tmp_path)
    md = paths["md"].read_text(encoding="utf-8")
    page = paths["html"].read_text(encoding="utf-8")
    for f in rep["findings"]:
        assert f["id"] in md and f["id"] in page
    assert "<script" not in page.lower()
    assert "&lt;script&gt;" in page
    assert "</td><script" not in page
    assert "<script" not in _outside_fences(md).lower()
    # the spec source is shown, inside a fence longer than the backticks it contains
    assert HOSTILE in md and "````" in md
    assert "b'<script>'" not in page and "b&#x27;&lt;script&gt;&#x27;" in page


def test_markdown_sections_and_matrix() -> None:
    md = render_markdown(_report())
    assert md.startswith("# maskcert certification: outlines-core 0.2.14")
    for heading in (
        "## Declared profile",
        "## Declared restrictions",
        "## Summary matrix",
        "## Findings",
        "## Refusals",
        "## Mask-time statistics",
    ):
        assert heading in md
    assert "not defects" in md
    assert "Exit code 1" in md and "1 critical" in md and "1 medium" in md and "1 serving" in md
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "✗ 1 findings" in rows["soundness"]
    assert "✓ 10 checks" in rows["eos"]
    assert "–" in rows["limits"] and "–" in rows["crash"]
    plain = md.replace("\\[", "[").replace("\\]", "]").replace("\\_", "_")
    assert "**witness**: 'ab'" in plain and "**witness_ids**: [97, 98, 256]" in plain
    assert '**validator_error**: "&lt;script&gt;' in plain
    assert '1. ["accept", 97]' in plain and '3. ["mask"]' in plain


def test_html_self_contained_with_histograms() -> None:
    page = render_html(_report())
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page and "backend (n=4" in page and "reference (n=3" in page
    assert 'class="fail"' in page and 'class="pass"' in page and 'class="none"' in page
    for bad in ("<script", "<link", " src=", "@import", "url("):
        assert bad not in page.lower()
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]


def test_write_rejects_non_json_values(tmp_path: Path) -> None:
    rep = _report()
    rep["corpus"] = [{"name": "x", "specs": b"bytes"}]
    with pytest.raises(ReportError, match="JSON values"):
        write_report(rep, tmp_path)
    assert not (tmp_path / "report.json").exists()


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "readable"),
        ("{not json", "JSON"),
        ('{"schema_version": 1, "tool": {"name": "other"}}', "maskcert report"),
        ("[1, 2]", "maskcert report"),
        ("__drop_seed__", "every report field"),
        ("__bad_finding__", "findings[0]"),
        ("__future__", "schema_version"),
    ],
)
def test_bad_file_is_a_typed_error(tmp_path: Path, content: str | None, expected: str) -> None:
    path = tmp_path / "report.json"
    if content == "__drop_seed__":
        rep = _report()
        del rep["seed"]
        content = json.dumps(rep)
    elif content == "__bad_finding__":
        rep = _report()
        rep["findings"][0] = {"invariant": "nonsense"}
        content = json.dumps(rep)
    elif content == "__future__":
        rep = _report()
        rep["schema_version"] = 99
        content = json.dumps(rep)
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ReportError) as info:
        load_report(path)
    err = info.value
    assert isinstance(err, MaskcertError) and isinstance(err, ValueError)
    assert err.path == str(path) and str(path) in str(err)
    assert expected in str(err)


def test_schema_is_documented() -> None:
    doc = report_mod.__doc__ or ""
    for key in REPORT_FIELDS:
        assert f"``{key}``" in doc
    assert set(REPORT_FIELDS) == set(_report())


# -- histogram ----------------------------------------------------------------------------------------


def test_histogram_edges_and_empty() -> None:
    edges = list(HISTOGRAM_EDGES_MS)
    assert edges[0] == 0.01 and edges[-1] == 10_000.0
    assert all(a < b for a, b in zip(edges, edges[1:]))
    ratios = [b / a for a, b in zip(edges, edges[1:])]
    assert max(ratios) / min(ratios) < 1.0001  # log-spaced
    h = histogram([])
    assert h == {"edges": edges, "counts": [0] * (len(edges) - 1), "p50": 0.0, "p99": 0.0, "max": 0.0, "n": 0}
    with pytest.raises(ReportError):
        histogram([1.0, math.nan])


@given(st.lists(st.floats(min_value=0.0, max_value=1e7, allow_nan=False), max_size=200))
def test_histogram_properties(samples: list[float]) -> None:
    h = histogram(samples)
    edges, counts = h["edges"], h["counts"]
    assert len(counts) == len(edges) - 1
    assert sum(counts) == h["n"] == len(samples)
    if samples:
        ordered = sorted(samples)
        assert h["max"] == ordered[-1]
        assert ordered[0] <= h["p50"] <= h["p99"] <= h["max"]
        assert h["p50"] in samples and h["p99"] in samples
        assert sum(1 for s in samples if s <= h["p50"]) >= len(samples) / 2
        # every in-range sample is counted in the bin whose edges hold it
        for i in range(len(counts)):
            lo, hi = edges[i], edges[i + 1]
            inside = sum(1 for s in samples if lo <= s < hi)
            if i == 0:
                inside += sum(1 for s in samples if s < lo)
            if i == len(counts) - 1:
                inside += sum(1 for s in samples if s >= hi)
            assert counts[i] == inside
    json.dumps(h, allow_nan=False)
