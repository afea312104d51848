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

import json
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from refdecoder._matcher import Accepted, Matcher
from refdecoder._tokens import TokenGrammar, VocabularyLike, token_trie
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


class _Engine:
    name = ""

    def compile(self, schema: Any) -> Any:  # returns a handle; raises on refusal
        raise NotImplementedError

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def mask(self, matcher: Any) -> np.ndarray:
        raise NotImplementedError

    def accept(self, matcher: Any, token_id: int) -> bool:
        raise NotImplementedError


class _XGrammar(_Engine):
    name = "xgrammar"

    def __init__(self, vocab: VocabularyLike) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        size = len(vocab.token_bytes)
        encoded = [b"" if b is None else b for b in vocab.token_bytes]  # empty = special for xgrammar
        info = xgr.TokenizerInfo(
            encoded, xgr.VocabType.RAW, vocab_size=size, stop_token_ids=sorted(vocab.eos_ids)
        )
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, size)

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def mask(self, matcher: Any) -> np.ndarray:
        matcher.fill_next_token_bitmask(self.bitmask, 0)
        return self.bitmask[0].numpy()

    def accept(self, matcher: Any, token_id: int) -> bool:
        return bool(matcher.accept_token(token_id))


class _LLGuidance(_Engine):
    name = "llguidance"

    def __init__(self, vocab: VocabularyLike) -> None:
        import llguidance
        import llguidance.numpy as lln

        self.llg = llguidance
        self.lln = lln
        size = len(vocab.token_bytes)
        eos = sorted(vocab.eos_ids)
        encode = getattr(vocab, "encode", None)

        class _Wrapper:  # what llguidance.TokenizerWrapper reads
            eos_token_id = eos[0]
            bos_token_id = None
            # llguidance marks special tokens with a leading 0xFF byte.
            tokens = [b"\xff<special_%d>" % i if b is None else b for i, b in enumerate(vocab.token_bytes)]
            special_token_ids = sorted(vocab.special_ids)

            def __call__(self, s: str | bytes) -> list[int]:
                text = s.decode("utf-8", "replace") if isinstance(s, bytes) else s
                return list(encode(text)) if encode is not None else []

        self.tokenizer = llguidance.LLTokenizer(
            llguidance.TokenizerWrapper(_Wrapper()), n_vocab=size, eos_token=eos
        )
        self.bitmask = lln.allocate_token_bitmask(1, size)
        self.options: Any = {"whitespace_flexible": True, "json_allow_general_unicode_escapes": True}

    def compile(self, schema: Any) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults=self.options)
        probe = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if probe.is_error():
            raise ValueError(probe.get_error())
        return grammar

    def matcher(self, compiled: Any) -> Any:
        return self.llg.LLMatcher(self.tokenizer, compiled, log_level=0)

    def mask(self, matcher: Any) -> np.ndarray:
        self.lln.fill_next_token_bitmask(matcher, self.bitmask, 0)
        return self.bitmask[0]

    def accept(self, matcher: Any, token_id: int) -> bool:
        return bool(matcher.consume_token(token_id))


_ENGINES = {"xgrammar": _XGrammar, "llguidance": _LLGuidance}


# -- the run ---------------------------------------------------------------------------------------


