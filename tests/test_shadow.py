"""``maskcert.shadow.ShadowLogitsProcessor``: an engine's logits processor shadow-checked in ``generate``.

A tiny random ``LlamaForCausalLM`` (hidden 16, one layer, nothing downloaded) generates under a
transformers tokenizer read from a real ``tokenizer.json`` (the CI byte-level BPE, written to a file).
The engines are fakes with one deliberate defect (the reference's own processor, with one token let
through or held back at the first step), the reference itself (no findings), and xgrammar's own
``xgrammar.contrib.hf.LogitsProcessor`` driven into a known defect of it. Every finding's certificate
is decided again by a fresh reference matcher and the independent validator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
pytest.importorskip(
    "prometheus_client", reason="prometheus_client is not installed (pip install 'maskcert[shadow]')"
)

import prometheus_client  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

import tokenizers_matrix as tm  # noqa: E402
from maskcert.shadow import ShadowError, ShadowLogitsProcessor  # noqa: E402
from props.contract.findings import Finding, Invariant  # noqa: E402
from props.output.report import load_report  # noqa: E402
from refdecoder import Accepted, JsonProfile, JsonSchema, Matcher, Regex, TokenGrammar, compile  # noqa: E402
from refdecoder.hf import ReferenceLogitsProcessor  # noqa: E402

hf_logging.set_verbosity_error()

COMPACT = JsonProfile(
    whitespace="none", top_level_whitespace=False, unicode_escapes=False, property_order="schema"
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 4}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
PATTERN = r"[a-z]{1,4}@[a-z]{2,3}\.(com|org)"
MAX_NEW = 24
EOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerFast:
    vocab = tm.train_bpe(512)
    path: Path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    vocab.codec.tokenizer.save(str(path))  # type: ignore[union-attr]
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=EOS)


def width(tokenizer: PreTrainedTokenizerFast) -> int:
    """Logits as wide as a model pads them: the next multiple of 64 above the vocabulary."""
    return (len(tokenizer) // 64 + 1) * 64


@pytest.fixture(scope="module")
def model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=width(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config).eval()


def token_id(tokenizer: PreTrainedTokenizerFast, text: str) -> int:
    """The id whose bytes are ``text`` (as the reference reads the tokenizer)."""
    return ReferenceLogitsProcessor(Regex("a"), tokenizer).vocabulary.token_bytes.index(text.encode())


class Defective:
    """The reference's processor with one defect at the first step: ``allow`` left finite (unsound)
    or ``block`` set to ``-inf`` (incomplete)."""

    def __init__(self, spec: Any, tokenizer: Any, allow: int | None = None, block: int | None = None) -> None:
        self.inner = ReferenceLogitsProcessor(spec, tokenizer)
        self.allow, self.block = allow, block
        self.prompt_len: int | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.prompt_len is None:
            self.prompt_len = input_ids.shape[1]
        first = input_ids.shape[1] == self.prompt_len
        out = self.inner(input_ids, scores)
        if first and self.allow is not None:
            out[:, self.allow] = scores[:, self.allow]
        if first and self.block is not None:
            out[:, self.block] = float("-inf")
        return out


class Drive:
    """Drives generation along ``ids`` (then EOS): a processor in front that raises their scores."""

    def __init__(self, ids: list[int], eos: int) -> None:
        self.ids, self.eos = ids, eos
        self.prompt_len: int | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.prompt_len is None:
            self.prompt_len = input_ids.shape[1]
        step = input_ids.shape[1] - self.prompt_len
        target = self.ids[step] if step < len(self.ids) else self.eos
        scores = scores.clone()
        scores[:, target] += 1000.0
        return scores


def generate(model: Any, tokenizer: Any, processors: list[Any], **kw: Any) -> torch.Tensor:
    prompt = torch.tensor([[tokenizer.eos_token_id, 5, 9]])
    return model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=processors,
        max_new_tokens=MAX_NEW,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        do_sample=False,
        **kw,
    )


def reference_matcher(spec: Any, tokenizer: Any) -> Matcher:
    return Matcher(TokenGrammar(compile(spec), ReferenceLogitsProcessor(spec, tokenizer).vocabulary))


def recheck(f: Finding, spec: Any, tokenizer: Any) -> None:
    """The certificate decided again: a fresh reference matcher on the finding's prefix and token."""
    m = reference_matcher(spec, tokenizer)
    for i in f.prefix_ids:
        assert isinstance(m.accept(i), Accepted)
    assert f.token_id is not None
    if f.invariant is Invariant.SOUNDNESS:
        assert not isinstance(m.fork().accept(f.token_id), Accepted)
        return
    assert f.invariant in (Invariant.COMPLETENESS_CANONICAL, Invariant.COMPLETENESS_TOKEN)
    ids = f.certificate["witness_ids"]
    assert ids[: f.step + 1] == [*f.prefix_ids, f.token_id]
    for i in ids[f.step :]:
        assert isinstance(m.accept(i), Accepted)
    assert m.is_accepting()
    assert bytes(f.certificate["witness"]) == bytes(tm.train_bpe(512).decode(ids))
    assert re.fullmatch(PATTERN, f.certificate["witness"].decode())


