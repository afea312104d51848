"""Conformance over an engine's releases: ``maskcert matrix --versions`` and ``maskcert matrix --diff``.

Theory of operation. A release's feature matrix is :func:`maskcert.matrix.run_matrix` on
``NAME==VERSION`` (the engine installed into the engine cache, :mod:`props.backends.engines`; the
user's environment is untouched). A history run keeps one matrix per release under
``ROOT/releases/<version>/`` and beside it ``release.json``, the key that makes the matrix reusable::

    {"engine", "version", "maskcert", "checks", "tokenizer", "features", "seed", "complete"}

``maskcert`` is the installed distribution's version and ``checks`` a digest of the reference and the
checking library's sources (``refdecoder``, ``props``, ``tokenizers_matrix``: what decides a verdict);
``features`` a digest of the selected probes (every spec and labelled instance). A later run reuses a
release's matrix when its key is equal and the matrix is complete; an interrupted one is continued from
its checkpoint (``--resume`` per release), anything else is run again. So a history run is resumable
(stop it, run the same command again) and sharded like certify (``--shard K/N`` runs every N-th
release; the shards write disjoint release directories, and a last run without ``--shard`` reuses all of
them and writes the history).

The releases are the engine's releases on the package index inside the adapter's tested range and the
span ``A..B`` (:func:`maskcert.bisect.versions_between`); ``--sample N`` keeps N of them spread evenly,
always the first and the newest.

What a history says (``history.json``, rendered as ``history.md``)::

    {"history_version": 1, "engine", "distribution", "span", "versions": [...],   # oldest first
     "skipped": [version],            # releases in the span not sampled
     "releases": [{"version", "dir", "reused", "seconds", "complete", "counts": {status: n}}],
     "features": [{"id", "kind", "description"}],
     "cells": {feature: [{"version", "status", "defects": [id]}]},        # one entry per release
     "regressions": [{"feature", "from", "to", "before", "after", "new_defects": [id], "link"}],
     "defects": [{"id", "invariant", "summary", "features", "present": [version], "in_newest",
                  "first_bad", "first_fixed", "exact_bounds", "bisect"?, "reproduced"?, "link", "repro"}],
     "bisect"?: {"budget_s", "spent_s", "bisected", "reused", "not_bisected": {why: n}},
     "interrupted"?: signal name}

* A **regression** is a cell that gets worse from one release run to the next: an ``exact`` cell that
  is not any more (a defect status, ``refused``, ``crash`` or ``limits``), or a checked cell that gains
  a kind of wrong (``incomplete`` that becomes unsound, anything that starts crashing):
  :func:`is_regression`. A cell that was ``refused`` or crashed had nothing checked, so what shows
  after it is newly checked, not a regression; new defect signatures in a cell already wrong the same
  way are listed with it but are not a regression either. ``not_run``, ``internal_error`` and
  ``not_decided`` are not verdicts on the engine and never count.
* A **defect** is a signature (:func:`props.checks.defects.signature`; its id depends on the signature
  alone, so it is the same defect in every release). ``first_bad`` is the first release showing it and
  ``first_fixed`` the first release after its last appearance that does not (None while the newest
  still shows it). Both are read off the releases run; where releases between two run ones were not
  sampled, the defect's reproducer is bisected over them (:func:`maskcert.bisect.bisect`, once per
  signature and transition) and ``exact_bounds`` says whether each bound is exact: a release run, or
  a bisection that found the adjacent pair. A matrix that does not show a defect has not proved it
  fixed (its walks may have certified other signatures first): where the reproducer still shows it in
  the release the matrices called fixed (or before the one they called first), the bound moves and
  ``reproduced`` lists those releases.

``diff(A, B)`` compares two matrices cell by cell (the same feature ids): each changed cell with both
statuses, the defects that appeared (with the proof in B's report) and disappeared (with the proof in
A's), and whether it is a regression; ``maskcert matrix --diff`` exits 1 when one is.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maskcert.matrix import MatrixError, run_matrix, select_features
from maskcert.sharding import signal_name, signals
from props.corpus.features import Feature

__all__ = [
    "HistoryError",
    "History",
    "Diff",
    "choose_versions",
    "sample_versions",
    "release_key",
    "run_release",
    "run_history",
    "build_history",
    "diff",
    "diff_releases",
    "is_regression",
    "load_matrix",
    "engine_cells",
]

#: Statuses that are not a verdict on the engine: a change to or from them is never a regression.
NOT_VERDICTS = frozenset({"not_run", "internal_error", "not_decided"})


class HistoryError(MatrixError):
    """Bad ``--versions`` / ``--diff`` input (a range with no release, a matrix that is not one),
    naming it and what was expected."""


# -- which releases ---------------------------------------------------------------------------------
def sample_versions(versions: Sequence[str], n: int | None) -> list[str]:
    """``n`` of ``versions`` (oldest first) spread evenly, always the first and the newest; all of
    them when ``n`` is None or at least their number."""
    if n is not None and n < 2:
        raise HistoryError(f"--sample {n}: expected at least 2 (the first and the newest release)")
    vs = list(versions)
    if n is None or n >= len(vs):
        return vs
    picks = sorted({round(i * (len(vs) - 1) / (n - 1)) for i in range(n)})
    return [vs[i] for i in picks]


def choose_versions(
    name: str,
    span: str | None,
    *,
    released: Sequence[str] | None = None,
) -> tuple[str, list[str]]:
    """The registered engine ``name``'s distribution and its releases inside the adapter's tested range
    and ``span`` (``A..B``, either end open), oldest first; ``released`` instead of asking the index."""
    from maskcert.bisect import versions_between
    from props.backends import REGISTRY, engines

    info = REGISTRY.get(name)
    if info is None or info.name == "reference":
        known = ", ".join(n for n in REGISTRY if n != "reference")
        raise HistoryError(f"--versions {name}: expected a registered engine ({known})")
    if released is None:
        released = engines.released_versions(info.distribution)
    versions = versions_between(released, info.tested, span)
    if not versions:
        raise HistoryError(
            f"--versions {name}=={span or ''}: no release of {info.distribution} lies in that span and in "
            f"the adapter's tested range {info.tested!r}; expected e.g. {name}=={info.tested.split(',')[0].lstrip('>=~')}.."
        )
    return info.distribution, versions


def parse_versions_arg(text: str) -> tuple[str, str | None]:
    """``NAME==A..B`` (or ``NAME``, ``NAME==A..``, ``NAME==..B``) -> (NAME, span)."""
    name, sep, span = text.partition("==")
    if not name.strip() or (sep and not span.strip()):
        raise HistoryError(f"--versions {text!r}: expected NAME==A..B (e.g. xgrammar==0.1.17..0.2.9) or NAME")
    return name.strip(), (span.strip() or None) if sep else None


# -- one release ------------------------------------------------------------------------------------
_CHECK_PACKAGES = ("refdecoder", "props", "tokenizers_matrix")
_checks_digest: str | None = None


def checks_digest() -> str:
    """A digest of the sources that decide a verdict (module doc): two runs with equal digests judge
    an engine release the same way."""
    global _checks_digest  # computed once per process: the sources do not change under a running maskcert
    if _checks_digest is None:
        import importlib

        h = hashlib.sha256()
        for pkg in _CHECK_PACKAGES:
            root = Path(importlib.import_module(pkg).__file__ or "").parent
            for path in sorted(root.rglob("*")):
                if path.is_file() and path.suffix in (".py", ".json", ".txt", ".gbnf", ".lark"):
                    h.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
                    h.update(path.read_bytes())
        _checks_digest = h.hexdigest()[:16]
    return _checks_digest


def features_digest(features: Sequence[Feature]) -> str:
    """A digest of the probes of ``features``: every spec (its digest) and labelled instance."""
    h = hashlib.sha256()
    for f in features:
        for c in f.probes:
            h.update(
                json.dumps(
                    [f.id, c.spec.digest, list(c.valid), list(c.invalid)], default=repr, sort_keys=True
                ).encode()
            )
    return h.hexdigest()[:16]


def _maskcert_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("maskcert")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def release_key(
    name: str, version: str, *, tokenizer: str, features: Sequence[Feature], seed: int
) -> dict[str, Any]:
    """``release.json``'s key without ``complete`` (module doc)."""
    return {
        "engine": name,
        "version": version,
        "maskcert": _maskcert_version(),
        "checks": checks_digest(),
        "tokenizer": tokenizer,
        "features": features_digest(features),
        "seed": seed,
    }


