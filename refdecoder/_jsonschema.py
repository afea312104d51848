"""JSON Schema (draft 2020-12) front-end: schema -> shapes -> grammar network, exactly or not at all.

Older drafts (4, 6, 7, 2019-09), named by ``$schema`` or ``JsonProfile.draft``, go through the same
shapes with their own keyword tables (the last section; ``_drafts`` decides each location's draft).

Theory of operation
-------------------
A JSON Schema denotes a set of JSON values; the language is every serialization of those values that
the ``JsonProfile`` allows. Compilation has two layers.

1. **Shapes.** Every schema (sub-)expression is normalized to a :class:`Shape`: for each JSON type, the
   exact set of values of that type it accepts — ``null`` (bool), ``boolean`` (a set), ``number`` (a
   ``NumberPredicate``, integers included), ``string`` (a ``CodepointDFA`` over the decoded text), and
   for containers a *union* of :class:`ArrayShape` / :class:`ObjectShape` whose members are themselves
   schema expressions (so recursion through ``$ref`` stays finite). Each keyword is one small function
   (``KEYWORDS``) returning the shape it alone allows; a schema is the intersection of its keywords'
   shapes. ``allOf`` is intersection, ``anyOf`` union, ``not`` complement, ``oneOf`` and ``if``/``then``/
   ``else`` boolean combinations. Scalars are closed under all of these (DFAs and numeric predicates);
   containers are intersected structurally and complemented only where the result is still a union of
   shapes. Anything else raises ``Unsupported`` — the reference never approximates.

2. **Emission.** A shape becomes grammar nodes (``_ir``): literal and DFA lexemes for scalars, and two
   custom nodes for containers whose local state is finite: :class:`ObjectNode` remembers which declared
   keys were seen and how many members were read (no permutation explosion with ``property_order=any``),
   :class:`ArrayNode` the index and a count per ``contains``.

Schema expressions (``Expr``) are hashable: ``("loc", uri, pointer)`` for a schema in the document
(``("loc", uri, pointer, scope)`` when dynamic references can read the path that led there: the finite
part of the dynamic scope they read, refdecoder/_dynamic.py), ``("and", frozenset)``, ``("not", expr)``, ``("const", canonical_json)``, ``TRUE``/``FALSE``.

The front-end by concept: this module holds :class:`Compiler` (the memoized normalization of an
expression to its shape) and the keyword tables it dispatches through; keyword functions see the
compiler as ``_jsonschema_ctx.SchemaCompiler`` (with :class:`Ctx`), so that ``_unevaluated`` never
imports this module. The shapes are ``_shapes``, their algebra ``_shape_algebra`` (``Compiler.algebra``),
reference resolution ``_resolve`` (``Compiler.refs``), emission ``_jsonschema_emit``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from ._drafts import REF_ALONE, UNKNOWN
from ._dynamic import Scope
from ._fsa import CodepointDFA, dfa_bound
from ._jsonschema_ctx import Ctx, Keyword, SchemaCompiler, ecma_search, props_dict
from ._limits import check_bound, spend
from ._numbers import NumberPredicate
from ._resolve import Resolver, escape_pointer_token
from ._shape_algebra import ShapeAlgebra, TooManyAlternatives
from ._shapes import (
    ANY_ARRAY,
    ANY_OBJECT,
    CHECKERS,
    FALSE,
    TRUE,
    ArrayShape,
    CheckedStrings,
    Contains,
    CountedStrings,
    Expr,
    ObjectShape,
    Shape,
    any_shape,
    empty_shape,
    only,
    string_dfa,
)
from ._unevaluated import unevaluated_items, unevaluated_properties
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import JSON_SCHEMA_DRAFTS, Deadline, JsonProfile, JsonSchema, Limits

__all__ = ["Compiler", "Shape", "ObjectShape", "ArrayShape", "KEYWORDS_BY_DRAFT", "REFUSED_BY_DRAFT"]


# Keywords that only annotate (draft 2020-12 core/meta-data/content vocabularies): ignored.
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "definitions",
        "$anchor",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        # read by their siblings (``contains``, ``if``), no constraint of their own:
        "minContains",
        "maxContains",
        "then",
        "else",
    }
)

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")


# Fuel for normalizing one subschema (its shapes, number predicates, Boolean algebra): about the
# cost of a hundred automaton states (refdecoder/_limits.py).
_SHAPE_FUEL = 100


# ---------------------------------------------------------------------------------------------
# The compiler: shape normalization (memoized), over reference resolution and the shape algebra
# ---------------------------------------------------------------------------------------------
class Compiler:
    """One schema's compilation to shapes: reference resolution (``refs``, ``_resolve``), the shape
    algebra (``algebra``, ``_shape_algebra``), and the memoized normalization of schema expressions to
    shapes through the keyword tables below. Keyword functions see it as a ``SchemaCompiler``."""

    def __init__(self, spec: JsonSchema, limits: Limits) -> None:
        self.profile: JsonProfile = spec.profile
        self.limits = limits
        self.deadline = Deadline(limits.compile_seconds)
        self._shapes: dict[Expr, Shape] = {}
        self._in_progress: set[Expr] = set()
        self.unevaluated_memo: dict[Any, list[Any]] = {}
        self.refs = Resolver(spec, limits)
        self.algebra = ShapeAlgebra(limits, self.shape)

    def ctx(self, doc: str, ptr: str, schema: dict[str, Any], scope: Scope | None = None) -> Ctx:
        """The keyword context of the schema object at ``doc#ptr`` (for ``_unevaluated``, which
        walks subschemas without importing this module)."""
        return Ctx(self, doc, ptr, schema, scope)

    # -- normalization ----------------------------------------------------------------------------
    def shape(self, expr: Expr) -> Shape:
        cached = self._shapes.get(expr)
        if cached is not None:
            return cached
        if expr in self._in_progress:
            raise Unsupported(
                "$ref",
                where_of(expr),
                "the schema refers to itself without going through an "
                "object or array, so it does not describe any value",
            )
        spend(_SHAPE_FUEL, where_of(expr))
        self.deadline.check(where_of(expr))
        if len(self._in_progress) >= self.limits.nesting_depth:  # a $ref chain or a deep nest of subschemas
            raise LimitExceeded(
                "nesting_depth",
                f"{len(self._in_progress) + 1} nested subschemas or $refs",
                self.limits.nesting_depth,
                where_of(expr),
            )
        self._in_progress.add(expr)
        try:
            result = self._shape_uncached(expr)
        finally:
            self._in_progress.discard(expr)
        self._shapes[expr] = result
        return result

    def _shape_uncached(self, expr: Expr) -> Shape:
        if expr == TRUE:
            return any_shape()
        if expr == FALSE:
            return empty_shape()
        assert isinstance(expr, tuple)
        tag = expr[0]
        if tag == "and":
            out = any_shape()
            for e in sorted(expr[1], key=repr):
                out = self.algebra.intersect(out, self.shape(e))
            return out
        if tag == "not":
            return self.algebra.complement(self.shape(expr[1]), where_of(expr))
        if tag == "const":
            return self.shape_of_value(json.loads(expr[1]))
        if tag == "loc":
            if len(expr) > 3:
                return self.shape_of_schema(expr[1], expr[2], expr[3])
            scope = None
            if self.refs.dynamic is not None and (expr[1], expr[2]) == (self.refs.root_uri, ""):
                scope = self.refs.dynamic.initial(
                    self.refs.resource_of(self.refs.root_uri, "")
                )  # the root: its own scope
            return self.shape_of_schema(expr[1], expr[2], scope)
        raise AssertionError(expr)

    def shape_of_schema(self, doc: str, ptr: str, scope: Scope | None = None) -> Shape:
        schema = self.refs.schema_at(doc, ptr)
        if schema is True:
            return any_shape()
        if schema is False:
            return empty_shape()
        if not isinstance(schema, dict):
            raise SpecError(
                "schema must be an object or a boolean", ptr or "/", "a JSON object or true/false"
            )
        ctx = Ctx(self, doc, ptr, schema, scope)
        meta = schema.get("$schema")
        if meta is not None and not isinstance(meta, str):
            raise SpecError("'$schema' must be a string", ctx.at("$schema"), "a meta-schema URI")
        if self.refs.draft_of and (draft := self.refs.draft_at(doc, ptr)) != "2020-12":
            return shape_of_older_draft(self, ctx, draft)
        out = any_shape()
        if (
            not self.profile.additional_properties_default
            and "additionalProperties" not in schema
            and ("properties" in schema or "patternProperties" in schema)
        ):
            # The profile reads an absent additionalProperties as false (engines' "strict" mode).
            out = self.algebra.intersect(out, only(objects=(_additional(ctx, FALSE),)))
        if not self.profile.additional_items_default and "prefixItems" in schema and "items" not in schema:
            # The profile reads an absent items next to prefixItems as false (engines' "strict" mode).
            n = len(schema["prefixItems"]) if isinstance(schema["prefixItems"], list) else 0
            out = self.algebra.intersect(out, only(arrays=(ArrayShape(prefix=(TRUE,) * n, items=FALSE),)))
        for kw in sorted(schema):
            if kw in ANNOTATIONS:
                continue
            fn = KEYWORDS.get(kw)
            if fn is None:
                if kw in REFUSED:
                    raise Unsupported(kw, f"{ptr}/{escape_pointer_token(kw)}", REFUSED[kw])
                continue  # unknown keywords are annotations in 2020-12
            part = fn(ctx, schema[kw], schema)
            if part is not None:
                out = self.algebra.intersect(out, part)
        return out

    def shape_of_value(self, v: Any) -> Shape:
        """The shape accepting exactly the JSON value ``v`` (numbers by mathematical value)."""
        e = empty_shape()
        if v is None:
            return replace(e, null=True)
        if isinstance(v, bool):
            return replace(e, boolean=frozenset({v}))
        if isinstance(v, (int, float)):
            x = _num(v, "const")
            return replace(e, number=NumberPredicate.from_keywords(minimum=x, maximum=x))
        if isinstance(v, str):
            return replace(e, string=CodepointDFA.literal(v))
        if isinstance(v, list):
            items = tuple(const_expr(x) for x in v)
            return replace(
                e, arrays=(ArrayShape(prefix=items, items=FALSE, min_items=len(v), max_items=len(v)),)
            )
        if isinstance(v, dict):
            named = tuple(sorted((k, const_expr(x)) for k, x in v.items()))
            obj = ObjectShape(
                named=named,
                rules=((CodepointDFA.any_string(), FALSE),),
                required=frozenset(v),
                max_props=len(v),
            )
            return replace(e, objects=(obj,))
        raise SpecError("not a JSON value", repr(v)[:60], "null, bool, number, string, array or object")


def const_expr(v: Any) -> Expr:
    return ("const", json.dumps(v, sort_keys=True, separators=(",", ":")))


def where_of(expr: Expr) -> str:
    """The JSON pointer of a location expression, for messages (empty for any other expression)."""
    if isinstance(expr, tuple) and expr and expr[0] == "loc":
        return str(expr[2]) or "/"
    return ""


def _num(v: Any, kw: str, where: str = "") -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError(f"'{kw}' must be a number", where or "/", "a JSON number")
    if isinstance(v, float) and not math.isfinite(v):
        raise SpecError(f"'{kw}' must be finite", where or "/", "a finite JSON number")
    # Schema constants are read as exact decimals (their shortest repr), never as binary floats.
    return Fraction(v) if isinstance(v, int) else Fraction(repr(v))


def _nonneg_int(v: Any, kw: str, where: str) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SpecError(f"'{kw}' must be a non-negative integer", where, "an integer >= 0")
    return v


def _bounded(v: Any, kw: str, ctx: Ctx) -> int:
    """A count the matcher counts up to: refused past ``Limits.repeat_bound`` before any work."""
    n = _nonneg_int(v, kw, ctx.at(kw))
    check_bound(kw, n, ctx.at(kw))
    return n


# ---------------------------------------------------------------------------------------------
# Keywords: one function each (docs/style.md §3). ``ctx`` knows where we are; each returns the Shape the
# keyword alone allows (None: no constraint of its own, e.g. read by a sibling keyword).
# ---------------------------------------------------------------------------------------------


def type_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    names = value if isinstance(value, list) else [value]
    if not names or not all(isinstance(n, str) and n in JSON_TYPES for n in names):
        raise SpecError("bad 'type'", ctx.at("type"), f"one of {JSON_TYPES} or a list of them")
    e = empty_shape()
    number = NumberPredicate.none()
    if "number" in names:
        number = NumberPredicate.any()
    elif "integer" in names:
        number = NumberPredicate.from_keywords(integer=True)
    return Shape(
        "null" in names,
        frozenset({True, False}) if "boolean" in names else frozenset(),
        number,
        CodepointDFA.any_string() if "string" in names else e.string,
        (ANY_ARRAY,) if "array" in names else (),
        (ANY_OBJECT,) if "object" in names else (),
    )


def enum(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, list):
        raise SpecError("'enum' must be an array", ctx.at("enum"), "an array of JSON values")
    if len(value) > ctx.c.limits.enum_size:
        raise LimitExceeded("enum_size", len(value), ctx.c.limits.enum_size, ctx.at("enum"))
    out = empty_shape()
    strings: list[str] = []
    for v in value:
        if isinstance(v, str):
            strings.append(v)  # gathered into one DFA below: a union per string would be slow
        else:
            out = ctx.c.algebra.union(out, ctx.c.shape_of_value(v))
    if strings:
        out = replace(out, string=string_dfa(out.string).union(CodepointDFA.literals(strings)))
    return out


def const(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return ctx.c.shape_of_value(value)


# -- numbers --------------------------------------------------------------------------------------
def _numeric(kw: str, arg: str) -> Keyword:
    def keyword(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
        x = _num(value, kw, ctx.at(kw))
        if kw == "multipleOf" and x <= 0:
            raise SpecError("'multipleOf' must be > 0", ctx.at(kw), "a number greater than 0")
        return only(number=NumberPredicate.from_keywords(**{arg: x}))  # type: ignore[arg-type]

    keyword.__name__ = kw
    return keyword


minimum = _numeric("minimum", "minimum")
maximum = _numeric("maximum", "maximum")
exclusiveMinimum = _numeric("exclusiveMinimum", "exclusive_minimum")
exclusiveMaximum = _numeric("exclusiveMaximum", "exclusive_maximum")
multipleOf = _numeric("multipleOf", "multiple_of")


# -- strings --------------------------------------------------------------------------------------
def minLength(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    n = _nonneg_int(value, "minLength", ctx.at("minLength"))
    return only(string=CodepointDFA.any_string().length_between(n, None))


def maxLength(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    n = _nonneg_int(value, "maxLength", ctx.at("maxLength"))
    if n + 1 > dfa_bound():  # the counter automaton alone passes dfa_states: count in the lexeme,
        check_bound("maxLength", n, ctx.at("maxLength"))  # up to the counts the matcher counts to
        return only(string=CountedStrings(CodepointDFA.any_string(), 0, n))
    return only(string=CodepointDFA.any_string().length_between(0, n))


def pattern(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(string=ecma_search(ctx, value, ctx.at("pattern")))


def format_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    if ctx.c.profile.formats == "annotation":
        return None
    from ._formats import UNSUPPORTED, format_dfa

    if (
        isinstance(value, str) and value in CHECKERS
    ):  # not an automaton: a checker reads it (refdecoder/_ecma_pattern.py)
        return only(string=CheckedStrings(value, 0, ctx.at("format")))
    dfa = format_dfa(value) if isinstance(value, str) else None
    if dfa is None:
        why = (
            UNSUPPORTED.get(value, "it has no exact implementation")
            if isinstance(value, str)
            else "not a string"
        )
        raise Unsupported(
            "format",
            ctx.at("format"),
            f"format {value!r} is refused in assertion mode: {why}; "
            "use JsonProfile(formats='annotation') to treat it as an annotation",
        )
    return only(string=dfa)


# -- arrays ---------------------------------------------------------------------------------------
def prefixItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(arrays=(ArrayShape(prefix=tuple(ctx.subs("prefixItems"))),))


def items(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if isinstance(value, list):
        raise Unsupported(
            "items",
            ctx.at("items"),
            "array-form 'items' is draft 2019-09 and earlier; use 'prefixItems' (draft 2020-12), or "
            'declare the draft ("$schema", or JsonProfile(draft=...))',
        )
    n = len(schema.get("prefixItems", []) or [])
    return only(arrays=(ArrayShape(prefix=(TRUE,) * n, items=ctx.sub("items")),))


def minItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(arrays=(ArrayShape(min_items=_bounded(value, "minItems", ctx)),))


def maxItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(arrays=(ArrayShape(max_items=_nonneg_int(value, "maxItems", ctx.at("maxItems"))),))


def contains(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    lo = _bounded(schema.get("minContains", 1), "minContains", ctx)
    hi = schema.get("maxContains")
    hi = None if hi is None else _bounded(hi, "maxContains", ctx)
    return only(arrays=(ArrayShape(contains=(Contains(ctx.sub("contains"), lo, hi),)),))


def uniqueItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Pairwise distinct items (2020-12 Validation §6.4.3), JSON equality: the array remembers the
    values it has written and each item excludes them (refdecoder/_valuememory.py); the emitter
    refuses the item shapes where that is not decided."""
    if not isinstance(value, bool):
        raise SpecError("'uniqueItems' must be a boolean", ctx.at("uniqueItems"), "true or false")
    if value is False:
        return None
    return only(arrays=(ArrayShape(unique=ctx.at("uniqueItems")),))


