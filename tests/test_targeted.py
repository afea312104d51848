"""Targeted invalid instances, other legal spellings and coverage-guided walks: every instance
is judged the same way by both judges, labelled with the keyword it breaks, and certify handed only the
triggering spec finds an engine that silently ignores that keyword."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import refdecoder
from maskcert.certification import certify, certify_case
from props.backends.reference import ReferenceBackend
from props.checks.coverage import Coverage, explore, guided_walks, positions
from props.checks.invariants import prepare
from props.checks.targeted import spellings, targeted_invalid
from props.contract.backend import CompileOutcome
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case, load_corpus, validate_instance, validate_output
from refdecoder import JsonProfile, JsonSchema, Spec

PROFILE = JsonProfile(allow_duplicate_keys=True)
NOT_SCHEMA = {
    "type": "object",
    "properties": {"k": {"type": "string", "not": {"const": "forbidden"}}},
    "required": ["k"],
}
AB_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}


def _spec(schema: Any, profile: JsonProfile = PROFILE) -> SpecRef:
    return SpecRef(SpecKind.JSON_SCHEMA, schema, "t", "test", profile.as_dict())


def _grammar(spec: SpecRef) -> refdecoder.Grammar | None:
    """The reference's grammar of ``spec``, None when it refuses it."""
    try:
        if spec.kind == "json_schema":
            return refdecoder.compile(spec.to_spec(JsonProfile(**(spec.profile or {}))))
        return refdecoder.compile(spec.to_spec())
    except refdecoder.MaskcertError:
        return None


