"""Per-step mask timing over JSONSchemaBench walks: the reference, llguidance and xgrammar.

For each schema of the dev set (``<schemas_dir>/<Category>/*.json``, each ``{schema, tests: [{data,
valid}]}``), compile it, then walk the canonical tokenization of ``json.dumps(data)`` for its valid
instances, timing ``mask()`` before every token and once after the last (where EOS must be allowed).
Schemas the reference refuses (``Unsupported``, ``LimitExceeded``, ``SpecError``) are counted by
reason, never timed. Engines that are installed run the same walks; an engine that refuses a schema
or rejects a token of the walk stops there (counted), and mask disagreements with the reference are
counted per step (they are findings for ``props``, not measured here).

*Cold* steps are the first visit of a state (a mask-cache miss, lexeme tables possibly built);
*warm* steps are cache hits.
"""

from __future__ import annotations

import importlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from props.contract.backend import Refused
from refdecoder import Accepted, JsonProfile, JsonSchema, Matcher, TokenGrammar, VocabularyLike, token_trie
from refdecoder.errors import LimitExceeded, MaskcertError, SpecError, Unsupported

__all__ = ["BenchCase", "load_cases", "run_mask_bench", "format_table", "summarize"]


@dataclass(frozen=True)
class BenchCase:
    name: str  # "<Category>/<file stem>"
    schema: Any
    instances: tuple[Any, ...]  # the valid instances


