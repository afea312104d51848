"""The invariants of docs/design.md §4 as functions that return findings.

Theory of operation. :func:`prepare` compiles one spec for one vocabulary on both sides — the
reference for the backend's *declared* profile (so a deviation the backend declares is no finding)
and the backend — and returns a :class:`Target`, or a :class:`NotChecked` saying which side refused
(with a ``crash``/``limits`` finding when the backend failed rather than refused). Then:

* :func:`check_walk` drives a backend matcher and a reference matcher through one token sequence
  and compares the masks at every step (soundness, EOS, completeness at three levels, liveness,
  UTF-8), stopping where the two stop agreeing on what was accepted;
* :func:`adversarial_walk` lets the *backend* choose: at each step one of the tokens it allows,
  favouring rare, long, byte-fallback, whitespace and EOS tokens (the choices come from a ``pick``
  callable so Hypothesis can draw and shrink them);
* :func:`check_invalid` walks an invalid instance: a backend that lets it finish is unsound (or,
  when the reference refused the spec, ignores a keyword it should have refused: ``refusal``);
* :func:`check_serving` checks fork isolation, rollback ≡ replay, speculative validation,
  jump-forward and determinism along a valid walk.

Every difference becomes a :class:`~props.contract.findings.Finding` with a certificate. A completeness
certificate is a full string of the language that goes through the masked token, found by the
reference and then validated *independently* (``props.corpus.validate_output``); a soundness
certificate is the prefix and token plus, when the backend can be driven to finish, the finished
output and the independent validator's objection. When the independent validator disagrees with the
reference the observation is not a finding — it is recorded in ``Target.self_check`` (a reference
or validator bug, reported separately).

Masks are compared as sets: EOS is one verdict ("is any EOS id allowed"), special non-EOS ids are
never allowed. Each check increments ``Target.checks[invariant]`` (the report's "checks" column).
"""

from __future__ import annotations

import base64
import contextlib
import random
import statistics
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

import refdecoder
from props.checks.clock import current as current_clock
from props.checks.clock import phase as clock_phase
from props.checks.witness import canonical_ids, shortest_completion, splits_character
from props.contract import operations as op
from props.contract.attribution import AdapterFault, adapter_fault, adapter_modules
from props.contract.backend import Backend, Compiled, DeclaredProfile, PartFailed, Refused
from props.contract.findings import SPECIAL_TOKEN_KINDS, Finding, Invariant, SpecRef
from props.contract.operations import Op
from refdecoder import JsonProfile, Spec, TokenGrammar
from refdecoder import Matcher as RefMatcher
from refdecoder.bitmask import num_words
from tokenizers_matrix import Vocabulary

from .bits import bits_at, mask_bits, row_words, same_bits
from .segments import Steps, candidates, finish, search_segmentations
from .segments import rejected as _rejected

__all__ = [
    "Target",
    "NotChecked",
    "make_spec",
    "profile_spec_ref",
    "prepare",
    "check_walk",
    "adversarial_walk",
    "check_invalid",
    "check_serving",
    "backend_failure",
    "vocabulary_tables",
]

# How many distinct tokens of one kind of difference get certified at one step (the rest are
# counted in the certificate): certificates cost backend calls.
_PER_STEP = 2
_COMPLETION_STEPS = 48  # tokens the backend may take to finish a soundness completion
_SEGMENTATION_FORKS = 256  # backend forks when searching a segmentation of a witness
UNDECIDED = "undecided"  # Target.validate: the independent validator cannot judge this output
#: Where check_walk compares masks (Target.compare_at): at ``every`` step; only where the language
#: ``branching``-s (the reference does not force the next bytes); ``auto``: every step while the
#: engine's masks are fast, only where the language branches while they are slow (the median of its
#: latest SLOW_MASK_SAMPLES masks at least SLOW_MASK_MS). At a forced step the token is still accepted by both sides,
#: so a rejected forced token is found; an extra token the engine allows there is not looked for.
COMPARE_AT = ("every", "branching", "auto")
#: :func:`compare_step` skips its per-token passes when the two masks are equal (tests switch it off
#: to compare the two paths).
SKIP_EQUAL_MASKS = True
#: :func:`compare_step` finds the differences of two full rows on their packed words
#: (:func:`_differences_packed`); tests switch it off to compare with the unpacked definition.
PACKED_DIFFERENCES = True
SLOW_MASK_MS = 100.0
SLOW_MASK_SAMPLES = 8


def show_bytes(data: bytes, spec: SpecRef) -> str:
    """``data`` for a message: its ``repr``, or, for a spec that names special tokens, its text with
    each special token by name (``<|tool_call|>``) or as ``<[id]>`` — never raw 0xFF bytes."""
    if spec.kind in SPECIAL_TOKEN_KINDS and 0xFF in data:
        return repr(refdecoder.render_text(data, spec.special_names))
    return repr(data)


def make_spec(ref: SpecRef, profile: JsonProfile) -> Spec:
    """The refdecoder spec of ``ref`` under the backend's declared JSON profile."""
    return ref.to_spec(profile)


def profile_spec_ref(ref: SpecRef, profile: DeclaredProfile) -> SpecRef:
    """``ref`` carrying the profile the language is judged under (the independent validator reads it)."""
    if ref.kind != "json_schema":
        return ref
    return SpecRef(ref.kind, ref.source, ref.name, ref.corpus, profile.json.as_dict())


@dataclass(frozen=True)
class NotChecked:
    """A spec that could not be compared: ``side`` refused (``"reference"``, ``"backend"``, ``"both"``)
    or failed; ``findings`` holds a ``crash``/``limits`` finding when the backend failed."""

    side: str
    reason: str
    findings: tuple[Finding, ...] = ()
    backend_compiled: Compiled | None = None


