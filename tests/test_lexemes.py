"""Lexeme coverage and number instances (props.checks.lexemes, issue 34)."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest

import refdecoder
from props.checks.lexemes import (
    divergences,
    lexeme_targets,
    number_constants,
    number_instances,
    number_variants,
    steered,
)
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
from props.corpus import validate_output
from props.output.report import render_html, render_markdown

BOUNDED = {"type": "object", "properties": {"x": {"type": "number", "maximum": 1.25}}, "required": ["x"]}
INTEGER = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 10}}, "required": ["n"]}


def _spec(schema: dict[str, Any]) -> SpecRef:
    return SpecRef(SpecKind.JSON_SCHEMA, schema, "lexemes", "test")


def test_constants_are_every_numeric_bound_and_member() -> None:
    schema = {
        "anyOf": [
            {"type": "number", "exclusiveMaximum": 3, "multipleOf": 0.5},
            {"enum": [1, 12, "1", True, 1.5]},
            {"const": -2},
        ]
    }
    assert number_constants(schema) == ["3", "0.5", "1", "12", "1.5", "-2"]


def test_other_spellings_of_a_constant_keep_its_value_and_neighbours_move_the_last_digit() -> None:
    variants = list(number_variants(["1.25", "10"], integer=True))
    same = [v for f, v in variants if f == "constant-trailing-zeros"]
    assert same == ["1.250"]
    for feature, v in variants:
        if feature in ("constant-trailing-zeros", "constant-exponent", "constant-as-fraction"):
            assert Decimal(v) in (Decimal("1.25"), Decimal("10")), (feature, v)
    assert ("constant-last-digit", "1.26") in variants and ("constant-last-digit", "11") in variants
    assert ("constant-exponent", "125e-2") in variants
    fractions = [v for f, v in variants if f == "long-fraction"]
    assert [len(v.split(".")[1]) for v in fractions] == [7, 16, 30]
    assert [len(v) for f, v in variants if f == "long-integer"] == [20, 40, 60]
    assert not [v for f, v in number_variants([], integer=False) if f.startswith("integer-")]


def test_lexeme_targets_inside_numbers_keys_and_strings() -> None:
    text = '{"k\\u00e9":1.25,"s":"é"}'.encode()
    every = lexeme_targets(text, None, ["1.25"])
    assert {
        "const 1.25: prefix 1/4",
        "const 1.25: prefix 3/4",
        "const 1.25: whole, stop or continue",
    } <= every
    assert {"key:escape", "key:escape-u2", "string:utf8-2-mid1", "number:int1.frac0"} <= every
    start = text.index(b"1.25")
    only_end = lexeme_targets(text, [0, start + 4, len(text)], ["1.25"])
    assert only_end == {"const 1.25: whole, stop or continue", "number:int1.frac2-6/end"}
    assert lexeme_targets(b'{"x":1.251}', None, ["1.25"]) >= {"const 1.25: past it, stop"}


@pytest.mark.parametrize("schema", [BOUNDED, INTEGER])
def test_number_instances_are_confirmed_by_both_judges(schema: dict[str, Any]) -> None:
    spec = _spec(schema)
    grammar = refdecoder.compile(refdecoder.JsonSchema(schema))
    key = next(iter(schema["properties"]))
    made, notes = number_instances(spec, grammar, [json.dumps({key: 20}, separators=(",", ":")).encode()])
    assert notes == []
    assert {i.why == "" for i in made} == {True, False}  # valid and invalid ones
    for inst in made:
        assert grammar.accepts(inst.data) == (inst.why == "")
        assert (validate_output(spec, inst.data) is None) == (inst.why == "")
        assert inst.data[inst.start : inst.end].decode() in inst.data.decode()
    valid = {i.data for i in made if not i.why}
    if schema is BOUNDED:
        assert {b'{"x":1.250}', b'{"x":125e-2}', b'{"x":1.2}'} <= valid
        assert b'{"x":1.26}' in {i.data for i in made if i.why}
    else:
        assert {b'{"n":10.0}', b'{"n":100e-1}'} <= valid
        assert b'{"n":25e-1}' in {i.data for i in made if i.why}  # an exponent that is not an integer


def _masked(prefix: bytes, token: bytes, walk: str = "canonical") -> Finding:
    return Finding(
        invariant=Invariant.COMPLETENESS_BYTE,
        backend="x",
        backend_version="0",
        spec=_spec(BOUNDED),
        tokenizer="byte",
        tokenizer_fingerprint="f",
        prefix_bytes=prefix,
        token_bytes=token,
        walk=walk,
    )


def test_steering_respells_texts_through_a_known_divergence() -> None:
    known = divergences([_masked(b'{\t"', b"\\"), _masked(b'{"x":1', b"2")])
    assert known == {b"\\"}
    dirty = b'{\t"\\u0078":1}'
    bases, respelled = steered(_spec(BOUNDED), [dirty], known)
    assert respelled == bases == [b'{"x":1}']
    assert steered(_spec(BOUNDED), [b'{"x":1}'], known) == ([b'{"x":1}'], [])
    assert steered(_spec(BOUNDED), [dirty], set()) == ([dirty], [])


def test_steering_keeps_a_text_it_cannot_respell() -> None:
    """A valid text with a number past a float's range (json.loads reads 1e999 as infinity, which no
    JSON text spells) stays a base text as it is, instead of ending the run with a ValueError."""
    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "object"}, "s", "t")
    text = b'{"a\\\\":1e999}'
    assert steered(spec, [text], {b"\\"}) == ([text], [])


def test_number_walks_steered_around_a_known_divergence_say_what_only_they_reached() -> None:
    from maskcert.certification import load_vocabularies, resolve_backend
    from props.checks.invariants import Target, prepare
    from props.checks.lexemes import check_numbers

    t = prepare(resolve_backend("reference"), _spec(BOUNDED), load_vocabularies(["byte"])[0])
    assert isinstance(t, Target)
    dirty = b'{"\\u0078":1}'
    assert t.reference.grammar.accepts(dirty)
    assert check_numbers(t, [dirty], known=[_masked(b'{"', b"\\")]) == []
    (note,) = [n for n in t.instance_notes if n.startswith("steered:")]
    assert "1 respelled text(s)" in note and "divergences (\\\\)" in note
    assert t.instances["lexemes/targets-steered-only"] > 0
    assert t.instances["valid/numbers"] > 0


def test_certify_against_the_reference_records_lexeme_coverage(monkeypatch: pytest.MonkeyPatch) -> None:
    from maskcert.certification import certify_case, load_vocabularies, resolve_backend
    from props.corpus import Case

    vocab = load_vocabularies(["byte"])[0]
    case = Case(_spec(BOUNDED), valid=({"x": 1},))
    on = certify_case(resolve_backend("reference"), case, vocab, examples=1, strings=1)
    assert on.findings == []
    assert on.instances["valid/numbers"] > 0 and on.instances["invalid/numbers"] > 0
    assert 0 < on.instances["lexemes/constants-compared"] <= on.instances["lexemes/constants-found"]
    assert any(n.startswith("lexeme coverage: masks compared at") for n in on.instance_notes)
    monkeypatch.setenv("MASKCERT_NUMBER_TARGETS", "off")
    off = certify_case(resolve_backend("reference"), case, vocab, examples=1, strings=1)
    assert off.instances["valid/numbers"] == 0 and off.instances["lexemes/targets-found"] > 0


def test_report_shows_coverage_per_spec() -> None:
    counts = {
        "coverage/positions-found": 40,
        "coverage/positions-compared": 30,
        "lexemes/targets-found": 20,
        "lexemes/targets-compared": 15,
        "lexemes/constants-found": 6,
        "lexemes/constants-compared": 6,
        "lexemes/targets-steered-only": 2,
    }
    note = "lexeme coverage: masks compared at 15 of 20 lexeme states (75%; ...); not compared: key:escape-u3"
    report: dict[str, Any] = {
        "instances": {
            "total": counts,
            "per_spec": [
                {"spec": "s1", "tokenizer": "bpe", "counts": counts, "notes": [note]},
                {"spec": "regex", "tokenizer": "bpe", "counts": {"valid/corpus": 1}, "notes": []},
            ],
        }
    }
    md = render_markdown(report)
    section = md.split("## Coverage per spec", 1)[1].split("\n## ", 1)[0]
    assert "| s1 | bpe | 30/40 (75%) | 15/20 (75%) | 6/6 (100%) | 2 | 0 | - | key:escape-u3 |" in section
    assert "regex" not in section
    assert "Coverage per spec" in render_html(report)
    assert "Coverage per spec" not in render_markdown(
        {"instances": {"per_spec": [report["instances"]["per_spec"][1]]}}
    )


def test_known_defect_predicates_tell_defects_on_one_spec_apart() -> None:
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "ci"
    loader = importlib.util.spec_from_file_location("known_defects", root / "known_defects.py")
    assert loader is not None and loader.loader is not None
    kd = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(kd)
    defects = {d["id"]: d for d in json.loads((root / "known_defects.json").read_text())["defects"]}
    assert len(defects) >= 5 and len({d["engine"] for d in defects.values()}) == 4
    stop = defects["llguidance-bound-prefix-cannot-stop"]["predicate"]
    zero = defects["llguidance-bound-trailing-zero"]["predicate"]
    cannot_stop, trailing_zero = _masked(b'{"x":1.2', b"}"), _masked(b'{"x":1.25', b"0")
    exponent = _masked(b'{"x":1', b"2")  # the loud exponent defect on the same spec
    assert kd.matches(cannot_stop, stop) and not kd.matches(trailing_zero, stop)
    assert kd.matches(trailing_zero, zero) and not kd.matches(cannot_stop, zero)
    assert not kd.matches(exponent, stop) and not kd.matches(exponent, zero)


def test_string_walks_reach_escapes_and_utf8_states_no_walk_compared() -> None:
    """On a BPE vocabulary a canonical walk takes ``\\u00e9`` and ``é`` whole; the string walks split
    those strings byte by byte so the escape and UTF-8 states are compared, and say so."""
    from maskcert.certification import load_vocabularies, resolve_backend
    from props.checks.invariants import Target, prepare
    from props.checks.lexemes import _boundaries, lexeme_targets, string_walks

    schema = {"type": "object", "properties": {"k\\u00e9": {"type": "string"}}}
    t = prepare(resolve_backend("reference"), _spec(schema), load_vocabularies(["bpe"])[0])
    assert isinstance(t, Target)
    text = '{"ké":"caf\\u00e9 ünï"}'.encode()
    ids = t.vocab.index.fewest_tokens(text)
    assert ids is not None
    universe = lexeme_targets(text, None)
    covered = lexeme_targets(text, _boundaries(t, [int(i) for i in ids]))
    assert universe - covered, "the canonical walk should skip some inner states on a BPE vocabulary"
    before = set(covered)
    assert string_walks(t, [text], universe, covered, limit=4, until=time.monotonic() + 30) == []
    assert covered >= universe and covered > before
    assert t.instances["valid/lexeme-walks"] == 1
