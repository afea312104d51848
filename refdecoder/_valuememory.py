"""Value memory: array items that exclude the values already written (``uniqueItems``).

Theory of operation
-------------------
``uniqueItems: true`` asks for pairwise distinct items under JSON equality (2020-12 Validation §6.4.3:
``1``, ``1.0`` and ``1e0`` are one number; ``"a"`` and ``"\\u0061"`` one string; objects are equal
regardless of member order; arrays elementwise). Distinctness of unboundedly many items is not a
context-free constraint, but it is decided exactly the way ``_keymemory`` excludes repeated keys, with
the IR's two call extensions (``_ir``):

* :class:`UniqueArrayNode` carries ``E``, the canonical values (:func:`views`) of the items written so
  far, in its local state, and calls each position's *value lexeme* with an ``entry`` state that
  carries the set ``X ⊇ E`` of values that position must not write;
* the lexeme reads exactly the position's language minus ``X`` and records the raw bytes; when it
  returns, the node's ``receive`` canonicalizes them and adds the value to ``E``.

Two value lexemes, for the two item shapes where "the language minus finitely many values" is decided:

* :class:`ScalarValueLexeme` — items whose shape has no arrays or objects: the union of ``null``, the
  booleans, a :class:`~refdecoder._numbers.NumberPredicate` and a string ``CodepointDFA``, each with
  ``X`` removed *in its own algebra* (sets; the predicate ``P ∧ ¬{x1, ..., xk}``, numeric predicates
  being closed under complement; ``D \\ literals``), then read by the same lexemes the emitter uses
  (literal tables, :class:`~refdecoder._numbers.NumberLexeme`, ``json_string_lexeme``), which are trim.
  The parts start with distinct bytes (``n``, ``t``, ``f``, ``-``/digit, ``"``), so the first byte picks
  the part and the union is trim too.
* :class:`AnyValueLexeme` — items that may be any JSON value (schema ``true``): it runs the emitter's
  own network for ``true`` (same whitespace, escapes and key rules, by construction) with a sub-parser,
  and rejects a byte exactly when no completion of the text yields a value outside ``X``. Trimness
  rests on a counting fact: the values completing a viable prefix are *infinitely many* unless the
  prefix is a prefix of ``true``/``false``/``null`` (one value) or a closed string or container (one
  value, itself). An open string takes any further character; a number prefix takes more digits
  (``1`` → ``10``, ``100``...; ``1e5`` → ``1e51``...: distinct exact decimals); an open container
  takes one more item (or member with a fresh key) before its last close. Since ``X`` is finite, the
  lexeme rejects only (a) the first byte of a literal whose value is in ``X`` and (b) the byte that
  closes a string or container whose value is in ``X``; every other state has a completion outside
  ``X``. Final states are the complete values not in ``X``.

Exact decimal values: numbers compare as exact decimals, as everywhere in the reference
(``_numbers``), never as binary floats (``0.1`` and ``0.10000000000000001`` are distinct).

Duplicate keys (``JsonProfile(allow_duplicate_keys=True)``): an object repeating a key has two
readings — the first value of each key, and the last (``json.loads``) — and the independent validator
(``props.corpus._validate``) requires every reading to be valid. :func:`views` therefore gives a value
as the pair ``(first reading, last reading)`` (equal when no key repeats), the node keeps one set per
reading, and a value is excluded when either reading was written in that reading.

Completability. Position ``j`` holds values ``V_j``; after ``i`` items with values ``E`` the array can
close at some length ``L >= minItems`` iff positions ``i..L-1`` have a system of distinct
representatives avoiding ``E`` (Hall 1935), and adding positions only adds constraints, so
``L0 = max(i, minItems)`` decides. A set with at least as many available values as positions to fill
never blocks (filled last, greedily), so only the *small* sets are enumerated and matched (Kuhn's
augmenting paths). Before an item is read at position ``i`` the node computes the values that would
leave the rest unmatchable (:meth:`UniqueArrayNode._barred`: only values of small later sets can, and
only those every maximum matching uses) and passes them in ``X`` too, so every local the node moves to
can still close — the IR's exactness argument (``_ir``) carries over unchanged.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Protocol

from ._fsa import CodepointDFA, UnicodeEscapes
from ._ir import CALL, RETURN, Action
from ._jsonstring import JsonStringLexeme, json_string_lexeme
from ._keymemory import finite_words, language_size
from ._lexeme import ByteDFA, can_continue
from ._limits import current_limits, limits_scope
from ._numbers import NumberLexeme, NumberPredicate, any_number_dfa
from ._parser import Parser
from .errors import LimitExceeded, Unsupported

__all__ = [
    "Canon",
    "Views",
    "Excluded",
    "NO_VALUES",
    "views",
    "canonical_number",
    "ScalarValueLexeme",
    "AnyValueLexeme",
    "UniqueArrayNode",
    "MAX_CACHED",
]

MAX_CACHED = 64  # inner lexemes kept per scalar lexeme (one per distinct excluded set)

# A canonical JSON value: ("null",), ("bool", b), ("num", negative, digits, exponent) for
# ±digits·10^exponent with no trailing zero in digits (zero: (False, "0", 0)), ("str", s),
# ("arr", (items...)), ("obj", frozenset((key, value)...)).
Canon = Hashable
Views = tuple[Canon, Canon]  # (first reading, last reading) of a value (see the module doc)
Excluded = tuple[frozenset[Canon], frozenset[Canon]]  # values barred, per reading
NO_VALUES: Excluded = (frozenset(), frozenset())
_RET: tuple[int] = (RETURN,)


# ---------------------------------------------------------------------------------------------
# Canonical values
# ---------------------------------------------------------------------------------------------
def _int(digits: str) -> int:
    """``int(digits)`` past Python's limit on decimal conversions (divide and conquer)."""
    if len(digits) <= 4000:
        return int(digits)
    half = len(digits) // 2
    return _int(digits[:half]) * 10 ** (len(digits) - half) + _int(digits[half:])


