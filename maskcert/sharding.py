"""Shards of one job: in this process, in local worker processes, or as Ray tasks; every result goes
to the parent as a message. ``maskcert fuzz`` (campaign shards) and ``maskcert certify --workers``
(shards of (case, vocabulary) pairs) both run on this one mechanism.

Theory of operation. A *shard run* is a module-level function ``run(spec, sink, should_stop)``: it does
its share of the work, sends what it learns to ``sink`` as plain picklable dicts, checks
``should_stop()`` between units of work, and sends ``{"type": "done", "shard": i}`` last. The parent
calls :func:`run_shards`, which delivers every message to ``collect`` in the parent's thread as soon as
it arrives: in-process through a callback, across processes through a ``multiprocessing`` queue (spawn
context: a worker never inherits the parent's engine state), on Ray through a
``ray.util.queue.Queue``. Shards that never said ``done`` are returned as errors: nothing they sent is
lost, and what they did not do is named.

Signals. SIGINT and SIGTERM set a :class:`StopFlag` (:func:`signals`, one scope per process, shared by
nested runs); shards see it before their next unit of work (workers through an ``Event`` and the
signal itself; Ray tasks are cancelled, and ``KeyboardInterrupt`` reaches them). A unit of work run
inside :func:`abortable` is abandoned at once (:class:`Interrupted`), so a stop never waits for a long
unit to finish; what it did is not reported as done. A second signal ends the process at once
(:func:`hard_exit`), killing every child first; children also die with the process when it is killed
(:mod:`props.backends.lifetime`).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from props.backends.lifetime import kill_registered, signal_name
from refdecoder.errors import MaskcertError

__all__ = [
    "Sink",
    "ShardRun",
    "StopFlag",
    "Interrupted",
    "abortable",
    "signal_name",
    "signals",
    "hard_exit",
    "Shards",
    "run_shards",
    "ClusterUnavailable",
]

Sink = Callable[[dict[str, Any]], None]
ShardRun = Callable[[Any, Sink, Callable[[], bool]], None]

WORKER_GRACE_S = 30.0  # how long a worker may take to wind down after the deadline
STOP_GRACE_S = 5.0  # how long a worker may take to report and end after a stop signal reached it
RAY_START_ALLOWANCE_S = 120.0  # how long a Ray task may take to start before the parent gives up on it


class ClusterUnavailable(MaskcertError, ValueError):
    """``--cluster`` names a Ray cluster, but Ray is not installed or the cluster cannot be joined."""


class Interrupted(BaseException):
    """A stop signal arrived while work that may be abandoned was in progress (:meth:`StopFlag.abortable`).

    Raised by the signal handler in the main thread, so the stop is prompt even inside a long unit of
    work; that unit is abandoned and never recorded as done (a resumed run redoes it). A
    ``BaseException``, as ``KeyboardInterrupt`` is, so that ``except Exception`` in checks, adapters
    and Hypothesis does not swallow it."""

    def __init__(self, signum: int | None) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal_name(signum)}")


class StopFlag:
    """Set by a signal (:func:`signals`) or by the caller; shards poll it through ``should_stop``.
    ``signal`` is the first signal's number (None when the caller set it)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal: int | None = None
        self._abortable = 0

    def set(self, signum: int | None = None) -> None:
        if self.signal is None:
            self.signal = signum
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()

    def signalled(self, signum: int, frame: FrameType | None = None) -> None:
        """A signal handler's entry: the first signal sets the flag and, inside :meth:`abortable` work
        in this (the main) thread, raises :class:`Interrupted` there -- except where the signal
        interrupted a garbage-collector callback (``frame``, the handler's, is inside one: Hypothesis
        keeps one). Python prints an exception raised there as "Exception ignored in" and drops it,
        so the handler does not raise: the work stops where it next polls the flag."""
        first = not self()
        self.set(signum)
        if (
            first
            and self._abortable
            and threading.current_thread() is threading.main_thread()
            and not _in_gc_callback(frame)
        ):
            raise Interrupted(signum)

    @contextlib.contextmanager
    def abortable(self) -> Iterator[None]:
        """Work inside may be abandoned at once by a signal (:class:`Interrupted`); outside it a
        signal only sets the flag, and the work in progress (writing a checkpoint or a report)
        finishes. Raises :class:`Interrupted` on entry when the flag is already set."""
        if self():
            raise Interrupted(self.signal)
        self._abortable += 1
        try:
            yield
        finally:
            self._abortable -= 1


