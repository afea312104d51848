"""The JSON Schema front-end against ``jsonschema``: hand-picked keyword cases, profiles, refusals,
limits, prefix exactness, and a Hypothesis property over random schemas."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import refdecoder
from props.checks.properties import documented_refusal
from props.checks.witness import shortest_completion
from refdecoder import JsonProfile, JsonSchema, LimitExceeded, SpecError, Unsupported

from ._data import serializations

DUPS = JsonProfile(allow_duplicate_keys=True)


def compile_(schema: Any, **profile: Any) -> refdecoder.Grammar:
    profile.setdefault("allow_duplicate_keys", True)
    return refdecoder.compile(JsonSchema(schema, JsonProfile(**profile)))


def verdict(g: refdecoder.Grammar, text: str) -> bool:
    return g.accepts(text.encode("utf-8"))


# -- RFC 8259 texts ------------------------------------------------------------------------------
NUMBERS_OK = [
    "0",
    "-0",
    "1",
    "-1",
    "10",
    "1.5",
    "0.5",
    "1e5",
    "1E5",
    "1e+5",
    "1E-5",
    "-0.0e0",
    "123456789012345678901234567890",
]
NUMBERS_BAD = ["01", ".5", "1.", "+1", "1e", "1e+", "-", "--1", "0x1", "1.e5", "NaN", "Infinity", "1 2"]


@pytest.mark.parametrize("text", NUMBERS_OK)
def test_numbers_accepted(text: str) -> None:
    assert verdict(compile_({"type": "number"}), text)


@pytest.mark.parametrize("text", NUMBERS_BAD)
def test_numbers_rejected(text: str) -> None:
    assert not verdict(compile_({"type": "number"}), text)


@given(st.text(alphabet="-0123456789.eE+x", max_size=8))
@example("1e5")
@example("-0.5E+3")
@example("01")
@example("1.e5")
def test_unconstrained_number_dfa_equals_the_number_lexeme(text: str) -> None:
    """The fast path (a DFA for numbers without bounds) against the exact lexeme it replaces:
    same viability of every prefix, same acceptance."""
    from refdecoder._numbers import NumberLexeme, NumberPredicate, any_number_dfa

    dfa, lex = any_number_dfa(), NumberLexeme(NumberPredicate.any())
    d: Any = dfa.start()
    x: Any = lex.start()
    for b in text.encode():
        d = None if d is None else dfa.step(d, b)
        x = None if x is None else lex.step(x, b)
        assert (d is None) == (x is None), text
    assert (d is not None and dfa.is_final(d)) == (x is not None and lex.is_final(x)), text


STRINGS_OK = [
    '""',
    '"a"',
    '"\\u00e9"',
    '"\\uD83D\\uDE00"',
    '"\\ud83d\\ude00"',
    '"\\n\\t\\"\\\\\\/\\b\\f\\r"',
    '"é😀中"',
]
STRINGS_BAD = ['"', '"\\x"', '"\\u12"', '"\\uD83D"', '"\\uDE00"', '"a\nb"', "'a'", '"\\U00000041"', '"\x01"']


@pytest.mark.parametrize("text", STRINGS_OK)
def test_strings_accepted(text: str) -> None:
    assert verdict(compile_({"type": "string"}), text)


@pytest.mark.parametrize("text", STRINGS_BAD)
def test_strings_rejected(text: str) -> None:
    assert not verdict(compile_({"type": "string"}), text)


def test_true_false_schemas() -> None:
    t, f = compile_(True), compile_(False)
    for text in ["null", "1", '"x"', '[1,{"a":[]}]', ' {"a" : true} ']:
        assert verdict(t, text)
        assert not verdict(f, text)
    assert f.initial().is_dead
    assert not verdict(t, "[1,]") and not verdict(t, "{,}") and not verdict(t, "")


# -- keywords vs jsonschema on hand-picked instances ----------------------------------------------
CASES: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "integer"}, [1, 1.0, 1.5, -0.0, 10**20, "1"]),
    ({"type": ["string", "null"]}, [None, "a", 1]),
    ({"enum": [1, "a", None, [1, 2], {"k": 1}]}, [1, 1.0, "a", None, [1, 2], [2, 1], {"k": 1}, {"k": 2}, {}]),
    (
        {"const": {"a": [1, {"b": None}], "c": "d"}},
        [{"a": [1, {"b": None}], "c": "d"}, {"c": "d", "a": [1, {"b": None}]}, {"a": [1]}],
    ),
    ({"minimum": 2, "exclusiveMaximum": 5}, [1, 2, 4.999, 5, 2e0, "x"]),
    ({"multipleOf": 0.5}, [1, 1.5, 1.25, 0, -2.5]),
    ({"minLength": 2, "maxLength": 3}, ["a", "ab", "abc", "abcd", "😀😀", 5]),
    ({"pattern": "^a[0-9]+$"}, ["a1", "a12", "ab", "xa1", 3]),
    ({"pattern": "b"}, ["abc", "b", "ac"]),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
        },
        [{"a": 1}, {"a": 1, "b": "x"}, {"b": "x"}, {"a": "1"}, {"a": 1, "c": None}],
    ),
    ({"type": "object", "properties": {"a": {}}, "additionalProperties": False}, [{}, {"a": 1}, {"b": 1}]),
    (
        {
            "type": "object",
            "patternProperties": {"^x": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        [{"x1": 1}, {"x1": "a"}, {"y": "a"}, {"y": 1}, {"x": 1, "y": "s"}],
    ),
    ({"propertyNames": {"maxLength": 2}}, [{"ab": 1}, {"abc": 1}, {}]),
    ({"minProperties": 1, "maxProperties": 2}, [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}]),
    ({"dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}, {}]),
    (
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        [[], [1], [1, 2, 3], [1, 2, 3, 4], [1, "a"]],
    ),
    (
        {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        [["a", 1], ["a"], ["a", 1, 2], [1, "a"], []],
    ),
    (
        {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
        [[1], [1, 2], ["a", 1, "b", 2], [1, 2, 3, 4], []],
    ),
    ({"anyOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5, 1.5, "x"]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5, 3, 1.5]),
    ({"oneOf": [{"multipleOf": 5}, {"multipleOf": 3}]}, [15, 3, 5, 7]),
    (
        {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 3}}}]},
        [{"a": 3}, {"a": 2}, {"a": 3.5}],
    ),
    ({"not": {"type": "string"}}, ["a", 1, None, [], {}]),
    ({"not": {"required": ["a"]}}, [{"a": 1}, {"b": 1}, {}]),
    (
        {
            "if": {"properties": {"k": {"const": 1}}, "required": ["k"]},
            "then": {"required": ["x"]},
            "else": {"required": ["y"]},
        },
        [{"k": 1, "x": 0}, {"k": 1, "y": 0}, {"k": 2, "y": 0}, {"y": 0}, {"x": 0}],
    ),
    (
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                    "additionalProperties": False,
                }
            },
            "$ref": "#/$defs/node",
        },
        [{}, {"v": 1, "next": {"v": 2, "next": {}}}, {"next": {"w": 1}}],
    ),
    (
        {
            "$id": "http://x.test/root",
            "$defs": {"a": {"$anchor": "A", "type": "integer"}},
            "items": {"$ref": "#A"},
        },
        [[1, 2], [1, "a"]],
    ),
    # Member names "default"/"enum"/"const"/"examples" in a map of schemas are schema names, not values.
    (
        {
            "$defs": {"default": {"$anchor": "D", "type": "integer"}, "enum": {"$id": "http://x.test/e"}},
            "properties": {"const": {"$ref": "#D"}, "examples": {"$ref": "http://x.test/e"}},
        },
        [{"const": 1}, {"const": "a"}, {"examples": []}],
    ),
    # ... in every map of schemas (patternProperties, dependentSchemas, nested $defs), and for
    # $dynamicAnchor too.
    (
        {
            "patternProperties": {"default": {"$anchor": "P", "type": "integer"}},
            "dependentSchemas": {"examples": {"$anchor": "Q", "minimum": 3}},
            "$defs": {"const": {"$defs": {"enum": {"$dynamicAnchor": "R", "multipleOf": 3}}}},
            "items": {"allOf": [{"$ref": "#P"}, {"$ref": "#Q"}, {"$ref": "#R"}]},
        },
        [[3], [6, 9], [2], [4], ["a"], {"default": "x"}, {"default": 1, "examples": 1}],
    ),
    (
        {
            "$id": "http://x.test/root",
            "properties": {"default": {"$id": "d", "$defs": {"x": {"type": "string"}}}},
            "items": {"$ref": "d#/$defs/x"},
        },
        [["a"], [1], {"default": 1}],
    ),
]


def test_draft7_id_anchor_under_definitions_default() -> None:
    """A draft-07 ``$id: "#A"`` under ``definitions/default`` is a schema's anchor, not a value's."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"default": {"$id": "#A", "type": "integer"}},
        "items": {"$ref": "#A"},
    }
    g = refdecoder.compile(JsonSchema(schema))
    assert verdict(g, "[1]") and not verdict(g, '["a"]')


