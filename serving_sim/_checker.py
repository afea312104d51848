"""The serving invariant checker: an engine observer that replays every sequence on the reference.

Theory of operation
-------------------
The checker sees only trace records (``_trace``). For each constrained request it compiles its own
reference :class:`refdecoder.TokenGrammar` for the request's spec and the engine's vocabulary (never
the engine's compile cache), and for each sequence it keeps a fresh reference
:class:`refdecoder.Matcher` that it brings to the sequence's token ids by replay (rolling back to
the common prefix and accepting the rest). Then, record by record:

* ``soundness`` — every token a sequence takes is accepted by the reference after its prefix; every
  mask row it samples under allows nothing the reference forbids; a ``stop`` output is in the
  language, decided independently of both by :func:`props.corpus.validate_output` (``json`` +
  ``jsonschema`` + the profile's restrictions, ``re.fullmatch``, a second GBNF recognizer,
  membership). ``completeness`` — the mask forbids nothing the reference allows.
* ``eos`` — the mask differs from the reference only in EOS bits.
* ``fork`` / ``resume`` / ``speculative`` — a mismatch (mask or token verdict) on a sequence whose
  last structural operation was a fork or beam reorder, a resume from preemption, or a speculative
  verify; a verify must also report as grammar-valid exactly the reference's longest valid draft
  prefix. ``rollback`` — after the verify, the engine's matcher must be where a one-by-one walk of
  the accepted tokens would be (its mask equals the reference's there), and a token the reference
  accepts must not be rejected by a matcher that was rolled back.
* ``finish_reason`` — ``stop`` ends with EOS (or a stop id, unconstrained); ``length`` has exactly
  ``max_tokens`` tokens and never claims valid output; ``constraint_violation`` carries
  ``NO_VALID_TOKEN`` and no reference-allowed token had a finite logit there; ``cancelled`` only
  after a cancel. ``backend_error`` — an output finished ``error``.
* ``budget`` — for a ``finish_within_max_tokens`` request, the checker's own token budget
  (``_budget.BudgetCache``): admitted exactly when the spec's shortest output fits ``max_tokens``;
  each mask is the backend replay's mask AND the reference's budget mask for the tokens left (a mask
  that keeps tokens only the budget cuts is a ``budget`` violation); a verify passes only drafts
  within each position's budget; no output finishes ``length``.
* ``utf8`` — a constrained ``stop`` output is valid UTF-8; the concatenated stream deltas equal the
  final text (a delta that split a character shows as U+FFFD where the output has the character).
* Agent requests (``_agent``): the spec is the composed tool-call language, which the reference
  replays over the vocabulary's special tokens (their ids are grammar symbols there) however the
  engine switched grammars; a ``stop`` output of a structural tag is judged by the independent
  recognizer :mod:`props.corpus.structural_tag_check` over its text and special-token ids. A
  jump-forward token (``how="forced"``) must spell a prefix of the reference's forced bytes after its
  prefix — text the grammar has made certain — else it is a ``soundness`` violation (the engine
  committed text a later step could contradict).
* ``kv`` — the KV handle holds exactly the prompt and the sequence's ids at each position.
* ``isolation`` — the compile cache served a grammar compiled for this engine's vocabulary.

With a third-party backend the engine is compared with the backend's own fresh replay (serving
invariants above) and that replay with the reference (``backend:soundness``, ``backend:completeness``,
``backend:eos``: conformance findings of the backend, not of the serving loop); see
:class:`InvariantChecker`. The first violation per sequence and invariant is kept with its message;
later ones are counted. The invariant names and what each checks are
:data:`props.contract.findings.SIMULATION_INVARIANTS`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import refdecoder
from props.contract.backend import Compiled
from props.contract.findings import SIMULATION_INVARIANTS, SpecRef
from props.corpus import CorpusError, validate_output
from props.corpus.structural_tag_check import Undecided
from props.corpus.structural_tag_check import verdict as tag_verdict
from refdecoder import Accepted, Matcher, Spec, StructuralTag, TokenBudgetError, TokenGrammar
from refdecoder.bitmask import unpack_mask
from refdecoder.grammar import State

from ._agent import lifted_bytes
from ._budget import BudgetCache, BudgetOracle
from ._request import Request
from ._trace import (
    TraceAdmit,
    TraceCancel,
    TraceCompile,
    TraceDelta,
    TraceEvent,
    TraceFinish,
    TraceMask,
    TraceSpec,
    TraceToken,
)

__all__ = ["Violation", "InvariantChecker"]


@dataclass(frozen=True)
class Violation:
    invariant: str
    engine: str
    request_id: str
    seq_id: int | None
    step: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.engine}/{self.request_id}" + (
            f" seq {self.seq_id}" if self.seq_id is not None else ""
        )
        at = f" step {self.step}" if self.step is not None else ""
        return f"[{self.invariant}] {where}{at}: {self.message}"


class _Replay:
    """A matcher kept in step with one sequence by replay: extended token by token while the
    sequence grows, rebuilt from a fresh matcher (``make()``) whenever it does not (a fork, a
    reorder, a rollback). It never relies on the implementation's own ``rollback``."""

    def __init__(self, make: Any) -> None:
        self.make = make
        self.matcher = make()
        self.ids: list[int] = []
        self.bad: int | None = None  # index of the first token the matcher rejected

    def sync(self, ids: Sequence[int]) -> int | None:
        """Bring the matcher to ``ids``; the index of the first token it rejects, or None."""
        n = len(self.ids)
        if self.bad is not None or len(ids) < n or list(ids[:n]) != self.ids:
            self.matcher, self.ids, self.bad, n = self.make(), [], None, 0
        for i in range(n, len(ids)):
            if not isinstance(self.matcher.accept(int(ids[i])), Accepted):
                self.bad = i
                return i
            self.ids.append(int(ids[i]))
        return None

    def check(self, ids: Sequence[int], token: int) -> tuple[bool, str, int | None] | None:
        """``(accepted, reason, byte offset)`` for ``token`` after ``ids`` (None if ``ids`` is not viable)."""
        if self.sync(ids) is not None:
            return None
        out = self.matcher.fork().accept(int(token))
        if isinstance(out, Accepted):
            return True, "", None
        return False, str(getattr(out, "reason", out)), getattr(out, "byte_offset", None)

    def validate(self, ids: Sequence[int], draft: Sequence[int]) -> int | None:
        """How many leading draft tokens are accepted one by one after ``ids``."""
        if self.sync(ids) is not None:
            return None
        f = self.matcher.fork()
        n = 0
        for t in draft:
            if not isinstance(f.accept(int(t)), Accepted):
                break
            n += 1
        return n

    def mask(self, ids: Sequence[int]) -> np.ndarray | None:
        if self.sync(ids) is not None:
            return None
        return np.asarray(self.matcher.mask(), dtype=np.int32)

    def state_id(self) -> str:
        sid = getattr(getattr(self.matcher, "state", None), "id", None)
        return str(sid) if sid is not None else f"after {len(self.ids)} tokens"


