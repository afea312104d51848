"""``maskcert check-schema --explain``: what the reference decided for each keyword of a schema.

Every keyword occurrence in every subschema (found through the applicator keywords of JSON Schema
2020-12 Core §10 and the containers ``$defs``/``definitions``) gets one line: ``enforced`` (the
reference compiles it into the language exactly), ``annotation`` (it constrains nothing: JSON Schema
2020-12's meta-data, content and core keywords, and ``format`` unless the profile asserts formats),
``refused`` (the reference cannot decide it: why), or ``ignored`` (not a keyword of 2020-12: an
annotation by the spec). The classification reads the JSON Schema front-end's own tables
(``refdecoder._jsonschema.KEYWORDS``, ``ANNOTATIONS``, ``REFUSED``), so it cannot drift from what the
compiler does; the compile's own verdict (supported, or the first refusal with its pointer, or the
limit it crossed) follows the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from refdecoder import JsonProfile
from refdecoder._jsonschema import ANNOTATIONS, KEYWORDS, REFUSED

__all__ = ["keyword_decisions", "format_decisions"]

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


def _decide(kw: str, schema: dict[str, Any], profile: JsonProfile) -> tuple[str, str]:
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
    if kw in KEYWORDS:
        return "enforced", "compiled into the language exactly"
    if kw in REFUSED:
        return "refused", REFUSED[kw]
    return "ignored", "not a 2020-12 keyword: an annotation, as the spec says of unknown keywords"


def keyword_decisions(schema: Any, profile: JsonProfile) -> list[tuple[str, str, str, str]]:
    """``(pointer, keyword, decision, why)`` for every keyword of every subschema, in document order."""
    out: list[tuple[str, str, str, str]] = []
    stack: list[tuple[str, Any]] = [("", schema)]
    seen = 0
    while stack:
        ptr, node = stack.pop()
        seen += 1
        if seen > 100_000:  # a schema this large is listed in part; the compile verdict still follows
            out.append((ptr or "/", "...", "not listed", "more than 100,000 subschemas"))
            break
        if isinstance(node, bool):
            out.append((ptr or "/", str(node).lower(), "enforced", "a boolean schema"))
            continue
        if not isinstance(node, dict):
            continue
        for kw in node:
            decision, why = _decide(kw, node, profile)
            out.append((ptr or "/", kw, decision, why))
        stack.extend(reversed(list(_subschemas(node, ptr))))
    return out


def format_decisions(rows: list[tuple[str, str, str, str]]) -> str:
    """The table ``check-schema --explain`` prints (pointer, keyword, decision, why)."""
    if not rows:
        return ""
    w_ptr = min(40, max(len(r[0]) for r in rows))
    w_kw = min(24, max(len(r[1]) for r in rows))
    return "\n".join(f"{p:<{w_ptr}}  {k:<{w_kw}}  {d:<10}  {why}" for p, k, d, why in rows)
