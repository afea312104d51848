"""``maskcert matrix``: the feature conformance matrix.

Theory of operation. The probe suite (:data:`props.corpus.features.FEATURES`: every JSON Schema
keyword and format, the regex and GBNF features, each with probes alone, next to siblings and nested)
is certified on each engine with :func:`maskcert.certification.certify` — valid walks with masks
compared at every step, the targeted invalid instances of :mod:`props.checks.targeted`, other legal
spellings, an adversarial walk and the serving checks; Hypothesis searches are off (``examples=0``), so
a run is bounded and deterministic. Each engine's full report (findings with certificates, reproducer
scripts) is written under ``OUT/<engine>/``; the matrix folds it into one status per engine × feature:

* ``crash`` — a backend exception or death on some probe;
* ``unsound+incomplete``, ``unsound``, ``incomplete`` — a soundness, refusal-hygiene or EOS-offered
  finding (it let an invalid output or a dead token through) and/or a completeness, liveness, UTF-8
  or EOS-withheld finding (it blocked a valid one);
* ``limits`` — a resource limit (timeout, memory) and nothing worse;
* ``refused`` — every probe was refused at compile time (the honest answer); an engine without the
  spec kind (xgrammar and Lark, llguidance and structural tags) refuses every probe of it, and the
  cell's ``reason`` says so;
* ``not_decided`` — the reference refused every probe the engine did not (a construct it cannot
  decide exactly, its reason in ``reason``): not a verdict on the engine;
* ``exact`` — no finding on the probes it compiled;
* ``not_run`` — the budget ran out before any of its probes; ``internal_error`` — maskcert failed
  (report it: a bug of maskcert, never the engine's).

Tool-call rows (:data:`props.corpus.features.TOOLCALL_FEATURES`: one per structural-tag format type, one
per model template of the tool-call snapshot, llguidance's Lark tool-call constructs) name special
tokens, so they are certified on their own vocabulary, a byte-level BPE trained with
:data:`~props.corpus.features.TOOLCALL_SPECIAL_TOKENS` added (:func:`toolcall_vocabulary`), the names
bound to its ids as certify binds them (``SpecRef.naming_special_tokens``); that report is written under
``OUT/<engine>/toolcalls/``.

Serving findings (fork, rollback, jump-forward, ...) do not change a cell's status; they are listed
with its defects. ``matrix.json`` (the schema below), ``matrix.md`` and ``matrix.html`` (engines side by
side, a colour per status, each defect linked to its proof in the engine's ``report.html``) are
written by :meth:`Matrix.write`.

``matrix.json``::

    {"engines": [{"name", "version", "report", "toolcall_report"?}], "tokenizer": {...},
     "toolcall_tokenizer": {...},   # when tool-call rows ran
     "features": [{"id", "kind", "description"}],
     "cells": [{"engine", "feature", "status", "reason"?, "probes": {"checked", "refused"},
                "defects": [{"id", "invariant", "summary", "spec", "finding", "targets", "witness",
                             "link", "repro"}]}],
     "counts": {engine: {status: n}},
     "interrupted": "SIGTERM", "not_run": [engine]}   # only when a signal stopped the matrix
"""

from __future__ import annotations

import datetime
import html
import json
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maskcert.certification import CertifyConfig, CertifyError, Report, certify, load_vocabularies
from maskcert.sharding import signal_name, signals
from props.checks.defects import group, reference_grammars
from props.contract.findings import SPECIAL_TOKEN_KINDS, Finding, Invariant
from props.corpus.features import FEATURES, TOOLCALL_FEATURES, TOOLCALL_SPECIAL_TOKENS, Feature
from props.output.report import ReportJSON
from refdecoder import render_text
from tokenizers_matrix import Vocabulary, train_bpe

__all__ = [
    "STATUSES",
    "COLOURS",
    "Matrix",
    "MatrixError",
    "run_matrix",
    "matrix_from_reports",
    "cell_status",
    "select_features",
    "toolcall_vocabulary",
]

