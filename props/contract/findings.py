"""Findings: what certification and fuzzing report, as frozen values with a stable JSON form.

A :class:`Finding` is one proved difference between a backend and the reference (docs/design.md §4, §6):
which invariant, how severe, on which spec and vocabulary, at which step (the token ids accepted
before it), the token, both verdicts, and a certificate — the evidence a reader can check without
trusting maskcert (a valid string the backend blocks, an invalid output it lets finish, ...).

``Finding.to_json()`` / ``Finding.from_json()`` are the ``findings[]`` entries of ``report.json`` and
the lines of ``findings.jsonl``; bytes travel as ``{"hex": ..., "text": ...}`` so that any byte string
round-trips and a reader still sees the text. :data:`REPORT_SCHEMA_VERSION` changes when a field does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, TypeVar

from refdecoder import (
    Choice,
    Gbnf,
    JsonProfile,
    JsonSchema,
    Lark,
    Regex,
    Spec,
    SpecError,
    StructuralTag,
    render_text,
)
from refdecoder.errors import MaskcertError

_W = TypeVar("_W", bound="_Word")

__all__ = [
    "Invariant",
    "Severity",
    "SpecKind",
    "SPECIAL_TOKEN_KINDS",
    "TOKEN_INVARIANTS",
    "SERVING_INVARIANTS",
    "SIMULATION_INVARIANTS",
    "SIMULATION_FINDING",
    "INVARIANTS",
    "SEVERITY",
    "SEVERITY_RANK",
    "FAILING",
    "REPORT_SCHEMA_VERSION",
    "SpecRef",
    "Finding",
    "FindingError",
    "bytes_json",
    "bytes_from_json",
    "dedupe",
    "FindingFailure",
]

REPORT_SCHEMA_VERSION = 1


class _Word(str, Enum):
    """A closed set of words that is also a ``str`` (JSON, comparisons and f-strings see the word)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    # Enum hashes the member's name; a str key must find the member. The member *is* its value as a
    # str, so str's own hash is the value's (and Counters keyed by invariants hash on every check).
    __hash__ = str.__hash__


class Invariant(_Word):
    """docs/design.md §4's invariants, in report order (``docs/invariants.md`` says what each checks)."""

    SOUNDNESS = "soundness"
    EOS = "eos"
    CRASH = "crash"
    COMPLETENESS_CANONICAL = "completeness_canonical"
    COMPLETENESS_TOKEN = "completeness_token"
    COMPLETENESS_BYTE = "completeness_byte"
    LIVENESS = "liveness"
    UTF8 = "utf8"
    FORK = "fork"
    ROLLBACK = "rollback"
    SPECULATIVE = "speculative"
    JUMP_FORWARD = "jump_forward"
    DETERMINISM = "determinism"
    REFUSAL = "refusal"
    LIMITS = "limits"


class Severity(_Word):
    """How bad a finding is, most severe first (:data:`SEVERITY_RANK`)."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    SERVING = "serving"
    LOW = "low"


class SpecKind(_Word):
    """What a :class:`SpecRef`'s ``source`` is."""

    JSON_SCHEMA = "json_schema"
    REGEX = "regex"
    GBNF = "gbnf"
    CHOICE = "choice"
    LARK = "lark"
    STRUCTURAL_TAG = "structural_tag"


#: The kinds whose specs may name special tokens (their sources carry a ``special_tokens`` table).
SPECIAL_TOKEN_KINDS: frozenset[SpecKind] = frozenset({SpecKind.LARK, SpecKind.STRUCTURAL_TAG})


