"""The feature probe suite: every JSON Schema 2020-12 keyword and its common draft-07 forms,
every ``format``, the regex features and the GBNF features, each with probe specs — the feature alone,
next to typical siblings, and nested — and valid instances. Targeted invalid instances are not written
here: certification draws them for every spec (:mod:`props.checks.targeted`).

:data:`FEATURES` is the list ``maskcert matrix`` runs; :func:`feature_cases` is the same suite as corpus
cases (``load_corpus("features")``), the complement of the builtin corpus, each case's ``covers`` naming
its feature id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from props.contract.findings import SpecKind, SpecRef
from props.corpus._errors import CorpusError
from props.corpus._load import Case

__all__ = ["Feature", "FEATURES", "TOOLCALL_FEATURES", "TOOLCALL_SPECIAL_TOKENS", "feature_cases", "feature"]

CORPUS = "features"
# Profile the suite's schemas are judged under: undeclared keys may repeat (what engines implement),
# so open objects compile on the reference.
_PROFILE: dict[str, Any] = {"allow_duplicate_keys": True}


@dataclass(frozen=True)
class Feature:
    """One row of the matrix: ``id`` (``json_schema/not``, ``regex/lookahead``, ...), ``kind`` (the spec
    kind), a one-line ``description`` and its probe cases."""

    id: str
    kind: str
    description: str
    probes: tuple[Case, ...]

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "kind": self.kind, "description": self.description}


def _schema_case(fid: str, how: str, schema: Any, valid: list[Any], invalid: list[Any] = ()) -> Case:  # type: ignore[assignment]
    name = f"{fid}#{how}"
    return Case(
        SpecRef(SpecKind.JSON_SCHEMA, schema, name, CORPUS, dict(_PROFILE)),
        tuple(valid),
        tuple(invalid),
        covers=(fid,),
    )


def _kw(
    name: str,
    description: str,
    alone: dict[str, Any],
    valid: list[Any],
    siblings: dict[str, Any] | None = None,
    sibling_valid: list[Any] | None = None,
    invalid: list[Any] = (),  # type: ignore[assignment]
    fid: str | None = None,
) -> Feature:
    """A JSON Schema feature: ``alone``, ``alone`` merged with ``siblings``, and ``alone`` as a required
    property's schema inside an object (valid instances wrapped)."""
    fid = fid or f"json_schema/{name}"
    probes = [_schema_case(fid, "alone", alone, valid, list(invalid))]
    if siblings is not None:
        probes.append(_schema_case(fid, "siblings", {**alone, **siblings}, sibling_valid or valid))
    # Root-level keywords ($defs, definitions, $schema) stay at the root, so "#/$defs/..." still resolves.
    hoisted = {k: v for k, v in alone.items() if k in ("$defs", "definitions", "$schema")}
    inner = {k: v for k, v in alone.items() if k not in hoisted}
    nested = {
        **hoisted,
        "type": "object",
        "properties": {"v": inner, "w": {"type": "integer"}},
        "required": ["v"],
    }
    probes.append(
        _schema_case(fid, "nested", nested, [{"v": v} for v in valid] + [{"v": v, "w": 1} for v in valid[:1]])
    )
    return Feature(fid, "json_schema", description, tuple(probes))


def _text(kind: str, fid: str, description: str, probes: list[tuple[str, Any, list[str]]]) -> Feature:
    cases = tuple(
        Case(SpecRef(SpecKind(kind), src, f"{fid}#{how}", CORPUS), tuple(valid), covers=(fid,))
        for how, src, valid in probes
    )
    return Feature(fid, kind, description, cases)


def _regex(
    name: str,
    description: str,
    pattern: str,
    valid: list[str],
    siblings: tuple[str, list[str]] | None = None,
    nested: tuple[str, list[str]] | None | bool = None,
) -> Feature:
    """A regex feature: the pattern alone, between literal siblings, and as a JSON Schema ``pattern``
    (ECMA-262, anchored) of a nested property; ``siblings`` / ``nested`` give (pattern, valid) where
    the plain wrapping would change the language (anchors, inline flags, ECMA's ASCII ``\\w``);
    ``nested=False`` where ECMA-262 has no such construct."""
    fid = f"regex/{name}"
    sib = siblings or (f"id-(?:{pattern})-end", [f"id-{v}-end" for v in valid])
    f = _text("regex", fid, description, [("alone", pattern, valid), ("siblings", sib[0], sib[1])])
    if nested is False:
        return Feature(fid, "regex", description, f.probes)
    ecma, ecma_valid = nested if isinstance(nested, tuple) else (f"^(?:{pattern})$", valid)
    case = _schema_case(
        fid,
        "nested",
        {"type": "object", "properties": {"s": {"type": "string", "pattern": ecma}}, "required": ["s"]},
        [{"s": v} for v in ecma_valid],
    )
    return Feature(fid, "regex", description, (*f.probes, case))