_ALL_FEATURES: tuple[Feature, ...] = (*FEATURES, *TOOLCALL_FEATURES)
_TOOLCALL_IDS = frozenset(f.id for f in TOOLCALL_FEATURES)
#: Where a tool-call report sits inside an engine's report directory.
TOOLCALL_DIR = "toolcalls"

STATUSES = (
    "exact",
    "refused",
    "not_decided",
    "unsound",
    "incomplete",
    "unsound+incomplete",
    "crash",
    "limits",
    "not_run",
    "internal_error",
)
_UNSOUND = frozenset({Invariant.SOUNDNESS, Invariant.EOS, Invariant.REFUSAL})
_INCOMPLETE = frozenset(
    {
        Invariant.COMPLETENESS_CANONICAL,
        Invariant.COMPLETENESS_TOKEN,
        Invariant.COMPLETENESS_BYTE,
        Invariant.LIVENESS,
        Invariant.UTF8,
    }
)
#: The colour of each status in matrix.html and the site.
COLOURS = {
    "exact": "#c8f7c5",
    "refused": "#dfe6ee",
    "not_decided": "#eeeeee",
    "unsound": "#f4a7a3",
    "incomplete": "#fbe3a1",
    "unsound+incomplete": "#e58ad0",
    "crash": "#8b0000",
    "limits": "#c9c0ff",
    "not_run": "#ffffff",
    "internal_error": "#999999",
}


class MatrixError(CertifyError):
    """Bad ``maskcert matrix`` input (an unknown feature selector, no engine), naming it."""


def select_features(selectors: Sequence[str] = ()) -> list[Feature]:
    """The features whose id equals or starts with one of ``selectors`` (all when none given)."""
    if not selectors:
        return list(_ALL_FEATURES)
    out = [
        f for f in _ALL_FEATURES if any(f.id == s or f.id.startswith(s.rstrip("/") + "/") for s in selectors)
    ]
    if not out:
        raise MatrixError(
            f"--feature {', '.join(selectors)}: expected a feature id or prefix such as json_schema/not, "
            f"json_schema/format, regex, structural_tag, toolcall or lark "
            f"(ids: {', '.join(f.id for f in FEATURES[:6])}, ...)"
        )
    return out


def _is_toolcall(f: Feature) -> bool:
    return f.id in _TOOLCALL_IDS


def toolcall_vocabulary() -> Vocabulary:
    """The vocabulary of the tool-call rows: the ``bpe`` matrix tokenizer's training with
    :data:`TOOLCALL_SPECIAL_TOKENS` added as special tokens (trained once, cached on disk)."""
    return train_bpe(special_tokens=TOOLCALL_SPECIAL_TOKENS, name="bpe-toolcall")


def _feature_of(spec_name: str) -> str:
    return spec_name.split("#", 1)[0]


def cell_status(
    findings: Sequence[Finding],
    checked: int,
    refused: int,
    internal: int,
    seen: int,
    reference_refused: int = 0,
) -> str:
    """The status of one cell from its findings and how many of its probes were checked, refused by
    the backend, failed inside maskcert, refused by the reference alone, or reached at all (see the
    module doc)."""
    invariants = {f.invariant for f in findings}
    if Invariant.CRASH in invariants:
        return "crash"
    # EOS both ways: offered where the reference masks it lets an invalid output end (unsound),
    # withheld where the reference allows it blocks a valid one (incomplete).
    withheld = any(f.invariant == Invariant.EOS and f.reference_allows is True for f in findings)
    offered = any(f.invariant == Invariant.EOS and f.reference_allows is not True for f in findings)
    unsound = bool(invariants & (_UNSOUND - {Invariant.EOS})) or offered
    incomplete = bool(invariants & _INCOMPLETE) or withheld
    if unsound and incomplete:
        return "unsound+incomplete"
    if unsound:
        return "unsound"
    if incomplete:
        return "incomplete"
    if Invariant.LIMITS in invariants:
        return "limits"
    if internal:
        return "internal_error"
    if seen == 0:
        return "not_run"
    if checked == 0 and refused > 0:
        return "refused"
    if checked == 0 and reference_refused > 0:
        return "not_decided"
    return "exact"


