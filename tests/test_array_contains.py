"""Several ``contains`` on one array, each counted on its own (``ArrayShape.contains``, the count
tuple of ``ArrayNode``): from ``allOf``, from complements (``not`` of ``contains``/``minContains``/
``maxContains``, of ``items``), and the ``oneOf`` that needs those complements. Verdicts are checked
against ``jsonschema`` on generated arrays, and every prefix the matcher keeps alive must complete.
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


_ITEM = st.sampled_from(
    [
        {"type": "integer"},
        {"type": "string"},
        {"const": 1},
        {"minimum": 2},
        {"enum": [0, "a"]},
        {"not": {"const": 0}},
    ]
)


@st.composite
def _contains(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"contains": draw(_ITEM)}
    if draw(st.booleans()):
        out["minContains"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        out["maxContains"] = draw(st.integers(0, 2))
    return out


@st.composite
def _array_part(draw: Any) -> dict[str, Any]:
    part = draw(_contains())
    if draw(st.booleans()):
        part["items"] = draw(_ITEM)
    if draw(st.booleans()):
        part["prefixItems"] = [draw(_ITEM)]
    if draw(st.booleans()):
        part["maxItems"] = draw(st.integers(1, 4))
    return part


@st.composite
def _schemas(draw: Any) -> dict[str, Any]:
    parts = draw(st.lists(_array_part(), min_size=1, max_size=3))
    how = draw(st.sampled_from(["allOf", "oneOf", "not"]))
    if how == "not":
        return {"type": "array", "allOf": [parts[0], {"not": parts[-1]}]}
    return {"type": "array", how: parts}


_ARRAYS = st.lists(st.sampled_from([0, 1, 2, 3, "a", "b", None]), max_size=5)


@settings(max_examples=300, deadline=None)
@given(_schemas(), st.lists(_ARRAYS, min_size=1, max_size=6))
def test_verdicts_equal_jsonschema(schema: dict[str, Any], arrays: list[list[Any]]) -> None:
    try:
        g = refdecoder.compile_json_schema(schema)
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return  # a precise refusal is allowed (e.g. an 'alternatives' limit)
    texts = [json.dumps(a, separators=(",", ":")).encode() for a in arrays]
    for text in texts:
        assert g.accepts(text) == _valid(schema, text), (schema, text)
    assert_live_prefixes_complete(g, texts[0], lambda t: _valid(schema, t), schema)


@pytest.mark.parametrize(
    ("schema", "yes", "no"),
    [
        (  # JSONSchemaBench Handwritten---itemscontains2-like: two contains from allOf
            {"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}, "maxContains": 1}]},
            ["[1,2]", "[2,1,1]"],
            ["[1]", "[2]", "[1,2,2]", "[]"],
        ),
        (  # the complement of a contains: "fewer than two 1s"
            {"not": {"contains": {"const": 1}, "minContains": 2}, "contains": {"type": "string"}},
            ['["a"]', '[1,"a"]'],
            ["[1]", '[1,1,"a"]'],
        ),
        (  # oneOf of items/contains (Handwritten---oneofitemscontains*, small)
            {
                "oneOf": [
                    {"items": {"type": "integer"}, "contains": {"minimum": 3}},
                    {"items": {"minimum": 2}, "contains": {"type": "integer"}},
                ]
            },
            ["[3,1]", '["a",2]', "[2]"],
            ["[3]", "[1]", "[]", '["a"]'],
        ),
    ],
)
def test_hand_cases(schema: dict[str, Any], yes: list[str], no: list[str]) -> None:
    schema = {"type": "array", **schema}
    g = refdecoder.compile_json_schema(schema)
    for text in yes:
        assert g.accepts(text.encode()) and _valid(schema, text.encode()), text
    for text in no:
        assert not g.accepts(text.encode()) and not _valid(schema, text.encode()), text


_CONST_ARRAYS = [[1], [1.0], [3, 4], [5], [1, 2], [True], [], [[1]], [{"a": 1}]]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_CONST_ARRAYS), min_size=1, max_size=4), min_size=2, max_size=4),
    st.sampled_from(["oneOf", "allOf", "anyOf"]),
)
def test_enums_of_arrays_equal_jsonschema(enums: list[list[Any]], how: str) -> None:
    """``oneOf`` over enums of arrays counts each constant (Handwritten---key8: no complement);
    ``allOf`` drops the empty intersections (Handwritten---key6)."""
    schema = {"type": "array", how: [{"enum": e} for e in enums]}
    g = refdecoder.compile_json_schema(schema)
    for a in [*_CONST_ARRAYS, [1, 1], [2], [4, 3]]:
        text = json.dumps(a, separators=(",", ":")).encode()
        assert g.accepts(text) == _valid(schema, text), (schema, text)