def _gbnf(name: str, description: str, rules: str, valid: list[str]) -> Feature:
    """A GBNF feature: ``rules`` (whose start rule is ``item``) as the root, and nested between literals."""
    fid = f"gbnf/{name}"
    alone = f"root ::= item\n{rules}\n"
    nested = f'root ::= "<" item ("," item)? ">"\n{rules}\n'
    return _text(
        "gbnf",
        fid,
        description,
        [
            ("alone", alone, valid),
            ("nested", nested, [f"<{v}>" for v in valid] + [f"<{valid[0]},{valid[-1]}>"]),
        ],
    )


def _format(name: str, valid: str) -> Feature:
    return _kw(
        name,
        f"format: {name} (asserted where the engine's profile asserts formats)",
        {"type": "string", "format": name},
        [valid],
        siblings={"maxLength": 64},
        fid=f"json_schema/format/{name}",
    )


_JSON: list[Feature] = [
    _kw(
        "type",
        "type, single and as a list",
        {"type": "integer"},
        [0, 7, -3],
        siblings={"type": ["integer", "null"]},
        sibling_valid=[1, None],
    ),
    _kw(
        "enum",
        "enum of mixed values",
        {"enum": ["red", 1, None, [1], {"a": 1}]},
        ["red", 1, None],
        siblings={"type": ["string", "integer"]},
        sibling_valid=["red", 1],
    ),
    _kw("const", "const", {"const": "forbidden-word"}, ["forbidden-word"], siblings={"type": "string"}),
    _kw(
        "multipleOf",
        "multipleOf (integer and fractional)",
        {"type": "integer", "multipleOf": 7},
        [0, 14, -21],
        siblings={"minimum": 10, "maximum": 100},
        sibling_valid=[14, 98],
    ),
    _kw(
        "maximum",
        "maximum",
        {"type": "number", "maximum": 5},
        [5, -1.5, 4.99],
        siblings={"minimum": -10, "multipleOf": 0.5},
        sibling_valid=[5, -1.5],
    ),
    _kw(
        "exclusiveMaximum",
        "exclusiveMaximum",
        {"type": "integer", "exclusiveMaximum": 10},
        [9, -4],
        siblings={"minimum": 0},
        sibling_valid=[0, 9],
    ),
    _kw("minimum", "minimum", {"type": "integer", "minimum": 3}, [3, 40], siblings={"maximum": 99}),
    _kw(
        "exclusiveMinimum",
        "exclusiveMinimum",
        {"type": "number", "exclusiveMinimum": 0},
        [0.5, 3],
        siblings={"maximum": 10},
    ),
    _kw(
        "maxLength",
        "maxLength (code points)",
        {"type": "string", "maxLength": 3},
        ["", "abc", "éé"],
        siblings={"minLength": 1, "pattern": "^[a-zé]+$"},
        sibling_valid=["abc", "é"],
    ),
    _kw(
        "minLength",
        "minLength (code points)",
        {"type": "string", "minLength": 2},
        ["ab", "long text"],
        siblings={"maxLength": 5},
        sibling_valid=["ab", "abcde"],
    ),
    _kw(
        "pattern",
        "pattern (ECMA-262, unanchored search)",
        {"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"},
        ["ab-12"],
        siblings={"maxLength": 8, "minLength": 4},
        sibling_valid=["ab-12"],
    ),
    _kw(
        "pattern-unanchored",
        "pattern without anchors matches anywhere in the string",
        {"type": "string", "pattern": "ab+c"},
        ["abc", "xxabbcyy"],
        siblings={"maxLength": 10},
        fid="json_schema/pattern-unanchored",
    ),
    _kw(
        "maxItems",
        "maxItems",
        {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
        [[], [1, 2]],
        siblings={"minItems": 1},
        sibling_valid=[[1], [1, 2]],
    ),
    _kw(
        "minItems",
        "minItems",
        {"type": "array", "items": {"type": "integer"}, "minItems": 2},
        [[1, 2], [1, 2, 3]],
        siblings={"maxItems": 3},
    ),
    _kw(
        "uniqueItems",
        "uniqueItems",
        {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True},
        [["a", "b"], [], ["c"]],
        siblings={"maxItems": 3},
    ),
    _kw(
        "contains",
        "contains",
        {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}},
        [[3], [1, 3, 5]],
        siblings={"maxItems": 3},
    ),
    _kw(
        "minContains",
        "minContains",
        {"type": "array", "contains": {"const": 3}, "minContains": 2},
        [[3, 3], [3, 1, 3]],
        siblings={"maxItems": 4},
    ),
    _kw(
        "maxContains",
        "maxContains",
        {"type": "array", "contains": {"const": 3}, "maxContains": 1},
        [[3], [3, 1]],
        siblings={"maxItems": 4},
    ),
    _kw(
        "maxProperties",
        "maxProperties",
        {"type": "object", "maxProperties": 1},
        [{}, {"a": 1}],
        siblings={"properties": {"a": {"type": "integer"}}},
    ),
    _kw(
        "minProperties",
        "minProperties",
        {"type": "object", "minProperties": 2},
        [{"a": 1, "b": 2}],
        siblings={"maxProperties": 3},
    ),
    _kw(
        "required",
        "required",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
        },
        [{"a": 1}, {"a": 1, "b": "x"}],
        siblings={"additionalProperties": False},
    ),
    _kw(
        "dependentRequired",
        "dependentRequired",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "dependentRequired": {"a": ["b"]},
        },
        [{}, {"a": 1, "b": 2}, {"b": 2}],
        siblings={"additionalProperties": False},
    ),
    _kw(
        "dependentSchemas",
        "dependentSchemas",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "dependentSchemas": {"a": {"required": ["b"]}},
        },
        [{}, {"a": 1, "b": 2}],
        siblings={"additionalProperties": False},
    ),
    _kw(
        "properties",
        "properties",
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}},
        [{}, {"a": 1, "b": True}],
        siblings={"required": ["a"]},
        sibling_valid=[{"a": 1}],
    ),
    _kw(
        "additionalProperties",
        "additionalProperties false and as a schema",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
        [{}, {"a": 1}],
        siblings={"required": ["a"]},
        sibling_valid=[{"a": 1}],
    ),
    _kw(
        "additionalProperties-schema",
        "additionalProperties as a schema",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        [{"a": 1, "x": "y"}],
        fid="json_schema/additionalProperties-schema",
    ),
    _kw(
        "patternProperties",
        "patternProperties",
        {"type": "object", "patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False},
        [{}, {"n_a": 1}],
        siblings={"maxProperties": 2},
    ),
    _kw(
        "propertyNames",
        "propertyNames",
        {"type": "object", "propertyNames": {"pattern": "^[a-z]{1,4}$"}},
        [{}, {"ab": 1}],
        siblings={"maxProperties": 2},
    ),
    _kw(
        "prefixItems",
        "prefixItems",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        [[1, "a"], [1]],
        siblings={"items": False},
        sibling_valid=[[1, "a"]],
    ),
    _kw(
        "items",
        "items (after prefixItems and alone)",
        {"type": "array", "items": {"type": "boolean"}},
        [[], [True, False]],
        siblings={"prefixItems": [{"type": "integer"}]},
        sibling_valid=[[1, True]],
    ),
    _kw(
        "items-false",
        "items: false after prefixItems",
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
        [[1], []],
        fid="json_schema/items-false",
    ),
    _kw("allOf", "allOf", {"allOf": [{"type": "integer"}, {"minimum": 2}, {"maximum": 5}]}, [2, 5]),
    _kw(
        "anyOf",
        "anyOf",
        {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 10}]},
        ["ab", 10],
    ),
    _kw(
        "oneOf",
        "oneOf (exactly one branch)",
        {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
        [-1, 0.5],
    ),
    _kw(
        "not",
        "not",
        {"type": "string", "not": {"const": "forbidden"}},
        ["allowed", "forbidde"],
        siblings={"maxLength": 12},
    ),
    _kw(
        "if-then-else",
        "if / then / else",
        {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}},
        [3, "x"],
        fid="json_schema/if-then-else",
    ),
    _kw(
        "$ref",
        "$ref to $defs (and recursion)",
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                    "required": ["v"],
                }
            },
            "$ref": "#/$defs/node",
        },
        [{"v": 1}, {"v": 1, "next": {"v": 2}}],
    ),
    _kw(
        "$anchor",
        "$anchor references",
        {"$defs": {"a": {"$anchor": "pos", "type": "integer", "minimum": 0}}, "$ref": "#pos"},
        [0, 5],
    ),
    _kw(
        "$dynamicRef",
        "$dynamicRef",
        {"$dynamicAnchor": "t", "type": ["integer", "array"], "items": {"$dynamicRef": "#t"}},
        [1, [1, [2]]],
    ),
    _kw(
        "unevaluatedProperties",
        "unevaluatedProperties",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
        [{}, {"a": 1}],
    ),
    _kw(
        "unevaluatedItems",
        "unevaluatedItems",
        {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
        [[], [1]],
    ),
    _kw(
        "contentMediaType",
        "contentMediaType / contentEncoding (annotations)",
        {"type": "string", "contentMediaType": "application/json", "contentEncoding": "base64"},
        ["e30=", "not base64!"],
    ),
    _kw(
        "draft7/items-array",
        "draft-07 items as an array, with additionalItems",
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "array",
            "items": [{"type": "integer"}, {"type": "string"}],
            "additionalItems": False,
        },
        [[1, "a"], [1]],
        fid="json_schema/draft7/items-array",
    ),
    _kw(
        "draft7/dependencies",
        "draft-07 dependencies (array and schema forms)",
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "dependencies": {"a": ["b"]},
        },
        [{}, {"a": 1, "b": 2}],
        fid="json_schema/draft7/dependencies",
    ),
    _kw(
        "draft7/definitions",
        "draft-07 definitions with $ref",
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"p": {"type": "integer", "maximum": 9}},
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/p"}},
        },
        [{}, {"a": 9}],
        fid="json_schema/draft7/definitions",
    ),
]