@pytest.mark.parametrize("schema, instances", CASES, ids=[json.dumps(c[0])[:60] for c in CASES])
def test_keywords_agree_with_jsonschema(schema: dict[str, Any], instances: list[Any]) -> None:
    g = compile_(schema)
    v = jsonschema.Draft202012Validator(schema)
    for inst in instances:
        expected = v.is_valid(inst)
        for text in serializations(inst, reorder=True, escapes=True):
            assert verdict(g, text) == expected, (schema, text, expected)


# -- profiles ----------------------------------------------------------------------------------------
def test_whitespace_profiles() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    assert verdict(compile_(schema), " [ 1 ,\t2\n] ")
    none = compile_(schema, whitespace="none")
    assert verdict(none, "[1,2]") and not verdict(none, "[1, 2]") and not verdict(none, " [1]")
    two = compile_(schema, whitespace=2)
    assert verdict(two, "[  1,2 ]") and not verdict(two, "[   1]")


def test_property_order_schema() -> None:
    schema = {"properties": {"a": {}, "b": {}}, "additionalProperties": False}
    g = compile_(schema, property_order="schema")
    assert verdict(g, '{"a":1,"b":2}') and verdict(g, '{"b":2}') and not verdict(g, '{"b":2,"a":1}')
    assert verdict(compile_(schema), '{"b":2,"a":1}')


