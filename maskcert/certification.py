"""``maskcert.certify`` (defined here, in ``maskcert.certification``): run every invariant of docs/design.md §4
against one backend over a corpus (docs/design.md §6).

Theory of operation. For each vocabulary and each corpus case, :func:`certify_case`:

1. compiles the spec on both sides (:func:`props.checks.invariants.prepare`); a refusal is recorded; a
   backend that compiles a spec the reference refuses is checked for *refusal hygiene* on the case's
   invalid instances;
2. walks valid strings — the case's instances in every serialization the declared profile allows,
   plus one string the reference generates — each under the canonical, a random and a UTF-8-splitting
   segmentation, masks compared at every step; the first canonical walk also runs the serving checks
   (fork, rollback, speculative, jump-forward, determinism);
3. walks the case's invalid instances (a backend that lets one finish is unsound, and the instance is
   its own certificate);
4. runs three Hypothesis searches bounded by ``examples``: valid walks (with instances from
   hypothesis-jsonschema too), adversarial walks where the backend picks tokens, and the
   :mod:`props.checks.stateful` machine; a failure is recorded as Hypothesis first met it (replayed
   once: an engine that answers otherwise is a determinism finding), and shrunk first only with
   ``shrink_searches``: defect minimization shrinks each defect once, after the checks, and
   shrinking every search's failure spec by spec doubled a run on an engine with a defect in most
   specs (llguidance on JSONSchemaBench) for the same defects.

Findings are deduplicated (:func:`props.contract.findings.dedupe`). The report is a frozen value
(:class:`Report`) built once from the run's results; minimization, limits probes, the baseline and the
reproducer scripts each return a new one, and :meth:`Report.to_json` alone serializes it
(``report.json`` — schema in :mod:`props.output.report` — plus Markdown and HTML, written with one
reproducer script per finding by :meth:`Report.write`). ``Report.exit_code`` is derived: 128 + the
signal when SIGINT/SIGTERM stopped the run, else 3 when maskcert itself failed on some case
(``internal_errors``: a bug to report; the other cases stand), else 1 when a soundness, eos or crash
finding exists (with a baseline: a new defect of those), else 4 when the run is incomplete under
``require_complete``, else 0. An incomplete run says why (:class:`Incomplete`: interrupted, budget
spent, shards lost — each that holds) and which pairs it did not check. Every option of a run is one
:class:`CertifyConfig`, checked when it is built.

Signals (:func:`maskcert.sharding.signals`, from the first check to the written report): the first
SIGINT/SIGTERM abandons the (spec, tokenizer) pair in progress — it is never checkpointed, so
``--resume`` redoes it — and skips minimization and limits probes; the report is still written. A
second signal ends the process at once.

Budget (``budget_s``, counted once set-up is done: vocabularies, corpus, the backend started; report
``profile.setup_s``): a deadline. Between pairs the shards
stop; inside a pair, every call of an engine in a worker is bounded by it
(:attr:`props.backends.worker.WorkerBackend.deadline`): a call still running then (after a grace of
:data:`~props.backends.worker.DEADLINE_GRACE_S`) is cut, the worker killed, and the pair reported
with its findings so far and a ``limits`` finding naming the call and how long it ran; it is not
checkpointed and is listed as unfinished. Minimization and limits probes get what is left. An engine
in this process (``isolate=False``, an adapter instance) is checked between calls only; the
reference's own compile is bounded by its compile budget (:class:`refdecoder.Limits`). A compile
slower than ``compile_limit_s`` (worker only) is killed and is a ``limits`` finding with its time;
the run goes on with a fresh worker.

A backend given by name runs in a worker subprocess (:class:`props.backends.worker.WorkerBackend`) unless it
is the reference, so that a hang or a segfault becomes a finding and the run goes on. ``workers > 1``
shards (vocabulary, case) pairs over that many processes, each with its own backend.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import gc
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import FlakyFailure, FlakyStrategyDefinition, Unsatisfiable

from maskcert.sharding import Interrupted, abortable, signal_name
from props.backends.worker import DeadlineReached, WorkerBackend
from props.checks.clock import Clock
from props.checks.clock import running as running_clock
from props.checks.coverage import coverage_walks
from props.checks.defects import Defect, Reduced, group, minimize_defect, reference_grammars
from props.checks.invariants import (
    COMPARE_AT,
    UNDECIDED,
    BackendFault,
    NotChecked,
    Target,
    adversarial_walk,
    backend_failure,
    check_invalid,
    check_serving,
    check_walk,
    prepare,
    profile_spec_ref,
    weighted_picker,
)
from props.checks.invariants import vocabulary_tables as check_tables
from props.checks.lexemes import check_numbers
from props.checks.properties import (
    SEGMENTATIONS,
    Property,
    SearchGaveUp,
    adversarial_property,
    invalid_strings,
    segment,
    valid_strings,
    valid_walk_property,
)
from props.checks.stateful import machine_for
from props.checks.targeted import check_targeted, check_targeted_refusal
from props.checks.witness import shortest_completion
from props.contract.attribution import AdapterFault
from props.contract.backend import DeclaredProfile
from props.contract.findings import (
    FAILING,
    INVARIANTS,
    REPORT_SCHEMA_VERSION,
    Finding,
    FindingFailure,
    Invariant,
    SpecKind,
    SpecRef,
    bytes_json,
    dedupe,
)
from props.corpus import Case, load_corpus
from refdecoder import JsonProfile, Limits, read_spec_json, read_spec_text, token_trie
from refdecoder import Matcher as RefMatcher
from refdecoder.errors import MaskcertError, SpecFileError

__all__ = [
    "certify",
    "read_spec_file",
    "CertifyConfig",
    "certify_case",
    "load_vocabularies",
    "CaseResult",
    "Report",
    "Cell",
    "SpecCounts",
    "BackendInfo",
    "TokenizerInfo",
    "BaselineVerdict",
    "LimitsProbes",
    "CertifyError",
    "declared_restrictions",
    "resolve_backend",
    "COMPILE_LIMIT_S",
]

VERSION = "0.1.0"


class CertifyError(MaskcertError, ValueError):
    """Bad certify input (backend, tokenizer, corpus or spec file), naming it and what was expected."""


class UnsupportedEngine(CertifyError):
    """The installed engine release is outside the versions its adapter is tested on, and the adapter
    cannot drive it (an API it calls is missing): a usage error, never a finding."""


def unsupported_engine(fault: AdapterFault, backend: Any = None) -> UnsupportedEngine | None:
    """The usage error for ``fault`` when the engine version is outside the adapter's tested range
    (:data:`props.backends.REGISTRY`); None when it is inside (then the fault is maskcert's bug)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from props.backends import REGISTRY

    name = fault.backend or str(getattr(backend, "name", ""))
    version = fault.version or str(getattr(backend, "version", ""))
    info = REGISTRY.get(name)
    if info is None:
        return None
    try:
        inside = Version(version) in SpecifierSet(info.tested)
    except InvalidVersion:
        inside = False
    if inside:
        return None
    return UnsupportedEngine(
        f"{name} {version} is outside the versions maskcert's adapter is tested on ({info.distribution}"
        f"{info.tested}), and the adapter cannot drive it: {fault.detail} (in {fault.operation}). "
        f"Install a tested release (pip install '{info.distribution}{info.tested}')."
    )


# -- one case -------------------------------------------------------------------------------------
@dataclass
class CaseResult:
    """What checking one (case, vocabulary) produced; results of shards merge by concatenation."""

    spec: str
    tokenizer: str
    status: str  # "checked", "refused_by_backend", "refused_by_reference", "refused_by_both", "failed"
    findings: list[Finding] = field(default_factory=list)
    checks: Counter[str] = field(default_factory=Counter)
    timings: dict[str, list[float]] = field(default_factory=dict)
    refusal: dict[str, str] | None = None
    self_check: list[str] = field(default_factory=list)
    declared: Counter[str] = field(default_factory=Counter)
    suppressed: Counter[str] = field(default_factory=Counter)
    internal_error: str = ""
    seconds: float = 0.0
    # Instances walked by "valid|invalid/source", and why a source produced none (Target.instances).
    instances: Counter[str] = field(default_factory=Counter)
    instance_notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase (Target.phases)
    # maskcert's own seconds and the engine's, per exclusive phase (props.checks.clock.Clock.to_json)
    clock: dict[str, Any] = field(default_factory=dict)


def _search_settings(examples: int, steps: int = 12, shrink: bool = False) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        stateful_step_count=steps,
        report_multiple_bugs=False,
        print_blob=False,
    )