INVARIANTS: tuple[Invariant, ...] = tuple(Invariant)
# Severity: soundness > eos > completeness > serving > refusal hygiene; a crash is as bad as
# unsoundness (the output is lost), a blown limit is hygiene.
SEVERITY: dict[Invariant, Severity] = {
    Invariant.SOUNDNESS: Severity.CRITICAL,
    Invariant.CRASH: Severity.CRITICAL,
    Invariant.EOS: Severity.HIGH,
    Invariant.COMPLETENESS_CANONICAL: Severity.MEDIUM,
    Invariant.COMPLETENESS_TOKEN: Severity.MEDIUM,
    Invariant.COMPLETENESS_BYTE: Severity.MEDIUM,
    Invariant.LIVENESS: Severity.MEDIUM,
    Invariant.UTF8: Severity.MEDIUM,
    Invariant.FORK: Severity.SERVING,
    Invariant.ROLLBACK: Severity.SERVING,
    Invariant.SPECULATIVE: Severity.SERVING,
    Invariant.JUMP_FORWARD: Severity.SERVING,
    Invariant.DETERMINISM: Severity.SERVING,
    Invariant.REFUSAL: Severity.LOW,
    Invariant.LIMITS: Severity.LOW,
}
SEVERITY_RANK: dict[Severity, int] = {sev: i for i, sev in enumerate(Severity)}
# The invariants whose findings make ``maskcert certify`` exit 1.
FAILING: frozenset[Invariant] = frozenset({Invariant.SOUNDNESS, Invariant.EOS, Invariant.CRASH})
# Invariants about one token (or EOS) at one step, and those about serving operations.
TOKEN_INVARIANTS: frozenset[Invariant] = frozenset(
    {
        Invariant.SOUNDNESS,
        Invariant.EOS,
        Invariant.COMPLETENESS_CANONICAL,
        Invariant.COMPLETENESS_TOKEN,
        Invariant.COMPLETENESS_BYTE,
        Invariant.LIVENESS,
        Invariant.UTF8,
    }
)
SERVING_INVARIANTS: frozenset[Invariant] = frozenset(
    {
        Invariant.FORK,
        Invariant.ROLLBACK,
        Invariant.SPECULATIVE,
        Invariant.JUMP_FORWARD,
        Invariant.DETERMINISM,
    }
)

# The serving simulation's invariants (docs/design.md §5): the names ``serving_sim``'s replay checker
# reports a violation under, and what each one checks. A name that is also an :class:`Invariant` is that
# invariant on a serving loop; a ``backend:`` name is a third-party backend's own difference from the
# reference seen while serving (a conformance finding of the backend, not a serving bug).
SIMULATION_INVARIANTS: dict[str, str] = {
    "soundness": "every token taken and every mask bit is allowed by the reference; stop outputs are valid",
    "completeness": "masks allow every token the reference allows",
    "eos": "EOS is allowed exactly in accepting states",
    "fork": "forks and beam reorders carry each sequence's own matcher",
    "resume": "a resumed sequence's matcher is where its generated tokens put it",
    "speculative": "verify checks drafts against the grammar, in order, with the grammar's verdicts",
    "rollback": "after a speculative rejection the matcher is where a one-by-one walk would be",
    "finish_reason": "stop/length/constraint_violation/cancelled are reported exactly when they happened",
    "utf8": "outputs are valid UTF-8 and stream deltas never split a character",
    "kv": "KV handles hold exactly each sequence's tokens",
    "isolation": "the compile cache never serves a grammar compiled for another vocabulary",
    "backend_error": "no output finishes with a backend error",
    "jump_forward": "jump-forward appends only tokens spelling bytes the grammar forces: text streamed once certain",
    "budget": (
        "a finish_within_max_tokens request keeps only tokens that can still end in time, never finishes "
        "length, and is admitted exactly when its spec's shortest output fits"
    ),
    "backend:soundness": "(third-party backends) the backend's own replay allows nothing the reference forbids",
    "backend:completeness": "(third-party backends) the backend's own replay allows all the reference allows",
    "backend:eos": "(third-party backends) the backend offers EOS exactly where the reference does",
}
# The invariant of the Finding a simulation violation becomes (``maskcert fuzz --target serving``).
SIMULATION_FINDING: dict[str, Invariant] = {
    "soundness": Invariant.SOUNDNESS,
    "completeness": Invariant.COMPLETENESS_TOKEN,
    "eos": Invariant.EOS,
    "fork": Invariant.FORK,
    "resume": Invariant.ROLLBACK,
    "speculative": Invariant.SPECULATIVE,
    "rollback": Invariant.ROLLBACK,
    "finish_reason": Invariant.DETERMINISM,
    "utf8": Invariant.UTF8,
    "kv": Invariant.FORK,
    "isolation": Invariant.DETERMINISM,
    "backend_error": Invariant.CRASH,
    "jump_forward": Invariant.JUMP_FORWARD,
    "budget": Invariant.LIVENESS,
    "backend:soundness": Invariant.SOUNDNESS,
    "backend:completeness": Invariant.COMPLETENESS_TOKEN,
    "backend:eos": Invariant.EOS,
}


