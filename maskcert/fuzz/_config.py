"""What a campaign is asked to do: budget, database, target, shards — parsed and checked once.

Every bad value raises :class:`FuzzUsageError` naming the option, the value and what would be valid;
``maskcert fuzz`` turns it into exit status 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from refdecoder.errors import MaskcertError

__all__ = [
    "FuzzUsageError",
    "BUILTIN_TARGETS",
    "CampaignConfig",
    "parse_budget",
    "check_database",
    "open_database",
]

BUILTIN_TARGETS: tuple[str, ...] = ("invariants", "reference", "sampler", "serving", "hostile")


class FuzzUsageError(MaskcertError, ValueError):
    """A campaign option with a value that cannot work: ``option``, ``value``, ``expected``."""

    def __init__(self, option: str, value: Any, expected: str) -> None:
        self.option = option
        self.value = value
        self.expected = expected
        super().__init__(f"{option} {value!r}: expected {expected}")


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_BUDGET_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_budget(text: str) -> float:
    """Seconds in a duration: ``"90"`` (seconds), ``"30s"``, ``"10m"``, ``"2h"``, ``"1h30m"``."""
    value = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        seconds = float(value)
    else:
        parts = _BUDGET_PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise FuzzUsageError("--budget", text, "a duration like 90, 30s, 10m, 2h or 1h30m")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise FuzzUsageError("--budget", text, "a positive duration")
    return seconds


def check_database(spec: str) -> str:
    """A database spec as given to ``--db``: a directory path, or ``redis://HOST:PORT[/DB]``."""
    if "://" not in spec:
        path = Path(spec)
        if path.exists() and not path.is_dir():
            raise FuzzUsageError(
                "--db", spec, "a directory (or a path where one can be made) or redis://HOST:PORT"
            )
        return str(path.resolve())
    parts = urlsplit(spec)
    if parts.scheme != "redis":
        raise FuzzUsageError("--db", spec, "a directory path or redis://HOST:PORT[/DB] (no other URL scheme)")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or parts.path.strip("/") not in ("", *map(str, range(16))):
        raise FuzzUsageError("--db", spec, "redis://HOST:PORT[/DB] with a host, a numeric port, DB 0-15")
    return spec


#: How long a Redis example database keeps retrying a command while its server is unreachable.
REDIS_RETRY_S = 30.0


def open_database(spec: str) -> ExampleDatabase:
    """The Hypothesis example database a (checked) spec names; Redis is imported only when used."""
    if "://" not in spec:
        Path(spec).mkdir(parents=True, exist_ok=True)
        return DirectoryBasedExampleDatabase(spec)
    parts = urlsplit(spec)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError as e:
        raise FuzzUsageError(
            "--db", spec, f"the redis package installed (pip install 'maskcert[redis]'): {e}"
        ) from e
    from redis.backoff import ExponentialBackoff, NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry

    where: dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": parts.port or 6379,
        "db": int(parts.path.strip("/") or 0),
        "socket_connect_timeout": 2.0,
    }
    probe = redis.Redis(**where, retry=Retry(NoBackoff(), 0))
    try:
        probe.ping()
    except Exception as e:  # noqa: BLE001 - any connection failure is the same usage error
        raise FuzzUsageError("--db", spec, f"a Redis server that answers ({e})") from e
    finally:
        probe.close()
    # Once it answered, a server that restarts mid-campaign (an upgrade, a failover) is waited for,
    # up to about REDIS_RETRY_S, instead of losing the example being saved: commands reconnect and retry.
    client = redis.Redis(
        **where,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), int(REDIS_RETRY_S / 0.5) + 4),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    return RedisExampleDatabase(client, key_prefix=b"maskcert-fuzz:")


@dataclass(frozen=True)
class CampaignConfig:
    """One campaign. ``target`` is a built-in target or ``module:function`` (a factory taking a
    :class:`~maskcert.fuzz.TargetContext` and returning properties); ``budget_s`` the wall-clock budget;
    ``db`` a directory or ``redis://`` URL (default ``out_dir/hypothesis-db``); ``workers`` local
    processes (1: in this process); ``cluster`` a Ray address (``"auto"``, ``"ray://..."``; ``""``: no
    Ray) — with Ray, ``workers`` is the number of Ray tasks; ``seed`` the base seed of every shard;
    ``isolate`` runs the backend in a worker process (:class:`props.backends.worker.WorkerBackend`);
    ``progress`` forces the live line on or off (None: on when stderr is a terminal); ``properties``
    keeps only the target's properties whose names match one of these ``fnmatch`` patterns."""

    target: str = "reference"
    backend: str = "reference"
    tokenizers: tuple[str, ...] = ()
    budget_s: float = 60.0
    workers: int = 1
    db: str = ""
    out_dir: str = "fuzz-out"
    seed: int = 0
    cluster: str = ""
    isolate: bool = False
    progress: bool | None = None
    properties: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target not in BUILTIN_TARGETS and not re.fullmatch(r"[\w.]+:\w+", self.target):
            raise FuzzUsageError(
                "--target", self.target, f"one of {', '.join(BUILTIN_TARGETS)} or module:function"
            )
        if self.budget_s <= 0:
            raise FuzzUsageError("--budget", self.budget_s, "a positive duration")
        if self.workers < 1:
            raise FuzzUsageError("--workers", self.workers, "an integer >= 1")
        if not 0 <= self.seed < 2**63:
            raise FuzzUsageError("--seed", self.seed, "an integer in [0, 2**63)")

    @property
    def database(self) -> str:
        return check_database(self.db or str(Path(self.out_dir) / "hypothesis-db"))
