"""Targeted instances: invalid outputs aimed at one keyword or feature each, and valid outputs in the
spellings engines forget.

Theory of operation. A soundness defect that a backend hides by *silently ignoring* a keyword shows only
on an output that the keyword alone rules out. For every spec this module builds such outputs, labels
each with the feature it targets (``json_schema/not``, ``json_syntax/trailing-comma``,
``regex/near-miss/insertion``, ...) and keeps only those that two independent judges agree on: the
reference's byte grammar and :func:`props.corpus.validate_output` (``jsonschema``, ``re``, the second GBNF
parser). A disagreement between the two is never an instance: it is returned as a note (a bug in one of
them, reported as the report's ``self_check``).

* **JSON Schema, per keyword occurrence.** For each subschema ``S`` at pointer ``p`` a *context* is
  drawn (as fragment values are, below): an instance of the root schema in which ``S`` is replaced by a marker constant (the
  ancestors forced to reach it: ``required`` for a property, ``minItems`` for an item, the sibling
  branches of ``anyOf``/``oneOf`` set to ``false``). For each keyword ``k`` of ``S`` the *hole* is then
  filled with values valid against ``S`` without ``k`` but invalid with it: values of the fragment
  ``allOf: [S - k, {"not": {k: ...}}]`` (the keyword's own dependencies, such as ``properties`` next to
  ``additionalProperties``, travel with it) or of a keyword-specific fragment where a complement is
  not what is wanted (``contains``, ``uniqueItems``, ``additionalProperties``, ``oneOf``), and boundary
  values (``maxLength+1``, ``minimum`` just below, off-by-one ``multipleOf``, ``const``/``enum``
  neighbours, an ``enum`` member a sibling ``type`` excludes, format-invalid strings, ...). A fragment's
  values are structural examples built from its keywords (:func:`_examples`) and, for a string
  fragment, strings the reference draws from its exact automaton (breadth first over a small
  alphabet, then random walks: ``pattern`` and ``format`` complements); ``jsonschema`` keeps the valid
  ones. An instance is kept when ``jsonschema`` says the whole output is valid against the root with
  ``k`` removed at ``p`` and invalid against the root itself (so its label is the keyword's), and when
  the reference, if it compiled the spec, rejects it too (a disagreement is a note, never an instance).
* **JSON syntax near misses** of valid texts (a trailing comma, a missing colon or comma, a leading zero,
  a bad escape, a raw control character, an unclosed or doubled bracket, a single-quoted string).
* **Other legal spellings** of valid texts (:func:`spellings`): ``\\/``, ``\\u0041``, ``-0``, exponents,
  ``1.0`` for an integer, a string grown around an unanchored ``pattern`` match — valid outputs whose
  masks are compared too, so completeness is checked where engines cut corners.
* **Regex, GBNF and choice near misses** of valid strings (the case's own and strings the reference
  draws): truncations, single-byte deletions, insertions and substitutions, and a repeated character
  (one past a repetition bound).

Everything is deterministic for a given seed and bounded in count (and in seconds: a slow machine may
stop early); results are cached per (spec, profile, valid texts).
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import refdecoder
from props.checks.invariants import Target, check_invalid, check_walk
from props.checks.witness import canonical_ids
from props.contract.backend import Backend, Compiled
from props.contract.findings import Finding, SpecRef
from props.corpus import CorpusError, serializations, validate_instance, validate_output, validator_draft
from refdecoder import Grammar, JsonProfile
from tokenizers_matrix import Vocabulary

__all__ = [
    "Targeted",
    "TargetedSet",
    "targeted_invalid",
    "spellings",
    "target_spellings",
    "FORMAT_INVALID",
    "FORMAT_VALID",
    "check_targeted",
    "check_targeted_refusal",
    "complete_bytes",
    "MARK",
]

MARK = "maskcert-hole-7f3a"  # the marker constant a context carries where the hole is
_PLAIN = JsonProfile(allow_duplicate_keys=True)  # how the reference draws values (any spelling)
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$id",
        "$schema",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        # Decided only together with their partner keyword (see _DEPENDS).
        "if",
        "prefixItems",
        "patternProperties",
    }
)
# Keywords whose meaning depends on a sibling: the sibling travels with the keyword into the "not".
_DEPENDS: dict[str, tuple[str, ...]] = {
    "additionalProperties": ("properties", "patternProperties"),
    "items": ("prefixItems",),
    "additionalItems": ("items",),
    "then": ("if",),
    "else": ("if",),
    "minContains": ("contains",),
    "maxContains": ("contains",),
}
# Strings each format rejects (checked against jsonschema's format checker before use).
FORMAT_INVALID: dict[str, tuple[str, ...]] = {
    "date-time": ("2024-13-01T00:00:00Z", "2024-01-01 00:00:00", "2024-01-01T25:00:00Z", "2024-01-01"),
    "date": ("2024-02-30", "2024-1-01", "20240101", "2024-13-01"),
    "time": ("25:00:00Z", "12:00", "12:00:60+00:00x", "12:00:00"),
    "duration": ("P", "1D", "PT", "P1Y2"),
    "email": ("a", "@example.com", "a@", "a b@example.com"),
    "idn-email": ("a", "@example.com", "a@"),
    "hostname": ("-a.example", "a..b", "a_b.example", "a" * 64),
    "idn-hostname": ("-a.example", "a..b"),
    "ipv4": ("256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5"),
    "ipv6": ("1:2:3", "::1::", "12345::", "g::1"),
    "uri": ("a b", "//example.com", "example", "http://exa mple.com"),
    "uri-reference": ("a b", "http://exa mple.com", "\\\\"),
    "iri": ("a b", "example"),
    "iri-reference": ("a b",),
    "uri-template": ("{", "a{b"),
    "uuid": ("123", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"),
    "json-pointer": ("a", "/~2", "~"),
    "relative-json-pointer": ("/a", "-1", "01"),
    "regex": ("(", "[a-", "*"),
}
_TYPE_SAMPLES: dict[str, tuple[Any, ...]] = {
    "null": (None,),
    "boolean": (True, False),
    "integer": (1, 0),
    "number": (1.5, -0.25),
    "string": ("a", ""),
    "array": ([], [1]),
    "object": ({}, {"a": 1}),
}


@dataclass(frozen=True)
class Targeted:
    """One targeted output: ``data`` (bytes), the ``feature`` it targets (a matrix feature id such as
    ``json_schema/maxLength``), ``where`` in the spec (a JSON pointer to the keyword, or the edit),
    and ``why``, the independent validator's objection ("" for a valid spelling)."""

    data: bytes
    feature: str
    where: str
    why: str

    def label(self) -> str:
        return f"{self.feature} at {self.where}" if self.where else self.feature


