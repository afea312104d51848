"""The reference as a ``transformers`` logits processor: exact constrained decoding in ``model.generate``.

::

    processor = ReferenceLogitsProcessor(JsonSchema(schema), tokenizer)
    model.generate(ids, logits_processor=[processor], eos_token_id=processor.eos_token_ids, ...)

Theory of operation
-------------------
``generate`` calls the processor once per step with ``input_ids`` ``[rows, prompt + t]`` and the
scores ``[rows, V']`` of the next token. The first call of a generation fixes the prompt length
``P`` (all rows share it: ``generate`` pads prompts to one length) and the prompts; a later call
continues that generation when every row starts with one of the prompts and is at least ``P`` long,
and otherwise starts a new one, so one processor serves any number of ``generate`` calls, one at a
time (:meth:`ReferenceLogitsProcessor.reset` says so explicitly).

A row is keyed by its generated ids ``input_ids[row, P:]``, never by its index: beam search reorders
and duplicates rows between steps, so row ``i`` now may continue row ``j`` of the last step, and
assisted or speculative decoding (``generate(assistant_model=...)``, ``prompt_lookup_num_tokens``)
scores several candidate positions per step — calls of lengths ``L, L+1, ..., L+k`` — then goes back
to the first rejected candidate. Rows of every length are kept (an LRU of :data:`_KEPT_ROWS`); a
row's key minus its last id names its parent, whose :class:`~refdecoder.Matcher` is forked (O(1),
persistent history) and advanced by that id. A key with no kept ancestor is replayed from the
nearest one (or the start). Keys that repeat (beams sharing a prefix) share one row.

A row is *live* while every generated id was accepted; it *ended* once EOS was accepted (``generate``
keeps finished rows in the batch and appends padding to them) and is *dead* when an id the mask had
removed was appended anyway. That happens in beam search, which keeps ``2 * num_beams`` candidates per
step and pads with ``-inf`` ones when fewer tokens are allowed; such a beam's score is ``-inf`` and it
never wins over a finite one. Ended and dead rows may draw only EOS, so their softmax stays finite.

Masks are the reference's exact ones (:meth:`TokenGrammar.mask`), applied with
:func:`refdecoder.sampler.apply_token_bitmask`; score columns past the vocabulary (models pad their
embedding to a multiple of 64 or 128) are always ``-inf``. A live row whose allowed tokens all score
``-inf`` (or NaN) raises :class:`~refdecoder.errors.NoValidToken` instead of letting ``generate``
sample from an empty set. With ``max_new_tokens`` the processor knows the budget: a row with
``left`` tokens still to draw may take a token only if the language can be finished after it within
``left - 1`` more, EOS included (``refdecoder._budget``, exact shortest completions measured in tokens
of this vocabulary), so every row ends with EOS within the budget whenever the spec's shortest
output fits it — which is checked when the processor is built.

Token bytes come from the tokenizer itself (:func:`vocabulary_from_tokenizer`): byte-level BPE
through GPT-2's byte table, SentencePiece-style pieces through ``▁`` and ``<0xNN>`` byte fallback,
added tokens as their text, special ids as none. Any object with the ``VocabularyLike`` attributes
(``token_bytes``, ``eos_ids``, ``special_ids``) is used as it is. ``transformers`` is optional:
this module imports it only to take ``LogitsProcessor`` as the base class when it is installed.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import torch

from ._budget import TokenDistances, budget_distances
from ._compile import compile as compile_spec
from ._matcher import Accepted, Matcher
from ._tokens import TokenGrammar, VocabularyLike, pack_ids
from .errors import NoValidToken, SpecError, VocabularyError
from .grammar import Grammar, Limits, Spec
from .sampler import apply_token_bitmask

__all__ = [
    "ReferenceLogitsProcessor",
    "Row",
    "TokenizerVocabulary",
    "vocabulary_from_tokenizer",
    "transformers_available",
]


def _logits_processor_base() -> type:
    try:
        from transformers import LogitsProcessor
    except ImportError:  # transformers is optional: the processor is then a plain callable
        return object
    return LogitsProcessor


_Base: Any = _logits_processor_base()


def transformers_available() -> bool:
    return _Base is not object


# -- token bytes from a transformers tokenizer ------------------------------------------------------

_METASPACE = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")


@lru_cache(maxsize=1)
def _byte_level_table() -> tuple[dict[int, int], re.Pattern[str]]:
    """GPT-2's ``bytes_to_unicode`` inverted (code point -> byte), and a pattern for characters outside it."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[0x100 + extra] = b
            extra += 1
    outside = "".join(re.escape(chr(c)) for c in sorted(table))
    return table, re.compile(f"[^{outside}]")


