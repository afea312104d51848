"""pytest-benchmark view of ``maskcert bench compile`` (not collected by ``pytest tests``).

Run: ``pytest tests/bench_compile.py --benchmark-only -s``. No timed assertions: the numbers are for
reading and for ``--benchmark-compare``; the ratios against the engines come from
``run_compile_bench`` (printed with ``-s``). Each backend compiles in this process through its adapter,
after a warm-up compile that builds its per-vocabulary state; a missing backend skips with its reason.
The JSONSchemaBench schemas need the shared data folder.
"""

from __future__ import annotations

from typing import Any

import pytest

from maskcert.bench.compile import DEFAULT_OPTIONS, format_table, run_compile_bench
from props.backends import BackendUnavailable, load_backend
from props.contract.backend import Compiled
from refdecoder import JsonProfile, JsonSchema

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
