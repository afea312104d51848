"""Lexeme coverage and numbers in all their forms: masks compared inside the lexemes, where quiet number
defects live, not only at grammar positions.

Theory of operation. Grammar positions (:mod:`props.checks.coverage`) count a number or a string as
one node; the defects that hide behind loud ones sit *inside* the lexeme: after the seventh fraction
digit, one digit past a ``maximum``'s spelling, at ``1.25`` of an ``enum`` that also holds ``1.251``.

* **Lexeme targets** (:func:`lexeme_targets`) are read off a valid text and the byte offsets where
  masks are compared (token boundaries): at each offset inside or at the end of a number, the number
  automaton's state as a class (digit counts before and after the point in buckets ``1``, ``2-6``,
  ``7-19``/``7-30``, more; the exponent path; ``end``: the decision to continue or stop) and, for
  every constant the schema names (bounds, ``multipleOf``, numeric ``enum``/``const`` members), the
  boundary points of its spelling: each prefix, the full spelling (continue or stop) and past it;
  inside a string or key, escapes (``\\``, ``\\uXX`` partial) and the middle of a UTF-8 sequence by
  its length. The targets *found* on a spec are those of its valid texts with an offset at every
  byte; *compared* those at the walks' actual token boundaries.
* **Number instances** (:func:`number_instances`): each number of a valid text replaced by another
  spelling of a constant (``1.250``, ``125e-2``), a value one last digit away, a prefix or an extension
  of it, a long fraction (7–30 digits), a long integer (20–60 digits), a fraction or an exponent where
  an integer is expected. Each is kept only when the reference (the byte grammar) and the independent
  validator agree: valid ones are walked with masks compared at every byte of the number (so every
  boundary point of the spelling is compared), invalid ones must not finish. A disagreement is a
  self-check note, never an instance. Candidates that add the most targets not yet compared go first.
* **String and key states** (:func:`string_walks`): the valid texts holding an escape, a partial
  ``\\u`` or a UTF-8 sequence whose inner states no walk compared are walked again with a token
  boundary at every byte of those strings, most uncovered states first.
* **Steering around what is known** (:func:`steered`): a loud defect (``\\u`` escapes in keys blocked,
  raw control bytes, long whitespace) met earlier on the spec would end every walk built on a text
  that contains it before the number is reached. Number instances are therefore built on valid texts
  without the rare bytes of the tokens at known divergences (:func:`divergences`), re-serialized
  where needed; the note says which lexeme states were reached only that way. Each number walk has
  its own certificate budget (``Target.cap`` per kind), so the loud defect's certificates do not
  silence a quiet one.

``MASKCERT_NUMBER_TARGETS=off`` switches the number instances off (the "before" of the known-defects
benchmark, ``ci/known_defects.py``); lexeme coverage is still measured and reported.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from props.checks.invariants import Target, check_invalid, check_walk
from props.checks.targeted import target_spellings
from props.checks.witness import canonical_ids
from props.contract.findings import Finding, SpecRef
from props.corpus import CorpusError, serializations, validate_output
from refdecoder import Grammar, JsonProfile

__all__ = [
    "NumberInstance",
    "check_numbers",
    "lexeme_targets",
    "number_constants",
    "number_instances",
    "number_targets_enabled",
    "number_variants",
    "string_walks",
]

_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMERIC_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def number_targets_enabled() -> bool:
    """False when ``MASKCERT_NUMBER_TARGETS`` is ``off`` (or ``0``): the benchmark's "before"."""
    return os.environ.get("MASKCERT_NUMBER_TARGETS", "on").strip().lower() not in ("off", "0", "false")


# -- the constants a schema names -------------------------------------------------------------------
def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number_constants(schema: Any) -> list[str]:
    """The spellings (``json.dumps``) of every numeric bound, ``multipleOf`` and numeric ``enum`` or
    ``const`` member anywhere in ``schema``, in order of appearance, without repeats."""
    out: list[str] = []

    def visit(s: Any) -> None:
        if isinstance(s, list):
            for x in s:
                visit(x)
            return
        if not isinstance(s, dict):
            return
        for k in _NUMERIC_KEYWORDS:
            if _is_num(s.get(k)):
                out.append(json.dumps(s[k]))
        members = list(s["enum"]) if isinstance(s.get("enum"), list) else []
        if "const" in s:
            members.append(s["const"])
        out.extend(json.dumps(m) for m in members if _is_num(m))
        for k, v in s.items():
            if k not in ("enum", "const", "examples", "default") and isinstance(v, (dict, list)):
                visit(v)

    visit(schema)
    return [c for c in dict.fromkeys(out) if _NUMBER.fullmatch(c.encode())]


