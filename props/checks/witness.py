"""Witnesses from the reference: completions of a viable prefix, and segmentations of a byte string.

A completeness certificate is a full string of the language that goes through a token the backend
masked (docs/design.md §4.2); it is built here as prefix + token + a completion the reference finds, then
validated independently (``props.corpus.validate_output``) before it is reported.
"""

from __future__ import annotations

import random
from collections import deque

from refdecoder import Grammar, State

__all__ = [
    "shortest_completion",
    "breadth_first_completion",
    "canonical_ids",
    "random_segmentation",
    "char_splitting_segmentation",
    "splits_character",
]

# Bytes that tend to close structures come first, so the search finds short completions quickly.
_FIRST = b'}]",:1tfn0'
_PRIORITY = list(_FIRST) + [b for b in range(256) if b not in _FIRST]
_ORDER = {b: i for i, b in enumerate(_PRIORITY)}


def shortest_completion(
    g: Grammar, state: State, max_states: int = 5_000, max_len: int = 400
) -> bytes | None:
    """Some byte string taking ``state`` to an accepting state, or None if none is found within the
    budget. First the shortest one read off the grammar network (:meth:`Grammar.completion`, checked
    by the matcher there); where that gives up, depth-first over states, trying structure-closing
    bytes first; visited states are skipped, so loops (string bodies, whitespace) cannot trap it."""
    word = g.completion(state)
    if word is not None and len(word) <= max_len:
        return word
    return _depth_first_completion(g, state, max_states, max_len)


def _depth_first_completion(g: Grammar, state: State, max_states: int, max_len: int) -> bytes | None:
    seen = {state}
    stack: list[tuple[State, bytes]] = [(state, b"")]
    while stack and len(seen) < max_states:
        s, path = stack.pop()
        if s.accepting:
            return path
        if len(path) >= max_len:
            continue
        live = sorted(g.live_bytes(s), key=_ORDER.__getitem__, reverse=True)
        for b in live:
            t = g.advance_byte(s, b)
            assert t is not None
            if t not in seen:
                seen.add(t)
                stack.append((t, path + bytes([b])))
    return None


def breadth_first_completion(g: Grammar, state: State, max_states: int) -> bytes | None:
    """The shortest bytes taking ``state`` to acceptance (BFS over states), None if not found in budget."""
    if state.accepting:
        return b""
    seen = {state}
    queue: deque[tuple[State, bytes]] = deque([(state, b"")])
    while queue and len(seen) < max_states:
        s, path = queue.popleft()
        for b in g.live_bytes(s):
            t = g.advance_byte(s, b)
            assert t is not None, "live_bytes offered a dead byte"
            if t.accepting:
                return path + bytes([b])
            if t not in seen:
                seen.add(t)
                queue.append((t, path + bytes([b])))
    return None


def splits_character(data: bytes) -> bool:
    """Whether ``data`` is not whole UTF-8 characters (it starts or ends inside one)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def canonical_ids(vocab: object, data: bytes) -> tuple[int, ...] | None:
    """The tokenizer's own encoding of ``data`` when it spells ``data`` exactly, else None (text the
    tokenizer normalizes, or bytes that are not UTF-8). A ``tokenizers_matrix.Vocabulary`` answers
    itself (:meth:`~tokenizers_matrix.Vocabulary.canonical_ids`: special-token encodings in ``data``
    are their ids in a special-token view)."""
    own = getattr(vocab, "canonical_ids", None)
    if callable(own):
        ids: tuple[int, ...] | None = own(data)
        return ids
    try:
        text = data.decode("utf-8")
        ids = tuple(vocab.encode(text))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - any tokenizer failure means "no canonical encoding"
        return None
    return ids if vocab.decode(ids) == data else None  # type: ignore[attr-defined]


def _segment(vocab: object, data: bytes, rng: random.Random, prefer_split: bool) -> tuple[int, ...] | None:
    index = vocab.index  # type: ignore[attr-defined]
    reach = index.reach(data)
    if not reach[0]:
        return None
    ids: list[int] = []
    i = 0
    while i < len(data):
        options = [(t, end) for t, end in index.matches(data, i) if reach[end]]
        if prefer_split:
            inside = [(t, e) for t, e in options if e < len(data) and (data[e] & 0xC0) == 0x80]
            options = inside or options
        t, i = rng.choice(options)
        ids.append(t)
    return tuple(ids)


def random_segmentation(vocab: object, data: bytes, rng: random.Random) -> tuple[int, ...] | None:
    """A uniformly-stepped random segmentation of ``data`` into tokens (None if it has none)."""
    return _segment(vocab, data, rng, prefer_split=False)


def char_splitting_segmentation(vocab: object, data: bytes, rng: random.Random) -> tuple[int, ...] | None:
    """A segmentation that ends tokens inside multi-byte characters wherever the vocabulary can."""
    return _segment(vocab, data, rng, prefer_split=True)
