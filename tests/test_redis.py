"""The Redis example database of ``maskcert fuzz`` against a real ``redis-server``.

The test run starts its own server (the Debian package ``redis-server``; ``ci/test.sh`` installs it
where apt works) on a free port in a temporary folder, with an append-only file fsynced on every
write, and stops it at the end. Skipped, with the reason, where the server or the ``redis`` package
is missing. Covered: one campaign with two worker processes sharing the server; two campaigns (two
``maskcert fuzz`` processes) at once on it; and a server restart in the middle of a campaign, after
which the database still holds every failure and a fresh run replays them all.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("redis", reason="the redis package is not installed (pip install 'maskcert[redis]')")

import redis  # noqa: E402

from maskcert.fuzz import read_findings, run_campaign  # noqa: E402
from tests.test_fuzz import ROOT, TOY, TOY_DEFECTS, defects, lines, toy_config  # noqa: E402

SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(
    SERVER is None, reason="redis-server is not installed (apt-get install redis-server)"
)
PREFIX = b"maskcert-fuzz:"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A ``redis-server`` of our own: ``start``, ``stop`` (a clean SIGTERM shutdown) and ``restart``
    on the same port and data folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> Any:  # redis.Redis, whose replies are typed bytes | str
        return redis.Redis(host="127.0.0.1", port=self.port, db=0)

    def start(self) -> None:
        assert SERVER is not None
        args = [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder)]
        args += ["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"]
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - the server owns it while it runs
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {(self.folder / 'server.log').read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # redis flushes its append-only file and exits
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def stored(self) -> list[bytes]:
        return sorted(self.client().keys(PREFIX + b"*"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "redis"
    folder.mkdir()
    s = RedisServer(folder)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def test_two_worker_processes_share_one_server(tmp_path: Path, server: RedisServer) -> None:
    # Worker processes start inside the budget (each imports maskcert and torch): leave them time.
    result = run_campaign(toy_config(tmp_path, workers=2, budget_s=15.0, db=server.url))
    assert not result.errors, result.errors
    assert result.shards_done == 2 and result.database == server.url
    assert defects(result.findings) == TOY_DEFECTS
    assert server.stored(), "nothing was stored on the server"
    # A fresh output folder: only the server remembers the failures, and the replay finds them all.
    again = run_campaign(toy_config(tmp_path / "fresh", workers=1, budget_s=3.0, seed=9, db=server.url))
    assert not again.errors, again.errors
    assert again.replayed >= 1 and defects(again.findings) == TOY_DEFECTS


def _fuzz(out: Path, db: str, seed: int, budget: str) -> subprocess.Popen[str]:
    """A ``maskcert fuzz`` process with one in-process worker (its budget starts after its imports)."""
    argv = [sys.executable, "-m", "maskcert.cli", "fuzz", "--target", TOY, "--budget", budget]
    argv += ["--workers", "1", "--db", db, "--out", str(out), "--seed", str(seed)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return int(proc.returncode), stdout + stderr


def test_two_campaigns_at_once_on_one_server(tmp_path: Path, server: RedisServer) -> None:
    a = _fuzz(tmp_path / "a", server.url, 1, "6s")
    b = _fuzz(tmp_path / "b", server.url, 2, "6s")
    for proc in (a, b):
        code, output = _finish(proc)
        assert code == 1, output  # 1: findings
    for out in (tmp_path / "a", tmp_path / "b"):
        summary = json.loads((out / "campaign.json").read_text())
        assert summary["errors"] == [] and summary["database"] == server.url
        assert defects(read_findings(out / "findings.jsonl")) == TOY_DEFECTS
    # Both wrote to the one database, which now replays every defect to a third campaign.
    third = run_campaign(toy_config(tmp_path / "c", workers=1, budget_s=3.0, seed=3, db=server.url))
    assert not third.errors and third.replayed >= 1 and defects(third.findings) == TOY_DEFECTS


def test_a_server_restart_mid_campaign_loses_nothing(tmp_path: Path, server: RedisServer) -> None:
    out = tmp_path / "out"
    proc = _fuzz(out, server.url, 3, "12s")
    try:
        path = out / "findings.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (path.exists() and path.read_text().count("\n") >= 1):
            time.sleep(0.1)
        assert path.exists() and path.read_text(), "no finding within 60 s"
        stored_before = server.stored()
        server.restart(down_s=1.5)  # the campaign keeps running while the server is away
        assert set(stored_before) <= set(server.stored()), "the restart lost stored examples"
        code, output = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 1, output
    summary = json.loads((out / "campaign.json").read_text())
    assert summary["errors"] == [], summary["errors"]
    found = read_findings(out / "findings.jsonl")
    assert defects(found) == TOY_DEFECTS
    assert len(lines(out / "findings.jsonl")) == len({f.id for f in found})
    # What the server holds survives a further restart exactly, and a fresh run replays it.
    held = _contents(server)
    assert held
    server.restart(down_s=0.2)
    assert _contents(server) == held
    again = run_campaign(toy_config(tmp_path / "fresh", workers=1, budget_s=3.0, seed=11, db=server.url))
    assert not again.errors, again.errors
    assert again.replayed >= 1 and defects(again.findings) == TOY_DEFECTS


def _contents(server: RedisServer) -> dict[bytes, set[bytes]]:
    client = server.client()
    return {k: set(client.smembers(k)) for k in server.stored()}


def test_a_save_while_the_server_is_down_waits_for_it(tmp_path: Path, server: RedisServer) -> None:
    """The database's client retries across a restart: the example saved during it is kept."""
    from maskcert.fuzz._config import open_database

    db = open_database(server.url)
    db.save(b"k", b"before")
    server.stop()
    back = threading.Timer(1.5, server.start)
    back.start()
    try:
        t0 = time.monotonic()
        db.save(b"k", b"during")  # the server is down now: this call waits for it
        waited = time.monotonic() - t0
    finally:
        back.join()
    assert waited >= 1.0
    assert set(db.fetch(b"k")) == {b"before", b"during"}
    server.restart(down_s=0.2)
    assert set(open_database(server.url).fetch(b"k")) == {b"before", b"during"}


def test_an_unreachable_server_is_a_usage_error_at_once() -> None:
    from maskcert.fuzz import FuzzUsageError
    from maskcert.fuzz._config import open_database

    t0 = time.monotonic()
    with pytest.raises(FuzzUsageError, match="a Redis server that answers"):
        open_database(f"redis://127.0.0.1:{_free_port()}/0")
    assert time.monotonic() - t0 < 10  # no retrying before the campaign has even started
