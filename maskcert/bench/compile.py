"""Compile time over JSONSchemaBench schemas: the reference and each installed engine, one vocabulary.

Behind ``maskcert bench compile``. Every backend goes through its adapter (``props.backends``), so
"compile" means what ``Backend.compile`` does for that engine: the reference builds its byte-level
grammar and the token layer over it (lexeme tables are built lazily, at the first masks); xgrammar
builds its adaptive token-mask cache up front; llguidance validates the grammar (its lexer is built
lazily too); outlines-core builds the whole token index; lm-format-enforcer builds a parser object.
Because the split between compile and first mask differs by engine, each schema is also timed to its
*first mask* (``matcher()`` and one ``mask()`` after the compile); ``ready`` is the two together, the
latency a request actually waits for before its first constrained step.

Theory of operation. Each backend runs in its own :class:`props.backends.worker.WorkerBackend`
worker process, which builds the backend and is warmed with a one-line schema (per-vocabulary set-up:
tokenizer info, compilers — timed apart as ``setup_s``). One schema at a time is compiled there and
its first mask taken; both are timed in the worker (``Compiled.compile_ms`` and
``WorkerBackend.first_mask_ms``), so the pipe is not counted. Each waits at most ``timeout_s``; a
compile that runs past it (outlines-core's DFA construction can take minutes) is killed with its
worker, counted as a timeout, and a fresh, warmed worker takes the next schema, as after a crash. The
backends run one after another, never together, so they do not share the CPU. ``xgrammar`` runs with
its compile cache off and one thread, as the reference does.

Outcomes per schema: ``compiled``, ``refused`` (the adapter's typed ``Refused``), ``timeout``, or
``error`` (any other exception: for a third-party engine a finding for ``maskcert certify``).
Ratios are ``reference / engine`` of the medians over the schemas *both* compiled (above 1: the
reference is slower), as ``maskcert bench masks`` reports its steps.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tokenizers_matrix
from maskcert.bench.masks import BenchCase, load_cases
from props.backends import ENGINES
from props.backends.worker import RemoteError, WorkerBackend, WorkerCrashed, WorkerError, WorkerTimeout
from props.contract.backend import Compiled
from refdecoder import JsonProfile, JsonSchema
from refdecoder.errors import MaskcertError
from tokenizers_matrix import Vocabulary

__all__ = ["DEFAULT_BACKENDS", "DEFAULT_OPTIONS", "run_compile_bench", "format_table", "summarize"]

DEFAULT_BACKENDS = ENGINES
DEFAULT_OPTIONS: Mapping[str, Mapping[str, Any]] = {"xgrammar": {"cache_enabled": False, "max_threads": 1}}
_WARM_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def summarize(ms: Sequence[float]) -> dict[str, float]:
    """count, median, p90, max and mean of milliseconds."""
    if not ms:
        return {"count": 0}
    a = np.asarray(ms, dtype=np.float64)
    return {
        "count": int(a.size),
        "median_ms": float(np.median(a)),
        "p90_ms": float(np.percentile(a, 90)),
        "max_ms": float(a.max()),
        "mean_ms": float(a.mean()),
    }


# -- one backend -----------------------------------------------------------------------------------


def _last_line(log: str) -> str:
    lines = log.strip().splitlines()
    return f": {lines[-1][:200]}" if lines else ""


def _note(e: Exception, limit: int = 160) -> str:
    """What a schema's record says about an exception from the worker."""
    if isinstance(e, WorkerTimeout):
        return f"over {e.timeout_s:g}s"
    if isinstance(e, WorkerCrashed):
        return f"worker died (exit {e.returncode}){_last_line(e.log_tail)}"
    if isinstance(e, RemoteError):
        return f"{e.type_name}: {e.message[:limit]}"
    return f"{type(e).__name__}: {str(e)[:limit]}"


def _setup_failure(e: Exception) -> str:
    """Why a worker could not be set up (the backend's ``unavailable`` entry)."""
    if isinstance(e, WorkerTimeout):
        return f"set-up took over {e.timeout_s:.0f}s"
    if isinstance(e, WorkerCrashed):
        return f"worker died during set-up (exit {e.returncode}){_last_line(e.log_tail)}"
    return _note(e, 200)


