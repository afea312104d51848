"""The backend contract (docs/style.md §7, §14): what an engine adapter offers to certification and serving.

An adapter gives its backend *value semantics*: ``fork()`` returns an independent matcher, ``accept``
never leaves a half-applied state behind (a backend whose reject is sticky is forked before probing),
and every outcome is typed — ``Accepted | Rejected`` for tokens, ``Compiled | Refused`` for specs. Any
other exception escaping backend code is a finding (``crash``), never swallowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np

from refdecoder import Accepted, JsonProfile, Rejected, Spec
from tokenizers_matrix import Vocabulary

__all__ = [
    "Accepted",
    "Rejected",
    "TokenOutcome",
    "Compiled",
    "Refused",
    "CompileOutcome",
    "DeclaredProfile",
    "Backend",
    "BackendMatcher",
    "PartFailed",
]

TokenOutcome = Union[Accepted, Rejected]


@dataclass(frozen=True)
class DeclaredProfile:
    """What a backend claims to implement, so the reference computes the ideal mask for that language.

    ``json``: the ``JsonProfile`` it follows; ``canonical_tokenization_only``: it only promises to
    accept the tokenizer's own encoding of a valid string (so only ``completeness_canonical`` applies);
    ``notes``: where in the backend's documentation each choice comes from.
    """

    json: JsonProfile = field(default_factory=JsonProfile)
    canonical_tokenization_only: bool = False
    jump_forward_prefix_ok: bool = False
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compiled:
    handle: Any
    compile_ms: float = 0.0


@dataclass(frozen=True)
class Refused:
    """A spec the backend will not compile: why, the keyword it names and where in the spec (as
    :class:`refdecoder.Unsupported` has them; ``""`` when the backend does not say)."""

    reason: str
    keyword: str = ""
    where: str = ""


CompileOutcome = Union[Compiled, Refused]


@runtime_checkable
class BackendMatcher(Protocol):
    def mask(self) -> np.ndarray: ...

    def accept(self, token_id: int) -> TokenOutcome: ...

    def is_accepting(self) -> bool: ...

    def is_terminated(self) -> bool: ...

    def rollback(self, k: int) -> None: ...

    def fork(self) -> BackendMatcher: ...

    # Optional, probed with getattr by callers: ``forced_bytes() -> bytes`` (jump-forward),
    # ``validate(ids) -> int`` (longest valid prefix, no state change: speculative decoding), and
    # ``fork_accept(token_id) -> (matcher, outcome)``: ``fork()`` then ``accept`` on the fork, the
    # same engine calls in one go (a worker's single round trip), raising :class:`PartFailed`;
    # ``accept_mask(token_id) -> (outcome, (mask, ms) | None)``: ``accept``, then ``mask()`` (timed)
    # unless the outcome is a rejection; ``fork_accept_mask`` the same on a fork.


class PartFailed(Exception):
    """One part of a combined call (``fork_accept``, ``accept_mask``, ``fork_accept_mask``, or a
    worker's segmentation search) raised ``error``; ``operation`` names the part (``"fork"``,
    ``"accept"`` or ``"mask"``), as if the parts had been called one by one. The parts after it did
    not reach the engine; ``calls``, when known, counts the engine calls made, the failed one
    included."""

    def __init__(self, operation: str, error: Exception, calls: int = 0) -> None:
        super().__init__(f"{operation}: {type(error).__name__}: {error}")
        self.operation = operation
        self.error = error
        self.calls = calls


@runtime_checkable
class Backend(Protocol):
    name: str
    version: str
    profile: DeclaredProfile

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome: ...

    def matcher(self, compiled: Compiled) -> BackendMatcher: ...