def canonical_number(text: str) -> Canon:
    """The canonical value of an RFC 8259 number text (exact: no float is involved)."""
    neg = text.startswith("-")
    body = text[1:] if neg else text
    mant, _, exp_text = body.replace("E", "e").partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    if not digits:
        return ("num", False, "0", 0)
    exp = (_int(exp_text.lstrip("+")) if exp_text else 0) - len(frac)
    stripped = digits.rstrip("0")
    return ("num", neg, stripped, exp + len(digits) - len(stripped))


def _number_of_fraction(x: Fraction) -> Canon:
    """The canonical value of a decimal rational (every constant of a predicate is one)."""
    if x == 0:
        return ("num", False, "0", 0)
    q, twos, fives = x.denominator, 0, 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    assert q == 1, f"{x} is not a decimal"
    e = max(twos, fives)
    n = abs(x) * 10**e
    assert n.denominator == 1
    digits = str(n.numerator)
    stripped = digits.rstrip("0")
    return ("num", x < 0, stripped, -e + len(digits) - len(stripped))


def _fraction_of_number(v: Canon, where: str) -> Fraction:
    """The exact rational of a canonical number, refused past the predicates' constant size."""
    num: Any = v
    _, neg, digits, exp = num
    max_bits = current_limits().number_constant_bits
    if len(digits) + abs(exp) > max_bits // 3:
        raise LimitExceeded(
            "number_constant_bits", f"excluding {'-' if neg else ''}{digits}e{exp}", max_bits, where
        )
    x = Fraction(int(digits)) * Fraction(10) ** exp
    return -x if neg else x


class _Num:
    """A number as ``json.loads`` hands it over (``parse_int`` / ``parse_float``): its text."""

    __slots__ = ("canon",)

    def __init__(self, text: str) -> None:
        self.canon = canonical_number(text)


