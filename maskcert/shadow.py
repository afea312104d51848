"""Shadow-check a production engine: its ``transformers`` logits processor, checked against the reference
while ``model.generate`` runs (issue 30).

::

    shadow = ShadowLogitsProcessor(engine_processor, JsonSchema(schema, profile), tokenizer,
                                   sample_rate=0.1, backend="xgrammar-hf", backend_version="0.2.9")
    model.generate(ids, logits_processor=[shadow], ...)
    shadow.findings        # list[props.contract.findings.Finding], as `maskcert certify` writes them
    shadow.counters()      # a plain dict snapshot of the Prometheus metrics
    shadow.exposition()    # the Prometheus text format
    shadow.write_report("out/")  # report.json / report.md / report.html (props.output.report)

Theory of operation
-------------------
The shadow *wraps* the engine's processor: each call runs the engine processor exactly once on the
scores (it is stateful, as ``generate`` drives it) and returns the engine's output unchanged, so
generation is the same with or without the shadow. The mask the engine applied is read off that
output: the ids whose output score is ``-inf`` (or NaN) while their input score was finite (an id a
processor *before* the engine had already removed says nothing about the engine, and is not
compared). Score columns past the vocabulary (models pad their embedding) must stay ``-inf``; one the
engine leaves finite is a soundness disagreement about a token that does not exist.

Beside it runs a :class:`refdecoder.hf.ReferenceLogitsProcessor`, used only for its row tracking
(:meth:`~refdecoder.hf.ReferenceLogitsProcessor.rows_for`, called on every step so that it follows beam
reorders and the generated ids) and its exact masks
(:meth:`~refdecoder.hf.ReferenceLogitsProcessor.bitmask`, computed only on *checked* steps). A step is
checked with probability ``sample_rate`` (a ``random.Random(seed)``, one draw per step), which keeps
the overhead bounded: a skipped step costs the engine call, one matcher advance per row and one pass
over the scores. On a checked step each *live* row (every generated id accepted by the reference; a
row the reference rejected or that ended draws only EOS there, and is not compared) is compared as
``props.checks.invariants`` compares a backend's mask (masks as sets, EOS one verdict):

* an id the engine allows and the reference masks: ``soundness`` (a special id or a padding column
  included); a :class:`Finding` with the ``prefix``/``token`` certificate, and, once the generated row
  goes through that token and the engine then offers EOS, the ``completion`` it let finish with the
  independent validator's ``validator_error`` (docs: ``props/output/report.py``);
* an id the reference allows and the engine masks: ``completeness_*`` or ``utf8``, certified by a
  ``witness`` (prefix + token + the reference's shortest completion), its ``witness_ids`` and
  ``validated_by`` — the witness is validated independently, as certify's are (canonical when the
  tokenizer's own encoding of the witness takes this token here, else token level);
* EOS offered by one side only: ``eos``, with the ``output`` and the validator's verdict on it.

Each disagreement becomes one finding per (row prefix, invariant) (the first token found, the others
counted in the certificate); the Prometheus counter counts every checked row that disagreed.

Metrics (``prometheus_client``, in the ``registry`` passed in or a new one per shadow — never the
global default registry):

``maskcert_shadow_steps_checked_total`` / ``maskcert_shadow_steps_skipped_total``
    calls (steps) checked against the reference / skipped by sampling.
``maskcert_shadow_disagreements_total{invariant}``
    checked (step, row prefix) pairs on which the engine disagreed, by invariant.
``maskcert_shadow_findings_total{invariant}``
    findings recorded (once per row prefix and invariant).
``maskcert_shadow_mask_hit_rate``
    histogram of the fraction of the vocabulary the engine masked, one observation per row per step
    (checked or not): the "mask hit rate" serving dashboards watch (near 1 in a string's structure,
    low in free text); a sudden shift shows a grammar or tokenizer mix-up before any check does.
``maskcert_shadow_check_seconds``
    histogram of the time each checked step spent in the reference and the comparison (its ``_sum``
    is the total time spent checking).
"""

from __future__ import annotations

