"""One benchmark report from the parts (masks, compile, sampler, serving): ``maskcert bench all``.

:func:`gather` turns each part's result (what ``run_mask_bench``, ``run_compile_bench``,
``run_sampler_bench`` and ``run_serving_bench`` return) into rows of one shape — part, measure,
setting, the reference's value, and per third-party engine its value and a ratio — and
:func:`format_markdown` prints them as one table with a ratio column per engine. Every ratio compares
numbers measured in the same run, on the same machine.

A ratio says how many times the reference costs what the engine costs: above 1 the reference is
slower. For times that is reference / engine; for throughputs engine / reference. Where a part pairs
its measurements (mask steps on the same walk, schemas both compiled) the part's paired ratio is used,
so a ratio may differ from the quotient of the two medians shown beside it.

A part is given as its result, as ``None`` or left out (shown as *not run*), as ``{"skipped": why}``
(*not run: why*) or as ``{"error": message}`` (*failed*); none of these stop the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from props.backends import ENGINES
from refdecoder.errors import MaskcertError

__all__ = [
    "PARTS",
    "ENGINE_ORDER",
    "SIZES",
    "PartNotRun",
    "gather",
    "format_markdown",
    "clean_json",
    "find_schemas",
    "run_part",
    "part_table",
]

PARTS = ("masks", "compile", "sampler", "serving", "certify")
ENGINE_ORDER = ENGINES

Row = dict[str, Any]


def _num(x: Any) -> float | None:
    """A finite float, else None (JSON has no NaN)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def _div(a: Any, b: Any) -> float | None:
    a, b = _num(a), _num(b)
    return None if a is None or b is None or b <= 0 else a / b


