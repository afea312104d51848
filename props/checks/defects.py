"""Defects: findings grouped by root cause, so one behaviour of an engine is reported once.

A finding is one observation: this spec, this vocabulary, this step, this token. An engine that masks
``\\`` inside object keys shows it on every schema with an object, for every token that starts an
escape (``"\\``, `` "\\``, ``\\u``), under every whitespace variant. :func:`signature` maps each
finding to a deterministic description of *what went wrong where*, built from what the reference
knows at the divergence; findings with one signature are one :class:`Defect`.

The signature is ``invariant | direction | context | byte``:

* **invariant** and **direction**: ``soundness`` allows what the language forbids (or, for a whole
  invalid output run to its end, lets it finish: then the context is the JSON Schema keyword the
  output breaks, by ``jsonschema``'s best match), ``completeness`` (its three levels are one
  behaviour seen under stricter or looser segmentations), ``utf8`` and ``liveness`` block what it allows, ``eos`` offers or withholds the end; serving
  invariants name the operation that diverged; ``crash``/``limits`` the operation and exception type
  (a limits probe's finding: its verdict — hang, blowup, crash — and the probe family); a tool-call
  template that breaks its request's promise is ``soundness | breaks the request's promise | <promise>``
  (``required``, ``none``, ``named``, ...: one defect per promise, not per witness).
* **context**: where in the output the decisive byte falls. For JSON (every ``json_schema`` spec) the
  JSON position kind, from :func:`json_positions`: ``value``, ``object key``, ``key escape``,
  ``string``, ``string escape``, ``number``, ``fraction``, ``exponent``, ``literal``, ``after key``,
  ``after value``. Not the concrete schema path: the same behaviour on two schemas is one defect. For
  regex, GBNF and choice specs ``text`` (their bytes have no positions of their own); for serving,
  refusal, determinism, crash and limits findings ``-``.
* **byte**: the class of the decisive byte (:func:`byte_class`: ``quote``, ``backslash``, ``digit``,
  ``sign``, ``dot``, ``exp``, ``letter``, ``space``, ``control``, ``non-ascii``, a structural
  character itself, ``other``), ``EOS``, or ``special token`` (a token without bytes).

The **decisive byte** of a token finding: for ``soundness``, the first byte of the token after which
the reference has no completion (found by walking the reference grammar over the token's bytes),
which is exactly where the engine let invalid output through; for the blocking invariants, the
token's most specific byte by :data:`SPECIFICITY` (an escape is more telling than the quote or the
whitespace that led to it), since the reference cannot know which byte the engine objected to.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from props.checks.invariants import (
    UNDECIDED,
    BackendFault,
    NotChecked,
    Target,
    check_invalid,
    check_serving,
    check_walk,
    prepare,
)
from props.checks.witness import canonical_ids
from props.contract.backend import Backend
from props.contract.findings import (
    SERVING_INVARIANTS,
    SEVERITY,
    SEVERITY_RANK,
    Finding,
    Invariant,
    Severity,
    SpecKind,
    SpecRef,
)
from refdecoder import Accepted, Grammar, split_special_tokens
from refdecoder import Matcher as RefMatcher
from tokenizers_matrix import Vocabulary

__all__ = [
    "Defect",
    "group",
    "signature",
    "json_positions",
    "byte_class",
    "SPECIFICITY",
    "Reduced",
    "minimize_defect",
]

# -- JSON positions ---------------------------------------------------------------------------------

_STRUCTURAL = frozenset(b"{}[],:")


def json_positions(data: bytes) -> list[str]:
    """The JSON position kind *before* each byte of ``data`` (len(data) + 1 entries: the last one is
    the position after it). A small lexical scanner, lenient on invalid input (it only locates)."""
    out: list[str] = []
    stack: list[str] = []  # "{" or "["
    state = "value"
    literal_left = 0
    for b in data:
        out.append(state)
        c = chr(b)
        if state in ("object key", "string"):
            if c == "\\":
                state = "key escape" if state == "object key" else "string escape"
            elif c == '"':
                state = "after key" if state == "object key" else "after value"
        elif state in ("key escape", "string escape"):
            state = "object key" if state == "key escape" else "string"
        elif state in ("number", "fraction", "exponent"):
            if c == "." and state == "number":
                state = "fraction"
            elif c in "eE" and state in ("number", "fraction"):
                state = "exponent"
            elif not (c.isdigit() or c in "+-"):
                state = _after_value(c, stack)
        elif state == "literal":
            literal_left -= 1
            if literal_left <= 0:
                state = "after value"
        elif c in " \t\r\n":
            pass  # whitespace keeps the position
        elif state == "after key":
            if c == ":":
                state = "value"
        elif state == "after value":
            state = _after_value(c, stack)
        elif state in ("value", "key"):
            if c == '"':
                state = "object key" if state == "key" else "string"
            elif c == "{":
                stack.append("{")
                state = "key"
            elif c == "[":
                stack.append("[")
                state = "value"
            elif c in "]}":
                if stack:
                    stack.pop()
                state = "after value"
            elif c == "-" or c.isdigit():
                state = "number"
            elif c in "tfn":
                state, literal_left = "literal", {"t": 3, "f": 4, "n": 3}[c]
        # Any other byte leaves the state: the scanner only locates, the reference judges.
    out.append(state)
    return ["object key" if s == "key" else s for s in out]  # expecting a key is a key position too


def _after_value(c: str, stack: list[str]) -> str:
    if c == ",":
        return "key" if stack and stack[-1] == "{" else "value"
    if c in "]}" and stack:
        stack.pop()
    return "after value"


def byte_class(b: int) -> str:
    """A byte's class for signatures (see the module doc)."""
    c = chr(b)
    if b >= 0x80:
        return "non-ascii"
    if b < 0x20 and c not in "\t\r\n":
        return "control"
    if c in " \t\r\n":
        return "space"
    if c == '"':
        return "quote"
    if c == "\\":
        return "backslash"
    if c.isdigit():
        return "digit"
    if c in "+-":
        return "sign"
    if c == ".":
        return "dot"
    if c.isalpha():
        return "letter"
    if b in _STRUCTURAL:
        return c
    return "other"