def _run_search(prop: Property, examples: int, seed: int, t: Target, shrink: bool = False) -> list[Finding]:
    """One Hypothesis search; a failure's findings (after shrinking, with ``shrink``), a flaky
    failure as determinism."""
    if examples <= 0:
        return []
    test: Any = hypothesis_seed(seed)(prop.runner(_search_settings(examples, shrink=shrink)))
    # No example database (``_search_settings``), so no key: otherwise Hypothesis hashes the test's
    # source on every run (``function_digest``: inspect and ast, ~10 ms, three searches per target).
    test._hypothesis_internal_database_key = None
    try:
        test()
    except FindingFailure as e:
        return e.findings
    except Unsatisfiable:
        return []  # nothing to draw from (e.g. a spec given without instances): nothing checked here
    except SearchGaveUp:
        return []  # noted by the property; a search gives up only before any example failed
    except (FlakyFailure, FlakyStrategyDefinition) as e:
        return [
            t.finding(
                Invariant.DETERMINISM,
                (),
                backend_verdict="different outcomes on replay",
                reference_verdict="the same outcome every time",
                message=f"{prop.name}: the backend behaved differently when Hypothesis replayed the same "
                f"example ({type(e).__name__})",
                certificate={"hypothesis": str(e)[:2000]},
                walk=prop.name,
            )
        ]
    return []


def _generated(t: Target, rng: random.Random, steps: int = 10) -> bytes | None:
    """A string of the language the reference generates: random allowed tokens, then the shortest
    completion it finds. Exercises states no corpus instance reaches (escapes, exponents, ...)."""
    r = RefMatcher(t.reference)
    for _ in range(steps):
        allowed = [i for i in r.allowed_ids() if i not in t.vocab.eos_ids]
        if not allowed:
            break
        r.accept(rng.choice(allowed))
    rest = shortest_completion(t.reference.grammar, r.state)
    if rest is None:
        return None
    data = t.vocab.decode(r.accepted_ids()) + rest
    why = t.validate(data)
    if why == UNDECIDED:
        return None  # Target.validate has noted it
    if why is not None:
        t.self_check.append(
            f"{t.spec.name}: reference-generated {data!r} rejected by {t.validator_name()}: {why}"
        )
        return None
    return data


def certify_case(
    backend: Any,
    case: Case,
    vocab: Any,
    *,
    seed: int = 0,
    examples: int = 8,
    strings: int = 3,
    deadline: float | None = None,
    limits: Limits | None = None,
    compare_at: str = "auto",
    shrink_searches: bool = False,
) -> CaseResult:
    """Every invariant on one case and one vocabulary (see the module doc); ``limits`` bound the
    reference's compile (default :class:`refdecoder.Limits`). When a worker backend's deadline cuts
    the checks (:class:`~props.backends.worker.DeadlineReached`), what they found so far travels on
    the exception (``partial``) to the caller that set the deadline."""
    t0 = time.perf_counter()
    rng = random.Random(f"{seed}/{case.name}/{vocab.fingerprint}")
    prepared = prepare(backend, case.spec, vocab, limits)
    if isinstance(prepared, NotChecked):
        return _not_checked(backend, case, vocab, prepared, t0)
    t = prepared
    t.compare_at = compare_at
    t.phases["compile (both sides)"] = time.perf_counter() - t0
    result = CaseResult(case.name, vocab.name, "checked")
    cut: DeadlineReached | None = None
    try:
        _check_target(t, case, rng, seed, examples, strings, deadline, result, shrink_searches)
    except BackendFault as e:  # a crash ends this case: the backend's state is unknown afterwards
        result.findings.append(t.fault(e))
        result.checks["crash"] += 1
    except DeadlineReached as e:  # the run's end: the findings so far are proved, keep them
        cut = e
    result.checks.update(t.checks)
    result.timings = t.timings
    result.self_check = t.self_check
    result.declared = t.declared
    result.suppressed = t.suppressed
    result.instances = t.instances
    result.instance_notes = sorted(t.instance_notes)
    result.seconds = time.perf_counter() - t0
    result.phases = dict(t.phases)
    result.phases["backend masks"] = sum(t.timings["backend_mask_ms"]) / 1000
    result.phases["reference masks"] = sum(t.timings["reference_mask_ms"]) / 1000
    if cut is not None:
        cut.partial = result
        raise cut
    return result


def _check_target(
    t: Target,
    case: Case,
    rng: random.Random,
    seed: int,
    examples: int,
    strings: int,
    deadline: float | None,
    result: CaseResult,
    shrink: bool = False,
) -> None:
    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() > deadline

    t.checks["crash"] += 1
    with t.timed("valid strings"):
        data = valid_strings(t, case, limit=strings)
        t.instances["valid/corpus"] += len(data)
        gen = _generated(t, rng)
    if gen is not None and gen not in data:
        data.append(gen)
        t.instances["valid/reference"] += 1
    serving_done = False
    for text in data:
        seen: set[tuple[int, ...]] = set()
        for how in SEGMENTATIONS:
            ids = segment(t, text, how, rng)
            if ids is None or ids in seen:
                continue
            seen.add(ids)
            with t.timed("valid walks"):
                result.findings += check_walk(t, ids, how)
            if how == "canonical" and not serving_done:
                with t.timed("serving checks"):
                    result.findings += check_serving(t, ids)
                serving_done = True
        if out_of_time():
            return
    for bad, why in invalid_strings(t.spec, case):
        t.checks["soundness"] += 1
        t.instances["invalid/corpus"] += 1
        with t.timed("invalid instances"):
            result.findings += check_invalid(t.backend, t.compiled, t.spec, t.vocab, bad, why, True)
    with t.timed("targeted instances"):
        result.findings += check_targeted(t, data, seed=seed)  # invalid/targeted, valid/spellings
    with t.timed("number instances"):
        result.findings += check_numbers(t, data, known=result.findings, deadline=deadline)  # */numbers
    with t.timed("coverage-guided walks"):
        result.findings += coverage_walks(t, data, deadline=deadline)  # report: coverage/* and a note
    if out_of_time():
        return
    with t.timed("adversarial walk"):
        result.findings += adversarial_walk(t, weighted_picker(rng), max_steps=32)
    one = [(t, case)]
    with t.timed("search: valid walks"):
        result.findings += _run_search(
            valid_walk_property(one, f"valid-walks/{t.spec.name}", give_up=True), examples, seed, t, shrink
        )
    with t.timed("search: adversarial"):
        result.findings += _run_search(
            adversarial_property(one, f"adversarial/{t.spec.name}"), examples, seed, t, shrink
        )
    if out_of_time():
        return
    with t.timed("search: stateful"):
        result.findings += _run_search(
            Property(f"stateful/{t.spec.name}", machine=machine_for(t)), examples, seed, t, shrink
        )


def _not_checked(backend: Any, case: Case, vocab: Any, nc: NotChecked, t0: float) -> CaseResult:
    status = {
        "reference": "refused_by_reference",
        "backend": "refused_by_backend",
        "both": "refused_by_both",
    }[nc.side]
    result = CaseResult(case.name, vocab.name, status if not nc.findings else "failed")
    result.findings += nc.findings
    if nc.findings:
        result.checks[nc.findings[0].invariant] += 1
    result.refusal = {"spec": case.name, "tokenizer": vocab.name, "side": nc.side, "reason": nc.reason[:500]}
    if nc.side == "reference" and nc.backend_compiled is not None:
        # Refusal hygiene (docs/design.md §4.11): the reference cannot decide this spec; the backend compiled
        # it, so it must at least not let the case's invalid instances finish.
        spec = profile_spec_ref(case.spec, backend.profile)
        for bad, why in invalid_strings(spec, case):
            result.checks["refusal"] += 1
            result.instances["invalid/corpus"] += 1
            try:
                result.findings += check_invalid(backend, nc.backend_compiled, spec, vocab, bad, why, False)
            except BackendFault as e:  # pragma: no cover - check_invalid converts faults itself
                result.findings.append(backend_failure(backend, spec, vocab, e.operation, e.error))
        targeted, walked = check_targeted_refusal(backend, nc.backend_compiled, spec, vocab, case.valid)
        result.findings += targeted
        result.checks["refusal"] += walked
        result.instances["invalid/targeted"] += walked
    result.seconds = time.perf_counter() - t0
    return result


# -- backends -------------------------------------------------------------------------------------
def resolve_backend(
    backend: Any,
    options: dict[str, Any] | None = None,
    isolate: bool | None = None,
    *,
    compile_limit_s: float | None = None,
) -> Any:
    """A backend instance: a registered name or ``module:Class`` (in a worker subprocess unless it
    is the reference or ``isolate=False``), an adapter class (instantiated here) or an instance.
    An adapter that cannot even start on the installed engine release raises :class:`UnsupportedEngine`
    outside the tested versions, :class:`~props.contract.attribution.AdapterFault` inside them.
    ``NAME==VERSION`` runs that release from the engine cache (installed on a miss) in the worker; a
    release below the adapter's range is :class:`~props.backends.UnsupportedVersion` either way.
    ``compile_limit_s``: the worker's compile timeout (a slower compile is killed: a ``limits``
    finding); None keeps the worker's default."""
    options = dict(options or {})
    if isinstance(backend, str):
        from props.backends import (
            UnsupportedOption,
            adapter_class,
            check_version,
            engine_request,
            engine_version,
            load_backend,
        )
        from props.backends.engines import EngineInstallError

        try:
            name, engine_path = engine_request(backend)
        except EngineInstallError as e:
            raise CertifyError(str(e)) from e
        if isolate is None:
            isolate = name != "reference"
        if engine_path is not None and not isolate:
            raise CertifyError(
                f"--backend {backend}: a cached engine release runs in a worker (drop --in-process)"
            )
        if engine_path is None:
            check_version(name, engine_version(name))
            adapter_class(name)  # BackendUnavailable here, with the reason, rather than in the worker
        try:
            if isolate:
                return WorkerBackend(
                    name, options=options, engine_path=engine_path, compile_timeout_s=compile_limit_s
                )
            return load_backend(name, **options)
        except AdapterFault as e:
            raise unsupported_engine(e) or e from e
        except UnsupportedOption as e:
            raise CertifyError(str(e)) from e
    if isinstance(backend, type):
        return backend(**options)
    return backend