# -- lexeme targets ---------------------------------------------------------------------------------
def _bucket(n: int, long: int) -> str:
    return (
        "0"
        if n == 0
        else "1"
        if n == 1
        else "2-6"
        if n <= 6
        else f"7-{long}"
        if n <= long
        else f"{long + 1}+"
    )


def _number_class(p: bytes, end: bool) -> str:
    """The number automaton's state after the prefix ``p`` as a class (module doc)."""
    body = p.lstrip(b"-")
    mant, e, exp = body.lower().partition(b"e")
    whole, dot, frac = mant.partition(b".")
    name = "number:" + ("-" if p.startswith(b"-") else "") + f"int{_bucket(len(whole), 19)}"
    if dot:
        name += f".frac{_bucket(len(frac), 30)}"
    if e:
        digits = exp.lstrip(b"+-")
        name += "e" + ("sign" if len(digits) < len(exp) else "") + ("digits" if digits else "")
    return name + ("/end" if end else "")


def _constant_points(p: bytes, end: bool, constants: Sequence[bytes]) -> Iterator[str]:
    for c in constants:
        name = c.decode()
        if c == p:
            yield f"const {name}: " + ("whole, stop or continue" if end else "whole, continued")
        elif c.startswith(p):
            yield f"const {name}: prefix {len(p)}/{len(c)}"
        elif p.startswith(c):
            yield f"const {name}: past it" + (", stop" if end else "")


