"""Walks go on past a known defect (issue 34): the adversarial walk, where the engine chooses, reports a
token the reference rejects and continues with one both allow, so what lies behind the defect is
compared too."""

from __future__ import annotations

import numpy as np

from maskcert.certification import load_vocabularies, resolve_backend
from props.checks.invariants import Target, adversarial_walk, prepare
from props.contract.findings import Invariant, SpecKind, SpecRef


def _target(toy: str, pattern: str) -> Target:
    t = prepare(
        resolve_backend(f"tests._toys:{toy}", isolate=False),
        SpecRef(SpecKind.REGEX, pattern, "steer", "test"),
        load_vocabularies(["byte"])[0],
    )
    assert isinstance(t, Target)
    return t


def test_adversarial_walk_steers_past_a_soundness_defect() -> None:
    """The toy always allows '}'; a picker that always takes it would stop at once. The walk reports
    '}' and goes on to the end of ``ab[cd]e``."""
    brace = ord("}")

    def greedy_brace(t: Target, allowed: np.ndarray) -> int:
        return brace if brace in allowed else int(allowed.min())

    t = _target("ExtraClosingBrace", "ab[cd]e")
    found = adversarial_walk(t, greedy_brace, max_steps=10)
    assert {f.invariant for f in found} == {Invariant.SOUNDNESS}
    # '}' at "", "a", "ab", "abc" and "abce": five times steered, down to EOS after the whole text.
    assert t.instances["adversarial/steered-past-soundness"] == 5