_FORMAT_SAMPLES = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-02-29",
    "time": "12:00:00Z",
    "duration": "P1D",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.168.0.1",
    "ipv6": "::1",
    "uri": "http://example.com/a",
    "uri-reference": "/a?b",
    "iri": "http://example.com/a",
    "iri-reference": "/a",
    "uri-template": "/a/{b}",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "json-pointer": "/a/0",
    "relative-json-pointer": "0/a",
    "regex": "a+b",
}

_REGEX: list[Feature] = [
    _regex("literal", "literal characters", "abc", ["abc"]),
    _regex("class", "character classes and ranges", "[a-c0-9_]{2}", ["a0", "_c"]),
    _regex("negated-class", "negated character classes", "[^a-z]{2}", ["A1", "é!"]),
    _regex("shorthand", "\\d \\w \\s shorthands", "\\d\\w\\s", ["1a ", "9_\t"]),
    _regex("dot", "any character", "a.c", ["abc", "aéc"]),
    _regex("anchors", "^ and $ anchors", "^ab$", ["ab"], siblings=("^id-ab$|^x$", ["id-ab", "x"])),
    _regex("alternation", "alternation", "cat|dog|bird", ["cat", "bird"]),
    _regex("optional", "? quantifier", "colou?r", ["color", "colour"]),
    _regex("star-plus", "* and + quantifiers", "a*b+", ["b", "aabb"]),
    _regex("bounded-repetition", "bounded repetition {m,n}", "x{2,4}", ["xx", "xxxx"]),
    _regex("exact-repetition", "exact repetition {n}", "[0-9]{3}", ["123"]),
    _regex("large-repetition", "large bounded repetition", "[a-z]{1,120}", ["a", "abc" * 40]),
    _regex("lazy", "lazy quantifiers (same language)", "a+?b", ["ab", "aab"]),
    _regex("groups", "capturing and non-capturing groups", "(ab)+(?:cd)?", ["ab", "ababcd"]),
    _regex(
        "lookahead",
        "positive lookahead",
        "(?=\\d{3}$)\\d+",
        ["123"],
        siblings=("id-(?=\\d{3}-)\\d+-end", ["id-123-end"]),
    ),
    _regex("negative-lookahead", "negative lookahead", "(?!no)[a-z]{2}", ["ok", "on"]),
    _regex("lookbehind", "lookbehind", "[a-z]+(?<=x)", ["ax", "x"]),
    _regex("backreference", "backreferences", "(a|b)\\1", ["aa", "bb"]),
    _regex("word-boundary", "\\b word boundary", "a\\b.", ["a "]),
    _regex(
        "case-insensitive",
        "inline case-insensitive flag",
        "(?i)abc",
        ["abc", "AbC"],
        siblings=("(?i)id-abc-end", ["id-AbC-end", "ID-abc-END"]),
        nested=False,  # ECMA-262 patterns have no inline flags
    ),
    _regex("escapes", "escaped metacharacters", "a\\.b\\-c\\\\", ["a.b-c\\"]),
    _regex("unicode-escape", "\\u escapes", "\\u00e9\\u4e2d", ["é中"]),
    _regex("non-ascii", "non-ASCII literals and ranges", "[à-ÿ]+中文😀?", ["é中文", "àü中文😀"]),
    _regex(
        "unicode-class",
        "Unicode-aware \\w (ASCII-only in ECMA-262 patterns)",
        "\\w+",
        ["é", "abc中"],
        nested=("^\\w+$", ["abc", "a_1"]),
    ),
]

