"""The corpus error (docs/style.md §6)."""

from __future__ import annotations

from refdecoder.errors import InputError

__all__ = ["CorpusError"]


class CorpusError(InputError):
    """A corpus name, file or case that cannot be read: ``what`` (also ``path``) names the input,
    ``expected`` what would have been valid, ``detail`` what was found instead."""

    @property
    def what(self) -> str:
        return self.path
