"""The grammar compile cache, the prefix (KV) cache and matcher snapshots (docs/design.md §5).

Compile cache: key = canonical spec fingerprint + backend name/version + vocabulary fingerprint +
profile options; bounded by (estimated) bytes with LRU eviction; hit/miss/eviction counters. Every
entry records the vocabulary it was compiled for, so a lookup can report what it served.

Prefix cache: per model, a KV store keyed by token-id prefixes; a lookup returns a fork of the KV of
the longest stored prefix.

Snapshots: a matcher state bound to the fingerprints of the grammar and vocabulary it came from;
restoring it anywhere else raises :class:`SnapshotMismatch`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from props.contract.backend import Compiled, Refused
from refdecoder import MaskcertError, Spec, SpecError

from ._errors import SnapshotMismatch
from ._models import KVHandle, Model

__all__ = [
    "CacheKey",
    "CacheEntry",
    "CompileCache",
    "PrefixCache",
    "MatcherSnapshot",
    "spec_fingerprint",
    "compile_with_budget",
]


def spec_fingerprint(spec: Spec) -> str:
    return hashlib.sha256(spec.canonical().encode()).hexdigest()


def _profile_key(backend: Any) -> str:
    profile = getattr(backend, "profile", None)
    json_profile = getattr(profile, "json", None)
    opts = json_profile.as_dict() if json_profile is not None else {}
    opts["canonical_tokenization_only"] = bool(getattr(profile, "canonical_tokenization_only", False))
    return json.dumps(opts, sort_keys=True)


@dataclass(frozen=True)
class CacheKey:
    spec: str
    backend: str
    version: str
    vocabulary: str  # "" when the (faulty) key leaves it out
    profile: str


@dataclass(frozen=True, eq=False)
class CacheEntry:
    key: CacheKey
    compiled: Compiled
    spec_fingerprint: str
    vocab_fingerprint: str  # provenance: the vocabulary this grammar was compiled for
    nbytes: int
    compile_ms: float


def compile_with_budget(backend: Any, spec: Spec, vocabulary: Any, budget_s: float) -> Compiled | Refused:
    """``backend.compile`` in a worker thread, refused when it runs past ``budget_s``.

    A compile that overruns is abandoned (its daemon thread finishes in the background; Python cannot
    kill a thread). Spec errors and backend exceptions become refusals with the reason.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["out"] = backend.compile(spec, vocabulary)
        except BaseException as e:  # noqa: BLE001 - reported as a refusal with its reason
            box["exc"] = e

    worker = threading.Thread(target=work, name="maskcert-compile", daemon=True)
    worker.start()
    worker.join(budget_s)
    if worker.is_alive():
        return Refused(f"compile exceeded its budget of {budget_s:g}s", "limit:compile_seconds")
    exc = box.get("exc")
    if exc is not None:
        if isinstance(exc, SpecError):
            return Refused(f"invalid spec: {exc}", "spec", getattr(exc, "where", ""))
        if isinstance(exc, MaskcertError):
            return Refused(str(exc), type(exc).__name__)
        return Refused(f"backend {getattr(backend, 'name', '?')} failed to compile: {exc!r}", "backend-error")
    out = box["out"]
    if not isinstance(out, (Compiled, Refused)):
        return Refused(
            f"backend returned {type(out).__name__}, expected Compiled or Refused", "backend-error"
        )
    return out


def _estimate_bytes(spec: Spec, vocabulary: Any) -> int:
    """A size estimate for the byte budget: backends do not report their memory."""
    return 4096 + 64 * len(spec.canonical()) + 4 * len(vocabulary)