def test_duplicate_keys() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    assert not verdict(compile_(schema, allow_duplicate_keys=False), '{"a":1,"a":2}')
    assert verdict(compile_(schema, allow_duplicate_keys=True), '{"a":1,"a":2}')
    # undeclared keys are remembered (refdecoder/_keymemory.py): repeats are excluded exactly
    free = compile_({"type": "object"}, allow_duplicate_keys=False)
    assert verdict(free, '{"a":1,"b":2}') and not verdict(free, '{"a":1,"a":2}')
    assert not verdict(free, '{"a":1,"\\u0061":2}')
    assert verdict(compile_({"type": "object"}, allow_duplicate_keys=True), '{"a":1,"a":2}')


def test_additional_properties_default_false() -> None:
    g = compile_({"properties": {"a": {}}}, additional_properties_default=False)
    assert verdict(g, '{"a":1}') and not verdict(g, '{"b":1}')


def test_unicode_escapes_profile() -> None:
    g = compile_({"type": "string"}, unicode_escapes=False)
    assert verdict(g, '"é"') and verdict(g, '"\\n"') and not verdict(g, '"\\u00e9"')


def test_many_properties_any_order_do_not_explode() -> None:
    n = 40
    schema = {
        "properties": {f"k{i}": {"type": "integer"} for i in range(n)},
        "required": [f"k{i}" for i in range(n)],
        "additionalProperties": False,
    }
    g = compile_(schema)
    value = {f"k{i}": i for i in reversed(range(n))}
    assert verdict(g, json.dumps(value))
    del value["k7"]
    assert not verdict(g, json.dumps(value))


