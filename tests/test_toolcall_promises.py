"""Template promises (props/checks/toolcall_promises.py): the labels the witnesses are classified by,
each promise decided both ways on tags built for it, and the snapshot's templates (xgrammar 0.2.9)
with the promises they keep and the ones they break, each broken one confirmed by the independent
checker. No engine needed: the tags come from the committed snapshot."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from props.checks.toolcall_promises import (
    PROMISES,
    base_options,
    check_promises,
    check_records,
    promise_findings,
    promises_for,
)
from props.contract.findings import Finding, Invariant
from props.corpus.structural_tag_check import Undecided
from props.corpus.toolcall_texts import arguments_error, labelled_outputs
from props.corpus.toolcalls import TOOLS, TagOptions, TagRecord, load_snapshot, tool_names
from refdecoder import StructuralTag

HEADER, RECORDS = load_snapshot()
BY_OPTIONS = {r.options: r for r in RECORDS}


def _record(template: str, tools: str, choice: str, parallel: bool, reasoning: str = "disabled") -> TagRecord:
    return BY_OPTIONS[TagOptions(template, tools, choice, parallel, reasoning)]


def _tag(record: TagRecord) -> dict[str, Any]:
    assert record.tag is not None, record.refused
    return record.tag


def _result(record: TagRecord) -> Any:
    return check_promises(record, BY_OPTIONS.get(base_options(record.options)), TOOLS[record.options.tools])


# -- labels ----------------------------------------------------------------------------------------------


def test_labels_are_the_calls_written() -> None:
    """qwen_3 writes each call as ``{"name": N, "arguments": ...}``: the labels name the same tools,
    in order, as reading the text back does — here, where reading back is unambiguous."""
    r = _record("qwen_3", "many_tools", "auto", True)
    outs = labelled_outputs(r.tag, r.special_tokens, tool_names(TOOLS["many_tools"]), ("valid", "no_call"))
    counts = {len(o.calls) for o in outs}
    assert {0, 1, 2} <= counts
    for o in outs:
        text = "".join(p for p in o.parts if isinstance(p, str))
        assert list(o.tools_called) == re.findall(r'"name": "([^"]+)", "arguments"', text)
        for c in o.calls:
            assert c.style == "json" and c.arguments is not None and c.arguments in text


def test_arguments_error() -> None:
    schema = TOOLS["one_tool"][0]["function"]["parameters"]
    assert arguments_error('{"city": "Paris"}', schema) is None
    assert arguments_error(' {"city": "Paris"}\n', schema) is None  # JSON allows the whitespace
    assert "not JSON" in str(arguments_error('{"city": "Paris",}', schema))
    assert "not JSON" in str(arguments_error('{"city": NaN}', schema))
    assert "'city' is a required property" in str(arguments_error("{}", schema))
    assert "is not one of" in str(arguments_error('{"city": "P", "unit": "kelvin"}', schema))
    assert isinstance(arguments_error('{"city": "P", "city": "Q"}', schema), Undecided)


def test_promises_for() -> None:
    o = TagOptions("t", "many_tools", "auto", True, "disabled")
    assert promises_for(o) == ("arguments", "free_text")
    assert promises_for(o.__class__("t", "many_tools", "none", False, "disabled")) == ("none", "free_text")
    named = TagOptions("t", "many_tools", "named", False, "disabled")
    assert promises_for(named) == ("named_tool", "named_call", "single_call", "arguments", "free_text")
    by_name = TagOptions("t", "many_tools", "get_weather", True, "disabled")
    assert promises_for(by_name)[:2] == ("named_tool", "named_call")
    assert set(promises_for(TagOptions("t", "x", "required", False, "auto"))) <= set(PROMISES)


# -- each promise decided both ways ------------------------------------------------------------------------


def _as(record: TagRecord, choice: str, parallel: bool, tag: Any = None) -> TagRecord:
    """``record``'s tag (or ``tag``) presented as the template's answer to other options: a template
    that ignores them."""
    options = TagOptions(
        record.options.template, record.options.tools, choice, parallel, record.options.reasoning
    )
    return TagRecord(options, record.tag if tag is None else tag, None, record.special_tokens)


def test_a_template_ignoring_tool_choice_breaks_the_structural_promises() -> None:
    auto = _record("llama", "many_tools", "auto", True)
    broken = {
        ("required", True): {"required"},
        ("named", True): {"named_tool", "named_call"},
        ("auto", False): {"single_call"},
        ("none", False): {"none"},
    }
    for (choice, parallel), promises in broken.items():
        result = check_promises(_as(auto, choice, parallel), auto, TOOLS["many_tools"])
        found = {v.promise: v for v in result.violations}
        assert set(found) == promises, (choice, parallel, sorted(found))
        for v in found.values():
            assert v.checker is True and v.accepted >= 1 and v.tried >= v.accepted
    # the template's own tags for the same options keep them (llama's 'none' does not: harmony's does)
    for choice, parallel in broken:
        template = "harmony" if choice == "none" else "llama"
        result = _result(_record(template, "many_tools", choice, parallel))
        assert result.status == "compiled" and not result.violations
        assert all(result.tried[p] > 0 for p in promises_for(result.record.options) if p != "free_text")


def test_arguments_promise() -> None:
    """A call whose ``json_schema`` is weaker than the tool's ``parameters`` lets arguments through
    that the tool rejects; the same tag with the tool's schema does not."""
    auto = _record("llama", "one_tool", "auto", True)
    weak = copy.deepcopy(_tag(auto))
    weak["format"]["tags"][0]["content"]["json_schema"] = {"type": "object"}
    v = check_promises(_as(auto, "auto", True, weak), auto, TOOLS["one_tool"]).violations
    assert [x.promise for x in v] == ["arguments"]
    assert "get_weather arguments" in v[0].why and v[0].calls == ("get_weather",)
    kept = check_promises(auto, auto, TOOLS["one_tool"])
    assert kept.tried["arguments"] > 0 and not kept.violations


