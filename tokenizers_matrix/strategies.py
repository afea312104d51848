"""Hypothesis strategies over a vocabulary: texts, and token sequences that spell them.

Every strategy that yields token ids yields a :class:`Segmentation`, whose ``ids`` decode to exactly
its ``data``:

- :func:`canonical_encodings`: the tokenizer's own ``encode`` of a text;
- :func:`segmentations`: a uniformly-stepped random segmentation of the text's bytes (any tokens);
- :func:`noncanonical_segmentations`: one that differs from the canonical encoding whenever the text
  admits another segmentation at all (the byte vocabulary never does);
- :func:`char_splitting_segmentations`: one with token boundaries inside multi-byte UTF-8 characters
  wherever the vocabulary allows it (byte-level and byte-fallback tokens), else the closest it can.

:func:`tokenizers_matrix.all_segmentations` enumerates them all (bounded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from hypothesis import strategies as st

from ._vocab import Vocabulary

__all__ = [
    "Segmentation",
    "texts",
    "canonical_encodings",
    "segmentations",
    "noncanonical_segmentations",
    "char_splitting_segmentations",
    "split_characters",
]


@dataclass(frozen=True)
class Segmentation:
    """Token ids and the bytes they spell; ``text`` is the string the ids were drawn for."""

    text: str
    data: bytes
    ids: tuple[int, ...]


# -- texts -------------------------------------------------------------------------------------------

_WHITESPACE_RUNS = [" ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", " \n", "\r\n", "\n    ", " \t ", "\u3000"]
_EMOJI = ["😀", "🎉", "🐍", "👍🏽", "👩\u200d💻", "👨\u200d👩\u200d👧", "🇫🇷", "❤️", "1️⃣", "🏳️\u200d🌈"]
_JSONISH = [
    '{"',
    '": ',
    '",',
    "}",
    "[",
    "]",
    "\\n",
    '\\"',
    "\\u00e9",
    "\\ud83d\\ude00",
    "null",
    "true",
    "-0.5e-3",
]


def _chunks() -> st.SearchStrategy[str]:
    return st.one_of(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),  # printable ASCII
        st.sampled_from([chr(c) for c in range(0x20)] + ["\x7f"]),  # ASCII controls
        st.sampled_from(_WHITESPACE_RUNS),
        st.sampled_from(_EMOJI),
        st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),  # emoji blocks
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK ideographs
        st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),  # kana
        st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul
        st.characters(min_codepoint=0xC0, max_codepoint=0x24F),  # accented Latin
        st.tuples(st.sampled_from("aeiouAEn"), st.characters(min_codepoint=0x300, max_codepoint=0x36F)).map(
            "".join
        ),
        st.sampled_from(_JSONISH),
        st.sampled_from(["\u2581", "\u00a0", "\ufeff", "\u200b", "\ufffd"]),  # tokenizer-sensitive
        st.characters(codec="utf-8"),  # anything encodable
    )


@lru_cache(maxsize=64)
def _encodable(vocab: Vocabulary) -> tuple[str, ...] | None:
    """None if the vocabulary encodes every character; else the characters it does encode."""
    probe = [chr(c) for c in (0x0, 0x80, 0x4E00, 0x1F600, 0x10FFFF)] + ["\u2581"]
    if all(vocab.can_encode(c) for c in probe):
        return None
    found: set[str] = set()
    for _, data in vocab.text_tokens():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        found.update(c for c in text if vocab.can_encode(c))
    found.update(c for c in _WHITESPACE_RUNS + ["\u2581"] if len(c) == 1 and vocab.can_encode(c))
    return tuple(sorted(found))


def texts(
    vocab: Vocabulary | None = None, *, min_size: int = 0, max_size: int = 24
) -> st.SearchStrategy[str]:
    """Text mixing ASCII and its control characters, runs of spaces/tabs/newlines, emoji (with ZWJ
    sequences and modifiers), CJK, kana, Hangul, accented Latin and combining marks, JSON fragments.

    With ``vocab``, only characters it ``can_encode`` (a SentencePiece model without byte fallback
    turns the rest into ``<unk>``); sizes count chunks, not characters.
    """
    chunks = _chunks()
    if vocab is not None:
        allowed = _encodable(vocab)
        if allowed is not None:
            allowed_set = frozenset(allowed)
            runs = [r for r in _WHITESPACE_RUNS if all(c in allowed_set for c in r)]
            ascii_ = [c for c in allowed if c < "\x80"]
            chunks = st.one_of(
                *([st.sampled_from(ascii_)] if ascii_ else []),  # as likely as all the others together
                st.sampled_from(allowed),
                *([st.sampled_from(runs)] if runs else []),
            )
    return st.lists(chunks, min_size=min_size, max_size=max_size).map("".join)


def _text_or(vocab: Vocabulary, text: st.SearchStrategy[str] | None) -> st.SearchStrategy[str]:
    return texts(vocab) if text is None else text


# -- segmentations -----------------------------------------------------------------------------------


def canonical_encodings(
    vocab: Vocabulary, text: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[Segmentation]:
    """The tokenizer's canonical encoding of a drawn text (``data`` is what the ids spell, which is
    ``vocab.normalize(text)`` in UTF-8)."""

    def encode(s: str) -> Segmentation:
        ids = tuple(vocab.encode(s))
        return Segmentation(s, vocab.decode(ids), ids)

    return _text_or(vocab, text).map(encode)


def _walk(
    draw: st.DrawFn, vocab: Vocabulary, data: bytes, rank: Callable[[int, int], int] | None = None
) -> tuple[int, ...]:
    """A random segmentation of ``data``: at each position a token that leaves a segmentable rest.
    ``rank(start, end)`` orders the candidates (lower is better); only the best-ranked are drawn from."""
    index = vocab.index
    reach = index.reach(data)
    ids: list[int] = []
    i = 0
    while i < len(data):
        options = [(token_id, end) for token_id, end in index.matches(data, i) if reach[end]]
        if rank is not None:
            start = i
            best = min(rank(start, end) for _, end in options)
            options = [(t, e) for t, e in options if rank(start, e) == best]
        token_id, i = draw(st.sampled_from(options))
        ids.append(token_id)
    return tuple(ids)


def _segmentable(vocab: Vocabulary, text: st.SearchStrategy[str] | None) -> st.SearchStrategy[str]:
    # Texts drawn for ``vocab`` only use characters it encodes, but a SentencePiece model without byte
    # fallback may still lack a *token* for some byte string; such texts are filtered out.
    return _text_or(vocab, text).filter(lambda s: vocab.index.reach(vocab.normalize(s).encode("utf-8"))[0])


@st.composite
def _random_segmentation(
    draw: st.DrawFn, vocab: Vocabulary, text: st.SearchStrategy[str] | None
) -> Segmentation:
    s = draw(_segmentable(vocab, text))
    data = vocab.normalize(s).encode("utf-8")
    return Segmentation(s, data, _walk(draw, vocab, data))


def segmentations(
    vocab: Vocabulary, text: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[Segmentation]:
    """A random segmentation of a drawn text's bytes (canonical or not)."""
    return _random_segmentation(vocab, text)


