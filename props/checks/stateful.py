"""One stateful machine over the reference and a backend (docs/style.md §9, docs/design.md §4.6–4.9).

:func:`machine_for` builds a Hypothesis ``RuleBasedStateMachine`` bound to one
:class:`~props.checks.invariants.Target`. It keeps *pairs* (backend matcher, reference matcher) that have
seen the same tokens, and applies each rule to both sides of a pair: ``accept`` (a token either side
allows, so both unsound and blocked tokens get tried), ``fork`` (a new pair), ``rollback``,
``speculate`` (``validate`` of a draft) and ``jump_forward``. After every rule the masks of
the touched pair are compared (:func:`props.checks.invariants.compare_step`), and a fork's parent is
re-checked against the mask it had before the fork. Any difference raises
:class:`~props.contract.findings.FindingFailure`; Hypothesis then shrinks the rule sequence, and the finding's
certificate carries ``operations`` (:mod:`props.contract.operations`) — the exact sequence a
reproducer replays (``switch(i)`` selects matcher ``i``; ``FORK`` creates matcher ``len(matchers)``
from the current one).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from props.checks.invariants import BackendFault, Target, _rejected, by_weight, compare_step
from props.contract import operations as op
from props.contract.compat import DependencyError, dependency_versions
from props.contract.findings import Finding, FindingFailure, Invariant
from props.contract.operations import Op
from refdecoder import Matcher as RefMatcher
from refdecoder.errors import StateError

T = TypeVar("T")

__all__ = ["machine_for", "draw_index", "draw_one", "draw_list"]

_MAX_PAIRS = 4


def machine_for(t: Target) -> type[RuleBasedStateMachine]:
    """A state machine class driving ``t``'s backend and reference side by side. The class holds
    ``t`` weakly: Hypothesis keeps every state machine class it has run for good (a class-level dict,
    ``RuleBasedStateMachine._setup_state_per_class``), and a target holds its spec's compiled
    reference with the masks and parser states it cached, megabytes each, so a JSONSchemaBench
    shard grew by about 6 MB a spec until the kernel killed it (10.7 GB after 32 minutes)."""

    class Differential(_Differential):
        target_ref = weakref.ref(t)

    Differential.__name__ = f"Differential[{t.backend.name}/{t.spec.name}/{t.vocab.name}]"
    return Differential


def draw_index(data: st.DataObject, n: int) -> int:
    """An index in ``[0, n)``, shrinking toward 0: the choice ``data.draw(st.integers(0, n - 1))``
    makes, taken from the test's choice sequence directly. ``DataObject.draw`` costs about 200 µs
    a call on this machine (it snapshots the global RNG twice and resolves the strategy), a bare
    choice about 30 µs, and the searches draw tens of thousands of them per run. The draw is not
    noted for Hypothesis's falsifying-example output, which certify never shows: a finding carries
    its own token ids and operations."""
    try:
        cd = data.conjecture_data
    except AttributeError as e:  # a Hypothesis release that renamed it: say so, do not fall back
        raise DependencyError(
            "hypothesis", f"DataObject.conjecture_data is gone ({e})", dependency_versions(extras=False), []
        ) from e
    return int(cd.draw_integer(0, n - 1))


def draw_one(data: st.DataObject, options: Sequence[T] | np.ndarray) -> T:
    """``data.draw(st.sampled_from(options))`` without its cost: the same draw of an index in
    ``[0, len(options))`` (so the same shrinking, toward the first option), but ``sampled_from``
    labels itself by hashing every option on each call, and a token list inside a string holds most
    of a 129k vocabulary (seconds per spec); the index itself is :func:`draw_index`'s."""
    return options[draw_index(data, len(options))]


def draw_list(data: st.DataObject, options: Sequence[T], max_size: int) -> list[T]:
    """``data.draw(st.lists(st.sampled_from(options), max_size=max_size))`` by :func:`draw_index`:
    a length, then that many options; shrinks toward shorter lists of earlier options."""
    return [draw_one(data, options) for _ in range(draw_index(data, max_size + 1))]


def _token_options(t: Target, bits: np.ndarray, ideal: np.ndarray) -> np.ndarray:
    """The tokens either side allows, most likely first (so unsound and blocked tokens both get tried)."""
    return by_weight(t, np.flatnonzero(bits | ideal))


