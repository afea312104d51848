"""Timing of :func:`~refdecoder.sampler.apply_token_bitmask` beside the engines' kernels, and of ``sample``.

Behind ``maskcert bench sampler``. It measures and returns rows; the caller prints them (docs/style.md §5). All
timings are on the CPU, float32 logits, with ``torch.set_num_threads(threads)`` for the duration:

* ``maskcert``: :func:`apply_token_bitmask`;
* ``xgrammar``: ``xgrammar.apply_token_bitmask_inplace`` (its C++ CPU kernel), when installed;
* ``llguidance``: ``llguidance.torch.apply_token_bitmask_inplace`` (a ``torch.compile`` kernel: its
  cold call includes the compile), when installed;
* ``sample[...]``: the whole :func:`sample` for each entry of ``sample_params``.

``cold_ms`` is the first call at that shape in this process (only the first shape of a process pays
torch's own one-time warm-up); ``median_ms`` and ``min_ms`` are over ``repeat`` further calls.
``ratio`` is maskcert's median over that implementation's median (below 1: maskcert is faster);
``ratio_min`` the same over minima.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import torch

from refdecoder.sampler import SamplingParams, apply_token_bitmask, sample

__all__ = ["DEFAULT_SAMPLE_PARAMS", "run_sampler_bench", "format_table"]

DEFAULT_SAMPLE_PARAMS: Mapping[str, SamplingParams] = {
    "T=1": SamplingParams(seed=0),
    "T=0.7 top-k=50 top-p=0.9": SamplingParams(temperature=0.7, top_k=50, top_p=0.9, seed=0),
    "greedy": SamplingParams(temperature=0.0),
}


def _engines(include: Sequence[str]) -> dict[str, Callable[[torch.Tensor, torch.Tensor], None]]:
    out: dict[str, Callable[[torch.Tensor, torch.Tensor], None]] = {"maskcert": apply_token_bitmask}
    if "xgrammar" in include and importlib.util.find_spec("xgrammar") is not None:
        import xgrammar

        def xgr(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
            xgrammar.apply_token_bitmask_inplace(logits, bitmask, backend="cpu")

        out["xgrammar"] = xgr
    if "llguidance" in include and importlib.util.find_spec("llguidance") is not None:
        from llguidance.torch import apply_token_bitmask_inplace as llg

        out["llguidance"] = llg
    return out


def _time(fn: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    """(cold, median, min) in milliseconds."""
    start = time.perf_counter()
    fn()
    cold = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return cold * 1e3, statistics.median(times) * 1e3, min(times) * 1e3


def run_sampler_bench(
    batch_sizes: Sequence[int] = (1, 8, 64),
    vocab_sizes: Sequence[int] = (32000, 128000),
    threads: int = 1,
    repeat: int = 50,
    *,
    sample_repeat: int | None = None,
    include: Sequence[str] = ("xgrammar", "llguidance"),
    sample_params: Mapping[str, SamplingParams] = DEFAULT_SAMPLE_PARAMS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Time masking and sampling over every (batch, vocab); one dict per (op, implementation, shape).

    Keys: ``op`` ("apply_token_bitmask" or "sample"), ``impl``, ``batch``, ``vocab``, ``threads``,
    ``cold_ms``, ``median_ms``, ``min_ms``, ``ratio`` (of medians) and ``ratio_min`` (of minima, steadier
    on a busy machine); both None for maskcert's own rows and for sample.
    """
    engines = _engines(include)
    s_repeat = sample_repeat if sample_repeat is not None else max(3, repeat // 5)
    rows: list[dict[str, Any]] = []
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(seed)
        for vocab in vocab_sizes:
            for batch in batch_sizes:
                logits = torch.randn(batch, vocab, generator=gen)
                words = -(-vocab // 32)
                bitmask = torch.randint(-(2**31), 2**31 - 1, (batch, words), dtype=torch.int32, generator=gen)
                if vocab % 32:
                    # Set the bits past the vocabulary: with them cleared, xgrammar 0.2.9's CPU kernel
                    # writes -inf one element past each row (past the tensor for the last row).
                    pad = ((1 << 32) - 1) ^ ((1 << (vocab % 32)) - 1)
                    bitmask[:, -1] |= pad - (1 << 32)
                ours: tuple[float, float] | None = None
                for name, kernel in engines.items():
                    work = logits.clone()
                    cold, median, best = _time(partial(kernel, work, bitmask), repeat)
                    if name == "maskcert":
                        ours = (median, best)
                    rows.append(
                        {
                            "op": "apply_token_bitmask",
                            "impl": name,
                            "batch": batch,
                            "vocab": vocab,
                            "threads": threads,
                            "cold_ms": cold,
                            "median_ms": median,
                            "min_ms": best,
                            "ratio": None if name == "maskcert" or ours is None else ours[0] / median,
                            "ratio_min": None if name == "maskcert" or ours is None else ours[1] / best,
                        }
                    )
                for label, params in sample_params.items():
                    cold, median, best = _time(partial(sample, logits, bitmask, params, step=0), s_repeat)
                    rows.append(
                        {
                            "op": "sample",
                            "impl": f"maskcert [{label}]",
                            "batch": batch,
                            "vocab": vocab,
                            "threads": threads,
                            "cold_ms": cold,
                            "median_ms": median,
                            "min_ms": best,
                            "ratio": None,
                            "ratio_min": None,
                        }
                    )
    finally:
        torch.set_num_threads(saved_threads)
    return rows


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A fixed-width text table of :func:`run_sampler_bench` rows."""
    header = ("op", "impl", "batch", "vocab", "thr", "cold ms", "median ms", "min ms", "ours/theirs", "(min)")
    body = [
        (
            str(r["op"]),
            str(r["impl"]),
            str(r["batch"]),
            str(r["vocab"]),
            str(r["threads"]),
            f"{r['cold_ms']:.3f}",
            f"{r['median_ms']:.3f}",
            f"{r['min_ms']:.3f}",
            "" if r["ratio"] is None else f"{r['ratio']:.2f}",
            "" if r.get("ratio_min") is None else f"{r['ratio_min']:.2f}",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in body)) for i, h in enumerate(header)]
    left = {0, 1}

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    lines = [fmt(header), "  ".join("-" * w for w in widths)]
    lines.extend(fmt(line) for line in body)
    return "\n".join(lines)