# -- refusals and limits ------------------------------------------------------------------------------
def test_refusals_name_keyword_and_pointer() -> None:
    with pytest.raises(Unsupported) as e:
        compile_({"properties": {"a": {"type": "array", "items": {"type": "object"}, "uniqueItems": True}}})
    assert e.value.keyword == "uniqueItems" and e.value.where == "/properties/a/uniqueItems"
    with pytest.raises(Unsupported):
        compile_({"$ref": "#"})
    with pytest.raises(Unsupported):
        compile_({"$ref": "http://example.com/remote.json"})


def test_malformed_schema_is_a_spec_error() -> None:
    for bad in [
        {"type": "nope"},
        {"minLength": -1},
        {"required": "a"},
        {"multipleOf": 0},
        {"properties": []},
    ]:
        with pytest.raises(SpecError):
            compile_(bad)


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    schema: dict[str, Any] = {}
    cur = schema
    for _ in range(10_000):
        cur["items"] = {}
        cur = cur["items"]
    with pytest.raises(LimitExceeded) as e:
        compile_(schema)
    assert e.value.limit == "nesting_depth"


def test_fingerprint_ignores_key_order_and_whitespace() -> None:
    a = refdecoder.compile(JsonSchema(json.loads('{"type": "object", "required": ["x"]}'), DUPS))
    b = refdecoder.compile(JsonSchema(json.loads('{"required":["x"],"type":"object"}'), DUPS))
    assert a.fingerprint == b.fingerprint


# -- prefix exactness ---------------------------------------------------------------------------------
PREFIX_SCHEMAS = [
    {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 3}, "n": {"type": "integer", "minimum": 10}},
        "required": ["name"],
        "additionalProperties": False,
    },
    {"type": "array", "prefixItems": [{"enum": ["ab", "ac"]}], "items": {"type": "boolean"}, "maxItems": 2},
    {"anyOf": [{"type": "string", "pattern": "^x+$"}, {"type": "number", "maximum": -1}]},
]


@pytest.mark.parametrize("schema", PREFIX_SCHEMAS, ids=range(len(PREFIX_SCHEMAS)))
@given(data=st.data())
@settings(max_examples=15)
def test_prefix_exactness(schema: dict[str, Any], data: st.DataObject) -> None:
    """Every prefix of a valid text advances; prefix + any byte advances iff a completion exists:
    when it advances we exhibit a completion and validate it independently; when it does not, no
    known valid text starts with those bytes."""
    from hypothesis_jsonschema import from_schema

    g = compile_(schema)
    value = data.draw(from_schema(schema))
    assume(jsonschema.Draft202012Validator(schema).is_valid(value))  # hypothesis-jsonschema predates 2020-12
    text = data.draw(st.sampled_from(serializations(value, reorder=True, escapes=True))).encode()
    cut = data.draw(st.integers(0, len(text)))
    prefix = text[:cut]
    state = g.advance(g.initial(), prefix)
    assert state is not None, (schema, text, cut)
    byte = data.draw(st.integers(0, 255))
    nxt = g.advance_byte(state, byte)
    extended = prefix + bytes([byte])
    if nxt is not None:
        completion = shortest_completion(g, nxt)
        assert completion is not None, (schema, extended)
        full = extended + completion
        jsonschema.validate(json.loads(full), schema)
    else:
        assert not text.startswith(extended)


# -- random schemas vs jsonschema ---------------------------------------------------------------------
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, 2.5, -1.5]),
    st.sampled_from(["", "a", "ab", "é"]),
)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.one_of(
        st.builds(
            lambda t: {"type": t},
            st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"]),
        ),
        st.builds(lambda v: {"const": v}, SCALARS),
        st.builds(lambda vs: {"enum": vs}, st.lists(SCALARS, min_size=1, max_size=3)),
        st.builds(
            lambda lo, hi: {"type": "integer", "minimum": lo, "maximum": hi},
            st.integers(-3, 3),
            st.integers(-3, 5),
        ),
        st.builds(lambda m: {"multipleOf": m}, st.sampled_from([2, 3, 0.5])),
        st.builds(
            lambda lo, hi: {"type": "string", "minLength": lo, "maxLength": hi},
            st.integers(0, 2),
            st.integers(0, 3),
        ),
        st.builds(
            lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a", "b$", "^[a-c]+$", "x|y"])
        ),
    )

    def extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        props = st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2)
        return st.one_of(
            st.builds(
                lambda p, r, ap: {
                    "type": "object",
                    "properties": p,
                    "required": sorted(set(r) & set(p)),
                    "additionalProperties": ap,
                },
                props,
                st.lists(st.sampled_from(["a", "b"]), max_size=2),
                st.one_of(st.booleans(), inner),
            ),
            st.builds(
                lambda i, lo, hi: {"type": "array", "items": i, "minItems": lo, "maxItems": hi},
                inner,
                st.integers(0, 1),
                st.integers(1, 3),
            ),
            st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=2)),
            st.builds(lambda xs: {"allOf": xs}, st.lists(inner, min_size=1, max_size=2)),
            st.builds(lambda x: {"not": x}, leaf),
        )

    return st.recursive(leaf, extend, max_leaves=4)


