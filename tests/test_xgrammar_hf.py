"""The ``xgrammar-hf`` adapter: xgrammar's transformers ``LogitsProcessor`` certified as a Backend.

The adapter-wide properties (protocols, masks equal to the processor's own, forks, rollback) are in
``tests/test_adapters.py``; here: the glue checks no mask comparison can make (padding ids left
finite, allowed logits changed), the padded width, the Hugging Face tokenizer path, and that
``maskcert.certify`` runs the adapter end to end and agrees with the reference on the built-in corpus.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pytest
import torch

pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install 'maskcert[backends]')")
pytest.importorskip("transformers", reason="xgrammar.contrib.hf needs transformers")

import tokenizers_matrix as tm  # noqa: E402
from props.backends import load_backend, xgrammar_hf  # noqa: E402
from props.backends.xgrammar_hf import ProcessorGlueError, XGrammarHFBackend, padded_width  # noqa: E402
from props.contract.backend import Accepted, Compiled, Rejected  # noqa: E402
from refdecoder import Choice, JsonSchema, Matcher, Regex, TokenGrammar, compile  # noqa: E402


@pytest.fixture(scope="module")
def vocab() -> tm.Vocabulary:
    return tm.get("bpe")


def test_registered_with_padding_and_the_hf_tokenizer_path(vocab: tm.Vocabulary) -> None:
    b = load_backend("xgrammar-hf")
    assert isinstance(b, XGrammarHFBackend) and b.name == "xgrammar-hf"
    assert any("LogitsProcessor" in n for n in b.profile.notes)
    compiled = b.compile(Regex("(ab|cd)+x"), vocab)
    assert isinstance(compiled, Compiled)
    assert compiled.handle.width == padded_width(len(vocab), 64) > len(vocab)
    # the vocabulary came from a tokenizer.json: xgrammar read it through from_huggingface
    info = compiled.handle.grammar.tokenizer_info
    assert info.vocab_size == compiled.handle.width
    assert xgrammar_hf._hf_tokenizer(vocab) is not None
    assert xgrammar_hf._hf_tokenizer(tm.byte_vocabulary()) is None


@pytest.mark.parametrize("source", ["huggingface", "raw"])
def test_masks_equal_the_reference_on_a_walk(
    vocab: tm.Vocabulary, source: Literal["huggingface", "raw"]
) -> None:
    spec = Regex("(ab|cd)+x[0-9]{2}")
    b = XGrammarHFBackend(tokenizer_info=source)
    compiled = b.compile(spec, vocab)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    ref = Matcher(TokenGrammar(compile(spec), vocab))
    for text in ["ab", "cd", "ab", "x", "4", "2"]:
        np.testing.assert_array_equal(m.mask(), ref.mask())
        t = vocab.token_bytes.index(text.encode())
        assert isinstance(m.accept(t), Accepted) and ref.accept(t).__class__.__name__ == "Accepted"
    assert m.is_accepting() and ref.is_accepting()
    eos = min(vocab.eos_ids)
    assert isinstance(m.accept(eos), Accepted) and m.is_terminated()
    assert isinstance(m.accept(eos), Rejected)


def test_a_masked_token_is_rejected_and_changes_nothing(vocab: tm.Vocabulary) -> None:
    b = XGrammarHFBackend()
    compiled = b.compile(Choice(["yes", "no"]), vocab)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    before = m.mask()
    z = vocab.token_bytes.index(b"z")
    out = m.accept(z)
    assert isinstance(out, Rejected) and "LogitsProcessor" in out.reason
    np.testing.assert_array_equal(m.mask(), before)
    assert isinstance(m.accept(len(vocab) + 3), Rejected)  # a padding id is outside the vocabulary


class _NarrowInfoBackend(XGrammarHFBackend):
    """The classic glue mistake: ``TokenizerInfo`` as wide as the tokenizer, logits as wide as the model."""

    def _build_compiler(self, vocabulary: tm.Vocabulary) -> Any:
        import xgrammar as xgr

        encoded = [b if b is not None else b"" for b in vocabulary.token_bytes]
        info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, stop_token_ids=sorted(vocabulary.eos_ids))
        return xgr.GrammarCompiler(info, max_threads=1)


def test_padding_ids_left_finite_are_a_glue_error(vocab: tm.Vocabulary) -> None:
    """xgrammar's apply_token_bitmask_inplace leaves logits past its bitmask untouched; with a
    TokenizerInfo narrower than the logits, padding ids stay finite and the adapter says so."""
    b = _NarrowInfoBackend(pad_to=128)
    compiled = b.compile(Regex("ab"), vocab)
    assert isinstance(compiled, Compiled)
    with pytest.raises(ProcessorGlueError, match="padding id"):
        b.matcher(compiled).mask()
    assert padded_width(len(vocab), 1) == len(vocab)  # pad_to=1: no padding, so no such error
    compiled = _NarrowInfoBackend(pad_to=1).compile(Regex("ab"), vocab)
    assert isinstance(compiled, Compiled)
    assert _NarrowInfoBackend(pad_to=1).matcher(compiled).mask().any()


def test_a_processor_that_changes_allowed_logits_is_a_glue_error(
    vocab: tm.Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = xgrammar_hf.xgr_hf.LogitsProcessor

    class Scaling(real):  # type: ignore[misc, valid-type]
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            return super().__call__(input_ids, scores) * 0.5

    monkeypatch.setattr(xgrammar_hf.xgr_hf, "LogitsProcessor", Scaling)
    b = XGrammarHFBackend()
    compiled = b.compile(Regex("ab"), vocab)
    assert isinstance(compiled, Compiled)
    with pytest.raises(ProcessorGlueError, match="changed the logit of allowed token"):
        b.matcher(compiled).mask()


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="pad_to"):
        XGrammarHFBackend(pad_to=0)
    with pytest.raises(ValueError, match="tokenizer_info"):
        XGrammarHFBackend(tokenizer_info="sentencepiece")  # type: ignore[arg-type]


def test_certify_runs_the_processor_end_to_end(tmp_path: Any) -> None:
    """``maskcert.certify`` on the adapter: every check runs through the processor, in its worker."""
    import maskcert

    report = maskcert.certify(
        "xgrammar-hf",
        tokenizers=["bpe"],
        corpus=[],
        regexes=[r"[a-z]{1,4}@(ab|cd)\.org", r"(yes|no|maybe)"],
        examples=2,
        strings=1,
        out=tmp_path,
        minimize_s=0,
    )
    data = report.data
    assert data["backend"]["name"] == "xgrammar-hf"
    assert data["specs"]["checked"] == 2 and data["specs"]["internal_error"] == 0
    assert sum(data["counts"]["checks"].values()) > 0 if "checks" in data["counts"] else data["counts"]
    # xgrammar agrees with the reference on these regexes; the processor adds no difference of its own
    assert [f["invariant"] for f in data["findings"]] == []
    assert report.exit_code == 0
    assert (tmp_path / "report.json").is_file()


@pytest.mark.parametrize(("token", "reproduced"), [(ord("b"), 0), (ord("c"), 1)])
def test_reproducer_drives_the_processor(tmp_path: Any, token: int, reproduced: int) -> None:
    """A reproducer script for this adapter replays through the processor itself: after ``a`` in
    ``a|ab`` the processor allows ``b`` (a claim that it masks ``b`` does not reproduce) and masks
    ``c`` (a claim that it masks ``c`` does)."""
    from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
    from props.output.repro import write_reproducers
    from tests.test_repro import _run

    vocab = tm.byte_vocabulary()
    f = Finding(
        Invariant("completeness_token"),
        "xgrammar-hf",
        backend_version="test",
        spec=SpecRef(SpecKind.REGEX, "a|ab", name="a-or-ab"),
        tokenizer=vocab.name,
        tokenizer_fingerprint=vocab.fingerprint,
        prefix_ids=(ord("a"),),
        token_id=token,
        token_bytes=bytes([token]),
        backend_verdict="masked",
        reference_verdict="allowed",
        reference_allows=True,
        certificate={"witness": "ab", "witness_ids": [ord("a"), ord("b"), 256]},
    )
    (out,) = write_reproducers([f], {vocab.fingerprint: vocab}, tmp_path)
    proc = _run(tmp_path / out.repro)
    assert proc.returncode == reproduced, proc.stdout + proc.stderr
    assert ("REPRODUCED: " if reproduced else "NOT REPRODUCED: ") in proc.stdout


def test_from_huggingface_lets_special_tokens_through_as_text() -> None:
    """A defect of xgrammar's transformers glue that its core does not have, found by certifying the
    processor: ``TokenizerInfo.from_huggingface`` reads added special tokens (``<unk>``, ``<s>``; on
    the 65k Anthropic file ``<META>`` and the like) from ``get_vocab()`` as their literal text, so the
    processor allows them inside a JSON string. Over the raw bytes (special ids as empty strings, the
    ``xgrammar`` adapter's way) they stay masked. If xgrammar fixes this, this test says so."""
    vocab = tm.get("hf-metaspace-bpe")
    specials = sorted(vocab.special_ids - vocab.eos_ids)
    assert specials
    quote = vocab.encode('"')[0]
    allowed: dict[str, list[int]] = {}
    for source in ("huggingface", "raw"):
        b = XGrammarHFBackend(tokenizer_info=source)
        compiled = b.compile(JsonSchema({"type": "string"}), vocab)
        assert isinstance(compiled, Compiled)
        m = b.matcher(compiled)
        assert isinstance(m.accept(quote), Accepted)
        mask = m.mask()
        allowed[source] = [t for t in specials if int(mask[t >> 5]) >> (t & 31) & 1]
    assert allowed == {"huggingface": specials, "raw": []}
