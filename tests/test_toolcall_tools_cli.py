"""``maskcert certify --tools`` (maskcert/toolcall_certify.py): bad tools lists as typed errors, the
JSON Schema vLLM sends for engines without a tool-call API, and xgrammar's templates certified with
their promises on a small vocabulary (skipped without xgrammar)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from maskcert.certification import CertifyError
from maskcert.cli import main
from maskcert.toolcall_certify import ToolCallRequest, load_tools, serving_schema
from props.corpus.toolcalls import TOOLS, ToolsError


def _write(tmp_path: Path, tools: Any, name: str = "tools.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(tools), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("tools", "names"),
    [
        ([TOOLS["one_tool"][0], TOOLS["one_tool"][0]], ("'get_weather'", "/1/function/name")),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}],
            ("'f'", "/0/function/parameters/type"),
        ),
        (
            [{"type": "function", "function": {"name": "g", "parameters": {"$ref": "#/$defs/none"}}}],
            ("'g'", "/0/function/parameters/$ref"),
        ),
        ({"type": "function"}, ("a list of tools",)),
    ],
)
def test_bad_tools_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tools: Any, names: tuple[str, ...]
) -> None:
    path = _write(tmp_path, tools)
    with pytest.raises(CertifyError) as e:
        load_tools(path)
    assert str(path) in str(e.value) and all(n in str(e.value) for n in names)
    argv = ["certify", "--backend", "reference", "--tools", str(path), "--tool-choice", "required"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert all(n in err for n in names), err


def test_unknown_tool_choice_and_no_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, TOOLS["many_tools"])
    for choice, expected in (("nope", "search.web"), ("auto", "serving stacks send no JSON Schema")):
        argv = ["certify", "--backend", "reference", "--tools", str(path), "--tool-choice", choice]
        assert main([*argv, "--out", str(tmp_path / "out")]) == 2
        assert expected in capsys.readouterr().err
    with pytest.raises(CertifyError, match="--reasoning"):
        ToolCallRequest(str(path), reasoning="sometimes")


def test_serving_schema_is_vllms() -> None:
    tools = TOOLS["many_tools"]
    required = serving_schema(tools, "required")
    assert required["type"] == "array" and required["minItems"] == 1
    assert [c["properties"]["name"]["enum"] for c in required["items"]["anyOf"]] == [
        [t["function"]["name"]] for t in tools
    ]
    assert "person" in required["$defs"]  # create_event's $ref resolves from the root
    check = jsonschema.Draft202012Validator(required)
    person = {"title": "t", "attendees": [{"name": "Ada"}]}
    assert check.is_valid(
        [{"name": "create_event", "parameters": person}, {"name": "ping", "parameters": {}}]
    )
    assert not check.is_valid([{"name": "create_event", "parameters": {"title": "t", "attendees": [{}]}}])
    assert not check.is_valid([])
    assert not check.is_valid([{"name": "get_weather", "parameters": {}}])  # city is required
    assert serving_schema(tools, "search.web") == tools[1]["function"]["parameters"]
    assert serving_schema(tools, "ping") == {"type": "object", "properties": {}}
    clash = copy.deepcopy(tools)
    clash[1]["function"]["parameters"]["$defs"] = {"person": {"type": "string"}}
    with pytest.raises(ToolsError, match="'create_event' at /3/function/parameters/[$]defs/person") as e:
        serving_schema(clash, "required")
    assert "'search.web' defines 'person' otherwise" in str(e.value)


def test_cli_tools_schema_engine(tmp_path: Path) -> None:
    """An engine without a tool-call API: the schema is written and certified as a --schema."""
    path = _write(tmp_path, TOOLS["many_tools"])
    out = tmp_path / "out"
    argv = ["certify", "--backend", "reference", "--tools", str(path), "--tool-choice", "required"]
    assert main([*argv, "--tokenizer", "byte", "--examples", "1", "--out", str(out)]) == 0
    written = json.loads((out / "toolcalls" / "required.schema.json").read_text(encoding="utf-8"))
    assert written == serving_schema(TOOLS["many_tools"], "required")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["specs"]["checked"] == 1 and not report["findings"]


def test_cli_tools_xgrammar_templates_and_promises(tmp_path: Path) -> None:
    """xgrammar's llama and harmony templates for tool_choice='none': both tags certified; llama's
    ('none' is free text in which a call's text may appear) breaks its promise, harmony's keeps it;
    the finding's reproducer shows xgrammar itself letting the call finish."""
    pytest.importorskip("xgrammar", reason="xgrammar is not installed")
    path = _write(tmp_path, TOOLS["one_tool"])
    out = tmp_path / "out"
    argv = ["certify", "--backend", "xgrammar", "--in-process", "--tools", str(path), "--tool-choice", "none"]
    argv += ["--model-format", "llama", "--model-format", "harmony", "--tokenizer", "bpe", "--examples", "1"]
    assert main([*argv, "--out", str(out)]) == 1
    assert sorted(p.name for p in (out / "toolcalls").iterdir()) == ["harmony.json", "llama.json"]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert {s["name"] for s in report["corpus"]} >= {"cli"}
    promised = [f for f in report["findings"] if f["walk"] == "template_promise"]
    assert [(f["certificate"]["options"]["template"], f["certificate"]["promise"]) for f in promised] == [
        ("llama", "none")
    ]
    f = promised[0]
    assert f["certificate"]["witness"]["text"] == '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert f["tokenizer"] == "bpe" and f["prefix_ids"] and f["repro"]
    proc = subprocess.run(
        [sys.executable, str(out / f["repro"])], cwd=out, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout, proc.stdout + proc.stderr