#: How telling a byte class is, most telling first: a blocking finding is signed by its token's most
#: telling byte.
SPECIFICITY: tuple[str, ...] = (
    "control",
    "backslash",
    "non-ascii",
    "other",
    "sign",
    "dot",
    "digit",
    "letter",
    "quote",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "space",
)


# -- signatures ---------------------------------------------------------------------------------------

_RANK = {cls: i for i, cls in enumerate(SPECIFICITY)}
_COMPLETENESS = frozenset(
    {Invariant.COMPLETENESS_CANONICAL, Invariant.COMPLETENESS_TOKEN, Invariant.COMPLETENESS_BYTE}
)


def _context(f: Finding, data: bytes, index: int) -> str:
    """The context of byte ``index`` of ``data`` (prefix + token): JSON position or spec kind."""
    if f.spec.kind is SpecKind.JSON_SCHEMA:
        return json_positions(data)[index]
    return "text"


def _dying_byte(grammar: Grammar | None, prefix: bytes, token: bytes) -> int | None:
    """The index in ``token`` of the first byte after which the reference has no completion."""
    if grammar is None:
        return None
    state = grammar.advance(grammar.initial(), prefix)
    if state is None:
        return None
    for i, b in enumerate(token):
        state = grammar.advance(state, bytes([b]))
        if state is None:
            return i
    return None


def _most_specific(token: bytes) -> int | None:
    if not token:
        return None
    return min(range(len(token)), key=lambda i: (_RANK.get(byte_class(token[i]), len(_RANK)), i))


