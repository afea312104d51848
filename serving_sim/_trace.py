"""What the engine tells its observers: one frozen record per thing it did (the checker's input).

Records are facts about the engine's actions — the ids a sequence held, the mask row it sampled
under, the backend's verdict on a token — never judgements; the checker judges them against a
reference replay. ``origin`` names the last structural operation on the sequence before the
record (``new``, ``fork``, ``resume``, ``speculative``, ``step``), which is how a mismatch is
attributed to the fork, resume, rollback or speculative invariant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch

from ._request import Completion, Request

__all__ = [
    "TraceAdmit",
    "TraceCompile",
    "TraceMask",
    "TraceToken",
    "TraceSpec",
    "TraceDelta",
    "TraceFinish",
    "TraceCancel",
    "TraceEvent",
    "Observer",
]


@dataclass(frozen=True, eq=False)
class TraceAdmit:
    engine: str
    request_id: str
    request: Request
    vocabulary: Any
    refused: str | None
    backend: Any = None  # the engine's adapter (the checker compiles its own copy to replay on)


@dataclass(frozen=True, eq=False)
class TraceCompile:
    engine: str
    request_id: str
    spec_fingerprint: str
    requested_vocab: str  # fingerprint of the engine's vocabulary
    served_vocab: str  # fingerprint the served grammar was compiled for
    hit: bool
    ms: float


@dataclass(frozen=True, eq=False)
class TraceMask:
    """The mask row a sequence was sampled (or verified) under, with the model's logits there."""

    engine: str
    request_id: str
    seq_id: int
    step: int
    ids: tuple[int, ...]  # generated ids before this position
    mask: np.ndarray | None  # int32 words; None for an unconstrained row
    logits: torch.Tensor  # [V]
    kv_tokens: tuple[int, ...]  # what the KV holds for this position (prompt + ids expected)
    origin: str


@dataclass(frozen=True, eq=False)
class TraceToken:
    engine: str
    request_id: str
    seq_id: int
    step: int
    ids_before: tuple[int, ...]
    token: int
    how: str  # sampled | beam | draft | resampled | replay
    backend_verdict: bool | None  # None: unconstrained
    backend_reason: str
    origin: str


@dataclass(frozen=True, eq=False)
class TraceSpec:
    """One speculative verify: drafts, how many the grammar passed, how many were accepted, and the
    mask of the engine's matcher after its rollback (where a one-by-one walk would be)."""

    engine: str
    request_id: str
    seq_id: int
    step: int
    ids_before: tuple[int, ...]
    draft: tuple[int, ...]
    grammar_ok: int
    accepted: int
    matcher_mask: np.ndarray | None


@dataclass(frozen=True, eq=False)
class TraceDelta:
    engine: str
    request_id: str
    index: int
    text: str


@dataclass(frozen=True, eq=False)
class TraceFinish:
    engine: str
    request_id: str
    seq_id: int
    completion: Completion
    stream: bool  # the request asked for deltas


@dataclass(frozen=True, eq=False)
class TraceCancel:
    engine: str
    request_id: str


TraceEvent = Union[
    TraceAdmit, TraceCompile, TraceMask, TraceToken, TraceSpec, TraceDelta, TraceFinish, TraceCancel
]
Observer = Callable[[TraceEvent], None]
