"""The independent validators certificates rely on (docs/design.md §4, invariant 1): whether some bytes are in
the language of a spec, decided without ``refdecoder``'s compiler or matcher.

* JSON Schema: strict UTF-8, ``json.loads`` (duplicate keys seen through ``object_pairs_hook``,
  NaN/Infinity refused through ``parse_constant``, unpaired surrogate escapes refused), then the
  ``jsonschema`` validator of the schema's ``$schema`` draft (the profile's ``draft`` when it declares
  none: ``Draft4Validator`` ... ``Draft202012Validator``), draft-04 reading ``integer`` as a number
  written without a fraction or exponent, with format assertion when the profile asserts formats (one
  reading of each format in every draft, as the reference's); then the profile's own restrictions,
  each by a few lines of code here: whitespace, ``\\u`` escapes (none, or only of control characters
  under ``unicode_escapes="controls"``), property order, ``additionalProperties`` default. A profile
  with ``number_spelling="canonical"`` is refused (a :class:`CorpusError`): its integer rule depends
  on the reference's reading of the schema's number predicates, and no independent reading is here.
* Regex: a full match in ``re``'s reading (``refdecoder.Regex`` patterns are Python-flavoured; there
  is no other flavor), by :func:`pattern_search`.
* GBNF: ``props.corpus.gbnf_check``, a second GBNF reader with its own Earley recognizer.
* Choice: membership.
* Lark grammars and structural tags: not here (a :class:`CorpusError`: their outputs hold special
  tokens). Structural tags have their own checker, ``props.corpus.structural_tag_check`` (it reads
  text and token ids); Lark has none yet, and certification judges Lark outputs by the reference
  grammar and names it as the validator (``Target.validator_name``).

Patterns (``pattern``, ``patternProperties``, regex specs) are searched by a backtracking engine,
which takes exponential time on some pattern and text pairs (``((?:[a-z][\\w.-]+)+)$`` against a
long run of letters and a refused byte: a Github_trivial schema held a shard of the full dev-set run
for good). Every such search goes through :func:`pattern_search`: ``re`` itself, under a ``SIGALRM``
timer in the main thread; a search past :data:`PATTERN_SECONDS` is a :class:`CorpusError` (the
validator cannot judge that output: a self-check note, never a verdict).
"""

from __future__ import annotations

import functools
import json
import math
import re
import signal
import threading
from collections import OrderedDict
from decimal import Decimal
from fractions import Fraction
from typing import Any

from props.contract.findings import SPECIAL_TOKEN_KINDS, SpecRef
from props.corpus import _schema
from props.corpus._errors import CorpusError
from props.corpus._serialize import max_gap
from props.corpus.format_check import format_checker
from props.corpus.gbnf_check import gbnf_accepts
from refdecoder import JsonProfile

__all__ = [
    "validate_output",
    "validate_instance",
    "profile_of",
    "draft_validator",
    "validator_draft",
    "schema_validator",
]

_VALIDATORS: OrderedDict[tuple[str, bool, str, str, str, bool], Any] = OrderedDict()
_CACHE_SIZE = 256


def profile_of(spec: SpecRef) -> JsonProfile:
    """The ``JsonProfile`` a JSON spec names (the default when ``spec.profile`` is None)."""
    try:
        return JsonProfile(**(spec.profile or {}))
    except TypeError as e:
        raise CorpusError(
            f"spec {spec.name or spec.digest} profile", "the fields of JsonProfile", str(e)
        ) from e


class _Pairs(dict[str, Any]):
    """A parsed JSON object (last value of a repeated key wins, as ``json.loads``) that remembers
    its members in text order."""

    pairs: list[tuple[str, Any]]


def _hook(pairs: list[tuple[str, Any]]) -> _Pairs:
    obj = _Pairs(pairs)
    obj.pairs = pairs
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _float(text: str) -> Any:
    """A JSON number with a fraction or exponent: a float, or an exact ``Decimal`` when the float
    would overflow to infinity (``1E400`` is a finite JSON number, and an integer) or underflow to
    zero (``1e-400`` is above 0). Raises :class:`CorpusError` for an exponent past what a
    ``Decimal`` holds (10**18 and more in size: JSON allows it, but no exact reading here does)."""
    f = float(text)
    if not math.isinf(f) and (f != 0.0 or not any(c in "123456789" for c in text.lower().partition("e")[0])):
        return f
    try:
        return Decimal(text)
    except ArithmeticError:  # decimal.InvalidOperation: the exponent is past Decimal's range
        raise CorpusError(
            "number", "one whose exponent an exact decimal holds (below 10**18 in size)", text[:40]
        ) from None


