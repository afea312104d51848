"""Every size cap of the JSON Schema front-end is a ``Limits`` field: lowering it makes a spec that
needs more fail with ``LimitExceeded`` naming the field, raising it back makes the spec compile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import refdecoder
from refdecoder import JsonProfile, JsonSchema, LimitExceeded, Limits, Unsupported, parse_limit
from refdecoder._fsa import CodepointDFA
from refdecoder._limits import budget_scope
from refdecoder._numbers import NumberPredicate
from refdecoder._valuememory import ScalarValueLexeme, canonical_number
from refdecoder.errors import LimitName


def _compile(schema: Any, limits: Limits) -> refdecoder.Grammar:
    return refdecoder.compile(JsonSchema(schema, JsonProfile()), limits)


def _not_pattern(p: str) -> dict[str, Any]:
    return {"not": {"patternProperties": {p: {"type": "string"}}}}


# (field, a spec that needs more than ``low`` of it, ``low``, a value that is enough)
CASES: list[tuple[LimitName, Any, int, int]] = [
    (
        "unevaluated_cases",  # three contributing anyOf branches: 2**3 - 1 cases
        {"anyOf": [{"properties": {k: {}}} for k in "abc"], "unevaluatedProperties": False},
        6,
        7,
    ),
    (
        "unevaluated_alternatives",  # a case's condition: two alternatives of required keys
        {
            "oneOf": [
                {"anyOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {"x": {}}},
                {"anyOf": [{"required": ["c"]}, {"required": ["d"]}], "properties": {"y": {}}},
            ],
            "unevaluatedProperties": False,
        },
        1,
        64,
    ),
    ("number_constant_bits", {"type": "integer", "multipleOf": 10**1300}, 4096, 8192),
    (
        "number_not_multiple_of",
        {"type": "integer", "not": {"anyOf": [{"multipleOf": 2}, {"multipleOf": 3}, {"multipleOf": 5}]}},
        2,
        3,
    ),
    (
        "number_predicate_conjunctions",
        {"type": "number", "anyOf": [{"minimum": 2 * k, "maximum": 2 * k + 1} for k in range(3)]},
        2,
        3,
    ),
    (
        "object_exists_per_key",  # the declared key "abc" meets both complemented rules
        {"properties": {"abc": {}}, "allOf": [_not_pattern("a"), _not_pattern("b")]},
        1,
        2,
    ),
    (
        "object_search_states",  # dependentRequired: the closability search runs
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "dependentRequired": {"a": ["b"]},
            "required": ["a"],
        },
        1,
        100,
    ),
]


@pytest.mark.parametrize(("name", "schema", "low", "enough"), CASES, ids=[c[0] for c in CASES])
def test_a_lowered_limit_is_named_and_raising_it_compiles(
    name: LimitName, schema: Any, low: int, enough: int
) -> None:
    with pytest.raises(LimitExceeded) as e:
        _compile(schema, Limits(**{name: low}))
    assert e.value.limit == name
    _compile(schema, Limits(**{name: enough}))
    _compile(schema, parse_limit(f"{name}={enough}", Limits()))  # the --limit flag reaches it


def test_number_constant_bits_above_the_default() -> None:
    schema = {"type": "integer", "multipleOf": 10**1300}  # 4319 bits
    with pytest.raises(LimitExceeded) as e:
        _compile(schema, Limits())
    assert e.value.limit == "number_constant_bits" and e.value.bound == Limits().number_constant_bits
    g = _compile(schema, Limits(number_constant_bits=8192))
    assert g.initial() is not None


def test_unique_items_number_values_is_a_limits_field() -> None:
    """A constrained number position of a unique array holds at most ``unique_items_number_values``
    values (and half ``number_predicate_conjunctions``): refused past it, decided when both allow."""
    schema = {"type": "array", "uniqueItems": True, "items": {"enum": list(range(40))}}
    with pytest.raises(Unsupported) as e:
        _compile(schema, Limits())
    assert e.value.keyword == "uniqueItems" and "more than 32 values" in e.value.reason
    with pytest.raises(Unsupported):
        _compile(schema, Limits(unique_items_number_values=40))  # 64 conjunctions: 32 take effect
    _compile(schema, Limits(unique_items_number_values=40, number_predicate_conjunctions=80))


def test_the_value_memory_matches_under_the_limits_it_was_compiled_with() -> None:
    """A unique array's value memory builds predicates while matching, outside the compilation: it
    reads the limits it was compiled under, not the defaults, so a raised cap holds for every value
    written. (Excluding the even numbers of 0..139 splits the rest into 70 pieces, more than the
    default 64 conjunctions.)"""
    raised = Limits(unique_items_number_values=140, number_predicate_conjunctions=280)
    points = NumberPredicate.none()
    with budget_scope(raised):
        for k in range(140):
            points = points.or_(NumberPredicate.from_keywords(minimum=k, maximum=k))
        lexeme = ScalarValueLexeme(False, frozenset(), points, CodepointDFA.empty(), False, 1000)
    barred = frozenset(canonical_number(str(k)) for k in range(0, 140, 2))
    assert lexeme.parts(barred)  # the odd numbers remain


def test_check_schema_names_the_field_and_how_to_raise_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from maskcert.cli import main

    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"anyOf": [{"properties": {k: {}}} for k in "abc"], "unevaluatedProperties": False})
    )
    assert main(["check-schema", str(path), "--limit", "unevaluated_cases=6"]) == 1
    out = capsys.readouterr().out
    assert "limit=unevaluated_cases" in out and "--limit unevaluated_cases=N" in out
    assert main(["check-schema", str(path), "--limit", "unevaluated_cases=7"]) == 0


def test_explain_shows_every_limit_and_what_limit_changed(capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import fields

    from maskcert.cli import main

    assert main(["check-schema", "--regex", "ab?", "--explain", "--limit", "dfa_states=10"]) == 0
    out = capsys.readouterr().out
    for f in fields(Limits):
        assert f"  {f.name} " in out, f.name
    assert "dfa_states" in out and "10  (default 50000)" in out
    assert out.count("(default") == 1  # only the changed one
