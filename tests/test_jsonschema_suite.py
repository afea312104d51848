"""JSON-Schema-Test-Suite draft2020-12 conformance, with a ratcheting baseline (docs/style.md §11).

For every group: the schema is refused (reason recorded) or, for every test, ``accepts()`` of the
instance — compact, pretty-printed, with other legal whitespace, keys reordered, ASCII-escaped — equals
the test's ``valid``. Zero disagreements on compiled schemas. The baseline records which groups compile;
a group that compiled before and is refused now fails (regression), new compiles pass with a note.

The profile: ``allow_duplicate_keys=True`` because the suite's instances never repeat a key (they are
parsed JSON values), so the verdicts are those of the default profile on every instance; it lets the
reference compile objects with undeclared keys (see ``JsonProfile``). ``formats="annotation"``: draft
2020-12's default, which the suite's required tests assume.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

import refdecoder
from refdecoder import JsonProfile, Limits

from ._data import compile_or_status, ratchet, require_shared, serializations

PROFILE = JsonProfile(allow_duplicate_keys=True)
BASELINE = "json-schema-test-suite.json"


@dataclass(frozen=True)
class Case:
    group: str
    description: str
    data: Any
    valid: bool


def _groups() -> list[tuple[str, Any, list[Case]]]:
    root = require_shared("json-schema-test-suite/tests/draft2020-12")
    out = []
    for f in sorted(root.glob("*.json")):  # optional/ is not required semantics
        for i, g in enumerate(json.loads(f.read_text())):
            gid = f"{f.stem}#{i}"
            cases = [Case(gid, t["description"], t["data"], t["valid"]) for t in g["tests"]]
            out.append((gid, g["schema"], cases))
    return out


def _remotes() -> dict[str, Any]:
    """The suite's remote documents, as the suite expects them served at http://localhost:1234/."""
    root = require_shared("json-schema-test-suite/remotes")
    return {
        "http://localhost:1234/" + p.relative_to(root).as_posix(): json.loads(p.read_text())
        for p in sorted(root.rglob("*.json"))
    }


@pytest.fixture(scope="module")
def suite() -> dict[str, Any]:
    status: dict[str, str] = {}
    disagreements: list[str] = []
    limits = Limits(compile_seconds=10)
    remotes = _remotes()
    for gid, schema, cases in _groups():
        g, status[gid] = compile_or_status(refdecoder.JsonSchema(schema, PROFILE, remotes), limits)
        if g is None:
            continue
        for case in cases:
            for text in serializations(case.data, reorder=True, escapes=True):
                got = g.accepts(text.encode("utf-8"))
                if got != case.valid:
                    disagreements.append(
                        f"{gid} {case.description!r}: instance {text!r}\n  reference: {got}\n  suite:     {case.valid}"
                    )
    return {"status": status, "disagreements": disagreements}


def test_zero_disagreements(suite: dict[str, Any]) -> None:
    d = suite["disagreements"]
    assert not d, f"{len(d)} disagreements with JSON-Schema-Test-Suite:\n" + "\n".join(d[:30])


def test_ratchet_against_baseline(suite: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    ratchet(BASELINE, suite["status"], "JSON-Schema-Test-Suite draft2020-12 groups", capsys)