def _parse(text: str) -> tuple[Any, str | None]:
    """The parsed value, or a reason it is not JSON (RFC 8259, no NaN/Infinity, no lone surrogates)."""
    try:
        value = json.loads(text, object_pairs_hook=_hook, parse_constant=_no_constant, parse_float=_float)
    except CorpusError:  # JSON, but a number no reading here holds exactly (_float)
        raise
    except ValueError as e:  # JSONDecodeError is a ValueError
        return None, f"not JSON: {e}"
    except RecursionError:
        return None, "not JSON: nested too deeply for the parser"
    for ptr, s in _strings(value, ""):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in s):
            return None, f"not JSON text of Unicode: unpaired surrogate escape in a string at {ptr or '/'}"
    return value, None


def parse_json_output(data: bytes) -> tuple[Any, str | None]:
    """An output's JSON value as the validators read it (numbers past a float's range exact, as
    ``Decimal``; objects remember their members' order), or a reason it is not JSON text. Raises
    :class:`CorpusError` for a number whose exponent no ``Decimal`` holds."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8: {e.reason} at byte {e.start}"
    return _parse(text)


def _strings(value: Any, ptr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    stack = [(ptr, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(v, str):
            out.append((p, v))
        elif isinstance(v, _Pairs):
            for k, x in v.pairs:
                out.append((p, k))
                stack.append((f"{p}/{_esc(k)}", x))
        elif isinstance(v, list):
            stack.extend((f"{p}/{i}", x) for i, x in enumerate(v))
    return out


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _objects(
    value: Any, schema: Any, root: Any, ptr: str = "", draft: str = "2020-12"
) -> list[tuple[str, _Pairs, Any]]:
    """Every object in ``value`` with its pointer and (when simply known) its schema, read in ``draft``."""
    out: list[tuple[str, _Pairs, Any]] = []
    stack = [(ptr, value, schema)]
    while stack:
        p, v, s = stack.pop()
        if isinstance(v, _Pairs):
            out.append((p, v, s))
            stack.extend((f"{p}/{_esc(k)}", x, _schema.child_for_key(s, root, k, draft)) for k, x in v.pairs)
        elif isinstance(v, list):
            stack.extend((f"{p}/{i}", x, _schema.child_for_index(s, root, i, draft)) for i, x in enumerate(v))
    return out


def _views(value: Any, first: bool) -> Any:
    """Plain values for ``jsonschema``: a repeated key keeps its last (or, with ``first``, its first) value."""
    if isinstance(value, _Pairs):
        out: dict[str, Any] = {}
        for k, x in value.pairs:
            if first and k in out:
                continue
            out[k] = _views(x, first)
        return out
    if isinstance(value, list):
        return [_views(x, first) for x in value]
    return value


_ECMA_CLASS = {"d": "0-9", "w": "A-Za-z0-9_"}
_ECMA_OUTSIDE = {"d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]", "W": "[^A-Za-z0-9_]"}


def ecma_digits(pattern: str) -> str:
    """``pattern`` (ECMA-262, as JSON Schema's ``pattern`` is) for Python's ``re``: ECMA's ``\\d`` and
    ``\\w`` are ASCII-only where Python's are Unicode-aware; everything else is left as written."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            if in_class and e in _ECMA_CLASS:
                out.append(_ECMA_CLASS[e])
            elif not in_class and e in _ECMA_OUTSIDE:
                out.append(_ECMA_OUTSIDE[e])
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def _is_number(checker: Any, instance: Any) -> bool:
    return isinstance(instance, Decimal) or (
        isinstance(instance, (int, float)) and not isinstance(instance, bool)
    )


def _is_integer(checker: Any, instance: Any) -> bool:
    if isinstance(instance, Decimal):
        return instance == instance.to_integral_value()
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())


