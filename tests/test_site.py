"""``maskcert site``: the static conformance site built from a toy history (:mod:`tests._history`), checked
on disk (every link of every site page resolves, fragments included; no script, nothing from elsewhere)
and in headless Chromium (as :mod:`tests.test_browser` opens the report): a harness page loads each site
page in an ``<iframe>``, then every link target of it, one after another in a fresh ``<iframe>``, and
records whether it loaded and whether the fragment's element exists."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from maskcert.site import SiteError, SiteResult, build_site, feature_slug
from tests._history import FEATURES, toy_history

BROWSER = next((p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None)
_CONSOLE = re.compile(r':CONSOLE:?\(?\d*\)?\] "(?P<message>.*)", source: (?P<source>\S*)')


class _Page(HTMLParser):
    """What a test needs of a page: hrefs, ids and names, scripts, metas, and the text of each element
    with an id (rows of the defects table) and of each list item (regressions)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.metas: list[dict[str, str]] = []
        self.srcs: list[str] = []
        self.scripts = 0
        self.text_by_id: dict[str, str] = {}
        self.items: list[str] = []
        self._open: list[tuple[str, str | None]] = []  # (tag, id) of elements whose text is collected

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for key in ("id", "name"):
            if key in a and tag != "meta":
                self.ids.add(a[key])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "meta":
            self.metas.append(a)
        if tag == "script":
            self.scripts += 1
        if "src" in a:
            self.srcs.append(a["src"])
        if tag in ("tr", "li"):
            self._open.append((tag, a.get("id")))
            if a.get("id"):
                self.text_by_id[a["id"]] = ""
            if tag == "li":
                self.items.append("")

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for tag, ident in self._open:
            if ident:
                self.text_by_id[ident] += data
            if tag == "li":
                self.items[-1] += data


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SiteResult]:
    """The toy history (0.1.17, 0.1.19 and 0.2.9 of "xgrammar") and the site built from it."""
    root = tmp_path_factory.mktemp("site")
    toy_history(root / "h")
    return root / "h", build_site([root / "h"], root / "out")


def test_pages_exist_for_index_engine_and_each_feature(site: tuple[Path, SiteResult]) -> None:
    _, result = site
    out = result.out
    assert result.engines == ("xgrammar",)
    assert set(result.features) == set(FEATURES)
    expected = {out / "index.html", out / "engines" / "xgrammar.html"}
    expected |= {out / "features" / f"{feature_slug(f)}.html" for f in FEATURES}
    assert expected == set(result.pages)
    assert all(p.is_file() for p in expected)
    assert feature_slug("json_schema/uniqueItems") == "json_schema--uniqueItems"
    # the history is copied whole, without checkpoints, so the site opens from disk
    copy = out / "engines" / "xgrammar"
    assert (copy / "history.json").is_file()
    assert (copy / "releases" / "0.2.9" / "tests._toys:NoBackslash" / "report.html").is_file()
    assert not [p for p in copy.rglob("checkpoint")]


def _target(page: Path, href: str) -> tuple[Path, str]:
    parts = urlsplit(href)
    assert not parts.scheme and not parts.netloc, f"{page.name}: {href!r} is not a relative link"
    path = page if not parts.path else (page.parent / unquote(parts.path))
    return path.resolve(), unquote(parts.fragment)


def test_every_link_resolves_with_its_fragment(site: tuple[Path, SiteResult]) -> None:
    _, result = site
    out = result.out.resolve()
    broken: list[str] = []
    checked = 0
    for page in result.pages:
        for href in parse(page).hrefs:
            target, fragment = _target(page, href)
            checked += 1
            if out not in target.parents:
                broken.append(f"{page.name}: {href} leaves the site")
            elif not target.is_file():
                broken.append(f"{page.name}: {href} -> {target} does not exist")
            elif fragment and fragment not in parse(target).ids:
                broken.append(f"{page.name}: {href} -> no id {fragment!r} in {target.name}")
    assert broken == []
    assert checked > 20


