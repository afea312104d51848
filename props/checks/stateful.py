"""One stateful machine over the reference and a backend (STYLE §9, DESIGN §4.6–4.9).

:func:`machine_for` builds a Hypothesis ``RuleBasedStateMachine`` bound to one
:class:`~props.checks.invariants.Target`. It keeps *pairs* (backend matcher, reference matcher) that have
seen the same tokens, and applies each rule to both sides of a pair: ``accept`` (a token either side
allows, so both unsound and blocked tokens get tried), ``fork`` (a new pair), ``rollback``,
``speculate`` (``validate`` of a draft), ``jump_forward`` and ``eos``. After every rule the masks of
the touched pair are compared (:func:`props.checks.invariants.compare_step`), and a fork's parent is
re-checked against the mask it had before the fork. Any difference raises
:class:`~props.contract.findings.FindingFailure`; Hypothesis then shrinks the rule sequence, and the finding's
certificate carries ``operations`` — the exact sequence a reproducer replays (``["switch", i]``
selects matcher ``i``; ``["fork"]`` creates matcher ``len(matchers)`` from the current one).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from props.checks.invariants import BackendFault, Target, _rejected, _weight, compare_step
from props.contract.findings import Finding, FindingFailure
from refdecoder import Matcher as RefMatcher

__all__ = ["machine_for"]

_MAX_PAIRS = 4


def machine_for(t: Target) -> type[RuleBasedStateMachine]:
    """A state machine class driving ``t``'s backend and reference side by side."""

    class Differential(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            t.fresh()  # each example certifies afresh, so shrinking sees the same failures
            self.pairs: list[tuple[Any, RefMatcher]] = [(t.matcher(), RefMatcher(t.reference))]
            self.ids: list[list[int]] = [[]]
            self.ops: list[list[Any]] = []
            self.cur = 0
            self.touched = 0
            self.parent_check: tuple[int, np.ndarray] | None = None

        # -- helpers ----------------------------------------------------------------------------
        def _select(self, data: st.DataObject) -> int:
            i = data.draw(st.integers(0, len(self.pairs) - 1), label="pair")
            if i != self.cur:
                self.ops.append(["switch", i])
                self.cur = i
            self.touched = i
            return i

        def _fail(self, findings: list[Finding]) -> None:
            ops = list(self.ops)
            raise FindingFailure(
                [f.with_(walk="stateful", certificate={**f.certificate, "operations": f.certificate.get("operations", ops)})
                 for f in findings]  # fmt: skip
            )

        def _serving(self, inv: str, observed: Any, expected: Any, message: str) -> None:
            self.ops.append(["mask"])
            f = t.finding(inv, self.ids[self.touched], backend_verdict=str(observed)[:200],
                          reference_verdict=str(expected)[:200], message=message,
                          certificate={"operations": list(self.ops), "observed": observed, "expected": expected},
                          walk="stateful")  # fmt: skip
            raise FindingFailure([f])

        def _guard(self, fn: Any, *args: Any) -> Any:
            try:
                return fn(*args)
            except BackendFault as e:
                self._fail([t.fault(e, self.ids[self.touched])])

        # -- rules ------------------------------------------------------------------------------
        @rule(data=st.data())
        def accept(self, data: st.DataObject) -> None:
            i = self._select(data)
            m, r = self.pairs[i]
            if r.is_terminated():
                return
            bits = t.backend_mask(m)
            ideal = t.reference_mask(r)
            options = sorted(np.flatnonzero(bits | ideal).tolist(), key=lambda x: -_weight(t, x))
            if not options:
                return
            tok = int(data.draw(st.sampled_from(options), label="token"))
            ref_ok = not _rejected(r.accept(tok))
            b_ok = not _rejected(self._guard(m.accept, tok))
            self.ops.append(["accept", tok])
            if ref_ok != b_ok:
                # This pair's masks were compared when it was last touched, so here accept() and
                # mask() of the backend disagree with each other (or the backend is unsound on accept).
                want, got = ("accepted", "rejected by accept()") if ref_ok else ("rejected", "accepted by accept()")
                inv = "determinism" if bool(bits[tok]) == ref_ok else ("soundness" if b_ok else "completeness_token")
                self._serving(inv, got, want, f"accept({tok}) gives {got!r}; the reference: {want} "
                              f"(mask() said {'allowed' if bits[tok] else 'masked'})")  # fmt: skip
            if ref_ok:
                self.ids[i].append(tok)

        @precondition(lambda self: len(self.pairs) < _MAX_PAIRS)
        @rule(data=st.data())
        def fork(self, data: st.DataObject) -> None:
            i = self._select(data)
            m, r = self.pairs[i]
            before = t.backend_mask(m)
            child = self._guard(m.fork)
            self.ops.append(["fork"])
            self.pairs.append((child, r.fork()))
            self.ids.append(list(self.ids[i]))
            self.parent_check = (i, before)

        @rule(data=st.data())
        def rollback(self, data: st.DataObject) -> None:
            i = self._select(data)
            m, r = self.pairs[i]
            k = data.draw(st.integers(0, min(4, r.num_accepted)), label="k")
            self._guard(m.rollback, k)
            r.rollback(k)
            self.ops.append(["rollback", k])
            t.checks["rollback"] += 1
            self.ids[i] = [x for x in r.accepted_ids() if x not in t.vocab.eos_ids]

        @rule(data=st.data())
        def speculate(self, data: st.DataObject) -> None:
            i = self._select(data)
            m, r = self.pairs[i]
            if m.validate is None or r.is_terminated():
                return
            ideal = np.flatnonzero(t.reference_mask(r)).tolist()
            pool = ideal[:64] + list(range(min(t.size, 64)))
            draft = data.draw(st.lists(st.sampled_from(pool), max_size=4), label="draft")
            before = t.backend_mask(m)
            got = int(self._guard(m.validate, draft))
            want = r.validate(draft)
            self.ops.append(["validate", draft])
            t.checks["speculative"] += 1
            if got != want:
                self._serving("speculative", got, want, f"validate({draft}) accepts {got} tokens, the grammar {want}")
            after = t.backend_mask(m)
            if not np.array_equal(before, after):
                self._serving("speculative", "mask changed", "unchanged", "validate() changed the matcher's state")

        @rule(data=st.data())
        def jump_forward(self, data: st.DataObject) -> None:
            i = self._select(data)
            m, r = self.pairs[i]
            if m.forced_bytes is None or r.is_terminated():
                return
            got = bytes(self._guard(m.forced_bytes))
            want = r.forced_bytes()
            t.checks["jump_forward"] += 1
            if not want.startswith(got) or (got != want and not t.profile.jump_forward_prefix_ok):
                self.ops.append(["forced_bytes"])
                self._serving("jump_forward", got, want, f"forced bytes {got!r}, the unique continuation {want!r}")

        # -- invariants -------------------------------------------------------------------------
        @invariant()
        def masks_agree(self) -> None:
            i = self.touched
            m, r = self.pairs[i]
            if r.is_terminated():
                return
            found = compare_step(t, m, r, self.ids[i], "stateful")
            if found:
                self._fail(found)

        @invariant()
        def fork_parent_unchanged(self) -> None:
            if self.parent_check is None:
                return
            i, before = self.parent_check
            t.checks["fork"] += 1
            after = t.backend_mask(self.pairs[i][0])
            if self.touched != i and not np.array_equal(before, after):
                self.ops.append(["switch", i])
                self._serving("fork", "parent's mask changed", "unchanged",
                              "working on a fork changed its parent's mask")  # fmt: skip
            if self.touched == i:
                self.parent_check = None

    Differential.__name__ = f"Differential[{t.backend.name}/{t.spec.name}/{t.vocab.name}]"
    return Differential
