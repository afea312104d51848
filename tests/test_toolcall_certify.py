"""Certifying tool-call specs: Lark grammars and structural tags that name special tokens.

What certify needs beyond the reference's front-ends (``tests/test_special_tokens.py`` tests those
pieces): the two spec kinds in ``SpecRef`` and the report, byte strings with special tokens turned into
token ids (``Vocabulary.special_token_view``, ``Vocabulary.canonical_ids``), the adapters that compile
the kinds (llguidance: Lark; xgrammar: structural tags, special tokens keeping their text as production
builds its ``TokenizerInfo``), and ``certify`` end to end on a small trained tokenizer with added special
tokens — what it reports about each engine included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import refdecoder
import tokenizers_matrix as tm
from maskcert.certification import certify_case
from props.backends import BackendUnavailable, load_backend
from props.checks.minimize import minimize
from props.checks.witness import canonical_ids
from props.contract.backend import Compiled, Refused
from props.contract.findings import Finding, FindingError, Invariant, SpecKind, SpecRef
from props.corpus import Case
from props.output.repro import write_reproducers
from refdecoder import Lark, StructuralTag, special_token_bytes

REPO = Path(__file__).resolve().parent.parent
SPECIALS = ["<|endoftext|>", "<|tool_call|>", "<|/tool_call|>", "<|think|>"]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"s": {"type": "string"}},
    "required": ["s"],
    "additionalProperties": False,
}
LARK_TEXT = f"start: TEXT <|tool_call|> %json {json.dumps(SCHEMA)} <|/tool_call|>\nTEXT: /[a-z ]+/"
TAG: dict[str, Any] = {
    "type": "structural_tag",
    "format": {
        "type": "sequence",
        "elements": [
            {"type": "const_string", "value": "call "},
            {"type": "token", "token": "<|tool_call|>"},
            {"type": "json_schema", "json_schema": SCHEMA},
            {"type": "token", "token": "<|/tool_call|>"},
        ],
    },
}


# -- fixtures ---------------------------------------------------------------------------------------------


def _train(folder: Path) -> Path:
    """A 400-token byte-level BPE (HF ``tokenizers``) with added special tokens, saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tm.corpus_bytes().decode("utf-8").splitlines(), trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text('{"eos_token": "<|endoftext|>"}', encoding="utf-8")
    return folder / "tokenizer.json"


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory.mktemp("toolcall") / "toolcall-bpe")


@pytest.fixture(scope="module")
def vocab(vocab_file: Path) -> tm.Vocabulary:
    return tm.load(vocab_file)


def _ids(vocab: tm.Vocabulary) -> dict[str, int]:
    return {name: i for i, name in vocab.special_names}


def _backend(name: str) -> Any:
    try:
        return load_backend(name)
    except BackendUnavailable as e:
        pytest.skip(f"{name} is not installed: {e}")


def _allowed(mask: Any, size: int) -> list[int]:
    return [i for i in range(size) if int(mask[i >> 5]) >> (i & 31) & 1]


# -- the spec kinds -------------------------------------------------------------------------------------


def test_kinds_round_trip_through_specref_json() -> None:
    specs: list[refdecoder.Spec] = [
        Lark(LARK_TEXT, (("<|tool_call|>", 1), ("<|/tool_call|>", 2))),
        StructuralTag(TAG, (("<|tool_call|>", 1), ("<|/tool_call|>", 2))),
        StructuralTag({"type": "const_string", "value": "x"}),  # a bare format
    ]
    for spec in specs:
        ref = SpecRef.of(spec, "s", "test")
        back = SpecRef.from_json(json.loads(json.dumps(ref.to_json())))
        assert back == ref and back.kind in (SpecKind.LARK, SpecKind.STRUCTURAL_TAG)
        assert back.to_spec().canonical() == spec.canonical()
    assert SpecRef.of(specs[0]).special_names == {1: "<|tool_call|>", 2: "<|/tool_call|>"}
    for bad in ("start: x", {"text": 1}, {"grammar": "start: x"}):
        with pytest.raises(FindingError):
            SpecRef(SpecKind.LARK, bad).to_spec()
    with pytest.raises(FindingError, match="special_tokens"):
        SpecRef(SpecKind.STRUCTURAL_TAG, {"tag": TAG, "special_tokens": {"<|x|>": -1}}).to_spec()


