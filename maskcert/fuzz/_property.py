"""The property contract shared with ``props.checks.properties``, the coverage counters, and target contexts.

A :class:`Property` is a name and a ``@given`` test *without settings*: the campaign applies the
``fuzz`` profile, its database, phases and seeds. The test raises
:class:`props.contract.findings.FindingFailure` when an invariant fails; any other exception is a bug in the
property (reported as a campaign error, not a finding). There is one ``Property`` class,
``props.checks.properties.Property``; a state machine property (``machine``) runs through its ``runner``.

Properties say what they exercised with :func:`cover` (``cover("keyword", "minLength")``,
``cover("invariant", "soundness")``); the live progress line and ``campaign.json`` show the counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from props.checks.properties import Property

__all__ = ["Property", "PropertyLike", "TargetContext", "cover", "coverage_snapshot"]


class PropertyLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def test(self) -> Callable[[], None]: ...


_LOCK = threading.Lock()
_COVERAGE: Counter[tuple[str, str]] = Counter()


def cover(kind: str, name: str) -> None:
    """Count one exercise of ``name`` (a keyword, an invariant, a construct) of ``kind``."""
    with _LOCK:
        _COVERAGE[(kind, name)] += 1


def coverage_snapshot() -> dict[str, dict[str, int]]:
    """``{kind: {name: count}}`` of everything this process has covered so far."""
    out: dict[str, dict[str, int]] = {}
    with _LOCK:
        for (kind, name), n in _COVERAGE.items():
            out.setdefault(kind, {})[name] = n
    return out


@dataclass
class TargetContext:
    """What a target factory gets: the backend's name, tokenizer names (``tokenizers_matrix`` names
    or tokenizer files; empty: the target's default), whether to isolate the backend in a worker
    process, and free-form ``options``. Vocabularies and the backend load lazily, once."""

    backend: str = "reference"
    tokenizers: tuple[str, ...] = ()
    isolate: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    _vocabularies: dict[tuple[str, ...], list[Any]] = field(default_factory=dict, repr=False)
    _backend: Any = field(default=None, repr=False)

    def vocabularies(self, default: tuple[str, ...] = ("byte", "bpe")) -> list[Any]:
        names = self.tokenizers or default
        if names not in self._vocabularies:
            import tokenizers_matrix

            self._vocabularies[names] = [tokenizers_matrix.resolve(n) for n in names]
        return self._vocabularies[names]

    def load_backend(self) -> Any:
        if self._backend is None:
            from maskcert.certification import resolve_backend

            # a cached release (NAME==VERSION) runs only in a worker, with its directory first on sys.path
            isolate = self.isolate or "==" in self.backend
            self._backend = resolve_backend(self.backend, isolate=isolate)
        return self._backend
