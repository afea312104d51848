"""Shards of one job: in this process, in local worker processes, or as Ray tasks; every result goes
to the parent as a message. ``maskcert fuzz`` (campaign shards) and ``maskcert certify --workers``
(shards of (case, vocabulary) pairs) both run on this one mechanism.

Theory of operation. A *shard run* is a module-level function ``run(spec, sink, should_stop)``: it does
its share of the work, sends what it learns to ``sink`` as plain picklable dicts, checks
``should_stop()`` between units of work, and sends ``{"type": "done", "shard": i}`` last. The parent
calls :func:`run_shards`, which delivers every message to ``collect`` in the parent's thread as soon as
it arrives: in-process through a callback, across processes through a ``multiprocessing`` queue (spawn
context: a worker never inherits the parent's engine state), on Ray through a
``ray.util.queue.Queue``. SIGINT and SIGTERM set a :class:`StopFlag` (:func:`signals`); shards see it
before their next unit of work (workers through an ``Event``; Ray tasks are cancelled, and
``KeyboardInterrupt`` reaches them), report what they hold, and the parent drains every message before
it returns. Shards that never said ``done`` are returned as errors: nothing they sent is lost, and what
they did not do is named.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from refdecoder.errors import MaskcertError

__all__ = ["Sink", "ShardRun", "StopFlag", "signals", "Shards", "run_shards", "ClusterUnavailable"]

Sink = Callable[[dict[str, Any]], None]
ShardRun = Callable[[Any, Sink, Callable[[], bool]], None]

WORKER_GRACE_S = 30.0  # how long a worker may take to wind down after a stop request or the deadline
RAY_START_ALLOWANCE_S = 120.0  # how long a Ray task may take to start before the parent gives up on it


class ClusterUnavailable(MaskcertError, ValueError):
    """``--cluster`` names a Ray cluster, but Ray is not installed or the cluster cannot be joined."""


class StopFlag:
    """Set by a signal (:func:`signals`) or by the caller; shards poll it through ``should_stop``."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal: int | None = None

    def set(self, signum: int | None = None) -> None:
        if self.signal is None:
            self.signal = signum
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()


@contextlib.contextmanager
def signals(stop: StopFlag) -> Iterator[None]:
    """SIGTERM and a first SIGINT set the stop flag; a second SIGINT raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        stop.set(signum)

    def on_int(signum: int, frame: Any) -> None:
        stop.set(signum)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_int)
    try:
        yield
    finally:
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
def _worker_main(run: ShardRun, spec: Any, messages: Any, stop_event: Any) -> None:
    """A spawned worker: one shard; SIGINT/SIGTERM and the parent's event stop it."""
    flag = StopFlag()
    signal.signal(signal.SIGTERM, lambda s, f: flag.set(s))
    signal.signal(signal.SIGINT, lambda s, f: flag.set(s))
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
    procs = [
        ctx.Process(
            target=_worker_main, args=(shards.run, s, messages, stop_event), name=f"maskcert-shard-{i}"
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
            if (end_at is not None and now > end_at + WORKER_GRACE_S) or (
                stop_since is not None and now > stop_since + WORKER_GRACE_S
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
