"""Deterministic automata over Unicode scalar values (the regular pieces of the grammar IR, docs/design.md §2).

Theory of operation
-------------------
A :class:`CodepointDFA` is an immutable, *canonical* DFA over the alphabet Σ of Unicode scalar values
(U+0000..U+10FFFF without surrogates, see :mod:`refdecoder._cpset`). Each state has a row of
transitions ``(lo, hi, target)`` on sorted, disjoint closed intervals of code points; a code point
outside every interval goes to the implicit dead state (the automaton is *partial*). Every value is
built through :func:`canonical`, which

1. trims: keeps the states reachable from the start that can reach a final state;
2. minimizes with Hopcroft's partition refinement lifted to interval labels (the "symbolic"
   Hopcroft of D'Antoni & Veanes, *Minimization of Symbolic Automata*, POPL 2014): splitting a block
   by splitter ``B`` groups its states by the exact set of code points ``{c : δ(s, c) ∈ B}``; an
   automaton without cycles (a finite language, e.g. under ``maxLength``) takes Revuz's linear
   bottom-up pass instead (:func:`_revuz`), which gives the same classes;
3. renumbers states breadth-first from the start, following intervals in increasing order, and
   merges adjacent intervals that lead to the same state.

Two automata with the same language therefore have identical tables, so ``key`` (a digest of the
table) identifies the language and ``==`` is language equality.

Regular operations that are not products (concatenation, star, repetition) go through an ε-NFA
(Thompson, *Regular expression search algorithm*, CACM 1968) and the subset construction
(Rabin & Scott 1959), computing at each subset the partition of the code point line induced by the
intervals of its members (a sweep over interval end points). Boolean operations use the product
construction with an implicit dead state on either side. Every construction is bounded by
``max_states`` (default: ``Limits.dfa_states`` of the running compilation, :func:`dfa_bound`) and
raises :class:`~refdecoder.errors.LimitExceeded` beyond it, never truncates.
The ε-NFA (:class:`Nfa`) and its subset construction (:func:`determinize`) are the package's only
ones: the regex front end (``_regex``) and the grammar builder's regular pieces over bytes
(``_grammar_build``) use them too, with their own bounds and meter.

Byte-level views (:meth:`CodepointDFA.to_utf8`, :meth:`CodepointDFA.to_json_string`) expand every
transition into the byte paths of its encodings (UTF-8 via :func:`~refdecoder._lexeme.utf8_sequences`;
JSON short escapes, ``\\uXXXX`` digit-range automata, surrogate pairs) and determinize those paths
directly (see :func:`_expand_to_bytes`); the canonical byte table (trim, minimal, BFS-numbered with
bytes ascending — exactly what :meth:`ByteDFA.build <refdecoder._lexeme.ByteDFA.build>` computes,
which the tests check) fills a :class:`~refdecoder._lexeme.ByteDFA` without ``build``'s Moore pass,
whose number of rounds grows with the automaton's depth. Conversions are memoized by language.

Strings are sequences of *scalar values*: a JSON ``\\uD800`` not followed by a low surrogate
escape (a lone surrogate) is never part of a member's encoding.
"""

from __future__ import annotations

import gc
import hashlib
import heapq
from array import array
from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Literal, Union

from refdecoder._cpset import (
    ALPHABET,
    MAX_CODEPOINT,
    SURROGATE_HI,
    SURROGATE_LO,
    complement,
    normalize,
)
from refdecoder._lexeme import ByteDFA, live_states, utf8_sequences
from refdecoder._limits import Limits, check_bound, current_limits, spend
from refdecoder.errors import LimitExceeded, LimitName


class ByteViewTooLarge(LimitExceeded):
    """A byte-level view of a code point automaton (:meth:`CodepointDFA.to_utf8`,
    :meth:`CodepointDFA.to_json_string`) passed the bound it was given; ``limit`` names the
    ``Limits`` field that bound came from. A caller that has a lazy alternative catches this class
    (never a limit name compared as a string); others see a plain ``LimitExceeded``."""


__all__ = [
    "CodepointDFA",
    "MAX_STATES",
    "MAX_BYTE_STATES",
    "MAX_NFA_STATES",
    "ALPHABET",
    "MAX_CODEPOINT",
    "dfa_bound",
    "Edge",
    "Row",
    "Meter",
    "Nfa",
    "determinize",
    "canonical",
    "from_minimal",
    "walk_minimal",
    "canonical_bytes",
    "byte_literal",
    "UnicodeEscapes",
    "u_escape_max",
]

#: Which code points a JSON string may spell as ``\\uXXXX`` (``JsonProfile.unicode_escapes``): ``True``
#: every one (pairs above U+FFFF), ``False`` none, ``"controls"`` only U+0000..U+001F.
UnicodeEscapes = Union[bool, Literal["controls"]]


def u_escape_max(unicode_escapes: UnicodeEscapes) -> int:
    """The highest code point a ``\\u`` escape may spell under ``unicode_escapes`` (-1: none)."""
    if unicode_escapes == "controls":
        return 0x1F
    return 0x10FFFF if unicode_escapes else -1


#: The default of ``Limits.dfa_states``: the bound on the states of a code point automaton when
#: neither the caller nor the running compilation's limits say otherwise.
MAX_STATES = Limits().dfa_states
#: The default of ``Limits.byte_dfa_states``: the bound on a byte-level view (a code point state
#: expands to up to ~25 byte states in JSON) when neither the caller nor the running compilation says.
MAX_BYTE_STATES = Limits().byte_dfa_states
#: The default of ``Limits.nfa_states``: the bound on intermediate ε-NFAs (Thompson constructions,
#: byte expansions) when no compilation is running.
MAX_NFA_STATES = Limits().nfa_states

Edge = tuple[int, int, int]  # (lo, hi, target): closed interval of symbols
Row = tuple[Edge, ...]
_INF = 1 << 40
DEAD = -1


def dfa_bound(max_states: int | None = None) -> int:
    """``max_states``, or the running compilation's ``Limits.dfa_states`` when it is None."""
    return current_limits().dfa_states if max_states is None else max_states


def _byte_bound(max_states: int | None) -> int:
    """``max_states``, or the running compilation's ``Limits.byte_dfa_states`` when it is None."""
    return current_limits().byte_dfa_states if max_states is None else max_states


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while building large acyclic-garbage-free tables (speed only)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# ε-NFA with interval-labelled edges, and the subset construction
# ---------------------------------------------------------------------------------------------
#: Charges ``units`` of work done ``where``: :func:`~refdecoder._limits.spend` (the compile budget's
#: fuel) by default; the grammar builder passes a clock check instead (``_grammar_build``).
Meter = Callable[[int, str], None]


