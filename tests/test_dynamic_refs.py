"""Dynamic references (refdecoder/_dynamic.py): 2020-12 ``$dynamicRef``/``$dynamicAnchor``, 2019-09
``$recursiveRef``/``$recursiveAnchor``, and the json-schema.org meta-schemas as known documents.

Every verdict is checked twice: against the answer written here (what the spec's dynamic-scope rule
gives) and against ``jsonschema`` (with a ``referencing`` registry holding the same documents), the
independent validator. Refusals are checked to be warranted: where the reference refuses because the
spec's reading and ``jsonschema``'s differ, the test shows ``jsonschema`` giving the other verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import refdecoder
from refdecoder import JsonProfile, JsonSchema, Limits, Unsupported
from refdecoder._dynamic import META_SCHEMAS, meta_schema
from refdecoder._jsonschema import Compiler

D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"
PROFILE = JsonProfile(allow_duplicate_keys=True)


def jsonschema_accepts(schema: Any, instance: Any, resources: dict[str, Any]) -> bool:
    import jsonschema
    from referencing import Registry
    from referencing.jsonschema import specification_with

    registry: Registry[Any] = Registry().with_resources(
        (uri, specification_with(doc.get("$schema", D2020)).create_resource(doc))
        for uri, doc in resources.items()
    )
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema, registry=registry).is_valid(instance))


def verdicts(schema: Any, instances: list[Any], resources: dict[str, Any] | None = None) -> list[bool]:
    """The reference's verdict on each instance (compact and pretty), asserted equal to jsonschema's."""
    resources = resources or {}
    grammar = refdecoder.compile(JsonSchema(schema, PROFILE, resources))
    out = []
    for value in instances:
        got = grammar.accepts(json.dumps(value, separators=(",", ":")).encode())
        assert grammar.accepts(json.dumps(value, indent=2).encode()) == got
        assert got == jsonschema_accepts(schema, value, resources), f"{value!r}: reference {got}"
        out.append(got)
    return out


def refusal(schema: Any, resources: dict[str, Any] | None = None) -> Unsupported:
    with pytest.raises(Unsupported) as e:
        refdecoder.compile(JsonSchema(schema, PROFILE, resources or {}))
    return e.value


# -- 2020-12 $dynamicRef ------------------------------------------------------------------------------
def _list_of(item_anchor: dict[str, Any] | None) -> dict[str, Any]:
    """A generic list whose items are the outermost ``#items`` dynamic anchor in scope."""
    return {
        "$schema": D2020,
        "$id": "https://example.com/root",
        "$ref": "list",
        "$defs": {
            **({"item": {"$dynamicAnchor": "items", **item_anchor}} if item_anchor is not None else {}),
            "list": {
                "$id": "list",
                "type": "array",
                "items": {"$dynamicRef": "#items"},
                "$defs": {"fallback": {"$dynamicAnchor": "items", "type": ["integer", "string"]}},
            },
        },
    }


def test_dynamic_ref_takes_the_outermost_anchor_in_scope() -> None:
    instances: list[Any] = [[1], ["a"], [1.5], [None], []]
    assert verdicts(_list_of({"type": "string"}), instances) == [False, True, False, False, True]
    assert verdicts(_list_of({"type": "number"}), instances) == [True, False, True, False, True]
    # No outer anchor: the initial target, the list's own default.
    assert verdicts(_list_of(None), instances) == [True, True, False, False, True]


def test_dynamic_ref_recursion_stays_in_the_outer_scope() -> None:
    """A tree whose node type an extending schema overrides: recursion keeps the outer anchor."""
    schema: dict[str, Any] = {
        "$schema": D2020,
        "$id": "https://example.com/strict",
        "$dynamicAnchor": "node",
        "$ref": "tree",
        "properties": {"data": {"type": "integer"}},
        "$defs": {
            "tree": {
                "$id": "tree",
                "$dynamicAnchor": "node",
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$dynamicRef": "#node"}}},
            }
        },
    }
    instances: list[Any] = [
        {"data": 1},
        {"data": "x"},
        {"children": [{"data": 1}]},
        {"children": [{"data": "x"}]},
        {"children": [{"children": [{"data": "x"}]}]},
        {"children": [1]},
    ]
    assert verdicts(schema, instances) == [True, False, True, False, False, False]
    # The tree on its own: any data.
    tree = {"$schema": D2020, "$ref": "https://example.com/tree"}
    res = {"https://example.com/tree": {**schema["$defs"]["tree"], "$schema": D2020}}
    assert verdicts(tree, instances, res) == [True, True, True, True, True, False]