def load_cases(
    schemas_dir: str | Path, limit: int | None = None, categories: Iterable[str] | None = None
) -> list[BenchCase]:
    """The dataset's cases, sorted by name; ``limit`` spreads evenly over the categories."""
    root = Path(schemas_dir)
    cats = (
        sorted(categories) if categories is not None else sorted(p.name for p in root.iterdir() if p.is_dir())
    )
    per_cat = [sorted((root / c).glob("*.json")) for c in cats]
    files: list[Path] = []
    if limit is None:
        files = [f for fs in per_cat for f in fs]
    else:
        k = 0
        while len(files) < limit and any(k < len(fs) for fs in per_cat):
            files += [fs[k] for fs in per_cat if k < len(fs)][: limit - len(files)]
            k += 1
    out = []
    for f in files:
        raw = json.loads(f.read_text(encoding="utf-8"))
        valid = tuple(t["data"] for t in raw.get("tests", []) if t.get("valid"))
        out.append(BenchCase(f"{f.parent.name}/{f.stem}", raw["schema"], valid))
    return out


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """count, median, p99, max, mean (milliseconds) and total (seconds)."""
    if not seconds:
        return {"count": 0}
    a = np.asarray(seconds) * 1e3
    return {
        "count": int(a.size),
        "median_ms": float(np.median(a)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
        "mean_ms": float(a.mean()),
        "total_s": float(a.sum() / 1e3),
    }


# -- engines ---------------------------------------------------------------------------------------


# Adapter options for timing: no compile cache and one thread for xgrammar (every schema compiles
# afresh, as the reference does), no extra checks in the way (strict_mode off), no engine logging.
_BENCH_OPTIONS: dict[str, dict[str, Any]] = {
    "xgrammar": {"strict_mode": False, "max_threads": 1, "cache_enabled": False},
    "llguidance": {"log_level": 0},
}


class _Engine:
    """A registered backend adapter (:mod:`props.backends`) driven for timing: the benchmark goes
    through the same code that certify checks, not a copy of it."""

    def __init__(self, name: str, vocab: VocabularyLike) -> None:
        from props.backends import load_backend

        self.name = name
        self.backend = load_backend(name, **_BENCH_OPTIONS.get(name, {}))
        self.vocab = vocab
        self.profile = JsonProfile(allow_duplicate_keys=True)

    def compile(self, schema: Any) -> Any:
        """The compiled handle; raises on a refusal (counted by the caller)."""
        out = self.backend.compile(JsonSchema(schema, self.profile), self.vocab)
        if isinstance(out, Refused):
            raise ValueError(out.reason)
        return out

    def matcher(self, compiled: Any) -> Any:
        return self.backend.matcher(compiled)

    def mask(self, matcher: Any) -> np.ndarray:
        return np.asarray(matcher.mask())

    def accept(self, matcher: Any, token_id: int) -> bool:
        return isinstance(matcher.accept(token_id), Accepted)


# -- the run ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Walking:
    """How valid instances become walks: the vocabulary's codec and the per-case limits."""

    encode: Callable[[str], Iterable[int]]
    decode: Callable[[list[int]], bytes] | None
    max_instances: int
    max_tokens: int

    def ids(self, instance: Any) -> list[int] | None:
        """``json.dumps(instance)``'s canonical token ids; None if they do not round-trip or are too many."""
        text = json.dumps(instance)
        ids = list(self.encode(text))
        if (self.decode is not None and self.decode(ids) != text.encode()) or len(ids) > self.max_tokens:
            return None
        return ids


@dataclass
class _EngineTally:
    """One engine's measurements over the run."""

    steps: list[float] = field(default_factory=list)
    compile: list[float] = field(default_factory=list)
    refused: int = 0
    rejected_walks: int = 0
    disagreeing_steps: int = 0
    paired: list[tuple[float, float]] = field(default_factory=list)  # (reference, engine) step times


@dataclass
class _Tally:
    """What the run measured and counted, accumulated case by case."""

    engines: dict[str, _EngineTally]
    refused: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    ref_steps: list[float] = field(default_factory=list)
    ref_cold: list[float] = field(default_factory=list)
    ref_warm: list[float] = field(default_factory=list)
    ref_compile: list[float] = field(default_factory=list)
    ref_rejected_walks: int = 0
    walks: int = 0
    skipped_walks: int = 0
    compiled: int = 0
    stats_total: Counter[str] = field(default_factory=Counter)
    last_stats: dict[str, Any] | None = None


def _reference_compile(schema: Any, profile: dict[str, Any]) -> Any:
    from refdecoder import compile_json_schema

    return compile_json_schema(schema, **profile)


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` and the seconds it took."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def _start_engines(
    vocab: VocabularyLike, engines: Sequence[str]
) -> tuple[dict[str, _Engine], dict[str, str], dict[str, float]]:
    """The engines that start, the errors of those that do not, and each one's setup time."""
    live: dict[str, _Engine] = {}
    engine_errors: dict[str, str] = {}
    engine_setup_s: dict[str, float] = {}
    for name in engines:
        t0 = time.perf_counter()
        try:
            live[name] = _Engine(name, vocab)
        except Exception as e:  # noqa: BLE001 - a missing/broken engine is reported, not fatal
            engine_errors[name] = repr(e)[:200]
        engine_setup_s[name] = time.perf_counter() - t0
    return live, engine_errors, engine_setup_s


def _reference_grammar(
    schema: Any, vocab: VocabularyLike, profile: dict[str, Any], cache_bytes: int, tally: _Tally
) -> TokenGrammar | None:
    """The reference's token grammar for ``schema`` (compile time tallied); None if it refuses or fails."""
    t0 = time.perf_counter()
    try:
        g = _reference_compile(schema, profile)
        tg = TokenGrammar(g, vocab, cache_bytes=cache_bytes)
    except (Unsupported, LimitExceeded, SpecError) as e:
        key = getattr(e, "keyword", None) or getattr(e, "limit", None) or type(e).__name__
        tally.refused[f"{type(e).__name__}:{key}"] += 1
        return None
    except Exception as e:  # noqa: BLE001 - counted: any other exception is a reference bug
        tally.errors[f"{type(e).__name__}: {str(e)[:80]}"] += 1
        return None
    tally.ref_compile.append(time.perf_counter() - t0)
    tally.compiled += 1
    return tg


def _engine_handles(live: dict[str, _Engine], schema: Any, tally: _Tally) -> dict[str, Any]:
    """Each live engine's compiled ``schema`` (compile time tallied); a refusal is counted instead."""
    handles: dict[str, Any] = {}
    for name, engine in live.items():
        t0 = time.perf_counter()
        try:
            handles[name] = engine.compile(schema)
            tally.engines[name].compile.append(time.perf_counter() - t0)
        except Exception:  # noqa: BLE001 - an engine refusal
            tally.engines[name].refused += 1
    return handles


def _time_masks(
    m: Matcher, tg: TokenGrammar, live: dict[str, _Engine], ems: dict[str, Any], tally: _Tally
) -> None:
    """Time one step's mask on the reference (cold or warm) and on each engine still walking."""
    before = tg.stats()["misses"]
    ref_mask, dt = _timed(m.mask)
    tally.ref_steps.append(dt)
    (tally.ref_cold if tg.stats()["misses"] > before else tally.ref_warm).append(dt)
    for n in list(ems):
        em, edt = _timed(live[n].mask, ems[n])
        rec = tally.engines[n]
        rec.steps.append(edt)
        rec.paired.append((dt, edt))
        if not np.array_equal(em, ref_mask):
            rec.disagreeing_steps += 1


def _accept_all(m: Matcher, live: dict[str, _Engine], ems: dict[str, Any], token: int, tally: _Tally) -> bool:
    """Feed ``token`` to the reference, then to the engines still walking; False if the reference rejects."""
    if not isinstance(m.accept(token), Accepted):
        tally.ref_rejected_walks += 1
        return False
    for n in list(ems):
        if not live[n].accept(ems[n], token):
            tally.engines[n].rejected_walks += 1
            del ems[n]
    return True


def _walk(
    tg: TokenGrammar, ids: list[int], live: dict[str, _Engine], handles: dict[str, Any], tally: _Tally
) -> None:
    """Time the masks along one walk of ``ids``: before every token and once after the last."""
    tally.walks += 1
    m = Matcher(tg)
    ems = {n: live[n].matcher(h) for n, h in handles.items()}
    for k in range(len(ids) + 1):
        _time_masks(m, tg, live, ems, tally)
        if k == len(ids) or not _accept_all(m, live, ems, ids[k], tally):
            break


def _bench_case(
    case: BenchCase,
    vocab: VocabularyLike,
    live: dict[str, _Engine],
    profile: dict[str, Any],
    cache_bytes: int,
    walking: _Walking,
    tally: _Tally,
) -> None:
    """Compile one case on the reference and the engines, then walk its first valid instances."""
    tg = _reference_grammar(case.schema, vocab, profile, cache_bytes, tally)
    if tg is None:
        return
    handles = _engine_handles(live, case.schema, tally)
    for instance in case.instances[: walking.max_instances]:
        ids = walking.ids(instance)
        if ids is None:
            tally.skipped_walks += 1
            continue
        _walk(tg, ids, live, handles, tally)
    counted = ("hits", "misses", "lexeme_path", "full_walks")
    tally.stats_total.update({k: v for k, v in tg.stats().items() if k in counted})
    tally.last_stats = tg.stats()  # trie and lexeme tables are per vocabulary: the last one has them all


def _schema_counts(total: int, tally: _Tally) -> dict[str, Any]:
    """The result's ``schemas`` entry: cases read, compiled, refused and failed (by reason)."""
    return {
        "total": total,
        "compiled": tally.compiled,
        "refused": sum(tally.refused.values()),
        "refused_by": dict(tally.refused.most_common()),
        "errors": sum(tally.errors.values()),
        "errors_by": dict(tally.errors.most_common(10)),
    }


def _reference_summary(tally: _Tally) -> dict[str, Any]:
    """The result's ``reference`` entry: step times overall, cold and warm, compile times, rejections."""
    return {
        "steps": summarize(tally.ref_steps),
        "cold": summarize(tally.ref_cold),
        "warm": summarize(tally.ref_warm),
        "compile": summarize(tally.ref_compile),
        "rejected_walks": tally.ref_rejected_walks,
    }


def _median_ratio(paired: list[tuple[float, float]]) -> float:
    """Median reference step time over median engine step time on the same steps (NaN without data)."""
    return (
        float(np.median([r for r, _ in paired]) / np.median([x for _, x in paired]))
        if paired and np.median([x for _, x in paired]) > 0
        else math.nan
    )


def _engine_summary(rec: _EngineTally) -> dict[str, Any]:
    """One engine's entry of the result's ``engines``."""
    return {
        "steps": summarize(rec.steps),
        "compile": summarize(rec.compile),
        "refused": rec.refused,
        "rejected_walks": rec.rejected_walks,
        "disagreeing_steps": rec.disagreeing_steps,
        "reference_over_engine_median": _median_ratio(rec.paired),
    }


def run_mask_bench(
    vocab: VocabularyLike,
    schemas_dir: str | Path,
    limit: int | None = 50,
    *,
    categories: Iterable[str] | None = None,
    engines: Sequence[str] = ("llguidance", "xgrammar"),
    max_instances: int = 3,
    max_tokens: int = 2048,
    time_budget_s: float | None = None,
    cache_bytes: int = 256 << 20,
    profile: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Time every ``mask()`` along canonical walks of valid instances; see the module docstring.

    Returns a JSON-serializable dict: ``schemas`` (counts, refusals by reason), ``reference`` and one
    entry per engine (step-time summaries overall/cold/warm, compile times, rejections,
    disagreements, and ``reference_over_engine_median``: the reference's median step time over the
    engine's on the same steps) and
    ``cache`` (the reference's cache statistics). ``profile`` holds ``JsonProfile`` options for the
    reference; the default allows duplicate keys, as both engines do (they keep no key memory).
    """
    profile = {"allow_duplicate_keys": True} if profile is None else profile
    start = time.perf_counter()
    trie, trie_s = _timed(token_trie, vocab)
    importlib.import_module("numpy.ma")  # np.unique imports it on its first call (~25 ms): not a mask's cost
    cases = load_cases(schemas_dir, limit, categories)
    encode = getattr(vocab, "encode", None)
    if encode is None:
        raise MaskcertError(
            "run_mask_bench needs a vocabulary with encode() (a tokenizers_matrix.Vocabulary)"
        )
    walking = _Walking(encode, getattr(vocab, "decode", None), max_instances, max_tokens)
    live, engine_errors, engine_setup_s = _start_engines(vocab, engines)
    tally = _Tally(engines={n: _EngineTally() for n in live})
    for case in cases:
        if time_budget_s is not None and time.perf_counter() - start > time_budget_s:
            break
        _bench_case(case, vocab, live, profile, cache_bytes, walking, tally)

    result: dict[str, Any] = {
        "vocab": {"name": getattr(vocab, "name", ""), "size": trie.vocab_size, "trie_nodes": trie.num_nodes},
        "trie_build_s": trie_s,
        "schemas": _schema_counts(len(cases), tally),
        "profile": profile,
        "walks": tally.walks,
        "walks_skipped": tally.skipped_walks,
        "reference": _reference_summary(tally),
        "cache": {**dict(tally.stats_total), **_cache_part(tally.last_stats or {})},
        "engines": {},
        "engine_errors": engine_errors,
        "engine_setup_s": engine_setup_s,
        "elapsed_s": time.perf_counter() - start,
    }
    result["engines"] = {n: _engine_summary(rec) for n, rec in tally.engines.items()}
    return result


def _cache_part(stats: dict[str, Any]) -> dict[str, Any]:
    keys = ("lexeme_tables", "lexeme_table_bytes", "lexeme_table_hits", "lexeme_table_misses", "trie_bytes")
    return {k: stats[k] for k in keys if k in stats}


def format_table(result: dict[str, Any]) -> str:
    """A Markdown summary of :func:`run_mask_bench`'s result."""
    s = result["schemas"]
    lines = [
        f"vocabulary {result['vocab']['name']!r}: {result['vocab']['size']} tokens, "
        f"trie {result['vocab']['trie_nodes']} nodes built in {result['trie_build_s']:.2f}s",
        f"schemas: {s['total']} read, {s['compiled']} compiled, {s['refused']} refused, {s['errors']} errors; "
        f"walks: {result['walks']} ({result['walks_skipped']} skipped)",
        "",
        "| who | steps | median ms | p99 ms | max ms | compile median ms | notes |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]

    def row(who: str, st: dict[str, float], comp: dict[str, float], notes: str) -> str:
        if not st.get("count"):
            return f"| {who} | 0 | | | | | {notes} |"
        cm = f"{comp['median_ms']:.1f}" if comp.get("count") else ""
        return (
            f"| {who} | {st['count']} | {st['median_ms']:.3f} | {st['p99_ms']:.2f} | {st['max_ms']:.1f} "
            f"| {cm} | {notes} |"
        )

    ref = result["reference"]
    lines.append(row("reference", ref["steps"], ref["compile"], f"rejected walks {ref['rejected_walks']}"))
    lines.append(row("reference (cold)", ref["cold"], {}, "first visit of a state"))
    lines.append(row("reference (warm)", ref["warm"], {}, "mask cache hit"))
    for n, e in result["engines"].items():
        notes = (
            f"refused {e['refused']}, rejected walks {e['rejected_walks']}, "
            f"steps differing from reference {e['disagreeing_steps']}, "
            f"reference/engine median {e['reference_over_engine_median']:.1f}x"
        )
        lines.append(row(n, e["steps"], e["compile"], notes))
    for n, err in result.get("engine_errors", {}).items():
        lines.append(f"| {n} | — | | | | | unavailable: {err} |")
    if s["refused_by"]:
        lines += ["", "refusals: " + ", ".join(f"{k} ×{v}" for k, v in s["refused_by"].items())]
    if s["errors_by"]:
        lines += ["errors: " + ", ".join(f"{k} ×{v}" for k, v in s["errors_by"].items())]
    c = result.get("cache", {})
    if c:
        lines += ["cache: " + ", ".join(f"{k}={v}" for k, v in c.items())]
    return "\n".join(lines)
