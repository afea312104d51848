"""Requests, their outputs, and the event stream a client reads (docs/design.md §5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from refdecoder import Spec
from refdecoder.sampler import SamplingParams

from ._agent import ToolSwitch
from ._lifecycle import Status

__all__ = [
    "FinishReason",
    "FINISH_REASONS",
    "Request",
    "Completion",
    "Delta",
    "Finished",
    "AdmissionRefused",
    "StreamEvent",
    "RequestHandle",
]

FinishReason = Literal["stop", "length", "cancelled", "constraint_violation", "error"]
FINISH_REASONS: tuple[str, ...] = ("stop", "length", "cancelled", "constraint_violation", "error")


@dataclass(frozen=True)
class Request:
    """One client request.

    ``spec`` None is unconstrained generation. ``n`` independent samples, or ``beam_width`` > 1 for
    beam search (which returns ``beam_width`` outputs). ``speculative`` k > 0 drafts k tokens per
    step. ``stop_ids`` end an unconstrained output (a constrained one ends when its grammar lets EOS
    through). ``stream`` asks for :class:`Delta` events as tokens arrive.

    ``tools`` (agent requests, ``serving_sim._agent``): ``spec`` is the composed tool-call language, and
    the engine serves it in the switch's two grammars, swapping the matcher to the chosen tool's
    arguments grammar when its name completes. ``jump_forward`` appends the tokens of the grammar's
    forced text after each sampled token (without a model call), streamed as they are appended.

    ``finish_within_max_tokens`` (constrained requests only; opt-in) makes every output end with EOS
    within ``max_tokens``: each step's mask also drops the tokens after which the spec can no longer
    be finished in the tokens left (the reference's exact token budget, ``serving_sim._budget``), so
    an output never finishes ``length``. A spec whose shortest output does not fit ``max_tokens``,
    or whose grammar the budget refuses (key or value memory), is refused at admission.
    """

    prompt: tuple[int, ...]
    spec: Spec | None = None
    params: SamplingParams = field(default_factory=SamplingParams)
    n: int = 1
    beam_width: int = 1
    max_tokens: int = 32
    stop_ids: tuple[int, ...] = ()
    stream: bool = False
    speculative: int = 0
    request_id: str = ""
    finish_within_max_tokens: bool = False
    tools: ToolSwitch | None = None
    jump_forward: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt))
        object.__setattr__(self, "stop_ids", tuple(int(t) for t in self.stop_ids))


@dataclass(frozen=True)
class Completion:
    """One finished output. ``valid`` claims the text is a complete structured output (``stop`` only).

    ``error`` is set for ``constraint_violation`` (``NO_VALID_TOKEN at step S, state X``) and
    ``error``; ``error_step`` and ``state_id`` locate a ``NO_VALID_TOKEN``.
    """

    index: int
    token_ids: tuple[int, ...]
    text: str
    finish_reason: FinishReason
    valid: bool
    score: float = 0.0
    error: str | None = None
    error_step: int | None = None
    state_id: str | None = None


@dataclass(frozen=True)
class Delta:
    request_id: str
    index: int
    text: str


@dataclass(frozen=True)
class Finished:
    """The last event of one output: it carries the finish reason and the whole completion."""

    request_id: str
    index: int
    finish_reason: FinishReason
    completion: Completion


@dataclass(frozen=True)
class AdmissionRefused:
    """Admission control turned the request away before it was queued (why: ``reason``; a backend's
    own compile refusal is :class:`props.contract.backend.Refused`, which ``reason`` then quotes)."""

    request_id: str
    reason: str


StreamEvent = Union[Delta, Finished, AdmissionRefused]


@dataclass(eq=False)
class RequestHandle:
    """What ``Engine.submit`` returns: the request's status, its events so far and its outputs."""

    request_id: str
    request: Request
    status: Status = Status.NEW
    events: list[StreamEvent] = field(default_factory=list)
    outputs: list[Completion] = field(default_factory=list)
    refusal: str | None = None

    @property
    def done(self) -> bool:
        return self.status in (Status.FINISHED, Status.CANCELLED, Status.REFUSED)

    def text(self, index: int = 0) -> str:
        """The concatenated stream deltas of output ``index``."""
        return "".join(e.text for e in self.events if isinstance(e, Delta) and e.index == index)