def test_names_resolve_in_the_vocabulary(vocab: tm.Vocabulary) -> None:
    ids = _ids(vocab)
    bare = SpecRef(SpecKind.LARK, {"text": LARK_TEXT, "special_tokens": {}})
    named = bare.naming_special_tokens(vocab.special_names)
    assert named.source["special_tokens"] == {n: ids[n] for n in ("<|/tool_call|>", "<|tool_call|>")}
    assert named.naming_special_tokens([(9, "<|tool_call|>")]) is named  # a table, once given, stays
    tag = SpecRef(SpecKind.STRUCTURAL_TAG, {"tag": TAG}).naming_special_tokens(vocab.special_names)
    assert set(tag.special_names.values()) == {"<|tool_call|>", "<|/tool_call|>"}
    regex = SpecRef(SpecKind.REGEX, "<|tool_call|>")
    assert regex.naming_special_tokens(vocab.special_names) is regex


# -- byte strings with special tokens, as token ids ------------------------------------------------------


def test_special_token_view(vocab: tm.Vocabulary) -> None:
    view = vocab.special_token_view
    ids = _ids(vocab)
    call, eos = ids["<|tool_call|>"], ids["<|endoftext|>"]
    assert view.original is vocab and vocab.original is vocab and view.special_token_view is view
    assert view.token_bytes[call] == special_token_bytes(call) and view.token_bytes[eos] is None
    assert view.eos_ids == vocab.eos_ids and view.fingerprint != vocab.fingerprint
    # a byte vocabulary has a raw 0xFF token: never text in a grammar that names special tokens
    raw = tm.byte_vocabulary()
    assert raw.token_bytes[0xFF] == b"\xff" and raw.special_token_view.token_bytes[0xFF] is None
    assert 0xFF in raw.special_token_view.special_ids


def test_canonical_ids_split_on_special_tokens(vocab: tm.Vocabulary) -> None:
    ids = _ids(vocab)
    call, end = ids["<|tool_call|>"], ids["<|/tool_call|>"]
    data = b"call " + special_token_bytes(call) + b'{"s":"hi"}' + special_token_bytes(end)
    view = vocab.special_token_view
    expected = (*vocab.encode("call "), call, *vocab.encode('{"s":"hi"}'), end)
    assert view.canonical_ids(data) == expected == canonical_ids(view, data)
    assert view.decode(expected) == data
    fewest = view.index.fewest_tokens(data)
    assert fewest is not None and view.decode(fewest) == data and call in fewest and end in fewest
    # the engines' vocabulary has no bytes for special ids: such data has no encoding there
    assert vocab.canonical_ids(data) is None
    # the special token's text spelled in ordinary bytes stays text
    text = b"call <|tool_call|>"
    spelled = view.canonical_ids(text)
    assert spelled == tuple(vocab.encode(text.decode())) and call not in spelled
    assert view.canonical_ids(b"call \xff12") is None  # a broken encoding is no text either


# -- the adapters ---------------------------------------------------------------------------------------


def _reference_after(spec: refdecoder.Spec, vocab: tm.Vocabulary, ids: list[int]) -> list[int]:
    tg = refdecoder.TokenGrammar(refdecoder.compile(spec), vocab)
    state = tg.initial()
    for t in ids:
        nxt = tg.advance(state, t)
        assert nxt is not None
        state = nxt
    return list(tg.allowed_ids(state))


