"""JSON Schema drafts 4, 6, 7 and 2019-09 (refdecoder/_drafts.py): which draft a schema is read in, and
each keyword that means something else there, against the independent validator of the same draft.

Every verdict is checked twice: against the expected answer written here (what the draft's text says),
and against ``props.corpus.validate_output`` (``jsonschema``'s validator of that draft), so that the
reference and the certificates' validator read a draft alike. Number spellings (draft-04's lexical
``integer``) are checked by brute force against the obvious definition, as tests/test_numbers.py does
for values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import refdecoder
from props.contract.findings import SpecKind, SpecRef
from props.corpus import CorpusError, validate_output
from refdecoder import JsonProfile, JsonSchema, SpecError, Unsupported
from refdecoder._drafts import dialect_of
from refdecoder._numbers import NumberConstraint, NumberLexeme, NumberPredicate
from refdecoder.errors import LimitExceeded

from .test_numbers import CONSTS, MULTS, numbers_upto, q, value_of

EXAMPLES = settings().max_examples

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def verdicts(schema: Any, texts: list[str], **options: Any) -> list[bool]:
    """The reference's verdict on each text, asserted equal to the independent validator's."""
    profile = JsonProfile(allow_duplicate_keys=True, **options)
    grammar = refdecoder.compile(JsonSchema(schema, profile))
    ref = SpecRef(SpecKind.JSON_SCHEMA, schema, "t", "test", profile.as_dict())
    out = []
    for text in texts:
        got = grammar.accepts(text.encode())
        why = validate_output(ref, text.encode())
        assert got == (why is None), f"{text!r}: reference {got}, jsonschema: {why}"
        out.append(got)
    return out


def refusal(schema: Any, **options: Any) -> Unsupported:
    with pytest.raises(Unsupported) as e:
        refdecoder.compile(JsonSchema(schema, JsonProfile(allow_duplicate_keys=True, **options)))
    return e.value


# -- which draft ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("uri", "draft"),
    [
        ("http://json-schema.org/draft-04/schema#", "draft-04"),
        ("http://json-schema.org/draft-04/schema", "draft-04"),
        ("https://json-schema.org/draft-06/schema#", "draft-06"),
        ("http://json-schema.org/draft-07/schema", "draft-07"),
        ("https://json-schema.org/draft/2019-09/schema", "2019-09"),
        ("http://json-schema.org/draft/2019-09/schema#", "2019-09"),
        ("https://json-schema.org/draft/2020-12/schema#", "2020-12"),
        ("http://json-schema.org/draft-03/schema#", ""),
        ("http://json-schema.org/draft-05/schema#", ""),
        ("https://example.com/my-meta-schema", ""),
        ("http://json-schema.org/draft-07/schema#/definitions", ""),
    ],
)
def test_schema_uri_names_the_draft(uri: str, draft: str) -> None:
    assert dialect_of(uri) == draft


def test_declared_schema_wins_over_the_profile_draft() -> None:
    # Array-form items: draft 2019-09 and earlier; a 2020-12 reading refuses it.
    schema = {"type": "array", "items": [{"type": "integer"}], "additionalItems": False}
    texts = ["[1]", "[1,2]", '["a"]', "[]"]
    for uri in (D4, D6, D7, D2019, "https://json-schema.org/draft-07/schema"):
        assert verdicts({"$schema": uri, **schema}, texts) == [True, False, False, True]
        # ... whatever draft the profile names for undeclared schemas.
        assert verdicts({"$schema": uri, **schema}, texts, draft="2020-12") == [True, False, False, True]
    assert verdicts(schema, texts, draft="draft-07") == [True, False, False, True]
    assert refusal(schema).keyword == "items"
    assert refusal({"$schema": D2020, **schema}, draft="draft-07").keyword == "items"


def test_unknown_schema_is_refused_naming_it_and_the_known_drafts() -> None:
    for meta in ("http://json-schema.org/draft-03/schema#", "https://example.com/meta"):
        e = refusal({"$schema": meta, "type": "string"})
        assert e.keyword == "$schema" and e.where == "/$schema"
        assert meta in e.reason and "draft-04" in e.reason and "2020-12" in e.reason
    # A location below an unknown meta-schema, reached by $ref, is refused too (its vocabulary is unknown).
    schema = {
        "$ref": "#/$defs/a",
        "$defs": {"a": {"$schema": "https://example.com/meta", "$defs": {"b": {}}}},
    }
    assert refusal(schema).where == "/$defs/a/$schema"
    inner = {"$ref": "#/$defs/a/$defs/b", "$defs": schema["$defs"]}
    assert refusal(inner).where == "/$defs/a/$schema"
    with pytest.raises(SpecError):
        refdecoder.compile(JsonSchema({"$schema": 7}))


def test_profile_draft_names_and_fingerprints() -> None:
    for alias in (4, "4", "04", "draft4", "draft-04"):
        assert JsonProfile(draft=alias).draft == "draft-04"  # type: ignore[arg-type]
    assert JsonProfile(draft="7").draft == "draft-07"
    assert JsonProfile(draft="draft2019-09").draft == "2019-09"
    for bad in ("3", "draft-03", "2021-01", 2020, None):
        with pytest.raises(SpecError):
            JsonProfile(draft=bad)  # type: ignore[arg-type]
    # The default draft keeps the canonical form (and fingerprints) it had before drafts were an option.
    assert "draft" not in JsonProfile().as_dict()
    assert JsonProfile(draft="6").as_dict()["draft"] == "draft-06"
    assert JsonProfile(**JsonProfile(draft="6").as_dict()) == JsonProfile(draft="6")
    fingerprints = {
        refdecoder.compile(JsonSchema({"type": "integer"}, JsonProfile(draft=d))).fingerprint
        for d in ("4", "6", "7")
    }
    assert len(fingerprints) == 3


def test_embedded_schema_switches_the_draft_for_its_subschemas() -> None:
    old = {
        "$id": "http://example.com/old",
        "$schema": D7,
        "properties": {"x": {"$ref": "#/definitions/int", "maximum": 5}},  # hidden by $ref in draft-07
        "definitions": {"int": {"type": "integer"}},
    }
    new = {**old, "$id": "http://example.com/new", "$schema": D2020}
    schema = {"$schema": D2020, "type": "object", "properties": {"old": old, "new": new}}
    texts = ['{"old":{"x":9}}', '{"old":{"x":"a"}}', '{"new":{"x":9}}', '{"new":{"x":3}}']
    assert verdicts(schema, texts) == [True, False, False, True]


# -- draft-04: integer, exclusive bounds, id ------------------------------------------------------
INTEGERS = ["1", "-0", "0", "10", "1.0", "1e0", "1E2", "-3.0", "2.5", "0.0"]


def test_draft04_integer_is_a_number_written_without_fraction_or_exponent() -> None:
    assert verdicts({"type": "integer"}, INTEGERS, draft="4") == [True, True, True, True] + [False] * 6
    # From draft-06 on, any number with a zero fractional part.
    for draft in ("6", "7", "2019-09", "2020-12"):
        assert verdicts({"type": "integer"}, INTEGERS, draft=draft) == [True] * 7 + [True, False, True]
    # Its complement, and with value keywords.
    assert verdicts({"not": {"type": "integer"}}, INTEGERS, draft="4") == [False] * 4 + [True] * 6
    assert verdicts(
        {"type": "integer", "minimum": 5, "multipleOf": 5}, ["5", "10", "5.0", "7", "0"], draft="4"
    ) == [True, True, False, False, False]
    assert verdicts({"type": ["integer", "string"], "maximum": 1}, ["1", "1.0", '"x"', "2"], draft="4") == [
        True,
        False,
        True,
        False,
    ]
    assert verdicts({"type": ["integer", "number"]}, ["1", "1.0", "2.5"], draft="4") == [True, True, True]
    assert verdicts({"enum": [1, "a"]}, ["1", "1.0", "1e0", '"a"'], draft="4") == [True, True, True, True]
    assert verdicts(
        {"anyOf": [{"type": "integer"}, {"minimum": 2}]}, ["1", "1.0", "2.0", "2"], draft="4"
    ) == [
        True,
        False,
        True,
        True,
    ]


def test_draft04_boolean_exclusive_bounds() -> None:
    schema = {"minimum": 1, "exclusiveMinimum": True, "maximum": 3, "exclusiveMaximum": False}
    assert verdicts(schema, ["1", "1.5", "3", "3.5", "2"], draft="4") == [False, True, True, False, True]
    assert verdicts({"minimum": 1, "exclusiveMinimum": False}, ["1", "0.5"], draft="4") == [True, False]
    # No maximum: nothing to bound (the draft-04 meta-schema forbids it, so only the reference is asked).
    assert refdecoder.compile(
        JsonSchema({"type": "number", "exclusiveMaximum": True}, JsonProfile(draft="4"))
    ).accepts(b"7")
    with pytest.raises(SpecError, match="boolean in draft-04"):
        refdecoder.compile(JsonSchema({"minimum": 1, "exclusiveMinimum": 1}, JsonProfile(draft="4")))
    # Numeric exclusive bounds from draft-06 on.
    assert verdicts({"exclusiveMinimum": 1}, ["1", "1.5"], draft="6") == [False, True]


def test_identifiers_per_draft() -> None:
    # draft-04 spells $id as id; "#name" identifiers are anchors in drafts 4-7.
    d4 = {
        "id": "http://example.com/root.json",
        "type": "array",
        "items": [{"$ref": "#foo"}, {"$ref": "item.json"}],
        "definitions": {"a": {"id": "#foo", "type": "integer"}, "b": {"id": "item.json", "type": "string"}},
    }
    assert verdicts(d4, ["[1]", '[1,"x"]', '["x"]', "[1,2]"], draft="4") == [True, True, False, False]
    d7 = json.loads(json.dumps(d4).replace('"id"', '"$id"'))
    assert verdicts(d7, ["[1]", '[1,"x"]', '["x"]', "[1,2]"], draft="7") == [True, True, False, False]
    # $anchor is 2019-09's: draft-07 does not know the name.
    with pytest.raises(SpecError, match="anchor"):
        refdecoder.compile(
            JsonSchema({"$ref": "#foo", "definitions": {"a": {"$anchor": "foo"}}}, JsonProfile(draft="7"))
        )
    assert verdicts(
        {"$ref": "#foo", "$defs": {"a": {"$anchor": "foo", "type": "null"}}}, ["null", "1"], draft="2019-09"
    ) == [True, False]


# -- $ref -----------------------------------------------------------------------------------------
def test_ref_hides_its_siblings_in_drafts_4_to_7() -> None:
    schema = {
        "definitions": {"int": {"type": "integer"}},
        "properties": {"a": {"$ref": "#/definitions/int", "maximum": 5}},
    }
    texts = ['{"a":3}', '{"a":9}', '{"a":"x"}']
    for draft in ("4", "6", "7"):
        assert verdicts(schema, texts, draft=draft) == [True, True, False]
    for draft in ("2019-09", "2020-12"):
        assert verdicts(schema, texts, draft=draft) == [True, False, False]
    # ... including a sibling $id, which then changes no base URI (draft-07 Core §8.3).
    schema = {
        "$id": "http://example.com/a/root.json",
        "definitions": {"s": {"$id": "http://example.com/b/s.json", "type": "string"}},
        "properties": {"x": {"$id": "http://example.com/b/", "$ref": "s.json"}},
    }
    with pytest.raises(Unsupported, match="example.com/a/s.json"):
        refdecoder.compile(JsonSchema(schema, JsonProfile(draft="7", allow_duplicate_keys=True)))
    # A pointer into the ignored siblings still resolves (pointers name the document as written).
    schema = {
        "$ref": "#/definitions/a/properties/p",
        "definitions": {"a": {"$ref": "#/definitions/b", "properties": {"p": {"type": "null"}}}, "b": {}},
    }
    assert verdicts(schema, ["null", "1"], draft="7") == [True, False]
    # A location the index skips (inside an enum value) is read in its document's draft.
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/x/enum/0"}},
        "definitions": {"x": {"enum": [{"$ref": "#/definitions/y", "maximum": 3}]}, "y": {"type": "integer"}},
    }
    assert verdicts(schema, ['{"a":9}', '{"a":"s"}'], draft="7") == [True, False]
    assert verdicts(schema, ['{"a":9}', '{"a":2}'], draft="2019-09") == [False, True]


def test_schema_property_order_follows_the_draft() -> None:
    """``property_order="schema"``: the declared order is the $ref target's when $ref hides its
    siblings, and array positions come from array-form items (the validator reads them alike)."""
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/o", "properties": {"y": {}, "x": {}}}},
        "definitions": {
            "o": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}
        },
    }
    texts = ['{"a":{"x":1,"y":2}}', '{"a":{"y":2,"x":1}}']
    assert verdicts(schema, texts, draft="7", property_order="schema") == [True, False]
    arrays = {
        "type": "array",
        "items": [{"type": "object", "properties": {"b": {}, "a": {}}}],
        "additionalItems": {"type": "object", "properties": {"c": {}, "d": {}}},
    }
    texts = ['[{"b":1,"a":2},{"c":1,"d":2}]', '[{"a":2,"b":1}]', '[{"b":1,"a":2},{"d":2,"c":1}]']
    assert verdicts(arrays, texts, draft="6", property_order="schema") == [True, False, False]


# -- arrays ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("draft", ["4", "6", "7", "2019-09"])
def test_array_form_items_and_additional_items(draft: str) -> None:
    tuple_ = {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}
    texts = ["[]", "[1]", '[1,"a"]', '[1,"a",null]', '["a"]']
    assert verdicts(tuple_, texts, draft=draft) == [True, True, True, True, False]
    closed = {**tuple_, "additionalItems": False}
    assert verdicts(closed, texts, draft=draft) == [True, True, True, False, False]
    typed = {**tuple_, "additionalItems": {"type": "null"}}
    assert verdicts(typed, [*texts, '[1,"a",2]'], draft=draft) == [True, True, True, True, False, False]
    # A schema-form items applies to every item, and additionalItems is then ignored; so it is alone.
    assert verdicts(
        {"items": {"type": "integer"}, "additionalItems": False}, ["[1,2]", '["a"]'], draft=draft
    ) == [True, False]
    assert verdicts({"additionalItems": False}, ["[1,2]"], draft=draft) == [True]
    # The strict profile reads an absent additionalItems next to array-form items as false.
    assert verdicts(tuple_, texts, draft=draft, additional_items_default=False) == [
        True,
        True,
        True,
        False,
        False,
    ]


def test_prefix_items_is_2020_12s() -> None:
    schema = {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}}
    assert verdicts(schema, ['[1,"a"]', '["a"]', "[1,2]"]) == [True, False, False]
    # In 2019-09 prefixItems is no keyword, and items (a schema) covers every item.
    assert verdicts(schema, ['[1,"a"]', '["a"]', "[1,2]"], draft="2019-09") == [False, True, False]


def test_contains_and_its_counts_per_draft() -> None:
    schema = {"contains": {"type": "integer"}, "minContains": 2}
    texts = ["[1]", "[1,2]", '["a"]']
    assert verdicts(schema, texts, draft="4") == [True, True, True]  # no contains in draft-04
    assert verdicts(schema, texts, draft="6") == [True, True, False]  # no minContains before 2019-09
    assert verdicts(schema, texts, draft="2019-09") == [False, True, False]


def test_keywords_newer_than_the_draft_are_annotations() -> None:
    assert verdicts({"const": 1, "propertyNames": {"maxLength": 1}}, ["2", '{"long":1}'], draft="4") == [
        True,
        True,
    ]
    assert verdicts({"const": 1}, ["2", "1"], draft="6") == [False, True]
    cond = {"if": {"type": "integer"}, "then": {"minimum": 5}}
    assert verdicts(cond, ["1", "7"], draft="6") == [True, True]
    assert verdicts(cond, ["1", "7"], draft="7") == [False, True]
    assert verdicts({"dependentRequired": {"a": ["b"]}}, ['{"a":1}'], draft="7") == [True]
    assert verdicts({"dependentRequired": {"a": ["b"]}}, ['{"a":1}'], draft="2019-09") == [False]


# -- objects ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("draft", ["4", "6", "7"])
def test_dependencies_both_forms(draft: str) -> None:
    schema: dict[str, Any] = {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}
    if draft != "4":  # draft-04 wants a non-empty array; later drafts allow [] and boolean schemas
        schema["dependencies"] |= {"e": [], "f": False}
    texts = ["{}", '{"a":1}', '{"a":1,"b":2}', '{"c":1}', '{"c":1,"d":1}', '{"b":1,"d":2}', '{"e":1}', "[1]"]
    assert verdicts(schema, texts, draft=draft) == [True, False, True, False, True, True, True, True]
    if draft != "4":
        assert verdicts(schema, ['{"f":1}', '{"g":1}'], draft=draft) == [False, True]


def test_dependencies_after_draft_7_reads_as_the_profile_says() -> None:
    """2019-09 and 2020-12 no longer define ``dependencies``: applied with its drafts 4-7 meaning by
    default, an annotation under ``legacy_dependencies="ignore"``, refused under ``"refuse"``."""
    schema = {"dependencies": {"a": ["b"]}}
    for draft in ("2019-09", "2020-12"):
        assert verdicts(schema, ['{"a":1}', '{"a":1,"b":2}'], draft=draft) == [False, True]
        ignored = verdicts(schema, ['{"a":1}', '{"a":1,"b":2}'], draft=draft, legacy_dependencies="ignore")
        assert ignored == [True, True]
        e = refusal(schema, draft=draft, legacy_dependencies="refuse")
        assert e.keyword == "dependencies" and "$schema" in e.reason and draft in e.reason


def test_unevaluated_is_decided_in_2019_09() -> None:
    # refdecoder/_unevaluated.py (tests/test_unevaluated.py has the cases and the refusals)
    schema = {"properties": {"a": True}, "unevaluatedProperties": False}
    assert verdicts(schema, ['{"a":1}', '{"b":1}'], draft="2019-09") == [True, False]
    schema = {"items": [True], "unevaluatedItems": False}
    assert verdicts(schema, ["[1]", "[1,2]"], draft="2019-09") == [True, False]
    # ... and is an annotation before: a keyword those drafts do not have.
    assert verdicts({"unevaluatedProperties": False}, ['{"a":1}'], draft="7") == [True]


# -- 2019-09 $recursiveRef --------------------------------------------------------------------------
def _tree(anchor_outer: bool, anchor_inner: bool) -> dict[str, Any]:
    return {
        "$schema": D2019,
        "$id": "http://example.com/strict.json",
        **({"$recursiveAnchor": True} if anchor_outer else {}),
        "$ref": "tree.json",
        "unknown": "annotations are fine",
        "$defs": {
            "tree": {
                "$id": "tree.json",
                **({"$recursiveAnchor": True} if anchor_inner else {}),
                "type": "object",
                "properties": {"data": True, "children": {"type": "array", "items": {"$recursiveRef": "#"}}},
            }
        },
    }


def test_recursive_ref_without_anchor_is_a_ref() -> None:
    texts = ['{"children":[{"data":1}]}', '{"children":[1]}']
    assert verdicts(_tree(False, False), texts) == [True, False]
    assert verdicts(_tree(True, False), texts) == [True, False]  # the target sets no anchor


def test_recursive_ref_with_one_anchored_resource_recurses_to_it() -> None:
    assert verdicts(_tree(False, True), ['{"children":[{"data":1}]}', '{"children":[1]}']) == [True, False]


def test_recursive_ref_with_several_anchored_resources_follows_the_dynamic_scope() -> None:
    # Both resources anchored: the outermost one in scope, the strict root (tests/test_dynamic_refs.py).
    assert verdicts(_tree(True, True), ['{"children":[{"data":1}]}', '{"children":[1]}']) == [True, False]
    assert refusal({"$schema": D2019, "items": {"$recursiveRef": "#/x"}}).keyword == "$recursiveRef"


def test_recursive_ref_is_no_keyword_before_2019_09() -> None:
    assert verdicts({"items": {"$recursiveRef": "#"}, "type": "array"}, ["[1]", '[{"a":[]}]'], draft="7") == [
        True,
        True,
    ]


# -- number spellings: brute force against the obvious definition ---------------------------------
def spelled(text: str) -> str:
    return "decimal" if any(c in text for c in ".eE") else "integer"


def holds(spec: tuple[Any, ...], text: str) -> bool:
    """The obvious definition: the text's spelling and exact value against a tiny spec tree."""
    tag = spec[0]
    if tag == "conj":
        k = spec[1]
        v = value_of(text)
        assert v is not None
        lo, hi = k.get("lo"), k.get("hi")
        return (
            (k.get("spelling") is None or spelled(text) == k["spelling"])
            and (lo is None or v > q(lo) or (v == q(lo) and not k.get("lo_excl")))
            and (hi is None or v < q(hi) or (v == q(hi) and not k.get("hi_excl")))
            and all((v / q(m)).denominator == 1 for m in k.get("multiple_of", ()))
        )
    if tag == "and":
        return holds(spec[1], text) and holds(spec[2], text)
    if tag == "or":
        return holds(spec[1], text) or holds(spec[2], text)
    return not holds(spec[1], text)