@dataclass
class Target:
    """One spec compiled for one vocabulary on both sides, and what checking it has recorded."""

    backend: Backend
    spec: SpecRef  # with the declared profile (see profile_spec_ref)
    vocab: Vocabulary
    reference: TokenGrammar
    compiled: Compiled
    profile: DeclaredProfile
    checks: Counter[str] = field(default_factory=Counter)
    timings: dict[str, list[float]] = field(
        default_factory=lambda: {"backend_mask_ms": [], "reference_mask_ms": [], "backend_compile_ms": []}
    )
    self_check: list[str] = field(default_factory=list)
    declared: Counter[str] = field(default_factory=Counter)  # differences the declared profile explains
    # At most ``cap`` certified findings of each kind per target (certificates cost backend calls, and
    # one defect shows at many steps); further observations are counted in ``suppressed``.
    cap: int = 3
    certified: Counter[str] = field(default_factory=Counter)
    suppressed: Counter[str] = field(default_factory=Counter)
    _seen: set[tuple[Any, ...]] = field(default_factory=set)
    # Facts about the compiled spec on both sides, memoized for the target's completeness certificates
    # (Hypothesis replays and every walk through the same masked token meet the same ones again), so
    # they survive fresh(): the reference's witness per (prefix ids, token), whether the backend takes a
    # token sequence (then EOS), and _segmentation_exists per witness.
    witnesses: dict[tuple[tuple[int, ...], int], tuple[bytes, bytes] | None] = field(default_factory=dict)
    passes: dict[tuple[int, ...], bool] = field(default_factory=dict)
    segmentations: dict[bytes, bool | None] = field(default_factory=dict)
    # False: a completeness certificate is not classified by searching the witness's segmentations
    # (no completeness_byte; the certificate says "not searched"). For defect minimization's replays,
    # where the three completeness levels are one signature (props.checks.defects.for_replay).
    segmentation_search: bool = True
    # Instances derived from the valid texts, shared by the steps that walk them (targeted.spellings
    # for both check_targeted and check_numbers), keyed by what they were derived from.
    derived: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    # Instances walked, by "valid|invalid/source" (corpus, reference, hypothesis-jsonschema, ...), and
    # why a source gave none: the report shows both, so a source that stops producing is seen.
    instances: Counter[str] = field(default_factory=Counter)
    instance_notes: set[str] = field(default_factory=set)
    # Seconds spent per phase of checking (certificates, searches, ...): the profile certify reports.
    phases: dict[str, float] = field(default_factory=dict)
    # Where check_walk compares masks (COMPARE_AT).
    compare_at: str = "auto"

    def __post_init__(self) -> None:
        v = self.vocab
        self.size = len(v)
        self.eos = np.array(sorted(v.eos_ids), dtype=np.int64)
        self.read_as_text(_text_mask(v, self.size))
        self.timings["backend_compile_ms"].append(self.compiled.compile_ms)

    def read_as_text(self, text: np.ndarray) -> None:
        """Set which ids are text tokens (a bool per id): ``text``, and what compare_step derives from
        it: the ids that are neither text nor EOS, ascending (its "specials"), and the packed rows
        (xgrammar's layout) of the text ids, the EOS ids and the other ids below ``size``."""
        self.text = text
        self.nontext_ids = np.setdiff1d(np.flatnonzero(~text), self.eos)
        eos = np.zeros(self.size, dtype=bool)
        eos[self.eos] = True
        self.text_words = _pack_row(text)
        self.eos_words = _pack_row(eos)
        self.other_words = _pack_row(~text & ~eos)

    # -- building findings ------------------------------------------------------------------------
    def finding(self, invariant: Invariant, prefix_ids: Sequence[int], **kw: Any) -> Finding:
        return Finding(
            invariant=invariant,
            backend=self.backend.name,
            backend_version=self.backend.version,
            spec=self.spec,
            tokenizer=self.vocab.original.name,
            tokenizer_fingerprint=self.vocab.original.fingerprint,
            prefix_ids=tuple(prefix_ids),
            prefix_bytes=self.vocab.decode(prefix_ids) if prefix_ids else b"",
            **kw,
        )

    def matcher(self, compiled: Compiled | None = None) -> Guarded:
        return Guarded(_call("matcher", self.backend.matcher, compiled or self.compiled))

    def compile_again(self) -> Any:
        engine_vocab = self.vocab.original  # the engine's vocabulary, not the special-token view
        return _call("compile", self.backend.compile, make_spec(self.spec, self.profile.json), engine_vocab)

    def fault(self, e: BackendFault, prefix: Sequence[int] = (), token: int | None = None) -> Finding:
        """The crash finding for ``e``, raised after ``prefix`` was accepted (while accepting ``token``,
        when given): a reproducer replays exactly those ids."""
        f = backend_failure(self.backend, self.spec, self.vocab, e.operation, e.error)
        return failure_at(f, self.vocab, prefix, token)

    def fresh(self) -> None:
        """Forget what was seen and certified: each Hypothesis example must judge on its own, or a
        replay during shrinking would not fail the way the first run did."""
        self._seen = set()
        self.certified = Counter()

    def may_certify(self, kind: str) -> bool:
        """Whether another finding of ``kind`` gets a certificate on this target (see ``cap``)."""
        if self.certified[kind] >= self.cap:
            self.suppressed[kind] += 1
            return False
        self.certified[kind] += 1
        return True

    def first_time(self, *key: Any) -> bool:
        """True the first time a (kind, token bytes, verdict) difference is seen on this target."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the time the block takes to ``phases[phase]`` (nested phases count in both), and charge
        it to ``phase`` on the clock in effect (:mod:`props.checks.clock`: exclusive, own and engine)."""
        t0 = time.perf_counter()
        try:
            with clock_phase(phase):
                yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.perf_counter() - t0

    # -- masks --------------------------------------------------------------------------------------
    def backend_mask(self, m: Any) -> np.ndarray:
        return mask_bits(self.backend_packed(m), self.size)

    def reference_mask(self, r: RefMatcher) -> np.ndarray:
        return mask_bits(self.reference_packed(r), self.size)

    def backend_packed(self, m: Any) -> Any:
        """The backend's mask as it returned it (an int32 bitmask row; :func:`mask_bits` reads it)."""
        t0 = time.perf_counter()
        packed = m.mask()
        self.timings["backend_mask_ms"].append((time.perf_counter() - t0) * 1000)
        return packed

    def accept_mask(self, m: Guarded, token_id: int) -> tuple[Any, Any | None]:
        """``m.accept(token_id)``, then ``m``'s mask as :meth:`backend_packed` returns it, unless the
        outcome is a rejection (then None), in one round trip to a worker (:meth:`Guarded.accept_mask`)."""
        outcome, masked = m.accept_mask(token_id)
        return outcome, self._fetched(masked)

    def fork_accept_mask(self, m: Guarded, token_id: int) -> tuple[Guarded, Any, Any | None]:
        """:meth:`accept_mask` on a fork of ``m``: the fork, the outcome and its mask or None."""
        child, outcome, masked = m.fork_accept_mask(token_id)
        return child, outcome, self._fetched(masked)

    def _fetched(self, masked: tuple[Any, float] | None) -> Any | None:
        if masked is None:
            return None
        packed, ms = masked
        self.timings["backend_mask_ms"].append(ms)
        return packed

    def reference_packed(self, r: RefMatcher) -> np.ndarray:
        t0 = time.perf_counter()
        with clock_phase("reference masks"):
            packed = r.mask()
        self.timings["reference_mask_ms"].append((time.perf_counter() - t0) * 1000)
        return packed

    def compares_at(self, r: RefMatcher, count: bool = True) -> bool:
        """Whether :func:`check_walk` compares the masks at ``r``'s state (see :data:`COMPARE_AT`);
        with ``count``, a skipped step is counted (:meth:`count_skipped_step`)."""
        if self.compare_at == "every":
            return True
        if self.compare_at == "auto":
            # The latest masks only: a constant cost per step, where the whole list grows with the walk.
            ms = self.timings["backend_mask_ms"][-SLOW_MASK_SAMPLES:]
            if len(ms) < SLOW_MASK_SAMPLES or statistics.median(ms) < SLOW_MASK_MS:
                return True
        if not r.forced_bytes() or r.is_accepting():
            return True  # the language branches here (or may end): compare
        if count:
            self.count_skipped_step()
        return False

    def count_skipped_step(self) -> None:
        """One step where :func:`check_walk` did not compare the masks."""
        self.instances["compare/steps-forced-skipped"] += 1

    def eos_of(self, bits: np.ndarray) -> bool:
        return bool(bits[self.eos].any()) if len(self.eos) else False

    def token_bytes(self, token_id: int) -> bytes | None:
        b = self.vocab.token_bytes[token_id]
        return None if b is None else bytes(b)

    def show(self, data: bytes | None) -> str:
        """``data`` for a message (:func:`show_bytes`: special tokens by name)."""
        return repr(None) if data is None else show_bytes(data, self.spec)

    def validate(self, data: bytes) -> str | None:
        """The independent validator's objection to ``data`` (None: valid); :data:`UNDECIDED` when it
        cannot judge (then no certificate is built on it).

        Structural tags go to ``props.corpus.structural_tag_check`` (written from xgrammar's
        documentation; special tokens in ``data`` are their ids there). Lark grammars have no
        independent validator yet (``props.corpus`` refuses them): their outputs are judged by the
        reference grammar itself, and :meth:`validator_name` says so on every certificate."""
        from props.corpus import CorpusError, validate_output

        if self.spec.kind == "structural_tag":
            return self._validate_tag(data)
        if self.spec.kind in SPECIAL_TOKEN_KINDS:
            if self.reference.grammar.accepts(data):
                return None
            return "not in the language of the reference grammar (no independent validator for this kind)"
        try:
            return validate_output(self.spec, data)
        except CorpusError as e:
            self.self_check.append(
                f"{self.spec.name}: the independent validator cannot judge {data[:80]!r}: {e}"
            )
            return UNDECIDED

    def _validate_tag(self, data: bytes) -> str | None:
        """:meth:`validate` for a structural tag: the independent checker's verdict on ``data`` as text
        and special-token ids."""
        from props.corpus import CorpusError
        from props.corpus.structural_tag_check import Undecided, verdict

        parts: list[str | int] = []
        for piece in refdecoder.split_special_tokens(data):
            if isinstance(piece, int):
                parts.append(piece)
                continue
            try:
                parts.append(piece.decode("utf-8"))
            except UnicodeDecodeError as e:
                return f"not UTF-8: {e.reason} at byte {e.start} of a text stretch"
        src = self.spec.source
        try:
            got = verdict(src["tag"], parts, src.get("special_tokens") or {})
        except CorpusError as e:
            self.self_check.append(f"{self.spec.name}: the structural-tag checker cannot read the tag: {e}")
            return UNDECIDED
        if isinstance(got, Undecided):
            self.self_check.append(
                f"{self.spec.name}: the structural-tag checker cannot judge "
                f"{refdecoder.render_text(data, self.spec.special_names)[:80]!r}: {'; '.join(got.reasons)}"
            )
            return UNDECIDED
        return None if got else "not in the tag's language (independent structural-tag checker)"

    def validator_name(self) -> str:
        if self.spec.kind == "json_schema":
            from props.corpus import validator_draft

            draft = validator_draft(self.spec).removeprefix("draft-0")
            return f"json.loads + jsonschema (Draft {draft}) + profile checks"
        return {
            "regex": "re.fullmatch",
            "gbnf": "props.corpus.gbnf_check (independent Earley parser)",
            "choice": "membership in the choice list",
            "lark": "refdecoder's own Lark grammar (no independent validator for Lark yet)",
            "structural_tag": "props.corpus.structural_tag_check (independent, from xgrammar's documentation)",
        }[self.spec.kind]


_TEXT: dict[tuple[str, int], np.ndarray] = {}


_A = TypeVar("_A", bound="np.ndarray | None")


def _per_vocabulary(
    store: dict[tuple[str, int], _A], v: Vocabulary, size: int, build: Callable[[], _A]
) -> _A:
    """``build()`` once per (vocabulary, size), read-only, the last 16 vocabularies kept in ``store``:
    the per-token tables below are read on every step of every walk and take milliseconds at 128k."""
    key = (v.fingerprint, size)
    if key not in store:
        if len(store) >= 16:
            store.clear()
        arr = build()
        if arr is not None:
            arr.flags.writeable = False
        store[key] = arr
    return store[key]


def _text_mask(v: Vocabulary, size: int) -> np.ndarray:
    """Which ids are text tokens, memoized per vocabulary."""

    def build() -> np.ndarray:
        text = np.zeros(size, dtype=bool)
        text[list(v.text_ids)] = True  # the vocabulary caches its text ids
        return text

    return _per_vocabulary(_TEXT, v, size, build)