def _spans(text: bytes) -> Iterator[tuple[str, int, int]]:
    """``("number" | "string" | "key", start, end)`` of the JSON lexemes of a valid text."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == 0x22:  # '"'
            j = i + 1
            while j < n and text[j] != 0x22:
                j += 2 if text[j] == 0x5C else 1
            k = j + 1
            while k < n and text[k] in b" \t\r\n":
                k += 1
            yield ("key" if k < n and text[k] == 0x3A else "string"), i, j + 1
            i = j + 1
            continue
        if c == 0x2D or 0x30 <= c <= 0x39:
            m = _NUMBER.match(text, i)
            if m is not None and m.end() > i:
                yield "number", i, m.end()
                i = m.end()
                continue
        i += 1


def _string_class(kind: str, body: bytes) -> str | None:
    """The state of a string lexeme after ``body`` (its bytes after the opening quote), or None for
    plain characters."""
    tail = body[-6:]
    k = tail.rfind(b"\\")
    if k >= 0:
        run = len(tail[: k + 1]) - len(tail[: k + 1].rstrip(b"\\"))
        if run % 2 == 1:  # an escape still open
            rest = tail[k + 1 :]
            if rest.startswith(b"u") and len(rest) < 5:
                return f"{kind}:escape-u{len(rest) - 1}"
            if not rest:
                return f"{kind}:escape"
    for back in range(1, 4):
        if len(body) < back:
            break
        b = body[-back]
        if b & 0xC0 == 0x80:
            continue
        if b >= 0xC0:
            size = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            if back < size:
                return f"{kind}:utf8-{size}-mid{back}"
        break
    return None


def lexeme_targets(text: bytes, offsets: Iterable[int] | None, constants: Sequence[str] = ()) -> set[str]:
    """The lexeme targets (module doc) of ``text`` at the byte ``offsets`` where masks are compared
    (None: every offset)."""
    cs = [c.encode() for c in constants]
    at = set(range(len(text) + 1)) if offsets is None else set(offsets)
    out: set[str] = set()
    for kind, s, e in _spans(text):
        for o in sorted(x for x in at if s < x <= e):
            if kind == "number":
                p, end = text[s:o], o == e
                out.add(_number_class(p, end))
                out.update(_constant_points(p, end, cs))
            elif o < e:
                cls = _string_class(kind, text[s + 1 : o])
                if cls is not None:
                    out.add(cls)
    return out


def _boundaries(t: Target, ids: Sequence[int]) -> list[int]:
    out, n = [0], 0
    for i in ids:
        n += len(t.token_bytes(int(i)) or b"")
        out.append(n)
    return out


# -- steering around known divergences ----------------------------------------------------------------
def divergences(found: Iterable[Finding]) -> set[bytes]:
    """The rare bytes (a backslash, a raw control byte, a non-ASCII byte, whitespace) of the tokens at
    known mask divergences: a text without them avoids the defects already seen there (``\\u`` escapes
    in keys, raw control bytes, long whitespace), so its walk reaches the rest of the language."""
    out: set[bytes] = set()
    for f in found:
        if f.walk == "invalid-instance" or not f.token_bytes:
            continue
        out.update(bytes([b]) for b in f.token_bytes if b == 0x5C or b < 0x21 or b >= 0x80)
    return out


def steered(spec: SpecRef, valid: Sequence[bytes], known: set[bytes]) -> tuple[list[bytes], list[bytes]]:
    """Base texts for number instances: those of ``valid`` that contain no ``known`` divergence byte
    and, for each that does, a re-serialization that does not (all of ``valid`` when none is clean);
    and the re-serializations that stand in (what is reached from them alone is reached by steering)."""
    profile = _profile(spec)
    clean: list[bytes] = []
    dirty: list[bytes] = []
    respelled: list[bytes] = []
    for text in valid:
        if not any(k in text for k in known):
            clean.append(text)
            continue
        dirty.append(text)
        try:
            alts = serializations(json.loads(text), profile, spec.source)
        except ValueError:  # not JSON, or a number past a float's range (json.loads: infinity, unspellable)
            continue
        for alt in alts:
            b = alt.encode("utf-8")
            if not any(k in b for k in known):
                clean.append(b)
                respelled.append(b)
                break
    return list(dict.fromkeys(clean or dirty)), respelled


def _profile(spec: SpecRef) -> JsonProfile:
    try:
        return JsonProfile(**(spec.profile or {}))
    except (TypeError, ValueError):
        return JsonProfile()


# -- number instances -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NumberInstance:
    """A valid text with one number respelled: ``data``, the ``feature`` (``json_number/...``), the
    number's byte span ``[start, end)`` in ``data``, ``why``, the validator's objection ("" when
    valid), and the ``base`` text it respells."""

    data: bytes
    feature: str
    start: int
    end: int
    why: str
    base: bytes = b""


def _digit_step(c: str, delta: int) -> str | None:
    """``c`` with its last digit moved by ``delta`` (``1.25`` → ``1.26``), None past 0 or 9."""
    m = re.search(r"[0-9](?=(?:[eE][+-]?[0-9]+)?$)", c)
    if m is None:
        return None
    d = int(m.group()) + delta
    if not 0 <= d <= 9:
        return None
    out = c[: m.start()] + str(d) + c[m.end() :]
    return out if _NUMBER.fullmatch(out.encode()) else None


def _exponent_form(c: str) -> str | None:
    """``c`` as integer digits with a negative exponent (``1.25`` → ``125e-2``)."""
    try:
        d = Decimal(c)
    except InvalidOperation:
        return None
    sign, digits, exp = d.as_tuple()
    if not isinstance(exp, int) or exp >= 0:
        return None
    return ("-" if sign else "") + "".join(map(str, digits)).lstrip("0") + f"e{exp}" if any(digits) else None


def number_variants(constants: Sequence[str], integer: bool) -> Iterator[tuple[str, str]]:
    """``(feature, spelling)`` for the numbers of a slot: each constant's other spellings and its
    neighbours by one last digit, prefix or extension; long fractions and integers; fractions and
    exponents where ``integer`` (valid ones and invalid ones)."""
    for c in constants:
        yield "constant", c
        frac = "." in c and "e" not in c.lower()
        plain = re.fullmatch(r"-?[0-9]+", c) is not None
        if frac:
            yield "constant-trailing-zeros", c + "0"
            form = _exponent_form(c)
            if form is not None:
                yield "constant-exponent", form
        if plain:
            yield "constant-as-fraction", c + ".0"
            yield "constant-exponent", c + "0e-1"
        for delta in (1, -1):
            step = _digit_step(c, delta)
            if step is not None:
                yield "constant-last-digit", step
        if len(c) > 1 and _NUMBER.fullmatch(c[:-1].encode()):
            yield "constant-prefix", c[:-1]
        yield "constant-longer", c + ("1" if frac else ".5" if plain else "")
        if frac or plain:
            yield "constant-long-fraction", c + ("" if frac else ".") + "0" * 12 + "1"
    for n in (7, 16, 30):
        yield "long-fraction", "0." + "".join(str((i * 7 + 3) % 10) for i in range(n))
    for n in (20, 40, 60):
        yield "long-integer", "9" + "0" * (n - 1)
    if integer:
        yield from (
            ("integer-fraction", "2.0"),
            ("integer-fraction", "2.5"),
            ("integer-exponent", "2e0"),
            ("integer-exponent", "2E+1"),
            ("integer-exponent", "25e-1"),
            ("integer-exponent", "20e-1"),
        )


def _judged(spec: SpecRef, grammar: Grammar, data: bytes) -> tuple[bool, str]:
    """``(agreed, why)``: whether both judges agree on ``data``, and the validator's objection ("" when
    it accepts); when they disagree ``why`` is the self-check note."""
    try:
        why = validate_output(spec, data)
    except CorpusError:
        return False, ""
    ref = grammar.accepts(data)
    if (why is None) == ref:
        return True, why or ""
    side, other = ("accepts", "rejects") if ref else ("rejects", "accepts")
    return (
        False,
        f"number instance: the reference {side} {data[:80]!r} but the independent validator {other} it",
    )


def _integer_context(spec: SpecRef) -> bool:
    """Whether the schema names ``"integer"`` anywhere: then fractions and exponents are tried too
    (a loose test that only adds candidates; both judges decide each one)."""
    text = json.dumps(spec.source)
    return '"integer"' in text


def number_instances(
    spec: SpecRef, grammar: Grammar, valid: Sequence[bytes], *, max_slots: int = 4
) -> tuple[list[NumberInstance], list[str]]:
    """Each number of ``valid`` (the first few texts) respelled (:func:`number_variants`), judged by
    both judges; notes for disagreements."""
    if str(spec.kind) != "json_schema":
        return [], []
    constants = number_constants(spec.source)
    integer = _integer_context(spec)
    out: list[NumberInstance] = []
    notes: list[str] = []
    seen: set[bytes] = set(valid)
    slots = 0
    for text in valid[:3]:
        for kind, s, e in _spans(text):
            if kind != "number" or slots >= max_slots:
                continue
            slots += 1
            for feature, alt in number_variants(constants, integer):
                data = text[:s] + alt.encode() + text[e:]
                if data in seen:
                    continue
                seen.add(data)
                agreed, why = _judged(spec, grammar, data)
                if not agreed:
                    notes += [why] if why else []
                    continue
                out.append(NumberInstance(data, f"json_number/{feature}", s, s + len(alt), why, text))
    return out, notes


def _weight(new: set[str]) -> int:
    """What a walk adds: a constant's boundary point counts thrice (the rarest and quietest targets)."""
    return sum(3 if x.startswith("const ") else 1 for x in new)


