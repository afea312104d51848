"""props.checks.minimize: ddmin over a spec's structure, with predicates that run no engine."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
from props.checks.minimize import Minimized, minimize, size
from props.contract.findings import SpecKind, SpecRef

# A realistic order schema (~2 KB): nested objects, $defs + $ref, anyOf, enum, patterns, annotations.
ORDER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Order",
    "description": "A customer order as submitted by the storefront checkout service.",
    "type": "object",
    "required": ["id", "customer", "items", "shipping"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^ord_[a-z0-9]{12}$", "description": "Order identifier."},
        "createdAt": {"type": "string", "format": "date-time", "description": "When it was placed."},
        "status": {"enum": ["pending", "paid", "shipped", "delivered", "cancelled"], "default": "pending"},
        "customer": {
            "type": "object",
            "required": ["name", "email"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 120, "examples": ["Ada Lovelace"]},
                "email": {"type": "string", "format": "email"},
                "phone": {"anyOf": [{"type": "string", "pattern": "^\\+?[0-9 ]{6,20}$"}, {"type": "null"}]},
                "loyalty": {
                    "type": "object",
                    "properties": {
                        "tier": {"enum": ["bronze", "silver", "gold"]},
                        "points": {"type": "integer", "minimum": 0, "maximum": 1000000},
                    },
                },
            },
        },
        "items": {"type": "array", "minItems": 1, "maxItems": 100, "items": {"$ref": "#/$defs/LineItem"}},
        "shipping": {"$ref": "#/$defs/Address"},
        "billing": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "description": "Or shipping."},
        "notes": {"type": "string", "maxLength": 2000, "title": "Notes"},
    },
    "$defs": {
        "LineItem": {
            "type": "object",
            "required": ["sku", "quantity"],
            "properties": {
                "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
                "price": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 24}, "uniqueItems": True},
            },
            "additionalProperties": False,
        },
        "Address": {
            "type": "object",
            "description": "A postal address.",
            "required": ["line1", "city", "country"],
            "properties": {
                "line1": {"type": "string", "maxLength": 200},
                "line2": {"type": "string", "maxLength": 200},
                "city": {"type": "string", "maxLength": 100},
                "k": {"type": "string", "minLength": 2, "maxLength": 50, "description": "Postal code."},
                "country": {"type": "string", "enum": ["US", "CA", "GB", "DE", "FR", "JP"]},
            },
        },
    },
}


def canon(source: Any) -> str:
    return json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def maxlength_under_k(node: Any) -> bool:
    """Some ``properties`` map has a property ``k`` whose schema has a ``maxLength`` somewhere."""
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and "k" in props and '"maxLength"' in canon(props["k"]):
            return True
        return any(maxlength_under_k(v) for v in node.values())
    if isinstance(node, list):
        return any(maxlength_under_k(v) for v in node)
    return False


class Recorder:
    """A predicate that records every candidate it is called on."""

    def __init__(self, holds: Callable[[Any], bool]) -> None:
        self.holds = holds
        self.seen: list[str] = []
        self.sources: list[Any] = []

    def __call__(self, spec: SpecRef) -> bool:
        self.seen.append(canon(spec.source))
        self.sources.append(spec.source)
        return self.holds(spec.source)


def json_ref(schema: Any) -> SpecRef:
    return SpecRef(SpecKind.JSON_SCHEMA, schema, name="order", corpus="test")


# -- JSON Schema --------------------------------------------------------------------------------------------


def test_realistic_schema_minimizes_to_the_culprit() -> None:
    spec = json_ref(ORDER)
    assert size(spec) > 1800
    still = Recorder(maxlength_under_k)
    result = minimize(spec, still)
    assert isinstance(result, Minimized)
    assert size(result.spec) < 80, result.spec.source
    assert maxlength_under_k(result.spec.source)
    assert not result.exhausted
    assert result.steps == len(still.seen)
    # Only metaschema-valid candidates reach the predicate; the result keeps the spec's other fields.
    for source in still.sources:
        jsonschema.Draft202012Validator.check_schema(source)
    assert (result.spec.kind, result.spec.name, result.spec.corpus) == (SpecKind.JSON_SCHEMA, "order", "test")
    assert result.spec.source == {"properties": {"k": {"maxLength": 0}}}


def test_memoized_and_bounded_by_max_calls() -> None:
    def pseudo_random(source: Any) -> bool:  # deterministic, but no structure to exploit
        return int(hashlib.sha256(canon(source).encode()).hexdigest(), 16) % 3 == 0

    spec = json_ref(ORDER)
    full = Recorder(pseudo_random)
    result = minimize(spec, full, max_calls=10_000)
    assert len(full.seen) == len(set(full.seen)) == result.steps > 10
    assert canon(ORDER) not in full.seen  # never called on the original
    assert not result.exhausted
    assert pseudo_random(result.spec.source)
    assert size(result.spec) < size(spec)

    bounded = Recorder(pseudo_random)
    cut = minimize(spec, bounded, max_calls=7)
    assert cut.steps == len(bounded.seen) == 7
    assert len(set(bounded.seen)) == 7
    assert cut.exhausted
    assert cut.spec == spec or pseudo_random(cut.spec.source)


def test_deadline_in_the_past_returns_the_original() -> None:
    spec = json_ref(ORDER)
    still = Recorder(maxlength_under_k)
    result = minimize(spec, still, deadline=time.monotonic() - 1.0)
    assert result == Minimized(spec, 0, True)
    assert still.seen == []


def test_deadline_stops_the_search() -> None:
    def slow(spec: SpecRef) -> bool:
        time.sleep(0.02)
        return maxlength_under_k(spec.source)

    result = minimize(json_ref(ORDER), slow, deadline=time.monotonic() + 0.2)
    assert result.exhausted  # the whole search takes 23 calls, over 0.4 s
    assert result.steps < 23
    assert maxlength_under_k(result.spec.source)


def maxlength_under_k_spec(spec: SpecRef) -> bool:
    return maxlength_under_k(spec.source)


def test_deterministic() -> None:
    first = minimize(json_ref(ORDER), maxlength_under_k_spec)
    second = minimize(json_ref(ORDER), maxlength_under_k_spec)
    assert first == second


def effective(schema: Any, node: Any) -> Any:
    """``node`` with a ``#/$defs/...`` reference replaced by its target (one level)."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return schema.get("$defs", {}).get(ref[len("#/$defs/") :], {})
    return node