@dataclass(frozen=True)
class TargetedSet:
    """What :func:`targeted_invalid` produced: the instances, and notes (judges that disagreed, sources
    that produced nothing) for the report."""

    instances: tuple[Targeted, ...]
    notes: tuple[str, ...]


_CACHE: OrderedDict[str, TargetedSet] = OrderedDict()
_CACHE_SIZE = 64


def _key(spec: SpecRef, valid: Sequence[bytes], limit: int, seed: int, with_reference: bool) -> str:
    return json.dumps(
        [str(spec.kind), spec.source, spec.profile, [v.hex() for v in valid], limit, seed, with_reference],
        sort_keys=True,
        default=str,
    )


def targeted_invalid(
    spec: SpecRef,
    grammar: Grammar | None,
    valid: Sequence[bytes] = (),
    *,
    limit: int = 40,
    seconds: float = 4.0,
    seed: int = 0,
) -> TargetedSet:
    """Invalid outputs of ``spec`` (judged under its profile), each aimed at one feature; ``grammar``
    is the reference's byte grammar for the same profile, or None when the reference refused the spec
    (then the independent validator alone judges). ``valid`` are valid texts to start near misses from."""
    key = _key(spec, valid, limit, seed, grammar is not None)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    job = _Job(spec, grammar, random.Random(f"targeted/{seed}"), time.monotonic() + seconds)
    kind = str(spec.kind)
    if kind == "json_schema":
        texts = list(dict.fromkeys([*job.drawn_texts(2), *valid]))
        per_source = max(1, limit // 2)
        job.json_keywords(per_source)
        job.json_syntax(texts, limit - len(job.out))
    else:
        texts = list(valid) + job.drawn_texts()
        job.near_misses(texts, limit)
    result = TargetedSet(tuple(job.out[:limit]), tuple(sorted(set(job.notes))))
    _CACHE[key] = result
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


class _Job:
    """One spec's targeted instances under construction (see the module doc)."""

    def __init__(self, spec: SpecRef, grammar: Grammar | None, rng: random.Random, deadline: float) -> None:
        self.spec = spec
        self.grammar = grammar
        self.rng = rng
        self.deadline = deadline
        self.out: list[Targeted] = []
        self.notes: list[str] = []
        self.seen: set[bytes] = set()
        self.profile = _profile(spec)

    def late(self) -> bool:
        return time.monotonic() > self.deadline

    @functools.cached_property
    def draft(self) -> str:
        """The draft the validator reads the spec in (its root ``$schema``, else its profile's)."""
        return validator_draft(self.spec)

    # -- judging ----------------------------------------------------------------------------------
    def judge_invalid(self, data: bytes, feature: str, where: str) -> bool:
        """Keep ``data`` when both judges reject it; note it when they disagree."""
        if data in self.seen:
            return False
        self.seen.add(data)
        try:
            why = validate_output(self.spec, data)
        except CorpusError as e:
            self.notes.append(f"targeted: the independent validator cannot judge {data[:60]!r}: {e}")
            return False
        if why is None:
            return False
        if self.grammar is not None and self.grammar.accepts(data):
            self.notes.append(
                f"targeted ({feature}): the reference accepts {data[:80]!r} but the independent "
                f"validator rejects it: {why[:160]}"
            )
            return False
        self.out.append(Targeted(data, feature, where, why))
        return True

    # -- drawing values ---------------------------------------------------------------------------
    def draw(self, g: Grammar, n: int) -> list[bytes]:
        """Strings of ``g``: a breadth-first search over a small alphabet (structure, ``0``, ``1``,
        ``9``, ``a``; other printable bytes only where none of those is live), then ``n - 1`` random
        walks each finished that way."""
        out: list[bytes] = []
        first = complete_bytes(g, g.initial())
        if first is not None:
            out.append(first)
        for _ in range(max(0, n - 1)):
            if self.late():
                break
            s = g.initial()
            path = bytearray()
            for _step in range(self.rng.randint(1, 16)):
                live = g.live_bytes(s)
                if not live:
                    break
                weights = [6.0 if 0x21 <= b < 0x7F else 0.5 if b < 0x80 else 0.2 for b in live]
                b = self.rng.choices(list(live), weights=weights)[0]
                nxt = g.advance_byte(s, b)
                if nxt is None:  # pragma: no cover - live_bytes offers live bytes only
                    break
                s = nxt
                path.append(b)
            rest = complete_bytes(g, s)
            if rest is not None:
                out.append(bytes(path) + rest)
        return list(dict.fromkeys(out))

    def drawn_texts(self, n: int = 3) -> list[bytes]:
        """Valid texts to start near misses from: for a schema, examples (all declared properties
        present) in the profile's spelling; otherwise strings the reference draws."""
        if str(self.spec.kind) == "json_schema":
            root = self.spec.source
            out = []
            for v in self.values(root, n=n, full=True, derived=False):
                out += [t.encode("utf-8") for t in serializations(v, self.profile, root)[:1]]
            return out
        if self.grammar is None:
            return []
        return self.draw(self.grammar, n)

    def values(
        self,
        schema: Any,
        n: int = 3,
        formats: Literal["annotation", "assert"] = "annotation",
        full: bool = False,
        derived: bool = True,
    ) -> list[Any]:
        """Up to ``n`` JSON values valid against ``schema`` (``jsonschema`` judges): structural examples
        (:func:`_examples`), and for a string schema strings the reference draws. A ``derived`` schema
        (made here from the root) is not checked against its meta-schema again: its values are
        candidates, which :meth:`labelled` judges against the root."""
        if self.late():
            return []
        cands = _examples(schema, schema, 0, full)
        if _stringy(schema):
            try:
                g = refdecoder.compile(
                    refdecoder.JsonSchema(schema, JsonProfile(allow_duplicate_keys=True, formats=formats))
                )
            except refdecoder.MaskcertError:
                g = None
            for data in self.draw(g, 3) if g is not None else []:
                try:
                    cands.append(json.loads(data))
                except ValueError:
                    continue
        out: list[Any] = []
        keys: set[str] = set()
        for v in cands:
            key = json.dumps(v, sort_keys=True)
            if key in keys:
                continue
            keys.add(key)
            if _valid(schema, v, formats == "assert", check_meta=not derived, draft=self.draft):
                out.append(v)
                if len(out) >= n:
                    break
        return out

    # -- JSON Schema keywords ---------------------------------------------------------------------
    def json_keywords(self, limit: int) -> None:
        root = self.spec.source
        if not isinstance(root, dict):
            return
        start = len(self.out)
        for path, sub in _locations(root):
            if self.late() or len(self.out) - start >= limit:
                return
            context = self.context(root, path)
            if context is None:
                continue
            ctx, hole = context
            for k in list(sub):
                if k in _ANNOTATIONS or self.late() or len(self.out) - start >= limit:
                    continue
                self.keyword(root, path, sub, k, ctx, hole)

    def context(self, root: dict[str, Any], path: list[Any]) -> tuple[Any, list[Any]] | None:
        """An instance of the root with a marker where the subschema at ``path`` applies, and the
        instance path of the marker; None when the reference cannot draw one."""
        if not path:
            return MARK, []
        forced = _force(root, path)
        if forced is None:
            return None
        for value in self.values(forced, n=4):
            where = _find(value, MARK)
            if where is not None:
                return value, where
        return None

    def keyword(
        self, root: dict[str, Any], path: list[Any], sub: dict[str, Any], k: str, ctx: Any, hole: list[Any]
    ) -> None:
        pointer = "/" + "/".join(_esc(str(p)) for p in [*path, k])
        without = _replace(root, path, {x: v for x, v in sub.items() if x != k})
        if without is None:
            return
        feature = f"json_schema/format/{sub[k]}" if k == "format" else f"json_schema/{k}"
        kept = 0
        for v in self.candidates(root, sub, k):
            if kept >= 2 or self.late():
                return
            value = _plug(ctx, hole, v)
            if not self.labelled(value, without):
                continue
            for text in serializations(value, self.profile, root)[:1]:
                if self.judge_invalid(text.encode("utf-8"), feature, pointer):
                    kept += 1

    def labelled(self, value: Any, without: Any) -> bool:
        """Valid against the root with the keyword removed, invalid against the root: the keyword's.
        The root without the keyword is not checked against its meta-schema again; the root is."""
        plain = {**(self.spec.profile or {}), "whitespace": "any", "top_level_whitespace": True}
        try:
            if (
                validate_instance(SpecRef(self.spec.kind, without, "", "", plain), value, check_meta=False)
                is not None
            ):
                return False
            return (
                validate_instance(SpecRef(self.spec.kind, self.spec.source, "", "", plain), value) is not None
            )
        except (CorpusError, RecursionError):
            return False

    def candidates(self, root: dict[str, Any], sub: dict[str, Any], k: str) -> Iterator[Any]:
        """Values for the hole: valid without ``k`` (the caller checks), aimed at breaking ``k``."""
        rest = {x: v for x, v in sub.items() if x != k}
        defs: dict[str, Any] = {d: root[d] for d in ("$defs", "definitions") if d in root}
        val = sub[k]

        def frag(*parts: Any) -> dict[str, Any]:
            return {**defs, "allOf": [rest, *parts]}

        if not _portable(sub):  # a "$ref" into the root's structure would point into the fragment
            yield from _boundaries(k, val, sub)
            return

        yield from _boundaries(k, val, sub)
        if k == "not":
            yield from self.values(frag(val))
        elif k == "oneOf" and isinstance(val, list):
            for i in range(len(val)):
                for j in range(i + 1, min(len(val), 4)):
                    yield from self.values(frag(val[i], val[j]), n=2)
        elif k == "contains":
            yield from self.values(frag({"items": {"not": val}}), n=2)
        elif k == "uniqueItems" and val is True:
            for arr in self.values(frag({"type": "array", "minItems": 1}), n=3):
                if isinstance(arr, list) and arr:
                    yield [*arr, arr[-1]]
                    yield [arr[0], *arr]
        elif k == "additionalProperties":
            extra = _fresh_key(sub)
            part: dict[str, Any] = {"required": [extra]}
            if val is not False:
                part["properties"] = {extra: {"not": val}}
            yield from self.values(frag(part), n=2)
        elif k == "propertyNames" and isinstance(val, dict):
            for name in _names(val):
                yield from self.values(frag({"required": [name]}), n=1)
        elif k in ("minContains", "maxContains") and "contains" in sub and isinstance(val, int):
            bound = {"maxContains": val - 1} if k == "minContains" else {"minContains": val + 1}
            if k == "minContains" and val <= 1:
                part = {"items": {"not": sub["contains"]}}
            else:
                part = {"contains": sub["contains"], **bound}
            yield from self.values(frag(part), n=2)
        elif k == "dependentRequired" and isinstance(val, dict):
            for a, bs in val.items():
                for b in bs if isinstance(bs, list) else []:
                    yield from self.values(frag({"required": [a], "properties": {b: False}}), n=1)
        elif k == "then" and "if" in sub:
            yield from self.values({**defs, "allOf": [rest, sub["if"], {"not": val}]}, n=2)
        elif k == "else" and "if" in sub:
            yield from self.values({**defs, "allOf": [rest, {"not": sub["if"]}, {"not": val}]}, n=2)
        elif k == "format" and isinstance(val, str):
            yield from self.values(frag({"not": {"format": val}}), n=2, formats="assert")
        elif k == "maxProperties" and isinstance(val, int):
            yield from self.values(frag({"minProperties": val + 1}), n=2)
        if k == "pattern" and isinstance(val, str):
            for s in self.values({**defs, **sub}, n=2):
                if isinstance(s, str):
                    yield from (s + "!", s[1:], "~" + s[:-1], "")
        depends = {d: sub[d] for d in _DEPENDS.get(k, ()) if d in sub}
        yield from self.values(frag({"not": {k: val, **depends}}), n=3)

    # -- JSON syntax near misses ------------------------------------------------------------------
    def json_syntax(self, texts: Sequence[bytes], limit: int) -> None:
        made = 0
        for data in texts[:3]:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            for feature, bad in _syntax_misses(text):
                if made >= limit:
                    return
                if self.judge_invalid(bad.encode("utf-8"), f"json_syntax/{feature}", ""):
                    made += 1

    # -- regex, GBNF and choice near misses --------------------------------------------------------
    def near_misses(self, texts: Sequence[bytes], limit: int) -> None:
        kind = str(self.spec.kind)
        per: dict[str, int] = {}
        for feature, bad in _edits(list(dict.fromkeys(texts))[:6], self.rng):
            if len(self.out) >= limit or self.late():
                return
            if per.get(feature, 0) >= max(2, limit // 5):
                continue
            if self.judge_invalid(bad, f"{kind}/near-miss/{feature}", ""):
                per[feature] = per.get(feature, 0) + 1


def _profile(spec: SpecRef) -> JsonProfile:
    try:
        return JsonProfile(**(spec.profile or {}))
    except (TypeError, refdecoder.MaskcertError):
        return JsonProfile()


# -- schema surgery -------------------------------------------------------------------------------
_MAX_LOCATIONS = 48


def _locations(root: dict[str, Any]) -> list[tuple[list[Any], dict[str, Any]]]:
    """Subschemas (as object schemas) with their paths from the root, breadth first; not inside ``not``,
    ``if``, ``propertyNames`` or ``contains`` (their instances are not the schema's)."""
    out: list[tuple[list[Any], dict[str, Any]]] = []
    queue: list[tuple[list[Any], Any]] = [([], root)]
    while queue and len(out) < _MAX_LOCATIONS:
        path, s = queue.pop(0)
        if not isinstance(s, dict):
            continue
        out.append((path, s))
        if len(path) > 10:
            continue
        for kw in ("properties", "$defs", "definitions", "dependentSchemas"):
            m = s.get(kw)
            if isinstance(m, dict):
                queue.extend(([*path, kw, name], x) for name, x in m.items())
        for kw in ("additionalProperties", "items", "then", "else", "additionalItems"):
            if isinstance(s.get(kw), dict):
                queue.append(([*path, kw], s[kw]))
        for kw in ("prefixItems", "allOf", "anyOf", "oneOf", "items"):
            xs = s.get(kw)
            if isinstance(xs, list):
                queue.extend(([*path, kw, i], x) for i, x in enumerate(xs))
    return out


def _get(root: Any, path: Sequence[Any]) -> Any:
    s = root
    for p in path:
        s = s[p]
    return s


def _replace(root: Any, path: Sequence[Any], new: Any) -> Any:
    """A copy of ``root`` with the subschema at ``path`` replaced by ``new``."""
    if not path:
        return new
    out = copy.deepcopy(root)
    parent = _get(out, path[:-1])
    parent[path[-1]] = new
    return out


def _force(root: dict[str, Any], path: list[Any]) -> Any:
    """``root`` with the marker at ``path`` and every ancestor made to reach it (module doc)."""
    out = _replace(root, path, {"const": MARK})
    i = 0
    while i < len(path):
        parent = _get(out, path[:i])
        kw = path[i]
        if not isinstance(parent, dict):
            return None
        if kw == "properties":
            name = path[i + 1]
            req = parent.get("required", [])
            parent["required"] = [*req, name] if name not in req else req
            i += 2
        elif kw in ("prefixItems",) or (kw == "items" and i + 1 < len(path) and isinstance(path[i + 1], int)):
            parent["minItems"] = max(int(parent.get("minItems", 0)), int(path[i + 1]) + 1)
            i += 2
        elif kw == "items":
            n = len(parent["prefixItems"]) if isinstance(parent.get("prefixItems"), list) else 0
            parent["minItems"] = max(int(parent.get("minItems", 0)), n + 1)
            i += 1
        elif kw == "additionalItems":
            n = len(parent["items"]) if isinstance(parent.get("items"), list) else 0
            parent["minItems"] = max(int(parent.get("minItems", 0)), n + 1)
            i += 1
        elif kw in ("anyOf", "oneOf"):
            branches = parent[kw]
            parent[kw] = [b if j == path[i + 1] else False for j, b in enumerate(branches)]
            i += 2
        elif kw == "additionalProperties":
            req = parent.get("required", [])
            parent["required"] = [*req, _fresh_key(parent)]
            i += 1
        elif kw == "dependentSchemas":
            req = parent.get("required", [])
            parent["required"] = [*req, path[i + 1]]
            i += 2
        elif kw in ("allOf", "$defs", "definitions"):
            i += 2
        else:  # then, else: reached when the drawn value happens to satisfy the condition
            i += 1
    return out


def _find(value: Any, mark: str, path: list[Any] | None = None) -> list[Any] | None:
    path = path or []
    if value == mark:
        return path
    if isinstance(value, dict):
        for k, v in value.items():
            found = _find(v, mark, [*path, k])
            if found is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _find(v, mark, [*path, i])
            if found is not None:
                return found
    return None


def _plug(ctx: Any, hole: list[Any], v: Any) -> Any:
    if not hole:
        return copy.deepcopy(v)
    out = copy.deepcopy(ctx)
    parent = _get(out, hole[:-1])
    parent[hole[-1]] = copy.deepcopy(v)
    return out


def _esc(s: str) -> str:
    return s.replace("~", "~0").replace("/", "~1")


def _fresh_key(schema: dict[str, Any]) -> str:
    """A key no ``properties`` declares and no ``patternProperties`` pattern matches."""
    declared = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
    patterns = (
        schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else {}
    )
    for name in ("zz_extra", "extra", "_", "Z9", "extra-key-1"):
        if name in declared:
            continue
        try:
            if any(re.search(p, name) for p in patterns):
                continue
        except re.error:
            continue
        return name
    return "zz_extra_unmatched"


def _names(schema: dict[str, Any]) -> list[str]:
    """Property names that break a ``propertyNames`` schema (checked by the caller's jsonschema)."""
    out = ["", "a", "A", "1", "-", "zz_extra", "é", "a b"]
    n = schema.get("maxLength")
    if isinstance(n, int):
        out.append("a" * (n + 1))
    m = schema.get("minLength")
    if isinstance(m, int) and m > 0:
        out.append("a" * (m - 1))
    for v in schema.get("enum", []) if isinstance(schema.get("enum"), list) else []:
        if isinstance(v, str):
            out += [v + "x", v[:-1]]
    return list(dict.fromkeys(out))


# -- boundary values -------------------------------------------------------------------------------
def _num(x: float) -> Any:
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


def _neighbours(v: Any) -> list[Any]:
    """Values next to ``v``: one character, one unit, one member away."""
    if isinstance(v, bool):
        return [not v, int(v), str(v).lower()]
    if isinstance(v, int):
        return [v + 1, v - 1, v + 0.5, str(v)]
    if isinstance(v, float):
        return [v + 0.5, v - 0.5, _num(v + 1), str(v)]
    if isinstance(v, str):
        out: list[Any] = [v + "x", v[:-1], " " + v, v.upper(), v.capitalize()]
        if v.isdigit():
            out.append(int(v))
        return [x for x in out if x != v]
    if v is None:
        return [0, "", False, "null"]
    if isinstance(v, list):
        return [v[:-1], [*v, v[0] if v else None]]
    if isinstance(v, dict):
        out2: list[Any] = [{**v, "zz_extra": 1}]
        if v:
            first = next(iter(v))
            out2.append({k: x for k, x in v.items() if k != first})
        return out2
    return []


def _boundaries(k: str, val: Any, sub: dict[str, Any]) -> Iterator[Any]:
    """Boundary values for one keyword (the caller keeps those valid without it and invalid with it)."""
    is_num = isinstance(val, (int, float)) and not isinstance(val, bool)
    if k == "maxLength" and isinstance(val, int):
        yield "a" * (val + 1)
        yield "é" * (val + 1)
    elif k == "minLength" and isinstance(val, int) and val > 0:
        yield "a" * (val - 1)
    elif k == "minimum" and is_num:
        yield from (_num(val - 1), val - 0.5, val - 0.001)
    elif k == "exclusiveMinimum" and is_num:
        yield from (val, _num(val - 1))
    elif k == "maximum" and is_num:
        yield from (_num(val + 1), val + 0.5, val + 0.001)
    elif k == "exclusiveMaximum" and is_num:
        yield from (val, _num(val + 1))
    elif k == "multipleOf" and is_num and val > 0:
        lo = sub.get("minimum", sub.get("exclusiveMinimum", 0))
        base = val * max(1, int(lo / val) + 1) if isinstance(lo, (int, float)) else val
        for x in (base + 1, base - 1, base + val / 2, base * 1.5, val / 2, _num(val + 1)):
            yield _num(x)
    elif k == "const":
        yield from _neighbours(val)
    elif k == "enum" and isinstance(val, list):
        for member in val[:6]:
            yield from _neighbours(member)
    elif k == "type":
        types = val if isinstance(val, list) else [val]
        for member in [*sub.get("enum", []), *([sub["const"]] if "const" in sub else [])]:
            yield member  # an enum member that the sibling type excludes
        for t, samples in _TYPE_SAMPLES.items():
            if t not in types and not (t == "integer" and "number" in types):
                yield from samples
        if "integer" in types and "number" not in types:
            yield 1.5
    elif k == "format" and isinstance(val, str):
        yield from FORMAT_INVALID.get(val, ())
    elif k in ("maxItems", "minItems") and isinstance(val, int):
        yield [0] * (val + 1) if k == "maxItems" else [0] * max(0, val - 1)
    elif k == "required" and isinstance(val, list):
        yield {}
    elif k == "contains":
        yield []


# -- JSON syntax near misses and other spellings --------------------------------------------------
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _scan(text: str) -> list[tuple[str, int, int]]:
    """JSON tokens of ``text`` as (kind, start, end): kind one of ``string``, ``number``, ``punct``,
    ``literal``; whitespace skipped. Assumes valid JSON."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\n\r":
            i += 1
        elif c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(("string", i, j + 1))
            i = j + 1
        elif c in "{}[]:,":
            out.append(("punct", i, i + 1))
            i += 1
        elif c == "-" or c.isdigit():
            m = _NUMBER.match(text, i)
            end = m.end() if m else i + 1
            out.append(("number", i, end))
            i = end
        else:
            j = i
            while j < len(text) and text[j].isalpha():
                j += 1
            out.append(("literal", i, max(j, i + 1)))
            i = max(j, i + 1)
    return out


def _syntax_misses(text: str) -> Iterator[tuple[str, str]]:
    toks = _scan(text)
    puncts = [(s, text[s]) for kind, s, _ in toks if kind == "punct"]
    closers = [s for s, c in puncts if c in "}]"]
    for s in closers:
        before = text[:s].rstrip(" \t\n\r")
        if before and before[-1] not in "{[":
            yield "trailing-comma", text[:s] + "," + text[s:]
            break
    for s, c in puncts:
        if c == ",":  # the output cut after its first separator, then closed: {"a":1,}
            yield "trailing-comma-cut", text[: s + 1] + _closers(text[:s])
            break
    colons = [s for s, c in puncts if c == ":"]
    if colons:
        yield "missing-colon", text[: colons[0]] + text[colons[0] + 1 :]
    commas = [s for s, c in puncts if c == ","]
    if commas:
        yield "missing-comma", text[: commas[0]] + text[commas[0] + 1 :]
    numbers = [(s, e) for kind, s, e in toks if kind == "number"]
    for s, _e in numbers[:1]:
        digit = s + 1 if text[s] == "-" else s
        yield "leading-zero", text[:digit] + "0" + text[digit:]
        yield "leading-plus", text[:s] + "+" + text[s:] if text[s] != "-" else text[:s] + "--" + text[s + 1 :]
        yield "bare-decimal-point", text[:s] + "." + text[s:]
    strings = [(s, e) for kind, s, e in toks if kind == "string"]
    for s, e in strings[:1]:
        yield "bad-escape", text[: s + 1] + "\\x" + text[s + 1 :]
        yield "raw-control-character", text[: s + 1] + "\x01" + text[s + 1 :]
        yield "raw-newline", text[: s + 1] + "\n" + text[s + 1 :]
        yield "single-quotes", text[:s] + "'" + text[s + 1 : e - 1] + "'" + text[e:]
        yield "unterminated-string", text[: e - 1]
        yield "short-unicode-escape", text[: s + 1] + "\\u12" + text[s + 1 :]
    stripped = text.rstrip(" \t\n\r")
    if stripped and stripped[-1] in "}]":
        yield "unclosed-bracket", stripped[:-1]
        yield "extra-closing-bracket", stripped + stripped[-1]
    literals = [(s, e) for kind, s, e in toks if kind == "literal"]
    for s, e in literals[:1]:
        yield "literal-typo", text[:s] + text[s:e].capitalize() + text[e:]
    yield "second-value", text + " " + text
    if not text.strip():  # pragma: no cover - a valid text is never blank
        return


def _closers(text: str) -> str:
    """The brackets that close what ``text`` (a JSON prefix ending outside a string) left open."""
    stack: list[str] = []
    for kind, s, _e in _scan(text):
        if kind == "punct" and text[s] in "{[":
            stack.append("}" if text[s] == "{" else "]")
        elif kind == "punct" and text[s] in "}]" and stack:
            stack.pop()
    return "".join(reversed(stack))


def target_spellings(t: Target, valid: Sequence[bytes], limit: int = 8) -> tuple[list[Targeted], list[str]]:
    """:func:`spellings` of ``t``'s spec, computed once per target and input (``Target.derived``):
    :func:`check_targeted` walks them and :func:`props.checks.lexemes.check_numbers` measures them."""
    key = ("spellings", tuple(valid), limit)
    if key not in t.derived:
        t.derived[key] = spellings(t.spec, t.reference.grammar, valid, limit=limit)
    out: tuple[list[Targeted], list[str]] = t.derived[key]
    return list(out[0]), list(out[1])


def spellings(
    spec: SpecRef, grammar: Grammar, valid: Sequence[bytes], limit: int = 8
) -> tuple[list[Targeted], list[str]]:
    """Valid outputs in spellings ``json.dumps`` does not write (module doc), each confirmed by both
    judges; notes for a spelling the independent validator accepts and the reference rejects."""
    out: list[Targeted] = []
    notes: list[str] = []
    seen = set(valid)
    if str(spec.kind) != "json_schema":
        return out, notes
    for data in valid[:3]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for feature, alt in _respell(text):
            b = alt.encode("utf-8")
            if b in seen or len(out) >= limit:
                continue
            seen.add(b)
            try:
                why = validate_output(spec, b)
            except CorpusError:
                continue
            if why is not None:
                continue
            if not grammar.accepts(b):
                notes.append(
                    f"spelling ({feature}): the independent validator accepts {b[:80]!r} but the reference rejects it"
                )
                continue
            out.append(Targeted(b, f"json_spelling/{feature}", "", ""))
    return out, notes


def _respell(text: str) -> Iterator[tuple[str, str]]:
    toks = _scan(text)
    for kind, s, e in toks:
        body = text[s:e]
        if kind == "string":
            if "/" in body:
                yield "escaped-solidus", text[:s] + body.replace("/", "\\/", 1) + text[e:]
            m = re.search(r"[A-Za-z]", body[1:-1])
            if m is not None and "\\" not in body[1 : m.start() + 1]:
                j = s + 1 + m.start()
                yield "unicode-escape", text[:j] + f"\\u{ord(text[j]):04x}" + text[j + 1 :]
                yield "unicode-escape-upper", text[:j] + f"\\u{ord(text[j]):04X}" + text[j + 1 :]
            yield "string-affix", text[: s + 1] + "x" + text[s + 1 : e - 1] + "x" + text[e - 1 :]
        elif kind == "number":
            if body in ("0", "-0"):
                yield "negative-zero", text[:s] + "-0" + text[e:]
                yield "zero-exponent", text[:s] + "0e5" + text[e:]
            if re.fullmatch(r"-?[0-9]+", body):
                yield "integer-as-float", text[:s] + body + ".0" + text[e:]
                yield "exponent", text[:s] + body + "e0" + text[e:]
                yield "exponent-upper-signed", text[:s] + body + "E+0" + text[e:]
                if body.lstrip("-") not in ("0",):
                    yield "fraction-exponent", text[:s] + body + "0e-1" + text[e:]
            elif "." in body and "e" not in body.lower():
                yield "exponent", text[:s] + body + "e0" + text[e:]
                yield "trailing-zero", text[:s] + body + "0" + text[e:]
    for kind, s, _e in toks:
        if kind == "punct" and text[s] in ",:[{":
            yield "whitespace", text[: s + 1] + " \n\t" + text[s + 1 :]
            break


# -- near misses of strings ------------------------------------------------------------------------
def _edits(texts: Sequence[bytes], rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Single edits of each text, kinds interleaved so that a limit keeps every kind."""
    per_text = [list(_edits_of(t, rng)) for t in texts]
    i = 0
    while any(i < len(x) for x in per_text):
        for xs in per_text:
            if i < len(xs):
                yield xs[i]
        i += 1


def _edits_of(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    n = len(data)
    positions = sorted({0, n // 2, max(0, n - 1), rng.randrange(n) if n else 0})
    fillers = b"a0Z_ -!\n"
    if n:
        yield "repetition", data + data[-1:]
        yield "truncation", data[:-1]
    for p in positions:
        if p < n:
            yield "repetition", data[:p] + data[p : p + 1] + data[p:]
            yield "deletion", data[:p] + data[p + 1 :]
            for c in fillers[:4]:
                if data[p] != c:
                    yield "substitution", data[:p] + bytes([c]) + data[p + 1 :]
        for c in fillers:
            yield "insertion", data[:p] + bytes([c]) + data[p:]
        yield "truncation", data[:p]
    yield "insertion", data + "é".encode()
    yield "insertion", data + b"\xff"


# -- structural examples ---------------------------------------------------------------------------
_TIER = frozenset(b'}]",:019a')
_WS = frozenset(b" \t\n\r")
# Valid strings of each format (jsonschema's checker and the reference's both accept them).
FORMAT_VALID: dict[str, str] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "12:00:00Z",
    "duration": "P1D",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "1.2.3.4",
    "ipv6": "::1",
    "uri": "http://example.com/a",
    "uri-reference": "/a",
    "iri": "http://example.com/a",
    "iri-reference": "/a",
    "uri-template": "/a/{b}",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "json-pointer": "/a",
    "relative-json-pointer": "0/a",
    "regex": "a+",
}


def complete_bytes(g: Grammar, state: Any, max_states: int = 1500) -> bytes | None:
    """Bytes taking ``state`` to acceptance: breadth first over a small alphabet (``_TIER``), other
    non-whitespace bytes only where none of it is live, whitespace only where nothing else is."""
    from collections import deque

    if state.accepting:
        return b""
    seen = {state}
    queue: deque[tuple[Any, bytes]] = deque([(state, b"")])
    while queue and len(seen) < max_states:
        s, path = queue.popleft()
        live = g.live_bytes(s)
        pick = [b for b in live if b in _TIER] or [b for b in live if b not in _WS][:6] or list(live)
        for b in pick:
            t = g.advance_byte(s, b)
            if t is None:  # pragma: no cover - live_bytes offers live bytes only
                continue
            if t.accepting:
                return path + bytes([b])
            if t not in seen:
                seen.add(t)
                queue.append((t, path + bytes([b])))
    return None


def _stringy(schema: Any) -> bool:
    return isinstance(schema, dict) and (
        schema.get("type") == "string" or ("pattern" in schema and "type" not in schema)
    )


def _valid(
    schema: Any, value: Any, formats: bool = False, *, check_meta: bool = True, draft: str | None = None
) -> bool:
    """``value`` is valid against ``schema`` read in its own ``$schema``'s draft, else ``draft`` (a
    fragment derived from a root carries no ``$schema``: it is read in the root's draft, not 2020-12,
    which reads a draft-07 ``items`` array as a schema)."""
    profile: dict[str, Any] = {"allow_duplicate_keys": True, "formats": "assert" if formats else "annotation"}
    if draft is not None:
        profile["draft"] = draft
    try:
        spec = SpecRef("json_schema", schema, "", "", profile)  # type: ignore[arg-type]
        return validate_instance(spec, value, check_meta=check_meta) is None
    except (CorpusError, RecursionError):
        return False


def _portable(schema: Any) -> bool:
    """Whether every ``$ref`` in ``schema`` names a ``$defs``/``definitions`` entry (which a fragment
    carries along), so that the subschema means the same outside its root."""
    stack = [schema]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            for k, v in s.items():
                if k in ("$ref", "$dynamicRef") and not (
                    isinstance(v, str) and (v.startswith("#/$defs/") or v.startswith("#/definitions/"))
                ):
                    return False
                stack.append(v)
        elif isinstance(s, list):
            stack.extend(s)
    return True


def _resolve(schema: Any, root: Any) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#"):
        return schema
    target: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return schema
    rest = {k: v for k, v in schema.items() if k != "$ref"}
    if not rest:
        return target
    return {"allOf": [rest, target]}


def _types_of(s: dict[str, Any]) -> list[str]:
    t = s.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    if any(
        k in s for k in ("properties", "required", "additionalProperties", "minProperties", "propertyNames")
    ):
        return ["object"]
    if any(k in s for k in ("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems")):
        return ["array"]
    if any(k in s for k in ("minLength", "maxLength", "pattern", "format")):
        return ["string"]
    if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return ["number"]
    return ["string", "integer", "object", "null"]


def _number(s: dict[str, Any], integer: bool) -> list[Any]:
    lo = s.get("minimum")
    xlo = s.get("exclusiveMinimum")
    hi = s.get("maximum")
    xhi = s.get("exclusiveMaximum")
    d = s.get("multipleOf")
    start: float = 0
    for bound, strict in ((lo, False), (xlo, True)):
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            start = (
                max(start, bound + (1 if strict and integer else 0.5 if strict else 0))
                if start
                else (bound + (1 if strict and integer else 0.5 if strict else 0))
            )
    top = hi if isinstance(hi, (int, float)) else xhi if isinstance(xhi, (int, float)) else None
    if top is not None and start > top:
        start = top - (1 if isinstance(xhi, (int, float)) else 0)
    out: list[Any] = []
    if isinstance(d, (int, float)) and not isinstance(d, bool) and d > 0:
        k = int(start // d) if start else 0
        for j in range(k, k + 3):
            out.append(_num(j * d))
    else:
        base = int(start) if integer and float(start).is_integer() else start
        out += [_num(base) if integer else base, _num(base + 1)]
        if not integer:
            out.append(base + 0.5)
    if integer:
        out = [int(x) if isinstance(x, float) and x.is_integer() else x for x in out]
    return out


def _examples(schema: Any, root: Any, depth: int = 0, full: bool = False) -> list[Any]:
    """Candidate values for ``schema`` built from its keywords (not necessarily valid: callers filter
    with ``jsonschema``); ``full`` puts every declared property in an object."""
    if schema is True:
        return ["a", 0, {}]
    if not isinstance(schema, dict) or depth > 8:
        return []
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return _examples(schema, root, depth + 1, full)
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"][:4])
    rest = {
        k: v for k, v in schema.items() if k not in ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
    }
    out: list[Any] = []
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = dict(rest)
        for b in schema["allOf"]:
            b = _resolve(b, root)
            if not isinstance(b, dict):
                continue
            for k, v in b.items():
                if k == "properties" and isinstance(v, dict):
                    merged["properties"] = {**merged.get("properties", {}), **v}
                elif k == "required" and isinstance(v, list):
                    merged["required"] = [*merged.get("required", []), *v]
                elif k not in merged:
                    merged[k] = v
        out += _examples(merged, root, depth + 1, full)
        for b in schema["allOf"]:
            out += _examples(b, root, depth + 1, full)[:2]
    for kw in ("anyOf", "oneOf"):
        if isinstance(schema.get(kw), list):
            for b in schema[kw][:6]:
                b = _resolve(b, root)
                both = {**rest, **b} if isinstance(b, dict) else b
                out += _examples(both, root, depth + 1, full)[:2]
    if "if" in schema and ("then" in schema or "else" in schema):
        for branch in ("then", "else"):
            if isinstance(schema.get(branch), dict):
                out += _examples({**rest, **schema[branch]}, root, depth + 1, full)[:2]
    if out and any(k in schema for k in ("allOf", "anyOf", "oneOf")):
        return out
    for t in _types_of(schema):
        if t == "null":
            out.append(None)
        elif t == "boolean":
            out += [True, False]
        elif t in ("integer", "number"):
            out += _number(schema, t == "integer")
        elif t == "string":
            out += _strings(schema)
        elif t == "array":
            out += _arrays(schema, root, depth, full)
        elif t == "object":
            out += _objects(schema, root, depth, full)
    return out


def _strings(s: dict[str, Any]) -> list[str]:
    fmt = s.get("format")
    out: list[str] = []
    if isinstance(fmt, str) and fmt in FORMAT_VALID:
        out.append(FORMAT_VALID[fmt])
    lo = s.get("minLength", 0)
    hi = s.get("maxLength")
    n = max(int(lo) if isinstance(lo, int) else 0, 1)
    if isinstance(hi, int):
        n = min(n, hi)
    out += ["a" * n, "ab"[: max(0, n)], "a" * (int(lo) if isinstance(lo, int) else 0)]
    return out


def _arrays(s: dict[str, Any], root: Any, depth: int, full: bool) -> list[Any]:
    prefix: list[Any] = s["prefixItems"] if isinstance(s.get("prefixItems"), list) else []
    items = s.get("items")
    if isinstance(items, list):  # draft-07 tuple form
        prefix, items = items, s.get("additionalItems", True)
    lo = s.get("minItems", 0)
    lo = lo if isinstance(lo, int) else 0
    head = [(_examples(p, root, depth + 1, full) or [None])[0] for p in prefix]
    out: list[Any] = []
    item_vals = _examples(items, root, depth + 1, full) if items is not False else []
    contains = _examples(s.get("contains"), root, depth + 1, full) if "contains" in s else []
    for k in (max(lo, len(head)), max(lo, len(head) + 1)):
        arr = list(head[:k])
        j = 0
        while len(arr) < k and item_vals:
            arr.append(item_vals[j % len(item_vals)] if s.get("uniqueItems") else item_vals[0])
            j += 1
        if len(arr) < k:
            continue
        if contains:
            arr = [*arr[: max(0, len(arr) - 1)], contains[0]] if arr else [contains[0]]
        out.append(arr)
    return out


def _objects(s: dict[str, Any], root: Any, depth: int, full: bool) -> list[Any]:
    props: dict[str, Any] = s["properties"] if isinstance(s.get("properties"), dict) else {}
    required: list[str] = (
        [r for r in s["required"] if isinstance(r, str)] if isinstance(s.get("required"), list) else []
    )
    out: list[Any] = []
    for keys in (
        ([*dict.fromkeys([*required, *props])], required)
        if full
        else (required, [*dict.fromkeys([*required, *props])])
    ):
        obj: dict[str, Any] = {}
        for k in keys:
            sub = props.get(k, s.get("additionalProperties", True))
            vals = _examples(sub, root, depth + 1, full)
            if not vals:
                break
            obj[k] = vals[0]
        else:
            lo = s.get("minProperties", 0)
            i = 0
            while isinstance(lo, int) and len(obj) < lo and i < 20:
                obj[f"zz{i}"] = 0
                i += 1
            out.append(obj)
    return out


# -- walking them through a backend ----------------------------------------------------------------
def _labelled(f: Finding, inst: Targeted) -> Finding:
    """``f`` with the feature its instance targets (certificate ``targets``, ``targets_at``); an
    invalid output that finished also says that the reference masks EOS there (its reproducer's verdict)."""
    cert = {**(f.certificate or {}), "targets": inst.feature, "targets_at": inst.where}
    extra: dict[str, Any] = {}
    if f.walk == "invalid-instance" and f.reference_allows is None and f.invariant == "soundness":
        extra["reference_allows"] = False
    return f.with_(certificate=cert, message=f"{f.message} [targets {inst.label()}]", **extra)


def check_targeted(
    t: Target, valid: Sequence[bytes], *, seed: int = 0, limit: int = 24, spell: int = 6, seconds: float = 3.0
) -> list[Finding]:
    """Walk ``t``'s targeted invalid instances (each must not finish: soundness) and its valid texts
    in other spellings (masks compared at every step) through the backend; counted in
    ``t.instances`` as ``invalid/targeted`` and ``valid/spellings``."""
    found: list[Finding] = []
    grammar = t.reference.grammar
    made = targeted_invalid(t.spec, grammar, valid, limit=limit, seconds=seconds, seed=seed)
    t.self_check.extend(n for n in made.notes if "reference accepts" in n)
    if not made.instances:
        t.instance_notes.add("invalid/targeted: no targeted instance both judges reject")
    for inst in made.instances:
        t.checks["soundness"] += 1
        t.instances["invalid/targeted"] += 1
        found += [
            _labelled(f, inst)
            for f in check_invalid(t.backend, t.compiled, t.spec, t.vocab, inst.data, inst.why, True)
        ]
    others, notes = target_spellings(t, valid, limit=spell)
    t.self_check.extend(f"{t.spec.name}: {n}" for n in notes)
    for inst in others:
        ids = canonical_ids(t.vocab, inst.data) or t.vocab.index.fewest_tokens(inst.data)
        if ids is None:
            continue
        t.instances["valid/spellings"] += 1
        found += [_labelled(f, inst) for f in check_walk(t, ids, "spelling")]
    return found


def check_targeted_refusal(
    backend: Backend,
    compiled: Compiled,
    spec: SpecRef,
    vocab: Vocabulary,
    valid: Sequence[Any] = (),
    *,
    seed: int = 0,
    limit: int = 24,
    seconds: float = 3.0,
) -> tuple[list[Finding], int]:
    """The reference refused ``spec`` and the backend compiled it: the backend must still not let a
    targeted invalid instance (judged by the independent validator alone) finish (``refusal``).
    ``valid`` are the case's valid instances (strings for a regex or grammar). Returns the findings
    and the number of instances walked."""
    texts = (
        [v.encode("utf-8") for v in valid if isinstance(v, str)] if str(spec.kind) != "json_schema" else []
    )
    made = targeted_invalid(spec, None, texts, limit=limit, seconds=seconds, seed=seed)
    found: list[Finding] = []
    for inst in made.instances:
        found += [
            _labelled(f, inst)
            for f in check_invalid(backend, compiled, spec, vocab, inst.data, inst.why, False)
        ]
    return found, len(made.instances)
