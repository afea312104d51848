"""JSON Schema shapes: the values the front-end (``_jsonschema``) normalizes every subschema to.

The data types only, with the expression constructors (``and_exprs``, ``not_expr``); the operations
on shapes (intersection, union, complement, disjointness) are ``_shape_algebra``. The theory of
operation is ``_jsonschema``'s module docstring: a :class:`Shape` is, per JSON type, the exact set of
values of that type a schema expression accepts; containers are unions of :class:`ArrayShape` /
:class:`ObjectShape` whose members are schema expressions (``Expr``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ._ecma_pattern import PATTERN, PatternChecker
from ._fsa import CodepointDFA, _length_range, dfa_bound
from ._jsonstring import remaining_lengths
from ._keymemory import finite_words, language_size
from ._numbers import NumberPredicate
from .errors import LimitExceeded, Unsupported

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

    @cached_property
    def _named_lookup(self) -> dict[str, Expr]:
        """``named`` as a mapping, built once per shape (``eff`` is asked key by key, and a key split
        asks it of every shape for every key); never handed out, so never mutated."""
        return dict(self.named)

    def eff(self, key: str) -> Expr:
        """The effective schema of a concrete key."""
        named = self._named_lookup
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
class CountedStrings:
    """The strings of ``dfa`` whose length in code points is in ``[lo, hi]``, kept unbuilt: the
    product automaton would pass ``Limits.dfa_states`` (``date-time`` with ``maxLength: 64``), so
    the length is counted in the lexeme's state instead (:class:`JsonStringLexeme` with
    ``lengths``). Only an intersection with a length interval, ``Σ*`` or another automaton keeps
    this form (:func:`and_strings`); every other operation builds the product
    (:meth:`materialize`), which refuses past the limit as it always did."""

    dfa: CodepointDFA
    lo: int
    hi: int

    @cached_property
    def _empty(self) -> bool:
        return self.is_empty_uncached()

    def is_empty(self) -> bool:
        """Exact: no word of ``dfa`` has a length in ``[lo, hi]`` (computed once)."""
        return self._empty

    def is_empty_uncached(self) -> bool:
        """:meth:`is_empty`, computed."""
        if self.dfa.is_empty() or self.lo > self.hi:
            return True
        return not remaining_lengths(self.dfa, self.hi).meets(0, self.lo, self.hi)

    def materialize(self) -> CodepointDFA:
        """The product automaton (``LimitExceeded("dfa_states")`` past the limit)."""
        return self.dfa.length_between(self.lo, self.hi)


@dataclass(frozen=True)
class CheckedStrings:
    """The strings a non-regular checker accepts (``checker`` names one in :data:`CHECKERS`: only
    ``"regex"``, ``format: regex``) with at least ``min_length`` code points, read by
    :class:`~refdecoder._jsonstring_checked.CheckedJsonStringLexeme`. Never empty: the checker's
    language has strings of every length (a pattern grows by ``a``). Only what keeps that form exactly
    is decided (:func:`and_strings`): an intersection with ``Σ*``, a minimum length, itself, or a
    finite language (filtered by the checker into an automaton); anything else — a maximum length, a
    pattern, a complement, a union — is refused, where ``where`` says (no automaton holds it)."""

    checker: str
    min_length: int = 0
    where: str = field(default="", compare=False)

    def is_empty(self) -> bool:
        return False

    def is_universal(self) -> bool:
        return False

    def materialize(self) -> CodepointDFA:
        raise Unsupported(
            "format",
            self.where,
            f"format {self.checker!r} is a context-free language with early errors ({CHECKERS[self.checker].what}), "
            "decided beside Σ*, minLength, enum and const only: its union, complement or intersection "
            "with another automaton is not an automaton",
        )


#: The checkers :class:`CheckedStrings` names, by format.
CHECKERS: dict[str, PatternChecker] = {"regex": PATTERN}

#: A string language of a shape: an automaton, one with its length counted lazily, or a checker's.
Strings = CodepointDFA | CountedStrings | CheckedStrings


def string_dfa(s: Strings) -> CodepointDFA:
    """``s`` as an automaton (the product for a counted language: may refuse past the limit)."""
    return s if isinstance(s, CodepointDFA) else s.materialize()


def and_strings(a: Strings, b: Strings) -> Strings:
    """``a ∩ b``, exactly: the product automaton, or, where that passes ``Limits.dfa_states`` and the
    result is ``D ∩ {length in [lo, hi]}`` (one side a finite length interval, or already counted),
    a :class:`CountedStrings`; otherwise the product's refusal."""
    for e in (a, b):
        if isinstance(e, CodepointDFA) and e.is_empty():  # ∅ ∩ X = ∅ (no finals: no string)
            return e
    if isinstance(a, CheckedStrings) or isinstance(b, CheckedStrings):
        return _and_checked(a, b)
    if isinstance(a, CountedStrings) or isinstance(b, CountedStrings):
        c, o = (a, b) if isinstance(a, CountedStrings) else (b, a)
        assert isinstance(c, CountedStrings)
        if isinstance(o, CountedStrings):  # (D1 ∩ L1) ∩ (D2 ∩ L2) = (D1 ∩ D2) ∩ (L1 ∩ L2)
            return _counted(and_strings(c.dfa, o.dfa), max(c.lo, o.lo), min(c.hi, o.hi))
        if o.is_universal():
            return c
        r = _length_range(o)
        if r is not None:  # (D ∩ L1) ∩ L2 = D ∩ (L1 ∩ L2)
            return _counted(c.dfa, max(c.lo, r[0]), c.hi if r[1] is None else min(c.hi, r[1]))
        return _counted(and_strings(c.dfa, o), c.lo, c.hi)  # (D ∩ L) ∩ E = (D ∩ E) ∩ L
    split = _split_lengths(a, b)
    if split is None:
        return a.intersection(b)
    d, lo, hi = split
    memo = (d.key, lo, hi, dfa_bound())
    if memo not in _TOO_LARGE:
        try:
            return a.intersection(b)
        except LimitExceeded as e:
            if e.limit != "dfa_states":
                raise
            if len(_TOO_LARGE) >= 1024:
                _TOO_LARGE.clear()
            _TOO_LARGE.add(memo)
    return _counted(d, lo, hi)


