"""Time the reference compile of every JSONSchemaBench schema; print the slowest.

    python3 ci/compile_times.py                          # the whole dev set, profile "engines"
    python3 ci/compile_times.py --category Github_easy --limit 50 --top 5
    python3 ci/compile_times.py --json times.json        # every row, to compare two runs
    python3 ci/compile_times.py --compare before.json after.json   # status changes and the slowest

Each schema compiles once with ``refdecoder.compile(JsonSchema(schema, profile), Limits(...))`` in this
process (a fresh spec each time, so the compile memo never answers). A refusal (``Unsupported``,
``LimitExceeded``, ``SpecError``) is a row with its status, counted, not an error. The schemas come from
``$MASKCERT_SHARED_DATA/jsonschemabench-maskbench/<Category>/*.json`` (each ``{"schema": ..., ...}``);
the profiles are the ones ``tests/test_jsonschemabench.py`` uses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import refdecoder  # noqa: E402
from refdecoder import JsonProfile, LimitExceeded, Limits, SpecError, Unsupported  # noqa: E402

PROFILES = {
    "engines": JsonProfile(allow_duplicate_keys=True),
    "default": JsonProfile(),
}


def data_root() -> Path:
    env = os.environ.get("MASKCERT_SHARED_DATA")
    base = Path(env) if env else REPO.parent / "shared" / "data"
    return base / "jsonschemabench-maskbench"


def schema_files(root: Path, categories: list[str], limit: int | None, stride: int) -> list[Path]:
    """``limit`` (and ``stride``) apply per category, in file-name order."""
    out: list[Path] = []
    for cat in sorted(p for p in root.iterdir() if p.is_dir()):
        if categories and cat.name not in categories:
            continue
        files = sorted(cat.glob("*.json"))[::stride]
        out.extend(files[:limit] if limit is not None else files)
    return out


def status_of(spec: Any, limits: Limits) -> str:
    """``"compiled"``, or the refusal as the JSONSchemaBench baselines record it (with its reason)."""
    try:
        refdecoder.compile(spec, limits)
    except Unsupported as e:
        return f"refused: {e.keyword}: {e.reason}"
    except LimitExceeded as e:
        return f"refused: limit {e.limit}"
    except SpecError as e:
        return f"invalid: {e.what}"
    return "compiled"


def time_all(files: list[Path], profile: JsonProfile, limits: Limits, progress: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i, f in enumerate(files):
        schema = json.loads(f.read_text())["schema"]
        t0, c0 = time.perf_counter(), time.process_time()
        status = status_of(refdecoder.JsonSchema(schema, profile), limits)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        key = f"{f.parent.name}/{f.stem}"
        rows.append({"key": key, "seconds": round(seconds, 4), "cpu": round(cpu, 4), "status": status})
        if progress and (i + 1) % 100 == 0:
            print(f"  {i + 1}/{len(files)}", file=sys.stderr, flush=True)
    return rows


def summary(rows: list[dict[str, Any]], top: int) -> str:
    lines = []
    total = sum(r["seconds"] for r in rows)
    refused = sum(1 for r in rows if r["status"] != "compiled")
    budget = sum(1 for r in rows if "compile_seconds" in r["status"] or "compile_fuel" in r["status"])
    over2 = sum(1 for r in rows if r["seconds"] > 2.0)
    lines.append(
        f"{len(rows)} schemas, {total:.1f} s in all; {refused} refused ({budget} by the time/fuel budget); "
        f"{over2} over 2 s"
    )
    lines.append(f"the {min(top, len(rows))} slowest:")
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        cpu = f"{r['cpu']:7.3f} s cpu" if "cpu" in r else " " * 13
        lines.append(f"  {r['seconds']:8.3f} s  {cpu}  {r['key']:45s} {r['status'][:70]}")
    return "\n".join(lines)


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]], top: int) -> str:
    """Status changes between two runs (a budget refusal becoming a success is the only good one)."""
    b = {r["key"]: r for r in before}
    lines = []
    changed = 0
    for r in after:
        old = b.get(r["key"])
        if old is not None and old["status"] != r["status"]:
            changed += 1
            lines.append(
                f"  {r['key']}: {old['status'][:60]} ({old['seconds']:.2f} s) -> "
                f"{r['status'][:60]} ({r['seconds']:.2f} s)"
            )
    return "\n".join(
        [f"{changed} status changes", *lines, "before:", summary(before, top), "after:", summary(after, top)]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="engines")
    ap.add_argument("--category", action="append", default=[], help="only this category (repeatable)")
    ap.add_argument("--limit", type=int, default=None, help="at most N schemas per category")
    ap.add_argument("--stride", type=int, default=1, help="every N-th schema of each category")
    ap.add_argument("--top", type=int, default=10, help="print the N slowest")
    ap.add_argument("--seconds", type=float, default=Limits().compile_seconds, help="compile budget")
    ap.add_argument("--json", type=Path, default=None, help="write every row here")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="compare two runs")
    ap.add_argument("--progress", action="store_true", help="a line on stderr every 100 schemas")
    ap.add_argument("--slowest-of", nargs=2, metavar=("JSON", "N"), help="N slowest of an earlier run")
    args = ap.parse_args(argv)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print(compare(before, after, args.top))
        return 0
    if args.slowest_of:
        earlier = json.loads(Path(args.slowest_of[0]).read_text())
        keys = [r["key"] for r in sorted(earlier, key=lambda r: -r["seconds"])[: int(args.slowest_of[1])]]
        files = [data_root() / f"{k}.json" for k in keys]
    else:
        files = schema_files(data_root(), args.category, args.limit, args.stride)
    rows = time_all(files, PROFILES[args.profile], Limits(compile_seconds=args.seconds), args.progress)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=0))
    print(summary(rows, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
