"""The built-in tool-call corpus: OpenAI ``tools`` lists, and the structural tags an engine's model
templates make of them (issue 29).

* :data:`TOOLS` — named tools lists in the OpenAI Chat Completions shape: nested, ``$defs``/``$ref``,
  enum, optional, empty and omitted parameter schemas; names with dots and dashes; unicode; one tool and
  many. :func:`check_tools` reads any tools list and raises :class:`ToolsError` (naming the tool and
  the place) for one that is not a list of tools with valid JSON Schema parameters and distinct names.
* :func:`tool_call_tags` — given an engine module with xgrammar's ``get_model_structural_tag`` (passed in:
  ``props.corpus`` imports no engine), the structural tag of every template × tools list × tool_choice
  (auto, required, none, a named tool) × parallel calls × reasoning (× token markers where the template
  has them), or the engine's own refusal with its error.
* :func:`snapshot` / :func:`load_snapshot` — those tags as data (``data/toolcall_tags.json``, with
  the engine version), so the reference's tests run without the engine installed. The special tokens
  the tags name get fixed ids (:data:`SPECIAL_TOKEN_BASE` upward, by name).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from props.corpus._errors import CorpusError
from props.corpus.structural_tag_check import token_names

__all__ = [
    "TOOLS",
    "TEMPLATES",
    "TOOL_CHOICES",
    "REASONING",
    "TOKEN_MARKER_TEMPLATES",
    "SPECIAL_TOKEN_BASE",
    "SNAPSHOT",
    "ToolsError",
    "TagOptions",
    "TagRecord",
    "check_tools",
    "tool_names",
    "registered_templates",
    "tool_call_tags",
    "snapshot",
    "load_snapshot",
]


def _fn(name: str, parameters: Any = None, description: str = "") -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


_WEATHER = _fn(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
    "Current weather in a city",
)

#: The built-in tools lists, by name.
TOOLS: dict[str, list[dict[str, Any]]] = {
    "one_tool": [_WEATHER],
    "many_tools": [
        _WEATHER,
        _fn(
            "search.web",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["query"],
            },
        ),
        _fn(
            "file-read",
            {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "options": {
                        "type": "object",
                        "properties": {
                            "encoding": {"type": "string", "enum": ["utf-8", "latin-1"]},
                            "lines": {"type": "array", "items": {"type": "integer"}},
                        },
                        "required": ["encoding"],
                    },
                },
                "required": ["path", "options"],
            },
        ),
        _fn(
            "create_event",
            {
                "type": "object",
                "$defs": {
                    "person": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
                        "required": ["name"],
                    }
                },
                "properties": {
                    "title": {"type": "string"},
                    "attendees": {"type": "array", "items": {"$ref": "#/$defs/person"}},
                    "all_day": {"type": "boolean"},
                    "date": {"type": "string", "format": "date"},
                },
                "required": ["title", "attendees"],
            },
        ),
        _fn("no_args", {"type": "object", "properties": {}}),
        _fn("ping"),  # parameters omitted: unconstrained
    ],
    "unicode": [
        _fn(
            "météo_ville",
            {
                "type": "object",
                "properties": {
                    "ville": {"type": "string"},
                    "langue": {"enum": ["français", "日本語", "español"]},
                    "température": {"type": "number"},
                },
                "required": ["ville", "langue"],
            },
            "Météo — 天气 🌦",
        ),
    ],
}

#: The templates xgrammar 0.2.9 registers (``registered_templates`` asks the engine itself).
TEMPLATES: tuple[str, ...] = (
    "llama",
    "qwen_3",
    "qwen_3_5",
    "qwen_3_coder",
    "deepseek_r1",
    "deepseek_v3_1",
    "deepseek_v3_2",
    "deepseek_v4",
    "deepseek_v4_1",
    "kimi",
    "kimi_k3",
    "harmony",
    "glm_4_7",
    "gemma_4",
    "minimax",
    "minimax_m3",
    "mimo",
    "cohere",
    "exaone",
)
#: ``tool_choice`` values; "named" forces the tool :data:`NAMED_TOOL` picks from the list.
TOOL_CHOICES = ("auto", "required", "none", "named")
REASONING = ("enabled", "disabled", "auto")
#: Templates whose release takes ``token_markers=True`` (special tokens as token formats).
TOKEN_MARKER_TEMPLATES = ("qwen_3", "qwen_3_5", "qwen_3_coder", "glm_4_7")
#: The tool a named ``tool_choice`` forces, per tools list.
NAMED_TOOL = {"one_tool": "get_weather", "many_tools": "search.web", "unicode": "météo_ville"}
#: Special token ids of the snapshot: the names the tags use, sorted, numbered from here.
SPECIAL_TOKEN_BASE = 200_000
SNAPSHOT = Path(__file__).parent / "data" / "toolcall_tags.json"


class ToolsError(CorpusError):
    """A tools list that cannot be used: ``tool`` names the tool (its name, or ``#index``), ``place``
    the JSON pointer inside the list, ``expected`` what would have been valid there."""

    def __init__(self, tool: str, place: str, expected: str, detail: str = "") -> None:
        self.tool = tool
        self.place = place
        super().__init__(f"tools list, tool {tool} at {place or '/'}", expected, detail)


def _tool_name(tool: Any, i: int) -> str:
    if isinstance(tool, dict):
        if isinstance(tool.get("function"), dict) and isinstance(tool["function"].get("name"), str):
            return repr(tool["function"]["name"])
        if isinstance(tool.get("name"), str):
            return repr(tool["name"])
        if tool.get("type") not in (None, "function") and isinstance(tool.get("type"), str):
            return repr(tool["type"])
    return f"#{i}"


def _check_parameters(params: Any, tool: str, place: str) -> None:
    import jsonschema

    if isinstance(params, bool):
        return
    if not isinstance(params, dict):
        raise ToolsError(tool, place, "a JSON Schema (an object or a boolean)", type(params).__name__)
    cls = jsonschema.validators.validator_for(params, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(params)
    except jsonschema.SchemaError as e:
        ptr = "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in e.path)
        raise ToolsError(tool, place + ptr, "a valid JSON Schema", e.message[:200]) from e
    for ptr, ref in _refs(params, ""):
        if ref.startswith("#") and _resolve(params, ref[1:]) is None:
            raise ToolsError(tool, f"{place}{ptr}/$ref", "a $ref that resolves inside the parameters", ref)
        if not ref.startswith("#"):
            raise ToolsError(tool, f"{place}{ptr}/$ref", "a local $ref ('#...'): nothing is fetched", ref)


def _refs(node: Any, ptr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.append((ptr, v))
            elif k not in ("enum", "const", "default", "examples"):
                out.extend(_refs(v, f"{ptr}/{k}"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_refs(v, f"{ptr}/{i}"))
    return out


def _resolve(doc: Any, pointer: str) -> Any:
    if pointer == "":
        return doc
    node = doc
    for raw in pointer.lstrip("/").split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def check_tools(tools: Any) -> list[str]:
    """The tool names of ``tools`` (OpenAI ``tools``: function tools, or xgrammar's builtin-tool shape
    ``{"type", "name", "parameters"}``), after checking it; :class:`ToolsError` otherwise."""
    if not isinstance(tools, list):
        raise ToolsError("-", "", "a list of tools", type(tools).__name__)
    names: dict[str, int] = {}
    for i, tool in enumerate(tools):
        who = _tool_name(tool, i)
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise ToolsError(who, f"/{i}", "a tool object with a string 'type'")
        if tool["type"] == "function":
            fn = tool.get("function")
            if not isinstance(fn, dict):
                raise ToolsError(who, f"/{i}/function", "an object with 'name' and optional 'parameters'")
            name, place = fn.get("name"), f"/{i}/function"
            params, has_params = fn.get("parameters"), "parameters" in fn
        else:
            name, place = tool.get("name", tool["type"]), f"/{i}"
            params, has_params = tool.get("parameters"), "parameters" in tool
        if not isinstance(name, str) or not name:
            raise ToolsError(who, f"{place}/name", "a non-empty tool name", repr(name)[:60])
        if has_params:
            _check_parameters(params, who, f"{place}/parameters")
        if name in names:
            other = f"tool #{names[name]} is also named {name!r}"
            raise ToolsError(who, f"{place}/name", "a name no other tool has", other)
        names[name] = i
    return list(names)


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of a checked tools list, in order."""
    return check_tools(list(tools))


@dataclass(frozen=True)
class TagOptions:
    """One request's tool-call settings: which template, tools list and options."""

    template: str
    tools: str
    tool_choice: str
    parallel: bool
    reasoning: str
    token_markers: bool = False

    @property
    def id(self) -> str:
        par = "parallel" if self.parallel else "single"
        tm = "/token_markers" if self.token_markers else ""
        return f"{self.template}/{self.tools}/{self.tool_choice}/{par}/reasoning={self.reasoning}{tm}"

    def to_json(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "parallel": self.parallel,
            "reasoning": self.reasoning,
            "token_markers": self.token_markers,
        }


@dataclass(frozen=True, eq=False)
class TagRecord:
    """The structural tag the engine made for ``options`` (``tag``), or its refusal (``refused``, the
    error's type and message); ``special_tokens`` names the ids of the token strings it uses."""

    options: TagOptions
    tag: dict[str, Any] | None
    refused: str | None
    special_tokens: dict[str, int]


def registered_templates(engine: Any) -> tuple[str, ...]:
    """The templates ``engine`` registers: its registry when it shows one, else :data:`TEMPLATES`."""
    registry = getattr(getattr(engine, "builtin_structural_tag", None), "_structural_tag_registry", None)
    return tuple(sorted(registry)) if isinstance(registry, Mapping) else TEMPLATES


def _tool_choice(choice: str, tools: str) -> Any:
    """``tool_choice`` as the request carries it: "named" forces :data:`NAMED_TOOL`'s pick, a value
    other than auto/required/none forces the tool of that name."""
    if choice in ("auto", "required", "none"):
        return choice
    name = NAMED_TOOL[tools] if choice == "named" else choice
    return {"type": "function", "function": {"name": name}}


def all_options(templates: Iterable[str], tools: Iterable[str] = TOOLS) -> list[TagOptions]:
    """Every template × tools list × tool_choice × parallel × reasoning (× token markers)."""
    out = []
    for template in templates:
        for t in tools:
            for choice in TOOL_CHOICES:
                for parallel in (True, False):
                    for reasoning in REASONING:
                        for tm in (False, True) if template in TOKEN_MARKER_TEMPLATES else (False,):
                            out.append(TagOptions(template, t, choice, parallel, reasoning, tm))
    return out


def tool_call_tags(
    engine: Any,
    options: Iterable[TagOptions] | None = None,
    tools: Mapping[str, list[dict[str, Any]]] = TOOLS,
) -> list[TagRecord]:
    """The structural tag ``engine.get_model_structural_tag`` makes for each of ``options`` (default:
    :func:`all_options` over the engine's registered templates), or the refusal it raises. Every tools
    list is checked first (:func:`check_tools`)."""
    for t in tools.values():
        check_tools(t)
    if options is None:
        options = all_options(registered_templates(engine), tools)
    raw: list[tuple[TagOptions, dict[str, Any] | None, str | None]] = []
    for o in options:
        try:
            st = engine.get_model_structural_tag(
                o.template,
                tools=tools[o.tools],
                tool_choice=_tool_choice(o.tool_choice, o.tools),
                parallel_tool_calls=o.parallel,
                reasoning=o.reasoning,
                **({"token_markers": True} if o.token_markers else {}),
            )
            tag = st.model_dump(mode="json") if hasattr(st, "model_dump") else st
            raw.append((o, json.loads(json.dumps(tag)), None))
        except Exception as e:  # the engine's refusal, recorded as data (docs/style.md §7)
            raw.append((o, None, f"{type(e).__name__}: {e}"))
    names = sorted({n for _, tag, _ in raw if tag is not None for n in token_names(tag)})
    ids = {n: SPECIAL_TOKEN_BASE + i for i, n in enumerate(names)}
    return [
        TagRecord(o, tag, why, {n: ids[n] for n in token_names(tag)} if tag is not None else {})
        for o, tag, why in raw
    ]


def _digest(tag: Any) -> str:
    # Keys in their order: a schema's property order is part of the language (structural_tag.md).
    return hashlib.sha256(json.dumps(tag, ensure_ascii=True).encode()).hexdigest()[:16]


def _intern(node: Any, schemas: dict[str, Any]) -> Any:
    """``node`` with each ``json_schema`` format's schema replaced by its digest in ``schemas``."""
    if isinstance(node, dict):
        is_json = node.get("type") == "json_schema" and "json_schema" in node
        out = {k: _intern(v, schemas) for k, v in node.items() if not (is_json and k == "json_schema")}
        if is_json:
            d = _digest(node["json_schema"])
            schemas[d] = node["json_schema"]
            out["json_schema"] = {"$snapshot_schema": d}
        return out
    if isinstance(node, list):
        return [_intern(v, schemas) for v in node]
    return node


def _inflate(node: Any, schemas: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "json_schema" and isinstance(node.get("json_schema"), dict):
            ref = node["json_schema"].get("$snapshot_schema")
            if isinstance(ref, str):
                return {**{k: _inflate(v, schemas) for k, v in node.items()}, "json_schema": schemas[ref]}
        return {k: _inflate(v, schemas) for k, v in node.items()}
    if isinstance(node, list):
        return [_inflate(v, schemas) for v in node]
    return node


def snapshot(records: Sequence[TagRecord], engine: str, version: str) -> dict[str, Any]:
    """``records`` as a JSON value: each distinct tag stored once, by digest, and each distinct
    argument schema once (``{"$snapshot_schema": digest}`` in the tags)."""
    tags: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    rows = []
    for r in records:
        row: dict[str, Any] = {"options": r.options.to_json()}
        if r.tag is not None:
            d = _digest(r.tag)
            tags[d] = _intern(r.tag, schemas)
            row["tag"] = d
            row["special_tokens"] = r.special_tokens
        else:
            row["refused"] = r.refused
        rows.append(row)
    return {
        "engine": engine,
        "version": version,
        "tools": TOOLS,
        "records": rows,
        "schemas": schemas,
        "tags": tags,
    }


def load_snapshot(path: Path | str = SNAPSHOT) -> tuple[dict[str, Any], list[TagRecord]]:
    """The snapshot's header (engine, version, tools) and its records; :class:`CorpusError` when the
    file is not a snapshot."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        tags = {d: _inflate(t, data["schemas"]) for d, t in data["tags"].items()}
        records = [
            TagRecord(
                TagOptions(**row["options"]),
                tags[row["tag"]] if "tag" in row else None,
                row.get("refused"),
                dict(row.get("special_tokens", {})),
            )
            for row in data["records"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CorpusError(str(p), "a tool-call tag snapshot (props/corpus/toolcalls.py)", str(e)[:200]) from e
    header = {k: data[k] for k in ("engine", "version", "tools")}
    return header, records
