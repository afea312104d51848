"""Reading the bitmask rows backends return (xgrammar's layout: bit ``i % 32`` of int32 word ``i // 32``
is token ``i``), unpacked or at a few ids."""

from __future__ import annotations

from typing import Any

import numpy as np

from refdecoder.bitmask import num_words

__all__ = ["row_words", "mask_bits", "same_bits", "bits_at"]


def row_words(mask: Any, size: int) -> np.ndarray:
    """A row as its little-endian int32 words, at most the ``num_words(size)`` that hold tokens."""
    return np.ascontiguousarray(np.asarray(mask).reshape(-1)[: num_words(size)], dtype="<i4")


def mask_bits(mask: Any, size: int) -> np.ndarray:
    """An int32 bitmask row (xgrammar's layout) as a bool array of length ``size``."""
    words = row_words(mask, size)
    bits = np.unpackbits(words.view(np.uint8), count=min(size, 32 * len(words)), bitorder="little")
    return bits.view(bool)  # unpackbits gives 0/1 bytes: a bool view, not a copy


def same_bits(a: Any, b: Any, size: int) -> bool:
    """``np.array_equal(mask_bits(a, size), mask_bits(b, size))`` on the packed words: the bits
    past ``size`` in the last word are not tokens, and a short row is unequal to a full one unless
    both read the same (:func:`mask_bits` reads what a row holds)."""
    wa, wb = row_words(a, size), row_words(b, size)
    if len(wa) != len(wb) or len(wa) < num_words(size):
        return bool(np.array_equal(mask_bits(a, size), mask_bits(b, size)))
    tail = size - 32 * (len(wa) - 1)  # bits of the last word that are tokens, 1..32
    # Python ints and bytes: numpy's scalar and array_equal calls cost more than these small rows.
    if (int(wa[-1]) ^ int(wb[-1])) & ((1 << tail) - 1):
        return False
    return wa[:-1].tobytes() == wb[:-1].tobytes()


def bits_at(mask: Any, size: int, ids: np.ndarray) -> np.ndarray:
    """``mask_bits(mask, size)[ids]`` without unpacking the row (``ids`` below ``size``)."""
    words = row_words(mask, size)
    return ((words[ids >> 5].astype(np.int64) >> (ids & 31)) & 1).astype(bool)
