"""``maskcert bench certify``: what certifying costs, per engine, and where the time goes.

For each backend (default: the reference and xgrammar; ``--backend`` repeatable), :func:`run_certify_bench`
runs :func:`maskcert.certify` on the same real schemas (default: the first 10 of JSONSchemaBench's
``Github_easy``) with the same vocabulary (default: the 128k ``deepseek-v3-litellm``), then writes
the report to a temporary folder, and reads each pair's clock (:mod:`props.checks.clock`): every
second of a checked spec is either maskcert's own or inside one of the engine's calls (measured where
maskcert calls the adapter, so through a worker the round trip counts as the engine's unless
``isolate=False`` runs the adapter in this process). Per backend it reports:

* ``own_s``: maskcert's own seconds per checked spec (median, p90), the issue's target;
* ``engine_s``: seconds inside the engine's calls per checked spec (median, p90);
* ``marginal_s``: what one more spec costs, all in: the checks (median, p90, mean) and, amortized
  over the specs, defect minimization and report writing (``mean_all``);
* ``phases``: per exclusive phase (reference compile, reference masks, walks, targeted instances,
  number instances, searches, segmentation search, ..., minimization, report writing) maskcert's own
  and the engine's seconds per spec and the engine calls, largest first.

One-time costs (vocabulary and its tables, corpus, backend start) are apart: they are not per spec. The table's
ratio column compares each backend's marginal cost with the reference's certify of itself. The
seconds above are wall-clock; ``process_cpu_s`` (this process's CPU over the run, per spec in the
table) is maskcert's own work without the waiting, the figure to trust on a busy machine.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_BACKENDS", "DEFAULT_SCHEMAS", "run_certify_bench", "format_table"]

DEFAULT_SCHEMAS = "jsonschemabench:Github_easy"
DEFAULT_BACKENDS = ("reference", "xgrammar")


def _what(schemas: str | Path | None, limit: int) -> tuple[str, dict[str, Any]]:
    """A label and the :class:`maskcert.CertifyConfig` fields that certify at most ``limit`` specs of
    ``schemas``: a folder or file of specs (loaded here), else a corpus name."""
    from props.corpus import load_corpus

    given = str(schemas) if schemas is not None else DEFAULT_SCHEMAS
    if Path(given).exists():
        return f"{given} (first {limit})", {"corpus": (), "cases": tuple(load_corpus(given, limit=limit))}
    name = f"{given}:limit={limit}"
    return name, {"corpus": (name,)}


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"median": 0.0, "p90": 0.0, "mean": 0.0}
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, max(0, -(-9 * len(ordered) // 10) - 1))]
    return {
        "median": round(statistics.median(ordered), 4),
        "p90": round(p90, 4),
        "mean": round(statistics.fmean(ordered), 4),
    }


def run_certify_bench(
    tokenizer: str = "deepseek-v3-litellm",
    limit: int = 10,
    *,
    examples: int = 8,
    engines: Sequence[str] | None = None,
    schemas: str | Path | None = None,
    minimize_s: float = 15.0,
    isolate: bool | None = None,
) -> dict[str, Any]:
    """Certify each of ``engines`` (default :data:`DEFAULT_BACKENDS`; "reference" is the reference
    certifying itself) on ``limit`` specs of ``schemas`` (a folder, a file or a corpus name; default
    :data:`DEFAULT_SCHEMAS`) with ``tokenizer``, ``examples`` per Hypothesis search and ``minimize_s``
    per defect; ``isolate`` as :class:`maskcert.CertifyConfig`'s. Per backend: its profile, specs
    checked, findings, wall time and the split described in the module doc."""
    from maskcert.certification import CertifyConfig, CertifyError, certify
    from props.backends import BackendUnavailable, adapter_class

    names = list(engines if engines else DEFAULT_BACKENDS)
    corpus, what = _what(schemas, limit)
    out: dict[str, Any] = {
        "tokenizer": tokenizer,
        "limit": limit,
        "corpus": corpus,
        "examples": examples,
        "minimize_s": minimize_s,
        "isolate": isolate,
        "backends": {},
    }
    unavailable: dict[str, str] = {}
    config = CertifyConfig(
        tokenizers=(tokenizer,),
        examples=examples,
        minimize_s=minimize_s,
        isolate=isolate,
        progress=False,
        **what,
    )
    for name in names:
        if name != "reference":
            try:
                adapter_class(name)
            except BackendUnavailable as e:
                unavailable[name] = str(e)
                continue
        t0 = time.monotonic()
        cpu0 = time.process_time()
        try:
            report = certify(name, config)
        except CertifyError as e:
            unavailable[name] = str(e)
            continue
        with tempfile.TemporaryDirectory(prefix="maskcert-bench-") as tmp:
            t_write = time.perf_counter()
            report.write(Path(tmp) / "report")
            write_s = time.perf_counter() - t_write
        d = report.to_json()
        out["backends"][name] = {
            "version": report.backend.version,
            "wall_s": round(time.monotonic() - t0, 3),
            # CPU seconds of this process over the whole run (checks, minimization, report): maskcert's
            # own work (and the adapter's, when it runs here), robust to other load on the machine.
            "process_cpu_s": round(time.process_time() - cpu0, 3),
            "specs": d["specs"],
            "findings": len(report.findings),
            "defects": len(report.defects),
            "profile": d["profile"],
            **_split(d["profile"], write_s),
        }
    out["unavailable"] = unavailable
    return out


def _split(profile: dict[str, Any], write_s: float) -> dict[str, Any]:
    """own_s, engine_s, marginal_s and phases (per spec) from a certify profile (module doc)."""
    n = max(1, int(profile["spec_s"]["n"]))
    own, engine = profile["own_s"], profile["engine_s"]
    minimize = profile.get("minimize") or {"own_s": 0.0, "engine_s": 0.0, "engine_calls": 0, "phases": {}}
    checks_total = own["total"] + engine["total"]
    phases: dict[str, dict[str, float]] = {}
    for name, p in profile["split_s"].items():
        phases[name] = {
            "own_s": round(p["own_s"] / n, 4),
            "engine_s": round(p["engine_s"] / n, 4),
            "engine_calls": round(p["engine_calls"] / n, 1),
        }
    phases["minimization"] = {
        "own_s": round(minimize["own_s"] / n, 4),
        "engine_s": round(minimize["engine_s"] / n, 4),
        "engine_calls": round(minimize["engine_calls"] / n, 1),
    }
    phases["report writing"] = {"own_s": round(write_s / n, 4), "engine_s": 0.0, "engine_calls": 0.0}
    ordered = dict(sorted(phases.items(), key=lambda kv: -(kv[1]["own_s"] + kv[1]["engine_s"])))
    return {
        "own_s": {"median": own["median"], "p90": own["p90"], "mean": round(own["total"] / n, 4)},
        "engine_s": {"median": engine["median"], "p90": engine["p90"], "mean": round(engine["total"] / n, 4)},
        "marginal_s": {
            "median": profile["spec_s"]["median"],
            "mean": round(checks_total / n, 4),
            "mean_all": round((checks_total + minimize["own_s"] + minimize["engine_s"] + write_s) / n, 4),
        },
        "engine_calls_per_spec": round(profile["engine_calls"] / n, 1),
        "phases": ordered,
    }


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{float(x):.3g}"


def format_table(result: dict[str, Any]) -> str:
    """Markdown: per backend maskcert's own and the engine's seconds per spec, the marginal cost per
    spec and its ratio to the reference's certify of itself, one-time costs; then each backend's
    phases per spec, largest first."""
    backends: dict[str, Any] = result["backends"]
    ref = backends.get("reference", {}).get("marginal_s", {}).get("mean_all")
    lines = [
        f"certify on {result.get('corpus', result['limit'])}, {result['tokenizer']}, "
        f"{result['examples']} examples per search, minimization {result.get('minimize_s', 0):g} s per defect",
        "",
        "| backend | version | specs checked | own s/spec median | own p90 | engine s/spec median | "
        "engine p90 | marginal s/spec median | marginal mean (all) | vs reference | engine calls/spec | "
        "backend start s | wall s | process CPU s/spec | findings | defects |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, b in backends.items():
        own, eng, marg = b.get("own_s", {}), b.get("engine_s", {}), b.get("marginal_s", {})
        cpu = b.get("process_cpu_s")
        ratio = f"{marg['mean_all'] / ref:.2f}×" if ref and marg.get("mean_all") else "–"
        lines.append(
            f"| {name} | {b['version']} | {b['specs']['checked']}/{b['specs']['total']} | "
            f"{_fmt(own.get('median'))} | {_fmt(own.get('p90'))} | {_fmt(eng.get('median'))} | "
            f"{_fmt(eng.get('p90'))} | {_fmt(marg.get('median'))} | {_fmt(marg.get('mean_all'))} | {ratio} | "
            f"{_fmt(b.get('engine_calls_per_spec'))} | {_fmt(b['profile']['setup_s'].get('start backend'))} | "
            f"{_fmt(b['wall_s'])} | {_fmt(cpu / max(1, b['specs']['checked']) if cpu is not None else None)} | "
            f"{b['findings']} | {b.get('defects', '–')} |"
        )
    for name, b in backends.items():
        lines += [
            "",
            f"where {name}'s time goes per spec (exclusive phases; engine = inside the engine's calls):",
            "",
            "| phase | own s | engine s | engine calls |",
            "|---|---|---|---|",
        ]
        for phase, p in b.get("phases", {}).items():
            lines.append(f"| {phase} | {p['own_s']:.4f} | {p['engine_s']:.4f} | {p['engine_calls']:g} |")
    for name, why in result.get("unavailable", {}).items():
        lines.append(f"\n{name}: not run ({why})")
    return "\n".join(lines)