def _word(cls: type[_W], value: Any, what: str) -> _W:
    try:
        return cls(value)
    except ValueError:
        raise FindingError(what, f"one of {', '.join(m.value for m in cls)}, not {value!r}") from None


class FindingError(MaskcertError, ValueError):
    """A finding (or a findings file) that does not have the documented form."""

    def __init__(self, what: str, expected: str) -> None:
        self.what = what
        self.expected = expected
        super().__init__(f"bad finding {what}: expected {expected}")


def bytes_json(data: bytes | None, names: Mapping[int, str] | None = None) -> dict[str, str] | None:
    """``{"hex": ..., "text": ...}``: exact bytes plus a readable (lossy) text. With ``names`` (the
    bytes of a spec that names special tokens), the text shows each special token's encoding by name
    (``<|tool_call|>``) or as ``<[id]>`` (``refdecoder.render_text``)."""
    if data is None:
        return None
    if names is not None and 0xFF in data:
        return {"hex": data.hex(), "text": render_text(data, names)}
    return {"hex": data.hex(), "text": data.decode("utf-8", "backslashreplace")}


def bytes_from_json(value: Any, what: str = "bytes") -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("hex"), str):
        raise FindingError(what, '{"hex": "...", "text": "..."} or null')
    try:
        return bytes.fromhex(value["hex"])
    except ValueError as e:
        raise FindingError(what, f"hex digits ({e})") from e