def violated_keyword(spec: SpecRef, output: bytes) -> str:
    """The JSON Schema keyword an invalid ``output`` breaks (``jsonschema``'s best match), as
    ``keyword <name>``; ``syntax`` when it is not JSON; ``language`` for other spec kinds."""
    if spec.kind is not SpecKind.JSON_SCHEMA:
        return "language"
    import jsonschema
    from referencing.exceptions import Unresolvable

    from props.corpus import CorpusError, parse_json_output, schema_validator

    # Read as the validator reads outputs: json.loads makes 1e999 a float infinity, on which
    # jsonschema's multipleOf raises OverflowError (seen at report assembly on a JSONSchemaBench
    # schema with xgrammar at 129k, which lost the whole run).
    try:
        instance, not_json = parse_json_output(output)
    except CorpusError:  # a number no exact reading holds (1e1000000000000000000)
        return "keyword ?"
    if not_json is not None:
        return "syntax"
    try:  # the independent validator's own reading (draft, formats, legacy dependencies)
        error = jsonschema.exceptions.best_match(schema_validator(spec).iter_errors(instance))
    except (CorpusError, jsonschema.exceptions.SchemaError, Unresolvable, RecursionError):
        return "keyword ?"
    if error is None:
        return "keyword ?"
    # A ``false`` subschema has no keyword: jsonschema reports validator None ("False schema does not
    # allow ...").
    return f"keyword {error.validator}" if error.validator is not None else "false subschema"


def signature(f: Finding, grammar: Grammar | None = None) -> str:
    """``f``'s root-cause signature (see the module doc). ``grammar`` is the reference's grammar for
    ``f.spec`` under its profile, used to find where a soundness finding's token dies."""
    inv: str = f.invariant
    if f.invariant in _COMPLETENESS:  # three strictness levels of one behaviour: blocking a valid token
        inv = "completeness"
    if inv in SERVING_INVARIANTS:
        ops = (f.certificate or {}).get("operations") or []
        last = ops[-1] if ops else None
        kind = getattr(last, "kind", None) or (last[0] if isinstance(last, list) and last else "")
        return f"{inv}|diverged after {kind or 'the walk'}|-|-"
    if inv is Invariant.LIMITS and "family" in (f.certificate or {}):  # a limits probe's growth curve
        cert = f.certificate or {}
        return f"{inv}|{cert.get('verdict', '?')}|{cert['family']}|-"
    if inv in (Invariant.CRASH, Invariant.LIMITS):
        cert = f.certificate or {}
        return f"{inv}|{cert.get('operation', '?')}|{cert.get('exception', '?')}|-"
    if inv is Invariant.REFUSAL:
        return f"{inv}|compiles what it should refuse|-|-"
    if inv is Invariant.EOS:
        direction = "withholds EOS" if f.reference_allows else "offers EOS"
        return f"{inv}|{direction}|{_context(f, f.prefix_bytes, len(f.prefix_bytes))}|EOS"
    if inv is Invariant.DETERMINISM:
        return f"{inv}|{f.backend_verdict[:40]}|-|-"
    promise = (f.certificate or {}).get("promise")
    if isinstance(
        promise, str
    ):  # a tool-call template breaking its request (props/checks/toolcall_promises.py)
        return f"{inv}|breaks the request's promise|{promise}|-"
    invalid = (f.certificate or {}).get("invalid_text")
    if isinstance(invalid, dict) and isinstance(invalid.get("hex"), str):  # a finding read back from JSON
        invalid = bytes.fromhex(invalid["hex"])
    if isinstance(invalid, bytes):  # a whole invalid output run to the end: which keyword it breaks
        return f"{inv}|lets an invalid output finish|{violated_keyword(f.spec, invalid)}|EOS"
    token = f.token_bytes or b""
    here = _context(f, f.prefix_bytes, len(f.prefix_bytes))
    if inv is Invariant.LIVENESS:
        return f"{inv}|blocks everything|{here}|-"
    # a token without bytes, or one a grammar naming special tokens reads as its encoding: a special token
    if not token or [type(p) for p in split_special_tokens(token)] == [int]:
        return f"{inv}|{'allows' if inv is Invariant.SOUNDNESS else 'blocks'}|{here}|special token"
    if inv is Invariant.SOUNDNESS:
        i = _dying_byte(grammar, f.prefix_bytes, token)
        direction = "allows"
    else:
        i = None
        direction = "blocks"
    if i is None:
        i = _most_specific(token)
    assert i is not None  # token is non-empty
    data = f.prefix_bytes + token
    return f"{inv}|{direction}|{_context(f, data, len(f.prefix_bytes) + i)}|{byte_class(token[i])}"


