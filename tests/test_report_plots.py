"""Plots in ``report.html``: inline SVG, no script. The per-invariant bars (checks and findings) and the
mask-time histogram per engine (backend against the reference) are well-formed SVG with the numbers of
the report in them. (How the page looks in a browser: ``tests/test_browser.py``.)"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from props.output.report import invariant_counts, render_html
from tests._toys import NoEos

SVG = re.compile(r"<svg .*?</svg>", re.S)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import maskcert

    out = tmp_path_factory.mktemp("plots")
    maskcert.certify(
        NoEos,
        tokenizers=["byte"],
        corpus=[],
        regexes=[r"(ab|cd)+"],
        examples=2,
        strings=1,
        isolate=False,
        out=out,
        minimize_s=0,
    )
    return json.loads((Path(out) / "report.json").read_text())


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in SVG.findall(page)]  # each must be well-formed XML


def _local(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1]  # with or without the SVG namespace


def _titles(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter() if _local(t) == "title"]


def test_invariant_bars_show_checks_and_findings(report: dict) -> None:
    page = render_html(report)
    assert "<script" not in page
    assert "Checks and findings per invariant" in page
    bars = [s for s in _svgs(page) if s.get("aria-label") == "checks and findings per invariant"]
    assert len(bars) == 1
    titles = _titles(bars[0])
    counts = invariant_counts(report)
    for inv, row in counts.items():
        checks = sum(int(c.get("checks") or 0) for c in row.values() if isinstance(c, dict))
        found = sum(int(c.get("findings") or 0) for c in row.values() if isinstance(c, dict))
        if checks or found:
            assert f"{inv}: {checks} checks" in titles and f"{inv}: {found} findings" in titles
    eos_found = sum(int(c.get("findings") or 0) for c in counts["eos"].values())
    assert eos_found >= 1  # the toy never offers EOS
    widths: dict[str, float] = {}
    for rect in bars[0].iter():
        labels = [t for t in rect if _local(t) == "title"]
        if _local(rect) == "rect" and labels:
            widths[labels[0].text or ""] = float(rect.get("width", 0))
    assert widths[f"eos: {eos_found} findings"] > 0
    assert widths["soundness: 0 findings"] == 0


def test_no_bars_when_nothing_ran(report: dict) -> None:
    empty = {**report, "counts": {}, "findings": [], "timings": {}}
    page = render_html(empty)
    assert "Checks and findings per invariant" not in page


def test_mask_time_histogram_per_engine(report: dict) -> None:
    page = render_html(report)
    histograms = [s for s in _svgs(page) if s.get("aria-label") != "checks and findings per invariant"]
    assert histograms, "no mask-time histogram"
    text = " ".join("".join(s.itertext()) for s in histograms)
    assert "backend (n=" in text and "reference (n=" in text