def test_dynamic_ref_to_a_pointer_or_an_anchor_is_a_ref() -> None:
    ptr = _list_of({"type": "string"})
    ptr["$defs"]["list"]["items"] = {"$dynamicRef": "#/$defs/fallback"}
    assert verdicts(ptr, [[1], ["a"], [None]]) == [True, True, False]
    plain = _list_of({"type": "string"})
    plain["$defs"]["list"]["$defs"]["fallback"] = {"$anchor": "items", "type": "integer"}
    assert verdicts(plain, [[1], ["a"]]) == [True, False]


def test_dynamic_ref_across_documents() -> None:
    res = {
        "https://example.com/list": {
            "$schema": D2020,
            "$id": "https://example.com/list",
            "type": "array",
            "items": {"$dynamicRef": "#items"},
            "$defs": {"fallback": {"$dynamicAnchor": "items"}},
        }
    }
    schema = {
        "$schema": D2020,
        "$id": "https://example.com/strings",
        "$ref": "list",
        "$defs": {"s": {"$dynamicAnchor": "items", "type": "string"}},
    }
    assert verdicts(schema, [["a"], [1], []], res) == [True, False, True]


def test_schemas_without_dynamic_anchors_keep_scope_free_expressions() -> None:
    for schema in (
        {"type": "array", "items": {"$ref": "#"}},
        {"$dynamicAnchor": "t", "type": ["integer", "array"], "items": {"$dynamicRef": "#t"}},
    ):
        assert Compiler(JsonSchema(schema, PROFILE), Limits()).refs.dynamic is None
    assert verdicts(
        {"$dynamicAnchor": "t", "type": ["integer", "array"], "items": {"$dynamicRef": "#t"}},
        [
            1,
            [1, [2]],
            ["a"],
        ],
    ) == [True, True, False]
    assert Compiler(JsonSchema(_list_of({"type": "string"}), PROFILE), Limits()).refs.dynamic is not None


def test_dynamic_ref_refused_where_jsonschema_reads_the_scope_otherwise() -> None:
    """The outer resource is entered through a subschema with $id, which jsonschema's resolver stack
    never holds: the spec takes the root's anchor (numbers), jsonschema the middle one (strings)."""
    schema = {
        "$schema": D2020,
        "$id": "https://example.com/root",
        "$defs": {"a": {"$dynamicAnchor": "x", "type": "number"}},
        "properties": {
            "p": {
                "$id": "mid",
                "$defs": {"b": {"$dynamicAnchor": "x", "type": "string"}},
                "$ref": "list",
            }
        },
        "$comment": "list is below",
        "allOf": [
            {
                "$defs": {
                    "list": {
                        "$id": "list",
                        "items": {"$dynamicRef": "#x"},
                        "$defs": {"c": {"$dynamicAnchor": "x"}},
                    }
                }
            }
        ],
    }
    e = refusal(schema)
    assert e.keyword == "$dynamicRef" and e.where.endswith("/items/$dynamicRef")
    assert "jsonschema" in e.reason
    # The refusal is warranted: jsonschema reads strings where the spec reads numbers.
    assert jsonschema_accepts(schema, {"p": ["a"]}, {}) and not jsonschema_accepts(schema, {"p": [1]}, {})


def test_ref_to_a_dynamic_anchor_refused_where_jsonschema_resolves_it_dynamically() -> None:
    schema = _list_of({"type": "string"})
    schema["$defs"]["list"]["items"] = {"$ref": "#items"}
    e = refusal(schema)
    assert e.keyword == "$ref" and "statically" in e.reason
    # The spec reads the list's own default (integers or strings); jsonschema the outer anchor.
    assert not jsonschema_accepts(schema, [1], {})


# -- 2019-09 $recursiveRef ----------------------------------------------------------------------------
def _tree2019(anchor_outer: bool) -> dict[str, Any]:
    return {
        "$schema": D2019,
        "$id": "https://example.com/strict.json",
        **({"$recursiveAnchor": True} if anchor_outer else {}),
        "$ref": "tree.json",
        "properties": {"data": {"type": "integer"}},
        "$defs": {
            "tree": {
                "$id": "tree.json",
                "$recursiveAnchor": True,
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$recursiveRef": "#"}}},
            }
        },
    }


def test_recursive_ref_with_two_anchored_resources_extends_the_tree() -> None:
    instances: list[Any] = [{"children": [{"data": 1}]}, {"children": [{"data": "x"}]}, {"data": "x"}]
    assert verdicts(_tree2019(True), instances) == [True, False, False]
    assert verdicts(_tree2019(False), instances) == [True, True, False]


