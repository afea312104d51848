"""``uniqueItems`` decided exactly (refdecoder/_valuememory.py).

The oracle is ``jsonschema`` on the instance parsed with exact decimals (``parse_float=Decimal``: the
reference compares numbers as exact decimals, ``0.1`` and ``0.10000000000000001`` are two numbers),
with one correction: ``jsonschema``'s ``uniq`` sorts the items first and compares neighbours, which
misses duplicates that Python's ``==`` separates by an item it calls equal (``[[1],[true],[1]]`` is
"unique" for it); the oracle checks ``uniqueItems`` pairwise with ``jsonschema``'s own ``equal``.
Viable prefixes are checked through completions: every prefix of an instance the matcher keeps alive
has a completion (``Grammar.completion``) the matcher accepts.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import _utils

import refdecoder
from refdecoder import Unsupported
from refdecoder._valuememory import canonical_number, views

from ._data import assert_live_prefixes_complete


def _compile(schema: Any, **profile: Any) -> refdecoder.Grammar:
    return refdecoder.compile_json_schema(schema, **profile)


def _unique_items(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if value and validator.is_type(instance, "array"):
        for a, b in itertools.combinations(instance, 2):
            if _utils.equal(a, b):
                yield jsonschema.ValidationError("non-unique elements")
                return


def _is_number(checker: Any, instance: Any) -> bool:
    return isinstance(instance, (int, Decimal)) and not isinstance(instance, bool)


def _is_integer(checker: Any, instance: Any) -> bool:
    if isinstance(instance, Decimal):
        return instance == instance.to_integral_value()
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {"uniqueItems": _unique_items},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"number": _is_number, "integer": _is_integer}
    ),
)


def _oracle(schema: Any, text: bytes) -> bool:
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: ("pairs", kv))
        value = json.loads(text, parse_float=Decimal)
    except ValueError:
        return False

    def distinct_keys(v: Any) -> bool:  # the default profile: no repeated key
        if isinstance(v, tuple) and v and v[0] == "pairs":
            names = [k for k, _ in v[1]]
            return len(names) == len(set(names)) and all(distinct_keys(x) for _, x in v[1])
        if isinstance(v, list):
            return all(distinct_keys(x) for x in v)
        return True

    exact = json.loads(json.dumps(schema), parse_float=Decimal)  # schema constants as exact decimals too
    return distinct_keys(pairs) and bool(_Validator(exact).is_valid(value))


# -- canonical values ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("1", "1.0", True),
        ("1", "1e0", True),
        ("100", "1E2", True),
        ("0.5", "5e-1", True),
        ("-0", "0", True),
        ("0.0e5", "0", True),
        ("12.30", "1.23e1", True),
        ("1", "-1", False),
        ("0.1", "0.10000000000000001", False),
        ("1e400", "1e401", False),
        ('"a"', '"\\u0061"', True),
        ('"\\u00e9"', '"\u00e9"', True),
        ('{"a":1,"b":[2]}', '{"b":[2.0],"a":1e0}', True),
        ("[1,2]", "[2,1]", False),
        ("true", "1", False),
        ("null", "false", False),
        ("[]", "{}", False),
    ],
)
def test_views_are_json_equality(a: str, b: str, same: bool) -> None:
    assert (views(a.encode()) == views(b.encode())) is same


def test_canonical_number_of_huge_exponents() -> None:
    assert canonical_number("1e" + "9" * 5000) == canonical_number("10e" + "9" * 4999 + "8")


def test_repeated_keys_give_two_readings() -> None:
    first, last = views(b'{"a":1,"a":2}')
    assert first == views(b'{"a":1}')[0] and last == views(b'{"a":2}')[1]


# -- hand cases ----------------------------------------------------------------------------------
ANY = {"type": "array", "uniqueItems": True}


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (b"[1,2]", True),
        (b"[1,1.0]", False),
        (b"[1,1e0]", False),
        (b"[100, 1E2]", False),
        (b'["a","\\u0061"]', False),
        (b'[{"a":1,"b":2},{"b":2,"a":1}]', False),
        (b'[{"a":1},{"a":2}]', True),
        (b"[[1,2],[2,1]]", True),
        (b"[[1],[1.0]]", False),
        (b"[[1],[true],[1]]", False),  # jsonschema's uniq misses this one (module doc)
        (b"[true,1]", True),
        (b'[false,0,null,[],{},""]', True),
        (b"[null,null]", False),
        (b"[0,-0]", False),
        (b"[]", True),
        (b"[ 1 ,\n2 ]", True),
    ],
)
def test_any_items(text: bytes, ok: bool) -> None:
    assert _compile(ANY).accepts(text) is ok
    assert _oracle(ANY, text) is ok


def test_a_repeated_literal_dies_at_its_first_byte() -> None:
    g = _compile(ANY)
    assert g.advance(g.initial(), b"[true,t") is None
    assert g.advance(g.initial(), b"[null,") is not None
    assert g.advance(g.initial(), b"[null,n") is None


def test_a_repeated_string_or_container_dies_at_its_close() -> None:
    g = _compile(ANY)
    assert g.advance(g.initial(), b'["ab","ab') is not None
    assert g.advance(g.initial(), b'["ab","ab"') is None
    assert g.advance(g.initial(), b"[[1],[1") is not None
    assert g.advance(g.initial(), b"[[1],[1]") is None
    assert g.advance(g.initial(), b"[1,1") is not None  # 1 is written, but 10 and 1.5 are not
    assert not g.accepts(b"[1,1]")


def test_suite_groups_with_two_booleans() -> None:
    s = {"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "uniqueItems": True}
    g = _compile(s)
    assert g.accepts(b"[false,true]") and g.accepts(b"[true,false]")
    assert not g.accepts(b"[true,true]") and not g.accepts(b"[false,false]")
    assert g.accepts(b'[false,true,"foo","bar"]') and not g.accepts(b'[false,true,"foo","foo"]')
    closed = _compile({**s, "items": False})
    assert not closed.accepts(b"[false,true,null]")
    assert closed.accepts(b"[false]") and closed.accepts(b"[]")


def test_hall_condition_decides_finite_positions() -> None:
    # Three positions drawing from {1, 2}: no array of length 3.
    three = _compile({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True, "minItems": 3})
    assert three.advance(three.initial(), b"[") is None
    # Position 1 can only be 1: position 0 must not take it (decided before the first item).
    g = _compile(
        {"type": "array", "prefixItems": [{"enum": [1, 2]}, {"const": 1}], "uniqueItems": True, "minItems": 2}
    )
    assert g.advance(g.initial(), b"[1") is None
    assert g.advance(g.initial(), b"[1.0") is None
    assert g.accepts(b"[2,1]") and g.accepts(b"[2.0,1e0]")
    assert g.advance(g.initial(), b"[0.") is not None  # 0.2e1 is 2
    # Integers 0..3, four of them: every prefix stays completable.
    four = _compile(
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 3},
            "uniqueItems": True,
            "minItems": 4,
        }
    )
    assert four.accepts(b"[3,1,0,2]") and not four.accepts(b"[3,1,0,3]")
    s = four.advance(four.initial(), b"[3,1,0,")
    assert s is not None and four.completion(s) == b"2]"


def test_mixed_positions_share_one_memory() -> None:
    g = _compile({"type": "array", "prefixItems": [{"type": "number"}], "uniqueItems": True})
    assert not g.accepts(b"[1,1.0]")  # the second item is any value, the first a number
    assert g.accepts(b'[1,"1"]')
    s = {"type": "array", "prefixItems": [True], "items": {"type": "string"}, "uniqueItems": True}
    assert not _compile(s).accepts(b'["x","x"]') and _compile(s).accepts(b'[1,"x"]')


def test_max_items_one_needs_no_memory() -> None:
    g = _compile({"type": "array", "items": {"type": "object"}, "uniqueItems": True, "maxItems": 1})
    assert g.accepts(b'[{"a":1}]')


@pytest.mark.parametrize(
    ("schema", "pointer", "why"),
    [
        ({"items": {"type": "object"}, "uniqueItems": True}, "/uniqueItems", "not any JSON value"),
        ({"items": {"type": "array"}, "uniqueItems": True}, "/uniqueItems", "not any JSON value"),
        ({"contains": {"const": 1}, "uniqueItems": True}, "/uniqueItems", "contains"),
        ({"not": {"uniqueItems": True}}, "/not/uniqueItems", "negated"),
        (
            {"properties": {"a": {"uniqueItems": True, "prefixItems": [{"type": "object"}]}}},
            "/properties/a/uniqueItems",
            "prefixItems/0",
        ),
    ],
)
def test_refusals_name_the_keyword_and_pointer(schema: Any, pointer: str, why: str) -> None:
    with pytest.raises(Unsupported) as e:
        _compile(schema)
    assert e.value.keyword == "uniqueItems"
    assert e.value.where == pointer
    assert why in e.value.reason


def test_older_drafts_read_unique_items_alike() -> None:
    s = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "items": [{"type": "boolean"}],
        "uniqueItems": True,
    }
    g = _compile(s)
    assert g.accepts(b"[true,false]") and not g.accepts(b"[true,true]")


def test_duplicate_keys_profile_judges_both_readings() -> None:
    g = _compile(ANY, allow_duplicate_keys=True)
    assert g.accepts(b'[{"a":1,"a":2},{"a":3}]')
    assert not g.accepts(b'[{"a":1,"a":2},{"a":2}]')  # the last readings are equal
    assert not g.accepts(b'[{"a":1,"a":2},{"a":1}]')  # the first readings are equal


def test_token_masks_inside_items_match_bruteforce() -> None:
    from tokenizers_matrix import get

    vocab = get("bpe")
    for schema, prefixes in [
        (ANY, [b"[", b"[1,", b"[1,1", b'["a","', b'["a","a', b"[true,", b"[[1],[1"]),
        (
            {"type": "array", "items": {"enum": [1, 2, "ab", True]}, "uniqueItems": True},
            [b"[", b"[1,", b'[1,"a', b"[true,", b'["ab",'],
        ),
        (
            {
                "type": "array",
                "items": {"type": "integer", "minimum": -2, "maximum": 20},
                "uniqueItems": True,
            },
            [b"[", b"[1,", b"[1,-"],
        ),
        ({"type": "array", "items": {"type": "number"}, "uniqueItems": True}, [b"[1,", b"[1,1", b"[12,1"]),
    ]:
        g = _compile(schema)
        tg = refdecoder.TokenGrammar(g, vocab)
        for prefix in prefixes:
            s = g.advance(g.initial(), prefix)
            assert s is not None, prefix
            assert (tg.mask(s) == tg.mask_bruteforce(s)).all(), (schema, prefix)


# -- properties against the oracle ---------------------------------------------------------------
SCALAR_ITEMS = [
    True,
    {"type": "number"},
    {"type": "integer", "minimum": -1, "maximum": 2},
    {"type": "number", "multipleOf": 0.5, "minimum": 0, "maximum": 3},
    {"enum": [1, 2.5, "a", None, True]},
    {"type": "boolean"},
    {"type": "string", "maxLength": 1},
    {"type": ["string", "null"]},
    {"const": 0},
]


@st.composite
def _schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "uniqueItems": True}
    prefix = draw(st.lists(st.sampled_from(SCALAR_ITEMS), max_size=2))
    if prefix:
        schema["prefixItems"] = prefix
    if draw(st.booleans()):
        schema["items"] = draw(st.sampled_from([*SCALAR_ITEMS, False]))
    if draw(st.booleans()):
        schema["minItems"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        schema["maxItems"] = draw(st.integers(0, 4))
    return schema


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.sampled_from([0.5, 2.5, 1.0, 100.0]),
    st.sampled_from(["", "a", "b", "ab", "é"]),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def _spell(value: Any, data: st.DataObject) -> str:
    """A JSON text of ``value`` in one of its spellings: numbers as 1, 1.0, 1e0, 10E-1; strings
    with escapes; members reordered; whitespace."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        x = Decimal(repr(value))
        choices = [str(int(x)) if x == x.to_integral_value() else str(x), f"{x}e0", f"{x * 10}E-1", f"{x}"]
        if x == x.to_integral_value():
            choices.append(f"{int(x)}.0")
        return data.draw(st.sampled_from(choices))
    if isinstance(value, str):
        if data.draw(st.booleans()):
            return '"' + "".join(f"\\u{ord(c):04x}" for c in value) + '"'
        return json.dumps(value, ensure_ascii=False)
    ws = data.draw(st.sampled_from(["", " ", "\n"]))
    if isinstance(value, list):
        return "[" + ws + ("," + ws).join(_spell(x, data) for x in value) + "]"
    items = list(value.items())
    items = data.draw(st.permutations(items)) if items else items
    return "{" + ",".join(f"{json.dumps(k)}:{ws}{_spell(x, data)}" for k, x in items) + "}"