class BackendFault(Exception):
    """An exception raised by backend code (not by maskcert): it becomes a ``crash``/``limits`` finding.
    Exceptions from maskcert's own code are not caught: they are bugs and must be loud."""

    def __init__(self, operation: str, error: BaseException) -> None:
        self.operation = operation
        self.error = error
        super().__init__(f"{operation}: {type(error).__name__}: {error}")


def _call(operation: str, fn: Callable[..., Any], *args: Any) -> Any:
    clock = current_clock()  # the time inside is the engine's (props.checks.clock), not maskcert's
    if clock is not None:
        clock.engine_enter()
    try:
        return fn(*args)
    except AdapterFault:
        raise
    except Exception as e:  # noqa: BLE001 - anything but a typed outcome is a finding (docs/style.md §7)
        raise _attributed(operation, fn, e) from e
    finally:
        if clock is not None:
            clock.engine_leave()


def _adapter_modules(obj: Any) -> frozenset[str]:
    """The modules of ``obj``'s adapter code: its class's and those of its adapter base classes. Empty
    for proxies that attribute faults themselves (the worker's, whose child judged them)."""
    if obj is None or getattr(obj, "faults_attributed", False):
        return frozenset()
    return adapter_modules(type(obj))


def _attributed(operation: str, fn: Callable[..., Any], e: Exception) -> Exception:
    """``e`` as an :class:`AdapterFault` when the adapter (maskcert's code) is to blame, else as a
    :class:`BackendFault` (a finding); see :mod:`props.contract.attribution`."""
    owner = getattr(fn, "__self__", None)
    why = adapter_fault(e, _adapter_modules(owner))
    if why is not None:
        return AdapterFault(
            str(getattr(owner, "name", "")), str(getattr(owner, "version", "")), operation, why
        )
    return BackendFault(operation, e)


class Guarded:
    """A backend matcher whose exceptions arrive as :class:`BackendFault` (see the module doc)."""

    forced_bytes: Callable[[], Any] | None
    validate: Callable[[list[int]], Any] | None

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.forced_bytes = (
            (lambda: _call("forced_bytes", inner.forced_bytes)) if hasattr(inner, "forced_bytes") else None
        )
        self.validate = (
            (lambda ids: _call("validate", inner.validate, ids)) if hasattr(inner, "validate") else None
        )

    def mask(self) -> Any:
        return _call("mask", self.inner.mask)

    def accept(self, token_id: int) -> Any:
        return _call("accept", self.inner.accept, token_id)

    def is_accepting(self) -> bool:
        return bool(_call("is_accepting", self.inner.is_accepting))

    def rollback(self, k: int) -> None:
        _call("rollback", self.inner.rollback, k)

    def fork(self) -> Guarded:
        return Guarded(_call("fork", self.inner.fork))

    def fork_accept(self, token_id: int) -> tuple[Guarded, Any]:
        """``fork()`` then ``accept(token_id)`` on the fork: the backend's ``fork_accept`` where it
        has one (a worker's single round trip for both), with the same outcomes, faults (named by
        the part that raised) and engine calls counted as the two calls one by one."""
        fused = getattr(self.inner, "fork_accept", None)
        if fused is None:
            child = self.fork()
            return child, child.accept(token_id)
        inner, outcome = self._fused(fused, token_id, ("fork", "accept"))
        return Guarded(inner), outcome

    def accept_mask(self, token_id: int) -> tuple[Any, tuple[Any, float] | None]:
        """``accept(token_id)``, then ``mask()`` unless the outcome is a rejection: the outcome, and
        the mask with the milliseconds it took (None after a rejection). The backend's
        ``accept_mask`` where it has one (a worker's single round trip), as :meth:`fork_accept`."""
        fused = getattr(self.inner, "accept_mask", None)
        if fused is None:
            outcome = self.accept(token_id)
            return outcome, None if _rejected(outcome) else self._timed_mask()
        outcome, masked = self._fused(fused, token_id, ("accept", "mask"), lambda r: r[1] is None)
        return outcome, masked

    def fork_accept_mask(self, token_id: int) -> tuple[Guarded, Any, tuple[Any, float] | None]:
        """:meth:`fork_accept`, then the fork's mask unless the outcome is a rejection
        (:meth:`accept_mask`)."""
        fused = getattr(self.inner, "fork_accept_mask", None)
        if fused is None:
            child = self.fork()
            outcome, masked = child.accept_mask(token_id)
            return child, outcome, masked
        inner, outcome, masked = self._fused(
            fused, token_id, ("fork", "accept", "mask"), lambda r: r[2] is None
        )
        return Guarded(inner), outcome, masked

    def segment_search(
        self, steps: Steps, length: int, eos: np.ndarray, size: int, budget: int
    ) -> tuple[bool | None, list[float]] | None:
        """The segmentation search from this matcher run whole by the backend where it offers
        ``segment_search`` (a worker: every fork in its own process): the verdict and each mask's
        milliseconds, the engine calls counted as the worker made them, faults as :meth:`_fused`
        makes them (a part that raised names itself; a crash or a timeout names the search). None
        where the backend runs no search (the caller runs it here)."""
        fused = getattr(self.inner, "segment_search", None)
        if fused is None:
            return None
        verdict, _, mask_ms = self._counted(
            lambda: fused(steps, length, eos, size, budget),
            made=lambda r: int(r[1]),
            made_before=lambda e: max(1, e.calls),
            whole=("segmentation search", fused, 1),
        )
        return verdict, mask_ms

    def _timed_mask(self) -> tuple[Any, float]:
        t0 = time.perf_counter()
        return self.mask(), (time.perf_counter() - t0) * 1000

    def _fused(
        self,
        fused: Callable[[int], Any],
        token_id: int,
        parts: tuple[str, ...],
        last_skipped: Callable[[Any], bool] = lambda _: False,
    ) -> Any:
        """What a combined call of the backend (``fork_accept``, ``accept_mask``, ...) returned: faults
        as :func:`_call` makes them, named by the part that raised (:class:`PartFailed`), and the
        engine calls counted as the parts that ran (the last one is skipped where ``last_skipped``
        says so of the result)."""
        return self._counted(
            lambda: fused(token_id),
            made=lambda r: len(parts) - last_skipped(r),
            made_before=lambda e: parts.index(e.operation) + 1,
            whole=(parts[0], fused, len(parts)),
        )

    def _counted(
        self,
        call: Callable[[], Any],
        made: Callable[[Any], int],
        made_before: Callable[[PartFailed], int],
        whole: tuple[str, Callable[..., Any], int],
    ) -> Any:
        """``call()``, which makes several engine calls (a combined call): counted on the clock as
        ``made(result)`` calls, or ``made_before(e)`` when a part raised (:class:`PartFailed`, a
        fault named by that part), or, when it failed as a whole (a crash, a timeout), as
        ``whole = (operation, callable, calls)`` says."""
        clock = current_clock()
        operation, fn, calls = whole
        if clock is not None:
            clock.engine_enter()  # counts the first call
        try:
            result = call()
            calls = made(result)
            return result
        except PartFailed as e:
            calls = made_before(e)
            if isinstance(e.error, AdapterFault):
                raise e.error from None
            raise _attributed(e.operation, getattr(self.inner, e.operation), e.error) from e.error
        except AdapterFault:
            raise
        except Exception as e:  # noqa: BLE001 - as _call: anything but a typed outcome is a finding
            raise _attributed(operation, fn, e) from e
        finally:
            if clock is not None:
                for _ in range(calls - 1):
                    clock.count_call()
                clock.engine_leave()


# -- preparing a target ---------------------------------------------------------------------------
def backend_failure(
    backend: Backend, spec: SpecRef, vocab: Vocabulary, operation: str, e: BaseException
) -> Finding:
    """A ``crash`` (or ``limits``, for worker timeouts and memory) finding for an exception from backend code."""
    kind = getattr(e, "kind", "crash")  # the worker's word for how a call failed
    invariant = Invariant.LIMITS if kind == "limits" else Invariant.CRASH
    return Finding(
        invariant=invariant,
        backend=getattr(backend, "name", "?"),
        backend_version=getattr(backend, "version", "?"),
        spec=spec,
        tokenizer=vocab.original.name,
        tokenizer_fingerprint=vocab.original.fingerprint,
        backend_verdict=f"{type(e).__name__} during {operation}",
        reference_verdict="a typed outcome (Compiled/Refused, Accepted/Rejected)",
        message=f"{operation}: {type(e).__name__}: {str(e)[:500]}",
        certificate={
            "operation": operation,
            "exception": type(e).__name__,
            "detail": str(e)[:4000],
            "log_tail": str(getattr(e, "log_tail", ""))[-2000:],
        },
    )


def failure_at(f: Finding, vocab: Vocabulary, prefix: Sequence[int], token: int | None = None) -> Finding:
    """A crash finding placed where it happened: after ``prefix`` was accepted, while accepting
    ``token`` when given (what its reproducer replays)."""
    f = f.with_(
        prefix_ids=tuple(int(i) for i in prefix), prefix_bytes=vocab.decode(list(prefix)) if prefix else b""
    )
    if token is None:
        return f
    data = vocab.token_bytes[token] if 0 <= token < len(vocab.token_bytes) else None
    return f.with_(token_id=int(token), token_bytes=data)