@dataclass(frozen=True)
class SpecRef:
    """How to rebuild a spec: ``kind`` is ``json_schema`` | ``regex`` | ``gbnf`` | ``choice`` |
    ``lark`` | ``structural_tag``; ``source`` the schema (a JSON value), the pattern, the grammar text,
    the list of choices, ``{"text": ..., "special_tokens": {name: id}}`` (Lark) or ``{"tag": ...,
    "special_tokens": {name: id}}`` (a structural tag); ``name`` its id in ``corpus``; ``profile`` the
    reference's ``JsonProfile`` as a dict (JSON only)."""

    kind: SpecKind
    source: Any
    name: str = ""
    corpus: str = ""
    profile: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _word(SpecKind, self.kind, "spec.kind"))

    @property
    def digest(self) -> str:
        text = json.dumps([self.kind.value, self.source], sort_keys=True, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "source": self.source,
            "name": self.name,
            "corpus": self.corpus,
            "profile": self.profile,
            "digest": self.digest,
        }

    @classmethod
    def of(cls, spec: Spec, name: str = "", corpus: str = "") -> SpecRef:
        """How to rebuild the refdecoder ``spec`` (a JSON Schema keeps its profile, a GBNF grammar
        with another root than ``root`` becomes ``{"text", "root"}``)."""
        if isinstance(spec, JsonSchema):
            return cls(SpecKind.JSON_SCHEMA, spec.schema, name, corpus, spec.profile.as_dict())
        if isinstance(spec, Regex):
            return cls(SpecKind.REGEX, spec.pattern, name, corpus)
        if isinstance(spec, Gbnf):
            source: Any = spec.text
            if spec.root != "root" or spec.dialect != "llama.cpp":
                source = {"text": spec.text, "root": spec.root}
                if spec.dialect != "llama.cpp":
                    source["dialect"] = spec.dialect
            return cls(SpecKind.GBNF, source, name, corpus)
        if isinstance(spec, Choice):
            return cls(SpecKind.CHOICE, list(spec.options), name, corpus)
        if isinstance(spec, Lark):
            lark: dict[str, Any] = {"text": spec.text, "special_tokens": dict(spec.special_tokens)}
            if spec.dialect != "llguidance":
                lark["dialect"] = spec.dialect
            return cls(SpecKind.LARK, lark, name, corpus)
        if isinstance(spec, StructuralTag):
            tag = {"tag": spec.tag, "special_tokens": dict(spec.special_tokens)}
            return cls(SpecKind.STRUCTURAL_TAG, tag, name, corpus)
        raise FindingError(
            "spec",
            f"a refdecoder JsonSchema, Regex, Gbnf, Choice, Lark or StructuralTag, not {type(spec).__name__}",
        )

    def to_spec(self, profile: JsonProfile | None = None) -> Spec:
        """The refdecoder spec this names; a JSON Schema under ``profile`` (default: the recorded
        ``profile``, else the default ``JsonProfile``)."""
        src: Any = self.source
        if self.kind is SpecKind.JSON_SCHEMA:
            if profile is None:
                try:
                    profile = JsonProfile(**(self.profile or {}))
                except TypeError as e:
                    raise FindingError(
                        f"spec {self.name or self.digest} profile", f"the fields of JsonProfile ({e})"
                    ) from e
            return JsonSchema(src, profile)
        if self.kind is SpecKind.REGEX:
            return Regex(src)
        if self.kind is SpecKind.GBNF:
            if isinstance(src, dict):
                return Gbnf(src.get("text", ""), src.get("root", "root"), src.get("dialect", "llama.cpp"))
            return Gbnf(src)
        if self.kind is SpecKind.LARK:
            src = self._special_source("text")
            try:
                return Lark(src["text"], src.get("special_tokens", {}), src.get("dialect", "llguidance"))
            except SpecError as e:
                raise FindingError(f"spec {self.name or self.digest} source", str(e)) from e
        if self.kind is SpecKind.STRUCTURAL_TAG:
            src = self._special_source("tag")
            try:
                return StructuralTag(src["tag"], src.get("special_tokens", {}))
            except SpecError as e:
                raise FindingError(f"spec {self.name or self.digest} source", str(e)) from e
        return Choice(tuple(src))

    def _special_source(self, key: str) -> dict[str, Any]:
        src = self.source
        if not isinstance(src, dict) or key not in src:
            raise FindingError(
                f"spec {self.name or self.digest} source",
                f'an object {{"{key}": ..., "special_tokens": {{name: id}}}} for a {self.kind.value} spec',
            )
        return src

    def naming_special_tokens(self, names: Iterable[tuple[int, str]]) -> SpecRef:
        """This spec with its special-token table filled in from a vocabulary's ``(id, name)`` pairs,
        when it names special tokens and its table is empty (a grammar or tag written against names,
        as ``maskcert certify --lark/--structural-tag`` reads them): each name the spec's text contains
        (``<|tool_call|>`` in a Lark grammar, ``"token": "<|tool_call|>"`` in a tag). Otherwise ``self``."""
        if self.kind not in SPECIAL_TOKEN_KINDS or not isinstance(self.source, dict) or self.special_names:
            return self
        body = self.source.get("text") if self.kind is SpecKind.LARK else self.source.get("tag")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        table = {name: int(token_id) for token_id, name in names if name and name in text}
        if not table:
            return self
        return replace(self, source={**self.source, "special_tokens": dict(sorted(table.items()))})

    @property
    def special_names(self) -> dict[int, str]:
        """The names of the special tokens the spec names (id -> ``<|name|>``); empty for kinds that
        name none. What reports render special-token encodings with (``refdecoder.render_text``)."""
        if self.kind not in SPECIAL_TOKEN_KINDS or not isinstance(self.source, dict):
            return {}
        table = self.source.get("special_tokens") or {}
        if not isinstance(table, dict):
            return {}
        return {int(i): str(n) for n, i in table.items() if isinstance(i, int) and not isinstance(i, bool)}

    @classmethod
    def from_json(cls, d: Any) -> SpecRef:
        if not isinstance(d, dict) or "kind" not in d or "source" not in d:
            raise FindingError("spec", 'an object with "kind" and "source"')
        return cls(d["kind"], d["source"], d.get("name", ""), d.get("corpus", ""), d.get("profile"))


