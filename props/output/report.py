"""Certification reports: ``report.json`` (a stable, documented schema), ``report.md`` and a
self-contained ``report.html`` (docs/design.md §6).

:func:`write_report` writes the three files from one report dict; :func:`load_report` reads and
checks a ``report.json``; :func:`histogram` builds the timing entries. Every string that comes from
the data (spec sources, token bytes, reasons, names) is escaped before it reaches Markdown or HTML.

report.json schema (``schema_version`` 1; :data:`REPORT_FIELDS` lists the top-level keys)
------------------------------------------------------------------------------------------
The file is one JSON object (UTF-8, keys sorted, no NaN/Infinity) with exactly these keys:

``schema_version`` (int)
    1; changes whenever a field's meaning or form changes (``findings.REPORT_SCHEMA_VERSION``).
``tool`` (object)
    ``{"name": "maskcert", "version": str}``.
``created`` (str)
    ISO 8601 timestamp of the run.
``backend`` (object)
    ``name`` (str), ``version`` (str), ``profile``: the declared profile, ``{"json": {JsonProfile
    fields: whitespace ("any" | "none" | int), property_order ("any" | "schema"),
    additional_properties_default (bool), allow_duplicate_keys (bool), unicode_escapes (bool |
    "controls"), formats ("annotation" | "assert"); draft and number_spelling ("any" | "canonical")
    only when not the default}, "canonical_tokenization_only": bool, "notes": [str]}``;
    ``declared_restrictions``: ``[{"option": str, "value": any, "default": any, "meaning": str}]`` —
    deviations the backend declares (they are the language certified against, not defects).
``tokenizers`` (array)
    ``[{"name": str, "kind": str, "size": int, "fingerprint": str, "eos_ids": [int]}]``.
``corpus`` (array)
    ``[{"name": str, "specs": int}]``: the spec collections run.
``budget_s`` (number | null)
    The time budget (null: none). ``seed`` (int): the random seed. ``elapsed_s`` (number): wall time.
``complete`` (bool)
    false when some (spec, tokenizer) pairs were not checked (the counts then cover only what ran).
``incomplete`` (object, only when ``complete`` is false)
    every reason that holds: ``interrupted`` (the signal's name or null), ``budget_spent`` (bool) with
    ``budget_s``, ``lost_shards`` (shards that never answered), ``reasons`` (the same in words) and
    ``unfinished`` (``[{"spec", "tokenizer"}]``, what ``--resume`` checks).
``interrupted`` (str, only when a signal stopped the run)
    the signal's name (``SIGTERM``); the exit code is then 128 + its number.
``specs`` (object)
    ints ``total``, ``checked``, ``refused_by_backend``, ``refused_by_reference``, ``refused_by_both``.
``counts`` (object)
    ``{invariant: {tokenizer_name: {"checks": int, "findings": int}}}``, invariants from
    ``props.contract.findings.INVARIANTS``; an absent cell (or ``checks`` 0) means "not run".
    The key ``defects`` (optional in older reports) is not an invariant: ``{severity: int}``, the
    number of defects (below) per severity.
``findings`` (array)
    ``Finding.to_json()`` objects (see ``props/contract/findings.py``): ``id``, ``invariant``, ``severity``,
    ``backend``, ``backend_version``, ``spec`` {kind, source, name, corpus, profile, digest},
    ``tokenizer``, ``tokenizer_fingerprint``, ``step``, ``prefix_ids``, ``prefix_bytes``,
    ``token_id``, ``token_bytes`` (bytes as ``{"hex", "text"}`` or null), ``backend_verdict``,
    ``reference_verdict``, ``message``, ``certificate`` (``witness``/``witness_ids``/``validated_by``
    for completeness, ``completion``/``validator_error`` for soundness, ``operations``/``observed``/
    ``expected`` for serving invariants, ``invalid_text`` + ``invalid_ids`` for refusal and invalid-instance soundness), ``walk``,
    ``occurrences``, ``repro`` (reproducer path relative to the report directory, or ""),
    ``reference_allows`` (for a finding about one token or EOS at one step: whether the reference
    allows it; null otherwise).
``refusals`` (array)
    ``[{"spec": str, "tokenizer": str, "side": "backend" | "reference", "reason": str}]``.
``timings`` (object)
    ``{tokenizer_name: {"backend_mask_ms": H, "reference_mask_ms": H, "backend_compile_ms": H}}``
    where ``H`` is :func:`histogram`'s ``{"edges": [float], "counts": [int], "p50": float,
    "p99": float, "max": float, "n": int}``: ``edges`` log-spaced from 0.01 ms to 10 s
    (:data:`HISTOGRAM_EDGES_MS`), ``counts[i]`` the samples in ``[edges[i], edges[i+1])`` (samples
    outside the range count in the first or last bin), ``p50``/``p99`` nearest-rank percentiles of
    the samples, ``n`` their number (0 with all values 0 when there were none).
``instances`` (object, optional in older reports)
    ``{"total": {"valid|invalid/SOURCE": int}, "per_spec": [{"spec", "tokenizer", "counts":
    {"valid|invalid/SOURCE": int}, "notes": [str]}]}``: the instances walked, by where they came from
    (``corpus``; ``reference``: a string the reference generated; ``hypothesis-jsonschema``, and
    ``hypothesis-jsonschema-unused`` for its draws outside the profile's language), and why a source
    gave none (e.g. hypothesis-jsonschema's documented refusal of a recursive ``$ref``).
``defects`` (array, optional in older reports)
    Findings grouped by root cause (:mod:`props.checks.defects`): ``{"id", "signature", "invariant",
    "severity", "summary", "findings": [finding ids], "spec": {"kind", "source", "name"} (the smallest
    example's spec), "minimized": bool, "original_spec_digest", "witness": {"hex", "text"} | null,
    "repro"}`` (their number per severity is ``counts.defects``); ``baseline`` (with ``--baseline``):
    ``{"path", "known": [defect ids], "new": [defect ids], "fixed": [signatures]}``.
``internal_errors`` (array of str, optional in older reports)
    maskcert's own failures, one per (spec, tokenizer): a bug or a broken dependency, never a finding.
``exit_code`` (int)
    0: no finding of a failing invariant (soundness, eos, crash); 1: at least one; 2: usage error
    or backend unavailable; 3: maskcert itself failed on some case (``internal_errors``).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias, TypedDict

from props.backends.lifetime import signal_name
from props.contract.findings import (
    FAILING,
    INVARIANTS,
    REPORT_SCHEMA_VERSION,
    SEVERITY_RANK,
    Finding,
    FindingError,
)
from refdecoder import render_text, split_special_tokens
from refdecoder.errors import InputError

__all__ = [
    "REPORT_FIELDS",
    "OPTIONAL_FIELDS",
    "HISTOGRAM_EDGES_MS",
    "ReportError",
    "ReportJSON",
    "FindingJSON",
    "Histogram",
    "histogram",
    "write_report",
    "load_report",
    "render_markdown",
    "render_html",
]

# report.json's content as the readers see it: ``maskcert.certification.Report.to_json()`` or a loaded
# file (:func:`load_report`). Read-only: a report is a value, nothing here changes one.
ReportJSON: TypeAlias = Mapping[str, Any]
# One entry of ``findings``: ``Finding.to_json()``'s form.
FindingJSON: TypeAlias = Mapping[str, Any]


class Histogram(TypedDict):
    """One timing entry of report.json (:func:`histogram`; the module docstring)."""

    edges: list[float]
    counts: list[int]
    p50: float
    p99: float
    max: float
    n: int


REPORT_FIELDS: dict[str, str] = {
    "schema_version": "int: the report schema version (1)",
    "tool": 'object: {"name": "maskcert", "version": str}',
    "created": "str: ISO 8601 time of the run",
    "backend": "object: name, version, declared profile, declared_restrictions",
    "tokenizers": "array: name, kind, size, fingerprint, eos_ids per tokenizer",
    "corpus": "array: name and number of specs per corpus",
    "budget_s": "number | null: the time budget",
    "seed": "int: the random seed",
    "elapsed_s": "number: wall time of the run",
    "complete": "bool: false when some (spec, tokenizer) pairs were not checked",
    "specs": "object: total, checked, refused_by_backend, refused_by_reference, refused_by_both",
    "counts": "object: invariant -> tokenizer -> {checks, findings}; defects -> severity -> int",
    "findings": "array: Finding.to_json() objects",
    "refusals": "array: spec, tokenizer, side, reason",
    "timings": "object: tokenizer -> backend_mask_ms / reference_mask_ms / backend_compile_ms histograms",
    "exit_code": "int: 0 pass, 1 failing findings, 2 usage error, 3 internal error",
}
#: Fields later versions added; a report without them still loads.
OPTIONAL_FIELDS: dict[str, str] = {
    "incomplete": "object (only when incomplete): interrupted, budget_spent, budget_s, lost_shards, reasons, unfinished",
    "interrupted": "str (only when a signal stopped the run): the signal's name",
    "defects": "array: findings grouped by root cause (id, signature, invariant, severity, summary, findings, "
    "spec, minimized, original_spec_digest, witness, repro)",
    "baseline": "object: path, known / new (defect ids), fixed (signatures) when run with --baseline",
    "instances": "object: instances walked by source, total and per spec",
    "internal_errors": "array of str: maskcert's own failures (exit code 3)",
    "resumed": "int: (spec, tokenizer) pairs taken from the checkpoint of a killed run (--resume)",
    "profile": "object: wall_s, setup_s (one-time costs), spec_s (median, p95, max, n seconds per pair), "
    "phases_s (seconds per phase), own_s / engine_s (maskcert's and the engine's seconds per pair), "
    "per_spec (each pair's engine_s and own_s)",
    "limits_probes": "object: tokenizer, limit_s, curves (family, about, verdict, why, points of size, "
    "spec_bytes, seconds, outcome) when run with --limits-probes",
}

_SPEC_COUNTS = ("total", "checked", "refused_by_backend", "refused_by_reference", "refused_by_both")
_TIMING_KEYS = ("backend_mask_ms", "reference_mask_ms", "backend_compile_ms")

# 0.01 ms .. 10 s, four bins per decade.
_BINS_PER_DECADE = 4
HISTOGRAM_EDGES_MS: tuple[float, ...] = tuple(
    float(f"{0.01 * 10 ** (k / _BINS_PER_DECADE):.6g}") for k in range(6 * _BINS_PER_DECADE + 1)
)


class ReportError(InputError):
    """A file (or dict) that is not a maskcert report: ``path`` names it, ``expected`` says what was
    expected, ``detail`` what was found."""


# -- histogram ----------------------------------------------------------------------------------------


def _percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted, non-empty ``ordered``."""
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def histogram(samples_ms: list[float]) -> Histogram:
    """The timing entry of ``report.json`` for ``samples_ms`` (see the module docstring)."""
    edges = list(HISTOGRAM_EDGES_MS)
    counts = [0] * (len(edges) - 1)
    values = [float(s) for s in samples_ms]
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise ReportError("histogram samples", "finite numbers of milliseconds", f"got {bad[0]!r}")
    if not values:
        return {"edges": edges, "counts": counts, "p50": 0.0, "p99": 0.0, "max": 0.0, "n": 0}
    log_lo = math.log10(edges[0])
    for v in values:
        if v <= edges[0]:
            i = 0
        else:
            i = min(int(math.floor((math.log10(v) - log_lo) * _BINS_PER_DECADE)), len(counts) - 1)
            # the float logarithm may land one bin off at an edge: settle against the edges themselves
            while i > 0 and v < edges[i]:
                i -= 1
            while i + 1 < len(counts) and v >= edges[i + 1]:
                i += 1
        counts[i] += 1
    ordered = sorted(values)
    return {
        "edges": edges,
        "counts": counts,
        "p50": _percentile(ordered, 50),
        "p99": _percentile(ordered, 99),
        "max": ordered[-1],
        "n": len(ordered),
    }


