"""Emission of JSON Schema shapes as grammar nodes, with the object and array custom nodes.

``ObjectNode`` runs ``{ member (, member)* }`` with local state ``(phase, seen, n, pos, keys)``: the
declared keys already read (``seen``, a frozenset of member indexes), the number of members
(saturated), for ``property_order="schema"`` the index of the last declared key, and, when repeated
keys are excluded, per key region the undeclared keys already written (``keys``, see ``_keymemory``). ``ArrayNode`` runs ``[ item (, item)* ]``
with ``(phase, i, c)``: the next position (saturated) and, per ``contains``, its matches so far (a tuple,
saturated).
Both only ever move to locals from which the node can still close (``_completable``), which keeps every
parser stack completable — the exactness argument of ``_ir``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from itertools import combinations, product
from typing import Any

from ._fsa import CodepointDFA
from ._ir import CALL, RETURN, Action, GrammarBuilder, Network
from ._jsonschema import Compiler, where_of
from ._jsonstring import JsonStringLexeme, json_string_lexeme
from ._jsonstring_checked import CheckedJsonStringLexeme
from ._keymemory import KeyLexeme, language_size
from ._lexeme import ByteDFA
from ._limits import check_bound, spend
from ._numbers import NumberLexeme, NumberPredicate, any_number_dfa
from ._parser import Parser
from ._shapes import (
    CHECKERS,
    FALSE,
    TRUE,
    ArrayShape,
    CheckedStrings,
    CountedStrings,
    Expr,
    ObjectShape,
    Strings,
    and_exprs,
    any_shape,
    not_expr,
    string_dfa,
)
from ._valuememory import AnyValueLexeme, ScalarValueLexeme, UniqueArrayNode
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import JsonSchema, Limits

_RET: tuple[int] = (RETURN,)
_ANY_NUMBER = NumberPredicate.any()


WS_BYTES = b" \t\n\r"
# A region with this many keys or more is as good as infinite: no input writes that many.
_COUNT_CAP = 1 << 62


# ---------------------------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------------------------
Lefts = tuple[int | None, ...]  # per key region: keys it can still add (None: unboundedly many)
Option = tuple[int, frozenset[int]]  # a member's node and the ``exists`` entries it meets


@dataclass(frozen=True, eq=False)
class ObjectNode:
    lbrace: int  # "{" ws
    close_first: int  # "}"
    close_after: int  # ws "}"
    comma: int  # ws "," ws
    members: tuple[int, ...]  # declared keys first (index < n_named), then key regions
    n_named: int
    required: frozenset[int]
    deps: tuple[tuple[int, frozenset[int]], ...]
    min_props: int
    max_props: int | None
    allow_dups: bool
    schema_order: bool
    # key regions with memory (``_keymemory``): (KeyLexeme node, "ws : ws value" node, how many keys
    # the region has: None = infinitely many), used when repeated undeclared keys are excluded
    regions: tuple[tuple[int, int, int | None], ...] = ()
    region_lexemes: tuple[KeyLexeme, ...] = ()  # the KeyLexeme of each region's key node
    # ``exists`` entries (ObjectShape.exists): how many, and the members that meet some of them —
    # (member index, node, entries met) and, for regions with memory, (region, value node, entries met)
    n_exists: int = 0
    member_variants: tuple[tuple[int, int, frozenset[int]], ...] = ()
    region_variants: tuple[tuple[int, int, frozenset[int]], ...] = ()
    # ``Limits.object_search_states`` when compiled: states one closability search may visit
    max_search_states: int = 100_000
    live: frozenset[int] | None = None  # productive members (set by ``prune``)
    live_regions: frozenset[int] | None = None  # regions whose value is productive
    live_variants: frozenset[int] | None = None  # productive member variants
    live_region_variants: frozenset[int] | None = None  # productive region variants
    _memo: dict[Hashable, bool] = field(default_factory=dict, compare=False, repr=False)

    # -- static protocol ------------------------------------------------------------------------
    def children(self) -> tuple[int, ...]:
        out = (self.lbrace, self.close_first, self.close_after, self.comma) + self.members
        out += tuple(x for key, rest, _ in self.regions for x in (key, rest))
        return out + tuple(v[1] for v in self.member_variants + self.region_variants)

    def nullable(self, is_nullable: Callable[[int], bool]) -> bool:
        return False

    def productive(self, is_productive: Callable[[int], bool]) -> bool:
        probe = self.prune(is_productive)
        return probe._completable(frozenset(), 0, -1, probe._lefts(self._no_keys()), frozenset())

    def left_calls(self, is_nullable: Callable[[int], bool]) -> tuple[int, ...]:
        return (self.lbrace,)

    def remap(self, f: Callable[[int], int]) -> ObjectNode:
        """This node with child ids through ``f`` (``GrammarBuilder.embed``); ``live*`` sets index
        members and regions, not nodes, so they carry over."""
        return replace(
            self,
            lbrace=f(self.lbrace),
            close_first=f(self.close_first),
            close_after=f(self.close_after),
            comma=f(self.comma),
            members=tuple(map(f, self.members)),
            regions=tuple((f(key), f(rest), n) for key, rest, n in self.regions),
            member_variants=tuple((i, f(node), met) for i, node, met in self.member_variants),
            region_variants=tuple((r, f(node), met) for r, node, met in self.region_variants),
            _memo={},
        )

    def prune(self, is_productive: Callable[[int], bool]) -> ObjectNode:
        return replace(
            self,
            live=frozenset(i for i, m in enumerate(self.members) if is_productive(m)),
            live_regions=frozenset(r for r, (_, rest, _) in enumerate(self.regions) if is_productive(rest)),
            live_variants=frozenset(
                v for v, (i, node, _) in enumerate(self.member_variants) if is_productive(node)
            ),
            live_region_variants=frozenset(
                v for v, (r, node, _) in enumerate(self.region_variants) if is_productive(node)
            ),
            _memo={},
        )

    @property
    def receives(self) -> bool:
        """Only an object with key regions is handed its keys (``_ir``: ``receive``)."""
        return bool(self.regions)

    # -- the options of a move ------------------------------------------------------------------
    def enter(self) -> Hashable:
        return ("open",)

    def _member_options(self, i: int) -> list[Option]:
        """Member ``i`` plain, and its variants that meet ``exists`` entries (productive ones)."""
        assert self.live_variants is not None
        out: list[Option] = [(self.members[i], frozenset())]
        out.extend(
            (node, marks)
            for v, (j, node, marks) in enumerate(self.member_variants)
            if j == i and v in self.live_variants
        )
        return out

    def _region_options(self, r: int) -> list[Option]:
        """Region ``r``'s value plain, and its variants that meet ``exists`` entries."""
        assert self.live_region_variants is not None
        out: list[Option] = [(self.regions[r][1], frozenset())]
        out.extend(
            (node, marks)
            for v, (j, node, marks) in enumerate(self.region_variants)
            if j == r and v in self.live_region_variants
        )
        return out

    def _no_keys(self) -> tuple[frozenset[str], ...]:
        return tuple(frozenset() for _ in self.regions)

    def _lefts(self, keys: tuple[frozenset[str], ...]) -> Lefts:
        """Keys each region can still add, saturated where more could never matter."""
        cap = self.min_props + self.n_exists + 1
        return tuple(
            None if size is None else min(size - len(keys[r]), cap)
            for r, (_, _, size) in enumerate(self.regions)
        )

    def _spare(self, lefts: Lefts) -> int | None:
        """Undeclared keys the live regions can still add, saturated at ``min_props``."""
        assert self.live_regions is not None
        total = 0
        for r in self.live_regions:
            left = lefts[r]
            if left is None:
                return None
            total += left
        return min(total, self.min_props)

    def _needed(self, seen: frozenset[int]) -> frozenset[int]:
        need = set(self.required)
        frontier = list(seen | need)
        deps = dict(self.deps)
        while frontier:
            t = frontier.pop()
            for d in deps.get(t, ()):
                if d not in need:
                    need.add(d)
                    frontier.append(d)
        return frozenset(need)

    def _addable(self, i: int, seen: frozenset[int], pos: int) -> bool:
        assert self.live is not None
        if i not in self.live:
            return False
        if i < self.n_named:
            if i in seen and not self.allow_dups:
                return False
            return not self.schema_order or i > pos
        return True

    def _after_add(self, i: int, seen: frozenset[int], n: int, pos: int) -> tuple[frozenset[int], int, int]:
        seen2 = seen | {i} if i < self.n_named else seen
        pos2 = (i if i < self.n_named else self.n_named) if self.schema_order else -1
        n2 = n + 1
        if self.max_props is None:
            n2 = min(n2, max(self.min_props, 0))
        return seen2, n2, pos2

    # -- completability -------------------------------------------------------------------------
    def _can_close(self, seen: frozenset[int], n: int, hit: frozenset[int]) -> bool:
        return (
            len(hit) == self.n_exists
            and self._needed(seen) <= seen
            and n >= self.min_props
            and (self.max_props is None or n <= self.max_props)
        )

    def _completable(self, seen: frozenset[int], n: int, pos: int, lefts: Lefts, hit: frozenset[int]) -> bool:
        """Some sequence of members leads from here to a local that can close."""
        key = (seen, n, pos, lefts, hit)
        got = self._memo.get(key)
        if got is None:
            if self.deps or len(hit) < self.n_exists:
                got = self._search(seen, n, pos, lefts, hit)
            else:
                got = self._completable_counting(seen, n, pos, self._spare(lefts))
            self._memo[key] = got
        return got

    def _completable_counting(self, seen: frozenset[int], n: int, pos: int, spare: int | None) -> bool:
        """Without dependencies or unmet ``exists`` entries, counting decides: the required keys
        still missing, then (the regions' keys coming last, as ``property_order="schema"`` requires)
        other declared keys and up to ``spare`` undeclared ones until ``minProperties``."""
        if self.max_props is not None and n > self.max_props:
            return False
        missing = self.required - seen
        if not all(self._addable(i, seen, pos) for i in missing):
            return False
        count = n + len(missing)
        if self.max_props is not None and count > self.max_props:
            return False
        if count >= self.min_props:
            return True
        if self.max_props is not None and self.min_props > self.max_props:
            return False  # the keys still to add would pass maxProperties
        assert self.live is not None
        unbounded = any(i >= self.n_named for i in self.live) or (
            self.allow_dups and any(self._addable(i, seen, pos) for i in self.live)
        )
        if spare is None or unbounded:
            return True
        extras = sum(
            1 for i in self.live if i < self.n_named and i not in missing and self._addable(i, seen, pos)
        )
        return count + extras + spare >= self.min_props

    def _moves(
        self, seen: frozenset[int], n: int, pos: int, lefts: Lefts, hit: frozenset[int]
    ) -> list[tuple[frozenset[int], int, int, Lefts, frozenset[int]]]:
        """The abstract locals one member further (any key of a region stands for all of them)."""
        assert self.live is not None and self.live_regions is not None
        out: list[tuple[frozenset[int], int, int, Lefts, frozenset[int]]] = []
        for i in sorted(self.live):
            if self._addable(i, seen, pos):
                s2, n2, p2 = self._after_add(i, seen, n, pos)
                out.extend((s2, n2, p2, lefts, hit | marks) for _, marks in self._member_options(i))
        for r in sorted(self.live_regions):
            left = lefts[r]
            if left != 0:
                _, n2, p2 = self._after_add(self.n_named, seen, n, pos)
                lefts2 = lefts if left is None else lefts[:r] + (left - 1,) + lefts[r + 1 :]
                out.extend((seen, n2, p2, lefts2, hit | marks) for _, marks in self._region_options(r))
        return out

    def _search(self, seen: frozenset[int], n: int, pos: int, lefts: Lefts, hit: frozenset[int]) -> bool:
        """Exact reachability of a closable local (depth first, bounded) when dependentRequired
        couples keys or ``exists`` entries are still to meet."""
        start = (seen, n, pos, lefts, hit)
        todo = [start]
        visited = {start}
        while todo:
            s, k, p, lf, h = todo.pop()
            if self._can_close(s, k, h):
                return True
            for nxt in self._moves(s, k, p, lf, h):
                if (self.max_props is None or nxt[1] <= self.max_props) and nxt not in visited:
                    visited.add(nxt)
                    if len(visited) > self.max_search_states:
                        raise LimitExceeded("object_search_states", len(visited), self.max_search_states)
                    todo.append(nxt)
        return False

    # -- dynamics -------------------------------------------------------------------------------
    def actions(self, local: Any) -> tuple[Action, ...]:
        phase = local[0]
        if phase == "open":
            return ((CALL, self.lbrace, ("first", frozenset(), 0, -1, self._no_keys(), frozenset())),)
        if phase == "done":
            return (_RET,)
        if phase == "value":  # a region's key was read (``receive``): its value next
            _, seen, n, pos, keys, hit, r = local
            lefts = self._lefts(keys)
            return tuple(
                (CALL, node, ("after", seen, n, pos, keys, hit | marks))
                for node, marks in self._region_options(r)
                if self._completable(seen, n, pos, lefts, hit | marks)
            )
        _, seen, n, pos, keys, hit = local
        out: list[Action] = []
        if phase in ("first", "after") and self._can_close(seen, n, hit):
            out.append((CALL, self.close_first if phase == "first" else self.close_after, ("done",)))
        adds: list[Action] = []
        assert self.live is not None and self.live_regions is not None
        lefts = self._lefts(keys)
        for i in sorted(self.live):
            if self._addable(i, seen, pos):
                s2, n2, p2 = self._after_add(i, seen, n, pos)
                for node, marks in self._member_options(i):
                    if self._completable(s2, n2, p2, lefts, hit | marks):
                        adds.append((CALL, node, ("after", s2, n2, p2, keys, hit | marks)))
        for r in sorted(self.live_regions):
            left = lefts[r]
            if left == 0:
                continue
            _, n2, p2 = self._after_add(self.n_named, seen, n, pos)
            lefts2 = lefts if left is None else lefts[:r] + (left - 1,) + lefts[r + 1 :]
            if any(self._completable(seen, n2, p2, lefts2, hit | m) for _, m in self._region_options(r)):
                entry = self.region_lexemes[r].entry(keys[r])
                adds.append((CALL, self.regions[r][0], ("key", seen, n, pos, keys, hit, r), entry))
        if phase in ("first", "next"):
            out.extend(adds)
        elif adds:
            out.append((CALL, self.comma, ("next", seen, n, pos, keys, hit)))
        return tuple(out)

    def receive(self, local: Any, state: Hashable) -> Hashable:
        """A region's key has been read (``_ir``: ``receive``): remember it, then read its value."""
        if local[0] != "key":
            return local
        _, seen, n, pos, keys, hit, r = local
        name = KeyLexeme.name(state)
        _, n2, p2 = self._after_add(self.n_named, seen, n, pos)
        keys2 = keys[:r] + (keys[r] | {name},) + keys[r + 1 :]
        return ("value", seen, n2, p2, keys2, hit, r)