def test_pages_are_self_contained_and_script_free(site: tuple[Path, SiteResult]) -> None:
    _, result = site
    for page in result.pages:
        text = page.read_text(encoding="utf-8")
        parsed = parse(page)
        assert "<script" not in text.lower(), page
        assert "http:" not in text and "https:" not in text, page
        assert parsed.scripts == 0 and parsed.srcs == []
        assert {"charset": "utf-8"} in parsed.metas
        csp = [m["content"] for m in parsed.metas if m.get("http-equiv") == "Content-Security-Policy"]
        assert csp == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"], page
        # a backend directory with ':' is quoted, never read as a URL scheme
        assert not [href for href in parsed.hrefs if urlsplit(href).scheme], page
        assert "index.html" in parsed.hrefs[0], "the nav back to the index comes first"


def test_engine_page_shows_regressions_and_defect_bounds(site: tuple[Path, SiteResult]) -> None:
    history_dir, result = site
    data = json.loads((history_dir / "history.json").read_text(encoding="utf-8"))
    page = result.out / "engines" / "xgrammar.html"
    parsed = parse(page)
    regression = [i for i in parsed.items if "json_schema/uniqueItems" in i and "0.1.17 → 0.1.19" in i]
    assert regression and "exact → unsound" in regression[0]
    assert any(
        href.endswith("#finding-" + r["link"].rpartition("#finding-")[2])
        for r in data["regressions"]
        for href in parsed.hrefs
    )
    assert data["defects"]
    for d in data["defects"]:
        row = parsed.text_by_id[f"defect-{d['id']}"]
        bad = d["first_bad"] + ("" if d["exact_bounds"]["first_bad"] else " or earlier")
        assert bad in row, (d, row)
        assert (d["first_fixed"] or "not yet") in row
    fixed = [d for d in data["defects"] if d["first_fixed"] == "0.2.9"]
    assert fixed and all("0.1.19 or earlier" in parsed.text_by_id[f"defect-{d['id']}"] for d in fixed)
    assert "Releases not sampled: 0.1.18." in page.read_text(encoding="utf-8")


def test_first_release_looked_at_is_said(site: tuple[Path, SiteResult], tmp_path: Path) -> None:
    history_dir, _ = site
    copy = tmp_path / "h"
    shutil.copytree(history_dir, copy)
    data = json.loads((copy / "history.json").read_text(encoding="utf-8"))
    data["defects"][0]["first_bad"] = data["versions"][0]
    # A defect the newest matrix did not show but its reproducer did (history.json "reproduced").
    data["defects"][-1].update(first_fixed=None, reproduced=["0.2.9"])
    (copy / "history.json").write_text(json.dumps(data), encoding="utf-8")
    result = build_site([copy], tmp_path / "out")
    rows = parse(result.out / "engines" / "xgrammar.html").text_by_id
    assert (
        f"{data['versions'][0]} (the first release looked at)" in rows[f"defect-{data['defects'][0]['id']}"]
    )
    assert "not yet (its reproducer still shows it in 0.2.9)" in rows[f"defect-{data['defects'][-1]['id']}"]


def test_reproducers_are_linked_where_a_defect_has_one(site: tuple[Path, SiteResult], tmp_path: Path) -> None:
    history_dir, _ = site
    copy = tmp_path / "h"
    shutil.copytree(history_dir, copy)
    release = copy / "releases" / "0.2.9"
    matrix = json.loads((release / "matrix.json").read_text(encoding="utf-8"))
    backend = "tests._toys:NoBackslash"
    (release / backend / "repro").mkdir()
    (release / backend / "repro" / "D1.py").write_text("print('repro')\n", encoding="utf-8")
    for cell in matrix["cells"]:
        for d in cell["defects"]:
            d["repro"] = f"{backend}/repro/D1.py"
    (release / "matrix.json").write_text(json.dumps(matrix), encoding="utf-8")
    result = build_site([copy], tmp_path / "out")
    for page in result.pages[1:]:  # the engine page and the feature pages
        hrefs = [h for h in parse(page).hrefs if h.endswith("/repro/D1.py")]
        assert hrefs, f"{page.name}: no reproducer link"
        for href in hrefs:
            assert "tests._toys%3ANoBackslash" in href
            assert _target(page, href)[0].is_file()


def test_links_are_paths_never_schemes() -> None:
    from maskcert.site import _data_href

    href = _data_href([], "toys:NoBackslash/report.html#finding-1")
    assert href == "toys%3ANoBackslash/report.html#finding-1" and not urlsplit(href).scheme
    assert _data_href(["..", "engines", "a:b"], "xgrammar==0.2.9/report.html") == (
        "../engines/a%3Ab/xgrammar%3D%3D0.2.9/report.html"
    )
    for outside in ("/etc/passwd", "../h/report.html", "https://example.invalid/x", "C:\\x", ""):
        assert _data_href(["x"], outside) is None, outside