class _Obj:
    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


def _canon(value: Any, first: bool) -> Canon:
    """The canonical value of a parsed value, in the first or the last reading of repeated keys."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, _Num):
        return value.canon
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(_canon(x, first) for x in value))
    assert isinstance(value, _Obj)
    members: dict[str, Any] = {}
    for k, x in value.pairs:
        if first and k in members:
            continue
        members[k] = x
    return ("obj", frozenset((k, _canon(x, first)) for k, x in members.items()))


def views(text: bytes) -> Views:
    """The canonical value of a JSON text the grammar accepted, in both readings of repeated keys."""
    try:
        parsed = json.loads(text.decode("utf-8"), parse_int=_Num, parse_float=_Num, object_pairs_hook=_Obj)
        return (_canon(parsed, True), _canon(parsed, False))
    except RecursionError as e:
        raise LimitExceeded(
            "nesting_depth", ">recursion limit", "the interpreter's", "a uniqueItems item"
        ) from e


def _barred_by(v: Views, x: Excluded) -> bool:
    return v[0] in x[0] or v[1] in x[1]


def _scalars(x: Excluded) -> frozenset[Canon]:
    """The values a scalar (whose two readings agree) must not be: barred in either reading."""
    return x[0] | x[1]


# ---------------------------------------------------------------------------------------------
# Value lexemes
# ---------------------------------------------------------------------------------------------
class ValueLexeme(Protocol):
    """What :class:`UniqueArrayNode` asks of a position's lexeme (besides the Lexeme protocol)."""

    def entry(self, excluded: Excluded) -> Hashable | None: ...

    def value(self, state: Hashable) -> Views: ...

    def values(self, cap: int) -> frozenset[Canon] | None: ...


_LITERALS = {ord("n"): b"null", ord("t"): b"true", ord("f"): b"false"}
_LITERAL_VALUES: dict[bytes, Canon] = {b"null": ("null",), b"true": ("bool", True), b"false": ("bool", False)}
_ANY_NUMBER = NumberPredicate.any()


class _NumbersMinus:
    """Every RFC 8259 number but the values ``barred``: the emitter's number table, with finality
    checked on the value. Trim because every number prefix has infinitely many values (module doc)."""

    __slots__ = ("barred", "dfa")

    def __init__(self, barred: frozenset[Canon], canonical: bool = False) -> None:
        self.barred = barred
        self.dfa = any_number_dfa(canonical)

    def start(self) -> Hashable:
        return (0, b"")

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        st: Any = state
        q, raw = st
        t = self.dfa.step(q, byte)
        return None if t is None else (t, raw + bytes((byte,)))

    def is_final(self, state: Hashable) -> bool:
        st: Any = state
        q, raw = st
        return self.dfa.is_final(q) and canonical_number(raw.decode("ascii")) not in self.barred

    def can_continue(self, state: Hashable) -> bool:
        return bool(self.dfa.live_bytes(state[0]))  # type: ignore[index]

    def witness(self, state: Hashable) -> bytes:
        """Breadth first: a shortest suffix to a value not barred (within len(barred) + 2 digits)."""
        frontier = [(state, b"")]
        while frontier:
            nxt = []
            for st, word in frontier:
                if self.is_final(st):
                    return word
                for b in self.dfa.live_bytes(st[0]):  # type: ignore[index]
                    t = self.step(st, b)
                    assert t is not None
                    nxt.append((t, word + bytes((b,))))
            frontier = nxt
        raise AssertionError("a number prefix has infinitely many values")


_Part = ByteDFA | NumberLexeme | JsonStringLexeme | _NumbersMinus


