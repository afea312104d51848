"""The tool-call corpus: tools lists and their typed errors, the tag snapshot, the independent
structural-tag checker's own behaviour, and the generated texts (issue 29)."""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

import pytest

from props.corpus.structural_tag_check import (
    CheckerUndecided,
    TagFormatError,
    Undecided,
    matches,
    token_names,
    undecided_constructs,
    verdict,
)
from props.corpus.toolcall_texts import tool_call_texts
from props.corpus.toolcalls import (
    TEMPLATES,
    TOOLS,
    ToolsError,
    all_options,
    check_tools,
    load_snapshot,
    tool_call_tags,
)

# -- tools lists ---------------------------------------------------------------------------------------


def test_builtin_tools_lists_cover_the_issue() -> None:
    names = [n for tools in TOOLS.values() for n in check_tools(tools)]
    assert any("." in n for n in names) and any("-" in n for n in names)
    assert any(not n.isascii() for n in names)
    params = [t["function"].get("parameters") for tools in TOOLS.values() for t in tools]
    assert None in params  # omitted
    assert {"type": "object", "properties": {}} in params  # empty
    assert any(isinstance(p, dict) and "$defs" in p for p in params)
    assert any(isinstance(p, dict) and "enum" in str(p) for p in params)
    assert len(TOOLS["one_tool"]) == 1 and len(TOOLS["many_tools"]) > 3


def _fn(name: Any, params: Any = None) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name}
    if params is not None:
        f["parameters"] = params
    return {"type": "function", "function": f}


_REMOTE = {"$ref": "https://example.com/s"}
_PARAMS = "/0/function/parameters"


@pytest.mark.parametrize(
    "tools,tool,place,expected",
    [
        ({"type": "function"}, "-", "", "a list of tools"),
        ([{"function": {"name": "a"}}], "'a'", "/0", "a tool object with a string 'type'"),
        ([{"type": "function", "function": "a"}], "#0", "/0/function", "an object with 'name'"),
        ([_fn("")], "''", "/0/function/name", "a non-empty tool name"),
        ([_fn("ok"), _fn("bad", {"type": "objekt"})], "'bad'", "/1/function/parameters/type", "valid JSON"),
        ([_fn("bad", 3)], "'bad'", "/0/function/parameters", "a JSON Schema"),
        ([_fn("r", {"$ref": "#/$defs/missing"})], "'r'", "/0/function/parameters/$ref", "resolves"),
        ([_fn("r", {"properties": {"x": _REMOTE}})], "'r'", f"{_PARAMS}/properties/x/$ref", "local"),
        ([_fn("same"), _fn("other"), _fn("same")], "'same'", "/2/function/name", "a name no other tool has"),
        ([{"type": "web_search", "name": "same"}, _fn("same")], "'same'", "/1/function/name", "no other"),
    ],
)
def test_bad_tools_lists_name_the_tool_and_place(tools: Any, tool: str, place: str, expected: str) -> None:
    with pytest.raises(ToolsError) as e:
        check_tools(tools)
    assert (e.value.tool, e.value.place) == (tool, place)
    assert expected in e.value.expected
    assert isinstance(e.value, ValueError)


def test_collision_names_the_first_tool_too() -> None:
    with pytest.raises(ToolsError, match="tool #0 is also named 'same'"):
        check_tools([_fn("same"), _fn("same")])


# -- the snapshot ----------------------------------------------------------------------------------------

_HEADER, _RECORDS = load_snapshot()


def test_snapshot_covers_every_template_and_option() -> None:
    assert _HEADER["engine"] == "xgrammar" and _HEADER["version"]
    assert [r.options for r in _RECORDS] == all_options(sorted(TEMPLATES))
    assert {r.options.tool_choice for r in _RECORDS} == {"auto", "required", "none", "named"}
    for r in _RECORDS:
        assert (r.tag is None) != (r.refused is None), r.options.id
        if r.tag is not None:
            assert set(r.special_tokens) == set(token_names(r.tag)), r.options.id


def test_snapshot_keeps_property_order() -> None:
    """Declared property order is part of a json_schema format's language: the snapshot must not sort."""
    r = next(r for r in _RECORDS if r.options.id == "llama/many_tools/named/parallel/reasoning=disabled")
    assert '"query"' in str(r.tag).replace("'", '"')
    schema = r.tag["format"]["content"]["json_schema"] if r.tag else None
    assert schema is not None and list(schema["properties"]) == ["query", "max_results"]


@pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None, reason="xgrammar is not installed")
def test_snapshot_is_what_the_installed_xgrammar_makes() -> None:
    import xgrammar

    version = metadata.version("xgrammar")
    if version != _HEADER["version"]:
        pytest.skip(f"xgrammar {version}, snapshot of {_HEADER['version']}: run ci/gen_toolcall_tags.py")
    fresh = tool_call_tags(xgrammar)
    assert [(r.options, r.tag, r.refused, r.special_tokens) for r in fresh] == [
        (r.options, r.tag, r.refused, r.special_tokens) for r in _RECORDS
    ]


# -- the checker -------------------------------------------------------------------------------------------

_TEXT_TAG = {"type": "tag", "begin": "x", "content": {"type": "any_text"}, "end": "y"}


@pytest.mark.parametrize(
    "tag,pointer",
    [
        ({"type": "structural_tag", "format": {"type": "nope"}}, "/format/type"),
        ({"type": "sequence", "elements": [{"type": "const_string"}]}, "/elements/0"),
        ({"type": "tag", "begin": "a", "content": {"type": "any_text"}, "end": 3}, "/end"),
        ({"type": "repeat", "min": 3, "max": 1, "content": {"type": "any_text"}}, ""),
        ({"type": "token", "token": "<|unknown|>"}, "/token"),
        ({"type": "triggered_tags", "triggers": [], "tags": []}, "/triggers"),
        ({"type": "token_triggered_tags", "trigger_tokens": [1], "tags": [_TEXT_TAG]}, "/tags/0/begin"),
    ],
)
def test_malformed_tags_name_the_place(tag: dict[str, Any], pointer: str) -> None:
    with pytest.raises(TagFormatError) as e:
        verdict(tag, ["x"])
    assert e.value.path == pointer


def test_undecided_only_where_the_text_reaches() -> None:
    tag = {
        "type": "sequence",
        "elements": [
            {"type": "const_string", "value": "a"},
            {
                "type": "or",
                "elements": [
                    {"type": "grammar", "grammar": 'root ::= "b"'},
                    {"type": "const_string", "value": "c"},
                ],
            },
        ],
    }
    assert undecided_constructs(tag) == ("grammar (xgrammar EBNF: no independent reader in the checker)",)
    assert verdict(tag, ["ac"]) is True  # decided without the grammar
    assert verdict(tag, ["x"]) is False  # rejected before it
    assert isinstance(verdict(tag, ["ab"]), Undecided)
    with pytest.raises(CheckerUndecided):
        matches(tag, ["ab"])
    for style in ("qwen_xml", "glm_xml"):
        assert undecided_constructs({"type": "json_schema", "json_schema": {}, "style": style})
    assert undecided_constructs({"type": "qwen_xml_parameter"})


def test_automatic_end_detection_follows_the_nearest_tag() -> None:
    inner = {"type": "tag", "begin": "<i>", "content": {"type": "any_text"}, "end": "</i>"}
    outer = {
        "type": "tag",
        "begin": "<o>",
        "content": {"type": "sequence", "elements": [inner, {"type": "any_text"}]},
        "end": "</o>",
    }
    assert verdict(outer, ["<o><i>x</o></i>y</o>"]) is True  # </o> is text inside <i>
    assert verdict(outer, ["<o><i>x</i>y</i></o>"]) is True  # </i> is text after it
    assert verdict(outer, ["<o><i>x</i>y</o>z</o>"]) is False
    tok = {
        "type": "tag",
        "begin": {"type": "token", "token": 1},
        "content": {"type": "any_text"},
        "end": {"type": "token", "token": 2},
    }
    assert verdict(tok, [1, "</x>", 2]) is True  # no string end to exclude (levels differ)


# -- generated texts -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", ["llama", "qwen_3", "harmony", "kimi", "deepseek_r1", "exaone"])
def test_generated_texts_aim_where_they_say(template: str) -> None:
    """On templates the checker decides: every valid-intent text is accepted, and each targeted intent
    the tag allows produces at least one text the checker rejects."""
    records = [r for r in _RECORDS if r.options.template == template and r.tag is not None]
    rejected: set[str] = set()
    for r in records[::7]:
        names = [t["function"]["name"] for t in TOOLS[r.options.tools]]
        texts = tool_call_texts(r.tag, r.special_tokens, names)
        assert texts
        for t in texts:
            assert not isinstance(t.expected, Undecided), (r.options.id, t)
            if t.intent == "valid":
                assert t.expected is True, (r.options.id, t.parts)
            elif t.expected is False:
                rejected.add(t.intent)
    assert {"bad_arguments", "wrong_name", "missing_end", "trigger_in_text"} <= rejected
