"""Run a backend in a worker process, so that a hang is a ``limits`` finding and a crash a ``crash``
finding, and the run goes on (docs/design.md §4.12).

Theory of operation. :class:`WorkerBackend` implements the ``Backend`` protocol by proxy. It starts
``python -m props.backends._worker_main`` with two pipes (pickled messages behind their length,
:class:`_Pipe`, over inherited file descriptors; the child's stdout and stderr go to an anonymous
log file, so a backend that prints cannot corrupt the protocol and a crash report can quote its last
words).
The child imports from the parent's ``sys.path`` (passed in the environment), so a ``module:Class``
adapter the parent can import loads there too. It sets ``RLIMIT_AS`` to ``memory_mb``, loads the
adapter with :func:`props.backends.load_backend`, and answers one request at a time. Compiled
grammars and matchers live in the child; the parent holds integer handles tagged with the worker's
*generation*.

A round trip through the pipes costs about 85 us on a two-core machine, nearly all of it the
wake-up of the side that slept in ``read``: each side therefore *spins* for ``spin_us`` (polling,
without sleeping) before it blocks on the other's message, which brings the round trip to about
20 us when each side has a core of its own. The spin yields the core between polls, but spinning
while the cores are shared still costs: a stride-50 JSONSchemaBench certify of xgrammar with two
local shards on two cores took 92 s sleeping and 135 s spinning (205 s without yielding). So by
default (:func:`default_spin_us`) a worker spins only when the machine has two cores for every
worker pair running here: :func:`share_cores` tells it how many run at once (``maskcert``'s local
shards; a test session under pytest-xdist sets ``MASKCERT_WORKER_SPIN_US``).

Calls that always go together travel together (:meth:`WorkerBackend._call_parts`: every request
written, then every answer read): ``fork_accept``, and ``accept_mask`` / ``fork_accept_mask``, whose
mask part the child computes only when the accept just before it returned an outcome other than a
rejection (``_Child.handle``), so the engine gets exactly the calls it would get one by one. The
segmentation search (:mod:`props.checks.segments`), hundreds of forks each, runs in the child
whole (:meth:`WorkerMatcher.segment_search`): the same algorithm and engine calls as in the parent,
in time slices of :data:`SEARCH_SLICE_S` that are calls of their own, so the timeout still cuts a
hung engine call; the child counts the calls and times the masks for the parent.

A handle the parent no longer holds (a matcher garbage-collected) is dropped in the child with the
next request: each request carries the ids dropped since the last one, and the child forgets them
before it answers (a message of its own would cost a round trip, as much as the call it precedes).

Every call waits at most its timeout. Then:

================================  ============================================  =========
what happened in the child        what the parent raises                        ``kind``
================================  ============================================  =========
answered                          nothing (the value; a refusal is ``Refused``)
raised an exception               that exception (its remote traceback chained
                                  as ``__cause__``), or :class:`RemoteError`
                                  if it cannot cross the pipe or is not an
                                  ``Exception`` (``SystemExit``, a Rust panic)  ``crash``
raised ``MemoryError``            :class:`WorkerMemoryExceeded`                 ``limits``
no answer within the timeout      :class:`WorkerTimeout` (child killed)         ``limits``
died (signal, abort, exit)        :class:`WorkerCrashed` (exit status, log)     ``crash``
================================  ============================================  =========

After a timeout or a crash the next ``compile`` starts a fresh child (a new generation); matchers
and compiled handles of the dead one raise :class:`WorkerCrashed` ("stale handle"). One request at
a time: a ``WorkerBackend`` is not for concurrent use from several threads (a lock serializes).

A run's deadline (``WorkerBackend.deadline``, ``time.monotonic()``; ``certify --budget``) bounds every
call as well: a call still unanswered :data:`DEADLINE_GRACE_S` after the deadline is cut (the child
is killed) and raises :class:`DeadlineReached` with how long it ran; after the deadline no call is
sent, and each raises :class:`DeadlineReached` without a time (no engine work was in progress).
``DeadlineReached`` is a ``BaseException``, like ``KeyboardInterrupt``: no check, adapter or
Hypothesis search swallows it on its way to whoever set the deadline.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, NoReturn

import numpy as np

from props.backends.lifetime import child_env, die_with_parent_from_env, register
from props.checks.segments import Steps, rejected, search_segmentations
from props.contract.attribution import AdapterFault, adapter_fault, adapter_modules
from props.contract.backend import (
    Compiled,
    CompileOutcome,
    DeclaredProfile,
    PartFailed,
    Refused,
    TokenOutcome,
)
from refdecoder.errors import InputError, MaskcertError, StateError
from tokenizers_matrix import Vocabulary

if TYPE_CHECKING:
    from props.contract.backend import Backend, BackendMatcher

__all__ = [
    "WorkerBackend",
    "WorkerMatcher",
    "WorkerError",
    "WorkerCrashed",
    "WorkerTimeout",
    "WorkerMemoryExceeded",
    "RemoteError",
    "DeadlineReached",
    "DEADLINE_GRACE_S",
    "SPIN_US",
    "default_spin_us",
    "share_cores",
]

#: How long the worker runs a segmentation search before it answers and waits to be asked for more
#: (``WorkerMatcher.segment_search``): each slice is one call, bounded by an engine call's timeout
#: plus this.
SEARCH_SLICE_S = 0.25

# How long each side of a round trip spins before it sleeps, when it may (see the module doc).
SPIN_US = 200.0
_PAIRS = [1]  # worker pairs (parent and child) that run at once on this machine (share_cores)


def share_cores(pairs: int) -> None:
    """Declare that ``pairs`` processes of this machine drive a worker each at the same time (this one
    among them): workers started from now on spin only if there are two cores for every pair."""
    _PAIRS[0] = max(1, int(pairs))


def default_spin_us() -> float:
    """``MASKCERT_WORKER_SPIN_US`` when set (0 turns spinning off), else :data:`SPIN_US` when the
    machine has two cores for every worker pair (:func:`share_cores`), else 0."""
    raw = os.environ.get("MASKCERT_WORKER_SPIN_US")
    if raw is not None:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0 <= value <= 1e6:
            raise InputError(
                "MASKCERT_WORKER_SPIN_US", "the microseconds a worker spins, from 0 to 1000000", repr(raw)
            )
        return value
    return SPIN_US if (os.cpu_count() or 1) >= 2 * _PAIRS[0] else 0.0


class _Pipe:
    """One end of a pipe carrying pickled messages, each behind its length (4 bytes, little-endian):
    what ``multiprocessing.connection.Connection`` does, without its pickler object built per message
    and its header written apart (about 10 us of a round trip's CPU on each side). ``recv`` reads
    exactly one message, so a poll of the descriptor says whether another one is there."""

    _LENGTH = struct.Struct("<I")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False

    def fileno(self) -> int:
        return self.fd

    def send(self, obj: Any) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)  # raises before anything is written
        view = memoryview(self._LENGTH.pack(len(data)) + data)
        while view:
            view = view[os.write(self.fd, view) :]

    def recv(self) -> Any:
        (n,) = self._LENGTH.unpack(self._read(self._LENGTH.size))
        return pickle.loads(self._read(n))

    def _read(self, n: int) -> bytes:
        data = os.read(self.fd, n)
        if len(data) == n:
            return data
        buf = bytearray(data)
        while len(buf) < n:
            more = os.read(self.fd, n - len(buf))
            if not more:
                raise EOFError("the pipe was closed inside a message" if buf else "the pipe was closed")
            buf += more
        return bytes(buf)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


def _poller(conn: _Pipe) -> select.poll:
    """A poll object on ``conn``'s descriptor, registered once (a selector built per wait costs about
    5 us): readable, or hung up, when a message is there."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return poller