def build(spec: tuple[Any, ...]) -> NumberPredicate:
    tag = spec[0]
    if tag == "conj":
        return NumberPredicate.of([NumberConstraint.make(**spec[1])])
    if tag == "and":
        return build(spec[1]).and_(build(spec[2]))
    if tag == "or":
        return build(spec[1]).or_(build(spec[2]))
    return build(spec[1]).not_()


spelled_conjunctions = st.fixed_dictionaries(
    {"spelling": st.sampled_from([None, "integer", "decimal"])},
    optional={
        "lo": CONSTS,
        "lo_excl": st.booleans(),
        "hi": CONSTS,
        "hi_excl": st.booleans(),
        "multiple_of": st.lists(MULTS, max_size=1).map(tuple),
    },
).map(lambda k: ("conj", k))
spelled_specs = st.recursive(
    spelled_conjunctions,
    lambda sub: st.one_of(
        st.tuples(st.just("and"), sub, sub),
        st.tuples(st.just("or"), sub, sub),
        st.tuples(st.just("not"), sub),
    ),
    max_leaves=3,
)


def exhaustive_spelled(spec: tuple[Any, ...], digits: str, lex_len: int, good_len: int) -> None:
    """(a) finality is exact, (b) every live prefix's witness completes it into the language, (c) a
    killed prefix has no completion in the language up to ``good_len`` (tests/test_numbers.py)."""
    try:
        pred = build(spec)
    except LimitExceeded:
        assume(False)
        raise
    good = {t for t in numbers_upto(digits, good_len) if holds(spec, t)}
    if pred.is_empty():
        assert not good, f"an empty predicate has members {sorted(good)[:3]}"
        return
    lex = NumberLexeme(pred)
    live = {g[:i] for g in good for i in range(len(g) + 1)}
    stack: list[tuple[str, Any]] = [("", lex.start())]
    while stack:
        prefix, state = stack.pop()
        in_language = value_of(prefix) is not None and holds(spec, prefix)
        assert lex.is_final(state) == in_language, f"is_final({prefix!r})"
        completed = prefix + lex.witness(state).decode()
        assert value_of(completed) is not None and holds(spec, completed), (
            f"witness {completed!r} for {prefix!r}"
        )
        for ch in "-" + digits + ".eE+":
            nxt = lex.step(state, ord(ch))
            if nxt is None:
                assert prefix + ch not in live, f"{prefix + ch!r} was killed but is a prefix of a member"
            elif len(prefix) + 1 <= lex_len:
                stack.append((prefix + ch, nxt))