def _is_integer_text(checker: Any, instance: Any) -> bool:
    """Draft-04's ``integer``: a number written without a fraction or exponent part
    (draft-zyp-json-schema-04 §3.5), which ``_parse`` alone turns into an ``int``."""
    return isinstance(instance, int) and not isinstance(instance, bool)


# Huge numbers arrive as Decimal (see _float): "number" and "integer" must know them.
_DECIMAL_TYPES = {"number": _is_number, "integer": _is_integer}
_DECIMAL_TYPES_DRAFT4 = {"number": _is_number, "integer": _is_integer_text}


def validator_draft(spec: SpecRef) -> str:
    """The draft the validator reads a JSON spec's schema in: its root ``$schema``, else the profile's."""
    return _schema.root_draft(spec.source, profile_of(spec).draft)


def draft_validator(draft: str) -> Any:
    """The ``jsonschema`` validator class of a ``JsonProfile.draft`` name."""
    import jsonschema

    classes = {
        "draft-04": jsonschema.Draft4Validator,
        "draft-06": jsonschema.Draft6Validator,
        "draft-07": jsonschema.Draft7Validator,
        "2019-09": jsonschema.Draft201909Validator,
        "2020-12": jsonschema.Draft202012Validator,
    }
    if draft not in classes:
        raise CorpusError("JSON Schema draft", f"one of {', '.join(classes)}", repr(draft))
    return classes[draft]


# json-schema.org meta-schema URIs in every spelling (http or https, "#" or not), which the reference
# reads alike; ``jsonschema`` knows one spelling of each (its meta-schemas' own ids).
_META_URI = re.compile(r"^https?://json-schema\.org/(draft-0[3-7]|draft/2019-09|draft/2020-12)/schema#?$")


def _canonical_metas(schema: Any) -> Any:
    """``schema`` with every json-schema.org ``$schema`` spelled as ``jsonschema`` knows it (the
    values of ``enum``, ``const``, ``default`` and ``examples`` are data, left as they are)."""

    def canon(uri: str) -> str:
        m = _META_URI.match(uri)
        if m is None:
            return uri
        name = m.group(1)
        return (
            f"http://json-schema.org/{name}/schema#"
            if name.startswith("draft-")
            else f"https://json-schema.org/{name}/schema"
        )

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (canon(v) if isinstance(v, str) else v)
                if k == "$schema"
                else (v if k in ("enum", "const", "default", "examples") else walk(v))
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


#: Seconds one pattern search may take (:func:`pattern_search`). An ordinary search takes microseconds,
#: even over long texts; a backtracking blow-up takes minutes to forever, so the margin is wide.
PATTERN_SECONDS = 0.25


class _SearchTimeout(Exception):
    """Raised by :func:`_alarm` in the search :func:`pattern_search` is running."""


def _alarm(signum: int, frame: Any) -> None:
    raise _SearchTimeout


def pattern_search(pattern: str, text: str, *, full: bool = False) -> bool:
    """Whether ``pattern`` matches in ``text`` (all of it with ``full``), searched by Python's ``re``
    with a timeout of :data:`PATTERN_SECONDS` (module doc). Raises ``re.error`` where ``re`` does and
    :class:`CorpusError` on a search that runs past the timeout.

    The timeout is a ``SIGALRM`` timer: ``re`` checks for signals while it backtracks, so the handler
    ends the search. Only the main thread receives signals, and a timer someone else set is left
    alone: there (another thread; a timer running) the search has no timeout. The ``regex`` package's
    timeout was used before, in its ``VERSION0`` mode; its ``\\w``, ``\\s`` and ``\\b`` are not
    ``re``'s (``²``, ``\\x1c``, U+0085, combining marks), and the validator then judged some outputs
    otherwise than the reference it checks."""
    compiled = re.compile(pattern)
    search = compiled.fullmatch if full else compiled.search
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]:
        return search(text) is not None
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, PATTERN_SECONDS)
            return search(text) is not None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _SearchTimeout as e:
        raise CorpusError(
            f"pattern {pattern[:60]!r}",
            f"a search a backtracking engine ends within {PATTERN_SECONDS:g} s",
            f"still backtracking on {len(text)} characters ({text[:40]!r}...)",
        ) from e
    finally:
        signal.signal(signal.SIGALRM, previous)