def _spin(poller: select.poll, seconds: float) -> None:
    """Poll without sleeping for up to ``seconds`` (until a message is there), yielding the core
    between polls to any other process that is ready to run."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and not poller.poll(0):
        os.sched_yield()


# How long a call in progress when the deadline arrives may still answer: a call that happened to be
# in flight for a millisecond is not an engine running past the budget.
DEADLINE_GRACE_S = 1.0


# -- errors ---------------------------------------------------------------------------------------
class WorkerError(MaskcertError, RuntimeError):
    """Something went wrong in a backend's worker process; ``kind`` is the finding it becomes."""

    kind = "crash"

    def __init__(self, operation: str, detail: str, backend: str = "") -> None:
        self.operation = operation
        self.detail = detail
        self.backend = backend
        who = f"{backend} " if backend else ""
        super().__init__(f"{who}worker, {operation}: {detail}")


class WorkerCrashed(WorkerError):
    """The worker died during ``operation`` (segfault, abort, exit), or a handle outlived its worker.

    ``returncode`` is the child's exit status (negative: the signal), ``log_tail`` its last output."""

    kind = "crash"

    def __init__(
        self,
        operation: str,
        detail: str,
        backend: str = "",
        returncode: int | None = None,
        log_tail: str = "",
    ) -> None:
        self.returncode = returncode
        self.log_tail = log_tail
        super().__init__(operation, detail, backend)


