"""The shape algebra: intersection, union, complement and disjointness of JSON Schema shapes.

``allOf`` is :meth:`ShapeAlgebra.intersect`, ``anyOf`` :meth:`~ShapeAlgebra.union`, ``not``
:meth:`~ShapeAlgebra.complement`; ``oneOf`` asks :meth:`~ShapeAlgebra.disjoint` first (the theory of
operation is ``_jsonschema``'s module docstring). Scalars are closed under all of these (code point
automata and number predicates); containers are intersected structurally, and complemented only where
the result is still a union of shapes: ``¬A`` for an array shape is "too short, too long, some prefix
position wrong, or some later item wrong", for an object shape the dual of each of its constraints
(``exists`` entries for rules, rules for ``exists`` entries). A union of more than
``Limits.alternatives`` container shapes raises ``LimitExceeded``.

Member schemas stay expressions (``Expr``); the algebra turns one into a shape only to test
disjointness, through the ``shape`` function it is given (the compiler's memoized normalization).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from typing import Any

from ._fsa import CodepointDFA
from ._limits import Limits
from ._shapes import (
    ANY_ARRAY,
    ANY_OBJECT,
    FALSE,
    TRUE,
    ArrayShape,
    Contains,
    Expr,
    ObjectShape,
    Shape,
    and_exprs,
    and_strings,
    not_expr,
    or_strings,
    string_dfa,
)
from .errors import LimitExceeded, Unsupported

__all__ = ["ShapeAlgebra", "array_empty", "object_empty"]


class TooManyAlternatives(LimitExceeded):
    """A union of shapes passed ``Limits.alternatives``: the one limit a split on a discriminating key
    can get below (:meth:`ShapeAlgebra.split_on_key`), so callers that can split catch this class
    (never a limit name compared as a string); to others it is a plain ``LimitExceeded``."""


class ShapeAlgebra:
    """The Boolean operations on shapes under one compilation's ``limits``; ``shape`` turns a member
    expression into its shape (used by :meth:`disjoint`)."""

    def __init__(self, limits: Limits, shape: Callable[[Expr], Shape]) -> None:
        self.limits = limits
        self.shape = shape

    def intersect(self, a: Shape, b: Shape) -> Shape:
        arrays = self._cap(
            tuple(
                x
                for p, q in product(a.arrays, b.arrays)
                if (x := self.and_array(p, q)) and not array_empty(x)
            ),
            "arrays",
        )
        objects = self._cap(self._and_objects(a.objects, b.objects), "objects")
        return Shape(
            a.null and b.null,
            a.boolean & b.boolean,
            a.number.and_(b.number),
            and_strings(a.string, b.string),
            arrays,
            objects,
        )

    def union(self, a: Shape, b: Shape) -> Shape:
        return Shape(
            a.null or b.null,
            a.boolean | b.boolean,
            a.number.or_(b.number),
            or_strings(a.string, b.string),
            self._cap(_dedup(a.arrays + b.arrays), "arrays"),
            self._cap(_dedup(a.objects + b.objects), "objects"),
        )

    def _cap(self, shapes: tuple[Any, ...], what: str) -> tuple[Any, ...]:
        if ANY_ARRAY in shapes:
            return (ANY_ARRAY,)
        if ANY_OBJECT in shapes:
            return (ANY_OBJECT,)
        bound = self.limits.alternatives
        if len(shapes) > bound:
            raise TooManyAlternatives("alternatives", len(shapes), bound, f"a union of {what} shapes")
        return shapes

    def _and_objects(self, a: Any, b: Any) -> tuple[ObjectShape, ...]:
        """The pairwise intersections of two unions of object shapes, the provably empty ones dropped
        (a union without them is the same set; keeping them would only count against the limit)."""
        return tuple(x for p, q in product(a, b) if not self._object_empty(x := self.and_object(p, q)))

    def _object_empty(self, o: ObjectShape) -> bool:
        """:func:`object_empty`, or a required key whose schema, a conjunction with a negation (as
        complements make them: ``"Point" ∧ ¬string``), has an empty shape."""
        return object_empty(o) or any(self._value_empty(o.eff(k)) for k in o.required)

    def _value_empty(self, e: Expr) -> bool:
        """Sound: True only when ``e`` provably admits no value (its shape's scalars are empty and it
        has no container shape). Only conjunctions with a negation are tried, and a shape that cannot
        be taken here (a reference back into the schema being normalized) counts as non-empty."""
        if not (isinstance(e, tuple) and e[0] == "and"):
            return False
        if not any(isinstance(x, tuple) and x[0] == "not" for x in e[1]):
            return False
        try:
            return self.is_empty(self.shape(e))
        except (Unsupported, LimitExceeded):
            return False

    def and_object(self, p: ObjectShape, q: ObjectShape) -> ObjectShape:
        if p == ANY_OBJECT:
            return q
        if q == ANY_OBJECT:
            return p
        pn, qn = p.named_dict(), q.named_dict()
        named: dict[str, Expr] = {}
        for k in dict.fromkeys([*pn, *qn]):  # declared order (property_order="schema"), p's keys first
            named[k] = and_exprs([p.eff(k), q.eff(k)])
        key_lang = (
            p.key_lang
            if q.key_lang is None
            else (q.key_lang if p.key_lang is None else p.key_lang.intersection(q.key_lang))
        )
        deps: dict[str, frozenset[str]] = {}
        for k, d in p.dependent_required + q.dependent_required:
            deps[k] = deps.get(k, frozenset()) | d
        return ObjectShape(
            named=tuple(named.items()),
            rules=tuple(dict.fromkeys(p.rules + q.rules)),
            required=p.required | q.required,
            min_props=max(p.min_props, q.min_props),
            max_props=_min_opt(p.max_props, q.max_props),
            key_lang=key_lang,
            dependent_required=tuple(sorted(deps.items())),
            exists=tuple(dict.fromkeys(p.exists + q.exists)),
        )

    def and_array(self, p: ArrayShape, q: ArrayShape) -> ArrayShape | None:
        if p == ANY_ARRAY:
            return q
        if q == ANY_ARRAY:
            return p
        n = max(len(p.prefix), len(q.prefix))
        prefix = tuple(and_exprs([p.at(i), q.at(i)]) for i in range(n))
        return ArrayShape(
            prefix=prefix,
            items=and_exprs([p.items, q.items]),
            min_items=max(p.min_items, q.min_items),
            max_items=_min_opt(p.max_items, q.max_items),
            contains=_and_contains(p.contains + q.contains),
            unique=p.unique or q.unique,
        )

    def complement(self, s: Shape, where: str) -> Shape:
        return Shape(
            not s.null,
            frozenset({True, False}) - s.boolean,
            s.number.not_(),
            string_dfa(s.string).complement(),
            self._complement_arrays(s.arrays, where),
            self._complement_objects(s.objects, where),
        )

    def _complement_arrays(self, arrays: tuple[ArrayShape, ...], where: str) -> tuple[ArrayShape, ...]:
        if not arrays:
            return (ANY_ARRAY,)
        if ANY_ARRAY in arrays:
            return ()
        comps = [self._complement_array(a, where) for a in arrays]
        if not all(comps):
            return ()
        out: list[ArrayShape] | None = None
        for comp in comps:  # ¬(A ∪ B) = ¬A ∩ ¬B, capped at every step (the product grows geometrically)
            if out is not None:
                pairs = (self.and_array(p, q) for p, q in product(out, comp))
                comp = list(self._cap(tuple(x for x in pairs if x and not array_empty(x)), "arrays"))
            out = comp
        return self._cap(tuple(out or ()), "arrays")

    def _complement_array(self, a: ArrayShape, where: str) -> list[ArrayShape]:
        """¬A as a union: too short, too long, some prefix position wrong, some later item wrong, or
        too few or too many items counted by one of its ``contains``."""
        if a.unique is not None:
            raise Unsupported(
                "uniqueItems",
                a.unique,
                f"negated at {where or '/'}: 'some two items are equal' is not decided (only pairwise "
                "distinct items are, by remembering the items written)",
            )
        out: list[ArrayShape] = []
        if a.min_items > 0:
            out.append(ArrayShape(max_items=a.min_items - 1))
        if a.max_items is not None:
            out.append(ArrayShape(min_items=a.max_items + 1))
        for i, e in enumerate(a.prefix):
            if e != TRUE:
                pre = tuple(TRUE for _ in range(i)) + (not_expr(e),)
                out.append(ArrayShape(prefix=pre, min_items=i + 1))
        if a.items != TRUE:
            out.append(ArrayShape(contains=(Contains(not_expr(a.items), start=len(a.prefix)),)))
        for c in a.contains:
            if c.min > 0:
                out.append(ArrayShape(contains=(Contains(c.expr, 0, c.min - 1, c.start),)))
            if c.max is not None:
                out.append(ArrayShape(contains=(Contains(c.expr, c.max + 1, None, c.start),)))
        return out

    def _complement_objects(
        self, objects: tuple[ObjectShape, ...], where: str, done: frozenset[str] = frozenset()
    ) -> tuple[ObjectShape, ...]:
        if not objects:
            return (ANY_OBJECT,)
        if ANY_OBJECT in objects:
            return ()
        comps = [self._complement_object(o, where) for o in objects]
        if not all(comps):
            return ()
        try:
            out: list[ObjectShape] | None = None
            for comp in comps:  # capped at every step: the product of the complements grows geometrically
                if out is not None:
                    comp = list(self._cap(self._and_objects(out, comp), "objects"))
                out = comp
            return self._cap(tuple(out or ()), "objects")
        except TooManyAlternatives:
            if (split := self.split_on_key([objects], done)) is None:
                raise
        # ¬(∪P) is, cell by cell of a split on a key k, the cell minus the union of the shapes live
        # there (each intersected with the cell): smaller products than the whole.
        k, cells = split
        union: tuple[ObjectShape, ...] = ()
        for cell, (live,) in cells:
            rest = self._complement_objects(live, where, done | {k})
            union = self._cap(_dedup(union + self._and_objects((cell,), rest)), "objects")
        return union

    def split_on_key(
        self, unions: list[tuple[ObjectShape, ...]], done: frozenset[str] = frozenset()
    ) -> tuple[str, list[tuple[ObjectShape, list[tuple[ObjectShape, ...]]]]] | None:
        """Unions of object shapes split by a key ``k`` (not in ``done``) into cells that partition
        the objects, each cell with what each union keeps in it: ``(k, [(cell, [kept per union])])``.

        The schemas the shapes give ``k`` (``FALSE`` where it may not occur, ``TRUE`` where it is
        unconstrained); ``d_1..d_n`` those of them, greedily, that are pairwise provably disjoint
        (the others may overlap them). The cells: ``k`` present with its value in ``d_i``, present
        with a value in none of them, and absent. In each cell a shape whose ``k`` schema excludes
        the cell matches nothing (one with ``d_j``, j≠i, in cell i; one with ``FALSE`` where ``k`` is
        present; one that requires ``k`` where it is absent), and the others are intersected with
        the cell. The key chosen leaves the fewest shapes in its fullest cell, and must leave fewer
        than all in some cell; None when no key does, or when one more split would pass the
        ``alternatives`` limit: a path of ``n`` splits has at least ``2**n`` cells (present, absent),
        each contributing its own shapes to the union, so past the limit a split cannot succeed and
        would only spend the compile budget (200 branches with a key each ran into ``compile_fuel``)."""
        if 2 ** (len(done) + 1) > self.limits.alternatives:
            return None
        shapes = list(dict.fromkeys(o for u in unions for o in u))
        # Shapes are named by their index while keys are tried: a shape's hash walks all its members,
        # and every key asks after every shape.
        best: tuple[int, str, list[tuple[ObjectShape, set[int]]]] | None = None
        for k in dict.fromkeys(k for o in shapes for k, _ in o.named):
            if k in done:
                continue
            effs = [o.eff(k) if o.key_allowed(k) else FALSE for o in shapes]
            split: list[Expr] = []
            for v in dict.fromkeys(e for e in effs if e not in (TRUE, FALSE)):
                if all(self._values_disjoint(v, d) for d in split):
                    split.append(v)
            unsplit = {i for i, e in enumerate(effs) if e != FALSE and e not in split}
            cells: list[tuple[ObjectShape, set[int]]] = [
                (
                    ObjectShape(named=((k, d),), required=frozenset({k})),
                    {i for i, e in enumerate(effs) if e in (d, TRUE)} | unsplit,
                )
                for d in split
            ]
            rest = and_exprs(not_expr(d) for d in split)
            cells.append((ObjectShape(named=((k, rest),), required=frozenset({k})), unsplit))
            cells.append(
                (ObjectShape(named=((k, FALSE),)), {i for i, o in enumerate(shapes) if k not in o.required})
            )
            fullest = max(len(live) for _, live in cells)
            if min(len(live) for _, live in cells) < len(shapes) and (best is None or fullest < best[0]):
                best = (fullest, k, cells)
        if best is None:
            return None
        _, key, chosen = best
        out = []
        for cell, live_ids in chosen:
            live = {shapes[i] for i in live_ids}
            out.append((cell, [self._and_objects(tuple(o for o in u if o in live), (cell,)) for u in unions]))
        return key, out

    def _values_disjoint(self, v: Expr, w: Expr) -> bool:
        """:meth:`disjoint` of two member schemas; False where a shape cannot be taken here (a
        reference back into the schema being normalized)."""
        try:
            return self.disjoint(self.shape(v), self.shape(w))
        except (Unsupported, LimitExceeded):
            return False

    def _complement_object(self, o: ObjectShape, where: str) -> list[ObjectShape]:
        """¬O as a union of object shapes: an object is outside O iff it misses a required key, has a
        declared key with a value outside its schema, an undeclared key whose value breaks a rule
        (an ``exists`` entry), a key outside ``propertyNames``, a dependency unmet, too few or too
        many members, or no member meeting one of O's ``exists`` entries (a rule)."""
        out: list[ObjectShape] = []
        named = o.named_dict()
        declared = CodepointDFA.literals(sorted(named)) if named else None
        for r in sorted(o.required):
            out.append(ObjectShape(named=((r, FALSE),)))
        for k, e in o.named:
            if e != TRUE:
                out.append(ObjectShape(named=((k, not_expr(e)),), required=frozenset({k})))
        for lang, e in o.rules:
            region = lang if declared is None else lang.difference(declared)
            if e != TRUE and not region.is_empty():
                out.append(ObjectShape(exists=((region, not_expr(e)),)))
        if o.key_lang is not None and not o.key_lang.is_universal():
            out.append(ObjectShape(exists=((o.key_lang.complement(), TRUE),)))
        for t, d in o.dependent_required:
            out.extend(ObjectShape(named=((x, FALSE),), required=frozenset({t})) for x in sorted(d))
        for lang, e in o.exists:
            out.append(ObjectShape(rules=((lang, not_expr(e)),)))
        if o.min_props > 0:
            out.append(ObjectShape(max_props=o.min_props - 1))
        if o.max_props is not None:
            out.append(ObjectShape(min_props=o.max_props + 1))
        return out

    def disjoint(self, a: Shape, b: Shape, depth: int = 3) -> bool:
        """A sound (never wrongly True) test that no value is in both shapes."""
        if a.null and b.null or (a.boolean & b.boolean):
            return False
        if not a.number.and_(b.number).is_empty():
            return False
        if not and_strings(a.string, b.string).is_empty():
            return False
        for p, q in product(a.arrays, b.arrays):
            if not self._arrays_disjoint(p, q, depth):
                return False
        return all(self._objects_disjoint(p2, q2, depth) for p2, q2 in product(a.objects, b.objects))

    def _arrays_disjoint(self, p: ArrayShape, q: ArrayShape, depth: int) -> bool:
        lo, hi = max(p.min_items, q.min_items), _min_opt(p.max_items, q.max_items)
        if hi is not None and lo > hi:
            return True
        if any(c.max is not None and c.min > c.max for c in _and_contains(p.contains + q.contains)):
            return True  # one schema counted both at least m and at most m' < m times
        if depth <= 0:
            return False
        for i in range(min(lo, max(len(p.prefix), len(q.prefix)))):
            if self.disjoint(self.shape(p.at(i)), self.shape(q.at(i)), depth - 1):
                return True
        return False

    def _objects_disjoint(self, p: ObjectShape, q: ObjectShape, depth: int) -> bool:
        lo, hi = max(p.min_props, q.min_props), _min_opt(p.max_props, q.max_props)
        if hi is not None and lo > hi:
            return True
        if depth <= 0:
            return False
        for k in sorted(p.required | q.required):
            ek = and_exprs([p.eff(k), q.eff(k)])
            if ek == FALSE or not (p.key_allowed(k) and q.key_allowed(k)):
                return True
            if (
                k in p.required
                and k in q.required
                and self.disjoint(self.shape(p.eff(k)), self.shape(q.eff(k)), depth - 1)
            ):
                return True
        return False

    def is_empty(self, s: Shape) -> bool:
        """Sound emptiness for scalars only; containers are decided by the grammar's productivity."""
        return (
            not s.null
            and not s.boolean
            and s.number.is_empty()
            and s.string.is_empty()
            and not s.arrays
            and not s.objects
        )