@dataclass
class _Req:
    request: Request
    vocabulary: Any
    tg: TokenGrammar | None  # the reference, compiled by the checker
    backend: Any = None  # a third-party adapter and its own compiled grammar (compiled by the checker)
    compiled: Any = None
    cancelled: bool = False
    deltas: dict[int, list[str]] = field(default_factory=dict)
    budget: BudgetOracle | None = None  # finish_within_max_tokens: the checker's own token budget


_ORIGIN_INVARIANT = {"fork": "fork", "resume": "resume", "speculative": "speculative"}


class InvariantChecker:
    """Call it with each trace record (pass it in ``Engine(observers=[checker])``).

    With a third-party backend there are two replays per sequence: the backend's own (a fresh
    matcher from a grammar the checker compiled itself) and the reference's. A difference between
    the engine and its backend's replay is a serving bug (attributed as in the module docstring); a
    difference between the backend's replay and the reference is a conformance finding of the
    backend, reported as ``backend:soundness``, ``backend:completeness`` or ``backend:eos``. With
    the reference backend the two replays are one.
    """

    def __init__(self, max_examples_per_invariant: int = 50) -> None:
        self.violations: list[Violation] = []
        self.counts: Counter[str] = Counter()
        self.checked: Counter[str] = Counter()
        self.max_examples = max_examples_per_invariant
        self._reqs: dict[tuple[str, str], _Req] = {}
        self._ref: dict[tuple[str, int], _Replay] = {}
        self._own: dict[tuple[str, int], _Replay] = {}
        self._reported: set[tuple[str, int | None, str, str]] = set()
        self._examples: Counter[str] = Counter()
        self._evidence: dict[tuple[str, int], dict[tuple[int, ...], tuple[bool, str]]] = {}
        self._grammars: dict[tuple[str, str], TokenGrammar | None] = {}
        self._backend_grammars: dict[tuple[str, str, str], Any] = {}
        self._budgets = BudgetCache()  # the checker's own, never the engine's
        self._budget_walks: dict[tuple[str, int], tuple[tuple[int, ...], list[State]]] = {}

    # -- results ------------------------------------------------------------------------------------
    @property
    def clean(self) -> bool:
        return not self.counts

    def by_invariant(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))

    # -- dispatch -----------------------------------------------------------------------------------
    def __call__(self, event: TraceEvent) -> None:
        if isinstance(event, TraceMask):
            self._on_mask(event)
        elif isinstance(event, TraceToken):
            self._on_token(event)
        elif isinstance(event, TraceSpec):
            self._on_spec(event)
        elif isinstance(event, TraceDelta):
            req = self._reqs.get((event.engine, event.request_id))
            if req is not None:
                req.deltas.setdefault(event.index, []).append(event.text)
        elif isinstance(event, TraceFinish):
            self._on_finish(event)
        elif isinstance(event, TraceAdmit):
            self._on_admit(event)
        elif isinstance(event, TraceCompile):
            self._on_compile(event)
        elif isinstance(event, TraceCancel):
            req = self._reqs.get((event.engine, event.request_id))
            if req is not None:
                req.cancelled = True

    def _violate(
        self, invariant: str, engine: str, rid: str, seq: int | None, step: int | None, message: str
    ) -> None:
        assert invariant in SIMULATION_INVARIANTS, f"{invariant!r} is not in SIMULATION_INVARIANTS"
        self.counts[invariant] += 1
        key = (engine, seq, invariant, rid if seq is None else "")
        if key in self._reported or self._examples[invariant] >= self.max_examples:
            return
        self._reported.add(key)
        self._examples[invariant] += 1
        self.violations.append(Violation(invariant, engine, rid, seq, step, message))

    # -- compiling the oracles ----------------------------------------------------------------------
    def _reference(self, spec: Spec, vocabulary: Any) -> TokenGrammar | None:
        key = (spec.canonical(), str(vocabulary.fingerprint))
        if key not in self._grammars:
            try:
                self._grammars[key] = TokenGrammar(refdecoder.compile(spec), vocabulary)
            except Exception:  # noqa: BLE001 - no reference: masks go unchecked, outputs still validated
                self._grammars[key] = None
        return self._grammars[key]

    def _backend_grammar(self, backend: Any, spec: Spec, vocabulary: Any) -> Any:
        key = (str(getattr(backend, "name", "")), spec.canonical(), str(vocabulary.fingerprint))
        if key not in self._backend_grammars:
            try:
                out = backend.compile(spec, vocabulary)
            except Exception:  # noqa: BLE001
                out = None
            self._backend_grammars[key] = out if isinstance(out, Compiled) else None
        return self._backend_grammars[key]

    def _on_admit(self, e: TraceAdmit) -> None:
        spec = e.request.spec
        budget = self._admit_budget(e)
        if e.refused is not None:
            return
        tg = self._reference(spec, e.vocabulary) if spec is not None else None
        req = _Req(e.request, e.vocabulary, tg, budget=budget)
        if spec is not None and e.backend is not None and getattr(e.backend, "name", "") != "reference":
            compiled = self._backend_grammar(e.backend, spec, e.vocabulary)
            if compiled is not None:
                req.backend, req.compiled = e.backend, compiled
        self._reqs[(e.engine, e.request_id)] = req

    def _admit_budget(self, e: TraceAdmit) -> BudgetOracle | None:
        """For a ``finish_within_max_tokens`` request: the checker's own budget verdict against the
        engine's admission decision; the oracle to check its masks with when admitted."""
        r = e.request
        if r.spec is None or not r.finish_within_max_tokens:
            return None
        if e.refused is not None and not e.refused.startswith("finish_within_max_tokens"):
            return None  # refused for another reason first
        verdict = self._budgets.problem(r.spec, e.vocabulary, r.max_tokens)
        if e.refused is None and verdict is not None:
            self._violate(
                "budget",
                e.engine,
                e.request_id,
                None,
                None,
                f"admitted with finish_within_max_tokens and max_tokens={r.max_tokens}, but the "
                f"reference refuses it:\n    {verdict}",
            )
        elif e.refused is not None and verdict is None:
            self._violate(
                "budget",
                e.engine,
                e.request_id,
                None,
                None,
                f"refused at admission ({e.refused}), but the reference says the spec's shortest output "
                f"fits max_tokens={r.max_tokens}",
            )
        return self._budgets.oracle(r.spec, e.vocabulary) if verdict is None else None

    def _budget_state(
        self, engine: str, seq_id: int, budget: BudgetOracle, ids: Sequence[int]
    ) -> State | None:
        """The reference state after ``ids`` on the budget's grammar (None if it rejects one), kept per
        sequence and extended from the longest common prefix."""
        key = (engine, seq_id)
        have, states = self._budget_walks.get(key, ((), [budget.start()]))
        n = 0
        while n < min(len(have), len(ids)) and have[n] == ids[n]:
            n += 1
        states = states[: n + 1]
        for tok in ids[n:]:
            nxt = budget.advance(states[-1], tok)
            if nxt is None:
                return None
            states.append(nxt)
        self._budget_walks[key] = (tuple(int(t) for t in ids), states)
        return states[-1]

    def _budget_mask(self, engine: str, seq_id: int, req: _Req, ids: Sequence[int]) -> np.ndarray | None:
        """The reference's budget mask after ``ids`` (None without a budget, or where it is undecided)."""
        if req.budget is None:
            return None
        state = self._budget_state(engine, seq_id, req.budget, ids)
        if state is None:
            return None
        try:
            return req.budget.mask(state, req.request.max_tokens - len(ids))
        except TokenBudgetError:
            self.checked["budget_undecided"] += 1
            return None

    def _budget_prefix(self, e: TraceSpec, req: _Req, valid: int) -> int | None:
        """How many of the ``valid`` grammar-valid leading drafts are each in their position's budget
        mask (None without a budget, or where it is undecided)."""
        if req.budget is None:
            return None
        state = self._budget_state(e.engine, e.seq_id, req.budget, e.ids_before)
        n = 0
        for i, tok in enumerate(e.draft[:valid]):
            if state is None:
                return None
            try:
                row = req.budget.mask(state, req.request.max_tokens - len(e.ids_before) - i)
            except TokenBudgetError:
                self.checked["budget_undecided"] += 1
                return None
            if not (int(row[tok >> 5]) >> (tok & 31)) & 1:
                break
            state = req.budget.advance(state, tok)
            n += 1
        return n

    def _on_compile(self, e: TraceCompile) -> None:
        self.checked["compiles"] += 1
        if e.served_vocab != e.requested_vocab:
            self._violate(
                "isolation",
                e.engine,
                e.request_id,
                None,
                None,
                f"compile cache {'hit' if e.hit else 'miss'} served a grammar compiled for vocabulary "
                f"{e.served_vocab[:12]} to an engine whose vocabulary is {e.requested_vocab[:12]}",
            )

    def _replays(self, engine: str, seq_id: int, req: _Req) -> tuple[_Replay, _Replay]:
        """``(reference replay, the backend's own replay)``; one object for the reference backend."""
        key = (engine, seq_id)
        ref = self._ref.get(key)
        if ref is None:
            tg = req.tg
            assert tg is not None
            ref = self._ref[key] = _Replay(lambda: Matcher(tg))
        if req.backend is None:
            return ref, ref
        own = self._own.get(key)
        if own is None:
            backend, compiled = req.backend, req.compiled
            own = self._own[key] = _Replay(lambda: backend.matcher(compiled))
        return ref, own

    # -- records ------------------------------------------------------------------------------------
    def _on_mask(self, e: TraceMask) -> None:
        req = self._reqs.get((e.engine, e.request_id))
        if req is None:
            return
        self.checked["masks"] += 1
        expected_kv = req.request.prompt + e.ids
        if e.kv_tokens != expected_kv:
            self._violate(
                "kv",
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"KV holds {len(e.kv_tokens)} tokens ending {list(e.kv_tokens[-4:])}; the sequence is "
                f"{len(expected_kv)} tokens ending {list(expected_kv[-4:])}",
            )
        logits = e.logits.detach().to(torch.float64).numpy()
        finite = ~(np.isnan(logits) | np.isneginf(logits))
        vocab_size = int(logits.shape[0])
        if e.mask is None or req.tg is None:
            if e.mask is not None:
                allowed = unpack_mask(e.mask, vocab_size)
                has = bool(finite[allowed].any()) if allowed.size else False
            else:
                has = bool(finite.any())
            self._remember(e, has, "")
            return
        ref, own = self._replays(e.engine, e.seq_id, req)
        bad = ref.sync(e.ids)
        if bad is not None:
            inv = "speculative" if e.origin == "speculative" else "soundness"
            self._violate(
                inv,
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"mask used after token {e.ids[bad]} at position {bad}, which the reference rejects "
                f"({_tok(req.vocabulary, e.ids[bad])})",
            )
            return
        ref_mask = ref.mask(e.ids)
        own_mask = own.mask(e.ids) if own is not ref else ref_mask
        if ref_mask is None or own_mask is None:
            return  # the backend's replay rejects an earlier token: reported when it was taken
        budget = self._budget_mask(e.engine, e.seq_id, req, e.ids)
        want = own_mask if budget is None else own_mask & budget
        want_ids = unpack_mask(want, vocab_size)
        has = bool(finite[want_ids].any()) if want_ids.size else False
        self._remember(e, has, own.state_id())
        eos = np.asarray(sorted(req.vocabulary.eos_ids))
        engine_mask = np.asarray(e.mask, dtype=np.int32)
        if not np.array_equal(engine_mask, want):
            extra, missing = _diff(engine_mask, want, vocab_size)
            cut = unpack_mask(own_mask, vocab_size)  # the tokens the grammar allows here
            if budget is not None and not missing.size and np.isin(extra, cut).all():
                # Only tokens the grammar allows but the budget cuts: finish_within_max_tokens ignored.
                inv = "budget"
                message = _budget_message(req, e, own.state_id(), extra)
            else:
                if np.isin(extra, eos).all() and np.isin(missing, eos).all():
                    inv = "eos"
                else:
                    inv = _ORIGIN_INVARIANT.get(e.origin) or ("soundness" if extra.size else "completeness")
                who = "reference" if own is ref else f"{getattr(req.backend, 'name', 'backend')} replay"
                if budget is not None:
                    who += " within the token budget"
                message = _mask_message(req.vocabulary, e, own.state_id(), extra, missing, "engine", who)
            self._violate(inv, e.engine, e.request_id, e.seq_id, e.step, message)
        elif own is not ref and not np.array_equal(own_mask, ref_mask):
            extra, missing = _diff(own_mask, ref_mask, vocab_size)
            if np.isin(extra, eos).all() and np.isin(missing, eos).all():
                inv = "backend:eos"
            else:
                inv = "backend:soundness" if extra.size else "backend:completeness"
            self._violate(
                inv,
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                _mask_message(
                    req.vocabulary,
                    e,
                    ref.state_id(),
                    extra,
                    missing,
                    str(getattr(req.backend, "name", "backend")),
                    "reference",
                ),
            )

    def _remember(self, e: TraceMask, has_valid: bool, state_id: str) -> None:
        ev = self._evidence.setdefault((e.engine, e.seq_id), {})
        if len(ev) > 32:
            ev.clear()
        ev[e.ids] = (has_valid, state_id)

    def _on_token(self, e: TraceToken) -> None:
        req = self._reqs.get((e.engine, e.request_id))
        if req is None:
            return
        self.checked["tokens"] += 1
        if req.tg is None:
            return
        ref, own = self._replays(e.engine, e.seq_id, req)
        ref_v = ref.check(e.ids_before, e.token)
        own_v = own.check(e.ids_before, e.token) if own is not ref else ref_v
        if ref_v is None or own_v is None:
            return  # an earlier token was already reported
        ref_ok, reason, offset = ref_v
        own_ok = own_v[0]
        if e.how == "forced" and ref_ok:
            self._check_forced(e, req, ref)
        eng = "accepted" if e.backend_verdict else f"rejected ({e.backend_reason})"
        at = f" at byte {offset}" if offset is not None else ""
        if not own_ok:
            # The engine took a token its own backend, replayed afresh, does not allow here.
            if e.token in req.vocabulary.eos_ids:
                inv = "eos"
            elif e.how == "draft":
                inv = "speculative"
            elif e.how == "beam" or e.origin == "fork":
                inv = "fork"
            elif e.origin == "resume":
                inv = "resume"
            else:
                inv = "soundness"
            self._violate(
                inv,
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"{e.how} token {_tok(req.vocabulary, e.token)} taken after {len(e.ids_before)} tokens{at}\n"
                f"    engine:    took it (its matcher {eng})\n"
                f"    reference: rejected ({reason or own_v[1]})",
            )
            return
        if not ref_ok:
            self._violate(
                "backend:soundness",
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"token {_tok(req.vocabulary, e.token)} after {len(e.ids_before)} tokens{at}\n"
                f"    {getattr(req.backend, 'name', 'backend')}: accepted\n"
                f"    reference: rejected ({reason})",
            )
            return
        if e.backend_verdict is not False:
            return
        # A fresh replay accepts, the engine's matcher rejected: it is not at this prefix.
        if e.how == "resampled" and e.origin == "speculative":
            inv = "rollback"
        else:
            inv = _ORIGIN_INVARIANT.get(e.origin, "completeness")
        self._violate(
            inv,
            e.engine,
            e.request_id,
            e.seq_id,
            e.step,
            f"{e.how} token {_tok(req.vocabulary, e.token)} after {len(e.ids_before)} tokens (origin {e.origin})\n"
            f"    engine:    rejected ({e.backend_reason})\n"
            f"    fresh replay: accepted",
        )

    def _check_forced(self, e: TraceToken, req: _Req, ref: _Replay) -> None:
        """A jump-forward token must spell the next bytes of the reference's forced bytes after its
        prefix (``ref`` is at ``e.ids_before``: :meth:`_Replay.check` synced it)."""
        self.checked["forced"] += 1
        probe = getattr(ref.matcher, "forced_bytes", None)
        if probe is None:
            return
        forced = bytes(probe())
        data = lifted_bytes(req.vocabulary, e.token)
        if forced.startswith(data):
            return
        self._violate(
            "jump_forward",
            e.engine,
            e.request_id,
            e.seq_id,
            e.step,
            f"jump-forward token {_tok(req.vocabulary, e.token)} after {len(e.ids_before)} tokens is not "
            f"certain yet (state {ref.state_id()})\n"
            f"    engine:    forced {data!r}\n"
            f"    reference: forces only {forced!r} here",
        )

    def _on_spec(self, e: TraceSpec) -> None:
        req = self._reqs.get((e.engine, e.request_id))
        if req is None or req.tg is None:
            return
        self.checked["speculative"] += 1
        ref, own = self._replays(e.engine, e.seq_id, req)
        expected = own.validate(e.ids_before, e.draft)
        if expected is None:
            return
        within = self._budget_prefix(e, req, expected)
        if within is not None and within < e.grammar_ok <= expected:
            self._violate(
                "budget",
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"finish_within_max_tokens: verify of draft {list(e.draft)} after {len(e.ids_before)} "
                f"tokens (max_tokens={req.request.max_tokens})\n"
                f"    engine:           {e.grammar_ok} grammar-valid\n"
                f"    reference budget: {within} (draft {within} cannot end in time)",
            )
        elif e.grammar_ok != (expected if within is None else within):
            budgeted = "" if within is None else f", {within} within the token budget"
            self._violate(
                "speculative",
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"verify of draft {list(e.draft)} after {len(e.ids_before)} tokens\n"
                f"    engine:       {e.grammar_ok} grammar-valid\n"
                f"    fresh replay: {expected} grammar-valid (longest valid prefix{budgeted})",
            )
        if e.accepted > e.grammar_ok:
            self._violate(
                "speculative",
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"accepted {e.accepted} draft tokens but only {e.grammar_ok} passed the grammar",
            )
            return
        if e.matcher_mask is None or e.accepted > expected:
            return
        target = list(e.ids_before) + list(e.draft[: e.accepted])
        want = own.mask(target)
        if want is not None and not np.array_equal(np.asarray(e.matcher_mask, dtype=np.int32), want):
            self._violate(
                "rollback",
                e.engine,
                e.request_id,
                e.seq_id,
                e.step,
                f"after verify (walked {e.grammar_ok}, accepted {e.accepted}) the engine's matcher mask differs "
                f"from a one-by-one walk of the {len(target)} accepted tokens (state {own.state_id()})",
            )

    def _on_finish(self, e: TraceFinish) -> None:
        req = self._reqs.get((e.engine, e.request_id))
        if req is None:
            return
        self.checked["outputs"] += 1
        c = e.completion
        r = req.request
        v = req.vocabulary
        ids = list(c.token_ids)
        last = ids[-1] if ids else None

        def bad(inv: str, msg: str) -> None:
            self._violate(
                inv, e.engine, e.request_id, e.seq_id, None, f"output {c.index} ({c.finish_reason}): {msg}"
            )

        if len(ids) > r.max_tokens:
            bad("finish_reason", f"{len(ids)} tokens exceed max_tokens={r.max_tokens}")
        if c.valid and not (c.finish_reason == "stop" and r.spec is not None):
            bad("finish_reason", "claims a valid structured output without a constrained stop")
        reason = c.finish_reason
        if reason == "stop":
            ends = last is not None and (last in v.eos_ids or (r.spec is None and last in r.stop_ids))
            if not ends:
                bad(
                    "finish_reason",
                    f"reported stop, but the last token is {_tok(v, last) if last is not None else 'none'}"
                    f" (not EOS) after {len(ids)} of max_tokens={r.max_tokens}",
                )
            if r.spec is not None:
                self._check_output(e, req, ids, bad)
        elif reason == "length":
            if req.budget is not None:
                bad(
                    "budget",
                    f"finish_within_max_tokens: reached max_tokens={r.max_tokens} without EOS, though the "
                    "spec's shortest output fits: every output must end with stop and valid output",
                )
            if len(ids) != r.max_tokens:
                bad("finish_reason", f"reported length with {len(ids)} tokens, max_tokens={r.max_tokens}")
            if last is not None and last in v.eos_ids:
                bad("finish_reason", "reported length, but the output ends with EOS")
        elif reason == "constraint_violation":
            if not (c.error or "").startswith("NO_VALID_TOKEN") or c.error_step is None:
                bad(
                    "finish_reason",
                    f"constraint_violation without a NO_VALID_TOKEN error and step ({c.error!r})",
                )
            ev = self._evidence.get((e.engine, e.seq_id), {}).get(tuple(ids))
            if ev is None:
                bad("finish_reason", "constraint_violation at a position where no mask was used")
            elif ev[0]:
                bad(
                    "finish_reason",
                    f"reported NO_VALID_TOKEN after {len(ids)} tokens, but a fresh replay allows a "
                    f"token with a finite logit there (state {ev[1]})",
                )
        elif reason == "cancelled":
            if not req.cancelled:
                bad("finish_reason", "reported cancelled, but the request was never cancelled")
        elif reason == "error":
            bad("backend_error", c.error or "no reason given")
        if e.stream:
            joined = "".join(req.deltas.get(c.index, []))
            if joined != c.text:
                k = next(
                    (i for i, (a, b) in enumerate(zip(joined, c.text)) if a != b),
                    min(len(joined), len(c.text)),
                )
                bad(
                    "utf8",
                    f"concatenated stream deltas differ from the output at character {k}\n"
                    f"    deltas: {joined[max(0, k - 8) : k + 8]!r}\n"
                    f"    output: {c.text[max(0, k - 8) : k + 8]!r}",
                )

    def _check_output(self, e: TraceFinish, req: _Req, ids: list[int], bad: Any) -> None:
        spec = req.request.spec
        assert spec is not None
        data = req.vocabulary.decode(ids)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            bad(
                "utf8",
                f"stop output is not valid UTF-8 at byte {err.start}: {data[max(0, err.start - 8) : err.start + 8]!r}",
            )
            return
        if isinstance(spec, StructuralTag):
            self._check_tag_output(e, req, spec, ids, bad)
            return
        try:
            problem = validate_output(SpecRef.of(spec), data)
        except CorpusError:  # the independent validators cannot read this spec: the output goes unjudged
            self.checked["unvalidated"] += 1
            return
        self.checked["validated"] += 1
        if problem is not None:
            bad("soundness", f"output is not in the language: {problem}")
        elif not e.completion.valid:
            bad("finish_reason", "a valid stop output is not marked valid")

    def _check_tag_output(
        self, e: TraceFinish, req: _Req, spec: StructuralTag, ids: list[int], bad: Any
    ) -> None:
        """A structural tag's ``stop`` output, special tokens included, judged by the independent
        recognizer (never the reference)."""
        parts = _parts(req.vocabulary, ids)
        if parts is None:
            bad("utf8", "a text run of the stop output is not valid UTF-8")
            return
        try:
            ok = tag_verdict(spec.tag, parts, spec.special_tokens)
        except CorpusError:
            ok = Undecided(("the recognizer cannot read this tag",))
        if isinstance(ok, Undecided):
            self.checked["unvalidated"] += 1
            return
        self.checked["validated"] += 1
        self.checked["validated_toolcalls"] += 1
        if not ok:
            shown = [p if isinstance(p, str) else f"<{_tok(req.vocabulary, p)}>" for p in parts]
            bad("soundness", f"output is not in the structural tag's language: {shown!r:.300}")
        elif not e.completion.valid:
            bad("finish_reason", "a valid stop output is not marked valid")