class WorkerTimeout(WorkerError):
    """``operation`` did not answer within ``timeout_s``; the worker was killed. Raise the timeout
    (``WorkerBackend(timeout_s=..., compile_timeout_s=...)``) if the backend is just slow."""

    kind = "limits"

    def __init__(
        self,
        operation: str,
        timeout_s: float,
        backend: str = "",
        log_tail: str = "",
        elapsed_s: float | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.log_tail = log_tail
        self.elapsed_s = timeout_s if elapsed_s is None else elapsed_s  # how long the call ran until killed
        super().__init__(operation, f"no answer within {timeout_s:g} s (worker killed)", backend)


class WorkerMemoryExceeded(WorkerError):
    """``operation`` ran out of memory under the worker's ``RLIMIT_AS`` of ``memory_mb``."""

    kind = "limits"

    def __init__(self, operation: str, memory_mb: int, detail: str = "", backend: str = "") -> None:
        self.memory_mb = memory_mb
        super().__init__(
            operation, f"MemoryError under a {memory_mb} MiB address-space limit {detail}".strip(), backend
        )


class RemoteError(WorkerError):
    """An exception from backend code that could not be re-raised as itself in the parent."""

    kind = "crash"

    def __init__(
        self, operation: str, type_name: str, message: str, remote_traceback: str, backend: str = ""
    ) -> None:
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        super().__init__(operation, f"{type_name}: {message}", backend)


class DeadlineReached(BaseException):
    """The run's deadline (:attr:`WorkerBackend.deadline`) arrived. ``seconds``: how long ``operation``
    had been running in the worker when it was cut (the worker was killed), or None when the deadline
    had passed before the call (nothing was sent: no engine work was in progress). ``allowed_s``: how
    long the call could run (the time left when it started, plus :data:`DEADLINE_GRACE_S`).

    A ``BaseException`` (see the module doc); ``kind`` is the finding a cut call becomes, as for a
    :class:`WorkerError`. The message holds no measured time, so that a finding built from it has a
    stable id (the times are in ``seconds`` and ``allowed_s``)."""

    kind = "limits"

    def __init__(
        self,
        operation: str,
        seconds: float | None,
        backend: str = "",
        log_tail: str = "",
        allowed_s: float | None = None,
    ) -> None:
        self.operation = operation
        self.seconds = seconds
        self.backend = backend
        self.log_tail = log_tail
        self.allowed_s = allowed_s
        self.partial: Any = None  # what the caller had done when the call was cut (certify's CaseResult)
        who = f"{backend} " if backend else ""
        if seconds is None:
            detail = "not started: the run's deadline had passed"
        else:
            detail = "still running when the run's deadline arrived (worker killed)"
        super().__init__(f"{who}worker, {operation}: {detail}")


class _RemoteTraceback(Exception):
    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f"\n--- in the worker process ---\n{self.tb}"


# -- handles ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteHandle:
    """``Compiled.handle`` of a :class:`WorkerBackend`: a compiled grammar in worker ``generation``."""

    generation: int
    id: int


# -- the child -------------------------------------------------------------------------------------
class _Child:
    """The worker's side: tables of compiled grammars, matchers and vocabularies."""

    def __init__(self) -> None:
        self.backend: Any = None
        self.compiled: dict[int, Compiled] = {}
        self.matchers: dict[int, Any] = {}
        self.vocabularies: dict[str, Any] = {}
        self.next_id = 1
        self.accepted = False  # see handle
        self.searches: dict[int, _ChildSearch] = {}  # segmentation searches in progress, by matcher

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def handle(self, op: str, args: tuple[Any, ...]) -> Any:
        if op == "drop":  # the handles a request carries: forgotten before it is handled
            compiled_ids, matcher_ids = args
            for cid in compiled_ids:
                self.compiled.pop(cid, None)
            for mid in matcher_ids:
                self.matchers.pop(mid, None)
                self.searches.pop(mid, None)
            return None
        # Whether the request just before this one was an accept that returned an outcome other
        # than a rejection (``mask_if_accepted`` reads it); any other request, or a raise, clears it.
        accepted, self.accepted = self.accepted, False
        if op == "start":
            from props.backends import load_backend

            target, options = args
            self.backend = load_backend(target, **options)
            return (str(self.backend.name), str(self.backend.version), self.backend.profile)
        if op == "compile":
            spec, vocab_key, vocabulary = args
            if vocabulary is not None:
                self.vocabularies[vocab_key] = vocabulary
            outcome = self.backend.compile(spec, self.vocabularies[vocab_key])
            if isinstance(outcome, Refused):
                return outcome
            cid = self._new_id()
            self.compiled[cid] = outcome
            return ("compiled", cid, outcome.compile_ms)
        if op == "matcher":
            (cid,) = args
            return self._register(self.backend.matcher(self.compiled[cid]))
        if op == "first_mask":  # timed here, so that the mask's trip through the pipe is not counted
            (cid,) = args
            t0 = time.perf_counter()
            self.backend.matcher(self.compiled[cid]).mask()
            return (time.perf_counter() - t0) * 1000
        if op == "call":
            mid, method, margs = args
            m = self.matchers[mid]
            if method == "fork":
                return self._register(m.fork())
            if method == "fork_as":  # under an id the parent chose (WorkerMatcher.fork_accept)
                (new_id,) = margs
                return self._register(m.fork(), new_id)[1]
            if method == "mask_if_accepted":  # WorkerMatcher.accept_mask: the mask, timed here, or None
                if not accepted:
                    return None
                t0 = time.perf_counter()
                mask = m.mask()
                return mask, (time.perf_counter() - t0) * 1000
            if method == "accept":
                outcome = m.accept(*margs)
                self.accepted = not rejected(outcome)
                return outcome
            if method in ("segment_search", "segment_more"):  # WorkerMatcher.segment_search
                return self._search(mid, m, method, margs)
            return getattr(m, method)(*margs)
        if op == "ping":
            return os.getpid()
        if op == "census":  # the handles the child holds (what drops leave)
            return len(self.compiled), len(self.matchers)
        raise ValueError(f"unknown worker operation {op!r}")

    def _search(self, mid: int, m: Any, method: str, margs: tuple[Any, ...]) -> tuple[Any, ...]:
        """Start (``segment_search``) or go on with (``segment_more``) the segmentation search from
        matcher ``mid`` for one time slice: ``("done", verdict, calls, mask_ms)``, ``("more", calls,
        mask_ms)`` (the calls and mask times of this slice), or ``("raised", method, calls,
        error_reply)`` when an engine call raised (the search is then over)."""
        if method == "segment_search":
            *args, slice_s = margs
            self.searches[mid] = _ChildSearch(m, *args)
        else:
            (slice_s,) = margs
        search = self.searches[mid]
        try:
            reply = search.run(slice_s)
        except BaseException as e:  # noqa: BLE001 - an engine call raised: named and sent back
            del self.searches[mid]
            return (
                "raised",
                search.method,
                search.take()[0],
                _error_reply(e, self, "call", (mid, search.method, ())),
            )
        if reply[0] == "done":
            del self.searches[mid]
        return reply

    def fault_modules(self, op: str, args: tuple[Any, ...]) -> frozenset[str]:
        """The adapter modules an exception in ``op`` is judged by (:mod:`props.contract.attribution`):
        those of the adapter's classes and, for a matcher call, the matcher's; for ``start``, the
        adapter itself judges (:func:`props.backends.start_backend`)."""
        objs: list[Any] = [self.backend]
        if op == "call" and args and args[0] in self.matchers:
            objs.append(self.matchers[args[0]])
        return adapter_modules(*(type(obj) for obj in objs if obj is not None))

    def _register(self, matcher: Any, mid: int | None = None) -> tuple[int, tuple[str, ...]]:
        mid = self._new_id() if mid is None else mid
        self.matchers[mid] = matcher
        optional = tuple(
            name for name in ("forced_bytes", "validate") if callable(getattr(matcher, name, None))
        )
        return mid, optional


class _ChildSearch:
    """A segmentation search (:func:`props.checks.segments.search_segmentations`) over an engine
    matcher in the worker, run in time slices; counts the engine calls and times the masks, and knows
    which method it was calling (``method``) when one raised."""

    def __init__(self, root: Any, steps: Steps, length: int, eos: np.ndarray, size: int, budget: int) -> None:
        self.root = root
        self.args = (steps, length, eos, size, budget)
        self.search: Generator[None, None, bool | None] | None = None
        self.method = "mask"
        self.calls = 0
        self.mask_ms: list[float] = []

    def _mask(self, m: Any) -> Any:
        self.method = "mask"
        self.calls += 1
        t0 = time.perf_counter()
        mask = m.mask()
        self.mask_ms.append((time.perf_counter() - t0) * 1000)
        return mask

    def _fork_accept_mask(self, m: Any, token_id: int) -> tuple[Any, Any, Any]:
        self.method = "fork"
        self.calls += 1
        child = m.fork()
        self.method = "accept"
        self.calls += 1
        outcome = child.accept(token_id)
        return child, outcome, None if rejected(outcome) else self._mask(child)

    def take(self) -> tuple[int, list[float]]:
        """The calls and mask times since the last take."""
        out = (self.calls, self.mask_ms)
        self.calls, self.mask_ms = 0, []
        return out

    def run(self, slice_s: float) -> tuple[Any, ...]:
        until = time.perf_counter() + slice_s
        if self.search is None:  # the root's mask is the search's first engine call
            steps, length, eos, size, budget = self.args
            root_mask = self._mask(self.root)
            self.search = search_segmentations(
                self.root, root_mask, steps, length, eos, size, budget, self._fork_accept_mask
            )
        try:
            while True:
                next(self.search)
                if time.perf_counter() >= until:
                    return ("more", *self.take())
        except StopIteration as stop:
            return ("done", stop.value, *self.take())


def _error_reply(
    e: BaseException, child: _Child | None = None, op: str = "", args: tuple[Any, ...] = ()
) -> tuple[Any, ...]:
    tb = traceback.format_exc()
    if child is not None:
        why = adapter_fault(e, child.fault_modules(op, args))
        if why is not None:  # the adapter's fault, judged here where the frames are
            return ("adapter", why, str(getattr(child.backend, "version", "unknown")), tb)
    if isinstance(e, MemoryError):
        return ("memory", f"{type(e).__name__}: {e}", tb)
    try:
        blob = pickle.dumps(e)
        pickle.loads(blob)  # exceptions with custom __init__ often pickle but do not unpickle
    except Exception:
        blob = None
    return ("error", blob, type(e).__qualname__, str(e), tb)


def _child_main(read_fd: int, write_fd: int, memory_mb: int, spin_us: float = 0.0) -> None:
    """The worker process: limits, then answer requests until EOF or ``close``."""
    die_with_parent_from_env()
    if memory_mb > 0:
        import resource

        limit = memory_mb << 20
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    requests = _Pipe(read_fd)
    replies = _Pipe(write_fd)
    child = _Child()
    spin_s = spin_us / 1e6
    waiting = _poller(requests)
    while True:
        try:
            if spin_s:
                _spin(waiting, spin_s)
            op, args, drops = requests.recv()
        except (EOFError, OSError):
            return
        if op == "close":
            replies.send(("ok", None))
            return
        try:
            if drops[0] or drops[1]:
                child.handle("drop", drops)
            reply: tuple[Any, ...] = ("ok", child.handle(op, args))
        except BaseException as e:  # everything crosses the pipe; the parent decides what it means
            reply = _error_reply(e, child, op, args)
        try:
            replies.send(reply)
        except Exception as e:  # an unpicklable result
            replies.send(_error_reply(e))


# -- the parent ------------------------------------------------------------------------------------
def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the worker stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the worker was killed by {name}"
    return f"the worker exited with status {returncode}"


class _Process:
    """One child process: its pipes, its log, and a request/response call with a timeout."""

    def __init__(self, memory_mb: int, engine_path: str | None = None, spin_us: float = 0.0) -> None:
        parent_r, child_w = os.pipe()
        child_r, parent_w = os.pipe()
        # the child's stdout and stderr; closed by close()
        self.log: IO[bytes] = tempfile.TemporaryFile(prefix="maskcert-worker-")  # noqa: SIM115
        # The child imports what the parent imports: PYTHONPATH lets ``-m`` find ``props`` (maskcert
        # need not be installed), and _worker_main puts the parent's sys.path first, in its order.
        path = [p for p in sys.path if isinstance(p, str)]
        if engine_path is not None:  # a cached engine release shadows the environment's (engines.py)
            path = [engine_path, *(p for p in path if p != engine_path)]
        env = child_env(dict(os.environ))  # it dies with this process (props.backends.lifetime)
        env["MASKCERT_WORKER_SYS_PATH"] = json.dumps(path)
        env["PYTHONPATH"] = os.pathsep.join(path)
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "props.backends._worker_main",
                    str(child_r),
                    str(child_w),
                    str(memory_mb),
                    str(spin_us),
                ],
                pass_fds=(child_r, child_w),
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                env=env,
                close_fds=True,
                start_new_session=True,  # a Ctrl-C at the terminal is the parent's to handle
            )
        finally:
            os.close(child_r)
            os.close(child_w)
        register(self.proc)
        self.requests = _Pipe(parent_w)
        self.replies = _Pipe(parent_r)
        self.answered = _poller(self.replies)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 4000) -> str:
        try:
            self.log.flush()
            size = os.fstat(self.log.fileno()).st_size
            self.log.seek(max(0, size - limit))
            return self.log.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a process that ignores SIGKILL
            self.proc.wait(timeout=10)
        for conn in (self.requests, self.replies):
            conn.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.requests.send(("close", (), ((), ())))
                if self.answered.poll(2000):
                    self.replies.recv()
                self.proc.wait(timeout=2)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self.log.close()