def test_recursive_ref_refused_where_jsonschema_stops_at_an_unanchored_resource() -> None:
    """Anchored root, an unanchored middle resource, an anchored target: the spec takes the root,
    jsonschema's stack walk stops at the middle resource and keeps the target."""
    schema = {
        "$schema": D2019,
        "$id": "https://example.com/a.json",
        "$recursiveAnchor": True,
        "type": ["object", "integer"],
        "properties": {"m": {"$ref": "b.json"}},
        "$defs": {
            "b": {"$id": "b.json", "$ref": "c.json"},
            "c": {
                "$id": "c.json",
                "$recursiveAnchor": True,
                "type": "object",
                "additionalProperties": {"$recursiveRef": "#"},
            },
        },
    }
    e = refusal(schema)
    assert e.keyword == "$recursiveRef" and "jsonschema" in e.reason
    assert not jsonschema_accepts(schema, {"m": {"k": 1}}, {})  # the spec's root reading accepts 1


# -- the meta-schemas -----------------------------------------------------------------------------------
def test_meta_schema_uris_resolve_to_known_documents() -> None:
    instances: list[Any] = [{"type": "string"}, {"type": 5}, {"properties": {"a": {"minimum": "x"}}}, True, 3]
    for uri in (
        "http://json-schema.org/draft-07/schema#",
        D2020,
        D2019,
        "http://json-schema.org/draft-04/schema#",
    ):
        schema = {"$ref": uri}
        try:
            got = verdicts(schema, instances)
        except Unsupported as e:
            # Resolved (never refused as remote): only a keyword of the meta-schema itself may stop it.
            assert e.keyword != "$ref" and "not fetched" not in e.reason, e
            continue
        boolean_schemas = "draft-04" not in uri  # ``true`` is a schema from draft-06 on
        assert got == [True, False, False, boolean_schemas, False], uri
    for uri, name in META_SCHEMAS.items():
        doc = meta_schema(uri)
        assert isinstance(doc, dict), name
        ident = doc.get("$id", doc.get("id"))
        assert isinstance(ident, str) and ident.rstrip("#") == uri, name


def _meta2020_without_unique_items() -> dict[str, Any]:
    """The 2020-12 meta-schema and its vocabularies, moved to example.com, without uniqueItems."""

    def strip(n: Any) -> Any:
        if isinstance(n, dict):
            return {k: strip(v) for k, v in n.items() if k != "uniqueItems"}
        if isinstance(n, list):
            return [strip(v) for v in n]
        return n

    out = {}
    for uri in META_SCHEMAS:
        if "/2020-12/" in uri:
            new = uri.replace("https://json-schema.org/", "https://example.com/")
            out[new] = {**strip(meta_schema(uri)), "$id": new}
    return out


def test_the_2020_12_meta_schema_is_decided_through_its_dynamic_refs() -> None:
    """The meta-schema is built on $dynamicRef "#meta" across its vocabularies: every schema of the
    suite (when present) and hand-made invalid ones are judged as jsonschema judges them."""
    res = _meta2020_without_unique_items()
    schema = {"$schema": D2020, "$ref": "https://example.com/draft/2020-12/schema"}
    instances: list[Any] = [
        {"type": "string"},
        {"type": 5},
        {"properties": {"a": {"minimum": "x"}}},
        {"properties": {"a": {"items": {"not": {"type": "nul"}}}}},
        {"$defs": {"a": {"$dynamicRef": 3}}},
        {"allOf": []},
        {"prefixItems": [{"maxLength": -1}]},
        True,
        {"dependentSchemas": {"a": {"contains": {"minContains": 1.5}}}},
    ]
    from ._data import shared_data

    suite = shared_data() / "json-schema-test-suite/tests/draft2020-12"
    for f in sorted(suite.glob("*.json"))[:12] if suite.exists() else []:
        instances.extend(g["schema"] for g in json.loads(f.read_text()))
    got = verdicts(schema, instances, res)
    assert got[:9] == [True, False, False, False, False, False, False, True, False]


def test_runtime_does_not_import_jsonschema() -> None:
    code = (
        "import sys, refdecoder\n"
        "from refdecoder import JsonSchema, JsonProfile, Unsupported\n"
        "try:\n"
        f"    refdecoder.compile(JsonSchema({{'$ref': {D2020!r}}}, JsonProfile(allow_duplicate_keys=True)))\n"
        "except Unsupported as e:\n"
        "    assert e.keyword != '$ref', e\n"
        "assert not any(m.startswith(('jsonschema', 'referencing')) for m in sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