def _parts(vocabulary: Any, ids: Sequence[int]) -> list[str | int] | None:
    """An output as the structural-tag recognizer reads it: text runs and special-token ids (EOS
    dropped); None when a text run is not UTF-8."""
    parts: list[str | int] = []
    run = bytearray()
    for t in ids:
        data = vocabulary.token_bytes[t]
        if data is not None:
            run += data
            continue
        if t in vocabulary.eos_ids:
            continue
        if run:
            try:
                parts.append(run.decode("utf-8"))
            except UnicodeDecodeError:
                return None
            run.clear()
        parts.append(int(t))
    if run:
        try:
            parts.append(run.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return parts


def _diff(mask: np.ndarray, want: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids allowed by mask only, ids allowed by want only)``."""
    a, b = unpack_mask(mask, vocab_size), unpack_mask(want, vocab_size)
    return np.setdiff1d(a, b), np.setdiff1d(b, a)


def _mask_message(
    vocabulary: Any, e: TraceMask, state: str, extra: np.ndarray, missing: np.ndarray, left: str, right: str
) -> str:
    offset = len(vocabulary.decode(e.ids))
    lines = [
        f"mask differs after {len(e.ids)} tokens (byte offset {offset}, state {state}, origin {e.origin})"
    ]
    width = max(len(left), len(right)) + 1
    for label, ids, lv, rv in (
        (f"allowed by {left} only", extra, "allowed", "forbidden"),
        (f"allowed by {right} only", missing, "forbidden", "allowed"),
    ):
        if ids.size:
            lines.append(f"  {label}: {ids.size} tokens, first {_tok(vocabulary, int(ids[0]))}")
            lines.append(f"    {left + ':':<{width}} {lv}")
            lines.append(f"    {right + ':':<{width}} {rv}")
    return "\n".join(lines)


def _budget_message(req: _Req, e: TraceMask, state: str, extra: np.ndarray) -> str:
    max_tokens = req.request.max_tokens
    left = max_tokens - len(e.ids)
    return (
        f"finish_within_max_tokens: the mask after {len(e.ids)} tokens (state {state}, origin "
        f"{e.origin}) keeps {extra.size} tokens after which the output cannot end within the {left} "
        f"tokens left of max_tokens={max_tokens}, first {_tok(req.vocabulary, int(extra[0]))}\n"
        f"    engine:           allowed\n"
        f"    reference budget: forbidden (the grammar allows it, but the output cannot end in time)"
    )


def _tok(vocabulary: Any, token_id: int) -> str:
    try:
        return str(vocabulary.token_repr(token_id))
    except Exception:  # noqa: BLE001 - a stub vocabulary
        data = vocabulary.token_bytes[token_id] if 0 <= token_id < len(vocabulary.token_bytes) else None
        return f"{token_id} {data!r}"