def clean_json(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None, tuples as lists: strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def _row(part: str, measure: str, setting: str, unit: str, reference: Any) -> Row:
    return {
        "part": part,
        "measure": measure,
        "setting": setting,
        "unit": unit,
        "reference": _num(reference),
        "engines": {},
    }


def _engine(row: Row, name: str, value: Any, ratio: Any) -> None:
    row["engines"][name] = {"value": _num(value), "ratio": _num(ratio)}


# -- one function per part -------------------------------------------------------------------------


def _masks(result: Mapping[str, Any]) -> tuple[list[Row], list[str]]:
    """``{vocabulary name: run_mask_bench result}`` (what the CLI collects), or one result."""
    per_vocab = {result["vocab"]["name"]: result} if "vocab" in result else result
    rows: list[Row] = []
    notes: list[str] = []
    for vname, r in per_vocab.items():
        s = r["schemas"]
        setting = f"{vname}, {s['compiled']}/{s['total']} schemas, {r['walks']} walks"
        row = _row("masks", "mask step, median", setting, "ms", r["reference"]["steps"].get("median_ms"))
        for name, e in r["engines"].items():
            _engine(row, name, e["steps"].get("median_ms"), e.get("reference_over_engine_median"))
            if e.get("disagreeing_steps"):
                notes.append(
                    f"masks ({vname}): {name} differs from the reference on {e['disagreeing_steps']} steps"
                )
        rows.append(row)
        cold = _row("masks", "mask step, cold, median", vname, "ms", r["reference"]["cold"].get("median_ms"))
        rows.append(cold)
        for name, why in r.get("engine_errors", {}).items():
            notes.append(f"masks ({vname}): {name} unavailable: {why}")
    return rows, notes


def _compile(result: Mapping[str, Any]) -> tuple[list[Row], list[str]]:
    """A :func:`maskcert.bench.compile.run_compile_bench` result."""
    ref = result["reference"]
    setting = f"{result['vocab']}, {result['schemas']} schemas"
    measures = (
        ("compile", "compile, median", "ratio_compile"),
        ("ready", "compile + first mask, median", "ratio_ready"),
    )
    rows: list[Row] = []
    for key, label, ratio_key in measures:
        row = _row("compile", label, setting, "ms", ref[key].get("median_ms"))
        for name, e in result["engines"].items():
            _engine(row, name, e[key].get("median_ms"), e.get(ratio_key))
        rows.append(row)
    count = _row("compile", "schemas compiled", setting, "count", ref["compiled"])
    for name, e in result["engines"].items():
        _engine(count, name, e["compiled"], None)
    rows.append(count)
    notes = [f"compile: {name} unavailable: {why}" for name, why in result.get("unavailable", {}).items()]
    for name, e in result["engines"].items():
        if e.get("timeouts") or e.get("errors"):
            notes.append(
                f"compile: {name} timed out on {e['timeouts']} and raised on {e['errors']} schemas "
                f"(over {result['timeout_s']:g}s counts as a timeout; not in the medians)"
            )
    return rows, notes


def _sampler(result: Sequence[Mapping[str, Any]]) -> tuple[list[Row], list[str]]:
    """:func:`maskcert.bench.sampler.run_sampler_bench` rows."""
    rows: list[Row] = []
    by_shape: dict[tuple[int, int, int], Row] = {}
    for r in result:
        setting = f"batch {r['batch']} x vocab {r['vocab']}, {r['threads']} thread(s)"
        if r["op"] == "sample":
            rows.append(
                _row(
                    "sampler", f"sample {r['impl'].removeprefix('maskcert ')}", setting, "ms", r["median_ms"]
                )
            )
            continue
        key = (r["batch"], r["vocab"], r["threads"])
        if r["impl"] == "maskcert":
            by_shape[key] = _row("sampler", "apply_token_bitmask, median", setting, "ms", r["median_ms"])
            rows.append(by_shape[key])
        elif key in by_shape:
            ours = by_shape[key]
            _engine(ours, r["impl"], r["median_ms"], _div(ours["reference"], r["median_ms"]))
    return rows, []


def _serving(result: Mapping[str, Any]) -> tuple[list[Row], list[str]]:
    """A :func:`maskcert.bench.serving.run_serving_bench` result."""
    ref = result["reference"]
    setting = f"{result['requests']} requests, seed {result['seed']}"
    measures: tuple[tuple[str, str, str, bool], ...] = (
        ("tokens_per_s", "throughput", "tokens/s", True),
        ("steps_per_s", "steps", "steps/s", True),
        ("mask_ms_mean", "mask per step, mean", "ms", False),
        ("mask_ms_p50", "mask per step, median", "ms", False),
    )
    rows: list[Row] = []
    for key, label, unit, higher_is_better in measures:
        row = _row("serving", label, setting, unit, ref[key])
        for name, e in result["engines"].items():
            ratio = _div(e[key], ref[key]) if higher_is_better else _div(ref[key], e[key])
            _engine(row, name, e[key], ratio)
        rows.append(row)
    notes = [f"serving: {name} unavailable: {why}" for name, why in result.get("unavailable", {}).items()]
    for name, e in result["engines"].items():
        if e.get("violations"):
            notes.append(
                f"serving: {name} run saw {e['violations']} invariant violations "
                f"(`maskcert simulate --backend {name}`)"
            )
    return rows, notes


def _certify(result: Mapping[str, Any]) -> tuple[list[Row], list[str]]:
    """A :func:`maskcert.bench.certify.run_certify_bench` result: certifying each engine per spec
    against the reference certifying itself (reference / engine, as for every time)."""
    backends = result["backends"]
    setting = f"{result['tokenizer']}, {result['limit']} schemas"
    rows: list[Row] = []
    for label, key in (("certify per spec, median", "median"), ("certify per spec, p95", "p95")):
        ref = backends.get("reference", {}).get("profile", {}).get("spec_s", {}).get(key)
        row = _row("certify", label, setting, "s", ref)
        for name, b in backends.items():
            if name != "reference":
                value = b["profile"]["spec_s"].get(key)
                _engine(row, name, value, _div(ref, value))
        rows.append(row)
    ref_own = backends.get("reference", {}).get("own_s", {}).get("median")
    own = _row("certify", "maskcert's own per spec, median", setting, "s", ref_own)
    for name, b in backends.items():
        if name != "reference" and "own_s" in b:
            _engine(own, name, b["own_s"].get("median"), None)
    rows.append(own)
    start = _row("certify", "one-time: backend start", setting, "s", None)
    for name, b in backends.items():
        if name != "reference":
            _engine(start, name, b["profile"]["setup_s"].get("start backend"), None)
    rows.append(start)
    notes = [f"certify: {name} unavailable: {why}" for name, why in result.get("unavailable", {}).items()]
    return rows, notes


_PART_ROWS: Mapping[str, Callable[[Any], tuple[list[Row], list[str]]]] = {
    "certify": _certify,
    "masks": _masks,
    "compile": _compile,
    "sampler": _sampler,
    "serving": _serving,
}


def gather(parts: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One report from the parts' results (see the module docstring for what a part may be).

    Returns a JSON-serializable dict: ``status`` (part -> "ok" | "not run" | "not run: why" |
    "failed: message"), ``engines`` (every third-party engine with a number in some row), ``rows``,
    ``notes``, ``meta`` and ``results`` (the parts as given, NaN as null).
    """
    status: dict[str, str] = {}
    rows: list[Row] = []
    notes: list[str] = []
    for part in [*PARTS, *(p for p in parts if p not in PARTS)]:
        value = parts.get(part)
        if value is None:
            status[part] = "not run"
        elif isinstance(value, Mapping) and "error" in value:
            status[part] = f"failed: {value['error']}"
        elif isinstance(value, Mapping) and "skipped" in value:
            status[part] = f"not run: {value['skipped']}"
        elif part not in _PART_ROWS:
            status[part] = "not run: unknown part"
        else:
            try:
                got, part_notes = _PART_ROWS[part](value)
            except (KeyError, TypeError, AttributeError) as e:
                status[part] = f"failed: unreadable result ({type(e).__name__}: {e})"
                continue
            status[part] = "ok"
            rows += got
            notes += part_notes
    seen = {name for row in rows for name in row["engines"]}
    engines = [n for n in ENGINE_ORDER if n in seen] + sorted(seen - set(ENGINE_ORDER))
    return clean_json(
        {
            "status": status,
            "engines": engines,
            "rows": rows,
            "notes": notes,
            "meta": dict(meta or {}),
            "results": {k: v for k, v in parts.items() if v is not None},
        }
    )


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None:
        return "—"
    if unit == "count" or x == 0 or abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _fmt_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def format_markdown(gathered: Mapping[str, Any]) -> str:
    """The gathered report as Markdown: part status, one table with a ratio column per engine, notes."""
    engines: list[str] = list(gathered["engines"])
    lines = ["# maskcert bench", ""]
    meta = gathered.get("meta") or {}
    if meta:
        lines += [", ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    lines += ["| part | status |", "|---|---|"]
    lines += [f"| {part} | {st} |" for part, st in gathered["status"].items()]
    lines += [
        "",
        "Ratio = how many times the reference costs what the engine costs, measured in this run "
        "(above 1: the reference is slower; times reference/engine, throughputs engine/reference).",
        "",
    ]
    header = ["part", "measure", "setting", "unit", "reference"]
    for name in engines:
        header += [name, f"ratio {name}"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * 4 + "---:|" * (1 + 2 * len(engines))]
    for row in gathered["rows"]:
        cells = [
            row["part"],
            row["measure"],
            row["setting"],
            row["unit"],
            _fmt(row["reference"], row["unit"]),
        ]
        for name in engines:
            e = row["engines"].get(name)
            if e is None:
                cells += ["", ""]
            else:
                cells += [_fmt(e["value"], row["unit"]), _fmt_ratio(e["ratio"])]
        lines.append("| " + " | ".join(cells) + " |")
    if not gathered["rows"]:
        lines.append("| (no part ran) |" + " |" * (len(header) - 1))
    if gathered.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in gathered["notes"]]
    return "\n".join(lines) + "\n"


# -- running the parts (what ``maskcert bench`` calls) ---------------------------------------------

# Sizes per part: ``full`` is what ``maskcert bench PART`` runs, ``small`` what ``bench all`` runs
# (a few minutes on two cores).
SIZES: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    "full": {
        "masks": {"limit": 50, "budget": None},
        "compile": {"limit": 24, "timeout": 10.0},
        "sampler": {"repeat": 50, "batch_sizes": (1, 8, 64), "vocab_sizes": (32000, 128000)},
        "serving": {"requests": 24},
        "certify": {"limit": 10, "examples": 8, "minimize": 15.0, "backends": None, "isolate": None},
    },
    "small": {
        "masks": {"limit": 12, "budget": 90.0},
        "compile": {"limit": 16, "timeout": 5.0},
        "sampler": {"repeat": 20, "batch_sizes": (1, 8), "vocab_sizes": (32000, 128000)},
        "serving": {"requests": 16},
        "certify": {
            "limit": 3,
            "examples": 2,
            "minimize": 0.0,
            "backends": ("reference", *ENGINES),
            "isolate": None,
        },
    },
}


class PartNotRun(MaskcertError, LookupError):
    """A part cannot run here (its data is missing); ``bench all`` shows it as not run with this reason,
    ``bench PART`` exits 2 with it. Fix: give the data's folder (``--schemas DIR``)."""


def find_schemas(given: str | None) -> Path:
    """``given``, else the shared ``jsonschemabench-maskbench`` folder; ``PartNotRun`` if absent."""
    import tokenizers_matrix

    shared = tokenizers_matrix.shared_data_dir()
    if given:
        path = Path(given)
    elif shared is not None:
        path = shared / "jsonschemabench-maskbench"
    else:
        path = Path("jsonschemabench-maskbench")
    if not path.exists():
        raise PartNotRun(f"{path} not found: give --schemas DIR (or set MASKCERT_SHARED_DATA)")
    return path


def run_part(
    part: str,
    size: str = "full",
    *,
    tokenizers: Sequence[str] = ("deepseek-v3-litellm",),
    schemas: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    threads: int = 1,
) -> Any:
    """Run one part at ``size`` ("full" or "small"), options in ``overrides`` (None values ignored)
    taking precedence; return its result (JSON-serializable)."""
    opts = {**SIZES[size][part], **{k: v for k, v in (overrides or {}).items() if v is not None}}
    if part == "masks":
        import tokenizers_matrix
        from maskcert.bench.masks import run_mask_bench

        folder = find_schemas(schemas)
        out = {}
        for name in tokenizers:
            vocab = tokenizers_matrix.resolve(name)
            out[vocab.name] = run_mask_bench(vocab, folder, limit=opts["limit"], time_budget_s=opts["budget"])
        return out
    if part == "compile":
        from maskcert.bench.compile import run_compile_bench

        return run_compile_bench(
            tokenizers[0], find_schemas(schemas), opts["limit"], timeout_s=opts["timeout"]
        )
    if part == "sampler":
        from maskcert.bench.sampler import run_sampler_bench

        return run_sampler_bench(
            opts["batch_sizes"], opts["vocab_sizes"], threads=threads, repeat=opts["repeat"]
        )
    if part == "serving":
        from maskcert.bench.serving import run_serving_bench

        return run_serving_bench(opts["requests"])
    if part == "certify":
        from maskcert.bench.certify import run_certify_bench

        if schemas is None or not Path(schemas).exists():
            find_schemas(None)  # PartNotRun without the JSONSchemaBench data (for a corpus name)
        return run_certify_bench(
            tokenizers[0],
            opts["limit"],
            examples=opts["examples"],
            engines=opts["backends"],
            schemas=schemas,
            minimize_s=opts["minimize"],
            isolate=opts["isolate"],
        )
    raise ValueError(f"unknown benchmark part {part!r}: expected one of {PARTS}")


def part_table(part: str, result: Any) -> str:
    """The part's own table (what ``maskcert bench PART`` prints)."""
    if part == "masks":
        from maskcert.bench.masks import format_table as masks_table

        return "\n\n".join(f"## {name}\n{masks_table(r)}" for name, r in result.items())
    if part == "compile":
        from maskcert.bench.compile import format_table as compile_table

        return compile_table(result)
    if part == "sampler":
        from maskcert.bench.sampler import format_table as sampler_table

        return sampler_table(result)
    if part == "certify":
        from maskcert.bench.certify import format_table as certify_table

        return certify_table(result)
    from maskcert.bench.serving import format_table as serving_table

    return serving_table(result)