# -- objects --------------------------------------------------------------------------------------
def properties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    props = props_dict(ctx, "properties")
    named = tuple((k, ctx.sub("properties", k)) for k in props)
    return only(objects=(ObjectShape(named=named),))


def patternProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    pats = props_dict(ctx, "patternProperties")
    rules = tuple(
        (ecma_search(ctx, p, ctx.at("patternProperties", p)), ctx.sub("patternProperties", p)) for p in pats
    )
    return only(objects=(ObjectShape(rules=rules),))


def additionalProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(objects=(_additional(ctx, ctx.sub("additionalProperties")),))


def _additional(ctx: Ctx, expr: Expr) -> ObjectShape:
    """The rule for keys neither in this schema's ``properties`` nor matching its patterns."""
    lang = CodepointDFA.any_string()
    names = list(props_dict(ctx, "properties"))
    if names:
        lang = lang.difference(CodepointDFA.literals(names))
    for p in props_dict(ctx, "patternProperties"):
        lang = lang.difference(ecma_search(ctx, p, ctx.at("patternProperties", p)))
    return ObjectShape(rules=((lang, expr),))


def required(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise SpecError("'required' must be an array of strings", ctx.at("required"), "an array of strings")
    return only(objects=(ObjectShape(required=frozenset(value)),))


def minProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(objects=(ObjectShape(min_props=_bounded(value, "minProperties", ctx)),))


def maxProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(
        objects=(ObjectShape(max_props=_nonneg_int(value, "maxProperties", ctx.at("maxProperties"))),)
    )


def propertyNames(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    s = ctx.c.shape(ctx.sub("propertyNames"))
    return only(objects=(ObjectShape(key_lang=string_dfa(s.string)),))


def dependentRequired(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in value.values()
    ):
        raise SpecError("bad 'dependentRequired'", ctx.at("dependentRequired"), "an object of string arrays")
    deps = tuple(sorted((k, frozenset(v)) for k, v in value.items() if v))
    return only(objects=(ObjectShape(dependent_required=deps),))


def dependentSchemas(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    # "if key k is present, the object must also validate against S" = (k absent) ∪ (k present ∩ S).
    if not isinstance(value, dict):
        raise SpecError(
            "'dependentSchemas' must be an object", ctx.at("dependentSchemas"), "an object of schemas"
        )
    out = any_shape()
    for k in value:
        s = ctx.c.shape(ctx.sub("dependentSchemas", k))
        absent = only(objects=(ObjectShape(named=((k, FALSE),)),))
        present = ctx.c.algebra.intersect(only(objects=(ObjectShape(required=frozenset({k})),)), s)
        out = ctx.c.algebra.intersect(out, ctx.c.algebra.union(absent, present))
    return out


# -- applicators ----------------------------------------------------------------------------------
def ref(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, str):
        raise SpecError("'$ref' must be a string", ctx.at("$ref"), "a URI reference")
    return ctx.c.shape(ctx.c.refs.resolve_ref(value, ctx.doc, ctx.ptr, ctx.scope))


def dynamicRef(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """A ``$ref`` whose target a ``$dynamicAnchor`` in the dynamic scope may override (2020-12 Core
    §8.2.3.2; ``Resolver.resolve_dynamic_ref``)."""
    if not isinstance(value, str):
        raise SpecError("'$dynamicRef' must be a string", ctx.at("$dynamicRef"), "a URI reference")
    return ctx.c.shape(ctx.c.refs.resolve_dynamic_ref(value, ctx.doc, ctx.ptr, ctx.scope))


def allOf(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    out = any_shape()
    for e in ctx.subs("allOf"):
        out = ctx.c.algebra.intersect(out, ctx.c.shape(e))
    return out


def anyOf(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    out = empty_shape()
    for e in ctx.subs("anyOf"):
        out = ctx.c.algebra.union(out, ctx.c.shape(e))
    return out


def oneOf(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """Exactly one branch. Scalars: exact boolean algebra. Containers: the branches' container parts
    must be pairwise provably disjoint (then exactly-one = any-of), else the schema is refused."""
    c = ctx.c
    shapes = [c.shape(e) for e in ctx.subs("oneOf")]
    # Scalars: ∪_i (S_i ∩ ⋂_{j≠i} ¬S_j), computed per scalar type.
    null = sum(1 for s in shapes if s.null) == 1
    boolean = frozenset(b for b in (True, False) if sum(1 for s in shapes if b in s.boolean) == 1)
    number = NumberPredicate.none()
    string = CodepointDFA.empty()
    for i, s in enumerate(shapes):
        n_i, s_i = s.number, string_dfa(s.string)
        for j, t in enumerate(shapes):
            if j != i:
                n_i = n_i.and_(t.number.not_())
                s_i = s_i.difference(string_dfa(t.string))
        number = number.or_(n_i)
        string = string.union(s_i)
    arrays = _exactly_one(
        c, [replace(empty_shape(), arrays=s.arrays) for s in shapes], ctx.at("oneOf"), "arrays"
    ).arrays
    # The sibling 'required' R holds for every object this schema accepts, and for such an object
    # "exactly one P_i" is "exactly one P_i ∩ R": the branches see R before they are compared.
    req = schema.get("required")
    within = (
        only(objects=(ObjectShape(required=frozenset(req)),))
        if isinstance(req, list) and req and all(isinstance(k, str) for k in req)
        else any_shape()
    )
    objects = _exactly_one(
        c,
        [c.algebra.intersect(replace(empty_shape(), objects=s.objects), within) for s in shapes],
        ctx.at("oneOf"),
        "objects",
    ).objects
    return Shape(null, boolean, number, string, arrays, objects)


def _exactly_one(
    c: SchemaCompiler, parts: list[Shape], where: str, what: str, done: frozenset[str] = frozenset()
) -> Shape:
    """Exactly one of ``parts`` (container-only shapes). The parts fall into groups, the connected
    components of "not provably disjoint": a value in a part of one group is in no part of another, so
    exactly-one is the union over the groups of exactly-one within each (a group of one: the part
    itself; the common case, branches told apart by a discriminating key, is all groups of one)."""
    live = [p for p in parts if p.arrays or p.objects]
    group = list(range(len(live)))  # union-find over the "may overlap" pairs

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i in range(len(live)):
        for j in range(i + 1, len(live)):
            if root(i) != root(j) and not c.algebra.disjoint(live[i], live[j]):
                group[root(j)] = root(i)
    out = empty_shape()
    for r in dict.fromkeys(root(i) for i in range(len(live))):
        members = [p for i, p in enumerate(live) if root(i) == r]
        one = members[0] if len(members) == 1 else _exactly_one_overlapping(c, members, where, what, done)
        out = c.algebra.union(out, one)
    return out


def _exactly_one_overlapping(
    c: SchemaCompiler, live: list[Shape], where: str, what: str, done: frozenset[str]
) -> Shape:
    """Exactly one of parts that may overlap: the exact formula ``∪_i (P_i ∩ ⋂_{j≠i} ¬P_j)`` when the
    parts can be complemented within the alternatives limit; else, for objects, split on a
    discriminating key first (``ShapeAlgebra.split_on_key``; ``done``: the keys split on already);
    else refuse. Parts that are finite sets of constant arrays (``enum`` of arrays) are counted value by
    value instead (``_exactly_one_constant_arrays``)."""
    if what == "arrays" and (counted := _exactly_one_constant_arrays(live)) is not None:
        return counted
    try:
        out = empty_shape()
        comps: dict[int, Shape] = {}  # each part's complement, taken once (not once per other part)
        for i, p in enumerate(live):
            acc = p
            for j, q in enumerate(live):
                if c.algebra.is_empty(acc):
                    break  # ∅ ∩ ¬P_j = ∅: the rest of the product cannot bring anything back
                if j != i:
                    if j not in comps:
                        comps[j] = c.algebra.complement(q, where)
                    acc = c.algebra.intersect(acc, comps[j])
            out = c.algebra.union(out, acc)
        return out
    except Unsupported as e:
        why = f"complementing them is refused ({e.keyword}: {e.reason})"
    except TooManyAlternatives as e:
        why = f"complementing them passes the {e.limit} limit ({e.value} > {e.bound}; --limit alternatives=N)"
    if what == "objects" and (split := c.algebra.split_on_key([p.objects for p in live], done)) is not None:
        # Exactly-one is, cell by cell of a split on a key k (ShapeAlgebra.split_on_key), exactly-one
        # of the parts live in the cell: a cell with one live part needs no complement.
        k, cells = split
        try:
            out = empty_shape()
            for _, kept in cells:
                parts = [replace(empty_shape(), objects=o) for o in kept if o]
                out = c.algebra.union(out, _exactly_one(c, parts, where, what, done | {k}))
            return out
        except TooManyAlternatives as e:
            why += f", also after splitting on a discriminating key ({e.value} > {e.bound})"
    raise Unsupported(
        "oneOf",
        where,
        f"two branches both admit {what}, maskcert cannot prove them disjoint and {why}, "
        "so 'exactly one' is undecided",
    )


def _exactly_one_constant_arrays(live: list[Shape]) -> Shape | None:
    """Exactly one of parts whose arrays are all constants (``shape_of_value``'s form: a prefix of
    ``const`` items, nothing after, exact length): the constants that are in exactly one part, under
    JSON equality (numbers by value). None when some array shape is not such a constant."""
    per_part: list[dict[Any, ArrayShape]] = []
    for p in live:
        values: dict[Any, ArrayShape] = {}
        for a in p.arrays:
            if not (
                a.items == FALSE
                and a.min_items == a.max_items == len(a.prefix)
                and not a.contains
                and a.unique is None
                and all(isinstance(e, tuple) and len(e) == 2 and e[0] == "const" for e in a.prefix)
            ):
                return None
            values.setdefault(_json_key([json.loads(e[1]) for e in a.prefix]), a)  # type: ignore[index]
        per_part.append(values)
    counts: dict[Any, int] = {}
    for values in per_part:
        for key in values:
            counts[key] = counts.get(key, 0) + 1
    once = {key: a for values in per_part for key, a in values.items() if counts[key] == 1}
    return replace(empty_shape(), arrays=tuple(once.values()))


def _json_key(v: Any) -> Hashable:
    """A hashable key equal for JSON-equal values (numbers by mathematical value, ``true`` ≠ 1)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    if isinstance(v, (int, float)):
        return ("number", Fraction(v))
    if isinstance(v, list):
        return ("array", tuple(_json_key(x) for x in v))
    return ("object", frozenset((k, _json_key(x)) for k, x in v.items()))


def not_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if isinstance(value, dict) and "not" in value and not set(value) - ANNOTATIONS - {"not"}:
        return ctx.c.shape(ctx.sub("not", "not"))  # ¬¬Z = Z: no complement to take
    return ctx.c.algebra.complement(ctx.c.shape(ctx.sub("not")), ctx.at("not"))


def if_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    c = ctx.c
    cond = c.shape(ctx.sub("if"))
    then = c.shape(ctx.sub("then")) if "then" in schema else any_shape()
    else_ = c.shape(ctx.sub("else")) if "else" in schema else any_shape()
    if "then" not in schema and "else" not in schema:
        return any_shape()
    return c.algebra.union(
        c.algebra.intersect(cond, then), c.algebra.intersect(c.algebra.complement(cond, ctx.at("if")), else_)
    )


def unevaluatedProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Members no sibling or validating in-place subschema evaluated satisfy the schema (2020-12 Core
    §11.3, 2019-09 Core §9.3.2.4): a case analysis in refdecoder/_unevaluated.py."""
    return unevaluated_properties(ctx, value, schema)


def unevaluatedItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Items no sibling or validating in-place subschema evaluated satisfy the schema (2020-12 Core
    §11.2, 2019-09 Core §9.3.1.3): a case analysis in refdecoder/_unevaluated.py."""
    return unevaluated_items(ctx, value, schema)


def legacy_dependencies(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """``dependencies`` in a 2019-09 or 2020-12 schema, which no longer define it (split into
    ``dependentRequired``/``dependentSchemas``), read as ``JsonProfile.legacy_dependencies`` says: the
    drafts 4-7 meaning (the JSON-Schema-Test-Suite's optional ``dependencies-compatibility`` group),
    an annotation, or a refusal."""
    mode = ctx.c.profile.legacy_dependencies
    if mode == "ignore":
        return None
    if mode == "refuse":
        draft = ctx.c.refs.draft_at(ctx.doc, ctx.ptr) if ctx.c.refs.draft_of else "2020-12"
        raise Unsupported(
            "dependencies",
            ctx.at("dependencies"),
            f"'dependencies' is a keyword of drafts 4-7, not of {draft}, and the profile refuses it "
            "(JsonProfile(legacy_dependencies='refuse')); declare a draft (\"$schema\"), use "
            "dependentRequired/dependentSchemas, or read it with legacy_dependencies='apply' or 'ignore'",
        )
    return dependencies(ctx, value, schema)


REFUSED = {
    "$recursiveRef": "'$recursiveRef' is a keyword of 2019-09 (decided there), not of 2020-12; declare that "
    "draft (\"$schema\", or JsonProfile(draft='2019-09')) or use $dynamicRef",
}

KEYWORDS: dict[str, Keyword] = {
    "type": type_,
    "enum": enum,
    "const": const,
    "minimum": minimum,
    "maximum": maximum,
    "exclusiveMinimum": exclusiveMinimum,
    "exclusiveMaximum": exclusiveMaximum,
    "multipleOf": multipleOf,
    "minLength": minLength,
    "maxLength": maxLength,
    "pattern": pattern,
    "format": format_,
    "prefixItems": prefixItems,
    "items": items,
    "minItems": minItems,
    "maxItems": maxItems,
    "contains": contains,
    "uniqueItems": uniqueItems,
    "properties": properties,
    "patternProperties": patternProperties,
    "additionalProperties": additionalProperties,
    "required": required,
    "minProperties": minProperties,
    "maxProperties": maxProperties,
    "propertyNames": propertyNames,
    "dependentRequired": dependentRequired,
    "dependentSchemas": dependentSchemas,
    "$ref": ref,
    "$dynamicRef": dynamicRef,
    "allOf": allOf,
    "anyOf": anyOf,
    "oneOf": oneOf,
    "not": not_,
    "if": if_,
    "unevaluatedProperties": unevaluatedProperties,
    "unevaluatedItems": unevaluatedItems,
    "dependencies": legacy_dependencies,
}


# ---------------------------------------------------------------------------------------------
# Older drafts (4, 6, 7, 2019-09): what each keyword that changed meant there, one function per
# difference, and each draft's keyword table. refdecoder/_drafts.py says which draft a location is
# read in and lists the differences with their sections; these functions are built from the shapes
# above, so they live with them (the front-end dispatches to them: no import cycle).
# ---------------------------------------------------------------------------------------------
def shape_of_older_draft(c: Compiler, ctx: Ctx, draft: str) -> Shape:
    """The shape of the schema object ``ctx.schema`` read in ``draft`` (not 2020-12; refdecoder/_drafts.py)."""
    schema = ctx.schema
    if draft == UNKNOWN:
        doc, ptr = ctx.doc, ctx.ptr
        while (doc, ptr) not in c.refs.unknown_meta and ptr:  # a location the index skipped: its ancestor's
            ptr = ptr.rsplit("/", 1)[0]
        meta, where = c.refs.unknown_meta[(doc, ptr)]
        raise Unsupported(
            "$schema",
            where,
            f"meta-schema {meta!r} names no draft the reference knows ({', '.join(JSON_SCHEMA_DRAFTS)}: "
            "the json-schema.org meta-schema URIs) and may declare other vocabularies",
        )
    if draft in REF_ALONE and "$ref" in schema:
        return ref_alone(ctx, schema["$ref"], schema)
    out = any_shape()
    if (
        not c.profile.additional_properties_default
        and "additionalProperties" not in schema
        and ("properties" in schema or "patternProperties" in schema)
    ):
        # The profile reads an absent additionalProperties as false (engines' "strict" mode).
        out = c.algebra.intersect(out, only(objects=(_additional(ctx, FALSE),)))
    if (
        not c.profile.additional_items_default
        and isinstance(schema.get("items"), list)
        and "additionalItems" not in schema
    ):
        # The profile reads an absent additionalItems next to array-form items as false.
        n = len(schema["items"])
        out = c.algebra.intersect(out, only(arrays=(ArrayShape(prefix=(TRUE,) * n, items=FALSE),)))
    table = KEYWORDS_BY_DRAFT[draft]
    refused = REFUSED_BY_DRAFT.get(draft, {})
    for kw in sorted(schema):
        fn = table.get(kw)
        if fn is None:
            if kw in refused:
                raise Unsupported(kw, ctx.at(kw), refused[kw])
            continue  # not a keyword of this draft: an annotation
        part = fn(ctx, schema[kw], schema)
        if part is not None:
            out = c.algebra.intersect(out, part)
    return out


# ---------------------------------------------------------------------------------------------
# Keywords of the older drafts: one function per difference (docs/style.md §3)
# ---------------------------------------------------------------------------------------------
def ref_alone(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """Drafts 4-7: the object is its reference; every sibling is ignored (draft-07 Core §8.3)."""
    return ref(ctx, value, schema)


def type_draft04(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """``integer`` is a number without a fraction or exponent part (draft-zyp-json-schema-04 §3.5)."""
    shape = type_(ctx, value, schema)
    names = value if isinstance(value, list) else [value]
    if "integer" in names and "number" not in names:
        shape = replace(shape, number=NumberPredicate.spelled("integer"))
    return shape


def _bound_draft04(kw: str, flag: str, inclusive: str, exclusive: str) -> Keyword:
    def keyword(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
        x = _num(value, kw, ctx.at(kw))
        strict = schema.get(flag, False)
        if not isinstance(strict, bool):
            raise SpecError(f"'{flag}' must be a boolean in draft-04", ctx.at(flag), "true or false")
        return only(number=NumberPredicate.from_keywords(**{exclusive if strict else inclusive: x}))  # type: ignore[arg-type]

    keyword.__name__ = f"{kw}_draft04"
    keyword.__doc__ = f"``{kw}``, exclusive when ``{flag}`` is true (draft-04 Validation §5.1.2-5.1.3)."
    return keyword


def _flag_draft04(flag: str) -> Keyword:
    def keyword(ctx: Ctx, value: Any, schema: dict[str, Any]) -> None:
        if not isinstance(value, bool):
            raise SpecError(f"'{flag}' must be a boolean in draft-04", ctx.at(flag), "true or false")
        return None  # read by its sibling; without it, nothing (draft-04 Validation §5.1.2-5.1.3)

    keyword.__name__ = f"{flag}_draft04"
    return keyword


minimum_draft04 = _bound_draft04("minimum", "exclusiveMinimum", "minimum", "exclusive_minimum")
maximum_draft04 = _bound_draft04("maximum", "exclusiveMaximum", "maximum", "exclusive_maximum")
exclusiveMinimum_draft04 = _flag_draft04("exclusiveMinimum")
exclusiveMaximum_draft04 = _flag_draft04("exclusiveMaximum")


def items_array_form(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """An array of schemas: one per position, ``additionalItems`` after them; a schema: every item
    (draft-07 Validation §6.4.1-6.4.2; 2019-09 Core §9.3.1.1-9.3.1.2)."""
    if isinstance(value, list):
        rest = ctx.sub("additionalItems") if "additionalItems" in schema else TRUE
        return only(arrays=(ArrayShape(prefix=tuple(ctx.subs("items")), items=rest),))
    return only(arrays=(ArrayShape(items=ctx.sub("items")),))


def additionalItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> None:
    """Read by its sibling array-form ``items``; ignored otherwise (draft-07 Validation §6.4.2)."""
    return None


def contains_draft06(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """At least one item is valid (draft-06 Validation §6.14, draft-07 §6.4.6); no min/maxContains."""
    return only(arrays=(ArrayShape(contains=(Contains(ctx.sub("contains")),)),))


def dependencies(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """Per property present: the names it requires (an array) or a schema the whole object must
    satisfy (draft-04 Validation §5.4.5, draft-07 §6.5.7): ``dependentRequired`` and
    ``dependentSchemas`` in one keyword."""
    if not isinstance(value, dict):
        raise SpecError("'dependencies' must be an object", ctx.at("dependencies"), "an object")
    c = ctx.c
    out = any_shape()
    names: list[tuple[str, frozenset[str]]] = []
    for k, dep in value.items():
        if isinstance(dep, list):
            if not all(isinstance(x, str) for x in dep):
                raise SpecError(
                    "bad 'dependencies'", ctx.at("dependencies", k), "an array of property names or a schema"
                )
            if dep:
                names.append((k, frozenset(dep)))
            continue
        # "if k is present, the object must also validate against S" = (k absent) ∪ (k present ∩ S).
        s = c.shape(ctx.sub("dependencies", k))
        absent = only(objects=(ObjectShape(named=((k, FALSE),)),))
        present = c.algebra.intersect(only(objects=(ObjectShape(required=frozenset({k})),)), s)
        out = c.algebra.intersect(out, c.algebra.union(absent, present))
    if names:
        out = c.algebra.intersect(out, only(objects=(ObjectShape(dependent_required=tuple(sorted(names))),)))
    return out


def recursiveRef(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """``"#"`` against the current resource, or the outermost resource with ``$recursiveAnchor: true``
    in the dynamic scope when the current one has it too (2019-09 Core §8.2.4.2;
    ``Resolver.resolve_recursive_ref``, refdecoder/_dynamic.py)."""
    if value != "#":
        raise Unsupported(
            "$recursiveRef",
            ctx.at("$recursiveRef"),
            "only the value '#' is defined (2019-09 Core §8.2.4.2.1)",
        )
    return ctx.c.shape(ctx.c.refs.resolve_recursive_ref(ctx.doc, ctx.ptr, ctx.scope))


def _pick(*names: str) -> dict[str, Keyword]:
    return {kw: KEYWORDS[kw] for kw in names}


# The draft-04 keywords whose meaning 2020-12 kept (draft-04 Validation §5).
_SAME_SINCE_04 = _pick(
    *("enum", "multipleOf", "minLength", "maxLength", "pattern", "format"),
    *("minItems", "maxItems", "uniqueItems", "properties", "patternProperties", "additionalProperties"),
    *("required", "minProperties", "maxProperties", "allOf", "anyOf", "oneOf", "not"),
)
_DRAFT04: dict[str, Keyword] = {
    **_SAME_SINCE_04,
    "type": type_draft04,
    "minimum": minimum_draft04,
    "maximum": maximum_draft04,
    "exclusiveMinimum": exclusiveMinimum_draft04,
    "exclusiveMaximum": exclusiveMaximum_draft04,
    "items": items_array_form,
    "additionalItems": additionalItems,
    "dependencies": dependencies,
    "$ref": ref_alone,
}
_DRAFT06: dict[str, Keyword] = {
    **_SAME_SINCE_04,
    **_pick("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const", "propertyNames"),
    "contains": contains_draft06,
    "items": items_array_form,
    "additionalItems": additionalItems,
    "dependencies": dependencies,
    "$ref": ref_alone,
}
_DRAFT07: dict[str, Keyword] = {**_DRAFT06, **_pick("if")}
_DRAFT2019: dict[str, Keyword] = {
    **{kw: fn for kw, fn in KEYWORDS.items() if kw not in ("prefixItems", "$dynamicRef")},
    "items": items_array_form,
    "additionalItems": additionalItems,
    "$recursiveRef": recursiveRef,
}

#: Each older draft's keywords (those that constrain, or that a sibling reads); others are annotations.
KEYWORDS_BY_DRAFT: dict[str, dict[str, Keyword]] = {
    "draft-04": _DRAFT04,
    "draft-06": _DRAFT06,
    "draft-07": _DRAFT07,
    "2019-09": _DRAFT2019,
}
REFUSED_BY_DRAFT: dict[str, dict[str, str]] = {}