def prepare(
    backend: Backend, spec: SpecRef, vocab: Vocabulary, limits: refdecoder.Limits | None = None
) -> Target | NotChecked:
    """Compile ``spec`` on both sides for ``vocab``; a :class:`Target` when both compiled. A spec that
    names special tokens by name without a table gets ``vocab``'s (``SpecRef.naming_special_tokens``)."""
    profile: DeclaredProfile = backend.profile
    spec = spec.naming_special_tokens(vocab.special_names)
    judged = profile_spec_ref(spec, profile)
    ref_reason = ""
    reference: TokenGrammar | None = None
    try:
        with clock_phase("reference compile"):
            grammar = refdecoder.compile(make_spec(spec, profile.json), limits)
            reference = TokenGrammar(grammar, vocab)
    except refdecoder.Unsupported as e:
        ref_reason = f"unsupported {e.keyword} at {e.where or '/'}: {e.reason}"
    except refdecoder.LimitExceeded as e:
        ref_reason = str(e)
    except refdecoder.SpecError as e:
        ref_reason = f"invalid spec: {e}"
    try:
        with clock_phase("engine compile"):
            outcome = _call("compile", backend.compile, make_spec(spec, profile.json), vocab)
    except BackendFault as fault:
        f = backend_failure(backend, judged, vocab, "compile", fault.error)
        return NotChecked("backend", f.message, (f,))
    if isinstance(outcome, Refused):
        side = "both" if reference is None else "backend"
        reason = (
            outcome.reason if reference is not None else f"backend: {outcome.reason}; reference: {ref_reason}"
        )
        return NotChecked(side, reason)
    if reference is None:
        return NotChecked("reference", ref_reason, backend_compiled=outcome)
    # A grammar that names special tokens reads each as its encoding (docs/design.md §2): the checks'
    # byte strings do too, through the special-token view (same ids; engines and findings see
    # ``vocab`` itself, ``Target.vocab.original``).
    seen = vocab.special_token_view if reference.reads_special_tokens else vocab
    return Target(backend, judged, seen, reference, outcome, profile)


# -- one step -------------------------------------------------------------------------------------
def _complete_with_backend(
    t: Target, m: Any, steps: int = _COMPLETION_STEPS
) -> tuple[bytes, list[int], bool]:
    """Let the backend finish from ``m`` (a fork): EOS as soon as it is allowed, else the allowed
    token that most likely closes the structure. Returns (bytes, ids, finished)."""
    ids: list[int] = []
    closing = [t.vocab.index.ids_by_bytes.get(bytes([c]), ()) for c in b'}]"0,:1tfn']
    row = t.backend_packed(m) if steps else None
    for k in range(steps):
        bits = mask_bits(row, t.size)
        allowed_eos = [int(e) for e in t.eos if bits[e]]
        if allowed_eos:
            m.accept(allowed_eos[0])
            return t.vocab.decode(ids), ids, True
        choice = next((i for group in closing for i in group if bits[i]), None)
        if choice is None:
            allowed = np.flatnonzero(bits & t.text)
            if not len(allowed):
                return t.vocab.decode(ids), ids, False
            choice = int(min(allowed, key=lambda i: (len(t.vocab.token_bytes[i] or b""), i)))
        # the next step's mask comes with the accept (one round trip to a worker)
        out, row = t.accept_mask(m, int(choice)) if k + 1 < steps else (m.accept(int(choice)), None)
        if _rejected(out):
            return t.vocab.decode(ids), ids, False
        ids.append(int(choice))
    return t.vocab.decode(ids), ids, False


def _soundness(t: Target, prefix: Sequence[int], token: int, m: Any, walk: str, also: int) -> Finding | None:
    tb = t.token_bytes(token)
    cert: dict[str, Any] = {"prefix": t.vocab.decode(prefix), "token": tb, "also_allowed": also}
    text = t.vocab.original.token_bytes[token]
    if (
        tb is None and text is not None
    ):  # an ordinary token with a raw 0xFF byte, in a grammar naming special tokens
        cert["token_text"] = bytes(text)
        cert["unspellable"] = (
            "its raw 0xFF byte only starts a special token's encoding there (docs/design.md §2), so no "
            "output through it is valid UTF-8 text; the backend's completion is not validated"
        )
    rest_ids: list[int] = []
    try:
        fork, outcome = m.fork_accept(token)
        if _rejected(outcome):
            cert["accept"] = "mask() allows the token but accept() rejects it"
            rest, rest_ids, finished = b"", [], False
        else:
            with t.timed("soundness certificates"):
                rest, rest_ids, finished = _complete_with_backend(t, fork)
    except BackendFault as e:  # the certificate is optional; the finding stands
        rest, rest_ids, finished = b"", [], False
        cert["completion_error"] = str(e)
    if finished and tb is not None:
        output = t.vocab.decode([*prefix, token]) + rest
        error = t.validate(output)
        if error == UNDECIDED:
            return None
        if error is None:
            t.self_check.append(
                f"{t.spec.name}: the reference says {t.show(tb)} after {t.show(t.vocab.decode(prefix))} has no "
                f"completion, but {t.validator_name()} accepts the backend's output {t.show(output)}"
            )
            return None
        cert.update(
            completion=output,
            completion_ids=[*prefix, token, *rest_ids],
            validator_error=error,
            validated_by=t.validator_name(),
        )
    return t.finding(
        Invariant.SOUNDNESS,
        prefix,
        token_id=token,
        token_bytes=tb,
        backend_verdict="allowed",
        reference_verdict="masked: no string of the language continues this prefix with this token",
        reference_allows=False,
        message=f"allows token {token} {t.show(tb) if tb is not None else repr(cert.get('token_text'))} after {len(prefix)} tokens, but no valid output continues that way"
        + (" (the backend then finished an output the validator rejects)" if "completion" in cert else ""),
        certificate=cert,
        walk=walk,
    )


def _witness(t: Target, r: RefMatcher, token: int) -> tuple[bytes, bytes] | None:
    """(completion after the token, full witness) from the reference, independently validated."""
    fork = r.fork()
    fork.accept(token)
    state = fork.state
    if state is refdecoder.TERMINATED:
        return None
    rest = shortest_completion(t.reference.grammar, state)
    if rest is None:
        return None
    full = t.vocab.decode(fork.accepted_ids()) + rest
    error = t.validate(full)
    if error == UNDECIDED:
        return None
    if error is not None:
        t.self_check.append(
            f"{t.spec.name}: the reference's witness {t.show(full)} is rejected by {t.validator_name()}: {error}"
        )
        return None
    return rest, full


def _passes(t: Target, ids: Sequence[int], final_eos: bool = True) -> bool:
    """Whether a fresh backend matcher accepts ``ids`` (then EOS)."""
    m = t.matcher()
    for i in ids:
        if _rejected(m.accept(int(i))):
            return False
    if not final_eos:
        return True
    bits = t.backend_mask(m)
    return t.eos_of(bits)


def _passes_once(t: Target, ids: tuple[int, ...]) -> bool:
    """:func:`_passes` (then EOS), memoized per target (``Target.passes``)."""
    if ids not in t.passes:
        t.passes[ids] = _passes(t, ids)
    return t.passes[ids]


def _segmentation_exists(t: Target, data: bytes) -> bool | None:
    """Depth-first over segmentations of ``data`` that the backend allows, forking at each choice:
    True if one reaches EOS, False if none does (exhaustive), None if the fork budget ran out.
    Memoized per target (``Target.segmentations``): the answer depends on the backend and the bytes."""
    if data in t.segmentations:
        return t.segmentations[data]
    t.segmentations[data] = found = _search_segmentations(t, data)
    return found


def _search_segmentations(t: Target, data: bytes) -> bool | None:
    """:func:`props.checks.segments.search_segmentations` from a fresh matcher: in the backend's
    worker where it runs one (no round trip per fork), else here."""
    steps = candidates(t.vocab.index, data)
    m = t.matcher()
    remote = m.segment_search(steps, len(data), t.eos, t.size, _SEGMENTATION_FORKS)
    if remote is not None:
        verdict, mask_ms = remote
        t.timings["backend_mask_ms"].extend(mask_ms)
        return verdict
    root = t.backend_packed(m)
    return finish(
        search_segmentations(
            m, root, steps, len(data), t.eos, t.size, _SEGMENTATION_FORKS, t.fork_accept_mask
        )
    )


