"""Generated outputs for a structural tag: valid tool-call texts and targeted invalid ones (issue 29).

A small sampler walks the tag's format tree and builds outputs (text and special-token ids) piece by
piece: free text, then calls whose arguments are instances of each tool's schema, in several JSON
spellings. Each *mode* aims at one way an output goes wrong:

* ``valid`` — what the structure allows;
* ``bad_arguments`` — arguments breaking their schema: a required key missing, a wrong type, a value
  outside an ``enum``, keys out of declared order, a repeated key, whitespace around the value, a
  trailing comma, an integer above its ``maximum``;
* ``extra_property`` — arguments with a key the schema does not declare (allowed by JSON Schema unless
  ``additionalProperties`` forbids it);
* ``number_spelling`` — an integer argument written ``10.0`` or ``10e0`` (an integer in JSON Schema);
* ``format_value`` — a string outside its ``format`` (an annotation in JSON Schema 2020-12);
* ``trigger_in_text`` — a trigger (or an excluded string, or an excluded token) inside free text;
* ``second_call`` — a second call where the structure stops after the first;
* ``no_call`` — the output ends before a required call;

and text-level mutations of valid outputs: ``wrong_name`` (a tool's name replaced by one no tool has),
``missing_end`` (the output cut short by one character, or by its closing tag), ``token_as_text`` (a
special token spelled as text), ``token_in_text`` (a special token inside text), ``repeated`` (the
whole output twice), ``trigger_prefix`` (a trigger's proper prefix at the end of the output, or
starting it).

The intent is only a label: the *expected* verdict of every text is the independent checker's
(:mod:`props.corpus.structural_tag_check`), so a generator slip never becomes a wrong expectation.

:func:`labelled_outputs` runs the same sampler and also says what the generator *put* in each output
(not what a parser would read back): the calls, in order, with the tool each names and the argument
text generated for it, and the triggers it wrote into free text. A call is a ``tag`` whose begin or
leading constant text names exactly one tool of the list, or one holding a ``json_schema`` below it
(a call the labels cannot name is ``Call(None, ...)``: a caller that counts calls must not trust that
output). Template promises (:mod:`props.checks.toolcall_promises`) are decided on these labels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from props.corpus.structural_tag_check import Part, Undecided, verdict

__all__ = [
    "ToolCallText",
    "tool_call_texts",
    "MODES",
    "Call",
    "LabelledOutput",
    "labelled_outputs",
    "arguments_error",
]

MODES = (
    "valid",
    "bad_arguments",
    "extra_property",
    "number_spelling",
    "format_value",
    "trigger_in_text",
    "second_call",
    "no_call",
)
_Out = tuple[Part, ...]
_PER_NODE = 4
_FREE = ("", "Let me check that for you. ", 'Résumé: 中文 🙂 {"x": [1, 2]}\n')
_REGEX_POOL = ("0", "1", "7", "42", "123", "a", "ab", "abc", "A", "x1", "_", "call_0")


@dataclass(frozen=True)
class ToolCallText:
    """One generated output, what it aims at (``intent``), and the checker's verdict on it."""

    parts: tuple[Part, ...]
    intent: str
    expected: bool | Undecided


def _resolve(root: Any, schema: Any) -> Any:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#"):
        node = root
        for raw in schema["$ref"][1:].lstrip("/").split("/") if schema["$ref"] != "#" else []:
            key = raw.replace("~1", "/").replace("~0", "~")
            node = node.get(key) if isinstance(node, dict) else None
        schema = node
        seen += 1
        if seen > 20:
            break
    return schema


_STRINGS = ("Paris", 'Zürich "東京" \\ 🙂')
_FORMATS = {
    "date": "2026-12-03",
    "date-time": "2026-12-03T10:45:00Z",
    "email": "ada@example.com",
    "uri": "https://example.com/a",
}


