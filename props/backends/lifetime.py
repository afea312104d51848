"""Child processes never outlive the maskcert process that started them.

maskcert starts children of three kinds: a backend's worker subprocess (:mod:`props.backends.worker`,
in a session of its own so that a Ctrl-C at the terminal is the parent's to handle), spawned shard
workers (:mod:`maskcert.sharding`) and reproducer scripts (:mod:`maskcert.bisect`). A CI runner that
cancels a job sends SIGINT, then SIGTERM, then SIGKILL; whichever one ends the parent, nothing may be
left running. Two mechanisms, both needed:

* **Linux's parent-death signal** (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, prctl(2)): set in the child
  (:func:`die_with_parent`), it makes the kernel kill the child when the parent dies, by SIGKILL
  included. The kernel sends it when the *thread* that created the child exits, so it is asked for
  only for children started from the main thread (:func:`child_env`; a worker thread that starts a
  child and ends would otherwise kill it). It survives ``execve`` of a non-set-user-ID program. On
  other systems it is unavailable and :func:`die_with_parent` does nothing.
* **A registry of live children** (:func:`register`, :func:`kill_registered`): what a second signal
  kills explicitly before the process exits at once (:func:`maskcert.sharding.hard_exit`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import weakref

__all__ = [
    "PARENT_ENV",
    "child_env",
    "die_with_parent",
    "die_with_parent_from_env",
    "register",
    "kill_registered",
]

PARENT_ENV = "MASKCERT_DIE_WITH_PARENT"  # the pid whose death ends the child (set by child_env)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_live: weakref.WeakSet[subprocess.Popen[bytes] | subprocess.Popen[str]] = weakref.WeakSet()
_lock = threading.Lock()


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child about to be started from this thread: it names this process as the
    parent whose death ends the child, when started from the main thread (module doc), else it
    clears that name."""
    out = dict(env)
    if threading.current_thread() is threading.main_thread():
        out[PARENT_ENV] = str(os.getpid())
    else:
        out.pop(PARENT_ENV, None)
    return out


def die_with_parent(parent_pid: int) -> bool:
    """In a child: ask the kernel for SIGKILL when the parent ``parent_pid`` dies (Linux only). If the
    parent is already gone (this process was re-parented before the request), exit now. Returns
    whether the request was made."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the request: it would never come
    return True


def die_with_parent_from_env() -> bool:
    """:func:`die_with_parent` for the parent named in the environment by :func:`child_env`, if any."""
    value = os.environ.get(PARENT_ENV, "")
    return value.isdigit() and die_with_parent(int(value))


def register(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """Remember a live child for :func:`kill_registered` (weakly: a collected Popen is forgotten)."""
    with _lock:
        _live.add(proc)


def kill_registered() -> int:
    """SIGKILL every registered child that still runs; returns how many were signalled. Safe in a
    signal handler (no lock is waited for: a registry being changed right now is skipped)."""
    if not _lock.acquire(blocking=False):
        return 0
    try:
        procs = list(_live)
    finally:
        _lock.release()
    n = 0
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(OSError):
                p.kill()
                n += 1
    return n


def signal_name(signum: int | None) -> str:
    """``SIGTERM`` for 15; ``a stop request`` when no signal is known (how reports name a signal)."""
    if signum is None:
        return "a stop request"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
