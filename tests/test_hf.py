"""``refdecoder.hf.ReferenceLogitsProcessor`` in ``model.generate``: a tiny random Llama, real tokenizers.

The model is a ``LlamaForCausalLM`` built from a ``LlamaConfig`` with random weights (nothing is
downloaded). Tokenizers: the real 65k byte-level BPE file in the shared data (skipped without it), and
a Llama-style Metaspace BPE with ``<0xNN>`` byte fallback trained here. Every output of greedy,
sampled and beam-search generation is checked by an independent validator (``jsonschema``,
``re.fullmatch``), and the processor's finite scores are compared with the reference's mask per step.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

import jsonschema  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from refdecoder import (  # noqa: E402
    Choice,
    JsonProfile,
    JsonSchema,
    Matcher,
    NoValidToken,
    Regex,
    TokenGrammar,
    VocabularyError,
    compile,
)
from refdecoder._budget import TokenDistances  # noqa: E402
from refdecoder._tokens import unpack_mask  # noqa: E402
from refdecoder.errors import SpecError  # noqa: E402
from refdecoder.hf import ReferenceLogitsProcessor, vocabulary_from_tokenizer  # noqa: E402
from tests._data import require_shared  # noqa: E402

hf_logging.set_verbosity_error()

# Bounded outputs, so that a random model ends within the budget: no whitespace, no duplicate keys,
# no \u escapes, properties in schema order.
COMPACT = JsonProfile(
    whitespace="none", top_level_whitespace=False, unicode_escapes=False, property_order="schema"
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "ok": {"type": "boolean"},
        "tag": {"enum": ["a", "b", None]},
    },
    "required": ["name", "ok"],
    "additionalProperties": False,
}
PATTERN = r"[a-z]{1,5}@[a-z]{2,4}\.(com|org)"
SPECS: dict[str, Any] = {"json": JsonSchema(SCHEMA, COMPACT), "regex": Regex(PATTERN)}
STRATEGIES: dict[str, dict[str, Any]] = {
    "greedy": {"do_sample": False},
    "sampling": {"do_sample": True, "top_k": 0, "temperature": 1.5},
    "beam": {"do_sample": False, "num_beams": 3, "num_return_sequences": 2},
}
MAX_NEW = 64
# No numbers in the schema: under JSON Schema a bounded integer still has unboundedly long spellings
# (``730000e-4`` is 73), so a random model may never stop writing one.


def valid(kind: str, text: str, schema: dict[str, Any] = SCHEMA, pattern: str = PATTERN) -> bool:
    """``text`` checked independently: ``re.fullmatch`` for a regex, ``jsonschema`` for JSON."""
    if kind == "regex":
        return re.fullmatch(pattern, text) is not None
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def tiny_llama(vocab_size: int, eos: int, seed: int = 0) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def anthropic() -> PreTrainedTokenizerFast:
    path = require_shared("tokenizers/anthropic-legacy-claude/tokenizer.json")
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<EOT>")


def train_metaspace(folder: Path) -> Path:
    """A Llama-style BPE (Metaspace ``▁``, ``<0xNN>`` byte pieces in the model vocabulary), as a file."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    import tokenizers_matrix._train as train

    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        min_frequency=2,
        special_tokens=["<unk>", "<s>", "</s>", *byte_pieces],
        show_progress=False,
    )
    tok.train_from_iterator(train._corpus_lines()[:400], trainer)
    raw = json.loads(tok.to_str())
    raw["added_tokens"] = [t for t in raw["added_tokens"] if t["content"] not in byte_pieces]
    path = folder / "tokenizer.json"
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def metaspace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_metaspace(tmp_path_factory.mktemp("metaspace"))


@pytest.fixture(scope="module")
def metaspace(metaspace_file: Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_file=str(metaspace_file), eos_token="</s>", unk_token="<unk>", bos_token="<s>"
    )


# -- token bytes ------------------------------------------------------------------------------------


def test_byte_level_bytes_match_the_loader(anthropic: PreTrainedTokenizerFast) -> None:
    import tokenizers_matrix

    mine = vocabulary_from_tokenizer(anthropic)
    theirs = tokenizers_matrix.load(
        require_shared("tokenizers/anthropic-legacy-claude/tokenizer.json"), eos="<EOT>"
    )
    assert mine.style == "byte-level"
    assert mine.token_bytes == theirs.token_bytes
    assert mine.eos_ids == theirs.eos_ids == {0}
    assert mine.special_ids == theirs.special_ids