@settings(max_examples=EXAMPLES, deadline=None)
@given(spec=spelled_specs, extra=st.sampled_from("123456789"))
def test_spelled_numbers_exhaustively(spec: tuple[Any, ...], extra: str) -> None:
    exhaustive_spelled(spec, "0" + extra, lex_len=4, good_len=6)


@pytest.mark.parametrize(
    "spec",
    [
        ("conj", {"spelling": "integer"}),
        ("conj", {"spelling": "decimal"}),
        ("not", ("conj", {"spelling": "integer", "lo": "-3", "hi": "10"})),
        ("conj", {"spelling": "integer", "lo": "15", "hi": "150", "multiple_of": ("5",)}),
        ("conj", {"spelling": "integer", "lo": "0.5", "hi": "0.9"}),  # empty: no integer there
        ("or", ("conj", {"spelling": "integer"}), ("conj", {"spelling": "decimal", "lo": "2"})),
        ("and", ("conj", {"spelling": "integer"}), ("conj", {"spelling": "decimal"})),  # empty
    ],
    ids=repr,
)
def test_spelled_numbers_full_alphabet(spec: tuple[Any, ...]) -> None:
    exhaustive_spelled(spec, "0123456789", lex_len=3, good_len=4)


def test_integer_spelling_long_completions() -> None:
    """After "1", an integer text reaching 10**6 needs six more digits, never an exponent."""
    lex = NumberLexeme(
        NumberPredicate.of([NumberConstraint.make(spelling="integer", lo=10**6, hi=2 * 10**6 - 1)])
    )
    state = lex.step(lex.start(), ord("1"))
    assert state is not None and lex.witness(state) == b"000000"
    assert lex.step(state, ord(".")) is None and lex.step(state, ord("e")) is None
    two = lex.step(lex.start(), ord("2"))
    assert two is None  # 2xxxxxx is past the maximum, and no exponent may shrink it
    assert NumberPredicate.spelled("integer").contains(3) and not NumberPredicate.spelled("integer").contains(
        q("0.5")
    )


