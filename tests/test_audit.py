"""``maskcert audit`` and ``maskcert audit-extract`` (docs/audit.md §1–4): the case format and its
errors, the reference's decisions on hand-written cases (a deliberately wrong label must be reported
with its section, a refused spec must stay undecided), the three extractors on snippets written in each
engine's test style, the CLI's exit codes, and the contradictions found in the engines' current
releases (tests/data/audit/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from maskcert.audit import (
    AuditCaseError,
    Label,
    Status,
    audit,
    case_from_json,
    decide_case,
    iter_cases,
    read_cases,
)
from maskcert.audit_extract import ENGINE_PROFILES, ExtractError, extract
from maskcert.audit_rust import RustSyntaxError, evaluate, parse
from maskcert.cli import main

DATA = Path(__file__).resolve().parent / "data" / "audit"


def _case(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "engine": "toy",
        "source": "tests/test_toy.py:1",
        "kind": "json_schema",
        "spec": {"type": "integer"},
        "instance": "1",
        "expected": "accept",
    }
    base.update(kw)
    return base


# -- the format -------------------------------------------------------------------------------------


def test_a_case_round_trips() -> None:
    obj = _case(profile={"whitespace": "none"}, note="n")
    case = case_from_json(obj)
    assert case.expected is Label.ACCEPT
    assert case.to_json() == obj


@pytest.mark.parametrize(
    ("obj", "field", "expected"),
    [
        ({k: v for k, v in _case().items() if k != "spec"}, "spec", "required"),
        (_case(kind="xml"), "kind", "one of json_schema"),
        (_case(expected="maybe"), "expected", "one of accept, reject, prefix, not_prefix"),
        (_case(kind="regex", spec=["a"]), "spec", "a pattern"),
        (_case(kind="choice", spec=["a", 1]), "spec", "a list of strings"),
        (_case(instance=3), "instance", "a string"),
        (_case(profile={"whitespaces": 1}), "profile", "JsonProfile fields"),
        (_case(profile={"whitespace": -1}), "profile", "valid JsonProfile values"),
        (_case(kind="regex", spec="a", profile={}), "profile", "json_schema case only"),
        (_case(label="x"), "label", "only the fields"),
    ],
)
def test_a_malformed_case_names_its_field(obj: dict[str, Any], field: str, expected: str) -> None:
    with pytest.raises(AuditCaseError) as e:
        case_from_json(obj, "cases.jsonl", 7)
    assert e.value.field == field and e.value.line == 7
    assert "cases.jsonl:7" in str(e.value) and expected in str(e.value)
    assert isinstance(e.value, ValueError)


def test_a_line_that_is_not_json_names_its_line() -> None:
    lines = [json.dumps(_case()), "", "{not json"]
    with pytest.raises(AuditCaseError) as e:
        list(iter_cases(lines, "c.jsonl"))
    assert e.value.line == 3 and e.value.field == ""
    assert "one JSON object per line" in str(e.value)


# -- decisions --------------------------------------------------------------------------------------


def test_labels_that_hold_agree() -> None:
    cases = [
        _case(),
        _case(instance='"a"', expected="reject"),
        _case(kind="regex", spec="a+b", instance="aab"),
        _case(kind="regex", spec="a+b", instance="aa", expected="prefix"),
        _case(kind="regex", spec="a+b", instance="ba", expected="not_prefix"),
        _case(kind="choice", spec=["yes", "no"], instance="no"),
        _case(kind="gbnf", spec='root ::= "x" [0-9]+', instance="x12"),
    ]
    report = audit([case_from_json(c) for c in cases])
    assert [r.status for r in report.results] == [Status.AGREE] * len(cases)
    assert report.exit_code == 0
    counts = {"cases": 7, "agree": 7, "contradiction": 0, "undecided": 0, "oracle_disagrees": 0}
    assert report.counts() == {"toy": counts}


def test_a_wrong_label_is_reported_with_its_keyword_and_section() -> None:
    case = case_from_json(_case(spec={"type": "integer", "minimum": 3}, instance="2"))
    result = decide_case(case)
    assert result.status is Status.CONTRADICTION
    assert "'minimum'" in result.section and "Validation §6.2.4" in result.section
    assert not result.oracle  # the independent validator agrees with the reference
    report = audit([case])
    assert report.exit_code == 1
    assert "Validation §6.2.4" in report.render_text()


def test_a_valid_text_labelled_reject_names_what_was_overlooked() -> None:
    integer = decide_case(case_from_json(_case(instance="1.0", expected="reject")))
    assert integer.status is Status.CONTRADICTION
    assert "Validation §6.1.1" in integer.section and "zero fractional part" in integer.section
    extension = decide_case(
        case_from_json(_case(spec={"type": "integer", "minDigits": 3}, instance="10", expected="reject"))
    )
    assert "'minDigits'" in extension.section and "Core §6.5" in extension.section


def test_a_text_that_is_no_json_cites_rfc_8259() -> None:
    result = decide_case(case_from_json(_case(instance="01")))
    assert result.status is Status.CONTRADICTION
    assert "RFC 8259 §2" in result.section


def test_a_format_contradiction_cites_its_rfc() -> None:
    obj = _case(
        spec={"type": "string", "format": "date"}, profile={"formats": "assert"}, instance='"2021-02-29"'
    )
    result = decide_case(case_from_json(obj))
    assert result.status is Status.CONTRADICTION
    assert "'format'" in result.section and "RFC 3339" in result.section


def test_a_dead_text_labelled_prefix_names_the_byte_and_a_live_one_its_completion() -> None:
    dead = decide_case(case_from_json(_case(kind="regex", spec="ab", instance="ax", expected="prefix")))
    assert dead.status is Status.CONTRADICTION and "byte 1" in dead.section
    alive = decide_case(case_from_json(_case(kind="regex", spec="a+b", instance="aa", expected="not_prefix")))
    assert alive.status is Status.CONTRADICTION and "completes it with b'b'" in alive.section


def test_a_refused_spec_is_undecided_with_its_reason() -> None:
    result = decide_case(case_from_json(_case(kind="regex", spec=r"(a)\1", instance="aa")))
    assert result.status is Status.UNDECIDED
    assert "refused by the reference" in result.verdict and "backreference" in result.verdict
    malformed = decide_case(case_from_json(_case(spec={"type": "float"})))
    assert malformed.status is Status.UNDECIDED and "malformed spec" in malformed.verdict
    assert audit([case_from_json(_case(kind="regex", spec=r"(a)\1", instance="aa"))]).exit_code == 0


def test_a_label_that_holds_only_under_the_profile_says_so() -> None:
    obj = _case(
        spec={"type": "object", "properties": {"a": {}, "b": {}}},
        profile={"property_order": "schema"},
        instance='{"b":1,"a":2}',
        expected="reject",
    )
    result = decide_case(case_from_json(obj))
    assert result.status is Status.AGREE
    assert "JSON Schema alone" in result.plain and "accept" in result.plain


# -- extractors -------------------------------------------------------------------------------------

OUTLINES_SNIPPET = r"""
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_schema_matches_regex() {
        for (schema, regex, a_match, not_a_match) in [
            (
                r#"{"title": "Foo", "type": "integer"}"#,
                INTEGER,
                vec!["0", "1", "-1"],
                vec!["01", "1.3", "t"],
            ),
            (
                r#"{"type": "number"}"#,
                format!(r#"{NUMBER}"#).as_str(),
                vec!["1.5"],
                vec!["1.3e9"],
            ),
        ] {
            let result = regex_from_str(schema, None, None).expect("To regex failed");
            let re = Regex::new(&result).expect("Regex failed");
            for m in a_match {
                should_match(&re, m);
            }
            for not_m in not_a_match {
                should_not_match(&re, not_m);
            }
        }
    }

    #[test]
    fn with_whitespace_patterns() {
        let schema = r#"{"type": "string"}"#;
        let regex = regex_from_str(schema, Some(r"[\n ]*"), None).expect("To regex failed");
        let re = Regex::new(&regex).expect("Regex failed");
        should_match(&re, "\"a\"");
    }
}
"""

LLGUIDANCE_SNIPPET = r"""
use serde_json::{json, Value};

