"""``maskcert site OUT``: engines' release histories published as a static conformance site.

Theory of operation. The input is one or more history directories (:func:`maskcert.history.run_history`:
``history.json`` and ``releases/<version>/``, each a matrix directory with the engine's certify report).
Each is copied whole into ``OUT/engines/<engine>/`` (``checkpoint`` directories left out), so every
certificate and reproducer the site links to sits inside ``OUT`` and the site opens from disk. Beside
the copies the site writes its own pages::

    OUT/index.html                  engines (releases run, newest counts, regressions, open defects),
                                    features
    OUT/engines/<engine>.html       the release timeline (feature x release, a colour per status),
                                    regressions, defects with first bad / first fixed release
    OUT/features/<slug>.html        one feature across engines, newest release first

A timeline cell links to the certificate of its first defect (``report.html#finding-...``, read off the
release's ``matrix.json``) and to its reproducer, or to the release's ``matrix.html`` when it has none.

Every page is plain HTML: ``<meta charset="utf-8">``, a Content-Security-Policy that forbids scripts and
anything fetched from elsewhere, only relative links (each path segment URL-quoted, so a backend
directory named ``tests._toys:NoBackslash`` is never read as a URL scheme), and everything taken from the
data HTML-escaped. A link in the data that is not a relative path inside its history is shown as text.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from maskcert.history import engine_cells
from maskcert.matrix import COLOURS, STATUSES
from refdecoder.errors import MaskcertError

__all__ = ["CSP", "SiteError", "SiteResult", "build_site", "feature_slug"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = (
    "body{font-family:sans-serif;margin:1em 2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #bbb;padding:3px 6px;font-size:13px;vertical-align:top}th{text-align:left}"
    "nav{margin-bottom:1em}.legend span{padding:2px 6px;margin-right:4px}"
)
#: Keys a history.json must have for the site to read it.
_HISTORY_KEYS = frozenset(
    {"engine", "versions", "ran", "releases", "features", "cells", "regressions", "defects"}
)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._=+-]")
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class SiteError(MaskcertError, ValueError):
    """Bad ``maskcert site`` input (a directory that is not a history, two histories of one engine, an
    ``OUT`` inside a history), naming the input and what was expected."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)


@dataclass(frozen=True)
class SiteResult:
    """What :func:`build_site` wrote: ``pages`` (the site's own HTML pages, index first), the engines
    and the feature ids it covers."""

    out: Path
    pages: tuple[Path, ...]
    engines: tuple[str, ...]
    features: tuple[str, ...]

    @property
    def index(self) -> Path:
        return self.out / "index.html"


# -- input ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Release:
    """One release run: its directory relative to the history and its matrix cells by feature id."""

    version: str
    dir: str
    counts: Mapping[str, int]
    cells: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class _History:
    source: Path
    data: Mapping[str, Any]
    releases: Mapping[str, _Release]

    @property
    def engine(self) -> str:
        return str(self.data["engine"])

    @property
    def ran(self) -> list[str]:
        return [str(v) for v in self.data["ran"]]


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SiteError(f"{path}: expected {what} ({e})", path=path) from e
    if not isinstance(data, dict):
        raise SiteError(f"{path}: expected {what} (a JSON object, got {type(data).__name__})", path=path)
    return data


def _load_history(source: str | Path) -> _History:
    root = Path(source)
    path = root / "history.json"
    if not path.is_file():
        raise SiteError(
            f"{root}: expected a history directory holding history.json "
            "(written by `maskcert matrix --versions NAME==A..B --out DIR`)",
            path=root,
        )
    data = _read_json(path, "a maskcert history.json")
    missing = sorted(_HISTORY_KEYS - set(data))
    if missing:
        raise SiteError(f"{path}: expected a maskcert history.json; it lacks {', '.join(missing)}", path=path)
    engine = str(data["engine"])
    if not engine or engine in (".", "..") or _SAFE_NAME.search(engine.replace(":", "")):
        raise SiteError(
            f"{path}: engine {engine!r}: expected a name of letters, digits and ._=+-:", path=path
        )
    releases: dict[str, _Release] = {}
    for r in data["releases"]:
        rel = _relative(str(r.get("dir", "")))
        if rel is None:
            raise SiteError(
                f"{path}: release {r.get('version')!r} has dir {r.get('dir')!r}; expected a directory "
                "inside the history",
                path=path,
            )
        matrix = _read_json(root / rel / "matrix.json", "a maskcert matrix.json of the release")
        releases[str(r["version"])] = _Release(
            str(r["version"]), rel, dict(r.get("counts") or {}), engine_cells(matrix)
        )
    return _History(root, data, releases)