def test_feature_page_puts_the_newest_release_first(site: tuple[Path, SiteResult]) -> None:
    _, result = site
    text = (result.out / "features" / "json_schema--uniqueItems.html").read_text(encoding="utf-8")
    row = text[text.index("../engines/xgrammar.html") :]
    cells = re.findall(r'<td [^>]*class="([^"]+)"[^>]*>([^<]*)<br>', row)
    assert cells[:4] == [
        ("incomplete", "0.2.9"),
        ("exact", "0.1.17"),
        ("unsound", "0.1.19"),
        ("incomplete", "0.2.9"),
    ]


def test_bad_input_raises_typed_errors(site: tuple[Path, SiteResult], tmp_path: Path) -> None:
    history_dir, _ = site
    with pytest.raises(SiteError, match="expected a history directory holding history.json") as e:
        build_site([tmp_path], tmp_path / "out")
    assert isinstance(e.value, ValueError) and e.value.path == tmp_path
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "history.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SiteError, match="garbled.*expected a maskcert history.json"):
        build_site([garbled], tmp_path / "out")
    twin = tmp_path / "twin"
    shutil.copytree(history_dir, twin)
    with pytest.raises(SiteError, match="a second history of xgrammar.*one history per engine"):
        build_site([history_dir, twin], tmp_path / "out")
    with pytest.raises(SiteError, match="expected OUT outside every history directory"):
        build_site([twin], twin / "site")
    assert not (tmp_path / "out").exists(), "nothing is written before every input is checked"


# -- in a real browser ------------------------------------------------------------------------------
HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"><script>
var PAGES = __PAGES__;
var errors = [];
window.onerror = function (message, source, line) { errors.push(message + " @ " + source + ":" + line); };
var out = {errors: errors, pages: []};
function report() {
  var pre = document.createElement("pre");
  pre.id = "result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}
function load(url, then) {
  var old = document.getElementById("frame");
  if (old) old.remove();
  var frame = document.createElement("iframe");
  frame.id = "frame";
  frame.width = 1000; frame.height = 600;
  var done = false;
  function finish() { if (!done) { done = true; then(frame); } }
  frame.onload = function () { setTimeout(finish, 20); };
  setTimeout(finish, 3000);
  frame.src = url;
  document.body.appendChild(frame);
}
function check(frame, url) {
  var doc = null;
  try { doc = frame.contentDocument; } catch (e) { doc = null; }
  var hash = url.indexOf("#") >= 0 ? decodeURIComponent(url.slice(url.indexOf("#") + 1)) : "";
  var loaded = !!doc && !!doc.documentElement && doc.URL.split("#")[0] === url.split("#")[0]
    && doc.URL.indexOf("chrome-error:") !== 0;
  var found = !hash || (loaded && (!!doc.getElementById(hash) || doc.getElementsByName(hash).length > 0));
  return {url: url, loaded: loaded, fragment: hash, found: found, title: loaded ? doc.title : ""};
}
function nextPage(i) {
  if (i >= PAGES.length) { report(); return; }
  load(PAGES[i], function (frame) {
    var page = check(frame, PAGES[i]);
    page.targets = [];
    var seen = {}, urls = [];
    if (page.loaded) {
      frame.contentDocument.querySelectorAll("a[href]").forEach(function (a) {
        if (!seen[a.href]) { seen[a.href] = true; urls.push(a.href); }
      });
    }
    out.pages.push(page);
    (function nextLink(j) {
      if (j >= urls.length) { nextPage(i + 1); return; }
      load(urls[j], function (f) { page.targets.push(check(f, urls[j])); nextLink(j + 1); });
    })(0);
  });
}
window.onload = function () { nextPage(0); };
</script></head><body></body></html>
"""


def _open_in_harness(
    pages: list[Path], where: Path, budget_s: float = 60.0, timeout_s: float = 240.0
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Load ``pages`` in headless chromium through the harness: the pages get ``budget_s`` of virtual
    time; ``timeout_s`` of wall time only guards against a hang. Virtual time pauses while loads are
    pending, so on a loaded 2-core machine the wall time can pass a budget equal to it (a fresh-clone
    run of ci/test.sh was killed at 60 s of wall time with a 60 s budget)."""
    assert BROWSER is not None
    harness = where / "harness.html"
    harness.write_text(
        HARNESS.replace("__PAGES__", json.dumps([p.resolve().as_uri() for p in pages])), encoding="utf-8"
    )
    args = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-dev-shm-usage",
    ]
    args += [
        "--enable-logging=stderr",
        "--v=0",
        "--allow-file-access-from-files",
        f"--virtual-time-budget={int(budget_s * 1000)}",
    ]
    proc = subprocess.run(
        [*args, "--dump-dom", harness.as_uri()],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    match = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"the harness wrote no result (chromium exit {proc.returncode}): {proc.stderr[-2000:]}"
    console = [(m.group("message"), m.group("source")) for m in _CONSOLE.finditer(proc.stderr)]
    return json.loads(html.unescape(match.group(1))), console


@pytest.mark.skipif(BROWSER is None, reason="chromium is not installed (apt-get install chromium)")
def test_site_in_chromium_every_link_loads(site: tuple[Path, SiteResult], tmp_path: Path) -> None:
    _, result = site
    out = result.out
    pages = [
        out / "index.html",
        out / "engines" / "xgrammar.html",
        out / "features" / "json_schema--uniqueItems.html",
    ]
    # A page of broken links shows the harness does notice them.
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><meta charset="utf-8"><a href="missing.html">x</a>'
        f'<a href="{pages[0].resolve().as_uri()}#no-such-id">y</a>',
        encoding="utf-8",
    )
    data, console = _open_in_harness([*pages, bad], tmp_path)
    assert data["errors"] == []
    *site_pages, bad_page = data["pages"]
    assert [p["url"] for p in site_pages] == [p.resolve().as_uri() for p in pages]
    for page in site_pages:
        assert page["loaded"], page
        assert len(page["targets"]) >= 3, page
        broken = [t for t in page["targets"] if not (t["loaded"] and t["found"])]
        assert broken == [], (page["url"], broken)
    engine = site_pages[1]
    assert any(t["fragment"].startswith("finding-") for t in engine["targets"]), (
        "no certificate link was followed"
    )
    assert any(t["fragment"].startswith("defect-") for t in site_pages[2]["targets"])
    flagged = {t["url"].rpartition("/")[2]: t for t in bad_page["targets"]}
    assert not flagged["missing.html"]["loaded"]
    assert not flagged["index.html#no-such-id"]["found"]
    site_console = [
        m for m in console if str(out.resolve().as_uri()) in m[1] or "Content Security Policy" in m[0]
    ]
    assert site_console == [], site_console
    assert [m for m in console if "Uncaught" in m[0]] == []