lazy_static! {
    static ref SCHEMA: Value = json!({"type":"object", "properties": {"a": {"type":"integer"}}, "required": ["a"]});
}

#[rstest]
#[case::ok(&json!({"a": 1}))]
#[case(&json!({"a": 2}))]
fn single(#[case] obj: &Value) {
    json_schema_check(&SCHEMA, obj, true);
}

#[test]
fn integers() {
    let schema = &json!({"type":"integer"});
    json_test_many(schema, &[json!(1), json!(-2)], &[json!(1.0), json!("1")]);
}

#[rstest]
fn computed(#[values(1, 2)] bound: i64) {
    for i in 0..10 {
        json_schema_check(&json!({"minimum": bound}), &json!(i), i >= bound);
    }
}

#[test]
fn lark() {
    lark_str_test_many(
        r#"start: "a" "b""#,
        &["ab"],
        &["FINAL_REJECT:a", "b"],
    );
    let g = format!(r#"start: %json {}"#, json!({"type": "string"}));
    lark_str_test(&g, true, "\"x\"", true);
}
"""

LMFE_SNIPPET = """
import pytest

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

def test_json_schema_parsing_with_string(string, schema_dict, expect_success):
    pass

def _test_regex_parsing(text, regex, expect_success):
    pass

def test_number():
    test_json_schema_parsing_with_string('{"n": 1}', SCHEMA, True)
    test_json_schema_parsing_with_string('{"n": "x"}', SCHEMA, expect_success=False)
    test_json_schema_parsing_with_string('{"n": 1}', Model.model_json_schema(), True)

@pytest.mark.parametrize("text,ok", [("abc", True), ("abd", False)])
def test_regex(text, ok):
    _test_regex_parsing(text, "abc", ok)
"""


def _tree(tmp_path: Path, files: dict[str, str], pkg_info: str = "") -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    if pkg_info:
        (tmp_path / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nVersion: {pkg_info}\n", encoding="utf-8")
    return tmp_path


def test_outlines_core_tables_become_cases(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"src/json_schema/mod.rs": OUTLINES_SNIPPET}, "0.2.14")
    x = extract("outlines-core", root)
    assert x.version == "0.2.14"
    got = [(c.spec, c.instance, c.expected.value) for c in x.cases]
    assert got == [
        ({"title": "Foo", "type": "integer"}, "0", "accept"),
        ({"title": "Foo", "type": "integer"}, "1", "accept"),
        ({"title": "Foo", "type": "integer"}, "-1", "accept"),
        ({"title": "Foo", "type": "integer"}, "01", "reject"),
        ({"title": "Foo", "type": "integer"}, "1.3", "reject"),
        ({"title": "Foo", "type": "integer"}, "t", "reject"),
        ({"type": "number"}, "1.5", "accept"),
        ({"type": "number"}, "1.3e9", "reject"),
    ]
    first = x.cases[0]
    assert first.profile == dict(ENGINE_PROFILES["outlines-core"])
    # the line of the text itself, then the assertion that reads it
    assert first.source.startswith(
        "src/json_schema/mod.rs:12 test_schema_matches_regex[0][0] (asserted at line 25)"
    )
    assert [s.source for s in x.skipped] == ["src/json_schema/mod.rs:38 with_whitespace_patterns"]
    report = audit(x.cases)
    bad = [r for r in report.results if r.status is Status.CONTRADICTION]
    assert [r.case.instance for r in bad] == ["1.3e9"]  # RFC 8259 §6: the exponent sign is optional
    assert "RFC 8259 §6" in bad[0].section


def test_llguidance_helpers_become_cases(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"parser/tests/test_snippet.rs": LLGUIDANCE_SNIPPET})
    x = extract("llguidance", root)
    got = [(c.kind, c.instance, c.expected.value) for c in x.cases]
    assert got == [
        ("json_schema", '{"a":1}', "accept"),
        ("json_schema", '{"a":2}', "accept"),
        ("json_schema", "1", "accept"),
        ("json_schema", "-2", "accept"),
        ("json_schema", "1.0", "reject"),
        ("json_schema", '"1"', "reject"),
        ("lark", "ab", "accept"),
        ("lark", "a", "prefix"),
        ("lark", "b", "not_prefix"),
        ("lark", '"x"', "accept"),
    ]
    assert x.cases[-1].spec == 'start: %json {"type":"string"}'
    assert "single::ok" in x.cases[0].source
    # the loop's expectation is computed: one record for the test, not one per parameter value
    assert len(x.skipped) == 1 and "computed" in x.skipped[0].source
    statuses = {r.case.instance: r.status for r in audit(x.cases).results}
    assert statuses["1.0"] is Status.CONTRADICTION  # Validation §6.1.1
    assert statuses["a"] is Status.AGREE and statuses["b"] is Status.AGREE


LLGUIDANCE_PY_SNIPPET = """
def check_grammar(grm, passing, failing):
    pass

def test_json():
    grm = LLMatcher.grammar_from_json_schema({"type": "object"}, {"whitespace_flexible": False})
    check_grammar(grm, ["{}"], ["FINAL_REJECT:{", "{ }"])

def test_regex_grammar():
    check_grammar(LLMatcher.grammar_from_regex(r"\\d+"), ["123"], ["1a2"])
"""


def test_llguidance_python_checks_become_cases(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {"parser/tests/test_empty.rs": "", "python/torch_tests/test_matcher.py": LLGUIDANCE_PY_SNIPPET},
    )
    x = extract("llguidance", root)
    got = [(c.kind, c.instance, c.expected.value) for c in x.cases]
    assert got == [
        ("json_schema", "{}", "accept"),
        ("json_schema", "{", "prefix"),
        ("json_schema", "{ }", "not_prefix"),
        ("regex", "123", "accept"),
        ("regex", "1a2", "not_prefix"),
    ]
    assert x.cases[0].profile is not None and x.cases[0].profile["whitespace"] == "none"
    assert audit(x.cases).exit_code == 0


def test_lmfe_calls_become_cases(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"tests/test_snippet.py": LMFE_SNIPPET})
    x = extract("lm-format-enforcer", root)
    got = [(c.kind, c.instance, c.expected.value) for c in x.cases]
    assert got == [
        ("json_schema", '{"n": 1}', "accept"),
        ("json_schema", '{"n": "x"}', "reject"),
        ("regex", "abc", "accept"),
        ("regex", "abd", "reject"),
    ]
    assert len(x.skipped) == 1 and "pydantic" in x.skipped[0].reason
    assert audit(x.cases).exit_code == 0


def test_extract_refuses_what_is_not_an_engine_source(tmp_path: Path) -> None:
    with pytest.raises(ExtractError):
        extract("xgrammar", tmp_path)
    with pytest.raises(ExtractError):
        extract("llguidance", tmp_path)
    with pytest.raises(ExtractError, match="sdists ship no tests"):
        extract("lm-format-enforcer", tmp_path)


def test_the_rust_reader() -> None:
    source = 'vec!["a\\x41\\u{1F600}", r#"b"c"#, "d\\\n        e"]'  # escapes, a raw string, a continuation
    assert evaluate(parse(source), {}) == ["aA\U0001f600", 'b"c', "de"]
    assert evaluate(parse('json!({"a": [1, -2.5, null, true], "b": x})'), {"x": "y"}).value == {
        "a": [1, -2.5, None, True],
        "b": "y",
    }
    assert evaluate(parse('format!("{{{}}} {n}", 1, n = "k")'), {}) == "{1} k"
    assert "not bound" in evaluate(parse("unknown"), {}).reason
    with pytest.raises(RustSyntaxError):
        parse("fn f() { (]")


# -- the CLI ----------------------------------------------------------------------------------------


def _write(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path / "good.jsonl", [_case()])
    bad = _write(tmp_path / "bad.jsonl", [_case(), _case(instance="1.5")])
    assert main(["audit", str(good)]) == 0
    assert capsys.readouterr().out.startswith("toy: 1 cases, 1 agree")
    assert main(["audit", str(bad), "--format", "json", "--out", str(tmp_path / "out")]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["counts"]["toy"]["contradiction"] == 1
    assert (tmp_path / "out" / "audit.txt").read_text(encoding="utf-8").startswith("toy: 2 cases")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"engine": "x"}\n', encoding="utf-8")
    assert main(["audit", str(broken)]) == 2
    assert "broken.jsonl:1 field 'source'" in capsys.readouterr().err
    assert main(["audit-extract", "llguidance", str(tmp_path)]) == 2


def test_cli_extract_prints_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path / "src", {"tests/test_snippet.py": LMFE_SNIPPET})
    assert main(["audit-extract", "lm-format-enforcer", str(root)]) == 0
    out, err = capsys.readouterr()
    cases = list(iter_cases(out.splitlines()))
    assert len(cases) == 4 and "not read:" in err


# -- the engines' current releases ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["outlines-core-0.2.14.jsonl", "llguidance-1.9.1.jsonl"])
def test_the_engines_contradictions_stay_contradictions(name: str) -> None:
    """Each labelled case of tests/data/audit/ is one the reference found to contradict the spec in
    the engine's release, its deciding section in ``note``: a change of the reference that turns one
    into an agreement is either a fix of the reference (update the file) or a regression."""
    cases = read_cases(DATA / name)
    assert cases
    for result in audit(cases).results:
        assert result.status is Status.CONTRADICTION, (result.case.source, result.verdict)
        assert not result.oracle, (result.case.source, result.oracle)
        assert result.case.note and result.case.note in result.section, (result.case.note, result.section)
