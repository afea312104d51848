"""One shard of a campaign: run properties under the ``fuzz`` profile until the deadline.

Theory of operation. A shard first *replays* (``phases=[reuse, shrink]``) the properties assigned to
it — property ``i`` belongs to shard ``i % shards`` — so every failure stored in the example database
by an earlier run is reproduced before anything new is tried. Then it *explores*: round-robin over all
properties, each run with ``phases=[generate, target, shrink]`` (no reuse, so a known failure cannot
end exploration at once) and a fresh seed derived from ``(seed, shard, iteration)``; each run gets a
time slice.

Time and signals reach inside Hypothesis through the property's ``hypothesis.inner_test``, which the
shard wraps for the run (Hypothesis documents it as reassignable): before each example the wrapper
checks the stop flag and the clock and raises :class:`_Stop`, a ``BaseException`` Hypothesis does not
catch. A run with no failure yet stops at the end of its slice; a run that is shrinking a failure
gets a grace period; a stop request (SIGINT/SIGTERM) ends it at once. The wrapper also keeps the
findings of the latest failing example, so a run cut short still reports its best-shrunk findings.

Everything a shard learns goes to ``sink`` as a plain dict (picklable, so it can cross a process
queue or a Ray queue): ``finding``, ``progress``, ``error`` and finally ``done``.
"""

from __future__ import annotations

import functools
import hashlib
import random
import time
import traceback
import unittest
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed

from maskcert.fuzz._config import CampaignConfig, open_database
from maskcert.fuzz._property import PropertyLike, coverage_snapshot
from maskcert.fuzz._targets import build_properties
from props.checks.hypothesis_profiles import fuzz_settings
from props.contract.findings import Finding, FindingFailure

__all__ = ["ShardSpec", "run_shard", "Sink"]

Sink = Callable[[dict[str, Any]], None]

REPLAY_PHASES = (Phase.reuse, Phase.shrink)
EXPLORE_PHASES = (Phase.generate, Phase.target, Phase.shrink)
PROGRESS_EVERY_S = 0.5


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``shard`` of ``shards``; ``end_at`` is the campaign's deadline (``time.time()``)."""

    config: CampaignConfig
    shard: int
    shards: int
    end_at: float
    database: str
    known_ids: frozenset[str] = frozenset()

    @property
    def grace_s(self) -> float:
        """How long a run may overrun its slice (or the deadline) to finish shrinking a failure."""
        return min(300.0, max(1.0, 0.25 * self.config.budget_s))

    def slice_s(self, n_properties: int) -> float:
        return min(120.0, max(2.0, self.config.budget_s / (2 * max(n_properties, 1))))

    def run_seed(self, iteration: int) -> int:
        return random.Random(f"{self.config.seed}:{self.shard}:{iteration}").getrandbits(63)


class _Stop(BaseException):
    """Raised before an example when the run must end (slice over, deadline, stop request)."""


@dataclass
class _Counters:
    examples: int = 0
    runs: int = 0
    last_progress: float = 0.0
    property_examples: dict[str, int] = field(default_factory=dict)
    coverage_base: dict[str, dict[str, int]] = field(default_factory=coverage_snapshot)
    known: set[str] = field(default_factory=set)
    known_hits: int = 0


def _database_key(config: CampaignConfig, name: str) -> bytes:
    return hashlib.sha384(f"maskcert-fuzz\0{config.target}\0{config.backend}\0{name}".encode()).digest()


def _caused_by_stop(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (_Stop, KeyboardInterrupt)):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _failures(exc: BaseException) -> tuple[list[Finding], list[BaseException]]:
    """The findings in an exception (or an exception group, e.g. several bugs or a flaky one), and
    the exceptions that are not findings."""
    if isinstance(exc, FindingFailure):
        return list(exc.findings), []
    subs = getattr(exc, "exceptions", None)  # an exception group (the ``exceptiongroup`` backport on 3.10)
    if isinstance(subs, (tuple, list)):
        found: list[Finding] = []
        other: list[BaseException] = []
        for sub in subs:
            f, o = _failures(sub)
            found += f
            other += o
        if not found and not other:
            other.append(exc)
        return found, other
    return [], [exc]


def _prepare(prop: PropertyLike, s: settings, run_seed: int, key: bytes) -> Any:
    """The property's test with the run's settings, seed and database key applied. A state machine
    (``props.checks.properties.Property.machine``) gets a fresh test from its ``runner(settings)``."""
    test: Any = prop.runner(s) if getattr(prop, "machine", None) is not None else prop.test  # type: ignore[attr-defined]
    # ``seed`` also switches the database off, so it goes first and the settings after it;
    # ``settings(...)(test)`` refuses a test that already carries settings (its own, or an earlier
    # run's): the campaign owns them, so that marker goes too.
    hypothesis_seed(run_seed)(test)
    if hasattr(test, "_hypothesis_internal_settings_applied"):
        delattr(test, "_hypothesis_internal_settings_applied")
    s(test)
    # One database key per property name: properties made by one factory share their source code,
    # which is what Hypothesis would hash otherwise.
    test._hypothesis_internal_database_key = key
    return test


@functools.lru_cache(maxsize=4)
def _database(spec: str) -> Any:
    return open_database(spec)