def load_matrix(path: str | Path) -> dict[str, Any]:
    """A ``matrix.json`` (or the directory holding one), checked for the fields a history reads."""
    p = Path(path)
    if p.is_dir():
        p = p / "matrix.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise HistoryError(f"{p}: expected a maskcert matrix.json ({e})") from e
    if not isinstance(data, dict) or not {"engines", "cells", "features"} <= set(data):
        raise HistoryError(f"{p}: expected a maskcert matrix.json with engines, features and cells")
    return data


@dataclass(frozen=True)
class ReleaseRun:
    """One release's matrix: ``data`` is its matrix.json, ``dir`` where it is, ``reused`` whether an
    earlier run's matrix was taken as it was."""

    version: str
    dir: Path
    data: dict[str, Any]
    reused: bool

    @property
    def complete(self) -> bool:
        return not self.data.get("interrupted") and all(e.get("complete", True) for e in self.data["engines"])


def run_release(
    name: str,
    version: str,
    where: str | Path,
    *,
    tokenizer: str = "bpe",
    features: Sequence[str] = (),
    seed: int = 0,
    budget_s: float | None = None,
    progress: bool = False,
    backend: str | None = None,
) -> ReleaseRun:
    """The matrix of ``name==version`` in ``where``: reused when ``where/release.json`` holds the same
    key and the matrix is complete, continued from its checkpoint when an earlier run was stopped,
    run afresh otherwise (module doc). ``backend`` is what certify is given (``NAME==VERSION`` unless
    a test stands a toy backend in for a release)."""
    where = Path(where)
    backend = backend or f"{name}=={version}"
    key = {
        **release_key(name, version, tokenizer=tokenizer, features=select_features(features), seed=seed),
        "backend": backend,
    }
    saved = where / "release.json"
    old: dict[str, Any] = {}
    if saved.is_file():
        try:
            old = json.loads(saved.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            old = {}  # a torn write of an earlier run: run again
    same = isinstance(old, dict) and {k: old.get(k) for k in key} == key
    if same and old.get("complete") and (where / "matrix.json").is_file():
        return ReleaseRun(version, where, load_matrix(where), True)
    if not same and where.exists():
        shutil.rmtree(where)  # a matrix of other checks, probes or release: not ours to continue
    where.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({**key, "complete": False}, indent=1) + "\n", encoding="utf-8")
    resume = same and (where / backend / "checkpoint" / "run.json").exists()
    m = run_matrix(
        [backend],
        tokenizer=tokenizer,
        features=features,
        out=where,
        budget_s=budget_s,
        seed=seed,
        progress=progress,
        resume=resume,
    )
    run = ReleaseRun(version, where, m.data, False)
    saved.write_text(json.dumps({**key, "complete": run.complete}, indent=1) + "\n", encoding="utf-8")
    return run