# -- the independent validator, the corpus, the command line ---------------------------------------
def test_validator_reads_numbers_past_a_floats_range_exactly() -> None:
    """Numbers a float rounds to infinity or to zero are read exactly (1E-400 is above 0), and one
    whose exponent no exact decimal holds is a ``CorpusError`` (the certify run's "cannot judge"),
    not a crash: a reference-generated 1e1000000000000000000 lost a JSONSchemaBench case."""
    above = SpecRef(SpecKind.JSON_SCHEMA, {"type": "number", "exclusiveMinimum": 0}, "t", "test")
    assert validate_output(above, b"1E-400") is None and validate_output(above, b"-1e-400") is not None
    assert validate_output(above, b"0e-400") is not None  # zero is zero
    assert validate_output(above, b"1E400") is None
    with pytest.raises(CorpusError, match="exponent"):
        validate_output(above, b"1e1000000000000000000")
    from props.checks.defects import violated_keyword

    assert violated_keyword(above, b"1e1000000000000000000") == "keyword ?"


#: Patterns whose every feature ``re`` reads: anchors, classes, alternation, groups, lookaround,
#: backreferences, lazy and bounded repeats, Unicode; each searched by ``re`` and by pattern_search.
PATTERNS = [
    r"^a+b?$",
    r"[0-9]{2,3}",
    r"^(?:foo|ba[rz])+$",
    r"(?<=x)y",
    r"(a)b\1",
    r"^[^\s@]+@[^\s@]+$",
    r"é.?日",
    r"^$",
    r"\bword\b",
    r"a.*?b",
    r"(?i)^abc",
    r"^[a-z0-9_-]{3,16}$",
    r"^(a|aa)+$",
    r"\d\w\s",
    r"^[\w]+$",
    r"\S+\W",
]


