"""JSON texts of one instance that a :class:`~refdecoder.JsonProfile` allows (test and walk inputs).

Every text comes from one small encoder: scalars and keys through ``json.dumps`` (so the text is
always valid JSON that parses back to the instance), whitespace only from RFC 8259's four characters
and only in the gaps between tokens. Variants: compact, ``json.dumps`` spacing, ``indent=2``, wide
gaps mixing tab/LF/space/CR, non-ASCII escaped (only astral characters, as surrogate pairs, or all),
keys reversed (``property_order="any"``) or in schema order (``"schema"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from props.corpus import _schema
from refdecoder import JsonProfile

__all__ = ["serializations", "max_gap", "whitespace_runs"]

_WS = " \t\n\r"
Escape = Literal["none", "astral", "all"]
# Gap positions: after "{"/"[" ("open"), before ":" / after ":", before "," / after ",", before the
# closing bracket ("close"), inside an empty container ("empty"), around the whole value ("outer").
Gap = Callable[[int, str], str]
Order = Callable[[dict[str, Any], Any], list[str]]


def _str(s: str, escape: Escape) -> str:
    if escape == "all":
        return json.dumps(s, ensure_ascii=True)
    text = json.dumps(s, ensure_ascii=False)
    if escape == "astral":
        text = "".join(json.dumps(c, ensure_ascii=True)[1:-1] if ord(c) > 0xFFFF else c for c in text)
    return text


def _encode(
    value: Any, root: Any, gap: Gap, escape: Escape, order: Order, outer: bool = True, draft: str = "2020-12"
) -> str:
    def enc(v: Any, schema: Any, depth: int) -> str:
        if isinstance(v, dict):
            if not v:
                return "{" + gap(depth, "empty") + "}"
            members = [
                _str(k, escape)
                + gap(depth + 1, "before:")
                + ":"
                + gap(depth + 1, "after:")
                + enc(v[k], _schema.child_for_key(schema, root, k, draft), depth + 1)
                for k in order(v, schema)
            ]
            sep = gap(depth + 1, "before,") + "," + gap(depth + 1, "after,")
            return "{" + gap(depth + 1, "open") + sep.join(members) + gap(depth, "close") + "}"
        if isinstance(v, list):
            if not v:
                return "[" + gap(depth, "empty") + "]"
            items = [
                enc(x, _schema.child_for_index(schema, root, i, draft), depth + 1) for i, x in enumerate(v)
            ]
            sep = gap(depth + 1, "before,") + "," + gap(depth + 1, "after,")
            return "[" + gap(depth + 1, "open") + sep.join(items) + gap(depth, "close") + "]"
        if isinstance(v, str):
            return _str(v, escape)
        return json.dumps(v, allow_nan=False)

    around = gap(0, "outer") if outer else ""
    return around + enc(value, root, 0) + around


def _compact(depth: int, where: str) -> str:
    return ""


def _dumps_default(depth: int, where: str) -> str:
    return " " if where in ("after,", "after:") else ""


def _indent2(depth: int, where: str) -> str:
    if where in ("open", "after,", "close"):
        return "\n" + "  " * depth
    return " " if where == "after:" else ""


def _wide(width: int) -> Gap:
    text = ("\t\n \r" * (width // 4 + 1))[:width]
    return lambda depth, where: text


def whitespace_runs(text: str) -> list[int]:
    """Lengths of the maximal whitespace runs outside strings of a JSON text."""
    runs: list[int] = []
    run = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c in _WS:
            run += 1
            continue
        if run:
            runs.append(run)
            run = 0
        if c == '"':
            in_str = True
    if run:
        runs.append(run)
    return runs


def max_gap(text: str) -> int:
    return max(whitespace_runs(text), default=0)


def serializations(instance: Any, profile: JsonProfile | None = None, schema: Any = None) -> list[str]:
    """Distinct JSON texts of ``instance`` the profile allows, compact first: then ``json.dumps``
    spacing, ``indent=2`` and wide mixed-whitespace gaps (as ``profile.whitespace`` permits), raw and
    (with ``unicode_escapes``) escaped non-ASCII, keys in schema order when ``property_order ==
    "schema"`` (the declared keys of a plain object schema first, in order, then the rest), else also
    reversed; no whitespace around the value without ``top_level_whitespace``. The reference may still reject a few (a control character needs ``\\u00XX`` under
    ``unicode_escapes=False``); the caller filters. Never invalid JSON."""
    profile = profile or JsonProfile()
    ws = profile.whitespace
    gaps: list[Gap] = [_compact]
    if ws == "any":
        gaps += [_dumps_default, _indent2, _wide(4), _wide(1)]
    elif isinstance(ws, int) and ws > 0:
        gaps += [_dumps_default, _indent2, _wide(ws), _wide(1)]
    # "controls": no escaped non-ASCII ("none" writes only control characters as \u00XX)
    escapes: list[Escape] = ["none", "astral", "all"] if profile.unicode_escapes is True else ["none"]

    def as_given(v: dict[str, Any], s: Any) -> list[str]:
        return list(v)

    def reversed_keys(v: dict[str, Any], s: Any) -> list[str]:
        return list(reversed(v))

    draft = _schema.root_draft(schema, profile.draft)

    def schema_order(v: dict[str, Any], s: Any) -> list[str]:
        declared = _schema.declared_order(s, schema, draft)
        if declared is None:
            return list(v)
        return [k for k in declared if k in v] + [k for k in v if k not in declared]

    orders: list[Order] = [schema_order] if profile.property_order == "schema" else [as_given, reversed_keys]
    outer = profile.top_level_whitespace
    out = [_encode(instance, schema, gap, "none", orders[0], outer, draft) for gap in gaps]
    out += [_encode(instance, schema, _compact, escape, orders[0], outer, draft) for escape in escapes[1:]]
    out += [_encode(instance, schema, gaps[-1], escapes[-1], order, outer, draft) for order in orders[1:]]
    if isinstance(ws, int):
        out = [t for t in out if max_gap(t) <= ws]
    return list(dict.fromkeys(out))
