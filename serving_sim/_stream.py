"""Streaming text: UTF-8 deltas that never split a character (docs/design.md §5).

Incomplete trailing bytes are held back until the character completes; bytes that can never
complete a character become U+FFFD exactly as ``bytes.decode("utf-8", "replace")`` would, so the
concatenated deltas always equal the decoded final output.
"""

from __future__ import annotations

import codecs

__all__ = ["TextStream"]


class TextStream:
    def __init__(self, split_characters: bool = False) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._split = split_characters  # fault: decode each token on its own

    def feed(self, data: bytes) -> str:
        if self._split:
            return data.decode("utf-8", errors="replace")
        return self._decoder.decode(data)

    def flush(self) -> str:
        return "" if self._split else self._decoder.decode(b"", final=True)
