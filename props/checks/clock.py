"""Where checking's time goes: seconds per phase, split into maskcert's own and the engine's.

Theory of operation. A :class:`Clock` keeps a stack of phase names and a mark (the last time it
charged anything). Every elapsed interval is charged to exactly one (phase, side) pair: entering or
leaving a phase, or starting or ending an engine call, charges the time since the mark to the phase
on top of the stack and moves the mark. Time inside an engine call (:func:`engine_call`, which
``props.checks.invariants._call`` wraps around every backend call, the worker's round trip included
when the backend runs in one) goes to the ``engine`` side, the rest to ``own``. Phases are therefore
*exclusive* (a nested phase's time is not also counted in its parent's) and ``own + engine`` over all
phases is the clock's whole running time: a breakdown that adds up.

The clock in effect is a context variable (:func:`running`), so the functions that check a target
need not pass it around, and a thread or shard has its own. Without one, :func:`phase` and
:func:`engine_call` cost one context-variable read.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Clock", "current", "engine_call", "phase", "running"]

_CLOCK: ContextVar[Clock | None] = ContextVar("maskcert_clock", default=None)


@dataclass
class Clock:
    """Exclusive seconds per phase on each side (``own``, ``engine``) and engine calls per phase."""

    base: str = "other"
    own: dict[str, float] = field(default_factory=dict)
    engine: dict[str, float] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    _stack: list[str] = field(default_factory=list)
    _mark: float = 0.0
    _in_engine: int = 0

    def start(self) -> None:
        self._stack = [self.base]
        self._mark = time.perf_counter()

    def _charge(self, side: dict[str, float]) -> None:
        now = time.perf_counter()
        top = self._stack[-1] if self._stack else self.base
        side[top] = side.get(top, 0.0) + now - self._mark
        self._mark = now

    def enter(self, name: str) -> None:
        self._charge(self.engine if self._in_engine else self.own)
        self._stack.append(name)

    def leave(self) -> None:
        self._charge(self.engine if self._in_engine else self.own)
        if len(self._stack) > 1:
            self._stack.pop()

    def engine_enter(self) -> None:
        if not self._in_engine:
            self._charge(self.own)
            self.count_call()
        self._in_engine += 1

    def count_call(self) -> None:
        """Count one engine call in the phase on top (``engine_enter`` counts its own; a caller that
        makes a second call in the same trip counts that one)."""
        self.calls[self._stack[-1] if self._stack else self.base] += 1

    def engine_leave(self) -> None:
        self._in_engine -= 1
        if not self._in_engine:
            self._charge(self.engine)

    def stop(self) -> None:
        """Charge the time since the last mark (call once, when the clocked work is done)."""
        self._charge(self.engine if self._in_engine else self.own)

    @property
    def own_s(self) -> float:
        return sum(self.own.values())

    @property
    def engine_s(self) -> float:
        return sum(self.engine.values())

    def add(self, other: Clock) -> None:
        """Add ``other``'s seconds and calls into this clock's (per phase)."""
        for mine, theirs in ((self.own, other.own), (self.engine, other.engine)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0.0) + v
        self.calls.update(other.calls)

    def to_json(self) -> dict[str, Any]:
        """``{"own_s", "engine_s", "engine_calls", "phases": {name: {own_s, engine_s, engine_calls}}}``,
        phases largest first."""
        names = sorted(
            set(self.own) | set(self.engine),
            key=lambda k: -(self.own.get(k, 0.0) + self.engine.get(k, 0.0)),
        )
        return {
            "own_s": round(self.own_s, 4),
            "engine_s": round(self.engine_s, 4),
            "engine_calls": sum(self.calls.values()),
            "phases": {
                k: {
                    "own_s": round(self.own.get(k, 0.0), 4),
                    "engine_s": round(self.engine.get(k, 0.0), 4),
                    "engine_calls": self.calls.get(k, 0),
                }
                for k in names
            },
        }


def current() -> Clock | None:
    """The clock in effect in this context, if any."""
    return _CLOCK.get()


@contextlib.contextmanager
def running(clock: Clock) -> Iterator[Clock]:
    """Run the block with ``clock`` in effect (started now, stopped at the end)."""
    token = _CLOCK.set(clock)
    clock.start()
    try:
        yield clock
    finally:
        clock.stop()
        _CLOCK.reset(token)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Charge the block's time to phase ``name`` on the clock in effect (exclusive of nested phases)."""
    clock = _CLOCK.get()
    if clock is None:
        yield
        return
    clock.enter(name)
    try:
        yield
    finally:
        clock.leave()


@contextlib.contextmanager
def engine_call() -> Iterator[None]:
    """Charge the block's time to the engine side of the current phase (one engine call)."""
    clock = _CLOCK.get()
    if clock is None:
        yield
        return
    clock.engine_enter()
    try:
        yield
    finally:
        clock.engine_leave()