@given(
    pattern=st.sampled_from(PATTERNS),
    text=st.one_of(
        st.text(alphabet="ab9_xyz @é日.-\n\x1c\x85²\U000e0121\u1680٠", max_size=12),
        st.sampled_from(["aab", "word", "a@b", "1a\x1c", "1² ", "1\U000e0121\x85"]),
    ),
)
def test_pattern_search_reads_patterns_as_re(pattern: str, text: str) -> None:
    """The validator's timed search finds what ``re`` finds, in part and in full, Unicode classes
    included (the ``regex`` package's ``\\w`` and ``\\s`` differ from ``re``'s on ``²``, ``\\x1c``,
    U+0085 and combining marks: that cost the llguidance matrix three defects of ``\\d\\w\\s``)."""
    import re

    from props.corpus._validate import pattern_search

    assert pattern_search(pattern, text) == (re.search(pattern, text) is not None)
    assert pattern_search(pattern, text, full=True) == (re.fullmatch(pattern, text) is not None)


@pytest.mark.parametrize(
    "pattern,text",
    [
        (r"\d\w\s", "1a\x1c"),
        (r"\d\w\s", "1² "),
        (r"\d\w\s", "1\U000e0121\x85"),
        (r"\S\W", "\x1c!"),
        (r"\bx", "²x"),
        (r"[\s]+", "\x1c\x1d\x85"),
    ],
)
def test_pattern_search_reads_unicode_classes_as_re(pattern: str, text: str) -> None:
    """The characters where the ``regex`` package's classes differ from ``re``'s (the validator's
    timed search used it, and lost the llguidance matrix three defects of ``\\d\\w\\s``): the
    search gives ``re``'s verdict on each."""
    import re

    from props.corpus._validate import pattern_search

    assert pattern_search(pattern, text, full=True) == (re.fullmatch(pattern, text) is not None)
    assert pattern_search(pattern, text) == (re.search(pattern, text) is not None)


