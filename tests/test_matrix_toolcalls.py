"""Tool-call rows of ``maskcert matrix`` (issue 29): one per structural-tag format type, per model
template of the tool-call snapshot and per Lark tool-call construct; certified on a vocabulary with the
special tokens they name; a probe only the reference refuses is a ``not_decided`` cell, an engine without
the spec kind a ``refused`` cell whose reason names the kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maskcert.matrix import (
    STATUSES,
    cell_status,
    matrix_from_reports,
    run_matrix,
    select_features,
    toolcall_vocabulary,
)
from props.backends import BackendUnavailable, adapter_class
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
from props.corpus.features import FEATURES, TOOLCALL_FEATURES, TOOLCALL_SPECIAL_TOKENS
from props.corpus.toolcalls import load_snapshot
from refdecoder import special_token_bytes

# xgrammar 0.2.9's format types (docs/structural_tag.md), as issue 29 lists them.
FORMAT_TYPES = {
    "const_string",
    "json_schema",
    "any_text",
    "regex",
    "grammar",
    "sequence",
    "or",
    "tag",
    "triggered_tags",
    "tags_with_separator",
    "optional",
    "plus",
    "star",
    "repeat",
    "dispatch",
    "token",
    "exclude_token",
    "any_tokens",
    "token_triggered_tags",
    "token_dispatch",
    "qwen_xml_parameter",
}
LARK_CONSTRUCTS = {"special-token", "special-token-id", "json-between-tokens", "ignore", "lazy"}


def _engine(name: str) -> None:
    try:
        adapter_class(name)
    except BackendUnavailable as e:
        pytest.skip(f"{name} is not installed: {e}")


def test_rows_per_format_type_template_and_lark_construct() -> None:
    ids = {f.id for f in TOOLCALL_FEATURES}
    assert len(ids) == len(TOOLCALL_FEATURES) and not ids & {f.id for f in FEATURES}
    assert {f"structural_tag/{t}" for t in FORMAT_TYPES} <= ids
    assert {f"lark/{c}" for c in LARK_CONSTRUCTS} <= ids
    _, records = load_snapshot()
    templates = {r.options.template for r in records if r.tag is not None}
    assert templates and {f"toolcall/{t}" for t in templates} <= ids
    for f in TOOLCALL_FEATURES:
        assert len(f.probes) == 1 and f.description
        (case,) = f.probes
        assert case.covers == (f.id,) and case.name.startswith(f.id + "#")
        assert case.spec.kind == (SpecKind.LARK if f.id.startswith("lark/") else SpecKind.STRUCTURAL_TAG)
        assert f.kind == case.spec.kind.value
    # every row is selectable, and the default selection has them
    assert {f.id for f in select_features(["toolcall"])} == {i for i in ids if i.startswith("toolcall/")}
    assert ids <= {f.id for f in select_features()}


def test_the_probes_vocabulary_has_their_special_tokens() -> None:
    vocab = toolcall_vocabulary()
    names = dict(vocab.special_names)
    # <[1]>, <[2]> in lark/special-token-id are the tool-call pair: ids in TOOLCALL_SPECIAL_TOKENS order after EOS
    assert [names[i + 1] for i in range(len(TOOLCALL_SPECIAL_TOKENS))] == list(TOOLCALL_SPECIAL_TOKENS)
    for f in TOOLCALL_FEATURES:
        spec = f.probes[0].spec.naming_special_tokens(vocab.special_names)
        assert set(spec.special_names.values()) <= set(TOOLCALL_SPECIAL_TOKENS), f.id


def test_not_decided_status() -> None:
    assert "not_decided" in STATUSES
    assert cell_status([], 0, 0, 0, 1, reference_refused=1) == "not_decided"
    assert cell_status([], 0, 1, 0, 2, reference_refused=1) == "refused"  # the engine refused one itself
    assert cell_status([], 1, 0, 0, 2, reference_refused=1) == "exact"  # decided on the probe it checked


def test_witnesses_show_special_tokens_by_name() -> None:
    from maskcert.matrix import _render

    text = b"call " + special_token_bytes(1) + b"x" + special_token_bytes(7)
    lark = SpecRef(SpecKind.LARK, {"text": "start: x", "special_tokens": {"<|tool_call|>": 1}}, "lark/x#a")
    f = Finding(Invariant.SOUNDNESS, "b", "1", lark, "t", "fp", message="m")
    assert _render(text, f) == "call <|tool_call|>x<[7]>"
    plain = f.with_(spec=SpecRef(SpecKind.REGEX, "a", "regex/x#a"))
    assert _render(b"a\xff", plain) == "a\\xff"


def test_statuses_come_from_findings_on_the_toolcall_vocabulary(tmp_path: Path) -> None:
    """A backend that never offers EOS is incomplete on a tool-call row as on any other, the
    reference exact, and a probe both refuse is refused; the tool-call report sits in toolcalls/."""
    rows = ["structural_tag/const_string", "lark/special-token", "structural_tag/qwen_xml_parameter"]
    m = run_matrix(["reference", "tests._toys:NoEos"], features=["json_schema/const", *rows], out=tmp_path)
    status = {(c["engine"], c["feature"]): c for c in m.data["cells"]}
    assert status["reference", "structural_tag/const_string"]["status"] == "exact"
    assert status["reference", "lark/special-token"]["status"] == "exact"
    refused = status["reference", "structural_tag/qwen_xml_parameter"]
    assert refused["status"] == "refused" and "qwen_xml_parameter" in refused["reason"]
    toy = status["tests._toys:NoEos", "structural_tag/const_string"]
    # EOS withheld where the text is complete: an eos or liveness finding, never a soundness one
    assert toy["status"] == "incomplete" and toy["defects"]
    assert {d["invariant"] for d in toy["defects"]} <= {"eos", "liveness"}
    assert toy["defects"][0]["link"].startswith("tests._toys:NoEos/toolcalls/report.html#finding-")
    assert status["tests._toys:NoEos", "lark/special-token"]["status"] == "incomplete"
    assert status["tests._toys:NoEos", "json_schema/const"]["status"] == "incomplete"
    assert m.data["toolcall_tokenizer"]["name"] == "bpe-toolcall" and m.data["tokenizer"]["name"] == "bpe"
    assert (tmp_path / "reference" / "toolcalls" / "report.json").exists()
    # folded back from the report directories, the same cells
    again = matrix_from_reports([tmp_path / "reference"], features=["json_schema/const", *rows])
    assert {c["feature"]: c["status"] for c in again.data["cells"]} == {
        f: status["reference", f]["status"] for f in ["json_schema/const", *rows]
    }


def test_xgrammar_rows(tmp_path: Path) -> None:
    """A construct only the reference refuses is not decided (with the reference's reason), Lark is a
    kind xgrammar does not have (a refused cell that says so), a template row is certified."""
    _engine("xgrammar")
    rows = [
        "structural_tag/qwen_xml_parameter",
        "lark/special-token",
        "toolcall/llama",
        "structural_tag/token",
    ]
    m = run_matrix(["xgrammar"], features=rows, out=tmp_path)
    cells = {c["feature"]: c for c in m.data["cells"]}
    undecided = cells["structural_tag/qwen_xml_parameter"]
    assert undecided["status"] == "not_decided" and undecided["probes"]["reference_refused"] == 1
    assert "Qwen XML" in undecided["reason"]
    lark = cells["lark/special-token"]
    assert lark["status"] == "refused" and "Lark" in lark["reason"]
    for f in ("toolcall/llama", "structural_tag/token"):
        assert cells[f]["status"] in STATUSES and cells[f]["probes"]["checked"] == 1, cells[f]
    md = (tmp_path / "matrix.md").read_text(encoding="utf-8")
    assert "## Not decided by the reference" in md and "`structural_tag/qwen_xml_parameter`" in md
    data = json.loads((tmp_path / "matrix.json").read_text(encoding="utf-8"))
    assert data["engines"][0]["toolcall_report"] == "xgrammar/toolcalls/report.html"


def test_llguidance_rows(tmp_path: Path) -> None:
    _engine("llguidance")
    rows = ["lark/json-between-tokens", "structural_tag/tag"]
    m = run_matrix(["llguidance"], features=rows, out=tmp_path)
    cells = {c["feature"]: c for c in m.data["cells"]}
    tag = cells["structural_tag/tag"]
    assert tag["status"] == "refused" and "structural tag" in tag["reason"]
    assert cells["lark/json-between-tokens"]["probes"]["checked"] == 1
