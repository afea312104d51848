"""``Engine``: a continuous-batching step loop with grammar-constrained sampling (docs/design.md §5).

Theory of operation
-------------------
A request passes admission control (sizes, depth, rows, compile within a budget through the shared
compile cache) and waits in a queue. Each :meth:`Engine.step`:

1. *Schedules*: preempts the newest running requests while the KV budget is exceeded (their KV goes
   to the prefix cache, their matchers are dropped or snapshotted), then moves queued requests into
   the batch while it has rows and KV room (a preempted request resumes: KV from the prefix cache,
   matcher by replaying its generated tokens, or from a snapshot bound to grammar + vocabulary).
2. *Masks*: builds one ``[B, W]`` int32 bitmask, row ``b`` from sequence ``b``'s own matcher (each
   request has its own spec and compiled grammar); unconstrained rows allow everything.
3. *Forward*: one model call for all rows; each row feeds its pending tokens to its KV handle.
4. *Samples* sampled rows with :func:`refdecoder.sampler.sample` (a row with no grammar-allowed
   finite logit finishes ``constraint_violation`` with ``NO_VALID_TOKEN``), and advances beam
   requests: candidates from grammar-masked log-probabilities, the best ``beam_width`` kept, and one
   index map applied to token ids, KV handles, scores and matchers together.
5. *Speculates* for requests with ``speculative=k``: a draft proposes k tokens, the grammar walks
   them in order (the first it rejects ends the walk), the target accepts the walked prefix by
   probability ratio, the matcher rolls back what was walked but not accepted, and the target
   resamples at the first rejected position from the grammar-allowed set.
6. *Appends* each new token: matcher ``accept`` (a rejection of a token sampled from the matcher's
   own mask is a backend failure: finish ``error``), finish checks (EOS -> ``stop``; ``max_tokens``
   -> ``length``, never a valid output), and UTF-8 stream deltas that never split a character.

A request with ``finish_within_max_tokens`` also carries, per sequence, the reference's grammar state
(``_Seq.budget_state``, a value) next to the backend matcher, and every mask of step 2 — the
speculative walk's masks at each drafted position and the draft's guide included — is the
backend's mask AND the reference's budget mask for the tokens left (``_budget``). The state moves in
lock-step with the matcher: copied on fork and beam reorder, advanced on each accepted token (an id
the backend accepted and the reference rejects is a backend failure: finish ``error``), walked
along drafts and put back at the accepted position after a verify, replayed on resume.

An agent request (``Request.tools``, ``_agent``) compiles its switch's head grammar as its entry and
each tool's arguments grammar beside it; its matcher is a ``SwitchingMatcher`` that swaps to the chosen
tool's grammar when the delimiter completes the name (so forks, verifies, rollbacks and resumes cross
the switch like any other token). With ``jump_forward`` a sampled token is followed, without a model
call, by the tokens spelling the grammar's forced bytes (``how="forced"``), streamed as appended.

Every action is reported to the observers as a trace record (``_trace``); the invariant checker is
one such observer. Faults (``_faults``) are single ``if self._fault(NAME)`` branches next to the code
they corrupt.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

from props.contract.backend import Backend, Refused
from refdecoder import Accepted, TokenBudgetError, special_token_bytes
from refdecoder.errors import NoValidToken
from refdecoder.grammar import State
from refdecoder.sampler import SamplingParams, apply_token_bitmask, sample

from ._admission import AdmissionLimits, admission_problem
from ._agent import SwitchingMatcher, forced_token_ids
from ._budget import BudgetCache, BudgetOracle
from ._caches import CacheEntry, CompileCache, MatcherSnapshot, PrefixCache
from ._errors import SnapshotMismatch
from ._faults import check_faults
from ._lifecycle import Event, Status, transition
from ._metrics import Metrics
from ._models import Draft, KVHandle, Model, NoisyDraft
from ._request import (
    AdmissionRefused,
    Completion,
    Delta,
    Finished,
    FinishReason,
    Request,
    RequestHandle,
    StreamEvent,
)
from ._stream import TextStream
from ._trace import (
    Observer,
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

__all__ = ["Engine", "EngineConfig"]


@dataclass(frozen=True)
class EngineConfig:
    """``max_rows``: batch rows; ``kv_budget_tokens``: KV tokens before preemption;
    ``resume_mode``: how a preempted matcher comes back (``replay`` or ``snapshot``)."""

    name: str = "engine"
    max_rows: int = 16
    kv_budget_tokens: int = 1 << 20
    admission: AdmissionLimits = field(default_factory=AdmissionLimits)
    resume_mode: Literal["replay", "snapshot"] = "replay"
    prefix_cache_entries: int = 256
    seed: int = 0


class _BackendFailure(Exception):
    """Internal: a backend call failed; the sequence finishes ``error`` with this reason."""


@dataclass(eq=False)
class _Seq:
    seq_id: int
    index: int
    ids: list[int]
    kv: KVHandle | None
    score: float
    matcher: Any | None
    stream: TextStream
    origin: str = "new"
    snapshot: MatcherSnapshot | None = None
    t_last: float | None = None
    budget_state: State | None = None  # the reference's state (finish_within_max_tokens only)


@dataclass(eq=False)
class _Live:
    handle: RequestHandle
    request: Request
    params: SamplingParams
    entry: CacheEntry | None
    t_submit: float
    step_submitted: int
    budget: BudgetOracle | None = None  # finish_within_max_tokens: the reference's token budget
    tails: dict[str, CacheEntry] = field(default_factory=dict)  # agent requests: each tool's arguments
    seqs: list[_Seq] = field(default_factory=list)
    hypotheses: list[tuple[_Seq, Completion]] = field(default_factory=list)  # beam search
    started: bool = False

    @property
    def rid(self) -> str:
        return self.handle.request_id

    @property
    def beam(self) -> bool:
        return self.request.beam_width > 1

    @property
    def rows(self) -> int:
        return max(self.request.n, self.request.beam_width)


def _mix(*parts: Any) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)


def _has_bit(row: np.ndarray, token_id: int) -> bool:
    return bool((int(row[token_id >> 5]) >> (token_id & 31)) & 1)


def _popcount(row: np.ndarray, vocab_size: int) -> int:
    bits = np.unpackbits(np.ascontiguousarray(row, dtype="<i4").view(np.uint8), bitorder="little")
    return int(bits[:vocab_size].sum())


class Engine:
    """One model replica with one vocabulary and one backend adapter; see the module docstring."""

    def __init__(
        self,
        model: Model,
        backend: Backend,
        vocabulary: Any,
        config: EngineConfig | None = None,
        *,
        faults: Iterable[str] = (),
        observers: Sequence[Observer] = (),
        compile_cache: CompileCache | None = None,
        prefix_cache: PrefixCache | None = None,
        draft: Draft | None = None,
    ) -> None:
        self.model = model
        self.backend = backend
        self.vocabulary = vocabulary
        self.config = config or EngineConfig()
        self.name = self.config.name
        self.faults = check_faults(faults)
        self.observers = list(observers)
        self.compile_cache = compile_cache if compile_cache is not None else CompileCache()
        self.prefix_cache = (
            prefix_cache if prefix_cache is not None else PrefixCache(model, self.config.prefix_cache_entries)
        )
        self.draft: Draft = (
            draft if draft is not None else NoisyDraft(model, seed=_mix(self.config.seed, "draft"))
        )
        self.vocab_size = len(vocabulary)
        if getattr(model, "vocab_size", self.vocab_size) != self.vocab_size:
            raise ValueError(f"model has {model.vocab_size} logits, vocabulary has {self.vocab_size} ids")
        self.num_words = (self.vocab_size + 31) // 32
        self.eos_ids = frozenset(int(i) for i in vocabulary.eos_ids)
        self._ones = np.full(self.num_words, -1, dtype=np.int32)
        self._ones.flags.writeable = False
        self._eos_bits = np.zeros(self.num_words, dtype=np.int32)
        for e in self.eos_ids:
            self._eos_bits[e // 32] |= np.int32(np.uint32(1 << (e % 32)).view(np.int32))
        self.metrics = Metrics()
        self.budgets = BudgetCache()
        self.step_no = 0
        self._queue: deque[_Live] = deque()
        self._running: list[_Live] = []
        self._handles: dict[str, RequestHandle] = {}
        self._live: dict[str, _Live] = {}
        self._next_request = 0
        self._next_seq = 0

    # -- public API ---------------------------------------------------------------------------------
    def submit(self, request: Request) -> RequestHandle:
        """Admission control, compile (cache), queue. A refused request gets an :class:`AdmissionRefused` event."""
        rid = request.request_id or f"{self.name}-{self._next_request}"
        self._next_request += 1
        if rid in self._handles:
            raise ValueError(f"request id {rid!r} was already submitted")
        handle = RequestHandle(rid, request)
        self._handles[rid] = handle
        problem = admission_problem(request, self.config.admission, self.config.max_rows, self.vocab_size)
        if problem is None and request.tools is not None and request.spec is None:
            problem = "tools: an agent request needs its composed tool-call language as spec"
        entry: CacheEntry | None = None
        tails: dict[str, CacheEntry] = {}
        if problem is None and request.spec is not None:
            # An agent request compiles its switch's grammars, never the composed spec.
            plan = request.tools
            wanted = [("", request.spec)] if plan is None else [("", plan.head), *plan.tails]
            for tool, spec in wanted:
                got, problem = self._compile(rid, spec)
                if problem is not None:
                    break
                assert got is not None
                if tool:
                    tails[tool] = got
                else:
                    entry = got
        budget: BudgetOracle | None = None
        if problem is None and request.spec is not None and request.finish_within_max_tokens:
            problem = self.budgets.problem(request.spec, self.vocabulary, request.max_tokens)
            if problem is None:
                budget = self.budgets.oracle(request.spec, self.vocabulary)
        self._emit(TraceAdmit(self.name, rid, request, self.vocabulary, problem, self.backend))
        if problem is not None:
            handle.status = transition(rid, handle.status, Event.REFUSE)
            handle.refusal = problem
            handle.events.append(AdmissionRefused(rid, problem))
            self.metrics.refused += 1
            return handle
        params = request.params
        if params.seed is None:
            params = replace(params, seed=_mix(self.config.seed, rid))
        live = _Live(handle, request, params, entry, time.perf_counter(), self.step_no, budget, tails)
        handle.status = transition(rid, handle.status, Event.ADMIT)
        self._live[rid] = live
        self._queue.append(live)
        return handle

    def _compile(self, rid: str, spec: Any) -> tuple[CacheEntry | None, str | None]:
        """``(the compile cache's entry, None)`` or ``(None, why the backend refused)``."""
        out, hit, ms = self.compile_cache.get_or_compile(
            spec,
            self.backend,
            self.vocabulary,
            budget_s=self.config.admission.compile_budget_s,
            include_vocabulary=not self._fault("cache_key_without_vocab"),
        )
        if isinstance(out, Refused):
            problem = f"refused by {getattr(self.backend, 'name', 'backend')}: {out.reason}"
            if out.keyword:
                problem += f" (keyword {out.keyword!r}{' at ' + out.where if out.where else ''})"
            return None, problem
        (self.metrics.compile_warm_ms if hit else self.metrics.compile_cold_ms).append(ms)
        self._emit(
            TraceCompile(
                self.name,
                rid,
                out.spec_fingerprint,
                str(self.vocabulary.fingerprint),
                out.vocab_fingerprint,
                hit,
                ms,
            )
        )
        return out, None

    def cancel(self, request_id: str) -> bool:
        """Cancel a queued, running or preempted request; False if it is unknown or already done."""
        live = self._live.get(request_id)
        if live is None or live.handle.done:
            return False
        self._emit(TraceCancel(self.name, request_id))
        if live in self._queue:
            self._queue.remove(live)
        if live in self._running:
            self._running.remove(live)
        if not live.started and not live.seqs:  # never scheduled: one empty output per index
            live.seqs = [self._new_seq(i, [], None, 0.0, None, "new") for i in range(live.request.n)]
        for seq in list(live.seqs):
            self._finish_seq(live, seq, "cancelled")
        live.handle.status = transition(request_id, live.handle.status, Event.CANCEL)
        self._close(live)
        self.metrics.cancellations += 1
        return True

    def preempt(self, request_id: str) -> bool:
        """Preempt a running request now (as the scheduler does when KV runs short)."""
        live = self._live.get(request_id)
        if live is None or live.handle.status is not Status.RUNNING:
            return False
        self._preempt(live)
        return True

    def progress(self, request_id: str) -> int | None:
        """Tokens generated by the request's longest live sequence; -1 while it waits to run; None
        once it is done (or unknown)."""
        live = self._live.get(request_id)
        if live is None or live.handle.done or (live.started and not live.seqs):
            return None
        if live.handle.status is not Status.RUNNING:
            return -1
        return max((len(s.ids) for s in live.seqs), default=0)

    @property
    def has_unfinished(self) -> bool:
        return bool(self._queue or self._running)

    def handles(self) -> list[RequestHandle]:
        return list(self._handles.values())

    def run(self, max_steps: int = 100_000) -> list[RequestHandle]:
        for _ in range(max_steps):
            if not self.has_unfinished:
                break
            self.step()
        return self.handles()

    def step(self) -> list[StreamEvent]:
        """One scheduling + decode step; returns the stream events it produced."""
        self.step_no += 1
        marks = {rid: len(h.events) for rid, h in self._handles.items()}
        self._schedule()
        batch: list[tuple[_Live, _Seq]] = []
        spec: list[tuple[_Live, _Seq]] = []
        for live in self._running:
            for seq in live.seqs:
                (spec if live.request.speculative else batch).append((live, seq))
        mask_ms = forward_ms = sample_ms = 0.0
        if batch:
            mask_ms, forward_ms, sample_ms = self._decode(batch)
        for live, seq in spec:
            if seq in live.seqs and live in self._running:
                m, f, s = self._speculate(live, seq)
                mask_ms, forward_ms, sample_ms = mask_ms + m, forward_ms + f, sample_ms + s
        self.metrics.record_step(mask_ms, forward_ms, sample_ms)
        for live in list(self._running):
            if not live.seqs:
                self._complete(live)
        out: list[StreamEvent] = []
        for rid, h in self._handles.items():
            out.extend(h.events[marks.get(rid, 0) :])
        return out

    # -- plumbing -----------------------------------------------------------------------------------
    def _fault(self, name: str) -> bool:
        return name in self.faults

    def _emit(self, event: TraceEvent) -> None:
        for observer in self.observers:
            observer(event)

    def _new_seq(
        self, index: int, ids: list[int], kv: KVHandle | None, score: float, matcher: Any, origin: str
    ) -> _Seq:
        seq = _Seq(
            self._next_seq,
            index,
            ids,
            kv,
            score,
            matcher,
            TextStream(self._fault("stream_split_char")),
            origin,
        )
        self._next_seq += 1
        return seq

    def _fork(self, parent: _Seq, index: int, slot: _Seq | None = None) -> _Seq:
        """A child copying ids, KV, score and matcher together (``slot``: the old beam at the child's
        position, which only the matcher-reorder fault reads)."""
        assert parent.kv is not None
        kv = parent.kv if self._fault("beam_kv_not_forked") else self.model.fork_kv(parent.kv)
        matcher = parent.matcher
        if matcher is not None and not self._fault("shared_beam_matcher"):
            source = (
                slot if (slot is not None and self._fault("beam_reorder_without_matcher_reorder")) else parent
            )
            matcher = source.matcher.fork() if source.matcher is not None else None
        child = self._new_seq(index, list(parent.ids), kv, parent.score, matcher, "fork")
        child.budget_state = parent.budget_state  # a value: forking is assignment
        return child

    def _generator(self, live: _Live, seq: _Seq, salt: str) -> torch.Generator:
        g = torch.Generator(device="cpu")
        g.manual_seed(_mix(live.params.seed, seq.index, len(seq.ids), salt))
        return g

    def _context(self, live: _Live, seq: _Seq) -> list[int]:
        return list(live.request.prompt) + seq.ids

    def _pending(self, live: _Live, seq: _Seq) -> list[int]:
        assert seq.kv is not None
        ctx = self._context(live, seq)
        have = len(seq.kv.tokens)
        if have >= len(ctx):  # nothing new to feed: re-feed the last token
            self.model.truncate_kv(seq.kv, len(ctx) - 1)
            have = len(ctx) - 1
        return ctx[have:]

    def _mask_row(self, live: _Live, seq: _Seq, drafted: int = 0) -> np.ndarray:
        """The row ``seq`` samples under, ``drafted`` tokens past its ids (the speculative walk): the
        matcher's mask, AND the budget mask for the tokens left under ``finish_within_max_tokens``."""
        if seq.matcher is None:
            return self._ones
        try:
            row = np.asarray(seq.matcher.mask(), dtype=np.int32)
        except Exception as e:  # noqa: BLE001 - any backend exception is a finding, reported as 'error'
            raise _BackendFailure(f"mask() raised {e!r}") from e
        if row.shape != (self.num_words,):
            raise _BackendFailure(f"mask has shape {row.shape}, expected ({self.num_words},) int32 words")
        budget = self._budget_bits(live, seq.budget_state, len(seq.ids) + drafted)
        if budget is not None:
            row = row & budget
        if self._fault("eos_always_allowed"):
            row = row | self._eos_bits
        return row

    def _budget_bits(self, live: _Live, state: State | None, length: int) -> np.ndarray | None:
        """The reference's budget mask after ``length`` generated tokens in ``state`` (None without a
        budget); a budget the reference cannot decide in bound is a failure of the sequence."""
        if live.budget is None or state is None:
            return None
        if self._fault("budget_ignored"):
            return None
        try:
            return live.budget.mask(state, live.request.max_tokens - length)
        except TokenBudgetError as e:
            raise _BackendFailure(f"finish_within_max_tokens: {e}") from e

    def _advance_budget(self, live: _Live, seq: _Seq, tok: int) -> None:
        """Move the reference state over ``tok``, which the backend matcher accepted; the reference
        rejecting it is the backend's defect, raised as a backend failure."""
        if live.budget is None or seq.budget_state is None:
            return
        nxt, reason = live.budget.check(seq.budget_state, tok)
        if nxt is None:
            raise _BackendFailure(
                f"backend accepted token {self.vocabulary.token_repr(tok)} that the reference rejects "
                f"({reason}); finish_within_max_tokens cannot track the reference state"
            )
        seq.budget_state = nxt

    def _state_id(self, seq: _Seq) -> str | None:
        m = seq.matcher
        if m is None:
            return None
        state = getattr(m, "state", None)
        sid = getattr(state, "id", None)
        return str(sid) if sid is not None else f"after {len(seq.ids)} tokens"

    # -- scheduling ---------------------------------------------------------------------------------
    def _kv_used(self) -> int:
        return sum(len(live.request.prompt) + len(s.ids) + 1 for live in self._running for s in live.seqs)

    def _kv_need(self, live: _Live) -> int:
        if live.seqs:
            return sum(len(live.request.prompt) + len(s.ids) + 1 for s in live.seqs)
        return live.rows * (len(live.request.prompt) + 1)

    def _schedule(self) -> None:
        budget = self.config.kv_budget_tokens
        while len(self._running) > 1 and self._kv_used() > budget:
            self._preempt(self._running[-1])
        rows = sum(live.rows for live in self._running)
        while self._queue:
            live = self._queue[0]
            if rows + live.rows > self.config.max_rows:
                break
            if self._running and self._kv_used() + self._kv_need(live) > budget:
                break
            self._queue.popleft()
            if live.handle.status is Status.PREEMPTED:
                self._resume(live)
            else:
                self._start(live)
            rows += live.rows

    def _start(self, live: _Live) -> None:
        live.handle.status = transition(live.rid, live.handle.status, Event.SCHEDULE)
        self._running.append(live)
        prompt = live.request.prompt
        kv = self.prefix_cache.lookup(prompt) or self.model.new_kv()
        matcher = None
        if live.entry is not None:
            try:
                matcher = self._new_matcher(live)
            except Exception as e:  # noqa: BLE001
                first = self._new_seq(0, [], kv, 0.0, None, "new")
                live.seqs = [first]
                self._finish_seq(live, first, "error", error=f"backend matcher() raised {e!r}")
                return
        first = self._new_seq(0, [], kv, 0.0, matcher, "new")
        if live.budget is not None and matcher is not None:
            first.budget_state = live.budget.start()
        live.seqs = [first] + [self._fork(first, i) for i in range(1, live.request.n)]
        live.started = True

    def _preempt(self, live: _Live) -> None:
        live.handle.status = transition(live.rid, live.handle.status, Event.PREEMPT)
        for seq in live.seqs:
            if seq.kv is not None and seq.kv.tokens:
                self.prefix_cache.put(seq.kv)
            if self.config.resume_mode == "snapshot" and seq.matcher is not None and live.entry is not None:
                seq.snapshot = MatcherSnapshot.take(seq.matcher, live.entry, len(seq.ids))
            seq.kv = None
            seq.matcher = None
            seq.budget_state = None
        self._running.remove(live)
        self._queue.appendleft(live)
        self.metrics.preemptions += 1

    def _resume(self, live: _Live) -> None:
        live.handle.status = transition(live.rid, live.handle.status, Event.RESUME)
        self._running.append(live)
        self.metrics.resumes += 1
        for seq in list(live.seqs):
            ctx = tuple(self._context(live, seq))
            seq.kv = self.prefix_cache.lookup(ctx) or self.model.new_kv()
            seq.origin = "resume"
            if live.entry is None:
                continue
            try:
                seq.matcher = self._restore_matcher(live, seq)
                seq.budget_state = self._restore_budget(live, seq)
            except (_BackendFailure, SnapshotMismatch) as e:
                self._finish_seq(live, seq, "error", error=f"resume failed: {e}")

    def _restore_budget(self, live: _Live, seq: _Seq) -> State | None:
        """The reference state of a resumed sequence, by replaying its generated ids."""
        if live.budget is None:
            return None
        state, bad = live.budget.replay(seq.ids)
        if bad is not None:
            raise _BackendFailure(
                f"the reference rejects generated token {bad} ({seq.ids[bad]}) on replay for "
                "finish_within_max_tokens"
            )
        return state

    def _new_matcher(self, live: _Live) -> Any:
        """A fresh matcher for the request: its entry's, behind a :class:`SwitchingMatcher` for an agent
        request (each tool's arguments matcher made from its entry when the name completes)."""
        assert live.entry is not None
        matcher = self.backend.matcher(live.entry.compiled)
        plan = live.request.tools
        if plan is None:
            return matcher
        tails = live.tails

        def make_tail(name: str) -> Any:
            if name not in tails:
                raise _BackendFailure(f"the head grammar completed an unknown tool name {name!r}")
            return self.backend.matcher(tails[name].compiled)

        return SwitchingMatcher(
            matcher, plan, self.vocabulary, make_tail, self._fault("switch_rollback_keeps_tail")
        )

    def _restore_matcher(self, live: _Live, seq: _Seq) -> Any:
        entry = live.entry
        assert entry is not None
        if seq.snapshot is not None:
            snap, seq.snapshot = seq.snapshot, None
            return snap.restore(entry.spec_fingerprint, str(self.vocabulary.fingerprint), entry.key.backend)
        try:
            matcher = self._new_matcher(live)
        except Exception as e:  # noqa: BLE001
            raise _BackendFailure(f"matcher() raised {e!r}") from e
        if self._fault("resume_without_replay"):
            return matcher
        for k, tok in enumerate(seq.ids):
            try:
                out = matcher.accept(tok)
            except Exception as e:  # noqa: BLE001
                raise _BackendFailure(f"replay of token {tok} raised {e!r}") from e
            if not isinstance(out, Accepted):
                raise _BackendFailure(f"replay rejected generated token {k} ({tok}): {out}")
        return matcher

    # -- decode (sampled and beam rows) -------------------------------------------------------------
    def _decode(self, batch: list[tuple[_Live, _Seq]]) -> tuple[float, float, float]:
        t0 = time.perf_counter()
        rows: list[tuple[_Live, _Seq, np.ndarray]] = []
        for live, seq in batch:
            try:
                rows.append((live, seq, self._mask_row(live, seq)))
            except _BackendFailure as e:
                self._finish_seq(live, seq, "error", error=str(e))
        t1 = time.perf_counter()
        if not rows:
            return (t1 - t0) * 1000, 0.0, 0.0
        feeds = [(seq.kv, self._pending(live, seq)) for live, seq, _ in rows]
        outs = self.model.forward([(kv, new) for kv, new in feeds if kv is not None], [1] * len(feeds))
        logits = torch.stack([o[-1] for o in outs])
        t2 = time.perf_counter()
        bitmask = np.stack([row for _, _, row in rows])
        for b, (live, seq, row) in enumerate(rows):
            assert seq.kv is not None
            if len(seq.kv.tokens) == len(live.request.prompt) and not seq.ids:
                self.prefix_cache.put(seq.kv)
            self._trace_mask(live, seq, row, logits[b], tuple(seq.ids), tuple(seq.kv.tokens), seq.origin)
            seq.origin = "step"
        sampled = [b for b, (live, _, _) in enumerate(rows) if not live.beam]
        if sampled:
            # index_select, not logits[list]: advanced indexing is far slower on CPU torch.
            sel = torch.tensor(sampled, dtype=torch.int64)
            self._sample_rows([rows[b] for b in sampled], logits.index_select(0, sel), bitmask[sampled])
        beams: dict[str, list[int]] = {}
        for b, (live, _, _) in enumerate(rows):
            if live.beam:
                beams.setdefault(live.rid, []).append(b)
        for idx in beams.values():
            sel = torch.tensor(idx, dtype=torch.int64)
            self._beam_step(
                rows[idx[0]][0], [rows[b][1] for b in idx], logits.index_select(0, sel), bitmask[idx]
            )
        t3 = time.perf_counter()
        return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000

    def _trace_mask(
        self,
        live: _Live,
        seq: _Seq,
        row: np.ndarray,
        logits: torch.Tensor,
        ids: tuple[int, ...],
        kv_tokens: tuple[int, ...],
        origin: str,
    ) -> None:
        if seq.matcher is not None:
            self.metrics.mask_density.append(_popcount(row, self.vocab_size) / self.vocab_size)
        self._emit(
            TraceMask(
                self.name,
                live.rid,
                seq.seq_id,
                self.step_no,
                ids,
                None if seq.matcher is None and live.entry is None else row,
                logits,
                kv_tokens,
                origin,
            )
        )

    def _sample_rows(
        self, rows: list[tuple[_Live, _Seq, np.ndarray]], logits: torch.Tensor, bitmask: np.ndarray
    ) -> None:
        params = [live.params for live, _, _ in rows]
        gens = [self._generator(live, seq, "sample") for live, seq, _ in rows]
        result = sample(
            logits,
            torch.from_numpy(bitmask),
            params,
            generators=gens,
            step=self.step_no,
            state_ids=[self._state_id(seq) for _, seq, _ in rows],
            raise_on_error=False,
        )
        self.metrics.nan_logits += int(result.nan_counts.sum())
        removed = result.grammar_removed_mass.tolist()
        logprobs = result.logprobs.tolist()
        for b, ((live, seq, _), outcome) in enumerate(zip(rows, result.outcomes(), strict=True)):
            if seq.matcher is not None and not math.isnan(removed[b]):
                self.metrics.grammar_removed_mass.append(removed[b])
            if isinstance(outcome, NoValidToken):
                if self._fault("soft_filter_after_mask_dropped"):
                    # The bug: drop the mask and let the soft filters pick from the raw logits.
                    fallback = sample(
                        logits[b : b + 1],
                        torch.from_numpy(self._ones[None, :].copy()),
                        [params[b]],
                        generators=[self._generator(live, seq, "fallback")],
                        raise_on_error=False,
                    )
                    tok = fallback.outcomes()[0]
                    if not isinstance(tok, NoValidToken):
                        self._append(live, seq, int(tok), "sampled")
                        continue
                self._no_valid_token(live, seq)
                continue
            seq.score += logprobs[b]
            self._append(live, seq, int(outcome), "sampled")

    def _beam_step(self, live: _Live, beams: list[_Seq], logits: torch.Tensor, bitmask: np.ndarray) -> None:
        width = live.request.beam_width
        x = torch.nan_to_num(logits.to(torch.float32), nan=-math.inf, posinf=math.inf, neginf=-math.inf)
        apply_token_bitmask(x, torch.from_numpy(bitmask))
        cands: list[tuple[float, int, int]] = []
        dead: list[_Seq] = []
        for pos, seq in enumerate(beams):
            row = x[pos]
            finite = torch.isfinite(row)
            if not bool(finite.any()):
                dead.append(seq)
                continue
            lp = torch.log_softmax(row, dim=-1)
            k = min(2 * width, int(finite.sum()))
            vals, toks = torch.topk(lp, k)
            cands.extend((seq.score + float(v), pos, int(t)) for v, t in zip(vals, toks, strict=True))
        for seq in dead:
            self._no_valid_token(live, seq)
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        room = width - len(live.hypotheses)
        chosen: list[tuple[float, int, int]] = []
        n_live = n_eos = 0
        for score, pos, tok in cands:
            if tok in self.eos_ids:
                if len(live.hypotheses) + n_eos < width:
                    chosen.append((score, pos, tok))
                    n_eos += 1
            elif n_live < room - n_eos:
                chosen.append((score, pos, tok))
                n_live += 1
            if n_live + n_eos >= room:
                break
        # One index map for token ids, KV handles, scores and matchers together.
        parents = [pos for _, pos, _ in chosen]
        children = [self._fork(beams[p], j, beams[min(j, len(beams) - 1)]) for j, p in enumerate(parents)]
        for seq in beams:
            if seq in live.seqs:
                live.seqs.remove(seq)
        live.seqs.extend(children)
        for child, (score, _, tok) in zip(children, chosen, strict=True):
            child.score = score
            self._append(live, child, tok, "beam")

    # -- speculative decoding -----------------------------------------------------------------------
    def _target_probs(self, logits: torch.Tensor, row: np.ndarray, params: SamplingParams) -> torch.Tensor:
        x = torch.nan_to_num(
            logits.to(torch.float64), nan=-math.inf, posinf=math.inf, neginf=-math.inf
        ).clone()
        apply_token_bitmask(x, torch.from_numpy(np.array(row, dtype=np.int32)))
        top = x == math.inf
        if bool(top.any()):
            return top.to(torch.float64) / float(top.sum())
        if not bool(torch.isfinite(x).any()):
            return torch.zeros_like(x)
        if params.greedy:
            p = torch.zeros_like(x)
            p[int(x.argmax())] = 1.0
            return p
        return torch.softmax(x / params.temperature, dim=-1)

    def _guide(self, live: _Live, seq: _Seq) -> Any:
        """Grammar masks for the draft, from a fork of the sequence's matcher (None: unconstrained),
        within the token budget at each drafted position under ``finish_within_max_tokens``."""
        if seq.matcher is None:
            return None
        fork = seq.matcher.fork()
        walked: list[int] = []
        alive = [True]
        state = [seq.budget_state]

        def guide(drafted: Sequence[int]) -> np.ndarray | None:
            try:
                while alive[0] and len(walked) < len(drafted):
                    tok = int(drafted[len(walked)])
                    walked.append(tok)
                    alive[0] = isinstance(fork.accept(tok), Accepted)
                    if live.budget is not None and state[0] is not None:
                        state[0] = live.budget.advance(state[0], tok)
                if not alive[0]:
                    return None
                row = np.asarray(fork.mask(), dtype=np.int32)
                budget = self._budget_bits(live, state[0], len(seq.ids) + len(walked))
                return row if budget is None else row & budget
            except Exception:  # noqa: BLE001 - the draft then runs unconstrained; verify still checks
                alive[0] = False
                return None

        return guide

    def _speculate(self, live: _Live, seq: _Seq) -> tuple[float, float, float]:
        """One speculative step of ``seq`` (step 5 of the module docstring); ``(mask, forward, sample)`` ms."""
        req = live.request
        assert seq.kv is not None
        t0 = time.perf_counter()
        k = max(0, min(req.speculative, req.max_tokens - len(seq.ids) - 1))
        gen = self._generator(live, seq, "speculate")
        ctx = self._context(live, seq)
        drafts, q = (
            self.draft.propose(ctx, k, live.params, gen, self._guide(live, seq))
            if k
            else ([], torch.zeros((0, self.vocab_size)))
        )
        t1 = time.perf_counter()
        pending = self._pending(live, seq)
        logits = self.model.forward([(seq.kv, pending + drafts)], [k + 1])[0]
        t2 = time.perf_counter()
        base = len(ctx)
        ids_before = tuple(seq.ids)
        check = seq.matcher is not None and not self._fault("spec_accept_without_grammar")
        try:
            masks, walked, states = self._walk_drafts(live, seq, drafts, k, logits, base, check)
        except _BackendFailure as e:
            self._finish_seq(live, seq, "error", error=str(e))
            return (time.perf_counter() - t2) * 1000, (t2 - t0) * 1000, 0.0
        seq.origin = "speculative"
        grammar_ok = walked if check else k
        t3 = time.perf_counter()
        accepted, stop_hit = self._accept_by_probability(live, drafts, q, logits, masks, grammar_ok, gen)
        self._count_speculation(k, grammar_ok, accepted, stop_hit)
        probe: np.ndarray | None = None
        if check:
            try:
                probe = self._roll_back(seq, walked - accepted)
            except _BackendFailure as e:
                self._finish_seq(live, seq, "error", error=str(e))
                return (t1 - t0 + time.perf_counter() - t2) * 1000, (t2 - t1) * 1000, 0.0
            seq.budget_state = states[accepted]  # the reference's rollback: a state is a value
        self._emit(
            TraceSpec(
                self.name,
                live.rid,
                seq.seq_id,
                self.step_no,
                ids_before,
                tuple(drafts),
                grammar_ok,
                accepted,
                probe,
            )
        )
        self.model.truncate_kv(seq.kv, base + accepted)
        if self._append_drafts(live, seq, drafts[:accepted], check) and not stop_hit:
            residual_of = q[accepted] if accepted < grammar_ok else None
            self._resample(live, seq, logits[accepted], masks[accepted], residual_of)
        return (t1 - t0 + t3 - t2) * 1000, (t2 - t1) * 1000, (time.perf_counter() - t3) * 1000

    def _walk_drafts(
        self, live: _Live, seq: _Seq, drafts: list[int], k: int, logits: torch.Tensor, base: int, check: bool
    ) -> tuple[list[np.ndarray], int, list[State | None]]:
        """The verify's grammar walk: trace the mask at each of the ``k + 1`` positions and accept the
        drafts into the matcher in order until it rejects one (without ``check``: all-ones masks, no
        walk). Under ``finish_within_max_tokens`` a draft outside its position's budgeted mask ends the
        walk too, and the reference state walks along. ``(the masks, how many drafts were walked, the
        reference state at each walked position)``; a backend failure raises."""
        assert seq.kv is not None
        ids_before = tuple(seq.ids)
        masks: list[np.ndarray] = []
        states: list[State | None] = [seq.budget_state]
        walked = 0
        for i in range(k + 1):
            row = self._mask_row(live, seq, i) if check else self._ones
            masks.append(row)
            origin = seq.origin if i == 0 and seq.origin in ("new", "fork", "resume") else "speculative"
            self._trace_mask(
                live,
                seq,
                row,
                logits[i],
                ids_before + tuple(drafts[:i]),
                tuple(seq.kv.tokens[: base + i]),
                origin,
            )
            if i == k or not check:
                continue
            if seq.budget_state is not None and not _has_bit(row, drafts[i]):
                break  # allowed by the grammar, maybe, but the output could not end in time after it
            if not isinstance(self._accept_into(seq, drafts[i]), Accepted):
                break
            self._advance_budget(live, seq, drafts[i])
            states.append(seq.budget_state)
            walked += 1
        return masks, walked, states

    def _accept_by_probability(
        self,
        live: _Live,
        drafts: list[int],
        q: torch.Tensor,
        logits: torch.Tensor,
        masks: list[np.ndarray],
        grammar_ok: int,
        gen: torch.Generator,
    ) -> tuple[int, bool]:
        """Probability acceptance of the grammar-valid prefix (Leviathan et al. 2023, Algorithm 1):
        ``(drafts accepted, whether the last one accepted is a stop id)``."""
        stops = self.eos_ids | set(live.request.stop_ids)
        accepted = 0
        for i in range(grammar_ok):
            p = self._target_probs(logits[i], masks[i], live.params)
            d = drafts[i]
            ratio = float(p[d] / q[i][d]) if float(q[i][d]) > 0 else 0.0
            u = float(torch.rand((), generator=gen, dtype=torch.float64))
            if u >= min(1.0, ratio):
                break
            accepted += 1
            if d in stops:
                return accepted, True
        return accepted, False

    def _count_speculation(self, k: int, grammar_ok: int, accepted: int, stop_hit: bool) -> None:
        self.metrics.spec_steps += 1
        self.metrics.spec_proposed += k
        self.metrics.spec_accepted += accepted
        if grammar_ok < k:
            self.metrics.spec_grammar_rejections += 1
        if accepted < grammar_ok and not stop_hit:
            self.metrics.spec_probability_rejections += 1

    def _roll_back(self, seq: _Seq, back: int) -> np.ndarray:
        """Roll the matcher back over the ``back`` walked but unaccepted drafts; its mask there (the
        probe the checker compares with a one-by-one walk). A backend failure raises."""
        assert seq.matcher is not None
        if self._fault("spec_rollback_off_by_one") and back > 0:
            back -= 1
        try:
            seq.matcher.rollback(back)
            return np.asarray(seq.matcher.mask(), dtype=np.int32)
        except Exception as e:  # noqa: BLE001
            raise _BackendFailure(f"rollback({back}) failed: {e!r}") from e

    def _append_drafts(self, live: _Live, seq: _Seq, drafts: list[int], check: bool) -> bool:
        """Append the accepted drafts (the walk already accepted them into the matcher); False once
        the sequence has finished."""
        for d in drafts:
            verdict: Any = Accepted(d, None, "") if check else None
            self._append(live, seq, d, "draft", verdict=verdict)
            if seq not in live.seqs:
                return False
        return True

    def _resample(
        self, live: _Live, seq: _Seq, logits: torch.Tensor, row: np.ndarray, residual_of: torch.Tensor | None
    ) -> None:
        """The token after the accepted drafts, from the grammar-allowed set ``row``: after a
        probability rejection from the residual ``max(p - q, 0)`` of the draft's ``q`` (``residual_of``),
        else from the target's own distribution."""
        if residual_of is not None:
            p = self._target_probs(logits, row, live.params)
            residual = torch.clamp(p - residual_of, min=0.0)
            if float(residual.sum()) <= 0.0:
                residual = p
            z = torch.log(residual)
            draw_params = SamplingParams(temperature=1.0)
        else:
            z = logits.to(torch.float32)
            draw_params = live.params
        result = sample(
            z[None, :].contiguous(),
            torch.from_numpy(row[None, :].copy()),
            [draw_params],
            generators=[self._generator(live, seq, "resample")],
            step=self.step_no,
            state_ids=[self._state_id(seq)],
            raise_on_error=False,
        )
        outcome = result.outcomes()[0]
        if not isinstance(outcome, NoValidToken):
            self._append(live, seq, int(outcome), "resampled")
            return
        if self._fault("soft_filter_after_mask_dropped"):
            fb = sample(
                logits[None, :].contiguous(),
                torch.from_numpy(self._ones[None, :].copy()),
                [live.params],
                generators=[self._generator(live, seq, "fallback")],
                raise_on_error=False,
            )
            tok = fb.outcomes()[0]
            if not isinstance(tok, NoValidToken):
                self._append(live, seq, int(tok), "resampled")
                return
        self._no_valid_token(live, seq)

    # -- appending and finishing --------------------------------------------------------------------
    def _accept_into(self, seq: _Seq, tok: int) -> Any:
        assert seq.matcher is not None
        try:
            return seq.matcher.accept(tok)
        except Exception as e:  # noqa: BLE001
            raise _BackendFailure(f"accept({tok}) raised {e!r}") from e

    def _append(self, live: _Live, seq: _Seq, tok: int, how: str, *, verdict: Any = None) -> None:
        ids_before = tuple(seq.ids)
        ok: bool | None = None
        reason = ""
        budget_failure = ""
        if seq.matcher is not None:
            walked = verdict is not None  # the speculative walk already moved matcher and budget state
            if verdict is None:
                try:
                    verdict = self._accept_into(seq, tok)
                except _BackendFailure as e:
                    verdict = None
                    reason = str(e)
            ok = isinstance(verdict, Accepted)
            if not ok and not reason:
                reason = str(getattr(verdict, "reason", verdict))
            if ok and not walked:
                try:
                    self._advance_budget(live, seq, tok)
                except _BackendFailure as e:
                    budget_failure = str(e)
        self._emit(
            TraceToken(
                self.name, live.rid, seq.seq_id, self.step_no, ids_before, tok, how, ok, reason, seq.origin
            )
        )
        if ok is False and not (how == "draft" and self._fault("spec_accept_without_grammar")):
            self._finish_seq(
                live,
                seq,
                "error",
                error=f"backend rejected token {self.vocabulary.token_repr(tok)} it had allowed: {reason}",
            )
            return
        if budget_failure:
            self._finish_seq(live, seq, "error", error=budget_failure)
            return
        seq.ids.append(tok)
        self.metrics.tokens += 1
        now = time.perf_counter()
        if seq.t_last is None:
            if seq.index == 0 and len(seq.ids) == 1:
                self.metrics.ttft_ms.append((now - live.t_submit) * 1000)
                self.metrics.ttft_steps.append(self.step_no - live.step_submitted)
        else:
            self.metrics.itl_ms.append((now - seq.t_last) * 1000)
        seq.t_last = now
        stop_id = live.request.spec is None and tok in live.request.stop_ids
        if tok in self.eos_ids or stop_id:
            self._finish_seq(live, seq, "stop", drop_last=stop_id and tok not in self.eos_ids)
            return
        data = self.vocabulary.token_bytes[tok]
        if data and live.request.stream and not live.beam:
            self._delta(live, seq, seq.stream.feed(data))
        if len(seq.ids) >= live.request.max_tokens:
            self._finish_seq(live, seq, "stop" if self._fault("max_tokens_as_stop") else "length")
            return
        if how in ("sampled", "resampled") and live.request.jump_forward and not live.beam:
            self._jump_forward(live, seq, tok)

    def _jump_forward(self, live: _Live, seq: _Seq, tok: int) -> None:
        """Append the tokens spelling the matcher's forced bytes (no model call): text is emitted only
        once the grammar makes it certain. Not under a token budget (forced text may not fit)."""
        if seq.matcher is None or live.budget is not None:
            return
        plan = live.request.tools
        guess = self._fault("jump_forward_uncertain") and plan is not None and tok == plan.trigger
        while seq in live.seqs and seq.matcher is not None:
            if guess and plan is not None:
                # The bug: the first tool's name is "forced" the moment the trigger is sampled.
                forced = forced_token_ids(
                    self.vocabulary, plan.tails[0][0].encode() + special_token_bytes(plan.delimiter)
                )
                guess = False
            else:
                probe = getattr(seq.matcher, "forced_bytes", None)
                if probe is None:
                    return
                try:
                    forced = forced_token_ids(self.vocabulary, bytes(probe()))
                except Exception as e:  # noqa: BLE001 - any backend exception is a finding
                    self._finish_seq(live, seq, "error", error=f"forced_bytes() raised {e!r}")
                    return
            if not forced:
                return
            for t in forced:
                self._append(live, seq, t, "forced")
                if seq not in live.seqs:
                    return

    def _no_valid_token(self, live: _Live, seq: _Seq) -> None:
        """Finish ``seq`` ``constraint_violation``: the grammar left no token with a finite logit."""
        self._finish_seq(
            live,
            seq,
            "constraint_violation",
            error=f"NO_VALID_TOKEN at step {self.step_no}, state {self._state_id(seq)}",
            error_step=self.step_no,
            state_id=self._state_id(seq),
        )

    def _delta(self, live: _Live, seq: _Seq, text: str) -> None:
        if text:
            live.handle.events.append(Delta(live.rid, seq.index, text))
            self._emit(TraceDelta(self.name, live.rid, seq.index, text))

    def _finish_seq(
        self,
        live: _Live,
        seq: _Seq,
        reason: FinishReason,
        *,
        drop_last: bool = False,
        error: str | None = None,
        error_step: int | None = None,
        state_id: str | None = None,
    ) -> None:
        text_ids = seq.ids[:-1] if drop_last else seq.ids
        data = self.vocabulary.decode(text_ids)
        valid = reason == "stop" and live.request.spec is not None
        completion = Completion(
            seq.index,
            tuple(seq.ids),
            data.decode("utf-8", errors="replace"),
            reason,
            valid,
            seq.score,
            error,
            error_step,
            state_id,
        )
        if seq in live.seqs:
            live.seqs.remove(seq)
        seq.kv = None
        seq.matcher = None
        seq.budget_state = None
        if live.beam:  # a hypothesis: _close ranks them and publishes the best beam_width
            live.hypotheses.append((seq, completion))
            return
        if live.request.stream:
            tail = seq.stream.flush()
            if tail:
                self._delta(live, seq, tail)
        self._publish(live, seq.seq_id, completion)

    def _publish(self, live: _Live, seq_id: int, completion: Completion) -> None:
        live.handle.outputs.append(completion)
        live.handle.events.append(Finished(live.rid, completion.index, completion.finish_reason, completion))
        self.metrics.finish_reasons[completion.finish_reason] += 1
        self._emit(TraceFinish(self.name, live.rid, seq_id, completion, live.request.stream))

    def _complete(self, live: _Live) -> None:
        """All sequences are done: publish beam outputs, move the request to ``finished``."""
        live.handle.status = transition(live.rid, live.handle.status, Event.FINISH)
        self._close(live)

    def _close(self, live: _Live) -> None:
        if live in self._running:
            self._running.remove(live)
        if live.beam and live.hypotheses:
            ranked = sorted(live.hypotheses, key=lambda h: -h[1].score)[: live.request.beam_width]
            for j, (seq, c) in enumerate(ranked):
                c = replace(c, index=j)
                if live.request.stream and c.text:  # beams stream each output whole, at the end
                    live.handle.events.append(Delta(live.rid, j, c.text))
                    self._emit(TraceDelta(self.name, live.rid, j, c.text))
                self._publish(live, seq.seq_id, c)
            live.hypotheses.clear()
        live.handle.outputs.sort(key=lambda c: c.index)