def _walk_ids(t: Target, inst: NumberInstance) -> list[int] | None:
    """Tokens of a valid instance with a token boundary at every byte of its number."""
    return _ids_through(t, inst.data, [(inst.start, inst.end)], fallback=True)


def _ids_through(
    t: Target, data: bytes, spans: Sequence[tuple[int, int]], *, fallback: bool = False
) -> list[int] | None:
    """Tokens of ``data`` with a token boundary at every byte inside ``spans`` (sorted, disjoint) and
    the fewest tokens elsewhere; where some byte there has no one-byte token, the fewest tokens of the
    whole text when ``fallback``, else None."""
    out: list[int] = []
    at = 0
    for start, end in spans:
        head = t.vocab.index.fewest_tokens(data[at:start]) if start > at else []
        if head is None:
            return None
        out += map(int, head)
        for b in data[start:end]:
            one = t.vocab.index.fewest_tokens(bytes([b]))
            if one is None or len(one) != 1:
                if not fallback:
                    return None
                whole = t.vocab.index.fewest_tokens(data)
                return None if whole is None else [int(i) for i in whole]
            out.append(int(one[0]))
        at = end
    tail = t.vocab.index.fewest_tokens(data[at:]) if at < len(data) else []
    if tail is None:
        return None
    return [*out, *map(int, tail)]