def _in_gc_callback(frame: FrameType | None) -> bool:
    """``frame`` or one of its callers runs a function in ``gc.callbacks``."""
    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks} - {None}
    while frame is not None and codes:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


_active: StopFlag | None = None  # the flag of the outermost signals() scope of this process (or a worker's)


def abortable() -> contextlib.AbstractContextManager[None]:
    """:meth:`StopFlag.abortable` of this process's active flag (the outermost :func:`signals` scope,
    or a shard worker's own flag); no effect where none is active."""
    return _active.abortable() if _active is not None else contextlib.nullcontext()


def hard_exit(signum: int) -> None:
    """A second signal: kill every child (worker processes, backend workers, reproducers) and end
    the process at once with ``128 + signum``, as shells expect; no report is written."""
    for p in multiprocessing.active_children():
        with contextlib.suppress(Exception):
            p.kill()
    kill_registered()
    with contextlib.suppress(OSError):
        os.write(2, f"maskcert: {signal_name(signum)} again: stopped at once\n".encode())
    os._exit(128 + signum)


@contextlib.contextmanager
def signals(stop: StopFlag | None = None) -> Iterator[StopFlag]:
    """SIGINT and SIGTERM stop the job: the first sets the stop flag (and abandons abortable work,
    :meth:`StopFlag.abortable`), a second one, of either kind, ends the process at once
    (:func:`hard_exit`). Yields the flag. Nested scopes (a matrix's certify runs) share the outermost
    scope's flag and handlers, so a signal between two inner runs is not lost. Outside the main
    thread no handler can be installed: the flag is yielded as it is."""
    global _active
    if _active is not None:
        yield _active
        return
    flag = stop if stop is not None else StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def on_signal(signum: int, frame: Any) -> None:
        if flag.signal is not None:
            hard_exit(signum)
        flag.signalled(signum, frame)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _active = flag
    try:
        yield flag
    finally:
        _active = None
        for s, h in old.items():
            signal.signal(s, h)


@dataclass(frozen=True)
class Shards:
    """One job's shards. ``run`` and ``rebase`` must be module-level functions (they are pickled by
    name). ``end_at`` (``time.time()``) is when the job's budget ends, None for no budget: past it plus
    ``grace_s`` plus :data:`WORKER_GRACE_S` the parent stops waiting. ``rebase(spec)`` runs where a Ray
    task starts and returns the spec with its budget counted from then (joining a loaded cluster must
    not eat the budget); None keeps the spec as it is."""

    run: ShardRun
    specs: Sequence[Any]
    ids: Sequence[int]
    end_at: float | None = None
    grace_s: float = 0.0
    rebase: Callable[[Any], Any] | None = None


class _Done:
    """``collect`` wrapped to remember which shards said ``done``."""

    def __init__(self, collect: Sink) -> None:
        self.collect = collect
        self.done: set[int] = set()

    def __call__(self, msg: dict[str, Any]) -> None:
        if msg.get("type") == "done":
            self.done.add(int(msg.get("shard", 0)))
        self.collect(msg)


def run_shards(
    shards: Shards, collect: Sink, stop: StopFlag, *, processes: bool = True, cluster: str | None = None
) -> list[str]:
    """Run every shard and deliver its messages to ``collect`` (see the module doc): on the Ray cluster
    at ``cluster`` (``"local"`` starts one here) when given, else in worker processes when
    ``processes`` (or when there is more than one shard), else in this process. Returns one error per
    shard that ended without ``done``."""
    done = _Done(collect)
    if cluster:
        _run_ray(shards, done, stop, cluster)
        where = "Ray task"
    elif processes or len(shards.specs) > 1:
        exits = _run_local(shards, done, stop)
        return [
            f"shard {i}: worker exited with status {code} before it finished"
            for i, code in zip(shards.ids, exits)
            if i not in done.done
        ]
    else:
        for spec in shards.specs:
            shards.run(spec, done, stop)
        where = "shard"
    return [f"shard {i}: {where} ended before it finished" for i in shards.ids if i not in done.done]


# -- local worker processes -----------------------------------------------------------------------
def _worker_main(
    run: ShardRun, spec: Any, messages: Any, stop_event: Any, parent: int | None, shards: int = 1
) -> None:
    """A spawned worker: one shard of ``shards`` running at once, whose backend workers share the
    cores accordingly (``props.backends.worker.share_cores``). It dies with the parent (``parent``:
    its pid, when the parent started it from its main thread; :mod:`props.backends.lifetime`).
    SIGINT/SIGTERM and the parent's event stop it: a signal abandons the unit of work in progress
    (:class:`Interrupted` inside :meth:`StopFlag.abortable`); escalation is the parent's (it kills
    workers that linger)."""
    from props.backends.worker import share_cores

    share_cores(shards)
    if parent is not None:
        from props.backends.lifetime import die_with_parent

        die_with_parent(parent)
    global _active
    flag = _active = StopFlag()
    signal.signal(signal.SIGTERM, flag.signalled)
    signal.signal(signal.SIGINT, flag.signalled)
    run(spec, messages.put, lambda: flag() or stop_event.is_set())


