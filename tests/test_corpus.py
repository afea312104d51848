"""The corpus and its independent validators (props.corpus).

* every builtin case is right by the independent validator (valid instances accepted in every
  serialization, invalid ones rejected) and by the reference (non-probes compile and agree; probes
  compile and agree, or are refused with ``Unsupported``);
* ``serializations`` gives distinct, valid JSON texts that parse back to the instance and keep to the
  profile (checked by ``validate_output``'s own profile checks);
* ``validate_output`` rejects what each profile restriction forbids, saying which;
* the external loaders load (skipped when the shared data is absent) and bad names or files raise
  ``CorpusError``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
import tokenizers_matrix
from props.contract.findings import SpecKind, SpecRef
from props.corpus import (
    Case,
    CorpusError,
    corpus_names,
    load_corpus,
    profile_of,
    reference_spec,
    serializations,
    validate_instance,
    validate_output,
)
from refdecoder import JsonProfile, MaskcertError, Unsupported

BUILTIN = load_corpus("builtin")
# Builtin probes the reference refuses today; one that starts compiling is an improvement (it must
# then agree with the validator like every other case), a refusal of any other case is a failure.
REFUSED_PROBES = {
    "uniqueItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "pattern-backreference",
    "pattern-lookahead",
    "regex-backreference",
    "regex-lookahead",
}
# Known reference defect: property_order="schema" reads the keys in sorted order once the object
# shape is an intersection (properties + additionalProperties: false), not in the schema's order.
# Builtin cases that show a known reference bug (name -> the bug); empty when none is known.
REFERENCE_BUGS: dict[str, str] = {}


def _texts(case: Case, instance: Any) -> list[str]:
    if case.spec.kind != "json_schema":
        return [instance]
    return serializations(instance, profile_of(case.spec), case.spec.source)


def _case_params() -> list[Any]:
    out = []
    for c in BUILTIN:
        marks = (
            [pytest.mark.xfail(strict=True, reason=REFERENCE_BUGS[c.name])]
            if c.name in REFERENCE_BUGS
            else []
        )
        out.append(pytest.param(c, id=f"{c.spec.kind}:{c.name}", marks=marks))
    return out


def test_builtin_shape() -> None:
    names = [c.name for c in BUILTIN]
    assert len(set(names)) == len(names), "builtin case names must be unique"
    kinds = Counter(c.spec.kind for c in BUILTIN)
    assert kinds[SpecKind.JSON_SCHEMA] >= 40 and kinds[SpecKind.REGEX] >= 10 and kinds[SpecKind.GBNF] >= 4
    assert kinds[SpecKind.CHOICE] >= 3
    for c in BUILTIN:
        assert c.valid and c.invalid and c.covers, c.name
        assert c.spec.corpus == "builtin"
    covered = {k for c in BUILTIN for k in c.covers}
    for kw in (
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "items",
        "prefixItems",
        "contains",
        "minContains",
        "maxContains",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "$ref",
        "$defs",
        "recursion",
        "uniqueItems",
        "unevaluatedProperties",
        "backreference",
    ):
        assert kw in covered, kw


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.spec.kind}:{c.name}") for c in BUILTIN])
def test_builtin_validator_verdicts(case: Case) -> None:
    for inst in case.valid:
        assert validate_instance(case.spec, inst) is None, inst
        for text in _texts(case, inst):
            assert validate_output(case.spec, text.encode()) is None, text
    for inst in case.invalid:
        assert validate_instance(case.spec, inst) is not None, inst
        for text in _texts(case, inst):
            assert validate_output(case.spec, text.encode()) is not None, text


@pytest.mark.parametrize("case", _case_params())
def test_builtin_reference_verdicts(case: Case) -> None:
    try:
        g = refdecoder.compile(reference_spec(case.spec))
    except Unsupported as e:
        assert case.refusal_probe, f"{case.name} is refused ({e}) but is not a refusal probe"
        assert case.name in REFUSED_PROBES, f"{case.name}: refused, not listed in REFUSED_PROBES: {e}"
        return
    for inst in case.valid:
        for text in _texts(case, inst):
            assert g.accepts(text.encode()), f"reference rejects valid {text!r}"
    for inst in case.invalid:
        for text in _texts(case, inst):
            assert not g.accepts(text.encode()), f"reference accepts invalid {text!r}"


def test_every_listed_refusal_is_a_builtin_probe() -> None:
    probes = {c.name for c in BUILTIN if c.refusal_probe}
    assert probes >= REFUSED_PROBES
    assert len(probes) > len(REFUSED_PROBES), "some probes are for keywords the reference enforces"


# -- serializations --------------------------------------------------------------------------------
_scalars: st.SearchStrategy[Any] = (
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.text(max_size=6)
)
_scalars = _scalars | st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)
_profiles = st.builds(
    JsonProfile,
    whitespace=st.sampled_from(["any", "none", 0, 1, 2, 5]),
    property_order=st.sampled_from(["any", "schema"]),
    unicode_escapes=st.booleans(),
    top_level_whitespace=st.booleans(),
)


@given(value=_json, profile=_profiles)
def test_serializations_round_trip_and_keep_to_the_profile(value: Any, profile: JsonProfile) -> None:
    texts = serializations(value, profile)
    assert texts and len(set(texts)) == len(texts)
    assert texts[0] == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    spec = SpecRef(SpecKind.JSON_SCHEMA, True, profile=profile.as_dict() | {"allow_duplicate_keys": True})
    for text in texts:
        assert json.loads(text) == value
        reason = validate_output(spec, text.encode())
        # A control character can only be written as \u00XX (json.dumps' choice for most of them).
        needs_u = any(ord(c) < 0x20 for s in _all_strings(value) for c in s)
        assert reason is None or (needs_u and "unicode_escapes" in reason), (text, reason)


def _all_strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for k, x in v.items() for s in [k, *_all_strings(x)]]
    if isinstance(v, list):
        return [s for x in v for s in _all_strings(x)]
    return []


def test_serialization_variants() -> None:
    value = {"b": [1, {"x": "é😀"}], "a": {}, "c": []}
    texts = serializations(value)
    assert json.dumps(value, indent=2, ensure_ascii=False) in texts
    assert json.dumps(value, ensure_ascii=False) in texts
    assert any("\\ud83d\\ude00" in t and "é" in t for t in texts), "astral escaped, BMP raw"
    assert any("\\u00e9" in t for t in texts)
    assert any("\t" in t and "\n" in t and "\r" in t for t in texts)
    assert any(t.index('"c"') < t.index('"b"') for t in texts), "keys reordered"
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    reversed_keys = json.dumps(dict(reversed(value.items())), separators=(",", ":"), ensure_ascii=False)
    assert serializations(value, JsonProfile(whitespace="none", unicode_escapes=False)) == [
        compact,
        reversed_keys,
    ]
    schema = {"type": "object", "properties": {"c": {}, "a": {}, "b": {"items": {"properties": {"x": {}}}}}}
    ordered = serializations(value, JsonProfile(property_order="schema"), schema)
    assert all(t.index('"c"') < t.index('"a"') < t.index('"b"') for t in ordered)
    assert all(
        max(map(len, _ws_runs(t)), default=0) <= 1 for t in serializations(value, JsonProfile(whitespace=1))
    )


def _ws_runs(text: str) -> list[str]:
    import re

    # outside strings only: drop the strings first
    return re.findall(r"[ \t\n\r]+", re.sub(r'"(?:[^"\\]|\\.)*"', '""', text))


# -- validate_output --------------------------------------------------------------------------------
def _js(schema: Any, **profile: Any) -> SpecRef:
    return SpecRef(SpecKind.JSON_SCHEMA, schema, "t", "test", profile or None)


def test_validate_output_json_text() -> None:
    s = _js({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert validate_output(s, b'{"a": 1}') is None
    assert "not UTF-8" in (validate_output(s, b'{"a": "\xff"}') or "")
    assert "not JSON" in (validate_output(s, b'{"a": NaN}') or "")
    assert "not JSON" in (validate_output(s, b'{"a": Infinity}') or "")
    assert "not JSON" in (validate_output(s, b'{"a": 1,}') or "")
    assert "surrogate" in (validate_output(_js({"type": "string"}), b'"\\ud800"') or "")
    assert validate_output(_js({"type": "string"}), b'"\\ud83d\\ude00"') is None
    assert "duplicate key 'a'" in (validate_output(s, b'{"a": 1, "a": 2}') or "")
    dups = _js({"type": "object", "properties": {"a": {"type": "integer"}}}, allow_duplicate_keys=True)
    assert validate_output(dups, b'{"a": 1, "a": 2}') is None
    assert "schema violation" in (validate_output(dups, b'{"a": "x", "a": 2}') or ""), (
        "every repeated value is judged"
    )
    assert "schema violation at $.a" in (validate_output(s, b'{"a": "1"}') or "")


def test_validate_output_profile_restrictions() -> None:
    obj = {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "integer"}}}
    assert "whitespace='none'" in (validate_output(_js(obj, whitespace="none"), b'{"z": 1}') or "")
    assert validate_output(_js(obj, whitespace="none"), b'{"z":1}') is None
    assert validate_output(_js({"type": "string"}, whitespace="none"), b'"a b"') is None, (
        "space inside a string"
    )
    assert "whitespace=1" in (validate_output(_js(obj, whitespace=1), b'{"z":  1}') or "")
    assert validate_output(_js(obj, whitespace=1), b' {"z": 1} ') is None
    no_u = _js({"type": "string"}, unicode_escapes=False)
    assert "unicode_escapes" in (validate_output(no_u, b'"\\u00e9"') or "")
    assert validate_output(no_u, '"é\\\\u"'.encode()) is None, (
        "an escaped backslash before u is no \\u escape"
    )
    order = _js(obj, property_order="schema")
    assert validate_output(order, b'{"z": 1, "a": 2}') is None
    assert "property_order" in (validate_output(order, b'{"a": 2, "z": 1}') or "")
    assert validate_output(order, b'{"z": 1, "q": 0}') is None
    assert "property_order" in (validate_output(order, b'{"q": 0, "a": 1}') or ""), (
        "undeclared keys come last"
    )
    strict = _js(obj, additional_properties_default=False)
    assert validate_output(strict, b'{"a": 1}') is None
    assert "additional_properties_default" in (validate_output(strict, b'{"b": 1}') or "")
    assert validate_output(_js(obj), b'{"b": 1}') is None
    tight = _js({"type": "integer"}, top_level_whitespace=False)
    assert validate_output(tight, b"1") is None
    assert "top_level_whitespace" in (validate_output(tight, b"1\n") or "")
    closed = _js({"type": "array", "prefixItems": [{"type": "integer"}]}, additional_items_default=False)
    assert validate_output(closed, b"[1]") is None
    assert "additional_items_default" in (validate_output(closed, b"[1, 2]") or "")
    assert validate_output(_js({"type": "array", "prefixItems": [{"type": "integer"}]}), b"[1, 2]") is None


def test_validate_output_formats_follow_the_profile() -> None:
    date = {"type": "string", "format": "date"}
    assert validate_output(_js(date), b'"not a date"') is None
    assert "schema violation" in (validate_output(_js(date, formats="assert"), b'"2023-02-29"') or "")


def test_validate_output_other_kinds() -> None:
    assert validate_output(SpecRef(SpecKind.REGEX, r"\d{2}"), "١٢".encode()) is None
    assert "does not fully match" in (validate_output(SpecRef(SpecKind.REGEX, "a|ab"), b"abc") or "")
    assert validate_output(SpecRef(SpecKind.CHOICE, ["a", "ab"]), b"ab") is None
    assert "not one of" in (validate_output(SpecRef(SpecKind.CHOICE, ["a", "ab"]), b"b") or "")
    g = 'root ::= "x" [0-9]+'
    assert validate_output(SpecRef(SpecKind.GBNF, g), b"x12") is None
    assert validate_output(SpecRef(SpecKind.GBNF, {"text": 'r ::= "y"', "root": "r"}), b"y") is None
    assert "GBNF" in (validate_output(SpecRef(SpecKind.GBNF, g), b"x") or "")
    assert "not UTF-8" in (validate_output(SpecRef(SpecKind.CHOICE, ["a"]), b"\xc3") or "")
    with pytest.raises(CorpusError):
        validate_output(SpecRef(SpecKind.REGEX, "(unclosed"), b"x")
    with pytest.raises(CorpusError):
        validate_output(SpecRef(SpecKind.GBNF, "root ::= undefined-rule"), b"x")
    with pytest.raises(CorpusError):
        validate_output(_js({"type": 12}), b"1")
    with pytest.raises(CorpusError, match="network"):
        validate_output(_js({"$ref": "http://localhost:1234/x.json"}), b"1")


def test_validate_instance_checks_the_meta_schema_unless_told_the_schema_is_derived() -> None:
    """A schema its meta-schema rejects is a CorpusError by default; with ``check_meta=False`` (schemas
    maskcert derives from a checked one) the meta-schema check is skipped and the instance is judged,
    and the two validators are cached apart."""
    bad = {"type": "integer", "minimum": 3, "maxItems": -1}  # maxItems must be non-negative
    spec = SpecRef(SpecKind.JSON_SCHEMA, bad)
    with pytest.raises(CorpusError, match="valid"):
        validate_instance(spec, 5)
    assert validate_instance(spec, 5, check_meta=False) is None
    assert "schema violation" in (validate_instance(spec, 2, check_meta=False) or "")
    with pytest.raises(CorpusError):
        validate_instance(spec, 5)
    good = SpecRef(SpecKind.JSON_SCHEMA, {"type": "integer", "minimum": 3})
    assert validate_instance(good, 5) is None and validate_instance(good, 5, check_meta=False) is None
    assert validate_instance(good, 2) is not None and validate_instance(good, 2, check_meta=False) is not None


def test_profile_texts_the_validator_rejects_the_reference_rejects() -> None:
    """Cross-check the profile checks against the reference on texts that break exactly one."""
    schema = {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}}
    closed = {**schema, "additionalProperties": False}
    cases: list[tuple[dict[str, Any], dict[str, Any], bytes]] = [
        (schema, {"whitespace": "none", "allow_duplicate_keys": True}, b'{"z": 1}'),
        (schema, {"whitespace": 2, "allow_duplicate_keys": True}, b'{"z":   1}'),
        (schema, {"unicode_escapes": False, "allow_duplicate_keys": True}, b'{"a":"\\u0041"}'),
        (schema, {"property_order": "schema", "allow_duplicate_keys": True}, b'{"a":"x","z":1}'),
        (schema, {"additional_properties_default": False}, b'{"q":1}'),
        (closed, {}, b'{"z":1,"z":2}'),
        (closed, {"top_level_whitespace": False}, b' {"z":1}'),
        (
            {"type": "array", "prefixItems": [{"type": "integer"}]},
            {"additional_items_default": False},
            b"[1,2]",
        ),
    ]
    for doc, profile, text in cases:
        spec = _js(doc, **profile)
        assert validate_output(spec, text) is not None, (profile, text)
        assert not refdecoder.compile(reference_spec(spec)).accepts(text), (profile, text)


# -- loaders ---------------------------------------------------------------------------------------
def _shared(sub: str) -> Path:
    root = tokenizers_matrix.shared_data_dir()
    if root is None or not (root / sub).is_dir():
        pytest.skip(f"shared data {sub} is absent (set MASKCERT_SHARED_DATA)")
    return root / sub


def test_corpus_names() -> None:
    assert set(corpus_names()) == {"builtin", "features", "json-schema-test-suite", "jsonschemabench"}
    assert load_corpus("builtin", limit=3) == BUILTIN[:3]
    assert load_corpus("builtin:stride=10") == BUILTIN[::10]


def test_json_schema_test_suite_loads() -> None:
    _shared("json-schema-test-suite/tests/draft2020-12")
    suite = load_corpus("json-schema-test-suite")
    assert len(suite) > 300
    assert all(c.spec.kind == "json_schema" and c.spec.corpus == "json-schema-test-suite" for c in suite)
    assert sum(len(c.valid) + len(c.invalid) for c in suite) > 1000
    assert any(name.startswith("refRemote#") and "remote" in reason for name, reason in suite.skipped)
    one = load_corpus("json-schema-test-suite:minLength")
    assert one and all(c.name.startswith("minLength#") for c in one)
    assert "minLength" in one[0].covers
    for c in one:
        for inst in c.valid:
            assert validate_instance(c.spec, inst) is None
        for inst in c.invalid:
            assert validate_instance(c.spec, inst) is not None


def test_jsonschemabench_loads() -> None:
    root = _shared("jsonschemabench-maskbench")
    cats = sorted(p.name for p in root.iterdir() if p.is_dir())
    some = load_corpus("jsonschemabench", limit=len(cats) * 2, stride=16)
    assert 0 < len(some) <= len(cats) * 2
    assert {c.name.split("/")[0] for c in some} == set(cats), "a limit samples every category"
    assert load_corpus(f"jsonschemabench:stride=16:limit={len(cats) * 2}") == some
    hw = load_corpus("jsonschemabench:Handwritten", limit=5)
    assert len(hw) <= 5 and all(c.name.startswith("Handwritten/") for c in hw)
    for c in some:
        for inst in c.valid:
            assert validate_instance(c.spec, inst) is None, c.name
        for inst in c.invalid:
            assert validate_instance(c.spec, inst) is not None, c.name


def test_path_corpus(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"type": "integer"}))
    (tmp_path / "b.json").write_text(
        json.dumps(
            {
                "schema": {"type": "string"},
                "tests": [{"data": "x", "valid": True}, {"data": 1, "valid": False}],
            }
        )
    )
    (tmp_path / "g.gbnf").write_text('root ::= "a"+\n')
    (tmp_path / "r.regex").write_text("a|ab\n\n[0-9]+\n")
    (tmp_path / "notes.md").write_text("ignored")
    cases = load_corpus(tmp_path)
    kinds = Counter(c.spec.kind for c in cases)
    assert kinds == Counter({"json_schema": 2, "gbnf": 1, "regex": 2})
    bench = next(c for c in cases if c.name == "b")
    assert bench.valid == ("x",) and bench.invalid == (1,)
    assert [c.spec.source for c in cases if c.spec.kind == "regex"] == ["a|ab", "[0-9]+"]
    assert len(load_corpus(str(tmp_path / "r.regex"))) == 2
    assert len(load_corpus(tmp_path, limit=1)) == 1


def test_bad_names_and_files_raise_corpus_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no-such-corpus") as e:
        load_corpus("no-such-corpus")
    assert isinstance(e.value, MaskcertError) and isinstance(e.value, ValueError)
    with pytest.raises(CorpusError, match="limit=N or stride=N"):
        load_corpus("builtin:limit=zero")
    with pytest.raises(CorpusError, match="one limit"):
        load_corpus("builtin:limit=2", limit=3)
    with pytest.raises(CorpusError, match="subset"):
        load_corpus("builtin:extra")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CorpusError, match="bad.json"):
        load_corpus(bad)
    (tmp_path / "x.yaml").write_text("a: 1")
    with pytest.raises(CorpusError, match=r"\*\.gbnf"):
        load_corpus(tmp_path / "x.yaml")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="none found"):
        load_corpus(tmp_path / "empty")
    (tmp_path / "latin1.regex").write_bytes(b"caf\xe9")
    with pytest.raises(CorpusError, match="UTF-8"):
        load_corpus(tmp_path / "latin1.regex")
    if tokenizers_matrix.shared_data_dir() is not None:
        with pytest.raises(CorpusError, match="category"):
            load_corpus("jsonschemabench:NoSuchCategory")
