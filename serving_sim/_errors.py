"""Errors of the serving simulation, in maskcert's one hierarchy (docs/style.md §6)."""

from __future__ import annotations

from refdecoder.errors import MaskcertError

__all__ = ["ServingError", "LifecycleError", "SnapshotMismatch", "UnknownFault"]


class ServingError(MaskcertError):
    """Root of the errors ``serving_sim`` raises on purpose."""


class LifecycleError(ServingError, RuntimeError):
    """A request was asked to make a transition that the lifecycle table does not have."""

    def __init__(self, request_id: str, status: str, event: str, allowed: tuple[str, ...]) -> None:
        self.request_id = request_id
        self.status = status
        self.event = event
        self.allowed = allowed
        super().__init__(
            f"request {request_id!r}: no transition for event {event!r} from status {status!r}; "
            f"from {status!r} the table allows {', '.join(allowed) or 'nothing (terminal)'}"
        )


class SnapshotMismatch(ServingError, ValueError):
    """A serialized matcher state was offered to a grammar or vocabulary it was not taken from."""

    def __init__(self, field: str, expected: str, got: str) -> None:
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(
            f"matcher snapshot refused: its {field} is {got[:16]}..., the request's is {expected[:16]}...; "
            "resume by replaying the generated tokens instead"
        )


class UnknownFault(ServingError, ValueError):
    """A fault name that :data:`serving_sim.FAULTS` does not list."""

    def __init__(self, name: str, known: tuple[str, ...], hint: str = "") -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown fault {name!r}: expected one of {', '.join(known)}{hint}")
