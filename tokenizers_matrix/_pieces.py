"""How tokenizer files spell bytes: GPT-2's byte<->unicode table, SentencePiece's ``▁`` and ``<0xNN>``."""

from __future__ import annotations

import re
from functools import lru_cache

METASPACE = "\u2581"  # "▁": SentencePiece's (and HF Metaspace's) spelling of a space

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")


def byte_piece_value(piece: str) -> int | None:
    """255 for ``<0xFF>``; None if ``piece`` is not a byte-fallback piece."""
    match = _BYTE_PIECE.match(piece)
    return int(match.group(1), 16) if match else None


@lru_cache(maxsize=1)
def byte_level_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` table, inverted: printable Latin-1 bytes stand for themselves,
    the other 68 bytes for U+0100.. in byte order (``Ġ`` = space, ``Ċ`` = newline)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(0x100 + extra)] = b
            extra += 1
    return table


@lru_cache(maxsize=1)
def _byte_level_translation() -> tuple[dict[int, int], re.Pattern[str]]:
    table = byte_level_decoder()
    outside = "".join(re.escape(c) for c in sorted(table))
    return {ord(c): b for c, b in table.items()}, re.compile(f"[^{outside}]")


def byte_level_bytes(token: str) -> bytes:
    """The bytes a byte-level BPE token stands for. As Hugging Face's ByteLevel decoder does, a token
    with a character outside the table (an added token such as ``<｜User｜>``) is its own UTF-8."""
    translation, outside = _byte_level_translation()
    if outside.search(token):
        return token.encode("utf-8")
    return token.translate(translation).encode("latin-1")


def metaspace_bytes(piece: str) -> bytes:
    return piece.replace(METASPACE, " ").encode("utf-8")