# -- defects ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Defect:
    """Findings with one signature. ``findings`` are ordered by (prefix length, spec source size),
    so the first is the smallest example."""

    signature: str
    findings: tuple[Finding, ...] = field(repr=False)

    @property
    def id(self) -> str:
        """A short id, stable across runs and engines' releases (it depends on the signature only)."""
        return "D" + hashlib.sha256(self.signature.encode()).hexdigest()[:8]

    @property
    def invariant(self) -> Invariant:
        return self.findings[0].invariant

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.invariant]

    @property
    def example(self) -> Finding:
        return self.findings[0]

    def summary(self) -> str:
        inv, direction, context, byte = self.signature.split("|", 3)
        where = f" at {context}" if context else ""
        what = f" ({byte})" if byte not in ("-", "") else ""
        specs = len({f.spec.digest for f in self.findings})
        return f"{inv}: {direction}{where}{what} — {len(self.findings)} findings on {specs} specs"


def _size(f: Finding) -> int:
    return len(json.dumps(f.spec.source, sort_keys=True, default=str))


def _grammar(f: Finding, grammar_of: Callable[[Finding], Grammar | None] | None) -> Grammar | None:
    """The reference grammar :func:`signature` needs for ``f``: only a soundness finding's (to find
    where its token dies), so no other finding's spec is compiled again."""
    if grammar_of is None or f.invariant is not Invariant.SOUNDNESS:
        return None
    return grammar_of(f)


def group(
    findings: Iterable[Finding], grammar_of: Callable[[Finding], Grammar | None] | None = None
) -> list[Defect]:
    """``findings`` as defects, most severe first, then most findings first. ``grammar_of`` gives
    the reference grammar of a finding's spec (None: soundness findings are signed by their most
    specific byte)."""
    by: dict[str, list[Finding]] = {}
    for f in findings:
        sig = signature(f, _grammar(f, grammar_of))
        by.setdefault(sig, []).append(f)
    defects = [
        Defect(sig, tuple(sorted(fs, key=lambda f: (len(f.prefix_ids), _size(f), f.id))))
        for sig, fs in by.items()
    ]
    defects.sort(key=lambda d: (SEVERITY_RANK[d.severity], -len(d.findings), d.signature))
    return defects


def reference_grammars() -> Callable[[Finding], Grammar | None]:
    """A ``grammar_of`` for :func:`group` that compiles each spec once (None when it is refused)."""
    import refdecoder

    cache: dict[tuple[str, str], Grammar | None] = {}

    def grammar_of(f: Finding) -> Grammar | None:
        key = (f.spec.digest, repr(sorted((f.spec.profile or {}).items())))
        if key not in cache:
            try:
                cache[key] = refdecoder.compile(f.spec.to_spec())
            except refdecoder.MaskcertError:
                cache[key] = None
        return cache[key]

    return grammar_of


# -- minimization -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reduced:
    """A defect shown on a smaller spec: ``finding`` is the finding on ``spec`` whose signature is the
    defect's (its certificate is the minimized witness), ``calls`` how many candidates were tried."""

    finding: Finding
    calls: int
    exhausted: bool


def _walk_ids(t: Target, ids: Sequence[int]) -> tuple[list[int], bool]:
    """The longest prefix of ``ids`` the reference accepts, and whether that is all of them."""
    r = RefMatcher(t.reference)
    out: list[int] = []
    for tok in ids:
        if not isinstance(r.accept(int(tok)), Accepted):
            return out, False
        out.append(int(tok))
    return out, True


def for_replay(t: Target) -> Target:
    """``t`` set up for minimization's replays: completeness certificates are not classified by a
    segmentation search (its three levels are one signature, and the search is most of a replay's
    engine calls), unless the backend declares canonical tokenizations only (then the level decides
    whether there is a finding at all). :func:`minimize_defect` classifies the finding it keeps."""
    if not t.profile.canonical_tokenization_only:
        t.segmentation_search = False
    return t


def _classified(
    f: Finding, sig: str, backend: Backend, vocab: Vocabulary, grammar_of: Callable[[Finding], Grammar | None]
) -> Finding:
    """``f`` (a replay's finding, its completeness level not searched) found again by the same walk
    text with the segmentation search on, so its level is the one certify would report; ``f`` itself
    when it needs no search or the walk does not show the signature again."""
    if (f.certificate or {}).get("segmentation_search") != "not searched":
        return f
    what = walk_text(f)
    t = prepare(backend, f.spec, vocab)
    if what is None or isinstance(t, NotChecked):
        return f
    again = _replay_text(t, what[0], what[1], sig, grammar_of)
    return f if again is None else again