# -- the whole run --------------------------------------------------------------------------------
_MEANINGS = {
    "whitespace": "whitespace allowed between JSON tokens ('any' = RFC 8259, 'none', or at most N per gap)",
    "property_order": "order of object properties ('schema' = declared order first)",
    "additional_properties_default": "what an absent additionalProperties means",
    "allow_duplicate_keys": "whether an object may repeat a key",
    "unicode_escapes": "whether strings may use \\uXXXX escapes ('controls' = only for U+0000..U+001F)",
    "number_spelling": "which spellings of a number ('canonical' = docs/design.md 'The generation profile')",
    "formats": "whether 'format' is asserted or only an annotation",
    "top_level_whitespace": "whether whitespace may surround the top-level value",
    "additional_items_default": "what an absent items next to prefixItems means",
    "draft": "the JSON Schema draft of a schema that declares no $schema",
    "legacy_dependencies": "what 'dependencies' means in a 2019-09/2020-12 schema ('apply' = drafts 4-7)",
}


def declared_restrictions(profile: DeclaredProfile) -> list[dict[str, Any]]:
    """Where the declared profile departs from plain JSON Schema semantics (not defects)."""
    plain = JsonProfile(allow_duplicate_keys=True)  # getattr: as_dict() leaves out the default draft
    out = [
        {"option": k, "value": v, "default": getattr(plain, k), "meaning": _MEANINGS.get(k, k)}
        for k, v in profile.json.as_dict().items()
        if v != getattr(plain, k)
    ]
    if profile.canonical_tokenization_only:
        out.append(
            {
                "option": "canonical_tokenization_only",
                "value": True,
                "default": False,
                "meaning": "only the tokenizer's own encoding of a valid string is promised to pass",
            }
        )
    if profile.jump_forward_prefix_ok:
        out.append(
            {
                "option": "jump_forward_prefix_ok",
                "value": True,
                "default": False,
                "meaning": "forced bytes may stop short of the whole unique continuation",
            }
        )
    return out


def load_vocabularies(tokenizers: Sequence[Any]) -> list[Any]:
    """Vocabularies from matrix names, tokenizer files or ready ``Vocabulary`` values."""
    import tokenizers_matrix as tm

    return [tm.resolve(tok) if isinstance(tok, str) else tok for tok in tokenizers]


def vocabulary_tables(vocab: Any) -> None:
    """What every spec certified over ``vocab`` reads and nothing about a spec changes: the reference's
    token trie (:func:`refdecoder.token_trie`) and the checks' per-token tables
    (:func:`props.checks.invariants.vocabulary_tables`). Both are memoized on first use; certify builds
    them before the first spec (about 1.2 s at 128k), so that this one-time cost is counted as set-up,
    like loading the vocabulary, and not as the own time of whichever spec comes first."""
    token_trie(vocab)
    check_tables(vocab)


def _cases(
    corpus: Sequence[str],
    schemas: Sequence[str | Path],
    regexes: Sequence[str],
    gbnfs: Sequence[str | Path],
    larks: Sequence[str | Path] = (),
    structural_tags: Sequence[str | Path] = (),
) -> tuple[list[Case], list[dict[str, Any]]]:
    cases: list[Case] = []
    described: list[dict[str, Any]] = []
    for name in corpus:
        loaded = load_corpus(name)
        cases += loaded
        described.append({"name": str(name), "specs": len(loaded)})
    extra: list[Case] = []
    for path in schemas:
        extra += load_corpus(path)  # a schema file (or one with instances), as the corpus reads it
    for pattern in regexes:
        extra.append(Case(SpecRef(SpecKind.REGEX, pattern, f"regex:{pattern[:40]}", "cli")))
    for path in gbnfs:  # any suffix (.gbnf, .ebnf, ...), unlike a corpus path
        text = read_spec_file(path, "--gbnf", "a GBNF grammar file", json_file=False)
        extra.append(Case(SpecRef(SpecKind.GBNF, text, Path(path).name, "cli")))
    # Lark grammars and structural tags name special tokens (<|name|>, "token": "<|name|>"): their
    # table is each vocabulary's own, filled in when the pair is checked (``SpecRef.naming_special_tokens``).
    for path in larks:
        text = read_spec_file(path, "--lark", "a Lark grammar file", json_file=False)
        extra.append(
            Case(SpecRef(SpecKind.LARK, {"text": text, "special_tokens": {}}, Path(path).name, "cli"))
        )
    for path in structural_tags:
        tag = read_spec_file(path, "--structural-tag", "an xgrammar structural tag (JSON)", json_file=True)
        if not isinstance(tag, dict):
            raise CertifyError(
                f"--structural-tag {path}: expected a JSON object (a structural tag or a format), "
                f"not {type(tag).__name__}"
            )
        extra.append(
            Case(SpecRef(SpecKind.STRUCTURAL_TAG, {"tag": tag, "special_tokens": {}}, Path(path).name, "cli"))
        )
    if extra:
        cases += extra
        described.append({"name": "cli", "specs": len(extra)})
    return cases, described


def read_spec_file(path: str | Path, flag: str, expected: str, *, json_file: bool) -> Any:
    """The text (or JSON value) of the spec file ``path`` given with ``flag``; a :class:`CertifyError`
    naming the flag and the file when it cannot be read as one."""
    try:
        data = Path(path).read_bytes()
        if json_file:
            return read_spec_json(data, str(path), expected=expected)
        return read_spec_text(data, str(path), expected=expected)
    except OSError as e:
        raise CertifyError(f"{flag} {path}: expected a readable file, {expected} ({e})") from e
    except SpecFileError as e:
        raise CertifyError(f"{flag} {e}") from e


@dataclass(frozen=True)
class Cell:
    """report.json ``counts[invariant][tokenizer]``: checks made and findings of one invariant."""

    checks: int = 0
    findings: int = 0


@dataclass(frozen=True)
class SpecCounts:
    """report.json ``specs``: the (spec, tokenizer) pairs by outcome, and the distinct specs."""

    total: int
    checked: int
    refused_by_backend: int
    refused_by_reference: int
    refused_by_both: int
    failed: int
    internal_error: int


@dataclass(frozen=True)
class BackendInfo:
    """report.json ``backend``: the certified engine and the profile it declares."""

    name: str
    version: str
    profile: Mapping[str, Any]
    declared_restrictions: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class TokenizerInfo:
    """One entry of report.json ``tokenizers``."""

    name: str
    kind: str
    size: int
    fingerprint: str
    eos_ids: tuple[int, ...]


@dataclass(frozen=True)
class BaselineVerdict:
    """report.json ``baseline``: the run's defects judged against a baseline file (``--baseline``)."""

    path: str
    known: tuple[str, ...]
    new: tuple[str, ...]
    fixed: tuple[str, ...]