def _warm(
    worker: WorkerBackend, vocabulary: Vocabulary, profile: JsonProfile, setup_timeout_s: float
) -> None:
    """Compile a one-line schema and take its first mask, so that the per-vocabulary set-up (tokenizer
    info, compilers) is not charged to the first measured schema. Bounded by ``setup_timeout_s``; a
    hang or a crash is raised, any other failure ignored (the schemas will show it)."""
    limits = worker.timeout_s, worker.compile_timeout_s
    worker.timeout_s = worker.compile_timeout_s = setup_timeout_s
    try:
        outcome = worker.compile(JsonSchema(_WARM_SCHEMA, profile), vocabulary)
        if isinstance(outcome, Compiled):
            worker.first_mask_ms(outcome)
    except Exception as e:  # noqa: BLE001 - only a dead worker stops the set-up
        if isinstance(e, (WorkerTimeout, WorkerCrashed)):
            raise
    finally:
        worker.timeout_s, worker.compile_timeout_s = limits


def _measure(
    worker: WorkerBackend, schema: Any, vocabulary: Vocabulary, profile: JsonProfile
) -> dict[str, Any]:
    """One schema's record: compile and first-mask times (both timed in the worker), or why not."""
    try:
        outcome = worker.compile(JsonSchema(schema, profile), vocabulary)
        if not isinstance(outcome, Compiled):
            return {"status": "refused", "note": str(outcome.reason)[:200]}
        first = worker.first_mask_ms(outcome)
    except WorkerTimeout as e:
        return {"status": "timeout", "note": _note(e)}
    except Exception as e:  # noqa: BLE001 - reported as an outcome: any other exception is a finding
        return {"status": "error", "note": _note(e)}
    ms = outcome.compile_ms
    return {"status": "compiled", "compile_ms": ms, "first_mask_ms": first, "ready_ms": ms + first}


def _run_backend(
    vocabulary: Vocabulary,
    name: str,
    options: Mapping[str, Any],
    cases: Sequence[BenchCase],
    timeout_s: float,
    setup_timeout_s: float,
) -> dict[str, Any]:
    profile = JsonProfile(allow_duplicate_keys=True)
    t0 = time.perf_counter()
    try:  # no memory limit: a compile is measured here, not policed
        worker = WorkerBackend(
            name,
            options=dict(options),
            timeout_s=timeout_s,
            compile_timeout_s=timeout_s,
            memory_mb=0,
            start_timeout_s=setup_timeout_s,
        )
    except Exception as e:  # noqa: BLE001 - a missing or broken engine is reported, not fatal
        return {"unavailable": _setup_failure(e)}
    per_schema: dict[str, dict[str, Any]] = {}
    try:
        try:
            _warm(worker, vocabulary, profile, setup_timeout_s)
        except WorkerError as e:
            return {"unavailable": _setup_failure(e)}
        setup_s = time.perf_counter() - t0
        for case in cases:
            if not worker.alive:  # killed after a timeout, or dead: a fresh, warmed worker
                try:
                    worker.restart()
                    _warm(worker, vocabulary, profile, setup_timeout_s)
                except Exception as e:  # noqa: BLE001 - the schema is an error; the next one tries again
                    worker.close()
                    note = f"restart failed: {_setup_failure(e)}"
                    per_schema[case.name] = {"status": "error", "note": note}
                    continue
            per_schema[case.name] = _measure(worker, case.schema, vocabulary, profile)
    finally:
        worker.close()
    counts = Counter(r["status"] for r in per_schema.values())
    done = [r for r in per_schema.values() if r["status"] == "compiled"]
    return {
        "version": worker.version,
        "options": dict(options),
        "setup_s": setup_s,
        "restarts": worker.restarts,
        "compiled": counts["compiled"],
        "refused": counts["refused"],
        "timeouts": counts["timeout"],
        "errors": counts["error"],
        "compile": summarize([r["compile_ms"] for r in done]),
        "first_mask": summarize([r["first_mask_ms"] for r in done]),
        "ready": summarize([r["ready_ms"] for r in done]),
        "refused_by": dict(
            Counter(r["note"] for r in per_schema.values() if r["status"] == "refused").most_common(5)
        ),
        "errors_by": dict(
            Counter(r["note"] for r in per_schema.values() if r["status"] == "error").most_common(5)
        ),
        "schemas": per_schema,
    }