def test_a_pattern_search_that_backtracks_for_good_is_undecided() -> None:
    """A backtracking blow-up in the validator (``^(a|aa)+$`` against 60 a's and a b: re takes longer
    than a run; a MIME-type pattern held a dev-set shard that way) ends as a ``CorpusError`` naming the
    pattern, for ``pattern``, ``patternProperties`` and regex specs, and certification's validator
    reads it as "cannot judge" with a self-check note rather than hanging; a pattern ``re`` refuses
    is still ``re.error``."""
    import re

    import tokenizers_matrix
    from props.backends.reference import ReferenceBackend
    from props.checks.invariants import UNDECIDED, Target, prepare
    from props.corpus._validate import pattern_search

    bad = "^(a|aa)+$"
    text = "a" * 60 + "b"
    with pytest.raises(CorpusError, match="backtracking"):
        pattern_search(bad, text)
    with pytest.raises(re.error):
        pattern_search("(", "x")
    schema = SpecRef(SpecKind.JSON_SCHEMA, {"type": "string", "pattern": bad}, "p", "test")
    with pytest.raises(CorpusError, match="backtracking"):
        validate_output(schema, json.dumps(text).encode())
    assert validate_output(schema, b'"aaa"') is None and validate_output(schema, b'"ab"') is not None
    props = SpecRef(SpecKind.JSON_SCHEMA, {"patternProperties": {bad: {"type": "null"}}}, "pp", "test")
    with pytest.raises(CorpusError, match="backtracking"):
        validate_output(props, json.dumps({text: 1}).encode())
    assert (
        validate_output(props, b'{"aa": 1}') is not None and validate_output(props, b'{"aa": null}') is None
    )
    regex_spec = SpecRef(SpecKind.REGEX, bad, "r", "test")
    with pytest.raises(CorpusError, match="backtracking"):
        validate_output(regex_spec, text.encode())
    target = prepare(ReferenceBackend(), schema, tokenizers_matrix.get("byte"))
    assert isinstance(target, Target)
    assert target.validate(json.dumps(text).encode()) == UNDECIDED
    assert any("cannot judge" in note and "backtracking" in note for note in target.self_check)