# -- checking -----------------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check(report: Any, where: str) -> None:
    """:class:`ReportError` unless ``report`` has the documented form (the module docstring)."""

    def fail(expected: str, detail: str = "") -> ReportError:
        return ReportError(where, expected, detail)

    if not isinstance(report, dict):
        raise fail("a maskcert report (a JSON object)", f"got {type(report).__name__}")
    tool = report.get("tool")
    if not isinstance(tool, dict) or tool.get("name") != "maskcert":
        raise fail('a maskcert report ("tool": {"name": "maskcert", ...})', f"tool is {str(tool)[:80]}")
    version = report.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= REPORT_SCHEMA_VERSION:
        raise fail(f"schema_version 1..{REPORT_SCHEMA_VERSION}", f"got {version!r}")
    missing = [k for k in REPORT_FIELDS if k not in report]
    if missing:
        raise fail("every report field (" + ", ".join(REPORT_FIELDS) + ")", f"missing {', '.join(missing)}")
    checks: list[tuple[str, bool, str]] = [
        ("created", isinstance(report["created"], str), "an ISO 8601 string"),
        (
            "backend",
            isinstance(report["backend"], dict) and isinstance(report["backend"].get("name"), str),
            'an object with "name"',
        ),
        ("tokenizers", isinstance(report["tokenizers"], list), "an array"),
        ("corpus", isinstance(report["corpus"], list), "an array"),
        ("budget_s", report["budget_s"] is None or _is_num(report["budget_s"]), "a number or null"),
        ("seed", _is_int(report["seed"]), "an int"),
        ("elapsed_s", _is_num(report["elapsed_s"]), "a number"),
        ("complete", isinstance(report["complete"], bool), "true or false"),
        (
            "specs",
            isinstance(report["specs"], dict) and all(_is_int(report["specs"].get(k)) for k in _SPEC_COUNTS),
            "ints " + ", ".join(_SPEC_COUNTS),
        ),
        (
            "counts",
            isinstance(report["counts"], dict)
            and all(
                isinstance(row, dict) and all(isinstance(c, dict) for c in row.values())
                for row in invariant_counts(report).values()
            )
            and all(_is_int(n) for n in defect_counts(report).values()),
            "invariant -> tokenizer -> {checks, findings}, and defects -> severity -> int",
        ),
        ("findings", isinstance(report["findings"], list), "an array"),
        (
            "limits_probes",
            "limits_probes" not in report
            or (
                isinstance(report["limits_probes"], dict)
                and isinstance(report["limits_probes"].get("curves"), list)
            ),
            'an object with "curves" (an array)',
        ),
        (
            "refusals",
            isinstance(report["refusals"], list) and all(isinstance(r, dict) for r in report["refusals"]),
            "an array of objects",
        ),
        (
            "timings",
            isinstance(report["timings"], dict)
            and all(isinstance(t, dict) for t in report["timings"].values()),
            "tokenizer -> histograms",
        ),
        ("exit_code", _is_int(report["exit_code"]), "an int"),
    ]
    for key, ok, expected in checks:
        if not ok:
            raise fail(f"{key!r} to be {expected}", f"got {str(report[key])[:80]}")
    for i, entry in enumerate(report["findings"]):
        try:
            Finding.from_json(entry)
        except FindingError as e:
            raise fail(f"findings[{i}] in the form of Finding.to_json()", str(e)) from e