def test_metaspace_bytes_match_the_loader(metaspace: PreTrainedTokenizerFast, metaspace_file: Path) -> None:
    import tokenizers_matrix

    mine = vocabulary_from_tokenizer(metaspace)
    theirs = tokenizers_matrix.load(metaspace_file)
    assert mine.style == "metaspace"
    assert mine.token_bytes == theirs.token_bytes
    assert mine.eos_ids == theirs.eos_ids
    fallback = {mine.token_bytes[i] for i in theirs.byte_fallback_ids}
    assert fallback == {bytes([b]) for b in range(256)}  # every <0xNN> piece is its one byte
    assert b" " in {mine.token_bytes[i] for i in range(len(mine)) if mine.token_bytes[i]}


def test_tokenizer_errors_name_what_was_expected(anthropic: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    no_eos = PreTrainedTokenizerFast(
        tokenizer_file=str(require_shared("tokenizers/anthropic-legacy-claude/tokenizer.json"))
    )
    with pytest.raises(VocabularyError, match="eos_token_id"):
        vocabulary_from_tokenizer(no_eos)
    assert vocabulary_from_tokenizer(no_eos, eos_token_id=0).eos_ids == {0}
    with pytest.raises(VocabularyError, match=r"EOS ids in \[0, 65000\)"):
        vocabulary_from_tokenizer(anthropic, eos_token_id=70_000)
    with pytest.raises(VocabularyError, match="transformers tokenizer"):
        ReferenceLogitsProcessor(Regex("a"), object())
    with pytest.raises(SpecError, match="max_new_tokens"):
        ReferenceLogitsProcessor(Regex("a"), anthropic, max_new_tokens=0)


# -- generation -------------------------------------------------------------------------------------


def generated(out: torch.Tensor, prompt_len: int, eos: set[int]) -> list[tuple[list[int], bool]]:
    """Each row's generated ids up to (not including) EOS, and whether it ended with EOS."""
    rows = []
    for row in out[:, prompt_len:].tolist():
        cut = next((k for k, t in enumerate(row) if t in eos), None)
        rows.append((row if cut is None else row[:cut], cut is not None))
    return rows


def text_of(vocabulary: Any, ids: list[int]) -> str:
    return b"".join(vocabulary.token_bytes[i] for i in ids).decode("utf-8")


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("kind", sorted(SPECS))
def test_generate_gives_only_valid_outputs(
    anthropic: PreTrainedTokenizerFast, kind: str, strategy: str
) -> None:
    processor = ReferenceLogitsProcessor(SPECS[kind], anthropic, max_new_tokens=MAX_NEW)
    model = tiny_llama(65_000, eos=0)
    prompt = torch.tensor([[11, 12, 13], [21, 22, 23]])
    torch.manual_seed(1)
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=[processor],
        max_new_tokens=MAX_NEW,
        eos_token_id=processor.eos_token_ids,
        pad_token_id=0,
        output_scores=True,
        return_dict_in_generate=True,
        **STRATEGIES[strategy],
    )
    rows = generated(out.sequences, 3, set(processor.eos_token_ids))
    assert len(rows) == 2 * STRATEGIES[strategy].get("num_return_sequences", 1)
    for ids, ended in rows:
        text = text_of(processor.vocabulary, ids)
        assert ended, f"{strategy}: no EOS within {MAX_NEW} tokens: {text!r}"
        assert valid(kind, text), f"{strategy} produced {text!r}, which is not valid {kind}"
    assert processor.stats["calls"] >= 1
    if strategy == "greedy":  # the finite scores are exactly the reference's mask, step by step
        tg = TokenGrammar(compile(SPECS[kind]), processor.vocabulary)
        budget = TokenDistances(tg)
        for row in range(len(rows)):
            m = Matcher(tg)
            for step, token in enumerate(out.sequences[row, 3:].tolist()):
                finite = torch.nonzero(out.scores[step][row] > float("-inf")).flatten().tolist()
                expected = processor.eos_token_ids
                if not m.is_terminated():
                    allowed = budget.budget_mask(m.state, MAX_NEW - step)
                    expected = unpack_mask(allowed, tg.vocab_size).tolist()
                    assert set(expected) <= set(m.allowed_ids())
                assert finite == expected, f"row {row} step {step}"
                if not m.is_terminated():
                    assert m.accept(token).__class__.__name__ == "Accepted"


