"""Compile time over JSONSchemaBench schemas: the reference and each installed engine, one vocabulary.

Behind ``maskcert bench compile``. Every backend goes through its adapter (``props.backends``), so
"compile" means what ``Backend.compile`` does for that engine: the reference builds its byte-level
grammar and the token layer over it (lexeme tables are built lazily, at the first masks); xgrammar
builds its adaptive token-mask cache up front; llguidance validates the grammar (its lexer is built
lazily too); outlines-core builds the whole token index; lm-format-enforcer builds a parser object.
Because the split between compile and first mask differs by engine, each schema is also timed to its
*first mask* (``matcher()`` and one ``mask()`` after the compile); ``ready`` is the two together, the
latency a request actually waits for before its first constrained step.

Theory of operation. Each backend runs in its own worker process (``spawn``), which loads the
vocabulary, builds the backend and warms it with a one-line schema (per-vocabulary set-up: tokenizer
info, compilers — timed apart as ``setup_s``). The parent sends one schema at a time and waits at most
``timeout_s``; a compile that runs past it (outlines-core's DFA construction can take minutes) is
killed with its worker, counted as a timeout, and a fresh worker takes the next schema. The backends
run one after another, never together, so they do not share the CPU. ``xgrammar`` runs with its
compile cache off and one thread, as the reference does.

Outcomes per schema: ``compiled``, ``refused`` (the adapter's typed ``Refused``), ``timeout``, or
``error`` (any other exception: for a third-party engine a finding for ``maskcert certify``).
Ratios are ``reference / engine`` of the medians over the schemas *both* compiled (above 1: the
reference is slower), as ``maskcert bench masks`` reports its steps.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from maskcert.bench.masks import BenchCase, load_cases
from props.backends import ENGINES

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


# -- the worker (one backend, one vocabulary) ------------------------------------------------------


def _load_vocabulary(ref: str) -> Any:
    import tokenizers_matrix

    return tokenizers_matrix.resolve(ref)


def _compile_one(backend: Any, vocab: Any, schema: Any, profile: Any) -> tuple[Any, ...]:
    from props.contract.backend import Compiled
    from refdecoder import JsonSchema

    try:
        spec = JsonSchema(schema, profile)
        t0 = time.perf_counter()
        outcome = backend.compile(spec, vocab)
        t1 = time.perf_counter()
        if not isinstance(outcome, Compiled):
            return ("refused", (t1 - t0) * 1e3, str(getattr(outcome, "reason", outcome))[:200])
        backend.matcher(outcome).mask()
        t2 = time.perf_counter()
    except Exception as e:  # noqa: BLE001 - reported as an outcome: any other exception is a finding
        return ("error", 0.0, f"{type(e).__name__}: {str(e)[:160]}")
    return ("compiled", (t1 - t0) * 1e3, (t2 - t1) * 1e3)


def _worker(conn: _Duplex, vocab_ref: str, name: str, options: dict[str, Any]) -> None:
    from props.backends import load_backend
    from refdecoder import JsonProfile

    try:
        t0 = time.perf_counter()
        vocab = _load_vocabulary(vocab_ref)
        backend = load_backend(name, **options)
        profile = JsonProfile(allow_duplicate_keys=True)
        _compile_one(backend, vocab, _WARM_SCHEMA, profile)
        conn.send(("ready", time.perf_counter() - t0, str(getattr(backend, "version", ""))))
    except Exception as e:  # noqa: BLE001 - a missing or broken engine is reported, not fatal
        conn.send(("unavailable", f"{type(e).__name__}: {str(e)[:200]}", ""))
        return
    while True:
        schema = conn.recv()
        if schema is None:
            return
        conn.send(_compile_one(backend, vocab, schema, profile))


def _serve(read_fd: int, write_fd: int, vocab_ref: str, name: str, options_json: str) -> None:
    """The worker's entry point (``python -c``): serve one backend over the two pipe ends."""
    import json

    conn = _Duplex(Connection(read_fd, writable=False), Connection(write_fd, readable=False))
    _worker(conn, vocab_ref, name, json.loads(options_json))


class _Duplex:
    """Two one-way connections as one (``send``/``recv``/``poll``)."""

    def __init__(self, reader: Connection, writer: Connection) -> None:
        self.reader, self.writer = reader, writer

    def send(self, obj: Any) -> None:
        self.writer.send(obj)

    def recv(self) -> Any:
        return self.reader.recv()

    def poll(self, timeout: float) -> bool:
        return self.reader.poll(timeout)

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