def _accept_mismatch(
    tok: int, mask_allows: bool, ref_ok: bool, b_ok: bool
) -> tuple[Invariant, str, str, str]:
    """Invariant, observed and expected verdicts, and message of an ``accept()`` the reference contradicts."""
    want, got = ("accepted", "rejected by accept()") if ref_ok else ("rejected", "accepted by accept()")
    if mask_allows == ref_ok:
        inv = Invariant.DETERMINISM
    else:
        inv = Invariant.SOUNDNESS if b_ok else Invariant.COMPLETENESS_TOKEN
    said = "allowed" if mask_allows else "masked"
    return inv, got, want, f"accept({tok}) gives {got!r}; the reference: {want} (mask() said {said})"


def _draft_pool(t: Target, r: RefMatcher) -> list[int]:
    """Tokens a speculative draft is drawn from: the first the reference allows, then the first ids."""
    ideal = np.flatnonzero(t.reference_mask(r)).tolist()
    return ideal[:64] + list(range(min(t.size, 64)))


def _forced_bytes_ok(t: Target, got: bytes, want: bytes) -> bool:
    """Whether ``got`` is the unique continuation ``want`` (or a prefix of it, where the profile allows)."""
    return want.startswith(got) and (got == want or t.profile.jump_forward_prefix_ok)


