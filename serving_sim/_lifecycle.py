"""The request lifecycle: one transition table (docs/style.md §2, after h11's ``_state.py``).

Theory of operation
-------------------
A request is *submitted*; admission control either refuses it (it never takes a batch slot) or
queues it as ``waiting``. Between steps the scheduler moves queued requests to ``running`` while the
batch has rows and KV room. A running request may be *preempted* when KV runs short: its KV goes to
the prefix cache, its matchers are dropped (or snapshotted), and it waits at the head of the queue as
``preempted`` until it is *resumed* (KV restored from the prefix cache, matchers by replay). A request
ends ``finished`` (every output has a finish reason) or ``cancelled``; both, and ``refused``, are
terminal. A transition that is not in :data:`TRANSITIONS` raises :class:`LifecycleError`: there is no
"ignore it" branch anywhere in the engine.

The diagram below is drawn from the table by :func:`diagram`::

    new        --admit-->     waiting
    new        --refuse-->    refused
    waiting    --schedule-->  running
    waiting    --cancel-->    cancelled
    running    --finish-->    finished
    running    --cancel-->    cancelled
    running    --preempt-->   preempted
    preempted  --resume-->    running
    preempted  --cancel-->    cancelled
"""

from __future__ import annotations

import enum

from ._errors import LifecycleError

__all__ = ["Status", "Event", "TRANSITIONS", "TERMINAL", "transition", "diagram"]


class Status(str, enum.Enum):
    NEW = "new"
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    REFUSED = "refused"


class Event(str, enum.Enum):
    ADMIT = "admit"
    REFUSE = "refuse"
    SCHEDULE = "schedule"
    PREEMPT = "preempt"
    RESUME = "resume"
    FINISH = "finish"
    CANCEL = "cancel"


S, E = Status, Event

TRANSITIONS: dict[tuple[Status, Event], Status] = {
    (S.NEW, E.ADMIT): S.WAITING,
    (S.NEW, E.REFUSE): S.REFUSED,
    (S.WAITING, E.SCHEDULE): S.RUNNING,
    (S.WAITING, E.CANCEL): S.CANCELLED,
    (S.RUNNING, E.FINISH): S.FINISHED,
    (S.RUNNING, E.CANCEL): S.CANCELLED,
    (S.RUNNING, E.PREEMPT): S.PREEMPTED,
    (S.PREEMPTED, E.RESUME): S.RUNNING,
    (S.PREEMPTED, E.CANCEL): S.CANCELLED,
}

TERMINAL: frozenset[Status] = frozenset({S.FINISHED, S.CANCELLED, S.REFUSED})


def transition(request_id: str, status: Status, event: Event) -> Status:
    """The next status; :class:`LifecycleError` when the table has no such transition."""
    nxt = TRANSITIONS.get((status, event))
    if nxt is None:
        allowed = tuple(e.value for (s, e) in TRANSITIONS if s is status)
        raise LifecycleError(request_id, status.value, event.value, allowed)
    return nxt


def diagram() -> str:
    """The table as text, one transition a line (the module docstring shows it)."""
    return "\n".join(
        f"{s.value:<10} --{e.value}-->{' ' * (10 - len(e.value))}{t.value}"
        for (s, e), t in TRANSITIONS.items()
    )
