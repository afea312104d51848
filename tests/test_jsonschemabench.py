"""JSONSchemaBench (maskbench dev set) conformance against the ``jsonschema`` validator of each schema's
draft (its ``$schema``; 2020-12 when it declares none, as the reference reads it).

For every compiled schema and every instance (compact and with other legal whitespace), the reference's
verdict equals ``jsonschema``'s. ``formats="annotation"`` on both sides (no format assertion); the
profile allows repeated undeclared keys (the instances never repeat one; see test_jsonschema_suite).
CI runs a deterministic slice (``MASKCERT_BENCH_STRIDE``, default every 8th schema of each category);
``MASKCERT_FULL=1`` runs all 5.8k schemas. Coverage per category is printed; the baseline ratchets.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import jsonschema
import pytest

import refdecoder
from refdecoder import JsonProfile, Limits

from ._data import compile_or_status, ratchet, require_shared, serializations

PROFILE = JsonProfile(allow_duplicate_keys=True)
FULL = os.environ.get("MASKCERT_FULL") == "1"
STRIDE = 1 if FULL else int(os.environ.get("MASKCERT_BENCH_STRIDE", "8"))
BASELINE = "jsonschemabench.json"


def _skip_reason(schema: Any) -> str | None:
    """Schemas judged differently by design, each with its reason (predicates, docs/style.md §11)."""
    cls = jsonschema.Draft202012Validator
    try:
        cls = jsonschema.validators.validator_for(schema, default=cls)
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        return (
            f"not a valid {cls.__name__.removesuffix('Validator')} schema for jsonschema ({e.message[:60]})"
        )
    except Exception as e:  # noqa: BLE001 - the validator itself failing is a reason to skip, recorded
        return f"jsonschema cannot check this schema ({type(e).__name__})"
    return None


def _files() -> list[Any]:
    root = require_shared("jsonschemabench-maskbench")
    out = []
    for cat in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(cat.glob("*.json"))
        out.extend(files[::STRIDE])
    return out


@pytest.fixture(scope="module")
def bench() -> dict[str, Any]:
    status: dict[str, str] = {}
    disagreements: list[str] = []
    limits = Limits(compile_seconds=10)
    for f in _files():
        key = f"{f.parent.name}/{f.stem}"
        doc = json.loads(f.read_text())
        schema = doc["schema"]
        reason = _skip_reason(schema)
        if reason:
            status[key] = f"skipped: {reason}"
            continue
        g, status[key] = compile_or_status(refdecoder.JsonSchema(schema, PROFILE), limits, with_reason=False)
        if g is None:
            continue
        validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
            schema
        )
        for t in doc["tests"]:
            data = t["data"]
            try:
                expected = validator.is_valid(data)
            except Exception as e:  # noqa: BLE001 - a validator crash is not a verdict
                status[key] = f"skipped: jsonschema crashed on an instance ({type(e).__name__})"
                break
            for text in serializations(data, reorder=True, escapes=False, seed=len(key)):
                got = g.accepts(text.encode("utf-8"))
                if got != expected:
                    disagreements.append(
                        f"{key}: {text[:200]!r}\n  reference: {got}\n  jsonschema: {expected}"
                    )
    return {"status": status, "disagreements": disagreements}


def test_zero_disagreements(bench: dict[str, Any]) -> None:
    d = bench["disagreements"]
    assert not d, f"{len(d)} disagreements with jsonschema:\n" + "\n".join(d[:30])


def test_coverage_and_ratchet(bench: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    status = bench["status"]
    per_cat: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    for k, s in status.items():
        cat = k.split("/")[0]
        per_cat[cat] += 1
        ok[cat] += s == "compiled"
    with capsys.disabled():
        print(f"\nJSONSchemaBench (stride {STRIDE}): compiled per category")
        for cat in sorted(per_cat):
            print(f"  {cat:16} {ok[cat]:5}/{per_cat[cat]:<5} {ok[cat] / per_cat[cat]:.1%}")
        reasons = Counter(s for s in status.values() if s != "compiled")
        for r, n in reasons.most_common(12):
            print(f"  {n:5}  {r}")
    ratchet(BASELINE, status, f"JSONSchemaBench (stride {STRIDE}) schemas", capsys)