def test_metaspace_tokenizer_generates_valid_json(metaspace: PreTrainedTokenizerFast) -> None:
    processor = ReferenceLogitsProcessor(SPECS["json"], metaspace, max_new_tokens=MAX_NEW)
    eos = processor.eos_token_ids[0]
    model = tiny_llama(len(metaspace), eos=eos, seed=3)
    prompt = torch.tensor([[5, 6], [7, 8], [9, 10]])
    torch.manual_seed(2)
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=[processor],
        max_new_tokens=MAX_NEW,
        eos_token_id=processor.eos_token_ids,
        pad_token_id=eos,
        do_sample=True,
        top_k=0,
    )
    for ids, ended in generated(out, 2, {eos}):
        text = text_of(processor.vocabulary, ids)
        assert ended and valid("json", text), text


def test_padded_vocabulary_and_a_vocabulary_object() -> None:
    """Logits wider than the vocabulary (a model padded to a multiple of 64): the extra ids stay -inf."""
    import tokenizers_matrix

    vocabulary = tokenizers_matrix.get("bpe")
    padded = (len(vocabulary) + 63) // 64 * 64 + 64
    eos = min(vocabulary.eos_ids)
    processor = ReferenceLogitsProcessor(Choice(["yes", "no", "maybe so"]), vocabulary)
    model = tiny_llama(padded, eos=eos, seed=5)
    with torch.no_grad():  # make the padding ids the model's favourites: only the mask keeps them out
        model.lm_head.weight[len(vocabulary) :] = model.lm_head.weight[: padded - len(vocabulary)] * 50
    prompt = torch.tensor([[1, 2, 3]] * 4)
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=[processor],
        max_new_tokens=12,
        eos_token_id=eos,
        pad_token_id=eos,
        do_sample=True,
        output_scores=True,
        return_dict_in_generate=True,
    )
    for scores in out.scores:
        assert torch.isneginf(scores[:, len(vocabulary) :]).all()
    for ids, ended in generated(out.sequences, 3, {eos}):
        assert ended and text_of(vocabulary, ids) in {"yes", "no", "maybe so"}


# -- the processor called directly ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bpe_processor() -> ReferenceLogitsProcessor:
    import tokenizers_matrix

    return ReferenceLogitsProcessor(Regex("(ab|cd)+x"), tokenizers_matrix.get("bpe"))


def ids_for(processor: ReferenceLogitsProcessor, *texts: str) -> list[int]:
    table = processor.vocabulary.token_bytes
    return [table.index(t.encode()) for t in texts]


def finite_ids(scores: torch.Tensor) -> list[list[int]]:
    return [torch.nonzero(row > float("-inf")).flatten().tolist() for row in scores]


def test_rows_follow_their_prefix_when_beams_reorder(bpe_processor: ReferenceLogitsProcessor) -> None:
    p = bpe_processor
    p.reset()
    a, b, c, d, x = ids_for(p, "a", "b", "c", "d", "x")
    vocab = len(p.vocabulary)
    prompt = [7, 7]
    tg = p.token_grammar

    def expected(*ids: int) -> list[int]:
        m = Matcher(tg)
        for t in ids:
            m.accept(t)
        return m.allowed_ids() if not m.is_terminated() else p.eos_token_ids

    p(torch.tensor([prompt, prompt]), torch.zeros(2, vocab))
    p(torch.tensor([[*prompt, a], [*prompt, c]]), torch.zeros(2, vocab))
    # Beam search swaps the rows and duplicates one of them: each row must follow its own prefix.
    steps = [[a, b], [c, d], [c, d]]
    out = p(torch.tensor([[*prompt, *s] for s in [steps[1], steps[0], steps[2]]]), torch.zeros(3, vocab))
    assert finite_ids(out) == [expected(c, d), expected(a, b), expected(c, d)]
    assert p.stats["replayed"] == 0
    out = p(torch.tensor([[*prompt, a, b, x], [*prompt, c, d, a]]), torch.zeros(2, vocab))
    assert finite_ids(out) == [expected(a, b, x), expected(c, d, a)]
    # A disallowed id appended anyway (beam search pads with -inf candidates): that row may only end.
    out = p(
        torch.tensor([[*prompt, a, b, x, *p.eos_token_ids], [*prompt, c, d, a, a]]), torch.zeros(2, vocab)
    )
    assert finite_ids(out) == [p.eos_token_ids, p.eos_token_ids]
    assert p.stats["ended"] >= 1 and p.stats["dead"] >= 1
    # A new generation (a length that does not continue the last one) starts from scratch.
    out = p(torch.tensor([prompt]), torch.zeros(1, vocab))
    assert finite_ids(out) == [expected()]