def _replay(backend: Backend, vocab: Vocabulary, f: Finding, candidate: SpecRef) -> list[Finding]:
    """The findings that ``f``'s own walk shows on ``candidate``: the same token ids (its witness for a
    blocking finding, its prefix for an allowing one), the same invalid output, the same serving walk."""
    t = prepare(backend, candidate, vocab)
    if isinstance(t, NotChecked):
        return list(t.findings)
    for_replay(t)
    cert = f.certificate or {}
    invalid = cert.get("invalid_text")
    if isinstance(invalid, bytes):
        why = t.validate(invalid)
        if why is None or why == UNDECIDED:
            return []
        return check_invalid(t.backend, t.compiled, t.spec, vocab, invalid, why, True)
    ids = cert.get("witness_ids") or list(f.prefix_ids)
    walk, whole = _walk_ids(t, ids)
    found = check_walk(t, walk, "canonical", end_with_eos=whole)
    if f.invariant in SERVING_INVARIANTS:
        found += check_serving(t, walk)
    return found


def minimize_defect(
    defect: Defect,
    backend: Backend,
    vocab: Vocabulary,
    grammar_of: Callable[[Finding], Grammar | None],
    *,
    max_calls: int = 60,
    seconds: float = 15.0,
) -> Reduced | None:
    """``defect`` on the smallest spec :func:`props.checks.minimize.minimize` finds within the budget
    that still shows a finding with the defect's signature when the example finding's walk is replayed
    on the backend (None when the example does not reproduce even on its own spec)."""
    import time

    from props.checks.minimize import minimize

    example = defect.example
    if example.walk == "limits-probe":  # its spec is the smallest size that shows it, found by the probe
        return None
    last: dict[str, Finding] = {}

    def still(candidate: SpecRef) -> bool:
        try:
            found = _replay(backend, vocab, example, candidate)
        except (ValueError, BackendFault):
            return False
        for f in found:
            if signature(f, _grammar(f, grammar_of)) == defect.signature:
                last[json.dumps(candidate.source, sort_keys=True, default=str)] = f
                return True
        return False

    if not still(example.spec):
        return None
    deadline = time.monotonic() + seconds
    result = minimize(example.spec, still, max_calls=max_calls, deadline=deadline)
    key = json.dumps(result.spec.source, sort_keys=True, default=str)
    found = last[key]
    shorter = shorten_witness(found, defect.signature, backend, vocab, grammar_of, deadline=deadline)
    kept = _classified(shorter.finding, defect.signature, backend, vocab, grammar_of)
    return Reduced(kept, result.steps + 1 + shorter.calls, result.exhausted or shorter.exhausted)


# -- witness shortening -------------------------------------------------------------------------------


def walk_text(f: Finding) -> tuple[str, bytes] | None:
    """What :func:`shorten_witness` shortens: ``("invalid", text)`` for a whole invalid output the
    backend let finish, ``("walk", text)`` for a token finding — the walk up to the divergence (the
    prefix, and the masked token too when the reference allows it, so the text is a viable prefix);
    None for findings whose walk is not a text (serving operations, crashes, refusals of the spec)."""
    cert = f.certificate or {}
    invalid = cert.get("invalid_text")
    if isinstance(invalid, bytes):
        return "invalid", invalid
    if f.invariant in SERVING_INVARIANTS or f.invariant in (Invariant.CRASH, Invariant.LIMITS):
        return None
    if f.invariant in (Invariant.REFUSAL, Invariant.DETERMINISM):
        return None
    tail = (f.token_bytes or b"") if f.reference_allows else b""
    return "walk", f.prefix_bytes + tail


