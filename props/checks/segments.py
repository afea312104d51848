"""The segmentation search: does some segmentation of a byte string into tokens pass a backend (each
token allowed by its mask and accepted, then EOS)? It tells a completeness finding blocked in every
segmentation (``completeness_byte``) from one blocked in some (docs/invariants.md).

Depth first, forking the backend's matcher at each choice, longest token first, at most ``budget``
forks: True when a segmentation reaches EOS, False when none does (every allowed one was tried),
None when the forks ran out first. One algorithm, :func:`search_segmentations`, written as a
generator that pauses after each fork, serves both places it runs: in this process over a guarded
matcher (driven to the end by :func:`finish`), and inside a backend's worker process over the engine's
own matcher (``props.backends.worker``: the worker runs it in time slices, so that a hung engine call
is still cut by the call's timeout), where the search's hundreds of forks cost no round trips.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Protocol

import numpy as np

from .bits import bits_at

__all__ = ["Steps", "candidates", "search_segmentations", "finish", "rejected"]

#: Per position of the string: the tokens matching there that leave a segmentable rest, longest
#: first, as ``(token, end)`` pairs and as an id array (masks are read at these ids only).
Steps = dict[int, tuple[list[tuple[int, int]], np.ndarray]]

_NONE: tuple[list[tuple[int, int]], np.ndarray] = ([], np.zeros(0, dtype=np.int64))


class _Index(Protocol):
    def matches(self, data: bytes, start: int = 0) -> Any: ...

    def reach(self, data: bytes) -> list[bool]: ...


def candidates(index: _Index, data: bytes) -> Steps:
    """The :data:`Steps` of ``data`` over a vocabulary's index (``Vocabulary.index``)."""
    reach = index.reach(data)
    steps: Steps = {}
    for i in range(len(data)):
        if reach[i]:
            cands = [
                (tok, end) for tok, end in sorted(index.matches(data, i), key=lambda te: -te[1]) if reach[end]
            ]
            steps[i] = cands, np.asarray([tok for tok, _ in cands], dtype=np.int64)
    return steps


def rejected(outcome: Any) -> bool:
    """Whether an accept returned a rejection (by class name: every backend's ``Rejected`` type)."""
    return type(outcome).__name__ == "Rejected"


def search_segmentations(
    root: Any,
    root_mask: Any,
    steps: Steps,
    length: int,
    eos: np.ndarray,
    size: int,
    budget: int,
    fork_accept_mask: Callable[[Any, int], tuple[Any, Any, Any]],
) -> Generator[None, None, bool | None]:
    """The search from matcher ``root`` (its mask ``root_mask``, a row as the backend returns it) at
    position 0 of a string of ``length`` bytes; ``fork_accept_mask(m, token)`` forks ``m``, accepts
    ``token`` on the fork and returns the fork, the outcome and its mask (None after a rejection).
    Yields after each fork; returns the verdict."""
    left = [budget]

    def dfs(m: Any, i: int, packed: Any) -> Generator[None, None, bool | None]:
        if i == length:
            return bool(len(eos)) and bool(bits_at(packed, size, eos).any())
        cands, ids = steps.get(i, _NONE)
        unknown = False
        for (tok, end), allowed in zip(cands, bits_at(packed, size, ids).tolist(), strict=True):
            if not allowed:
                continue
            if left[0] <= 0:
                return None
            left[0] -= 1
            child, outcome, child_packed = fork_accept_mask(m, tok)
            yield
            if rejected(outcome):
                continue
            found = yield from dfs(child, end, child_packed)
            if found:
                return True
            unknown = unknown or found is None
        return None if unknown else False

    return (yield from dfs(root, 0, root_mask))


def finish(search: Generator[None, None, bool | None]) -> bool | None:
    """Run a search to its verdict."""
    while True:
        try:
            next(search)
        except StopIteration as stop:
            return stop.value