def _drain(messages: Any, collect: Sink, timeout: float) -> None:
    """Deliver what is in ``messages`` now and what arrives within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        while not messages.empty():
            collect(messages.get())
        if time.monotonic() >= end:
            return
        time.sleep(0.02)


def _run_local(shards: Shards, collect: Sink, stop: StopFlag) -> list[int | None]:
    ctx = multiprocessing.get_context("spawn")
    # A SimpleQueue's put writes to the pipe before it returns (a Queue hands the message to a feeder
    # thread): what a worker sent is delivered even if it dies right after, by a segfault or a kill.
    messages = ctx.SimpleQueue()
    stop_event = ctx.Event()
    parent = os.getpid() if threading.current_thread() is threading.main_thread() else None
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(shards.run, s, messages, stop_event, parent, len(shards.specs)),
            name=f"maskcert-shard-{i}",
        )
        for i, s in zip(shards.ids, shards.specs)
    ]
    for p in procs:
        p.start()
    end_at = None if shards.end_at is None else shards.end_at + shards.grace_s
    stop_since: float | None = None
    try:
        while any(p.is_alive() for p in procs):
            _drain(messages, collect, 0.2)
            now = time.time()
            if stop() and stop_since is None:
                stop_event.set()
                stop_since = now
                for p in procs:  # abandon the pair in progress: a signal reaches its abortable work
                    if p.is_alive() and p.pid:
                        with contextlib.suppress(OSError):
                            os.kill(p.pid, stop.signal or signal.SIGTERM)
            if (end_at is not None and now > end_at + WORKER_GRACE_S) or (
                stop_since is not None and now > stop_since + STOP_GRACE_S
            ):
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                break
        for p in procs:
            p.join(timeout=5)
        _drain(messages, collect, 0.5)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    return [p.exitcode for p in procs]


# -- Ray ---------------------------------------------------------------------------------------------
def _ray_task(run: ShardRun, rebase: Callable[[Any], Any] | None, spec: Any, messages: Any) -> None:
    if rebase is not None:
        spec = rebase(spec)
    run(spec, messages.put, lambda: False)


def _run_ray(shards: Shards, collect: Sink, stop: StopFlag, address: str) -> None:
    try:
        import ray
        from ray.util.queue import Empty as RayEmpty
        from ray.util.queue import Queue as RayQueue
    except ImportError as e:
        raise ClusterUnavailable(
            f"--cluster {address}: expected Ray installed (pip install 'maskcert[ray]'): {e}"
        ) from e
    joining = time.time()
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(
                address=None if address in ("", "local") else address,
                ignore_reinit_error=True,
                log_to_driver=False,
                include_dashboard=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ClusterUnavailable(f"--cluster {address}: expected a reachable Ray cluster: {e}") from e
    try:
        messages = RayQueue()
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        refs = [task.remote(shards.run, shards.rebase, s, messages) for s in shards.specs]
        pending = list(refs)
        # Joining the cluster does not count, and budgets restart when each task starts (rebase): the
        # parent allows for both.
        end_at = (
            None
            if shards.end_at is None
            else shards.end_at + (time.time() - joining) + shards.grace_s + RAY_START_ALLOWANCE_S
        )
        cancelled_at: float | None = None

        def drain(timeout: float) -> None:
            try:
                collect(messages.get(timeout=timeout))
                while True:
                    collect(messages.get_nowait())
            except RayEmpty:
                return

        while pending:
            drain(0.2)
            _ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            now = time.time()
            if pending and stop() and cancelled_at is None:
                cancelled_at = now
                for ref in pending:
                    ray.cancel(ref)  # KeyboardInterrupt in the task: it reports what it holds
            if pending and (
                (end_at is not None and now > end_at + WORKER_GRACE_S)
                or (cancelled_at and now > cancelled_at + WORKER_GRACE_S)
            ):
                for ref in pending:
                    ray.cancel(ref, force=True)
                break
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.get(ref, timeout=5)
        drain(0.5)
    finally:
        if started_here:
            ray.shutdown()