def _reference_compile(schema: Any, profile: dict[str, Any]) -> Any:
    from refdecoder._compile import compile_json_schema

    return compile_json_schema(schema, **profile)


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
    disagreements), ``ratios`` (engine median / reference median over the same steps) and
    ``cache`` (the reference's cache statistics). ``profile`` holds ``JsonProfile`` options for the
    reference; the default allows duplicate keys, as both engines do (they keep no key memory).
    """
    profile = {"allow_duplicate_keys": True} if profile is None else profile
    start = time.perf_counter()
    t0 = time.perf_counter()
    trie = token_trie(vocab)
    trie_s = time.perf_counter() - t0
    cases = load_cases(schemas_dir, limit, categories)
    encode = getattr(vocab, "encode", None)
    decode = getattr(vocab, "decode", None)
    if encode is None:
        raise MaskcertError(
            "run_mask_bench needs a vocabulary with encode() (a tokenizers_matrix.Vocabulary)"
        )

    live: dict[str, _Engine] = {}
    engine_errors: dict[str, str] = {}
    engine_setup_s: dict[str, float] = {}
    for name in engines:
        t0 = time.perf_counter()
        try:
            live[name] = _ENGINES[name](vocab)
        except Exception as e:  # noqa: BLE001 - a missing/broken engine is reported, not fatal
            engine_errors[name] = repr(e)[:200]
        engine_setup_s[name] = time.perf_counter() - t0

    refused: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    ref_steps: list[float] = []
    ref_cold: list[float] = []
    ref_warm: list[float] = []
    ref_compile: list[float] = []
    ref_rejected_walks = 0
    walks = 0
    skipped_walks = 0
    eng: dict[str, dict[str, Any]] = {
        n: {
            "steps": [],
            "compile": [],
            "refused": 0,
            "rejected_walks": 0,
            "disagreeing_steps": 0,
            "paired": [],
        }
        for n in live
    }
    stats_total: Counter[str] = Counter()
    last_stats: dict[str, Any] | None = None
    compiled_count = 0
    for case in cases:
        if time_budget_s is not None and time.perf_counter() - start > time_budget_s:
            break
        t0 = time.perf_counter()
        try:
            g = _reference_compile(case.schema, profile)
            tg = TokenGrammar(g, vocab, cache_bytes=cache_bytes)
        except (Unsupported, LimitExceeded, SpecError) as e:
            key = getattr(e, "keyword", None) or getattr(e, "limit", None) or type(e).__name__
            refused[f"{type(e).__name__}:{key}"] += 1
            continue
        except Exception as e:  # noqa: BLE001 - counted: any other exception is a reference bug
            errors[f"{type(e).__name__}: {str(e)[:80]}"] += 1
            continue
        ref_compile.append(time.perf_counter() - t0)
        compiled_count += 1
        handles: dict[str, Any] = {}
        for name, engine in live.items():
            t0 = time.perf_counter()
            try:
                handles[name] = engine.compile(case.schema)
                eng[name]["compile"].append(time.perf_counter() - t0)
            except Exception:  # noqa: BLE001 - an engine refusal
                eng[name]["refused"] += 1
        for instance in case.instances[:max_instances]:
            text = json.dumps(instance)
            ids = list(encode(text))
            if (decode is not None and decode(ids) != text.encode()) or len(ids) > max_tokens:
                skipped_walks += 1
                continue
            walks += 1
            m = Matcher(tg)
            ems = {n: live[n].matcher(h) for n, h in handles.items()}
            for k in range(len(ids) + 1):
                before = tg.stats()["misses"]
                t0 = time.perf_counter()
                ref_mask = m.mask()
                dt = time.perf_counter() - t0
                ref_steps.append(dt)
                (ref_cold if tg.stats()["misses"] > before else ref_warm).append(dt)
                for n in list(ems):
                    t0 = time.perf_counter()
                    em = live[n].mask(ems[n])
                    edt = time.perf_counter() - t0
                    eng[n]["steps"].append(edt)
                    eng[n]["paired"].append((dt, edt))
                    if not np.array_equal(em, ref_mask):
                        eng[n]["disagreeing_steps"] += 1
                if k == len(ids):
                    break
                t = ids[k]
                if not isinstance(m.accept(t), Accepted):
                    ref_rejected_walks += 1
                    break
                for n in list(ems):
                    if not live[n].accept(ems[n], t):
                        eng[n]["rejected_walks"] += 1
                        del ems[n]
        counted = ("hits", "misses", "lexeme_path", "full_walks")
        stats_total.update({k: v for k, v in tg.stats().items() if k in counted})
        last_stats = tg.stats()  # trie and lexeme tables are per vocabulary: the last one has them all

    ref_summary = summarize(ref_steps)
    result: dict[str, Any] = {
        "vocab": {"name": getattr(vocab, "name", ""), "size": trie.vocab_size, "trie_nodes": trie.num_nodes},
        "trie_build_s": trie_s,
        "schemas": {
            "total": len(cases),
            "compiled": compiled_count,
            "refused": sum(refused.values()),
            "refused_by": dict(refused.most_common()),
            "errors": sum(errors.values()),
            "errors_by": dict(errors.most_common(10)),
        },
        "profile": profile,
        "walks": walks,
        "walks_skipped": skipped_walks,
        "reference": {
            "steps": ref_summary,
            "cold": summarize(ref_cold),
            "warm": summarize(ref_warm),
            "compile": summarize(ref_compile),
            "rejected_walks": ref_rejected_walks,
        },
        "cache": {**dict(stats_total), **({} if last_stats is None else _cache_part(last_stats))},
        "engines": {},
        "engine_errors": engine_errors,
        "engine_setup_s": engine_setup_s,
        "elapsed_s": time.perf_counter() - start,
    }
    for n, rec in eng.items():
        paired = rec["paired"]
        ratio = (
            float(np.median([r for r, _ in paired]) / np.median([x for _, x in paired]))
            if paired and np.median([x for _, x in paired]) > 0
            else math.nan
        )
        result["engines"][n] = {
            "steps": summarize(rec["steps"]),
            "compile": summarize(rec["compile"]),
            "refused": rec["refused"],
            "rejected_walks": rec["rejected_walks"],
            "disagreeing_steps": rec["disagreeing_steps"],
            "reference_over_engine_median": ratio,
        }
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
