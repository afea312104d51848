"""--profile (maskcert/json_profiles.py) and check-schema --explain (maskcert/explain.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import refdecoder
from maskcert.cli import main
from maskcert.explain import keyword_decisions
from maskcert.json_profiles import ProfileError, parse_profile
from refdecoder import JsonProfile

OPEN = {"type": "object", "properties": {"a": {"type": "string", "format": "email"}}, "x-vendor": 1}


def test_items_apply_in_order_on_json_schemas_own_reading() -> None:
    assert parse_profile([]) == JsonProfile()
    assert parse_profile(["reference"]) == JsonProfile(allow_duplicate_keys=True)
    p = parse_profile(["reference", "whitespace=2", "formats=assert", "top_level_whitespace=false"])
    assert p == JsonProfile(
        allow_duplicate_keys=True, whitespace=2, formats="assert", top_level_whitespace=False
    )


@pytest.mark.parametrize(
    "item, expected",
    [
        ("nope", "a profile name"),
        ("colour=red", "KEY=VALUE with KEY one of"),
        ("whitespace=banana", "a valid whitespace"),
        ("allow_duplicate_keys=maybe", "allow_duplicate_keys=true or allow_duplicate_keys=false"),
    ],
)
def test_bad_items_are_typed_errors_naming_the_item(item: str, expected: str) -> None:
    with pytest.raises(ProfileError, match=expected) as info:
        parse_profile([item])
    assert item in str(info.value)


def test_an_engines_declared_profile() -> None:
    pytest.importorskip("lmformatenforcer")
    from props.backends.lmfe import declared_profile

    assert parse_profile(["lm-format-enforcer"]) == declared_profile().json


def test_check_schema_reads_the_schema_under_the_profile_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "open.json"
    f.write_text(json.dumps(OPEN))
    assert main(["check-schema", str(f)]) == 0  # repeated keys are excluded by key memory
    assert main(["check-schema", str(f), "--profile", "allow_duplicate_keys=true"]) == 0
    g = tmp_path / "idn.json"
    g.write_text(json.dumps({"type": "string", "format": "idn-hostname"}))
    assert main(["check-schema", str(g)]) == 0  # formats are annotations by default
    capsys.readouterr()
    assert main(["check-schema", str(g), "--profile", "formats=assert"]) == 1
    assert "keyword=format" in capsys.readouterr().out
    assert main(["check-schema", str(f), "--profile", "whitespace=-1"]) == 2
    assert "expected a valid whitespace" in capsys.readouterr().err


def test_explain_lists_every_keyword_with_its_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {(p, k): d for p, k, d, _ in keyword_decisions(OPEN, JsonProfile())}
    assert rows[("/", "type")] == "enforced"
    assert rows[("/properties/a", "format")] == "annotation"
    assert rows[("/", "x-vendor")] == "ignored"
    rows = {(p, k): d for p, k, d, _ in keyword_decisions(OPEN, JsonProfile(formats="assert"))}
    assert rows[("/properties/a", "format")] == "enforced"
    refused = {"dependencies": {"a": ["b"]}, "anyOf": [{"$recursiveRef": "#"}]}
    rows = {(p, k): d for p, k, d, _ in keyword_decisions(refused, JsonProfile())}
    assert rows[("/", "dependencies")] == "enforced"  # a draft 4-7 keyword in a 2020-12 schema: applied
    for mode, decision in (("ignore", "annotation"), ("refuse", "refused")):
        profile = JsonProfile(legacy_dependencies=mode)  # type: ignore[arg-type]
        rows = {(p, k): d for p, k, d, _ in keyword_decisions(refused, profile)}
        assert rows[("/", "dependencies")] == decision
    assert rows[("/anyOf/0", "$recursiveRef")] == "refused"
    f = tmp_path / "s.json"
    f.write_text(json.dumps(refused))
    assert main(["check-schema", str(f), "--explain"]) == 1
    out = capsys.readouterr().out
    assert "profile: " in out and "/anyOf/0" in out and out.rstrip().splitlines()[-1].startswith("refused:")


def test_certify_profile_is_for_the_reference_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--backend", "xgrammar", "--profile", "reference"]) == 2
    assert "expected --backend reference" in capsys.readouterr().err
    assert main(["certify", "--profile", "colour=red"]) == 2


def test_schema_property_order_is_part_of_the_spec_value() -> None:
    """Two schemas differing only in the order of ``properties`` are two languages under
    ``property_order="schema"``: their canonical forms (the compile cache's key, the fingerprint) differ."""
    profile = refdecoder.JsonProfile(property_order="schema", whitespace="none")
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    ba = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    g_ab = refdecoder.compile(refdecoder.JsonSchema(ab, profile))
    g_ba = refdecoder.compile(refdecoder.JsonSchema(ba, profile))
    assert g_ab.fingerprint != g_ba.fingerprint
    assert g_ab.accepts(b'{"a":1,"b":2}') and not g_ab.accepts(b'{"b":1,"a":2}')
    assert g_ba.accepts(b'{"b":1,"a":2}') and not g_ba.accepts(b'{"a":1,"b":2}')
    anyorder = refdecoder.JsonProfile(whitespace="none")
    assert refdecoder.JsonSchema(ab, anyorder).canonical() == refdecoder.JsonSchema(ba, anyorder).canonical()


def test_legacy_dependencies_readings_and_the_independent_validator() -> None:
    """``legacy_dependencies``: the reference and the independent validator read a 2020-12
    ``dependencies`` the same way in each mode; a bad value is a typed error; the default is left out
    of ``as_dict`` (fingerprints of earlier specs stay); a schema-form ``dependencies`` seen by
    ``unevaluatedProperties`` is refused under ``apply`` (no draft defines what it evaluates)."""
    from props.contract.findings import SpecKind, SpecRef
    from props.corpus import validate_output

    schema = {"properties": {"a": {}, "b": {}}, "dependencies": {"a": ["b"], "b": {"required": ["c"]}}}
    texts = ['{"a":1}', '{"a":1,"b":2}', '{"a":1,"b":2,"c":3}', '{"c":0}', '{"b":1}']
    for mode, accepted in (
        ("apply", {'{"a":1,"b":2,"c":3}', '{"c":0}'}),
        ("ignore", set(texts)),
    ):
        profile = JsonProfile(legacy_dependencies=mode)  # type: ignore[arg-type]
        g = refdecoder.compile(refdecoder.JsonSchema(schema, profile))
        spec = SpecRef(SpecKind.JSON_SCHEMA, schema, "deps", "t", profile=profile.as_dict())
        for t in texts:
            assert g.accepts(t.encode()) == (t in accepted), (mode, t)
            assert (validate_output(spec, t.encode()) is None) == (t in accepted), (mode, t)
    assert "legacy_dependencies" not in JsonProfile().as_dict()
    assert JsonProfile(legacy_dependencies="ignore").as_dict()["legacy_dependencies"] == "ignore"
    with pytest.raises(refdecoder.SpecError, match="legacy_dependencies"):
        JsonProfile(legacy_dependencies="sometimes")  # type: ignore[arg-type]
    seen = {**schema, "unevaluatedProperties": False}
    with pytest.raises(refdecoder.Unsupported, match="evaluate properties"):
        refdecoder.compile(refdecoder.JsonSchema(seen, JsonProfile()))
    only_names = {
        "properties": {"a": {}, "b": {}},
        "dependencies": {"a": ["b"]},
        "unevaluatedProperties": False,
    }
    g = refdecoder.compile(refdecoder.JsonSchema(only_names, JsonProfile()))
    assert not g.accepts(b'{"a":1}') and g.accepts(b'{"a":1,"b":2}') and not g.accepts(b'{"c":1}')
    items = {"dependencies": {"a": {"required": ["b"]}}, "prefixItems": [True], "unevaluatedItems": False}
    g = refdecoder.compile(refdecoder.JsonSchema(items, JsonProfile()))  # objects only: no items evaluated
    verdicts = [g.accepts(t) for t in (b"[1]", b"[1,2]", b'{"a":1}', b'{"a":1,"b":2}')]
    assert verdicts == [True, False, False, True]
