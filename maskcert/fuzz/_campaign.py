"""``run_campaign``: shards in this process, in local worker processes, or as Ray tasks; one parent
that owns ``findings.jsonl``, the live progress line and ``campaign.json``.

Theory of operation. The parent checks the configuration, computes the deadline and starts the
shards (see :mod:`maskcert.fuzz._runner`) on :mod:`maskcert.sharding`, the mechanism ``certify
--workers`` shares. Shards never write files other than the example database:
they send messages, and the parent writes each new finding (deduplicated by id against the file and
the run) as soon as it arrives — in-process through a callback, across processes through a
``multiprocessing`` queue, on Ray through a ``ray.util.queue.Queue``. SIGINT and SIGTERM set a stop
flag that the shards see before their next example (workers through an ``Event``; Ray tasks are
cancelled); shards then report what they hold and the parent drains every message before it writes
``campaign.json`` and returns; ``maskcert fuzz`` then exits 128 + the signal. A second signal ends the
process at once (:func:`maskcert.sharding.hard_exit`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from maskcert.fuzz._config import CampaignConfig, FuzzUsageError
from maskcert.fuzz._log import FindingsLog
from maskcert.fuzz._runner import ShardSpec, run_shard
from maskcert.fuzz._targets import check_target
from maskcert.sharding import ClusterUnavailable, Shards, run_shards, signal_name, signals
from props.checks.defects import group, reference_grammars
from props.contract.findings import INVARIANTS, Finding

__all__ = ["FindingEvent", "CampaignResult", "run_campaign"]


@dataclass(frozen=True)
class FindingEvent:
    """A finding as it arrived: which shard, property and phase (``reuse`` or ``explore``), seconds
    since the start, and whether it was new to ``findings.jsonl``."""

    id: str
    invariant: str
    property: str
    phase: str
    shard: int
    t: float
    new: bool


@dataclass
class CampaignResult:
    """What a campaign did. ``findings``: one per id seen in this run (new or already on file);
    ``replayed``: how many of them the replay phase reproduced; ``stopped``: ``budget`` or
    ``signal`` (``signal``: its number, None when no signal stopped it); ``errors``: properties that
    raised something other than a finding, shard crashes. ``exit_code``: 128 + the signal when one
    stopped the campaign (as shells expect), else 1 on findings or errors, else 0."""

    config: CampaignConfig
    out_dir: Path
    database: str
    seed: int
    elapsed_s: float = 0.0
    examples: int = 0
    runs: int = 0
    stopped: str = "budget"
    signal: int | None = None
    events: list[FindingEvent] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    new_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    coverage: dict[str, dict[str, int]] = field(default_factory=dict)
    property_examples: dict[str, int] = field(default_factory=dict)
    shards_done: int = 0

    @property
    def findings_path(self) -> Path:
        return self.out_dir / "findings.jsonl"

    @property
    def replayed(self) -> int:
        return len({e.id for e in self.events if e.phase == "reuse"})

    @property
    def exit_code(self) -> int:
        if self.signal is not None:
            return 128 + self.signal
        return 1 if self.findings or self.errors else 0

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {
            "target": c.target,
            "backend": c.backend,
            "tokenizers": list(c.tokenizers),
            "budget_s": c.budget_s,
            "workers": c.workers,
            "cluster": c.cluster,
            "database": self.database,
            "seed": self.seed,
            "elapsed_s": round(self.elapsed_s, 3),
            "examples": self.examples,
            "runs": self.runs,
            "stopped": self.stopped,
            "signal": None if self.signal is None else signal_name(self.signal),
            "findings": [f.id for f in self.findings],
            "new_findings": list(self.new_ids),
            "replayed": self.replayed,
            "events": [e.__dict__ for e in self.events],
            "errors": list(self.errors),
            "coverage": self.coverage,
            "property_examples": self.property_examples,
            "defects": [
                {
                    "id": d.id,
                    "signature": d.signature,
                    "severity": str(d.severity),
                    "summary": d.summary(),
                    "findings": [f.id for f in d.findings],
                }
                for d in group(self.findings, reference_grammars())
            ],
        }


class _Progress:
    """The live line: examples/s, findings, coverage of keywords and invariants."""

    def __init__(self, config: CampaignConfig, stream: IO[str], start: float) -> None:
        self.config = config
        self.stream = stream
        self.start = start
        tty = bool(getattr(stream, "isatty", lambda: False)())
        self.live = config.progress if config.progress is not None else tty
        self.examples: dict[int, int] = {}
        self.coverage: dict[int, dict[str, dict[str, int]]] = {}
        self.last = 0.0
        self.width = 0

    def merged_coverage(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for snap in self.coverage.values():
            for kind, names in snap.items():
                dst = out.setdefault(kind, {})
                for name, n in names.items():
                    dst[name] = dst.get(name, 0) + n
        return out

    def line(self, findings: int, new: int) -> str:
        elapsed = time.monotonic() - self.start
        n = sum(self.examples.values())
        cov = self.merged_coverage()
        inv = sum(1 for k in cov.get("invariant", {}) if k in INVARIANTS)
        return (
            f"fuzz {self.config.target}/{self.config.backend}: {elapsed:.0f}/{self.config.budget_s:.0f}s"
            f"  {n} examples ({n / elapsed if elapsed > 0 else 0.0:.0f}/s)"
            f"  findings {findings} ({new} new)"
            f"  keywords {len(cov.get('keyword', {}))}  invariants {inv}/{len(INVARIANTS)}"
        )

    def update(self, findings: int, new: int, force: bool = False) -> None:
        now = time.monotonic()
        if self.live and (force or now - self.last >= 0.5):
            text = self.line(findings, new)
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width = len(text)
            self.last = now
        elif not self.live and now - self.last >= 60.0 and now - self.start >= 60.0:
            self.stream.write(self.line(findings, new) + "\n")
            self.stream.flush()
            self.last = now

    def finish(self) -> None:
        if self.live and self.width:
            self.stream.write("\n")
            self.stream.flush()


class _Collector:
    """The parent's side of the shard messages."""

    def __init__(self, result: CampaignResult, log: FindingsLog, progress: _Progress, start: float) -> None:
        self.result = result
        self.log = log
        self.progress = progress
        self.start = start
        self.seen: dict[str, Finding] = {}
        self.done: set[int] = set()

    def __call__(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        shard = int(msg.get("shard", 0))
        if kind == "finding":
            f = Finding.from_json(msg["finding"])
            new = self.log.add(f)
            if f.id not in self.seen:
                self.seen[f.id] = f
                self.result.findings.append(f)
            else:
                self.seen[f.id] = f.with_(occurrences=self.seen[f.id].occurrences + 1)
            if new:
                self.result.new_ids.append(f.id)
            self.result.events.append(
                FindingEvent(
                    f.id,
                    f.invariant,
                    str(msg.get("property", "")),
                    str(msg.get("phase", "")),
                    shard,
                    round(time.monotonic() - self.start, 3),
                    new,
                )
            )
        elif kind == "progress":
            self.progress.examples[shard] = int(msg.get("examples", 0))
            self.progress.coverage[shard] = msg.get("coverage", {})
        elif kind == "error":
            where = f"shard {shard}, {msg.get('phase', '')} {msg.get('property', '')}".strip()
            self.result.errors.append(f"{where}: {msg.get('error', '')}")
        elif kind == "done":
            self.done.add(shard)
            self.progress.examples[shard] = int(msg.get("examples", 0))
            self.progress.coverage[shard] = msg.get("coverage", {})
            self.result.runs += int(msg.get("runs", 0))
            for name, n in dict(msg.get("property_examples", {})).items():
                self.result.property_examples[name] = self.result.property_examples.get(name, 0) + int(n)
        self.progress.update(len(self.result.findings), len(self.result.new_ids))


def _ray_rebase(spec: ShardSpec) -> ShardSpec:
    """On Ray the budget is fuzzing time, counted from when the task starts: a loaded cluster may take
    tens of seconds to start a worker and import maskcert, which must not eat the campaign."""
    return dataclasses.replace(spec, end_at=time.time() + spec.config.budget_s)


# -- the campaign ------------------------------------------------------------------------------------
def run_campaign(config: CampaignConfig, *, stream: IO[str] | None = None) -> CampaignResult:
    """Run ``config`` to its budget (or a SIGINT/SIGTERM) and return what it found.

    Raises :class:`FuzzUsageError` (or :class:`props.backends.BackendUnavailable`) before starting
    anything when the target, backend or database cannot work.
    """
    out = sys.stderr if stream is None else stream
    database = config.database
    check_target(config)
    from maskcert.fuzz._config import open_database

    open_database(database)  # a directory is made, a Redis server is pinged, before any shard starts
    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = CampaignResult(config, out_dir, database, config.seed)
    start = time.monotonic()
    shards = config.workers
    end_at = time.time() + config.budget_s
    progress = _Progress(config, out, start)
    with FindingsLog(out_dir / "findings.jsonl") as log, signals() as stop:
        specs = [ShardSpec(config, i, shards, end_at, database, frozenset(log.known)) for i in range(shards)]
        collect = _Collector(result, log, progress, start)
        plan = Shards(run_shard, specs, [s.shard for s in specs], end_at, specs[0].grace_s, _ray_rebase)
        try:
            result.errors += run_shards(
                plan, collect, stop, processes=shards > 1, cluster=config.cluster or None
            )
        except ClusterUnavailable as e:
            raise FuzzUsageError("--cluster", config.cluster, str(e)) from e
        finally:
            result.elapsed_s = time.monotonic() - start
            result.examples = sum(progress.examples.values())
            result.coverage = progress.merged_coverage()
            result.shards_done = len(collect.done)
            result.stopped = "signal" if stop() else "budget"
            result.signal = stop.signal
            progress.update(len(result.findings), len(result.new_ids), force=True)
            progress.finish()
            (out_dir / "campaign.json").write_text(json.dumps(result.to_json(), indent=1, default=str) + "\n")
    return result