def test_an_unsound_engine_is_caught_with_a_certificate(model: Any, tokenizer: Any, tmp_path: Path) -> None:
    spec = JsonSchema(SCHEMA, COMPACT)
    bad = token_id(tokenizer, "]")
    engine = Defective(spec, tokenizer, allow=bad)
    shadow = ShadowLogitsProcessor(engine, spec, tokenizer, backend="fake", backend_version="1")
    out = generate(model, tokenizer, [Drive([bad], tokenizer.eos_token_id), shadow])
    assert out[0, 3].item() == bad  # the engine let it through, and generation took it
    assert len(shadow.findings) == 1
    f = shadow.findings[0]
    assert (f.invariant, f.prefix_ids, f.token_id, f.token_bytes) == (Invariant.SOUNDNESS, (), bad, b"]")
    assert (f.backend, f.backend_version, f.walk, f.reference_allows) == ("fake", "1", "shadow", False)
    recheck(f, spec, tokenizer)
    # the engine then let "]" end (EOS only, as the reference processor offers a dead row): the output
    # is the certificate's completion, which the independent validator rejects
    assert f.certificate["completion"] == b"]" and f.certificate["validator_error"]
    c = shadow.counters()
    assert c["steps_checked"] == out.shape[1] - 3 and c["steps_skipped"] == 0
    assert c["disagreements"] == {"soundness": 1} and c["findings"] == {"soundness": 1}
    assert c["mask_hit_rate"]["count"] == c["steps_checked"] and 0 < c["mask_hit_rate"]["mean"] <= 1
    # the report certify writes, readable again
    paths = shadow.write_report(tmp_path)
    report = load_report(paths["json"])
    assert [Finding.from_json(x).key for x in report["findings"]] == [f.key]
    assert "validator_error" in paths["html"].read_text(encoding="utf-8")


def test_an_incomplete_engine_is_caught_with_a_witness(model: Any, tokenizer: Any) -> None:
    spec = Regex(PATTERN)
    blocked = token_id(tokenizer, "a")
    shadow = ShadowLogitsProcessor(Defective(spec, tokenizer, block=blocked), spec, tokenizer)
    generate(model, tokenizer, [shadow])
    assert len(shadow.findings) == 1
    f = shadow.findings[0]
    assert f.invariant in (Invariant.COMPLETENESS_CANONICAL, Invariant.COMPLETENESS_TOKEN)
    assert (f.prefix_ids, f.token_id, f.backend_verdict, f.reference_allows) == ((), blocked, "masked", True)
    assert f.certificate["validated_by"] == "re.fullmatch"
    recheck(f, spec, tokenizer)
    assert shadow.counters()["findings"] == {str(f.invariant): 1}
    assert shadow.counters()["disagreements"] == {"completeness": 1}


@pytest.mark.parametrize("kind", ["json", "regex"])
def test_a_correct_engine_has_no_findings(model: Any, tokenizer: Any, kind: str) -> None:
    spec = JsonSchema(SCHEMA, COMPACT) if kind == "json" else Regex(PATTERN)
    shadow = ShadowLogitsProcessor(ReferenceLogitsProcessor(spec, tokenizer), spec, tokenizer)
    plain = generate(model, tokenizer, [ReferenceLogitsProcessor(spec, tokenizer)])
    shadowed = generate(model, tokenizer, [shadow])
    assert torch.equal(plain, shadowed)  # the shadow changes nothing
    assert shadow.findings == []
    c = shadow.counters()
    assert c["steps_checked"] == shadowed.shape[1] - 3 and c["disagreements"] == {}


def test_sampling_at_zero_checks_nothing(model: Any, tokenizer: Any) -> None:
    spec = Regex(PATTERN)
    shadow = ShadowLogitsProcessor(
        Defective(spec, tokenizer, block=token_id(tokenizer, "a")), spec, tokenizer, sample_rate=0.0
    )
    out = generate(model, tokenizer, [shadow])
    c = shadow.counters()
    assert shadow.findings == [] and c["steps_checked"] == 0 and c["steps_skipped"] == out.shape[1] - 3
    assert c["mask_hit_rate"]["count"] == out.shape[1] - 3  # the hit rate is watched on every step