class ScalarValueLexeme:
    """The JSON texts of ``null`` (if ``null``), the ``booleans``, the numbers of ``number`` and the
    strings of ``string``, minus the values the state excludes. States: ``(X, part, inner state, raw)``
    with ``part`` -1 before the first byte, else an index into the parts built for ``X``."""

    __slots__ = (
        "null",
        "booleans",
        "number",
        "string",
        "_escapes",
        "_canonical",
        "_states",
        "_key",
        "_parts",
        "_limits",
        "where",
    )

    def __init__(
        self,
        null: bool,
        booleans: frozenset[bool],
        number: NumberPredicate,
        string: CodepointDFA,
        unicode_escapes: UnicodeEscapes,
        automaton_states: int,
        where: str = "",
        canonical_numbers: bool = False,
    ) -> None:
        if not number.is_empty() and number != _ANY_NUMBER:
            _check_number_part(number, where)
        # the limits compiled under: the parts are built while matching, under the same ones
        self._limits = current_limits()
        self.null = null
        self.booleans = booleans
        self.number = number
        self.string = string
        self._escapes = unicode_escapes
        self._canonical = canonical_numbers  # JsonProfile.number_spelling == "canonical"
        self._states = automaton_states
        self.where = where
        self._key = (
            "json-unique-scalar",
            null,
            booleans,
            number,
            string.key,
            unicode_escapes,
            automaton_states,
            canonical_numbers,
        )
        self._parts: OrderedDict[frozenset[Canon], tuple[_Part, ...]] = OrderedDict()

    # -- the language minus X, part by part --------------------------------------------------------
    def parts(self, barred: frozenset[Canon]) -> tuple[_Part, ...]:
        """The non-empty parts of the language minus ``barred``, each a trim lexeme."""
        hit = self._parts.get(barred)
        if hit is not None:
            self._parts.move_to_end(barred)
            return hit
        with limits_scope(self._limits):
            return self._build_parts(barred)

    def _build_parts(self, barred: frozenset[Canon]) -> tuple[_Part, ...]:
        out: list[_Part] = []
        words = [w for w, v in _LITERAL_VALUES.items() if v not in barred and self._literal_in(w)]
        if words:
            out.append(_literal_table(words))
        points = sorted(
            (_fraction_of_number(v, self.where) for v in barred if v[0] == "num"),  # type: ignore[index]
        )
        number = self.number
        points = [p for p in points if number.contains(p)]
        if number == _ANY_NUMBER:  # every number prefix has infinitely many values: finality only
            nums = frozenset(v for v in barred if v[0] == "num")  # type: ignore[index]
            out.append(_NumbersMinus(nums, self._canonical))
            number = NumberPredicate.none()
        elif points:
            exclude = NumberPredicate.none()
            for p in points:
                exclude = exclude.or_(NumberPredicate.from_keywords(minimum=p, maximum=p))
            number = number.and_(exclude.not_())
        if not number.is_empty():
            out.append(NumberLexeme(number, self._canonical))
        strings = sorted(v[1] for v in barred if v[0] == "str")  # type: ignore[index]
        lang = self.string
        if strings and not lang.is_empty():
            lang = lang.difference(CodepointDFA.literals(strings))
        if not lang.is_empty():
            out.append(json_string_lexeme(lang, self._escapes, self._states))
        parts = tuple(out)
        self._parts[barred] = parts
        if len(self._parts) > MAX_CACHED:
            self._parts.popitem(last=False)
        return parts

    def _literal_in(self, word: bytes) -> bool:
        if word == b"null":
            return self.null
        return (word == b"true") in self.booleans

    def values(self, cap: int) -> frozenset[Canon] | None:
        """The values of the language, or None when there are at least ``cap`` of them."""
        out: set[Canon] = set()
        if self.null:
            out.add(("null",))
        out.update(("bool", b) for b in self.booleans)
        with limits_scope(self._limits):
            numbers = _predicate_points(self.number, cap)
        if numbers is None:
            return None
        out.update(numbers)
        if len(out) >= cap:
            return None
        size = language_size(self.string, cap)
        if size is None or len(out) + size >= cap:
            return None
        out.update(("str", s) for s in finite_words(self.string))
        return frozenset(out) if len(out) < cap else None

    # -- the value-lexeme protocol ------------------------------------------------------------------
    def entry(self, excluded: Excluded) -> Hashable | None:
        barred = _scalars(excluded)
        return (barred, -1, None, b"") if self.parts(barred) else None

    def value(self, state: Hashable) -> Views:
        return views(state[3])  # type: ignore[index]

    # -- the Lexeme protocol ------------------------------------------------------------------------
    @property
    def key(self) -> Hashable:
        return self._key

    def start(self) -> Hashable:
        return self.entry(NO_VALUES)

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        st: Any = state
        barred, part, inner, raw = st
        parts = self.parts(barred)
        if part >= 0:
            t = parts[part].step(inner, byte)
            return None if t is None else (barred, part, t, raw + bytes((byte,)))
        for k, lex in enumerate(parts):  # the parts' first bytes are disjoint
            t = lex.step(lex.start(), byte)
            if t is not None:
                return (barred, k, t, bytes((byte,)))
        return None

    def is_final(self, state: Hashable) -> bool:
        st: Any = state
        barred, part, inner, _ = st
        return part >= 0 and self.parts(barred)[part].is_final(inner)

    def can_continue(self, state: Hashable) -> bool:
        st: Any = state
        barred, part, inner, _ = st
        return part < 0 or can_continue(self.parts(barred)[part], inner)

    def dfa_view(self, state: Hashable) -> tuple[ByteDFA, int] | None:
        """The byte table and its state reading what this state reads (``_tokens``), inside a part."""
        st: Any = state
        barred, part, inner, _ = st
        if part < 0:
            return None
        lex = self.parts(barred)[part]
        if isinstance(lex, _NumbersMinus):  # same transitions, fewer finals: the table is exact
            return (lex.dfa, inner[0])
        return (lex, inner) if isinstance(lex, ByteDFA) else None

    def witness(self, state: Hashable) -> bytes:
        """A shortest suffix to a final state (``_complete``)."""
        st: Any = state
        barred, part, inner, _ = st
        parts = self.parts(barred)
        if part >= 0:
            return _part_witness(parts[part], inner)
        return min((_part_witness(lex, lex.start()) for lex in parts), key=lambda w: (len(w), w))

    def __repr__(self) -> str:
        return f"ScalarValueLexeme(null={self.null}, booleans={sorted(self.booleans)}, ...)"