def _completeness(
    t: Target, prefix: Sequence[int], token: int, r: RefMatcher, walk: str, canonical_next: bool, also: int
) -> Finding | None:
    tb = t.token_bytes(token)
    assert tb is not None
    key = (tuple(r.accepted_ids()), token)
    if key not in t.witnesses:
        with t.timed("witnesses"):
            t.witnesses[key] = _witness(t, r, token)
    w = t.witnesses[key]
    if w is None:
        return None
    rest, full = w
    canon = canonical_ids(t.vocab, full)
    rest_ids = t.vocab.index.fewest_tokens(rest) if rest else []
    witness_ids = None if rest_ids is None else [*prefix, token, *rest_ids]
    cert: dict[str, Any] = {
        "witness": full,
        "witness_ids": witness_ids,
        "canonical_ids": list(canon) if canon is not None else None,
        "validated_by": t.validator_name(),
        "also_masked": also,
    }
    if splits_character(tb):
        invariant = Invariant.UTF8
        level = "a token that splits a UTF-8 character"
    elif canon is not None and _passes_once(t, tuple(canon)):
        invariant, level = (
            Invariant.COMPLETENESS_TOKEN,
            "the canonical encoding of the witness passes; this segmentation does not",
        )
    else:
        if t.segmentation_search:
            with t.timed("segmentation search"):
                exists = _segmentation_exists(t, full)
            cert["segmentation_search"] = {True: "found one", False: "exhausted", None: "budget ran out"}[
                exists
            ]
        else:
            exists = None
            cert["segmentation_search"] = "not searched"
        if exists is False:
            invariant, level = Invariant.COMPLETENESS_BYTE, "no segmentation of the witness passes"
        elif canon is not None or canonical_next:
            invariant, level = (
                Invariant.COMPLETENESS_CANONICAL,
                "the tokenizer's own encoding of the witness is blocked",
            )
        else:
            invariant, level = Invariant.COMPLETENESS_TOKEN, "this segmentation of the witness is blocked"
    if t.profile.canonical_tokenization_only and invariant in (Invariant.COMPLETENESS_TOKEN, Invariant.UTF8):
        t.declared["canonical_tokenization_only"] += 1
        return None
    return t.finding(
        invariant,
        prefix,
        token_id=token,
        token_bytes=tb,
        backend_verdict="masked",
        reference_verdict=f"allowed: {t.show(full)} is valid and continues with this token",
        reference_allows=True,
        message=f"masks token {token} {t.show(tb)} after {len(prefix)} tokens though a valid string goes through it ({level})",
        certificate=cert,
        walk=walk,
    )


def _eos(t: Target, prefix: Sequence[int], backend_eos: bool, walk: str) -> Finding:
    data = t.vocab.decode(prefix)
    error = t.validate(data)
    cert: dict[str, Any] = {"output": data, "validated_by": t.validator_name(), "validator_error": error}
    if backend_eos:
        verdict, ref = "EOS offered", "EOS masked: the prefix is not in the language"
        msg = f"offers EOS after {t.show(data)}, which is not a complete valid output"
        if error is None:
            t.self_check.append(
                f"{t.spec.name}: reference rejects {t.show(data)} as complete but {t.validator_name()} accepts it"
            )
    else:
        verdict, ref = "EOS masked", "EOS allowed: the prefix is a complete valid output"
        msg = f"does not offer EOS after {t.show(data)}, a complete valid output"
        if error is not None:
            t.self_check.append(
                f"{t.spec.name}: reference accepts {t.show(data)} as complete but {t.validator_name()} says {error}"
            )
    return t.finding(
        Invariant.EOS,
        prefix,
        token_id=int(t.eos[0]) if len(t.eos) else None,
        token_bytes=None,
        backend_verdict=verdict,
        reference_verdict=ref,
        reference_allows=not backend_eos,
        message=msg,
        certificate=cert,
        walk=walk,
    )


_COMPARED_CANONICAL = (
    Invariant.SOUNDNESS,
    Invariant.EOS,
    Invariant.LIVENESS,
    Invariant.COMPLETENESS_BYTE,
    Invariant.COMPLETENESS_CANONICAL,
)
_COMPARED = (*_COMPARED_CANONICAL, Invariant.COMPLETENESS_TOKEN, Invariant.UTF8)


def compare_step(
    t: Target,
    m: Any,
    r: RefMatcher,
    prefix: Sequence[int],
    walk: str,
    next_id: int | None = None,
    *,
    backend_bits: np.ndarray | None = None,
    backend_row: Any | None = None,
) -> list[Finding]:
    """Compare the backend's mask with the ideal mask after ``prefix`` (both matchers there);
    ``backend_bits`` (unpacked) or ``backend_row`` (as :meth:`Target.backend_packed` returns it):
    ``m``'s mask when the caller has just fetched it (not fetched again)."""
    if backend_row is not None:
        bp = backend_row
    else:
        bp = t.backend_packed(m) if backend_bits is None else None
    rp = t.reference_packed(r)
    found: list[Finding] = []
    # Every comparison checks each of these: a missing token is classified (by _completeness) as
    # blocked in every segmentation (byte), in the canonical one, in this one (token) or inside a
    # character (utf8); the last two do not apply to a backend that promises canonical encodings only.
    for inv in _COMPARED if not t.profile.canonical_tokenization_only else _COMPARED_CANONICAL:
        t.checks[inv] += 1
    # Equal masks (every step of an engine without defects) leave nothing to classify but the
    # non-text tokens the backend allows (extra by definition) and is_accepting(): the same results
    # as the general path below, without its passes over the vocabulary. Compared packed, as both
    # sides return them: unpacking a 128k row costs more than comparing its words.
    rm: np.ndarray | None = None  # the reference's row unpacked, once, where it is needed
    if bp is not None:
        same = SKIP_EQUAL_MASKS and same_bits(bp, rp, t.size)
    else:
        assert backend_bits is not None
        rm = mask_bits(rp, t.size)
        same = SKIP_EQUAL_MASKS and np.array_equal(backend_bits, rm)
    if same:
        nontext = t.nontext_ids
        watched = bits_at(rp, t.size, np.concatenate([t.eos, nontext]))  # one read of the row for both
        b_eos = r_eos = bool(watched[: len(t.eos)].any())
        extra = nontext[watched[len(t.eos) :]]  # the same bits on both sides
        missing = nontext[:0]
    else:
        diff = _differences_packed(t, bp, rp) if bp is not None and PACKED_DIFFERENCES else None
        if diff is None:
            bm = mask_bits(bp, t.size) if bp is not None else backend_bits
            assert bm is not None
            diff = _differences(t, bm, mask_bits(rp, t.size) if rm is None else rm)
        b_eos, r_eos, b_text, r_text, extra, missing = diff
        if not b_text and not b_eos and (r_text or r_eos):
            allowed = int((mask_bits(rp, t.size) & t.text).sum())
            found.append(
                t.finding(
                    Invariant.LIVENESS,
                    prefix,
                    backend_verdict="empty mask",
                    reference_verdict=f"{allowed} tokens allowed, EOS {'allowed' if r_eos else 'masked'}",
                    message=f"empty mask after {len(prefix)} tokens: generation cannot go on",
                    certificate={"prefix": t.vocab.decode(prefix)},
                    walk=walk,
                )
            )
            return found
    if (
        b_eos != r_eos
        and t.first_time(Invariant.EOS, t.vocab.decode(prefix), b_eos)
        and t.may_certify(Invariant.EOS)
    ):
        found.append(_eos(t, prefix, b_eos, walk))
    elif (
        b_eos == r_eos
        and bool(m.is_accepting()) != r.is_accepting()
        and t.first_time("accepting", len(prefix))
    ):
        # The mask's EOS bit is right but is_accepting() says otherwise: callers that stop on it are wrong.
        said = bool(m.is_accepting())
        found.append(
            t.finding(
                Invariant.EOS,
                prefix,
                backend_verdict=f"is_accepting() is {said}",
                reference_verdict=f"the prefix is {'' if r.is_accepting() else 'not '}in the language",
                reference_allows=r.is_accepting(),
                message=f"is_accepting() is {said} after {t.show(t.vocab.decode(prefix))}, though its own mask "
                f"{'offers' if b_eos else 'masks'} EOS",
                certificate={
                    "operations": [op.accept(i) for i in prefix] + [op.ACCEPTING],
                    "observed": said,
                    "expected": r.is_accepting(),
                },
                walk=walk,
            )
        )
    if len(extra):
        done = 0
        for tok in in_order(extra_order(t, extra)):
            if done >= _PER_STEP:
                break
            if not t.first_time(Invariant.SOUNDNESS, t.token_bytes(tok)):
                continue
            if not t.may_certify(Invariant.SOUNDNESS):
                break
            f = _soundness(t, prefix, tok, m, walk, len(extra))
            done += 1
            if f is not None:
                found.append(f)
    if len(missing):
        done = 0
        for tok in in_order(missing_order(t, missing, next_id)):
            if done >= _PER_STEP:
                break
            if not t.first_time("completeness", t.token_bytes(tok)):
                continue
            if not t.may_certify("completeness"):
                break
            f = _completeness(t, prefix, tok, r, walk, tok == next_id and walk == "canonical", len(missing))
            done += 1
            if f is not None:
                found.append(f)
    return found


#: The differences of two rows: EOS allowed by the backend, by the reference; some text token
#: allowed by the backend, by the reference; the ids the backend allows and the reference does not
#: (text, and any non-text id but EOS), and the text ids the reference allows and the backend does
#: not, both ascending.
Differences = tuple[bool, bool, bool, bool, np.ndarray, np.ndarray]


