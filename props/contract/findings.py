"""Findings: what certification and fuzzing report, as frozen values with a stable JSON form.

A :class:`Finding` is one proved difference between a backend and the reference (DESIGN §4, §6):
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
from dataclasses import dataclass, field, replace
from typing import Any

from refdecoder.errors import MaskcertError

__all__ = [
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

# DESIGN §4, in report order. Severity: soundness > eos > completeness > serving > refusal hygiene;
# a crash is as bad as unsoundness (the output is lost), a blown limit is hygiene.
INVARIANTS: tuple[str, ...] = (
    "soundness",
    "eos",
    "crash",
    "completeness_canonical",
    "completeness_token",
    "completeness_byte",
    "liveness",
    "utf8",
    "fork",
    "rollback",
    "speculative",
    "jump_forward",
    "determinism",
    "refusal",
    "limits",
)
SEVERITY: dict[str, str] = {
    "soundness": "critical",
    "crash": "critical",
    "eos": "high",
    "completeness_canonical": "medium",
    "completeness_token": "medium",
    "completeness_byte": "medium",
    "liveness": "medium",
    "utf8": "medium",
    "fork": "serving",
    "rollback": "serving",
    "speculative": "serving",
    "jump_forward": "serving",
    "determinism": "serving",
    "refusal": "low",
    "limits": "low",
}
SEVERITY_RANK: dict[str, int] = {"critical": 0, "high": 1, "medium": 2, "serving": 3, "low": 4}
# The invariants whose findings make ``maskcert certify`` exit 1 (issue 6).
FAILING: frozenset[str] = frozenset({"soundness", "eos", "crash"})


class FindingError(MaskcertError, ValueError):
    """A finding (or a findings file) that does not have the documented form."""

    def __init__(self, what: str, expected: str) -> None:
        self.what = what
        self.expected = expected
        super().__init__(f"bad finding {what}: expected {expected}")


def bytes_json(data: bytes | None) -> dict[str, str] | None:
    """``{"hex": ..., "text": ...}``: exact bytes plus a readable (lossy) text."""
    if data is None:
        return None
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
    """How to rebuild a spec: ``kind`` is ``json_schema`` | ``regex`` | ``gbnf`` | ``choice``;
    ``source`` the schema (a JSON value), the pattern, the grammar text or the list of choices;
    ``name`` its id in ``corpus``; ``profile`` the reference's ``JsonProfile`` as a dict (JSON only)."""

    kind: str
    source: Any
    name: str = ""
    corpus: str = ""
    profile: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("json_schema", "regex", "gbnf", "choice"):
            raise FindingError("spec.kind", f"json_schema, regex, gbnf or choice, not {self.kind!r}")

    @property
    def digest(self) -> str:
        text = json.dumps([self.kind, self.source], sort_keys=True, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "name": self.name,
            "corpus": self.corpus,
            "profile": self.profile,
            "digest": self.digest,
        }

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

    invariant: str
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

    def __post_init__(self) -> None:
        if self.invariant not in SEVERITY:
            raise FindingError("invariant", f"one of {', '.join(INVARIANTS)}, not {self.invariant!r}")
        object.__setattr__(self, "prefix_ids", tuple(int(i) for i in self.prefix_ids))

    @property
    def severity(self) -> str:
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
            self.invariant,
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
        return {
            "id": self.id,
            "invariant": self.invariant,
            "severity": self.severity,
            "backend": self.backend,
            "backend_version": self.backend_version,
            "spec": self.spec.to_json(),
            "tokenizer": self.tokenizer,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "step": self.step,
            "prefix_ids": list(self.prefix_ids),
            "prefix_bytes": bytes_json(self.prefix_bytes),
            "token_id": self.token_id,
            "token_bytes": bytes_json(self.token_bytes),
            "backend_verdict": self.backend_verdict,
            "reference_verdict": self.reference_verdict,
            "message": self.message,
            "certificate": _jsonable(self.certificate),
            "walk": self.walk,
            "occurrences": self.occurrences,
            "repro": self.repro,
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
            )
        except KeyError as e:
            raise FindingError(f"entry (missing {e.args[0]!r})", "the fields of Finding.to_json()") from e


def _jsonable(value: Any) -> Any:
    """Certificates may hold bytes and tuples; JSON gets ``bytes_json`` and lists."""
    if isinstance(value, bytes):
        return bytes_json(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
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
        if cur is None or (len(f.prefix_ids), len(f.prefix_bytes)) < (len(cur.prefix_ids), len(cur.prefix_bytes)):
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