import datetime
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from maskcert.certification import (
    BackendInfo,
    Cell,
    Report,
    SpecCounts,
    TokenizerInfo,
)
from props.checks.defects import group, reference_grammars
from props.checks.invariants import UNDECIDED, Target, mask_bits
from props.checks.witness import shortest_completion, splits_character
from props.contract.backend import Backend, Compiled, DeclaredProfile
from props.contract.findings import Finding, Invariant, SpecRef, dedupe
from refdecoder import TERMINATED, JsonProfile, JsonSchema, Spec
from refdecoder.errors import InputError, MaskcertError
from refdecoder.hf import ReferenceLogitsProcessor
from tokenizers_matrix import Vocabulary

__all__ = [
    "ShadowLogitsProcessor",
    "ShadowOptions",
    "ShadowError",
    "ShadowUnavailable",
    "xgrammar_processor",
]

try:  # transformers is optional: without it the shadow is a plain callable, as refdecoder.hf's processor
    from transformers import LogitsProcessor as _LogitsProcessor

    _Base: Any = _LogitsProcessor
except ImportError:  # pragma: no cover - transformers is a dependency of maskcert
    _Base = object

EngineProcessor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_WITNESS_TRIES = 4  # masked tokens tried for a validated witness per completeness finding
_SHOWN_IDS = 16  # other disagreeing ids listed in a certificate
_HIT_RATE_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)
_COMPLETENESS = (Invariant.COMPLETENESS_CANONICAL, Invariant.COMPLETENESS_TOKEN, Invariant.UTF8)
_CHECKED = (Invariant.SOUNDNESS, Invariant.EOS, *_COMPLETENESS)


class ShadowError(InputError):
    """A bad input to the shadow: ``path`` names it, ``expected`` says what would do, ``detail`` what came."""


class ShadowUnavailable(MaskcertError, ImportError):
    """An optional dependency the shadow needs is not installed; the message says what to install."""

    def __init__(self, package: str, install: str) -> None:
        self.package = package
        self.install = install
        super().__init__(f"maskcert.shadow needs {package}: {install}")


@dataclass(frozen=True)
class ShadowOptions:
    """Every knob of a shadow, validated once (one options object). ``sample_rate``: the fraction of
    steps checked (0.0 to 1.0); ``seed``: of the sampling; ``backend``/``backend_version``: the engine's
    name and release as findings name them; ``tokenizer_name``: the tokenizer's name in findings."""

    sample_rate: float = 1.0
    seed: int = 0
    backend: str = "engine"
    backend_version: str = ""
    tokenizer_name: str = ""

    def __post_init__(self) -> None:
        rate = self.sample_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= float(rate) <= 1.0:
            raise ShadowError("ShadowLogitsProcessor sample_rate", "a number from 0.0 to 1.0", repr(rate))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ShadowError("ShadowLogitsProcessor seed", "an int", repr(self.seed))
        for name in ("backend", "backend_version", "tokenizer_name"):
            if not isinstance(getattr(self, name), str):
                raise ShadowError(f"ShadowLogitsProcessor {name}", "a str", repr(getattr(self, name)))
        if not self.backend:
            raise ShadowError("ShadowLogitsProcessor backend", "the engine's name (e.g. 'xgrammar-hf')", "''")


@dataclass(frozen=True)
class _Engine:
    """What a :class:`Target` needs to know of the engine when it only runs inside ``generate``."""

    name: str
    version: str