def test_validator_reads_the_profile_draft_and_integer_texts() -> None:
    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "integer"}, "t", "test", {"draft": "draft-04"})
    assert validate_output(spec, b"3") is None
    assert validate_output(spec, b"3.0") is not None and validate_output(spec, b"1E400") is not None
    spec6 = SpecRef(SpecKind.JSON_SCHEMA, {"type": "integer"}, "t", "test", {"draft": "draft-06"})
    assert validate_output(spec6, b"3.0") is None and validate_output(spec6, b"1E400") is None
    deps = SpecRef(SpecKind.JSON_SCHEMA, {"dependencies": {"a": ["b"]}}, "t", "test", {"draft": "draft-07"})
    assert validate_output(deps, b'{"a":1}') is not None and validate_output(deps, b'{"a":1,"b":1}') is None


def test_suite_corpus_per_draft() -> None:
    from props.corpus import load_corpus

    from ._data import require_shared

    require_shared("json-schema-test-suite/tests/draft7")
    cases = load_corpus("json-schema-test-suite:draft7/items")
    assert cases and all(c.name.startswith("draft7/items#") for c in cases)
    # The cases declare the folder's draft (its schemas do not), so any profile reads them in it.
    assert all(c.spec.source["$schema"] == D7 for c in cases if isinstance(c.spec.source, dict))
    assert all(c.spec.profile == {"allow_duplicate_keys": True} for c in cases)
    for c in cases[:4]:
        grammar = refdecoder.compile(JsonSchema(c.spec.source, JsonProfile(**(c.spec.profile or {}))))
        for value in c.valid:
            assert grammar.accepts(json.dumps(value).encode())
        for value in c.invalid:
            assert not grammar.accepts(json.dumps(value).encode())
    assert load_corpus("json-schema-test-suite:draft4", limit=3)
    assert [c.name for c in load_corpus("json-schema-test-suite:items", limit=1)] == ["items#0"]


def test_check_schema_takes_a_draft(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from maskcert.cli import main

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "array", "items": [{"type": "integer"}], "additionalItems": False}))
    assert main(["check-schema", str(path)]) == 1
    assert "keyword=items" in capsys.readouterr().out
    for args in (["--draft", "draft-07"], ["--profile", "draft=7"], ["--draft", "2019-09"]):
        assert main(["check-schema", str(path), *args]) == 0
        assert "supported fingerprint=" in capsys.readouterr().out