# ---------------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ArrayNode:
    """``[ item (, item)* ]`` with local ``(phase, i, c)``: the next position and, per ``contains``,
    the items counted so far (a tuple, saturated). Each position offers item nodes that say which
    ``contains`` schemas the item meets (``choices``): with a finite maximum both "meets" and "does
    not meet" are explicit, so the count is exact; without one "not counted" is the plain item, so
    the count is a lower bound that some parse makes exact — enough for a minimum."""

    lbracket: int  # "[" ws
    close_first: int  # "]"
    close_after: int  # ws "]"
    comma: int
    plain: tuple[int, ...]  # item node per position < len(plain) - 1; the last entry repeats
    # per position (same indexing), the (item node, count increments) choices; () without contains
    choices: tuple[tuple[tuple[int, tuple[int, ...]], ...], ...]
    bounds: tuple[tuple[int, int | None], ...]  # (minContains, maxContains) per contains
    starts: tuple[int, ...]  # per contains, the first position it counts
    min_items: int
    max_items: int | None
    live: frozenset[int] | None = None
    _memo: dict[Hashable, Any] = field(default_factory=dict, compare=False, repr=False)

    def children(self) -> tuple[int, ...]:
        items = tuple(node for position in self.choices for node, _ in position)
        return (self.lbracket, self.close_first, self.close_after, self.comma) + self.plain + items

    def nullable(self, is_nullable: Callable[[int], bool]) -> bool:
        return False

    def productive(self, is_productive: Callable[[int], bool]) -> bool:
        return self.prune(is_productive)._completable(0, (0,) * len(self.bounds))

    def left_calls(self, is_nullable: Callable[[int], bool]) -> tuple[int, ...]:
        return (self.lbracket,)

    def remap(self, f: Callable[[int], int]) -> ArrayNode:
        """This node with child ids through ``f`` (``GrammarBuilder.embed``)."""
        return replace(
            self,
            lbracket=f(self.lbracket),
            close_first=f(self.close_first),
            close_after=f(self.close_after),
            comma=f(self.comma),
            plain=tuple(map(f, self.plain)),
            choices=tuple(tuple((f(node), inc) for node, inc in position) for position in self.choices),
            live=None if self.live is None else frozenset(map(f, self.live)),
            _memo={},
        )

    def prune(self, is_productive: Callable[[int], bool]) -> ArrayNode:
        return replace(self, live=frozenset(m for m in self.children() if is_productive(m)), _memo={})

    def enter(self) -> Hashable:
        return ("open",)

    def _pos(self, seq: tuple[Any, ...], i: int) -> Any:
        return seq[min(i, len(seq) - 1)]

    def _branches(self, i: int) -> list[tuple[int, tuple[int, ...]]]:
        """(node, contains increments) choices for position i, productive ones only."""
        assert self.live is not None
        if not self.bounds:
            node = self._pos(self.plain, i)
            return [(node, ())] if node in self.live else []
        return [(node, inc) for node, inc in self._pos(self.choices, i) if node in self.live]

    def _tail(self) -> int:
        """From this position on every position behaves alike (same choices, closable by count)."""
        return max(len(self.plain) - 1, self.min_items, *self.starts)

    def _sat(self, i: int, c: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        if self.max_items is None:
            i = min(i, self._tail())
        c = tuple(min(x, lo if hi is None else hi + 1) for x, (lo, hi) in zip(c, self.bounds, strict=True))
        return i, c

    def _count_ok(self, c: tuple[int, ...]) -> bool:
        return all(lo <= x and (hi is None or x <= hi) for x, (lo, hi) in zip(c, self.bounds, strict=True))

    def _can_close(self, i: int, c: tuple[int, ...]) -> bool:
        return i >= self.min_items and self._count_ok(c)

    def _completable(self, i: int, c: tuple[int, ...]) -> bool:
        key = (i, c)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._completable_uncached(i, c) if len(c) <= 1 else self._completable_counts(i, c)
            self._memo[key] = hit
        return bool(hit)

    def _completable_uncached(self, i: int, cs: tuple[int, ...]) -> bool:
        """At most one ``contains``: a walk over the lengths."""
        c = cs[0] if cs else 0
        min_contains, max_contains = self.bounds[0] if self.bounds else (0, None)
        if max_contains is not None and c > max_contains:
            return False
        # Positions from ``i`` on; beyond ``tail`` all positions behave alike, so lengths up to
        # tail + min_contains + 1 decide every case when max_items is unbounded.
        # The same bound holds under a finite max_items, which may be far larger (maxItems 10**9).
        tail = max(len(self.plain), *self.starts, self.min_items) + 1
        hi = max(tail, i) + min_contains + 1
        if self.max_items is not None:
            hi = min(hi, self.max_items)
        lo_m, hi_m = 0, 0
        for length in range(i, hi + 1):
            spend(1)
            if length > i:
                br = self._branches(length - 1)
                if not br:
                    return False
                incs = {inc[0] if inc else 0 for _, inc in br}
                if incs == {1}:
                    lo_m += 1
                if 1 in incs:
                    hi_m += 1
            if length < self.min_items:
                continue
            if not self.bounds:
                return True
            need_lo = min_contains - c
            cap = None if max_contains is None else max_contains - c
            m_lo = max(lo_m, need_lo)
            if m_lo <= hi_m and (cap is None or m_lo <= cap):
                return True
        return False

    def _completable_counts(self, i: int, c: tuple[int, ...]) -> bool:
        """Several ``contains``: the fewest items that close the array from each saturated state
        ``(min(i, tail), counts)`` (a breadth-first search backwards from the closable states, once),
        within what ``max_items`` leaves."""
        dist = self._memo.get("dist")
        if dist is None:
            dist = self._memo["dist"] = self._distances()
        d = dist.get((min(i, self._tail()), c))
        return d is not None and (self.max_items is None or i + d <= self.max_items)

    def _distances(self) -> dict[tuple[int, tuple[int, ...]], int]:
        tail = self._tail()

        def over(c: tuple[int, ...]) -> bool:
            return any(hi is not None and x > hi for x, (_, hi) in zip(c, self.bounds, strict=True))

        start = (0, (0,) * len(self.bounds))
        preds: dict[tuple[int, tuple[int, ...]], set[tuple[int, tuple[int, ...]]]] = {start: set()}
        todo = [start]
        while todo:
            state = todo.pop()
            i, c = state
            spend(1)
            for _, inc in self._branches(i):
                nxt = (
                    min(i + 1, tail),
                    self._sat(i + 1, tuple(x + d for x, d in zip(c, inc, strict=True)))[1],
                )
                if over(nxt[1]):
                    continue
                if nxt not in preds:
                    preds[nxt] = set()
                    todo.append(nxt)
                preds[nxt].add(state)
        dist = {s: 0 for s in preds if self._can_close(*s)}
        frontier = list(dist)
        while frontier:
            new: list[tuple[int, tuple[int, ...]]] = []
            for s in frontier:
                for p in preds[s]:
                    if p not in dist:
                        dist[p] = dist[s] + 1
                        new.append(p)
            frontier = new
        return dist

    def actions(self, local: Any) -> tuple[Action, ...]:
        phase = local[0]
        if phase == "open":
            return ((CALL, self.lbracket, ("first", 0, (0,) * len(self.bounds))),)
        if phase == "done":
            return (_RET,)
        _, i, c = local
        out: list[Action] = []
        if phase in ("first", "after") and self._can_close(i, c):
            out.append((CALL, self.close_first if phase == "first" else self.close_after, ("done",)))
        adds: list[Action] = []
        if self.max_items is None or i < self.max_items:
            for node, inc in self._branches(i):
                i2, c2 = self._sat(i + 1, tuple(x + d for x, d in zip(c, inc, strict=True)))
                if self._completable(i2, c2):
                    adds.append((CALL, node, ("after", i2, c2)))
        if phase in ("first", "next"):
            out.extend(adds)
        elif adds:
            out.append((CALL, self.comma, ("next", i, c)))
        return tuple(out)


# ---------------------------------------------------------------------------------------------
# The emitter
# ---------------------------------------------------------------------------------------------
class Emitter:
    def __init__(self, compiler: Compiler) -> None:
        self.c = compiler
        self.b = GrammarBuilder()
        self.profile = compiler.profile
        self._values: dict[Expr, int] = {}
        ws = self.profile.whitespace
        if ws == "none":
            self.ws: int | None = None
        elif ws == "any":
            self.ws = self.b.lex(ByteDFA.build({0: dict.fromkeys(WS_BYTES, 0)}, 0, [0]))
        else:
            assert isinstance(ws, int)
            trans = {k: dict.fromkeys(WS_BYTES, k + 1) for k in range(ws)}
            self.ws = self.b.lex(ByteDFA.build(trans, 0, range(ws + 1))) if ws > 0 else None

    def lit(self, text: bytes) -> int:
        return self.b.lex(ByteDFA.literal(text))

    def seq_ws(self, *parts: int | None) -> int:
        """A sequence; ``None`` entries stand for whitespace (dropped when the profile has none)."""
        items = [self.ws if p is None else p for p in parts]
        return self.b.seq([p for p in items if p is not None])

    def finish(self, root_expr: Expr) -> Network:
        value = self.value(root_expr)
        root = self.seq_ws(None, value, None) if self.profile.top_level_whitespace else self.b.seq([value])
        return self.b.finish(root)

    def value(self, expr: Expr) -> int:
        if expr in self._values:
            return self._values[expr]
        node = self.b.reserve()
        self._values[expr] = node
        spend(10)
        self.c.deadline.check()
        shape = self.c.shape(expr)
        opts: list[int] = []
        if shape.null:
            opts.append(self.lit(b"null"))
        if shape.boolean:
            words = sorted((b"true" if v else b"false") for v in shape.boolean)
            opts.extend(self.lit(w) for w in words)
        canonical = self.profile.number_spelling == "canonical"
        if shape.number == _ANY_NUMBER:
            # regular: a DFA, so masks use lexeme tables
            opts.append(self.b.lex(any_number_dfa(canonical)))
        elif not shape.number.is_empty():
            opts.append(self.b.lex(NumberLexeme(shape.number, canonical)))
        if not shape.string.is_empty():
            opts.append(self.b.lex(self.string_lexeme(shape.string)))
        opts.extend(self.array(a) for a in shape.arrays)
        opts.extend(self.object(o, expr) for o in shape.objects)
        from ._ir import Alt

        self.b.define(node, Alt(tuple(opts)))
        return node

    def string_lexeme(self, strings: Strings) -> ByteDFA | JsonStringLexeme:
        """A byte table within ``automaton_states``, else the same language read lazily; a counted
        language (:class:`CountedStrings`) counts its length in the lexeme's state."""
        if isinstance(strings, CheckedStrings):
            return CheckedJsonStringLexeme(
                CHECKERS[strings.checker], self.profile.unicode_escapes, strings.min_length
            )
        if isinstance(strings, CountedStrings):
            return JsonStringLexeme(strings.dfa, self.profile.unicode_escapes, (strings.lo, strings.hi))
        return json_string_lexeme(strings, self.profile.unicode_escapes, self.c.limits.automaton_states)

    # -- arrays ---------------------------------------------------------------------------------
    def array(self, a: ArrayShape) -> int:
        # Counted in the matcher (never unrolled), but deciding completability walks lengths up to
        # minItems + minContains: refused here before that walk (also for bounds made by negation).
        check_bound("minItems", a.min_items)
        for k in a.contains:
            check_bound("minContains", k.min)
            if k.max is not None:
                check_bound("maxContains", k.max)
        if a.unique is not None and (a.max_items is None or a.max_items > 1):
            return self.unique_array(a, a.unique)
        n = max([len(a.prefix), *(k.start for k in a.contains)]) + 1
        positions = [a.at(i) for i in range(n)]
        plain = tuple(self.value(e) for e in positions)
        if len(a.contains) > 1:
            # Several counts side by side: 2**k item variants per position, and a search over the
            # product of the counts (ArrayNode._distances).
            if 2 ** len(a.contains) > self.c.limits.alternatives:
                raise LimitExceeded(
                    "alternatives",
                    2 ** len(a.contains),
                    self.c.limits.alternatives,
                    "item variants of several 'contains'",
                )
            states = n + max(a.min_items, 0) + 1
            for k in a.contains:
                states *= (k.min if k.max is None else k.max + 1) + 1
            check_bound("the count states of several 'contains':", states)
        choices = tuple(self._item_choices(a, i, e) for i, e in enumerate(positions)) if a.contains else ()
        node = ArrayNode(
            lbracket=self.seq_ws(self.lit(b"["), None),
            close_first=self.lit(b"]"),
            close_after=self.seq_ws(None, self.lit(b"]")),
            comma=self.seq_ws(None, self.lit(b","), None),
            plain=plain,
            choices=choices,
            bounds=tuple((k.min, k.max) for k in a.contains),
            starts=tuple(k.start for k in a.contains),
            min_items=a.min_items,
            max_items=a.max_items,
        )
        return self.b.add(node)

    def _item_choices(self, a: ArrayShape, i: int, e: Expr) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """The item nodes of position ``i`` with their count increments: per ``contains`` counting
        there, "meets it" (+1) or "not counted" (0): its negation where a maximum makes the count
        exact, else nothing (ArrayNode's docstring)."""
        per: list[tuple[tuple[int, Expr | None], ...]] = []
        for k in a.contains:
            if i < k.start:
                per.append(((0, None),))
            else:
                per.append(((1, k.expr), (0, None if k.max is None else not_expr(k.expr))))
        out: dict[tuple[int, tuple[int, ...]], None] = {}
        for combo in product(*per):
            expr = and_exprs([e, *(x for _, x in combo if x is not None)])
            out[(self.value(expr), tuple(inc for inc, _ in combo))] = None
        return tuple(out)

    def unique_array(self, a: ArrayShape, where: str) -> int:
        """``uniqueItems`` (refdecoder/_valuememory.py): each position's items are read by a value
        lexeme that excludes the values already written. Decided where every position's items are
        scalars or may be any JSON value; refused otherwise."""
        if a.contains:
            raise Unsupported(
                "uniqueItems",
                where,
                "together with 'contains': distinct items are decided by value lexemes, and which of "
                "them also match 'contains' is not counted",
            )
        items: list[int] = []
        lexemes: list[ScalarValueLexeme | AnyValueLexeme] = []
        for i in range(len(a.prefix) + 1):
            shape = self.c.shape(a.at(i))
            if a.max_items is not None and i >= a.max_items:  # never written
                shape = replace(shape, null=False, boolean=frozenset(), number=NumberPredicate.none())
                shape = replace(shape, string=CodepointDFA.empty(), arrays=(), objects=())
            if shape == any_shape():
                lex: ScalarValueLexeme | AnyValueLexeme = self.any_value_lexeme()
                items.append(self.b.lex(lex))
            elif not shape.arrays and not shape.objects:
                lex = ScalarValueLexeme(
                    shape.null,
                    shape.boolean,
                    shape.number,
                    string_dfa(shape.string),
                    self.profile.unicode_escapes,
                    self.c.limits.automaton_states,
                    where,
                    canonical_numbers=self.profile.number_spelling == "canonical",
                )
                empty = lex.values(1) == frozenset()
                items.append(self.b.alt([]) if empty else self.b.lex(lex))  # empty: never called
            else:
                at = f"prefixItems/{i}" if i < len(a.prefix) else "items"
                raise Unsupported(
                    "uniqueItems",
                    where,
                    f"the items at {at} may be arrays or objects that are not any JSON value: distinct "
                    "items are decided only for scalar items and items that may be any value",
                )
            lexemes.append(lex)
        node = UniqueArrayNode(
            lbracket=self.seq_ws(self.lit(b"["), None),
            close_first=self.lit(b"]"),
            close_after=self.seq_ws(None, self.lit(b"]")),
            comma=self.seq_ws(None, self.lit(b","), None),
            items=tuple(items),
            lexemes=tuple(lexemes),
            min_items=a.min_items,
            max_items=a.max_items,
        )
        return self.b.add(node)

    def any_value_lexeme(self) -> AnyValueLexeme:
        """Any JSON value as one lexeme: this profile's network of schema ``true``, run by a
        sub-parser (refdecoder/_valuememory.py), built once per emitter."""
        lex: AnyValueLexeme | None = getattr(self, "_any_value", None)
        if lex is None:
            sub = Emitter(self.c)
            network = sub.b.finish(sub.value(TRUE))
            parser = Parser(network, max_stacks=self.c.limits.parser_stacks)
            lex = AnyValueLexeme(parser, ("profile", self.profile))
            self._any_value = lex
        return lex

    # -- objects --------------------------------------------------------------------------------
    def object(self, o: ObjectShape, where_expr: Expr) -> int:
        where = where_of(where_expr)
        check_bound("minProperties", o.min_props, where)
        named = o.named_dict()
        keys = list(named)
        for k in sorted(o.required) + sorted({x for t, d in o.dependent_required for x in (t, *d)}):
            if k not in named:
                named[k] = o.eff(k)
                keys.append(k)
        if len(keys) > self.c.limits.object_properties:
            raise LimitExceeded("object_properties", len(keys), self.c.limits.object_properties, where)
        exists = list(o.exists)
        members: list[int] = []
        member_variants: list[tuple[int, int, frozenset[int]]] = []
        for k in keys:
            if not o.key_allowed(k) or named[k] == FALSE:
                members.append(self.b.alt([]))  # this key cannot appear: an unproductive member
                continue
            key_lex = self.b.lex(self.string_lexeme(CodepointDFA.literal(k)))
            members.append(self.member(key_lex, named[k]))
            met = [x for x, (lang, _) in enumerate(exists) if lang.accepts(k)]
            for marks, value in self._variants(named[k], met, exists, where):
                member_variants.append((len(members) - 1, self.member(key_lex, value), marks))
        # Keys not declared: partition by which rules and ``exists`` entries match them.
        base = CodepointDFA.any_string() if o.key_lang is None else o.key_lang
        if keys:
            base = base.difference(CodepointDFA.literals(keys))
        rules = list(o.rules)
        langs = [lang for lang, _ in rules] + [lang for lang, _ in exists]
        bound = self.c.limits.key_rules
        if len(langs) > bound:
            raise LimitExceeded("key_rules", len(langs), bound, where)
        can_repeat = o.max_props is None or o.max_props >= 2
        memory = can_repeat and not self.profile.allow_duplicate_keys
        regions: list[tuple[int, int, int | None]] = []
        region_variants: list[tuple[int, int, frozenset[int]]] = []
        lexemes: list[KeyLexeme] = []
        if not base.is_empty():
            for choice in product((True, False), repeat=len(langs)):
                region = base
                for lang, inside in zip(langs, choice):
                    region = region.intersection(lang) if inside else region.difference(lang)
                if region.is_empty():
                    continue
                value = and_exprs(e for (_, e), inside in zip(rules, choice) if inside)
                if value == FALSE:
                    continue
                met = [x for x, inside in enumerate(choice[len(rules) :]) if inside]
                variants = self._variants(value, met, exists, where)
                if memory:  # repeated keys excluded exactly: the region remembers its keys
                    lexeme = KeyLexeme(region, self.profile.unicode_escapes, self.c.limits.automaton_states)
                    lexemes.append(lexeme)
                    size = language_size(region, _COUNT_CAP)
                    regions.append(
                        (self.b.lex(lexeme), self.rest(value), None if size == _COUNT_CAP else size)
                    )
                    region_variants.extend((len(regions) - 1, self.rest(v), marks) for marks, v in variants)
                else:
                    key_lex = self.b.lex(self.string_lexeme(region))
                    members.append(self.member(key_lex, value))
                    member_variants.extend(
                        (len(members) - 1, self.member(key_lex, v), marks) for marks, v in variants
                    )
        index = {k: i for i, k in enumerate(keys)}
        node = ObjectNode(
            lbrace=self.seq_ws(self.lit(b"{"), None),
            close_first=self.lit(b"}"),
            close_after=self.seq_ws(None, self.lit(b"}")),
            comma=self.seq_ws(None, self.lit(b","), None),
            members=tuple(members),
            n_named=len(keys),
            required=frozenset(index[k] for k in o.required),
            deps=tuple((index[t], frozenset(index[x] for x in d)) for t, d in o.dependent_required),
            min_props=o.min_props,
            max_props=o.max_props,
            allow_dups=self.profile.allow_duplicate_keys,
            schema_order=self.profile.property_order == "schema",
            regions=tuple(regions),
            region_lexemes=tuple(lexemes),
            n_exists=len(exists),
            member_variants=tuple(member_variants),
            region_variants=tuple(region_variants),
            max_search_states=self.c.limits.object_search_states,
        )
        return self.b.add(node)

    def _variants(
        self, value: Expr, met: list[int], exists: list[tuple[CodepointDFA, Expr]], where: str
    ) -> list[tuple[frozenset[int], Expr]]:
        """The values of a member that meet each nonempty subset of the ``exists`` entries its key
        matches (``met``), each marked with that subset; impossible ones (FALSE) dropped."""
        bound = self.c.limits.object_exists_per_key
        if len(met) > bound:
            raise LimitExceeded("object_exists_per_key", len(met), bound, where)
        out = []
        for size in range(1, len(met) + 1):
            for subset in combinations(met, size):
                v = and_exprs([value, *(exists[x][1] for x in subset)])
                if v != FALSE:
                    out.append((frozenset(subset), v))
        return out

    def rest(self, value: Expr) -> int:
        """What follows a key of a region with memory: ``ws : ws value``."""
        return self.seq_ws(None, self.lit(b":"), None, self.value(value))

    def member(self, key_lex: int, value: Expr) -> int:
        return self.seq_ws(key_lex, None, self.lit(b":"), None, self.value(value))


def compile_json_schema_network(spec: JsonSchema, limits: Limits) -> Network:
    """Shapes (``_jsonschema.Compiler``), then emission (``Emitter``, here)."""
    if not isinstance(spec.schema, (dict, bool)):
        raise SpecError("JSON Schema must be an object or a boolean", "/", "a dict or True/False")
    compiler = Compiler(spec, limits)
    root_expr: Expr = (
        TRUE
        if spec.schema is True
        else FALSE
        if spec.schema is False
        else ("loc", compiler.refs.root_uri, "")
    )
    emitter = Emitter(compiler)
    return emitter.finish(root_expr)