@functools.cache
def _extended(cls: Any, legacy_dependencies: bool) -> Any:
    """``cls`` (a ``jsonschema`` validator class) with the readings :func:`_validator` applies: ECMA
    ``\\d`` in patterns, exact ``multipleOf`` and decimal number types, and draft-07's
    ``dependencies`` when ``legacy_dependencies``. Built once per class and reading: a validator class
    is an attrs class, and creating one costs milliseconds."""
    import jsonschema

    original_multiple_of = cls.VALIDATORS["multipleOf"]
    original_pattern = cls.VALIDATORS["pattern"]
    original_pattern_properties = cls.VALIDATORS["patternProperties"]

    def pattern(validator: Any, p: Any, instance: Any, schema: Any) -> Any:
        if not isinstance(p, str) or not validator.is_type(instance, "string"):
            yield from original_pattern(validator, p, instance, schema)
            return
        q = ecma_digits(p)
        if not pattern_search(q, instance):  # jsonschema's pattern, with a timed search
            yield jsonschema.ValidationError(f"{instance!r} does not match {q!r}")

    def pattern_properties(validator: Any, pp: Any, instance: Any, schema: Any) -> Any:
        if not isinstance(pp, dict) or not validator.is_type(instance, "object"):
            yield from original_pattern_properties(validator, pp, instance, schema)
            return
        for p, subschema in pp.items():  # jsonschema's patternProperties, with timed searches
            q = ecma_digits(p)
            for k, v in instance.items():
                if pattern_search(q, k):
                    yield from validator.descend(v, subschema, path=k, schema_path=q)

    def multiple_of(validator: Any, d: Any, instance: Any, schema: Any) -> Any:
        if not isinstance(instance, Decimal):
            yield from original_multiple_of(validator, d, instance, schema)
            return
        exponent = instance.as_tuple().exponent
        if not isinstance(exponent, int) or abs(exponent) > 100_000:
            raise CorpusError("number", "one whose exact multipleOf check fits in memory", str(instance)[:40])
        if (Fraction(instance) / Fraction(str(d))).denominator != 1:
            yield jsonschema.ValidationError(f"{instance} is not a multiple of {d}")

    types = _DECIMAL_TYPES_DRAFT4 if cls is jsonschema.Draft4Validator else _DECIMAL_TYPES
    keywords = {"multipleOf": multiple_of, "pattern": pattern, "patternProperties": pattern_properties}
    if legacy_dependencies and "dependencies" not in cls.VALIDATORS:
        keywords["dependencies"] = jsonschema.Draft7Validator.VALIDATORS["dependencies"]
    return jsonschema.validators.extend(cls, keywords, type_checker=cls.TYPE_CHECKER.redefine_many(types))


def _validator(
    schema: Any,
    assert_formats: bool,
    strict: str,
    draft: str = "2020-12",
    legacy_dependencies: str = "apply",
    check_meta: bool = True,
) -> Any:
    """A cached ``jsonschema`` validator for ``schema`` read in its ``$schema`` draft, or ``draft``
    when it declares none; ``strict`` names the strict reading of absent keywords ("" none,
    "properties", "items": see ``_schema.strict_additional``). ``legacy_dependencies="apply"`` gives
    the 2019-09 and 2020-12 validators draft-07's ``dependencies`` (jsonschema's own function for it,
    which those validators leave out: the JSON-Schema-Test-Suite's optional compatibility reading).
    ``check_meta=False`` skips the meta-schema check (:func:`validate_instance`)."""
    import jsonschema

    key = (json.dumps(schema, sort_keys=True), assert_formats, strict, draft, legacy_dependencies, check_meta)
    v = _VALIDATORS.get(key)
    if v is not None:
        _VALIDATORS.move_to_end(key)
        return v
    schema = _canonical_metas(schema)
    cls = jsonschema.validators.validator_for(schema, default=draft_validator(draft))
    legacy_items = cls not in (jsonschema.Draft202012Validator,)  # array-form items + additionalItems
    doc = (
        _schema.strict_additional(schema, strict == "properties", strict == "items", legacy_items)
        if strict
        else schema
    )
    if check_meta:
        try:
            cls.check_schema(doc)
        except jsonschema.SchemaError as e:
            raise CorpusError("JSON Schema", f"a valid {cls.__name__[:-9]} schema", e.message[:200]) from e
    cls = _extended(cls, legacy_dependencies == "apply")
    formats = format_checker() if assert_formats else None  # RFC readings: props/corpus/format_check.py
    v = cls(doc, format_checker=formats)
    _VALIDATORS[key] = v
    if len(_VALIDATORS) > _CACHE_SIZE:
        _VALIDATORS.popitem(last=False)
    return v


