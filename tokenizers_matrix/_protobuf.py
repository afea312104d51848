"""Just enough of the protobuf wire format to read and patch a SentencePiece ``ModelProto``.

SentencePiece ships a generated ``sentencepiece_model_pb2`` that needs the ``protobuf`` package, which
maskcert does not depend on. The fields we touch are few, so we read the wire format directly
(https://protobuf.dev/programming-guides/encoding/): a message is a sequence of ``(tag, value)`` records,
``tag = field_number << 3 | wire_type``; wire type 0 is a varint, 1 eight bytes, 2 a length-delimited
byte string (strings and sub-messages), 5 four bytes. Field numbers below are those of
``sentencepiece_model.proto``.
"""

from __future__ import annotations

from dataclasses import dataclass

VARINT, I64, LEN, I32 = 0, 1, 2, 5

# ModelProto
MODEL_PIECES, MODEL_TRAINER_SPEC, MODEL_NORMALIZER_SPEC, MODEL_DENORMALIZER_SPEC = 1, 2, 3, 5
# TrainerSpec
TRAINER_MODEL_TYPE, TRAINER_BYTE_FALLBACK = 3, 35
MODEL_TYPE_UNIGRAM, MODEL_TYPE_BPE, MODEL_TYPE_WORD, MODEL_TYPE_CHAR = 1, 2, 3, 4
# NormalizerSpec
NORM_NAME = 1
NORM_CHARSMAP = 2
NORM_ADD_DUMMY_PREFIX = 3
NORM_REMOVE_EXTRA_WS = 4
NORM_ESCAPE_WS = 5
NORM_RULE_TSV = 6


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


@dataclass(frozen=True)
class Record:
    field: int
    wire_type: int
    value: int | bytes  # int for VARINT, bytes otherwise


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError(f"truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError(f"varint longer than 10 bytes at byte {pos}")


def parse(data: bytes) -> list[Record]:
    """Split a message into its records, in order; raise :class:`WireError` if it is malformed."""
    records: list[Record] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        field, wire_type = tag >> 3, tag & 7
        if field == 0:
            raise WireError(f"field number 0 at byte {pos}")
        value: int | bytes
        if wire_type == VARINT:
            value, pos = _varint(data, pos)
        elif wire_type in (I64, I32):
            size = 8 if wire_type == I64 else 4
            if pos + size > len(data):
                raise WireError(f"truncated fixed-width field {field} at byte {pos}")
            value, pos = data[pos : pos + size], pos + size
        elif wire_type == LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise WireError(f"field {field} claims {size} bytes, {len(data) - pos} left")
            value, pos = data[pos : pos + size], pos + size
        else:
            raise WireError(f"unsupported wire type {wire_type} for field {field} at byte {pos}")
        records.append(Record(field, wire_type, value))
    return records


def _encode_varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # two's complement, as protobuf encodes negative int32/int64
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def serialize(records: list[Record]) -> bytes:
    out = bytearray()
    for record in records:
        out += _encode_varint(record.field << 3 | record.wire_type)
        if record.wire_type == VARINT:
            assert isinstance(record.value, int)
            out += _encode_varint(record.value)
        else:
            assert isinstance(record.value, bytes)
            if record.wire_type == LEN:
                out += _encode_varint(len(record.value))
            out += record.value
    return bytes(out)


def last(records: list[Record], field: int) -> int | bytes | None:
    """The value of a non-repeated field (protobuf: the last occurrence wins), or None if absent."""
    found: int | bytes | None = None
    for record in records:
        if record.field == field:
            found = record.value
    return found
