"""A prefix index over a vocabulary's token bytes, and segmentations of byte strings into tokens.

A *segmentation* of ``data`` is a sequence of text-token ids whose bytes concatenate to ``data``. Several
ids may share the same bytes (a SentencePiece piece ``A`` and its byte-fallback twin ``<0x41>``); each
is a different segmentation. Everything here is dynamic programming over positions of ``data``:
``reach[i]`` is true when ``data[i:]`` can be segmented, so walks that only step to reachable
positions never dead-end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class TokenIndex:
    """Token bytes -> ids, plus the distinct token lengths, so matching at a position is one dict
    look-up per length, and the longest token starting with each two-byte head, so only the lengths
    up to it are looked up (a few dozen lengths in a 129k vocabulary, a handful under most heads)."""

    ids_by_bytes: Mapping[bytes, tuple[int, ...]]
    lengths: tuple[int, ...]  # distinct text-token lengths, ascending
    longest_from: Mapping[bytes, int]  # the first two bytes of a token of 2+ bytes -> the longest such

    @classmethod
    def build(cls, token_bytes: Sequence[bytes | None]) -> TokenIndex:
        grouped: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(token_bytes):
            if data is not None:
                grouped.setdefault(data, []).append(token_id)
        ids_by_bytes = {data: tuple(ids) for data, ids in grouped.items()}
        longest: dict[bytes, int] = {}
        for data in ids_by_bytes:
            if len(data) >= 2 and len(data) > longest.get(data[:2], 0):
                longest[data[:2]] = len(data)
        return cls(ids_by_bytes, tuple(sorted({len(data) for data in ids_by_bytes})), longest)

    @property
    def max_len(self) -> int:
        return self.lengths[-1] if self.lengths else 0

    def matches(self, data: bytes, start: int = 0) -> Iterator[tuple[int, int]]:
        """``(token_id, end)`` for every token whose bytes are ``data[start:end]``, shortest first."""
        # No token longer than the longest starting with these two bytes (or than one byte) matches.
        remaining = min(len(data) - start, max(1, self.longest_from.get(data[start : start + 2], 1)))
        for length in self.lengths:
            if length > remaining:
                return
            for token_id in self.ids_by_bytes.get(data[start : start + length], ()):
                yield token_id, start + length

    def reach(self, data: bytes) -> list[bool]:
        """``reach[i]`` is true when ``data[i:]`` has a segmentation (``reach[len(data)]`` is true)."""
        n = len(data)
        reach = [False] * (n + 1)
        reach[n] = True
        for i in range(n - 1, -1, -1):
            reach[i] = any(reach[end] for _, end in self.matches(data, i))
        return reach

    def count_segmentations(self, data: bytes) -> int:
        n = len(data)
        ways = [0] * (n + 1)
        ways[n] = 1
        for i in range(n - 1, -1, -1):
            ways[i] = sum(ways[end] for _, end in self.matches(data, i))
        return ways[0]

    def segmentations(self, data: bytes, limit: int) -> list[tuple[int, ...]]:
        """Up to ``limit`` segmentations of ``data``, in lexicographic order of (token length, id)
        at each position; all of them when there are at most ``limit``."""
        reach = self.reach(data)
        found: list[tuple[int, ...]] = []
        if not reach[0] or limit <= 0:
            return found
        path: list[int] = []

        def walk(i: int) -> None:
            if i == len(data):
                found.append(tuple(path))
                return
            for token_id, end in self.matches(data, i):
                if len(found) >= limit:
                    return
                if reach[end]:
                    path.append(token_id)
                    walk(end)
                    path.pop()

        walk(0)
        return found

    def fewest_tokens(self, data: bytes) -> list[int] | None:
        """A segmentation with the fewest tokens (ties: longest first token, then lowest id), or None
        when ``data`` has no segmentation. The canonical encoding of a vocabulary without a tokenizer
        library behind it."""
        n = len(data)
        cost = [n + 1] * (n + 1)  # tokens needed from position i to the end; n + 1 means impossible
        cost[n] = 0
        step: list[tuple[int, int] | None] = [None] * (n + 1)  # (first token id, its end)
        for i in range(n - 1, -1, -1):
            for token_id, end in self.matches(data, i):  # shorter first, ids ascending per length
                tokens = cost[end] + 1
                here = step[i]
                if tokens < cost[i] or (tokens == cost[i] and here is not None and end > here[1]):
                    cost[i] = tokens
                    step[i] = (token_id, end)
        if cost[0] > n:
            return None
        ids: list[int] = []
        i = 0
        while i < n:
            here = step[i]
            assert here is not None
            ids.append(here[0])
            i = here[1]
        return ids