class Nfa:
    """A mutable ε-NFA builder over integer symbols (code points or bytes) with interval-labelled edges.

    The one ε-NFA of the package: regex Thompson constructions (``_regex``), the regular operations
    here, and the grammar builder's regular pieces over bytes (``_grammar_build``) all build on it and
    determinize it with :func:`determinize`. ``max_states`` bounds its states (default: the running
    compilation's ``Limits.nfa_states``); ``meter`` is charged one unit per state.
    """

    __slots__ = ("edges", "eps", "max_states", "meter")

    def __init__(self, max_states: int | None = None, meter: Meter = spend) -> None:
        self.edges: list[list[Edge]] = []
        self.eps: list[list[int]] = []
        self.max_states = current_limits().nfa_states if max_states is None else max_states
        self.meter = meter

    def state(self) -> int:
        if len(self.edges) >= self.max_states:
            raise LimitExceeded("nfa_states", len(self.edges) + 1, self.max_states)
        self.meter(1, "")
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def edge(self, s: int, lo: int, hi: int, t: int) -> None:
        self.edges[s].append((lo, hi, t))

    def epsilon(self, s: int, t: int) -> None:
        self.eps[s].append(t)

    def embed(self, dfa: CodepointDFA) -> tuple[int, list[int]]:
        """Copy ``dfa`` in; return (its start, its finals) as NFA states."""
        return self.embed_rows(dfa._rows, dfa._finals)

    def embed_rows(self, rows: Sequence[Iterable[Edge]], finals: Iterable[int]) -> tuple[int, list[int]]:
        """Copy in an automaton given as rows of ``(lo, hi, target)`` edges (state 0 its start);
        return (its start, its finals) as NFA states."""
        base = len(self.edges)
        for _ in range(len(rows)):
            self.state()
        for s, row in enumerate(rows):
            self.edges[base + s].extend((lo, hi, base + t) for lo, hi, t in row)
        return base, [base + f for f in sorted(finals)]


def determinize(
    nfa: Nfa,
    starts: Iterable[int],
    finals: Iterable[int],
    *,
    max_states: int | None = None,
    universal: Iterable[int] = (),
    where: str = "",
) -> tuple[list[list[Edge]], set[int]]:
    """The subset construction of ``nfa`` (see :func:`_determinize_impl`): (rows, finals), start state
    0; :class:`LimitExceeded` ``("dfa_states")`` past ``max_states`` subsets (default: the running
    compilation's ``Limits.dfa_states``)."""
    bound = dfa_bound(max_states)
    with _gc_paused():
        return _determinize_impl(nfa, starts, finals, max_states=bound, universal=universal, where=where)


def _determinize_impl(
    nfa: Nfa,
    starts: Iterable[int],
    finals: Iterable[int],
    *,
    max_states: int,
    universal: Iterable[int] = (),
    where: str = "",
) -> tuple[list[list[Edge]], set[int]]:
    """Subset construction with interval splitting. Returns (rows, finals), start state 0.

    ``universal`` names NFA states whose language is Σ* (e.g. the trailing ``Σ*`` loop of a search
    pattern): a subset containing one denotes Σ* as well and is collapsed to that single state, an
    exact shortcut that keeps unanchored searches small.
    """
    eps = nfa.eps
    edges = nfa.edges
    final_set = frozenset(finals)
    univ = frozenset(universal)
    closures: dict[frozenset[int], frozenset[int]] = {}

    def closure(seed: frozenset[int]) -> frozenset[int]:
        got = closures.get(seed)
        if got is not None:
            return got
        seen = set(seed)
        stack = list(seed)
        while stack:
            q = stack.pop()
            for t in eps[q]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        if univ:
            hit = seen & univ
            if hit:
                seen = {min(hit)}
        result = frozenset(seen)
        closures[seed] = result
        return result

    start = closure(frozenset(starts))
    index: dict[frozenset[int], int] = {start: 0}
    queue: list[frozenset[int]] = [start]
    rows: list[list[Edge]] = []
    out_finals: set[int] = set()
    i = 0
    while i < len(queue):
        subset = queue[i]
        if not final_set.isdisjoint(subset):
            out_finals.add(i)
        evs: list[Edge] = []
        for q in subset:
            evs.extend(edges[q])
        nfa.meter(1 + len(subset) + len(evs), where)
        row: list[Edge] = []
        if evs:
            for lo, hi, targets in _partition(evs):
                nxt = closure(targets)
                j = index.get(nxt)
                if j is None:
                    j = len(queue)
                    if j >= max_states:
                        raise LimitExceeded("dfa_states", j + 1, max_states, where)
                    index[nxt] = j
                    queue.append(nxt)
                if row and row[-1][2] == j and row[-1][1] + 1 == lo:
                    row[-1] = (row[-1][0], hi, j)
                else:
                    row.append((lo, hi, j))
        rows.append(row)
        i += 1
    return rows, out_finals


def _partition(evs: list[Edge]) -> list[tuple[int, int, frozenset[int]]]:
    """Split overlapping labelled intervals into disjoint segments with their target sets."""
    if len(evs) == 1:
        lo, hi, t = evs[0]
        return [(lo, hi, frozenset((t,)))]
    points: list[tuple[int, int, int]] = []
    for lo, hi, t in evs:
        points.append((lo, 1, t))
        points.append((hi + 1, 0, t))
    points.sort()
    active: dict[int, int] = {}
    out: list[tuple[int, int, frozenset[int]]] = []
    k = 0
    m = len(points)
    while k < m:
        pos = points[k][0]
        while k < m and points[k][0] == pos:
            _, kind, t = points[k]
            if kind:
                active[t] = active.get(t, 0) + 1
            else:
                c = active[t] - 1
                if c:
                    active[t] = c
                else:
                    del active[t]
            k += 1
        if active and k < m:
            out.append((pos, points[k][0] - 1, frozenset(active)))
    return out


