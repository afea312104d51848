"""JSON Schema shapes: the values the front-end (``_jsonschema``) normalizes every subschema to.

The data types only, with the expression constructors (``and_exprs``, ``not_expr``); the operations
on shapes (intersection, union, complement, disjointness) are ``_shape_algebra``. The theory of
operation is ``_jsonschema``'s module docstring: a :class:`Shape` is, per JSON type, the exact set of
values of that type a schema expression accepts; containers are unions of :class:`ArrayShape` /
:class:`ObjectShape` whose members are schema expressions (``Expr``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ._fsa import CodepointDFA
from ._numbers import NumberPredicate

Expr = Hashable
TRUE: Expr = ("true",)
FALSE: Expr = ("false",)


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectShape:
    """Objects: ``named`` keys with their full effective schema; other keys get the ``and`` of every
    rule whose key language matches them (no rule matching: unconstrained). Each ``exists`` entry
    ``(L, e)`` asks for at least one member whose key is in ``L`` and whose value is in ``e`` — the
    dual of a rule, so that complements of rules stay object shapes (``_complement_object``)."""

    named: tuple[tuple[str, Expr], ...] = ()
    rules: tuple[tuple[CodepointDFA, Expr], ...] = ()
    required: frozenset[str] = frozenset()
    min_props: int = 0
    max_props: int | None = None
    key_lang: CodepointDFA | None = None  # propertyNames (None: any string)
    dependent_required: tuple[tuple[str, frozenset[str]], ...] = ()
    exists: tuple[tuple[CodepointDFA, Expr], ...] = ()

    def named_dict(self) -> dict[str, Expr]:
        return dict(self.named)

    def eff(self, key: str) -> Expr:
        """The effective schema of a concrete key."""
        named = self.named_dict()
        if key in named:
            return named[key]
        return and_exprs(e for lang, e in self.rules if lang.accepts(key))

    def key_allowed(self, key: str) -> bool:
        return self.key_lang is None or self.key_lang.accepts(key)


@dataclass(frozen=True)
class Contains:
    """A ``contains`` with its bounds: between ``min`` and ``max`` (None: no bound) of the items at
    positions ``start`` and later are in ``expr`` (positions before ``start`` never count)."""

    expr: Expr
    min: int = 1
    max: int | None = None
    start: int = 0


@dataclass(frozen=True)
class ArrayShape:
    """Arrays: the ``prefix`` positions, then ``items``; every ``contains`` entry must hold (each is
    counted on its own: ``allOf`` of two ``contains``, or a complement, makes several)."""

    prefix: tuple[Expr, ...] = ()
    items: Expr = TRUE
    min_items: int = 0
    max_items: int | None = None
    contains: tuple[Contains, ...] = ()
    # the JSON pointer of a ``uniqueItems: true`` that asks for pairwise distinct items (None: no such
    # keyword); decided by remembering the items written (refdecoder/_valuememory.py)
    unique: str | None = None

    def at(self, i: int) -> Expr:
        return self.prefix[i] if i < len(self.prefix) else self.items


@dataclass(frozen=True)
class Shape:
    null: bool
    boolean: frozenset[bool]
    number: NumberPredicate
    string: CodepointDFA
    arrays: tuple[ArrayShape, ...]
    objects: tuple[ObjectShape, ...]


ANY_ARRAY = ArrayShape()
ANY_OBJECT = ObjectShape()


def any_shape() -> Shape:
    return Shape(
        True,
        frozenset({True, False}),
        NumberPredicate.any(),
        CodepointDFA.any_string(),
        (ANY_ARRAY,),
        (ANY_OBJECT,),
    )


def empty_shape() -> Shape:
    return Shape(False, frozenset(), NumberPredicate.none(), CodepointDFA.empty(), (), ())


def only(
    *,
    null: bool | None = None,
    boolean: frozenset[bool] | None = None,
    number: NumberPredicate | None = None,
    string: CodepointDFA | None = None,
    arrays: tuple[ArrayShape, ...] | None = None,
    objects: tuple[ObjectShape, ...] | None = None,
) -> Shape:
    """A shape constraining only the given types; the others stay unconstrained."""
    a = any_shape()
    return Shape(
        a.null if null is None else null,
        a.boolean if boolean is None else boolean,
        a.number if number is None else number,
        a.string if string is None else string,
        a.arrays if arrays is None else arrays,
        a.objects if objects is None else objects,
    )


def and_exprs(exprs: Any) -> Expr:
    items: set[Expr] = set()
    for e in exprs:
        if e == FALSE:
            return FALSE
        if e == TRUE:
            continue
        if isinstance(e, tuple) and e and e[0] == "and":
            items.update(e[1])
        else:
            items.add(e)
    if not items:
        return TRUE
    if any(isinstance(e, tuple) and len(e) == 2 and e[0] == "not" and e[1] in items for e in items):
        return FALSE  # e ∧ ¬e
    if len(items) == 1:
        return next(iter(items))
    return ("and", frozenset(items))


def not_expr(e: Expr) -> Expr:
    if e == TRUE:
        return FALSE
    if e == FALSE:
        return TRUE
    if isinstance(e, tuple) and e and e[0] == "not":
        return e[1]
    return ("not", e)