def _shutdown(proc_box: list[_Process | None]) -> None:
    proc = proc_box[0]
    if proc is not None:
        proc_box[0] = None
        proc.close()


class WorkerBackend:
    """A backend adapter (registered name or ``module:Class``) running in a worker process.

    Exceptions of the adapter's own making arrive as :class:`~props.contract.attribution.AdapterFault`
    (judged in the child, where the traceback's frames are), the engine's as themselves.

    ``timeout_s`` bounds every matcher call, ``compile_timeout_s`` every ``compile`` (default: four
    times ``timeout_s``, at least 60 s), ``start_timeout_s`` the worker's start (imports, adapter
    construction); ``memory_mb`` is the child's ``RLIMIT_AS`` (0: none). ``options`` go to the
    adapter's constructor. ``engine_path`` is a directory put first on the child's ``sys.path``: an
    engine release installed there (:func:`props.backends.engines.install_engine`) is the one the
    adapter imports, whatever the environment has. Starting a worker takes a second or two (it imports
    the backend). ``spin_us`` is how long each side polls before it sleeps on the other's message
    (module doc; None: :func:`default_spin_us`).

    ``deadline`` (``time.monotonic()``, None: none) is the run's end (module doc): a call in progress
    then is cut (:class:`DeadlineReached`), later calls are not sent. ``last_timeout`` is the last
    :class:`WorkerTimeout` raised (how long the cut call ran: ``elapsed_s``).
    """

    faults_attributed = True

    def __init__(
        self,
        backend: str,
        *,
        options: dict[str, Any] | None = None,
        timeout_s: float = 30.0,
        compile_timeout_s: float | None = None,
        memory_mb: int = 8192,
        start_timeout_s: float = 120.0,
        engine_path: str | os.PathLike[str] | None = None,
        spin_us: float | None = None,
    ) -> None:
        self.target = backend
        self.spin_us = default_spin_us() if spin_us is None else spin_us
        self.engine_path = None if engine_path is None else os.fspath(engine_path)
        self.options = dict(options or {})
        self.timeout_s = timeout_s
        self.compile_timeout_s = (
            compile_timeout_s if compile_timeout_s is not None else max(60.0, 4 * timeout_s)
        )
        self.memory_mb = memory_mb
        self.start_timeout_s = start_timeout_s
        self.deadline: float | None = None
        self.last_timeout: WorkerTimeout | None = None
        self.generation = 0
        self.restarts = 0
        self._lock = threading.RLock()
        self._box: list[_Process | None] = [None]
        self._finalizer = weakref.finalize(self, _shutdown, self._box)
        self._sent_vocabularies: set[str] = set()
        self._drops: tuple[list[int], list[int]] = ([], [])
        self.name = backend
        self.version = "unknown"
        self.profile = DeclaredProfile()
        self._start()

    # -- process management -----------------------------------------------------------------------
    def _start(self) -> None:
        _shutdown(self._box)
        self.generation += 1
        self._sent_vocabularies = set()
        self._drops = ([], [])
        self._parent_ids = itertools.count(-1, -1)  # ids of forks named here (fork_accept)
        self._box[0] = _Process(self.memory_mb, self.engine_path, self.spin_us)
        name, version, profile = self._call("start", (self.target, self.options), self.start_timeout_s)
        self.name, self.version, self.profile = name, version, profile

    def restart(self) -> None:
        """A fresh worker (new generation): handles of the old one become stale."""
        with self._lock:
            self.restarts += 1
            self._start()

    def close(self) -> None:
        """Stop the worker. A later ``compile`` starts a new one."""
        with self._lock:
            _shutdown(self._box)

    def __enter__(self) -> WorkerBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """Whether a worker is running (false after a timeout or a crash, until the next start)."""
        proc = self._box[0]
        return proc is not None and proc.alive()

    @property
    def pid(self) -> int | None:
        proc = self._box[0]
        return None if proc is None else proc.proc.pid

    def log_tail(self, limit: int = 4000) -> str:
        """The worker's last output (stdout and stderr): warnings, C++ check messages."""
        proc = self._box[0]
        return "" if proc is None else proc.log_tail(limit)

    def _call(self, op: str, args: tuple[Any, ...], timeout_s: float) -> Any:
        with self._lock:
            proc = self._ready(op, args)
            return self._exchange(proc, op, args, timeout_s, self._take_drops(op))

    def _ready(self, op: str, args: tuple[Any, ...]) -> _Process:
        """The running worker, for a call not yet sent: DeadlineReached past the run's deadline,
        WorkerCrashed when no worker runs."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DeadlineReached(_operation(op, args), None, self.name)
        proc = self._box[0]
        if proc is None or not proc.alive():
            code = None if proc is None else proc.proc.returncode
            tail = "" if proc is None else proc.log_tail()
            self._box[0] = None
            raise WorkerCrashed(
                op, "no worker is running (" + _describe_exit(code) + ")", self.name, code, tail
            )
        return proc

    def _take_drops(self, op: str) -> tuple[list[int], list[int]]:
        """The ids dropped since the last request, which go with this one (module doc)."""
        drops: tuple[list[int], list[int]] = ([], [])
        if op != "start" and (self._drops[0] or self._drops[1]):
            drops = (list(self._drops[0]), list(self._drops[1]))
            self._drops[0].clear()
            self._drops[1].clear()
        return drops

    def _call_parts(self, parts: list[tuple[str, str, tuple[Any, ...]]], timeout_s: float) -> list[Any]:
        """Send every part ``(name, op, args)``, then read their answers in order, each within
        ``timeout_s``: what each returned. The child runs them one after the other, as if each had
        been its own call; where one raised, the rest are still read (to keep the pipe in step,
        unless the worker died) and the first that raised comes as :class:`PartFailed` with its name.
        Every request is written before any answer is read, so parts carry small arguments (a pipe
        holds 64 KiB)."""
        with self._lock:
            _, op0, args0 = parts[0]
            proc = self._ready(op0, args0)
            drops = self._take_drops(op0)
            for k, (_, op, args) in enumerate(parts):
                self._send(proc, op, args, drops if k == 0 else None)
            values: list[Any] = []
            failed: PartFailed | None = None
            for name, op, args in parts:
                try:
                    values.append(self._receive(proc, op, args, timeout_s))
                except Exception as e:  # noqa: BLE001 - handed to the caller with the part that raised
                    failed = failed or PartFailed(name, e)
                    if self._box[0] is not proc:  # the worker died or was cut: nothing more to read
                        break
            if failed is not None:
                raise failed from failed.error
            return values

    def _exchange(
        self,
        proc: _Process,
        op: str,
        args: tuple[Any, ...],
        timeout_s: float,
        drops: tuple[list[int], list[int]] | None = None,
    ) -> Any:
        self._send(proc, op, args, drops)
        return self._receive(proc, op, args, timeout_s)

    def _send(
        self, proc: _Process, op: str, args: tuple[Any, ...], drops: tuple[list[int], list[int]] | None
    ) -> None:
        try:
            proc.requests.send((op, args, drops or ((), ())))
        except (OSError, ValueError):
            self._dead(proc, op)

    def _receive(self, proc: _Process, op: str, args: tuple[Any, ...], timeout_s: float) -> Any:
        """The answer to the request sent last but not yet read, within ``timeout_s`` (the run's
        deadline cuts it first when it comes first); see the module doc for what is raised."""
        if self.spin_us:
            _spin(proc.answered, self.spin_us / 1e6)
        started = time.monotonic()
        deadline = started + timeout_s
        # The run's deadline, with its grace, cuts the call when it comes first (DeadlineReached).
        cut = None if self.deadline is None else self.deadline + DEADLINE_GRACE_S
        by_run = cut is not None and cut < deadline
        end = cut if by_run and cut is not None else deadline
        while True:
            remaining = end - time.monotonic()
            try:
                ready = bool(proc.answered.poll(1000 * max(0.0, min(remaining, 0.5))))
            except (OSError, EOFError):
                self._dead(proc, op)
            if ready:
                break
            if not proc.alive():
                self._dead(proc, op)
            if remaining <= 0:
                tail = proc.log_tail()
                proc.kill()
                self._box[0] = None
                elapsed = time.monotonic() - started
                if by_run:
                    raise DeadlineReached(_operation(op, args), elapsed, self.name, tail, end - started)
                self.last_timeout = WorkerTimeout(op, timeout_s, self.name, tail, elapsed)
                raise self.last_timeout
        try:
            reply = proc.replies.recv()
        except (OSError, EOFError):
            self._dead(proc, op)
        if reply[0] == "ok":
            return reply[1]
        self._raise_reply(reply, op)

    def _raise_reply(self, reply: tuple[Any, ...], op: str) -> NoReturn:
        """Raise what an error reply from the child (:func:`_error_reply`) says (module doc)."""
        status = reply[0]
        if status == "memory":
            raise WorkerMemoryExceeded(op, self.memory_mb, reply[1], self.name)
        if status == "adapter":
            _, why, version, tb = reply
            raise AdapterFault(self.name, version, op, why) from _RemoteTraceback(tb)
        _, blob, type_name, message, tb = reply
        exc: BaseException | None = None
        if blob is not None:
            try:
                exc = pickle.loads(blob)
            except Exception:
                exc = None
        if not isinstance(exc, Exception):  # unpicklable, or SystemExit / KeyboardInterrupt / a Rust panic:
            raise RemoteError(op, type_name, message, tb, self.name)  # never re-raised as such here
        raise exc from _RemoteTraceback(tb)

    def _dead(self, proc: _Process, op: str) -> NoReturn:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.proc.wait(timeout=5)
        code = proc.proc.poll()
        tail = proc.log_tail()
        proc.kill()
        self._box[0] = None
        raise WorkerCrashed(op, _describe_exit(code), self.name, code, tail)

    def _check_generation(self, generation: int, op: str) -> None:
        if generation != self.generation or self._box[0] is None:
            raise WorkerCrashed(op, "stale handle: the worker that owned it has died or restarted", self.name)

    def _drop(self, generation: int, kind: int, ident: int) -> None:
        if generation == self.generation:
            self._drops[kind].append(ident)

    # -- the Backend protocol ---------------------------------------------------------------------
    def compile(self, spec: Any, vocabulary: Vocabulary) -> CompileOutcome:
        """Compile in the worker (starting a new one if the last died). Refusals are values."""
        with self._lock:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise DeadlineReached("compile", None, self.name)  # no fresh worker to start for nothing
            if not self.alive:
                self.restart()
            key = str(vocabulary.fingerprint)
            payload = None if key in self._sent_vocabularies else vocabulary
            outcome = self._call("compile", (spec, key, payload), self.compile_timeout_s)
            self._sent_vocabularies.add(key)
            if isinstance(outcome, Refused):
                return outcome
            _, cid, compile_ms = outcome
            handle = RemoteHandle(self.generation, cid)
            compiled = Compiled(handle, compile_ms)
            weakref.finalize(compiled, self._drop, self.generation, 0, cid).atexit = False
            return compiled

    def matcher(self, compiled: Compiled) -> WorkerMatcher:
        handle = _remote_handle(compiled, "matcher")
        with self._lock:
            self._check_generation(handle.generation, "matcher")
            mid, optional = self._call("matcher", (handle.id,), self.timeout_s)
            return WorkerMatcher(self, handle.generation, mid, optional)

    # -- beyond the protocol ----------------------------------------------------------------------
    def first_mask_ms(self, compiled: Compiled) -> float:
        """Milliseconds the worker takes to make a matcher for ``compiled`` and compute its first
        mask (the latency to the first constrained step after a compile), timed in the worker so
        that the mask's trip through the pipe is not counted. The matcher is not kept. Bounded by
        ``timeout_s``: a hang raises :class:`WorkerTimeout`, like any other call."""
        handle = _remote_handle(compiled, "first_mask_ms")
        with self._lock:
            self._check_generation(handle.generation, "first_mask")
            return float(self._call("first_mask", (handle.id,), self.timeout_s))


def _operation(op: str, args: tuple[Any, ...]) -> str:
    """What a request does, in the words of the Backend protocol: ``compile``, or the matcher method
    of a ``call`` (``mask``, ``accept``, ...; the parts of combined calls by the method they run)."""
    if op == "call" and len(args) > 1:
        return _PART_METHODS.get(str(args[1]), str(args[1]))
    return op


#: The worker's own call methods for the parts of combined calls, and the method each one runs.
_PART_METHODS = {"fork_as": "fork", "mask_if_accepted": "mask"}


def _remote_handle(compiled: Compiled, method: str) -> RemoteHandle:
    handle = compiled.handle
    if not isinstance(handle, RemoteHandle):
        raise StateError(f"WorkerBackend.{method} needs a Compiled returned by this WorkerBackend.compile")
    return handle


class WorkerMatcher:
    """A matcher living in a :class:`WorkerBackend`'s worker; every method is one round trip."""

    faults_attributed = True  # the child judged whose fault an exception is (AdapterFault)

    def __init__(self, backend: WorkerBackend, generation: int, mid: int, optional: tuple[str, ...]) -> None:
        self._backend = backend
        self._generation = generation
        self._mid = mid
        self._optional = frozenset(optional)
        weakref.finalize(self, backend._drop, generation, 1, mid).atexit = False

    def _call(self, method: str, *args: Any) -> Any:
        b = self._backend
        with b._lock:
            b._check_generation(self._generation, method)
            return b._call("call", (self._mid, method, args), b.timeout_s)

    def mask(self) -> np.ndarray:
        return np.asarray(self._call("mask"))

    def accept(self, token_id: int) -> TokenOutcome:
        out: TokenOutcome = self._call("accept", int(token_id))
        return out

    def is_accepting(self) -> bool:
        return bool(self._call("is_accepting"))

    def is_terminated(self) -> bool:
        return bool(self._call("is_terminated"))

    def rollback(self, k: int) -> None:
        self._call("rollback", k)

    def fork(self) -> WorkerMatcher:
        mid, optional = self._call("fork")
        return WorkerMatcher(self._backend, self._generation, mid, optional)

    def fork_accept(self, token_id: int) -> tuple[WorkerMatcher, TokenOutcome]:
        """``fork()``, then ``accept(token_id)`` on the fork, in one round trip: the fork takes an id
        the parent chose (negative: the child numbers its own from 1 up), so the accept can name it
        before the fork has answered. A part that raises comes as :class:`PartFailed` naming it."""
        child, (outcome,) = self._fork_then(
            lambda mid: [("accept", "call", (mid, "accept", (int(token_id),)))]
        )
        return child, outcome

    def _fork_then(
        self, parts_of: Callable[[int], list[tuple[str, str, tuple[Any, ...]]]]
    ) -> tuple[WorkerMatcher, list[Any]]:
        """A fork under an id chosen here, then ``parts_of(id)`` on it, in one round trip: the fork and
        what the parts returned. A fork whose later part raised is dropped, as its handle would be."""
        b = self._backend
        with b._lock:
            b._check_generation(self._generation, "fork")
            mid = next(b._parent_ids)
            try:
                optional, *rest = b._call_parts(
                    [("fork", "call", (self._mid, "fork_as", (mid,))), *parts_of(mid)], b.timeout_s
                )
            except PartFailed as e:
                if e.operation != "fork":  # the fork exists in the child: drop it with the next request
                    b._drop(self._generation, 1, mid)
                raise
        return WorkerMatcher(b, self._generation, mid, optional), rest

    def accept_mask(self, token_id: int) -> tuple[TokenOutcome, tuple[np.ndarray, float] | None]:
        """``accept(token_id)``, then ``mask()`` unless the accept rejected it, in one round trip: the
        outcome, and the mask with the milliseconds the worker took to compute it (None after a
        rejection: no mask was asked of the engine). The engine gets the calls it would get one by
        one; a part that raises comes as :class:`PartFailed` naming it."""
        b = self._backend
        with b._lock:
            b._check_generation(self._generation, "accept")
            outcome, masked = b._call_parts(self._accept_mask_parts(self._mid, token_id), b.timeout_s)
        return outcome, _masked(masked)

    def fork_accept_mask(
        self, token_id: int
    ) -> tuple[WorkerMatcher, TokenOutcome, tuple[np.ndarray, float] | None]:
        """:meth:`fork_accept`, then the fork's ``mask()`` unless the accept rejected it
        (:meth:`accept_mask`), in one round trip."""
        child, (outcome, masked) = self._fork_then(lambda mid: self._accept_mask_parts(mid, token_id))
        return child, outcome, _masked(masked)

    def segment_search(
        self, steps: Steps, length: int, eos: np.ndarray, size: int, budget: int
    ) -> tuple[bool | None, int, list[float]]:
        """The segmentation search from this matcher (:func:`props.checks.segments.search_segmentations`),
        run by the worker over its engine matcher in slices of :data:`SEARCH_SLICE_S`, each one call
        with the timeout of one engine call more (a hung engine call is cut as any other): the
        verdict, the engine calls made and each mask's milliseconds. An engine call that raised comes
        as :class:`PartFailed` naming it, with the calls made."""
        b = self._backend
        calls, mask_ms = 0, []
        method: str = "segment_search"
        margs: tuple[Any, ...] = (steps, length, eos, size, budget, SEARCH_SLICE_S)
        more: tuple[Any, ...] = (SEARCH_SLICE_S,)
        while True:
            with b._lock:
                b._check_generation(self._generation, "segment_search")
                reply = b._call("call", (self._mid, method, margs), b.timeout_s + SEARCH_SLICE_S)
            if reply[0] == "raised":
                _, part, made, error = reply
                try:
                    b._raise_reply(error, part)
                except Exception as e:  # noqa: BLE001 - handed over with the part that raised
                    raise PartFailed(part, e, calls + made) from e
            calls += reply[-2]
            mask_ms += reply[-1]
            if reply[0] == "done":
                return reply[1], calls, mask_ms
            method, margs = "segment_more", more

    @staticmethod
    def _accept_mask_parts(mid: int, token_id: int) -> list[tuple[str, str, tuple[Any, ...]]]:
        return [
            ("accept", "call", (mid, "accept", (int(token_id),))),
            ("mask", "call", (mid, "mask_if_accepted", ())),
        ]

    def __getattr__(self, name: str) -> Any:
        # forced_bytes / validate exist exactly when the worker's matcher has them
        if name in ("forced_bytes", "validate") and name in self.__dict__.get("_optional", ()):
            return lambda *args: self._call(name, *args)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"WorkerMatcher({self._backend.name}, generation={self._generation}, id={self._mid})"


def _masked(answer: Any) -> tuple[np.ndarray, float] | None:
    """The ``mask_if_accepted`` answer: the mask as an array, with the worker's milliseconds."""
    return None if answer is None else (np.asarray(answer[0]), float(answer[1]))


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: WorkerBackend, matcher: WorkerMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