def _part_witness(lex: _Part, state: Hashable) -> bytes:
    if lex.is_final(state):
        return b""
    if isinstance(lex, ByteDFA):
        return lex.shortest_suffix(state)  # type: ignore[arg-type]
    word = lex.witness(state)
    assert word is not None, "a trim lexeme has a witness"
    return word


def _literal_table(words: Iterable[bytes]) -> ByteDFA:
    """The byte table of a few literal words (a trie)."""
    trans: dict[int, dict[int, int]] = {0: {}}
    finals: list[int] = []
    for w in words:
        s = 0
        for b in w:
            nxt = trans[s].get(b)
            if nxt is None:
                nxt = len(trans)
                trans[s][b] = nxt
                trans[nxt] = {}
            s = nxt
        finals.append(s)
    return ByteDFA.build(trans, 0, finals)


def _max_number_points() -> int:
    """The values a constrained number position may hold (``Limits.unique_items_number_values``):
    excluding each written one from the predicate splits an interval, and the predicate keeps at most
    ``Limits.number_predicate_conjunctions`` of them, so at most half that many take effect."""
    limits = current_limits()
    return min(limits.unique_items_number_values, limits.number_predicate_conjunctions // 2)


def _check_number_part(number: NumberPredicate, where: str) -> None:
    """Refuse, when compiling, a constrained number position whose exclusions could hit a limit while
    matching: the predicate ``P ∧ ¬{x1, ..., xk}`` is built from the values written, so ``P`` must be
    a finite set of few values (then every value written is one of them, with a representable
    constant), never an infinite one such as the integers, whose written values may be too large for
    a predicate constant or too many for its conjunctions. ``number`` (any value) needs no predicate
    (:class:`_NumbersMinus`)."""
    cap = _max_number_points()
    points = _predicate_points(number, cap + 1)
    if points is None:
        raise Unsupported(
            "uniqueItems",
            where,
            "the items may be numbers of a constrained set with more than "
            f"{cap} values (e.g. integers, or a range; --limit unique_items_number_values=N raises the count): "
            "excluding the numbers already "
            "written from that predicate is not bounded by any limit; any number, a finite set of few "
            "numbers, strings and literals are decided",
        )
    for v in points:
        _fraction_of_number(v, where)  # each value a representable constant, or refused now


def _predicate_points(pred: NumberPredicate, cap: int) -> set[Canon] | None:
    """The numbers of ``pred`` as canonical values, or None when there are at least ``cap``.

    A conjunction is finite only if it is a point or a bounded lattice ``{k·m : k1 <= k <= k2}``
    (its bounds are closed lattice points in canonical form, ``_numbers``) without the multiples of
    the forbidden moduli ``f = q·m``: counted by inclusion-exclusion over the ``q``, listed when fewer
    than ``cap``."""
    out: set[Canon] = set()
    for c in pred.conjunctions:
        if c.lo is None or c.hi is None:
            return None
        if c.lo == c.hi:
            if c.contains(c.lo):
                out.add(_number_of_fraction(c.lo))
            continue
        m = c.multiple_of
        if m is None:
            return None  # a non-degenerate interval: dense
        k1, k2 = c.lo / m, c.hi / m
        assert k1.denominator == 1 and k2.denominator == 1, "canonical lattice bounds"
        lo, hi = k1.numerator, k2.numerator
        qs = [(f / m).numerator for f in c.not_multiple_of]
        terms = [(1, 1)]
        for q in qs:
            terms += [(-sign, math.lcm(g, q)) for sign, g in terms]
        count = sum(sign * (hi // g - (lo - 1) // g) for sign, g in terms)
        if len(out) + count >= cap:
            return None
        span = current_limits().unique_items_number_points * cap + 1024
        if hi - lo > span:  # fewer than cap points spread that thin: not a JSON Schema's
            raise LimitExceeded("unique_items_number_points", hi - lo, span)
        out.update(_number_of_fraction(k * m) for k in range(lo, hi + 1) if all(k % q for q in qs))
    return out if len(out) < cap else None


class AnyValueLexeme:
    """Any JSON value (the network of schema ``true``, run by a sub-parser) minus the values the
    state excludes. States: ``(X, sub-parser state, raw bytes, final)`` (see the module doc)."""

    __slots__ = ("parser", "_key", "_completer")

    def __init__(self, parser: Parser, key: Hashable) -> None:
        self.parser = parser
        self._key = ("json-unique-any", key)
        self._completer: Any = None

    def values(self, cap: int) -> frozenset[Canon] | None:
        return None  # infinitely many

    def entry(self, excluded: Excluded) -> Hashable | None:
        return (excluded, self.parser.initial(), b"", False)

    def value(self, state: Hashable) -> Views:
        return views(state[2])  # type: ignore[index]

    @property
    def key(self) -> Hashable:
        return self._key

    def start(self) -> Hashable:
        return self.entry(NO_VALUES)

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        st: Any = state
        x, sub, raw, _ = st
        nxt = self.parser.step(sub, byte)
        if nxt is None:
            return None
        text = raw + bytes((byte,))
        if not raw and byte in _LITERALS:  # a literal's prefix: one completion, the literal
            v = _LITERAL_VALUES[_LITERALS[byte]]
            if _barred_by((v, v), x):
                return None
        final = nxt.accepting and not _barred_by(views(text), x)
        if not nxt.stacks and not final:
            return None  # a closed value (string, container, literal) that is barred
        return (x, nxt, text, final)

    def is_final(self, state: Hashable) -> bool:
        return bool(state[3])  # type: ignore[index]

    def can_continue(self, state: Hashable) -> bool:
        return bool(state[1].stacks)  # type: ignore[index]

    def witness(self, state: Hashable) -> bytes | None:
        """A short suffix to a final state: the sub-network's shortest completion after the shortest
        extensions that make it land outside ``X`` (breadth first over extensions, bounded)."""
        from ._complete import Completer

        if self._completer is None:
            self._completer = Completer(self.parser.network)
        frontier: list[tuple[Hashable, bytes]] = [(state, b"")]
        tried = 0
        while frontier and tried < 4096:
            nxt_frontier: list[tuple[Hashable, bytes]] = []
            for st, ext in frontier:
                tried += 1
                word = self._completer.complete(st[1])  # type: ignore[index]
                if word is not None:
                    end = _run(self, st, word)
                    if end is not None and self.is_final(end):
                        return ext + word
                for b in self.parser.live_bytes(st[1]):  # type: ignore[index]
                    t = self.step(st, b)
                    if t is not None:
                        nxt_frontier.append((t, ext + bytes((b,))))
            frontier = nxt_frontier
        return None

    def __repr__(self) -> str:
        return "AnyValueLexeme()"


def _run(lexeme: Any, state: Hashable, word: bytes) -> Hashable | None:
    for b in word:
        state = lexeme.step(state, b)
        if state is None:
            return None
    return state


# ---------------------------------------------------------------------------------------------
# The array node
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class UniqueArrayNode:
    """``[ item (, item)* ]`` with pairwise distinct items. Locals: ``("open",)``, ``("done",)`` and
    ``(phase, i, E)`` — the next position (saturated when ``maxItems`` is absent) and the values
    written, per reading; phase ``"item"`` waits for an item's lexeme to return (``receive``)."""

    lbracket: int  # "[" ws
    close_first: int  # "]"
    close_after: int  # ws "]"
    comma: int  # ws "," ws
    items: tuple[int, ...]  # the value-lexeme node per position < len(items) - 1; the last repeats
    lexemes: tuple[Any, ...]  # the ValueLexeme of each of those nodes
    min_items: int
    max_items: int | None
    _memo: dict[Hashable, frozenset[Canon] | None] = field(default_factory=dict, compare=False, repr=False)

    receives = True

    # -- static protocol ------------------------------------------------------------------------
    def children(self) -> tuple[int, ...]:
        return (self.lbracket, self.close_first, self.close_after, self.comma) + self.items

    def nullable(self, is_nullable: Callable[[int], bool]) -> bool:
        return False

    def productive(self, is_productive: Callable[[int], bool]) -> bool:
        return self.min_items == 0 or self._barred(0, NO_VALUES) is not None

    def left_calls(self, is_nullable: Callable[[int], bool]) -> tuple[int, ...]:
        return (self.lbracket,)

    def remap(self, f: Callable[[int], int]) -> UniqueArrayNode:
        """This node with child ids through ``f`` (``GrammarBuilder.embed``)."""
        return replace(
            self,
            lbracket=f(self.lbracket),
            close_first=f(self.close_first),
            close_after=f(self.close_after),
            comma=f(self.comma),
            items=tuple(map(f, self.items)),
            _memo={},
        )

    def prune(self, is_productive: Callable[[int], bool]) -> UniqueArrayNode:
        return replace(self, _memo={})  # every child is a lexeme or a literal sequence: productive

    def enter(self) -> Hashable:
        return ("open",)

    # -- completability (Hall's condition, see the module doc) ----------------------------------
    def _lexeme(self, i: int) -> Any:
        return self.lexemes[min(i, len(self.lexemes) - 1)]

    def _sat(self, i: int) -> int:
        if self.max_items is None:
            return min(i, max(len(self.items) - 1, self.min_items))
        return i

    def _barred(self, i: int, written: Excluded) -> frozenset[Canon] | None:
        """The values an item at position ``i`` must not be, beyond ``written``, for the array to stay
        closable; None when no item can be added at ``i``."""
        key = (i, written)
        if key in self._memo:
            return self._memo[key]
        got = self._barred_uncached(i, written)
        self._memo[key] = got
        return got

    def _barred_uncached(self, i: int, written: Excluded) -> frozenset[Canon] | None:
        end = max(i + 1, self.min_items)
        if self.max_items is not None and end > self.max_items:
            return None
        used = _scalars(written)
        rest = end - i - 1  # positions after this one that must still be filled
        # The small sets among the later positions (fewer than rest + 1 values left): the others
        # can always be filled last, even with one more value excluded.
        small: list[frozenset[Canon]] = []
        for j in range(i + 1, end):
            vals = self._lexeme(j).values(rest + 1 + len(used))
            if vals is not None and len(vals - used) <= rest:
                small.append(vals - used)
        matching = _match(small)
        if matching is None:
            return None
        bad = frozenset(v for v in set(matching) if _match(small, without=v) is None)
        here = self._lexeme(i).values(len(used) + len(bad) + 1)
        if here is not None and not (here - used - bad):
            return None
        return bad

    # -- dynamics -------------------------------------------------------------------------------
    def actions(self, local: Any) -> tuple[Action, ...]:
        phase = local[0]
        if phase == "open":
            return ((CALL, self.lbracket, ("first", 0, NO_VALUES)),)
        if phase == "done":
            return (_RET,)
        _, i, written = local
        out: list[Action] = []
        if phase in ("first", "after") and i >= self.min_items:
            out.append((CALL, self.close_first if phase == "first" else self.close_after, ("done",)))
        adds: list[Action] = []
        if self.max_items is None or i < self.max_items:
            bad = self._barred(i, written)
            if bad is not None:
                entry = self._lexeme(i).entry((written[0] | bad, written[1] | bad))
                assert entry is not None, "_barred leaves some value at this position"
                node = self.items[min(i, len(self.items) - 1)]
                adds.append((CALL, node, ("item", i, written), entry))
        if phase in ("first", "next"):
            out.extend(adds)
        elif adds:
            out.append((CALL, self.comma, ("next", i, written)))
        return tuple(out)

    def receive(self, local: Any, state: Hashable) -> Hashable:
        """An item has been read (``_ir``: ``receive``): remember its value."""
        if local[0] != "item":
            return local
        _, i, written = local
        first, last = self._lexeme(i).value(state)
        return ("after", self._sat(i + 1), (written[0] | {first}, written[1] | {last}))


def _match(sets: list[frozenset[Canon]], without: Canon | None = None) -> dict[Canon, int] | None:
    """A matching of every set to a distinct value (value -> set index), avoiding ``without``; None
    when there is none (Kuhn's augmenting paths)."""
    owner: dict[Canon, int] = {}
    for s in range(len(sets)):
        seen: set[Canon] = set()
        if not _augment(s, sets, owner, seen, without):
            return None
    return owner


def _augment(
    s: int, sets: list[frozenset[Canon]], owner: dict[Canon, int], seen: set[Canon], without: Canon | None
) -> bool:
    stack: list[tuple[int, list[Canon]]] = [(s, sorted(sets[s], key=repr))]
    path: list[tuple[int, Canon]] = []
    while stack:
        node, options = stack[-1]
        if not options:
            stack.pop()
            if path:
                path.pop()
            continue
        v = options.pop()
        if v == without or v in seen:
            continue
        seen.add(v)
        path.append((node, v))
        if v not in owner:
            for n, val in path:
                owner[val] = n
            return True
        stack.append((owner[v], sorted(sets[owner[v]], key=repr)))
    return False