def _without_json_whitespace(data: bytes) -> bytes:
    """``data`` without the insignificant whitespace of JSON (RFC 8259 §2: space, tab, LF, CR between
    tokens), string contents untouched; correct on a prefix too (an open string stays as it is)."""
    out = bytearray()
    in_string = escaped = False
    for b in data:
        if in_string:
            out.append(b)
            if escaped:
                escaped = False
            elif b == 0x5C:
                escaped = True
            elif b == 0x22:
                in_string = False
        elif b in b" \t\n\r":
            continue
        else:
            out.append(b)
            in_string = b == 0x22
    return bytes(out)


@dataclass(frozen=True)
class Shortened:
    """The finding on the shortest walk text found (the input finding when none shorter reproduced),
    how many candidates were replayed, and whether the budget ran out first."""

    finding: Finding
    calls: int
    exhausted: bool


def shorten_witness(
    f: Finding,
    sig: str,
    backend: Backend,
    vocab: Vocabulary,
    grammar_of: Callable[[Finding], Grammar | None],
    *,
    deadline: float,
    max_calls: int = 200,
) -> Shortened:
    """``f`` (already on its minimized spec) re-found on the shortest walk text that still shows a
    finding with signature ``sig``: first the text without JSON's insignificant whitespace, then ddmin
    (:func:`props.checks.minimize.ddmin`) over its bytes. Each candidate is encoded canonically (else in
    fewest tokens); a walk candidate must be a viable prefix for the reference, token by token, and is
    replayed with :func:`check_walk` (its findings then carry the reference's shortest completion as
    their witness); an invalid-output candidate must stay invalid for the independent validator and
    is replayed with :func:`check_invalid`. Of the findings with signature ``sig`` on the shortest
    candidate, the one with the shortest witness is kept (replays skip the segmentation search,
    :func:`for_replay`; the kept finding is classified with it). Bounded by ``deadline`` (``time.monotonic``)
    and ``max_calls`` replays; the engine runs in whatever process ``backend`` lives in (its worker)."""
    import time

    from props.checks.minimize import ddmin

    what = walk_text(f)
    if what is None:
        return Shortened(f, 0, False)
    kind, text = what
    t = prepare(backend, f.spec, vocab)
    if isinstance(t, NotChecked):
        return Shortened(f, 0, False)
    for_replay(t)
    calls = [0]
    exhausted = [False]
    memo: dict[bytes, Finding | None] = {text: f}

    def replay(candidate: bytes) -> Finding | None:
        if candidate in memo:
            return memo[candidate]
        if calls[0] >= max_calls or time.monotonic() > deadline:
            exhausted[0] = True
            return None
        calls[0] += 1
        memo[candidate] = found = _replay_text(t, kind, candidate, sig, grammar_of)
        return found

    best = text
    if f.spec.kind == SpecKind.JSON_SCHEMA:
        compact = _without_json_whitespace(text)
        if compact != text and replay(compact) is not None:
            best = compact
    best = bytes(ddmin(list(best), lambda c: replay(bytes(c)) is not None, 0))
    result = _classified(memo.get(best) or f, sig, backend, vocab, grammar_of)
    return Shortened(result, calls[0], exhausted[0])


def _replay_text(
    t: Target, kind: str, text: bytes, sig: str, grammar_of: Callable[[Finding], Grammar | None]
) -> Finding | None:
    """The finding with signature ``sig`` (shortest witness first) that walking ``text`` shows on
    ``t``, or None (see :func:`shorten_witness`)."""
    ids = canonical_ids(t.vocab, text) or t.vocab.index.fewest_tokens(text)
    if ids is None:
        return None
    t.fresh()
    try:
        if kind == "invalid":
            why = t.validate(text)
            if why is None or why == UNDECIDED:
                return None
            found = check_invalid(t.backend, t.compiled, t.spec, t.vocab, text, why, True)
        else:
            walk, whole = _walk_ids(t, ids)
            if not whole:
                return None
            found = check_walk(t, walk, "canonical")
    except (ValueError, BackendFault):
        return None
    same = [x for x in found if signature(x, _grammar(x, grammar_of)) == sig]
    return min(same, key=_witness_size) if same else None


def _witness_size(f: Finding) -> tuple[int, int]:
    cert = f.certificate or {}
    w = cert.get("witness") or cert.get("completion") or b""
    return (len(w) if isinstance(w, bytes) else 0, len(f.prefix_bytes))
