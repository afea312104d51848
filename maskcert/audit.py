"""``maskcert audit``: the reference decides the labelled cases of an engine's own test suite.

Theory of operation. Engine test suites label inputs: "this schema accepts this text", "this grammar
rejects that one". A case (:class:`AuditCase`, one JSON Lines record, docs/audit.md §1) carries the
spec, the text and the label the engine's test expects. :func:`decide_case` compiles the spec with
``refdecoder.compile`` and runs the text through ``Grammar.advance``; the label is then a fact to check:

* ``accept`` — the text is in the language;
* ``reject`` — it is not (it may still be a prefix of a sentence);
* ``prefix`` — it is a viable prefix of the language but not a sentence (llguidance's ``FINAL_REJECT:``);
* ``not_prefix`` — no sentence starts with it (llguidance's rejections "in the middle").

A label the language contradicts is reported with what decides it (:func:`deciding_section`): for JSON
Schema the keyword that fails, its schema location and its section in the draft, or the RFC 8259 section
a non-JSON text breaks, or the declared profile field; for a pattern or a grammar the byte where the
reference stops reading and the longest prefix it read, or a completion that shows a "dead" text is
alive. A spec the reference refuses (``Unsupported``, ``LimitExceeded``, a ``SpecError``) leaves the case
``undecided`` with the refusal as its reason: never a guess. Where the independent oracle of
``props.corpus`` (``jsonschema``, ``re``, a second GBNF parser) disagrees with the reference, the
result says so (``oracle``), so a contradiction that is the reference's own mistake cannot pass unseen.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

import refdecoder
from props.contract.findings import SpecKind, SpecRef
from props.corpus import CorpusError, draft_validator, validate_output, validator_draft
from refdecoder import Grammar, JsonProfile, LimitExceeded, SpecError, State, Unsupported
from refdecoder.errors import InputError
from refdecoder.keywords import ANNOTATIONS, enforced

__all__ = [
    "KINDS",
    "AuditCase",
    "AuditCaseError",
    "AuditReport",
    "CaseResult",
    "Label",
    "Status",
    "audit",
    "case_from_json",
    "deciding_section",
    "decide_case",
    "read_cases",
]

#: The spec kinds a case may name, with what ``spec`` holds for each.
KINDS: Mapping[str, str] = {
    "json_schema": "a JSON Schema (an object or a boolean)",
    "regex": "a pattern (a string; Python syntax, full match)",
    "gbnf": 'a llama.cpp GBNF grammar (a string, or {"text", "root"?, "dialect"?})',
    "choice": "a list of strings",
    "lark": "an llguidance Lark grammar (a string)",
}


class Label(str, Enum):
    """What an engine's test expects of the text."""

    ACCEPT = "accept"
    REJECT = "reject"
    PREFIX = "prefix"
    NOT_PREFIX = "not_prefix"


class Status(str, Enum):
    AGREE = "agree"
    CONTRADICTION = "contradiction"
    UNDECIDED = "undecided"


_REQUIRED = ("engine", "source", "kind", "spec", "instance", "expected")
_OPTIONAL = ("profile", "note")


class AuditCaseError(InputError):
    """A line of a cases file that is not a case: ``path`` the file, ``line`` (1-based) the line,
    ``field`` the field at fault (``""`` for the line as a whole)."""

    def __init__(self, path: str, line: int, field: str, expected: str, detail: str = "") -> None:
        self.line = line
        self.field = field
        where = f"{path}:{line}" + (f" field {field!r}" if field else "")
        super().__init__(where, expected, detail)
        self.path = path