def _relative(link: str) -> str | None:
    """``link`` (a path from the data, with a fragment perhaps) when it is a relative path inside its
    directory, None when it is not (absolute, going up with ``..``, with an empty segment as in
    ``https://``, empty). It is read as a path, never as a URL: ``toys:NoBackslash/report.html`` is a
    directory named ``toys:NoBackslash``, and :func:`_href` quotes the ``:``."""
    path = link.partition("#")[0]
    if not path or path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:[\\/]", path):
        return None
    segments = path.split("/")
    if any(s in ("", "..") for s in segments):
        return None
    return link


# -- links ------------------------------------------------------------------------------------------
def _href(*segments: str, fragment: str = "") -> str:
    """A relative href from path segments (each URL-quoted, ``/`` inside a segment splitting it); every
    ``:`` is quoted, so no segment can read as a scheme."""
    parts = [quote(p, safe="") for s in segments for p in s.split("/") if p]
    out = "/".join(parts) or "."
    return out + (f"#{quote(fragment, safe='')}" if fragment else "")


def _data_href(prefix: Sequence[str], link: str | None) -> str | None:
    """A link from the data (relative to a history directory) as an href from a page sitting at
    ``prefix`` relative to that directory's parent; None when the link is not a relative one."""
    rel = _relative(link or "")
    if rel is None:
        return None
    path, _, fragment = rel.partition("#")
    return _href(*prefix, path, fragment=fragment)


def feature_slug(feature: str) -> str:
    """A file name for a feature page: ``json_schema/uniqueItems`` -> ``json_schema--uniqueItems``, any
    character other than letters, digits and ``._-`` as ``-``."""
    slug = _SLUG_UNSAFE.sub("-", feature.replace("/", "--"))
    return slug.lstrip(".") or "feature"


def _slugs(features: Sequence[str]) -> dict[str, str]:
    """Distinct slugs for ``features`` (a numeric suffix where two would collide)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for f in features:
        base = slug = feature_slug(f)
        n = 2
        while slug.lower() in used:  # case-insensitive file systems
            slug = f"{base}-{n}"
            n += 1
        used.add(slug.lower())
        out[f] = slug
    return out


# -- rendering --------------------------------------------------------------------------------------
h = html.escape


def _page(title: str, to_index: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{h(CSP)}">'
        f"<title>{h(title)}</title><style>{_STYLE}</style></head><body>"
        f'<nav><a href="{to_index}">maskcert conformance site</a></nav>'
        f"<h1>{h(title)}</h1>{body}</body></html>\n"
    )


def _a(href: str | None, text: str, title: str = "") -> str:
    if href is None:
        return h(text)
    t = f' title="{h(title)}"' if title else ""
    return f'<a href="{h(href)}"{t}>{h(text)}</a>'


def _legend() -> str:
    return (
        '<p class="legend">'
        + "".join(f'<span style="background:{COLOURS[s]}">{h(s)}</span>' for s in STATUSES)
        + "</p>"
    )


def _qualified_first_bad(hist: Mapping[str, Any], d: Mapping[str, Any]) -> str:
    fb = str(d["first_bad"])
    versions = hist.get("versions") or []
    if versions and fb == versions[0]:
        return f"{fb} (the first release looked at)"
    exact = (d.get("exact_bounds") or {}).get("first_bad", True)
    return fb if exact else f"{fb} or earlier"


def _qualified_first_fixed(d: Mapping[str, Any]) -> str:
    ff = d.get("first_fixed")
    # history.json's "reproduced": releases whose matrix did not show the defect but its reproducer did.
    seen = f" (its reproducer still shows it in {', '.join(d['reproduced'])})" if d.get("reproduced") else ""
    if ff is None:
        return "not yet" + seen
    exact = (d.get("exact_bounds") or {}).get("first_fixed", True)
    return (str(ff) if exact else f"{ff} or earlier") + seen


def _cell(
    hist: _History,
    prefix: Sequence[str],
    timeline_entry: Mapping[str, Any],
    *,
    label: bool,
    defects_page: str,
) -> str:
    """One release's cell of a feature: coloured by status, linked to its first defect's certificate and
    reproducer, or to the release's matrix; each defect id to its row on the engine page (``defects_page``,
    empty on that page). ``prefix`` leads from the page to the history's copy."""
    version = str(timeline_entry["version"])
    status = str(timeline_entry["status"])
    release = hist.releases.get(version)
    links: list[str] = []
    ids = ""
    if release is not None:
        cell = release.cells.get(str(timeline_entry.get("feature", "")))
        defects = list((cell or {}).get("defects") or [])
        base = [*prefix, release.dir]
        if defects:
            first = defects[0]
            links.append(
                _a(_data_href(base, first.get("link")), "certificate", str(first.get("summary", "")))
            )
            if first.get("repro"):
                links.append(_a(_data_href(base, first["repro"]), "reproducer"))
            ids = " ".join(
                _a(
                    f"{defects_page}#defect-{quote(str(d['id']), safe='')}",
                    str(d["id"]),
                    str(d.get("summary", "")),
                )
                for d in defects
            )
            ids = f"<br>defects: {ids}"
        else:
            links.append(_a(_href(*base, "matrix.html"), "matrix"))
    head = f"{h(version)}<br>" if label else ""
    return (
        f'<td style="background:{COLOURS.get(status, "#ffffff")}" class="{h(status)}" '
        f'title="{h(version)}: {h(status)}">{head}<b>{h(status)}</b><br>{" · ".join(links)}{ids}</td>'
    )