def _ratio(reference: dict[str, Any], engine: dict[str, Any], key: str) -> tuple[float | None, int]:
    """reference median / engine median of ``key`` over the schemas both compiled, and their number."""
    ref, eng = reference["schemas"], engine["schemas"]
    both = [
        n for n, r in ref.items() if r["status"] == "compiled" and eng.get(n, {}).get("status") == "compiled"
    ]
    if not both:
        return None, 0
    r = float(np.median([ref[n][key] for n in both]))
    e = float(np.median([eng[n][key] for n in both]))
    return (r / e if e > 0 else None), len(both)


def run_compile_bench(
    vocab: str,
    schemas_dir: str | Path,
    limit: int | None = 24,
    *,
    backends: Iterable[str] = DEFAULT_BACKENDS,
    options: Mapping[str, Mapping[str, Any]] = DEFAULT_OPTIONS,
    categories: Iterable[str] | None = None,
    timeout_s: float = 10.0,
    setup_timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Time ``Backend.compile`` (and the first mask) for each schema on the reference and ``backends``.

    ``vocab`` is a ``tokenizers_matrix`` name or a tokenizer file (loaded here, sent to each worker).
    Returns a JSON-serializable dict: ``vocab``, ``schemas`` (how many), ``timeout_s``, ``reference``
    and ``engines`` (per backend: counts, ``compile``/``first_mask``/``ready`` summaries, per-schema
    records, ``ratio_compile``/``ratio_ready`` with ``paired``: the number of schemas both compiled),
    ``unavailable`` (backend -> why it was omitted), ``elapsed_s``.
    """
    start = time.perf_counter()
    cases = load_cases(schemas_dir, limit, categories)
    vocabulary = tokenizers_matrix.resolve(vocab)
    reference = _run_backend(
        vocabulary, "reference", options.get("reference", {}), cases, timeout_s, setup_timeout_s
    )
    if "unavailable" in reference:
        raise MaskcertError(f"bench compile: the reference could not start: {reference['unavailable']}")
    engines: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}
    for name in backends:
        rec = _run_backend(vocabulary, name, options.get(name, {}), cases, timeout_s, setup_timeout_s)
        if "unavailable" in rec:
            unavailable[name] = rec["unavailable"]
            continue
        rec["ratio_compile"], rec["paired"] = _ratio(reference, rec, "compile_ms")
        rec["ratio_ready"], _ = _ratio(reference, rec, "ready_ms")
        engines[name] = rec
    return {
        "vocab": vocab,
        "schemas": len(cases),
        "timeout_s": timeout_s,
        "reference": reference,
        "engines": engines,
        "unavailable": unavailable,
        "elapsed_s": time.perf_counter() - start,
    }


def _ms(s: Mapping[str, float], key: str) -> str:
    return f"{s[key]:.2f}" if s.get("count") else ""


def _x(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.2f}x"


def format_table(result: Mapping[str, Any]) -> str:
    """A Markdown table of :func:`run_compile_bench`'s result."""
    lines = [
        f"compile: vocabulary {result['vocab']!r}, {result['schemas']} schemas, "
        f"{result['timeout_s']:g}s per compile; ratio = reference / engine (medians over schemas both compiled)",
        "",
        "| backend | compiled | refused | timeout | error | median ms | p90 ms | max ms | ready median ms "
        "| ratio compile | ratio ready | paired |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(name: str, r: Mapping[str, Any]) -> str:
        c = r["compile"]
        return (
            f"| {name} | {r['compiled']} | {r['refused']} | {r['timeouts']} | {r['errors']} "
            f"| {_ms(c, 'median_ms')} | {_ms(c, 'p90_ms')} | {_ms(c, 'max_ms')} | {_ms(r['ready'], 'median_ms')} "
            f"| {_x(r.get('ratio_compile'))} | {_x(r.get('ratio_ready'))} | {r.get('paired', '')} |"
        )

    lines.append(row("reference", result["reference"]))
    for name, rec in result["engines"].items():
        lines.append(row(f"{name} {rec.get('version', '')}".strip(), rec))
    for name, why in result.get("unavailable", {}).items():
        lines.append(f"| {name} | — | | | | | | | | | | omitted: {why} |")
    return "\n".join(lines)