# -- a site built from real engine histories ---------------------------------------------------------
BUILT = os.environ.get("MASKCERT_SITE")


@pytest.mark.skipif(not BUILT, reason="MASKCERT_SITE=DIR names a site built by `maskcert site` to check")
def test_a_built_site_resolves_on_disk_and_in_chromium(tmp_path: Path) -> None:
    """``MASKCERT_SITE=DIR pytest tests/test_site.py -k built_site``: every link of every page of a
    site built from real engines' histories resolves on disk (fragments included), and in Chromium the
    index and one feature page load with every link they hold."""
    out = Path(str(BUILT)).resolve()
    pages = [
        out / "index.html",
        *sorted((out / "engines").glob("*.html")),
        *sorted((out / "features").glob("*.html")),
    ]
    broken: list[str] = []
    ids: dict[Path, set[str]] = {}
    for page in pages:
        for href in parse(page).hrefs:
            target, fragment = _target(page, href)
            if out not in target.parents or not target.is_file():
                broken.append(f"{page.name}: {href}")
            elif fragment:
                if target not in ids:
                    ids[target] = parse(target).ids
                if fragment not in ids[target]:
                    broken.append(f"{page.name}: {href} (no id {fragment!r})")
    assert broken == []
    if BROWSER is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    feature = out / "features" / "json_schema--minimum.html"
    data, console = _open_in_harness([out / "index.html", feature], tmp_path, budget_s=300.0, timeout_s=900.0)
    assert data["errors"] == []
    for page in data["pages"]:
        assert page["loaded"] and page["targets"], page["url"]
        assert [t for t in page["targets"] if not (t["loaded"] and t["found"])] == []
    assert [m for m in console if "Content Security Policy" in m[0] or "Uncaught" in m[0]] == []
