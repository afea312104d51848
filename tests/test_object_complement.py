"""Complements of object schemas that constrain undeclared keys (``ObjectShape.exists``).

``not`` over patternProperties / additionalProperties / propertyNames / dependentRequired / const
objects becomes a union of object shapes with *exists* entries ("some member whose key is in L has a
value in e"), the dual of rules. Verdicts are checked against ``jsonschema`` on generated objects,
and every prefix the matcher keeps alive must complete (no dead ends).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder

from ._data import assert_live_prefixes_complete


def _valid(schema: dict[str, Any], text: bytes) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)))


@pytest.mark.parametrize(
    ("schema", "yes", "no"),
    [
        ({"not": {"patternProperties": {"b": False}}}, ['{"ab":1}', '{"x":0,"b":0}'], ["{}", '{"a":1}']),
        ({"not": {"additionalProperties": False}}, ['{"a":1}'], ["{}"]),
        (
            {"not": {"additionalProperties": {"type": "string"}}},
            ['{"a":1}', '{"a":"x","b":null}'],
            ['{"a":"x"}'],
        ),
        ({"not": {"propertyNames": {"maxLength": 1}}}, ['{"ab":1}'], ['{"a":1,"b":2}', "{}"]),
        ({"not": {"dependentRequired": {"a": ["b"]}}}, ['{"a":1}'], ['{"a":1,"b":2}', '{"b":1}']),
        ({"not": {"const": {"a": 1}}}, ['{"a":2}', '{"a":1,"b":1}', "{}"], ['{"a":1}']),
        (
            {"not": {"not": {"patternProperties": {"^a": {"type": "integer"}}}}},
            ['{"ab":1}', '{"b":"x"}'],
            ['{"ab":"x"}'],
        ),
        (
            {"properties": {"a": {}}, "not": {"additionalProperties": False}, "maxProperties": 1},
            ['{"b":0}', '{"a":0}'],  # the inner schema declares no key: "a" is additional there
            ["{}", '{"a":0,"b":0}'],
        ),
    ],
)
def test_hand_cases(schema: dict[str, Any], yes: list[str], no: list[str]) -> None:
    schema = {"type": "object", **schema}
    g = refdecoder.compile_json_schema(schema)
    for text in yes:
        assert g.accepts(text.encode()) and _valid(schema, text.encode()), text
    for text in no:
        assert not g.accepts(text.encode()) and not _valid(schema, text.encode()), text


_KEYS = ["a", "b", "ab", "ba", "c"]


@st.composite
def _object_schema(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    value = st.sampled_from([False, True, {"type": "integer"}, {"type": "string"}, {"const": 0}])
    if draw(st.booleans()):
        out["properties"] = {k: draw(value) for k in draw(st.sets(st.sampled_from(["a", "b"]), max_size=2))}
    if draw(st.booleans()):
        out["patternProperties"] = {draw(st.sampled_from(["^a", "b$", "^c$"])): draw(value)}
    if draw(st.booleans()):
        out["additionalProperties"] = draw(value)
    if draw(st.booleans()):
        out["propertyNames"] = {"maxLength": draw(st.integers(1, 2))}
    if draw(st.booleans()):
        out["dependentRequired"] = {"a": ["b"]}
    if draw(st.booleans()):
        out["required"] = sorted(draw(st.sets(st.sampled_from(["a", "c"]), max_size=1)))
    if draw(st.booleans()):
        out["minProperties"] = draw(st.integers(0, 2))
    return out


@st.composite
def _schemas(draw: Any) -> dict[str, Any]:
    inner = draw(_object_schema())
    schema: dict[str, Any] = {"type": "object", "not": inner}
    if draw(st.booleans()):
        schema["not"] = {"allOf": [inner, {"not": draw(_object_schema())}]}
    if draw(st.booleans()):
        schema.update(draw(_object_schema()))
    return schema


@st.composite
def _objects(draw: Any) -> bytes:
    keys = draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=4))
    obj = {k: draw(st.sampled_from([0, 1, "x", None])) for k in keys}
    return json.dumps(obj, separators=(",", ":")).encode()


@settings(max_examples=300, deadline=None)
@given(_schemas(), st.lists(_objects(), min_size=1, max_size=4))
def test_verdicts_equal_jsonschema(schema: dict[str, Any], texts: list[bytes]) -> None:
    try:
        g = refdecoder.compile_json_schema(schema)
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return  # a precise refusal is allowed (e.g. the complement of a value schema)
    for text in texts:
        assert g.accepts(text) == _valid(schema, text), (schema, text)


@settings(max_examples=150, deadline=None)
@given(_schemas(), _objects())
def test_every_live_prefix_completes(schema: dict[str, Any], text: bytes) -> None:
    try:
        g = refdecoder.compile_json_schema(schema)
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return
    assert_live_prefixes_complete(g, text, lambda t: _valid(schema, t), schema)


# -- oneOf over object branches: groups of overlapping branches, and splitting on a discriminating key
@st.composite
def _branch(draw: Any) -> dict[str, Any]:
    tag = st.sampled_from([{"const": 0}, {"const": 1}, {"enum": [1, "x"]}, {"type": "string"}, True])
    value = st.sampled_from([True, {"type": "integer"}, {"type": "string"}, {"const": 0}])
    out: dict[str, Any] = {"properties": {"k": draw(tag)}}
    for k in draw(st.sets(st.sampled_from(["a", "b"]), max_size=2)):
        out["properties"][k] = draw(value)
    if draw(st.booleans()):
        out["required"] = sorted(draw(st.sets(st.sampled_from(["k", "a"]), min_size=1, max_size=2)))
    if draw(st.booleans()):
        out["additionalProperties"] = False
    return out


@st.composite
def _one_of_schemas(draw: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "oneOf": draw(st.lists(_branch(), min_size=2, max_size=4))}
    if draw(st.booleans()):
        schema["required"] = ["k"]
    return schema


@st.composite
def _tagged_objects(draw: Any) -> bytes:
    keys = draw(st.lists(st.sampled_from(["k", "a", "b", "c"]), unique=True, max_size=3))
    obj = {k: draw(st.sampled_from([0, 1, "x", None])) for k in keys}
    return json.dumps(obj, separators=(",", ":")).encode()


def _agrees_under_alternatives(schema: dict[str, Any], texts: list[bytes], bound: int) -> None:
    """Compiled under ``alternatives=bound`` (or refused), the reference agrees with ``jsonschema``
    on ``texts``, and every live prefix of the first can still be completed."""
    try:
        g = refdecoder.compile(refdecoder.JsonSchema(schema), refdecoder.Limits(alternatives=bound))
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return
    for text in texts:
        assert g.accepts(text) == _valid(schema, text), (schema, text)
    assert_live_prefixes_complete(g, texts[0], lambda t: _valid(schema, t), schema)


@settings(max_examples=300, deadline=None)
@given(_one_of_schemas(), st.lists(_tagged_objects(), min_size=1, max_size=6), st.sampled_from([2, 8, 64]))
def test_one_of_objects_equal_jsonschema(schema: dict[str, Any], texts: list[bytes], bound: int) -> None:
    """A tight ``alternatives`` limit sends more unions through the split on a discriminating key."""
    _agrees_under_alternatives(schema, texts, bound)


def test_one_of_split_on_optional_discriminator() -> None:
    """Branches told apart by an optional enum key (JSONSchemaBench Github_easy---o35866, small):
    with the key absent every branch may match, and exactly one must."""
    branch = [
        {"properties": {"country": {"enum": [c]}, "state": {"enum": s}, "zip": {"maxLength": 2}}}
        for c, s in (("CAN", ["AB", "BC"]), ("MEX", ["JA"]), ("USA", ["AL", "AK"]))
    ]
    branch.append(
        {"properties": {"country": {"not": {"enum": ["CAN", "MEX", "USA"]}}, "state": {"maxLength": 3}}}
    )
    schema = {"type": "object", "oneOf": branch}
    g = refdecoder.compile(refdecoder.JsonSchema(schema), refdecoder.Limits(alternatives=24))
    for obj in (
        {},
        {"country": "CAN"},
        {"country": "CAN", "state": "JA"},
        {"country": "FRA", "state": "JA"},
        {"state": "JA"},
        {"state": "ABCD"},
        {"state": "AB", "zip": "123"},
        {"zip": "1"},
        {"country": "USA", "state": "AL", "zip": "12"},
    ):
        text = json.dumps(obj).encode()
        assert g.accepts(text) == _valid(schema, text), obj


@st.composite
def _not_any_of(draw: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "not": {"anyOf": draw(st.lists(_branch(), min_size=2, max_size=4))},
    }
    if draw(st.booleans()):
        schema["required"] = ["k"]
    return schema


@settings(max_examples=200, deadline=None)
@given(_not_any_of(), st.lists(_tagged_objects(), min_size=1, max_size=6), st.sampled_from([2, 4, 8]))
def test_complement_of_union_equal_jsonschema(schema: dict[str, Any], texts: list[bytes], bound: int) -> None:
    """``¬(P_1 ∪ … ∪ P_n)`` past the ``alternatives`` limit is taken cell by cell of a split on a key."""
    _agrees_under_alternatives(schema, texts, bound)
