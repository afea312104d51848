"""The reference's structural tags against the independent checker, over the tool-call snapshot: one
row per template × options — compiled or refused (reason), how many generated texts, how many the
checker could not decide, how many disagreements — then each distinct disagreement in full.

``python ci/toolcall_agreement.py [--template NAME ...] [--tools NAME ...] [--limit N] [--json FILE]
[--reading xgrammar|documented]`` (exit 1 when there is a disagreement). ``--reading`` is how the checker
reads ``json_schema`` formats: ``xgrammar`` (the default: strict mode and asserted formats, the defaults
xgrammar documents and the reading the reference takes) or ``documented`` (plain JSON Schema 2020-12,
which differs from the reference by the divergences ``tests/test_structural_tag_agreement.py`` names).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from typing import Any

from props.checks.structural_tags import Agreement, agreement
from props.corpus.structural_tag_check import READINGS
from props.corpus.toolcalls import load_snapshot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--template", action="append", help="only these templates (repeatable)")
    ap.add_argument("--tools", action="append", help="only these tools lists (repeatable)")
    ap.add_argument("--limit", type=int, default=0, help="stop after N distinct tags (0: all)")
    ap.add_argument("--json", help="also write the rows and disagreements to this file")
    ap.add_argument(
        "--reading", choices=READINGS, default="xgrammar", help="the checker's json_schema reading"
    )
    args = ap.parse_args()
    header, records = load_snapshot()
    names = {
        k: [t.get("function", t).get("name", t.get("type")) for t in v] for k, v in header["tools"].items()
    }
    print(
        f"snapshot: {header['engine']} {header['version']}, {len(records)} option sets; reading {args.reading}"
    )
    cache: dict[str, Agreement] = {}
    rows: list[dict[str, Any]] = []
    start = time.monotonic()
    width = max(len(r.options.id) for r in records)
    print(f"{'template × options':<{width}}  {'texts':>5} {'undec':>5} {'disagree':>8}  status")
    for r in records:
        o = r.options
        if (args.template and o.template not in args.template) or (args.tools and o.tools not in args.tools):
            continue
        if r.tag is None:
            rows.append({"id": o.id, "status": f"engine refused: {r.refused}"})
            print(f"{o.id:<{width}}  {'-':>5} {'-':>5} {'-':>8}  engine refused: {r.refused}")
            continue
        key = json.dumps([r.tag, r.special_tokens])  # key order kept: property order is semantic
        if key not in cache:
            if args.limit and len(cache) >= args.limit:
                break
            cache[key] = agreement(r.tag, r.special_tokens, names[o.tools], reading=args.reading)
        a = cache[key]
        status = a.status if len(a.status) < 90 else a.status[:87] + "..."
        n = len(a.disagreements)
        print(f"{o.id:<{width}}  {a.texts:>5} {a.undecided:>5} {n:>8}  {status}", flush=True)
        found = [
            {"parts": list(d.parts), "intent": d.intent, "checker": d.checker, "reference": d.reference}
            for d in a.disagreements
        ]
        row: dict[str, Any] = {"id": o.id, "status": a.status, "texts": a.texts, "undecided": a.undecided}
        rows.append({**row, "disagreements": found})
    compiled = [row for row in rows if row["status"] == "compiled"]
    total = sum(len(row.get("disagreements", [])) for row in rows)
    per: Counter[str] = Counter()
    by_intent: Counter[str] = Counter()
    for row in rows:
        per[row["id"].split("/")[0]] += len(row.get("disagreements", []))
        by_intent.update(d["intent"] for d in row.get("disagreements", []))
    print(
        f"\n{len(rows)} option sets, {len(cache)} distinct tags, {len(compiled)} compiled; "
        f"{sum(row.get('texts', 0) for row in compiled)} texts on compiled tags, {total} disagreements "
        f"({time.monotonic() - start:.0f}s)"
    )
    print("disagreements per template:", dict(per))
    print("disagreements per intent:", dict(by_intent))
    shown: set[str] = set()
    for row in rows:
        for d in row.get("disagreements", []):
            k = json.dumps(d["parts"])
            if k not in shown:
                shown.add(k)
                print(f"\n{row['id']} [{d['intent']}] {d['parts']!r}")
                print(f"  checker {d['checker']}, reference {d['reference']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, ensure_ascii=False, indent=1)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