def array_empty(a: ArrayShape) -> bool:
    """A sound (never wrongly True) emptiness test: length bounds that cross, a position every array
    has whose schema is ``false``, or a ``contains`` asked at least m and at most m' < m times."""
    if a.max_items is not None and a.min_items > a.max_items:
        return True
    if any(a.at(i) == FALSE for i in range(min(a.min_items, len(a.prefix) + 1))):
        return True
    return any(c.max is not None and c.min > c.max for c in a.contains)


def object_empty(o: ObjectShape) -> bool:
    """A sound (never wrongly True) emptiness test: a required key that cannot be present, or more
    members asked for than allowed."""
    if o.max_props is not None and (o.min_props > o.max_props or len(o.required) > o.max_props):
        return True
    return any(not o.key_allowed(k) or o.eff(k) == FALSE for k in o.required)


def _and_contains(cs: tuple[Contains, ...]) -> tuple[Contains, ...]:
    """Several ``contains`` on one array: those counting the same items (same schema, same start)
    merge into one with both bounds; the others are counted side by side."""
    merged: dict[tuple[Expr, int], Contains] = {}
    for c in cs:
        if c.min == 0 and c.max is None:
            continue  # "at least none": no constraint
        m = merged.get((c.expr, c.start))
        merged[(c.expr, c.start)] = (
            c if m is None else Contains(c.expr, max(c.min, m.min), _min_opt(c.max, m.max), c.start)
        )
    return tuple(merged.values())


def _dedup(xs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(xs))


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
