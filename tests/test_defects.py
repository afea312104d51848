"""Defects: findings grouped by a root-cause signature; the report leads with them; a
baseline of known signatures lets CI fail on new defects only."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

import refdecoder
import tokenizers_matrix as tm
from maskcert.certification import certify
from maskcert.cli import main
from props.checks.defects import byte_class, group, json_positions, reference_grammars, signature
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
from props.corpus import Case, load_corpus

from ._toys import TOYS

OBJ = SpecRef(SpecKind.JSON_SCHEMA, {"type": "object", "properties": {"k": {"type": "string"}}}, "obj", "t")
OTHER = SpecRef(
    SpecKind.JSON_SCHEMA, {"type": "object", "additionalProperties": {"type": "integer"}}, "o2", "t"
)


def _blocked(spec: SpecRef, prefix: bytes, token: bytes, tokenizer: str = "tok") -> Finding:
    return Finding(
        Invariant.COMPLETENESS_TOKEN,
        "engine",
        "1",
        spec,
        tokenizer,
        tokenizer,
        prefix_ids=tuple(range(len(prefix))),
        prefix_bytes=prefix,
        token_id=7,
        token_bytes=token,
        backend_verdict="masked",
        reference_verdict="allowed",
        reference_allows=True,
    )


def test_json_positions() -> None:
    data = b'{"a\\u0": [1.5e3, "x\\n", true]}'
    pos = dict(zip(range(len(data)), json_positions(data)))
    assert pos[data.index(b"a")] == "object key" and pos[data.index(b"u")] == "key escape"
    assert pos[data.index(b"5")] == "fraction" and pos[data.index(b"3")] == "exponent"
    assert pos[data.index(b"n")] == "string escape" and pos[data.index(b"r")] == "literal"
    assert json_positions(b"") == ["value"] and json_positions(b'{"a":1')[-1] == "number"
    assert [byte_class(b) for b in b'"\\9-.aZ \x01\xc3{'] == [
        "quote",
        "backslash",
        "digit",
        "sign",
        "dot",
        "letter",
        "letter",
        "space",
        "control",
        "non-ascii",
        "{",
    ]


def test_one_behaviour_is_one_defect() -> None:
    """An escape blocked inside object keys, seen on two schemas, two tokenizers, three tokens and
    whitespace variants, is one defect; a number blocked after a key is another."""
    same = [
        _blocked(OBJ, b"{", b'"\\'),
        _blocked(OBJ, b"{ ", b' "\\', "other-tok"),
        _blocked(OTHER, b'{"a', b"\\u"),
        _blocked(OTHER, b'{\n\t"', b"\\"),
    ]
    different = _blocked(OTHER, b'{"a":', b"12")
    defects = group([*same, different])
    assert len(defects) == 2
    first = defects[0]
    assert first.signature == "completeness|blocks|object key|backslash"
    assert len(first.findings) == 4 and first.example.prefix_bytes == b"{"  # the smallest example first
    assert defects[1].signature == "completeness|blocks|value|digit"
    assert first.id != defects[1].id and first.id == group(same)[0].id  # ids depend on the signature only


def test_a_broken_tool_call_promise_is_signed_by_its_promise() -> None:
    """A template that accepts the empty output under ``required`` is one defect per promise, not the
    special-token soundness defect its token-less witness would otherwise be filed under."""
    spec = SpecRef(
        SpecKind.STRUCTURAL_TAG, {"tag": {"type": "any_text"}, "special_tokens": {}}, "t", "toolcalls"
    )

    def broken(promise: str, witness: bytes) -> Finding:
        return Finding(
            Invariant.SOUNDNESS,
            "engine",
            "1",
            spec,
            "tok",
            "tok",
            prefix_bytes=witness,
            backend_verdict="the template's tag accepts the witness",
            reference_verdict="the request forbids it",
            certificate={"promise": promise},
        )

    defects = group([broken("required", b""), broken("required", b"hi"), broken("none", b"<call>")])
    assert sorted(d.signature for d in defects) == [
        "soundness|breaks the request's promise|none|-",
        "soundness|breaks the request's promise|required|-",
    ]
    assert "special token" not in signature(broken("required", b""))


def test_soundness_is_signed_where_the_reference_says_the_token_dies() -> None:
    spec = SpecRef(SpecKind.JSON_SCHEMA, {"type": "string", "maxLength": 2}, "short", "t")
    f = Finding(
        Invariant.SOUNDNESS,
        "engine",
        "1",
        spec,
        "tok",
        "tok",
        prefix_ids=(1,),
        prefix_bytes=b'"ab',
        token_id=9,
        token_bytes=b'c"',
        backend_verdict="allowed",
        reference_verdict="masked",
        reference_allows=False,
    )
    grammar = refdecoder.compile(spec.to_spec())
    assert signature(f, grammar) == "soundness|allows|string|letter"  # 'c' is the byte past maxLength
    # Without the reference grammar, the token's most specific byte signs it (a letter before a quote).
    assert signature(f, None) == "soundness|allows|string|letter"
    f2 = f.with_(token_bytes=b'"', prefix_bytes=b'"a')  # closing after one letter is valid: never dies
    assert signature(f2, grammar) == "soundness|allows|string|quote"


def test_certify_reports_defects_first_and_counts_them(tmp_path: Path) -> None:
    cls, _ = TOYS["eos"]
    cases = load_corpus("builtin")[::9]
    report = certify(cls, tokenizers=[tm.byte_vocabulary()], corpus=(), cases=cases, examples=2, out=tmp_path)
    data = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert data["defects"] and len(data["defects"]) < len(data["findings"])
    repro = {f["id"]: f["repro"] for f in data["findings"]}
    for d in data["defects"]:
        assert set(d["findings"]) <= set(repro)
        assert d["repro"] == repro[d["findings"][0]]  # the example's (toy backends get none written)
    assert sum(len(d["findings"]) for d in data["defects"]) == len(data["findings"])
    assert data["counts"]["defects"] == dict(Counter(d["severity"] for d in data["defects"]))
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert md.index("## Defects") < md.index("## Findings")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.index("<h2>Defects</h2>") < html.index("<h2>Findings</h2>")
    assert report.defects[0].id == data["defects"][0]["id"]


def test_a_baseline_fails_only_new_defects(tmp_path: Path) -> None:
    cls, _ = TOYS["eos"]
    cases = load_corpus("builtin")[::9]
    first = certify(cls, tokenizers=[tm.byte_vocabulary()], corpus=(), cases=cases, examples=2)
    assert first.exit_code == 1
    baseline = first.write_baseline(tmp_path / "baseline.json")
    again = certify(
        cls, tokenizers=[tm.byte_vocabulary()], corpus=(), cases=cases, examples=2, baseline=baseline
    )
    assert again.exit_code == 0 and not again.data["baseline"]["new"] and not again.data["baseline"]["fixed"]
    # One known defect is gone (fixed), the others stay known; a new defect fails the run.
    sigs = json.loads(baseline.read_text())["signatures"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"signatures": [*sigs[1:], "soundness|allows|string|quote"]}))
    judged = certify(
        cls, tokenizers=[tm.byte_vocabulary()], corpus=(), cases=cases, examples=2, baseline=partial
    )
    assert judged.data["baseline"]["fixed"] == ["soundness|allows|string|quote"]
    assert len(judged.data["baseline"]["new"]) == 1 and judged.exit_code == 1


def test_bad_baselines_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"signatures": 3}')
    code = main(
        [
            "certify",
            "--regex",
            "a|b",
            "--tokenizer",
            "byte",
            "--examples",
            "1",
            "--baseline",
            str(bad),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2 and '"signatures": [str, ...]' in capsys.readouterr().err
    code = main(
        [
            "certify",
            "--regex",
            "a|b",
            "--tokenizer",
            "byte",
            "--examples",
            "1",
            "--baseline",
            str(tmp_path / "missing.json"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2 and "missing.json" in capsys.readouterr().err


def test_reference_grammars_compile_each_spec_once() -> None:
    grammar_of = reference_grammars()
    f = _blocked(OBJ, b"{", b'"')
    assert grammar_of(f) is grammar_of(_blocked(OBJ, b"{ ", b'"'))
    refused = SpecRef(SpecKind.REGEX, "(a", "bad", "t")
    assert grammar_of(_blocked(refused, b"", b"a")) is None


def test_cases_reach_the_report_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "certify",
            "--backend",
            "tests._toys:NoEos",
            "--in-process",
            "--regex",
            "ab?",
            "--tokenizer",
            "byte",
            "--examples",
            "2",
            "--out",
            str(tmp_path),
            "--write-baseline",
            str(tmp_path / "b.json"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1 and "defects: " in out and "eos: withholds EOS" in out
    assert json.loads((tmp_path / "b.json").read_text())["signatures"]


def test_defects_are_minimized_to_a_smaller_spec_that_still_shows_them() -> None:
    from props.checks.minimize import size

    big = {
        "type": "object",
        "title": "Order",
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "name": {"type": "string", "maxLength": 20, "description": "who"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id"],
    }
    case = Case(
        SpecRef(SpecKind.JSON_SCHEMA, big, "order", "t"), valid=({"id": 3, "name": "x", "tags": ["a"]},)
    )
    cls, _ = TOYS["soundness"]  # lets '}' through where the language forbids it
    report = certify(
        cls, tokenizers=[tm.byte_vocabulary()], corpus=(), cases=[case], examples=2, minimize_s=20
    )
    [entry] = [d for d in report.data["defects"] if d["invariant"] == "soundness"]
    assert entry["minimized"] is True and entry["original_spec_digest"] == case.spec.digest
    small = SpecRef(SpecKind(entry["spec"]["kind"]), entry["spec"]["source"])
    assert size(small) < size(case.spec)
    # The minimized example is a real finding of the same defect on the small spec.
    reduced = next(iter(report.reduced.values()))
    assert reduced.finding.spec.source == entry["spec"]["source"]
    assert (
        signature(reduced.finding, refdecoder.compile(reduced.finding.spec.to_spec())) == entry["signature"]
    )


def test_the_witness_is_shortened_to_the_fewest_bytes_that_show_the_defect() -> None:
    """A blocked escape found after a spaced-out walk comes back on the shortest walk that still shows
    it, with the same signature: no whitespace, no unrelated items, the blocking still in a string."""
    from props.checks.defects import shorten_witness, walk_text
    from props.checks.invariants import Target, check_walk, prepare

    from ._toys import NoBackslash

    spec = SpecRef(
        SpecKind.JSON_SCHEMA, {"type": "array", "items": {"type": ["integer", "string"]}}, "a", "t"
    )
    vocab = tm.byte_vocabulary()
    backend = NoBackslash()
    t = prepare(backend, spec, vocab)
    assert isinstance(t, Target)
    text = b'[ 12 ,\n  "ab\\u0041" ]'
    [f] = [x for x in check_walk(t, list(text), "canonical") if x.token_bytes == b"\\"]
    grammar_of = reference_grammars()
    sig = signature(f, grammar_of(f))
    assert f.prefix_bytes == b'[ 12 ,\n  "' and "string" in sig  # the first step whose mask differs

    short = shorten_witness(f, sig, backend, vocab, grammar_of, deadline=time.monotonic() + 60)
    g = short.finding
    assert signature(g, grammar_of(g)) == sig and short.calls > 0 and not short.exhausted
    assert walk_text(g) == ("walk", b'["\\'), walk_text(g)  # 1-minimal: one byte less is not viable
    witness = (g.certificate or {})["witness"]
    assert witness.startswith(b'["\\') and len(witness) < len(text)
    assert isinstance(json.loads(witness), list)  # a complete document of the language


def test_a_walk_of_an_invalid_output_or_a_crash_is_not_shortened() -> None:
    from props.checks.defects import walk_text

    crash = _blocked(OBJ, b"{", b'"').with_(invariant=Invariant.CRASH)
    assert walk_text(crash) is None
    invalid = _blocked(OBJ, b'{"k":1}', b"").with_(
        invariant=Invariant.SOUNDNESS, certificate={"invalid_text": b'{"k":1}'}
    )
    assert walk_text(invalid) == ("invalid", b'{"k":1}')


def test_the_keyword_an_invalid_output_breaks() -> None:
    from props.checks.defects import violated_keyword

    arr = SpecRef(SpecKind.JSON_SCHEMA, {"type": "array", "prefixItems": [False]}, "a", "t")
    assert violated_keyword(arr, b"[2]") == "false subschema"  # jsonschema names no keyword for `false`
    assert violated_keyword(arr, b"[2") == "syntax"
    short = SpecRef(SpecKind.JSON_SCHEMA, {"maxItems": 1}, "m", "t")
    assert violated_keyword(short, b"[1,2]") == "keyword maxItems"
    # A number past a float's range is an exact number, as the validator reads it: json.loads made it
    # infinity, and jsonschema's multipleOf raised OverflowError at report assembly.
    big = SpecRef(SpecKind.JSON_SCHEMA, {"allOf": [{"not": {"multipleOf": 0.5}}], "maximum": 5}, "b", "t")
    assert violated_keyword(big, b"1e999") == "keyword not"  # 10**999 is a multiple of 0.5
    assert violated_keyword(big, b"[1e999") == "syntax"
    assert violated_keyword(big, b'"\\udc80"') == "syntax"  # not JSON text of Unicode (lone surrogate)
    assert violated_keyword(big, b"\xff") == "syntax"  # not UTF-8
    assert violated_keyword(SpecRef(SpecKind.REGEX, "a", "r", "t"), b"b") == "language"
    # the independent validator's reading: dependencies applied in 2020-12, ECMA-262 patterns for regex
    deps = SpecRef(SpecKind.JSON_SCHEMA, {"dependencies": {"a": ["b"]}}, "d", "t")
    assert violated_keyword(deps, b'{"a":1}') == "keyword dependencies"
    rx = SpecRef(SpecKind.JSON_SCHEMA, {"format": "regex"}, "x", "t", profile={"formats": "assert"})
    assert violated_keyword(rx, b'"]"') == "keyword format"  # Python's re compiles "]"