def test_sampling_is_seeded(model: Any, tokenizer: Any) -> None:
    spec = Regex(PATTERN)
    counts = []
    for _ in range(2):
        shadow = ShadowLogitsProcessor(
            ReferenceLogitsProcessor(spec, tokenizer), spec, tokenizer, sample_rate=0.5, seed=7
        )
        generate(model, tokenizer, [shadow])
        counts.append((shadow.counters()["steps_checked"], shadow.counters()["steps_skipped"]))
    assert counts[0] == counts[1] and counts[0][0] > 0 and counts[0][1] > 0


def test_bad_input_names_what_was_expected(tokenizer: Any) -> None:
    spec = Regex(PATTERN)
    engine = ReferenceLogitsProcessor(spec, tokenizer)
    with pytest.raises(ShadowError, match="sample_rate: expected a number from 0.0 to 1.0"):
        ShadowLogitsProcessor(engine, spec, tokenizer, sample_rate=1.5)
    with pytest.raises(ShadowError, match="engine_processor: expected a callable"):
        ShadowLogitsProcessor(None, spec, tokenizer)  # type: ignore[arg-type]
    with pytest.raises(ShadowError, match="registry: expected a prometheus_client.CollectorRegistry"):
        ShadowLogitsProcessor(engine, spec, tokenizer, registry={})
    with pytest.raises(ShadowError, match="spec: expected a refdecoder JsonSchema"):
        ShadowLogitsProcessor(engine, compile(spec), tokenizer)  # type: ignore[arg-type]
    shadow = ShadowLogitsProcessor(engine, spec, tokenizer)
    with pytest.raises(ShadowError, match=r"scores: expected at least \d+ columns"):
        shadow(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, 10)))
    with pytest.raises(ShadowError, match="input_ids: expected an integer tensor"):
        shadow(torch.zeros(3, dtype=torch.long), torch.zeros((1, width(tokenizer))))
    # a shared registry is used as it is
    registry = prometheus_client.CollectorRegistry()
    ShadowLogitsProcessor(engine, spec, tokenizer, registry=registry)
    assert registry.get_sample_value("maskcert_shadow_steps_checked_total") == 0.0


def test_a_missing_prometheus_client_is_a_typed_error(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from maskcert.shadow import ShadowUnavailable

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    spec = Regex(PATTERN)
    with pytest.raises(ShadowUnavailable, match=r"prometheus_client: pip install 'maskcert\[shadow\]'"):
        ShadowLogitsProcessor(ReferenceLogitsProcessor(spec, tokenizer), spec, tokenizer)


# -- a real engine: xgrammar's transformers processor -----------------------------------------------

# ci/known_defects.json "xgrammar-multipleof-ignored": a fractional multipleOf is not enforced, so
# xgrammar lets {"n":0.001} finish. Reproduced by hand on xgrammar 0.2.9.
MULTIPLE_OF = {
    "type": "object",
    "properties": {"n": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01}},
    "required": ["n"],
}


def test_xgrammar_hf_defect_is_recorded(model: Any, tokenizer: Any, tmp_path: Path) -> None:
    pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install 'maskcert[backends]')")
    from maskcert.shadow import xgrammar_processor
    from props.backends.xgrammar import declared_profile

    engine = xgrammar_processor(MULTIPLE_OF, tokenizer, width(tokenizer))
    spec = JsonSchema(MULTIPLE_OF, declared_profile().json)
    shadow = ShadowLogitsProcessor(engine, spec, tokenizer, backend="xgrammar-hf", backend_version="0.2.9")
    text = '{"n":0.001}'
    drive = Drive(tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id)
    out = generate(model, tokenizer, [drive, shadow])
    print("\n" + shadow.exposition())
    for f in shadow.findings:
        print(f.invariant, f.message)
    assert tokenizer.decode(out[0, 3:], skip_special_tokens=True) == text  # xgrammar let it all through
    unsound = [f for f in shadow.findings if f.invariant is Invariant.SOUNDNESS]
    assert unsound, shadow.findings
    f = unsound[0]
    assert f.prefix_bytes + (f.token_bytes or b"") in {text[:k].encode() for k in range(len(text) + 1)}
    assert b"}" in (f.token_bytes or b"") and f.prefix_bytes.endswith(b"0.001")
    recheck(f, spec, tokenizer)
    assert f.certificate["completion"] == text.encode()
    assert "multiple" in f.certificate["validator_error"].lower()
    assert shadow.counters()["findings"].get("soundness", 0) >= 1
    report = load_report(shadow.write_report(tmp_path)["json"])
    assert report["backend"]["name"] == "xgrammar-hf" and report["exit_code"] == 1
    assert json.dumps(report["findings"])  # plain JSON, as certify writes it
