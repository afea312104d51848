"""Grammar-constrained sampling: token bitmasks on logits, and a sampler where the grammar always wins.

Theory of operation
-------------------
:func:`apply_token_bitmask` sets the logits of disallowed tokens to -inf in place, bit-exactly
``torch.where(allowed, logits, -inf)``; see :mod:`refdecoder._sampler_bits` for the kernel.

:func:`sample` draws one token per row. The order of stages is fixed::

    NaN -> -inf (counted) -> penalties -> grammar mask -> temperature -> top-k -> top-p -> min-p
        -> grammar mask again -> draw

*Hard over soft.* The grammar mask is applied before any soft filter, so the soft filters see the
distribution renormalised over grammar-allowed tokens; a masked token is -inf from then on and no stage
can bring it back (every later stage only turns tokens to -inf). The three soft filters each keep the
tokens whose scaled logit ``z`` is at least a per-row threshold, and ties at a threshold are all kept:

* top-k: ``z >= `` the k-th largest ``z``;
* top-p: walking the tokens kept by top-k in decreasing ``z``, renormalised over them, keep a token while
  the mass strictly before it is ``< top_p``, then keep everything tied with the last one kept;
* min-p: ``p >= min_p * max p``, i.e. ``z >= max z + log(min_p)`` (scale-free, so its place is moot).

(The code keeps ``z`` in base 2, ``p`` proportional to ``2**z``; the rules are the same.)

Each filter always keeps the most likely allowed token, so the soft set is never empty; should it ever
be (a bug), the row falls back to the grammar-allowed set, never to a disallowed token.

*Infinities.* NaN from the model is treated as -inf (and counted in ``SampleResult.nan_counts``). A row
whose best allowed logit is +inf draws uniformly among its allowed +inf tokens, the limit of the softmax.

*Errors.* A row whose grammar-allowed set is empty, or whose allowed tokens all have logit -inf or NaN
from the model, has no valid token: its outcome is a :class:`~refdecoder.errors.NoValidToken`, never a
silent draw. ``sample(..., raise_on_error=True)`` (the default) raises the first one; with ``False`` the
:class:`SampleResult` holds per-row outcomes.

*Randomness.* Each row that draws (temperature > 0, no error) consumes one float64 uniform per call, from,
in order of precedence: ``generators[row]``; else a fresh CPU generator seeded with
``mix_seed(params.seed, step)`` (stateless, reproducible across steps: the same (seed, step) gives the
same draw, and successive steps get independent streams); else torch's default CPU generator. Greedy rows
consume none. The uniform turns into a token by inverse CDF with float64 cumulative sums (see
:mod:`refdecoder._sampler_draw`), so a row's draw depends neither on the other rows nor on the device.
:class:`SeededGenerators` keeps one ``torch.Generator`` per request for callers that prefer torch's
stateful style.

*Penalties* follow vLLM/HF: repetition divides positive and multiplies non-positive logits of tokens
seen in prompt or output; frequency subtracts ``frequency_penalty * count`` and presence subtracts
``presence_penalty`` once, over output tokens only. A finite logit stays finite (clamped to the dtype's
range) and -inf stays -inf.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ._sampler_bits import INT_TWIN, fill_disallowed_, keep_words, scratch_buffer, where_keep_
from ._sampler_draw import inverse_cdf, mix_seed, uniforms
from .errors import MaskcertError, NoValidToken

__all__ = [
    "INT_TWIN",  # float dtype -> the integer dtype of its width, for bitwise comparisons of logits
    "SamplerError",
    "SamplingParams",
    "TokenHistory",
    "SampleResult",
    "SeededGenerators",
    "apply_token_bitmask",
    "sample",
]

_NEG_INF = float("-inf")
_POS_INF = float("inf")
_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)


class SamplerError(MaskcertError, ValueError):
    """An argument of the sampler has the wrong shape, dtype or value.

    ``argument`` names it, ``expected`` says what would be valid, ``got`` is what was passed.
    """

    def __init__(self, argument: str, expected: str, got: Any) -> None:
        self.argument = argument
        self.expected = expected
        self.got = got
        super().__init__(f"{argument}: expected {expected}, got {got!r}")


# ---------------------------------------------------------------------------------------------------
# Parameters


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class SamplingParams:
    """Per-row sampling parameters (OpenAI/vLLM meanings); checked once, when built.

    ``temperature`` 0 is greedy (argmax over allowed tokens; soft filters are moot). ``top_k`` 0 or None,
    ``top_p`` 1.0, ``min_p`` 0.0, ``repetition_penalty`` 1.0 and the additive penalties 0.0 are "off".
    ``seed`` makes the row reproducible (see the module docstring for how it is used across steps).
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        def bad(name: str, expected: str) -> SamplerError:
            return SamplerError(f"SamplingParams.{name}", expected, getattr(self, name))

        if not _is_real(self.temperature) or self.temperature < 0:
            raise bad("temperature", "a finite float >= 0 (0 means greedy)")
        if self.top_k is not None and (not _is_int(self.top_k) or self.top_k < 0):
            raise bad("top_k", "None or an int >= 0 (0 or None disables it)")
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise bad("top_p", "a float in (0, 1] (1.0 disables it)")
        if not _is_real(self.min_p) or not 0 <= self.min_p <= 1:
            raise bad("min_p", "a float in [0, 1] (0.0 disables it)")
        if not _is_real(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise bad("repetition_penalty", "a finite float > 0 (1.0 disables it)")
        for name in ("presence_penalty", "frequency_penalty"):
            if not _is_real(getattr(self, name)):
                raise bad(name, "a finite float (0.0 disables it)")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed < 2**64):
            raise bad("seed", "None or an int in [0, 2**64)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def has_penalties(self) -> bool:
        return self.repetition_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0

    @property
    def has_soft_filters(self) -> bool:
        return bool(self.top_k) or self.top_p < 1.0 or self.min_p > 0.0


@dataclass(frozen=True)
class TokenHistory:
    """The token ids a row's penalties look at: ``prompt`` (repetition only) and ``output`` (all)."""

    prompt: tuple[int, ...] = ()
    output: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("prompt", "output"):
            ids = getattr(self, name)
            if not isinstance(ids, tuple) or not all(_is_int(t) and t >= 0 for t in ids):
                raise SamplerError(f"TokenHistory.{name}", "a tuple of token ids >= 0", ids)


# ---------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, eq=False)
class SampleResult:
    """Per-row outcome of :func:`sample`; all tensors are on the CPU, indexed by row.

    ``token_ids`` int64 (-1 where the row has an error); ``logprobs`` float64, the token's log-probability
    under the final distribution (after every filter; 0.0 for greedy rows, NaN on error);
    ``grammar_removed_mass`` float64, the mass of disallowed tokens under the temperature-scaled
    post-penalty distribution over the whole vocabulary (greedy rows: the T -> 0 limit, i.e. the share of
    disallowed tokens among those tied at the maximum; NaN when every logit is -inf); ``nan_counts``
    int64, how many NaN logits the model gave (treated as -inf); ``errors`` the row's
    :class:`NoValidToken` or None.
    """

    token_ids: torch.Tensor
    logprobs: torch.Tensor
    grammar_removed_mass: torch.Tensor
    nan_counts: torch.Tensor
    errors: tuple[NoValidToken | None, ...]

    @property
    def ok(self) -> bool:
        return all(e is None for e in self.errors)

    def outcomes(self) -> tuple[int | NoValidToken, ...]:
        """Per row: the drawn token id, or the :class:`NoValidToken` error."""
        ids = self.token_ids.tolist()
        return tuple(e if e is not None else t for t, e in zip(ids, self.errors, strict=True))

    def raise_first(self) -> None:
        """Raise the first row's error, if any."""
        for e in self.errors:
            if e is not None:
                raise e


# ---------------------------------------------------------------------------------------------------
# Generators


class SeededGenerators:
    """One CPU ``torch.Generator`` per request key, seeded once and advanced by each draw.

    For callers that keep generator state across steps (vLLM's style)::

        gens = SeededGenerators()
        result = sample(logits, bitmask, params, generators=gens.for_batch(request_ids, params))
        ...
        gens.release(finished_request_id)

    A row without a seed gets ``None`` (torch's default generator). The stateless alternative is to
    pass ``step=`` to :func:`sample` and no generators.
    """

    def __init__(self) -> None:
        self._gens: dict[Hashable, tuple[int, torch.Generator]] = {}

    def get(self, key: Hashable, seed: int) -> torch.Generator:
        known = self._gens.get(key)
        if known is not None:
            if known[0] != seed:
                raise SamplerError(f"seed for request {key!r}", f"{known[0]} (as first given)", seed)
            return known[1]
        gen = torch.Generator(device="cpu")
        gen.manual_seed(seed)
        self._gens[key] = (seed, gen)
        return gen

    def for_batch(
        self, keys: Sequence[Hashable], params: SamplingParams | Sequence[SamplingParams]
    ) -> list[torch.Generator | None]:
        plist = _per_row_params(params, len(keys))
        return [None if p.seed is None else self.get(k, p.seed) for k, p in zip(keys, plist, strict=True)]

    def release(self, key: Hashable) -> None:
        self._gens.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._gens

    def __len__(self) -> int:
        return len(self._gens)


# ---------------------------------------------------------------------------------------------------
# Argument checks


def _check_logits(name: str, logits: Any) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise SamplerError(name, "a torch.Tensor", type(logits).__name__)
    if logits.dtype not in INT_TWIN:
        raise SamplerError(f"{name}.dtype", "float16, bfloat16, float32 or float64", logits.dtype)
    if logits.dim() not in (1, 2):
        raise SamplerError(f"{name}.shape", "[batch, vocab] or [vocab]", tuple(logits.shape))
    # detach: we edit bits in place (and copy for sampling); autograd has no say in masking.
    rows = logits.detach()
    return rows if rows.dim() == 2 else rows.unsqueeze(0)


def _check_bitmask(bitmask: Any, device: torch.device) -> torch.Tensor:
    if not isinstance(bitmask, torch.Tensor):
        raise SamplerError("bitmask", "a torch.Tensor", type(bitmask).__name__)
    if bitmask.dtype != torch.int32:
        raise SamplerError("bitmask.dtype", "torch.int32 (xgrammar's layout)", bitmask.dtype)
    if bitmask.dim() not in (1, 2):
        raise SamplerError(
            "bitmask.shape", "[batch, ceil(vocab / 32)] or [ceil(vocab / 32)]", tuple(bitmask.shape)
        )
    bm = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    return bm.to(device, non_blocking=True)


def _check_rows(name: str, values: Any, rows: int) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != rows:
        got = len(values) if isinstance(values, Sequence) else type(values).__name__
        raise SamplerError(name, f"a sequence with one entry per row ({rows})", got)
    return list(values)


def _per_row_params(params: SamplingParams | Sequence[SamplingParams], rows: int) -> list[SamplingParams]:
    if isinstance(params, SamplingParams):
        return [params] * rows
    plist = _check_rows("params", params, rows)
    for row, p in enumerate(plist):
        if not isinstance(p, SamplingParams):
            raise SamplerError(f"params[{row}]", "a SamplingParams", type(p).__name__)
    return plist


def _row_indices(indices: Sequence[int] | torch.Tensor, logits_rows: int, mask_rows: int) -> list[int]:
    if isinstance(indices, torch.Tensor):
        if indices.dim() != 1 or indices.dtype.is_floating_point or indices.dtype == torch.bool:
            raise SamplerError("indices", "a 1-D integer tensor or a sequence of ints", indices)
        idx = [int(i) for i in indices.tolist()]
    else:
        idx = list(indices)
    limit = min(logits_rows, mask_rows)
    for i in idx:
        if not _is_int(i) or not 0 <= i < limit:
            raise SamplerError("indices", f"row indices in [0, {limit}) (rows of both logits and bitmask)", i)
    return idx


# ---------------------------------------------------------------------------------------------------
# Masking


_CPU_CHUNK = 1 << 20  # tokens per pass on the CPU: keeps the keep-word temporary at <= 4 MiB, cache-warm


def _mask_rows_(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    rows, vocab = logits.shape
    covered = min(vocab, 32 * bitmask.shape[1])
    if covered:
        step = max(1, _CPU_CHUNK // covered) if logits.device.type == "cpu" else rows
        for start in range(0, rows, step):
            part = slice(start, start + step)
            keep = keep_words(bitmask[part], covered, INT_TWIN[logits.dtype], scratch=True)
            fill_disallowed_(logits[part, :covered], keep)
    if covered < vocab:
        logits[:, covered:].fill_(_NEG_INF)


def apply_token_bitmask(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: Sequence[int] | torch.Tensor | None = None
) -> None:
    """In place, set to -inf the logits of tokens the bitmask disallows.

    ``logits`` is [B, V] (or [V], one row) float16/bfloat16/float32/float64 on any device; ``bitmask``
    is [B, W] (or [W]) int32 in xgrammar's layout and is moved to the logits' device. The result is
    bit-exactly ``torch.where(allowed, logits, -inf)``, NaN and infinities included.

    Semantics, compared with ``xgrammar.apply_token_bitmask_inplace(logits, bitmask, vocab_size=None,
    indices=None)``:

    * ``indices`` as in xgrammar: only rows ``i in indices`` change, each masked by ``bitmask[i]``; the
      two batch sizes may then differ (every index must be a row of both). Without it they must match.
    * Token ids ``>= 32 * W`` are disallowed (as llguidance does). xgrammar instead leaves
      ``logits[..., 32 * W:]`` untouched, with a warning, which lets padded vocabulary ids through.
    * No ``vocab_size``: xgrammar's ``vocab_size=n`` is ``apply_token_bitmask(logits[..., :n], bitmask)``
      (ids past ``n`` are left alone); bits past the logits' width are ignored.
    """
    rows2d = _check_logits("logits", logits)
    bm = _check_bitmask(bitmask, rows2d.device)
    if indices is None:
        if bm.shape[0] != rows2d.shape[0]:
            raise SamplerError(
                "bitmask.shape[0]", f"{rows2d.shape[0]} rows like logits (or pass indices=)", bm.shape[0]
            )
        _mask_rows_(rows2d, bm)
        return
    idx = _row_indices(indices, rows2d.shape[0], bm.shape[0])
    if not idx:
        return
    sel = torch.tensor(idx, dtype=torch.int64, device=rows2d.device)
    sub = rows2d.index_select(0, sel)
    _mask_rows_(sub, bm.index_select(0, sel))
    rows2d.index_copy_(0, sel, sub)


# ---------------------------------------------------------------------------------------------------
# Sampling stages


def _apply_penalties_(
    x: torch.Tensor, plist: list[SamplingParams], history: list[TokenHistory | None]
) -> None:
    """vLLM's ``apply_penalties`` on the rows that ask for them, touching only the tokens seen."""
    vocab = x.shape[1]
    info = torch.finfo(x.dtype)
    for row, (p, h) in enumerate(zip(plist, history, strict=True)):
        if h is None or not p.has_penalties:
            continue
        for name in ("prompt", "output"):
            bad = [t for t in getattr(h, name) if t >= vocab]
            if bad:
                raise SamplerError(f"token_history[{row}].{name}", f"token ids < vocab size {vocab}", bad[0])
        seen = sorted(set(h.prompt) | set(h.output))
        if not seen:
            continue
        ids = torch.tensor(seen, dtype=torch.int64, device=x.device)
        orig = x[row, ids]
        vals = orig.clone()
        if p.repetition_penalty != 1.0:
            vals = torch.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)
        counts = torch.zeros(len(seen), dtype=x.dtype, device=x.device)
        if h.output:
            pos = {t: i for i, t in enumerate(seen)}
            out_counts: dict[int, int] = {}
            for t in h.output:
                out_counts[t] = out_counts.get(t, 0) + 1
            counts[[pos[t] for t in out_counts]] = torch.tensor(
                list(out_counts.values()), dtype=x.dtype, device=x.device
            )
        vals = vals - p.frequency_penalty * counts - p.presence_penalty * (counts > 0).to(x.dtype)
        vals = torch.where(torch.isfinite(orig), vals.clamp(info.min, info.max), vals)
        x[row, ids] = vals


def _sorted_desc(z: torch.Tensor) -> torch.Tensor:
    """Values of a 1-D ``z`` in decreasing order (numpy on the CPU: ~8x faster than ``torch.sort``)."""
    if z.device.type == "cpu":
        return torch.from_numpy(np.ascontiguousarray(np.sort(z.numpy())[::-1]))
    return torch.sort(z, descending=True).values


def _soft_threshold(z: torch.Tensor, p: SamplingParams, total: float) -> float:
    """The least ``z`` a row keeps under top-k, then top-p, then min-p (see the module docstring).

    ``z`` is one row of scaled logits in base 2 (probabilities proportional to ``2**z``), maximum 0;
    ``total`` is the sum of ``2**z`` over the row.
    """
    vocab = z.shape[0]
    thr = _NEG_INF
    top_k = p.top_k if p.top_k and p.top_k < vocab else 0
    if top_k or p.top_p < 1.0:
        # Real models put these sets in the first few hundred tokens: look there first, sort if needed.
        vals = torch.topk(z, min(vocab, max(top_k, 1024))).values
        complete = vals.shape[0] == vocab
        if top_k:
            thr = float(vals[top_k - 1])
            if not complete and float(vals[-1]) >= thr:  # ties with the k-th run past the window
                vals = _sorted_desc(z)
            vals = vals[vals >= thr]  # the whole top-k set, ties included
            total = float(torch.exp2(vals.to(torch.float64)).sum())
            complete = True
        if p.top_p < 1.0:
            for attempt in range(2):
                probs = torch.exp2(vals.to(torch.float64)) / total
                before = torch.cat([probs.new_zeros(1), probs.cumsum(0)[:-1]])
                kept = int((before < p.top_p).sum())
                if kept < vals.shape[0] or complete or attempt:
                    break
                vals = _sorted_desc(z)
            thr = max(thr, float(vals[kept - 1]))
    if p.min_p > 0.0:
        thr = max(thr, float(z.amax()) + math.log2(p.min_p))
    return thr


def _apply_soft_filters_(z: torch.Tensor, thresholds: list[float]) -> list[bool]:
    """Keep ``z >= thresholds[row]`` per row; a row that would lose every token keeps them all instead.

    Returns, per row, whether it fell back to the unfiltered (grammar-allowed) set.
    """
    zmax = z.amax(-1).tolist()
    fell_back = [not t <= m for t, m in zip(thresholds, zmax, strict=True)]
    thr = [_NEG_INF if fb else t for t, fb in zip(thresholds, fell_back, strict=True)]
    if any(t > _NEG_INF for t in thr):
        where_keep_(z, z >= torch.tensor(thr, dtype=z.dtype, device=z.device).unsqueeze(-1))
    return fell_back


def _work_buffer(slot: str, like: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised working tensor shaped like ``like``: on the CPU a reused per-thread buffer."""
    if like.device.type == "cpu":
        return scratch_buffer(slot, like.numel(), dtype).view(like.shape)
    return torch.empty(like.shape, dtype=dtype, device=like.device)


def _count_true(mask: torch.Tensor) -> torch.Tensor:
    """Per-row count of a bool [B, V] (summing bytes as int32: no int64 copy of the mask)."""
    return mask.view(torch.uint8).sum(-1, dtype=torch.int32)


def _row_max(x: torch.Tensor) -> torch.Tensor:
    return x.amax(-1) if x.shape[1] else x.new_full((x.shape[0],), _NEG_INF)


def _nan_free_copy(rows2d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A working copy of the rows (float32; float64 stays) with NaN as -inf, and each row's NaN count."""
    # A row sum is NaN when the row holds a NaN (or both infinities), which is cheaper to find than
    # counting NaNs everywhere.
    work_dtype = torch.float64 if rows2d.dtype == torch.float64 else torch.float32
    x = _work_buffer("x", rows2d, work_dtype).copy_(rows2d)
    if bool(torch.isnan(x.sum(-1)).any()):
        nan_counts = _count_true(torch.isnan(x)).to(torch.int64).cpu()
        x.nan_to_num_(nan=_NEG_INF, posinf=_POS_INF, neginf=_NEG_INF)
    else:
        nan_counts = torch.zeros(rows2d.shape[0], dtype=torch.int64)
    return x, nan_counts


def _split_by_grammar_(x: torch.Tensor, bm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``keep`` (bool [B, V]: allowed), ``xa`` (allowed logits) and ``x`` reused for the disallowed logits."""
    batch, vocab = x.shape
    keep = keep_words(bm, min(vocab, 32 * bm.shape[1]), INT_TWIN[x.dtype], scratch=True)
    if keep.shape[1] < vocab:
        keep = torch.cat([keep, keep.new_zeros(batch, vocab - keep.shape[1])], dim=1)
    xa = _work_buffer("xa", x, x.dtype).copy_(x)
    fill_disallowed_(xa, keep)
    xd = x
    fill_disallowed_(xd, keep.bitwise_not_())
    keep.bitwise_not_()
    return keep, xa, xd


def _take_greedy(xa: torch.Tensor, greedy: list[int], token_ids: list[int], logprobs: list[float]) -> None:
    """Set the greedy rows' tokens to the argmax over allowed tokens (first on ties), log-probability 0."""
    sel = torch.tensor(greedy, dtype=torch.int64, device=xa.device)
    rows_g = xa if len(greedy) == xa.shape[0] else xa.index_select(0, sel)
    for row, tok in zip(greedy, rows_g.argmax(-1).tolist(), strict=True):
        token_ids[row] = tok
        logprobs[row] = 0.0


def _limit_shares(
    xa: torch.Tensor, xd: torch.Tensor, top_a: torch.Tensor, top_d: torch.Tensor, limit_rows: list[int]
) -> dict[int, float]:
    """Per row of ``limit_rows``, the share of disallowed tokens among those tied at the row's maximum."""
    top_all = torch.maximum(top_a, top_d)
    limit_share: dict[int, float] = {}
    if limit_rows:
        top_col = top_all.unsqueeze(-1)
        n_a = _count_true(xa == top_col).tolist()
        n_d = _count_true(xd == top_col).tolist()
        for row, top in zip(limit_rows, top_all[limit_rows].tolist(), strict=True):
            limit_share[row] = math.nan if top == _NEG_INF else n_d[row] / (n_a[row] + n_d[row])
    return limit_share


def _weigh_(
    xa: torch.Tensor,
    xd: torch.Tensor,
    top_a: torch.Tensor,
    plist: list[SamplingParams],
    inf_rows: dict[int, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """In place: scaled allowed logits ``z``, weights ``2**z``, their mass, and the mass share removed."""
    # Temperature, shifted by the row's allowed maximum so that z's maximum is exactly 0 (no overflow),
    # in base 2: z = (x - max) * log2(e) / T, weights 2**z. (torch.exp2 is vectorised on the CPU even
    # for -inf and underflow, where torch.exp takes a slow path: ~0.6 ms against ~8 ms for [8, 128k].)
    # A row whose allowed maximum is +inf is uniform over those tokens (the limit of the softmax).
    # removed = mass_d / (mass_a + mass_d): a ratio of two sums, so small masses keep their precision.
    scales = [_LOG2E / (p.temperature if p.temperature > 0 else 1.0) for p in plist]
    scale = torch.tensor(scales, dtype=xa.dtype).to(xd.device).unsqueeze(-1)
    shift = torch.where(torch.isfinite(top_a), top_a, torch.zeros_like(top_a)).unsqueeze(-1)
    z = xa.sub_(shift).mul_(scale)
    for row, at_inf in inf_rows.items():
        z[row] = torch.where(at_inf, 0.0, _NEG_INF)
    mass_d = xd.sub_(shift).mul_(scale).exp2_().sum(-1).double()
    weights = torch.exp2(z, out=xd)  # xd is spent: reuse its memory
    mass_a = weights.sum(-1).double()
    removed = torch.where(torch.isinf(mass_d), 1.0, mass_d / (mass_a + mass_d)).cpu()
    return z, weights, mass_a, removed


def _soft_filtered(
    z: torch.Tensor,
    weights: torch.Tensor,
    mass_a: torch.Tensor,
    keep: torch.Tensor,
    sampled: list[int],
    plist: list[SamplingParams],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sampled rows' ``z``, weights and total weight after the soft filters and the grammar mask again."""
    # When no soft filter changed z since the grammar mask, the mask is already in z and its weights
    # are reused.
    everyone = len(sampled) == z.shape[0]
    sel = torch.tensor(sampled, dtype=torch.int64, device=z.device)
    zs = z if everyone else z.index_select(0, sel)
    if any(plist[row].has_soft_filters for row in sampled):
        totals = mass_a.tolist()
        thresholds = [
            _soft_threshold(zs[i], plist[row], totals[row]) if plist[row].has_soft_filters else _NEG_INF
            for i, row in enumerate(sampled)
        ]
        _apply_soft_filters_(zs, thresholds)
        fill_disallowed_(zs, keep if everyone else keep.index_select(0, sel))
        ws = torch.exp2(zs, out=weights if everyone else None)
        total = ws.sum(-1).double()
    else:
        ws = weights if everyone else weights.index_select(0, sel)
        total = mass_a if everyone else mass_a.index_select(0, sel)
    return zs, ws, total


def _row_generators(
    sampled: list[int], gens: list[torch.Generator | None], plist: list[SamplingParams], step: int | None
) -> list[torch.Generator | None]:
    """Each sampled row's generator: its own, else one seeded by ``(seed, step)``, else None (torch's)."""
    row_gens: list[torch.Generator | None] = []
    for row in sampled:
        gen = gens[row]
        seed = plist[row].seed
        if gen is None and seed is not None:
            gen = torch.Generator(device="cpu")
            gen.manual_seed(mix_seed(seed, step or 0))
        row_gens.append(gen)
    return row_gens


def _draw(
    zs: torch.Tensor, ws: torch.Tensor, total: torch.Tensor, row_gens: list[torch.Generator | None]
) -> tuple[list[int], list[float]]:
    """One token per row by inverse CDF over ``ws``, and its log-probability."""
    drawn = inverse_cdf(ws, uniforms(row_gens))
    chosen = zs.gather(1, drawn.unsqueeze(-1)).squeeze(-1).to(torch.float64)
    if bool(torch.isneginf(chosen).any()):  # pragma: no cover - excluded by the inverse-CDF argument
        raise AssertionError("sampler drew a token of probability 0; this is a bug in refdecoder")
    logp = (chosen - total.log2()) * _LN2
    return drawn.tolist(), logp.tolist()


def _sample_rows(
    rows2d: torch.Tensor,
    bm: torch.Tensor,
    plist: list[SamplingParams],
    gens: list[torch.Generator | None],
    history: list[TokenHistory | None],
    states: list[Any],
    step: int | None,
    offset: int,
) -> SampleResult:
    """:func:`sample` on rows ``offset ..`` of the batch (checked arguments; rows are independent)."""
    batch = rows2d.shape[0]
    # 1. Working copy, NaN -> -inf (counted). 2. Penalties.
    x, nan_counts = _nan_free_copy(rows2d)
    _apply_penalties_(x, plist, history)

    # 3. Grammar mask: xa holds allowed logits, x is reused for the disallowed ones.
    keep, xa, xd = _split_by_grammar_(x, bm)
    top_a = _row_max(xa)
    top_d = _row_max(xd)
    top_a_list = top_a.tolist()

    errors: list[NoValidToken | None] = [
        NoValidToken(offset + row, step, states[row]) if t == _NEG_INF else None
        for row, t in enumerate(top_a_list)
    ]
    token_ids = [-1] * batch
    logprobs = [math.nan] * batch
    greedy = [row for row in range(batch) if errors[row] is None and plist[row].greedy]
    sampled = [row for row in range(batch) if errors[row] is None and not plist[row].greedy]

    # 4. Greedy rows: argmax over allowed tokens (first on ties).
    if greedy:
        _take_greedy(xa, greedy, token_ids, logprobs)

    # 5. Mass the grammar removed. Greedy rows, and rows whose allowed maximum is +inf, take the limit:
    # the share of disallowed tokens among those tied at the overall maximum.
    limit_rows = [row for row in range(batch) if plist[row].greedy or top_a_list[row] == _POS_INF]
    limit_share = _limit_shares(xa, xd, top_a, top_d, limit_rows)
    inf_rows = {row: xa[row] == _POS_INF for row in sampled if top_a_list[row] == _POS_INF}
    removed = torch.full((batch,), math.nan, dtype=torch.float64)
    if sampled or len(limit_share) < batch:
        z, weights, mass_a, removed = _weigh_(xa, xd, top_a, plist, inf_rows)
    for row, share in limit_share.items():
        removed[row] = share

    if sampled:
        # 6. Soft filters, then the grammar mask again, then the draw.
        zs, ws, total = _soft_filtered(z, weights, mass_a, keep, sampled, plist)
        drawn, logp = _draw(zs, ws, total, _row_generators(sampled, gens, plist, step))
        for row, tok, lp in zip(sampled, drawn, logp, strict=True):
            token_ids[row] = tok
            logprobs[row] = lp

    return SampleResult(
        token_ids=torch.tensor(token_ids, dtype=torch.int64),
        logprobs=torch.tensor(logprobs, dtype=torch.float64),
        grammar_removed_mass=removed,
        nan_counts=nan_counts,
        errors=tuple(errors),
    )


def sample(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    params: SamplingParams | Sequence[SamplingParams],
    *,
    generators: Sequence[torch.Generator | None] | None = None,
    token_history: Sequence[TokenHistory | None] | None = None,
    step: int | None = None,
    state_ids: Sequence[Any] | None = None,
    raise_on_error: bool = True,
) -> SampleResult:
    """Draw one token per row of ``logits`` [B, V] (or [V]) under ``bitmask`` [B, W] (or [W]).

    ``params`` is one :class:`SamplingParams` for every row or one per row. ``generators`` (one per row,
    None entries allowed), ``token_history`` (one per row, for penalties) and ``state_ids`` (one per row,
    only reported in errors) are optional; ``step`` is reported in errors and derives per-step seeds.
    The caller's ``logits`` are not modified. See the module docstring for the stages, the randomness
    and the error contract; ``raise_on_error=False`` returns rows without a valid token as errors in
    the :class:`SampleResult` instead of raising the first.
    """
    rows2d = _check_logits("logits", logits)
    batch, vocab = rows2d.shape
    bm = _check_bitmask(bitmask, rows2d.device)
    if bm.shape[0] != batch:
        raise SamplerError("bitmask.shape[0]", f"{batch} rows like logits", bm.shape[0])
    if step is not None and (not _is_int(step) or step < 0):
        raise SamplerError("step", "None or an int >= 0", step)
    plist = _per_row_params(params, batch)
    gens = _check_rows("generators", generators, batch) if generators is not None else [None] * batch
    history = (
        _check_rows("token_history", token_history, batch) if token_history is not None else [None] * batch
    )
    for row, h in enumerate(history):
        if h is not None and not isinstance(h, TokenHistory):
            raise SamplerError(f"token_history[{row}]", "a TokenHistory or None", type(h).__name__)
    states = _check_rows("state_ids", state_ids, batch) if state_ids is not None else [None] * batch

    # Rows are independent, so the CPU works on row blocks of <= _CPU_CHUNK logits: temporaries stay
    # a few MiB (reused by the allocator) instead of fresh page-faulted buffers of the batch's size.
    rows_per_block = max(1, _CPU_CHUNK // max(vocab, 1)) if rows2d.device.type == "cpu" else max(batch, 1)
    parts = [
        _sample_rows(
            rows2d[start : start + rows_per_block],
            bm[start : start + rows_per_block],
            plist[start : start + rows_per_block],
            gens[start : start + rows_per_block],
            history[start : start + rows_per_block],
            states[start : start + rows_per_block],
            step,
            start,
        )
        for start in range(0, batch, rows_per_block)
    ]
    result = SampleResult(
        token_ids=torch.cat([p.token_ids for p in parts]) if parts else torch.zeros(0, dtype=torch.int64),
        logprobs=torch.cat([p.logprobs for p in parts]) if parts else torch.zeros(0, dtype=torch.float64),
        grammar_removed_mass=(
            torch.cat([p.grammar_removed_mass for p in parts])
            if parts
            else torch.zeros(0, dtype=torch.float64)
        ),
        nan_counts=torch.cat([p.nan_counts for p in parts]) if parts else torch.zeros(0, dtype=torch.int64),
        errors=tuple(e for p in parts for e in p.errors),
    )
    if raise_on_error:
        result.raise_first()
    return result
