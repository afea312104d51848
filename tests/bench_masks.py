"""pytest-benchmark view of the reference's token masks (not collected by ``pytest tests``).

Run: ``pytest tests/bench_masks.py --benchmark-only -s``. No timed assertions: the numbers are for
reading and for ``--benchmark-compare``. Vocabularies come from ``tokenizers_matrix`` (the 129k
DeepSeek-V3 one needs the shared data folder); the JSONSchemaBench walks need it too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import refdecoder
from maskcert.bench.masks import format_table, run_mask_bench
from refdecoder._matcher import Matcher
from refdecoder._tokens import TokenGrammar, TokenTrie

tm = pytest.importorskip("tokenizers_matrix")

try:
    from tests._data import require_shared
except ImportError:  # pragma: no cover
    from _data import require_shared  # type: ignore[no-redef]

VOCABS = ["bpe", "deepseek-v3-litellm"]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "age": {"type": "integer"},
        "nested": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "additionalProperties": False,
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}
INSTANCE = {"name": "Jöhn Smith, the third", "tags": ["a", "bb", "ccc dd"], "age": 42, "nested": {"ok": True}}


def _vocab(name: str) -> Any:
    reason = tm.unavailable(name)
    if reason is not None:
        pytest.skip(reason)
    return tm.get(name)


@pytest.mark.parametrize("vname", VOCABS)
def test_bench_trie_build(benchmark: Any, vname: str) -> None:
    vocab = _vocab(vname)
    trie = benchmark.pedantic(lambda: TokenTrie(vocab), rounds=3, iterations=1)
    benchmark.extra_info["trie_nodes"] = trie.num_nodes


def _walk_states(tg: TokenGrammar, vocab: Any) -> list[Any]:
    m = Matcher(tg)
    states = [m.state]
    for t in vocab.encode(json.dumps(INSTANCE)):
        m.accept(t)
        states.append(m.state)
    return states


@pytest.mark.parametrize("vname", VOCABS)
@pytest.mark.parametrize("path", ["tables", "walk"])
def test_bench_mask_walk(benchmark: Any, vname: str, path: str) -> None:
    """Masks along one walk with the mask cache off (lexeme tables warm after the first round)."""
    vocab = _vocab(vname)
    g = refdecoder.compile_json_schema(SCHEMA)
    tg = TokenGrammar(g, vocab, cache_bytes=0, lexeme_tables=path == "tables")
    states = _walk_states(tg, vocab)

    def run() -> None:
        for s in states:
            tg.mask(s)

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info["steps"] = len(states)


def test_bench_jsonschemabench(benchmark: Any) -> None:
    vocab = _vocab("deepseek-v3-litellm")
    schemas = require_shared("jsonschemabench-maskbench")
    result = benchmark.pedantic(
        lambda: run_mask_bench(vocab, schemas, limit=24, max_instances=2, time_budget_s=300),
        rounds=1,
        iterations=1,
    )
    benchmark.extra_info["summary"] = {
        "reference": result["reference"]["steps"],
        "engines": {n: e["steps"] for n, e in result["engines"].items()},
    }
    print()
    print(format_table(result))
