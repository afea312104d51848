"""Where the shared test data lies, and JSON serializations the profiles allow (test support)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data() -> Path:
    """``$MASKCERT_SHARED_DATA`` or ``<repo>/../shared/data``."""
    env = os.environ.get("MASKCERT_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def require_shared(sub: str) -> Path:
    p = shared_data() / sub
    if not p.exists():
        pytest.skip(f"shared test data {p} is absent (set MASKCERT_SHARED_DATA)")
    return p


def dump_ws(
    value: Any,
    rng: random.Random,
    ws: str = " \t\n\r",
    max_gap: int = 3,
    reorder: bool = False,
    ascii_only: bool = False,
) -> str:
    """Serialize with random legal whitespace in every gap (and optionally keys in another order)."""

    def gap() -> str:
        return "".join(rng.choice(ws) for _ in range(rng.randint(0, max_gap)))

    def enc(v: Any) -> str:
        if isinstance(v, dict):
            items = list(v.items())
            if reorder:
                items.reverse()
            if not items:
                return "{" + gap() + "}"
            body = (",").join(
                gap() + json.dumps(k, ensure_ascii=ascii_only) + gap() + ":" + gap() + enc(x) + gap()
                for k, x in items
            )
            return "{" + body + "}"
        if isinstance(v, list):
            if not v:
                return "[" + gap() + "]"
            return "[" + ",".join(gap() + enc(x) + gap() for x in v) + "]"
        return json.dumps(v, ensure_ascii=ascii_only)

    return gap() + enc(value) + gap()


def serializations(
    value: Any, *, reorder: bool, escapes: bool, whitespace: bool = True, seed: int = 0
) -> list[str]:
    """Compact, pretty, random-whitespace, key-reordered and ASCII-escaped texts of one value."""
    rng = random.Random(seed)
    out = [json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    if whitespace:
        out.append(json.dumps(value, indent=2, ensure_ascii=False))
        out.append(dump_ws(value, rng))
    if reorder:
        out.append(dump_ws(value, rng, reorder=True, max_gap=0 if not whitespace else 2))
    if escapes:
        out.append(json.dumps(value, separators=(",", ":"), ensure_ascii=True))
    return list(dict.fromkeys(out))


def load_baseline(name: str) -> dict[str, Any]:
    p = REPO / "tests" / "baselines" / name
    return json.loads(p.read_text()) if p.exists() else {}


def save_baseline_if_asked(name: str, data: dict[str, Any]) -> bool:
    if os.environ.get("MASKCERT_UPDATE_BASELINES") != "1":
        return False
    p = REPO / "tests" / "baselines" / name
    p.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return True


def compile_or_status(spec: Any, limits: Any, with_reason: bool = True) -> tuple[Any, str]:
    """``(grammar, "compiled")``, or ``(None, status)`` with the refusal as a baseline records it."""
    import refdecoder
    from refdecoder import LimitExceeded, SpecError, Unsupported

    try:
        return refdecoder.compile(spec, limits), "compiled"
    except Unsupported as e:
        return None, f"refused: {e.keyword}: {e.reason}" if with_reason else f"refused: {e.keyword}"
    except LimitExceeded as e:
        return None, f"refused: limit {e.limit}"
    except SpecError as e:
        return None, f"invalid: {e.what}"


def ratchet(name: str, status: dict[str, str], what: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Compare ``status`` (id -> "compiled" or a refusal) with the committed baseline: what compiled
    there must still compile (regressions fail); new compiles pass with a note (docs/style.md §11).
    ``MASKCERT_UPDATE_BASELINES=1`` rewrites the baseline instead."""
    compiled = sum(1 for s in status.values() if s == "compiled")
    with capsys.disabled():
        print(f"\n{what}: {compiled}/{len(status)} compiled ({compiled / max(1, len(status)):.1%})")
    if save_baseline_if_asked(name, status):
        return
    baseline = load_baseline(name)
    assert baseline, f"no baseline tests/baselines/{name}: run with MASKCERT_UPDATE_BASELINES=1"
    regressed = [
        k for k, s in baseline.items() if s == "compiled" and k in status and status[k] != "compiled"
    ]
    assert not regressed, f"{what}: compiled in the baseline, no longer:\n" + "\n".join(
        f"{k}: {status[k]}" for k in regressed[:30]
    )
    improved = [k for k, s in status.items() if s == "compiled" and baseline.get(k) != "compiled"]
    if improved:
        with capsys.disabled():
            print(f"{len(improved)} newly compile; update with MASKCERT_UPDATE_BASELINES=1")


def assert_live_prefixes_complete(g: Any, text: bytes, valid: Callable[[bytes], bool], context: Any) -> None:
    """No dead ends: from the start and from every prefix of ``text`` the matcher keeps alive, the
    structural completion exists, the matcher accepts it, and so does the independent ``valid``."""
    s = g.initial()
    for i in range(len(text) + 1):
        if s.is_dead:
            return
        word = g.completion(s)
        assert word is not None, (context, text[:i])
        done = text[:i] + word
        assert g.accepts(done) and valid(done), (context, done)
        if i == len(text):
            return
        nxt = g.advance_byte(s, text[i])
        if nxt is None:
            return
        s = nxt