class _TokenizerCodec:
    """A transformers tokenizer as a ``tokenizers_matrix.Codec``: the canonical encoding of a witness."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False)]

    def normalize(self, text: str) -> str:
        return text

    def can_encode(self, char: str) -> bool:
        return True

    def library_decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=True))


def _metrics(registry: Any) -> dict[str, Any]:
    try:
        import prometheus_client as prom
    except ImportError as e:
        raise ShadowUnavailable(
            "prometheus_client", "pip install 'maskcert[shadow]' (or pip install prometheus_client)"
        ) from e
    if registry is None:
        registry = prom.CollectorRegistry()
    elif not isinstance(registry, prom.CollectorRegistry):
        raise ShadowError(
            "ShadowLogitsProcessor registry",
            "a prometheus_client.CollectorRegistry or None",
            type(registry).__name__,
        )
    return {
        "registry": registry,
        "checked": prom.Counter(
            "maskcert_shadow_steps_checked", "Steps checked against the reference", registry=registry
        ),
        "skipped": prom.Counter(
            "maskcert_shadow_steps_skipped", "Steps skipped by sampling", registry=registry
        ),
        "disagreements": prom.Counter(
            "maskcert_shadow_disagreements",
            "Checked (step, row prefix) pairs where the engine's mask disagreed with the reference",
            ["invariant"],
            registry=registry,
        ),
        "findings": prom.Counter(
            "maskcert_shadow_findings",
            "Findings recorded, once per row prefix and invariant",
            ["invariant"],
            registry=registry,
        ),
        "hit_rate": prom.Histogram(
            "maskcert_shadow_mask_hit_rate",
            "Fraction of the vocabulary the engine masked, per row and step",
            buckets=_HIT_RATE_BUCKETS,
            registry=registry,
        ),
        "seconds": prom.Histogram(
            "maskcert_shadow_check_seconds",
            "Seconds a checked step spent in the reference and the comparison",
            registry=registry,
        ),
    }


def _vocabulary(reference: ReferenceLogitsProcessor, tokenizer: Any, name: str) -> Vocabulary:
    v = reference.vocabulary
    if isinstance(v, Vocabulary):
        return v
    style = getattr(v, "style", "byte-level")
    return Vocabulary(
        tuple(v.token_bytes),
        frozenset(v.eos_ids),
        frozenset(v.special_ids),
        "byte-level-bpe" if style == "byte-level" else "sentencepiece-bpe",
        name=name,
        codec=_TokenizerCodec(tokenizer) if callable(getattr(tokenizer, "encode", None)) else None,
    )


def _tokenizer_name(tokenizer: Any) -> str:
    return str(
        getattr(tokenizer, "name_or_path", "") or getattr(tokenizer, "name", "") or type(tokenizer).__name__
    )


class ShadowLogitsProcessor(_Base):
    """Runs ``engine_processor`` (any ``(input_ids, scores) -> scores`` callable, a transformers
    ``LogitsProcessor`` among them) and checks the masks it applies against the reference's for
    ``spec`` on ``tokenizer`` (a transformers tokenizer or a ``tokenizers_matrix.Vocabulary``); see the
    module docstring. ``registry``: a ``prometheus_client.CollectorRegistry`` for the metrics (None: a
    new one). ``eos_token_id`` as :class:`~refdecoder.hf.ReferenceLogitsProcessor`'s."""

    def __init__(
        self,
        engine_processor: EngineProcessor,
        spec: Spec,
        tokenizer: Any,
        *,
        sample_rate: float = 1.0,
        seed: int = 0,
        registry: Any = None,
        backend: str = "engine",
        backend_version: str = "",
        tokenizer_name: str = "",
        eos_token_id: int | Iterable[int] | None = None,
    ) -> None:
        self.options = ShadowOptions(sample_rate, seed, backend, backend_version, tokenizer_name)
        if not callable(engine_processor):
            raise ShadowError(
                "ShadowLogitsProcessor engine_processor",
                "a callable (input_ids, scores) -> scores, such as a transformers LogitsProcessor",
                type(engine_processor).__name__,
            )
        try:
            spec_ref = SpecRef.of(spec)
        except MaskcertError as e:
            raise ShadowError(
                "ShadowLogitsProcessor spec",
                "a refdecoder JsonSchema, Regex, Gbnf, Choice, Lark or StructuralTag (findings name it)",
                type(spec).__name__,
            ) from e
        self._metrics = _metrics(registry)  # first: a missing prometheus_client fails before any work
        self.engine = engine_processor
        self.spec = spec
        self.reference = ReferenceLogitsProcessor(spec, tokenizer, eos_token_id=eos_token_id)
        name = self.options.tokenizer_name or _tokenizer_name(tokenizer)
        self.vocab = _vocabulary(self.reference, tokenizer, name)
        profile = spec.profile if isinstance(spec, JsonSchema) else JsonProfile()
        self.target = Target(
            backend=cast(Backend, _Engine(self.options.backend, self.options.backend_version)),
            spec=spec_ref,
            vocab=self.vocab,
            reference=self.reference.token_grammar,
            compiled=Compiled(None),
            profile=DeclaredProfile(json=profile),
        )
        self.vocab_size = len(self.vocab)
        self._eos = np.array(sorted(self.vocab.eos_ids), dtype=np.int64)
        self._rng = random.Random(self.options.seed)
        self.findings: list[Finding] = []
        self._recorded: set[tuple[tuple[int, ...], str]] = set()  # (row prefix, invariant or "completeness")
        self._pending: dict[tuple[int, ...], int] = {}  # prefix + unsound token -> index in findings
        self._checks = 0  # checked live rows
        self._engine_ms: list[float] = []
        self._check_ms: list[float] = []
        self._started = time.perf_counter()

    # -- the processor -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the current generation (findings and metrics stay)."""
        self.reference.reset()

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self._check_input(input_ids, scores)
        known = ~(torch.isinf(scores) & (scores < 0)) & ~torch.isnan(scores)  # before the engine runs:
        t0 = time.perf_counter()  # it may mask ``scores`` in place
        out = self.engine(input_ids, scores)
        self._engine_ms.append((time.perf_counter() - t0) * 1000)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(scores.shape):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ShadowError(
                f"the output of {type(self.engine).__name__}",
                f"a tensor of shape {tuple(scores.shape)}",
                str(shape),
            )
        masked = (torch.isinf(out) & (out < 0)) | torch.isnan(out)
        self._observe(input_ids, known, masked)
        return out

    def _check_input(self, input_ids: Any, scores: Any) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            shape = (
                tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
            )
            raise ShadowError("input_ids", "an integer tensor [rows, length]", f"got {shape}")
        if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.shape[0] != input_ids.shape[0]:
            shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
            raise ShadowError(
                "scores",
                f"a float tensor [{input_ids.shape[0]}, vocabulary] like input_ids' rows",
                f"got {shape}",
            )
        if scores.shape[1] < self.vocab_size:
            raise ShadowError(
                "scores",
                f"at least {self.vocab_size} columns (the tokenizer's vocabulary)",
                f"got {scores.shape[1]}",
            )

    def _observe(self, input_ids: torch.Tensor, known: torch.Tensor, masked: torch.Tensor) -> None:
        m = self._metrics
        rows = self.reference.rows_for(input_ids)  # every step: the reference follows each row
        keys = [row.ids for row in rows]
        v = self.vocab_size
        hit = (masked[:, :v] & known[:, :v]).sum(dim=1).tolist()
        for n in hit:
            m["hit_rate"].observe(n / v)
        engine_allows = (~masked).numpy()
        if self._pending:
            self._complete_pending(keys, engine_allows)
        if self._rng.random() >= self.options.sample_rate:
            m["skipped"].inc()
            return
        t0 = time.perf_counter()
        bits = self.reference.bitmask(rows)
        known_np = known.numpy()
        seen: set[tuple[int, ...]] = set()
        for r, row in enumerate(rows):
            key = keys[r]
            if row.status != "live" or key in seen:
                continue
            seen.add(key)
            self._checks += 1
            self._compare(key, row.matcher, mask_bits(bits[r], v), engine_allows[r], known_np[r])
        elapsed = time.perf_counter() - t0
        self._check_ms.append(elapsed * 1000)
        m["seconds"].observe(elapsed)
        m["checked"].inc()

    # -- comparing one row -----------------------------------------------------------------------------

    def _compare(
        self,
        key: tuple[int, ...],
        ref: Any,
        ref_allows: np.ndarray,
        engine_allows: np.ndarray,
        known: np.ndarray,
    ) -> None:
        v = self.vocab_size
        eos = self._eos
        eng = engine_allows[:v].copy()
        if bool(known[eos].any()):
            ref_eos, eng_eos = bool(ref_allows[eos].any()), bool(eng[eos].any())
            if ref_eos != eng_eos:
                self._disagree(key, Invariant.EOS, lambda: self._eos_finding(key, eng_eos))
        ref_text = ref_allows.copy()
        ref_text[eos] = False
        eng[eos] = False
        extra = np.flatnonzero(eng & ~ref_text).tolist() + (np.flatnonzero(engine_allows[v:]) + v).tolist()
        if extra:
            self._disagree(key, Invariant.SOUNDNESS, lambda: self._soundness(key, extra))
        missing = np.flatnonzero(ref_text & ~eng & known[:v]).tolist()
        if missing:
            self._disagree(key, "completeness", lambda: self._completeness(key, ref, missing))

    def _disagree(
        self, key: tuple[int, ...], kind: Invariant | str, build: Callable[[], Finding | None]
    ) -> None:
        label = "completeness" if kind == "completeness" else str(kind)
        self._metrics["disagreements"].labels(invariant=label).inc()
        if (key, label) in self._recorded:
            return
        self._recorded.add((key, label))
        finding = build()
        if finding is None:
            return
        self.findings.append(finding)
        self._metrics["findings"].labels(invariant=str(finding.invariant)).inc()
        if finding.invariant is Invariant.SOUNDNESS and finding.token_id is not None:
            self._pending[key + (finding.token_id,)] = len(self.findings) - 1

    def _token_bytes(self, token_id: int) -> bytes | None:
        return self.target.token_bytes(token_id) if token_id < self.vocab_size else None

    def _soundness(self, key: tuple[int, ...], extra: list[int]) -> Finding:
        t = self.target
        token = min(extra, key=lambda i: (i >= self.vocab_size, i))
        tb = self._token_bytes(token)
        what = (
            f"padding column {token} (the vocabulary has {self.vocab_size} ids)"
            if token >= self.vocab_size
            else f"token {token} {t.show(tb)}"
        )
        cert: dict[str, Any] = {
            "prefix": self.vocab.decode(key),
            "token": tb,
            "also_allowed": len(extra) - 1,
            "also_allowed_ids": [i for i in extra if i != token][:_SHOWN_IDS],
        }
        return t.finding(
            Invariant.SOUNDNESS,
            key,
            token_id=token,
            token_bytes=tb,
            backend_verdict="allowed",
            reference_verdict="masked: no string of the language continues this prefix with this token",
            reference_allows=False,
            message=f"allows {what} after {len(key)} tokens, but no valid output continues that way "
            "(seen in model.generate)",
            certificate=cert,
            walk="shadow",
        )

    def _complete_pending(self, keys: list[tuple[int, ...]], engine_allows: np.ndarray) -> None:
        """A generated row that went through an unsound token and that the engine now lets end: its
        output is the soundness finding's ``completion``, judged by the independent validator."""
        t = self.target
        for r, key in enumerate(keys):
            if not bool(engine_allows[r][self._eos].any()):
                continue
            for start, index in list(self._pending.items()):
                if key[: len(start)] != start:
                    continue
                ids = [i for i in key if i not in self.vocab.eos_ids]
                output = self.vocab.decode(ids)
                error = t.validate(output)
                del self._pending[start]
                if error is None or error == UNDECIDED:
                    if error is None:
                        t.self_check.append(
                            f"the reference masks the token ending {t.show(self.vocab.decode(start))}, but "
                            f"{t.validator_name()} accepts the engine's output {t.show(output)}"
                        )
                    continue
                f = self.findings[index]
                cert = {
                    **f.certificate,
                    "completion": output,
                    "completion_ids": ids,
                    "validator_error": error,
                    "validated_by": t.validator_name(),
                }
                self.findings[index] = f.with_(
                    certificate=cert,
                    message=f.message + " (the engine then let the output end, and the validator rejects it)",
                )

    def _witness(self, ref: Any, token: int) -> tuple[bytes, list[int] | None] | None:
        """(witness, witness ids) through ``token`` from the reference, validated independently."""
        fork = ref.fork()
        fork.accept(token)
        if fork.state is TERMINATED:
            return None
        rest = shortest_completion(self.reference.token_grammar.grammar, fork.state)
        if rest is None:
            return None
        full = self.vocab.decode(fork.accepted_ids()) + rest
        error = self.target.validate(full)
        if error == UNDECIDED:
            return None
        if error is not None:
            t = self.target
            t.self_check.append(
                f"the reference's witness {t.show(full)} is rejected by {t.validator_name()}: {error}"
            )
            return None
        rest_ids = self.vocab.index.fewest_tokens(rest) if rest else []
        return full, None if rest_ids is None else [*fork.accepted_ids(), *rest_ids]

    def _completeness(self, key: tuple[int, ...], ref: Any, missing: list[int]) -> Finding | None:
        t = self.target
        order = sorted(missing, key=lambda i: (len(self.vocab.token_bytes[i] or b""), i))
        for token in order[:_WITNESS_TRIES]:
            w = self._witness(ref, token)
            if w is None:
                continue
            full, witness_ids = w
            tb = self._token_bytes(token)
            assert tb is not None
            canon = self.vocab.canonical_ids(full)
            if splits_character(tb):
                invariant, level = Invariant.UTF8, "a token that splits a UTF-8 character"
            elif canon is not None and tuple(canon[: len(key) + 1]) == (*key, token):
                invariant, level = (
                    Invariant.COMPLETENESS_CANONICAL,
                    "the tokenizer's own encoding of the witness",
                )
            else:
                invariant, level = Invariant.COMPLETENESS_TOKEN, "this segmentation of the witness"
            cert: dict[str, Any] = {
                "witness": full,
                "witness_ids": witness_ids,
                "canonical_ids": list(canon) if canon is not None else None,
                "validated_by": t.validator_name(),
                "also_masked": len(missing) - 1,
                "also_masked_ids": [i for i in missing if i != token][:_SHOWN_IDS],
            }
            return t.finding(
                invariant,
                key,
                token_id=token,
                token_bytes=tb,
                backend_verdict="masked",
                reference_verdict=f"allowed: {t.show(full)} is valid and continues with this token",
                reference_allows=True,
                message=f"masks token {token} {t.show(tb)} after {len(key)} tokens though a valid string "
                f"goes through it ({level}; seen in model.generate)",
                certificate=cert,
                walk="shadow",
            )
        return None

    def _eos_finding(self, key: tuple[int, ...], engine_eos: bool) -> Finding:
        t = self.target
        data = self.vocab.decode(key)
        error = t.validate(data)
        cert: dict[str, Any] = {"output": data, "validated_by": t.validator_name(), "validator_error": error}
        if engine_eos:
            verdict, ref = "EOS offered", "EOS masked: the prefix is not in the language"
            msg = f"offers EOS after {t.show(data)}, which is not a complete valid output"
        else:
            verdict, ref = "EOS masked", "EOS allowed: the prefix is a complete valid output"
            msg = f"does not offer EOS after {t.show(data)}, a complete valid output"
        return t.finding(
            Invariant.EOS,
            key,
            token_id=int(self._eos[0]),
            token_bytes=None,
            backend_verdict=verdict,
            reference_verdict=ref,
            reference_allows=not engine_eos,
            message=msg + " (seen in model.generate)",
            certificate=cert,
            walk="shadow",
        )

    # -- reading out -----------------------------------------------------------------------------------

    def counters(self) -> dict[str, Any]:
        """A snapshot of the metrics as plain values: ``steps_checked``, ``steps_skipped``,
        ``disagreements`` and ``findings`` (invariant -> int), ``mask_hit_rate`` (``count``, ``sum``,
        ``mean``), ``check_seconds`` (total)."""
        reg = self._metrics["registry"]

        def value(name: str, labels: dict[str, str] | None = None) -> float:
            got = reg.get_sample_value(name, labels or {})
            return 0.0 if got is None else float(got)

        def by_label(name: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for metric in reg.collect():
                for s in metric.samples:
                    if s.name == name and s.value:
                        out[s.labels["invariant"]] = int(s.value)
            return dict(sorted(out.items()))

        count = value("maskcert_shadow_mask_hit_rate_count")
        total = value("maskcert_shadow_mask_hit_rate_sum")
        return {
            "steps_checked": int(value("maskcert_shadow_steps_checked_total")),
            "steps_skipped": int(value("maskcert_shadow_steps_skipped_total")),
            "disagreements": by_label("maskcert_shadow_disagreements_total"),
            "findings": by_label("maskcert_shadow_findings_total"),
            "mask_hit_rate": {"count": int(count), "sum": total, "mean": total / count if count else 0.0},
            "check_seconds": value("maskcert_shadow_check_seconds_sum"),
        }

    def exposition(self) -> str:
        """The metrics in the Prometheus text format (``prometheus_client.generate_latest``)."""
        import prometheus_client as prom

        return prom.generate_latest(self._metrics["registry"]).decode("utf-8")

    def report(self) -> Report:
        """The findings as a certification :class:`~maskcert.certification.Report` (one spec, one
        tokenizer; ``timings``: the engine's calls as ``backend_mask_ms``, checked steps as
        ``reference_mask_ms``)."""
        from props.output.report import histogram

        t = self.target
        opts = self.options
        findings = dedupe(list(self.findings))
        tok = self.vocab.name
        per: Counter[str] = Counter(str(f.invariant) for f in findings)
        counts = {str(inv): {tok: Cell(self._checks, per[str(inv)])} for inv in _CHECKED}
        defects = group(findings, reference_grammars())
        profile = t.profile.json.as_dict()
        return Report(
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            backend=BackendInfo(
                name=opts.backend,
                version=opts.backend_version,
                profile={
                    "json": profile,
                    "canonical_tokenization_only": False,
                    "jump_forward_prefix_ok": False,
                    "notes": [
                        "shadow-checked inside model.generate (maskcert.shadow): the engine's logits "
                        f"processor's masks compared with the reference's on a {opts.sample_rate:g} "
                        "fraction of steps"
                    ],
                },
                declared_restrictions=(),
            ),
            tokenizers=(
                TokenizerInfo(
                    tok, self.vocab.kind, self.vocab_size, self.vocab.fingerprint, tuple(self._eos.tolist())
                ),
            ),
            corpus=({"name": "shadow", "specs": 1},),
            budget_s=None,
            seed=opts.seed,
            elapsed_s=round(time.perf_counter() - self._started, 3),
            complete=True,
            specs=SpecCounts(1, 1, 0, 0, 0, 0, 0),
            counts=counts,
            defect_counts=dict(Counter(str(d.severity) for d in defects)),
            findings=tuple(findings),
            refusals=(),
            declared_differences={},
            suppressed_observations={},
            self_check=tuple(sorted(set(t.self_check))),
            timings={
                tok: {
                    "backend_mask_ms": histogram(self._engine_ms),
                    "reference_mask_ms": histogram(self._check_ms),
                    "backend_compile_ms": histogram([]),
                }
            },
            instances={},
            internal_errors=(),
            defects=tuple(defects),
            vocabularies={self.vocab.fingerprint: self.vocab},
        )

    def write_report(self, out_dir: str | Path) -> dict[str, Path]:
        """report.json, report.md and report.html under ``out_dir``, written by
        :func:`props.output.report.write_report` as ``maskcert certify`` writes them (no reproducers:
        the engine ran inside ``generate``)."""
        from props.output.report import write_report

        return write_report(self.report().to_json(), Path(out_dir))


def xgrammar_processor(schema: Any, tokenizer: Any, vocab_size: int, *, any_whitespace: bool = True) -> Any:
    """xgrammar's transformers processor (``xgrammar.contrib.hf.LogitsProcessor``) for a JSON Schema,
    set up as xgrammar documents it: ``TokenizerInfo.from_huggingface(tokenizer, vocab_size=...)``
    (``vocab_size``: the model's logits width, ``config.vocab_size``), a ``GrammarCompiler`` and
    ``compile_json_schema``. Shadow it with the spec under xgrammar's declared profile
    (``props.backends.xgrammar.declared_profile``). :class:`ShadowUnavailable` without xgrammar."""
    try:
        import xgrammar as xgr
        from xgrammar.contrib import hf as xgr_hf
    except ImportError as e:
        raise ShadowUnavailable("xgrammar", "pip install xgrammar (or 'maskcert[backends]')") from e
    import json

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    compiler = xgr.GrammarCompiler(info)
    text = schema if isinstance(schema, str) else json.dumps(schema)
    compiled = compiler.compile_json_schema(text, any_whitespace=any_whitespace)
    return xgr_hf.LogitsProcessor(compiled)