def _byte_level_bytes(piece: str) -> bytes:
    table, outside = _byte_level_table()
    if outside.search(piece):  # an added token such as "<｜User｜>": its own UTF-8, as ByteLevel decodes it
        return piece.encode("utf-8")
    return bytes(table[ord(c)] for c in piece)


@dataclass(frozen=True, eq=False)
class TokenizerVocabulary:
    """Token id -> bytes (``None`` for special and EOS ids) as read from a transformers tokenizer."""

    token_bytes: tuple[bytes | None, ...]
    eos_ids: frozenset[int]
    special_ids: frozenset[int]
    style: Literal["byte-level", "metaspace"]

    def __len__(self) -> int:
        return len(self.token_bytes)


def _components(node: Any, key: str) -> list[dict[str, Any]]:
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [n for member in node.get(key) or [] for n in _components(member, key)]
    return [node]


def _backend_style(tokenizer: Any) -> tuple[str | None, bool]:
    """``("byte-level" | "metaspace" | None, byte_fallback)`` from a fast tokenizer's backend JSON, or
    from a slow SentencePiece tokenizer (``sp_model``)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return ("metaspace", True) if getattr(tokenizer, "sp_model", None) is not None else (None, False)
    raw = json.loads(backend.to_str())
    parts = _components(raw.get("pre_tokenizer"), "pretokenizers") + _components(
        raw.get("decoder"), "decoders"
    )
    normalizers = _components(raw.get("normalizer"), "normalizers")
    types = {p.get("type") for p in parts}
    model = raw.get("model") or {}
    byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in types
    if "ByteLevel" in types:
        return "byte-level", byte_fallback
    if "Metaspace" in types or any(
        p.get("type") == "Replace" and _METASPACE in json.dumps(p, ensure_ascii=False)
        for p in parts + normalizers
    ):
        return "metaspace", byte_fallback
    return None, byte_fallback


def _id_list(value: int | Iterable[int] | None) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (int, np.integer)):
        return [int(value)]
    return [int(v) for v in value]


def vocabulary_from_tokenizer(
    tokenizer: Any, eos_token_id: int | Iterable[int] | None = None
) -> TokenizerVocabulary:
    """The byte vocabulary of a transformers tokenizer (``PreTrainedTokenizerFast`` or a slow
    SentencePiece one). EOS ids: ``eos_token_id`` if given, else the tokenizer's ``eos_token_id``."""
    name = type(tokenizer).__name__
    if not callable(getattr(tokenizer, "convert_ids_to_tokens", None)):
        raise VocabularyError(
            name, "a transformers tokenizer (convert_ids_to_tokens) or a Vocabulary (token_bytes)"
        )
    style, byte_fallback = _backend_style(tokenizer)
    if style is None:
        raise VocabularyError(
            name,
            "a byte-level BPE (ByteLevel) or SentencePiece-style (Metaspace ▁) tokenizer",
            "its pre-tokenizer and decoder are neither",
        )
    size = len(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special = set(_id_list(getattr(tokenizer, "all_special_ids", None)))
    unk = getattr(tokenizer, "unk_token_id", None)
    if isinstance(unk, int):
        special.add(unk)
    eos = _id_list(eos_token_id) or _id_list(getattr(tokenizer, "eos_token_id", None))
    if not eos:
        raise VocabularyError(name, "an EOS token: the tokenizer's eos_token_id, or pass eos_token_id=...")
    if not all(0 <= e < size for e in eos):
        raise VocabularyError(name, f"EOS ids in [0, {size})", f"got {eos}")
    table: list[bytes | None] = [None] * size
    for token_id, piece in enumerate(pieces):
        token = added.get(token_id)
        if piece is None or token_id in special or (token is not None and getattr(token, "special", False)):
            special.add(token_id)
            continue
        if token is not None:
            data = str(getattr(token, "content", piece)).encode("utf-8")
        elif style == "byte-level":
            data = _byte_level_bytes(piece)
        elif byte_fallback and (m := _BYTE_PIECE.match(piece)):
            data = bytes([int(m.group(1), 16)])
        else:
            data = piece.replace(_METASPACE, " ").encode("utf-8")
        if data:
            table[token_id] = data
        else:
            special.add(token_id)
    for e in eos:
        table[e] = None
        special.add(e)
    return TokenizerVocabulary(
        tuple(table),
        frozenset(eos),
        frozenset(special),
        "byte-level" if style == "byte-level" else "metaspace",
    )


def _as_vocabulary(tokenizer: Any, eos_token_id: int | Iterable[int] | None) -> VocabularyLike:
    if hasattr(tokenizer, "token_bytes") and hasattr(tokenizer, "eos_ids"):
        if eos_token_id is not None:
            raise VocabularyError(
                type(tokenizer).__name__, "no eos_token_id= with a Vocabulary (it names its EOS ids)"
            )
        if not list(tokenizer.eos_ids):
            raise VocabularyError(type(tokenizer).__name__, "a vocabulary with at least one EOS id")
        return tokenizer
    return vocabulary_from_tokenizer(tokenizer, eos_token_id)


# -- the processor ---------------------------------------------------------------------------------

RowStatus = Literal["live", "ended", "dead"]

#: Rows kept between calls (keys of every length: assisted decoding goes back and forth), LRU.
_KEPT_ROWS = 4_096


@dataclass(frozen=True)
class Row:
    """One generated sequence as the processor sees it: its generated ids (``input_ids[row, P:]``),
    the reference's matcher after them, and whether it is live, ended (EOS accepted) or dead (an id
    the mask had removed was appended anyway)."""

    ids: tuple[int, ...]
    matcher: Matcher
    status: RowStatus

    def child(self, token_id: int) -> Row:
        ids = (*self.ids, token_id)
        if self.status != "live":
            return Row(ids, self.matcher, self.status)
        m = self.matcher.fork()
        outcome = m.accept(token_id)
        if not isinstance(outcome, Accepted):
            return Row(ids, self.matcher, "dead")
        return Row(ids, m, "ended" if outcome.terminated else "live")


class ReferenceLogitsProcessor(_Base):
    """A ``transformers.LogitsProcessor`` that leaves finite only the tokens the reference allows.

    ``spec`` is a ``JsonSchema``, ``Regex``, ``Gbnf``, ``Choice``, ``Lark`` or ``StructuralTag`` (or a
    compiled :class:`Grammar`); ``tokenizer`` a transformers tokenizer or a ``VocabularyLike``
    (``tokenizers_matrix.Vocabulary``). ``eos_token_id`` overrides the tokenizer's EOS (give
    ``generate`` the same ids: :attr:`eos_token_ids`).

    ``max_new_tokens`` (give ``generate`` the same number) makes every row finish within it: a token
    is allowed only if the language can still be finished, EOS included, within the tokens left
    (``refdecoder._budget``: the exact shortest completion in tokens of this vocabulary). A spec whose
    shortest output does not fit raises :class:`~refdecoder.errors.TokenBudgetError` here, before
    generation. ``stats`` counts calls, rows replayed from the start, ended and dead rows.
    """

    def __init__(
        self,
        spec: Spec | Grammar,
        tokenizer: Any,
        *,
        eos_token_id: int | Iterable[int] | None = None,
        limits: Limits | None = None,
        max_new_tokens: int | None = None,
    ) -> None:
        if max_new_tokens is not None and (
            not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1
        ):
            raise SpecError("bad max_new_tokens", repr(max_new_tokens), "a positive int or None")
        grammar = spec if isinstance(spec, Grammar) else compile_spec(spec, limits)
        self.vocabulary = _as_vocabulary(tokenizer, eos_token_id)
        self.token_grammar = TokenGrammar(grammar, self.vocabulary)
        self.max_new_tokens = max_new_tokens
        self.distances: TokenDistances | None = None
        if max_new_tokens is not None:
            self.distances = budget_distances(self.token_grammar, max_new_tokens)
        self.eos_token_ids: list[int] = sorted(int(e) for e in self.vocabulary.eos_ids)
        self._eos_mask = pack_ids(self.eos_token_ids, self.token_grammar.vocab_size)
        self._prompt_len: int | None = None
        self._rows: OrderedDict[tuple[int, ...], Row] = OrderedDict()
        self._prompts: set[tuple[int, ...]] = set()
        self.stats = {"calls": 0, "replayed": 0, "ended": 0, "dead": 0}

    def reset(self) -> None:
        """Forget the current generation (the next call starts a new one)."""
        self._prompt_len = None
        self._rows = OrderedDict()
        self._prompts = set()

    def _row(self, key: tuple[int, ...]) -> Row:
        """The row of generated ids ``key``: a kept one, or its nearest kept ancestor advanced."""
        row = self._rows.get(key)
        if row is not None:
            self._rows.move_to_end(key)
            return row
        cut = len(key) - 1
        while cut > 0 and key[:cut] not in self._rows:
            cut -= 1
        if cut > 0:
            row = self._rows[key[:cut]]
        else:
            row = Row((), Matcher(self.token_grammar), "live")
        if cut < len(key) - 1:
            self.stats["replayed"] += 1
        for token_id in key[cut:]:
            parent = row
            row = row.child(token_id)
            if row.status != parent.status:
                self.stats[row.status] += 1
            self._keep(row)
        return row

    def _keep(self, row: Row) -> None:
        self._rows[row.ids] = row
        if len(self._rows) > _KEPT_ROWS:
            self._rows.popitem(last=False)

    def rows_for(self, input_ids: torch.Tensor) -> list[Row]:
        """The row of each line of ``input_ids``.

        A call continues the current generation when every line starts with one of its prompts and is
        at least that long — one more id (``generate``), several (assisted and speculative decoding
        score each candidate position: lengths go up by one, then back to the first rejected one), or
        beams reordered; otherwise it starts a new one, whose prompts are these lines.
        """
        if input_ids.dim() != 2:
            raise SpecError("bad input_ids", f"shape {tuple(input_ids.shape)}", "a [rows, length] tensor")
        length = int(input_ids.shape[1])
        lines = [tuple(int(t) for t in r) for r in input_ids.tolist()]
        if (
            self._prompt_len is None
            or length < self._prompt_len
            or any(r[: self._prompt_len] not in self._prompts for r in lines)
        ):
            self.reset()
            self._prompt_len = length
            self._prompts = set(lines)
        return [self._row(r[self._prompt_len :]) for r in lines]

    def bitmask(self, rows: Sequence[Row]) -> np.ndarray:
        """int32 ``[len(rows), W]``: each live row's mask (within the budget left, with
        ``max_new_tokens``), EOS alone for ended and dead rows."""
        out = np.empty((len(rows), self.token_grammar.num_words), dtype=np.int32)
        for r, row in enumerate(rows):
            if row.status != "live":
                out[r] = self._eos_mask
            elif self.distances is not None and self.max_new_tokens is not None:
                left = self.max_new_tokens - len(row.ids)
                out[r] = self.distances.budget_mask(row.matcher.state, left) if left >= 1 else self._eos_mask
            else:
                out[r] = row.matcher.mask()
        return out

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.stats["calls"] += 1
        if scores.dim() != 2 or scores.shape[0] != input_ids.shape[0]:
            raise SpecError(
                "bad scores",
                f"shape {tuple(scores.shape)}",
                f"[{input_ids.shape[0]}, vocabulary] like input_ids' rows",
            )
        rows = self.rows_for(input_ids)
        masked = scores.clone()
        apply_token_bitmask(masked, torch.from_numpy(self.bitmask(rows)))
        alive = (masked > float("-inf")).any(dim=1).tolist()
        for r, row in enumerate(rows):
            if row.status == "live" and not alive[r]:
                raise NoValidToken(r, len(row.ids), row.matcher.state.id)
        return masked
