"""Just enough JSON Schema reading to know, at one position of an instance, which keys the schema
declares and in what order (profile ``property_order="schema"``), and to rewrite a schema the way
``additional_properties_default=False`` reads it. Independent of ``refdecoder``; deliberately simple:
where the schema at a position is not a plain object schema (applicators that may declare more
properties, non-local ``$ref``), the answer is ``None`` — "not known", never a guess.

Drafts: ``draft`` (a ``JsonProfile.draft`` name; :func:`root_draft` reads it off the root's
``$schema``) decides two readings: in drafts 4-7 a ``$ref`` hides its siblings, so it is followed even
next to ``properties``; before 2020-12, positions come from array-form ``items`` and ``additionalItems``
(``prefixItems`` is no keyword there). One draft per document: a ``$schema`` below the root is not
followed here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

__all__ = [
    "root_draft",
    "declared_order",
    "child_for_key",
    "child_for_index",
    "subschemas",
    "keywords",
    "strict_additional",
]

# Keywords whose value is one subschema, a list of them, or a map name -> subschema (draft 2020-12,
# plus the older spellings a walk should not miss).
_ONE = (
    "items",
    "additionalProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords next to "properties" that may declare other properties at the same position.
_NOT_PLAIN = (
    "allOf",
    "anyOf",
    "oneOf",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "$dynamicRef",
    "$ref",
    "unevaluatedProperties",
)
_MAX_REFS = 32
_REF_ALONE = ("draft-04", "draft-06", "draft-07")
_META = re.compile(
    r"^https?://json-schema\.org/(?:draft-0(?P<old>[467])|draft/(?P<new>2019-09|2020-12))/schema#?$"
)


def root_draft(root: Any, default: str) -> str:
    """The draft the document ``root`` is read in: its ``$schema`` when that names a json-schema.org
    draft, else ``default`` (the profile's)."""
    meta = root.get("$schema") if isinstance(root, dict) else None
    m = _META.match(meta) if isinstance(meta, str) else None
    if m is None:
        return default
    return m.group("new") or f"draft-0{m.group('old')}"


def subschemas(schema: Any) -> Iterator[Any]:
    """The immediate subschemas of ``schema`` (by keyword, never by guessing from values)."""
    if not isinstance(schema, dict):
        return
    for kw in _ONE:
        if kw in schema and isinstance(schema[kw], (dict, bool)):
            yield schema[kw]
    for kw in _LIST + ("items",):
        v = schema.get(kw)
        if isinstance(v, list):
            yield from (s for s in v if isinstance(s, (dict, bool)))
    for kw in _MAP:
        v = schema.get(kw)
        if isinstance(v, dict):
            yield from (s for s in v.values() if isinstance(s, (dict, bool)))


def keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in ``schema``."""
    out: set[str] = set()
    stack = [schema]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            out.update(s)
            stack.extend(subschemas(s))
    return out


def _resolve(schema: Any, root: Any, draft: str = "2020-12") -> Any:
    """Follow a local ``$ref`` that stands alone (``{"$ref": "#/..."}`` plus annotations, or anything
    in drafts 4-7, where ``$ref`` hides its siblings); else return ``schema`` unchanged, or None when
    the reference cannot be followed simply."""
    for _ in range(_MAX_REFS):
        if not (
            isinstance(schema, dict)
            and "$ref" in schema
            and ("properties" not in schema or draft in _REF_ALONE)
        ):
            return schema
        ref = schema["$ref"]
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            return None
        target = root
        for part in ref[2:].split("/") if ref != "#" else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return None
        schema = target
    return None


def declared_order(schema: Any, root: Any, draft: str = "2020-12") -> list[str] | None:
    """The ``properties`` of the plain object schema at this position, in schema order; None when
    the schema there is not a plain object schema."""
    s = _resolve(schema, root, draft)
    if not isinstance(s, dict) or not isinstance(s.get("properties"), dict):
        return None
    if any(kw in s for kw in _NOT_PLAIN):
        return None
    return list(s["properties"])


def child_for_key(schema: Any, root: Any, key: str, draft: str = "2020-12") -> Any:
    """The schema for member ``key`` when it is simply ``properties[key]`` (or a schema-valued
    ``additionalProperties`` with no ``patternProperties``); else None."""
    s = _resolve(schema, root, draft)
    if not isinstance(s, dict):
        return None
    props = s.get("properties")
    if isinstance(props, dict) and key in props:
        return props[key]
    if "patternProperties" not in s and isinstance(s.get("additionalProperties"), dict):
        return s["additionalProperties"]
    return None


def child_for_index(schema: Any, root: Any, index: int, draft: str = "2020-12") -> Any:
    """The schema for array item ``index``: ``prefixItems[index]`` or ``items`` (before 2020-12:
    ``items[index]``, or ``additionalItems`` after an array-form ``items``); else None."""
    s = _resolve(schema, root, draft)
    if not isinstance(s, dict):
        return None
    if draft != "2020-12":
        items = s.get("items")
        if isinstance(items, list):
            rest = s.get("additionalItems")
            return items[index] if index < len(items) else (rest if isinstance(rest, (dict, bool)) else None)
        return items if isinstance(items, (dict, bool)) else None
    prefix = s.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    items = s.get("items")
    return items if isinstance(items, (dict, bool)) else None


def strict_additional(
    schema: Any, properties: bool = True, items: bool = False, legacy_items: bool = False
) -> Any:
    """A copy of ``schema`` as a strict profile reads it: with ``properties``, every subschema with
    ``properties`` or ``patternProperties`` and no ``additionalProperties`` gets
    ``"additionalProperties": false`` (``additional_properties_default=False``); with ``items``,
    every ``prefixItems`` without ``items`` gets ``"items": false`` (``additional_items_default=False``),
    or, in a draft before 2020-12 (``legacy_items``; a ``$schema`` below switches it), every
    array-form ``items`` without ``additionalItems`` gets ``"additionalItems": false``."""
    if not isinstance(schema, dict):
        return schema
    meta = schema.get("$schema")
    if isinstance(meta, str):
        legacy_items = "/draft/2020-12/" not in meta
    out = dict(schema)
    for kw in _ONE:
        if kw in out and isinstance(out[kw], dict):
            out[kw] = strict_additional(out[kw], properties, items, legacy_items)
    for kw in _LIST + ("items",):
        if isinstance(out.get(kw), list):
            out[kw] = [strict_additional(s, properties, items, legacy_items) for s in out[kw]]
    for kw in _MAP:
        if isinstance(out.get(kw), dict):
            out[kw] = {k: strict_additional(s, properties, items, legacy_items) for k, s in out[kw].items()}
    if (
        properties
        and ("properties" in out or "patternProperties" in out)
        and "additionalProperties" not in out
    ):
        out["additionalProperties"] = False
    if items and not legacy_items and "prefixItems" in out and "items" not in out:
        out["items"] = False
    if items and legacy_items and isinstance(out.get("items"), list) and "additionalItems" not in out:
        out["additionalItems"] = False
    return out
