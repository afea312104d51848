"""Hostile specs: nothing a spec says hangs, exhausts or crashes maskcert.

Every input of :data:`maskcert.hostile_catalog.CATALOG` (JSON Schema files, regexes, GBNF files, tokenizer
files) runs in a server subprocess under an address-space limit (``RLIMIT_AS``), one batch per kind;
each test asserts its typed outcome, its time bound and its peak resident memory. Bounds are
multiplied by ``MASKCERT_HOSTILE_SLACK`` (default 2: CI shares two cores between two test workers).
The command line's answers for unreadable spec files, the spec reader, the limits and the compile
budget are tested in-process below.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import refdecoder
from maskcert.cli import main
from maskcert.hostile_catalog import CATALOG
from maskcert.hostile_runner import HostileInput, Outcome, problems, run_batch
from refdecoder import LimitExceeded, Limits, SpecError, SpecFileError, read_spec_json, read_spec_text
from refdecoder._input import json_nesting
from refdecoder._limits import Budget, budget_scope, parse_limit

SLACK = float(os.environ.get("MASKCERT_HOSTILE_SLACK", "2"))
ADDRESS_SPACE_MB = 2048
BY_NAME = {inp.name: inp for inp in CATALOG}


def test_catalog_is_large_and_covers_every_kind() -> None:
    kinds = {inp.kind for inp in CATALOG}
    assert kinds == {"schema-file", "regex", "gbnf-file", "tokenizer-file"}
    assert len(CATALOG) >= 60
    assert len(BY_NAME) == len(CATALOG), "input names are unique"


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    got: dict[str, Outcome] = {}
    for kind in ("schema-file", "regex", "gbnf-file", "tokenizer-file"):
        batch = [inp for inp in CATALOG if inp.kind == kind]
        for out in run_batch(batch, address_space_mb=ADDRESS_SPACE_MB):
            got[out.name] = out
    return got


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_hostile_input(name: str, outcomes: dict[str, Outcome]) -> None:
    inp = BY_NAME[name]
    out = outcomes[name]
    assert out.typed, f"{name}: untyped outcome {out.outcome}: {out.detail}"
    assert not problems(inp, out, SLACK), f"{name}: {problems(inp, out, SLACK)}"


def test_runner_reports_untyped_timeouts_and_memory() -> None:
    # The runner's own checks must be able to fail: a regex that is fine but given an impossible
    # time bound, and a 1-byte memory bound, are reported as problems.
    fine = HostileInput("fine", "regex", b"abc", frozenset({"supported"}), seconds=1e-9, mb=1e-6)
    (out,) = run_batch([fine], address_space_mb=ADDRESS_SPACE_MB)
    assert out.outcome == "supported" and out.peak_mb > 1
    why = problems(fine, out)
    assert any("took" in w for w in why) and any("peak resident" in w for w in why)
    wrong = HostileInput("wrong", "regex", b"(a)\\1", frozenset({"supported"}))
    (out,) = run_batch([wrong], address_space_mb=ADDRESS_SPACE_MB)
    assert out.outcome == "Unsupported" and problems(wrong, out)


# -- the command line --------------------------------------------------------------------------
def _check_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, *flags: str
) -> tuple[int, str]:
    f = tmp_path / "spec.json"
    f.write_bytes(data)
    args = ["check-schema", *flags]
    args += [str(f)] if "--gbnf" not in flags else []
    if "--gbnf" in flags:
        args[args.index("--gbnf") + 1 : args.index("--gbnf") + 1] = [str(f)]
    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out + cap.err


@pytest.mark.parametrize(
    ("data", "code", "says"),
    [
        (b'{"type":"array","items":' * 10_000 + b"true" + b"}" * 10_000, 2, "nested at most 256 deep"),
        (b'{"anyOf":[' * 3000 + b"true" + b"]}" * 3000, 2, "line 1, column"),
        (b'{"type": "str\xffing"}', 2, "in UTF-8 (invalid start byte: byte b'\\xff' at byte offset 13"),
        (b'{"type": "string",\n "x": }', 2, "invalid JSON: Expecting value at line 2, column 7"),
        (b"{}" + b" " * 2_100_000, 2, "--limit schema_bytes=N"),
        (json.dumps({"type": "string", "minLength": 10**9}).encode(), 1, "refused: limit=dfa_states"),
        (
            json.dumps({"type": "array", "minItems": 10**9, "items": {"type": "integer"}}).encode(),
            1,
            "--limit repeat_bound=N",
        ),
        (json.dumps({"type": "string"}).encode(), 0, "supported fingerprint="),
    ],
)
def test_check_schema_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, code: int, says: str
) -> None:
    got, text = _check_schema(tmp_path, capsys, data)
    assert got == code, text
    assert says in text
    assert "Traceback" not in text


def test_check_schema_gbnf_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got, text = _check_schema(tmp_path, capsys, bytes(range(256)), "--gbnf")
    assert got == 2 and "expected a GBNF grammar file in UTF-8" in text and "byte offset 128" in text


def test_check_schema_limit_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = b'{"items":' * 300 + b"true" + b"}" * 300
    assert _check_schema(tmp_path, capsys, deep)[0] == 2
    got, text = _check_schema(tmp_path, capsys, deep, "--limit", "nesting_depth=400")
    assert got in (0, 1) and "nested at most" not in text  # read, then compiled or refused
    got, text = _check_schema(tmp_path, capsys, b"{}", "--limit", "no_such=1")
    assert got == 2 and "NAME one of" in text
    got, text = _check_schema(tmp_path, capsys, b"{}", "--limit", "compile_fuel=-1")
    assert got == 2 and "positive" in text


# -- the reader ----------------------------------------------------------------------------------
def test_reader_names_file_and_place() -> None:
    with pytest.raises(SpecFileError) as ei:
        read_spec_json(b'{\n  "a": [1, 2,\n]}', "x.json")
    assert ei.value.path == "x.json" and (ei.value.line, ei.value.column) == (3, 1)
    with pytest.raises(SpecFileError) as ei:
        read_spec_text(b"ok\nb\xc3(", "g.gbnf", expected="a grammar")
    assert (ei.value.offset, ei.value.line, ei.value.column) == (4, 2, 2)
    with pytest.raises(SpecFileError) as ei:
        read_spec_json(b"[" * 10 + b"]" * 10, "d.json", limits=Limits(nesting_depth=3))
    assert ei.value.limit == "nesting_depth" and ei.value.column == 4
    assert read_spec_json(b'{"a": "[[[[\\"[[[["}', "s.json", limits=Limits(nesting_depth=1)) == {
        "a": '[[[["[[[['
    }


def _slow_nesting(data: bytes, limit: int) -> tuple[int, int]:
    depth = best = 0
    first = -1
    inside = escaped = False
    for at, c in enumerate(data.decode("latin-1")):
        if inside:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                inside = False
        elif c == '"':
            inside = True
        elif c in "[{":
            depth += 1
            best = max(best, depth)
            if depth > limit and first < 0:
                first = at
        elif c in "]}":
            depth -= 1
    return best, first


def test_json_nesting_matches_a_character_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    import refdecoder._input as reader

    rng = random.Random(19)
    atoms = ['a"[', "\\", '\\"{', "}}", 1, None, "]]\\\\", '"', "\\\\\\"]
    for _ in range(200):

        def value(d: int) -> object:
            x = rng.random()
            if d > 6 or x < 0.3:
                return rng.choice(atoms)
            if x < 0.65:
                return [value(d + 1) for _ in range(rng.randint(0, 3))]
            return {str(value(d + 1)): value(d + 1) for _ in range(rng.randint(0, 3))}

        data = json.dumps(value(0)).encode()
        monkeypatch.setattr(reader, "_CHUNK", rng.choice([1, 2, 3, 7, 1 << 24]))
        limit = rng.choice([0, 1, 2, 3, 1000])
        assert json_nesting(data, limit) == _slow_nesting(data, limit), data
    # Unbalanced brackets and texts cut anywhere: runs of backslashes across chunk borders, strings
    # left open (backslashes stand only inside strings, as in any JSON text).
    for _ in range(300):
        pieces = ["[", "]", "{", "}", "x"] + [
            json.dumps("".join(rng.choice('\\"[]{}a') for _ in range(rng.randint(0, 6)))) for _ in range(3)
        ]
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        data = text.encode()[: rng.randint(0, len(text))]
        monkeypatch.setattr(reader, "_CHUNK", rng.choice([1, 2, 3, 7, 1 << 24]))
        limit = rng.choice([0, 1, 2])
        assert json_nesting(data, limit) == _slow_nesting(data, limit), data


# -- limits and the compile budget ------------------------------------------------------------
def test_parse_limit() -> None:
    limits = parse_limit("compile_fuel=5_000", parse_limit("compile-seconds=2.5", Limits()))
    assert (limits.compile_fuel, limits.compile_seconds) == (5000, 2.5)
    for bad in ("fuel=1", "compile_fuel", "compile_fuel=x", "nesting_depth=0"):
        with pytest.raises(SpecError):
            parse_limit(bad, Limits())


def test_fuel_stops_work_no_single_limit_catches() -> None:
    schema = {"type": "string", "allOf": [{"pattern": f"^[ab]*a[ab]{{{k}}}$"} for k in range(5, 11)]}
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile(refdecoder.JsonSchema(schema), Limits(compile_fuel=20_000))
    assert ei.value.limit == "compile_fuel" and ei.value.bound == 20_000
    with budget_scope(Limits()) as budget:  # and the default budget lets the same schema through
        refdecoder.compile(refdecoder.JsonSchema(schema))
    assert 20_000 < budget.used < Limits().compile_fuel


def test_budget_counts_and_checks_the_clock() -> None:
    b = Budget(Limits(compile_fuel=10, compile_seconds=1e-9))
    b.spend(5)
    with pytest.raises(LimitExceeded) as ei:
        b.spend(6)
    assert ei.value.limit == "compile_fuel"
    with pytest.raises(LimitExceeded) as ei:
        b.check("here")
    assert ei.value.limit == "compile_seconds" and ei.value.where == "here"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "minItems": 10**9, "items": {"type": "integer"}},
        {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "minContains": 10**9},
        {"type": "object", "minProperties": 10**9},
        {"type": "string", "pattern": "x{1000000}"},
    ],
)
def test_repeat_bound_is_a_limit(schema: dict[str, object]) -> None:
    with pytest.raises(LimitExceeded) as ei:
        refdecoder.compile(refdecoder.JsonSchema(schema, refdecoder.JsonProfile(allow_duplicate_keys=True)))
    assert ei.value.limit == "repeat_bound"
    small = dict(schema)
    for key in ("minItems", "minContains", "minProperties"):
        if key in small:
            small[key] = 3
    if "pattern" in small:
        small["pattern"] = "x{3}"
    refdecoder.compile(refdecoder.JsonSchema(small, refdecoder.JsonProfile(allow_duplicate_keys=True)))


# -- maskcert fuzz --target hostile ---------------------------------------------------------------
def test_fuzz_hostile_target_is_clean_and_varied(tmp_path: Path) -> None:
    from maskcert.fuzz import CampaignConfig, run_campaign

    result = run_campaign(
        CampaignConfig(target="hostile", budget_s=6, out_dir=str(tmp_path), seed=3, progress=False)
    )
    assert not result.findings and not result.errors, (result.findings, result.errors)
    outcomes = result.coverage.get("hostile", {})
    assert sum(outcomes.values()) >= 5 and len({k.split(":")[1] for k in outcomes}) >= 2, outcomes


def test_fuzz_hostile_target_reports_a_broken_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import maskcert.fuzz._hostile as target
    from maskcert.fuzz import CampaignConfig, run_campaign

    monkeypatch.setattr(target, "MB", 1e-3)  # no process fits: every example breaks its memory bound
    result = run_campaign(
        CampaignConfig(target="hostile", budget_s=4, out_dir=str(tmp_path), seed=4, progress=False)
    )
    assert result.findings, result.errors
    f = result.findings[0]
    assert f.invariant == "limits" and "peak resident" in f.message
    assert f.certificate["peak_mb"] > 1 and f.certificate["input_base64"]
