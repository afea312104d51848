"""JSON-Schema-Test-Suite conformance, every draft folder, with ratcheting baselines (docs/style.md §11).

For every group of ``draft4``, ``draft6``, ``draft7``, ``draft2019-09`` and ``draft2020-12``: the schema,
read in that folder's draft (``JsonProfile.draft``; the suite's draft4-7 schemas declare no
``$schema``), is refused (reason recorded) or, for every test, ``accepts()`` of the instance — compact,
pretty-printed, with other legal whitespace, keys reordered, ASCII-escaped — equals the test's ``valid``.
Zero disagreements on compiled schemas. Each draft has its baseline of which groups compile
(``json-schema-test-suite.json`` is 2020-12's); a group that compiled before and is refused now fails
(regression), new compiles pass with a note. The suite's remote documents are the resources ``$ref``
may name, at the URLs the suite serves them from.

The profile: ``allow_duplicate_keys=True`` because the suite's instances never repeat a key (they are
parsed JSON values), so the verdicts are those of the default profile on every instance; it lets the
reference compile objects with undeclared keys (see ``JsonProfile``). ``formats="annotation"``: every
draft's default, which the suite's required tests assume.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

import refdecoder
from refdecoder import JsonProfile, Limits

from ._data import compile_or_status, ratchet, require_shared, serializations

# Suite folder -> (JsonProfile.draft, baseline file).
DRAFTS = {
    "draft4": ("draft-04", "json-schema-test-suite-draft4.json"),
    "draft6": ("draft-06", "json-schema-test-suite-draft6.json"),
    "draft7": ("draft-07", "json-schema-test-suite-draft7.json"),
    "draft2019-09": ("2019-09", "json-schema-test-suite-draft2019-09.json"),
    "draft2020-12": ("2020-12", "json-schema-test-suite.json"),
}


@dataclass(frozen=True)
class Case:
    group: str
    description: str
    data: Any
    valid: bool


def _groups(folder: str) -> list[tuple[str, Any, list[Case]]]:
    root = require_shared(f"json-schema-test-suite/tests/{folder}")
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


@pytest.fixture(scope="module", params=list(DRAFTS))
def suite(request: pytest.FixtureRequest) -> dict[str, Any]:
    folder = request.param
    profile = JsonProfile(allow_duplicate_keys=True, draft=DRAFTS[folder][0])
    status: dict[str, str] = {}
    disagreements: list[str] = []
    limits = Limits(compile_seconds=10)
    remotes = _remotes()
    for gid, schema, cases in _groups(folder):
        g, status[gid] = compile_or_status(refdecoder.JsonSchema(schema, profile, remotes), limits)
        if g is None:
            continue
        for case in cases:
            for text in serializations(case.data, reorder=True, escapes=True):
                got = g.accepts(text.encode("utf-8"))
                if got != case.valid:
                    disagreements.append(
                        f"{folder}/{gid} {case.description!r}: instance {text!r}\n"
                        f"  reference: {got}\n  suite:     {case.valid}"
                    )
    return {"folder": folder, "status": status, "disagreements": disagreements}


def test_zero_disagreements(suite: dict[str, Any]) -> None:
    d = suite["disagreements"]
    assert not d, f"{len(d)} disagreements with JSON-Schema-Test-Suite:\n" + "\n".join(d[:30])


def test_ratchet_against_baseline(suite: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    folder = suite["folder"]
    ratchet(DRAFTS[folder][1], suite["status"], f"JSON-Schema-Test-Suite {folder} groups", capsys)


@pytest.mark.parametrize("folder", ["draft2019-09", "draft2020-12"])
def test_dependencies_compatibility_group(folder: str) -> None:
    """The suite's optional ``dependencies-compatibility`` groups: 2019-09 and 2020-12 no longer define
    ``dependencies``, and the suite says what an implementation that keeps it for compatibility reads.
    ``legacy_dependencies="apply"`` (the default) agrees on every instance; ``"ignore"`` accepts every
    one of them (the schemas hold nothing else); ``"refuse"`` refuses every group."""
    path = require_shared(f"json-schema-test-suite/tests/{folder}/optional/dependencies-compatibility.json")
    groups = json.loads(path.read_text())
    assert len(groups) >= 7
    disagreements, rejected = [], 0
    for i, g in enumerate(groups):
        assert set(g["schema"]) == {"$schema", "dependencies"}
        apply = refdecoder.compile(refdecoder.JsonSchema(g["schema"], JsonProfile(allow_duplicate_keys=True)))
        ignore = refdecoder.compile(
            refdecoder.JsonSchema(
                g["schema"], JsonProfile(allow_duplicate_keys=True, legacy_dependencies="ignore")
            )
        )
        for t in g["tests"]:
            for text in serializations(t["data"], reorder=True, escapes=True):
                if apply.accepts(text.encode()) != t["valid"]:
                    disagreements.append(f"#{i} {t['description']!r}: {text!r} (suite: {t['valid']})")
                assert ignore.accepts(text.encode()), text
            rejected += not t["valid"]
        with pytest.raises(refdecoder.Unsupported, match="legacy_dependencies='refuse'"):
            refdecoder.compile(refdecoder.JsonSchema(g["schema"], JsonProfile(legacy_dependencies="refuse")))
    assert not disagreements, "\n".join(disagreements)
    assert rejected >= 10  # the groups do reject instances: "apply" is not "ignore"