def test_free_text_promise() -> None:
    """Free text offered beside the triggered calls (``or``) lets a trigger through: broken. The
    triggered calls alone keep it."""
    auto = _record("llama", "one_tool", "auto", True)
    loose = {
        "type": "structural_tag",
        "format": {"type": "or", "elements": [_tag(auto)["format"], {"type": "any_text"}]},
    }
    v = check_promises(_as(auto, "auto", True, loose), auto, TOOLS["one_tool"]).violations
    assert {x.promise: x for x in v}.keys() == {"free_text", "arguments"}  # any text: any arguments too
    free = [x for x in v if x.promise == "free_text"]
    assert '{"name": ' in "".join(p for p in free[0].witness if isinstance(p, str))
    kept = check_promises(auto, auto, TOOLS["one_tool"])
    assert kept.tried["free_text"] > 0 and not kept.violations


# -- the snapshot's templates ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "choice", "parallel", "promise", "witness"),
    [
        ("llama", "none", True, "none", ('{"name": "get_weather", "parameters": {"city": "Paris"}}',)),
        ("harmony", "required", True, "required", ()),
        ("harmony", "required", False, "required", ()),
        ("harmony", "named", False, "named_call", ()),
    ],
)
def test_snapshot_templates_that_break_a_promise(
    template: str, choice: str, parallel: bool, promise: str, witness: tuple[Any, ...]
) -> None:
    result = _result(_record(template, "one_tool", choice, parallel))
    found = {v.promise: v for v in result.violations}
    assert promise in found
    assert found[promise].witness == witness
    assert found[promise].checker is True  # the documented semantics accept it too


def test_snapshot_as_findings() -> None:
    """Every template of the snapshot, one tools list (the other two break the same promises, 25 s
    more): the broken promises as findings; a template fixed upstream shows up here."""
    results = check_records([r for r in RECORDS if r.options.tools == "one_tool"], HEADER["tools"])
    findings = promise_findings(results, HEADER["engine"], HEADER["version"])
    broken = {(f.certificate["options"]["template"], f.certificate["promise"]) for f in findings}
    assert broken == {
        ("deepseek_r1", "none"),
        ("deepseek_v3_1", "none"),
        ("exaone", "none"),
        ("harmony", "named_call"),
        ("harmony", "required"),
        ("kimi", "none"),
        ("llama", "none"),
        ("qwen_3", "none"),
    }
    assert all(f.certificate["checker_verdict"] == "accepts" for f in findings)
    f = findings[0]
    assert f.invariant is Invariant.SOUNDNESS and f.walk == "template_promise" and f.failing
    again = Finding.from_json(f.to_json())
    assert again.certificate["witness"] == f.certificate["witness"] and again.spec.digest == f.spec.digest
    spec = f.spec.to_spec()
    assert isinstance(spec, StructuralTag) and spec.tag == f.spec.source["tag"]