def _coverage_since(base: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for kind, names in coverage_snapshot().items():
        for name, n in names.items():
            d = n - base.get(kind, {}).get(name, 0)
            if d:
                out.setdefault(kind, {})[name] = d
    return out


def _run_property(
    prop: PropertyLike,
    phase: str,
    run_seed: int,
    soft_end: float,
    hard_end: float,
    spec: ShardSpec,
    base: settings,
    counters: _Counters,
    sink: Sink,
    should_stop: Callable[[], bool],
) -> bool:
    """One Hypothesis run of ``prop``; ``False`` when it was stopped by a stop request."""
    database = _database(spec.database)
    key = _database_key(spec.config, prop.name)
    if phase == "reuse" and not any(True for _ in database.fetch(key)):
        return True  # nothing stored for this property: nothing to replay
    s = settings(
        base,
        database=database,
        phases=REPLAY_PHASES if phase == "reuse" else EXPLORE_PHASES,
        derandomize=False,
        verbosity=Verbosity.quiet,
        report_multiple_bugs=True,
        print_blob=False,
    )
    test = _prepare(prop, s, run_seed, key)
    handle = getattr(test, "hypothesis", None)
    if handle is None:
        sink(
            {
                "type": "error",
                "shard": spec.shard,
                "property": prop.name,
                "phase": phase,
                "error": f"property {prop.name!r}: test is not a @given function",
            }
        )
        return True
    inner = handle.inner_test
    latest: list[Finding] = []
    stopped_by_request = [False]
    raised_stop = [False]

    def progress(force: bool = False) -> None:
        now = time.monotonic()
        if force or now - counters.last_progress >= PROGRESS_EVERY_S:
            counters.last_progress = now
            sink(
                {
                    "type": "progress",
                    "shard": spec.shard,
                    "examples": counters.examples,
                    "coverage": _coverage_since(counters.coverage_base),
                }
            )

    @functools.wraps(inner)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        now = time.time()
        if should_stop():
            stopped_by_request[0] = True
        if stopped_by_request[0] or now >= hard_end or (now >= soft_end and not latest):
            raised_stop[0] = True
            raise _Stop
        counters.examples += 1
        counters.property_examples[prop.name] = counters.property_examples.get(prop.name, 0) + 1
        progress()
        try:
            return inner(*args, **kwargs)
        except FindingFailure as e:
            if phase == "explore" and e.findings and all(f.id in counters.known for f in e.findings):
                # Already reported: let Hypothesis look past it, so one shallow bug cannot hide the
                # others (the replay phase is where known failures are reproduced).
                counters.known_hits += 1
                return None
            latest[:] = e.findings
            raise

    counters.runs += 1
    found: list[Finding] = []
    errors: list[BaseException] = []
    handle.inner_test = guarded
    try:
        test()
    except _Stop:
        found = list(latest)
    except KeyboardInterrupt:  # Ray's cancel, or a second Ctrl-C: report what we have, then go
        stopped_by_request[0] = True
        found = list(latest)
    except BaseException as e:  # noqa: BLE001 - a failing property; sorted out below
        found, errors = _failures(e)
        # A stop raised where Hypothesis expected more draws (``st.data()``) comes back wrapped, e.g.
        # as FlakyStrategyDefinition "during handling of" our _Stop: it is still just a stop.
        # Once we have raised a stop, whatever else Hypothesis raises is its consequence.
        stop = [x for x in errors if raised_stop[0] or _caused_by_stop(x)]
        # SkipTest: every stored example is gone (replayed, passed, deleted) — nothing to report
        errors = [x for x in errors if x not in stop and not isinstance(x, unittest.SkipTest)]
        if stop and not found:
            found = list(latest)
    finally:
        handle.inner_test = inner
    for f in found:
        counters.known.add(f.id)
        sink(
            {
                "type": "finding",
                "shard": spec.shard,
                "property": prop.name,
                "phase": phase,
                "finding": f.to_json(),
            }
        )
    for x in errors:
        text = "".join(traceback.format_exception(type(x), x, x.__traceback__, limit=-3)).strip()
        sink({"type": "error", "shard": spec.shard, "property": prop.name, "phase": phase, "error": text})
    progress(force=True)
    return not stopped_by_request[0]


def run_shard(spec: ShardSpec, sink: Sink, should_stop: Callable[[], bool]) -> None:
    """Replay this shard's share of the database, then explore until the deadline or a stop."""
    counters = _Counters(known=set(spec.known_ids))
    reason = "budget"
    try:
        props = build_properties(spec.config)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which exits non-zero
        sink(
            {
                "type": "error",
                "shard": spec.shard,
                "property": "",
                "phase": "setup",
                "error": f"{type(e).__name__}: {e}",
            }
        )
        props = []
    base = fuzz_settings()
    if props:
        grace = spec.grace_s
        for i, prop in enumerate(props):
            if i % spec.shards != spec.shard:
                continue
            # Replay is owed even when starting took the whole budget: it gets at least the grace period.
            replay_end = max(spec.end_at, time.time() + grace)
            if not _run_property(
                prop,
                "reuse",
                spec.run_seed(-1 - i),
                replay_end,
                replay_end + grace,
                spec,
                base,
                counters,
                sink,
                should_stop,
            ):
                reason = "signal"
                break
        iteration = 0
        slice_s = spec.slice_s(len(props))
        while reason == "budget" and time.time() < spec.end_at:
            if should_stop():
                reason = "signal"
                break
            prop = props[(iteration + spec.shard) % len(props)]
            soft_end = min(spec.end_at, time.time() + slice_s)
            if not _run_property(
                prop,
                "explore",
                spec.run_seed(iteration),
                soft_end,
                min(soft_end, spec.end_at) + grace,
                spec,
                base,
                counters,
                sink,
                should_stop,
            ):
                reason = "signal"
            iteration += 1
    if should_stop():
        reason = "signal"
    sink(
        {
            "type": "done",
            "shard": spec.shard,
            "examples": counters.examples,
            "runs": counters.runs,
            "known_hits": counters.known_hits,
            "property_examples": dict(counters.property_examples),
            "coverage": _coverage_since(counters.coverage_base),
            "stopped": reason,
        }
    )