def _differences(t: Target, bm: np.ndarray, rm: np.ndarray) -> Differences:
    """:data:`Differences` of two unpacked rows (a bool per id): the definition, and the oracle
    :func:`_differences_packed` is tested against."""
    b_text, r_text = bm & t.text, rm & t.text
    specials = bm & ~t.text
    specials[t.eos] = False
    extra = np.flatnonzero((b_text & ~r_text) | specials)
    missing = np.flatnonzero(r_text & ~b_text)
    return t.eos_of(bm), t.eos_of(rm), bool(b_text.any()), bool(r_text.any()), extra, missing


def _differences_packed(t: Target, bp: Any, rp: Any) -> Differences | None:
    """:func:`_differences` on the packed rows, a word (32 ids) at a time, and unpacking only the
    words where the rows differ: at 128k a row is 4,008 words against 128,256 bools, and the general
    path of :func:`compare_step` read a dozen bool rows per step. None when a row is shorter than the
    vocabulary (then :func:`mask_bits` reads what it holds, and the caller compares that)."""
    bw, rw = row_words(bp, t.size), row_words(rp, t.size)
    if len(bw) != len(t.text_words) or len(rw) != len(t.text_words):
        return None
    bt, rt = bw & t.text_words, rw & t.text_words
    return (
        bool((bw & t.eos_words).any()),
        bool((rw & t.eos_words).any()),
        bool(bt.any()),
        bool(rt.any()),
        _set_ids((bt & ~rt) | (bw & t.other_words)),
        _set_ids(rt & ~bt),
    )


def allowed_ids(row: Any, size: int) -> np.ndarray:
    """``np.flatnonzero(mask_bits(row, size))``: the ids a row allows, ascending, read off the words
    that are not 0 (a row inside a structure allows a few hundred of 128k ids)."""
    ids = _set_ids(row_words(row, size))
    return ids[: np.searchsorted(ids, size)]


def _set_ids(words: np.ndarray) -> np.ndarray:
    """The ids whose bits are set in a packed row (int32 words, xgrammar's layout), ascending."""
    nz = np.flatnonzero(words)
    if not len(nz):
        return nz
    bits = np.unpackbits(np.ascontiguousarray(words[nz]).view(np.uint8), bitorder="little").reshape(-1, 32)
    row, col = np.nonzero(bits)
    return nz[row] * 32 + col


def _pack_row(bits: np.ndarray) -> np.ndarray:
    """A bool per id as a packed row (int32 words, xgrammar's layout; the last word's bits past the
    ids are 0)."""
    padded = np.zeros(num_words(len(bits)) * 32, dtype=bool)
    padded[: len(bits)] = bits
    return np.packbits(padded, bitorder="little").view("<i4")


# -- walks ----------------------------------------------------------------------------------------
def check_walk(t: Target, ids: Sequence[int], walk: str, end_with_eos: bool = True) -> list[Finding]:
    """Masks compared at every step of ``ids`` (a sequence the reference accepts; where
    ``t.compare_at`` says, at the steps where the language branches only), then EOS."""
    found: list[Finding] = []
    at: Sequence[int] = ()  # where a backend exception happened: after ``at``, accepting ``pending``
    pending: int | None = None
    try:
        m = t.matcher()
        r = RefMatcher(t.reference)
        compare = True  # compare the masks before the first token
        row = None  # the backend's mask, fetched with the last accept when the next step compares
        for k, tok in enumerate(ids):
            at, pending = ids[:k], None
            if compare:
                found += compare_step(t, m, r, ids[:k], walk, next_id=int(tok), backend_row=row)
            ref_out = r.accept(int(tok))
            if _rejected(ref_out):
                raise ValueError(f"walk {walk!r} is not in the language at step {k} (token {tok})")
            pending = int(tok)
            # Whether the masks are compared after this token (always after the last), asked before
            # the accept so that the mask comes with it; a skipped step counts only once accepted.
            compare = k + 1 == len(ids) or t.compares_at(r, count=False)
            try:
                outcome, row = t.accept_mask(m, int(tok)) if compare else (m.accept(int(tok)), None)
            except BackendFault as e:
                if e.operation == "mask":  # the accept went through: the mask failed after it
                    at, pending = ids[: k + 1], None
                raise
            if _rejected(outcome):
                if not any(f.step == k and f.token_id == tok for f in found) and t.first_time(
                    "accept", k, tok
                ):
                    f = _completeness(t, ids[:k], int(tok), _ref_at(t, ids[:k]), walk, walk == "canonical", 0)
                    if f is not None:
                        found.append(f.with_(backend_verdict="accept() rejected it"))
                return found
            if not compare:
                t.count_skipped_step()
        at, pending = ids, None
        found += compare_step(t, m, r, ids, walk, backend_row=row)
        if end_with_eos and r.is_accepting() and len(t.eos):
            eos = int(t.eos[0])
            pending = eos
            if _rejected(m.accept(eos)) and not any(f.invariant == Invariant.EOS for f in found):
                found.append(_eos(t, ids, False, walk).with_(backend_verdict="accept(EOS) rejected"))
    except BackendFault as e:  # backend exceptions are findings (docs/style.md §7)
        found.append(t.fault(e, at, pending if e.operation == "accept" else None))
    return found


def _ref_at(t: Target, prefix: Sequence[int]) -> RefMatcher:
    r = RefMatcher(t.reference)
    for i in prefix:
        r.accept(int(i))
    return r


def _weight(t: Target, tok: int) -> float:
    """Adversarial preference: EOS, byte-fallback, long, whitespace and rare (high-id) tokens."""
    return _token_weight(t.vocab, t.size, tok)


def _token_weight(v: Vocabulary, size: int, tok: int) -> float:
    """:func:`_weight` from the vocabulary alone (the per-vocabulary table is built from it)."""
    if tok in v.eos_ids:
        return 4.0
    b = v.token_bytes[tok] or b""
    w = 1.0 + min(len(b), 16) / 4
    if tok in v.byte_fallback_ids:
        w += 3
    if any(c in b" \t\n\r" for c in b):
        w += 2
    if splits_character(b):
        w += 2
    return w + 2 * tok / max(1, size)


# _weight for every token of a vocabulary, computed once per (vocabulary, size): the pickers below ask
# for it on every step of every walk (millions of calls in one certify run otherwise).
_WEIGHTS: dict[tuple[str, int], np.ndarray] = {}


_LENGTHS: dict[tuple[str, int], np.ndarray] = {}


def token_lengths(t: Target) -> np.ndarray:
    """Each token's byte length (0 for tokens without bytes), memoized per vocabulary."""
    return _vocab_lengths(t.vocab)


def _vocab_lengths(v: Vocabulary) -> np.ndarray:
    size = len(v)
    return _per_vocabulary(
        _LENGTHS,
        v,
        size,
        lambda: np.array([len(v.token_bytes[i] or b"") for i in range(size)], dtype=np.int64),
    )


_LENGTH_KEYS: dict[tuple[str, int], np.ndarray | None] = {}


def _length_keys(t: Target) -> np.ndarray | None:
    """Token lengths as int16 (NumPy's stable sort of them is a radix sort), memoized per vocabulary;
    None when a token is too long for the flag bit :func:`missing_order` sets above the length."""
    return _vocab_length_keys(t.vocab)


def _vocab_length_keys(v: Vocabulary) -> np.ndarray | None:
    def build() -> np.ndarray | None:
        lengths = _vocab_lengths(v)
        return None if len(lengths) and int(lengths.max()) >= 1 << 14 else lengths.astype(np.int16)

    return _per_vocabulary(_LENGTH_KEYS, v, len(v), build)


def _ascending(ids: np.ndarray) -> bool:
    return not bool(np.any(ids[1:] < ids[:-1]))


def extra_order(t: Target, extra: np.ndarray) -> np.ndarray:
    """Tokens the backend allows and the reference masks, in the order they are certified: shortest
    first, then by id. Ids given ascending (np.flatnonzero) are sorted stably by length alone (a
    radix sort: these arrays can hold most of a 128k vocabulary); others by np.lexsort (the last key
    is the primary one)."""
    keys = _length_keys(t)
    if keys is None or not _ascending(extra):
        lengths = token_lengths(t)
        return extra[np.lexsort((extra, lengths[extra]))]
    return extra[np.argsort(keys[extra], kind="stable")]


def missing_order(t: Target, missing: np.ndarray, next_id: int | None) -> np.ndarray:
    """Tokens the backend masks and the reference allows, in the order they are certified: the walk's
    own next token first, then shortest, then by id (as :func:`extra_order`, the "not the walk's own
    token" flag a bit above the length)."""
    keys = _length_keys(t)
    own = missing != (-1 if next_id is None else next_id)
    if keys is None or not _ascending(missing):
        lengths = token_lengths(t)
        return missing[np.lexsort((missing, lengths[missing], own))]
    key = keys[missing] | (own.astype(np.int16) << 14)
    return missing[np.argsort(key, kind="stable")]


def in_order(ids: np.ndarray, chunk: int = 64) -> Iterator[int]:
    """``ids`` as Python ints, converted a chunk at a time: the loops over :func:`extra_order` and
    :func:`missing_order` stop after a few tokens, and most of a 128k vocabulary can differ."""
    for start in range(0, len(ids), chunk):
        yield from ids[start : start + chunk].tolist()


def token_weights(t: Target) -> np.ndarray:
    """``_weight(t, i)`` for every token id ``i`` (float64, read-only), memoized per vocabulary."""
    return _vocab_weights(t.vocab)


