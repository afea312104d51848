"""The feature probe suite and ``maskcert matrix``: the suite's instances are valid, it covers
every JSON Schema 2020-12 keyword and format, the reference's column is all ``exact`` or ``refused``,
and a bounded matrix runs on the installed engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from maskcert.cli import main
from maskcert.matrix import STATUSES, MatrixError, cell_status, run_matrix, select_features
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
from props.corpus import CorpusError, validate_instance, validate_output
from props.corpus.features import FEATURES, feature, feature_cases

# Draft 2020-12: the validation, applicator and core vocabularies' assertion keywords.
KEYWORDS_2020_12 = {
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "prefixItems",
    "items",
    "contains",
    "additionalProperties",
    "properties",
    "patternProperties",
    "dependentSchemas",
    "propertyNames",
    "if-then-else",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentMediaType",
}
FORMATS = {
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "uuid",
    "json-pointer",
    "relative-json-pointer",
    "regex",
}
# The published per-keyword soundness comparison's rows and the GBNF/regex features the issue names.
REGEX_FEATURES = {
    "class",
    "negated-class",
    "anchors",
    "lookahead",
    "backreference",
    "unicode-escape",
    "non-ascii",
}
GBNF_FEATURES = {
    "repetition",
    "char-class",
    "negated-class",
    "grouping",
    "recursion",
    "empty-alternative",
    "unicode",
}


def test_feature_ids_are_unique_and_cover_the_vocabulary() -> None:
    ids = [f.id for f in FEATURES]
    assert len(ids) == len(set(ids))
    assert {f"json_schema/{k}" for k in KEYWORDS_2020_12} <= set(ids)
    assert {f"json_schema/format/{f}" for f in FORMATS} <= set(ids)
    assert {f"regex/{f}" for f in REGEX_FEATURES} <= set(ids)
    assert {f"gbnf/{f}" for f in GBNF_FEATURES} <= set(ids)
    assert any(i.startswith("json_schema/draft7/") for i in ids)
    for f in FEATURES:
        assert f.probes and f.description
        assert all(c.covers == (f.id,) and c.name.startswith(f.id + "#") for c in f.probes)


@pytest.mark.parametrize("case", feature_cases(), ids=lambda c: c.name)
def test_probe_instances_are_valid(case: Any) -> None:
    """Each probe's valid instances, judged by the independent validator (never by the reference)."""
    assert case.valid, case.name
    for v in case.valid:
        if case.spec.kind == SpecKind.JSON_SCHEMA:
            assert validate_instance(case.spec, v) is None, (case.name, v)
        else:
            assert validate_output(case.spec, v.encode("utf-8")) is None, (case.name, v)


def test_feature_lookup_errors_are_typed() -> None:
    assert feature("json_schema/not").kind == "json_schema"
    with pytest.raises(CorpusError, match="json_schema/not"):
        feature("json_schema/nope")
    with pytest.raises(MatrixError, match="feature id or prefix"):
        select_features(["nothing/here"])
    assert {f.id for f in select_features(["json_schema/format"])} == {
        f"json_schema/format/{x}" for x in FORMATS
    }


def _finding(inv: Invariant) -> Finding:
    spec = SpecRef(SpecKind.REGEX, "a", "regex/x#alone", "features")
    return Finding(inv, "b", "1", spec, "t", "fp", backend_verdict="x", reference_verdict="y", message="m")


@pytest.mark.parametrize(
    ("invariants", "checked", "refused", "expected"),
    [
        ((), 2, 0, "exact"),
        ((), 0, 2, "refused"),
        ((), 1, 1, "exact"),
        ((Invariant.SOUNDNESS,), 2, 0, "unsound"),
        ((Invariant.REFUSAL,), 0, 0, "unsound"),
        ((Invariant.COMPLETENESS_BYTE, Invariant.FORK), 2, 0, "incomplete"),
        ((Invariant.SOUNDNESS, Invariant.UTF8), 2, 0, "unsound+incomplete"),
        ((Invariant.CRASH, Invariant.SOUNDNESS), 2, 0, "crash"),
        ((Invariant.LIMITS,), 2, 0, "limits"),
        ((Invariant.ROLLBACK,), 2, 0, "exact"),
    ],
)
def test_cell_status(invariants: tuple[Invariant, ...], checked: int, refused: int, expected: str) -> None:
    assert expected in STATUSES
    assert cell_status([_finding(i) for i in invariants], checked, refused, 0, checked + refused) == expected