@dataclass(frozen=True)
class AuditCase:
    """One labelled case. ``profile`` holds ``JsonProfile`` fields (JSON Schema only; the engine's
    declared language, e.g. its whitespace and property order); ``source`` says where the engine's
    test suite states it (file:line and test name)."""

    engine: str
    source: str
    kind: str
    spec: Any
    instance: str
    expected: Label
    profile: Mapping[str, Any] | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AuditCaseError("<AuditCase>", 0, "kind", f"one of {', '.join(KINDS)}", repr(self.kind))

    def json_profile(self) -> JsonProfile:
        return JsonProfile(**dict(self.profile or {}))

    def to_spec(self, profile: JsonProfile | None = None) -> refdecoder.Spec:
        """The refdecoder spec of this case (a JSON Schema under ``profile``, default its own)."""
        if self.kind == "json_schema":
            return refdecoder.JsonSchema(self.spec, profile or self.json_profile())
        if self.kind == "regex":
            return refdecoder.Regex(self.spec)
        if self.kind == "gbnf":
            if isinstance(self.spec, dict):
                return refdecoder.Gbnf(
                    self.spec["text"], self.spec.get("root", "root"), self.spec.get("dialect", "llama.cpp")
                )
            return refdecoder.Gbnf(self.spec)
        if self.kind == "choice":
            return refdecoder.Choice(self.spec)
        return refdecoder.Lark(self.spec)

    def spec_ref(self) -> SpecRef:
        """The spec as the independent validators of ``props.corpus`` take it (not for ``lark``)."""
        profile = dict(self.profile) if self.profile is not None else None
        return SpecRef(SpecKind(self.kind), self.spec, profile=profile)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "engine": self.engine,
            "source": self.source,
            "kind": self.kind,
            "spec": self.spec,
        }
        if self.profile is not None:
            out["profile"] = dict(self.profile)
        out["instance"] = self.instance
        out["expected"] = self.expected.value
        if self.note:
            out["note"] = self.note
        return out


def _check_spec(kind: str, spec: Any) -> str | None:
    """None when ``spec`` has the shape ``kind`` needs, else what was expected."""
    ok = {
        "json_schema": isinstance(spec, (dict, bool)),
        "regex": isinstance(spec, str),
        "gbnf": isinstance(spec, str)
        or (
            isinstance(spec, dict)
            and isinstance(spec.get("text"), str)
            and set(spec) <= {"text", "root", "dialect"}
        ),
        "choice": isinstance(spec, list) and all(isinstance(o, str) for o in spec),
        "lark": isinstance(spec, str),
    }[kind]
    return None if ok else KINDS[kind]