def schema_validator(spec: SpecRef) -> Any:
    """The (cached) ``jsonschema`` validator :func:`validate_output` judges a JSON spec's schema with,
    without the profile's strict readings: its draft, its format assertion with the RFC checkers, its
    ``legacy_dependencies``. Raises :class:`CorpusError` for a schema its draft's meta-schema rejects."""
    p = profile_of(spec)
    return _validator(spec.source, p.formats == "assert", "", p.draft, p.legacy_dependencies)


_STRICT = {
    "properties": "profile additional_properties_default=False: ",
    "items": "profile additional_items_default=False: ",
}


def _schema_error(
    schema: Any, value: Any, profile: JsonProfile, strict: str, check_meta: bool = True
) -> str | None:
    import jsonschema
    import referencing.exceptions

    validator = _validator(
        schema, profile.formats == "assert", strict, profile.draft, profile.legacy_dependencies, check_meta
    )
    try:
        err = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except referencing.exceptions.Unresolvable as e:
        raise CorpusError("JSON Schema $ref", "references resolvable without a network", str(e)[:200]) from e
    if err is None:
        return None
    return f"{_STRICT.get(strict, '')}schema violation at {err.json_path}: {err.message[:200]}"


def _check_value(spec: SpecRef, value: Any, profile: JsonProfile, check_meta: bool = True) -> str | None:
    """``jsonschema`` on every view of the value (each value of a repeated key judged), then on the
    profile's strict readings of absent ``additionalProperties`` / ``items``, one at a time so the
    reason names the restriction."""
    views = [_views(value, first=False)]
    if any(len(o.pairs) != len(o) for _, o, _ in _objects(value, None, None)):
        views.append(_views(value, first=True))
    stricts = [""]
    if not profile.additional_properties_default:
        stricts.append("properties")
    if not profile.additional_items_default:
        stricts.append("items")
    for strict in stricts:
        for view in views:
            reason = _schema_error(spec.source, view, profile, strict, check_meta)
            if reason is not None:
                return reason
    return None


def _profile_text_error(text: str, value: Any, schema: Any, profile: JsonProfile) -> str | None:
    """The profile's restrictions on the text itself."""
    if not profile.top_level_whitespace and text != text.strip(" \t\n\r"):
        return "profile top_level_whitespace=False: whitespace around the value"
    if profile.whitespace == "none":
        if max_gap(text):
            return "profile whitespace='none': whitespace between tokens"
    elif isinstance(profile.whitespace, int):
        gap = max_gap(text)
        if gap > profile.whitespace:
            return f"profile whitespace={profile.whitespace}: a gap of {gap} whitespace characters"
    if profile.number_spelling != "any":
        raise CorpusError(
            "profile number_spelling",
            '"any": canonical number spellings have no independent validator here yet',
            repr(profile.number_spelling),
        )
    escapes = _u_escapes(text)
    if not profile.unicode_escapes and escapes:
        return "profile unicode_escapes=False: a \\uXXXX escape in a string"
    if profile.unicode_escapes == "controls":
        for cp in escapes:
            if cp > 0x1F:
                return f"profile unicode_escapes='controls': \\u{cp:04x} escapes a character that is not a control"
    draft = _schema.root_draft(schema, profile.draft)
    objects = _objects(value, schema, schema, draft=draft)
    if not profile.allow_duplicate_keys:
        for ptr, obj, _ in objects:
            seen: set[str] = set()
            for k, _x in obj.pairs:
                if k in seen:
                    return f"duplicate key {k!r} in the object at {ptr or '/'} (profile allow_duplicate_keys=False)"
                seen.add(k)
    if profile.property_order == "schema":
        for ptr, obj, s in objects:
            declared = _schema.declared_order(s, schema, draft)
            if declared is None:
                continue  # not a plain object schema here: the order is not judged
            rank = {k: i for i, k in enumerate(declared)}
            keys = [rank.get(k, len(declared)) for k, _ in obj.pairs]
            if keys != sorted(keys):
                order = ", ".join(repr(k) for k, _ in obj.pairs)
                return (
                    f"profile property_order='schema': keys {order} at {ptr or '/'} are not in schema order"
                )
    return None


