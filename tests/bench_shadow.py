"""pytest-benchmark view of ``maskcert.shadow``: what shadow-checking adds to an engine's logits processor
(not collected by ``pytest tests``).

Run: ``pytest tests/bench_shadow.py --benchmark-only -s``. Each round walks one valid JSON instance
through a fresh processor as ``generate`` calls it (``input_ids`` grown by one id per call, float32
logits padded to a multiple of 64): the bare engine, then the shadow around another engine at
``sample_rate`` 1.0 and 0.1. The engine is xgrammar's ``xgrammar.contrib.hf.LogitsProcessor`` when
xgrammar is installed, else the reference's own processor. Overheads are reported as ratios (shadowed
time per step / bare time per step, in ``extra_info`` and printed); no timed assertions.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("prometheus_client")

from transformers import PreTrainedTokenizerFast  # noqa: E402

import tokenizers_matrix as tm  # noqa: E402
from maskcert.shadow import ShadowLogitsProcessor  # noqa: E402
from refdecoder import JsonProfile, JsonSchema  # noqa: E402
from refdecoder.hf import ReferenceLogitsProcessor  # noqa: E402

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "age": {"type": "integer"},
    },
    "required": ["name"],
}
INSTANCE = {"name": "John Smith, the third", "tags": ["a", "bb", "ccc dd"], "age": 42}
PROMPT = [0, 5, 9]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerFast:
    vocab = tm.train_bpe(1024)
    path: Path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    vocab.codec.tokenizer.save(str(path))  # type: ignore[union-attr]
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>")


def _engine_factory(tokenizer: Any, width: int) -> tuple[str, Callable[[], Any], JsonSchema]:
    try:
        from maskcert.shadow import xgrammar_processor
        from props.backends.xgrammar import declared_profile

        profile = declared_profile().json
        xgrammar_processor(SCHEMA, tokenizer, width)  # importable and compiles
        return (
            "xgrammar-hf",
            lambda: xgrammar_processor(SCHEMA, tokenizer, width),
            JsonSchema(SCHEMA, profile),
        )
    except ImportError:
        spec = JsonSchema(SCHEMA, JsonProfile(whitespace="none", top_level_whitespace=False))
        return "reference", lambda: ReferenceLogitsProcessor(spec, tokenizer), spec


def _walk(processor: Any, ids: list[int], logits: list[torch.Tensor]) -> None:
    for step, scores in enumerate(logits):
        processor(torch.tensor([PROMPT + ids[:step]]), scores.clone())


def _bare_ms_per_step(make_engine: Callable[[], Any], ids: list[int], logits: list[torch.Tensor]) -> float:
    """The bare engine's median time per step over fresh engines (built outside the timing)."""
    times = []
    for engine in [make_engine() for _ in range(7)]:
        t0 = time.perf_counter()
        _walk(engine, ids, logits)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000 / len(logits)


@pytest.mark.parametrize("sample_rate", [1.0, 0.1])
def test_bench_shadow_overhead(benchmark: Any, tokenizer: Any, sample_rate: float) -> None:
    width = (len(tokenizer) // 64 + 1) * 64
    name, make_engine, spec = _engine_factory(tokenizer, width)
    ids = tokenizer.encode(json.dumps(INSTANCE, separators=(",", ":")), add_special_tokens=False)
    gen = torch.Generator().manual_seed(0)
    logits = [torch.randn((1, width), generator=gen) for _ in range(len(ids) + 1)]
    steps = len(logits)

    bare = _bare_ms_per_step(make_engine, ids, logits)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        shadow = ShadowLogitsProcessor(make_engine(), spec, tokenizer, sample_rate=sample_rate, backend=name)
        return (shadow,), {}

    def shadowed_round(shadow: ShadowLogitsProcessor) -> None:
        _walk(shadow, ids, logits)

    benchmark.pedantic(shadowed_round, setup=setup, rounds=7, iterations=1)
    shadowed = benchmark.stats.stats.median * 1000 / steps
    # construction (the engine's and the reference's compile) is setup in both: a one-time cost per request
    ratio = shadowed / bare if bare else float("nan")
    benchmark.extra_info.update(
        engine=name,
        sample_rate=sample_rate,
        steps=steps,
        bare_ms_per_step=round(bare, 4),
        shadow_ms_per_step=round(shadowed, 4),
        overhead_ratio=round(ratio, 2),
    )
    print(
        f"\nshadow overhead ({name}, sample_rate={sample_rate}): {bare:.3f} ms/step bare, "
        f"{shadowed:.3f} ms/step shadowed, ratio {ratio:.2f}x over {steps} steps"
    )
