"""The corpus error (STYLE §6)."""

from __future__ import annotations

from refdecoder.errors import MaskcertError

__all__ = ["CorpusError"]


class CorpusError(MaskcertError, ValueError):
    """A corpus name, file or case that cannot be read: ``what`` names the input, ``expected`` what
    would have been valid, ``detail`` what was found instead."""

    def __init__(self, what: str, expected: str, detail: str = "") -> None:
        self.what = what
        self.expected = expected
        self.detail = detail
        tail = f" ({detail})" if detail else ""
        super().__init__(f"{what}: expected {expected}{tail}")
