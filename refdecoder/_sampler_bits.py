"""Bit-level kernels behind :func:`refdecoder.sampler.apply_token_bitmask` (private).

Theory of operation
-------------------
The bitmask is xgrammar's layout: int32 words, bit ``i % 32`` of word ``i // 32`` set when token ``i``
is allowed. One word expands to 32 *keep words* of the logits' integer twin (int16/int32/int64): all
ones where the token is allowed, all zeros where it is not::

    keep[w, j] = (word[w] << (31 - j)) >> 31        # arithmetic shift smears bit j over the word

Then, on the logits' bit pattern ``x`` viewed as that integer type and ``N`` the bit pattern of -inf::

    x' = ((x ^ N) & keep) ^ N                        # keep = ~0 -> x;  keep = 0 -> N

This is exactly ``torch.where(allowed, logits, -inf)`` for every input, NaN and infinities included,
because it never does float arithmetic. We use it instead of ``masked_fill_``/``torch.where`` because
those take ~5 ms for [8, 128k] on a one-thread CPU, against ~0.5 ms for these five elementwise integer
passes; the same ops run on any device torch supports, with no compile step.
"""

from __future__ import annotations

import sys
import threading

import torch

__all__ = ["INT_TWIN", "keep_words", "fill_disallowed_", "neg_inf_bits", "scratch_buffer", "where_keep_"]

#: Same-width integer dtype whose bit pattern we edit for each supported float dtype.
INT_TWIN: dict[torch.dtype, torch.dtype] = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}

_NEG_INF_BITS: dict[torch.dtype, int] = {
    dt: int(torch.tensor(float("-inf"), dtype=dt).view(it).item()) for dt, it in INT_TWIN.items()
}

_SHIFTS: dict[torch.device, torch.Tensor] = {}
_LOCAL = threading.local()

if sys.byteorder != "little":  # pragma: no cover - every platform torch ships for is little-endian
    raise ImportError("refdecoder.sampler assumes a little-endian host")


def neg_inf_bits(dtype: torch.dtype) -> int:
    return _NEG_INF_BITS[dtype]


def _shifts(device: torch.device) -> torch.Tensor:
    """``31 - arange(32)`` as int32 on ``device`` (cached: one tiny tensor per device)."""
    t = _SHIFTS.get(device)
    if t is None:
        t = torch.arange(31, -1, -1, dtype=torch.int32, device=device)
        _SHIFTS[device] = t
    return t


def scratch_buffer(slot: str, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """This thread's reusable CPU buffer ``slot``, as ``numel`` elements of ``dtype`` (contents undefined).

    Fresh multi-MiB CPU tensors are page-faulted anew on most calls (glibc maps them afresh), which
    costs more than the arithmetic on them; one reused buffer per slot and thread makes [64, 32k]
    masking ~5x faster. The buffer is valid until the next request for the same slot on this thread, so
    nothing built on it may escape the function that asked for it.
    """
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    buffers: dict[str, torch.Tensor] | None = getattr(_LOCAL, "buffers", None)
    if buffers is None:
        buffers = _LOCAL.buffers = {}
    buf = buffers.get(slot)
    if buf is None or buf.numel() < nbytes:
        buf = buffers[slot] = torch.empty(nbytes, dtype=torch.uint8)
    return buf[:nbytes].view(dtype)


def keep_words(
    bitmask: torch.Tensor, width: int, dtype: torch.dtype = torch.int32, *, scratch: bool = False
) -> torch.Tensor:
    """Expand ``bitmask`` [R, W] int32 to keep words [R, width] of ``dtype`` (-1 allowed, 0 not).

    ``width`` must be at most ``32 * W``; only the words it needs are read. With ``scratch`` (CPU only,
    int32 only) the result lives in this thread's "keep" :func:`scratch_buffer`.
    """
    rows = bitmask.shape[0]
    words = -(-width // 32)
    bm = bitmask[:, :words].unsqueeze(-1)
    # Left shift moves bit j to the sign bit; torch shifts signed ints as unsigned on the left (no
    # overflow UB) and arithmetically on the right, on CPU and CUDA alike.
    shifts = _shifts(bm.device)
    if scratch and dtype == torch.int32 and bm.device.type == "cpu":
        out = scratch_buffer("keep", rows * words * 32, torch.int32).view(rows, words, 32)
        keep = torch.bitwise_left_shift(bm, shifts, out=out)
    else:
        keep = bm << shifts
    keep = keep.bitwise_right_shift_(31).view(rows, words * 32)[:, :width]
    return keep if dtype == torch.int32 else keep.to(dtype)


def fill_disallowed_(logits: torch.Tensor, keep: torch.Tensor) -> None:
    """In place: ``logits = where(keep != 0, logits, -inf)``; ``keep`` holds -1/0 of the int twin."""
    n = _NEG_INF_BITS[logits.dtype]
    ints = logits.view(INT_TWIN[logits.dtype])
    ints.bitwise_xor_(n).bitwise_and_(keep).bitwise_xor_(n)


def where_keep_(logits: torch.Tensor, keep: torch.Tensor) -> None:
    """In place: ``logits = where(keep, logits, -inf)`` for a bool ``keep`` (fast path, see above)."""
    fill_disallowed_(logits, keep.to(INT_TWIN[logits.dtype]).neg_())
