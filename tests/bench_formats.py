"""pytest-benchmark: each 2020-12 format compiled alone in assertion mode (the aim: "each alone in
under half a second"; not collected by ``pytest tests``).

Run: ``pytest tests/bench_formats.py --benchmark-only``. No timed assertions: compare the numbers with
the issue's 0.5 s. Each round compiles from scratch (``refdecoder.compile`` keeps recent grammars: the
cache is emptied before every round).
"""

from __future__ import annotations

from typing import Any

import pytest

import refdecoder
from refdecoder import JsonProfile, JsonSchema
from refdecoder._compile import _RECENT
from refdecoder._formats import UNSUPPORTED

try:
    from tests.test_formats_assert import VOCABULARY
except ImportError:  # pragma: no cover
    from test_formats_assert import VOCABULARY  # type: ignore[no-redef]


@pytest.mark.parametrize("name", [f for f in VOCABULARY if f not in UNSUPPORTED])
def test_compile_format(benchmark: Any, name: str) -> None:
    spec = JsonSchema({"type": "string", "format": name}, JsonProfile(formats="assert"))
    benchmark.pedantic(refdecoder.compile, args=(spec,), setup=_RECENT.clear, rounds=3, iterations=1)