def _vocab_weights(v: Vocabulary) -> np.ndarray:
    size = len(v)
    return _per_vocabulary(
        _WEIGHTS,
        v,
        size,
        lambda: np.array([_token_weight(v, size, i) for i in range(size)], dtype=np.float64),
    )


_ORDERS: dict[tuple[str, int], np.ndarray] = {}


def preference_order(t: Target) -> np.ndarray:
    """Every token id, most preferred first (:func:`_weight` descending, then id ascending): one
    sort per vocabulary, memoized."""
    return _vocab_order(t.vocab)


def _vocab_order(v: Vocabulary) -> np.ndarray:
    size = len(v)
    return _per_vocabulary(_ORDERS, v, size, lambda: np.lexsort((np.arange(size), -_vocab_weights(v))))


def vocabulary_tables(v: Vocabulary) -> None:
    """Build the per-vocabulary tables the checks read (the vocabulary's prefix index, which the
    segmentation search and witnesses read, text ids, token lengths and their sort keys, adversarial
    weights and the preference order; memoized, so a second call costs nothing). They depend on the
    vocabulary alone, and at 128k take about half a second: certify builds them at set-up, with the
    token trie, so that this one-time cost is not charged to whichever spec needs them first."""
    v.index  # noqa: B018 - a cached property: built here
    _text_mask(v, len(v))
    _vocab_length_keys(v)
    _vocab_rank(v)