def _and_checked(a: Strings, b: Strings) -> Strings:
    """``a ∩ b`` with a checker's language on one side (:class:`CheckedStrings`): exact, or refused."""
    c, o = (a, b) if isinstance(a, CheckedStrings) else (b, a)
    assert isinstance(c, CheckedStrings)
    if isinstance(o, CheckedStrings) and o.checker == c.checker:
        return CheckedStrings(c.checker, max(c.min_length, o.min_length), c.where)
    if isinstance(o, CodepointDFA):
        if o.is_empty():
            return o
        if o.is_universal():
            return c
        r = _length_range(o)
        if r is not None and r[1] is None:  # a minimum length only
            return CheckedStrings(c.checker, max(c.min_length, r[0]), c.where)
        words = _finite_words(o, 10_000)
        if words is not None:  # enum/const: the checker filters the members
            checker = CHECKERS[c.checker]
            return CodepointDFA.literals(w for w in words if len(w) >= c.min_length and checker.accepts(w))
    return c.materialize()  # refused, with the reason


def _finite_words(d: CodepointDFA, cap: int) -> list[str] | None:
    """Every string of ``d`` when it has at most ``cap`` of them, else None."""
    size = language_size(d, cap + 1)
    return None if size is None or size > cap else finite_words(d)


def _split_lengths(a: CodepointDFA, b: CodepointDFA) -> tuple[CodepointDFA, int, int] | None:
    """``(D, lo, hi)`` when one side is the finite length interval ``[lo, hi]`` and the other, ``D``,
    is not a length interval; else None."""
    for d, lengths in ((a, b), (b, a)):
        r = _length_range(lengths)
        if r is not None and r[1] is not None and _length_range(d) is None:
            return d, r[0], r[1]
    return None


#: ``(key, lo, hi, dfa_states)`` of the products ``D ∩ {length in [lo, hi]}`` found to pass
#: ``Limits.dfa_states`` (a product is a function of its operands and the bound): a second
#: ``date-time`` with ``maxLength: 64`` in one schema does not build it again up to the limit (and
#: spend the compile fuel twice).
_TOO_LARGE: set[tuple[Hashable, int, int, int]] = set()


def or_strings(a: Strings, b: Strings) -> Strings:
    """``a ∪ b``, exactly: a counted language survives a union with the empty language or itself;
    otherwise both are built (:func:`string_dfa`: the product's refusal past the limit)."""
    if a == b or b.is_empty():
        return a
    if a.is_empty():
        return b
    return string_dfa(a).union(string_dfa(b))


def _counted(d: Strings, lo: int, hi: int) -> Strings:
    """``d ∩ {length in [lo, hi]}`` as a :class:`CountedStrings` (the empty automaton if empty)."""
    if isinstance(d, CountedStrings):
        return _counted(d.dfa, max(lo, d.lo), min(hi, d.hi))
    assert isinstance(d, CodepointDFA), "a checker's language is intersected by _and_checked"
    out = CountedStrings(d, lo, hi)
    return CodepointDFA.empty() if out.is_empty() else out


@dataclass(frozen=True)
class Shape:
    null: bool
    boolean: frozenset[bool]
    number: NumberPredicate
    string: Strings
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
    string: Strings | None = None,
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