def _values(schema: Any, root: Any, depth: int = 0) -> list[Any]:
    """A few instances of ``schema``: the simplest first, then one with every declared property."""
    s = _resolve(root, schema)
    if s is True or s is None or s == {}:
        return [{}, {"any": [1, "two", None]}]
    if not isinstance(s, dict) or depth > 6:
        return [None]
    if "const" in s:
        return [s["const"]]
    if "enum" in s and s["enum"]:
        return [s["enum"][0]] if len(s["enum"]) == 1 else [s["enum"][0], s["enum"][-1]]
    for key in ("anyOf", "oneOf"):
        if isinstance(s.get(key), list) and s[key]:
            return _values(s[key][0], root, depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = t[0] if t else None
    if t == "object" or (t is None and "properties" in s):
        props = s.get("properties") or {}
        required = [k for k in props if k in (s.get("required") or [])]
        first = {k: _values(props[k], root, depth + 1)[0] for k in required}
        full = {k: _values(v, root, depth + 1)[-1] for k, v in props.items()}
        return [first, full] if full != first else [first]
    if t == "array":
        item = _values(s.get("items", {}), root, depth + 1)
        return [[], item[:2]]
    if t == "string":
        return [_FORMATS[s["format"]]] if s.get("format") in _FORMATS else list(_STRINGS)
    if t == "integer":
        lo = s.get("minimum", 3)
        return [lo, min(s.get("maximum", lo + 39), lo + 39)]
    if t == "number":
        return [2.5, -1e3]
    if t == "boolean":
        return [True, False]
    if t == "null":
        return [None]
    return [{}]


def _spellings(value: Any, k: int) -> list[str]:
    styles = [
        json.dumps(value, ensure_ascii=False),
        json.dumps(value, ensure_ascii=False, separators=(",", ":")),
        json.dumps(value, ensure_ascii=False, indent=2),
        json.dumps(value, ensure_ascii=True),
    ]
    return list(dict.fromkeys(styles[k % 4 : k % 4 + 2] or styles[:1]))


def _bad_arguments(schema: Any) -> list[str]:
    """JSON texts aimed at breaking ``schema`` one way each."""
    s = _resolve(schema, schema)
    good = _values(schema, schema)[-1]
    out: list[str] = [" " + json.dumps(good), json.dumps(good) + "\n"]
    if isinstance(good, dict) and good:
        keys = list(good)
        out.append(json.dumps(good)[:-1] + ",}")
        k0 = keys[0]
        out.append("{" + json.dumps(k0) + ": " + json.dumps(good[k0]) + ", " + json.dumps(good)[1:])
        if len(keys) > 1:
            out.append(json.dumps(dict(reversed(list(good.items())))))
    if isinstance(s, dict):
        props = s.get("properties") or {}
        required = [k for k in props if k in (s.get("required") or [])]
        if required and isinstance(good, dict):
            out.append(json.dumps({k: v for k, v in good.items() if k != required[0]}))
        wrong = {"string": 17, "integer": "17", "number": "x", "boolean": 0, "array": {}, "object": []}
        resolved = {k: _resolve(schema, p) for k, p in props.items()}
        enums = [k for k, p in resolved.items() if isinstance(p, dict) and "enum" in p]
        typed = [k for k, p in resolved.items() if isinstance(p, dict) and p.get("type") in wrong]
        if isinstance(good, dict):
            if enums:
                out.append(json.dumps({**good, enums[0]: "not-one-of-them"}))
            if typed:
                out.append(json.dumps({**good, typed[0]: wrong[resolved[typed[0]]["type"]]}))
            for k, p in resolved.items():
                if isinstance(p, dict) and p.get("type") == "integer" and "maximum" in p:
                    out.append(json.dumps({**good, k: p["maximum"] + 1}))
    if s is True or s == {}:
        out.append("NaN")
    out.append("{")
    return list(dict.fromkeys(out))


def _extra_property(schema: Any) -> list[str]:
    """An object with a key its schema does not declare (JSON Schema allows it unless
    ``additionalProperties`` says otherwise; engines' strict modes do not)."""
    s = _resolve(schema, schema)
    good = _values(schema, schema)[-1]
    if isinstance(s, dict) and isinstance(good, dict):
        return [json.dumps({**good, "unexpected_key": 1})]
    return []


def _format_values(schema: Any) -> list[str]:
    """A string property with a ``format`` given a value outside it (JSON Schema 2020-12 reads
    ``format`` as an annotation; engines may assert it)."""
    s = _resolve(schema, schema)
    good = _values(schema, schema)[-1]
    if not isinstance(s, dict) or not isinstance(good, dict):
        return []
    for k, p in (s.get("properties") or {}).items():
        p = _resolve(schema, p)
        if isinstance(p, dict) and p.get("type") == "string" and "format" in p:
            return [json.dumps({**good, k: "not-a-" + str(p["format"])})]
    return []


def _number_spellings(schema: Any) -> list[str]:
    """An integer property spelled as ``10.0`` and ``1e1`` (integers in JSON Schema since draft 6)."""
    s = _resolve(schema, schema)
    good = _values(schema, schema)[-1]
    if not isinstance(s, dict) or not isinstance(good, dict):
        return []
    for k, p in (s.get("properties") or {}).items():
        p = _resolve(schema, p)
        if isinstance(p, dict) and p.get("type") == "integer" and isinstance(good.get(k), int):
            v = good[k]
            return [json.dumps({**good, k: "@"}).replace('"@"', spelled) for spelled in (f"{v}.0", f"{v}e0")]
    return []


class _Sampler:
    def __init__(self, names: Mapping[str, int], mode: str) -> None:
        self.names = names
        self.mode = mode

    def token(self, t: Any) -> int:
        return t if isinstance(t, int) else self.names[t]

    def free(self, starts: Sequence[str], excludes: Sequence[str]) -> list[_Out]:
        texts = [t for t in _FREE if not any(s and s in t for s in (*starts, *excludes))]
        if self.mode == "trigger_in_text":
            bad = [s for s in (*starts, *excludes) if s]
            return [(f"Maybe {b} later. ",) for b in bad[:2]] or [(t,) for t in texts]
        return [(t,) for t in texts]

    def samples(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        kind = f.get("type") if isinstance(f, dict) else None
        fn = getattr(self, f"f_{kind}", None)
        if fn is None:
            return []
        out: list[_Out] = fn(f, ends)
        return list(dict.fromkeys(out))[: 3 * _PER_NODE]

    # one method per format type, named after it
    def f_const_string(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return [(f["value"],)]

    def f_regex(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        import re

        try:
            out: list[_Out] = [(s,) for s in _REGEX_POOL if re.fullmatch(f["pattern"], s)]
        except re.error:
            return []
        return out[:2]

    def f_json_schema(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        schema = f.get("json_schema", True)
        if self.mode == "bad_arguments":
            return [(t,) for t in _bad_arguments(schema)]
        if self.mode == "extra_property":
            return [(t,) for t in _extra_property(schema)]
        if self.mode == "number_spelling":
            return [(t,) for t in _number_spellings(schema)]
        if self.mode == "format_value":
            return [(t,) for t in _format_values(schema)]
        return [(t,) for k, v in enumerate(_values(schema, schema)) for t in _spellings(v, k)]

    def f_any_text(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return self.free((), (*(f.get("excludes") or []), *ends))

    def f_grammar(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return []

    def f_sequence(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        lists = [self.samples(e, ends) for e in f["elements"]]
        if any(not x for x in lists):
            return []
        n = max(len(x) for x in lists)
        return [tuple(p for x in lists for p in x[j % len(x)]) for j in range(n)]

    def f_or(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return [o for e in f["elements"] for o in self.samples(e, ends)[:2]]

    def f_optional(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return [(), *self.samples(f["content"], ends)[:2]]

    def _reps(self, f: Any, ends: tuple[str, ...], counts: Sequence[int]) -> list[_Out]:
        inner = self.samples(f["content"], ends)
        if not inner:
            return [()] if 0 in counts else []
        return [tuple(p for i in range(c) for p in inner[i % len(inner)]) for c in counts]

    def f_plus(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return self._reps(f, ends, (1, 2))

    def f_star(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return self._reps(f, ends, (0, 1, 2))

    def f_repeat(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        lo, hi = f["min"], f["max"]
        counts = [lo, lo + 1] if hi == -1 or hi > lo else [lo]
        if self.mode == "second_call" and hi != -1:
            counts.append(hi + 1)
        return self._reps(f, ends, counts)

    def _delim(self, d: Any) -> _Out:
        return (d,) if isinstance(d, str) else (self.token(d["token"]),)

    def f_tag(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        end = f["end"]
        end_list = end if isinstance(end, list) else [end]
        inner = tuple(e for e in end_list if isinstance(e, str))
        contents = self.samples(f["content"], inner)
        begin = self._delim(f["begin"])
        return [begin + c + self._delim(end_list[i % len(end_list)]) for i, c in enumerate(contents)]

    def _calls(self, f: Any) -> list[_Out]:
        """One call per tag of the list (each tool at least once), then the rest of their samples."""
        per = [self.f_tag(t, ()) for t in f["tags"]]
        firsts = [s[0] for s in per if s]
        rest = [x for s in per for x in s[1:2]]
        return firsts + rest

    def _dispatched(self, free: list[_Out], calls: list[_Out], f: Any) -> list[_Out]:
        if not calls:
            return []
        alo, stop = f.get("at_least_one", False), f.get("stop_after_first", False)
        free = free or [()]
        out: list[_Out] = []
        if self.mode == "no_call":
            return [(), *free]
        if self.mode == "second_call":
            if stop:
                c2 = calls[1 % len(calls)]
                out.append(calls[0] + c2)
                out.append(free[-1] + calls[0] + free[0] + c2)
            return out
        for i, c in enumerate(calls):
            t = free[i % len(free)]
            if not alo:
                out.append(t + c)
            else:
                out.append(c)
            if not stop:
                c2 = calls[(i + 1) % len(calls)]
                out.append(c + free[-1] + c2 + t)
        if not alo:
            out.extend(free)
        return out

    def f_triggered_tags(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        free = self.free(tuple(f["triggers"]), (*(f.get("excludes") or []), *ends))
        return self._dispatched(free, self._calls(f), f)

    def f_tags_with_separator(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        calls, sep = self._calls(f), (f["separator"],)
        if not calls:
            return []
        alo, stop = f.get("at_least_one", False), f.get("stop_after_first", False)
        if self.mode == "no_call":
            return [()]
        two = [c + sep + calls[(i + 1) % len(calls)] for i, c in enumerate(calls)]
        if self.mode == "second_call":
            return two if stop else []
        out = list(calls) + ([] if stop else two[:2])
        return out + ([] if alo else [()])

    def f_dispatch(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        calls = [(p,) + s for p, x in f["rules"] for s in self.samples(x, ends)[:1]]
        free = self.free(tuple(p for p, _ in f["rules"]), tuple(f.get("excludes") or []))
        return self._dispatched(free, calls, {"stop_after_first": not f.get("loop", True)})

    def f_token(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return [(self.token(f["token"]),)]

    def f_exclude_token(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return [("x",)]

    def f_any_tokens(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        return [(), ("Some text. ",)]

    def f_token_triggered_tags(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        free: list[_Out] = [(), ("Some text. ",)]
        if self.mode == "trigger_in_text":
            excluded: list[_Out] = [("Text ", self.token(t), ".") for t in f.get("exclude_tokens") or []]
            free = excluded[:2] or free
        return self._dispatched(free, self._calls(f), f)

    def f_token_dispatch(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        calls = [(self.token(p),) + s for p, x in f["rules"] for s in self.samples(x, ends)[:1]]
        return self._dispatched([(), ("Some text. ",)], calls, {"stop_after_first": not f.get("loop", True)})


def _merge(parts: _Out) -> tuple[Part, ...]:
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + p
                continue
        out.append(p)
    return tuple(out)


def _mutations(
    valid: list[_Out],
    tool_names: Sequence[str],
    names: Mapping[str, int],
    triggers: Sequence[str],
) -> list[tuple[_Out, str]]:
    """Text-level mutations of valid outputs, each labelled with what it aims at."""
    out: list[tuple[_Out, str]] = []
    by_id = {i: n for n, i in names.items()}
    for parts in valid[:6]:
        text = "".join(p for p in parts if isinstance(p, str))
        for name in tool_names:
            if name and name in text:
                swap = [p.replace(name, "no_such_tool", 1) if isinstance(p, str) else p for p in parts]
                out.append((tuple(swap), "wrong_name"))
                break
        if parts:
            last = parts[-1]
            if isinstance(last, str) and len(last) > 1:
                out.append((parts[:-1] + (last[:-1],), "missing_end"))
            elif isinstance(last, int):
                out.append((parts[:-1], "missing_end"))
        if any(isinstance(p, int) for p in parts):
            spelled = tuple(by_id.get(p, f"<[{p}]>") if isinstance(p, int) else p for p in parts)
            out.append((spelled, "token_as_text"))
        if parts:
            out.append((parts + parts, "repeated"))
        first = next((i for i, p in enumerate(parts) if isinstance(p, str) and len(p) > 1), None)
        if first is not None:
            s = str(parts[first])
            token_id = min(names.values(), default=7)
            out.append((parts[:first] + (s[:1], token_id, s[1:]) + parts[first + 1 :], "token_in_text"))
    for trigger in triggers:
        for parts in valid[:3]:
            out.append((parts + (trigger[:-1],), "trigger_prefix"))
        out.append(((trigger[:-1] + " not a call. ",), "trigger_prefix"))
    return out


def _triggers(f: Any) -> list[str]:
    """The triggers and dispatch patterns of a format tree (longer than one character)."""
    out: list[str] = []
    if isinstance(f, dict):
        out.extend(t for t in f.get("triggers") or [] if isinstance(t, str) and len(t) > 1)
        if f.get("type") == "dispatch":
            out.extend(r[0] for r in f.get("rules") or [] if isinstance(r[0], str) and len(r[0]) > 1)
        for k, v in f.items():
            if k != "json_schema":
                out.extend(_triggers(v))
    elif isinstance(f, list):
        for v in f:
            out.extend(_triggers(v))
    return list(dict.fromkeys(out))


def tool_call_texts(
    tag: Any,
    special_tokens: Mapping[str, int] | None = None,
    tool_names: Sequence[str] = (),
    limit: int = 60,
) -> list[ToolCallText]:
    """Generated outputs for ``tag`` (the documented JSON form), each with its intent and the
    checker's verdict; at most ``limit``, valid ones first, each distinct output once."""
    names = dict(special_tokens or {})
    fmt = tag.get("format", tag) if isinstance(tag, dict) and tag.get("type") == "structural_tag" else tag
    made: dict[tuple[Part, ...], str] = {}
    for mode in MODES:
        for s in _Sampler(names, mode).samples(fmt, ()):
            made.setdefault(_merge(s), mode)
    valid = [p for p, m in made.items() if m == "valid"]
    for parts, intent in _mutations(valid, tool_names, names, _triggers(fmt)):
        made.setdefault(_merge(parts), intent)
    made.setdefault((), "no_call")
    # Keep every intent represented within the limit: round-robin over intents.
    by_intent: dict[str, list[tuple[Part, ...]]] = {}
    for p, m in made.items():
        by_intent.setdefault(m, []).append(p)
    order: list[tuple[tuple[Part, ...], str]] = []
    while len(order) < limit and any(by_intent.values()):
        for m in list(by_intent):
            if by_intent[m] and len(order) < limit:
                order.append((by_intent[m].pop(0), m))
    return [ToolCallText(p, m, verdict(tag, p, names)) for p, m in order]


# --- labelled outputs: what the generator put in each output -----------------------------------------


@dataclass(frozen=True)
class Call:
    """One call the generator wrote: the tool its tag names (None when the tag names none of the
    tools), and for a ``json_schema`` content the generated argument text and the format's ``style``."""

    tool: str | None
    arguments: str | None = None
    style: str | None = None


@dataclass(frozen=True)
class LabelledOutput:
    """An output (``parts``), the sampler mode that made it, the calls in it in order, and the
    triggers written into its free text (``trigger_in_text`` only)."""

    parts: tuple[Part, ...]
    mode: str
    calls: tuple[Call, ...]
    triggers_in_text: tuple[str | int, ...]

    @property
    def tools_called(self) -> tuple[str | None, ...]:
        return tuple(c.tool for c in self.calls)


class _Mark(str):
    """An empty string carrying a label through the sampler's tuple arithmetic. :func:`_merge` drops
    empty strings, so a labelled output's text is exactly the unlabelled one's."""

    label: tuple[str, Any]

    def __new__(cls, kind: str, value: Any = None) -> _Mark:
        mark = super().__new__(cls, "")
        mark.label = (kind, value)
        return mark


class _RepeatedKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _RepeatedKey(keys)
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def arguments_error(text: str, schema: Any) -> str | None | Undecided:
    """Why ``text`` is not valid arguments for ``schema`` (strict JSON, then JSON Schema, ``format``
    an annotation; the schema's ``$schema`` picks the draft, 2020-12 by default); None when it is;
    :class:`Undecided` for an object with a repeated key (RFC 8259 leaves its meaning open)."""
    import jsonschema

    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except _RepeatedKey:
        return Undecided(("an object with a repeated key",))
    except ValueError as e:
        return f"not JSON: {e}"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    return None if error is None else f"{error.message[:160]} at {'/'.join(map(str, error.path)) or '/'}"


def _has_json_schema(f: Any) -> bool:
    if isinstance(f, dict):
        return f.get("type") == "json_schema" or any(
            _has_json_schema(v) for k, v in f.items() if k != "json_schema"
        )
    return isinstance(f, list) and any(_has_json_schema(v) for v in f)


def _named_tool(f: Any, tools: Sequence[str]) -> str | None | Literal[False]:
    """The tool a ``tag`` is a call of: the one tool named in its begin or leading constant text;
    None for a tag naming none that holds a ``json_schema`` (a call, or a wrapper around calls);
    False for a tag that is no call."""
    content = f.get("content")
    direct = [content] if isinstance(content, dict) else []
    if isinstance(content, dict) and content.get("type") == "sequence":
        direct = list(content.get("elements") or [])
    strings = [f["begin"]] if isinstance(f.get("begin"), str) else []
    strings += [e["value"] for e in direct if isinstance(e, dict) and e.get("type") == "const_string"]
    found = {t for t in tools if t and any(t in s for s in strings)}
    found = {t for t in found if not any(t != u and t in u for u in found)}
    if len(found) == 1:
        return found.pop()
    return None if _has_json_schema(content) else False


class _Labelling(_Sampler):
    """The sampler, with marks at each call's ends, before each argument text and before each trigger
    written into free text; ``trigger_in_text`` writes triggers into free text only, never excludes;
    ``bad_arguments`` aims at the calling tool's own schema in ``parameters`` when it has one (the
    request's, which the tag's ``json_schema`` may not match), the tag's otherwise."""

    def __init__(
        self, names: Mapping[str, int], mode: str, tools: Sequence[str], parameters: Mapping[str, Any]
    ) -> None:
        super().__init__(names, mode)
        self.tools = tuple(tools)
        self.parameters = parameters
        self.calling: list[str | None] = []

    def free(self, starts: Sequence[str], excludes: Sequence[str]) -> list[_Out]:
        triggers = [s for s in starts if s]
        if self.mode == "trigger_in_text" and triggers:
            return [(_Mark("trigger", t), f"Maybe {t} later. ") for t in triggers[:2]]
        return [(t,) for t in _FREE if not any(s and s in t for s in (*starts, *excludes))]

    def f_tag(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        tool = _named_tool(f, self.tools)
        if tool is False:
            return super().f_tag(f, ends)
        self.calling.append(tool)
        try:
            out = super().f_tag(f, ends)
        finally:
            self.calling.pop()
        return [(_Mark("call", tool), *o, _Mark("end")) for o in out]

    def f_json_schema(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        style = f.get("style", "json")
        if self.mode != "bad_arguments":
            out = super().f_json_schema(f, ends)
        else:  # those the schema rejects first: callers keep only a few
            tool = self.calling[-1] if self.calling else None
            schema = self.parameters[tool] if tool is not None and tool in self.parameters else None
            schema = f.get("json_schema", True) if schema is None else schema
            texts = sorted(
                _bad_arguments(schema), key=lambda t: not isinstance(arguments_error(t, schema), str)
            )
            out = [(t,) for t in texts]
        return [(_Mark("arguments", (style, o[0])), *o) for o in out]

    def f_token_triggered_tags(self, f: Any, ends: tuple[str, ...]) -> list[_Out]:
        if self.mode != "trigger_in_text":
            return super().f_token_triggered_tags(f, ends)
        free: list[_Out] = [
            (_Mark("trigger", t), "Text ", self.token(t), " later.")
            for t in (f.get("trigger_tokens") or [])[:2]
        ]
        return self._dispatched(free or [(), ("Some text. ",)], self._calls(f), f)


def _labels(parts: _Out) -> tuple[tuple[Part, ...], tuple[Call, ...], tuple[str | int, ...]]:
    """An output's parts without marks, its calls (innermost call tags: a tag around other calls is
    a wrapper), and the triggers written into its free text."""
    open_calls: list[dict[str, Any]] = []
    calls: list[Call] = []
    triggers: list[str | int] = []
    for p in parts:
        if not isinstance(p, _Mark):
            continue
        kind, value = p.label
        if kind == "call":
            open_calls.append({"tool": value, "arguments": None, "style": None, "inner": False})
        elif kind == "end":
            c = open_calls.pop()
            if open_calls:
                open_calls[-1]["inner"] = True
            if not c["inner"]:
                calls.append(Call(c["tool"], c["arguments"], c["style"]))
        elif kind == "arguments" and open_calls:
            open_calls[-1]["style"], open_calls[-1]["arguments"] = value
        elif kind == "trigger":
            triggers.append(value)
    return _merge(parts), tuple(calls), tuple(triggers)


def labelled_outputs(
    tag: Any,
    special_tokens: Mapping[str, int] | None = None,
    tool_names: Sequence[str] = (),
    modes: Sequence[str] = MODES,
    parameters: Mapping[str, Any] | None = None,
) -> list[LabelledOutput]:
    """The sampler's outputs for ``tag`` in ``modes`` (no text-level mutations), each distinct output
    once, with the calls and triggers the generator put in it (module docstring). No verdicts: a
    caller judges them. ``parameters``: each tool's own schema by name, what ``bad_arguments``
    arguments aim at (default: the schemas the tag holds)."""
    names = dict(special_tokens or {})
    fmt = tag.get("format", tag) if isinstance(tag, dict) and tag.get("type") == "structural_tag" else tag
    out: dict[tuple[Part, ...], LabelledOutput] = {}
    for mode in modes:
        for s in _Labelling(names, mode, tool_names, parameters or {}).samples(fmt, ()):
            parts, calls, triggers = _labels(s)
            out.setdefault(parts, LabelledOutput(parts, mode, calls, triggers))
    return list(out.values())
