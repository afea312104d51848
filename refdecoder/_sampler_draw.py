"""Inverse-CDF draw and per-row randomness behind :func:`refdecoder.sampler.sample` (private).

A row's draw is one float64 uniform ``u`` in [0, 1) and the first token ``i`` with ``cdf[i] > u * total``
(Devroye, *Non-Uniform Random Variate Generation*, 1986, §III.2.1, "inversion by sequential search",
done here as a two-level search: blocks of ``BLOCK`` tokens, then inside one block). Because the search
is strict (``searchsorted(..., right=True)``) and a cumulative sum only increases where a probability is
positive, the chosen token always has probability > 0: a token the filters removed (probability exactly
0) can never be drawn, whatever the rounding.

Randomness is per row and consumed at a fixed rate, one uniform per sampled row per call, so a row's
draws never depend on the other rows of the batch or on the device the logits live on.
"""

from __future__ import annotations

import torch

__all__ = ["BLOCK", "inverse_cdf", "mix_seed", "uniforms"]

BLOCK = 1024

_MASK64 = (1 << 64) - 1


def mix_seed(seed: int, step: int) -> int:
    """SplitMix64 (Steele, Lea, Flood 2014) of ``seed`` advanced ``step + 1`` times: a seed per step."""
    z = (seed + 0x9E3779B97F4A7C15 * (step + 1)) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def uniforms(generators: list[torch.Generator | None]) -> torch.Tensor:
    """One float64 uniform in [0, 1) per row, from the row's generator (None: torch's default CPU one)."""
    out = torch.empty(len(generators), dtype=torch.float64)
    for row, gen in enumerate(generators):
        device = gen.device if gen is not None else torch.device("cpu")
        out[row] = torch.rand((), dtype=torch.float64, generator=gen, device=device).item()
    return out


def _last_positive(x: torch.Tensor) -> torch.Tensor:
    """Index of the last entry > 0 along the last dim (0 when there is none)."""
    n = x.shape[-1]
    return (n - 1) - (x > 0).flip(-1).to(torch.int8).argmax(-1)


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Draw one index per row of ``weights`` [R, V] (>= 0, unnormalised, positive sum) given ``u`` [R].

    Block sums use torch's (cascade) sum in the weights' dtype; cumulative sums run in float64.
    """
    rows, vocab = weights.shape
    size = max(1, min(BLOCK, vocab))
    full = vocab // size
    parts = []
    if full:
        parts.append(weights[:, : full * size].view(rows, full, size).sum(-1).double())
    if vocab > full * size:
        parts.append(weights[:, full * size :].sum(-1, keepdim=True).double())
    block_sums = torch.cat(parts, dim=1)
    block_cdf = block_sums.cumsum(-1)
    target = u.to(device=weights.device, dtype=torch.float64) * block_cdf[:, -1]
    b = torch.searchsorted(block_cdf, target.unsqueeze(-1), right=True).squeeze(-1)
    # b == number of blocks only when rounding put target at the total: take the last block with mass.
    b = torch.minimum(b, _last_positive(block_sums))
    before = block_cdf.gather(1, (b - 1).clamp(min=0).unsqueeze(-1)).squeeze(-1)
    rest = target - torch.where(b > 0, before, torch.zeros_like(before))  # >= 0 by the search
    idx = b.unsqueeze(-1) * size + torch.arange(size, device=weights.device)
    inside = idx < vocab
    block = weights.gather(1, idx.clamp(max=vocab - 1)).to(torch.float64) * inside
    inner = block.cumsum(-1)
    j = torch.searchsorted(inner, rest.unsqueeze(-1), right=True).squeeze(-1)
    j = torch.minimum(j, _last_positive(block))
    return b * size + j