def test_ref_is_inlined_and_the_definition_dropped() -> None:
    schema = {
        "$defs": {"Code": {"type": "string", "maxLength": 3}, "Other": {"type": "integer"}},
        "type": "object",
        "properties": {"k": {"$ref": "#/$defs/Code"}, "n": {"$ref": "#/$defs/Other"}},
    }

    def holds(source: Any) -> bool:
        k = effective(source, source.get("properties", {}).get("k"))
        return isinstance(k, dict) and "maxLength" in k

    result = minimize(json_ref(schema), Recorder(holds))
    assert result.spec.source == {"properties": {"k": {"maxLength": 0}}}


def test_one_branch_anyof_is_flattened_and_numbers_bisected() -> None:
    schema = {"anyOf": [{"type": "string", "maxLength": 50}], "description": "a short string"}

    def holds(source: Any) -> bool:  # semantic: rejects a 40-character string, accepts a 37-character one
        validator = jsonschema.Draft202012Validator(source)
        return not validator.is_valid("x" * 40) and validator.is_valid("x" * 37)

    result = minimize(json_ref(schema), Recorder(holds))
    assert result.spec.source == {"maxLength": 37}


def test_pattern_and_enum_strings_shrink_but_stay_well_formed() -> None:
    schema = {"type": "string", "pattern": "^(ab|cd)+[x-z]$", "enum": ["alphabet", "zeta"]}
    still = Recorder(lambda s: "+" in s.get("pattern", "") and any("ph" in e for e in s.get("enum", [])))
    result = minimize(json_ref(schema), still)
    assert result.spec.source["enum"] == ["ph"]
    assert "+" in result.spec.source["pattern"] and len(result.spec.source["pattern"]) <= 3
    for source in still.sources:
        re.compile(source.get("pattern", ""))


def test_required_entries_and_annotations_drop() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "T",
        "type": "object",
        "required": ["a", "b", "c", "d"],
        "properties": {"a": {"type": "string"}, "b": {}, "c": {}, "d": {}},
    }
    result = minimize(json_ref(schema), Recorder(lambda s: "c" in s.get("required", [])))
    assert result.spec.source == {"required": ["c"]}