def _u_escapes(text: str) -> list[int]:
    """The value of every ``\\uXXXX`` escape in the strings of ``text`` (valid JSON), in order."""
    out: list[int] = []
    in_str = esc = False
    for i, c in enumerate(text):
        if not in_str:
            in_str = c == '"'
        elif esc:
            if c == "u":
                out.append(int(text[i + 1 : i + 5], 16))
            esc = False
        elif c == "\\":
            esc = True
        elif c == '"':
            in_str = False
    return out


def _source_text(spec: SpecRef, kind: str) -> tuple[str, str]:
    src = spec.source
    if kind == "gbnf" and isinstance(src, dict):
        text, root = src.get("text"), src.get("root", "root")
    else:
        text, root = src, "root"
    if not isinstance(text, str) or not isinstance(root, str):
        raise CorpusError(
            f"spec {spec.name or spec.digest}", f"a {kind} source given as a string", repr(src)[:80]
        )
    return text, root


def validate_output(spec: SpecRef, data: bytes) -> str | None:
    """None when ``data`` is in the language of ``spec``, else a one-line reason. Raises
    :class:`CorpusError` when the spec itself cannot be judged (malformed schema, pattern, grammar,
    or a ``$ref`` that needs the network), and for the kinds that have no independent validator yet
    (``lark``, ``structural_tag``: their outputs hold special tokens, which no validator here reads)."""
    if spec.kind in SPECIAL_TOKEN_KINDS:
        raise CorpusError(
            f"spec {spec.name or spec.digest}",
            "a json_schema, regex, gbnf or choice spec (the kinds with an independent validator)",
            f"a {spec.kind} spec: no independent validator reads it yet",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8: {e.reason} at byte {e.start}"
    if spec.kind == "choice":
        options = spec.source
        if not isinstance(options, (list, tuple)) or not all(isinstance(o, str) for o in options):
            raise CorpusError(
                f"spec {spec.name or spec.digest}", "a choice source given as a list of strings"
            )
        return None if text in options else f"{text[:80]!r} is not one of the {len(options)} choices"
    if spec.kind == "regex":
        pattern, _ = _source_text(spec, "regex")
        try:
            ok = pattern_search(pattern, text, full=True)
        except re.error as e:
            raise CorpusError(f"regex {pattern[:60]!r}", "a Python regular expression", str(e)) from e
        return None if ok else f"{text[:80]!r} does not fully match /{pattern[:80]}/"
    if spec.kind == "gbnf":
        grammar, root = _source_text(spec, "gbnf")
        try:
            ok = gbnf_accepts(text, grammar, root)
        except (ValueError, KeyError, IndexError) as e:
            raise CorpusError(f"GBNF grammar {spec.name or spec.digest}", "a GBNF grammar", str(e)) from e
        return None if ok else f"{text[:80]!r} is not in the GBNF language (independent Earley recognizer)"
    profile = profile_of(spec)
    value, reason = _parse(text)
    if reason is not None:
        return reason
    return _profile_text_error(text, value, spec.source, profile) or _check_value(spec, value, profile)


def validate_instance(spec: SpecRef, instance: Any, *, check_meta: bool = True) -> str | None:
    """:func:`validate_output` for a value: a JSON value for a schema (judged as a value: the
    profile's text restrictions do not apply, its ``additionalProperties`` default does), a string
    otherwise. ``check_meta=False`` skips the check of the schema against its draft's meta-schema,
    for schemas maskcert derives from a checked one only to propose candidates (targeted instances:
    a keyword removed, subschemas combined), where every verdict that reaches a finding is taken
    again against the checked original; the check costs ~5 ms per 2020-12 schema."""
    if spec.kind != "json_schema":
        if not isinstance(instance, str):
            return f"not a string: {type(instance).__name__}"
        return validate_output(spec, instance.encode("utf-8", "surrogatepass"))
    try:
        text = json.dumps(instance, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        return f"not a JSON value: {e}"
    value, reason = _parse(text)
    if reason is not None:
        return reason
    return _check_value(spec, value, profile_of(spec), check_meta)