@pytest.mark.parametrize(
    ("engine", "kind"), [("llguidance", SpecKind.LARK), ("xgrammar", SpecKind.STRUCTURAL_TAG)]
)
def test_adapter_masks_special_tokens_where_named(engine: str, kind: SpecKind, vocab: tm.Vocabulary) -> None:
    backend = _backend(engine)
    ids = _ids(vocab)
    source = (
        {"text": 'start: "call " <|tool_call|> "x"', "special_tokens": {}}
        if kind is SpecKind.LARK
        else {"tag": TAG, "special_tokens": {}}
    )
    spec = SpecRef(kind, source).naming_special_tokens(vocab.special_names).to_spec()
    compiled = backend.compile(spec, vocab)
    assert isinstance(compiled, Compiled), compiled
    m = backend.matcher(compiled)
    prefix = vocab.encode("call ")
    for t in prefix:
        assert type(m.accept(t)).__name__ == "Accepted"
    allowed = _allowed(m.mask(), len(vocab))
    assert allowed == _reference_after(spec, vocab, prefix) == [ids["<|tool_call|>"]]
    assert type(m.accept(ids["<|tool_call|>"])).__name__ == "Accepted"
    assert ids["<|tool_call|>"] not in _allowed(m.mask(), len(vocab))


def test_adapters_refuse_what_they_do_not_compile(vocab: tm.Vocabulary) -> None:
    ids = _ids(vocab)
    call, end, think = ids["<|tool_call|>"], ids["<|/tool_call|>"], ids["<|think|>"]
    lark = Lark('start: <|tool_call|> "x"', (("<|tool_call|>", call),))
    tag = StructuralTag(TAG, (("<|tool_call|>", call), ("<|/tool_call|>", end)))
    cases: list[tuple[str, refdecoder.Spec, str]] = [
        ("xgrammar", lark, "lark"),
        ("llguidance", tag, "structural_tag"),
        ("outlines-core", lark, ""),
        # a table that names an id the vocabulary calls otherwise: the sides would read different specs
        ("xgrammar", StructuralTag(TAG, (("<|tool_call|>", think),)), "special_tokens"),
        ("llguidance", Lark('start: <|tool_call|> "x"', (("<|tool_call|>", think),)), "special_tokens"),
        # a token string the vocabulary does not have (xgrammar reports it as a failed Check)
        ("xgrammar", StructuralTag({"type": "token", "token": "<|nope|>"}), "structural_tag"),
    ]
    for engine, spec, keyword in cases:
        try:
            backend = load_backend(engine)
        except BackendUnavailable:
            continue
        refused = backend.compile(spec, vocab)
        assert isinstance(refused, Refused), (engine, spec)
        assert refused.keyword == keyword or (not keyword and type(spec).__name__ in refused.reason)


# -- certify end to end ---------------------------------------------------------------------------------


def _certify(engine: str, spec: SpecRef, vocab: tm.Vocabulary) -> list[Finding]:
    result = certify_case(_backend(engine), Case(spec), vocab, examples=3, strings=2)
    assert result.status == "checked", result.refusal
    assert result.checks["soundness"] > 0 and result.checks["completeness_token"] > 0
    assert not result.self_check, result.self_check  # reference and validator agree on every witness
    assert not [f for f in result.findings if f.invariant is Invariant.CRASH]
    for f in result.findings:  # findings name the engines' vocabulary, not the special-token view
        assert f.tokenizer_fingerprint == vocab.fingerprint
    return result.findings


def _special_soundness(findings: list[Finding], vocab: tm.Vocabulary) -> set[int]:
    return {
        f.token_id
        for f in findings
        if f.invariant is Invariant.SOUNDNESS
        and f.token_id is not None
        and vocab.token_bytes[f.token_id] is None
    }


