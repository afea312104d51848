"""pytest-benchmark view of ``maskcert bench sampler`` (not collected by ``pytest tests``).

Run: ``pytest tests/bench_sampler.py --benchmark-only`` (one CPU thread, float32 logits). No timed
assertions: the numbers are for reading and for ``--benchmark-compare``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator

import pytest
import torch

from maskcert.bench.sampler import DEFAULT_SAMPLE_PARAMS
from refdecoder.sampler import apply_token_bitmask, sample

SHAPES = [(1, 32000), (8, 32000), (64, 32000), (1, 128000), (8, 128000), (64, 128000)]


def _kernel(name: str) -> Callable[[torch.Tensor, torch.Tensor], None]:
    if name == "maskcert":
        return apply_token_bitmask
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed")
    if name == "xgrammar":
        import xgrammar

        return lambda logits, bitmask: xgrammar.apply_token_bitmask_inplace(logits, bitmask, backend="cpu")
    from llguidance.torch import apply_token_bitmask_inplace

    return apply_token_bitmask_inplace


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def _inputs(batch: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(batch * 1_000_003 + vocab)
    logits = torch.randn(batch, vocab, generator=gen)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (batch, -(-vocab // 32)), dtype=torch.int32, generator=gen)
    assert vocab % 32 == 0  # else set the pad bits: xgrammar 0.2.9's CPU kernel writes past rows otherwise
    return logits, bitmask


@pytest.mark.parametrize(("batch", "vocab"), SHAPES, ids=[f"{b}x{v}" for b, v in SHAPES])
@pytest.mark.parametrize("impl", ["maskcert", "xgrammar", "llguidance"])
def test_apply_token_bitmask(benchmark, impl, batch, vocab):
    kernel = _kernel(impl)
    logits, bitmask = _inputs(batch, vocab)
    benchmark.group = f"apply {batch}x{vocab}"
    benchmark.pedantic(kernel, args=(logits, bitmask), rounds=50, warmup_rounds=1)


@pytest.mark.parametrize(("batch", "vocab"), SHAPES, ids=[f"{b}x{v}" for b, v in SHAPES])
@pytest.mark.parametrize("label", list(DEFAULT_SAMPLE_PARAMS))
def test_sample(benchmark, label, batch, vocab):
    logits, bitmask = _inputs(batch, vocab)
    benchmark.group = f"sample {batch}x{vocab}"
    benchmark.pedantic(
        sample,
        args=(logits, bitmask, DEFAULT_SAMPLE_PARAMS[label]),
        kwargs={"step": 0},
        rounds=10,
        warmup_rounds=1,
    )