def test_size_is_the_canonical_json_length() -> None:
    assert size(json_ref({"b": 1, "a": [True, "x"]})) == len('{"a":[true,"x"],"b":1}')
    assert size(SpecRef(SpecKind.REGEX, "a+")) == 4


# -- regex --------------------------------------------------------------------------------------------------


def regex_ref(pattern: str) -> SpecRef:
    return SpecRef(SpecKind.REGEX, pattern)


def test_regex_keeps_the_quantifier() -> None:
    still = Recorder(lambda p: "{2,5}" in p)
    result = minimize(regex_ref("(foo|bar|baz)[0-9]{2,5}x"), still)
    assert "{2,5}" in result.spec.source
    assert len(result.spec.source) <= len("[0-9]{2,5}")
    re.compile(result.spec.source)
    for pattern in still.sources:
        re.compile(pattern)
    assert len(still.seen) == len(set(still.seen))


def test_regex_top_level_alternatives_then_characters() -> None:
    result = minimize(regex_ref("cat|dog|bird|fish"), Recorder(lambda p: "ir" in p))
    assert result.spec.source == "ir"


def test_regex_groups_and_escapes() -> None:
    pattern = r"^(?:\+1[ -])?\(?([0-9]{3})\)?[-. ]?(?P<line>[0-9]{4})$"

    def holds(p: str) -> bool:  # semantic: Python's re still matches "(555) 1234"-like input fully
        return re.fullmatch(p, "(555) 1234") is not None

    still = Recorder(holds)
    result = minimize(regex_ref(pattern), still)
    assert holds(result.spec.source)
    assert len(result.spec.source) < len(pattern) // 2
    for p in still.sources:
        re.compile(p)


def test_unparseable_regex_is_left_alone() -> None:
    still = Recorder(lambda p: True)
    assert minimize(regex_ref("(ab"), still) == Minimized(regex_ref("(ab"), 0, False)
    assert still.seen == []


# -- GBNF ---------------------------------------------------------------------------------------------------

JSONISH = r"""# a JSON-ish object grammar
root    ::= "{" ws members? ws "}"
members ::= pair ( "," ws pair )*
pair    ::= key ws ":" ws value
key     ::= "\"" [a-z]+ "\""
value   ::= "true" | "false" | "null" | number | key |
            "[" ws ( value ( "," ws value )* )? ws "]"
number  ::= "-"? [0-9]+ ( "." [0-9]{1,6} )?
ws      ::= [ \t\n]*
"""

VALUES = r"""root   ::= value
value  ::= object | array | "null" | number
object ::= "{" ws ( member ( "," ws member )* )? ws "}"
member ::= "\"" [a-z]* "\"" ws ":" ws value
array  ::= "[" ws ( value ( "," ws value )* )? ws "]"
number ::= [0-9]+
ws     ::= " "*
"""


def accepts(text: str, root: str, data: bytes) -> bool:
    try:
        grammar = refdecoder.compile(refdecoder.Gbnf(text, root))
    except refdecoder.MaskcertError:
        return False
    return grammar.accepts(data)


def test_gbnf_rules_alternatives_and_literals_drop() -> None:
    still = Recorder(lambda text: accepts(text, "root", b'{"ab": [1.5, null]}'))
    result = minimize(SpecRef(SpecKind.GBNF, JSONISH), still, max_calls=1000)
    assert not result.exhausted
    assert accepts(result.spec.source, "root", b'{"ab": [1.5, null]}')
    assert size(result.spec) < size(SpecRef(SpecKind.GBNF, JSONISH)) * 2 // 3
    assert result.spec.source.count("::=") < JSONISH.count("::=")
    assert "true" not in result.spec.source and "#" not in result.spec.source
    assert len(still.seen) == len(set(still.seen))


def test_gbnf_inlines_rules() -> None:
    result = minimize(SpecRef(SpecKind.GBNF, VALUES), Recorder(lambda t: accepts(t, "root", b"null")))
    assert result.spec.source == 'root ::= "null"\n'