def test_certify_llguidance_lark(vocab: tm.Vocabulary) -> None:
    """llguidance reads special tokens as the reference does (never text, only where named): no
    soundness finding is about a special token."""
    spec = SpecRef(SpecKind.LARK, {"text": LARK_TEXT, "special_tokens": {}}, "lark-tool-call", "test")
    findings = _certify("llguidance", spec, vocab)
    assert not _special_soundness(findings, vocab)
    assert all(f.spec.special_names for f in findings)  # each finding carries its name table


def test_certify_xgrammar_structural_tag(vocab: tm.Vocabulary) -> None:
    """xgrammar, with special tokens keeping their text as production's TokenizerInfo does, allows
    them inside a JSON string of the arguments: soundness findings with the tokens as their witnesses.
    If xgrammar stops treating a special token as its text there, this test says so."""
    spec = SpecRef(SpecKind.STRUCTURAL_TAG, {"tag": TAG, "special_tokens": {}}, "tag-tool-call", "test")
    findings = _certify("xgrammar", spec, vocab)
    ids = _ids(vocab)
    inside = _special_soundness(findings, vocab)
    assert inside and inside <= {ids["<|tool_call|>"], ids["<|/tool_call|>"], ids["<|think|>"]}
    for f in findings:
        if f.token_id in inside:
            assert b'{"s":"' in f.prefix_bytes and f.reference_allows is False


@pytest.fixture()
def tag_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "tool-call.json"
    path.write_text(json.dumps(TAG), encoding="utf-8")
    yield path


def test_cli_structural_tag_report_and_reproducer(tag_file: Path, vocab_file: Path, tmp_path: Path) -> None:
    """``maskcert certify --structural-tag`` on a vocabulary file: the report shows special tokens by
    name, never as raw 0xFF bytes, and a reproducer of a special-token finding reproduces it with
    nothing but xgrammar."""
    _backend("xgrammar")
    from maskcert.cli import main

    out = tmp_path / "report"
    argv = ["certify", "--backend", "xgrammar", "--in-process", "--tokenizer", str(vocab_file.parent)]
    argv += ["--structural-tag", str(tag_file), "--examples", "2", "--out", str(out)]
    assert main(argv) == 1  # soundness findings (test_certify_xgrammar_structural_tag)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert {f["spec"]["kind"] for f in report["findings"]} == {"structural_tag"}
    texts = [f["prefix_bytes"]["text"] for f in report["findings"] if f["prefix_bytes"]]
    assert any("<|tool_call|>" in t for t in texts) and not any("\\xff" in t for t in texts)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "<|tool_call|>" in md and "\\xff" not in md
    special = [
        f
        for f in report["findings"]
        if f["invariant"] == "soundness" and (f["token_bytes"] or {}).get("hex", "").startswith("ff")
    ]
    assert special and special[0]["repro"]
    proc = subprocess.run(
        [sys.executable, str(out / special[0]["repro"])],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout, proc.stdout + proc.stderr


def test_reproducer_of_a_lark_finding(vocab: tm.Vocabulary, tmp_path: Path) -> None:
    """A llguidance reproducer of a Lark finding rebuilds the tokenizer with its special tokens."""
    _backend("llguidance")
    spec = SpecRef(SpecKind.LARK, {"text": LARK_TEXT, "special_tokens": {}}, "lark-tool-call", "test")
    result = certify_case(_backend("llguidance"), Case(spec), vocab, examples=2, strings=2)
    token = [f for f in result.findings if f.token_id is not None and f.invariant is not Invariant.EOS]
    if not token:
        pytest.skip("llguidance showed no token finding on this grammar to reproduce")
    (written,) = write_reproducers(token[:1], {vocab.fingerprint: vocab}, tmp_path)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / written.repro)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout, proc.stdout + proc.stderr


# -- minimization ---------------------------------------------------------------------------------------