@dataclass(frozen=True)
class Finding:
    """One proved defect. ``prefix_ids`` are the tokens accepted before ``step`` (``step ==
    len(prefix_ids)``); ``token_id`` is the token in question (``None`` for findings not about one
    token: crash, limits, refusal, determinism of a whole walk). ``backend_verdict`` and
    ``reference_verdict`` are short words ("allowed", "masked", "accepted", "rejected", "eos offered",
    ...); ``message`` one sentence; ``certificate`` the evidence (keys documented in
    ``docs``/report.md: ``witness`` + ``witness_ids`` + ``validated_by`` for completeness,
    ``completion`` + ``validator_error`` for soundness, ``operations`` for serving invariants);
    ``occurrences`` how many raw observations this deduplicated finding stands for."""

    invariant: Invariant
    backend: str
    backend_version: str
    spec: SpecRef
    tokenizer: str
    tokenizer_fingerprint: str
    prefix_ids: tuple[int, ...] = ()
    token_id: int | None = None
    token_bytes: bytes | None = None
    backend_verdict: str = ""
    reference_verdict: str = ""
    message: str = ""
    certificate: dict[str, Any] = field(default_factory=dict)
    prefix_bytes: bytes = b""
    walk: str = ""  # which walk found it: "canonical", "random", "utf8-split", "adversarial", "stateful", ...
    occurrences: int = 1
    repro: str = ""  # path of the reproducer script, relative to the report directory
    # For a finding about one token (or EOS) at one step: whether the reference allows it (what a
    # reproducer compares the backend's mask with). None for findings not about one token's verdict.
    reference_allows: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "invariant", _word(Invariant, self.invariant, "invariant"))
        object.__setattr__(self, "prefix_ids", tuple(int(i) for i in self.prefix_ids))

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.invariant]

    @property
    def step(self) -> int:
        return len(self.prefix_ids)

    @property
    def failing(self) -> bool:
        return self.invariant in FAILING

    @property
    def key(self) -> tuple[Any, ...]:
        """Deduplication key: the same token judged the same way on the same spec and vocabulary is
        one defect, whatever step and walk showed it."""
        return (
            self.invariant.value,  # the plain word: ``id`` hashes this tuple's repr
            self.backend,
            self.spec.digest,
            self.tokenizer_fingerprint,
            self.token_bytes if self.token_id is not None else None,
            self.backend_verdict,
            self.reference_verdict if self.token_id is not None else self.message,
        )

    @property
    def id(self) -> str:
        """A short stable id (file names of reproducers, dedupe across runs)."""
        return hashlib.sha256(repr(self.key).encode()).hexdigest()[:10]

    def with_(self, **changes: Any) -> Finding:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        # the bytes of a spec that names special tokens show them by name in their "text"
        names = self.spec.special_names if self.spec.kind in SPECIAL_TOKEN_KINDS else None
        return {
            "id": self.id,
            "invariant": self.invariant.value,
            "severity": self.severity.value,
            "backend": self.backend,
            "backend_version": self.backend_version,
            "spec": self.spec.to_json(),
            "tokenizer": self.tokenizer,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "step": self.step,
            "prefix_ids": list(self.prefix_ids),
            "prefix_bytes": bytes_json(self.prefix_bytes, names),
            "token_id": self.token_id,
            "token_bytes": bytes_json(self.token_bytes, names),
            "backend_verdict": self.backend_verdict,
            "reference_verdict": self.reference_verdict,
            "message": self.message,
            "certificate": _jsonable(self.certificate, names),
            "walk": self.walk,
            "occurrences": self.occurrences,
            "repro": self.repro,
            "reference_allows": self.reference_allows,
        }

    @classmethod
    def from_json(cls, d: Any) -> Finding:
        if not isinstance(d, dict):
            raise FindingError("entry", "a JSON object")
        try:
            return cls(
                invariant=d["invariant"],
                backend=d["backend"],
                backend_version=d.get("backend_version", ""),
                spec=SpecRef.from_json(d["spec"]),
                tokenizer=d.get("tokenizer", ""),
                tokenizer_fingerprint=d.get("tokenizer_fingerprint", ""),
                prefix_ids=tuple(d.get("prefix_ids", ())),
                token_id=d.get("token_id"),
                token_bytes=bytes_from_json(d.get("token_bytes"), "token_bytes"),
                backend_verdict=d.get("backend_verdict", ""),
                reference_verdict=d.get("reference_verdict", ""),
                message=d.get("message", ""),
                certificate=d.get("certificate", {}) or {},
                prefix_bytes=bytes_from_json(d.get("prefix_bytes"), "prefix_bytes") or b"",
                walk=d.get("walk", ""),
                occurrences=int(d.get("occurrences", 1)),
                repro=d.get("repro", ""),
                reference_allows=d["reference_allows"]
                if "reference_allows" in d
                else _legacy_reference_allows(d),
            )
        except KeyError as e:
            raise FindingError(f"entry (missing {e.args[0]!r})", "the fields of Finding.to_json()") from e