def test_gbnf_with_another_root_keeps_its_form() -> None:
    source = {"text": VALUES.replace("root ", "start"), "root": "start"}
    still = Recorder(lambda s: accepts(s["text"], s["root"], b"[7]"))
    result = minimize(SpecRef(SpecKind.GBNF, source), still)
    assert result.spec.source["root"] == "start"
    assert accepts(result.spec.source["text"], "start", b"[7]")
    assert result.spec.source["text"].count("::=") <= 2


def test_gbnf_candidates_are_well_formed() -> None:
    seen: list[str] = []

    def holds(text: str) -> bool:
        seen.append(text)
        return "number" in text

    minimize(SpecRef(SpecKind.GBNF, VALUES), Recorder(holds))
    assert seen
    for text in seen:  # a refusal is allowed (the predicate decides), a SpecError is not
        with contextlib.suppress(refdecoder.Unsupported, refdecoder.LimitExceeded):
            refdecoder.compile(refdecoder.Gbnf(text))


# -- choice -------------------------------------------------------------------------------------------------


def test_choice_options_then_characters() -> None:
    options = ["alpha", "beta", "gamma", "delta", "epsilon"]
    result = minimize(SpecRef(SpecKind.CHOICE, options), Recorder(lambda o: any("mm" in x for x in o)))
    assert result.spec.source == ["mm"]


def test_choice_keeps_a_non_empty_subset() -> None:
    options = ["apple", "banana", "avocado", "cherry", "apricot", "date"]

    def holds(opts: list[str]) -> bool:  # two options share a prefix of two characters
        return any(a[:2] == b[:2] and len(a) >= 2 for i, a in enumerate(opts) for b in opts[i + 1 :])

    still = Recorder(holds)
    result = minimize(SpecRef(SpecKind.CHOICE, options), still)
    assert len(result.spec.source) == 2 and holds(result.spec.source)
    assert all(isinstance(o, list) and o for o in still.sources)


# -- property -----------------------------------------------------------------------------------------------

KEYWORDS = ("type", "properties", "items", "anyOf", "maxLength", "enum")
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])
ENUMS = st.lists(st.one_of(st.text(max_size=4), st.integers(-9, 99)), min_size=1, max_size=4, unique=True)
LEAF_OPTIONAL: dict[str, st.SearchStrategy[Any]] = {
    "type": TYPES,
    "maxLength": st.integers(0, 300),
    "enum": ENUMS,
}


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            **LEAF_OPTIONAL,
            "properties": st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
            "items": children,
            "anyOf": st.lists(children, min_size=1, max_size=3),
        },
    )


SCHEMAS = st.recursive(st.fixed_dictionaries({}, optional=LEAF_OPTIONAL), _extend, max_leaves=10)


def keywords(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(keywords(v) for v in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {k for k in node if k in KEYWORDS}
    for key, value in node.items():
        if key == "properties":
            found |= keywords(list(value.values()))
        elif key in ("items", "anyOf"):
            found |= keywords(value)
    return found


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_result_keeps_the_keyword_and_is_valid_and_no_larger(data: st.DataObject) -> None:
    schema = data.draw(SCHEMAS.filter(keywords))
    jsonschema.Draft202012Validator.check_schema(schema)
    keyword = data.draw(st.sampled_from(sorted(keywords(schema))))
    still = Recorder(lambda s: keyword in keywords(s))
    spec = json_ref(schema)
    result = minimize(spec, still)
    assert keyword in keywords(result.spec.source)
    assert size(result.spec) <= size(spec)
    jsonschema.Draft202012Validator.check_schema(result.spec.source)
    assert len(still.seen) == len(set(still.seen)) == result.steps
    assert not result.exhausted
    assert size(result.spec) <= len('{"type":"boolean"}')  # the keyword alone, hoisted to the root


@pytest.mark.parametrize("kind", list(SpecKind))
def test_every_kind_handles_a_minimal_spec(kind: SpecKind) -> None:
    source = {SpecKind.JSON_SCHEMA: {}, SpecKind.REGEX: "a", SpecKind.GBNF: 'root ::= "a"\n'}.get(kind, ["a"])
    still = Recorder(lambda s: True)
    result = minimize(SpecRef(kind, source), still)
    assert size(result.spec) <= size(SpecRef(kind, source))
    assert result.steps == len(still.seen)