def _float_loses_value(text: str) -> bool:
    """Whether parsing ``text`` as JSON with Python floats underflows a nonzero number to 0.0 or
    overflows one to infinity (then ``jsonschema`` judges another number than the text has)."""
    lost = False

    def parse(s: str) -> float:
        nonlocal lost
        f = float(s)
        lost = lost or math.isinf(f) or (f == 0.0 and Decimal(s) != 0)
        return f

    json.loads(text, parse_float=parse)
    return lost


def _mutations(text: str) -> list[str]:
    out = [
        text[:-1],
        text + "0",
        text.replace(":", ":[", 1),
        text.replace('"', "", 1),
        text.replace("1", "2", 1),
    ]
    return [t for t in out if t != text]


@given(schema=_schemas(), data=st.data())
@settings(max_examples=30)
def test_random_schemas_agree_with_jsonschema(schema: dict[str, Any], data: st.DataObject) -> None:
    from hypothesis_jsonschema import from_schema

    try:
        g = compile_(schema)
    except Unsupported:
        assume(False)
        return
    validator = jsonschema.Draft202012Validator(schema)
    values = [
        data.draw(
            st.one_of(
                SCALARS,
                st.lists(SCALARS, max_size=2),
                st.dictionaries(st.sampled_from("abc"), SCALARS, max_size=2),
            )
        )
    ]
    try:
        values.append(data.draw(from_schema(schema)))
    except Exception as e:  # only the refusals hypothesis-jsonschema documents; a broken install is loud
        if documented_refusal(e) is None:
            raise
    for value in values:
        text = json.dumps(value)
        for candidate in [text, *_mutations(text)]:
            try:
                parsed = json.loads(candidate)
            except ValueError:
                assert not verdict(g, candidate), (schema, candidate)
                continue
            if _float_loses_value(candidate):
                continue  # Python's float is no oracle for 1e-550 or 1e999 (0.0, inf): the reference is exact
            assert verdict(g, candidate) == validator.is_valid(parsed), (schema, candidate)


def test_alternatives_and_key_rules_are_limit_fields() -> None:
    """The size caps of unions and key partitions come from ``Limits``, so a user can raise them."""
    one_of = {
        "oneOf": [
            {"properties": {"a": {"const": 1}, "b": {"const": 2}}},
            {"properties": {"a": {"const": 3}, "b": {"const": 4}}},
        ]
    }
    g = refdecoder.compile(JsonSchema(one_of, JsonProfile()))
    assert verdict(g, '{"a":1}') and not verdict(g, "{}")  # {} meets both branches
    with pytest.raises(Unsupported) as e:
        refdecoder.compile(JsonSchema(one_of, JsonProfile()), refdecoder.Limits(alternatives=2))
    assert e.value.keyword == "oneOf" and "alternatives" in e.value.reason
    rules = {"patternProperties": {"^a": {"type": "integer"}, "^b": {"type": "string"}, "c$": {}}}
    refdecoder.compile(JsonSchema(rules, JsonProfile()))
    with pytest.raises(LimitExceeded) as e2:
        refdecoder.compile(JsonSchema(rules, JsonProfile()), refdecoder.Limits(key_rules=2))
    assert e2.value.limit == "key_rules"