@dataclass
class Matrix:
    """The outcome of :func:`run_matrix`: ``data`` is matrix.json's content; ``reports`` each engine's
    certify report (written under ``OUT/<engine>/`` by :meth:`write`), or its report.json content when
    the matrix was folded from report directories (:func:`matrix_from_reports`)."""

    data: dict[str, Any]
    reports: dict[str, Report | ReportJSON] = field(default_factory=dict)

    def counts(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for c in self.data["cells"]:
            out.setdefault(c["engine"], Counter())[c["status"]] += 1
        return out

    def write(self, out: str | Path) -> dict[str, Path]:
        """matrix.json, matrix.md and matrix.html under ``out`` (the engine reports are already there)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "matrix.json", "md": out / "matrix.md", "html": out / "matrix.html"}
        paths["json"].write_text(json.dumps(self.data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        paths["md"].write_text(render_markdown(self.data), encoding="utf-8")
        paths["html"].write_text(render_html(self.data), encoding="utf-8")
        return paths


# Findings whose token is not a step of a text (serving operations, crashes, limits).
_NO_TEXT = frozenset(
    {Invariant.CRASH, Invariant.LIMITS, Invariant.FORK, Invariant.ROLLBACK, Invariant.SPECULATIVE}
    | {Invariant.JUMP_FORWARD, Invariant.DETERMINISM, Invariant.REFUSAL}
)


def _bytes(value: Any) -> bytes | None:
    if isinstance(value, dict):  # a certificate read back from JSON: {"hex", "text"}
        return bytes.fromhex(str(value.get("hex", "")))
    return value if isinstance(value, bytes) else None


def _witness(f: Finding) -> bytes | None:
    """The text that shows the defect: the invalid output it let finish or the valid completion it
    blocked, else the walk up to the divergence followed by the token the engine got wrong."""
    cert = f.certificate or {}
    for key in ("invalid_text", "completion", "witness"):
        found = _bytes(cert.get(key))
        if found is not None:
            return found
    if f.invariant not in _NO_TEXT and f.token_bytes is not None:
        return f.prefix_bytes + f.token_bytes
    return None


def _render(witness: bytes, f: Finding) -> str:
    """``witness`` as text: special tokens by name where the finding's spec names them."""
    if f.spec.kind in SPECIAL_TOKEN_KINDS:
        return render_text(witness, f.spec.special_names)
    return witness.decode("utf-8", "backslashreplace")


def _cells(
    engine: str,
    features: Sequence[Feature],
    findings: Sequence[Finding],
    data: Mapping[str, Any],
    base: str | None = None,
) -> list[dict[str, Any]]:
    """One cell per feature from an engine's ``findings`` and its report.json content ``data``; each
    defect links to its proof under ``base`` (the engine's report directory relative to the matrix;
    ``engine`` by default, where :func:`run_matrix` writes it)."""
    base = engine if base is None else base
    by_feature: dict[str, list[Finding]] = {}
    for f in findings:
        by_feature.setdefault(_feature_of(f.spec.name), []).append(f)
    refused: Counter[str] = Counter()
    reference_refused: Counter[str] = Counter()
    # Each feature's first refusal by the engine ("refused") and by the reference ("not_decided"): the
    # reason the cell shows.
    reasons: dict[tuple[str, str], str] = {}
    for r in data.get("refusals", []):
        fid = _feature_of(str(r.get("spec", "")))
        status = "refused" if r.get("side") in ("backend", "both") else "not_decided"
        reasons.setdefault((fid, status), str(r.get("reason", "")))
        if status == "refused":
            refused[fid] += 1
        else:
            reference_refused[fid] += 1
    internal: Counter[str] = Counter(
        _feature_of(e.split(" / ", 1)[0]) for e in data.get("internal_errors", [])
    )
    walked: Counter[str] = Counter()
    for entry in data.get("instances", {}).get("per_spec", []):
        walked[_feature_of(str(entry.get("spec", "")))] += 1
    grammar_of = reference_grammars()
    cells: list[dict[str, Any]] = []
    for feat in features:
        fid = feat.id
        found = by_feature.get(fid, [])
        # Probes reached: checked ones have an instances entry; refused ones a refusal entry.
        checked = max(0, walked[fid] - reference_refused[fid])
        seen = walked[fid] + refused[fid] + internal[fid]
        status = cell_status(found, checked, refused[fid], internal[fid], seen, reference_refused[fid])
        defects = []
        for d in group(found, grammar_of):
            ex = d.example
            cert = ex.certificate or {}
            witness = _witness(ex)
            defects.append(
                {
                    "id": d.id,
                    "invariant": str(d.invariant),
                    "summary": d.summary(),
                    "spec": ex.spec.name,
                    "finding": ex.id,
                    "targets": cert.get("targets"),
                    "witness": _render(witness, ex)[:200] if isinstance(witness, bytes) else None,
                    "link": f"{base}/report.html#finding-{ex.id}",
                    "repro": f"{base}/{ex.repro}" if ex.repro else None,
                }
            )
        cells.append(
            {
                "engine": engine,
                "feature": fid,
                "status": status,
                **({"reason": reasons[fid, status][:300]} if (fid, status) in reasons else {}),
                "probes": {
                    "total": len(feat.probes),
                    "checked": checked,
                    "refused": refused[fid],
                    "reference_refused": reference_refused[fid],
                },
                "defects": defects,
            }
        )
    return cells


def run_matrix(
    backends: Sequence[str] = ("reference",),
    *,
    tokenizer: Any = "bpe",
    features: Sequence[str] = (),
    out: str | Path | None = None,
    budget_s: float | None = None,
    seed: int = 0,
    strings: int = 2,
    progress: bool = False,
    resume: bool = False,
) -> Matrix:
    """Certify each backend on the probes of the selected features (all by default) over one
    tokenizer and fold the findings into the matrix (module doc); with ``out``, write every engine's
    report under ``out/<engine>/`` and the matrix files under ``out``.

    SIGINT/SIGTERM (:func:`maskcert.sharding.signals`, one scope for the whole matrix) stops the engine
    being certified (its report says so) and the ones after it; the matrix is still written, with
    ``interrupted`` (the signal's name) and ``not_run`` (the engines never started), and
    ``resume=True`` (``maskcert matrix --resume OUT``) continues each engine from its checkpoint
    under ``out``."""
    if not backends:
        raise MatrixError("maskcert matrix: expected at least one --backend")
    if resume and out is None:
        raise MatrixError("maskcert matrix: resume needs the output directory of the run to continue")
    chosen = select_features(features)
    # Two runs per engine: the features on the chosen vocabulary, the tool-call rows on theirs (module doc).
    plain = [f for f in chosen if not _is_toolcall(f)]
    calls = [f for f in chosen if _is_toolcall(f)]
    runs: list[tuple[list[Feature], Vocabulary, str]] = []  # (features, vocabulary, report subdirectory)
    if plain:
        runs.append((plain, load_vocabularies([tokenizer])[0], ""))
    if calls:
        runs.append((calls, toolcall_vocabulary(), TOOLCALL_DIR))
    engines: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    reports: dict[str, Report | ReportJSON] = {}
    not_run: list[str] = []
    per_run = None if budget_s is None else max(1.0, budget_s / (len(backends) * len(runs)))
    started = time.monotonic()
    with signals() as stop:
        for name in backends:
            if stop():
                not_run.append(name)
                continue
            entry: dict[str, Any] = {}
            for part, vocab, sub in runs:
                if entry and stop():  # the signal stopped the first run: the second is not started
                    break
                config = CertifyConfig(
                    tokenizers=[vocab],
                    corpus=(),
                    cases=[c for f in part for c in f.probes],
                    examples=0,
                    strings=strings,
                    seed=seed,
                    minimize_s=0,
                    budget_s=per_run,
                    progress=progress,
                )
                rel = f"{name}/{sub}" if sub else name
                where = None if out is None else Path(out) / rel
                again = resume and where is not None and (where / "checkpoint" / "run.json").exists()
                report = certify(name, config, out=where, resume=again)
                key = "toolcall_report" if sub else "report"
                complete = entry.get("complete", True) and report.complete
                entry = {
                    "name": report.backend.name,
                    "version": report.backend.version,
                    **entry,
                    key: f"{rel}/report.html",
                    "complete": complete,
                }
                reports[f"{name}/{sub}" if sub else name] = report
                cells += _cells(name, part, report.findings, report.to_json(), base=rel)
            entry.setdefault("report", entry.get("toolcall_report"))
            engines.append(entry)
        extra: dict[str, Any] = (
            {"interrupted": signal_name(stop.signal), "not_run": not_run} if stop.signal is not None else {}
        )
        if calls:
            extra["toolcall_tokenizer"] = _tokenizer_json(runs[-1][1])
        main = _tokenizer_json(runs[0][1])
        return _assemble(engines, cells, chosen, main, time.monotonic() - started, reports, out, extra)


def _tokenizer_json(vocab: Vocabulary) -> dict[str, Any]:
    return {"name": vocab.name, "size": len(vocab), "fingerprint": vocab.fingerprint}


def _assemble(
    engines: list[dict[str, Any]],
    cells: list[dict[str, Any]],
    chosen: Sequence[Feature],
    tokenizer: dict[str, Any],
    seconds: float,
    reports: dict[str, Report | ReportJSON],
    out: str | Path | None,
    extra: Mapping[str, Any] | None = None,
) -> Matrix:
    data: dict[str, Any] = {
        "matrix_version": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tokenizer": tokenizer,
        "seconds": round(seconds, 1),
        "statuses": list(STATUSES),
        "engines": engines,
        "features": [f.to_json() for f in chosen],
        "cells": cells,
        **(extra or {}),
    }
    matrix = Matrix(data, reports)
    data["counts"] = {e: dict(sorted(c.items())) for e, c in matrix.counts().items()}
    if out is not None:
        matrix.write(out)
    return matrix


def matrix_from_reports(
    report_dirs: Sequence[str | Path], *, features: Sequence[str] = (), out: str | Path | None = None
) -> Matrix:
    """The matrix of engines certified separately on the probe suite (``maskcert matrix`` runs, or
    ``certify --corpus features`` runs, one per engine, e.g. in parallel or on several machines): each
    directory's ``report.json`` is read back and folded as :func:`run_matrix` folds its own reports.
    With ``out``, the matrix files are written there and each engine's report is linked where it is.
    All reports must be on one tokenizer (a matrix compares engines on the same vocabulary). A
    ``toolcalls/report.json`` beside a report (what :func:`run_matrix` writes) gives the tool-call rows;
    without one they come from the report itself (``not_run`` where it has none of their probes)."""
    from props.output.report import load_report

    if not report_dirs:
        raise MatrixError("maskcert matrix --from-report: expected at least one report directory")
    chosen = select_features(features)
    engines: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    reports: dict[str, Report | ReportJSON] = {}
    tokenizer: dict[str, Any] | None = None
    seconds = 0.0
    extra: dict[str, Any] = {}
    for d in report_dirs:
        path = Path(d) / "report.json" if Path(d).is_dir() else Path(d)
        data = load_report(path)
        toks = data.get("tokenizers") or []
        if len(toks) != 1:
            raise MatrixError(f"{path}: expected a report on one tokenizer, found {len(toks)}")
        here = {k: toks[0][k] for k in ("name", "size", "fingerprint")}
        if tokenizer is not None and here["fingerprint"] != tokenizer["fingerprint"]:
            raise MatrixError(
                f"{path}: tokenizer {here['name']} differs from {tokenizer['name']}: expected one vocabulary"
            )
        tokenizer = here
        name = str(data["backend"]["name"])
        if name in reports:
            raise MatrixError(f"{path}: a second report of {name}: expected one report per engine")
        findings = [Finding.from_json(f) for f in data.get("findings", [])]
        reports[name] = data
        rel = (path.parent if out is None else Path(os.path.relpath(path.parent, out))).as_posix()
        entry = {
            "name": name,
            "version": data["backend"]["version"],
            "report": f"{rel}/report.html",
            "complete": data.get("complete"),
        }
        # The tool-call rows from the report run_matrix writes beside it (module doc), when there is one.
        tc_path = path.parent / TOOLCALL_DIR / "report.json"
        split = tc_path.exists()
        own = [f for f in chosen if not (split and _is_toolcall(f))]
        cells += _cells(name, own, findings, data, base=rel)
        seconds += float(data.get("elapsed_s") or 0)
        if split:
            tc = load_report(tc_path)
            toks = tc.get("tokenizers") or []
            if len(toks) != 1:
                raise MatrixError(f"{tc_path}: expected a report on one tokenizer, found {len(toks)}")
            extra["toolcall_tokenizer"] = {k: toks[0][k] for k in ("name", "size", "fingerprint")}
            tc_rel = f"{rel}/{TOOLCALL_DIR}"
            tc_findings = [Finding.from_json(f) for f in tc.get("findings", [])]
            cells += _cells(name, [f for f in chosen if _is_toolcall(f)], tc_findings, tc, base=tc_rel)
            reports[f"{name}/{TOOLCALL_DIR}"] = tc
            entry["toolcall_report"] = f"{tc_rel}/report.html"
            entry["complete"] = bool(data.get("complete")) and bool(tc.get("complete"))
            seconds += float(tc.get("elapsed_s") or 0)
        engines.append(entry)
    assert tokenizer is not None
    return _assemble(engines, cells, chosen, tokenizer, seconds, reports, out, extra)


# -- rendering ------------------------------------------------------------------------------------
def _engine_keys(data: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(c["engine"] for c in data["cells"]))


def render_markdown(data: dict[str, Any]) -> str:
    """matrix.md: counts per engine, then one row per feature with each engine's status."""
    engines = _engine_keys(data)
    cell = {(c["engine"], c["feature"]): c for c in data["cells"]}
    versions = {e["report"].split("/")[0]: e["version"] for e in data["engines"]}
    versions.update({e["name"]: e["version"] for e in data["engines"]})
    lines = [
        "# maskcert feature matrix",
        "",
        f"Tokenizer `{data['tokenizer']['name']}` ({data['tokenizer']['size']} tokens); {len(data['features'])} "
        f"features; {data['seconds']} s. Statuses: {', '.join(data['statuses'])}.",
        "",
        *(
            [
                f"**Interrupted by {data['interrupted']}**: the matrix is incomplete"
                + (f"; not run: {', '.join(data['not_run'])}" if data.get("not_run") else "")
                + " (`maskcert matrix --resume OUT` continues it).",
                "",
            ]
            if data.get("interrupted")
            else []
        ),
        "## Counts",
        "",
        "| engine | version | " + " | ".join(data["statuses"]) + " |",
        "|---|---|" + "---|" * len(data["statuses"]),
    ]
    for e in engines:
        counts = data["counts"].get(e, {})
        lines.append(
            f"| {e} | {versions.get(e, '')} | "
            + " | ".join(str(counts.get(s, 0)) for s in data["statuses"])
            + " |"
        )
    lines += [
        "",
        "## Features",
        "",
        "| feature | " + " | ".join(engines) + " |",
        "|---|" + "---|" * len(engines),
    ]
    for f in data["features"]:
        row = []
        for e in engines:
            c = cell.get((e, f["id"]))
            if c is None:
                row.append("")
                continue
            links = ", ".join(f"[{d['id']}]({d['link']})" for d in c["defects"][:3])
            row.append(c["status"] + (f" ({links})" if links else ""))
        lines.append(f"| `{f['id']}` | " + " | ".join(row) + " |")
    unsound = [c for c in data["cells"] if "unsound" in c["status"]]
    if unsound:
        lines += ["", "## Unsound cells", ""]
        for c in unsound:
            unsound_defects = [d for d in c["defects"] if d["invariant"] in ("soundness", "eos", "refusal")]
            # The feature's own targeted instance first: the line should name what the cell is about.
            own = [d for d in unsound_defects if str(d.get("targets") or "").startswith(c["feature"])]
            d = (own or unsound_defects or [None])[0]
            what = f"{d['summary']} — witness {d['witness']!r}" if d else ""
            lines.append(f"- {c['engine']} × `{c['feature']}`: {what}")
    undecided = [c for c in data["cells"] if c["status"] == "not_decided"]
    if undecided:
        lines += ["", "## Not decided by the reference", ""]
        lines += [f"- {c['engine']} × `{c['feature']}`: {c.get('reason', '')}" for c in undecided]
    return "\n".join(lines) + "\n"


def _html_interrupted(data: Mapping[str, Any]) -> str:
    if not data.get("interrupted"):
        return ""
    missing = f"; not run: {', '.join(data.get('not_run') or [])}" if data.get("not_run") else ""
    return (
        f"<p style='background:#fbe3a1;padding:6px'><b>Interrupted by {html.escape(str(data['interrupted']))}"
        f"</b>: the matrix is incomplete{html.escape(missing)} (<code>maskcert matrix --resume OUT</code>).</p>"
    )


def render_html(data: dict[str, Any]) -> str:
    """matrix.html: engines side by side, a colour per status, each defect linked to its proof."""
    engines = _engine_keys(data)
    cell = {(c["engine"], c["feature"]): c for c in data["cells"]}
    h = html.escape
    head = "".join(f"<th>{h(e)}</th>" for e in engines)
    rows = []
    for f in data["features"]:
        tds = []
        for e in engines:
            c = cell.get((e, f["id"]))
            if c is None:
                tds.append("<td></td>")
                continue
            links = "<br>".join(
                f'<a href="{h(d["link"])}" title="{h(d["summary"])}">{h(d["id"])}</a> {h(d["invariant"])}'
                for d in c["defects"]
            )
            tds.append(
                f'<td style="background:{COLOURS.get(c["status"], "#fff")}" class="{h(c["status"])}"'
                f' title="{h(c.get("reason", ""))}">'
                f"<b>{h(c['status'])}</b>{'<br>' + links if links else ''}</td>"
            )
        rows.append(
            f'<tr><th title="{h(f["description"])}"><code>{h(f["id"])}</code></th>{"".join(tds)}</tr>'
        )
    legend = " ".join(
        f'<span style="background:{COLOURS[s]};padding:2px 6px">{h(s)}</span>' for s in data["statuses"]
    )
    counts = "".join(
        f"<tr><th>{h(e)}</th>"
        + "".join(f"<td>{data['counts'].get(e, {}).get(s, 0)}</td>" for s in data["statuses"])
        + "</tr>"
        for e in engines
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>maskcert feature matrix</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #bbb;"
        "padding:3px 6px;font-size:13px;vertical-align:top}th{text-align:left}</style></head><body>"
        f"<h1>maskcert feature matrix</h1><p>Tokenizer <code>{h(data['tokenizer']['name'])}</code> "
        f"({data['tokenizer']['size']} tokens), {len(data['features'])} features. {legend}</p>"
        f"{_html_interrupted(data)}<table><tr><th>engine</th>{''.join(f'<th>{h(s)}</th>' for s in data['statuses'])}</tr>{counts}</table><br>"
        f"<table><tr><th>feature</th>{head}</tr>{''.join(rows)}</table></body></html>\n"
    )