def _timeline(hist: _History, feature: str) -> list[dict[str, Any]]:
    """The feature's cells oldest..newest, each with the feature id (for :func:`_cell`)."""
    return [{**t, "feature": feature} for t in (hist.data["cells"].get(feature) or [])]


def _index_page(
    hists: Sequence[_History], features: Mapping[str, Mapping[str, Any]], slugs: Mapping[str, str]
) -> str:
    rows = []
    for hist in hists:
        ran = hist.ran
        newest = hist.data["releases"][-1] if hist.data["releases"] else {}
        counts = newest.get("counts") or {}
        shown = ", ".join(
            f'<span style="background:{COLOURS.get(s, "#fff")};padding:0 4px">{h(s)} {int(counts[s])}</span>'
            for s in STATUSES
            if counts.get(s)
        )
        open_defects = sum(1 for d in hist.data["defects"] if d.get("in_newest"))
        rows.append(
            f"<tr><th>{_a(_href('engines', hist.engine + '.html'), hist.engine)}</th>"
            f"<td>{h(', '.join(ran))}</td><td>{h(str(newest.get('version', '')))}: {shown}</td>"
            f"<td>{len(hist.data['regressions'])}</td><td>{open_defects}</td></tr>"
        )
    feats = "".join(
        f"<li>{_a(_href('features', slugs[fid] + '.html'), fid)} — {h(str(f.get('description', '')))}</li>"
        for fid, f in features.items()
    )
    body = (
        "<h2>Engines</h2><table><tr><th>engine</th><th>releases run (oldest..newest)</th>"
        "<th>newest release</th><th>regressions</th><th>open defects</th></tr>"
        + "".join(rows)
        + "</table>"
        + _legend()
        + f"<h2>Features</h2><ul>{feats}</ul>"
    )
    return _page("maskcert conformance site", "index.html", body)


def _engine_page(hist: _History, slugs: Mapping[str, str]) -> str:
    data = hist.data
    prefix = [hist.engine]  # from OUT/engines/<engine>.html to the history's copy
    ran = hist.ran
    head = "".join(
        f"<th>{_a(_href(*prefix, hist.releases[v].dir, 'matrix.html') if v in hist.releases else None, v)}</th>"
        for v in ran
    )
    rows = []
    for fid in data["cells"]:
        page = _href("..", "features", slugs[fid] + ".html") if fid in slugs else None
        tds = "".join(_cell(hist, prefix, t, label=False, defects_page="") for t in _timeline(hist, fid))
        rows.append(f"<tr><th>{_a(page, fid)}</th>{tds}</tr>")
    parts = [
        f"<p>Distribution <code>{h(str(data.get('distribution') or hist.engine))}</code>; releases run "
        f"(oldest..newest): {h(', '.join(ran))}. "
        + _a(_href(*prefix, "history.json"), "history.json")
        + "</p>"
    ]
    if data.get("interrupted"):
        parts.append(
            f"<p style='background:#fbe3a1;padding:6px'><b>Interrupted by {h(str(data['interrupted']))}</b>: "
            "the history covers the releases finished.</p>"
        )
    skipped = [str(v) for v in data.get("skipped") or []]
    parts.append(
        "<h2 id='timeline'>Release timeline</h2>"
        + _legend()
        + f"<table><tr><th>feature</th>{head}</tr>{''.join(rows)}</table>"
    )
    parts.append(
        "<p>Releases not sampled: " + h(", ".join(skipped)) + ".</p>"
        if skipped
        else "<p>Every release in the span was run.</p>"
    )
    parts.append("<h2 id='regressions'>Regressions</h2>")
    if data["regressions"]:
        items = []
        for r in data["regressions"]:
            new = ", ".join(h(str(d)) for d in r.get("new_defects") or [])
            items.append(
                f"<li><code>{h(str(r['feature']))}</code> {h(str(r['from']))} → {h(str(r['to']))}: "
                f"{h(str(r['before']))} → {h(str(r['after']))}"
                + (f" (new: {new})" if new else "")
                + " — "
                + _a(_data_href(prefix, r.get("link")), "proof")
                + "</li>"
            )
        parts.append(f"<ul>{''.join(items)}</ul>")
    else:
        parts.append("<p>None between the releases run.</p>")
    parts.append("<h2 id='defects'>Defects</h2>")
    if data["defects"]:
        drows = []
        for d in data["defects"]:
            proof = _a(_data_href(prefix, d.get("link")), "certificate")
            repro = _a(_data_href(prefix, d.get("repro")), "reproducer") if d.get("repro") else "—"
            drows.append(
                f"<tr id='defect-{h(str(d['id']))}'><th>{h(str(d['id']))}</th><td>{h(str(d.get('invariant', '')))}</td>"
                f"<td>{h(', '.join(str(f) for f in d.get('features') or []))}</td>"
                f"<td>{h(', '.join(str(v) for v in d.get('present') or []))}</td>"
                f"<td>{h(_qualified_first_bad(data, d))}</td><td>{h(_qualified_first_fixed(d))}</td>"
                f"<td>{h(str(d.get('summary', '')))}</td><td>{proof}</td><td>{repro}</td></tr>"
            )
        parts.append(
            "<table><tr><th>defect</th><th>invariant</th><th>features</th><th>present in</th><th>first bad</th>"
            "<th>first fixed</th><th>summary</th><th>certificate</th><th>reproducer</th></tr>"
            + "".join(drows)
            + "</table>"
        )
    else:
        parts.append("<p>None in the releases run.</p>")
    return _page(f"{hist.engine} across releases", _href("..", "index.html"), "".join(parts))


