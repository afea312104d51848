"""JSONSchemaBench (maskbench dev set) conformance against the ``jsonschema`` validator of each schema's
draft (its ``$schema``; 2020-12 when it declares none, as the reference reads it).

For every compiled schema and every instance (compact and with other legal whitespace), the reference's
verdict equals ``jsonschema``'s. ``formats="annotation"`` on both sides (no format assertion). Two
profiles, each with its own ratcheting baseline: the engines' (repeated keys allowed, as every engine
does) and the default one (RFC 8259's unique names, decided by key memory: ``refdecoder/_keymemory.py``).
The instances never repeat a key, so the verdicts are the same; under the default profile each valid
object instance is also tried with its first member written twice, which must be rejected.
CI runs a deterministic slice (``MASKCERT_BENCH_STRIDE``, default every 8th schema of each category;
the default profile every 16th); ``MASKCERT_FULL=1`` runs all 5.8k schemas under both.
Coverage per category is printed.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import jsonschema
import pytest

import refdecoder
from refdecoder import JsonProfile, LimitExceeded, Limits

from ._data import compile_or_status, ratchet, require_shared, serializations

FULL = os.environ.get("MASKCERT_FULL") == "1"
STRIDE = 1 if FULL else int(os.environ.get("MASKCERT_BENCH_STRIDE", "8"))
# profile name -> (profile, stride, baseline)
PROFILES = {
    "engines": (JsonProfile(allow_duplicate_keys=True), STRIDE, "jsonschemabench.json"),
    "default": (JsonProfile(), 1 if FULL else 2 * STRIDE, "jsonschemabench-default.json"),
}


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


def _files(stride: int) -> list[Any]:
    root = require_shared("jsonschemabench-maskbench")
    out = []
    for cat in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(cat.glob("*.json"))
        out.extend(files[::stride])
    return out


def _repeat_first_member(text: str) -> str | None:
    """``{"k":v,...}`` -> ``{"k":v,"k":v,...}`` for a compact object text with a member, else None."""
    value = json.loads(text)
    if not isinstance(value, dict) or not value:
        return None
    k, v = next(iter(value.items()))
    member = (
        json.dumps(k, ensure_ascii=False) + ":" + json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    )
    return "{" + member + "," + text[1:]


@pytest.fixture(scope="module", params=sorted(PROFILES))
def bench(request: pytest.FixtureRequest) -> dict[str, Any]:
    profile, stride, baseline = PROFILES[request.param]
    status: dict[str, str] = {}
    disagreements: list[str] = []
    limits = Limits(compile_seconds=10)
    for f in _files(stride):
        key = f"{f.parent.name}/{f.stem}"
        doc = json.loads(f.read_text())
        schema = doc["schema"]
        reason = _skip_reason(schema)
        if reason:
            status[key] = f"skipped: {reason}"
            continue
        g, status[key] = compile_or_status(refdecoder.JsonSchema(schema, profile), limits, with_reason=False)
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
            texts = serializations(data, reorder=True, escapes=False, seed=len(key))
            twice = _repeat_first_member(texts[0]) if expected and not profile.allow_duplicate_keys else None
            try:
                verdicts = [g.accepts(text.encode("utf-8")) for text in texts]
                twice_accepted = twice is not None and g.accepts(twice.encode("utf-8"))
            except LimitExceeded as e:  # a limit met while matching (parser_stacks) is a refusal too
                status[key] = f"refused: limit {e.limit} (matching)"
                break
            for text, got in zip(texts, verdicts, strict=True):
                if got != expected:
                    disagreements.append(
                        f"{key}: {text[:200]!r}\n  reference: {got}\n  jsonschema: {expected}"
                    )
            if twice is not None and twice_accepted:
                disagreements.append(f"{key}: {twice[:200]!r}\n  reference: True (a repeated key)")
    return {"status": status, "disagreements": disagreements, "stride": stride, "baseline": baseline}


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
    stride = bench["stride"]
    with capsys.disabled():
        print(f"\nJSONSchemaBench ({bench['baseline']}, stride {stride}): compiled per category")
        for cat in sorted(per_cat):
            print(f"  {cat:16} {ok[cat]:5}/{per_cat[cat]:<5} {ok[cat] / per_cat[cat]:.1%}")
        reasons = Counter(s for s in status.values() if s != "compiled")
        for r, n in reasons.most_common(12):
            print(f"  {n:5}  {r}")
    ratchet(
        bench["baseline"], status, f"JSONSchemaBench ({bench['baseline']}, stride {stride}) schemas", capsys
    )