def test_eos_counts_by_direction() -> None:
    offered = _finding(Invariant.EOS).with_(reference_allows=False)
    withheld = _finding(Invariant.EOS).with_(reference_allows=True)
    assert cell_status([offered], 1, 0, 0, 1) == "unsound"
    assert cell_status([withheld], 1, 0, 0, 1) == "incomplete"


def test_not_run_and_internal_error_cells() -> None:
    assert cell_status([], 0, 0, 0, 0) == "not_run"
    assert cell_status([], 0, 0, 1, 1) == "internal_error"


# A bounded sample for CI: the features the issue names plus one of each family.
SAMPLE = [
    "json_schema/not",
    "json_schema/uniqueItems",
    "json_schema/contains",
    "json_schema/maxLength",
    "json_schema/format/date-time",
    "regex/lookahead",
    "regex/bounded-repetition",
    "gbnf/repetition",
    "choice/options",
]


def _check_matrix(out: Path, engines: list[str], features: list[str]) -> dict[str, Any]:
    data = json.loads((out / "matrix.json").read_text(encoding="utf-8"))
    assert [e["name"] for e in data["engines"]] and all(e["version"] for e in data["engines"])
    assert sorted(f["id"] for f in data["features"]) == sorted(features)
    assert {(c["engine"], c["feature"]) for c in data["cells"]} == {(e, f) for e in engines for f in features}
    for c in data["cells"]:
        assert c["status"] in STATUSES
        if c["status"] not in ("exact", "refused"):
            assert c["defects"], c
            for d in c["defects"]:
                assert d["link"].startswith(f"{c['engine']}/report.html#finding-")
                assert (out / c["engine"] / "report.html").exists()
    md = (out / "matrix.md").read_text(encoding="utf-8")
    html = (out / "matrix.html").read_text(encoding="utf-8")
    for f in features:
        assert f"`{f}`" in md and f"<code>{f}</code>" in html
    return data


def test_reference_column_is_exact_or_refused_on_a_sample(tmp_path: Path) -> None:
    m = run_matrix(["reference"], tokenizer="bpe", features=SAMPLE, out=tmp_path)
    data = _check_matrix(tmp_path, ["reference"], SAMPLE)
    status = {c["feature"]: c["status"] for c in data["cells"]}
    assert set(status.values()) <= {"exact", "refused"}, status
    assert status["json_schema/not"] == "exact"
    assert status["json_schema/uniqueItems"] == "exact"  # value memory (refdecoder/_valuememory.py)
    assert status["regex/lookahead"] == "refused"
    assert m.counts()["reference"]["exact"] >= 6


@pytest.mark.slow
def test_reference_column_is_exact_or_refused_on_every_feature(tmp_path: Path) -> None:
    m = run_matrix(["reference"], tokenizer="bpe", out=tmp_path)
    bad = {c["feature"]: c["status"] for c in m.data["cells"] if c["status"] not in ("exact", "refused")}
    assert not bad, bad


def _installed() -> list[str]:
    from props.backends import ENGINES, BackendUnavailable, adapter_class

    out = []
    for name in ENGINES:
        try:
            adapter_class(name)
        except BackendUnavailable:
            continue
        out.append(name)
    return out


