"""The :class:`Vocabulary` value (docs/design.md §3): token ids -> bytes, plus special and EOS ids.

A vocabulary is a value (docs/style.md §1): frozen, compared and hashed by its fingerprint, its invariants
checked once when it is built. The tokenizer library behind it (its :class:`Codec`) answers
``encode`` and the library's own decoding; it is not part of the value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol, get_args

from refdecoder import SpecialView, special_token_bytes, split_special_tokens
from refdecoder.errors import VocabularyError

from ._index import TokenIndex

Kind = Literal["byte-level-bpe", "sentencepiece-bpe", "sentencepiece-unigram", "tiktoken", "byte"]
KINDS: tuple[str, ...] = get_args(Kind)

_FINGERPRINT_VERSION = b"maskcert-vocabulary-v1\0"


class Codec(Protocol):
    """The tokenizer library behind a vocabulary.

    ``encode`` is the library's canonical encoding (no BOS, special-token strings in the text are
    text); ``normalize`` returns the text whose UTF-8 bytes that encoding spells; ``can_encode`` says
    whether a character is encoded by text tokens at all (not by an unknown token);
    ``library_decode`` is the library's own decoding to ``str``, special ids skipped.
    """

    def encode(self, text: str) -> list[int]: ...

    def normalize(self, text: str) -> str: ...

    def can_encode(self, char: str) -> bool: ...

    def library_decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Token ids -> bytes (``None`` for special ids), with the EOS and special ids and a fingerprint.

    Equality and hashing go by :attr:`fingerprint` (sha256 over kind, token bytes, special, EOS and
    byte-fallback ids); ``name``, ``special_names`` and ``codec`` are labels and machinery, not value.
    Without a codec (a hand-built vocabulary), ``encode`` is the segmentation with the fewest tokens.
    """

    token_bytes: tuple[bytes | None, ...]
    eos_ids: frozenset[int]
    special_ids: frozenset[int]
    kind: Kind
    name: str = ""
    special_names: tuple[tuple[int, str], ...] = ()  # (id, name) for special ids that have one
    byte_fallback_ids: frozenset[int] = frozenset()  # ids of `<0xNN>` pieces
    codec: Codec | None = field(default=None, repr=False)
    # For a special-token view (:attr:`special_token_view`): the vocabulary it views, which engines see
    # and findings name. A label, not value.
    viewed: Vocabulary | None = field(default=None, repr=False)
    fingerprint: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "token_bytes", tuple(self.token_bytes))
        set_(self, "eos_ids", frozenset(self.eos_ids))
        set_(self, "special_ids", frozenset(self.special_ids))
        set_(self, "byte_fallback_ids", frozenset(self.byte_fallback_ids))
        set_(self, "special_names", tuple(sorted(dict(self.special_names).items())))
        self._check()
        set_(self, "fingerprint", self._digest())

    def _fail(self, expected: str, detail: str = "") -> VocabularyError:
        return VocabularyError(self.name or "<vocabulary>", expected, detail)

    def _check(self) -> None:
        if self.kind not in KINDS:
            raise self._fail(f"kind in {KINDS}", f"got {self.kind!r}")
        size = len(self.token_bytes)
        for ids, what in (
            (self.special_ids, "special"),
            (self.eos_ids, "EOS"),
            (self.byte_fallback_ids, "byte-fallback"),
        ):
            bad = sorted(i for i in ids if not 0 <= i < size)
            if bad:
                raise self._fail(f"{what} ids in [0, {size})", f"got {bad[:5]}")
        if not self.eos_ids:
            raise self._fail("at least one EOS id")
        if not self.eos_ids <= self.special_ids:
            raise self._fail(
                "EOS ids to be special", f"not special: {sorted(self.eos_ids - self.special_ids)[:5]}"
            )
        for token_id, data in enumerate(self.token_bytes):
            if (data is None) != (token_id in self.special_ids):
                detail = "special but has bytes" if data is not None else "has no bytes but is not special"
                raise self._fail("bytes for exactly the non-special ids", f"id {token_id} {detail}")
            if data is not None and (type(data) is not bytes or not data):
                raise self._fail("non-empty bytes for every text token", f"id {token_id}: {data!r}")
        for token_id in self.byte_fallback_ids:
            data = self.token_bytes[token_id]
            if data is None or len(data) != 1:
                raise self._fail("a single byte for each byte-fallback id", f"id {token_id}: {data!r}")
        unnamed = [i for i, _ in self.special_names if i not in self.special_ids]
        if unnamed:
            raise self._fail("names only for special ids", f"ids {unnamed[:5]}")

    def _digest(self) -> str:
        h = hashlib.sha256(_FINGERPRINT_VERSION)
        h.update(self.kind.encode() + b"\0")
        h.update(len(self.token_bytes).to_bytes(8, "big"))
        h.update(
            b"".join(
                b"\xff" if data is None else len(data).to_bytes(4, "big") + data for data in self.token_bytes
            )
        )
        for ids in (self.special_ids, self.eos_ids, self.byte_fallback_ids):
            h.update(b"\0" + b"".join(i.to_bytes(8, "big") for i in sorted(ids)))
        return h.hexdigest()

    # -- value semantics -------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return int(self.fingerprint[:16], 16)

    def __len__(self) -> int:
        """The size of the id space (text and special ids)."""
        return len(self.token_bytes)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state.pop("index", None)  # rebuilt on demand
        state.pop("special_token_view", None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)

    # -- ids and bytes ---------------------------------------------------------------------------

    def is_special(self, token_id: int) -> bool:
        return token_id in self.special_ids

    def is_byte_fallback(self, token_id: int) -> bool:
        """True for SentencePiece-style ``<0xNN>`` byte tokens."""
        return token_id in self.byte_fallback_ids

    def special_name(self, token_id: int) -> str | None:
        return self._names.get(token_id)

    @cached_property
    def _names(self) -> dict[int, str]:
        return dict(self.special_names)

    @cached_property
    def eos_names(self) -> tuple[str, ...]:
        return tuple(self._names.get(i, f"<special {i}>") for i in sorted(self.eos_ids))

    def token_repr(self, token_id: int) -> str:
        """``17 b'ab'`` or ``2 </s>``: the id and its bytes (or its special name), for messages."""
        self._check_id(token_id)
        data = self.token_bytes[token_id]
        if data is None:
            return f"{token_id} {self._names.get(token_id, '<special>')}"
        return f"{token_id} {data!r}"

    def text_tokens(self) -> Iterator[tuple[int, bytes]]:
        """``(id, bytes)`` for every non-special id, ascending."""
        for token_id, data in enumerate(self.token_bytes):
            if data is not None:
                yield token_id, data

    @cached_property
    def text_ids(self) -> tuple[int, ...]:
        return tuple(i for i, data in enumerate(self.token_bytes) if data is not None)

    @cached_property
    def max_token_len(self) -> int:
        return max((len(data) for data in self.token_bytes if data is not None), default=0)

    @cached_property
    def index(self) -> TokenIndex:
        """Bytes -> ids prefix index, built on first use (well under a second at 129k)."""
        return TokenIndex.build(self.token_bytes)

    # -- special tokens as a grammar that names them reads them ------------------------------------

    @property
    def special_tokens_lifted(self) -> bool:
        """This is a :attr:`special_token_view` (refdecoder's ``special_view`` does not lift it again)."""
        return self.viewed is not None

    @property
    def original(self) -> Vocabulary:
        """The vocabulary engines see: this one, or the one a special-token view views."""
        return self.viewed if self.viewed is not None else self

    @cached_property
    def special_token_view(self) -> Vocabulary:
        """This vocabulary as a grammar that names special tokens reads it (docs/design.md §2 "Special
        tokens", ``refdecoder``'s ``SpecialView``): the same ids, each special id that is not EOS a text
        token spelled by its encoding ``refdecoder.special_token_bytes(id)``, and each ordinary token
        holding a raw 0xFF byte special (never text in such a grammar). EOS ids stay EOS.

        Byte strings and token ids then convert through the usual machinery (``decode``, ``index``,
        segmentations) with a special token in the bytes as its encoding; :meth:`canonical_ids` is the
        tokenizer's own encoding of such bytes. ``original`` is this vocabulary."""
        if self.viewed is not None:
            return self
        view = SpecialView(self)  # the one lifting rule (refdecoder's token masks use it too)
        raw_ff = view.special_ids  # ordinary tokens holding a raw 0xFF: never text there
        return Vocabulary(
            view.token_bytes,
            self.eos_ids,
            self.eos_ids | raw_ff,
            self.kind,
            self.name,
            tuple((i, n) for i, n in self.special_names if i in self.eos_ids),
            self.byte_fallback_ids - raw_ff,
            self.codec,
            viewed=self,
        )

    def canonical_ids(self, data: bytes) -> tuple[int, ...] | None:
        """The tokenizer's own encoding of ``data`` when it spells ``data`` exactly, else None (text the
        tokenizer normalizes, bytes that are not UTF-8). Special-token encodings in ``data``
        (``refdecoder.special_token_bytes``) are their ids, where this vocabulary spells them so (a
        :attr:`special_token_view`), and the text between them is encoded piece by piece — as a
        tokenizer splits its input on special tokens before encoding the text."""
        ids: list[int] = []
        for piece in split_special_tokens(data) if 0xFF in data else [data]:
            if isinstance(piece, int):
                if not (0 <= piece < len(self.token_bytes)) or self.token_bytes[piece] != special_token_bytes(
                    piece
                ):
                    return None
                ids.append(piece)
                continue
            try:
                text = piece.decode("utf-8")
                encoded = self.encode(text)
            except Exception:  # noqa: BLE001 - any tokenizer failure means "no canonical encoding"
                return None
            if self.decode(encoded) != piece:
                return None
            ids += encoded
        return tuple(ids)

    def _check_id(self, token_id: int) -> None:
        if not 0 <= token_id < len(self.token_bytes):
            raise self._fail(f"token ids in [0, {len(self.token_bytes)})", f"got {token_id}")

    def decode(self, ids: Iterable[int]) -> bytes:
        """The concatenated bytes of ``ids``; special ids contribute nothing."""
        parts: list[bytes] = []
        table = self.token_bytes
        for token_id in ids:
            self._check_id(token_id)
            data = table[token_id]
            if data is not None:
                parts.append(data)
        return b"".join(parts)

    # -- the tokenizer behind it -----------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """The tokenizer's canonical encoding of ``text``: no BOS, special-token strings are text."""
        if self.codec is not None:
            return self.codec.encode(text)
        ids = self.index.fewest_tokens(text.encode("utf-8"))
        if ids is None:
            raise self._fail("text made of this vocabulary's tokens", f"cannot segment {text!r}")
        return ids

    def normalize(self, text: str) -> str:
        """The text whose UTF-8 bytes ``decode(encode(text))`` is (for text that ``can_encode``).

        Identity except where the tokenizer normalizes: NFKC in some tokenizer.json files, and
        SentencePiece / Metaspace vocabularies, where a literal ``▁`` (U+2581) in the text means space.
        """
        return text if self.codec is None else self.codec.normalize(text)

    def can_encode(self, char: str) -> bool:
        """Whether ``encode`` represents ``char`` by text tokens (not by an unknown token)."""
        if self.codec is not None:
            return self.codec.can_encode(char)
        return self.index.reach(char.encode("utf-8"))[0]

    def library_decode(self, ids: Sequence[int]) -> str:
        """The tokenizer library's own decoding (special ids skipped; invalid UTF-8 replaced)."""
        if self.codec is not None:
            return self.codec.library_decode(ids)
        return self.decode(ids).decode("utf-8", errors="replace")


def from_tokens(
    tokens: Sequence[bytes | str],
    *,
    eos: str = "</s>",
    name: str = "tiny",
    kind: Kind = "byte-level-bpe",
) -> Vocabulary:
    """A hand-built vocabulary: ``tokens`` as ids 0..n-1, then one special EOS id named ``eos``.

    Its ``encode`` is the segmentation with the fewest tokens (docs/style.md §12: tiny vocabularies make
    tests readable).
    """
    table: list[bytes | None] = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in tokens]
    eos_id = len(table)
    table.append(None)
    return Vocabulary(
        token_bytes=tuple(table),
        eos_ids=frozenset({eos_id}),
        special_ids=frozenset({eos_id}),
        kind=kind,
        name=name,
        special_names=((eos_id, eos),),
    )


def byte_vocabulary() -> Vocabulary:
    """256 single-byte tokens (id = byte value) and EOS ``</s>`` at id 256."""
    return from_tokens([bytes([b]) for b in range(256)], name="byte", kind="byte")