# -- files --------------------------------------------------------------------------------------------


def write_report(report: ReportJSON, out_dir: Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and ``report.html`` under ``out_dir`` (created if needed);
    returns ``{"json": ..., "md": ..., "html": ...}``. The report is checked first: what is written
    can be loaded by :func:`load_report`."""
    _check(report, "report")
    try:
        text = json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ReportError("report", "JSON values only (no bytes, sets, NaN or objects)", str(e)) from e
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(text + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(report), encoding="utf-8")
    paths["html"].write_text(render_html(report), encoding="utf-8")
    return paths


def load_report(path: str | Path) -> ReportJSON:
    """Read a ``report.json``; :class:`ReportError` naming the file unless it is a maskcert report."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(str(p), "a readable UTF-8 maskcert report.json", str(e)) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(str(p), "a maskcert report.json (JSON)", f"invalid JSON: {e}") from e
    _check(data, str(p))
    result: ReportJSON = data
    return result


# -- shared rendering helpers -------------------------------------------------------------------------


def _show(value: Any, names: Mapping[int, str] | None = None) -> str:
    """Readable text of a certificate value: bytes (``{"hex", "text"}``) and strings as ``repr``.
    Bytes holding special tokens (a spec that names them reads each as ``0xFF id 0xFE``) show them
    by name (``names``: id -> ``<|name|>``) or as ``<[id]>``, never as raw 0xFF bytes."""
    if isinstance(value, dict) and set(value) == {"hex", "text"} and isinstance(value["hex"], str):
        try:
            data = bytes.fromhex(value["hex"])
        except ValueError:
            return repr(value["text"])
        if 0xFF in data and any(isinstance(p, int) for p in split_special_tokens(data)):
            return repr(render_text(data, names))
        return repr(data)
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _special_names(f: FindingJSON) -> dict[int, str]:
    """id -> name of the special tokens the finding's spec names (its ``special_tokens`` table)."""
    spec = f.get("spec") or {}
    src = spec.get("source") if isinstance(spec, dict) else None
    table = src.get("special_tokens") if isinstance(src, dict) else None
    if not isinstance(table, dict):
        return {}
    return {i: str(n) for n, i in table.items() if isinstance(i, int) and not isinstance(i, bool)}


def _token(f: FindingJSON) -> str:
    tid = f.get("token_id")
    if tid is None:
        return "–"
    data = f.get("token_bytes")
    return f"{tid} {_show(data, _special_names(f))}" if data is not None else f"{tid} (special)"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _severity_summary(findings: Sequence[FindingJSON]) -> str:
    by = Counter(str(f.get("severity", "")) for f in findings)
    rank = {str(k): v for k, v in SEVERITY_RANK.items()}
    order = sorted(by, key=lambda s: (rank.get(s, 99), s))
    return ", ".join(f"{by[s]} {s}" for s in order) if by else "none"


def _exit_meaning(code: int) -> str:
    if code == 0:
        return "no soundness, EOS or crash finding (certification passes)"
    if code == 1:
        return f"findings of failing invariants ({', '.join(sorted(FAILING))}): certification fails"
    if code == 2:
        return "usage error or backend unavailable"
    if code == 3:
        return "maskcert itself failed on some cases (see Internal errors): those cases are not certified"
    if code == 4:
        return "the run did not check every spec and --require-complete was given: certification fails"
    if code > 128:
        return f"interrupted by {signal_name(code - 128)}: certification fails (--resume continues it)"
    return "unknown exit code"


def _incomplete_line(report: ReportJSON) -> str:
    """Why a run is incomplete, every reason that holds (report.json ``incomplete``), or ''."""
    if report.get("complete", True):
        return ""
    why = report.get("incomplete") or {}
    reasons = list(why.get("reasons") or [])
    if not reasons:  # a report written before the reasons were recorded
        reasons = ["the budget cut the run short"]
    unfinished = why.get("unfinished") or []
    tail = f"; {len(unfinished)} (spec, tokenizer) pairs not checked" if unfinished else ""
    return f"incomplete: {', '.join(reasons)}{tail}"


def _unfinished_rows(report: ReportJSON) -> list[list[str]]:
    why = report.get("incomplete") or {}
    return [[str(u.get("spec", "")), str(u.get("tokenizer", ""))] for u in why.get("unfinished") or []]


def invariant_counts(report: ReportJSON) -> dict[str, Mapping[str, Any]]:
    """``counts`` without its ``defects`` entry: invariant -> tokenizer -> {checks, findings}."""
    counts = report.get("counts")
    return {k: v for k, v in counts.items() if k != "defects"} if isinstance(counts, dict) else {}


def defect_counts(report: ReportJSON) -> Mapping[str, Any]:
    """``counts.defects``: severity -> number of defects ({} in reports older than defects)."""
    counts = report.get("counts")
    d = counts.get("defects") if isinstance(counts, dict) else None
    return d if isinstance(d, dict) else {}


def _invariants(report: ReportJSON) -> list[str]:
    extra = sorted(k for k in invariant_counts(report) if k not in INVARIANTS)
    return list(INVARIANTS) + extra


def _tokenizer_names(report: ReportJSON) -> list[str]:
    names = [str(t.get("name", "")) for t in report.get("tokenizers", []) if isinstance(t, dict)]
    for row in invariant_counts(report).values():
        for name in row:
            if name not in names:
                names.append(name)
    return names


def _cell(report: ReportJSON, invariant: str, tokenizer: str) -> tuple[str, str]:
    """(kind, text): kind ``pass`` / ``fail`` / ``none``."""
    c = invariant_counts(report).get(invariant, {}).get(tokenizer)
    if not isinstance(c, dict) or not c.get("checks"):
        if isinstance(c, dict) and c.get("findings"):
            return "fail", f"✗ {c['findings']} findings"
        return "none", "–"
    if c.get("findings"):
        return "fail", f"✗ {c['findings']} findings"
    return "pass", f"✓ {c['checks']} checks"


_CERT_ORDER = (
    "witness",
    "witness_ids",
    "validated_by",
    "completion",
    "completion_ids",
    "validator_error",
    "operations",
    "observed",
    "expected",
    "invalid_text",
    "invalid_ids",
    "valid_instance",
)


def _cert_items(cert: Mapping[str, Any], names: Mapping[int, str] | None = None) -> list[tuple[str, str]]:
    """Certificate entries in a fixed order (known keys first), operations excluded; special tokens
    in bytes by ``names`` (:func:`_show`)."""
    keys = [k for k in _CERT_ORDER if k in cert] + sorted(k for k in cert if k not in _CERT_ORDER)
    return [(k, _cut(_show(cert[k], names), 4000)) for k in keys if k != "operations"]


def _ops(cert: Mapping[str, Any]) -> list[str]:
    ops = cert.get("operations")
    if not isinstance(ops, list):
        return []
    return [json.dumps(op, ensure_ascii=False) for op in ops]


def _spec_source(f: FindingJSON) -> str:
    spec = f.get("spec") or {}
    src = spec.get("source")
    text = src if isinstance(src, str) else json.dumps(src, indent=2, ensure_ascii=False, sort_keys=True)
    return _cut(text, 8000)


def _timing_rows(report: ReportJSON) -> list[tuple[str, str, Mapping[str, Any]]]:
    rows: list[tuple[str, str, Mapping[str, Any]]] = []
    for tok, entry in report.get("timings", {}).items():
        for key in _TIMING_KEYS:
            h = entry.get(key)
            if isinstance(h, dict):
                rows.append((str(tok), key, h))
    return rows


def _num(v: Any) -> str:
    return f"{v:.3g}" if _is_num(v) else "–"


# -- Markdown -----------------------------------------------------------------------------------------


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#!])")


def _md(text: Any) -> str:
    """Data as inline Markdown text: HTML escaped, Markdown punctuation backslashed, one line."""
    s = html.escape(str(text), quote=False)
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return " ".join(s.split()) or " "


def _fence(text: str, lang: str = "") -> str:
    """``text`` in a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _facts(f: FindingJSON) -> list[tuple[str, str]]:
    """The labelled facts of one finding, as the Markdown and HTML renderings both list them."""
    spec = f.get("spec") or {}
    prefix = f.get("prefix_ids", []) or []
    facts = [
        (
            "spec",
            f"{spec.get('kind', '')} {spec.get('name', '')} (corpus {spec.get('corpus', '') or '–'}, "
            f"digest {spec.get('digest', '')})",
        ),
        ("tokenizer", f"{f.get('tokenizer', '')} ({str(f.get('tokenizer_fingerprint', ''))[:12]})"),
        (
            "step",
            f"{f.get('step', len(prefix))}, walk {f.get('walk', '') or '–'}, "
            f"{f.get('occurrences', 1)} occurrence(s)",
        ),
        ("prefix ids", _cut(json.dumps(prefix), 600)),
        ("prefix bytes", _cut(_show(f.get("prefix_bytes"), _special_names(f)), 600)),
        ("token", _token(f)),
        ("backend verdict", str(f.get("backend_verdict", ""))),
        ("reference verdict", str(f.get("reference_verdict", ""))),
    ]
    if f.get("repro"):
        facts.append(("reproducer", f"python3 {f['repro']}"))
    return facts


def render_markdown(report: ReportJSON) -> str:
    """``report.md``: summary, declared profile and restrictions, matrix, findings, refusals, timings."""
    be = report.get("backend", {})
    findings: list[FindingJSON] = list(report.get("findings", []))
    code = int(report.get("exit_code", 0))
    out: list[str] = [
        f"# maskcert certification: {_md(be.get('name', '?'))} {_md(be.get('version', ''))}",
        "",
    ]
    tool = report.get("tool", {})
    budget = report.get("budget_s")
    out.append(
        f"{_md(report.get('created', ''))} · maskcert {_md(tool.get('version', ''))} · seed {_md(report.get('seed'))}"
        f" · {_num(report.get('elapsed_s'))} s of {'no budget' if budget is None else _num(budget) + ' s budget'}"
        + (f" · **{_md(_incomplete_line(report))}**" if _incomplete_line(report) else "")
    )
    out += [
        "",
        f"**{len(findings)} findings: {_severity_summary(findings)}.** "
        f"Exit code {code}: {_exit_meaning(code)}.",
        "",
    ]
    specs = report.get("specs", {})
    out.append("Specs: " + ", ".join(f"{k.replace('_', ' ')} {specs.get(k, 0)}" for k in _SPEC_COUNTS) + ".")
    out.append("")
    if line := _time_line(report):
        out += [_md(line), ""]
    if _unfinished_rows(report):
        out += ["## Not checked", "", "`maskcert certify --resume DIR` checks these.", ""]
        out += [_md_table(["spec", "tokenizer"], [[_md(c) for c in r] for r in _unfinished_rows(report)]), ""]

    out += ["## Defects", "", _DEFECTS_NOTE, ""]
    header, rows_d = _defect_rows(report)
    out.append(_md_table(header, [[_md(c) for c in row] for row in rows_d]) if rows_d else "No defects.")
    baseline = report.get("baseline")
    if baseline:
        out += [
            "",
            f"Baseline `{_md(baseline.get('path', ''))}`: {len(baseline.get('known', []))} known, "
            f"{len(baseline.get('new', []))} new, {len(baseline.get('fixed', []))} fixed.",
        ]
        out += [f"- fixed: `{_md(sig)}`" for sig in baseline.get("fixed", [])]
    out.append("")

    profile = be.get("profile", {}) or {}
    out += [
        "## Declared profile",
        "",
        "The language the backend declares it implements; the reference computes the ideal masks for "
        "this language, so differences it explains are not findings.",
        "",
    ]
    rows = [[_md(k), _md(json.dumps(v))] for k, v in sorted((profile.get("json") or {}).items())]
    rows.append(
        ["canonical_tokenization_only", _md(json.dumps(profile.get("canonical_tokenization_only", False)))]
    )
    out += [_md_table(["JSON profile field", "value"], rows), ""]
    for note in profile.get("notes", []) or []:
        out.append(f"- {_md(note)}")
    out.append("")

    out += [
        "## Declared restrictions",
        "",
        "Options under which the backend was certified that deviate from its defaults or from the "
        "specifications. These are deviations the backend declares, **not defects**.",
        "",
    ]
    restrictions = be.get("declared_restrictions", []) or []
    if restrictions:
        out.append(
            _md_table(
                ["option", "value", "default", "meaning"],
                [
                    [
                        _md(r.get("option", "")),
                        _md(json.dumps(r.get("value"))),
                        _md(json.dumps(r.get("default"))),
                        _md(r.get("meaning", "")),
                    ]
                    for r in restrictions
                ],
            )
        )
    else:
        out.append("None.")
    out.append("")

    toks = report.get("tokenizers", [])
    if toks:
        out += ["## Tokenizers", ""]
        out.append(
            _md_table(
                ["name", "kind", "size", "fingerprint", "EOS ids"],
                [
                    [
                        _md(t.get("name", "")),
                        _md(t.get("kind", "")),
                        _md(t.get("size", "")),
                        _md(str(t.get("fingerprint", ""))[:12]),
                        _md(t.get("eos_ids", [])),
                    ]
                    for t in toks
                ],
            )
        )
        out.append("")
    corpus = report.get("corpus", [])
    if corpus:
        out.append(
            "Corpus: "
            + ", ".join(f"{_md(c.get('name', ''))} ({_md(c.get('specs', 0))} specs)" for c in corpus)
            + "."
        )
        out.append("")

    names = _tokenizer_names(report)
    out += ["## Summary matrix", "", "✓ n checks: passed; ✗ k findings: failed; –: not run.", ""]
    out.append(
        _md_table(
            ["invariant"] + [_md(n) for n in names],
            [[_md(inv)] + [_cell(report, inv, n)[1] for n in names] for inv in _invariants(report)],
        )
    )
    out.append("")

    out += ["## Findings", ""]
    if findings:
        out.append(
            _md_table(
                list(_FINDING_COLUMNS),
                [
                    [
                        f"[{_md(f.get('id', ''))}](#finding-{_anchor(f.get('id', ''))})",
                        _md(f.get("invariant", "")),
                        _md(f.get("severity", "")),
                        _md((f.get("spec") or {}).get("name", "")),
                        _md(f.get("tokenizer", "")),
                        _md(f.get("step", "")),
                        _md(_token(f)),
                        _md(f.get("backend_verdict", "")),
                        _md(f.get("reference_verdict", "")),
                        _md(f.get("repro", "") or "–"),
                    ]
                    for f in findings
                ],
            )
        )
    else:
        out.append("No findings.")
    out.append("")
    for f in findings:
        out += _md_finding(f)

    refusals = report.get("refusals", [])
    out += ["## Refusals", ""]
    if refusals:
        out.append(
            _md_table(
                ["spec", "tokenizer", "side", "reason"],
                [
                    [
                        _md(r.get("spec", "")),
                        _md(r.get("tokenizer", "")),
                        _md(r.get("side", "")),
                        _md(_cut(str(r.get("reason", "")), 300)),
                    ]
                    for r in refusals
                ],
            )
        )
    else:
        out.append("None.")
    out.append("")

    errors = report.get("internal_errors") or []
    if errors:
        out += [
            "## Internal errors",
            "",
            f"maskcert itself failed on {len(errors)} case(s): a bug or a broken dependency, not the backend's "
            "defect. These cases were not certified.",
            "",
        ]
        out += [_fence(_cut(str(e), 1500)) for e in errors]
        out.append("")
    if report.get("limits_probes"):
        header, rows_l = _limits_probe_rows(report)
        out += ["## Limits probes", "", _LIMITS_PROBES_NOTE, ""]
        out += [_md_table(header, [[_md(c) for c in row] for row in rows_l]), ""]
    header, rows_i = _instance_table(report)
    out += ["## Instances walked", "", _INSTANCES_NOTE, ""]
    out.append(_md_table(header, [[_md(c) for c in row] for row in rows_i]) if rows_i else "None recorded.")
    out.append("")
    rows_c = _coverage_rows(report)
    if rows_c:
        out += ["## Coverage per spec", "", _COVERAGE_NOTE, ""]
        out += [_md_table(list(_COVERAGE_COLUMNS), [[_md(c) for c in row] for row in rows_c]), ""]

    out += ["## Mask-time statistics", "", "Milliseconds per mask (compile: per spec).", ""]
    rows_t = _timing_rows(report)
    if rows_t:
        out.append(
            _md_table(
                ["tokenizer", "measure", "n", "p50 ms", "p99 ms", "max ms"],
                [
                    [
                        _md(t),
                        _md(k),
                        _md(h.get("n", 0)),
                        _num(h.get("p50")),
                        _num(h.get("p99")),
                        _num(h.get("max")),
                    ]
                    for t, k, h in rows_t
                ],
            )
        )
    else:
        out.append("No timings.")
    out.append("")
    return "\n".join(out)


_INSTANCES_NOTE = (
    "Valid and invalid instances walked through the backend, by source: `corpus`, `reference` (generated "
    "by the reference), `hypothesis-jsonschema` (`-unused`: drawn outside the declared language), "
    "`targeted` (invalid instances aimed at one keyword or JSON syntax slip each), `spellings` (valid texts "
    "in other legal spellings), `numbers` (numbers respelled: other spellings of the constants a schema "
    "names, their neighbours, long fractions and integers, fractions and exponents for integers; valid ones "
    "walked byte by byte through the number), `coverage-guided` (walks steered to grammar positions not yet compared; "
    "`coverage/positions-*` count the positions found and compared, and the notes say whether coverage "
    "saturated). A spec whose JSON Schema got no hypothesis-jsonschema instance shows why."
)


_COVERAGE_NOTE = (
    "Where masks were compared, per spec: grammar positions (`coverage/positions-*`), lexeme states "
    "(inside numbers, strings and keys: digit counts before and after the point, exponent paths, "
    "escapes, UTF-8 lengths; `lexemes/targets-*`) and, of those, the boundary points of the constants "
    "the schema names (each prefix of a bound's, `enum`'s or `const`'s spelling, the whole, past it; "
    "`lexemes/constants-*`): compared of found; the lexeme states reached only by walks steered around "
    "defects already seen on the spec (`lexemes/targets-steered-only`); and what was not compared."
)
_COVERAGE_COLUMNS = (
    "spec",
    "tokenizer",
    "grammar positions",
    "lexeme states",
    "constant boundaries",
    "reached only by steering",
    "forced steps not compared",
    "engine s / own s",
    "not compared",
)


def _time_line(report: ReportJSON) -> str:
    """Where the checking time went: the engine's own calls against maskcert's checks, and the share
    of the budget the engine's calls took (each pair's clock, :mod:`props.checks.clock`)."""
    prof = report.get("profile") or {}
    engine = (prof.get("engine_s") or {}).get("total")
    own = (prof.get("own_s") or {}).get("total")
    if engine is None or own is None:
        return ""
    budget = report.get("budget_s")
    share = f", {100.0 * engine / budget:.0f}% of the {_num(budget)} s budget" if budget else ""
    skipped = int(((report.get("instances") or {}).get("total") or {}).get("compare/steps-forced-skipped", 0))
    line = (
        f"Time: the engine's own calls took {engine:.1f} s ({prof.get('engine_calls', 0)} calls{share}), "
        f"maskcert's checks {own:.1f} s."
    )
    if skipped:
        line += (
            f" The engine's masks were slow, so {skipped} steps where the reference forces the next bytes "
            "were walked without comparing masks (`--compare-at`)."
        )
    return line


def _ratio(counts: dict[str, Any], what: str) -> str:
    found, compared = int(counts.get(f"{what}-found", 0)), int(counts.get(f"{what}-compared", 0))
    return f"{compared}/{found} ({100.0 * compared / found:.0f}%)" if found else "-"


def _coverage_rows(report: ReportJSON) -> list[list[str]]:
    """Rows for the coverage section: each spec/tokenizer with lexeme coverage measured, and its
    seconds inside the engine's calls and maskcert's own (``profile.per_spec``)."""
    rows = []
    seconds = {
        (str(x.get("spec")), str(x.get("tokenizer"))): x
        for x in (report.get("profile") or {}).get("per_spec") or []
        if "engine_s" in x
    }
    for e in (report.get("instances") or {}).get("per_spec") or []:
        t = seconds.get((str(e.get("spec", "")), str(e.get("tokenizer", ""))))
        counts = e.get("counts") or {}
        if "lexemes/targets-found" not in counts:
            continue
        missed = [
            n.partition("not compared: ")[2] for n in e.get("notes") or [] if n.startswith("lexeme coverage")
        ]
        rows.append(
            [
                str(e.get("spec", "")),
                str(e.get("tokenizer", "")),
                _ratio(counts, "coverage/positions"),
                _ratio(counts, "lexemes/targets"),
                _ratio(counts, "lexemes/constants"),
                str(int(counts.get("lexemes/targets-steered-only", 0))),
                str(int(counts.get("compare/steps-forced-skipped", 0))),
                f"{_num(t['engine_s'])} / {_num(t['own_s'])}" if t else "-",
                _cut("; ".join(m for m in missed if m), 160),
            ]
        )
    return rows


def _instance_table(report: ReportJSON) -> tuple[list[str], list[list[str]]]:
    """Rows for the instances section: the totals, then each spec/tokenizer with its counts and notes."""
    inst = report.get("instances") or {}
    per_spec = inst.get("per_spec") or []
    sources = sorted({k for e in per_spec for k in (e.get("counts") or {})} | set(inst.get("total") or {}))
    header = ["spec", "tokenizer", *sources, "notes"]
    rows = (
        [["(all)", "", *[str((inst.get("total") or {}).get(k, 0)) for k in sources], ""]] if sources else []
    )
    for e in per_spec:
        counts = e.get("counts") or {}
        rows.append(
            [
                str(e.get("spec", "")),
                str(e.get("tokenizer", "")),
                *[str(counts.get(k, 0)) for k in sources],
                _cut("; ".join(e.get("notes") or []), 300),
            ]
        )
    return header, rows


_FINDING_COLUMNS = (
    "id",
    "invariant",
    "severity",
    "spec",
    "tokenizer",
    "step",
    "token",
    "backend",
    "reference",
    "repro",
)

_DEFECTS_NOTE = (
    "Findings grouped by root cause: one signature (invariant, direction, JSON position or spec kind, byte "
    "class at the divergence) is one defect, whatever spec, tokenizer or step showed it. Each row gives the "
    "smallest example; its finding below has the certificate and the reproducer."
)


def _defect_rows(report: ReportJSON) -> tuple[list[str], list[list[str]]]:
    """Rows of the defects section (the last column is the example finding's id, for links)."""
    header = ["defect", "severity", "what", "example spec", "example output", "findings", "repro", "finding"]
    rows = []
    for d in report.get("defects") or []:
        spec = d.get("spec") or {}
        witness = d.get("witness") or {}
        shown = repr(witness.get("text", ""))
        if "\\xff" in shown:  # special tokens (0xFF id 0xFE) by name, not as raw bytes
            shown = _show(witness, _special_names(d))
        example = d.get("findings", [""])[0] if d.get("findings") else ""
        rows.append(
            [
                str(d.get("id", "")),
                str(d.get("severity", "")),
                _cut(str(d.get("summary", "")), 160),
                _cut(f"{spec.get('kind', '')} {spec.get('name', '')}: {json.dumps(spec.get('source'))}", 160),
                _cut(shown, 80),
                str(len(d.get("findings") or [])),
                str(d.get("repro", "") or "–"),
                str(example),
            ]
        )
    return header, rows


def _anchor(fid: Any) -> str:
    return re.sub(r"[^a-z0-9-]", "", str(fid).lower())


def _md_finding(f: FindingJSON) -> list[str]:
    out = [
        f'<a id="finding-{_anchor(f.get("id", ""))}"></a>',
        "",
        f"### Finding {_md(f.get('id', ''))}: {_md(f.get('invariant', ''))} ({_md(f.get('severity', ''))})",
        "",
    ]
    out.append(_md(f.get("message", "")))
    out.append("")
    facts = _facts(f)
    out += [f"- **{k}**: {_md(v)}" for k, v in facts]
    out.append("")
    cert = f.get("certificate") or {}
    if cert:
        out += ["Certificate:", ""]
        out += [f"- **{_md(k)}**: {_md(v)}" for k, v in _cert_items(cert, _special_names(f))]
        ops = _ops(cert)
        if ops:
            out.append("- **operations**:")
            out += [f"  {i}. {_md(op)}" for i, op in enumerate(ops, 1)]
        out.append("")
    out += ["Spec source:", "", _fence(_spec_source(f)), ""]
    return out


# -- HTML ---------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#1d2430}
h1{font-size:1.6em}h2{border-bottom:1px solid #d5dae1;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #d5dae1;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#eef1f5}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f6f8fa;padding:.6em;overflow:auto;max-height:30em;white-space:pre-wrap;word-break:break-all}
td.pass{background:#dff3e3;color:#17612a}td.fail{background:#fbdcdc;color:#8a1717;font-weight:600}
td.none{background:#f1f2f4;color:#8a919c;text-align:center}
.sev-critical{color:#fff;background:#a4161a}.sev-high{color:#fff;background:#d9480f}
.sev-medium{background:#ffd43b}.sev-serving{background:#a5d8ff}.sev-low{background:#e9ecef}
.sev{padding:0 6px;border-radius:3px;font-size:12px}.note{color:#5c6470}
.banner{padding:.6em 1em;border-radius:4px;margin:.6em 0}.banner.fail{background:#fbdcdc}
.banner.pass{background:#dff3e3}.banner.warn{background:#fff3bf}
details{margin:.5em 0;border:1px solid #d5dae1;border-radius:4px;padding:.3em .8em}
summary{cursor:pointer;font-weight:600}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dt{font-weight:600}dd{margin:0;word-break:break-all}svg text{font:11px system-ui,sans-serif}
"""


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _html_table(header: list[str], rows: list[list[str]], raw: bool = False) -> str:
    """A table; cells are escaped unless ``raw`` (then the caller escaped them)."""
    head = "".join(f"<th>{_h(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _h(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: ReportJSON) -> str:
    """``report.html``: one self-contained page (inline CSS and SVG; no scripts, no network)."""
    be = report.get("backend", {})
    findings: list[FindingJSON] = list(report.get("findings", []))
    p: list[str] = [
        *_html_summary(report, findings),
        *_html_defects(report),
        *_html_profile(be),
        *_html_restrictions(be),
        *_html_inputs(report),
        *_html_matrix(report),
        *_html_findings(findings),
        *_html_refusals(report),
        *_html_internal_errors(report),
        *_html_limits_probes(report),
        *_html_instances(report),
        *_html_timings(report),
        "</body></html>\n",
    ]
    return "\n".join(p)


def _html_defects(report: ReportJSON) -> list[str]:
    """The defects section: one row per root cause, linked to its example finding."""
    p = ["<h2>Defects</h2>", f'<p class="note">{_h(_DEFECTS_NOTE)}</p>']
    header, rows = _defect_rows(report)
    if not rows:
        return [*p, "<p>No defects.</p>"]
    linked = [
        [f'<a href="#finding-{_anchor(r[-1])}">{_h(r[0])}</a>', *[_h(c) for c in r[1:-1]]] for r in rows
    ]
    p.append(_html_table(header[:-1], linked, raw=True))
    baseline = report.get("baseline")
    if baseline:
        p.append(
            f"<p>Baseline {_h(baseline.get('path', ''))}: {len(baseline.get('known', []))} known, "
            f"{len(baseline.get('new', []))} new, {len(baseline.get('fixed', []))} fixed.</p>"
        )
    return p


def _html_summary(report: ReportJSON, findings: Sequence[FindingJSON]) -> list[str]:
    """The page's head and title, the run line, the verdict banner(s) and the spec counts."""
    be = report.get("backend", {})
    code = int(report.get("exit_code", 0))
    title = f"maskcert certification: {be.get('name', '?')} {be.get('version', '')}"
    p: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_h(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_h(title)}</h1>",
    ]
    tool = report.get("tool", {})
    budget = report.get("budget_s")
    p.append(
        f'<p class="note">{_h(report.get("created", ""))} · maskcert {_h(tool.get("version", ""))} · seed '
        f"{_h(report.get('seed'))} · {_h(_num(report.get('elapsed_s')))} s of "
        f"{'no budget' if budget is None else _h(_num(budget)) + ' s budget'}</p>"
    )
    kind = "pass" if code == 0 else "fail"
    p.append(
        f'<div class="banner {kind}"><b>{len(findings)} findings: {_h(_severity_summary(findings))}.</b> '
        f"Exit code {code}: {_h(_exit_meaning(code))}.</div>"
    )
    if _incomplete_line(report):
        line = _incomplete_line(report)
        p.append(f'<div class="banner warn">{_h(line[0].upper() + line[1:])}.</div>')
        rows = _unfinished_rows(report)
        if rows:
            p.append(
                "<details><summary>Not checked (<code>maskcert certify --resume</code> checks them)</summary>"
                + _html_table(["spec", "tokenizer"], rows)
                + "</details>"
            )
    specs = report.get("specs", {})
    p.append(
        "<p>Specs: "
        + _h(", ".join(f"{k.replace('_', ' ')} {specs.get(k, 0)}" for k in _SPEC_COUNTS))
        + ".</p>"
    )
    if line := _time_line(report):
        p.append(f"<p>{_h(line)}</p>")
    return p


def _html_profile(be: Mapping[str, Any]) -> list[str]:
    """The declared profile section: its JSON fields, canonical-tokenization flag and notes."""
    profile = be.get("profile", {}) or {}
    p = ["<h2>Declared profile</h2>"]
    p.append(
        '<p class="note">The language the backend declares it implements; the reference computes the ideal '
        "masks for this language, so differences it explains are not findings.</p>"
    )
    rows = [[k, json.dumps(v)] for k, v in sorted((profile.get("json") or {}).items())]
    rows.append(
        ["canonical_tokenization_only", json.dumps(profile.get("canonical_tokenization_only", False))]
    )
    p.append(_html_table(["JSON profile field", "value"], rows))
    notes = profile.get("notes", []) or []
    if notes:
        p.append("<ul>" + "".join(f"<li>{_h(n)}</li>" for n in notes) + "</ul>")
    return p


def _html_restrictions(be: Mapping[str, Any]) -> list[str]:
    """The declared restrictions section (deviations the backend declares, not defects)."""
    p = ["<h2>Declared restrictions</h2>"]
    p.append(
        '<p class="note">Options under which the backend was certified that deviate from its defaults or '
        "from the specifications. These are deviations the backend declares, <b>not defects</b>.</p>"
    )
    restrictions = be.get("declared_restrictions", []) or []
    if restrictions:
        p.append(
            _html_table(
                ["option", "value", "default", "meaning"],
                [
                    [
                        str(r.get("option", "")),
                        json.dumps(r.get("value")),
                        json.dumps(r.get("default")),
                        str(r.get("meaning", "")),
                    ]
                    for r in restrictions
                ],
            )
        )
    else:
        p.append("<p>None.</p>")
    return p


def _html_inputs(report: ReportJSON) -> list[str]:
    """The tokenizers table and the corpus line, each only when the report has any."""
    p: list[str] = []
    toks = report.get("tokenizers", [])
    if toks:
        p.append("<h2>Tokenizers</h2>")
        p.append(
            _html_table(
                ["name", "kind", "size", "fingerprint", "EOS ids"],
                [
                    [
                        str(t.get("name", "")),
                        str(t.get("kind", "")),
                        str(t.get("size", "")),
                        str(t.get("fingerprint", ""))[:12],
                        json.dumps(t.get("eos_ids", [])),
                    ]
                    for t in toks
                ],
            )
        )
    corpus = report.get("corpus", [])
    if corpus:
        p.append(
            "<p>Corpus: "
            + _h(", ".join(f"{c.get('name', '')} ({c.get('specs', 0)} specs)" for c in corpus))
            + ".</p>"
        )
    return p


def _html_matrix(report: ReportJSON) -> list[str]:
    """The summary matrix: one row per invariant, one pass/fail/not-run cell per tokenizer."""
    names = _tokenizer_names(report)
    head = "<th>invariant</th>" + "".join(f"<th>{_h(n)}</th>" for n in names)
    body = []
    for inv in _invariants(report):
        cells = []
        for n in names:
            kind_c, text = _cell(report, inv, n)
            cells.append(f'<td class="{kind_c}">{_h(text)}</td>')
        body.append(f"<tr><th>{_h(inv)}</th>{''.join(cells)}</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return ["<h2>Summary matrix</h2>", table, *_svg_invariant_bars(report)]


def _html_findings(findings: Sequence[FindingJSON]) -> list[str]:
    """The findings section: a linked overview table, then each finding in full."""
    p = ["<h2>Findings</h2>"]
    if not findings:
        p.append("<p>No findings.</p>")
        return p
    rows_f = []
    for f in findings:
        fid = _h(f.get("id", ""))
        sev = _h(f.get("severity", ""))
        rows_f.append(
            [
                f'<a href="#finding-{_anchor(f.get("id", ""))}">{fid}</a>',
                _h(f.get("invariant", "")),
                f'<span class="sev sev-{_anchor(f.get("severity", ""))}">{sev}</span>',
                _h((f.get("spec") or {}).get("name", "")),
                _h(f.get("tokenizer", "")),
                _h(f.get("step", "")),
                f"<code>{_h(_token(f))}</code>",
                _h(f.get("backend_verdict", "")),
                _h(f.get("reference_verdict", "")),
                f"<code>{_h(f.get('repro', '') or '–')}</code>",
            ]
        )
    p.append(
        _html_table(
            list(_FINDING_COLUMNS),
            rows_f,
            raw=True,
        )
    )
    p += [_html_finding(f) for f in findings]
    return p


def _html_refusals(report: ReportJSON) -> list[str]:
    """The refusals section: which side refused which spec on which tokenizer, and why."""
    refusals = report.get("refusals", [])
    p = ["<h2>Refusals</h2>"]
    if refusals:
        p.append(
            _html_table(
                ["spec", "tokenizer", "side", "reason"],
                [
                    [
                        str(r.get("spec", "")),
                        str(r.get("tokenizer", "")),
                        str(r.get("side", "")),
                        _cut(str(r.get("reason", "")), 300),
                    ]
                    for r in refusals
                ],
            )
        )
    else:
        p.append("<p>None.</p>")
    return p


def _html_internal_errors(report: ReportJSON) -> list[str]:
    """The internal errors section (maskcert's own failures), only when there are any."""
    errors = report.get("internal_errors") or []
    if not errors:
        return []
    p = ["<h2>Internal errors</h2>"]
    p.append(
        f'<div class="banner fail">maskcert itself failed on {len(errors)} case(s): a bug or a broken '
        "dependency, not the backend's defect. These cases were not certified.</div>"
    )
    p += [f"<pre>{_h(_cut(str(e), 1500))}</pre>" for e in errors]
    return p


_LIMITS_PROBES_NOTE = (
    "Growing hostile specs compiled by the backend (--limits-probes): seconds per size, in a worker with "
    "time and memory limits. A hang, a crash or quadratic-or-worse growth is a 'limits' finding; the curve "
    "is its certificate."
)


def _limits_probe_rows(report: ReportJSON) -> tuple[list[str], list[list[str]]]:
    """One row per probe family: its verdict and its growth curve (size: seconds, outcome)."""
    rows: list[list[str]] = []
    for c in report.get("limits_probes", {}).get("curves", []):
        curve = " → ".join(
            f"{p.get('size')}: {_num(p.get('seconds'))} s"
            + ("" if p.get("outcome") == "compiled" else f" {p.get('outcome')}")
            for p in c.get("points", [])
        )
        rows.append([str(c.get("family", "")), str(c.get("verdict", "")), curve, str(c.get("why", ""))])
    return ["family", "verdict", "size: seconds", "why"], rows


def _html_limits_probes(report: ReportJSON) -> list[str]:
    """The limits-probes section (only with --limits-probes): the growth curve of each family."""
    if not report.get("limits_probes"):
        return []
    header, rows = _limits_probe_rows(report)
    return [
        "<h2>Limits probes</h2>",
        f'<p class="note">{_h(_LIMITS_PROBES_NOTE)}</p>',
        _html_table(header, rows),
    ]


def _html_instances(report: ReportJSON) -> list[str]:
    """The instances-walked section: counts per source, totals first."""
    header, rows_i = _instance_table(report)
    return [
        "<h2>Instances walked</h2>",
        f'<p class="note">{_h(_INSTANCES_NOTE)}</p>',
        _html_table(header, rows_i) if rows_i else "<p>None recorded.</p>",
        *(
            ["<h2>Coverage per spec</h2>", f'<p class="note">{_h(_COVERAGE_NOTE)}</p>']
            + [_html_table(list(_COVERAGE_COLUMNS), rows_c)]
            if (rows_c := _coverage_rows(report))
            else []
        ),
    ]


def _html_timings(report: ReportJSON) -> list[str]:
    """The mask-time section: percentile table, then a histogram per tokenizer with mask timings."""
    p = ["<h2>Mask-time statistics</h2>"]
    rows_t = _timing_rows(report)
    if not rows_t:
        p.append("<p>No timings.</p>")
        return p
    p.append(
        _html_table(
            ["tokenizer", "measure", "n", "p50 ms", "p99 ms", "max ms"],
            [
                [t, k, str(h.get("n", 0)), _num(h.get("p50")), _num(h.get("p99")), _num(h.get("max"))]
                for t, k, h in rows_t
            ],
        )
    )
    for tok, entry in report.get("timings", {}).items():
        b, r = entry.get("backend_mask_ms"), entry.get("reference_mask_ms")
        if isinstance(b, dict) or isinstance(r, dict):
            p.append(f"<h3>{_h(tok)}: mask time</h3>")
            p.append(_svg_histogram(b if isinstance(b, dict) else {}, r if isinstance(r, dict) else {}))
    return p


def _html_finding(f: FindingJSON) -> str:
    facts = [("message", str(f.get("message", ""))), *_facts(f)]
    cert = f.get("certificate") or {}
    facts += [(f"certificate: {k}", v) for k, v in _cert_items(cert, _special_names(f))]
    dl = "".join(f"<dt>{_h(k)}</dt><dd><code>{_h(v)}</code></dd>" for k, v in facts)
    ops = _ops(cert)
    ops_html = ""
    if ops:
        ops_html = (
            "<p>Operations:</p><ol>" + "".join(f"<li><code>{_h(op)}</code></li>" for op in ops) + "</ol>"
        )
    fid = f.get("id", "")
    return (
        f'<details id="finding-{_anchor(fid)}" open><summary>Finding {_h(fid)}: {_h(f.get("invariant", ""))} '
        f'<span class="sev sev-{_anchor(f.get("severity", ""))}">{_h(f.get("severity", ""))}</span></summary>'
        f"<dl>{dl}</dl>{ops_html}<p>Spec source:</p><pre>{_h(_spec_source(f))}</pre></details>"
    )


def _svg_invariant_bars(report: ReportJSON) -> list[str]:
    """Per invariant, summed over tokenizers: checks (green) and findings (red) as bars on one log
    scale, so a few findings stand out next to thousands of checks. Nothing when nothing ran."""
    totals: list[tuple[str, int, int]] = []
    for inv in _invariants(report):
        row = invariant_counts(report).get(inv, {})
        cells = [c for c in row.values() if isinstance(c, dict)] if isinstance(row, dict) else []
        checks = sum(int(c.get("checks") or 0) for c in cells)
        found = sum(int(c.get("findings") or 0) for c in cells)
        if checks or found:
            totals.append((inv, checks, found))
    if not totals:
        return []
    label_w, bar_w, row_h, top = 170, 470, 22, 24
    width, height = label_w + bar_w + 120, top + row_h * len(totals) + 26
    scale = math.log10(1 + max(max(c, f) for _, c, f in totals))

    def length(n: int) -> float:
        return bar_w * math.log10(1 + n) / scale if n else 0.0

    parts = [
        # no xmlns: inline in HTML the parser puts <svg> in the SVG namespace (and the page names no URL)
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="checks and findings per invariant">',
        f'<rect x="{label_w}" y="6" width="10" height="10" fill="#2f9e44"/>'
        f'<text x="{label_w + 14}" y="15">checks</text>'
        f'<rect x="{label_w + 70}" y="6" width="10" height="10" fill="#c92a2a"/>'
        f'<text x="{label_w + 84}" y="15">findings (log scale)</text>',
    ]
    for i, (inv, checks, found) in enumerate(totals):
        y = top + i * row_h
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_h(inv)}</text>')
        parts.append(
            f'<rect x="{label_w}" y="{y + 3}" width="{length(checks):.1f}" height="8" fill="#2f9e44">'
            f"<title>{_h(f'{inv}: {checks} checks')}</title></rect>"
        )
        parts.append(
            f'<rect x="{label_w}" y="{y + 12}" width="{length(found):.1f}" height="8" fill="#c92a2a">'
            f"<title>{_h(f'{inv}: {found} findings')}</title></rect>"
        )
        end = label_w + max(length(checks), length(found)) + 6
        parts.append(f'<text x="{end:.1f}" y="{y + 14}">{checks} / {found}</text>')
    parts.append(
        f'<text x="{label_w}" y="{height - 6}">bars: log10(1 + n); numbers: checks / findings</text></svg>'
    )
    return ["<h3>Checks and findings per invariant</h3>", "".join(parts)]


def _svg_histogram(backend: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    """Grouped bars per bin: backend (orange) vs reference (blue); log-spaced ms on the x axis."""
    edges = list(backend.get("edges") or reference.get("edges") or HISTOGRAM_EDGES_MS)
    nbins = len(edges) - 1

    def counts(h: Mapping[str, Any]) -> list[int]:
        c = [int(x) for x in (h.get("counts") or [])][:nbins]
        return c + [0] * (nbins - len(c))

    cb, cr = counts(backend), counts(reference)
    width, height, left, bottom, top = 760, 220, 44, 34, 26
    plot_w, plot_h = width - left - 10, height - top - bottom
    peak = max(cb + cr + [1])
    group = plot_w / max(nbins, 1)
    bar = group * 0.4
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#555"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#555"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{peak}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    for i in range(nbins):
        x0 = left + i * group + group * 0.1
        for j, (c, colour) in enumerate(((cb[i], "#e8590c"), (cr[i], "#1c7ed6"))):
            if c:
                h = plot_h * c / peak
                parts.append(
                    f'<rect x="{x0 + j * bar:.1f}" y="{top + plot_h - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{_h(f"{edges[i]:g}–{edges[i + 1]:g} ms: {c}")}</title></rect>'
                )
    for i, e in enumerate(edges):
        if i % _BINS_PER_DECADE == 0:
            x = left + i * group
            parts.append(
                f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#555"/>'
            )
            parts.append(
                f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_h(f"{e:g}")}</text>'
            )
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 3}" text-anchor="middle">ms per mask</text>'
    )
    nb, nr = backend.get("n", 0), reference.get("n", 0)
    parts.append(
        f'<rect x="{left + 8}" y="6" width="10" height="10" fill="#e8590c"/>'
        f'<text x="{left + 22}" y="15">backend (n={_h(nb)}, p50 {_h(_num(backend.get("p50")))} ms)</text>'
    )
    parts.append(
        f'<rect x="{left + 268}" y="6" width="10" height="10" fill="#1c7ed6"/>'
        f'<text x="{left + 282}" y="15">reference (n={_h(nr)}, p50 {_h(_num(reference.get("p50")))} ms)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
