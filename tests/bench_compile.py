"""pytest-benchmark view of ``maskcert bench compile`` (not collected by ``pytest tests``).

Run: ``pytest tests/bench_compile.py --benchmark-only -s``. No timed assertions: the numbers are for
reading and for ``--benchmark-compare``; the ratios against the engines come from
``run_compile_bench`` (printed with ``-s``). Each backend compiles in this process through its adapter,
after a warm-up compile that builds its per-vocabulary state; a missing backend skips with its reason.
The JSONSchemaBench schemas need the shared data folder. The reference's own compile at scale (GBNF
chains and wide alternations at N and 2N rules, with the ratio printed; the 20,000-rule chain) is at the
end; ``ci/compile_times.py`` times every JSONSchemaBench schema.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

import refdecoder
from maskcert.bench.compile import DEFAULT_OPTIONS, format_table, run_compile_bench
from props.backends import BackendUnavailable, load_backend
from props.contract.backend import Compiled
from refdecoder import Gbnf, JsonProfile, JsonSchema

tm = pytest.importorskip("tokenizers_matrix")

try:
    from tests._data import require_shared
except ImportError:  # pragma: no cover
    from _data import require_shared  # type: ignore[no-redef]

VOCAB = "deepseek-v3-litellm"
BACKENDS = ["reference", "xgrammar", "llguidance", "outlines-core", "lm-format-enforcer"]
PROFILE = JsonProfile(allow_duplicate_keys=True)
# Small schemas every backend compiles in well under a second (outlines-core builds a whole token index).
SCHEMAS = {
    "flat-object": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "ok": {"type": "boolean"}},
        "required": ["name"],
        "additionalProperties": False,
    },
    "enum-array": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 4},
}


def _vocab() -> Any:
    reason = tm.unavailable(VOCAB)
    if reason is not None:
        pytest.skip(reason)
    return tm.get(VOCAB)


def _backend(name: str, vocab: Any) -> Any:
    try:
        backend = load_backend(name, **DEFAULT_OPTIONS.get(name, {}))
    except BackendUnavailable as e:
        pytest.skip(str(e))
    backend.compile(JsonSchema({"type": "string"}, PROFILE), vocab)  # per-vocabulary set-up, not timed
    return backend


@pytest.mark.parametrize("schema", list(SCHEMAS))
@pytest.mark.parametrize("name", BACKENDS)
def test_bench_compile(benchmark: Any, name: str, schema: str) -> None:
    vocab = _vocab()
    backend = _backend(name, vocab)
    spec = JsonSchema(SCHEMAS[schema], PROFILE)
    benchmark.group = f"compile {schema}"
    outcome = benchmark.pedantic(backend.compile, args=(spec, vocab), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["outcome"] = type(outcome).__name__
    if not isinstance(outcome, Compiled):
        pytest.skip(f"{name} refuses {schema}: {outcome}")


@pytest.mark.parametrize("name", BACKENDS)
def test_bench_compile_to_first_mask(benchmark: Any, name: str) -> None:
    """Compile, ``matcher()`` and one ``mask()``: what a request waits for before its first step."""
    vocab = _vocab()
    backend = _backend(name, vocab)
    spec = JsonSchema(SCHEMAS["flat-object"], PROFILE)

    def ready() -> None:
        outcome = backend.compile(spec, vocab)
        assert isinstance(outcome, Compiled), outcome
        backend.matcher(outcome).mask()

    benchmark.group = "compile + first mask"
    benchmark.pedantic(ready, rounds=5, iterations=1, warmup_rounds=1)


def test_bench_jsonschemabench_compile(benchmark: Any) -> None:
    _vocab()
    schemas = require_shared("jsonschemabench-maskbench")
    result = benchmark.pedantic(
        lambda: run_compile_bench(VOCAB, schemas, limit=16, timeout_s=5.0), rounds=1, iterations=1
    )
    benchmark.extra_info["summary"] = {
        "reference": result["reference"]["compile"],
        "engines": {
            n: {"compile": e["compile"], "ratio_compile": e["ratio_compile"]}
            for n, e in result["engines"].items()
        },
    }
    print()
    print(format_table(result))


# -- the reference's own compile time at scale: linear in the grammar's size -------------------------
def _chain(n: int) -> str:
    """``rN ::= "a" rN+1 | "b"``: a chain of n rules."""
    rules = ["root ::= r0"] + [f'r{i} ::= "a" r{i + 1} | "b"' for i in range(n - 1)]
    return "\n".join([*rules, f'r{n - 1} ::= "b"'])


def _alt_literals(n: int) -> str:
    return "root ::= " + " | ".join(f'"a{i}"' for i in range(n))


def _alt_refs(n: int) -> str:
    refs = "root ::= " + " | ".join(f"x{i}" for i in range(n))
    return "\n".join([refs, *(f'x{i} ::= "a{i}" [0-9]*' for i in range(n))])


SCALE_SHAPES = {"chain": _chain, "alternation-of-literals": _alt_literals, "alternation-of-rules": _alt_refs}
_fresh = itertools.count()


def _gbnf(text: str) -> Gbnf:
    """A spec the compile memo has not seen (a new comment line), so every round compiles."""
    return Gbnf(f"{text}\n# round {next(_fresh)}")


def _seconds(text: str, rounds: int = 3) -> tuple[float, float]:
    """The best wall-clock and the best CPU seconds of a compile (CPU time: a loaded machine too)."""
    wall = cpu = float("inf")
    for _ in range(rounds):
        spec = _gbnf(text)
        t0, c0 = time.perf_counter(), time.process_time()
        refdecoder.compile(spec)
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


@pytest.mark.parametrize("shape", list(SCALE_SHAPES))
def test_bench_gbnf_compile_doubling(benchmark: Any, shape: str) -> None:
    """Compile at size N and 2N; the ratio of the best times is ~2 when compile time is linear."""
    n = 5_000
    make = SCALE_SHAPES[shape]
    (small, small_cpu), (large, large_cpu) = _seconds(make(n)), _seconds(make(2 * n))
    benchmark.group = "gbnf compile at scale"
    benchmark.extra_info.update(
        {"n": n, "seconds_n": small, "seconds_2n": large, "cpu_n": small_cpu, "cpu_2n": large_cpu}
    )
    print(
        f"\n{shape}: N={n} {small:.3f} s ({small_cpu:.3f} s cpu), 2N={2 * n} {large:.3f} s "
        f"({large_cpu:.3f} s cpu), ratio {large / small:.2f} ({large_cpu / small_cpu:.2f} cpu; linear: 2)"
    )
    text = make(2 * n)
    benchmark.pedantic(lambda spec: refdecoder.compile(spec), setup=lambda: ((_gbnf(text),), {}), rounds=3)


def test_bench_gbnf_chain_20000(benchmark: Any) -> None:
    """The 20,000-rule chain of issue 28 (it ran into the 30 s compile budget)."""
    text = _chain(20_000)
    benchmark.group = "gbnf compile at scale"
    benchmark.pedantic(lambda spec: refdecoder.compile(spec), setup=lambda: ((_gbnf(text),), {}), rounds=3)
