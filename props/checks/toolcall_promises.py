"""Tool-call templates checked against their own promises (issue 29).

A template (xgrammar's ``get_model_structural_tag``) turns a request's tools, ``tool_choice``,
``parallel_tool_calls`` and reasoning setting into a structural tag; the request makes promises about
the tag's *language*, which the template is there to keep:

=================  ==================================================================================
``none``           ``tool_choice="none"``: no output holds a call
``required``       ``tool_choice="required"``: no output ends without a call
``named_tool``     a named ``tool_choice``: no call of another tool
``named_call``     a named ``tool_choice`` forces that call: no output without one
``single_call``    ``parallel_tool_calls=False``: no second call
``arguments``      every call's arguments are valid for its tool's ``parameters`` (JSON Schema)
``free_text``      no trigger inside free text (a trigger starts a call)
=================  ==================================================================================

How a promise is decided: *witnesses* — outputs that break the promise but are otherwise well-formed
for that template — are built, and the reference decides whether the template's tag accepts each
(``refdecoder.StructuralTag``, ``Grammar.accepts``, special tokens as
``refdecoder.special_token_bytes(id)``). An accepted witness breaks the promise.

* For ``none``, ``required``, ``named_*`` and ``single_call`` the witnesses are the outputs of the
  *same* template for ``tool_choice="auto"`` with parallel calls (same tools, reasoning and markers),
  those the independent checker (:mod:`props.corpus.structural_tag_check`) says that tag accepts,
  classified by the calls the generator put in them (:func:`props.corpus.toolcall_texts.labelled_outputs`:
  which tools, how many; never read back from the text). An output with a call the labels cannot
  name is not used.
* For ``arguments``: the template's own outputs with arguments aimed at breaking the tool's own schema
  (``bad_arguments``), used where the argument text is JSON (``style: "json"``) and is not valid for
  the tool's ``parameters`` (strict JSON, then JSON Schema with ``format`` as an annotation; an
  object with a repeated key is not used).
* For ``free_text``: the template's own outputs with a trigger written into free text.

A broken promise is a ``soundness`` finding (docs/invariants.md, ``walk: "template_promise"``): the
tag lets an output finish that the request forbids. Its certificate holds the shortest witness found,
the options, the calls in it, and the checker's verdict on the witness for the same tag (``True``: the
documented semantics accept it too; the reference alone decided the promise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import refdecoder
from props.checks.structural_tags import output_bytes, reference_status
from props.checks.witness import canonical_ids
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef, bytes_json
from props.corpus.structural_tag_check import Part, Undecided, flatten, verdict
from props.corpus.toolcall_texts import LabelledOutput, arguments_error, labelled_outputs
from props.corpus.toolcalls import NAMED_TOOL, TagOptions, TagRecord, check_tools
from tokenizers_matrix import Vocabulary

__all__ = [
    "PROMISES",
    "PromiseViolation",
    "PromiseResult",
    "promises_for",
    "named_tool",
    "base_options",
    "check_promises",
    "check_records",
    "promise_findings",
]

#: Each promise, and what it forbids.
PROMISES: dict[str, str] = {
    "none": "tool_choice 'none' forbids calls",
    "required": "tool_choice 'required' forbids finishing without a call",
    "named_tool": "a named tool_choice forbids calling another tool",
    "named_call": "a named tool_choice forbids finishing without calling it",
    "single_call": "parallel_tool_calls=False forbids a second call",
    "arguments": "arguments must be valid for their tool's parameters schema",
    "free_text": "free text must not contain a trigger",
}
_PLAIN_CHOICES = ("auto", "required", "none")
_BASE_MODES = ("valid", "second_call", "no_call")


def named_tool(options: TagOptions) -> str | None:
    """The tool a named ``tool_choice`` forces ("named" is the corpus's own pick), else None."""
    if options.tool_choice == "named":
        return NAMED_TOOL[options.tools]
    return None if options.tool_choice in _PLAIN_CHOICES else options.tool_choice


def promises_for(options: TagOptions) -> tuple[str, ...]:
    """The promises a tag made for ``options`` must keep."""
    out: list[str] = []
    if options.tool_choice == "none":
        out.append("none")
    elif options.tool_choice == "required":
        out.append("required")
    elif named_tool(options) is not None:
        out += ["named_tool", "named_call"]
    if options.tool_choice != "none":
        if not options.parallel:
            out.append("single_call")
        out.append("arguments")
    out.append("free_text")
    return tuple(out)


def base_options(options: TagOptions) -> TagOptions:
    """The request the structural witnesses come from: the same template, tools, reasoning and
    markers, with ``tool_choice="auto"`` and parallel calls."""
    return replace(options, tool_choice="auto", parallel=True)


@dataclass(frozen=True)
class PromiseViolation:
    """A promise the tag for ``options`` breaks: the reference accepts ``witness`` (the shortest of
    ``accepted`` such witnesses among ``tried``); ``calls`` are the tools the witness calls, ``why``
    what makes it a witness, ``checker`` the independent checker's verdict on it for the same tag."""

    promise: str
    options: TagOptions
    witness: tuple[Part, ...]
    calls: tuple[str | None, ...]
    why: str
    checker: bool | Undecided
    accepted: int
    tried: int


@dataclass(frozen=True)
class PromiseResult:
    """The promises of one tag: ``status`` ``"compiled"``, the reference's refusal, or why nothing was
    decided; ``tried`` witnesses per promise (0: none could be built); ``violations``."""

    record: TagRecord
    status: str
    tried: Mapping[str, int]
    violations: tuple[PromiseViolation, ...]


def _parameters(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each tool's ``parameters`` schema by name (absent: unconstrained)."""
    out: dict[str, Any] = {}
    for tool in tools:
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn.get("parameters", True)
    return out


def _structural(base: TagRecord | None, names: Sequence[str]) -> list[LabelledOutput]:
    """The base tag's outputs it accepts (the checker's word), each call named."""
    if base is None or base.tag is None:
        return []
    out = []
    for o in labelled_outputs(base.tag, base.special_tokens, names, _BASE_MODES):
        if None not in o.tools_called and verdict(base.tag, o.parts, base.special_tokens) is True:
            out.append(o)
    return out


def _witnesses(
    record: TagRecord, base: TagRecord | None, tools: Sequence[Mapping[str, Any]]
) -> dict[str, list[tuple[LabelledOutput, str]]]:
    """Per promise of ``record``, its witnesses and what makes each one."""
    assert record.tag is not None
    o = record.options
    names = check_tools(list(tools))
    structural = _structural(base, names)
    forced = named_tool(o)
    out: dict[str, list[tuple[LabelledOutput, str]]] = {}
    for promise in promises_for(o):
        found: list[tuple[LabelledOutput, str]] = []
        if promise == "none":
            found = [(x, f"calls {list(x.tools_called)}") for x in structural if x.calls]
        elif promise in ("required", "named_call"):
            found = [(x, "no call") for x in structural if not x.calls]
        elif promise == "named_tool":
            found = [
                (x, f"calls {[t for t in x.tools_called if t != forced]}, not only {forced!r}")
                for x in structural
                if any(t != forced for t in x.tools_called)
            ]
        elif promise == "single_call":
            found = [(x, f"{len(x.calls)} calls") for x in structural if len(x.calls) >= 2]
        elif promise == "arguments":
            params = _parameters(tools)
            bad = labelled_outputs(record.tag, record.special_tokens, names, ("bad_arguments",), params)
            for x in bad:
                for c in x.calls:
                    if c.style != "json" or c.arguments is None or c.tool not in params:
                        continue
                    error = arguments_error(c.arguments, params[c.tool])
                    if isinstance(error, str):
                        found.append((x, f"{c.tool} arguments {c.arguments!r}: {error}"))
                        break
        elif promise == "free_text":
            found = [
                (x, f"trigger {list(x.triggers_in_text)} in free text")
                for x in labelled_outputs(record.tag, record.special_tokens, names, ("trigger_in_text",))
                if x.triggers_in_text
            ]
        out[promise] = found
    return out


def check_promises(
    record: TagRecord,
    base: TagRecord | None,
    tools: Sequence[Mapping[str, Any]],
    grammar: refdecoder.Grammar | None = None,
) -> PromiseResult:
    """The promises of ``record``'s tag, decided by the reference on witnesses from ``base`` (the
    same template's ``auto``/parallel record, :func:`base_options`) and from the tag itself;
    ``tools`` is the tools list the tags were made for; ``grammar`` the reference's compile of the
    tag when the caller has it."""
    if record.tag is None:
        return PromiseResult(record, f"refused by the engine: {record.refused}", {}, ())
    if grammar is None:
        grammar, status = reference_status(record.tag, record.special_tokens)
        if grammar is None:
            return PromiseResult(record, status, {}, ())
    tried: dict[str, int] = {}
    violations = []
    for promise, found in _witnesses(record, base, tools).items():
        tried[promise] = len(found)
        accepted = [(x, why) for x, why in found if grammar.accepts(output_bytes(x.parts))]
        if not accepted:
            continue
        x, why = min(accepted, key=lambda a: (len(flatten(a[0].parts)), repr(a[0].parts)))
        checker = verdict(record.tag, x.parts, record.special_tokens)
        violations.append(
            PromiseViolation(
                promise, record.options, x.parts, x.tools_called, why, checker, len(accepted), len(found)
            )
        )
    return PromiseResult(record, "compiled", tried, tuple(violations))


def check_records(
    records: Iterable[TagRecord], tools: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[PromiseResult]:
    """:func:`check_promises` for each record, its base found among ``records`` (a missing base
    leaves the structural promises without witnesses: ``tried`` 0); ``tools`` by tools-list name."""
    records = list(records)
    by_options = {r.options: r for r in records}
    return [
        check_promises(r, by_options.get(base_options(r.options)), tools[r.options.tools]) for r in records
    ]


def _checker_word(v: bool | Undecided) -> str:
    return "undecided" if isinstance(v, Undecided) else ("accepts" if v else "rejects")


def promise_findings(
    results: Iterable[PromiseResult], engine: str, version: str, vocabulary: Vocabulary | None = None
) -> list[Finding]:
    """One ``soundness`` finding per broken promise (module docstring), on the tag as a spec. With
    the ``vocabulary`` the tags' special-token ids are in: the finding is about EOS after the witness
    (``prefix_ids`` its canonical encoding, ``reference_allows=False``: the request forbids
    finishing there), which a reproducer replays on the engine."""
    out = []
    for r in results:
        names = dict(r.record.special_tokens)
        by_id = {i: n for n, i in names.items()}
        spec = SpecRef(
            SpecKind.STRUCTURAL_TAG,
            {"tag": r.record.tag, "special_tokens": names},
            f"toolcall:{r.record.options.id}",
            "toolcalls",
        )
        for v in r.violations:
            data = output_bytes(v.witness)
            ids = canonical_ids(vocabulary, data) if vocabulary is not None else None
            out.append(
                Finding(
                    invariant=Invariant.SOUNDNESS,
                    backend=engine,
                    backend_version=version,
                    spec=spec,
                    tokenizer=vocabulary.name if vocabulary is not None else "",
                    tokenizer_fingerprint=vocabulary.fingerprint if vocabulary is not None else "",
                    prefix_ids=ids or (),
                    prefix_bytes=data,
                    reference_allows=False if ids is not None else None,
                    backend_verdict="the template's tag accepts the witness",
                    reference_verdict=f"the request forbids it: {PROMISES[v.promise]}",
                    message=f"template {v.options.template} breaks promise {v.promise!r} ({v.options.id})",
                    certificate={
                        "promise": v.promise,
                        "promise_text": PROMISES[v.promise],
                        "options": v.options.to_json(),
                        "witness": bytes_json(data, by_id),
                        "witness_parts": list(v.witness),
                        "witness_ids": list(ids) if ids is not None else None,
                        "calls": list(v.calls),
                        "why": v.why,
                        "decided_by": "reference",
                        "checker_verdict": _checker_word(v.checker),
                        "witnesses_accepted": v.accepted,
                        "witnesses_tried": v.tried,
                    },
                    walk="template_promise",
                )
            )
    return out