def case_from_json(obj: Any, path: str = "<cases>", line: int = 1) -> AuditCase:
    """The case a parsed JSON Lines record states; :class:`AuditCaseError` naming the field otherwise."""
    if not isinstance(obj, dict):
        raise AuditCaseError(path, line, "", "a JSON object", type(obj).__name__)
    for name in _REQUIRED:
        if name not in obj:
            raise AuditCaseError(path, line, name, "this required field", "missing")
    unknown = sorted(set(obj) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise AuditCaseError(
            path, line, unknown[0], f"only the fields {', '.join(_REQUIRED + _OPTIONAL)}", "unknown field"
        )
    for name in ("engine", "source", "kind", "instance"):
        if not isinstance(obj[name], str):
            raise AuditCaseError(path, line, name, "a string", type(obj[name]).__name__)
    kind = obj["kind"]
    if kind not in KINDS:
        raise AuditCaseError(path, line, "kind", f"one of {', '.join(KINDS)}", repr(kind))
    wrong = _check_spec(kind, obj["spec"])
    if wrong is not None:
        raise AuditCaseError(path, line, "spec", f"for kind {kind!r}: {wrong}", repr(obj["spec"])[:80])
    try:
        expected = Label(obj["expected"])
    except ValueError:
        labels = ", ".join(lab.value for lab in Label)
        raise AuditCaseError(path, line, "expected", f"one of {labels}", repr(obj["expected"])) from None
    profile = obj.get("profile")
    if profile is not None:
        if kind != "json_schema" or not isinstance(profile, dict):
            raise AuditCaseError(
                path, line, "profile", "an object of JsonProfile fields, on a json_schema case only"
            )
        names = {f.name for f in fields(JsonProfile)}
        bad = sorted(set(profile) - names)
        if bad:
            expected_fields = f"JsonProfile fields ({', '.join(sorted(names))})"
            raise AuditCaseError(path, line, "profile", expected_fields, bad[0])
        try:
            JsonProfile(**profile)
        except (SpecError, TypeError, ValueError) as e:
            raise AuditCaseError(path, line, "profile", "valid JsonProfile values", str(e)) from None
    note = obj.get("note", "")
    if not isinstance(note, str):
        raise AuditCaseError(path, line, "note", "a string", type(note).__name__)
    engine, source, spec, instance = obj["engine"], obj["source"], obj["spec"], obj["instance"]
    return AuditCase(engine, source, kind, spec, instance, expected, profile, note)


def iter_cases(lines: Iterable[str], path: str = "<cases>") -> Iterator[AuditCase]:
    """The cases of JSON Lines text (blank lines skipped)."""
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            detail = f"{e.msg} at column {e.colno}"
            raise AuditCaseError(path, n, "", "one JSON object per line", detail) from None
        yield case_from_json(obj, path, n)


def read_cases(path: str | Path) -> list[AuditCase]:
    """Every case of a JSON Lines file; :class:`AuditCaseError` names the first bad line and field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AuditCaseError(str(p), 0, "", "a readable UTF-8 JSON Lines file", str(e)) from None
    return list(iter_cases(text.splitlines(), str(p)))


# ---------------------------------------------------------------------------------------------------
# Deciding


@dataclass(frozen=True)
class Facts:
    """What the reference says of a text: whether it is a viable prefix, a sentence, and where it
    stops reading (the byte offset of the first byte it cannot read, None when it reads all)."""

    viable: bool
    accepting: bool
    dead_at: int | None
    completion: bytes | None = None

    def holds(self, label: Label) -> bool:
        return {
            Label.ACCEPT: self.accepting,
            Label.REJECT: not self.accepting,
            Label.PREFIX: self.viable and not self.accepting,
            Label.NOT_PREFIX: not self.viable,
        }[label]

    def describe(self) -> str:
        if self.accepting:
            return "accept (a sentence of the language)"
        if self.viable:
            return "reject: a viable prefix, not a sentence"
        return f"reject: no sentence starts with it (stops at byte {self.dead_at})"


def facts_of(grammar: Grammar, data: bytes) -> Facts:
    state: State | None = grammar.initial()
    for i, b in enumerate(data):
        assert state is not None
        state = grammar.advance_byte(state, b)
        if state is None:
            return Facts(False, False, i)
    assert state is not None
    accepting = grammar.is_accepting(state)
    completion = None if accepting else grammar.completion(state)
    return Facts(True, accepting, None, completion)


@dataclass(frozen=True)
class CaseResult:
    case: AuditCase
    status: Status
    verdict: str  # what the reference says (Facts.describe), or why it cannot say
    section: str = ""  # what decides it (contradictions only)
    oracle: str = ""  # the independent oracle's disagreement with the reference, if any
    plain: str = ""  # for JSON under a declared profile: how JSON Schema alone (JsonProfile()) reads it

    def to_json(self) -> dict[str, Any]:
        out = {"case": self.case.to_json(), "status": self.status.value, "verdict": self.verdict}
        for name in ("section", "oracle", "plain"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out


def _compile(spec: refdecoder.Spec) -> Grammar | str:
    try:
        return refdecoder.compile(spec)
    except (Unsupported, LimitExceeded) as e:
        return f"refused by the reference: {e}"
    except SpecError as e:
        return f"malformed spec (the reference's reading): {e}"


def _oracle(case: AuditCase, data: bytes, accepting: bool) -> str:
    """The independent validator's verdict where it differs from the reference's, else ""."""
    if case.kind == "lark":
        return ""
    try:
        reason = validate_output(case.spec_ref(), data)
    except CorpusError as e:
        return f"oracle cannot judge: {e}"
    if (reason is None) == accepting:
        return ""
    verdict = "accepts" if reason is None else f"rejects ({reason})"
    return f"{_ORACLE_DISAGREES}: the independent validator {verdict} — check the reference"


_ORACLE_DISAGREES = "ORACLE DISAGREES"


def decide_case(case: AuditCase) -> CaseResult:
    """The reference's verdict on ``case`` and whether the engine's label holds."""
    grammar = _compile(case.to_spec())
    if isinstance(grammar, str):
        return CaseResult(case, Status.UNDECIDED, grammar)
    data = case.instance.encode("utf-8", "surrogatepass")
    facts = facts_of(grammar, data)
    oracle = _oracle(case, data, facts.accepting)
    plain = ""
    if case.kind == "json_schema" and case.json_profile() != JsonProfile():
        g = _compile(case.to_spec(JsonProfile()))
        if isinstance(g, Grammar):
            pf = facts_of(g, data)
            if pf.holds(case.expected) != facts.holds(case.expected):
                plain = f"JSON Schema alone (default JsonProfile) says: {pf.describe()}"
    if facts.holds(case.expected):
        return CaseResult(case, Status.AGREE, facts.describe(), oracle=oracle, plain=plain)
    section = deciding_section(case, facts, grammar)
    return CaseResult(case, Status.CONTRADICTION, facts.describe(), section, oracle, plain)


# ---------------------------------------------------------------------------------------------------
# What decides a case

#: JSON Schema 2020-12 keyword -> its section (Core: draft-bhutton-json-schema-01; Validation:
#: draft-bhutton-json-schema-validation-01).
SECTIONS: Mapping[str, str] = {
    "type": "Validation §6.1.1",
    "enum": "Validation §6.1.2",
    "const": "Validation §6.1.3",
    "multipleOf": "Validation §6.2.1",
    "maximum": "Validation §6.2.2",
    "exclusiveMaximum": "Validation §6.2.3",
    "minimum": "Validation §6.2.4",
    "exclusiveMinimum": "Validation §6.2.5",
    "maxLength": "Validation §6.3.1",
    "minLength": "Validation §6.3.2",
    "pattern": "Validation §6.3.3",
    "maxItems": "Validation §6.4.1",
    "minItems": "Validation §6.4.2",
    "uniqueItems": "Validation §6.4.3",
    "maxContains": "Validation §6.4.4",
    "minContains": "Validation §6.4.5",
    "maxProperties": "Validation §6.5.1",
    "minProperties": "Validation §6.5.2",
    "required": "Validation §6.5.3",
    "dependentRequired": "Validation §6.5.4",
    "format": "Validation §7 (format assertion; §7.3 defined formats)",
    "allOf": "Core §10.2.1.1",
    "anyOf": "Core §10.2.1.2",
    "oneOf": "Core §10.2.1.3",
    "not": "Core §10.2.1.4",
    "if": "Core §10.2.2.1",
    "then": "Core §10.2.2.2",
    "else": "Core §10.2.2.3",
    "dependentSchemas": "Core §10.2.2.4",
    "prefixItems": "Core §10.3.1.1",
    "items": "Core §10.3.1.2",
    "contains": "Core §10.3.1.3",
    "properties": "Core §10.3.2.1",
    "patternProperties": "Core §10.3.2.2",
    "additionalProperties": "Core §10.3.2.3",
    "propertyNames": "Core §10.3.2.4",
    "unevaluatedItems": "Core §11.2",
    "unevaluatedProperties": "Core §11.3",
    "$ref": "Core §8.2.3.1",
    "$dynamicRef": "Core §8.2.3.2",
    "false": "Core §4.3.2 (boolean schema false)",
}

#: ``format`` name -> the RFC section that defines it (Validation §7.3 points there).
FORMAT_RFCS: Mapping[str, str] = {
    "date-time": "RFC 3339 §5.6",
    "date": "RFC 3339 §5.6 full-date",
    "time": "RFC 3339 §5.6 full-time",
    "duration": "RFC 3339 Appendix A",
    "email": "RFC 5321 §4.1.2",
    "idn-email": "RFC 6531",
    "hostname": "RFC 1123 §2.1",
    "idn-hostname": "RFC 5890 §2.3.2.3",
    "ipv4": "RFC 2673 §3.2",
    "ipv6": "RFC 4291 §2.2",
    "uri": "RFC 3986 §3",
    "uri-reference": "RFC 3986 §4.1",
    "iri": "RFC 3987",
    "uuid": "RFC 4122 §3",
    "json-pointer": "RFC 6901 §3",
    "regex": "ECMA-262",
}

_RFC8259 = "RFC 8259"
_OLD_DRAFT_KEYWORDS = frozenset(
    {"definitions", "dependencies", "additionalItems", "$recursiveRef", "$recursiveAnchor", "id"}
)
_DATA = frozenset({"enum", "const", "default", "examples"})  # values that are data, not schemas
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def _json_text_section(text: str, dead_at: int | None) -> str:
    """Where a text that is no JSON value breaks RFC 8259, as concretely as the parser says."""
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        pos = e.pos
        near = text[max(0, pos - 12) : pos + 12]
        sec = "§2 (JSON text grammar)"
        tail = text[pos:]
        if e.msg == "Extra data":
            sec = "§2 (JSON-text = ws value ws: exactly one value)"
        elif re.match(r"-?\d", tail) or (pos > 0 and text[pos - 1].isdigit()):
            sec = "§6 (numbers: no leading zeros, digits after '.' and 'e')"
        elif e.msg.startswith(("Invalid control character", "Invalid \\escape", "Unterminated string")):
            sec = "§7 (strings: control characters escaped, escapes from the list)"
        elif e.msg.startswith("Expecting property name") or "delimiter" in e.msg and "{" in text[:pos]:
            sec = "§4 (objects) / §5 (arrays)"
        return f"{_RFC8259} {sec}: {e.msg} at character {pos} (near {near!r})"
    except ValueError as e:
        return f"{_RFC8259}: {e}"
    return ""


def _schema_errors(case: AuditCase, value: Any) -> list[Any]:
    import jsonschema

    cls = draft_validator(validator_draft(case.spec_ref()))
    checker = None
    if case.json_profile().formats == "assert":
        from props.corpus.format_check import format_checker

        checker = format_checker()
    try:
        validator = cls(case.spec, format_checker=checker)
        best = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except Exception:  # noqa: BLE001 - the explanation falls back to the reference's own verdict
        return []
    return [best] if best is not None else []


def _keyword_section(err: Any, draft: str) -> str:
    kw = str(err.validator)
    sec = SECTIONS.get(kw, "")
    if kw == "format":
        fmt = str(err.validator_value)
        sec = f"Validation §7.3 format {fmt!r}" + (f" ({FORMAT_RFCS[fmt]})" if fmt in FORMAT_RFCS else "")
    schema_path = "/" + "/".join(str(p) for p in err.absolute_schema_path)
    label = f"JSON Schema {draft} {sec}" if sec else f"JSON Schema {draft}"
    return f"keyword {kw!r} at schema {schema_path} ({label}) fails at instance {err.json_path}: {err.message[:160]}"


def _unknown_keywords(schema: Any) -> list[str]:
    """Keys of (sub)schemas that no draft the reference reads defines: extensions, annotations only."""
    known = enforced() | ANNOTATIONS | _OLD_DRAFT_KEYWORDS
    found: list[str] = []

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        for k, v in node.items():
            if k not in known and k not in found:
                found.append(k)
            if k in _DATA:
                continue
            if k in _NAME_MAPS and isinstance(v, dict):
                for sub in v.values():
                    walk(sub)
            elif isinstance(v, dict):
                walk(v)
            elif isinstance(v, list):
                for sub in v:
                    walk(sub)

    walk(schema)
    return found


def _subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(schema, dict):
        return
    yield schema
    for k, v in schema.items():
        if k in _DATA:
            continue
        if k in _NAME_MAPS and isinstance(v, dict):
            for sub in v.values():
                yield from _subschemas(sub)
        elif isinstance(v, dict):
            yield from _subschemas(v)
        elif isinstance(v, list):
            for sub in v:
                yield from _subschemas(sub)


def _keywords_used(schema: Any) -> list[str]:
    """Every JSON Schema keyword of the schema with its section (formats with their RFC), once."""
    out: list[str] = []
    for sub in _subschemas(schema):
        for k, v in sub.items():
            if k not in SECTIONS:
                continue
            text = f"{k} ({SECTIONS[k]})"
            if k == "format" and isinstance(v, str):
                rfc = f", {FORMAT_RFCS[v]}" if v in FORMAT_RFCS else ""
                text = f"format {v!r} (Validation §7.3{rfc})"
            if text not in out:
                out.append(text)
    return out


_ZERO_FRACTION = re.compile(r"(?<![\w.])-?\d+(\.0+([eE][+-]?\d+)?|[eE]\+?\d+)(?![\w.])")


def _valid_notes(schema: Any, text: str) -> list[str]:
    """What a reader of a "must reject" test most likely overlooked, for the keywords at hand."""
    notes = []
    subs = list(_subschemas(schema))
    if any(s.get("type") == "integer" or "integer" in (s.get("type") or []) for s in subs) and (
        _ZERO_FRACTION.search(text)
    ):
        notes.append(
            "Validation §6.1.1: 'integer' matches any number with a zero fractional part (1.0 is an integer)"
        )
    if any("prefixItems" in s and "items" not in s for s in subs):
        notes.append(
            "Core §10.3.1.1-2: prefixItems constrains only the items present; without 'items' further items "
            "are allowed, and without 'minItems' fewer"
        )
    if any("$ref" in s for s in subs):
        notes.append("Core §8.2.3.1: a recursive $ref has no depth limit")
    if any(s.get("type") in ("array", "object") and set(s) <= {"type", "title", "description"} for s in subs):
        notes.append("no keyword limits the nesting depth of an unconstrained array or object")
    if re.search(r"\d[eE]\d", text):
        notes.append("RFC 8259 §6: exp = e [ minus / plus ] 1*DIGIT (the sign is optional)")
    return notes


def _reads(data: bytes, dead_at: int) -> str:
    return f"reads {data[:dead_at][-40:]!r}, then byte {dead_at} ({data[dead_at : dead_at + 1]!r}) continues no sentence"


def deciding_section(case: AuditCase, facts: Facts, grammar: Grammar | None = None) -> str:
    """What in the spec decides the case against its label, as concretely as can be said."""
    data = case.instance.encode("utf-8", "surrogatepass")
    alive = ""
    if facts.viable and not facts.accepting and facts.completion is not None:
        alive = f"a viable prefix: the reference completes it with {facts.completion[:60]!r}"
    if case.kind == "json_schema":
        return _json_section(case, facts, data, alive)
    what = {
        "regex": f"pattern /{case.spec}/ (full match)",
        "choice": f"the choices {case.spec!r}"[:200],
        "gbnf": "the GBNF grammar's root rule",
        "lark": "the Lark grammar's start rule",
    }[case.kind]
    if facts.accepting:
        extra = ""
        if case.kind == "regex":
            extra = "; Python re.fullmatch agrees" if re.fullmatch(case.spec, case.instance) else ""
        return f"{what} matches the whole text{extra}"
    if not facts.viable:
        assert facts.dead_at is not None
        return f"{what}: {_reads(data, facts.dead_at)}"
    return f"{what}: {alive or 'a viable prefix, not a sentence'}"


def _json_section(case: AuditCase, facts: Facts, data: bytes, alive: str) -> str:
    text = case.instance
    draft = validator_draft(case.spec_ref())
    if facts.accepting:
        unknown = _unknown_keywords(case.spec)
        parts = [f"the text is valid: no keyword of the schema rejects it (jsonschema, JSON Schema {draft})"]
        if unknown:
            parts.append(
                f"keywords {', '.join(repr(k) for k in unknown)} are not JSON Schema keywords: "
                "annotations only (Core §6.5, unknown keywords)"
            )
        parts.extend(_valid_notes(case.spec, text))
        used = _keywords_used(case.spec)
        if used:
            parts.append("keywords in force: " + ", ".join(used))
        return "; ".join(parts)
    if alive and case.expected is Label.NOT_PREFIX:
        return alive
    syntax = _json_text_section(text, facts.dead_at)
    if syntax:
        if alive:
            return f"{alive} ({syntax})"
        return syntax
    value = json.loads(text)
    errs = _schema_errors(case, value)
    if errs:
        return _keyword_section(errs[0], draft)
    try:
        reason = validate_output(case.spec_ref(), data)
    except CorpusError as e:
        reason = f"(oracle cannot judge: {e})"
    if reason:
        return f"declared profile: {reason}"
    where = f" (the reference stops at byte {facts.dead_at})" if facts.dead_at is not None else ""
    return f"no keyword and no profile field rejects it; the reference does{where}: check the reference"


# ---------------------------------------------------------------------------------------------------
# Reports


@dataclass(frozen=True)
class AuditReport:
    results: tuple[CaseResult, ...]
    sources: tuple[str, ...] = field(default=())

    @property
    def contradictions(self) -> list[CaseResult]:
        return [r for r in self.results if r.status is Status.CONTRADICTION]

    @property
    def exit_code(self) -> int:
        return 1 if self.contradictions else 0

    def counts(self) -> dict[str, dict[str, int]]:
        """Per engine: cases, and how many agree, contradict, stay undecided; ``oracle_disagrees``
        counts the cases where the independent validator contradicts the reference (read those as
        possible mistakes of the reference)."""
        out: dict[str, Counter[str]] = {}
        for r in self.results:
            c = out.setdefault(r.case.engine, Counter())
            c["cases"] += 1
            c[r.status.value] += 1
            c["oracle_disagrees"] += r.oracle.startswith(_ORACLE_DISAGREES)
        keys = ("cases", *(s.value for s in Status), "oracle_disagrees")
        return {e: {k: c[k] for k in keys} for e, c in sorted(out.items())}

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": self.counts(),
            "results": [r.to_json() for r in self.results if r.status is not Status.AGREE],
            "agreements": sum(r.status is Status.AGREE for r in self.results),
        }

    def render_text(self, verbose: bool = False) -> str:
        lines = []
        for engine, n in self.counts().items():
            suspect = n["oracle_disagrees"]
            tail = f" ({suspect} where the oracle disagrees with the reference)" if suspect else ""
            lines.append(
                f"{engine}: {n['cases']} cases, {n['agree']} agree, {n['contradiction']} contradict the spec, "
                f"{n['undecided']} undecided{tail}"
            )
        for r in self.results:
            if r.status is Status.AGREE and not (verbose or r.oracle.startswith(_ORACLE_DISAGREES)):
                continue
            c = r.case
            lines.append("")
            note = f"  [{c.note}]" if c.note else ""
            lines.append(f"{r.status.value.upper()}  {c.engine}  {c.source}{note}")
            lines.append(f"  spec ({c.kind}): {_short(c.spec)}")
            if c.profile:
                lines.append(f"  profile: {json.dumps(c.profile, sort_keys=True)}")
            lines.append(f"  instance: {c.instance[:200]!r}")
            lines.append(f"  the test expects: {c.expected.value}")
            lines.append(f"  the reference:    {r.verdict}")
            if r.section:
                lines.append(f"  decided by: {r.section}")
            if r.plain:
                lines.append(f"  note: {r.plain}")
            if r.oracle:
                lines.append(f"  {r.oracle}")
        return "\n".join(lines) + "\n"


def _short(spec: Any) -> str:
    text = spec if isinstance(spec, str) else json.dumps(spec, ensure_ascii=False)
    return text if len(text) <= 300 else text[:300] + "..."


def audit(cases: Sequence[AuditCase]) -> AuditReport:
    """Decide every case (in order)."""
    return AuditReport(tuple(decide_case(c) for c in cases))
