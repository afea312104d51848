"""``unevaluatedProperties`` / ``unevaluatedItems`` (refdecoder/_unevaluated.py) against ``jsonschema``:
hand cases for each in-place applicator, the precise refusals, and a Hypothesis property over random
small schemas of drafts 2020-12 and 2019-09 (the reference's verdict equals jsonschema's wherever the
reference compiles)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import refdecoder
from refdecoder import JsonProfile, JsonSchema, LimitExceeded, Unsupported

from ._data import serializations

VALIDATORS = {"2020-12": jsonschema.Draft202012Validator, "2019-09": jsonschema.Draft201909Validator}


def compile_(schema: Any, draft: str = "2020-12") -> refdecoder.Grammar:
    return refdecoder.compile(JsonSchema(schema, JsonProfile(allow_duplicate_keys=True, draft=draft)))


def agree(schema: Any, instances: list[Any], draft: str = "2020-12") -> list[bool]:
    """The reference's verdicts, each asserted equal to jsonschema's on every serialization."""
    g = compile_(schema, draft)
    oracle = VALIDATORS[draft](schema)
    out = []
    for inst in instances:
        want = oracle.is_valid(inst)
        for text in serializations(inst, reorder=True, escapes=True):
            assert g.accepts(text.encode()) == want, f"{schema} on {text!r}: jsonschema says {want}"
        out.append(want)
    return out


def refusal(schema: Any, draft: str = "2020-12") -> Unsupported:
    with pytest.raises(Unsupported) as e:
        compile_(schema, draft)
    return e.value


# -- hand cases: one per way a property or an item gets evaluated --------------------------------
FOO = {"properties": {"foo": {"type": "string"}}}
OBJECTS: list[Any] = [{}, {"foo": "a"}, {"bar": "b"}, {"foo": "a", "bar": "b"}, {"baz": 1}, {"foo": 1}, 5]


@pytest.mark.parametrize(
    "schema",
    [
        {**FOO, "unevaluatedProperties": False},
        {"patternProperties": {"^b": True}, "unevaluatedProperties": False},
        {**FOO, "additionalProperties": {"type": "string"}, "unevaluatedProperties": False},
        {**FOO, "unevaluatedProperties": {"type": "string"}},
        {**FOO, "allOf": [{"properties": {"bar": True}}], "unevaluatedProperties": False},
        {**FOO, "allOf": [{"unevaluatedProperties": True}], "unevaluatedProperties": False},
        {"allOf": [FOO, {"unevaluatedProperties": False}]},  # a cousin sees nothing
        {
            "anyOf": [{"properties": {"bar": {"const": "b"}}, "required": ["bar"]}, FOO],
            "unevaluatedProperties": False,
        },
        {"anyOf": [True, {"properties": {"bar": True}}], "unevaluatedProperties": False},
        {"oneOf": [{"required": ["foo"], **FOO}, {"required": ["bar"]}], "unevaluatedProperties": False},
        {"not": {"not": {"properties": {"bar": True}, "required": ["bar"]}}, "unevaluatedProperties": False},
        {
            "if": {"required": ["foo"], **FOO},
            "then": {"properties": {"bar": True}},
            "unevaluatedProperties": False,
        },
        {"if": {"required": ["foo"]}, "else": {"properties": {"bar": True}}, "unevaluatedProperties": False},
        {"if": {"patternProperties": {"^b": True}}, "unevaluatedProperties": False},
        {"dependentSchemas": {"foo": {"properties": {"bar": True}}}, "unevaluatedProperties": False},
        {"$defs": {"b": {"properties": {"bar": True}}}, "$ref": "#/$defs/b", "unevaluatedProperties": False},
        {"properties": {"foo": {"properties": {"bar": True}}}, "unevaluatedProperties": False},
    ],
)
def test_evaluated_properties(schema: dict[str, Any]) -> None:
    assert len(set(agree(schema, OBJECTS))) == 2, "the instances should separate the schema"


ARRAYS: list[Any] = [[], ["a"], ["a", 1], ["a", "b", 1], [1, 1], ["a", None, "c"], "x"]


@pytest.mark.parametrize(
    "schema",
    [
        {"prefixItems": [{"type": "string"}], "unevaluatedItems": False},
        {"prefixItems": [True], "items": {"type": "integer"}, "unevaluatedItems": False},
        {"items": {"type": "string"}, "unevaluatedItems": False},
        {"unevaluatedItems": {"type": "string"}},
        {"allOf": [{"prefixItems": [True, True]}], "unevaluatedItems": {"type": "integer"}},
        {
            "anyOf": [{"prefixItems": [{"type": "string"}]}, {"prefixItems": [True, True]}],
            "unevaluatedItems": False,
        },
        {
            "oneOf": [{"prefixItems": [{"const": "a"}]}, {"prefixItems": [{"const": 1}]}],
            "unevaluatedItems": False,
        },
        {"contains": {"type": "string"}, "unevaluatedItems": False},
        {"prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": {"type": "null"}},
        {"contains": {"type": "string"}, "minContains": 0, "unevaluatedItems": {"type": "integer"}},
        {
            "anyOf": [{"contains": {"const": 1}}, {"prefixItems": [True]}],
            "unevaluatedItems": {"type": "string"},
        },
        {"if": {"prefixItems": [{"const": "a"}]}, "unevaluatedItems": False},
        {"prefixItems": [{"prefixItems": [True]}], "unevaluatedItems": False},
    ],
)
def test_evaluated_items(schema: dict[str, Any]) -> None:
    assert len(set(agree(schema, ARRAYS))) == 2, "the instances should separate the schema"


@pytest.mark.parametrize(
    "schema",
    [
        {"items": [{"type": "string"}], "unevaluatedItems": False},
        {"items": [True], "additionalItems": {"type": "integer"}, "unevaluatedItems": False},
        {"additionalItems": {"type": "integer"}, "unevaluatedItems": {"type": "string"}},
        {"allOf": [{"items": [True, True]}], "unevaluatedItems": False},
        {"anyOf": [{"items": {"type": "string"}}, True], "unevaluatedItems": {"type": "integer"}},
    ],
)
def test_evaluated_items_2019(schema: dict[str, Any]) -> None:
    assert len(set(agree(schema, ARRAYS, "2019-09"))) == 2


def test_2019_properties_where_jsonschema_and_the_spec_agree() -> None:
    agree(
        {**FOO, "allOf": [{"additionalProperties": True}], "unevaluatedProperties": False}, OBJECTS, "2019-09"
    )
    # U's own keyword names ("type") are declared, so jsonschema's reading of them changes nothing.
    schema = {"properties": {"type": True}, "unevaluatedProperties": {"type": "string"}}
    assert agree(schema, [{"type": 1}, {"x": 1}, {"x": "s"}], "2019-09") == [True, False, True]


# -- refusals: precise, where exactness is out of reach -------------------------------------------
def test_2019_schema_valued_unevaluated_properties_is_refused_where_jsonschema_differs() -> None:
    e = refusal({"unevaluatedProperties": {"type": "string"}}, "2019-09")
    assert (e.keyword, e.where) == ("unevaluatedProperties", "/unevaluatedProperties")
    assert "'type'" in e.reason
    # jsonschema 2019-09 exempts a key named "type"; the spec does not: the reference decides neither.
    assert jsonschema.Draft201909Validator({"unevaluatedProperties": {"type": "string"}}).is_valid(
        {"type": 1}
    )


def test_2019_schema_valued_additional_properties_is_refused_when_seen() -> None:
    e = refusal(
        {**FOO, "additionalProperties": {"type": "string"}, "unevaluatedProperties": False}, "2019-09"
    )
    assert (e.keyword, e.where) == ("additionalProperties", "/additionalProperties")
    e = refusal({"allOf": [{"additionalProperties": {}}], "unevaluatedProperties": False}, "2019-09")
    assert e.where == "/allOf/0/additionalProperties"


def test_2019_contains_is_refused_when_it_could_evaluate_items() -> None:
    e = refusal({"contains": {"type": "string"}, "unevaluatedItems": False}, "2019-09")
    assert (e.keyword, e.where) == ("unevaluatedItems", "/unevaluatedItems")
    assert "contains" in e.reason
    # ... but not when "items" evaluates every item anyway
    agree(
        {"items": {"type": "string"}, "contains": {"const": "a"}, "unevaluatedItems": False},
        ARRAYS,
        "2019-09",
    )


def test_2019_boolean_items_is_refused() -> None:
    e = refusal({"allOf": [{"items": True}], "unevaluatedItems": False}, "2019-09")
    assert (e.keyword, e.where) == ("items", "/allOf/0/items")


def test_in_place_cycle_is_refused() -> None:
    schema = {
        "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}},
        "$ref": "#/$defs/a",
        "unevaluatedProperties": False,
    }
    assert isinstance(refusal(schema), Unsupported)


def test_too_many_anyof_branches_is_a_limit() -> None:
    branches = [{"properties": {f"k{i}": True}} for i in range(7)]
    with pytest.raises(LimitExceeded) as e:
        compile_({"anyOf": branches, "unevaluatedProperties": False})
    assert e.value.limit == "unevaluated_cases" and e.value.where == "/anyOf"


def test_in_place_subschema_with_its_own_id_and_references_is_refused() -> None:
    schema = {
        "$id": "https://example.com/root",
        "allOf": [{"$id": "inner/", "$ref": "x", "$defs": {"x": {"$id": "x", "properties": {"a": True}}}}],
        "unevaluatedProperties": False,
    }
    e = refusal(schema)
    assert (e.keyword, e.where) == (
        "unevaluatedProperties",
        "/unevaluatedProperties",
    ) and "$id" in e.reason


def test_the_annotation_is_no_keyword_before_2019() -> None:
    assert compile_({"unevaluatedProperties": False}, "draft-07").accepts(b'{"a":1}')


# -- the property: random small schemas, random instances ----------------------------------------
LEAVES: list[Any] = [True, False, {"type": "string"}, {"type": "integer"}, {"const": 1}, {"type": "null"}]
KEYS = ["a", "b", "xa", "c"]
VALUES: list[Any] = [1, "s", None]


def _leaf() -> st.SearchStrategy[Any]:
    return st.sampled_from(LEAVES)


@st.composite
def _object_schema(draw: st.DrawFn, depth: int, draft: str) -> dict[str, Any]:
    s: dict[str, Any] = {}
    if draw(st.booleans()):
        s["properties"] = draw(st.dictionaries(st.sampled_from(["a", "b"]), _leaf(), min_size=1, max_size=2))
    if draw(st.integers(0, 3)) == 0:
        s["patternProperties"] = {"^x": draw(_leaf())}
    if draw(st.integers(0, 5)) == 0:
        s["additionalProperties"] = draw(st.booleans() if draft == "2019-09" else _leaf())
    if draw(st.integers(0, 3)) == 0:
        s["required"] = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True))
    if depth > 0:
        sub = _object_schema(depth - 1, draft)
        kw = draw(st.sampled_from(["allOf", "anyOf", "oneOf", "if", "dependentSchemas", "not", None]))
        if kw in ("allOf", "anyOf", "oneOf"):
            s[kw] = draw(st.lists(sub, min_size=1, max_size=3))
        elif kw == "if":
            s["if"] = draw(sub)
            if draw(st.booleans()):
                s["then"] = draw(sub)
            if draw(st.booleans()):
                s["else"] = draw(sub)
        elif kw == "dependentSchemas":
            s[kw] = {draw(st.sampled_from(KEYS)): draw(sub)}
        elif kw == "not":
            s[kw] = draw(sub)
    if draw(st.integers(0, 2)) == 0:
        s["unevaluatedProperties"] = draw(st.booleans() if draft == "2019-09" else _leaf())
    return s


@st.composite
def _array_schema(draw: st.DrawFn, depth: int, draft: str) -> dict[str, Any]:
    s: dict[str, Any] = {}
    prefix = draw(st.lists(_leaf(), max_size=2))
    if prefix:
        s["prefixItems" if draft == "2020-12" else "items"] = prefix
    if draw(st.integers(0, 3)) == 0:
        s["items" if draft == "2020-12" or not prefix else "additionalItems"] = draw(
            _leaf().filter(lambda x: not isinstance(x, bool)) if draft == "2019-09" else _leaf()
        )
    if draw(st.integers(0, 3)) == 0:
        s["contains"] = draw(_leaf())
    if depth > 0:
        sub = _array_schema(depth - 1, draft)
        kw = draw(st.sampled_from(["allOf", "anyOf", "oneOf", "if", "not", None]))
        if kw in ("allOf", "anyOf", "oneOf"):
            s[kw] = draw(st.lists(sub, min_size=1, max_size=3))
        elif kw == "if":
            s["if"] = draw(sub)
            if draw(st.booleans()):
                s["then"] = draw(sub)
            if draw(st.booleans()):
                s["else"] = draw(sub)
        elif kw == "not":
            s[kw] = draw(sub)
    if draw(st.integers(0, 2)) == 0:
        s["unevaluatedItems"] = draw(_leaf())
    return s


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, Any, list[Any]]:
    draft = draw(st.sampled_from(["2020-12", "2019-09"]))
    inst: st.SearchStrategy[Any]
    if draw(st.booleans()):
        schema = draw(_object_schema(2, draft))
        schema.setdefault("unevaluatedProperties", False)  # at least the top level has the keyword
        inst = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
    else:
        schema = draw(_array_schema(2, draft))
        schema.setdefault("unevaluatedItems", False)
        inst = st.lists(st.sampled_from(VALUES), max_size=4)
    return draft, schema, draw(st.lists(inst, min_size=4, max_size=8, unique_by=json.dumps))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_verdicts_equal_jsonschema(case: tuple[str, Any, list[Any]]) -> None:
    draft, schema, instances = case
    try:
        g = compile_(schema, draft)
    except (Unsupported, LimitExceeded):
        assume(False)  # refused: nothing to compare (Hypothesis fails the test if that is most cases)
        return
    oracle = VALIDATORS[draft](schema)
    for inst in instances:
        text = json.dumps(inst)
        assert g.accepts(text.encode()) == oracle.is_valid(inst), f"{draft} {json.dumps(schema)} on {text}"
