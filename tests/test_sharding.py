"""certify's shards: worker processes and Ray tasks run on the mechanism the fuzz campaign
uses (:mod:`maskcert.sharding`), stream results back, and give the report a serial run gives."""

from __future__ import annotations

from typing import Any

import pytest

from maskcert.certification import certify
from maskcert.sharding import Shards, StopFlag, run_shards
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case

CASES = [
    Case(SpecRef(SpecKind.REGEX, r, f"rx{i}", "t"), valid=tuple(v))
    for i, (r, v) in enumerate(
        [("a|ab", ["a", "ab"]), ("[0-9]{2}", ["12"]), ("x+y?", ["xxy"]), ("(ab)*c", ["abc"])]
    )
]


def _stable(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in {"created", "elapsed_s", "timings", "profile"}}


def _echo(spec: tuple[int, int], sink: Any, should_stop: Any) -> None:
    shard, n = spec
    for i in range(n):
        if should_stop():
            return
        sink({"type": "item", "shard": shard, "i": i})
    sink({"type": "done", "shard": shard})


def _dies(spec: int, sink: Any, should_stop: Any) -> None:
    import os

    sink({"type": "item", "shard": spec, "i": 0})
    os._exit(7)


def test_messages_stream_back_from_worker_processes() -> None:
    got: list[dict[str, Any]] = []
    errors = run_shards(Shards(_echo, [(0, 3), (1, 2)], [0, 1]), got.append, StopFlag())
    assert errors == []
    assert sorted((m["shard"], m["i"]) for m in got if m["type"] == "item") == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
    ]


def test_a_worker_that_dies_is_named_and_what_it_sent_is_kept() -> None:
    got: list[dict[str, Any]] = []
    errors = run_shards(Shards(_dies, [0], [0]), got.append, StopFlag())
    assert errors == ["shard 0: worker exited with status 7 before it finished"]
    assert got == [{"type": "item", "shard": 0, "i": 0}]


def test_two_workers_give_the_serial_report() -> None:
    kw: dict[str, Any] = {
        "tokenizers": ["byte"],
        "corpus": (),
        "cases": CASES,
        "examples": 1,
        "minimize_s": 0,
    }
    serial = certify("outlines-core" if _has("outlines_core") else "reference", **kw)
    sharded = certify("outlines-core" if _has("outlines_core") else "reference", workers=2, **kw)
    assert _stable(serial.data) == _stable(sharded.data)
    assert serial.data["specs"]["checked"] == len(CASES)
    profile = sharded.data["profile"]
    assert (
        profile["spec_s"]["n"] == len(CASES) and 0 < profile["spec_s"]["median"] <= profile["spec_s"]["max"]
    )
    assert {"compile (both sides)", "valid walks", "backend masks", "reference masks"} <= set(
        profile["phases_s"]
    )
    assert set(profile["setup_s"]) == {
        "load vocabularies",
        "vocabulary tables",
        "load corpus",
        "start backend",
    }


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.slow
def test_ray_tasks_on_a_local_instance_give_the_serial_report() -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'maskcert[ray]')")
    kw: dict[str, Any] = {
        "tokenizers": ["byte"],
        "corpus": (),
        "cases": CASES,
        "examples": 1,
        "minimize_s": 0,
    }
    serial = certify("reference", **kw)
    on_ray = certify("reference", workers=2, cluster="local", **kw)
    assert _stable(serial.data) == _stable(on_ray.data)
