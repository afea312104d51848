"""What every third-party adapter needs the same way: versions, per-vocabulary caches, the checks at
the edge of ``accept`` and ``rollback`` (one wording for every backend's typed outcomes)."""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Any, Generic, TypeVar

import numpy as np

from props.contract.backend import Accepted, Rejected, TokenOutcome
from refdecoder.bitmask import num_words, pack_ids
from refdecoder.errors import MaskcertError, StateError
from tokenizers_matrix import Vocabulary

__all__ = [
    "dist_version",
    "PerVocabulary",
    "NativeMatcher",
    "HistoryMatcher",
    "mask_of",
    "reject_at_edge",
    "check_rollback",
    "keyword_default",
    "UnsupportedOption",
]

T = TypeVar("T")
N = TypeVar("N")
H = TypeVar("H", bound="HistoryMatcher")


def dist_version(dist: str, fallback: str = "unknown") -> str:
    """The installed distribution's version (``fallback`` in a source checkout)."""
    try:
        return _dist_version(dist)
    except PackageNotFoundError:  # pragma: no cover - a source checkout
        return fallback


_ABSENT = object()


def keyword_default(fn: Callable[..., Any], name: str) -> Any:
    """The default of ``fn``'s parameter ``name``; a sentinel object when ``fn`` has no such parameter
    or no Python signature (feature detection across engine releases, never by version string)."""
    try:
        param = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return _ABSENT
    return _ABSENT if param is None or param.default is inspect.Parameter.empty else param.default


class UnsupportedOption(MaskcertError, ValueError):
    """An adapter option the installed engine release has no API for (a usage error: the option or
    the release must change)."""

    def __init__(self, engine: str, version: str, option: str, detail: str) -> None:
        self.engine = engine
        self.version = version
        self.option = option
        self.detail = detail
        super().__init__(
            f"{engine} {version} cannot honour the adapter option {option!r}: {detail}; expected a release "
            f"that has it, or the option left at its default"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # crosses the worker's pipe
        return (type(self), (self.engine, self.version, self.option, self.detail))


class PerVocabulary(Generic[T]):
    """What a backend builds once per vocabulary (tokenizer info, compilers), LRU by fingerprint."""

    def __init__(self, build: Callable[[Any], T], capacity: int) -> None:
        self._build = build
        self._capacity = capacity
        self._items: OrderedDict[str, T] = OrderedDict()

    def get(self, vocabulary: Vocabulary) -> T:
        key = vocabulary.fingerprint
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            return hit
        built = self._build(vocabulary)
        self._items[key] = built
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)
        return built


def reject_at_edge(
    token_id: int, vocab_size: int, token_bytes: tuple[bytes | None, ...], state_id: str, terminated: bool
) -> Rejected | None:
    """The rejections every adapter gives before asking its backend: an id outside the vocabulary,
    or any token after EOS."""
    if not 0 <= token_id < vocab_size:
        return Rejected(token_id, None, state_id, f"token id out of range [0, {vocab_size})")
    if terminated:
        return Rejected(token_id, token_bytes[token_id], state_id, "the sequence already ended with EOS")
    return None


def check_rollback(k: object, total: int) -> None:
    """``StateError`` unless ``0 <= k <= total`` (the tokens accepted so far, EOS included)."""
    if not isinstance(k, int) or k < 0 or k > total:
        raise StateError(f"rollback({k!r}): can undo between 0 and {total} tokens")


class NativeMatcher(Generic[N]):
    """What an adapter's matcher over a native matcher object holds: the compiled handle, the
    backend's own matcher (``native``, for reproducers and tests) and the ids accepted so far;
    ``state_prefix`` names the backend in state ids (``xgrammar@3``)."""

    state_prefix = ""

    def __init__(self, handle: Any, native: N, history: list[int]) -> None:
        self._h = handle
        self._m = native
        self._ids = history

    @property
    def native(self) -> N:
        return self._m

    def accepted_ids(self) -> list[int]:
        return list(self._ids)

    def _state_id(self) -> str:
        return f"{self.state_prefix}@{len(self._ids)}"


def mask_of(allowed: Any, vocab_size: int, terminated: bool) -> np.ndarray:
    """xgrammar's bitmask layout of the ``allowed`` ids (anything ``np.asarray`` reads), all zeros once
    the sequence has ended with EOS (``allowed`` is then not consulted: pass a callable to defer it)."""
    if terminated:
        return np.zeros(num_words(vocab_size), dtype=np.int32)
    ids = allowed() if callable(allowed) else allowed
    return pack_ids(np.asarray(ids, dtype=np.int64), vocab_size)


class HistoryMatcher:
    """A matcher over an engine that answers for a whole id sequence (lm-format-enforcer, SynCode):
    its state is the ids accepted so far, so ``fork()`` copies them and ``rollback(k)`` truncates them,
    exactly. Subclasses give ``allowed_ids()`` (the engine's allowed ids after the ids so far, never
    asked past EOS), ``state_prefix`` (``lmfe@3``) and ``masked_reason`` (why ``accept`` rejects a token
    the engine does not allow). The handle has ``vocab_size``, ``eos_ids`` and ``token_bytes``."""

    state_prefix = ""
    masked_reason = "the engine does not allow it"

    def __init__(self, handle: Any, history: list[int]) -> None:
        self._h = handle
        self._ids = history  # ends with the EOS id once terminated

    def allowed_ids(self) -> Sequence[int]:
        raise NotImplementedError

    def accepted_ids(self) -> list[int]:
        return list(self._ids)

    def _state_id(self) -> str:
        return f"{self.state_prefix}@{len(self._ids)}"

    def _terminated(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._h.eos_ids

    def mask(self) -> np.ndarray:
        return mask_of(self.allowed_ids, self._h.vocab_size, self._terminated())

    def accept(self, token_id: int) -> TokenOutcome:
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._terminated()
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        if token_id not in set(self.allowed_ids()):
            return Rejected(token_id, data, self._state_id(), self.masked_reason)
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), token_id in self._h.eos_ids)

    def is_accepting(self) -> bool:
        return not self._terminated() and not self._h.eos_ids.isdisjoint(self.allowed_ids())

    def is_terminated(self) -> bool:
        return self._terminated()

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        del self._ids[len(self._ids) - k :]

    def fork(self: H) -> H:
        return type(self)(self._h, list(self._ids))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_accepted={len(self._ids)}, terminated={self._terminated()})"
