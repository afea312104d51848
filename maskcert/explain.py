"""``maskcert check-schema --explain``: what the reference decided for each keyword of a schema.

Every keyword occurrence in every subschema (found through the applicator keywords of JSON Schema
2020-12 Core §10 and the containers ``$defs``/``definitions``) gets one line: ``enforced`` (the
reference compiles it into the language exactly), ``annotation`` (it constrains nothing: JSON Schema
2020-12's meta-data, content and core keywords, and ``format`` unless the profile asserts formats),
``refused`` (the reference cannot decide it: why), or ``ignored`` (not a keyword of 2020-12: an
annotation by the spec). The classification reads the JSON Schema front-end's own tables
(``refdecoder.keywords``: ``enforced``, ``ANNOTATIONS``, ``refused``), so it cannot drift from what
the compiler does; the compile's own verdict (supported, or the first refusal with its pointer, or the
limit it crossed) follows the table, after the limits in force (:func:`format_limits`: every
``refdecoder.Limits`` field, any spec kind). A subschema of an older draft (its ``$schema``, or the profile's
``draft``) is classified with that draft's table (``refdecoder.keywords.enforced(draft)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from refdecoder import JsonProfile, Limits
from refdecoder.keywords import ANNOTATIONS, UNKNOWN_DRAFT, dialect_of, enforced, refused

__all__ = ["keyword_decisions", "format_decisions", "format_limits"]

# JSON Schema 2020-12 Core §10 (applicators) and §8.2.4 ($defs); draft-07 names kept for old schemas.
_ONE: tuple[str, ...] = (
    *("additionalProperties", "propertyNames", "contains", "not", "if", "then", "else", "additionalItems"),
    *("unevaluatedItems", "unevaluatedProperties", "contentSchema"),
)
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_SIBLING_READ = {
    "then": "read by its sibling 'if'",
    "else": "read by its sibling 'if'",
    "minContains": "read by its sibling 'contains'",
    "maxContains": "read by its sibling 'contains'",
}


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _subschemas(schema: dict[str, Any], ptr: str) -> Iterator[tuple[str, Any]]:
    for kw, value in schema.items():
        at = f"{ptr}/{_esc(kw)}"
        if kw in _ONE or (kw == "items" and not isinstance(value, list)):
            yield at, value
        elif kw in _MAP and isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, (dict, bool)):
                    yield f"{at}/{_esc(k)}", v
        elif (kw in _LIST or kw == "items") and isinstance(value, list):
            for i, v in enumerate(value):
                yield f"{at}/{i}", v


def _decide_draft(kw: str, schema: dict[str, Any], profile: JsonProfile, draft: str) -> tuple[str, str]:
    """``_decide`` for a subschema read in an older draft (refdecoder/_drafts.py)."""
    if draft == UNKNOWN_DRAFT:
        return "refused", "its $schema names no draft the reference knows"
    if draft in ("draft-04", "draft-06", "draft-07") and "$ref" in schema and kw != "$ref":
        return "ignored", f"next to '$ref', which hides its siblings in {draft}"
    table = enforced(draft)
    if kw in ("format", "$defs", "definitions") or (kw == "dependencies" and draft == "2019-09"):
        return _decide(kw, schema, profile)
    if kw == "additionalItems":
        return "enforced", "read by its sibling array-form 'items' (ignored without one)"
    if draft == "draft-04" and kw in ("exclusiveMinimum", "exclusiveMaximum"):
        return "enforced", "a boolean read by its sibling 'minimum'/'maximum' in draft-04"
    if kw in table:
        return "enforced", f"compiled into the language exactly, as {draft} reads it"
    if (
        kw in ("then", "else")
        and "if" in table
        or kw in ("minContains", "maxContains")
        and draft == "2019-09"
    ):
        return _decide(kw, schema, profile)
    if kw in refused(draft):
        return "refused", refused(draft)[kw]
    if kw in ANNOTATIONS or kw in ("id", "$recursiveAnchor"):
        return "annotation", "constrains nothing (meta-data, content or core keyword)"
    return "ignored", f"not a {draft} keyword: an annotation, as the spec says of unknown keywords"


_LEGACY_DEPENDENCIES = {
    "apply": ("enforced", "legacy_dependencies=apply: compiled with its drafts 4-7 meaning"),
    "ignore": ("annotation", "legacy_dependencies=ignore: not a keyword of this draft, constrains nothing"),
    "refuse": ("refused", "legacy_dependencies=refuse: a keyword of drafts 4-7 the profile will not read"),
}


def _decide(kw: str, schema: dict[str, Any], profile: JsonProfile) -> tuple[str, str]:
    if kw == "dependencies":  # 2019-09 and 2020-12 split it; the profile picks a reading
        return _LEGACY_DEPENDENCIES[profile.legacy_dependencies]
    if kw in _SIBLING_READ:
        return "enforced", _SIBLING_READ[kw]
    if kw == "format":
        if profile.formats == "assert":
            return (
                "enforced",
                "formats=assert: the format is compiled into the language, or the compile refuses it",
            )
        return "annotation", "formats=annotation (2020-12's default): constrains nothing"
    if kw in ("$defs", "definitions"):
        return "annotation", "holds subschemas; they count where $ref reaches them"
    if kw in ANNOTATIONS:
        return "annotation", "constrains nothing (meta-data, content or core keyword)"
    if kw in enforced():
        return "enforced", "compiled into the language exactly"
    if kw in refused():
        return "refused", refused()[kw]
    return "ignored", "not a 2020-12 keyword: an annotation, as the spec says of unknown keywords"


def keyword_decisions(schema: Any, profile: JsonProfile) -> list[tuple[str, str, str, str]]:
    """``(pointer, keyword, decision, why)`` for every keyword of every subschema, in document order."""
    out: list[tuple[str, str, str, str]] = []
    stack: list[tuple[str, Any, str]] = [("", schema, profile.draft)]
    seen = 0
    while stack:
        ptr, node, draft = stack.pop()
        seen += 1
        if seen > 100_000:  # a schema this large is listed in part; the compile verdict still follows
            out.append((ptr or "/", "...", "not listed", "more than 100,000 subschemas"))
            break
        if isinstance(node, bool):
            out.append((ptr or "/", str(node).lower(), "enforced", "a boolean schema"))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("$schema"), str):
            draft = dialect_of(node["$schema"])
        for kw in node:
            if draft == "2020-12":
                decision, why = _decide(kw, node, profile)
            else:
                decision, why = _decide_draft(kw, node, profile, draft)
            out.append((ptr or "/", kw, decision, why))
        stack.extend((p, sub, draft) for p, sub in reversed(list(_subschemas(node, ptr))))
    return out


def format_decisions(rows: list[tuple[str, str, str, str]]) -> str:
    """The table ``check-schema --explain`` prints (pointer, keyword, decision, why)."""
    if not rows:
        return ""
    w_ptr = min(40, max(len(r[0]) for r in rows))
    w_kw = min(24, max(len(r[1]) for r in rows))
    return "\n".join(f"{p:<{w_ptr}}  {k:<{w_kw}}  {d:<10}  {why}" for p, k, d, why in rows)


def format_limits(limits: Limits) -> str:
    """The limits the compile runs under, every ``Limits`` field (``--explain``): its value, and its
    default where ``--limit NAME=VALUE`` changed it."""
    default = Limits()
    rows = [(f.name, getattr(limits, f.name), getattr(default, f.name)) for f in fields(Limits)]
    width = max(len(name) for name, _, _ in rows)
    lines = ["limits (raise one with --limit NAME=VALUE):"]
    for name, value, base in rows:
        lines.append(f"  {name:<{width}}  {value}" + ("" if value == base else f"  (default {base})"))
    return "\n".join(lines)