@dataclass(frozen=True)
class LimitsProbes:
    """report.json ``limits_probes``: the growth curves of ``certify --limits-probes``."""

    tokenizer: str
    limit_s: float
    curves: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Incomplete:
    """report.json ``incomplete``, present only when some (spec, tokenizer) pairs were not checked:
    every reason that holds, each on its own — never one standing in for another. ``interrupted``:
    the signal that stopped the run; ``budget_s``: the budget, when it was spent; ``lost_shards``:
    shards that never answered; ``unfinished``: the (spec, tokenizer) pairs not checked, which
    ``--resume`` checks — a pair the budget cut in the middle among them (its findings so far, and
    the ``limits`` finding of the cut call, are in the report)."""

    interrupted: int | None
    budget_s: float | None
    lost_shards: tuple[str, ...]
    unfinished: tuple[tuple[str, str], ...]

    def reasons(self) -> list[str]:
        """The reasons in words, for the report's summary and the command line."""
        out = []
        if self.interrupted is not None:
            out.append(f"interrupted by {signal_name(self.interrupted)}")
        if self.budget_s is not None:
            out.append(f"the budget of {self.budget_s:g} s spent")
        if self.lost_shards:
            out.append(f"{len(self.lost_shards)} shard(s) never answered")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "interrupted": None if self.interrupted is None else signal_name(self.interrupted),
            "budget_spent": self.budget_s is not None,
            "budget_s": self.budget_s,
            "lost_shards": list(self.lost_shards),
            "reasons": self.reasons(),
            "unfinished": [{"spec": s, "tokenizer": t} for s, t in self.unfinished],
        }


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`certify`, a value: :func:`_assemble` builds it once from the run's results;
    minimization, limits probes, the baseline and the reproducers each return a new one
    (:func:`dataclasses.replace`). :meth:`to_json` is report.json's content; ``exit_code`` is derived."""

    created: str
    backend: BackendInfo
    tokenizers: tuple[TokenizerInfo, ...]
    corpus: tuple[Mapping[str, Any], ...]
    budget_s: float | None
    seed: int
    elapsed_s: float
    complete: bool
    specs: SpecCounts
    counts: Mapping[str, Mapping[str, Cell]]  # invariant -> tokenizer -> cell
    defect_counts: Mapping[str, int]  # severity -> defects, as grouped from the checks' findings
    findings: tuple[Finding, ...]
    refusals: tuple[Mapping[str, str], ...]
    declared_differences: Mapping[str, int]
    suppressed_observations: Mapping[str, int]
    self_check: tuple[str, ...]
    timings: Mapping[str, Mapping[str, Any]]
    instances: Mapping[str, Any]
    internal_errors: tuple[str, ...]
    defects: tuple[Defect, ...]
    vocabularies: Mapping[str, Any] = field(default_factory=dict)  # fingerprint -> vocabulary
    adapter_options: Mapping[str, Any] = field(default_factory=dict)
    resumed: int | None = None  # pairs that came from the checkpoint (set by certify)
    profile: Mapping[str, Any] | None = None  # where the run's time went (set by certify)
    reduced: Mapping[str, Reduced] = field(default_factory=dict)  # defect id -> its minimized example
    repro: Mapping[str, str] = field(default_factory=dict)  # finding id -> its reproducer script
    limits_probes: LimitsProbes | None = None
    baseline: BaselineVerdict | None = None
    grammar_of: Callable[[Finding], Any] | None = None
    incomplete: Incomplete | None = None  # why some pairs were not checked (None: every pair was)
    interrupted: int | None = None  # the signal that stopped the run, in any phase (None: none did)
    require_complete: bool = False  # an incomplete run fails (exit 4; --require-complete)

    @property
    def exit_code(self) -> int:
        """128 + the signal when one stopped the run (as shells expect: an interrupted run never
        passes); else 3 when maskcert failed on some case; else 1 when a soundness, eos or crash
        finding exists (with a baseline: a new defect of those); else 4 when the run is incomplete
        and ``require_complete``; else 0 (a run cut short by its budget keeps this meaning: nothing
        failing among what was checked)."""
        if self.interrupted is not None:
            return 128 + self.interrupted
        if self.internal_errors:
            return 3
        if self.baseline is not None:
            new = set(self.baseline.new)
            failing = any(d.invariant in FAILING for d in self.defects if d.id in new)
        else:
            failing = any(f.invariant in FAILING for f in self.findings)
        if failing:
            return 1
        return 4 if self.require_complete and not self.complete else 0

    def to_json(self) -> dict[str, Any]:
        """report.json's content (schema in :mod:`props.output.report`), a fresh dict."""
        data: dict[str, Any] = {
            "schema_version": REPORT_SCHEMA_VERSION,
            "tool": {"name": "maskcert", "version": VERSION},
            "created": self.created,
            "backend": {
                "name": self.backend.name,
                "version": self.backend.version,
                "profile": copy.deepcopy(dict(self.backend.profile)),
                "declared_restrictions": [dict(r) for r in self.backend.declared_restrictions],
            },
            "tokenizers": [{**dataclasses.asdict(t), "eos_ids": list(t.eos_ids)} for t in self.tokenizers],
            "corpus": [dict(c) for c in self.corpus],
            "budget_s": self.budget_s,
            "seed": self.seed,
            "elapsed_s": self.elapsed_s,
            "complete": self.complete,
            "specs": dataclasses.asdict(self.specs),
            "counts": {
                **{
                    inv: {tok: dataclasses.asdict(cell) for tok, cell in cells.items()}
                    for inv, cells in self.counts.items()
                },
                "defects": dict(self.defect_counts),
            },
            "findings": [f.to_json() for f in self.findings],
            "refusals": [dict(r) for r in self.refusals],
            "declared_differences": dict(self.declared_differences),
            "suppressed_observations": dict(self.suppressed_observations),
            "self_check": list(self.self_check),
            "timings": copy.deepcopy({k: dict(v) for k, v in self.timings.items()}),
            "instances": copy.deepcopy(dict(self.instances)),
            "internal_errors": list(self.internal_errors),
            "exit_code": self.exit_code,
            "defects": defects_json(list(self.defects), dict(self.repro), dict(self.reduced)),
        }
        if self.incomplete is not None:
            data["incomplete"] = self.incomplete.to_json()
        if self.interrupted is not None:
            data["interrupted"] = signal_name(self.interrupted)
        if self.resumed is not None:
            data["resumed"] = self.resumed
        if self.profile is not None:
            data["profile"] = copy.deepcopy(dict(self.profile))
        if self.limits_probes is not None:
            lp = self.limits_probes
            data["limits_probes"] = {
                "tokenizer": lp.tokenizer,
                "limit_s": lp.limit_s,
                "curves": [copy.deepcopy(dict(c)) for c in lp.curves],
            }
        if self.baseline is not None:
            b = self.baseline
            data["baseline"] = {
                "path": b.path,
                "known": list(b.known),
                "new": list(b.new),
                "fixed": list(b.fixed),
            }
        return data

    @property
    def data(self) -> dict[str, Any]:
        """report.json's content (:meth:`to_json`); a fresh dict each time, never the report itself."""
        return self.to_json()

    def minimized(self, backend: Any, seconds: float) -> Report:
        """This report with each defect's spec shrunk (:func:`props.checks.defects.minimize_defect`),
        ``seconds`` each; ``defects`` in report.json then show the minimized spec and witness."""
        grammar_of = self.grammar_of or reference_grammars()
        reduced = dict(self.reduced)
        for d in self.defects:
            vocab = self.vocabularies.get(d.example.tokenizer_fingerprint)
            if vocab is None:
                continue
            small = minimize_defect(d, backend, vocab, grammar_of, seconds=seconds)
            if small is not None:
                reduced[d.id] = small
        return replace(self, reduced=reduced)

    def with_limits_probes(
        self,
        tokenizer: str,
        limit_s: float,
        curves: Sequence[Mapping[str, Any]],
        findings: Sequence[Finding],
        checks: int,
    ) -> Report:
        """This report with the growth curves of :mod:`maskcert.limits_probes` on ``tokenizer``, their
        ``limits`` findings among the others (defects regrouped) and ``checks`` probe points counted
        (``limits`` findings do not fail a run)."""
        counts = dict(self.counts)
        out = replace(self, limits_probes=LimitsProbes(tokenizer, limit_s, tuple(curves)))
        if Invariant.LIMITS in counts:
            cells = dict(counts[Invariant.LIMITS])
            old = cells.get(tokenizer, Cell())
            cells[tokenizer] = Cell(old.checks + checks, old.findings + len(findings))
            counts[Invariant.LIMITS] = cells
            out = replace(out, counts=counts)
        if findings:
            every = (*self.findings, *findings)
            out = replace(out, findings=every, defects=tuple(group(list(every), self.grammar_of)))
        return out

    def with_baseline(self, path: str | Path) -> Report:
        """This report judged against known defect signatures (``--baseline``): known defects are
        reported but do not fail the run, new ones do, known ones not seen are listed as fixed
        (``exit_code`` follows; an internal error still gives 3)."""
        known = load_baseline(path)
        seen = {d.signature for d in self.defects}
        verdict = BaselineVerdict(
            path=str(path),
            known=tuple(sorted(d.id for d in self.defects if d.signature in known)),
            new=tuple(d.id for d in self.defects if d.signature not in known),
            fixed=tuple(sorted(known - seen)),
        )
        return replace(self, baseline=verdict)

    def write_baseline(self, path: str | Path) -> Path:
        """The signatures of this run's defects as a baseline file (``--write-baseline``)."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "maskcert_baseline": 1,
            "backend": self.backend.name,
            "signatures": sorted(d.signature for d in self.defects),
        }
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        return out

    def by_invariant(self) -> Counter[str]:
        return Counter(f.invariant for f in self.findings)

    def with_findings(self, findings: Sequence[Finding], checks: Mapping[tuple[str, str], int]) -> Report:
        """This report with ``findings`` made beside the (spec, tokenizer) checks (``certify --tools``:
        the template promises, :mod:`maskcert.toolcall_certify`) counted and grouped as its own;
        ``checks``: the checks made, by (invariant, tokenizer)."""
        every = dedupe([*self.findings, *findings])
        counts = {inv: dict(cells) for inv, cells in self.counts.items()}
        for (inv, tok), n in checks.items():
            cell = counts.setdefault(inv, {}).get(tok, Cell())
            counts[inv][tok] = Cell(cell.checks + n, cell.findings)
        for f in findings:
            cell = counts.setdefault(f.invariant, {}).get(f.tokenizer, Cell())
            counts[f.invariant][f.tokenizer] = Cell(cell.checks, cell.findings + 1)
        defects = tuple(group(list(every), self.grammar_of))
        return replace(
            self,
            findings=tuple(every),
            counts=counts,
            defects=defects,
            defect_counts=dict(Counter(str(d.severity) for d in defects)),
        )

    def with_reproducers(self, out: str | Path) -> Report:
        """Writes repro/*.py under ``out`` (one per finding and per minimized defect) and returns this
        report with each finding carrying its script's path."""
        from props.output.repro import write_reproducers

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        options = dict(self.adapter_options)
        findings = write_reproducers(list(self.findings), dict(self.vocabularies), out, options)
        minimal = write_reproducers(
            [r.finding for r in self.reduced.values()], dict(self.vocabularies), out, options
        )
        return replace(
            self,
            findings=tuple(findings),
            reduced={d: replace(r, finding=f) for (d, r), f in zip(self.reduced.items(), minimal)},
            repro={f.id: f.repro for f in findings},
        )

    def write(self, out: str | Path) -> Report:
        """report.json, report.md, report.html and repro/*.py under ``out``; returns the report as
        written (:meth:`with_reproducers`)."""
        from props.output.report import write_report

        written = self.with_reproducers(out)
        write_report(written.to_json(), Path(out))
        return written


def defects_json(
    defects: list[Defect], repro: dict[str, str] | None = None, reduced: dict[str, Reduced] | None = None
) -> list[dict[str, Any]]:
    """report.json ``defects``: one entry per defect with its minimized example when minimization
    reproduced it (``minimized``: true), else its smallest finding; ``original_spec_digest`` is the
    spec the defect was first seen on."""
    out: list[dict[str, Any]] = []
    for d in defects:
        small = (reduced or {}).get(d.id)
        f = small.finding if small is not None else d.example
        cert = f.certificate or {}
        witness = cert.get("witness") or cert.get("completion") or (f.prefix_bytes + (f.token_bytes or b""))
        out.append(
            {
                "id": d.id,
                "signature": d.signature,
                "invariant": str(d.invariant),
                "severity": str(d.severity),
                "summary": d.summary(),
                "findings": [x.id for x in d.findings],
                "spec": {"kind": str(f.spec.kind), "source": f.spec.source, "name": f.spec.name},
                "minimized": small is not None,
                "original_spec_digest": d.example.spec.digest,
                "witness": bytes_json(witness if isinstance(witness, bytes) else None),
                "repro": f.repro if small is not None else (repro or {}).get(f.id, f.repro),
            }
        )
    return out


def load_baseline(path: str | Path) -> set[str]:
    """The defect signatures of a baseline file (written by ``--write-baseline``)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise CertifyError(
            f"--baseline {path}: expected a baseline JSON file written by --write-baseline ({e})"
        ) from e
    sigs = doc.get("signatures") if isinstance(doc, dict) else None
    if not isinstance(sigs, list) or not all(isinstance(s, str) for s in sigs):
        raise CertifyError(f'--baseline {path}: expected {{"signatures": [str, ...]}}, got {str(doc)[:120]}')
    return set(sigs)


def _guarded_case(backend: Any, case: Case, vocab: Any, kw: dict[str, Any]) -> CaseResult:
    """:func:`certify_case`, except that a bug in maskcert itself on one case is recorded (report
    ``internal_errors``, exit code 3) instead of losing every result of the run. The result carries
    its :class:`~props.checks.clock.Clock` (``clock``): maskcert's own seconds and the engine's."""
    clock = Clock()
    try:
        with running_clock(clock):
            result = certify_case(backend, case, vocab, **kw)
        result.clock = clock.to_json()
        return result
    except AdapterFault as e:
        unsupported = unsupported_engine(e, backend)
        if unsupported is not None:
            raise unsupported from e  # the whole run is a usage error: this release cannot be driven
        import traceback

        result = CaseResult(case.name, vocab.name, "internal_error")
        result.internal_error = (
            f"{case.name} / {vocab.name}: adapter fault (maskcert's bug, not the engine's): {e}\n"
            f"{traceback.format_exc(limit=8)}"
        )
        return result
    except Exception as e:  # noqa: BLE001 - reported loudly, see above
        import traceback

        result = CaseResult(case.name, vocab.name, "internal_error")
        result.internal_error = (
            f"{case.name} / {vocab.name}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"
        )
        return result


@dataclass(frozen=True)
class CertifyShard:
    """One shard's share of a certify run (:mod:`maskcert.sharding`): the (case, vocabulary) pairs
    ``pairs`` (indices into ``cases`` and ``vocabs``), the backend (a name or ``module:Class``, built
    where the shard runs; an instance only in-process), and the run's ``config`` (its ``budget_s`` is
    the time left, counted from when the shard starts)."""

    shard: int
    backend: Any
    config: CertifyConfig
    cases: list[Case]
    vocabs: list[Any]
    pairs: list[tuple[int, int]]


def _certify_shard(
    spec: CertifyShard, sink: Callable[[dict[str, Any]], None], should_stop: Callable[[], bool]
) -> None:
    """Run a shard's pairs in order, sending each result as it is done; stop between pairs when told
    or when the budget is spent, and abandon the pair in progress when a signal arrives
    (:func:`maskcert.sharding.abortable`). A usage error (an engine release the adapter cannot drive) ends the
    shard with a ``fatal`` message; ``done`` says whether every pair ran.

    The budget is a deadline for a worker backend's calls too (:attr:`WorkerBackend.deadline`): an
    engine call still running at the end is cut, and the pair in progress is sent as ``cut`` (its
    findings so far and a ``limits`` finding for the cut call, :func:`_cut_result`): reported, never
    checkpointed, listed as unfinished."""
    config = spec.config
    deadline = None if config.budget_s is None else time.monotonic() + config.budget_s
    kw = config.case_options(deadline)
    built = isinstance(spec.backend, str)
    complete = True
    try:
        backend = (
            resolve_backend(
                spec.backend,
                dict(config.backend_options),
                config.isolate,
                compile_limit_s=config.compile_limit_s,
            )
            if built
            else spec.backend
        )
        if isinstance(backend, WorkerBackend):
            backend.deadline = deadline
        for v in spec.vocabs:  # built at set-up in this process already; a spawned worker builds them here
            vocabulary_tables(v)
        frozen = _freeze_set_up()
        try:
            for ci, vi in spec.pairs:
                if should_stop() or (deadline is not None and time.monotonic() > deadline):
                    complete = False
                    break
                if isinstance(backend, WorkerBackend):
                    backend.last_timeout = None
                try:  # a signal abandons the pair in progress at once: it is not sent, resume redoes it
                    with abortable():
                        result = _guarded_case(backend, spec.cases[ci], spec.vocabs[vi], kw)
                    result = _with_compile_limit(result, backend)
                except Interrupted:
                    complete = False
                    break
                except DeadlineReached as e:  # the budget ended inside the pair
                    complete = False
                    cut = _cut_result(backend, spec.cases[ci], spec.vocabs[vi], e, config.budget_s)
                    if cut is not None:
                        where = {"shard": spec.shard, "pair": (ci, vi)}
                        sink({"type": "result", **where, "result": cut, "cut": True})
                    break
                sink({"type": "result", "shard": spec.shard, "pair": (ci, vi), "result": result})
        finally:
            if frozen:
                gc.unfreeze()
            if built:
                _close(backend)
    except (CertifyError, AdapterFault) as e:
        sink({"type": "fatal", "shard": spec.shard, "exception": e})
        complete = False
    sink({"type": "done", "shard": spec.shard, "complete": complete})


def _freeze_set_up() -> bool:
    """Move every object alive now (the vocabularies, their tables and token trie, the corpus, the
    backend, the imported modules: about 240k objects in a 128k run) out of the cyclic garbage
    collector's reach (``gc.freeze``, which moves lists and costs no traversal) for the checks that
    follow; True if this call froze them (False inside a run that already did: a matrix's certify
    runs, nested shards). Without it, each full collection during the checks traversed them all
    again: 40-120 ms each, charged to whichever spec was running. What the checks allocate is
    collected as usual; the caller unfreezes when the shard ends, and garbage that was waiting for a
    collection at the freeze is collected after that."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


def _cut_result(
    backend: Any, case: Case, vocab: Any, cut: DeadlineReached, budget_s: float | None
) -> CaseResult | None:
    """The pair in progress when the run's deadline arrived: what its checks found so far
    (``cut.partial``) and, when an engine call was running, a ``limits`` finding naming the call
    (``certificate``: ``operation``, ``seconds`` it had run when it was cut, ``limit_s`` it was
    allowed: the budget left when it started, ``run_budget_s``). None when there is nothing to
    report (maskcert's own work ran past the deadline before anything was found: no finding against
    the engine). A worker's start or housekeeping cut at the deadline is no finding either: no call
    of the Backend protocol was running."""
    partial = cut.partial if isinstance(cut.partial, CaseResult) else None
    if cut.seconds is None or cut.operation in ("start", "drop"):
        return partial if partial is not None and partial.findings else None
    result = partial if partial is not None else CaseResult(case.name, vocab.name, "failed")
    spec = profile_spec_ref(case.spec, backend.profile)
    f = backend_failure(backend, spec, vocab, cut.operation, cut)
    budget = "its budget" if budget_s is None else f"its budget of {budget_s:g} s"
    result.findings.append(
        f.with_(
            backend_verdict=f"{cut.operation} still running when the run's budget ended",
            reference_verdict="an answer within the run's budget (certify --budget)",
            message=f"{cut.operation} was still running when the run ended ({budget}); the worker was "
            f"killed and the spec not finished",
            certificate={
                **f.certificate,
                "seconds": round(cut.seconds, 3),
                "limit_s": round(cut.allowed_s if cut.allowed_s is not None else cut.seconds, 3),
                "limit": "budget",
                "run_budget_s": budget_s,
            },
        )
    )
    result.checks["limits"] += 1
    return result


def _with_compile_limit(result: CaseResult, backend: Any) -> CaseResult:
    """``result`` with its compile-timeout finding, if any, saying how long the compile ran before the
    worker killed it and which limit it broke (``certificate``: ``seconds``, ``limit_s``, ``limit``;
    ``certify --compile-limit``)."""
    timeout = backend.last_timeout if isinstance(backend, WorkerBackend) else None
    if timeout is None or timeout.operation != "compile":
        return result

    def timed(f: Finding) -> Finding:
        cert = f.certificate
        if not (
            f.invariant == Invariant.LIMITS
            and cert.get("operation") == "compile"
            and cert.get("exception") == type(timeout).__name__
        ):
            return f
        return f.with_(
            backend_verdict=f"compile slower than the compile limit of {timeout.timeout_s:g} s",
            reference_verdict="a compile within the compile limit (certify --compile-limit)",
            message=f"compile took longer than the compile limit of {timeout.timeout_s:g} s "
            "(certify --compile-limit); the worker was killed",
            certificate={
                **cert,
                "seconds": round(timeout.elapsed_s, 3),
                "limit_s": timeout.timeout_s,
                "limit": "compile_limit",
            },
        )

    result.findings = [timed(f) for f in result.findings]
    return result


def _close(backend: Any) -> None:
    """Stop a backend's worker subprocess, if it has one (adapters in this process have no ``close``)."""
    close = getattr(backend, "close", None)
    if close is not None:
        close()


class _Progress:
    """The live line: pairs done of all, findings so far, elapsed time and an ETA. On a terminal one
    line redrawn in place; elsewhere (``lines``) a plain line every :data:`PROGRESS_EVERY_S` seconds."""

    def __init__(self, mode: str, total: int, done: int, stream: Any) -> None:
        self.mode = mode
        self.total = total
        self.done = self.resumed = done
        self.findings = 0
        self.stream = stream
        self.start = time.monotonic()
        self.last = 0.0

    def update(self, result: CaseResult) -> None:
        self.done += 1
        self.findings += len(result.findings)
        now = time.monotonic()
        if self.mode == "bar" or (
            self.mode == "lines" and (now - self.last >= PROGRESS_EVERY_S or self.done == self.total)
        ):
            self.last = now
            self._show(now, f"{result.tokenizer} {result.spec[:40]}")

    def _show(self, now: float, where: str) -> None:
        elapsed = now - self.start
        ran = self.done - self.resumed
        eta = f"{elapsed / ran * (self.total - self.done):.0f} s" if ran else "?"
        line = f"[{self.done}/{self.total}] findings so far: {self.findings}, {elapsed:.0f} s, ETA {eta} ({where})"
        if self.mode == "bar":
            print(f"\r{line[:150]:<150}", end="", file=self.stream, flush=True)
        else:
            print(f"maskcert certify: {line}", file=self.stream, flush=True)

    def finish(self) -> None:
        if self.mode == "bar":
            print(file=self.stream)


PROGRESS_EVERY_S = 10.0

# certify --compile-limit's default. Measured at 128k (deepseek-v3-litellm, 129,280 tokens, this 2-core
# machine, each engine in-process): ordinary schemas compile in 0.0-0.5 s (outlines-core's index
# build the slowest) and a first compile with the per-vocabulary set-up in at most 1.7 s
# (lm-format-enforcer). 10 s is 5x that on a loaded CI machine, and a third of the 30 s that users
# meet as an outage.
COMPILE_LIMIT_S = 10.0


def _progress_mode(progress: bool | str | None) -> str:
    if progress is None:
        return "bar" if sys.stderr.isatty() else "off"
    if progress is True:
        return "bar" if sys.stderr.isatty() else "lines"
    if progress is False:
        return "off"
    if progress not in ("bar", "lines", "off"):
        raise CertifyError(f"progress={progress!r}: expected True, False, None, 'bar', 'lines' or 'off'")
    return str(progress)


@dataclass(frozen=True)
class CertifyConfig:
    """Every option of a certify run, one value (the CLI builds it from its flags, the Python API from
    keyword arguments, a shard carries it), checked once when built (:class:`CertifyError`).

    What is certified: ``tokenizers`` (matrix names, tokenizer files or ``Vocabulary`` values), the
    ``corpus`` names or paths, ``cases``, and spec files or patterns (``schemas``, ``regexes``,
    ``gbnfs``, ``larks``, ``structural_tags``: the special tokens these name are resolved in each
    vocabulary's ``special_names``). How: ``seed``, ``examples`` per Hypothesis search, ``strings`` valid strings per case,
    ``limits`` on the reference's compile (:class:`refdecoder.Limits`), ``backend_options`` for the
    adapter, ``isolate`` (None: a named engine runs in a worker subprocess), ``compile_limit_s``: an
    engine compile in a worker slower than this is killed and is a ``limits`` finding with its time
    (default :data:`COMPILE_LIMIT_S`), ``compare_at`` where valid walks compare masks
    (:data:`props.checks.invariants.COMPARE_AT`: every step, only where the language branches, or
    ``auto``: every step until the engine's masks prove slow). Where: ``workers`` processes, or Ray tasks on ``cluster``,
    within ``budget_s`` seconds counted once set-up is done — a deadline for every call
    of an engine in a worker (a call still running then is cut, a ``limits`` finding; an engine in
    this process is checked between calls only). After the checks, in what is left of the budget:
    ``minimize_s`` per defect, ``limits_probes``, ``baseline``; ``out`` the report directory
    (checkpointed; ``resume`` continues the run checkpointed there); ``progress`` (True, False, None,
    'bar', 'lines', 'off'); ``require_complete``: a run that did not check every pair fails (exit
    code 4)."""

    tokenizers: Sequence[Any] = ("bpe", "sp-bpe-bytefallback")  # stored as tuples, as are the others
    corpus: Sequence[str] = ("builtin",)
    cases: Sequence[Case] = ()
    schemas: Sequence[str | Path] = ()
    regexes: Sequence[str] = ()
    gbnfs: Sequence[str | Path] = ()
    larks: Sequence[str | Path] = ()
    structural_tags: Sequence[str | Path] = ()
    budget_s: float | None = None
    seed: int = 0
    workers: int = 1
    cluster: str | None = None
    examples: int = 8
    shrink_searches: bool = False  # shrink each search's failure before recording it (module doc)
    strings: int = 3
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    isolate: bool | None = None
    out: str | Path | None = None  # stored as a Path
    progress: bool | str | None = None
    baseline: str | Path | None = None
    minimize_s: float = 15.0
    resume: bool = False
    limits_probes: bool = False
    limits: Limits | None = None
    require_complete: bool = False
    compile_limit_s: float = COMPILE_LIMIT_S
    compare_at: str = "auto"

    def __post_init__(self) -> None:
        for name in (
            "tokenizers",
            "corpus",
            "cases",
            "schemas",
            "regexes",
            "gbnfs",
            "larks",
            "structural_tags",
        ):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "backend_options", dict(self.backend_options or {}))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))
        _progress_mode(self.progress)
        if self.workers < 1:
            raise CertifyError(f"workers={self.workers}: expected at least 1")
        if self.budget_s is not None and not (self.budget_s >= 0 and math.isfinite(self.budget_s)):
            raise CertifyError(f"budget_s={self.budget_s}: expected a finite number of seconds, 0 or more")
        if not (self.compile_limit_s > 0 and math.isfinite(self.compile_limit_s)):
            raise CertifyError(
                f"compile_limit_s={self.compile_limit_s}: expected a finite number of seconds above 0"
            )
        if self.compare_at not in COMPARE_AT:
            raise CertifyError(f"compare_at={self.compare_at!r}: expected one of {', '.join(COMPARE_AT)}")
        if self.resume and self.out is None:
            raise CertifyError("resume=True needs out= (the report directory of the run to continue)")

    def case_options(self, deadline: float | None = None) -> dict[str, Any]:
        """The keyword arguments of :func:`certify_case` this configuration gives (a shard's, the
        pytest plugin's), with ``deadline`` (``time.monotonic()``) when the budget runs."""
        return {
            "seed": self.seed,
            "examples": self.examples,
            "strings": self.strings,
            "limits": self.limits,
            "deadline": deadline,
            "compare_at": self.compare_at,
            "shrink_searches": self.shrink_searches,
        }

    @property
    def sharded(self) -> bool:
        """Whether the pairs run in worker processes or on a cluster (each builds its own backend)."""
        return self.workers > 1 or bool(self.cluster)

    def run_params(self, backend: Any, vocabs: Sequence[Any], cases: Sequence[Case]) -> dict[str, Any]:
        """What a run's results depend on (:mod:`maskcert.checkpoint`: a resumed run must match): not
        the workers, the budget, the output directory or what happens after the checks (minimization,
        limits probes, baseline)."""
        cls = backend if isinstance(backend, type) else type(backend)
        name = backend if isinstance(backend, str) else f"{cls.__module__}:{cls.__qualname__}"
        params: dict[str, Any] = {
            "backend": name,
            "options": dict(self.backend_options),
            "vocabularies": [v.fingerprint for v in vocabs],
            "cases": [[c.name, c.spec.digest] for c in cases],
            "seed": self.seed,
            "examples": self.examples,
            "strings": self.strings,
        }
        if self.shrink_searches:  # the findings differ (shrunk walks)
            params["shrink_searches"] = True
        if self.limits is not None:
            params["limits"] = dataclasses.asdict(self.limits)
        if self.compile_limit_s != COMPILE_LIMIT_S:  # it decides which compiles are findings
            params["compile_limit_s"] = self.compile_limit_s
        if self.compare_at != "auto":  # it decides which steps are compared
            params["compare_at"] = self.compare_at
        return params


def certify(backend: Any = "reference", config: CertifyConfig | None = None, **options: Any) -> Report:
    """Certify ``backend`` (a registered name, ``module:Class``, an adapter class or instance) as
    ``config`` says, with ``options`` (fields of :class:`CertifyConfig`) overriding it:
    ``certify(MyAdapter, tokenizers=[...])`` and ``certify(MyAdapter, config)`` both work. The report
    is written to ``config.out`` when given.

    The (case, vocabulary) pairs run in shards (:mod:`maskcert.sharding`, the mechanism ``maskcert
    fuzz`` uses): one in this process, ``workers`` worker processes, or ``workers`` Ray tasks on
    ``cluster``; results stream back as they are done and are put in the serial order (cases outer,
    vocabularies inner), so the report does not depend on how the run was sharded. With ``out``, each
    result is checkpointed (:mod:`maskcert.checkpoint`); ``resume=True`` continues the run checkpointed
    in ``out`` (same parameters) without redoing its finished pairs. ``progress``: True for a live line
    (redrawn on a terminal, a plain line every few seconds elsewhere), None for the line on a terminal
    only. ``limits`` bound the reference's compile of each spec (:class:`refdecoder.Limits`; what the
    reference refuses past them is reported as refused). ``limits_probes=True`` also compiles growing
    hostile specs on the backend (:mod:`maskcert.limits_probes`) and reports their growth curves. See
    the module doc."""
    if config is None:
        config = CertifyConfig(**options)
    elif options:
        config = replace(config, **options)
    # Imported now, so that a broken install fails before the run rather than after it.
    from maskcert.checkpoint import Checkpoint, CheckpointError, pair_key
    from maskcert.sharding import ClusterUnavailable, Shards, run_shards, signals
    from props.output import report as _report  # noqa: F401
    from props.output import repro as _repro  # noqa: F401

    started = time.monotonic()
    mode = _progress_mode(config.progress)
    setup: dict[str, float] = {}
    vocabs = load_vocabularies(config.tokenizers)
    setup["load vocabularies"] = time.monotonic() - started
    t_tables = time.monotonic()
    if not config.sharded:  # a sharded run's workers build their own (_certify_shard)
        for v in vocabs:
            vocabulary_tables(v)
    setup["vocabulary tables"] = time.monotonic() - t_tables
    loaded, described = _cases(
        config.corpus, config.schemas, config.regexes, config.gbnfs, config.larks, config.structural_tags
    )
    setup["load corpus"] = time.monotonic() - t_tables - setup["vocabulary tables"]
    if config.cases:
        described.append({"name": "given", "specs": len(config.cases)})
    cases = [*loaded, *config.cases]
    if not cases:
        raise CertifyError(
            "nothing to certify: the corpus is empty "
            "(give --corpus, --schema, --regex, --gbnf, --lark or --structural-tag)"
        )
    sharded = config.sharded
    if sharded and not isinstance(backend, str):
        raise CertifyError(
            "workers > 1 or a cluster needs the backend as a name or 'module:Class' (each worker builds its own)"
        )
    t_backend = time.monotonic()
    # Sharded, this process's backend only serves the steps after the checks: in this process, unless
    # a budget must bound them (a worker's calls can be cut at the deadline).
    instance = resolve_backend(
        backend,
        dict(config.backend_options),
        config.isolate if not sharded or config.budget_s is not None else False,
        compile_limit_s=config.compile_limit_s,
    )
    setup["start backend"] = time.monotonic() - t_backend
    params = config.run_params(backend, vocabs, cases)
    checkpoint = Checkpoint(config.out) if config.out is not None else None
    pairs = [(ci, vi) for ci in range(len(cases)) for vi in range(len(vocabs))]
    keys = {
        (ci, vi): pair_key(cases[ci].name, cases[ci].spec.digest, vocabs[vi].fingerprint) for ci, vi in pairs
    }
    finished: dict[tuple[int, int], CaseResult] = {}
    try:
        if config.resume and checkpoint is not None:
            checkpoint.check(params, VERSION)
            saved = checkpoint.load()
            finished = {pair: saved[k] for pair, k in keys.items() if k in saved}
        elif checkpoint is not None:
            checkpoint.start(params, VERSION)
    except CheckpointError as e:
        raise CertifyError(str(e)) from e
    todo = [p for p in pairs if p not in finished]
    n = max(1, min(config.workers, len(todo)))
    shard_backend = backend if sharded else instance
    # The budget counts from here, once set-up is done (report.json profile.setup_s says what it took).
    budget_end = None if config.budget_s is None else time.monotonic() + config.budget_s
    specs = [CertifyShard(i, shard_backend, config, cases, vocabs, todo[i::n]) for i in range(n)]
    cut: dict[tuple[int, int], CaseResult] = {}  # pairs the budget cut: reported, not checkpointed
    show = _Progress(mode, len(pairs), len(finished), sys.stderr)
    fatal: list[dict[str, Any]] = []
    # SIGINT/SIGTERM from here to the written report: the first stops the checks (the pair in progress
    # is abandoned), minimization and limits probes, and the report says so; a second ends the
    # process at once (maskcert.sharding.signals). Inside a matrix run, the matrix's scope is shared.
    with signals() as stop:

        def collect(msg: dict[str, Any]) -> None:
            if msg.get("type") == "result" and msg.get("cut"):  # resume redoes it
                cut[(int(msg["pair"][0]), int(msg["pair"][1]))] = msg["result"]
            elif msg.get("type") == "result":
                pair = (int(msg["pair"][0]), int(msg["pair"][1]))
                finished[pair] = msg["result"]
                if checkpoint is not None:
                    checkpoint.save(keys[pair], msg["result"])
                show.update(msg["result"])
            elif msg.get("type") == "fatal":
                fatal.append(msg)
                stop.set()

        end_at = None if config.budget_s is None else time.time() + config.budget_s
        plan = Shards(_certify_shard, specs, [s.shard for s in specs], end_at, 0.0, None)
        try:
            errors = run_shards(plan, collect, stop, processes=sharded, cluster=config.cluster)
        except ClusterUnavailable as e:
            raise CertifyError(str(e)) from e
        finally:
            show.finish()
        if fatal:
            _close(instance)
            raise fatal[0]["exception"]
        results = [finished[p] if p in finished else cut[p] for p in pairs if p in finished or p in cut]
        complete = all(p in finished for p in pairs)
        incomplete = (
            None
            if complete
            else Incomplete(
                interrupted=stop.signal,
                budget_s=config.budget_s if end_at is not None and time.time() >= end_at else None,
                lost_shards=tuple(errors),
                unfinished=tuple(
                    (cases[ci].name, vocabs[vi].name) for ci, vi in pairs if (ci, vi) not in finished
                ),
            )
        )
        report = _assemble(
            instance,
            vocabs,
            described,
            results,
            config.budget_s,
            config.seed,
            time.monotonic() - started,
            complete,
            errors,
        )
        report = replace(
            report,
            resumed=len(pairs) - len(todo),
            profile=_profile(results, setup, time.monotonic() - started),
            adapter_options=dict(config.backend_options),
            incomplete=incomplete,
            require_complete=config.require_complete,
        )
        if isinstance(instance, WorkerBackend):  # the steps after the checks end with the budget too
            instance.deadline = budget_end
        try:  # after the checks, each with its own budget; a signal abandons them, the checks' report stands
            with stop.abortable():
                if config.minimize_s > 0 and report.defects and _time_left(budget_end) != 0.0:
                    minimizing = Clock(base="minimization")
                    with running_clock(minimizing):
                        report = report.minimized(
                            instance, _share(config.minimize_s, budget_end, len(report.defects))
                        )
                    report = replace(
                        report, profile={**(report.profile or {}), "minimize": minimizing.to_json()}
                    )
                if config.limits_probes and _time_left(budget_end) != 0.0:
                    from maskcert.limits_probes import attach_limits_probes

                    report = attach_limits_probes(report, instance, vocabs[0])
        except Interrupted:
            pass
        except DeadlineReached:  # the budget ended inside an engine call here: the checks' report stands
            pass
        if isinstance(instance, WorkerBackend):
            instance.deadline = None
        if config.baseline is not None:
            report = report.with_baseline(config.baseline)
        _close(instance)
        report = replace(report, interrupted=stop.signal)
        if config.out is not None:
            report = report.write(config.out)
            if stop.signal is not None and report.interrupted is None:  # a signal while writing
                report = replace(report, interrupted=stop.signal).write(config.out)
    return report


def _time_left(end: float | None) -> float | None:
    """Seconds left until ``end`` (``time.monotonic()``), at least 0; None without a budget."""
    return None if end is None else max(0.0, end - time.monotonic())


def _share(seconds: float, end: float | None, n: int) -> float:
    """``seconds`` per item, or less when ``n`` items of it would run past ``end``."""
    left = _time_left(end)
    return seconds if left is None else min(seconds, left / max(1, n))


def _profile(results: list[CaseResult], setup: dict[str, float], wall: float) -> dict[str, Any]:
    """report.json ``profile``: where the run's time went. ``setup_s``: one-time costs of this
    process (vocabularies, corpus, backend start); ``spec_s``: seconds per checked (spec, tokenizer)
    pair (median, p95, max, n); ``phases_s``: seconds per phase summed over pairs (phases nest: the
    masks and certificates are inside the walks and searches that need them). From each pair's
    clock (:mod:`props.checks.clock`, time inside the engine's calls apart): ``own_s`` and
    ``engine_s``, maskcert's and the engine's seconds per checked pair (median, p90, p95, max,
    total), ``split_s``, per exclusive phase the two summed over every pair (with
    ``engine_calls``), and ``per_spec``: each pair's ``engine_s`` and ``own_s``."""
    checked = sorted(r.seconds for r in results if r.status == "checked")
    phases: dict[str, float] = {}
    for r in results:
        for k, v in r.phases.items():
            phases[k] = phases.get(k, 0.0) + v

    def rank(values: list[float], q: float) -> float:
        return round(values[min(len(values) - 1, math.ceil(q * len(values)) - 1)], 4) if values else 0.0

    def stats(values: list[float]) -> dict[str, float]:
        values = sorted(values)
        return {
            "median": rank(values, 0.5),
            "p90": rank(values, 0.9),
            "p95": rank(values, 0.95),
            "max": rank(values, 1.0),
            "total": round(sum(values), 4),
        }

    clocked = [c for r in results if r.status == "checked" and (c := getattr(r, "clock", None))]
    split = Clock()
    for r in results:
        for name, p in (getattr(r, "clock", None) or {}).get("phases", {}).items():
            split.own[name] = split.own.get(name, 0.0) + p["own_s"]
            split.engine[name] = split.engine.get(name, 0.0) + p["engine_s"]
            split.calls[name] += p["engine_calls"]
    return {
        "wall_s": round(wall, 3),
        "setup_s": {k: round(v, 4) for k, v in setup.items()},
        "spec_s": {
            "median": rank(checked, 0.5),
            "p95": rank(checked, 0.95),
            "max": rank(checked, 1.0),
            "n": len(checked),
        },
        "phases_s": {k: round(v, 4) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
        "own_s": stats([c["own_s"] for c in clocked]),
        "engine_s": stats([c["engine_s"] for c in clocked]),
        "engine_calls": sum(c["engine_calls"] for c in clocked),
        "split_s": split.to_json()["phases"],
        "per_spec": [
            {"spec": r.spec, "tokenizer": r.tokenizer, **_seconds(r.clock)}
            for r in results
            if getattr(r, "clock", None)
        ],
    }


def _instances(results: list[CaseResult]) -> dict[str, Any]:
    """report.json ``instances``: totals by source, then per spec and tokenizer the counts and why a
    source produced none, so a source that silently stopped producing is visible."""
    total: Counter[str] = Counter()
    per_spec: list[dict[str, Any]] = []
    for r in results:
        total.update(r.instances)
        if r.status in ("checked", "refused_by_reference", "failed") or r.instances:
            per_spec.append(
                {
                    "spec": r.spec,
                    "tokenizer": r.tokenizer,
                    "counts": dict(sorted(r.instances.items())),
                    "notes": r.instance_notes,
                }
            )
    return {"total": dict(sorted(total.items())), "per_spec": per_spec}


def _seconds(clock: Mapping[str, Any] | None) -> dict[str, float]:
    """A pair's seconds inside the engine's calls and maskcert's own (its clock), when it has one."""
    if not clock:
        return {}
    return {"engine_s": round(float(clock["engine_s"]), 4), "own_s": round(float(clock["own_s"]), 4)}


def _assemble(
    backend: Any,
    vocabs: list[Any],
    described: list[dict[str, Any]],
    results: list[CaseResult],
    budget_s: float | None,
    seed: int,
    elapsed: float,
    complete: bool,
    errors: Sequence[str] = (),
) -> Report:
    """The report of a run's ``results`` (in serial order); ``errors``: internal errors of the run
    itself (a shard that died), after those of the cases."""
    from props.output.report import histogram

    findings = dedupe([f for r in results for f in r.findings])
    counts: dict[str, dict[str, dict[str, int]]] = {inv: {} for inv in INVARIANTS}
    for r in results:
        for inv, n in r.checks.items():
            cell = counts[inv].setdefault(r.tokenizer, {"checks": 0, "findings": 0})
            cell["checks"] += n
    for f in findings:
        cell = counts[f.invariant].setdefault(f.tokenizer, {"checks": 0, "findings": 0})
        cell["findings"] += 1
    timings: dict[str, dict[str, Any]] = {}
    for v in vocabs:
        samples: dict[str, list[float]] = {
            "backend_mask_ms": [],
            "reference_mask_ms": [],
            "backend_compile_ms": [],
        }
        for r in results:
            if r.tokenizer == v.name:
                for k, xs in r.timings.items():
                    samples.setdefault(k, []).extend(xs)
        timings[v.name] = {k: histogram(xs) for k, xs in samples.items()}
    status = Counter(r.status for r in results)
    spec_names = {r.spec for r in results}
    declared: Counter[str] = Counter()
    suppressed: Counter[str] = Counter()
    for r in results:
        declared.update(r.declared)
        suppressed.update(r.suppressed)
    grammar_of = reference_grammars()
    defects = group(findings, grammar_of)
    return Report(
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        backend=BackendInfo(
            name=backend.name,
            version=backend.version,
            profile={
                "json": backend.profile.json.as_dict(),
                "canonical_tokenization_only": backend.profile.canonical_tokenization_only,
                "jump_forward_prefix_ok": backend.profile.jump_forward_prefix_ok,
                "notes": list(backend.profile.notes),
            },
            declared_restrictions=tuple(declared_restrictions(backend.profile)),
        ),
        tokenizers=tuple(
            TokenizerInfo(v.name, v.kind, len(v), v.fingerprint, tuple(sorted(v.eos_ids))) for v in vocabs
        ),
        corpus=tuple(described),
        budget_s=budget_s,
        seed=seed,
        elapsed_s=round(elapsed, 3),
        complete=complete,
        specs=SpecCounts(
            total=len(spec_names),
            checked=status["checked"],
            refused_by_backend=status["refused_by_backend"],
            refused_by_reference=status["refused_by_reference"],
            refused_by_both=status["refused_by_both"],
            failed=status["failed"],
            internal_error=status["internal_error"],
        ),
        counts={inv: {tok: Cell(**cell) for tok, cell in cells.items()} for inv, cells in counts.items()},
        defect_counts=dict(Counter(str(d.severity) for d in defects)),
        findings=tuple(findings),
        refusals=tuple(r.refusal for r in results if r.refusal is not None),
        declared_differences=dict(declared),
        suppressed_observations=dict(suppressed),
        self_check=tuple(sorted({s for r in results for s in r.self_check})),
        timings=timings,
        instances=_instances(results),
        internal_errors=(*(r.internal_error for r in results if r.internal_error), *errors),
        defects=tuple(defects),
        vocabularies={v.fingerprint: v for v in vocabs},
        grammar_of=grammar_of,
    )