_GBNF: list[Feature] = [
    _gbnf("literal", "string literals", 'item ::= "ab"', ["ab"]),
    _gbnf("alternation", "alternatives", 'item ::= "cat" | "dog"', ["cat", "dog"]),
    _gbnf("char-class", "character classes and ranges", "item ::= [a-c0-9]", ["a", "7"]),
    _gbnf("negated-class", "negated character classes", "item ::= [^a-z,<>]", ["A", "é"]),
    _gbnf("repetition", "bounded repetition {m,n}", "item ::= [a-z]{2,3}", ["ab", "abc"]),
    _gbnf(
        "repetition-exact",
        "exact and open repetition {n} {m,}",
        "item ::= [0-9]{2} [a-z]{1,}",
        ["12a", "00abc"],
    ),
    _gbnf("star-plus-optional", "* + ? operators", 'item ::= "a"* "b"+ "c"?', ["b", "aabbc"]),
    _gbnf("grouping", "nested groups", 'item ::= ("a" ("b" | "c"))+', ["ab", "abac"]),
    _gbnf("recursion", "recursive rules", 'item ::= "(" item ")" | "x"', ["x", "((x))"]),
    _gbnf("empty-alternative", "empty alternatives", 'item ::= "a" opt\nopt ::= "b" |', ["a", "ab"]),
    _gbnf("any-char", "the . wildcard", 'item ::= "a" . "c"', ["abc", "aéc"]),
    _gbnf("escapes", "\\x \\u and \\n escapes", 'item ::= "\\x41" "\\u00e9" [\\x30-\\x39]', ["Aé5"]),
    _gbnf("unicode", "non-ASCII literals and ranges", 'item ::= "中" [à-ÿ]', ["中é"]),
    _gbnf("rule-reference", "rules referring to rules", 'item ::= word "-" word\nword ::= [a-z]+', ["ab-c"]),
]

