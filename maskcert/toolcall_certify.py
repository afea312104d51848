"""``maskcert certify --tools FILE``: an engine's tool-call path (issue 29).

The request: an OpenAI Chat Completions ``tools`` list (checked: a bad one is a :class:`CertifyError`
naming the tool and the place, from ``props.corpus.toolcalls.ToolsError``), ``--tool-choice``
(``auto``, ``required``, ``none`` or a tool's name), ``--parallel/--no-parallel``, ``--reasoning``
(``enabled``, ``disabled``, ``auto``) and ``--model-format`` (xgrammar's template names; default every
one the installed xgrammar registers). :class:`ToolCallRequest` holds them.

* **xgrammar** (``--backend xgrammar``): the engine's own ``get_model_structural_tag`` makes each
  template's structural tag for the request (``props.backends.xgrammar.model_structural_tags``). Each
  tag is written to ``OUT/toolcalls/<template>.json`` and certified as ``--structural-tag`` certifies
  (its special tokens named by each vocabulary's special tokens); a template the engine refuses for
  the request is listed on stderr. Then each template's promises are checked
  (:mod:`props.checks.toolcall_promises`: a named tool forces that name, ``required`` forbids finishing
  without a call, ``none`` forbids calls, no parallel forbids a second call, arguments valid for their
  tool, no trigger in free text) with each vocabulary's special-token ids, and each broken promise is a
  ``soundness`` finding in the same report (:meth:`maskcert.certification.Report.with_findings`).
* **Engines without a tool-call API** (every other backend): the JSON Schema serving stacks send, in
  vLLM's convention (``vllm/entrypoints/openai/protocol.py``, ``ChatCompletionRequest.
  _get_json_schema_from_tool``; :func:`serving_schema`): ``required`` → an array of at least one call,
  each an object ``{"name": <a tool's name>, "parameters": <that tool's parameters>}`` (``anyOf`` over
  the tools, a tool without parameters getting ``{"type": "object", "properties": {}}``, every tool's
  ``$defs`` also hoisted to the root, where their ``$ref``s resolve); a named tool → that tool's
  ``parameters`` alone (the name is forced outside the grammar). vLLM sends the same array whatever
  ``parallel_tool_calls`` says, and no schema for ``auto`` or ``none``: those are a usage error here.
  Written to ``OUT/toolcalls/<required|NAME>.schema.json`` and certified as ``--schema``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from maskcert.certification import CertifyError, Report, read_spec_file
from props.checks.toolcall_promises import base_options, check_promises, promise_findings
from props.contract.findings import Finding, Invariant
from props.corpus.structural_tag_check import token_names
from props.corpus.toolcalls import REASONING, TagOptions, TagRecord, ToolsError, check_tools

__all__ = [
    "ToolCallRequest",
    "ToolCallSpecs",
    "load_tools",
    "serving_schema",
    "write_specs",
    "with_promises",
]

_PLAIN = ("auto", "required", "none")
#: The backend whose model templates ``--tools`` certifies; every other engine gets the schema.
TEMPLATE_ENGINE = "xgrammar"


@dataclass(frozen=True)
class ToolCallRequest:
    """The tool-call settings of a ``certify --tools`` run (module docstring); ``tools`` the file."""

    tools: str
    tool_choice: str = "auto"
    parallel: bool = True
    reasoning: str = "auto"
    model_formats: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_formats", tuple(self.model_formats))
        if self.reasoning not in REASONING:
            raise CertifyError(f"--reasoning {self.reasoning}: expected one of {', '.join(REASONING)}")
        if not self.tool_choice:
            raise CertifyError("--tool-choice: expected auto, required, none or a tool's name, not ''")

    def to_json(self) -> dict[str, Any]:
        return {
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "parallel": self.parallel,
            "reasoning": self.reasoning,
            "model_formats": list(self.model_formats),
        }


@dataclass(frozen=True)
class ToolCallSpecs:
    """What a request became: spec files to certify (``structural_tags`` or ``schemas``), and for a
    template engine the tag records asked for, their ``auto``/parallel bases (the promises' witnesses)
    and the templates the engine refused (``refused``: one line each)."""

    tools: list[dict[str, Any]]
    structural_tags: tuple[Path, ...] = ()
    schemas: tuple[Path, ...] = ()
    records: tuple[TagRecord, ...] = ()
    bases: Mapping[TagOptions, TagRecord] = field(default_factory=dict)
    refused: tuple[str, ...] = ()


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """The tools list in ``path``, checked (:func:`props.corpus.toolcalls.check_tools`); a
    :class:`CertifyError` naming the file, the tool and the place otherwise."""
    data = read_spec_file(path, "--tools", "an OpenAI tools list (JSON)", json_file=True)
    try:
        check_tools(data)
    except ToolsError as e:
        raise CertifyError(f"--tools {path}: {e}") from e
    return list(data)


def _choice(request: ToolCallRequest, names: Sequence[str]) -> None:
    if request.tool_choice not in _PLAIN and request.tool_choice not in names:
        raise CertifyError(
            f"--tool-choice {request.tool_choice}: expected auto, required, none or the name of a tool "
            f"in {request.tools} ({', '.join(names)})"
        )


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = tool.get("function")
    return fn if tool.get("type") == "function" and isinstance(fn, Mapping) else tool


def serving_schema(tools: Sequence[Mapping[str, Any]], tool_choice: str) -> Any:
    """The JSON Schema vLLM sends for ``tool_choice`` (module docstring); a :class:`CertifyError`
    for ``auto``/``none`` (no schema), :class:`ToolsError` for ``$defs`` two tools define differently."""
    if tool_choice in ("auto", "none"):
        raise CertifyError(
            f"--tool-choice {tool_choice}: serving stacks send no JSON Schema for it; an engine without a "
            "tool-call API is certified with --tool-choice required or a tool's name"
        )
    fns = {str(_function(t)["name"]): (i, _function(t)) for i, t in enumerate(tools)}
    if tool_choice != "required":
        return fns[tool_choice][1].get("parameters", {"type": "object", "properties": {}})
    defs: dict[str, Any] = {}
    defined_by: dict[str, str] = {}
    calls = []
    for name, (i, fn) in fns.items():
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        for key, value in (params.get("$defs") or {}).items() if isinstance(params, dict) else ():
            if key in defs and defs[key] != value:
                raise ToolsError(
                    repr(name),
                    f"/{i}/function/parameters/$defs/{key}",
                    "a $defs entry no other tool defines differently (vLLM hoists every tool's $defs "
                    "to one root)",
                    f"tool {defined_by[key]!r} defines {key!r} otherwise",
                )
            defs[key], defined_by[key] = value, name
        calls.append(
            {
                "properties": {"name": {"type": "string", "enum": [name]}, "parameters": params},
                "required": ["name", "parameters"],
            }
        )
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": calls}}
    if defs:
        schema["$defs"] = defs
    return schema


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def write_specs(backend: str, request: ToolCallRequest, out: Path) -> ToolCallSpecs:
    """The specs ``request`` makes for ``backend`` (module docstring), written under ``out/toolcalls``."""
    tools = load_tools(request.tools)
    names = check_tools(tools)
    _choice(request, names)
    folder = Path(out) / "toolcalls"
    folder.mkdir(parents=True, exist_ok=True)
    if backend.startswith(f"{TEMPLATE_ENGINE}=="):
        raise CertifyError(
            f"--tools with --backend {backend}: the templates are the installed {TEMPLATE_ENGINE}'s "
            f"(get_model_structural_tag); give --backend {TEMPLATE_ENGINE}"
        )
    if backend != TEMPLATE_ENGINE:
        if request.model_formats:
            raise CertifyError(
                f"--model-format: only --backend {TEMPLATE_ENGINE} (as installed) has model templates"
            )
        try:
            schema = serving_schema(tools, request.tool_choice)
        except ToolsError as e:
            raise CertifyError(f"--tools {request.tools}: {e}") from e
        path = folder / f"{_file_name(request.tool_choice)}.schema.json"
        path.write_text(json.dumps(schema, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return ToolCallSpecs(tools, schemas=(path,))
    try:
        from props.backends.xgrammar import model_structural_tags, model_templates
    except ImportError as e:
        raise CertifyError(
            f"--tools with --backend {TEMPLATE_ENGINE}: the engine is not installed ({e})"
        ) from e
    registered = model_templates()
    unknown = [t for t in request.model_formats if t not in registered]
    if unknown:
        raise CertifyError(f"--model-format {unknown[0]}: expected one of {', '.join(registered)}")
    asked = [
        TagOptions(t, "tools", request.tool_choice, request.parallel, request.reasoning)
        for t in request.model_formats or registered
    ]
    bases = list(dict.fromkeys(base_options(o) for o in asked if base_options(o) != o))
    made = model_structural_tags(tools, [*asked, *bases])
    records, base_records = made[: len(asked)], made[len(asked) :]
    paths = []
    for r in records:
        if r.tag is not None:
            path = folder / f"{_file_name(r.options.template)}.json"
            path.write_text(json.dumps(r.tag, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            paths.append(path)
    refused = tuple(f"{r.options.template}: {r.refused}" for r in records if r.tag is None)
    return ToolCallSpecs(
        tools,
        structural_tags=tuple(paths),
        records=tuple(records),
        bases={b.options: b for b in base_records},
        refused=refused,
    )


def _with_ids(record: TagRecord | None, table: Mapping[str, int]) -> TagRecord | None:
    """``record`` with its special tokens given ``table``'s ids; None when one is missing."""
    if record is None or record.tag is None:
        return record
    needed = token_names(record.tag)
    if any(n not in table for n in needed):
        return None
    return replace(record, special_tokens={n: table[n] for n in needed})


def with_promises(report: Report, specs: ToolCallSpecs) -> tuple[Report, list[str]]:
    """``report`` with the template promises of ``specs`` checked for each of its vocabularies (their
    special-token ids), broken ones as findings; and notes on what could not be checked."""
    findings: list[Finding] = []
    checks: dict[tuple[str, str], int] = {}
    notes: list[str] = []
    for vocab in report.vocabularies.values():
        table = {name: i for i, name in vocab.special_names}
        for r in specs.records:
            record = _with_ids(r, table)
            if record is None:
                notes.append(f"{r.options.template} on {vocab.name}: a special token of the tag is not in it")
                continue
            base = _with_ids(specs.bases.get(base_options(r.options), r), table)
            result = check_promises(record, base, specs.tools)
            if result.status != "compiled":
                notes.append(f"{r.options.template}: promises not checked ({result.status[:120]})")
                continue
            key = (str(Invariant.SOUNDNESS), vocab.name)
            checks[key] = checks.get(key, 0) + sum(result.tried.values())
            findings += promise_findings([result], report.backend.name, report.backend.version, vocab)
    return report.with_findings(findings, checks), notes
