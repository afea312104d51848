"""``unevaluatedProperties`` and ``unevaluatedItems``: decided exactly by a case analysis over the in-place
subschemas that validate, or refused.

The keywords (2020-12 Core §11.2 ``unevaluatedItems``, §11.3 ``unevaluatedProperties``; 2019-09 Core
§9.3.1.3 and §9.3.2.4) apply their schema ``U`` to the instance members that no *evaluating* keyword of
the same schema object, or of an in-place applicator subschema that *validated*, evaluated (Core §7.7.1:
annotations of a failed subschema are dropped; a ``not`` never passes any on). The evaluating keywords:

* properties: ``properties`` (the declared names present), ``patternProperties`` (the keys matching a
  pattern), ``additionalProperties`` and a nested ``unevaluatedProperties`` (every key left, so all of
  them once the subschema validated);
* items, 2020-12: ``prefixItems`` (the first k indexes), ``items`` (all), ``contains`` (the indexes
  whose item matched, 2020-12 Core §10.3.1.3) and a nested ``unevaluatedItems`` (all); 2019-09:
  array-form ``items`` (the first k), schema-form ``items`` and ``additionalItems`` (all), a nested
  ``unevaluatedItems`` (all);
* in place (Core §10.2): ``allOf``, ``anyOf``, ``oneOf``, ``if`` (its own annotations when it
  validates) with ``then``/``else``, ``dependentSchemas``, ``$ref``, ``$dynamicRef`` and
  ``$recursiveRef`` (to the target the front-end resolves them to in the dynamic scope the schema
  expression carries, refdecoder/_dynamic.py: jsonschema collects annotations through the same
  ``lookup`` it validates with).

Theory of operation
-------------------
On an instance ``x`` that a schema ``e`` accepts, ``e`` evaluates ``members(x) ∩ L`` for a *language*
``L`` fixed by which in-place subschemas validated: a key language (a ``CodepointDFA``: declared names,
pattern languages, everything once ``additionalProperties`` is present) or an index set
(:class:`Indexes`: a prefix ``[0, k)`` or all, plus the items matching some ``contains`` schema).
``rel(e)`` lists finitely many :class:`Case` values ``(when, L)``, ``when`` a union of container shapes,
such that, for every ``x`` that ``e`` accepts:

* (sound) ``x ∈ when`` implies that ``e`` evaluates at least ``members(x) ∩ L``;
* (complete) some case has ``x ∈ when`` and ``e`` evaluates exactly ``members(x) ∩ L``.

(``when`` is *relative*: it may assume that ``e`` itself accepts ``x``; ``full(e)`` adds ``e``'s own
shape for the applicators that cannot assume it.) The schema object ``P`` holding ``unevaluated* : U``
then accepts ``x`` iff its other keywords do and, for some case of ``rel(P without U)``,
``x ∈ when`` and every member outside ``L`` satisfies ``U``: the keyword's shape is
``∪_cases (when ∩ Outside(L, U))``, ``Outside`` being an :class:`ObjectShape` whose rule for the key
language ``Σ* ∖ L`` is ``U``, or an :class:`ArrayShape` whose items after the prefix satisfy ``U`` or one
of the ``contains`` schemas. *Exactness*: "if" by soundness (members outside ``L`` include every
unevaluated one), "only if" by completeness (the complete case has ``L`` equal to what was evaluated).
The keyword is intersected with its siblings' shapes like any other (``_jsonschema.KEYWORDS``).

The cases, per construct (each is sound and complete given those of its subschemas):

* the schema object's own evaluating keywords: one case ``(any, L₀)``; a nested ``unevaluated*`` or
  ``additionalProperties`` makes ``L₀`` everything (once the subschema validated, every member was
  evaluated) and nothing else matters;
* ``allOf``, ``$ref``, ``dependentSchemas``: the subschemas validate whenever ``e`` does, so their
  relative cases combine by product (``when`` intersected, ``L`` united); ``dependentSchemas`` adds
  ``required: [k]`` to the cases of ``k``'s subschema, next to the case "absent" ``(any, ∅)``;
* ``anyOf``: for every non-empty set ``S`` of *contributing* branches (those that can evaluate
  something), the product of their full cases; the set of branches that validated is one of them, and
  a larger ``S`` only evaluates more. ``(any, ∅)`` too when some branch contributes nothing;
* ``oneOf``: the union of the branches' full cases (``e``'s shape already says "exactly one", so a case
  whose branch validates names the only one), and ``(any, ∅)`` as for ``anyOf``;
* ``if``: the full cases of ``if`` times the relative ones of ``then``; the cases of ``else`` times the
  complement of ``if``'s shape (taken only when ``else`` contributes); and ``(any, ∅)``.

Cases whose language another case with ``when = any`` covers are dropped (they add no instance). The
number of cases is bounded (``Limits.unevaluated_cases``, and the container shapes in one case's
condition ``Limits.unevaluated_alternatives``); ``rel`` is memoized per location (in the compiler's
``unevaluated_memo``) and refuses an in-place cycle, as the shapes do.

Where the two authorities disagree, the reference refuses (a refusal beats an approximation): in draft
2019-09, ``jsonschema`` (the validator the reference is tested against; ``_legacy_keywords``) reads a
*schema-valued* ``additionalProperties``/``unevaluatedProperties`` as evaluating the instance keys that
are named like that schema's own keywords (the spec: every key left), counts ``contains`` matches as
evaluated items (2019-09 does not; 2020-12 does), and fails on a boolean ``items``. Each is refused
only where it can change a verdict. Annotations crossing a ``$schema`` change are refused too, and so
is an in-place subschema with its own ``$id`` holding references (jsonschema collects its annotations
against the outer base URI).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations, product
from typing import Any, Generic, TypeVar, cast

from ._drafts import schema_members
from ._fsa import CodepointDFA
from ._jsonschema_ctx import Ctx, SchemaCompiler, ecma_search, props_dict
from ._shapes import (
    ANY_ARRAY,
    ANY_OBJECT,
    FALSE,
    TRUE,
    ArrayShape,
    Expr,
    ObjectShape,
    Shape,
    and_exprs,
    not_expr,
    only,
)
from .errors import LimitExceeded, SpecError, Unsupported

__all__ = ["Case", "Indexes", "unevaluated_items", "unevaluated_properties"]

Lang = TypeVar("Lang")


@dataclass(frozen=True)
class Indexes:
    """Evaluated array indexes: ``[0, prefix)`` (``prefix is None``: all of them), and the indexes whose
    item matches one of the ``contains`` schemas."""

    prefix: int | None = 0
    contains: frozenset[Expr] = frozenset()

    def union(self, other: Indexes) -> Indexes:
        if self.prefix is None or other.prefix is None:
            return ALL_INDEXES
        return Indexes(max(self.prefix, other.prefix), self.contains | other.contains)

    def covers(self, other: Indexes) -> bool:
        if self.prefix is None:
            return True
        return other.prefix is not None and other.prefix <= self.prefix and other.contains <= self.contains


ALL_INDEXES = Indexes(None)
NO_INDEXES = Indexes(0)


@dataclass(frozen=True)
class Case(Generic[Lang]):
    """Instances in ``when`` (a union of container shapes) have at least the members in ``evaluated``
    evaluated (see the module docstring)."""

    when: tuple[Any, ...]
    evaluated: Lang


# ---------------------------------------------------------------------------------------------
# Evaluating keywords of one schema object: one function per keyword (docs/style.md §3), each
# returning the language it evaluates once its schema object validated.
# ---------------------------------------------------------------------------------------------
def properties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> CodepointDFA:
    names = list(props_dict(ctx, "properties"))
    return CodepointDFA.literals(names) if names else CodepointDFA.empty()


def patternProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> CodepointDFA:
    out = CodepointDFA.empty()
    for p in props_dict(ctx, "patternProperties"):
        out = out.union(ecma_search(ctx, p, ctx.at("patternProperties", p)))
    return out


def additionalProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> CodepointDFA:
    return CodepointDFA.any_string()


def additionalProperties_2019(ctx: Ctx, value: Any, schema: dict[str, Any]) -> CodepointDFA:
    if isinstance(value, dict):
        raise Unsupported(
            "additionalProperties",
            ctx.at("additionalProperties"),
            "in draft 2019-09 jsonschema counts as evaluated by a schema-valued additionalProperties only "
            "the instance keys named like that schema's own keywords, the spec every key it applies to; "
            "an unevaluatedProperties that sees it is refused where the two disagree",
        )
    return CodepointDFA.any_string()


def unevaluatedProperties_nested(ctx: Ctx, value: Any, schema: dict[str, Any]) -> CodepointDFA:
    if isinstance(value, dict) and value and ctx.c.refs.draft_at(ctx.doc, ctx.ptr) == "2019-09":
        raise Unsupported(
            "unevaluatedProperties",
            ctx.at("unevaluatedProperties"),
            "in draft 2019-09 jsonschema counts as evaluated by a schema-valued unevaluatedProperties only "
            "the instance keys named like that schema's own keywords, the spec every key it applies to; "
            "an outer unevaluatedProperties that sees it is refused where the two disagree",
        )
    return CodepointDFA.any_string()


def prefixItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Indexes:
    return Indexes(len(ctx.subs("prefixItems")))


def items(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Indexes:
    return ALL_INDEXES


def items_2019(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Indexes:
    if isinstance(value, list):
        return ALL_INDEXES if "additionalItems" in schema else Indexes(len(ctx.subs("items")))
    if isinstance(value, bool):
        raise Unsupported(
            "items",
            ctx.at("items"),
            "jsonschema's 2019-09 evaluated-items collection fails on a boolean 'items' (it takes its "
            "length), so an unevaluatedItems that sees it has no reference verdict",
        )
    return ALL_INDEXES


def contains(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Indexes:
    sub = ctx.sub("contains")
    if sub == TRUE:
        return ALL_INDEXES
    return NO_INDEXES if sub == FALSE else Indexes(0, frozenset({sub}))


def unevaluatedItems_nested(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Indexes:
    return ALL_INDEXES


Evaluator = Callable[["Ctx", Any, dict[str, Any]], Any]

PROPERTY_EVALUATORS: dict[str, dict[str, Evaluator]] = {
    "2020-12": {
        "properties": properties,
        "patternProperties": patternProperties,
        "additionalProperties": additionalProperties,
    },
    "2019-09": {
        "properties": properties,
        "patternProperties": patternProperties,
        "additionalProperties": additionalProperties_2019,
    },
}
ITEM_EVALUATORS: dict[str, dict[str, Evaluator]] = {
    "2020-12": {"prefixItems": prefixItems, "items": items, "contains": contains},
    "2019-09": {"items": items_2019, "contains": contains},
}


# ---------------------------------------------------------------------------------------------
# The two annotation kinds: the lattice of languages and the container shapes they constrain.
# ---------------------------------------------------------------------------------------------
class Kind(Generic[Lang]):
    keyword: str
    none: Lang
    all: Lang
    any_part: Any
    evaluators: dict[str, dict[str, Evaluator]]
    nested: Evaluator

    def union(self, a: Lang, b: Lang) -> Lang:
        raise NotImplementedError

    def covers(self, a: Lang, b: Lang) -> bool:
        raise NotImplementedError

    def is_none(self, a: Lang) -> bool:
        raise NotImplementedError

    def is_all(self, a: Lang) -> bool:
        raise NotImplementedError

    def part(self, s: Shape) -> tuple[Any, ...]:
        raise NotImplementedError

    def meet(self, c: SchemaCompiler, p: Any, q: Any) -> Any:
        raise NotImplementedError

    def wrap(self, parts: tuple[Any, ...]) -> Shape:
        raise NotImplementedError

    def outside(self, an: Analysis[Lang], evaluated: Lang, u: Expr) -> Any:
        raise NotImplementedError


class PropertyKind(Kind[CodepointDFA]):
    keyword = "unevaluatedProperties"
    none = CodepointDFA.empty()
    all = CodepointDFA.any_string()
    any_part = ANY_OBJECT
    evaluators = PROPERTY_EVALUATORS
    nested = staticmethod(unevaluatedProperties_nested)

    def union(self, a: CodepointDFA, b: CodepointDFA) -> CodepointDFA:
        return a.union(b)

    def covers(self, a: CodepointDFA, b: CodepointDFA) -> bool:
        return b.issubset(a)

    def is_none(self, a: CodepointDFA) -> bool:
        return a.is_empty()

    def is_all(self, a: CodepointDFA) -> bool:
        return a.is_universal()

    def part(self, s: Shape) -> tuple[Any, ...]:
        return s.objects

    def meet(self, c: SchemaCompiler, p: Any, q: Any) -> Any:
        return c.algebra.and_object(p, q)

    def wrap(self, parts: tuple[Any, ...]) -> Shape:
        return only(objects=parts)

    def outside(self, an: Analysis[CodepointDFA], evaluated: CodepointDFA, u: Expr) -> Any:
        rest = CodepointDFA.any_string().difference(evaluated)
        if rest.is_empty() or u == TRUE:
            return ANY_OBJECT
        return ObjectShape(rules=((rest, u),))


class ItemKind(Kind[Indexes]):
    keyword = "unevaluatedItems"
    none = NO_INDEXES
    all = ALL_INDEXES
    any_part = ANY_ARRAY
    evaluators = ITEM_EVALUATORS
    nested = staticmethod(unevaluatedItems_nested)

    def union(self, a: Indexes, b: Indexes) -> Indexes:
        return a.union(b)

    def covers(self, a: Indexes, b: Indexes) -> bool:
        return a.covers(b)

    def is_none(self, a: Indexes) -> bool:
        return a == NO_INDEXES

    def is_all(self, a: Indexes) -> bool:
        return a.prefix is None

    def part(self, s: Shape) -> tuple[Any, ...]:
        return s.arrays

    def meet(self, c: SchemaCompiler, p: Any, q: Any) -> Any:
        return c.algebra.and_array(p, q)

    def wrap(self, parts: tuple[Any, ...]) -> Shape:
        return only(arrays=parts)

    def outside(self, an: Analysis[Indexes], evaluated: Indexes, u: Expr) -> Any:
        if evaluated.prefix is None:
            return ANY_ARRAY
        if evaluated.contains and an.draft == "2019-09":
            raise Unsupported(
                "unevaluatedItems",
                an.where,
                "in draft 2019-09 'contains' evaluates no item (2019-09 Core §9.3.1.3), but jsonschema "
                "counts its matches as evaluated; an unevaluatedItems that a 'contains' can reach is "
                "refused where the two disagree",
            )
        # An item after the prefix is fine if it matches a 'contains' (then it was evaluated) or U.
        rest = or_exprs([u, *sorted(evaluated.contains, key=repr)])
        if rest == TRUE:
            return ANY_ARRAY
        if evaluated.contains:
            try:
                an.c.shape(rest)
            except Unsupported as e:
                raise Unsupported(
                    "unevaluatedItems",
                    an.where,
                    "an item no 'contains' matched must satisfy unevaluatedItems; that disjunction is "
                    f"not decided ({e.keyword} at {e.where or '/'}: {e.reason})",
                ) from e
        return ArrayShape(prefix=(TRUE,) * evaluated.prefix, items=rest)


PROPERTIES: Kind[CodepointDFA] = PropertyKind()
ITEMS: Kind[Indexes] = ItemKind()


def or_exprs(exprs: list[Expr]) -> Expr:
    """The schema expression accepting what any of ``exprs`` accepts: ¬(¬a ∧ ¬b ∧ ...)."""
    if TRUE in exprs:
        return TRUE
    live = list(dict.fromkeys(e for e in exprs if e != FALSE))
    if not live:
        return FALSE
    if len(live) == 1:
        return live[0]
    return not_expr(and_exprs(not_expr(e) for e in live))


# ---------------------------------------------------------------------------------------------
# The analysis: cases per schema location (memoized per compiler, kind and draft)
# ---------------------------------------------------------------------------------------------
class Analysis(Generic[Lang]):
    """The cases of the locations one ``unevaluated*`` keyword can see (see the module docstring)."""

    def __init__(self, c: SchemaCompiler, kind: Kind[Lang], draft: str, where: str) -> None:
        self.c = c
        self.kind = kind
        self.draft = draft
        self.where = where
        self.any: tuple[Any, ...] = (kind.any_part,)
        self.memo = c.unevaluated_memo
        self.in_progress: set[Expr] = set()

    # -- the case algebra ------------------------------------------------------------------------
    def meet(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        if a == self.any:
            return b
        if b == self.any:
            return a
        try:
            out = tuple(dict.fromkeys(self.kind.meet(self.c, p, q) for p, q in product(a, b)))
        except Unsupported as e:
            if e.where:
                raise
            raise Unsupported(e.keyword, self.where, f"{e.reason} (seen by {self.kind.keyword})") from e
        if self.kind.any_part in out:
            return self.any
        bound = self.c.limits.unevaluated_alternatives
        if len(out) > bound:
            raise LimitExceeded("unevaluated_alternatives", len(out), bound, self.where)
        return out

    def times(self, left: list[Case[Lang]], right: list[Case[Lang]]) -> list[Case[Lang]]:
        union = self.kind.union
        return self.prune(
            [
                Case(self.meet(a.when, b.when), union(a.evaluated, b.evaluated))
                for a, b in product(left, right)
            ]
        )

    def prune(self, cases: list[Case[Lang]]) -> list[Case[Lang]]:
        """Drop impossible cases, duplicates, and those a case with ``when = any`` covers."""
        cases = list(dict.fromkeys(x for x in cases if x.when))
        total = [x for x in cases if x.when == self.any]
        out = [
            x
            for x in cases
            if not any(t is not x and self.kind.covers(t.evaluated, x.evaluated) for t in total)
        ]
        bound = self.c.limits.unevaluated_cases
        if len(out) > bound:
            raise LimitExceeded("unevaluated_cases", len(out), bound, self.where)
        return out

    def contributes(self, cases: list[Case[Lang]]) -> bool:
        return any(not self.kind.is_none(x.evaluated) for x in cases)

    # -- per location ----------------------------------------------------------------------------
    def full(self, e: Expr) -> list[Case[Lang]]:
        """Cases that do not assume ``e`` validates: its relative cases within its own shape."""
        whole = self.kind.part(self.c.shape(e))
        return self.prune([Case(self.meet(whole, x.when), x.evaluated) for x in self.rel(e)])

    def rel(self, e: Expr, *, own: bool = True) -> list[Case[Lang]]:
        """The cases of ``e`` (``own=False``: without its own ``unevaluated*`` keyword)."""
        if e in (TRUE, FALSE):
            return [Case(self.any, self.kind.none)]
        assert isinstance(e, tuple) and e[0] == "loc"
        key = (self.kind.keyword, self.draft, e, own)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        if e in self.in_progress:
            raise Unsupported(
                self.kind.keyword,
                self.where,
                f"the in-place subschemas it sees refer back to {e[2] or '/'} without going through an "
                "object or array",
            )
        self.in_progress.add(e)
        try:
            out = self._rel(e[1], e[2], e[3] if len(e) > 3 else None, own)
        finally:
            self.in_progress.discard(e)
        self.memo[key] = out
        return out

    def _rel(self, doc: str, ptr: str, scope: Any, own: bool) -> list[Case[Lang]]:
        c, kind = self.c, self.kind
        schema = c.refs.schema_at(doc, ptr)
        if isinstance(schema, bool):
            return [Case(self.any, kind.none)]
        if not isinstance(schema, dict):
            raise SpecError(
                "schema must be an object or a boolean", ptr or "/", "a JSON object or true/false"
            )
        draft = c.refs.draft_at(doc, ptr)
        if draft != self.draft:
            raise Unsupported(
                kind.keyword,
                self.where,
                f"it sees {ptr or '/'} in {doc}, a schema read in draft {draft}, not {self.draft}; "
                "annotations across a $schema change are not decided",
            )
        ctx = c.ctx(doc, ptr, schema, scope)
        if own and kind.keyword in schema:
            return [Case(self.any, kind.nested(ctx, schema[kind.keyword], schema))]
        local = kind.none
        for kw, fn in kind.evaluators[draft].items():
            if kw in schema:
                local = kind.union(local, fn(ctx, schema[kw], schema))
        cases = [Case(self.any, local)]
        if kind.is_all(local):
            return cases
        deps = schema.get("dependencies")
        if (  # dependencies applies to objects only, so it evaluates no array items
            c.profile.legacy_dependencies == "apply"
            and kind.keyword == "unevaluatedProperties"
            and isinstance(deps, dict)
            and any(not isinstance(d, list) for d in deps.values())
        ):
            raise Unsupported(
                kind.keyword,
                self.where,
                f"it sees 'dependencies' with schemas at {ptr or '/'}, read with its drafts 4-7 meaning "
                "(JsonProfile.legacy_dependencies='apply'): whether those subschemas evaluate "
                "properties is defined by no draft that has both keywords",
            )
        for kw, applicator in IN_PLACE.items():
            if kw in schema:
                cases = self.times(cases, applicator(self, ctx, schema[kw], schema))
        return cases


# ---------------------------------------------------------------------------------------------
# In-place applicators (2020-12 Core §10.2): one function each, returning the cases it contributes.
# ---------------------------------------------------------------------------------------------
Applicator = Callable[["Analysis[Any]", "Ctx", Any, dict[str, Any]], list["Case[Any]"]]


def _in_place(an: Analysis[Any], ctx: Ctx, *parts: str | int) -> Expr:
    """The subschema at ``parts``, descended into in place. jsonschema collects its annotations with
    the outer base URI (no ``in_subresource``), so one with its own ``$id`` holding references is refused."""
    e = ctx.sub(*parts)
    node = ctx.c.refs.schema_at(ctx.doc, ctx.at(*parts))
    if isinstance(node, dict) and "$id" in node and _has_reference(node):
        raise Unsupported(
            an.kind.keyword,
            an.where,
            f"it sees {ctx.at(*parts)}, an in-place subschema with its own $id and references in it: "
            "jsonschema resolves those against the outer base URI when it collects annotations",
        )
    return e


def _has_reference(node: Any) -> bool:
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        n, names = stack.pop()
        if isinstance(n, dict):
            if not names and any(k in n for k in ("$ref", "$dynamicRef", "$recursiveRef")):
                return True
            stack.extend((v, sub) for _, v, sub in schema_members(n, names))
        elif isinstance(n, list):
            stack.extend((v, False) for v in n)
    return False


def _branches(an: Analysis[Any], ctx: Ctx, kw: str) -> list[Expr]:
    return [_in_place(an, ctx, kw, i) for i in range(len(ctx.subs(kw)))]


def allOf(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    cases: list[Case[Lang]] = [Case(an.any, an.kind.none)]
    for e in _branches(an, ctx, "allOf"):
        cases = an.times(cases, an.rel(e))
    return cases


def anyOf(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    branches = _branches(an, ctx, "anyOf")
    helping = [e for e in branches if an.contributes(an.rel(e))]
    bound = an.c.limits.unevaluated_cases
    if 2 ** len(helping) - 1 > bound:
        raise LimitExceeded("unevaluated_cases", 2 ** len(helping) - 1, bound, ctx.at("anyOf"))
    out: list[Case[Lang]] = [Case(an.any, an.kind.none)] if len(helping) < len(branches) else []
    fulls = [an.full(e) for e in helping]
    for r in range(1, len(fulls) + 1):
        for chosen in combinations(fulls, r):  # the branches that validated: all of these, maybe more
            cases: list[Case[Lang]] = [Case(an.any, an.kind.none)]
            for f in chosen:
                cases = an.times(cases, f)
            out.extend(cases)
    return an.prune(out)


def oneOf(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    branches = _branches(an, ctx, "oneOf")
    helping = [e for e in branches if an.contributes(an.rel(e))]
    out: list[Case[Lang]] = [Case(an.any, an.kind.none)] if len(helping) < len(branches) else []
    for e in helping:
        out.extend(an.full(e))  # e validated, so (the parent validating) it is the only one
    return an.prune(out)


def if_(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    cond = _in_place(an, ctx, "if")
    none: list[Case[Lang]] = [Case(an.any, an.kind.none)]
    then = an.rel(_in_place(an, ctx, "then")) if "then" in schema else none
    out = list(none)
    if an.contributes(an.rel(cond)) or an.contributes(then):
        out.extend(an.times(an.full(cond), then))  # "if" validated: its annotations and then's
    if "else" in schema:
        else_ = an.rel(_in_place(an, ctx, "else"))
        if an.contributes(else_):
            failed = an.kind.part(an.c.algebra.complement(an.c.shape(cond), ctx.at("if")))
            out.extend(Case(an.meet(failed, x.when), x.evaluated) for x in else_)
    return an.prune(out)


def dependentSchemas(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    cases: list[Case[Lang]] = [Case(an.any, an.kind.none)]
    if an.kind is not PROPERTIES or not isinstance(value, dict):
        return cases  # applies to objects only (and the shapes already refused a malformed value)
    for k in value:
        sub = an.rel(_in_place(an, ctx, "dependentSchemas", k))
        if an.contributes(sub):
            present = (ObjectShape(required=frozenset({k})),)
            opts = [Case(an.any, an.kind.none), *(Case(an.meet(present, x.when), x.evaluated) for x in sub)]
            cases = an.times(cases, opts)
    return cases


def ref(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    return an.rel(an.c.refs.resolve_ref(value, ctx.doc, ctx.ptr, ctx.scope))


def dynamicRef(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    """The target ``Resolver.resolve_dynamic_ref`` decides: jsonschema collects annotations through
    the same ``lookup`` it validates with."""
    return an.rel(an.c.refs.resolve_dynamic_ref(value, ctx.doc, ctx.ptr, ctx.scope))


def recursiveRef(an: Analysis[Lang], ctx: Ctx, value: Any, schema: dict[str, Any]) -> list[Case[Lang]]:
    """The target ``Resolver.resolve_recursive_ref`` decides (jsonschema: ``lookup_recursive_ref``,
    as when it validates)."""
    return an.rel(an.c.refs.resolve_recursive_ref(ctx.doc, ctx.ptr, ctx.scope))


IN_PLACE: dict[str, Applicator] = {
    "$ref": ref,
    "$dynamicRef": dynamicRef,
    "$recursiveRef": recursiveRef,
    "allOf": allOf,
    "anyOf": anyOf,
    "oneOf": oneOf,
    "if": if_,
    "dependentSchemas": dependentSchemas,
}


# ---------------------------------------------------------------------------------------------
# The keywords
# ---------------------------------------------------------------------------------------------
def _unevaluated(kind: Kind[Lang], ctx: Ctx, value: Any) -> Shape | None:
    u = ctx.sub(kind.keyword)
    if u == TRUE:
        return None
    c = ctx.c
    where = ctx.at(kind.keyword)
    an = Analysis(c, kind, c.refs.draft_at(ctx.doc, ctx.ptr), where)
    here: Expr = ("loc", ctx.doc, ctx.ptr) if ctx.scope is None else ("loc", ctx.doc, ctx.ptr, ctx.scope)
    cases = an.rel(here, own=False)
    if kind is PROPERTIES and an.draft == "2019-09" and isinstance(value, dict):
        # jsonschema's 2019-09 collection counts the keys named like U's own keywords as evaluated.
        langs = [cast(CodepointDFA, x.evaluated) for x in cases]
        unseen = sorted(k for k in value if not all(lang.accepts(k) for lang in langs))
        if unseen:
            raise Unsupported(
                kind.keyword,
                where,
                f"in draft 2019-09 jsonschema counts an instance key named like one of this schema's own "
                f"keywords ({', '.join(map(repr, unseen))}) as evaluated, the spec does not; the two "
                "disagree on objects with such a key",
            )
    parts: list[Any] = []
    for x in cases:
        parts.extend(an.meet(x.when, (kind.outside(an, x.evaluated, u),)))
    parts = list(dict.fromkeys(parts))
    if kind.any_part in parts:
        return None
    return kind.wrap(tuple(parts))


def unevaluated_properties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Object members no evaluating keyword of this schema object, or of an in-place subschema that
    validated, evaluated must satisfy the schema (2020-12 Core §11.3, 2019-09 Core §9.3.2.4)."""
    return _unevaluated(PROPERTIES, ctx, value)


def unevaluated_items(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Array items no evaluating keyword of this schema object, or of an in-place subschema that
    validated, evaluated must satisfy the schema (2020-12 Core §11.2, 2019-09 Core §9.3.1.3)."""
    return _unevaluated(ITEMS, ctx, value)