@st.composite
def _instances(draw: st.DrawFn) -> bytes:
    data = draw(st.data())
    pool = draw(st.lists(_VALUES, min_size=1, max_size=3))
    items = draw(st.lists(st.sampled_from(pool), max_size=5))  # duplicates likely
    return ("[" + ",".join(_spell(x, data) for x in items) + "]").encode()


@given(schema=_schemas(), text=_instances())
@settings(max_examples=300, deadline=None)
def test_verdicts_equal_the_oracle(schema: dict[str, Any], text: bytes) -> None:
    g = _compile(schema)
    assert g.accepts(text) == _oracle(schema, text), (schema, text)


@given(schema=_schemas(), text=_instances())
@settings(max_examples=100, deadline=None)
def test_every_live_prefix_completes(schema: dict[str, Any], text: bytes) -> None:
    g = _compile(schema)
    s = g.initial()
    if s.is_dead:  # an empty language (minItems > maxItems): nothing is alive
        assert not g.accepts(text)
        return
    assert_live_prefixes_complete(g, text, lambda t: _oracle(schema, t), schema)


@pytest.mark.parametrize(
    "items",
    [{"type": "integer"}, {"type": "number", "minimum": 0, "maximum": 3}, {"type": "integer", "minimum": 0}],
)
def test_constrained_infinite_number_positions_are_refused_when_compiling(items: dict[str, Any]) -> None:
    """Excluding written values from an infinite numeric predicate has no bound (a written integer may
    be too large for a predicate constant, and each exclusion adds a conjunction), so such positions
    are refused at compile time, never by a limit while matching."""
    with pytest.raises(Unsupported) as e:
        _compile({"type": "array", "items": items, "uniqueItems": True})
    assert e.value.keyword == "uniqueItems" and "constrained set" in e.value.reason