_ALLOW_WORDS = ("allow", "accept", "offer", "permit", "open")
_MASK_WORDS = ("not ", "masked", "reject", "withheld", "block", "refus", "forbid", "disallow", "closed")


def _legacy_reference_allows(d: dict[str, Any]) -> bool | None:
    """``reference_allows`` of a finding written before the field existed (findings files of older
    campaigns), read back from its verdict words as the reproducers of that time did; None when the
    words say neither. New findings carry the field and never come here."""
    if d.get("invariant") not in {i.value for i in TOKEN_INVARIANTS}:
        return None

    def allows(word: Any) -> bool | None:
        w = f" {str(word).strip().lower()} "
        if any(m in w for m in _MASK_WORDS):
            return False
        if any(a in w for a in _ALLOW_WORDS):
            return True
        return None

    ref = allows(d.get("reference_verdict", ""))
    if ref is None:
        backend = allows(d.get("backend_verdict", ""))
        ref = None if backend is None else not backend
    return ref


def _jsonable(value: Any, names: Mapping[int, str] | None = None) -> Any:
    """Certificates may hold bytes and tuples; JSON gets ``bytes_json`` (special tokens by ``names``)
    and lists."""
    if isinstance(value, bytes):
        return bytes_json(value, names)
    to_json = getattr(value, "to_json", None)  # values with a JSON form (props.contract.operations.Op)
    if callable(to_json):
        return _jsonable(to_json(), names)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, names) for v in value]
    return value


def dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per :attr:`Finding.key`: the one with the shortest prefix (the most shrunk),
    ``occurrences`` summed; ordered by severity, then invariant, then spec and step."""
    best: dict[tuple[Any, ...], Finding] = {}
    counts: dict[tuple[Any, ...], int] = {}
    for f in findings:
        k = f.key
        counts[k] = counts.get(k, 0) + f.occurrences
        cur = best.get(k)
        if cur is None or (len(f.prefix_ids), len(f.prefix_bytes)) < (
            len(cur.prefix_ids),
            len(cur.prefix_bytes),
        ):
            best[k] = f
    out = [f.with_(occurrences=counts[k]) for k, f in best.items()]
    order = {name: i for i, name in enumerate(INVARIANTS)}
    out.sort(key=lambda f: (SEVERITY_RANK[f.severity], order[f.invariant], f.spec.name, f.tokenizer, f.step))
    return out


class FindingFailure(AssertionError):
    """Raised inside a Hypothesis property when an invariant fails: it carries the findings, so a
    campaign (``maskcert fuzz``) or ``maskcert.certify`` records them instead of a bare traceback; as an
    ``AssertionError`` it fails a plain pytest run the usual way, and Hypothesis shrinks it."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = list(findings)
        head = self.findings[0] if self.findings else None
        text = f"{head.invariant}: {head.message}" if head else "no findings"
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        super().__init__(text + more)
