"""The token budget at a real 129k vocabulary (issue 30): ``ReferenceLogitsProcessor(max_new_tokens=40)``
in ``model.generate`` with a tiny random Llama and the DeepSeek-V3 tokenizer from the shared data (not
collected by ``pytest tests``).

Run: ``pytest tests/bench_budget.py --benchmark-only -s``. For a JSON Schema (the generation profile,
three properties, an integer among them) and a regex, greedy, sampled and beam-search generation each
run once with the budgeted processor and once with the plain one. Every budgeted run must end with EOS
within 40 tokens and be valid (checked by ``jsonschema`` and ``re.fullmatch``: these are assertions,
the time is not); the cost per generated token of each is printed and stored in ``extra_info``, and
the budgeted / plain ratio is the figure to read.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

from transformers import PreTrainedTokenizerFast  # noqa: E402

from refdecoder import JsonProfile, JsonSchema, Regex, Spec  # noqa: E402
from refdecoder.hf import ReferenceLogitsProcessor  # noqa: E402
from tests._data import require_shared  # noqa: E402
from tests.test_hf import generated, text_of, tiny_llama  # noqa: E402
from tests.test_hf import valid as hf_valid  # noqa: E402

MAX_NEW = 40
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PATTERN = r"[a-z]+(\.[a-z]+)*@[a-z]+\.(com|org|net)"
SPECS: dict[str, Spec] = {"json": JsonSchema(SCHEMA, JsonProfile.generation()), "regex": Regex(PATTERN)}
STRATEGIES: dict[str, dict[str, Any]] = {
    "greedy": {"do_sample": False},
    "sampling": {"do_sample": True, "top_k": 0, "temperature": 1.5},
    "beam": {"do_sample": False, "num_beams": 2, "num_return_sequences": 2},
}


def valid(kind: str, text: str) -> bool:
    return hf_valid(kind, text, SCHEMA, PATTERN)


@pytest.fixture(scope="module")
def deepseek() -> PreTrainedTokenizerFast:
    path = require_shared("tokenizers/deepseek-v3-litellm/tokenizer.json")
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<｜end▁of▁sentence｜>")


def _run(
    processor: ReferenceLogitsProcessor, strategy: str, eos: list[int], vocab: int
) -> tuple[Any, float, int]:
    model = tiny_llama(vocab, eos=eos[0], seed=11)
    prompt = torch.tensor([[100, 200, 300]])
    torch.manual_seed(5)
    t0 = time.perf_counter()
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=[processor],
        max_new_tokens=MAX_NEW,
        eos_token_id=eos,
        pad_token_id=eos[0],
        **STRATEGIES[strategy],
    )
    elapsed = time.perf_counter() - t0
    return out, elapsed, int(out.shape[1]) - 3


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("kind", sorted(SPECS))
def test_budgeted_generation_ends_valid_at_129k(
    benchmark: Any, deepseek: PreTrainedTokenizerFast, kind: str, strategy: str
) -> None:
    budgeted = ReferenceLogitsProcessor(SPECS[kind], deepseek, max_new_tokens=MAX_NEW)
    plain = ReferenceLogitsProcessor(SPECS[kind], deepseek)
    eos = budgeted.eos_token_ids
    vocab = len(budgeted.vocabulary)
    out, t_budget, steps = benchmark.pedantic(
        lambda: _run(budgeted, strategy, eos, vocab), rounds=1, iterations=1
    )
    texts = []
    for ids, ended in generated(out, 3, set(eos)):
        text = text_of(budgeted.vocabulary, ids)
        texts.append(text)
        assert ended, f"{strategy}: no EOS within {MAX_NEW} tokens: {text!r}"
        assert valid(kind, text), f"{strategy} produced {text!r}, not valid {kind}"
    _, t_plain, plain_steps = _run(plain, strategy, eos, vocab)
    per_budget = t_budget / max(steps, 1) * 1000
    per_plain = t_plain / max(plain_steps, 1) * 1000
    benchmark.extra_info.update(
        {
            "outputs": texts,
            "budgeted_ms_per_step": round(per_budget, 2),
            "plain_ms_per_step": round(per_plain, 2),
            "ratio": round(per_budget / per_plain, 2),
            "budget_stats": dict(budgeted.distances.stats) if budgeted.distances else {},
        }
    )
    print(
        f"\n{kind}/{strategy}: {texts} budgeted {per_budget:.1f} ms/step ({steps} steps), plain "
        f"{per_plain:.1f} ms/step ({plain_steps} steps), ratio {per_budget / per_plain:.2f}"
    )