# -- regressions and diffs ----------------------------------------------------------------------------
def _defect_ids(cell: Mapping[str, Any] | None) -> set[str]:
    return {str(d["id"]) for d in (cell or {}).get("defects", [])}


#: The kinds of wrong a checked cell can show; a regression is a cell that gains one.
_WRONG: dict[str, frozenset[str]] = {
    "exact": frozenset(),
    "unsound": frozenset({"unsound"}),
    "incomplete": frozenset({"incomplete"}),
    "unsound+incomplete": frozenset({"unsound", "incomplete"}),
    "limits": frozenset({"limits"}),
}
#: Statuses that hid the engine's verdict (nothing was checked): what shows after them is newly
#: checked, not a regression.
_HIDDEN = frozenset({"refused", "crash"})


def is_regression(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> bool:
    """Whether a cell got worse from ``before`` to ``after`` (module doc): an ``exact`` cell that is no
    longer exact (a defect, a crash, a refusal: the feature is gone), or a checked cell that gains a
    kind of wrong (``incomplete`` that becomes unsound, anything that starts crashing). Never when
    either side is not a verdict, nor from ``refused`` or ``crash`` (nothing was checked there: what
    shows now was hidden, the feature is newly checked). A new defect signature in a cell already
    wrong the same way is listed but is no regression: which signatures a walk certifies first varies
    with everything before it."""
    if before is None or after is None:
        return False
    b, a = str(before["status"]), str(after["status"])
    if b in NOT_VERDICTS or a in NOT_VERDICTS or b in _HIDDEN:
        return False
    if b == "exact":
        return a != "exact"
    if a == "crash":
        return True
    return bool(_WRONG.get(a, frozenset()) - _WRONG[b])


def engine_cells(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """feature id -> cell of a one-engine matrix (the first engine's when it has several)."""
    engines = list(dict.fromkeys(c["engine"] for c in data["cells"]))
    if not engines:
        return {}
    return {c["feature"]: dict(c) for c in data["cells"] if c["engine"] == engines[0]}


def _label(data: Mapping[str, Any]) -> str:
    e = data["engines"][0] if data["engines"] else {"name": "?", "version": "?"}
    return f"{e.get('name')}=={e.get('version')}"


@dataclass
class Diff:
    """Two matrices compared cell by cell: ``data`` is diff.json's content (see :func:`diff`)."""

    data: dict[str, Any]

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [c for c in self.data["changed"] if c["regression"]]

    def write(self, out: str | Path) -> dict[str, Path]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "diff.json", "md": out / "diff.md"}
        paths["json"].write_text(json.dumps(self.data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        paths["md"].write_text(render_diff_markdown(self.data), encoding="utf-8")
        return paths


def diff(a: Mapping[str, Any], b: Mapping[str, Any], *, a_base: str = "", b_base: str = "") -> Diff:
    """Matrix ``a`` (the release pinned now) against ``b`` (the candidate), cell by cell over the
    features both have. ``a_base``/``b_base`` prefix each matrix's links (where its directory is,
    relative to where the diff is written). diff.json::

        {"a": "NAME==A", "b": "NAME==B", "features": n, "unchanged": n, "only_in_a": [id], "only_in_b": [id],
         "changed": [{"feature", "before", "after", "regression",
                      "new_defects": [defect with link/repro into B], "gone_defects": [... into A]}],
         "regressions": n}
    """
    ca, cb = engine_cells(a), engine_cells(b)
    if not ca or not cb:
        raise HistoryError(f"--diff {_label(a)} {_label(b)}: expected two matrices with cells")

    def linked(d: Mapping[str, Any], base: str) -> dict[str, Any]:
        out = dict(d)
        for k in ("link", "repro"):
            if out.get(k):
                out[k] = f"{base}{out[k]}"
        return out

    changed = []
    unchanged = 0
    for fid in [f for f in ca if f in cb]:
        before, after = ca[fid], cb[fid]
        new = _defect_ids(after) - _defect_ids(before)
        gone = _defect_ids(before) - _defect_ids(after)
        if before["status"] == after["status"] and not new and not gone:
            unchanged += 1
            continue
        changed.append(
            {
                "feature": fid,
                "before": before["status"],
                "after": after["status"],
                "regression": is_regression(before, after),
                "reason_after": after.get("reason"),
                "new_defects": [linked(d, b_base) for d in after["defects"] if d["id"] in new],
                "gone_defects": [linked(d, a_base) for d in before["defects"] if d["id"] in gone],
            }
        )
    data = {
        "a": _label(a),
        "b": _label(b),
        "tokenizer": b.get("tokenizer"),
        "features": len(set(ca) & set(cb)),
        "unchanged": unchanged,
        "only_in_a": sorted(set(ca) - set(cb)),
        "only_in_b": sorted(set(cb) - set(ca)),
        "changed": changed,
        "regressions": sum(c["regression"] for c in changed),
    }
    return Diff(data)


def render_diff_markdown(data: Mapping[str, Any]) -> str:
    """diff.md: the upgrade report — regressions first, then improvements and other changes."""
    lines = [
        f"# Upgrade report: {data['a']} -> {data['b']}",
        "",
        f"{data['features']} features compared, {data['unchanged']} unchanged, {len(data['changed'])} changed, "
        f"**{data['regressions']} regression(s)**.",
    ]
    for title, rows in (
        ("Regressions", [c for c in data["changed"] if c["regression"]]),
        ("Status changes", [c for c in data["changed"] if not c["regression"] and c["before"] != c["after"]]),
        (
            "Same status, other defect signatures (which a walk certifies first varies with the release)",
            [c for c in data["changed"] if not c["regression"] and c["before"] == c["after"]],
        ),
    ):
        if not rows:
            continue
        lines += [
            "",
            f"## {title}",
            "",
            "| feature | before | after | defects appeared | defects gone |",
            "|---|---|---|---|---|",
        ]
        for c in rows:
            new = ", ".join(f"[{d['id']}]({d['link']}) {d['invariant']}" for d in c["new_defects"])
            gone = ", ".join(f"[{d['id']}]({d['link']})" for d in c["gone_defects"])
            lines.append(f"| `{c['feature']}` | {c['before']} | {c['after']} | {new} | {gone} |")
        for c in rows:
            for d in c["new_defects"][:1]:
                lines.append(f"- `{c['feature']}` {d['id']}: {d['summary']} — witness {d.get('witness')!r}")
    for key, what in (("only_in_a", "only in " + str(data["a"])), ("only_in_b", "only in " + str(data["b"]))):
        if data[key]:
            lines += ["", f"Features {what}: " + ", ".join(f"`{f}`" for f in data[key])]
    return "\n".join(lines) + "\n"


# -- history ----------------------------------------------------------------------------------------
@dataclass
class History:
    """``history.json``'s content (module doc) and the release matrices it was built from."""

    data: dict[str, Any]
    releases: list[ReleaseRun] = field(default_factory=list)

    def write(self, out: str | Path) -> dict[str, Path]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "history.json", "md": out / "history.md"}
        paths["json"].write_text(json.dumps(self.data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        paths["md"].write_text(render_history_markdown(self.data), encoding="utf-8")
        return paths


def _rel(run: ReleaseRun, root: Path) -> str:
    try:
        return run.dir.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return run.dir.resolve().as_posix()


def build_history(
    name: str,
    distribution: str,
    span: str | None,
    versions: Sequence[str],
    runs: Sequence[ReleaseRun],
    root: str | Path,
    *,
    bisector: Callable[[Mapping[str, Any], str, str, Sequence[str]], Mapping[str, Any] | None] | None = None,
) -> History:
    """The history of ``runs`` (oldest first; ``versions`` every release in the span, run or not).
    ``bisector(defect, lo, hi, between)`` refines a bound where releases ``between`` run releases
    ``lo`` (verdict differs) and ``hi`` were not run: it returns :meth:`BisectResult.to_json` or None."""
    root = Path(root)
    ran = [r.version for r in runs]
    base = {r.version: _rel(r, root) + "/" for r in runs}
    cells_by = {r.version: engine_cells(r.data) for r in runs}
    feature_ids = list(dict.fromkeys(f["id"] for r in runs for f in r.data["features"]))
    cells: dict[str, list[dict[str, Any]]] = {}
    regressions: list[dict[str, Any]] = []
    for fid in feature_ids:
        timeline = []
        for v in ran:
            c = cells_by[v].get(fid)
            timeline.append(
                {
                    "version": v,
                    "status": c["status"] if c else "not_run",
                    "defects": sorted(_defect_ids(c)),
                }
            )
        cells[fid] = timeline
        for prev, cur in zip(ran, ran[1:]):
            b, a = cells_by[prev].get(fid), cells_by[cur].get(fid)
            if is_regression(b, a):
                assert a is not None and b is not None
                new = sorted(_defect_ids(a) - _defect_ids(b))
                regressions.append(
                    {
                        "feature": fid,
                        "from": prev,
                        "to": cur,
                        "before": b["status"],
                        "after": a["status"],
                        "new_defects": new,
                        "link": next(
                            (base[cur] + d["link"] for d in a["defects"] if d["id"] in new),
                            f"{base[cur]}matrix.html",
                        ),
                    }
                )
    # Every defect signature, where it shows.
    seen: dict[str, dict[str, Any]] = {}
    for v in ran:
        for fid, c in cells_by[v].items():
            for d in c["defects"]:
                entry = seen.setdefault(
                    d["id"],
                    {
                        "id": d["id"],
                        "invariant": d["invariant"],
                        "summary": d["summary"],
                        "features": [],
                        "present": [],
                    },
                )
                if fid not in entry["features"]:
                    entry["features"].append(fid)
                if v not in entry["present"]:
                    entry["present"].append(v)
                # The proof from the newest release showing it.
                entry["link"] = base[v] + d["link"]
                entry["repro"] = base[v] + d["repro"] if d.get("repro") else None
    defects = []
    index = {v: i for i, v in enumerate(versions)}
    for entry in seen.values():
        present = [v for v in ran if v in entry["present"]]
        newest = ran[-1]
        entry["in_newest"] = newest in present
        first_bad = present[0]
        last_bad = present[-1]
        after_last = ran[ran.index(last_bad) + 1] if last_bad != newest else None
        before_first = ran[ran.index(first_bad) - 1] if first_bad != ran[0] else None
        exact = {"first_bad": True, "first_fixed": True}
        entry["first_bad"] = first_bad
        entry["first_fixed"] = after_last
        bisects = []
        # first_bad exact when the release before it in the span was run (and showed no defect), or it is
        # the first release of the span (the span says how far back was looked).
        exact["first_bad"] = before_first is None or index[first_bad] - index[before_first] == 1
        if before_first is not None and not exact["first_bad"] and bisector is not None:
            between = list(versions[index[before_first] + 1 : index[first_bad]])
            res = bisector(entry, before_first, first_bad, between)
            if res is not None:
                bisects.append(res)
                verdict = {r["version"]: r["verdict"] for r in res.get("runs", [])}
                if any(t["kind"] == "introduced" for t in res.get("transitions", [])):
                    entry["first_bad"] = res["first_showing"]
                    exact["first_bad"] = True
                elif verdict.get(before_first) == "present":
                    # The reproducer shows it where the matrix did not certify it: older than it said.
                    entry["first_bad"] = before_first
                    entry.setdefault("reproduced", []).append(before_first)
        if after_last is not None:
            exact["first_fixed"] = index[after_last] - index[last_bad] == 1
            if not exact["first_fixed"] and bisector is not None:
                between = list(versions[index[last_bad] + 1 : index[after_last]])
                res = bisector(entry, last_bad, after_last, between)
                if res is not None:
                    bisects.append(res)
                    verdict = {r["version"]: r["verdict"] for r in res.get("runs", [])}
                    if verdict.get(after_last) == "present":
                        # Not fixed: that release's walks certified other signatures first, its
                        # reproducer still shows this one.
                        entry["first_fixed"] = None
                        entry.setdefault("reproduced", []).append(after_last)
                        entry["in_newest"] = entry["in_newest"] or after_last == newest
                    elif res.get("first_fixing"):
                        entry["first_fixed"] = res["first_fixing"]
                        exact["first_fixed"] = True
        entry["exact_bounds"] = exact
        if bisects:
            entry["bisect"] = bisects
        defects.append(entry)
    defects.sort(key=lambda e: (not e["in_newest"], index.get(e["first_bad"], 0), e["id"]))
    features = list({f["id"]: f for r in runs for f in r.data["features"]}.values())
    data: dict[str, Any] = {
        "history_version": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "engine": name,
        "distribution": distribution,
        "span": span,
        "versions": list(versions),
        "ran": ran,
        "skipped": [v for v in versions if v not in base],
        "tokenizer": runs[-1].data.get("tokenizer") if runs else None,
        "releases": [
            {
                "version": r.version,
                "dir": base[r.version].rstrip("/"),
                "reused": r.reused,
                "seconds": r.data.get("seconds"),
                "complete": r.complete,
                "counts": next(iter(r.data.get("counts", {}).values()), {}),
            }
            for r in runs
        ],
        "features": features,
        "cells": cells,
        "regressions": regressions,
        "defects": defects,
    }
    return History(data, list(runs))


def render_history_markdown(data: Mapping[str, Any]) -> str:
    """history.md: releases, regressions, defects with their first bad and first fixed release, and
    the feature timeline (one column per release)."""
    ran = data["ran"]
    lines = [
        f"# {data['engine']} across releases",
        "",
        f"Releases run: {', '.join(ran)}"
        + (f" (not sampled: {', '.join(data['skipped'])})" if data["skipped"] else "")
        + ".",
    ]
    if data.get("interrupted"):
        lines += ["", f"**Interrupted by {data['interrupted']}**: run the same command again to continue."]
    lines += ["", "## Regressions", ""]
    if data["regressions"]:
        lines += [
            f"- `{r['feature']}` {r['from']} -> {r['to']}: {r['before']} -> {r['after']}"
            + (f" (new: {', '.join(r['new_defects'])})" if r["new_defects"] else "")
            + f" [proof]({r['link']})"
            for r in data["regressions"]
        ]
    else:
        lines.append("None between the releases run.")
    lines += [
        "",
        "## Defects",
        "",
        "| defect | invariant | features | first bad | first fixed | summary |",
        "|---|---|---|---|---|---|",
    ]
    for d in data["defects"]:
        fb = d["first_bad"] + (
            " (the first release looked at)"
            if d["first_bad"] == data["versions"][0]
            else ("" if d["exact_bounds"]["first_bad"] else " (or earlier)")
        )
        ff = (d["first_fixed"] or "not yet") + ("" if d["exact_bounds"]["first_fixed"] else " (or earlier)")
        if d.get("reproduced"):
            ff += f" (its reproducer still shows it in {', '.join(d['reproduced'])})"
        lines.append(
            f"| [{d['id']}]({d['link']}) | {d['invariant']} | {', '.join(d['features'][:3])} | {fb} | {ff} | "
            f"{str(d['summary'])[:120]} |"
        )
    lines += ["", "## Features", "", "| feature | " + " | ".join(ran) + " |", "|---|" + "---|" * len(ran)]
    for fid, timeline in data["cells"].items():
        lines.append(f"| `{fid}` | " + " | ".join(t["status"] for t in timeline) + " |")
    return "\n".join(lines) + "\n"


def run_history(
    name: str,
    span: str | None = None,
    *,
    out: str | Path,
    sample: int | None = None,
    tokenizer: str = "bpe",
    features: Sequence[str] = (),
    seed: int = 0,
    budget_s: float | None = None,
    shard: tuple[int, int] | None = None,
    bisect_bounds: bool = True,
    bisect_budget_s: float | None = 900.0,
    released: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    backend_of: Callable[[str], str] | None = None,
) -> History:
    """``maskcert matrix --versions NAME==SPAN``: each chosen release's matrix under
    ``out/releases/<version>/`` (reused, continued or run: :func:`run_release`), then the history
    (:func:`build_history`, bounds bisected when ``bisect_bounds``, within ``bisect_budget_s``) written to ``out``. With ``shard``
    ``(k, n)`` only every n-th release from the k-th (1-based) is run and no history is written (its
    ``data`` lists the releases run). SIGINT/SIGTERM stop after the release in progress (its matrix
    keeps a checkpoint); the history of the releases finished is still written with ``interrupted``.
    ``released`` and ``backend_of`` (the backend certify is given for a release) let tests stand toys in
    for an engine's releases."""
    distribution, versions = choose_versions(name, span, released=released)
    chosen = sample_versions(versions, sample)
    if shard is not None:
        k, n = shard
        if not (n >= 1 and 1 <= k <= n):
            raise HistoryError(f"--shard {k}/{n}: expected K/N with 1 <= K <= N")
        chosen = chosen[k - 1 :: n]
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    per = None if budget_s is None else max(1.0, budget_s / max(1, len(chosen)))
    runs: list[ReleaseRun] = []
    interrupted: str | None = None
    with signals() as stop:
        for v in chosen:
            if stop():
                break
            if progress:
                progress(f"{name}=={v}: matrix")
            run = run_release(
                name,
                v,
                root / "releases" / v,
                tokenizer=tokenizer,
                features=features,
                seed=seed,
                budget_s=per,
                backend=backend_of(v) if backend_of else None,
            )
            if progress:
                progress(f"{name}=={v}: {'reused' if run.reused else 'ran'} ({run.data.get('seconds')} s)")
            runs.append(run)
            if run.data.get("interrupted"):
                interrupted = str(run.data["interrupted"])
                break
        if stop.signal is not None and interrupted is None:
            interrupted = signal_name(stop.signal)
    if shard is not None:
        return History({"engine": name, "ran": [r.version for r in runs], "shard": list(shard)}, runs)
    bisector = (
        Bisector(name, distribution, root, budget_s=bisect_budget_s, progress=progress)
        if bisect_bounds and interrupted is None
        else None
    )
    history = build_history(name, distribution, span, versions, runs, root, bisector=bisector)
    if bisector is not None:
        history.data["bisect"] = bisector.summary()
    if interrupted is not None:
        history.data["interrupted"] = interrupted
    history.write(root)
    return history


class Bisector:
    """Bisects a defect's reproducer over the releases between two run ones (module doc), within
    ``budget_s`` seconds in all: past it a bound stays as the releases run give it (``exact_bounds``
    false) and :meth:`summary` counts it as not bisected."""

    def __init__(
        self,
        name: str,
        distribution: str,
        root: Path,
        *,
        budget_s: float | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.name, self.distribution, self.root = name, distribution, root
        self.budget_s, self.progress = budget_s, progress
        self.spent_s = 0.0
        self.bisected = 0
        self.reused = 0
        self.not_bisected: dict[str, int] = {}

    def _skip(self, why: str) -> None:
        self.not_bisected[why] = self.not_bisected.get(why, 0) + 1

    def __call__(
        self, defect: Mapping[str, Any], lo: str, hi: str, between: Sequence[str]
    ) -> Mapping[str, Any] | None:
        from maskcert.bisect import bisect
        from props.backends import engines

        script = self.root / str(defect.get("repro") or "")
        if not defect.get("repro") or not script.is_file():
            self._skip("no reproducer")
            return None
        # A bisection is kept beside the releases (bisect/<defect>_<lo>_<hi>.json with its reproducer's
        # digest): a later history run of the same releases reads it instead of running it again.
        digest = hashlib.sha256(script.read_bytes()).hexdigest()[:16]
        kept = self.root / "bisect" / f"{defect['id']}_{lo}_{hi}.json"
        if kept.is_file():
            try:
                saved = json.loads(kept.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                saved = {}
            if saved.get("repro_digest") == digest and saved.get("versions") == [lo, *between, hi]:
                self.reused += 1
                return dict(saved["result"])
        if self.budget_s is not None and self.spent_s >= self.budget_s:
            self._skip("bisect budget spent")
            return None
        if self.progress:
            self.progress(
                f"{self.name}: bisect {defect['id']} over {lo}..{hi} ({len(between)} releases between)"
            )
        started = time.monotonic()
        result = bisect(
            self.name,
            script,
            [lo, *between, hi],
            prepare=lambda v: engines.install_engine(self.distribution, v),
            timeout_s=300.0,
        )
        self.spent_s += time.monotonic() - started
        self.bisected += 1
        data = result.to_json()
        if result.interrupted is None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(
                json.dumps(
                    {"repro_digest": digest, "versions": [lo, *between, hi], "result": data}, indent=1
                ),
                encoding="utf-8",
            )
        return data

    def summary(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "spent_s": round(self.spent_s, 1),
            "bisected": self.bisected,
            "reused": self.reused,
            "not_bisected": dict(self.not_bisected),
        }


def diff_releases(
    a: str,
    b: str,
    *,
    out: str | Path,
    tokenizer: str = "bpe",
    features: Sequence[str] = (),
    seed: int = 0,
    budget_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Diff:
    """``maskcert matrix --diff A B``: each side a ``matrix.json`` (or its directory) or ``NAME==VERSION``,
    whose matrix is run (or reused) under ``out/releases/<version>/`` — the layout of a history run, so
    ``--out`` a ``--versions`` directory reuses its matrices — then :func:`diff`, written to ``out``."""
    from props.backends.engines import parse_request

    root = Path(out)
    sides: list[tuple[dict[str, Any], str]] = []
    names = {parse_request(x).name for x in (a, b) if not Path(x).exists()}
    for x in (a, b):
        if Path(x).exists():
            p = Path(x)
            sides.append((load_matrix(p), os.path.relpath(p if p.is_dir() else p.parent, root) + "/"))
            continue
        req = parse_request(x)
        if req.version is None:
            raise HistoryError(
                f"--diff {x!r}: expected NAME==VERSION (one release, e.g. xgrammar==0.2.9) or a matrix.json"
            )
        sub = req.version if len(names) == 1 else f"{req.name}=={req.version}"
        if progress:
            progress(f"{req}: matrix")
        run = run_release(
            req.name,
            req.version,
            root / "releases" / sub,
            tokenizer=tokenizer,
            features=features,
            seed=seed,
            budget_s=None if budget_s is None else budget_s / 2,
        )
        if run.data.get("interrupted"):
            raise HistoryError(
                f"--diff: the matrix of {req} was interrupted by {run.data['interrupted']}; run the same "
                "command again to continue it"
            )
        sides.append((run.data, f"releases/{sub}/"))
    result = diff(sides[0][0], sides[1][0], a_base=sides[0][1], b_base=sides[1][1])
    result.write(root)
    return result