class _Worker:
    """A worker process for one backend, and the pipes to it. A fresh interpreter (not ``fork``: torch's
    thread pools do not survive it; not ``multiprocessing`` spawn: it re-imports the caller's script)."""

    def __init__(self, vocab_ref: str, name: str, options: Mapping[str, Any], setup_timeout_s: float) -> None:
        import json
        import os
        import sys

        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        code = (
            "import sys; from maskcert.bench.compile import _serve; "
            "_serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])"
        )
        # The engines' warnings go here; its last line explains a dead worker. Closed in close().
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115
        argv = [str(to_child_r), str(from_child_w), vocab_ref, name, json.dumps(dict(options))]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *argv],
            pass_fds=(to_child_r, from_child_w),
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.conn = _Duplex(Connection(from_child_r, writable=False), Connection(to_child_w, readable=False))
        self.hello: tuple[str, Any, str]
        if not self.conn.poll(setup_timeout_s):
            self.close(kill=True)
            self.hello = ("unavailable", f"set-up took over {setup_timeout_s:.0f}s", "")
            return
        try:
            self.hello = tuple(self.conn.recv())
        except EOFError:
            self.hello = ("unavailable", f"worker died during set-up (exit {self.proc.wait()}){self.tail()}", "")

    def tail(self) -> str:
        self.stderr.seek(0)
        lines = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
        return f": {lines[-1][:200]}" if lines else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def compile(self, schema: Any, timeout_s: float) -> tuple[Any, ...]:
        self.conn.send(schema)
        if not self.conn.poll(timeout_s):
            return ("timeout", timeout_s * 1e3, f"over {timeout_s:g}s")
        try:
            return tuple(self.conn.recv())
        except EOFError:
            return ("error", 0.0, f"worker died (exit {self.proc.wait()}){self.tail()}")

    def close(self, kill: bool = False) -> None:
        if self.alive() and not kill:
            try:
                self.conn.send(None)
                self.proc.wait(2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        self.conn.close()
        self.stderr.close()


# -- the run ---------------------------------------------------------------------------------------


def _run_backend(
    vocab_ref: str,
    name: str,
    options: Mapping[str, Any],
    cases: Sequence[BenchCase],
    timeout_s: float,
    setup_timeout_s: float,
) -> dict[str, Any]:
    first = _Worker(vocab_ref, name, options, setup_timeout_s)
    if first.hello[0] != "ready":
        first.close()
        return {"unavailable": first.hello[1]}
    setup_s, version = float(first.hello[1]), first.hello[2]
    worker: _Worker | None = first
    per_schema: dict[str, dict[str, Any]] = {}
    restarts = 0
    try:
        for case in cases:
            if worker is None:
                fresh = _Worker(vocab_ref, name, options, setup_timeout_s)
                restarts += 1
                if fresh.hello[0] != "ready":
                    fresh.close()
                    per_schema[case.name] = {"status": "error", "note": f"restart failed: {fresh.hello[1]}"}
                    continue
                worker = fresh
            status, ms, extra = worker.compile(case.schema, timeout_s)
            rec: dict[str, Any] = {"status": status}
            if status == "compiled":
                rec.update(compile_ms=ms, first_mask_ms=extra, ready_ms=ms + extra)
            else:
                rec["note"] = extra
            per_schema[case.name] = rec
            if status == "timeout" or not worker.alive():  # a killed or dead worker is replaced
                worker.close(kill=status == "timeout")
                worker = None
    finally:
        if worker is not None:
            worker.close()
    counts = Counter(r["status"] for r in per_schema.values())
    done = [r for r in per_schema.values() if r["status"] == "compiled"]
    return {
        "version": version,
        "options": dict(options),
        "setup_s": setup_s,
        "restarts": restarts,
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
    both = [n for n, r in ref.items() if r["status"] == "compiled" and eng.get(n, {}).get("status") == "compiled"]
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

    ``vocab`` is a ``tokenizers_matrix`` name or a tokenizer file (each worker process loads it).
    Returns a JSON-serializable dict: ``vocab``, ``schemas`` (how many), ``timeout_s``, ``reference``
    and ``engines`` (per backend: counts, ``compile``/``first_mask``/``ready`` summaries, per-schema
    records, ``ratio_compile``/``ratio_ready`` with ``paired``: the number of schemas both compiled),
    ``unavailable`` (backend -> why it was omitted), ``elapsed_s``.
    """
    start = time.perf_counter()
    cases = load_cases(schemas_dir, limit, categories)
    reference = _run_backend(vocab, "reference", options.get("reference", {}), cases, timeout_s, setup_timeout_s)
    if "unavailable" in reference:
        from refdecoder.errors import MaskcertError

        raise MaskcertError(f"bench compile: the reference could not start: {reference['unavailable']}")
    engines: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}
    for name in backends:
        rec = _run_backend(vocab, name, options.get(name, {}), cases, timeout_s, setup_timeout_s)
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