_CHOICE: list[Feature] = [
    Feature(
        "choice/options",
        "choice",
        "a choice among strings, some prefixes of others",
        (
            Case(
                SpecRef(SpecKind.CHOICE, ["red", "redder", "blue"], "choice/options#alone", CORPUS),
                ("red", "redder"),
                covers=("choice/options",),
            ),
            Case(
                SpecRef(SpecKind.CHOICE, ["é", "中文", "a b"], "choice/options#unicode", CORPUS),
                ("é", "a b"),
                covers=("choice/options",),
            ),
        ),
    )
]

FEATURES: tuple[Feature, ...] = (
    *_JSON,
    *(_format(name, sample) for name, sample in _FORMAT_SAMPLES.items()),
    *_REGEX,
    *_GBNF,
    *_CHOICE,
)


# -- tool calls (issue 29) ---------------------------------------------------------------------------
# Probes of the kinds that name special tokens: no valid instances here (their outputs hold special
# tokens, which no validator of props.corpus reads); certification draws valid texts from the reference.

#: The special tokens the tool-call probes name: ``maskcert matrix`` certifies them on a vocabulary
#: that has exactly these as added special tokens, in this order (ids 1, 2, ... after EOS).
TOOLCALL_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|tool_call|>",
    "<|/tool_call|>",
    "<|eos|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
)
_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}},
    "required": ["city"],
    "additionalProperties": False,
}
_CALL: dict[str, Any] = {"type": "json_schema", "json_schema": _ARGS}
_WORD: dict[str, Any] = {"type": "const_string", "value": "ok"}