class _Differential(RuleBasedStateMachine):
    """The rules and invariants of :func:`machine_for`'s machines; a subclass binds ``target_ref``."""

    target_ref: ClassVar[weakref.ref[Target]]

    @property
    def target(self) -> Target:
        t = type(self).target_ref()
        if t is None:  # run after its certification let the target go: maskcert's bug, said loudly
            raise StateError(f"{type(self).__name__}: the target was released before the machine ran")
        return t

    def __init__(self) -> None:
        super().__init__()
        t = self.target
        t.fresh()  # each example certifies afresh, so shrinking sees the same failures
        self.pairs: list[tuple[Any, RefMatcher]] = [(t.matcher(), RefMatcher(t.reference))]
        self.ids: list[list[int]] = [[]]
        self.ops: list[Op] = []
        self.cur = 0
        self.touched = 0
        self.parent_check: tuple[int, np.ndarray] | None = None

    # -- helpers ----------------------------------------------------------------------------
    def _select(self, data: st.DataObject) -> tuple[int, Any, RefMatcher]:
        """Draw the pair the next rule works on (recording a switch to it): its index and two matchers."""
        i = draw_index(data, len(self.pairs))
        if i != self.cur:
            self.ops.append(op.switch(i))
            self.cur = i
        self.touched = i
        m, r = self.pairs[i]
        return i, m, r

    def _fail(self, findings: list[Finding]) -> None:
        """Raise ``findings`` as stateful ones, each carrying the operations so far unless it has its own."""
        ops = list(self.ops)
        raise FindingFailure(
            [
                f.with_(
                    walk="stateful",
                    certificate={**f.certificate, "operations": f.certificate.get("operations", ops)},
                )
                for f in findings
            ]
        )

    def _serving(self, inv: Invariant, observed: Any, expected: Any, message: str) -> None:
        """Raise a serving finding on the touched pair, its certificate replaying the operations so far."""
        t = self.target
        self.ops.append(op.MASK)
        f = t.finding(
            inv,
            self.ids[self.touched],
            backend_verdict=str(observed)[:200],
            reference_verdict=str(expected)[:200],
            message=message,
            certificate={"operations": list(self.ops), "observed": observed, "expected": expected},
            walk="stateful",
        )
        raise FindingFailure([f])

    def _guard(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the backend; a backend fault fails the run as a finding."""
        try:
            return fn(*args)
        except BackendFault as e:
            self._fail([self.target.fault(e, self.ids[self.touched])])

    # -- rules ------------------------------------------------------------------------------
    @rule(data=st.data())
    def accept(self, data: st.DataObject) -> None:
        """Accept a token either side allows, on both sides; their verdicts must agree."""
        t = self.target
        i, m, r = self._select(data)
        if r.is_terminated():
            return
        bits, ideal = t.backend_mask(m), t.reference_mask(r)
        if not np.array_equal(bits, ideal) and (
            found := compare_step(t, m, r, self.ids[i], "stateful", backend_bits=bits)
        ):
            # Masks that differ here are compared first, so a difference gets its certificate
            # (witness, completion) before accept() meets it without one: work on another pair can
            # change this one after it was last compared (a fork that shares state). A difference
            # compared before finds nothing new (``Target.first_time``), and the rule goes on.
            self._fail(found)
        options = _token_options(t, bits, ideal)
        if not len(options):
            return
        tok = int(draw_one(data, options))
        ref_ok = not _rejected(r.accept(tok))
        b_ok = not _rejected(self._guard(m.accept, tok))
        self.ops.append(op.accept(tok))
        if ref_ok != b_ok:
            # This pair's masks were compared when it was last touched, so here accept() and
            # mask() of the backend disagree with each other (or the backend is unsound on accept).
            self._serving(*_accept_mismatch(tok, bool(bits[tok]), ref_ok, b_ok))
        if ref_ok:
            self.ids[i].append(tok)

    @precondition(lambda self: len(self.pairs) < _MAX_PAIRS)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        """Fork a pair into a new one; the parent's mask is re-checked afterwards."""
        i, m, r = self._select(data)
        before = self.target.backend_mask(m)
        child = self._guard(m.fork)
        self.ops.append(op.FORK)
        self.pairs.append((child, r.fork()))
        self.ids.append(list(self.ids[i]))
        self.parent_check = (i, before)

    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        """Roll both sides of a pair back by up to four tokens."""
        t = self.target
        i, m, r = self._select(data)
        k = draw_index(data, min(4, r.num_accepted) + 1)
        self._guard(m.rollback, k)
        r.rollback(k)
        self.ops.append(op.rollback(k))
        t.checks["rollback"] += 1
        self.ids[i] = [x for x in r.accepted_ids() if x not in t.vocab.eos_ids]

    @rule(data=st.data())
    def speculate(self, data: st.DataObject) -> None:
        """Validate a draft on both sides: same count accepted, and the backend's state unchanged."""
        t = self.target
        _, m, r = self._select(data)
        if m.validate is None or r.is_terminated():
            return
        pool = _draft_pool(t, r)
        draft = draw_list(data, pool, 4)
        before = t.backend_mask(m)
        got = int(self._guard(m.validate, draft))
        want = r.validate(draft)
        self.ops.append(op.validate(draft))
        t.checks["speculative"] += 1
        if got != want:
            self._serving(
                Invariant.SPECULATIVE,
                got,
                want,
                f"validate({draft}) accepts {got} tokens, the grammar {want}",
            )
        after = t.backend_mask(m)
        if not np.array_equal(before, after):
            self._serving(
                Invariant.SPECULATIVE, "mask changed", "unchanged", "validate() changed the matcher's state"
            )

    @rule(data=st.data())
    def jump_forward(self, data: st.DataObject) -> None:
        """Compare the backend's forced bytes with the reference's unique continuation."""
        t = self.target
        _, m, r = self._select(data)
        if m.forced_bytes is None or r.is_terminated():
            return
        got = bytes(self._guard(m.forced_bytes))
        want = r.forced_bytes()
        t.checks["jump_forward"] += 1
        if not _forced_bytes_ok(t, got, want):
            self.ops.append(op.FORCED_BYTES)
            self._serving(
                Invariant.JUMP_FORWARD, got, want, f"forced bytes {got!r}, the unique continuation {want!r}"
            )

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def masks_agree(self) -> None:
        """The touched pair's masks agree (unless its reference side has terminated)."""
        i = self.touched
        m, r = self.pairs[i]
        if r.is_terminated():
            return
        found = compare_step(self.target, m, r, self.ids[i], "stateful")
        if found:
            self._fail(found)

    @invariant()
    def fork_parent_unchanged(self) -> None:
        """Working on a fork leaves its parent's mask as it was before the fork."""
        if self.parent_check is None:
            return
        i, before = self.parent_check
        self.target.checks["fork"] += 1
        after = self.target.backend_mask(self.pairs[i][0])
        if self.touched != i and not np.array_equal(before, after):
            self.ops.append(op.switch(i))
            self._serving(
                Invariant.FORK,
                "parent's mask changed",
                "unchanged",
                "working on a fork changed its parent's mask",
            )
        if self.touched == i:
            self.parent_check = None