def test_a_new_prompt_of_the_next_length_is_a_new_generation(bpe_processor: ReferenceLogitsProcessor) -> None:
    p = bpe_processor
    p.reset()
    a, b = ids_for(p, "a", "b")
    vocab = len(p.vocabulary)
    start = finite_ids(p(torch.tensor([[7, 7]]), torch.zeros(1, vocab)))
    after_a = finite_ids(p(torch.tensor([[7, 7, a]]), torch.zeros(1, vocab)))
    assert after_a != start
    # Same length as a continuation, but another prompt: the grammar starts over.
    assert finite_ids(p(torch.tensor([[9, 9, 9, 9]]), torch.zeros(1, vocab))) == start
    # The same prompt continued (a follow-up generate on the output) continues the grammar.
    assert finite_ids(p(torch.tensor([[9, 9, 9, 9, a]]), torch.zeros(1, vocab))) == after_a
    assert finite_ids(p(torch.tensor([[9, 9, 9, 9, a, b]]), torch.zeros(1, vocab))) != after_a


def test_no_valid_token_is_raised_not_sampled(bpe_processor: ReferenceLogitsProcessor) -> None:
    p = bpe_processor
    p.reset()
    vocab = len(p.vocabulary)
    scores = torch.zeros(2, vocab)
    allowed = p.token_grammar.allowed_ids(p.token_grammar.initial())
    scores[1, allowed] = float("-inf")  # the model gives every allowed token probability zero
    with pytest.raises(NoValidToken) as info:
        p(torch.tensor([[1], [2]]), scores)
    assert info.value.row == 1 and info.value.step == 0
    scores[1, allowed] = float("nan")
    p.reset()
    with pytest.raises(NoValidToken):
        p(torch.tensor([[1], [2]]), scores)


def test_scores_of_the_wrong_shape_are_refused(bpe_processor: ReferenceLogitsProcessor) -> None:
    bpe_processor.reset()
    with pytest.raises(SpecError, match="scores"):
        bpe_processor(torch.tensor([[1], [2]]), torch.zeros(3, 10))


def test_max_new_tokens_stops_an_accepting_row_at_the_last_step() -> None:
    import tokenizers_matrix

    vocabulary = tokenizers_matrix.get("byte")
    p = ReferenceLogitsProcessor(Regex("[0-9]+"), vocabulary, max_new_tokens=3)
    one = vocabulary.token_bytes.index(b"1")
    vocab = len(vocabulary)
    p(torch.tensor([[5]]), torch.zeros(1, vocab))
    out = p(torch.tensor([[5, one]]), torch.zeros(1, vocab))
    assert len(finite_ids(out)[0]) == 10 + len(p.eos_token_ids)  # digits or EOS
    out = p(torch.tensor([[5, one, one]]), torch.zeros(1, vocab))
    assert finite_ids(out) == [p.eos_token_ids]  # the last step: it can stop, so it must
    assert np.array_equal(sorted(vocabulary.eos_ids), p.eos_token_ids)


@pytest.mark.parametrize("sample", [False, True])
@pytest.mark.parametrize("kind", sorted(SPECS))
def test_assisted_decoding_checks_every_candidate_position(kind: str, sample: bool) -> None:
    """Speculative decoding in ``generate`` (an assistant model drafts, the model scores every drafted
    position): the processor is called with lengths that go up by one, then back; each call's rows are
    the candidates, and every output is valid and ends within ``max_new_tokens``."""
    import tokenizers_matrix

    vocabulary = tokenizers_matrix.get("bpe")
    eos = min(vocabulary.eos_ids)
    lengths: list[int] = []

    class Recorded(ReferenceLogitsProcessor):
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            lengths.append(int(input_ids.shape[1]))
            out = super().__call__(input_ids, scores)
            # the finite scores are the budget mask of the row these ids make, whatever the call order
            for r, row in enumerate(self.rows_for(input_ids)):
                finite = torch.nonzero(out[r] > float("-inf")).flatten().tolist()
                assert finite == unpack_mask(self.bitmask([row])[0], len(vocabulary)).tolist()
            return out

    processor = Recorded(SPECS[kind], vocabulary, max_new_tokens=32)
    model = tiny_llama(len(vocabulary), eos=eos, seed=7)
    assistant = tiny_llama(len(vocabulary), eos=eos, seed=8)
    prompt = torch.tensor([[5, 6, 7]])
    torch.manual_seed(3)
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=[processor],
        assistant_model=assistant,
        max_new_tokens=32,
        eos_token_id=eos,
        pad_token_id=eos,
        do_sample=sample,
    )
    for ids, ended in generated(out, 3, {eos}):
        text = text_of(vocabulary, ids)
        assert ended and valid(kind, text), text
    assert any(b < a for a, b in zip(lengths, lengths[1:], strict=False)), (
        "no call went back: no drafts scored"
    )