def _call_tag(begin: Any = "<call>", end: Any = "</call>") -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": _CALL, "end": end}


def _token(name: str) -> dict[str, Any]:
    return {"type": "token", "token": name}


#: One small structural tag per format type of xgrammar 0.2.9 (its docs/structural_tag.md).
_TAG_FORMATS: dict[str, tuple[str, dict[str, Any]]] = {
    "const_string": ("a constant string", {"type": "const_string", "value": "yes é"}),
    "json_schema": ("a JSON Schema (JSON style)", _CALL),
    "json_schema-qwen_xml": (
        "a JSON Schema in style qwen_xml (<parameter=name>value</parameter>)",
        {"type": "json_schema", "json_schema": _ARGS, "style": "qwen_xml"},
    ),
    "grammar": ("an EBNF grammar", {"type": "grammar", "grammar": 'root ::= ("yes" | "no")'}),
    "regex": ("a regular expression", {"type": "regex", "pattern": "[A-Z]{2}-[0-9]{1,3}"}),
    "any_text": (
        "free text with excludes, ended by its tag's end",
        {"type": "tag", "begin": "<t>", "content": {"type": "any_text", "excludes": ["<x>"]}, "end": "</t>"},
    ),
    "sequence": ("a sequence", {"type": "sequence", "elements": [_WORD, _CALL]}),
    "or": ("alternatives", {"type": "or", "elements": [_WORD, {"type": "const_string", "value": "no"}]}),
    "optional": (
        "an optional format",
        {"type": "sequence", "elements": [{"type": "optional", "content": _WORD}, _CALL]},
    ),
    "plus": ("one or more", {"type": "plus", "content": _WORD}),
    "star": ("zero or more", {"type": "sequence", "elements": [{"type": "star", "content": _WORD}, _CALL]}),
    "repeat": ("a repetition range", {"type": "repeat", "min": 1, "max": 3, "content": _WORD}),
    "tag": ("begin, content, end", _call_tag()),
    "triggered_tags": (
        "free text until a trigger, then a tag",
        {"type": "triggered_tags", "triggers": ["<call"], "tags": [_call_tag()]},
    ),
    "triggered_tags-required": (
        "triggered tags with at_least_one and stop_after_first (exactly one call)",
        {
            "type": "triggered_tags",
            "triggers": ["<call"],
            "tags": [_call_tag()],
            "at_least_one": True,
            "stop_after_first": True,
        },
    ),
    "tags_with_separator": (
        "tags joined by a separator",
        {"type": "tags_with_separator", "tags": [_call_tag()], "separator": ","},
    ),
    "dispatch": (
        "text patterns dispatching to formats",
        {"type": "dispatch", "rules": [["<f=a>", _CALL], ["<f=b>", _WORD]]},
    ),
    "token": (
        "a special token between texts",
        {"type": "sequence", "elements": [_WORD, _token("<|tool_call|>"), _CALL, _token("<|/tool_call|>")]},
    ),
    "exclude_token": (
        "any one token but the excluded ones",
        {"type": "sequence", "elements": [{"type": "exclude_token", "exclude_tokens": ["<|eos|>"]}, _WORD]},
    ),
    "any_tokens": (
        "any tokens but the excluded ones, ended by its tag's end token",
        {
            "type": "tag",
            "begin": _token("<think>"),
            "content": {"type": "any_tokens", "exclude_tokens": ["<|eos|>"]},
            "end": _token("</think>"),
        },
    ),
    "token_triggered_tags": (
        "special-token triggers, then a tag between tokens",
        {
            "type": "token_triggered_tags",
            "trigger_tokens": ["<|tool_call|>"],
            "tags": [_call_tag(_token("<|tool_call|>"), _token("<|/tool_call|>"))],
            "exclude_tokens": ["<|eos|>"],
        },
    ),
    "token_dispatch": (
        "special tokens dispatching to formats",
        {"type": "token_dispatch", "rules": [["<tool_call>", _CALL], ["<think>", _WORD]], "loop": False},
    ),
    "qwen_xml_parameter": (
        "Qwen XML parameters (the deprecated format type)",
        {"type": "qwen_xml_parameter", "json_schema": _ARGS},
    ),
}


