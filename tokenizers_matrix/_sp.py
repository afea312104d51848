"""SentencePiece ``.model`` files (BPE or Unigram, byte fallback on or off).

Pieces spell a space as ``▁``; control, unknown and unused pieces are special; with byte fallback the
``<0xNN>`` pieces (type BYTE) are that single byte.

**Normalization.** Out of the box SentencePiece normalizes before it segments: it may NFKC-map the
text (``nmt_nfkc`` rules), collapse runs of spaces, strip leading/trailing ones, and prepend a dummy
``▁`` (``add_dummy_prefix``), so ``decode(encode(s))`` is not ``s``. ``encode`` here is SentencePiece
run on a copy of the model whose normalizer spec is replaced by the identity: no rules, no dummy
prefix, no whitespace removal; spaces still become ``▁``. That is the segmentation a model sees for
text in the middle of a stream, and it is byte-faithful, with two exceptions the vocabulary reports:
a literal ``▁`` in the text is read as a space (``normalize`` maps it), and without byte fallback a
character that is not a piece becomes ``<unk>`` (``can_encode`` is false for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refdecoder.errors import VocabularyError

from . import _protobuf as pb
from ._common import EosSpec, resolve_eos
from ._pieces import METASPACE, byte_piece_value, metaspace_bytes
from ._vocab import Kind, Vocabulary

EXPECTED = "a SentencePiece model (a ModelProto protobuf with pieces)"


def identity_normalizer(model: bytes) -> tuple[bytes, list[pb.Record]]:
    """``model`` with an identity normalizer spec, and the trainer spec's records.

    Raises :class:`~._protobuf.WireError` if ``model`` is not a ModelProto.
    """
    records = pb.parse(model)
    if not any(r.field == pb.MODEL_PIECES and r.wire_type == pb.LEN for r in records):
        raise pb.WireError("no pieces (field 1)")
    for r in records:
        if (
            r.field in (pb.MODEL_PIECES, pb.MODEL_TRAINER_SPEC, pb.MODEL_NORMALIZER_SPEC)
            and r.wire_type != pb.LEN
        ):
            raise pb.WireError(f"field {r.field} is not a message")
    trainer_value = pb.last(records, pb.MODEL_TRAINER_SPEC)
    trainer = pb.parse(trainer_value) if isinstance(trainer_value, bytes) else []
    old_norm = pb.last(records, pb.MODEL_NORMALIZER_SPEC)
    escape = pb.last(pb.parse(old_norm), pb.NORM_ESCAPE_WS) if isinstance(old_norm, bytes) else None
    normalizer = pb.serialize(
        [
            pb.Record(pb.NORM_NAME, pb.LEN, b"identity"),
            pb.Record(pb.NORM_ADD_DUMMY_PREFIX, pb.VARINT, 0),
            pb.Record(pb.NORM_REMOVE_EXTRA_WS, pb.VARINT, 0),
            pb.Record(pb.NORM_ESCAPE_WS, pb.VARINT, 1 if escape is None else int(escape)),
        ]
    )
    kept = [r for r in records if r.field not in (pb.MODEL_NORMALIZER_SPEC, pb.MODEL_DENORMALIZER_SPEC)]
    return pb.serialize([*kept, pb.Record(pb.MODEL_NORMALIZER_SPEC, pb.LEN, normalizer)]), trainer


class SPCodec:
    """``sentencepiece.SentencePieceProcessor`` over the identity-normalized model; picklable."""

    def __init__(self, model: bytes, byte_fallback: bool, single_pieces: frozenset[str]) -> None:
        self._model = model
        self._byte_fallback = byte_fallback
        self._single = single_pieces
        self._sp: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sp": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def processor(self) -> Any:
        if self._sp is None:
            import sentencepiece

            self._sp = sentencepiece.SentencePieceProcessor(model_proto=self._model)
        return self._sp

    def encode(self, text: str) -> list[int]:
        return list(self.processor.encode(text, out_type=int))

    def normalize(self, text: str) -> str:
        return text.replace(METASPACE, " ")

    def can_encode(self, char: str) -> bool:
        return self._byte_fallback or all(
            c.replace(" ", METASPACE) in self._single for c in self.normalize(char)
        )

    def library_decode(self, ids: Sequence[int]) -> str:
        return str(self.processor.decode(list(ids)))


def load_sentencepiece(path: Path, eos: EosSpec, name: str) -> Vocabulary:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabularyError(str(path), EXPECTED, f"cannot read: {e.strerror or e}") from e
    try:
        model, trainer = identity_normalizer(data)
    except pb.WireError as e:
        raise VocabularyError(str(path), EXPECTED, f"not a protobuf ModelProto: {e}") from e
    model_type = pb.last(trainer, pb.TRAINER_MODEL_TYPE)
    model_type = pb.MODEL_TYPE_UNIGRAM if model_type is None else model_type
    if not isinstance(model_type, int):
        raise VocabularyError(str(path), EXPECTED, "trainer_spec.model_type is not an enum value")
    kinds: dict[object, Kind] = {
        pb.MODEL_TYPE_UNIGRAM: "sentencepiece-unigram",
        pb.MODEL_TYPE_BPE: "sentencepiece-bpe",
    }
    if model_type not in kinds:
        raise VocabularyError(
            str(path), EXPECTED, f"model_type {model_type} (word/char models are not supported)"
        )
    try:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_proto=model)
    except Exception as e:  # sentencepiece reports malformed models as RuntimeError/OSError
        raise VocabularyError(str(path), EXPECTED, f"sentencepiece cannot load it: {e}") from e

    size = sp.get_piece_size()
    table: list[bytes | None] = [None] * size
    special: set[int] = set()
    names: dict[int, str] = {}
    fallback_ids: set[int] = set()
    ids_by_name: dict[str, int] = {}
    for token_id in range(size):
        piece = sp.id_to_piece(token_id)
        ids_by_name.setdefault(piece, token_id)
        if sp.is_control(token_id) or sp.is_unknown(token_id) or sp.is_unused(token_id):
            special.add(token_id)
            names[token_id] = piece
        elif sp.is_byte(token_id):
            value = byte_piece_value(piece)
            if value is None:
                raise VocabularyError(str(path), EXPECTED, f"byte piece {token_id} is {piece!r}, not <0xNN>")
            table[token_id] = bytes([value])
            fallback_ids.add(token_id)
        else:
            table[token_id] = metaspace_bytes(piece) or None
            if table[token_id] is None:
                special.add(token_id)
                names[token_id] = piece
    from_file: list[str | int] = [sp.eos_id()] if sp.eos_id() >= 0 else []
    eos_ids = resolve_eos(path, from_file, eos, ids_by_name, size, "the model's eos_id")
    for token_id in eos_ids:
        table[token_id] = None
        special.add(token_id)
        names.setdefault(token_id, sp.id_to_piece(token_id))
        fallback_ids.discard(token_id)

    single = frozenset(
        sp.id_to_piece(i)
        for i in range(size)
        if table[i] is not None and len(sp.id_to_piece(i)) == 1 and i not in fallback_ids
    )
    codec = SPCodec(model, bool(fallback_ids), single)
    codec._sp = sp
    return Vocabulary(
        token_bytes=tuple(table),
        eos_ids=eos_ids,
        special_ids=frozenset(special),
        kind=kinds[model_type],
        name=name,
        special_names=tuple(names.items()),
        byte_fallback_ids=frozenset(fallback_ids),
        codec=codec,
    )
