"""``report.html`` as a person sees it: opened in headless Chromium (the Debian package ``chromium``;
``ci/test.sh`` installs it where apt works, and these tests skip with the reason where it is missing).

Why the plain ``chromium`` command line and not Playwright or a DevTools client: Chromium alone does all
three things needed, with no Python dependency and no browser download. ``--enable-logging=stderr``
prints every console message (script errors, Content-Security-Policy violations) with its source URL;
``--dump-dom`` returns the document after its scripts ran; ``--screenshot`` writes a PNG.

To click, a harness page of the test's own loads the report in an ``<iframe>`` (``--allow-file-access-
from-files`` lets the harness reach into it; the report's own CSP, which forbids all scripts, stays in
force for the report). The harness clicks every in-page link of the report, records where each landed
(the location hash, whether the target exists, whether it is then inside the viewport, whether a
``<details>`` target is open) and writes that as JSON into its DOM, which ``--dump-dom`` hands back.

The screenshot goes to ``$MASKCERT_ARTIFACTS`` (default ``.ci-artifacts/`` in the repository), which CI
keeps as an artifact.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._toys import NoEos

BROWSER = next((p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="chromium is not installed (apt-get install chromium)"
)

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = [
    "Defects",
    "Declared profile",
    "Declared restrictions",
    "Summary matrix",
    "Findings",
    "Refusals",
    "Instances walked",
    "Mask-time statistics",
]
_CONSOLE = re.compile(r':CONSOLE:?\(?\d*\)?\] "(?P<message>.*)", source: (?P<source>\S*)')

HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"><script>
var errors = [];
window.onerror = function (message, source, line) { errors.push(message + " @ " + source + ":" + line); };
function report(out) {
  var pre = document.createElement("pre");
  pre.id = "result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}
function sectionOf(el) {
  var s = el.closest("table") || el;
  while (s && s.tagName !== "H2") s = s.previousElementSibling;
  return s ? s.textContent : "";
}
function run() {
  var frame = document.getElementById("report");
  var doc = frame.contentDocument, win = frame.contentWindow;
  if (!doc) { report({errors: ["the harness cannot reach the report"]}); return; }
  var out = {errors: errors, title: doc.title, sections: [], links: [], svgs: doc.querySelectorAll("svg").length};
  doc.querySelectorAll("h2").forEach(function (h) { out.sections.push(h.textContent); });
  doc.querySelectorAll('a[href^="#"]').forEach(function (a) {
    var href = a.getAttribute("href");
    a.click();
    var target = doc.getElementById(href.slice(1));
    var box = target ? target.getBoundingClientRect() : null;
    out.links.push({
      href: href,
      text: a.textContent,
      section: sectionOf(a),
      hash: win.location.hash,
      exists: !!target,
      visible: !!box && box.bottom > 0 && box.top < win.innerHeight,
      open: !!target && (target.tagName !== "DETAILS" || target.open),
      text_at_target: target ? target.textContent.slice(0, 200) : "",
      certificate: !!target && target.textContent.indexOf("certificate") >= 0
    });
  });
  report(out);
}
</script></head><body>
<iframe id="report" src="REPORT" width="1200" height="800" onload="setTimeout(run, 50)"></iframe>
</body></html>
"""


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    base = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"]
    base += ["--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0"]
    return subprocess.run([*base, *args], capture_output=True, text=True, timeout=timeout, check=False)


def console_messages(stderr: str) -> list[tuple[str, str]]:
    return [(m.group("message"), m.group("source")) for m in _CONSOLE.finditer(stderr)]


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("MASKCERT_ARTIFACTS") or ROOT / ".ci-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small certify report with findings and defects: a toy backend that never offers EOS."""
    import maskcert

    out = tmp_path_factory.mktemp("report")
    report = maskcert.certify(
        NoEos,
        tokenizers=["byte"],
        corpus=[],
        regexes=[r"(ab|cd)+", r"[0-9]{1,3}"],
        examples=2,
        strings=1,
        isolate=False,
        out=out,
        minimize_s=0,
    )
    assert report.findings and report.defects, "the toy backend must give findings and defects"
    return out


def open_in_harness(page: Path) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    harness = page.parent / f"harness-{page.stem}.html"
    harness.write_text(HARNESS.replace("REPORT", page.name), encoding="utf-8")
    proc = chromium(
        "--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom", harness.as_uri()
    )
    match = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"the harness wrote no result (chromium exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(match.group(1))), console_messages(proc.stderr)


def test_report_html_in_chromium(report_dir: Path) -> None:
    page = report_dir / "report.html"
    data = json.loads((report_dir / "report.json").read_text())
    result, console = open_in_harness(page)
    assert result["errors"] == []
    assert [m for m in console if m[1].endswith("report.html")] == [], "the report logged to the console"
    assert [m for m in console if "Uncaught" in m[0]] == []
    assert result["title"].startswith("maskcert certification:")
    for section in SECTIONS:
        assert section in result["sections"], f"section {section!r} missing"
    links = result["links"]
    broken = [link for link in links if not (link["exists"] and link["hash"] == link["href"])]
    assert broken == [], broken
    hidden = [link for link in links if not (link["visible"] and link["open"])]
    assert hidden == [], hidden
    # every finding and every defect is one click away from its certificate
    assert data["findings"] and data["defects"]
    for finding in data["findings"]:
        fid = finding["id"]
        landed = [link for link in links if link["section"] == "Findings" and link["text"] == fid]
        assert landed, f"finding {fid} has no link in the findings table"
        for link in landed:
            assert link["href"] == f"#finding-{fid}" and link["text_at_target"].startswith(f"Finding {fid}")
            assert link["certificate"], f"finding {fid}: no certificate where its link lands"
    for defect in data["defects"]:
        landed = [link for link in links if link["section"] == "Defects" and link["text"] == defect["id"]]
        assert landed, f"defect {defect['id']} has no link"
        for link in landed:
            assert link["href"].removeprefix("#finding-") in defect["findings"]
            assert link["certificate"]
    assert result["svgs"] >= 2  # the per-invariant bars and a mask-time histogram


def test_report_screenshot_is_kept_as_an_artifact(report_dir: Path) -> None:
    shot = artifacts_dir() / "report.png"
    shot.unlink(missing_ok=True)
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,2400", (report_dir / "report.html").as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a real page, not a blank one
    errors = [m for m in console_messages(proc.stderr) if m[1].endswith("report.html")]
    assert errors == []


def test_a_script_error_would_be_seen(tmp_path: Path) -> None:
    """The checks above can fail: a page with a broken link and a CSP violation is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        '</head><body><h2>Findings</h2><a href="#finding-nowhere">x</a>'
        '<img src="https://example.invalid/x.png"><script>undefined_function()</script></body></html>',
        encoding="utf-8",
    )
    result, console = open_in_harness(page)
    assert [link for link in result["links"] if not link["exists"]], "the broken link was not noticed"
    assert [m for m in console if m[1].endswith("bad.html")], "the CSP violation was not logged"