def _special_feature(kind: SpecKind, fid: str, description: str, how: str, src: Any) -> Feature:
    """A one-probe feature whose spec names special tokens by name; their ids are the vocabulary's
    (``SpecRef.naming_special_tokens``, as certify fills them in)."""
    key = "tag" if kind == SpecKind.STRUCTURAL_TAG else "text"
    case = Case(SpecRef(kind, {key: src, "special_tokens": {}}, f"{fid}#{how}", CORPUS), covers=(fid,))
    return Feature(fid, kind.value, description, (case,))


def _structural_tag_features() -> list[Feature]:
    return [
        _special_feature(
            SpecKind.STRUCTURAL_TAG,
            f"structural_tag/{name}",
            description,
            "alone",
            {"type": "structural_tag", "format": fmt},
        )
        for name, (description, fmt) in _TAG_FORMATS.items()
    ]


def _template_features() -> list[Feature]:
    """One row per model template of the tool-call snapshot: the structural tag it made for one tool,
    ``tool_choice`` auto, parallel calls, reasoning auto (and a row with token markers where the
    template has them)."""
    from props.corpus.toolcalls import load_snapshot

    header, records = load_snapshot()
    out = []
    for r in records:
        o = r.options
        request = (o.tools, o.tool_choice, o.parallel, o.reasoning)
        if request != ("one_tool", "auto", True, "auto") or r.tag is None:
            continue
        fid = f"toolcall/{o.template}" + ("/token_markers" if o.token_markers else "")
        description = (
            f"{header['engine']} {header['version']} template {o.template}"
            + (" (special tokens as token formats)" if o.token_markers else "")
            + ": one tool, tool_choice auto, parallel calls"
        )
        out.append(_special_feature(SpecKind.STRUCTURAL_TAG, fid, description, "one_tool", r.tag))
    return out


_LARK_ARGS = json.dumps(_ARGS)
#: Lark tool-call constructs of llguidance (its docs/syntax.md, docs/special_tokens.md, docs/toolcalls.md).
_LARK: list[tuple[str, str, str]] = [
    ("special-token", "a special token by name <|name|>", 'start: "call " <|tool_call|> "x" <|/tool_call|>'),
    ("special-token-id", "a special token by id <[id]>", 'start: "call " <[1]> "x" <[2]>'),
    (
        "json-between-tokens",
        "%json between special tokens after free text",
        f"start: TEXT <|tool_call|> %json {_LARK_ARGS} <|/tool_call|>\nTEXT: /[a-z ]{{0,12}}/",
    ),
    (
        "ignore",
        "%ignore whitespace between lexemes",
        'start: "(" NAME ("," NAME)* ")"\nNAME: /[a-z]+/\n%ignore /[ \\t]+/',
    ),
    (
        "lazy",
        "lazy rules: free text with tool calls in text tags (llguidance's syntax.md, Tool calling)",
        "start: f_call* f_end\nf_end: TEXT\nTEXT: /(.|\\n)*/\n"
        f'f_hd[lazy]: TEXT "<function"\nf_call: f_hd "=get>" %json {_LARK_ARGS} "</function>"',
    ),
]


def _lark_features() -> list[Feature]:
    return [
        _special_feature(SpecKind.LARK, f"lark/{name}", description, "alone", text)
        for name, description, text in _LARK
    ]


#: Tool-call rows of the matrix: each structural-tag format type, each model template of the snapshot,
#: llguidance's Lark tool-call constructs. Not in :data:`FEATURES` (nor ``load_corpus("features")``):
#: their probes name :data:`TOOLCALL_SPECIAL_TOKENS`, which a vocabulary must have.
TOOLCALL_FEATURES: tuple[Feature, ...] = (
    *_structural_tag_features(),
    *_template_features(),
    *_lark_features(),
)


def feature(fid: str) -> Feature:
    """The feature with id ``fid`` (or every feature whose id starts with ``fid + "/"`` is not it: an
    exact id); a :class:`CorpusError` naming the known ids otherwise."""
    for f in (*FEATURES, *TOOLCALL_FEATURES):
        if f.id == fid:
            return f
    raise CorpusError(f"feature {fid!r}", f"one of {', '.join(f.id for f in FEATURES)}")


def feature_cases() -> list[Case]:
    """Every probe of every feature, as corpus cases (the builtin corpus's complement)."""
    return [c for f in FEATURES for c in f.probes]