@st.composite
def _noncanonical(draw: st.DrawFn, vocab: Vocabulary, text: st.SearchStrategy[str] | None) -> Segmentation:
    s = draw(_segmentable(vocab, text))
    data = vocab.normalize(s).encode("utf-8")
    canonical = tuple(vocab.encode(s))
    if vocab.decode(canonical) != data:  # the canonical encoding used an unknown token: any will do
        return Segmentation(s, data, _walk(draw, vocab, data))
    index = vocab.index
    reach = index.reach(data)
    # Boundaries of the canonical encoding where another token (different id, leaving a segmentable
    # rest) could be taken instead; diverge at one of them, walk randomly after it.
    starts, pos = [], 0
    for token_id in canonical:
        starts.append((pos, token_id))
        pos += len(vocab.token_bytes[token_id] or b"")
    forks = [
        (k, alternatives)
        for k, (start, token_id) in enumerate(starts)
        if (alternatives := [(t, e) for t, e in index.matches(data, start) if reach[e] and t != token_id])
    ]
    if not forks:
        return Segmentation(s, data, canonical)  # the only segmentation there is
    k, alternatives = draw(st.sampled_from(forks))
    token_id, end = draw(st.sampled_from(alternatives))
    rest = _walk(draw, vocab, data[end:])
    return Segmentation(s, data, (*canonical[:k], token_id, *rest))


def noncanonical_segmentations(
    vocab: Vocabulary, text: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[Segmentation]:
    """A segmentation that is not the canonical encoding, whenever the drawn text has another one."""
    return _noncanonical(vocab, text)


def _multibyte_spans(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` byte offsets of each multi-byte UTF-8 character in ``data``."""
    spans: list[tuple[int, int]] = []
    for i, byte in enumerate(data):
        if byte >= 0xC0:
            spans.append((i, i + 1))
        elif byte >= 0x80 and spans and spans[-1][1] == i:
            spans[-1] = (spans[-1][0], i + 1)
    return spans


def _whole_char_rank(data: bytes) -> Callable[[int, int], int]:
    """0 for a token ``data[start:end]`` that holds no whole multi-byte character, else 1. A
    segmentation of rank-0 tokens has a boundary inside every multi-byte character."""
    first_end = [len(data) + 1] * (len(data) + 1)  # smallest end of a multi-byte char starting >= i
    for start, end in _multibyte_spans(data):
        first_end[start] = end
    for i in range(len(data) - 1, -1, -1):
        first_end[i] = min(first_end[i], first_end[i + 1])
    return lambda start, end: int(end >= first_end[start])


@st.composite
def _char_splitting(draw: st.DrawFn, vocab: Vocabulary, text: st.SearchStrategy[str] | None) -> Segmentation:
    s = draw(_segmentable(vocab, text))
    data = vocab.normalize(s).encode("utf-8")
    return Segmentation(s, data, _walk(draw, vocab, data, rank=_whole_char_rank(data)))


def char_splitting_segmentations(
    vocab: Vocabulary, text: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[Segmentation]:
    """A segmentation with a token boundary inside multi-byte characters wherever the vocabulary
    allows: with every single byte a token (byte, byte-level, byte fallback) every multi-byte
    character is split; otherwise as many as the greedy walk can (tokens that hold a whole multi-byte
    character are taken only when nothing else leaves a segmentable rest)."""
    return _char_splitting(vocab, text)


def split_characters(vocab: Vocabulary, seg: Segmentation) -> tuple[int, int]:
    """``(split, total)``: how many of the multi-byte characters in ``seg.data`` have a token boundary
    strictly inside them, out of how many."""
    boundaries, pos = set(), 0
    for token_id in seg.ids:
        pos += len(vocab.token_bytes[token_id] or b"")
        boundaries.add(pos)
    spans = _multibyte_spans(seg.data)
    return sum(any(start < b < end for b in boundaries) for start, end in spans), len(spans)