def _without(schema: Any, pointer: str) -> Any:
    """``schema`` with the keyword at ``pointer`` removed (an independent reimplementation)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    doc = json.loads(json.dumps(schema))
    node = doc
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    del node[parts[-1]]
    return doc


SCHEMAS = [
    NOT_SCHEMA,
    AB_SCHEMA,
    {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}, "maxItems": 4},
    {
        "type": "object",
        "properties": {
            "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
            "n": {"type": "integer", "minimum": 2, "multipleOf": 3},
            "e": {"enum": ["x", "y", 1]},
        },
        "required": ["s"],
        "additionalProperties": False,
    },
    {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
    {"type": "array", "prefixItems": [{"type": "boolean"}], "items": False},
    # draft-07 tuple items: fragments derived from it are read in draft-07, not 2020-12 (where an
    # items array is no schema, and jsonschema raised AttributeError on it)
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "integer"}, {"type": "string"}],
        "additionalItems": False,
    },
    {
        "$defs": {"p": {"type": "integer", "maximum": 9}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/p"}},
    },
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s)[:40])
def test_json_instances_are_invalid_for_both_judges_and_labelled(schema: Any) -> None:
    spec = _spec(schema)
    g = _grammar(spec)
    assert g is not None
    made = targeted_invalid(spec, g, [])
    assert made.instances, "no targeted instance"
    assert not made.notes, made.notes
    keywords = set()
    for inst in made.instances:
        assert validate_output(spec, inst.data) is not None, inst
        assert not g.accepts(inst.data), inst
        if inst.feature.startswith("json_schema/"):
            keywords.add(inst.where.rsplit("/", 1)[-1])
            # valid once the targeted keyword is removed: the label is the keyword's
            value = json.loads(inst.data)
            assert validate_instance(_spec(_without(schema, inst.where)), value) is None, inst
        else:
            assert inst.feature.startswith("json_syntax/"), inst
            with pytest.raises(ValueError):
                json.loads(inst.data)
    assert "type" in keywords


def test_not_keyword_gets_the_not_subschemas_own_instance() -> None:
    made = targeted_invalid(_spec(NOT_SCHEMA), _grammar(_spec(NOT_SCHEMA)), [])
    nots = [i for i in made.instances if i.feature == "json_schema/not"]
    assert [i.data for i in nots] == [b'{"k":"forbidden"}']
    assert nots[0].where == "/properties/k/not"


@pytest.mark.parametrize(
    ("schema", "feature", "expected"),
    [
        (
            {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
            "json_schema/uniqueItems",
            b"[0,0]",
        ),
        (
            {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}},
            "json_schema/contains",
            b"[]",
        ),
        ({"type": "string", "maxLength": 3}, "json_schema/maxLength", b'"aaaa"'),
        ({"type": "integer", "minimum": 3}, "json_schema/minimum", b"2"),
        (
            {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
            "json_schema/additionalProperties",
            None,
        ),
        ({"type": "object", "required": ["a"]}, "json_schema/required", b"{}"),
        ({"const": "abc"}, "json_schema/const", b'"abcx"'),
    ],
)
def test_boundary_instances(schema: Any, feature: str, expected: bytes | None) -> None:
    spec = _spec(schema)
    made = targeted_invalid(spec, _grammar(spec), [])  # uniqueItems: the reference refuses, jsonschema judges
    got = [i.data for i in made.instances if i.feature == feature]
    assert got, [i.feature for i in made.instances]
    if expected is not None:
        assert got[0] == expected


def test_trailing_comma_after_a_member() -> None:
    """A defect seen in lm-format-enforcer: it accepts {"a": 1,} for AB_SCHEMA."""
    spec = _spec(AB_SCHEMA)
    made = targeted_invalid(spec, _grammar(spec), [])
    cut = [i.data for i in made.instances if i.feature == "json_syntax/trailing-comma-cut"]
    assert cut == [b'{"a":0,}']


@pytest.mark.parametrize(
    ("kind", "source", "valid", "judge"),
    [
        ("regex", r"[a-z]{2,3}-\d{1,2}", [b"ab-1"], lambda s: re.fullmatch(r"[a-z]{2,3}-\d{1,2}", s)),
        ("gbnf", 'root ::= "x" [0-9]{1,2} ("a" | "bc")', [b"x1a"], None),
        ("choice", ["red", "redder", "blue"], [b"red"], lambda s: s in ("red", "redder", "blue")),
    ],
)
def test_near_misses_are_outside_the_language(kind: str, source: Any, valid: list[bytes], judge: Any) -> None:
    spec = SpecRef(SpecKind(kind), source, "t", "test")
    g = refdecoder.compile(spec.to_spec())
    made = targeted_invalid(spec, g, valid, limit=20)
    assert len(made.instances) >= 8
    kinds = {i.feature.rsplit("/", 1)[-1] for i in made.instances}
    assert {"truncation", "deletion", "insertion", "substitution"} <= kinds
    for inst in made.instances:
        assert inst.feature.startswith(f"{kind}/near-miss/")
        assert not g.accepts(inst.data)
        assert validate_output(spec, inst.data) is not None
        if judge is not None:
            try:
                text = inst.data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            assert not judge(text)


def test_repetition_one_past_the_bound() -> None:
    spec = SpecRef(SpecKind.REGEX, "x{2,3}y", "t", "test")
    made = targeted_invalid(spec, refdecoder.compile(spec.to_spec()), [b"xxxy"], limit=30)
    assert b"xxxxy" in [i.data for i in made.instances]


def test_spellings_are_valid_for_both_judges() -> None:
    schema = {"type": "object", "properties": {"u": {"type": "string"}, "n": {"type": "integer"}}}
    spec = _spec(schema)
    g = _grammar(spec)
    assert g is not None
    others, notes = spellings(spec, g, [b'{"u":"a/b","n":0}', b'{"u":"x","n":12}'], limit=40)
    assert not notes
    features = {o.feature for o in others}
    assert {
        "json_spelling/escaped-solidus",
        "json_spelling/unicode-escape",
        "json_spelling/negative-zero",
        "json_spelling/integer-as-float",
        "json_spelling/exponent",
    } <= features
    for o in others:
        assert validate_output(spec, o.data) is None and g.accepts(o.data), o


def test_builtin_corpus_targeted_instances_agree_with_both_judges() -> None:
    """Every targeted instance of the builtin corpus is rejected by the reference and the validator."""
    made_any = 0
    for case in load_corpus("builtin")[::4]:
        spec = case.spec
        g = _grammar(spec)
        made = targeted_invalid(spec, g, [], limit=12, seconds=2.0)
        assert not [n for n in made.notes if "reference accepts" in n], made.notes
        for inst in made.instances:
            assert validate_output(spec, inst.data) is not None
            assert g is None or not g.accepts(inst.data)
        made_any += len(made.instances)
    assert made_any > 50


# -- certify finds engines that ignore one keyword ---------------------------------------------------
def _drop(schema: Any, keyword: str) -> Any:
    if isinstance(schema, dict):
        return {k: _drop(v, keyword) for k, v in schema.items() if k != keyword}
    if isinstance(schema, list):
        return [_drop(v, keyword) for v in schema]
    return schema


def ignoring(keyword: str) -> type[ReferenceBackend]:
    """The reference, except that it compiles every schema with ``keyword`` silently dropped."""

    class Ignores(ReferenceBackend):
        def __init__(self) -> None:
            super().__init__()
            self.name = f"toy-ignores-{keyword}"

        def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
            if isinstance(spec, JsonSchema):
                spec = JsonSchema(_drop(spec.schema, keyword), spec.profile)
            return super().compile(spec, vocabulary)

    return Ignores


@pytest.mark.parametrize(
    ("keyword", "schema", "invariant"),
    [
        ("not", NOT_SCHEMA, "soundness"),
        ("contains", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}, "soundness"),
        ("uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "refusal"),
        ("uniqueItems", {"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "soundness"),
        (
            "maxLength",
            {"type": "object", "properties": {"s": {"type": "string", "maxLength": 2}}},
            "soundness",
        ),
        ("pattern", {"type": "string", "pattern": "^[0-9]+$", "maxLength": 4}, "soundness"),
        ("multipleOf", {"type": "integer", "multipleOf": 5}, "soundness"),
        ("format", {"type": "string", "format": "date"}, "soundness"),
    ],
)
def test_certify_given_only_the_spec_finds_an_ignored_keyword(
    keyword: str, schema: Any, invariant: str
) -> None:
    toy = ignoring(keyword)()
    if keyword == "format":
        toy.profile = type(toy.profile)(json=JsonProfile(allow_duplicate_keys=True, formats="assert"))
    case = Case(SpecRef(SpecKind.JSON_SCHEMA, schema, f"ignores-{keyword}", "cli"))
    import tokenizers_matrix as tm

    result = certify_case(toy, case, tm.resolve("bpe"), examples=0)
    targeted = [
        f
        for f in result.findings
        if f.invariant == invariant and f"/{keyword}" in (f.certificate or {}).get("targets", "")
    ]
    assert targeted, [(f.invariant, f.message) for f in result.findings]
    assert result.instances["invalid/targeted"] > 0
    if invariant == "soundness":  # its reproducer judges EOS after the invalid output: masked
        assert all(f.reference_allows is False for f in targeted)


def test_reference_has_no_targeted_findings_and_reports_coverage(tmp_path: Any) -> None:
    report = certify(
        "reference",
        tokenizers=["bpe"],
        corpus=(),
        schemas=[],
        cases=[
            Case(SpecRef(SpecKind.JSON_SCHEMA, AB_SCHEMA, "ab", "cli")),
            Case(SpecRef(SpecKind.REGEX, "[a-c]{1,3}x", "rx", "cli")),
        ],
        examples=0,
        minimize_s=0,
        out=tmp_path,
    )
    assert report.findings == ()
    total = report.data["instances"]["total"]
    assert total["invalid/targeted"] > 0 and total["valid/spellings"] > 0
    assert total["coverage/positions-compared"] > 0
    per = report.data["instances"]["per_spec"]
    assert all(any(n.startswith("coverage: masks compared at") for n in e["notes"]) for e in per)
    assert "coverage/positions-compared" in (tmp_path / "report.md").read_text(encoding="utf-8")


# -- coverage ---------------------------------------------------------------------------------------
def test_coverage_guided_walks_reach_the_state_after_a_comma() -> None:
    """A walk split only at token boundaries of the canonical encoding misses the position after
    '{"a":0,'; the guided walks reach it with a token boundary there."""
    import tokenizers_matrix as tm

    vocab = tm.resolve("bpe")
    t = prepare(ReferenceBackend(), SpecRef(SpecKind.JSON_SCHEMA, AB_SCHEMA, "ab", "cli"), vocab)
    assert not isinstance(t, type(None)) and hasattr(t, "reference")
    g = t.reference.grammar
    after_comma = positions(g.advance(g.initial(), b'{"a":0,'), g)
    cov = Coverage(g)
    cov.observe([b'{"a":0,"b":"x"}'])
    assert not after_comma <= cov.covered
    ex = explore(g)
    assert after_comma <= set(ex.first)
    found, summary = guided_walks(t, [], max_walks=60, seconds=30)  # type: ignore[arg-type]
    assert found == []  # the reference agrees with itself
    assert summary["guided_walks"] > 0 and summary["compared"] > 0
    assert summary["compared"] <= summary["found"]


_EXPLORE_ORDER = """
import json, sys
import refdecoder
from props.checks.coverage import explore
schema = json.loads(sys.argv[1])
g = refdecoder.compile(refdecoder.JsonSchema(schema))
ex = explore(g)
print(repr(list(ex.first)))
print(repr([g.completion(state) for _, state in ex.first.values()]))
"""


def test_explore_order_and_completions_do_not_depend_on_string_hashes() -> None:
    """Guided walks go toward positions in explore()'s order and complete them with the grammar's
    shortest completion; both choose among frozensets (stacks, frames that hold strings) and must come
    out the same in every process, whatever PYTHONHASHSEED is, or the same run checks different
    positions (seen on a real Github_easy schema at 129k: 89 against 86)."""
    import os
    import subprocess
    import sys

    # After '{"g', two completions of the same length, one per oneOf branch (a Github_easy schema).
    branches = [("authorization_code", "code"), ("client_credentials", "token")]
    schema = {
        "type": "object",
        "additionalProperties": False,
        "oneOf": [
            {
                "properties": {"grantType": {"enum": [grant]}, "responseType": {"enum": [response]}},
                "required": ["grantType"],
            }
            for grant, response in branches
        ],
        "properties": {
            "grantType": {"type": "string"},
            "n": {"type": "integer", "minimum": 3, "maximum": 900},
            "x": {"type": "number", "exclusiveMinimum": 0.5},
            "scopes": {"type": "array", "items": {"type": "string"}},
        },
    }
    orders = set()
    for seed in ("0", "1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _EXPLORE_ORDER, json.dumps(schema)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert "grantType" in out.stdout and "authorization_code" in out.stdout, out.stdout[:200]
        orders.add(out.stdout)
    assert len(orders) == 1, "explore() or Grammar.completion() differs under different string hashes"


def test_coverage_finds_the_trailing_comma_of_a_toy() -> None:
    """A toy that allows '}' right after a comma: only a walk with a token boundary after the comma
    sees it; the guided walks find it without any instance given."""
    import tokenizers_matrix as tm
    from props.checks.coverage import coverage_walks

    class ClosesAfterComma(ReferenceBackend):
        def __init__(self) -> None:
            super().__init__()
            self.name = "toy-closes-after-comma"

        def matcher(self, compiled: Any) -> Any:
            inner = super().matcher(compiled)
            return _AfterComma(inner, self.vocab)

        def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
            self.vocab = vocabulary
            return super().compile(spec, vocabulary)

    vocab = tm.resolve("bpe")
    t = prepare(ClosesAfterComma(), SpecRef(SpecKind.JSON_SCHEMA, AB_SCHEMA, "ab", "cli"), vocab)
    found = coverage_walks(t, [], max_walks=120, seconds=60)  # type: ignore[arg-type]
    assert any(f.invariant == "soundness" and f.token_bytes == b"}" for f in found), [
        f.message for f in found
    ]
    assert t.instances["coverage/positions-compared"] > 0  # type: ignore[union-attr]


class _AfterComma:
    """A reference matcher whose mask also allows ``}`` right after a ``,``."""

    def __init__(self, inner: Any, vocab: Any) -> None:
        self.inner = inner
        self.vocab = vocab
        self.brace = vocab.index.ids_by_bytes[b"}"][0]

    def mask(self) -> Any:
        import numpy as np

        from refdecoder._tokens import pack_ids, unpack_mask

        m = np.asarray(self.inner.mask())
        text = self.vocab.decode(self.inner.accepted_ids()) if hasattr(self.inner, "accepted_ids") else b""
        if text.rstrip().endswith(b","):
            ids = set(unpack_mask(m, len(self.vocab))) | {self.brace}
            return pack_ids(sorted(ids), len(self.vocab))
        return m

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def fork(self) -> Any:
        return _AfterComma(self.inner.fork(), self.vocab)