def by_weight(t: Target, ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """The distinct ``ids`` most preferred first: :func:`preference_order` kept where an id is
    among them, so a step costs one pass over the vocabulary and no sort (a walk inside a string
    allows most of a 129k vocabulary at every step). Fewer ids than a 64th of the vocabulary (a
    walk inside a structure: a few hundred) are sorted by their place in that order instead
    (:func:`_by_rank`, tested against this)."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) * 64 < t.size:
        return _by_rank(t, ids)
    member = np.zeros(t.size, dtype=np.bool_)
    member[ids] = True
    order = preference_order(t)
    return order[member[order]]


def _by_rank(t: Target, ids: np.ndarray) -> np.ndarray:
    """:func:`by_weight` by sorting: the distinct ``ids`` by their position in the preference order."""
    distinct = np.unique(ids)
    return distinct[np.argsort(_vocab_rank(t.vocab)[distinct], kind="stable")]


_RANKS: dict[tuple[str, int], np.ndarray] = {}


def _vocab_rank(v: Vocabulary) -> np.ndarray:
    """Each id's position in :func:`preference_order` (its inverse permutation), per vocabulary."""

    def build() -> np.ndarray:
        order = _vocab_order(v)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    return _per_vocabulary(_RANKS, v, len(v), build)


def weighted_picker(rng: random.Random) -> Callable[[Target, np.ndarray], int]:
    """A ``pick`` for :func:`adversarial_walk` from a seeded RNG: ``rng.choices(allowed, weights)``,
    its running sums and bisection done by numpy (the same float sums in the same order, so the same
    token for the same RNG state)."""

    def pick(t: Target, allowed: np.ndarray) -> int:
        cum = np.cumsum(token_weights(t)[allowed])
        # bisect(cum, x, 0, n - 1) as random.choices does: the last index also takes a rounded-up x.
        x = rng.random() * float(cum[-1])
        return int(allowed[int(np.searchsorted(cum[:-1], x, side="right"))])

    return pick


def adversarial_walk(
    t: Target, pick: Callable[[Target, np.ndarray], int], max_steps: int = 40
) -> list[Finding]:
    """Let the backend choose among its own allowed tokens (through ``pick``), masks compared at
    every step; stops at EOS, where the two masks share no token, or after ``max_steps``. A token the
    backend allows and the reference rejects is reported by the step's comparison and the walk goes
    on past it with a token both allow (``instances["adversarial/steered-past-soundness"]``): the
    defects behind a known soundness defect are reached too."""
    found: list[Finding] = []
    ids: list[int] = []
    pending: int | None = None  # the token being accepted when a backend exception happened
    try:
        m = t.matcher()
        r = RefMatcher(t.reference)
        row = None  # the backend's mask, fetched with the last accept
        for step in range(max_steps):
            pending = None
            # one mask per step: compared, then chosen from
            packed = t.backend_packed(m) if row is None else row
            found += compare_step(t, m, r, ids, "adversarial", backend_row=packed)
            allowed = allowed_ids(packed, t.size)
            if not len(allowed):
                break
            tok = int(pick(t, allowed))
            if _rejected(r.accept(tok)):
                # compare_step has reported it (soundness or eos). Steer past it: choose again among
                # the tokens both sides allow, so the walk reaches what lies behind a known defect.
                both = allowed[bits_at(t.reference_packed(r), t.size, allowed)]
                if not len(both):
                    break
                t.instances["adversarial/steered-past-soundness"] += 1
                tok = int(pick(t, both))
                if _rejected(r.accept(tok)):
                    raise ValueError(f"token {tok} is in the reference's mask but its accept() rejects it")
            pending = tok
            more = step + 1 < max_steps and tok not in t.vocab.eos_ids  # the next step asks the mask
            try:
                outcome, row = t.accept_mask(m, tok) if more else (m.accept(tok), None)
            except BackendFault as e:
                if e.operation == "mask":  # the accept went through: the mask failed after it
                    ids.append(tok)
                    pending = None
                raise
            if _rejected(outcome):
                found.append(
                    t.finding(
                        Invariant.DETERMINISM,
                        ids,
                        token_id=tok,
                        token_bytes=t.token_bytes(tok),
                        backend_verdict="allowed by mask(), rejected by accept()",
                        reference_verdict="accepted",
                        message=f"mask() allows token {tok} but accept() rejects it",
                        certificate={
                            "operations": [op.accept(i) for i in ids] + [op.MASK, op.accept(tok)],
                            "observed": "rejected",
                            "expected": "accepted",
                        },
                        walk="adversarial",
                    )
                )
                break
            if tok in t.vocab.eos_ids:
                break
            ids.append(tok)
    except BackendFault as e:
        found.append(t.fault(e, ids, pending if e.operation == "accept" else None))
    return found


def check_invalid(
    backend: Backend,
    compiled: Compiled,
    spec: SpecRef,
    vocab: Vocabulary,
    data: bytes,
    why: str,
    reference_compiled: bool,
) -> list[Finding]:
    """A backend must not let an invalid output finish: walk ``data``'s canonical (else fewest-token)
    encoding and offer EOS. ``why`` is the independent validator's objection to ``data``."""
    ids = canonical_ids(vocab, data) or vocab.index.fewest_tokens(data)
    if ids is None:
        return []
    done = 0  # ids accepted before a backend exception
    try:
        m = Guarded(_call("matcher", backend.matcher, compiled))
        for i in ids:
            if _rejected(m.accept(int(i))):
                return []
            done += 1
        bits = mask_bits(m.mask(), len(vocab))
        eos = [e for e in sorted(vocab.eos_ids) if bits[e]]
        if not eos:
            return []
    except BackendFault as e:
        token = int(ids[done]) if e.operation == "accept" and done < len(ids) else None
        return [
            failure_at(backend_failure(backend, spec, vocab, e.operation, e.error), vocab, ids[:done], token)
        ]
    invariant = Invariant.SOUNDNESS if reference_compiled else Invariant.REFUSAL
    return [
        Finding(
            invariant=invariant,
            backend=backend.name,
            backend_version=backend.version,
            spec=spec,
            tokenizer=vocab.original.name,
            tokenizer_fingerprint=vocab.original.fingerprint,
            prefix_ids=tuple(ids),
            prefix_bytes=data,
            token_id=eos[0],
            token_bytes=None,
            backend_verdict="accepts the whole output and offers EOS",
            reference_verdict=f"invalid: {why}",
            reference_allows=False,  # the validator rejects the output: EOS must stay masked after it
            message=f"lets the invalid output {show_bytes(data[:200], spec)} finish"
            + (
                ""
                if reference_compiled
                else " (the reference refuses this spec: the backend should refuse or enforce it)"
            ),
            certificate={
                "completion": data,
                "completion_ids": list(ids),
                "invalid_ids": list(ids),
                "invalid_text": data,
                "validator_error": why,
            },
            walk="invalid-instance",
        )
    ]


# -- serving invariants ---------------------------------------------------------------------------
def _mask_key(bits: np.ndarray) -> bytes:
    return np.packbits(bits).tobytes()


def check_serving(t: Target, ids: Sequence[int]) -> list[Finding]:
    """Fork, rollback, speculative, jump-forward and determinism along a valid walk ``ids``."""
    found: list[Finding] = []
    try:
        # Only the part of the walk the backend itself accepts: a rejection is the mask checks' finding.
        m = t.matcher()
        n = 0
        try:
            while n < len(ids) and not _rejected(m.accept(int(ids[n]))):
                n += 1
        except BackendFault as e:  # on the plain walk: a reproducer replays it exactly
            return [t.fault(e, ids[:n], int(ids[n]) if e.operation == "accept" else None)]
        ids = list(ids[:n])
        if n == 0:
            return found
        ops_to = [op.accept(i) for i in ids]
        found += _fork_check(t, ids, ops_to)
        found += _rollback_check(t, ids, ops_to)
        found += _speculative_check(t, ids, ops_to)
        found += _jump_forward_check(t, ids, ops_to)
        found += _determinism_check(t, ids, ops_to)
    except BackendFault as e:
        found.append(t.fault(e))
    return found


def _serving_finding(
    t: Target,
    inv: Invariant,
    prefix: Sequence[int],
    ops: list[Op],
    observed: Any,
    expected: Any,
    message: str,
) -> Finding:
    return t.finding(
        inv,
        prefix,
        backend_verdict=str(observed)[:200],
        reference_verdict=str(expected)[:200],
        message=message,
        certificate={"operations": ops, "observed": observed, "expected": expected},
        walk="serving",
    )


def mask_json(bits: np.ndarray) -> dict[str, Any]:
    """A mask in a certificate: the packed bitmask (xgrammar's int32 layout, little-endian bytes),
    zlib-compressed and base64-encoded, so a reproducer can compare whole masks exactly."""
    words = np.packbits(bits, bitorder="little").tobytes()
    return {
        "bitmask_zlib_b64": base64.b64encode(zlib.compress(words, 9)).decode("ascii"),
        "allowed_count": int(bits.sum()),
        "size": int(len(bits)),
    }


def _mask_finding(
    t: Target,
    inv: Invariant,
    prefix: Sequence[int],
    ops: list[Op],
    got: np.ndarray,
    want: np.ndarray,
    meaning: str,
    message: str,
) -> Finding:
    f = _serving_finding(t, inv, prefix, ops, mask_json(got), mask_json(want), message)
    cert = {**f.certificate, "difference": _diff_summary(got, want), "expected_meaning": meaning}
    return f.with_(
        certificate=cert, backend_verdict=str(_diff_summary(got, want))[:200], reference_verdict=meaning
    )


def _diff_summary(got: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    extra = np.flatnonzero(got & ~want)
    missing = np.flatnonzero(want & ~got)
    return {
        "extra_ids": extra[:8].tolist(),
        "missing_ids": missing[:8].tolist(),
        "extra_count": int(len(extra)),
        "missing_count": int(len(missing)),
    }


def _fork_check(t: Target, ids: Sequence[int], ops_to: list[Op]) -> list[Finding]:
    k = len(ids) // 2
    m = t.matcher()
    for i in ids[:k]:
        m.accept(int(i))
    before = t.backend_mask(m)
    child = m.fork()
    steps = [int(i) for i in ids[k : k + 3]]
    for i in steps:
        child.accept(i)
    after = t.backend_mask(m)
    t.checks["fork"] += 1
    ops = (
        ops_to[:k]
        + [op.MASK, op.FORK, op.switch(1)]
        + [op.accept(i) for i in steps]
        + [op.switch(0), op.MASK]
    )
    if not np.array_equal(before, after):
        return [
            _mask_finding(
                t,
                Invariant.FORK,
                ids[:k],
                ops,
                after,
                before,
                "the parent's mask unchanged",
                f"advancing a fork by {len(steps)} tokens changed its parent's mask",
            )
        ]
    # The fork must behave like a fresh matcher given the same tokens (differences from the *ideal*
    # mask are the mask comparisons' business, not fork isolation's).
    child_bits = t.backend_mask(child)
    fresh = t.matcher()
    for i in [*ids[:k], *steps]:
        fresh.accept(int(i))
    want = t.backend_mask(fresh)
    if not np.array_equal(child_bits, want):
        ops = ops_to[:k] + [op.FORK, op.switch(1)] + [op.accept(i) for i in steps] + [op.MASK]
        return [
            _mask_finding(
                t,
                Invariant.FORK,
                [*ids[:k], *steps],
                ops,
                child_bits,
                want,
                "the mask of a fresh matcher given the same tokens",
                "a fork's mask differs from a fresh matcher's after the same tokens",
            )
        ]
    return []


def _rollback_check(t: Target, ids: Sequence[int], ops_to: list[Op]) -> list[Finding]:
    found: list[Finding] = []
    m = t.matcher()
    masks = [t.backend_mask(m)]
    for i in ids:
        m.accept(int(i))
        masks.append(t.backend_mask(m))
    n = len(ids)
    for j in sorted({1, min(3, n), n}):
        t.checks["rollback"] += 1
        m.rollback(j)
        got = t.backend_mask(m)
        ops = ops_to + [op.rollback(j), op.MASK]
        if not np.array_equal(got, masks[n - j]):
            found.append(
                _mask_finding(
                    t,
                    Invariant.ROLLBACK,
                    ids[: n - j],
                    ops,
                    got,
                    masks[n - j],
                    "the mask of a fresh replay",
                    f"rollback({j}) after {n} tokens does not restore the mask of the shorter prefix",
                )
            )
            return found
        for i in ids[n - j :]:
            m.accept(int(i))
    # Rollback across EOS: undoing the EOS must give back the state before it.
    r = _ref_at(t, ids)
    if r.is_accepting() and len(t.eos):
        t.checks["rollback"] += 1
        eos = int(t.eos[0])
        if not _rejected(m.accept(eos)):
            m.rollback(1)
            got = t.backend_mask(m)
            ops = ops_to + [op.accept(eos), op.rollback(1), op.MASK]
            if not np.array_equal(got, masks[n]):
                found.append(
                    _mask_finding(
                        t,
                        Invariant.ROLLBACK,
                        ids,
                        ops,
                        got,
                        masks[n],
                        "the mask before EOS",
                        "rollback(1) after EOS does not restore the state before EOS",
                    )
                )
    return found


def _speculative_check(t: Target, ids: Sequence[int], ops_to: list[Op]) -> list[Finding]:
    m = t.matcher()
    validate = getattr(m, "validate", None)
    if validate is None:
        return []
    found: list[Finding] = []
    for k in sorted({0, len(ids) // 2}):
        m = t.matcher()
        for i in ids[:k]:
            m.accept(int(i))
        r = _ref_at(t, ids[:k])
        rm = t.reference_mask(r)
        bad = np.flatnonzero(~rm & t.text)
        draft = [int(i) for i in ids[k : k + 4]] + ([int(bad[0])] if len(bad) else [])
        before = t.backend_mask(m)
        t.checks["speculative"] += 1
        assert m.validate is not None
        got = int(m.validate(draft))
        want = r.validate(draft)
        after = t.backend_mask(m)
        ops = ops_to[:k] + [op.validate(draft)]
        if got != want:
            found.append(
                _serving_finding(
                    t,
                    Invariant.SPECULATIVE,
                    ids[:k],
                    ops,
                    got,
                    want,
                    f"validate({draft}) accepts {got} draft tokens, the grammar {want}",
                )
            )
        elif not np.array_equal(before, after):
            found.append(
                _mask_finding(
                    t,
                    Invariant.SPECULATIVE,
                    ids[:k],
                    ops + [op.MASK],
                    after,
                    before,
                    "unchanged mask",
                    "validate() changed the matcher's state",
                )
            )
    return found


def _jump_forward_check(t: Target, ids: Sequence[int], ops_to: list[Op]) -> list[Finding]:
    m = t.matcher()
    if getattr(m, "forced_bytes", None) is None:
        return []
    r = RefMatcher(t.reference)
    for k in range(len(ids) + 1):
        t.checks["jump_forward"] += 1
        assert m.forced_bytes is not None
        got = bytes(m.forced_bytes())
        want = r.forced_bytes()
        ok = want.startswith(got) and (got == want or t.profile.jump_forward_prefix_ok)
        if not ok and t.first_time(Invariant.JUMP_FORWARD, t.vocab.decode(ids[:k])):
            return [
                _serving_finding(
                    t,
                    Invariant.JUMP_FORWARD,
                    ids[:k],
                    ops_to[:k] + [op.FORCED_BYTES],
                    got,
                    want,
                    f"forced bytes after {len(ids[:k])} tokens are {t.show(got)}, the unique "
                    f"continuation is {t.show(want)}",
                )
            ]
        if k < len(ids):
            m.accept(int(ids[k]))
            r.accept(int(ids[k]))
    return []


def _determinism_check(t: Target, ids: Sequence[int], ops_to: list[Op]) -> list[Finding]:
    """Two matchers of one compiled grammar, interleaved, and a second compile: the same masks."""
    t.checks["determinism"] += 1
    a = t.matcher()
    b = t.matcher()
    second = t.compile_again()
    c = t.matcher(second) if isinstance(second, Compiled) else None
    for k, i in enumerate([*ids, None]):
        ma = t.backend_mask(a)
        for name, other in (
            ("a second matcher of the same compiled grammar", b),
            ("a matcher of a second compile", c),
        ):
            if other is None:
                continue
            mo = t.backend_mask(other)
            if not np.array_equal(ma, mo):
                return [
                    _mask_finding(
                        t,
                        Invariant.DETERMINISM,
                        ids[:k],
                        ops_to[:k] + [op.MASK],
                        mo,
                        ma,
                        "the first matcher's mask",
                        f"{name} has a different mask after {k} tokens (interleaved with the first)",
                    )
                ]
        if i is None:
            break
        a.accept(int(i))
        b.accept(int(i))
        if c is not None:
            c.accept(int(i))
    return []
