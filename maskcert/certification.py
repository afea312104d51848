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
   :mod:`props.checks.stateful` machine; a failure is shrunk before it is recorded.

Findings are deduplicated (:func:`props.contract.findings.dedupe`); the report (``report.json`` — schema in
:mod:`props.output.report` — plus Markdown, HTML and one reproducer script per finding) is written by
:meth:`Report.write`. ``Report.exit_code`` is 1 when a soundness, eos or crash finding exists, 3 when
maskcert itself failed on some case (``internal_errors``: a bug to report; the other cases stand).

A backend given by name runs in a worker subprocess (:class:`props.backends.worker.WorkerBackend`) unless it
is the reference, so that a hang or a segfault becomes a finding and the run goes on. ``workers > 1``
shards (vocabulary, case) pairs over that many processes, each with its own backend.
"""

from __future__ import annotations

import datetime
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import FlakyFailure, FlakyStrategyDefinition, Unsatisfiable

from props.checks.defects import Defect, Reduced, group, minimize_defect, reference_grammars
from props.checks.invariants import (
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
from props.checks.properties import (
    SEGMENTATIONS,
    Property,
    adversarial_property,
    invalid_strings,
    segment,
    valid_strings,
    valid_walk_property,
)
from props.checks.stateful import machine_for
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
from refdecoder import JsonProfile
from refdecoder import Matcher as RefMatcher
from refdecoder.errors import MaskcertError

__all__ = [
    "certify",
    "certify_case",
    "load_vocabularies",
    "CaseResult",
    "Report",
    "CertifyError",
    "declared_restrictions",
    "resolve_backend",
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


def _search_settings(examples: int, steps: int = 12) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        stateful_step_count=steps,
        report_multiple_bugs=False,
        print_blob=False,
    )


def _run_search(prop: Property, examples: int, seed: int, t: Target) -> list[Finding]:
    """One Hypothesis search; a failure's findings after shrinking, a flaky failure as determinism."""
    if examples <= 0:
        return []
    test = hypothesis_seed(seed)(prop.runner(_search_settings(examples)))
    try:
        test()
    except FindingFailure as e:
        return e.findings
    except Unsatisfiable:
        return []  # nothing to draw from (e.g. a spec given without instances): nothing checked here
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
) -> CaseResult:
    """Every invariant on one case and one vocabulary (see the module doc)."""
    t0 = time.perf_counter()
    rng = random.Random(f"{seed}/{case.name}/{vocab.fingerprint}")
    prepared = prepare(backend, case.spec, vocab)
    if isinstance(prepared, NotChecked):
        return _not_checked(backend, case, vocab, prepared, t0)
    t = prepared
    result = CaseResult(case.name, vocab.name, "checked")
    try:
        _check_target(t, case, rng, seed, examples, strings, deadline, result)
    except BackendFault as e:  # a crash ends this case: the backend's state is unknown afterwards
        result.findings.append(t.fault(e))
        result.checks["crash"] += 1
    result.checks.update(t.checks)
    result.timings = t.timings
    result.self_check = t.self_check
    result.declared = t.declared
    result.suppressed = t.suppressed
    result.instances = t.instances
    result.instance_notes = sorted(t.instance_notes)
    result.seconds = time.perf_counter() - t0
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
) -> None:
    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() > deadline

    t.checks["crash"] += 1
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
            result.findings += check_walk(t, ids, how)
            if how == "canonical" and not serving_done:
                result.findings += check_serving(t, ids)
                serving_done = True
        if out_of_time():
            return
    for bad, why in invalid_strings(t.spec, case):
        t.checks["soundness"] += 1
        t.instances["invalid/corpus"] += 1
        result.findings += check_invalid(t.backend, t.compiled, t.spec, t.vocab, bad, why, True)
    if out_of_time():
        return
    result.findings += adversarial_walk(t, weighted_picker(rng), max_steps=32)
    one = [(t, case)]
    result.findings += _run_search(valid_walk_property(one, f"valid-walks/{t.spec.name}"), examples, seed, t)
    result.findings += _run_search(adversarial_property(one, f"adversarial/{t.spec.name}"), examples, seed, t)
    if out_of_time():
        return
    result.findings += _run_search(
        Property(f"stateful/{t.spec.name}", machine=machine_for(t)), examples, seed, t
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
    result.seconds = time.perf_counter() - t0
    return result


# -- backends -------------------------------------------------------------------------------------
def resolve_backend(backend: Any, options: dict[str, Any] | None = None, isolate: bool | None = None) -> Any:
    """A backend instance: a registered name or ``module:Class`` (in a worker subprocess unless it
    is the reference or ``isolate=False``), an adapter class (instantiated here) or an instance.
    An adapter that cannot even start on the installed engine release raises :class:`UnsupportedEngine`
    outside the tested versions, :class:`~props.contract.attribution.AdapterFault` inside them."""
    options = dict(options or {})
    if isinstance(backend, str):
        from props.backends import adapter_class, load_backend

        if isolate is None:
            isolate = backend != "reference"
        adapter_class(backend)  # BackendUnavailable here, with the reason, rather than in the worker
        try:
            if isolate:
                from props.backends.worker import WorkerBackend

                return WorkerBackend(backend, options=options)
            return load_backend(backend, **options)
        except AdapterFault as e:
            raise unsupported_engine(e) or e from e
    if isinstance(backend, type):
        return backend(**options)
    return backend


# -- the whole run --------------------------------------------------------------------------------
_MEANINGS = {
    "whitespace": "whitespace allowed between JSON tokens ('any' = RFC 8259, 'none', or at most N per gap)",
    "property_order": "order of object properties ('schema' = declared order first)",
    "additional_properties_default": "what an absent additionalProperties means",
    "allow_duplicate_keys": "whether an object may repeat a key",
    "unicode_escapes": "whether strings may use \\uXXXX escapes",
    "formats": "whether 'format' is asserted or only an annotation",
    "top_level_whitespace": "whether whitespace may surround the top-level value",
    "additional_items_default": "what an absent items next to prefixItems means",
}


def declared_restrictions(profile: DeclaredProfile) -> list[dict[str, Any]]:
    """Where the declared profile departs from plain JSON Schema semantics (not defects)."""
    plain = JsonProfile(allow_duplicate_keys=True).as_dict()
    out = [
        {"option": k, "value": v, "default": plain[k], "meaning": _MEANINGS.get(k, k)}
        for k, v in profile.json.as_dict().items()
        if v != plain[k]
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


def _cases(
    corpus: Sequence[str], schemas: Sequence[str | Path], regexes: Sequence[str], gbnfs: Sequence[str | Path]
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
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise CertifyError(f"--gbnf {path}: expected a readable GBNF file ({e})") from e
        extra.append(Case(SpecRef(SpecKind.GBNF, text, Path(path).name, "cli")))
    if extra:
        cases += extra
        described.append({"name": "cli", "specs": len(extra)})
    return cases, described


@dataclass
class Report:
    """The outcome of :func:`certify`: ``data`` is report.json's content, ``findings`` the values."""

    data: dict[str, Any]
    findings: list[Finding]
    vocabularies: dict[str, Any]
    adapter_options: dict[str, Any]
    defects: list[Defect] = field(default_factory=list)
    reduced: dict[str, Reduced] = field(default_factory=dict)  # defect id -> its minimized example
    grammar_of: Callable[[Finding], Any] | None = None

    def minimize(self, backend: Any, seconds: float) -> None:
        """Shrink each defect's spec (:func:`props.checks.defects.minimize_defect`), ``seconds`` each;
        ``defects`` in report.json then show the minimized spec and witness."""
        grammar_of = self.grammar_of or reference_grammars()
        for d in self.defects:
            vocab = self.vocabularies.get(d.example.tokenizer_fingerprint)
            if vocab is None:
                continue
            reduced = minimize_defect(d, backend, vocab, grammar_of, seconds=seconds)
            if reduced is not None:
                self.reduced[d.id] = reduced
        self.data["defects"] = defects_json(self.defects, reduced=self.reduced)

    def apply_baseline(self, path: str | Path) -> None:
        """Judge the run against known defect signatures (``--baseline``): known defects are reported
        but do not fail the run, new ones do, known ones not seen are listed as fixed. Sets
        ``baseline`` and recomputes ``exit_code`` (an internal error still gives 3)."""
        known = load_baseline(path)
        seen = {d.signature for d in self.defects}
        new = [d for d in self.defects if d.signature not in known]
        self.data["baseline"] = {
            "path": str(path),
            "known": sorted(d.id for d in self.defects if d.signature in known),
            "new": [d.id for d in new],
            "fixed": sorted(known - seen),
        }
        if self.data["exit_code"] != 3:
            self.data["exit_code"] = 1 if any(d.invariant in FAILING for d in new) else 0

    def write_baseline(self, path: str | Path) -> Path:
        """The signatures of this run's defects as a baseline file (``--write-baseline``)."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "maskcert_baseline": 1,
            "backend": self.data["backend"]["name"],
            "signatures": sorted(d.signature for d in self.defects),
        }
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        return out

    @property
    def exit_code(self) -> int:
        return int(self.data["exit_code"])

    def by_invariant(self) -> Counter[str]:
        return Counter(f.invariant for f in self.findings)

    def write(self, out: str | Path) -> dict[str, Path]:
        """report.json, report.md, report.html and repro/*.py under ``out``."""
        from props.output.report import write_report
        from props.output.repro import write_reproducers

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.findings = write_reproducers(self.findings, self.vocabularies, out, self.adapter_options)
        self.data["findings"] = [f.to_json() for f in self.findings]
        minimal = write_reproducers(
            [r.finding for r in self.reduced.values()], self.vocabularies, out, self.adapter_options
        )
        self.reduced = {d: replace(r, finding=f) for (d, r), f in zip(self.reduced.items(), minimal)}
        repro = {f.id: f.repro for f in self.findings}
        self.data["defects"] = defects_json(self.defects, repro, self.reduced)
        return write_report(self.data, out)


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
    ``internal_errors``, exit code 3) instead of losing every result of the run."""
    try:
        return certify_case(backend, case, vocab, **kw)
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


def _shard(
    job: tuple[Any, dict[str, Any], bool | None, list[Case], list[Any], dict[str, Any]],
) -> list[CaseResult]:
    """A worker process's share: its own backend, its (case, vocabulary) pairs."""
    backend_name, options, isolate, cases, vocabs, kw = job
    backend = resolve_backend(backend_name, options, isolate)
    try:
        return [_guarded_case(backend, c, v, kw) for c in cases for v in vocabs]
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()


def certify(
    backend: Any = "reference",
    *,
    tokenizers: Sequence[Any] = ("bpe", "sp-bpe-bytefallback"),
    corpus: Sequence[str] = ("builtin",),
    cases: Sequence[Case] = (),
    schemas: Sequence[str | Path] = (),
    regexes: Sequence[str] = (),
    gbnfs: Sequence[str | Path] = (),
    budget_s: float | None = None,
    seed: int = 0,
    workers: int = 1,
    examples: int = 8,
    strings: int = 3,
    backend_options: dict[str, Any] | None = None,
    isolate: bool | None = None,
    out: str | Path | None = None,
    progress: bool | None = None,
    baseline: str | Path | None = None,
    minimize_s: float = 15.0,
) -> Report:
    """Certify ``backend`` (a registered name, ``module:Class``, an adapter class or instance) on the
    corpora (names or paths) plus ``cases`` for each tokenizer; write the report to ``out`` when given.
    See the module doc."""
    # Imported now, so that a broken install fails before the run rather than after it.
    from props.output import report as _report  # noqa: F401
    from props.output import repro as _repro  # noqa: F401

    started = time.monotonic()
    deadline = started + budget_s if budget_s is not None else None
    vocabs = load_vocabularies(tokenizers)
    loaded, described = _cases(corpus, schemas, regexes, gbnfs)
    if cases:
        described.append({"name": "given", "specs": len(cases)})
    cases = [*loaded, *cases]
    if not cases:
        raise CertifyError(
            "nothing to certify: the corpus is empty (give --corpus, --schema, --regex or --gbnf)"
        )
    options = dict(backend_options or {})
    show = sys.stderr.isatty() if progress is None else progress
    kw = {"seed": seed, "examples": examples, "strings": strings, "deadline": deadline}
    results: list[CaseResult] = []
    complete = True
    if workers > 1:
        if not isinstance(backend, str):
            raise CertifyError(
                "workers > 1 needs the backend as a name or 'module:Class' (each worker builds its own)"
            )
        shards = [(backend, options, isolate, cases[i::workers], vocabs, kw) for i in range(workers)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for part in pool.map(_shard, shards):
                results += part
        instance = resolve_backend(backend, options, isolate=False)
    else:
        instance = resolve_backend(backend, options, isolate)
        total = len(cases) * len(vocabs)
        done = 0
        # Cases outer, vocabularies inner: a budget that runs out leaves every tokenizer with the same cases.
        for c in cases:
            for v in vocabs:
                if deadline is not None and time.monotonic() > deadline:
                    complete = False
                    break
                results.append(_guarded_case(instance, c, v, kw))
                done += 1
                if show:
                    n = sum(len(r.findings) for r in results)
                    print(
                        f"\r[{done}/{total}] {v.name} {c.name[:40]:<40} findings so far: {n}",
                        end="",
                        file=sys.stderr,
                    )
        if show:
            print(file=sys.stderr)
    if deadline is not None and time.monotonic() > deadline:
        complete = complete and len(results) == len(cases) * len(vocabs)
    report = _assemble(
        instance, vocabs, described, results, budget_s, seed, time.monotonic() - started, complete
    )
    report.adapter_options = options
    if minimize_s > 0 and report.defects:
        report.minimize(instance, minimize_s)  # its own budget per defect, after the checks' budget
    if baseline is not None:
        report.apply_baseline(baseline)
    close = getattr(instance, "close", None)
    if close is not None:
        close()
    if out is not None:
        report.write(out)
    return report


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


def _assemble(
    backend: Any,
    vocabs: list[Any],
    described: list[dict[str, Any]],
    results: list[CaseResult],
    budget_s: float | None,
    seed: int,
    elapsed: float,
    complete: bool,
) -> Report:
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
    data: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool": {"name": "maskcert", "version": VERSION},
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "backend": {
            "name": backend.name,
            "version": backend.version,
            "profile": {
                "json": backend.profile.json.as_dict(),
                "canonical_tokenization_only": backend.profile.canonical_tokenization_only,
                "jump_forward_prefix_ok": backend.profile.jump_forward_prefix_ok,
                "notes": list(backend.profile.notes),
            },
            "declared_restrictions": declared_restrictions(backend.profile),
        },
        "tokenizers": [
            {
                "name": v.name,
                "kind": v.kind,
                "size": len(v),
                "fingerprint": v.fingerprint,
                "eos_ids": sorted(v.eos_ids),
            }
            for v in vocabs
        ],
        "corpus": described,
        "budget_s": budget_s,
        "seed": seed,
        "elapsed_s": round(elapsed, 3),
        "complete": complete,
        "specs": {
            "total": len(spec_names),
            "checked": status["checked"],
            "refused_by_backend": status["refused_by_backend"],
            "refused_by_reference": status["refused_by_reference"],
            "refused_by_both": status["refused_by_both"],
            "failed": status["failed"],
            "internal_error": status["internal_error"],
        },
        "counts": counts,
        "findings": [f.to_json() for f in findings],
        "refusals": [r.refusal for r in results if r.refusal is not None],
        "declared_differences": dict(declared),
        "suppressed_observations": dict(suppressed),
        "self_check": sorted({s for r in results for s in r.self_check}),
        "timings": timings,
        "instances": _instances(results),
        "internal_errors": [r.internal_error for r in results if r.internal_error],
        "exit_code": 3
        if any(r.internal_error for r in results)
        else 1
        if any(f.invariant in FAILING for f in findings)
        else 0,
    }
    report = Report(data, findings, {v.fingerprint: v for v in vocabs}, {})
    report.grammar_of = reference_grammars()
    report.defects = group(findings, report.grammar_of)
    report.data["defects"] = defects_json(report.defects)
    report.data["counts"]["defects"] = dict(Counter(str(d.severity) for d in report.defects))
    return report