class CompileCache:
    """LRU over compiled grammars, bounded by estimated bytes. Share one between engines."""

    def __init__(
        self, max_bytes: int = 64 << 20, size_of: Callable[[Spec, Any], int] = _estimate_bytes
    ) -> None:
        self.max_bytes = max_bytes
        self.size_of = size_of
        self._entries: OrderedDict[CacheKey, CacheEntry] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.refusals = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(spec: Spec, backend: Any, vocabulary: Any, *, include_vocabulary: bool = True) -> CacheKey:
        return CacheKey(
            spec_fingerprint(spec),
            str(getattr(backend, "name", type(backend).__name__)),
            str(getattr(backend, "version", "")),
            str(vocabulary.fingerprint) if include_vocabulary else "",
            _profile_key(backend),
        )

    def get_or_compile(
        self, spec: Spec, backend: Any, vocabulary: Any, *, budget_s: float, include_vocabulary: bool = True
    ) -> tuple[CacheEntry | Refused, bool, float]:
        """``(entry or refusal, hit, ms)``: a cached entry, or a compile within ``budget_s``."""
        t0 = time.perf_counter()
        key = self.key(spec, backend, vocabulary, include_vocabulary=include_vocabulary)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return hit, True, (time.perf_counter() - t0) * 1000
            self.misses += 1
        out = compile_with_budget(backend, spec, vocabulary, budget_s)
        ms = (time.perf_counter() - t0) * 1000
        if isinstance(out, Refused):
            self.refusals += 1
            return out, False, ms
        entry = CacheEntry(
            key, out, key.spec, str(vocabulary.fingerprint), self.size_of(spec, vocabulary), ms
        )
        with self._lock:
            self._entries[key] = entry
            self.bytes += entry.nbytes
            while self.bytes > self.max_bytes and len(self._entries) > 1:
                _, old = self._entries.popitem(last=False)
                self.bytes -= old.nbytes
                self.evictions += 1
        return entry, False, ms

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, float]:
        looked = self.hits + self.misses
        return {
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "refusals": self.refusals,
            "entries": len(self._entries),
            "bytes": self.bytes,
            "hit_rate": self.hits / looked if looked else 0.0,
        }


class PrefixCache:
    """A per-model KV store keyed by token-id prefixes, LRU by entry count."""

    def __init__(self, model: Model, max_entries: int = 256) -> None:
        self.model = model
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, ...], KVHandle] = OrderedDict()
        self.lookups = 0
        self.hits = 0
        self.tokens_requested = 0
        self.tokens_reused = 0

    def put(self, kv: KVHandle) -> None:
        key = tuple(kv.tokens)
        if not key:
            return
        self._entries[key] = self.model.fork_kv(kv)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def lookup(self, tokens: tuple[int, ...]) -> KVHandle | None:
        """A fork of the KV of the longest stored prefix of ``tokens`` (None if none is stored)."""
        self.lookups += 1
        self.tokens_requested += len(tokens)
        for n in range(len(tokens), 0, -1):
            kv = self._entries.get(tokens[:n])
            if kv is not None:
                self._entries.move_to_end(tokens[:n])
                self.hits += 1
                self.tokens_reused += n
                return self.model.fork_kv(kv)
        return None

    def stats(self) -> dict[str, float]:
        return {
            "lookups": self.lookups,
            "hits": self.hits,
            "entries": len(self._entries),
            "hit_rate": self.hits / self.lookups if self.lookups else 0.0,
            "token_reuse": self.tokens_reused / self.tokens_requested if self.tokens_requested else 0.0,
        }


@dataclass(frozen=True, eq=False)
class MatcherSnapshot:
    """A matcher's state, bound to the grammar (spec + backend) and vocabulary it belongs to.

    ``payload`` is a fork of the matcher: adapters give matchers value semantics, so a fork is a
    faithful serialized state for an in-process simulation.
    """

    spec_fingerprint: str
    vocab_fingerprint: str
    backend: str
    num_tokens: int
    payload: Any

    @classmethod
    def take(cls, matcher: Any, entry: CacheEntry, num_tokens: int) -> MatcherSnapshot:
        return cls(
            entry.spec_fingerprint, entry.vocab_fingerprint, entry.key.backend, num_tokens, matcher.fork()
        )

    def restore(self, spec_fp: str, vocab_fp: str, backend: str) -> Any:
        """A matcher in the saved state; :class:`SnapshotMismatch` for another grammar or vocabulary."""
        for name, mine, theirs in (
            ("spec fingerprint", self.spec_fingerprint, spec_fp),
            ("vocabulary fingerprint", self.vocab_fingerprint, vocab_fp),
            ("backend", self.backend, backend),
        ):
            if mine != theirs:
                raise SnapshotMismatch(name, theirs, mine)
        return self.payload.fork()