def string_walks(
    t: Target,
    walked: Sequence[bytes],
    universe: set[str],
    covered: set[str],
    *,
    limit: int,
    until: float,
) -> list[Finding]:
    """Walks aimed at the string and key lexeme states no walk compared yet (escapes, ``\\u`` digits,
    the middle of a UTF-8 sequence by its length): the valid texts that hold such a state, most of them
    first, each walked with a token boundary at every byte of those strings; ``covered`` grows with
    what they reach. At most ``limit`` walks, until ``until`` (``time.monotonic()``)."""
    found: list[Finding] = []
    pool = []
    for d in walked:
        spans = [
            (s, e)
            for kind, s, e in _spans(d)
            if kind != "number" and lexeme_targets(d, range(s + 1, e + 1)) - covered
        ]
        if spans:
            pool.append((d, spans, lexeme_targets(d, None) & universe))
    made = 0
    while pool and made < limit and time.monotonic() <= until:
        pool.sort(key=lambda x: -len(x[2] - covered))
        d, spans, gain = pool.pop(0)
        if not gain - covered:
            break
        ids = _ids_through(t, d, spans)
        if ids is None:
            continue
        made += 1
        t.instances["valid/lexeme-walks"] += 1
        with _own_certificates(t):
            found += check_walk(t, ids, "lexeme")
        covered |= lexeme_targets(d, _boundaries(t, ids))
    return found


