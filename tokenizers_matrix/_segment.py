"""Segmentations of a byte string into a vocabulary's tokens (see ``_index`` for the algorithms)."""

from __future__ import annotations

from ._vocab import Vocabulary

DEFAULT_LIMIT = 1000


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def all_segmentations(
    vocab: Vocabulary, data: bytes | str, limit: int = DEFAULT_LIMIT
) -> list[tuple[int, ...]]:
    """Every way to spell ``data`` with text tokens of ``vocab``, at most ``limit`` of them (in
    lexicographic order of token length, then id, at each position). Compare with
    :func:`count_segmentations` to know whether the list is complete."""
    return vocab.index.segmentations(_as_bytes(data), limit)


def count_segmentations(vocab: Vocabulary, data: bytes | str) -> int:
    """How many segmentations ``data`` has (exact; it can be astronomically large)."""
    return vocab.index.count_segmentations(_as_bytes(data))