def test_minimize_structural_tag_and_lark(vocab: tm.Vocabulary) -> None:
    ids = _ids(vocab)
    table = {"<|tool_call|>": ids["<|tool_call|>"], "<|/tool_call|>": ids["<|/tool_call|>"]}
    spec = SpecRef(SpecKind.STRUCTURAL_TAG, {"tag": TAG, "special_tokens": table})

    def still(s: SpecRef) -> bool:  # "the defect": the tag still names <|/tool_call|>
        return '"<|/tool_call|>"' in json.dumps(s.source["tag"])

    got = minimize(spec, still, max_calls=100)
    assert got.steps > 0 and not got.note and still(got.spec)
    assert len(json.dumps(got.spec.source)) < len(json.dumps(spec.source))
    assert "<|tool_call|>" not in got.spec.special_names.values()  # the unused name went too
    padded = LARK_TEXT + '\nstart2: "x" <|/tool_call|>\nUNUSED: "zz"\n'
    lark = SpecRef(
        SpecKind.LARK, {"text": padded, "special_tokens": {**table, "<|think|>": ids["<|think|>"]}}
    )

    def names_end(s: SpecRef) -> bool:
        return "<|/tool_call|>" in s.source["text"] and "%json" in s.source["text"]

    got = minimize(lark, names_end, max_calls=100)
    assert got.steps > 0 and not got.note and names_end(got.spec)
    assert "UNUSED" not in got.spec.source["text"] and "start2" not in got.spec.source["text"]
    assert "<|think|>" not in got.spec.source["special_tokens"]
    refdecoder.compile(got.spec.to_spec())  # what is left is a grammar
    broken = SpecRef(SpecKind.LARK, {"text": "start: (", "special_tokens": {}})

    def never(s: SpecRef) -> bool:
        raise AssertionError(
            f"still() called on {s.source!r}, a candidate of a grammar that does not compile"
        )

    left = minimize(broken, never)  # a grammar the reference cannot read is left alone, after no call
    assert left.spec == broken and left.steps == 0


class _RawFF:
    """A reference matcher that also allows every ordinary token holding a raw 0xFF byte (invalid
    UTF-8: never text in a grammar that names special tokens)."""

    def __init__(self, inner: Any, raw_ff: list[int], size: int) -> None:
        self.inner, self.raw_ff, self.size = inner, raw_ff, size

    def mask(self) -> Any:
        from refdecoder._tokens import pack_ids, unpack_mask

        return pack_ids(sorted({*unpack_mask(self.inner.mask(), self.size), *self.raw_ff}), self.size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_raw_ff_token_allowed_is_a_finding_not_a_self_check_note(vocab: tm.Vocabulary) -> None:
    """An engine that allows a token holding a raw 0xFF byte in free text is unsound; the output through
    it cannot be spelled in the bytes the reference reads (0xFF starts a special token's encoding there),
    so certify keeps the finding with the token's text rather than validating a completion that lost
    the token and filing a bogus reference self-check note."""
    from props.backends.reference import ReferenceBackend

    raw_ff = [i for i, b in enumerate(vocab.token_bytes) if b is not None and 0xFF in b]
    assert raw_ff, "the byte-level vocabulary has a token for the byte 0xFF"

    class Backend(ReferenceBackend):
        def matcher(self, compiled: Compiled) -> Any:
            return _RawFF(super().matcher(compiled), raw_ff, len(vocab))

    tag = {
        "type": "sequence",
        "elements": [{"type": "any_text"}, {"type": "token", "token": "<|tool_call|>"}],
    }
    spec = SpecRef(SpecKind.STRUCTURAL_TAG, {"tag": tag, "special_tokens": {}}, "free-text-then-call", "test")
    result = certify_case(Backend(), Case(spec), vocab, examples=2, strings=1)
    assert not result.self_check, result.self_check
    found = [f for f in result.findings if f.invariant is Invariant.SOUNDNESS and f.token_id in raw_ff]
    assert found, [f.message for f in result.findings]
    cert = found[0].certificate or {}
    assert 0xFF in cert["token_text"] and "unspellable" in cert and "completion" not in cert