@pytest.mark.parametrize("engine", ["xgrammar", "llguidance", "outlines-core", "lm-format-enforcer"])
def test_bounded_matrix_on_an_installed_engine(engine: str, tmp_path: Path) -> None:
    """Two features on one engine over the small vocabulary: every cell gets a status, and a
    non-exact cell links its defects to their proofs."""
    if engine not in _installed():
        pytest.skip(f"{engine} is not installed (pip install 'maskcert[backends]')")
    features = ["json_schema/not", "regex/bounded-repetition"]
    run_matrix([engine], tokenizer="bpe", features=features, out=tmp_path)
    _check_matrix(tmp_path, [engine], features)


def test_cli_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["matrix", "--feature", "json_schema/const", "--feature", "gbnf/recursion", "--out", str(tmp_path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "reference: exact 2" in out
    assert (tmp_path / "matrix.html").exists() and (tmp_path / "reference" / "report.json").exists()
    assert main(["matrix", "--feature", "no/such", "--out", str(tmp_path)]) == 2
    assert "feature id or prefix" in capsys.readouterr().err


def test_probe_specs_are_well_formed_for_the_reference() -> None:
    """A probe the reference calls malformed (SpecError) would be every engine's "crash"; refusals
    (Unsupported, LimitExceeded) are fine."""
    import refdecoder
    from refdecoder import JsonProfile

    for case in feature_cases():
        spec = case.spec
        try:
            refdecoder.compile(
                spec.to_spec(JsonProfile(allow_duplicate_keys=True))
                if spec.kind == "json_schema"
                else spec.to_spec()
            )
        except refdecoder.SpecError as e:
            pytest.fail(f"{case.name}: {e}")
        except (refdecoder.Unsupported, refdecoder.LimitExceeded):
            continue


def test_features_corpus_complements_builtin() -> None:
    from props.corpus import load_corpus

    assert [c.name for c in load_corpus("features")] == [c.name for c in feature_cases()]
    assert {c.covers[0] for c in load_corpus("features:json_schema/format")} == {
        f"json_schema/format/{x}" for x in FORMATS
    }
    with pytest.raises(CorpusError, match="features:PREFIX"):
        load_corpus("features:nothing")


def test_matrix_from_separate_reports_equals_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Engines run separately (e.g. in parallel) fold into the matrix one run would have written."""
    from maskcert.matrix import matrix_from_reports

    features = ["json_schema/not", "regex/bounded-repetition"]
    one = run_matrix(
        ["reference", "tests._toys:IgnoresUniqueItems"],
        tokenizer="bpe",
        features=features,
        out=tmp_path / "one",
    )
    run_matrix(["tests._toys:IgnoresUniqueItems"], tokenizer="bpe", features=features, out=tmp_path / "a")
    run_matrix(["reference"], tokenizer="bpe", features=features, out=tmp_path / "b")
    merged = matrix_from_reports(
        [tmp_path / "b" / "reference", tmp_path / "a" / "tests._toys:IgnoresUniqueItems"],
        features=features,
        out=tmp_path / "merged",
    )
    # A report names its engine by the backend's own name (a class path given to run_matrix is not one).
    name = {"tests._toys:IgnoresUniqueItems": "toy-IgnoresUniqueItems"}

    def status(m: Any) -> list[tuple[str, str, str]]:
        return sorted(
            (name.get(c["engine"], c["engine"]), c["feature"], c["status"]) for c in m.data["cells"]
        )

    assert status(merged) == status(one)
    counts = json.loads((tmp_path / "merged" / "matrix.json").read_text())["counts"]
    assert counts == {name.get(e, e): c for e, c in one.data["counts"].items()}
    for c in merged.data["cells"]:
        for d in c["defects"]:
            assert (tmp_path / "merged" / d["link"].split("#")[0]).exists(), d["link"]
    with pytest.raises(MatrixError, match="second report"):
        matrix_from_reports([tmp_path / "b" / "reference", tmp_path / "b" / "reference"])
    code = main(["matrix", "--from-report", str(tmp_path / "b" / "reference"), "--out", str(tmp_path / "c")])
    assert code == 0 and "reference: exact 2" in capsys.readouterr().out