def _feature_page(feature: Mapping[str, Any], hists: Sequence[_History]) -> str:
    fid = str(feature["id"])
    rows = []
    for hist in hists:
        prefix = ["..", "engines", hist.engine]
        engine = _a(_href("..", "engines", hist.engine + ".html"), hist.engine)
        timeline = _timeline(hist, fid)
        if not timeline:
            rows.append(f"<tr><th>{engine}</th><td colspan='2'>not in this engine's history</td></tr>")
            continue
        page = _href("..", "engines", hist.engine + ".html")
        newest = _cell(hist, prefix, timeline[-1], label=True, defects_page=page)
        every = "".join(_cell(hist, prefix, t, label=True, defects_page=page) for t in timeline)
        rows.append(f"<tr><th>{engine}</th>{newest}{every}</tr>")
    width = max((len(_timeline(x, fid)) for x in hists), default=1)
    body = (
        f"<p>{h(str(feature.get('kind', '')))}: {h(str(feature.get('description', '')))}</p>"
        + _legend()
        + f"<table><tr><th>engine</th><th>newest release</th><th colspan='{width}'>every release run "
        "(oldest..newest)</th></tr>" + "".join(rows) + "</table>"
    )
    return _page(fid, _href("..", "index.html"), body)


# -- the site ---------------------------------------------------------------------------------------
def _inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def build_site(histories: Sequence[str | Path], out: str | Path) -> SiteResult:
    """The static site of ``histories`` (history directories, module doc) written to ``out``: copies of
    the histories under ``out/engines/`` and the site's pages. Every input is read and checked before
    anything is written; a :class:`SiteError` names the input that is not what was expected."""
    if not histories:
        raise SiteError("maskcert site: expected at least one history directory")
    root = Path(out)
    target = root.resolve()
    loaded: list[_History] = []
    by_engine: dict[str, Path] = {}
    for source in histories:
        hist = _load_history(source)
        here = hist.source.resolve()
        if _inside(target, here) or _inside(here, target):
            raise SiteError(
                f"{root}: the site would overlap the history {hist.source}; expected OUT outside every "
                "history directory and no history inside OUT",
                path=root,
            )
        if hist.engine in by_engine:
            raise SiteError(
                f"{hist.source}: a second history of {hist.engine} (the first is {by_engine[hist.engine]}); "
                "expected one history per engine",
                path=hist.source,
            )
        by_engine[hist.engine] = hist.source
        loaded.append(hist)
    features: dict[str, Mapping[str, Any]] = {}
    for hist in loaded:
        for f in hist.data["features"]:
            features.setdefault(str(f["id"]), f)
        for fid in hist.data["cells"]:
            features.setdefault(str(fid), {"id": str(fid), "kind": "", "description": ""})
    slugs = _slugs(list(features))

    (root / "engines").mkdir(parents=True, exist_ok=True)
    (root / "features").mkdir(parents=True, exist_ok=True)
    pages: list[Path] = []

    def write(path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        pages.append(path)

    write(root / "index.html", _index_page(loaded, features, slugs))
    for hist in loaded:
        copy = root / "engines" / hist.engine
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(hist.source, copy, ignore=shutil.ignore_patterns("checkpoint"))
        write(root / "engines" / f"{hist.engine}.html", _engine_page(hist, slugs))
    for fid, f in features.items():
        write(root / "features" / f"{slugs[fid]}.html", _feature_page(f, loaded))
    return SiteResult(root, tuple(pages), tuple(x.engine for x in loaded), tuple(features))