def check_numbers(
    t: Target,
    valid: Sequence[bytes],
    *,
    known: Sequence[Finding] = (),
    limit: int = 24,
    seconds: float = 6.0,
    deadline: float | None = None,
) -> list[Finding]:
    """Certify's lexeme step: the number instances of ``t`` (valid ones walked byte by byte through
    their number, invalid ones must not finish), and lexeme coverage of the valid texts, their other
    spellings (:func:`props.checks.targeted.spellings`, walked canonically) and the number instances,
    recorded on ``t`` (``lexemes/targets-*`` counts and a note). ``known`` are the findings so far on
    the spec (:func:`steered` builds around them); at most ``limit // 2`` instances each way, walked
    within ``seconds`` (with a run ``deadline``, ``time.monotonic()``: up to a quarter of the time left,
    at most 30 s)."""
    found: list[Finding] = []
    grammar = t.reference.grammar
    if str(t.spec.kind) != "json_schema":
        return found
    constants = number_constants(t.spec.source)
    others, _ = target_spellings(t, valid, limit=6)  # check_targeted's, computed once per target
    walked = list(dict.fromkeys([*valid, *(o.data for o in others)]))
    universe: set[str] = set()
    covered: set[str] = set()
    for d in walked:
        universe |= lexeme_targets(d, None, constants)
        ids = canonical_ids(t.vocab, d) or t.vocab.index.fewest_tokens(d)
        if ids:
            covered |= lexeme_targets(d, _boundaries(t, [int(i) for i in ids]), constants)
    made = 0
    if number_targets_enabled():
        avoid = divergences(known)
        bases, respelled = steered(t.spec, valid, avoid)
        instances, notes = number_instances(t.spec, grammar, bases)
        t.self_check.extend(f"{t.spec.name}: {n}" for n in notes)
        pool = [(i, lexeme_targets(i.data, None, constants)) for i in instances if not i.why]
        for inst, _ in pool:
            universe |= lexeme_targets(inst.data, None, constants)
        half = max(1, limit // 2)
        features: set[str] = set()
        by_steering: set[str] = set()
        if deadline is not None:
            seconds = max(seconds, min(30.0, (deadline - time.monotonic()) / 4))
        until = time.monotonic() + seconds
        engine_ms = sum(t.timings["backend_mask_ms"])
        # Invalid ones first: one mask each, cheap where an engine's masks cost seconds.
        for inst in [i for i in instances if i.why][:half]:
            if time.monotonic() > until:
                t.instance_notes.add(f"numbers: the {seconds:g} s budget ended")
                break
            t.checks["soundness"] += 1
            t.instances["invalid/numbers"] += 1
            found += [
                _labelled(f, inst)
                for f in check_invalid(t.backend, t.compiled, t.spec, t.vocab, inst.data, inst.why, True)
            ]
        while pool and made < half:  # most targets not yet compared first
            if time.monotonic() > until:
                t.instance_notes.add(f"numbers: the {seconds:g} s budget ended")
                break
            pool.sort(key=lambda x: -_weight(x[1] - covered - by_steering))
            inst, gain = pool.pop(0)
            if not gain - covered - by_steering and inst.feature in features:
                continue  # nothing new: neither a target nor a kind of spelling
            features.add(inst.feature)
            ids = _walk_ids(t, inst)
            if ids is None:
                continue
            made += 1
            t.instances["valid/numbers"] += 1
            with _own_certificates(t):
                found += [_labelled(f, inst) for f in check_walk(t, ids, "number")]
            reached = lexeme_targets(inst.data, _boundaries(t, ids), constants)
            (by_steering if inst.base in respelled else covered).update(reached)
        if respelled:
            only = sorted(by_steering - covered)
            t.instances["lexemes/targets-steered-only"] += len(only)
            shown = ", ".join(repr(k)[2:-1] for k in sorted(avoid))
            t.instance_notes.add(
                f"steered: number instances start from {len(respelled)} respelled text(s) without the bytes "
                f"of known divergences ({shown}); lexeme states reached only that way: {len(only)}"
                + (f" ({', '.join(only[:4])}{' ...' if len(only) > 4 else ''})" if only else "")
            )
        covered |= by_steering
        # Then the string and key states still not compared, with what is left of the step's time.
        found += string_walks(t, walked, universe, covered, limit=half, until=until)
        # The profile's phases (report.json ``profile.phases_s``): how much of this step the engine took.
        engine = (sum(t.timings["backend_mask_ms"]) - engine_ms) / 1000
        t.phases["number instances: engine masks"] = (
            t.phases.get("number instances: engine masks", 0.0) + engine
        )
    record_lexemes(t, universe, covered)
    return found


@contextmanager
def _own_certificates(t: Target) -> Iterator[None]:
    """One number instance's walk with its own certificate budget (``Target.cap`` per kind): the
    certificates a loud defect used up earlier on the spec do not silence a quiet one here."""
    before = t.certified
    t.certified = Counter()
    try:
        yield
    finally:
        t.certified = before + t.certified


def record_lexemes(t: Target, universe: set[str], covered: set[str]) -> None:
    """Lexeme coverage where the report shows it: ``lexemes/targets-*`` and ``lexemes/constants-*``
    (the constant boundary points) counts, found and compared, and a note naming a few targets not
    compared (``report.md``'s coverage per spec)."""
    covered = covered & universe
    t.instances["lexemes/targets-found"] += len(universe)
    t.instances["lexemes/targets-compared"] += len(covered)
    consts = {x for x in universe if x.startswith("const ")}
    t.instances["lexemes/constants-found"] += len(consts)
    t.instances["lexemes/constants-compared"] += len(consts & covered)
    pct = 100.0 * len(covered) / max(1, len(universe))
    missed = sorted(universe - covered)
    t.instance_notes.add(
        f"lexeme coverage: masks compared at {len(covered)} of {len(universe)} lexeme states ({pct:.0f}%; "
        f"constant boundaries {len(consts & covered)} of {len(consts)})"
        + (f"; not compared: {', '.join(missed[:4])}{' ...' if len(missed) > 4 else ''}" if missed else "")
    )


def _labelled(f: Finding, inst: NumberInstance) -> Finding:
    cert = {**(f.certificate or {}), "targets": inst.feature, "targets_at": f"bytes {inst.start}-{inst.end}"}
    extra: dict[str, Any] = {}
    if f.walk == "invalid-instance" and f.reference_allows is None and f.invariant == "soundness":
        extra["reference_allows"] = False
    return f.with_(certificate=cert, message=f"{f.message} [targets {inst.feature}]", **extra)