# ---------------------------------------------------------------------------------------------
# Canonical form: trim, Hopcroft minimization on interval labels, BFS numbering
# ---------------------------------------------------------------------------------------------
def _merge_adjacent(ivs: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    ivs.sort()
    out: list[tuple[int, int]] = []
    for lo, hi in ivs:
        if out and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _hopcroft(n: int, rows: Sequence[Sequence[Edge]], finals: set[int]) -> list[int]:
    """Coarsest partition of the (trim, partial) DFA's states into language classes.

    The initial partition groups states by finality and *domain* (the symbols with a transition):
    equivalent trim states agree on both, because only the implicit dead state has the empty
    language. Stability against the dead block is then automatic, and against the union of all
    live blocks too (its preimage is the domain), so the worklist starts with all blocks but the
    largest, as in Hopcroft's algorithm.
    """
    inv: list[list[Edge]] = [[] for _ in range(n)]
    for s in range(n):
        for lo, hi, t in rows[s]:
            inv[t].append((s, lo, hi))
    blk = [0] * n
    members: list[set[int]] = []
    first: dict[tuple[bool, tuple[tuple[int, int], ...]], int] = {}
    for s in range(n):
        dom = _merge_adjacent([(lo, hi) for lo, hi, _ in rows[s]])
        key = (s in finals, dom)
        bid = first.get(key)
        if bid is None:
            bid = first[key] = len(members)
            members.append(set())
        members[bid].add(s)
        blk[s] = bid
    largest = max(range(len(members)), key=lambda i: (len(members[i]), -i))
    work = [i for i in range(len(members)) if i != largest]
    in_work = set(work)
    while work:
        b = work.pop()
        in_work.discard(b)
        pre: dict[int, list[tuple[int, int]]] = {}
        for t in list(members[b]):
            for s, lo, hi in inv[t]:
                got = pre.get(s)
                if got is None:
                    pre[s] = [(lo, hi)]
                else:
                    got.append((lo, hi))
        spend(1 + len(pre))
        by_block: dict[int, dict[tuple[tuple[int, int], ...], list[int]]] = {}
        for s, ivs in pre.items():
            sig = _merge_adjacent(ivs) if len(ivs) > 1 else (ivs[0],)
            by_block.setdefault(blk[s], {}).setdefault(sig, []).append(s)
        for y, groups in by_block.items():
            parts = list(groups.values())
            touched = sum(len(p) for p in parts)
            ysize = len(members[y])
            if len(parts) == 1 and touched == ysize:
                continue
            if touched == ysize:
                parts.sort(key=lambda p: (len(p), -min(p)))
                parts.pop()  # the largest part keeps the old id
            new_ids: list[int] = []
            for p in parts:
                nid = len(members)
                members.append(set(p))
                members[y].difference_update(p)
                for s in p:
                    blk[s] = nid
                new_ids.append(nid)
            if y in in_work:
                for nid in new_ids:
                    work.append(nid)
                    in_work.add(nid)
            else:
                cands = [y, *new_ids]
                largest = max(cands, key=lambda i: (len(members[i]), -i))
                for i in cands:
                    if i != largest:
                        work.append(i)
                        in_work.add(i)
    return blk


def _revuz(n: int, rows: Sequence[Sequence[Edge]], finals: set[int]) -> list[int] | None:
    """The language classes of a trim DFA *without cycles* (a finite language: a ``maxLength``, a
    ``format`` of bounded length), in linear time; None when it has a cycle (then :func:`_hopcroft`).

    Revuz, *Minimisation of acyclic deterministic automata in linear time* (TCS 1992): visited in
    reverse topological order, a state's class is its signature — finality and its transitions with
    targets replaced by their classes, adjacent intervals with one class merged — so two states get one
    class exactly when they have the same language (by induction on the longest word from them)."""
    indegree = [0] * n
    for row in rows:
        for _, _, t in row:
            indegree[t] += 1
    order = [s for s in range(n) if indegree[s] == 0]
    for s in order:  # Kahn's topological sort; ``order`` grows while it is walked
        for _, _, t in rows[s]:
            indegree[t] -= 1
            if indegree[t] == 0:
                order.append(t)
    if len(order) != n:
        return None
    spend(n)
    cls = [0] * n
    ids: dict[tuple[bool, tuple[Edge, ...]], int] = {}
    for s in reversed(order):
        sig: list[Edge] = []
        for lo, hi, t in sorted(rows[s]):
            c = cls[t]
            if sig and sig[-1][2] == c and sig[-1][1] + 1 == lo:
                sig[-1] = (sig[-1][0], hi, c)
            else:
                sig.append((lo, hi, c))
        cls[s] = ids.setdefault((s in finals, tuple(sig)), len(ids))
    return cls


def _canonical_tables(
    rows: Sequence[Sequence[Edge]], start: int, finals: Iterable[int], *, minimal: bool = False
) -> tuple[tuple[Row, ...], frozenset[int]]:
    """Trim, minimize and renumber. The empty language is ``(((),), frozenset())``. ``minimal``: the
    caller knows that the trim part of the automaton is minimal already (no two of its states have the
    same language), so Hopcroft's pass is skipped."""
    with _gc_paused():
        return _canonical_tables_impl(rows, start, finals, minimal)


def _canonical_tables_impl(
    rows: Sequence[Sequence[Edge]], start: int, finals: Iterable[int], minimal: bool = False
) -> tuple[tuple[Row, ...], frozenset[int]]:
    fin = set(finals)
    order, live = live_states(start, lambda s: [t for _, _, t in rows[s]], fin)
    if start not in live:
        return ((),), frozenset()
    ids = {s: i for i, s in enumerate(s for s in order if s in live)}
    m = len(ids)
    spend(m + len(order))
    crow: list[list[Edge]] = [[] for _ in range(m)]
    cfin: set[int] = set()
    for s, i in ids.items():
        crow[i] = [(lo, hi, ids[t]) for lo, hi, t in rows[s] if t in live]
        if s in fin:
            cfin.add(i)
    if minimal:
        blk = list(range(m))
    else:
        acyclic = _revuz(m, crow, cfin)
        blk = acyclic if acyclic is not None else _hopcroft(m, crow, cfin)
    rep: dict[int, int] = {}
    for s in range(m):
        rep.setdefault(blk[s], s)
    num = {blk[0]: 0}
    queue = [blk[0]]
    out_rows: list[Row] = []
    out_fin: set[int] = set()
    qi = 0
    while qi < len(queue):
        b = queue[qi]
        s = rep[b]
        if s in cfin:
            out_fin.add(qi)
        merged: list[Edge] = []
        for lo, hi, t in sorted(crow[s]):
            tb = blk[t]
            j = num.get(tb)
            if j is None:
                j = num[tb] = len(queue)
                queue.append(tb)
            if merged and merged[-1][2] == j and merged[-1][1] + 1 == lo:
                merged[-1] = (merged[-1][0], hi, j)
            else:
                merged.append((lo, hi, j))
        out_rows.append(tuple(merged))
        qi += 1
    return tuple(out_rows), frozenset(out_fin)


def canonical(rows: Sequence[Sequence[Edge]], start: int, finals: Iterable[int]) -> CodepointDFA:
    """The canonical value of any automaton given as rows of ``(lo, hi, target)`` edges (trimmed,
    minimized, renumbered: the module docstring), e.g. the output of :func:`determinize`."""
    table, fin = _canonical_tables(rows, start, finals)
    return CodepointDFA(table, fin)


def from_minimal(rows: Sequence[Sequence[Edge]], start: int, finals: Iterable[int]) -> CodepointDFA:
    """:func:`walk_minimal` over a table."""
    fin = set(finals)
    return walk_minimal(start, lambda s: sorted(rows[s]), fin.__contains__)


def walk_minimal(
    start: Hashable,
    edges: Callable[[Any], Sequence[tuple[int, int, Any]]],
    is_final: Callable[[Any], bool],
) -> CodepointDFA:
    """The canonical value of an automaton its builder defines trim and minimal (every state
    reachable, live and with its own residual language), given by ``edges(state)`` — its
    transitions ``(lo, hi, target)`` sorted by ``lo`` on hashable state names — and ``is_final``:
    the breadth-first renumbering of :func:`_canonical_tables`, without its trimming and
    Hopcroft passes (and without a table in between).

    For the fixed constructions of ``refdecoder._formats`` (``time``, ``hostname``) whose
    minimality their docstrings argue; ``tests/test_formats_assert.py`` checks that each equals
    :func:`canonical` of the same automaton (a wrong argument would give a table that is not
    canonical, and equal languages unequal keys, never a wrong language).
    """
    num: dict[Hashable, int] = {start: 0}
    queue: list[Any] = [start]
    out_rows: list[Row] = []
    out_fin: set[int] = set()
    qi = 0
    with _gc_paused():
        while qi < len(queue):
            s = queue[qi]
            if is_final(s):
                out_fin.add(qi)
            merged: list[Edge] = []
            for lo, hi, t in edges(s):
                j = num.get(t)
                if j is None:
                    j = num[t] = len(queue)
                    queue.append(t)
                if merged and merged[-1][2] == j and merged[-1][1] + 1 == lo:
                    merged[-1] = (merged[-1][0], hi, j)
                else:
                    merged.append((lo, hi, j))
            out_rows.append(tuple(merged))
            qi += 1
    spend(len(queue))
    if not out_fin:
        return CodepointDFA.empty()
    return CodepointDFA(tuple(out_rows), frozenset(out_fin))


@lru_cache(maxsize=64)
def _length_chain(min_len: int, max_len: int | None) -> CodepointDFA:
    """:meth:`CodepointDFA._lengths` once its bounds are checked. State i counts i code points read;
    states with different counts accept different lengths (the largest one, or the least missing
    one, differ), so the chain is trim, minimal and in BFS order already: ``from_minimal`` only
    numbers it, without ``canonical``'s Hopcroft pass, whose work grows with the chain
    (tests/test_compile_scale.py checks the tables agree). Kept per bounds: an immutable value, and
    a schema repeats its ``maxLength`` (one with ``maxLength: 32767`` thrice built 32,768 rows each time)."""
    if max_len is None:
        rows = [[(lo, hi, min(i + 1, min_len)) for lo, hi in ALPHABET] for i in range(min_len + 1)]
        return from_minimal(rows, 0, [min_len])
    rows = [[(lo, hi, i + 1) for lo, hi in ALPHABET] for i in range(max_len)] + [[]]
    return from_minimal(rows, 0, range(min_len, max_len + 1))


def _full_target(row: Row) -> int | None:
    """The one target of a row that sends every scalar value to it (a length counter's), else None."""
    if len(row) != len(ALPHABET):
        return None
    t = row[0][2]
    for (lo, hi, u), (alo, ahi) in zip(row, ALPHABET):
        if lo != alo or hi != ahi or u != t:
            return None
    return t


_UNKNOWN = object()  # CodepointDFA._lrange not computed yet


def _length_range(d: CodepointDFA) -> tuple[int, int | None] | None:
    """``(m, M)`` when ``L(d)`` is all strings with a length in ``[m, M]`` (``M`` None: unbounded), as
    :meth:`CodepointDFA._lengths` builds it (canonical: state i counts i code points, a dead end or a
    self-loop last, the finals ``m..``); else None. Computed once per automaton (a walk over every
    row: a ``maxLength: 32767`` counter met in many intersections took seconds)."""
    if d._lrange is _UNKNOWN:
        d._lrange = _length_range_uncached(d)
    out: tuple[int, int | None] | None = d._lrange
    return out


def _length_range_uncached(d: CodepointDFA) -> tuple[int, int | None] | None:
    rows, fin = d._rows, d._finals
    n = len(rows)
    if not fin:
        return None
    for i, row in enumerate(rows):
        t = _full_target(row)
        if t == i + 1 or (t == i == n - 1) or (not row and i == n - 1):
            continue
        return None
    m = min(fin)
    if fin != frozenset(range(m, n)):
        return None
    return m, (None if rows[-1] else n - 1)


def _overlay(ra: Row, rb: Row) -> list[tuple[int, int, int, int]]:
    """Segments (lo, hi, ta, tb) where at least one row is defined; DEAD marks the other.

    A merge of the two sorted lists of disjoint intervals (the hot loop of every product: comparisons
    inline; once one row is used up the rest of the other is copied; ``tests/test_compile_scale.py``
    checks it against the plain sweep)."""
    out: list[tuple[int, int, int, int]] = []
    i = j = 0
    na, nb = len(ra), len(rb)
    pos = 0
    while i < na and j < nb:
        alo, ahi, at = ra[i]
        blo, bhi, bt = rb[j]
        if alo < pos:
            alo = pos
        if blo < pos:
            blo = pos
        if alo < blo:
            hi = ahi if ahi < blo else blo - 1
            out.append((alo, hi, at, DEAD))
        elif blo < alo:
            hi = bhi if bhi < alo else alo - 1
            out.append((blo, hi, DEAD, bt))
        else:
            hi = ahi if ahi < bhi else bhi
            out.append((alo, hi, at, bt))
        pos = hi + 1
        if ahi <= hi:
            i += 1
        if bhi <= hi:
            j += 1
    while i < na:
        alo, ahi, at = ra[i]
        out.append((alo if alo > pos else pos, ahi, at, DEAD))
        pos = ahi + 1
        i += 1
    while j < nb:
        blo, bhi, bt = rb[j]
        out.append((blo if blo > pos else pos, bhi, DEAD, bt))
        pos = bhi + 1
        j += 1
    return out


# ---------------------------------------------------------------------------------------------
# The automaton
# ---------------------------------------------------------------------------------------------
class CodepointDFA:
    """An immutable canonical DFA over Unicode scalar values (see the module docstring).

    State 0 is the start. Values compare and hash by language (``key``); use the classmethod
    constructors and the operations, never ``__init__`` directly.
    """

    __slots__ = ("_rows", "_finals", "_key", "_los", "_lrange")

    def __init__(self, rows: tuple[Row, ...], finals: frozenset[int]) -> None:
        self._rows = rows
        self._finals = finals
        self._key: tuple[str, str] | None = None  # the digest, when first asked for (``key``)
        self._los: list[list[int]] | None = None
        self._lrange: Any = _UNKNOWN  # _length_range, when first asked for

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_intervals(cls, intervals: Iterable[tuple[int, int]]) -> CodepointDFA:
        """The one-character strings whose code point lies in one of ``intervals`` (inclusive)."""
        cps = normalize(intervals)
        if not cps:
            return cls.empty()
        return canonical([[(lo, hi, 1) for lo, hi in cps], []], 0, [1])

    @classmethod
    def literal(cls, s: str) -> CodepointDFA:
        """The language ``{s}``; ``s`` must consist of scalar values."""
        bound = dfa_bound()
        if len(s) + 1 > bound:  # one state per code point: refused before building them
            raise LimitExceeded("dfa_states", len(s) + 1, bound, "a string literal")
        spend(len(s))
        cps = [ord(ch) for ch in s]
        if any(SURROGATE_LO <= c <= SURROGATE_HI for c in cps):
            return cls.empty()
        rows: list[list[Edge]] = [[(c, c, i + 1)] for i, c in enumerate(cps)]
        rows.append([])
        return canonical(rows, 0, [len(cps)])

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> CodepointDFA:
        """The finite language of ``strings`` (a trie, then canonicalized)."""
        bound = current_limits().nfa_states
        rows: list[dict[int, int]] = [{}]
        finals: set[int] = set()
        for s in strings:
            cur = 0
            ok = True
            for ch in s:
                c = ord(ch)
                if SURROGATE_LO <= c <= SURROGATE_HI:
                    ok = False
                    break
                nxt = rows[cur].get(c)
                if nxt is None:
                    nxt = rows[cur][c] = len(rows)
                    if nxt >= bound:
                        raise LimitExceeded("nfa_states", nxt + 1, bound, "a trie of strings")
                    rows.append({})
                cur = nxt
            if ok:
                finals.add(cur)
        spend(len(rows))
        return canonical([[(c, c, t) for c, t in sorted(r.items())] for r in rows], 0, finals)

    @classmethod
    def literals(cls, strings: Iterable[str]) -> CodepointDFA:
        """Alias of :meth:`from_strings`."""
        return cls.from_strings(strings)

    @classmethod
    def any_char(cls) -> CodepointDFA:
        return cls.from_intervals(ALPHABET)

    @classmethod
    def any_string(cls) -> CodepointDFA:
        return canonical([[(lo, hi, 0) for lo, hi in ALPHABET]], 0, [0])

    @classmethod
    def empty(cls) -> CodepointDFA:
        return cls(((),), frozenset())

    @classmethod
    def epsilon(cls) -> CodepointDFA:
        return cls(((),), frozenset((0,)))

    @staticmethod
    def _lengths(min_len: int, max_len: int | None, max_states: int | None) -> CodepointDFA:
        """All strings of scalar values whose length (in code points) is in [min_len, max_len]."""
        max_states = dfa_bound(max_states)
        if min_len < 0 or (max_len is not None and max_len < min_len):
            return CodepointDFA.empty()
        top = min_len if max_len is None else max_len  # the states needed, checked before building them
        if top + 1 > max_states:
            raise LimitExceeded("dfa_states", top + 1, max_states)
        check_bound("length", top)
        spend(top)  # the fuel of building it, spent on every call (the cache below is speed only)
        return _length_chain(min_len, max_len)

    # -- Boolean operations (product construction) ---------------------------------------------
    def _product(
        self, other: CodepointDFA, op: Callable[[bool, bool], bool], max_states: int | None
    ) -> CodepointDFA:
        with _gc_paused():  # its index and rows are many small tuples, no cycles (speed only)
            return self._product_impl(other, op, max_states)

    def _product_impl(
        self, other: CodepointDFA, op: Callable[[bool, bool], bool], max_states: int | None
    ) -> CodepointDFA:
        max_states = dfa_bound(max_states)
        keep_a_only = op(True, False)
        keep_b_only = op(False, True)
        index: dict[tuple[int, int], int] = {(0, 0): 0}
        queue: list[tuple[int, int]] = [(0, 0)]
        rows: list[list[Edge]] = []
        finals: set[int] = set()
        a_rows, b_rows = self._rows, other._rows
        a_fin, b_fin = self._finals, other._finals
        accepting = {(x, y): op(x, y) for x in (False, True) for y in (False, True)}
        i = 0
        while i < len(queue):
            p, q = queue[i]
            if accepting[(p in a_fin, q in b_fin)]:
                finals.add(i)
            ra = a_rows[p] if p != DEAD else ()
            rb = b_rows[q] if q != DEAD else ()
            row: list[Edge] = []
            # A side whose row sends every scalar value to one state (a length counter) overlays as
            # the other side's edges; the parts only it defines are dropped when they are not kept.
            if not keep_b_only and (tf := _full_target(rb)) is not None:
                segments = [(lo, hi, ta, tf) for lo, hi, ta in ra]
            elif not keep_a_only and (tf := _full_target(ra)) is not None:
                segments = [(lo, hi, tf, tb) for lo, hi, tb in rb]
            else:
                segments = _overlay(ra, rb)
            for lo, hi, ta, tb in segments:
                if ta == DEAD and not keep_b_only:
                    continue
                if tb == DEAD and not keep_a_only:
                    continue
                j = index.get((ta, tb))
                if j is None:
                    j = len(queue)
                    if j >= max_states:
                        raise LimitExceeded("dfa_states", j + 1, max_states)
                    index[(ta, tb)] = j
                    queue.append((ta, tb))
                row.append((lo, hi, j))
            rows.append(row)
            spend(1 + len(row))
            i += 1
        return canonical(rows, 0, finals)

    # The identities below (Σ* ∩ B = B, ∅ ∪ B = B, A ∩ A = A, ...) skip a product whose result is
    # already known: a large automaton (a ``format``) met with ``"type": "string"`` costs nothing.
    # The result is still held to ``max_states``, as a product's would be.
    def intersection(self, *others: CodepointDFA, max_states: int | None = None) -> CodepointDFA:
        out = self
        for o in others:
            if out.is_empty() or o.is_universal() or o == out:
                continue
            if o.is_empty() or out.is_universal():
                out = o
                continue
            ra, rb = _length_range(out), _length_range(o)
            if ra is not None and rb is not None:  # minLength meets maxLength: no product needed
                hi = ra[1] if rb[1] is None else rb[1] if ra[1] is None else min(ra[1], rb[1])
                out = CodepointDFA._lengths(max(ra[0], rb[0]), hi, max_states)
                continue
            out = out._product(o, lambda x, y: x and y, max_states)
        return out._within(max_states)

    def union(self, *others: CodepointDFA, max_states: int | None = None) -> CodepointDFA:
        out = self
        for o in others:
            if out.is_universal() or o.is_empty() or o == out:
                continue
            if o.is_universal() or out.is_empty():
                out = o
                continue
            out = out._product(o, lambda x, y: x or y, max_states)
        return out._within(max_states)

    def difference(self, other: CodepointDFA, max_states: int | None = None) -> CodepointDFA:
        if self.is_empty() or other.is_empty():
            return self._within(max_states)
        if other.is_universal() or other == self:
            return CodepointDFA.empty()
        return self._product(other, lambda x, y: x and not y, max_states)

    def _within(self, max_states: int | None) -> CodepointDFA:
        bound = dfa_bound(max_states)
        if len(self._rows) > bound:
            raise LimitExceeded("dfa_states", len(self._rows), bound)
        return self

    def symmetric_difference(self, other: CodepointDFA, max_states: int | None = None) -> CodepointDFA:
        return self._product(other, lambda x, y: x != y, max_states)

    def complement(self) -> CodepointDFA:
        """Σ* minus the language (Σ = scalar values)."""
        if self.is_empty():  # the one value that is not trim (its state has the empty language)
            return CodepointDFA.any_string()
        n = len(self._rows)
        sink = n
        rows: list[list[Edge]] = []
        for row in self._rows:
            covered = normalize((lo, hi) for lo, hi, _ in row)
            rows.append(list(row) + [(lo, hi, sink) for lo, hi in complement(covered)])
        rows.append([(lo, hi, sink) for lo, hi in ALPHABET])
        finals = [s for s in range(n + 1) if s not in self._finals]
        # ``self`` is minimal, so is its completion (the sink is the one state with the empty
        # language), and so is the complement of that (the same states, languages complemented); its
        # trim part drops the one state whose complement is empty. So no Hopcroft pass is needed.
        table, fin = _canonical_tables(rows, 0, finals, minimal=True)
        return CodepointDFA(table, fin)

    # -- regular operations (Thompson + subset construction) -----------------------------------
    def concat(self, *others: CodepointDFA, max_states: int | None = None) -> CodepointDFA:
        parts = (self, *others)
        if any(p.is_empty() for p in parts):
            return CodepointDFA.empty()
        nfa = Nfa()
        start, prev_finals = nfa.embed(parts[0])
        for p in parts[1:]:
            s, f = nfa.embed(p)
            for q in prev_finals:
                nfa.epsilon(q, s)
            prev_finals = f
        return canonical(*_det3(nfa, [start], prev_finals, max_states))

    def star(self, max_states: int | None = None) -> CodepointDFA:
        return self.repeat(0, None, max_states=max_states)

    def plus(self, max_states: int | None = None) -> CodepointDFA:
        return self.repeat(1, None, max_states=max_states)

    def optional(self, max_states: int | None = None) -> CodepointDFA:
        return self.repeat(0, 1, max_states=max_states)

    def repeat(
        self, min_count: int, max_count: int | None = None, *, max_states: int | None = None
    ) -> CodepointDFA:
        """``self{min_count,max_count}``; ``max_count=None`` means unbounded."""
        if min_count < 0 or (max_count is not None and max_count < min_count):
            raise ValueError(f"repeat: bad bounds {{{min_count},{max_count}}}")
        if max_count == 0 or (self.is_empty() and min_count == 0):
            return CodepointDFA.epsilon()
        if self.is_empty():
            return self
        top = min_count if max_count is None else max_count
        check_bound("repetition", top)
        nfa = Nfa()
        if (top + 1) * (self.num_states + 1) > nfa.max_states:  # before building any of it
            raise LimitExceeded("nfa_states", (top + 1) * (self.num_states + 1), nfa.max_states)
        start = cur = nfa.state()
        for _ in range(min_count):
            s, fs = nfa.embed(self)
            nfa.epsilon(cur, s)
            cur = nfa.state()
            for f in fs:
                nfa.epsilon(f, cur)
        if max_count is None:
            s, fs = nfa.embed(self)
            nfa.epsilon(cur, s)
            for f in fs:
                nfa.epsilon(f, cur)
            end = cur
        else:
            end = nfa.state()
            nfa.epsilon(cur, end)
            for _ in range(max_count - min_count):
                s, fs = nfa.embed(self)
                nfa.epsilon(cur, s)
                cur = nfa.state()
                nfa.epsilon(cur, end)
                for f in fs:
                    nfa.epsilon(f, cur)
        return canonical(*_det3(nfa, [start], [end], max_states))

    def length_between(
        self, min_len: int, max_len: int | None = None, *, max_states: int | None = None
    ) -> CodepointDFA:
        """The members whose length in code points is in [min_len, max_len] (None: unbounded).

        ``CodepointDFA.any_string().length_between(m, n)`` is minLength/maxLength on its own.
        """
        lengths = CodepointDFA._lengths(min_len, max_len, max_states)
        if self.is_universal():
            return lengths
        return self.intersection(lengths, max_states=max_states)

    # -- predicates -----------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return not self._finals

    def is_universal(self) -> bool:
        return self._finals == _ZERO and self._rows == _UNIVERSAL_ROWS

    def is_finite(self) -> bool:
        """No cycle in the trim automaton (so the language is finite)."""
        color = [0] * len(self._rows)  # 0 new, 1 on stack, 2 done
        for root in range(len(self._rows)):
            if color[root]:
                continue
            stack: list[tuple[int, int]] = [(root, 0)]
            color[root] = 1
            while stack:
                s, k = stack[-1]
                row = self._rows[s]
                if k < len(row):
                    stack[-1] = (s, k + 1)
                    t = row[k][2]
                    if color[t] == 1:
                        return False
                    if color[t] == 0:
                        color[t] = 1
                        stack.append((t, 0))
                else:
                    color[s] = 2
                    stack.pop()
        return True

    def issubset(self, other: CodepointDFA) -> bool:
        return self.difference(other).is_empty()

    def accepts(self, s: str) -> bool:
        state: int | None = 0
        for ch in s:
            assert state is not None
            state = self.step(state, ord(ch))
            if state is None:
                return False
        return state in self._finals

    def minimize(self) -> CodepointDFA:
        """Already minimal (every value is canonical); returns ``self``."""
        return self

    # -- inspection -----------------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, str]:
        """A digest of the canonical table: equal keys, equal languages (computed once, when asked:
        most intermediate automata of the Boolean algebra are never compared)."""
        if self._key is None:
            h = hashlib.sha256(repr((self._rows, sorted(self._finals))).encode())
            self._key = ("cpdfa", h.hexdigest())
        return self._key

    @property
    def size(self) -> int:
        """Number of states of the minimal trim automaton (0 for the empty language)."""
        return 0 if self.is_empty() else len(self._rows)

    @property
    def num_states(self) -> int:
        return len(self._rows)

    @property
    def num_edges(self) -> int:
        """Transitions, one per code point interval of a row (what a byte view's size grows with)."""
        return sum(len(row) for row in self._rows)

    @property
    def finals(self) -> frozenset[int]:
        return self._finals

    def start(self) -> int:
        return 0

    def is_final(self, state: int) -> bool:
        return state in self._finals

    def row(self, state: int) -> Row:
        """The transitions ``(lo, hi, target)`` of ``state``, sorted by ``lo``."""
        return self._rows[state]

    def transitions(self) -> dict[int, Row]:
        return dict(enumerate(self._rows))

    def step(self, state: int, c: int) -> int | None:
        if self._los is None:
            self._los = [[lo for lo, _, _ in row] for row in self._rows]
        row = self._rows[state]
        k = bisect_right(self._los[state], c) - 1
        if k >= 0 and row[k][1] >= c:
            return row[k][2]
        return None

    def shortest_example(self) -> str | None:
        """A shortest member (breadth-first, smallest-code-point choices), or None if empty."""
        if self.is_empty():
            return None
        prev: dict[int, tuple[int, int]] = {0: (-1, -1)}
        queue = [0]
        for s in queue:
            if s in self._finals:
                out: list[str] = []
                while s != 0:
                    p, c = prev[s]
                    out.append(chr(c))
                    s = p
                return "".join(reversed(out))
            for lo, hi, t in self._rows[s]:
                if t not in prev:
                    prev[t] = (s, _representative(lo, hi))
                    queue.append(t)
        raise AssertionError("canonical automaton with a final state must reach it")

    def examples(self, limit: int = 10) -> list[str]:
        """Up to ``limit`` distinct members, shortest first (deterministic; for tests and messages).

        Best-first search ordered by (length so far + distance to a final state), trying a few
        representatives of each interval.
        """
        out: list[str] = []
        if self.is_empty() or limit <= 0:
            return out
        dist = self._distances_to_final()
        heap: list[tuple[int, str, int]] = [(dist[0], "", 0)]
        seen: set[str] = set()
        budget = 2000 * limit
        while heap and len(out) < limit and budget > 0:
            _, text, s = heapq.heappop(heap)
            budget -= 1
            if s in self._finals and text not in seen:
                seen.add(text)
                out.append(text)
            for lo, hi, t in self._rows[s]:
                for c in sorted({_representative(lo, hi), lo, hi}):
                    heapq.heappush(heap, (len(text) + 1 + dist[t], text + chr(c), t))
        return out

    def _distances_to_final(self) -> list[int]:
        n = len(self._rows)
        preds: list[list[int]] = [[] for _ in range(n)]
        for s, row in enumerate(self._rows):
            for _, _, t in row:
                preds[t].append(s)
        dist = [_INF] * n
        queue = sorted(self._finals)
        for f in queue:
            dist[f] = 0
        for t in queue:
            for s in preds[t]:
                if dist[s] == _INF:
                    dist[s] = dist[t] + 1
                    queue.append(s)
        return dist

    # -- byte-level views -------------------------------------------------------------------------
    def to_utf8(self, *, max_states: int | None = None, limit: LimitName = "byte_dfa_states") -> ByteDFA:
        """The byte DFA of the UTF-8 encodings of the members (at most ``max_states`` states, default
        ``Limits.byte_dfa_states``; ``limit`` names the ``Limits`` field the bound came from, which
        :class:`ByteViewTooLarge` carries). Raises ValueError if empty."""
        return _to_utf8(self, _byte_bound(max_states), limit)

    def to_json_string(
        self,
        unicode_escapes: UnicodeEscapes = True,
        *,
        max_states: int | None = None,
        limit: LimitName = "byte_dfa_states",
    ) -> ByteDFA:
        """The JSON string literals (RFC 8259 §7, quotes included) whose value is a member.

        A code point may be written raw (UTF-8, if it is not a control character, ``"`` or
        ``\\``), with a short escape (``\\" \\\\ \\/ \\b \\f \\n \\r \\t``), and, with
        ``unicode_escapes``, as ``\\uXXXX`` (hex digits in either case) for c <= U+FFFF or as a
        UTF-16 surrogate pair ``\\uD8xx\\uDCxx`` for c > U+FFFF; with ``unicode_escapes="controls"``
        only c <= U+001F is written as ``\\uXXXX``. Lone surrogate escapes are not
        members: string values are sequences of scalar values. Raises ValueError if empty. The bound
        and ``limit`` as in :meth:`to_utf8`.
        """
        return _to_json_string(self, unicode_escapes, _byte_bound(max_states), limit)

    # -- value semantics ------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        # Canonical tables: equal languages have identical tables (what ``key`` digests).
        return isinstance(other, CodepointDFA) and (
            self is other or (self._finals == other._finals and self._rows == other._rows)
        )

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"CodepointDFA(states={self.size}, finals={len(self._finals)}, key={self.key[1][:12]})"


def _det3(
    nfa: Nfa, starts: list[int], finals: list[int], max_states: int | None
) -> tuple[list[list[Edge]], int, set[int]]:
    rows, fin = determinize(nfa, starts, finals, max_states=max_states)
    return rows, 0, fin


_ZERO = frozenset((0,))
_UNIVERSAL_ROWS: tuple[Row, ...] = (tuple((lo, hi, 0) for lo, hi in ALPHABET),)
_PREFERRED = (ord("a"), ord("0"), ord("A"), ord("_"), ord(" "))


def _representative(lo: int, hi: int) -> int:
    for c in _PREFERRED:
        if lo <= c <= hi:
            return c
    if lo < 0x20 <= hi:
        return 0x21
    return lo


# ---------------------------------------------------------------------------------------------
# Byte-level conversions
# ---------------------------------------------------------------------------------------------
ByteStep = tuple[tuple[int, int], ...]  # alternatives for one byte position
ByteSeq = tuple[ByteStep, ...]


@lru_cache(maxsize=4096)
def _utf8_paths(lo: int, hi: int) -> tuple[ByteSeq, ...]:
    return tuple(tuple(((a, b),) for a, b in seq) for seq in utf8_sequences(lo, hi))


def _digit_ranges(a: int, b: int, ndigits: int) -> list[tuple[tuple[int, int], ...]]:
    """Sequences of per-digit value ranges covering exactly the numbers in [a, b] (base 16)."""
    if ndigits == 1:
        return [((a, b),)]
    p = 16 ** (ndigits - 1)
    ha, ra = divmod(a, p)
    hb, rb = divmod(b, p)
    if ha == hb:
        return [((ha, ha), *rest) for rest in _digit_ranges(ra, rb, ndigits - 1)]
    out: list[tuple[tuple[int, int], ...]] = []
    lo_h, hi_h = ha, hb
    if ra != 0:
        out += [((ha, ha), *rest) for rest in _digit_ranges(ra, p - 1, ndigits - 1)]
        lo_h = ha + 1
    tail: list[tuple[tuple[int, int], ...]] = []
    if rb != p - 1:
        tail = [((hb, hb), *rest) for rest in _digit_ranges(0, rb, ndigits - 1)]
        hi_h = hb - 1
    if lo_h <= hi_h:
        out.append(((lo_h, hi_h),) + ((0, 15),) * (ndigits - 1))
    return out + tail


def _hex_digit_bytes(v1: int, v2: int) -> ByteStep:
    """Bytes of hex digits with values in [v1, v2], either case."""
    out: list[tuple[int, int]] = []
    if v1 <= 9:
        out.append((0x30 + v1, 0x30 + min(v2, 9)))
    if v2 >= 10:
        a, b = max(v1, 10) - 10, v2 - 10
        out.append((0x41 + a, 0x41 + b))
        out.append((0x61 + a, 0x61 + b))
    return tuple(out)


_BACKSLASH_U: ByteSeq = (((0x5C, 0x5C),), ((0x75, 0x75),))


def _hex4_paths(a: int, b: int) -> list[ByteSeq]:
    """``\\uXXXX`` escapes of the UTF-16 code units in [a, b]."""
    return [
        _BACKSLASH_U + tuple(_hex_digit_bytes(x, y) for x, y in digits) for digits in _digit_ranges(a, b, 4)
    ]


_SHORT_ESCAPES = {
    0x22: 0x22,  # \"
    0x5C: 0x5C,  # \\
    0x2F: 0x2F,  # \/
    0x08: 0x62,  # \b
    0x0C: 0x66,  # \f
    0x0A: 0x6E,  # \n
    0x0D: 0x72,  # \r
    0x09: 0x74,  # \t
}


@lru_cache(maxsize=4096)
def _json_paths(lo: int, hi: int, unicode_escapes: UnicodeEscapes) -> tuple[ByteSeq, ...]:
    """All byte paths writing one code point of [lo, hi] inside a JSON string literal."""
    if unicode_escapes == "controls":  # \u only for U+0000..U+001F: the others as without \u
        controls = _hex4_paths(lo, min(hi, 0x1F)) if lo <= 0x1F else []
        return _json_paths(lo, hi, False) + tuple(controls)
    paths: list[ByteSeq] = []
    # raw: c >= 0x20, not '"' (0x22) and not '\' (0x5C); RFC 8259 §7 `unescaped`
    for rlo, rhi in normalize([(max(lo, 0x20), hi)]):
        for a, b in ((rlo, min(rhi, 0x21)), (max(rlo, 0x23), min(rhi, 0x5B)), (max(rlo, 0x5D), rhi)):
            if a <= b:
                paths.extend(_utf8_paths(a, b))
    for c, letter in sorted(_SHORT_ESCAPES.items()):
        if lo <= c <= hi:
            paths.append((((0x5C, 0x5C),), ((letter, letter),)))
    if unicode_escapes:
        for blo, bhi in normalize([(lo, min(hi, 0xFFFF))]):
            paths.extend(_hex4_paths(blo, bhi))
        if hi >= 0x10000:
            a, b = max(lo, 0x10000) - 0x10000, hi - 0x10000
            ha, la = divmod(a, 0x400)
            hb, lb = divmod(b, 0x400)
            # (high range, low range) rectangles; full rows are merged so that equal residual
            # languages get equal representations in _expand_to_bytes
            blocks: list[tuple[int, int, int, int]] = []
            if ha == hb:
                blocks.append((ha, ha, la, lb))
            else:
                full_lo = ha if la == 0 else ha + 1
                full_hi = hb if lb == 0x3FF else hb - 1
                if full_lo != ha:
                    blocks.append((ha, ha, la, 0x3FF))
                if full_lo <= full_hi:
                    blocks.append((full_lo, full_hi, 0, 0x3FF))
                if full_hi != hb:
                    blocks.append((hb, hb, 0, lb))
            for h1, h2, l1, l2 in blocks:
                for hp in _hex4_paths(0xD800 + h1, 0xD800 + h2):
                    for lp in _hex4_paths(0xDC00 + l1, 0xDC00 + l2):
                        paths.append(hp + lp)
    return tuple(paths)


def _expand_to_bytes(
    dfa: CodepointDFA,
    paths_of: Callable[[int, int], tuple[ByteSeq, ...]],
    quoted: bool,
    max_states: int,
    limit: LimitName,
) -> ByteDFA:
    """Deterministic byte automaton of the encodings, built directly; past ``max_states`` states,
    :class:`ByteViewTooLarge` naming ``limit``.

    The encodings of distinct code points are distinct and no encoding is a proper prefix of
    another (UTF-8 and JSON escapes are prefix codes; a lone ``\\uD8xx`` is not an encoding), so
    the subset construction over "paths still alive" needs no ε-closure: a byte state is either a
    code point state or the set of pairs (remaining steps, target) consistent with the bytes read
    since the last code point. Keying those sets by *remaining steps* rather than by fresh NFA
    states shares them across sources, so the automaton is close to minimal before minimization.
    """
    if dfa.is_empty():
        raise ValueError("the language is empty: no byte DFA represents it (check is_empty() first)")
    n = dfa.num_states
    accept, start = n, n + 1
    quote: ByteSeq = (((0x22, 0x22),),)
    Item = tuple[ByteSeq, int]
    items_of: list[list[Item]] = []
    for p, cprow in enumerate(dfa._rows):
        its: list[Item] = [(seq, q) for lo, hi, q in cprow for seq in paths_of(lo, hi)]
        if quoted and p in dfa._finals:
            its.append((quote, accept))
        items_of.append(its)
    items_of.append([])  # accept
    items_of.append([(quote, 0)])  # start (quoted only)
    index: dict[frozenset[Item], int] = {}
    rows: list[list[Edge]] = []
    k = 0
    # States whose items have the same steps (targets aside) split the bytes the same way.
    shapes: dict[tuple[ByteSeq, ...], list[tuple[int, int, frozenset[int]]]] = {}
    while k < len(items_of):
        items = items_of[k]
        shape = tuple(seq for seq, _ in items)
        parts = shapes.get(shape)
        if parts is None:
            evs = [(a, b, i) for i, seq in enumerate(shape) for a, b in seq[0]]
            parts = shapes[shape] = _partition(evs) if evs else []
        row: list[Edge] = []
        if parts:
            for lo, hi, alive in parts:
                done = [items[i][1] for i in alive if len(items[i][0]) == 1]
                if done:
                    if len(done) != 1 or len(alive) != 1:
                        raise AssertionError("byte encodings are not a prefix code")
                    t = done[0]
                else:
                    key = frozenset((items[i][0][1:], items[i][1]) for i in alive)
                    got = index.get(key)
                    if got is None:
                        got = index[key] = len(items_of)
                        if got >= max_states:
                            raise ByteViewTooLarge(limit, got + 1, max_states)
                        items_of.append(sorted(key))
                    t = got
                if row and row[-1][2] == t and row[-1][1] + 1 == lo:
                    row[-1] = (row[-1][0], hi, t)
                else:
                    row.append((lo, hi, t))
        rows.append(row)
        spend(1 + len(row))
        k += 1
    if quoted:
        table, tfin = _canonical_tables(rows, start, [accept])
    else:
        table, tfin = _canonical_tables(rows, 0, dfa._finals)
    return _byte_dfa_from_canonical(table, tfin)


def _byte_dfa_from_canonical(table: tuple[Row, ...], finals: frozenset[int]) -> ByteDFA:
    """A ByteDFA from a trim, minimal, BFS-numbered byte table.

    ``_canonical_tables`` produces exactly the table :meth:`ByteDFA.build` would (same trimming,
    the unique minimal automaton, the same BFS numbering with bytes in increasing order; the test
    suite checks this), so we fill the array directly instead of paying ``build``'s Moore
    refinement, whose rounds grow with the automaton's depth.
    """
    n = len(table)
    arr = array("i", [DEAD]) * (n * 256)
    for s, row in enumerate(table):
        base = s * 256
        for lo, hi, t in row:
            arr[base + lo : base + hi + 1] = array("i", [t]) * (hi - lo + 1)
    return ByteDFA(arr, finals, n)


def canonical_bytes(
    rows: Sequence[Sequence[Edge]], start: int, finals: Iterable[int]
) -> tuple[ByteDFA, tuple[Row, ...]] | None:
    """The :class:`~refdecoder._lexeme.ByteDFA` of an automaton over bytes given as rows of
    ``(lo, hi, target)`` edges (e.g. :func:`determinize`'s output), with its canonical rows; None when
    its language is empty.

    The same table as :meth:`ByteDFA.build <refdecoder._lexeme.ByteDFA.build>` (trim, minimal,
    BFS-numbered, bytes ascending; ``tests/test_compile_scale.py`` checks this), by Hopcroft's
    O(n log n) refinement (:func:`_canonical_tables`) instead of Moore's, whose rounds grow with the
    automaton's depth (a chain ``a{0,n}b`` costs n rounds over n states)."""
    table, fin = _canonical_tables(rows, start, finals)
    if not fin:
        return None
    return _byte_dfa_from_canonical(table, fin), table


def byte_literal(data: bytes) -> ByteDFA:
    """``ByteDFA.literal(data)`` (a chain of ``len(data) + 1`` states, already trim, minimal and
    BFS-numbered), without ``build``'s Moore rounds, one per byte."""
    table: tuple[Row, ...] = (*(((b, b, i + 1),) for i, b in enumerate(data)), ())
    return _byte_dfa_from_canonical(table, frozenset((len(data),)))


@lru_cache(maxsize=128)
def _to_utf8(dfa: CodepointDFA, max_states: int, limit: LimitName) -> ByteDFA:
    with _gc_paused():
        return _expand_to_bytes(dfa, _utf8_paths, False, max_states, limit)


@lru_cache(maxsize=128)
def _to_json_string(
    dfa: CodepointDFA, unicode_escapes: UnicodeEscapes, max_states: int, limit: LimitName
) -> ByteDFA:
    with _gc_paused():
        paths = lambda lo, hi: _json_paths(lo, hi, unicode_escapes)  # noqa: E731
        return _expand_to_bytes(dfa, paths, True, max_states, limit)
