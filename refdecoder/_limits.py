"""Resource limits and the compile budget (time and fuel) every front-end spends from.

Specs are untrusted input: a schema, a pattern or a grammar may ask for a billion-state automaton in a
few bytes. Two defences, both raising :class:`~refdecoder.errors.LimitExceeded`:

* **Structural limits** (:class:`Limits`): every numeric bound a spec states (string and array
  lengths, item, property and repetition counts, nesting depth, enum sizes) is compared with its limit
  *before* any work proportional to it, so a refusal costs microseconds.
* **A compile budget** (:class:`Budget`): work is counted in *fuel* (one unit per automaton state
  built, subset explored, product pair, schema node normalized, ...; the idea is llguidance's fuel),
  and wall-clock time is checked as fuel is spent. An input that no single limit catches still stops,
  typed, after at most ``compile_fuel`` units or ``compile_seconds`` seconds.

``compile()`` makes a budget current for the duration of one compilation (:func:`budget_scope`); deep
helpers (``_fsa``, ``_regex``, ...) charge it with :func:`spend` and read the limits with
:func:`current_limits`, so no signature has to carry them. Outside a compilation ``spend`` is free;
a grammar node that computes while matching reads the limits it was compiled under through
:func:`limits_scope`.

Defaults and how to raise them: ``docs/design.md`` ("Limits"); ``Limits(name=value)`` from Python,
``--limit name=value`` on ``maskcert check-schema`` and ``maskcert certify``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Any

from .errors import LimitExceeded, LimitName, SpecError

__all__ = [
    "Limits",
    "Budget",
    "Deadline",
    "budget_scope",
    "spend",
    "current_limits",
    "limits_scope",
    "parse_limit",
]


@dataclass(frozen=True)
class Limits:
    """Resource limits; each raises ``LimitExceeded(limit, value)`` when crossed.

    * ``schema_bytes``: size of a spec (a schema as JSON text, a grammar, a spec file read from disk).
    * ``nesting_depth``: nesting of a spec file or schema (arrays/objects), of GBNF groups, and of the
      runtime parser's stack.
    * ``enum_size``: entries of an ``enum`` or a choice list.
    * ``automaton_states``: states of one tabulated byte lexeme automaton (a JSON string language whose
      byte automaton would be larger is read lazily over its code point automaton instead).
    * ``dfa_states``: states of one code point automaton (a pattern, a ``format``, a string language
      built by intersection, union, complement or repetition), checked as each construction runs.
    * ``nfa_states``: states of one ε-NFA built on the way to such an automaton (concatenation,
      repetition, a trie of enum strings); a regex's own Thompson automaton may use a fifth of it and
      its anchor-phase product two fifths (``_regex``).
    * ``parser_stacks``: simultaneous parser stacks (ambiguity) at one byte.
    * ``compile_seconds``: wall-clock time of one compilation.
    * ``object_properties``: properties one object schema names.
    * ``alternatives``: object (or array) shapes in one union, as ``anyOf``/``oneOf``/``not`` build them.
    * ``key_rules``: key languages (``patternProperties`` rules and complemented ``exists`` entries)
      that partition one object's undeclared keys (the partition has up to 2**key_rules regions).
    * ``repeat_bound``: the largest count a spec may ask the reference to unroll or count up to
      (``minLength``/``maxLength``, ``minItems``, ``minContains``/``maxContains``, ``minProperties``,
      regex and GBNF ``{n,m}``, ``prefixItems`` entries).
    * ``compile_fuel``: units of work of one compilation (see the module docstring).
    * ``byte_dfa_states``: states of one byte-level view of a code point automaton (its UTF-8 or JSON
      string encodings, ``_fsa``), checked as the view is built.
    * ``repetition_count``: the largest count a GBNF ``{m,n}`` may write (llama.cpp would wrap larger
      ones).
    * ``rewrite_symbols``: symbols of the productions the GBNF left-recursion rewrite may build for
      one group of mutually left-recursive rules (Paull's algorithm can grow them exponentially);
      beyond it the grammar is refused as ``Unsupported("gbnf-left-recursion")``.
    * ``lookahead_steps``: steps of the proof that a grammar already implies one of its lookahead
      assertions (xgrammar's ``(= ...)``); out of steps it is refused as ``Unsupported("lookahead")``.
    * ``unevaluated_cases``: cases one ``unevaluatedProperties``/``unevaluatedItems`` analysis keeps
      for a schema location (``_unevaluated``).
    * ``unevaluated_alternatives``: container shapes in the condition of one such case.
    * ``number_constant_bits``: bits of the numerator or denominator of a number constant (a schema's
      bound or ``multipleOf``, their lcm, a value a unique array excludes).
    * ``number_not_multiple_of``: moduli one numeric conjunction may forbid (``not`` of
      ``multipleOf``; inclusion-exclusion costs ``2**n`` terms).
    * ``number_predicate_conjunctions``: conjunctions of one numeric predicate after simplification
      (``not`` and ``oneOf`` multiply them out).
    * ``unique_items_number_values``: values of a constrained number position of a ``uniqueItems``
      array (each written value is excluded from the predicate; at most half
      ``number_predicate_conjunctions`` take effect).
    * ``unique_items_number_points``: lattice points such a position may span per value sought while
      its values are listed (beyond ``this × values + 1024`` it is refused).
    * ``object_exists_per_key``: ``exists`` entries (complemented rules) one key may meet at once
      (``2**n`` member variants).
    * ``object_search_states``: states of the search that decides whether an object can still be
      closed (required keys, ``exists`` entries, counts), per decision while matching.
    """

    schema_bytes: int = 2_000_000
    nesting_depth: int = 256
    enum_size: int = 10_000
    automaton_states: int = 50_000
    dfa_states: int = 50_000
    nfa_states: int = 1_000_000
    parser_stacks: int = 4_096
    compile_seconds: float = 30.0
    object_properties: int = 512
    alternatives: int = 64
    key_rules: int = 8
    repeat_bound: int = 100_000
    compile_fuel: int = 2_000_000
    byte_dfa_states: int = 200_000
    repetition_count: int = 1_000_000
    rewrite_symbols: int = 20_000
    lookahead_steps: int = 200_000
    unevaluated_cases: int = 64
    unevaluated_alternatives: int = 64
    number_constant_bits: int = 4096
    number_not_multiple_of: int = 8
    number_predicate_conjunctions: int = 64
    unique_items_number_values: int = 32
    unique_items_number_points: int = 64
    object_exists_per_key: int = 4
    object_search_states: int = 100_000

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise SpecError(f"bad Limits.{f.name}", repr(v), "a positive number")


def parse_limit(item: str, limits: Limits) -> Limits:
    """``limits`` with one ``NAME=VALUE`` applied (the ``--limit`` flag); :class:`SpecError` naming
    the known names otherwise."""
    from dataclasses import replace

    names = {f.name: f.type for f in fields(Limits)}
    name, eq, raw = item.partition("=")
    name = name.strip().replace("-", "_")
    if not eq or name not in names:
        raise SpecError("bad --limit", repr(item), f"NAME=VALUE with NAME one of {', '.join(names)}")
    try:
        value: Any = float(raw) if name == "compile_seconds" else int(raw.replace("_", ""))
    except ValueError:
        raise SpecError(f"bad --limit {name}", repr(raw), "a positive number") from None
    return replace(limits, **{name: value})


class Budget:
    """One compilation's budget: ``compile_fuel`` units of work and ``compile_seconds`` of wall clock."""

    _CLOCK_EVERY = 4096  # fuel units between clock reads

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.seconds = limits.compile_seconds
        self.fuel = limits.compile_fuel
        self.used = 0
        self.start = time.monotonic()
        self._next_clock = self._CLOCK_EVERY

    def check(self, where: str = "") -> None:
        elapsed = time.monotonic() - self.start
        if elapsed > self.seconds:
            raise LimitExceeded("compile_seconds", round(elapsed, 3), self.seconds, where)

    def spend(self, units: int, where: str = "") -> None:
        self.used += units
        if self.used > self.fuel:
            raise LimitExceeded("compile_fuel", self.used, self.fuel, where)
        if self.used >= self._next_clock:
            self._next_clock = self.used + self._CLOCK_EVERY
            self.check(where)


class Deadline(Budget):
    """A time-only budget (``Deadline(seconds).check()``): the current budget's clock when a
    compilation is running, so every front-end shares one clock."""

    def __init__(self, seconds: float) -> None:
        cur = _CURRENT.get()
        super().__init__(cur.limits if cur is not None else Limits(compile_seconds=seconds))
        self.seconds = seconds
        if cur is not None:
            self.start = cur.start


_CURRENT: ContextVar[Budget | None] = ContextVar("refdecoder_budget", default=None)


@contextmanager
def budget_scope(limits: Limits) -> Iterator[Budget]:
    """Make a fresh budget current (nested scopes share the outer one: one compilation, one budget)."""
    outer = _CURRENT.get()
    if outer is not None:
        yield outer
        return
    budget = Budget(limits)
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def spend(units: int, where: str = "") -> None:
    """Charge the current compilation ``units`` of fuel (free outside a compilation)."""
    cur = _CURRENT.get()
    if cur is not None:
        cur.spend(units, where)


def current_limits() -> Limits:
    """The limits of the running compilation; outside one, those of :func:`limits_scope` (the
    defaults outside both)."""
    cur = _CURRENT.get()
    if cur is not None:
        return cur.limits
    return _MATCHING.get() or _DEFAULT


_MATCHING: ContextVar[Limits | None] = ContextVar("refdecoder_matching_limits", default=None)


@contextmanager
def limits_scope(limits: Limits) -> Iterator[None]:
    """Make ``limits`` current without a budget: a grammar node that computes while matching (a
    unique array's value memory) reads the limits it was compiled under, and spends no fuel."""
    token = _MATCHING.set(limits)
    try:
        yield
    finally:
        _MATCHING.reset(token)


def check_bound(name: str, value: int, where: str = "", limit: LimitName = "repeat_bound") -> None:
    """Refuse a count a spec states before any work proportional to it."""
    bound = getattr(current_limits(), limit)
    if value > bound:
        raise LimitExceeded(limit, f"{name} {value}", bound, where)


_DEFAULT = Limits()
