"""Terminals of the grammar IR: byte-level automata with hashable states (docs/design.md §2).

A *lexeme* is any object with ``start()``, ``step(state, byte)`` and ``is_final(state)`` whose states
are hashable values. The one contract the parser relies on is **trimness**: every state that ``start``
or ``step`` returns can still reach a final state. ``step`` returns ``None`` exactly when no string of
the lexeme's language continues the bytes read so far. With trim lexemes and productive rules, "the
parser's configuration set is non-empty" is the same as "the bytes read are a viable prefix".

:class:`ByteDFA` is the workhorse (string bodies, literals, regex terminals, formats). Lexemes whose
languages are not regular but still decidable byte by byte (numbers under numeric bounds) implement
the same protocol with richer states.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Container, Hashable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Lexeme", "ByteDFA", "utf8_sequences", "live_states", "can_continue"]

DEAD = -1


@runtime_checkable
class Lexeme(Protocol):
    """A trim byte automaton. ``key`` identifies the language (equal keys => equal languages)."""

    @property
    def key(self) -> Hashable: ...

    def start(self) -> Hashable: ...

    def step(self, state: Hashable, byte: int) -> Hashable | None: ...

    def is_final(self, state: Hashable) -> bool: ...


def _table_key(table: array | np.ndarray, finals: frozenset[int]) -> Hashable:
    """A ByteDFA's key: a digest of its canonical table and final states."""
    h = hashlib.sha256(table.tobytes())
    h.update(repr(sorted(finals)).encode())
    return ("dfa", h.hexdigest())


class ByteDFA:
    """A trim, minimal, canonically numbered DFA over bytes.

    Built only through :meth:`build`, which removes states that cannot reach a final state (so the
    trimness contract holds), minimizes (Moore's partition refinement) and renumbers states in BFS
    order from the start. Two ByteDFAs of the same language therefore have identical tables, and
    ``key`` is a digest of that table. The empty language is represented with ``start() is None``
    being impossible: :meth:`build` raises ``ValueError``; test with :meth:`is_empty_language` first.
    """

    __slots__ = ("_table", "_finals", "_nstates", "_key", "_live_bytes", "_onward_bytes")

    def __init__(self, table: array, finals: frozenset[int], nstates: int) -> None:
        self._table = table
        self._finals = finals
        self._nstates = nstates
        self._key = _table_key(table, finals)
        self._live_bytes: list[bytes | None] | None = None
        self._onward_bytes: list[frozenset[int]] | None = None

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def is_empty_language(
        transitions: Mapping[int, Mapping[int, int]], start: int, finals: Iterable[int]
    ) -> bool:
        return not _coreachable(transitions, start, set(finals))

    @classmethod
    def build(
        cls, transitions: Mapping[int, Mapping[int, int]], start: int, finals: Iterable[int]
    ) -> ByteDFA:
        """From ``{state: {byte: state}}``; states are arbitrary ints; unlisted bytes are dead."""
        finals_set = set(finals)
        reach, live = live_states(start, lambda s: transitions.get(s, {}).values(), finals_set)
        if start not in live:
            raise ValueError("ByteDFA.build: the language is empty (no final state is reachable)")
        # Moore's partition refinement over the live, reachable part.
        states = [s for s in reach if s in live]
        block = {s: (1 if s in finals_set else 0) for s in states}
        while True:
            sigs: dict[tuple[object, ...], int] = {}
            new_block: dict[int, int] = {}
            for s in states:
                row = transitions.get(s, {})
                sig = (
                    block[s],
                    tuple(sorted((b, block[t]) for b, t in row.items() if t in live)),
                )
                new_block[s] = sigs.setdefault(sig, len(sigs))
            if len(sigs) == len(set(block.values())):
                block = new_block
                break
            block = new_block
        # Canonical BFS numbering over blocks, bytes in increasing order.
        rep: dict[int, int] = {}
        for s in states:
            rep.setdefault(block[s], s)
        order = {block[start]: 0}
        queue = [block[start]]
        i = 0
        while i < len(queue):
            b = queue[i]
            i += 1
            row = transitions.get(rep[b], {})
            for byte in sorted(row):
                t = row[byte]
                if t in live and block[t] not in order:
                    order[block[t]] = len(order)
                    queue.append(block[t])
        n = len(order)
        table = array("i", [DEAD]) * (n * 256)
        finals_out: set[int] = set()
        for b, idx in order.items():
            s = rep[b]
            if s in finals_set:
                finals_out.add(idx)
            for byte, t in transitions.get(s, {}).items():
                if t in live:
                    table[idx * 256 + byte] = order[block[t]]
        return cls(table, frozenset(finals_out), n)

    @classmethod
    def literal(cls, data: bytes) -> ByteDFA:
        trans = {i: {b: i + 1} for i, b in enumerate(data)}
        return cls.build(trans, 0, [len(data)])

    @classmethod
    def byte_set(cls, allowed: Iterable[int]) -> ByteDFA:
        return cls.build({0: dict.fromkeys(allowed, 1)}, 0, [1])

    def residual_key(self, state: int, cap: int) -> Hashable | None:
        """The :attr:`key` of the ByteDFA of the language read from ``state`` (what :meth:`build` of
        this DFA's transitions with ``state`` as the start gives), or None when more than ``cap`` states
        are reachable from it. This DFA is trim and minimal, so the states reachable from ``state`` are
        too, and renumbered in breadth-first order from it, bytes increasing, they are that DFA's
        table: two states of any DFAs share this key exactly when they read the same language. A test
        compares it with :meth:`build`."""
        table = self._table
        order = {state: 0}
        queue = [state]
        for s in queue:
            for t in dict.fromkeys(table[s * 256 : (s + 1) * 256]):  # in order of first occurrence
                if t != DEAD and t not in order:
                    if len(order) == cap:
                        return None
                    order[t] = len(order)
                    queue.append(t)
        finals = frozenset(order[s] for s in queue if s in self._finals)
        renumber = np.full(self._nstates + 1, DEAD, dtype=np.int32)  # by state + 1 (0: DEAD)
        renumber[np.asarray(queue) + 1] = np.arange(len(queue), dtype=np.int32)
        rows = np.frombuffer(table, dtype=np.intc).reshape(-1, 256)[queue]  # intc: array("i")'s item
        return _table_key(renumber[rows + 1].astype(np.intc), finals)

    def reads_byte(self, byte: int) -> bool:
        """Some state has a transition on ``byte``."""
        table = self._table
        return any(table[q * 256 + byte] != DEAD for q in range(self._nstates))

    # -- the Lexeme protocol --------------------------------------------------------------------
    @property
    def key(self) -> Hashable:
        return self._key

    def start(self) -> int:
        return 0

    def step(self, state: Hashable, byte: int) -> int | None:
        t = self._table[state * 256 + byte]  # type: ignore[operator]
        return None if t == DEAD else t

    def is_final(self, state: Hashable) -> bool:
        return state in self._finals

    # -- inspection -----------------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        return self._nstates

    @property
    def finals(self) -> frozenset[int]:
        return self._finals

    def transitions(self) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {}
        for s in range(self._nstates):
            row = {b: t for b in range(256) if (t := self._table[s * 256 + b]) != DEAD}
            out[s] = row
        return out

    def shortest_suffix(self, state: int) -> bytes:
        """Breadth-first: a shortest byte string from ``state`` to a final state (trim: one exists)."""
        prev: dict[int, tuple[int, int]] = {state: (state, -1)}
        queue = [state]
        for s in queue:
            if s in self._finals:
                out = bytearray()
                while s != state:
                    s, b = prev[s]
                    out.append(b)
                return bytes(reversed(out))
            for b in self.live_bytes(s):
                t = self._table[s * 256 + b]
                if t not in prev:
                    prev[t] = (s, b)
                    queue.append(t)
        raise AssertionError("a trim DFA reaches a final state from every state")

    def live_bytes(self, state: int) -> bytes:
        """The bytes with a transition out of ``state`` (computed per state on first use: a walk
        touches few of a large DFA's states)."""
        if self._live_bytes is None:
            self._live_bytes = [None] * self._nstates
        got = self._live_bytes[state]
        if got is None:
            row = state * 256
            got = self._live_bytes[state] = bytes(b for b in range(256) if self._table[row + b] != DEAD)
        return got

    def onward_bytes(self, state: int) -> frozenset[int]:
        """The bytes whose transition out of ``state`` leads to a state with transitions of its own."""
        if self._onward_bytes is None:
            table = self._table
            goes_on = [bool(self.live_bytes(t)) for t in range(self._nstates)]
            self._onward_bytes = [
                frozenset(b for b in self.live_bytes(s) if goes_on[table[s * 256 + b]])
                for s in range(self._nstates)
            ]
        return self._onward_bytes[state]

    def accepts(self, data: bytes) -> bool:
        s: int | None = 0
        for b in data:
            assert s is not None
            s = self.step(s, b)
            if s is None:
                return False
        return s is not None and s in self._finals

    def __repr__(self) -> str:
        return f"ByteDFA(states={self._nstates}, finals={len(self._finals)})"


def live_states(
    start: int, successors: Callable[[int], Iterable[int]], finals: Container[int]
) -> tuple[list[int], set[int]]:
    """The states reachable from ``start`` in BFS order, and the set of those that can reach a final
    state (the trim part of an automaton given by its successor function)."""
    seen = {start}
    order = [start]
    preds: dict[int, set[int]] = {}
    for s in order:  # ``order`` grows while we walk it: a BFS
        for t in successors(s):
            preds.setdefault(t, set()).add(s)
            if t not in seen:
                seen.add(t)
                order.append(t)
    live = {s for s in order if s in finals}
    stack = list(live)
    while stack:
        t = stack.pop()
        for s in preds.get(t, ()):
            if s not in live:
                live.add(s)
                stack.append(s)
    return order, live


def _coreachable(transitions: Mapping[int, Mapping[int, int]], start: int, finals: set[int]) -> set[int]:
    """States reachable from ``start`` that can reach a final state."""
    return live_states(start, lambda s: transitions.get(s, {}).values(), finals)[1]


# -- UTF-8 encoding of code point ranges --------------------------------------------------------
# Russ Cox's utf8-ranges construction (as in RE2 and Rust's regex-syntax ``utf8.rs``): split a
# scalar-value range into pieces whose UTF-8 encodings share a length and whose continuation bytes
# span full 0x80..0xBF ranges, so each piece is a sequence of byte ranges.

_MAX_BY_LEN = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences whose union is exactly the UTF-8 encodings of scalars in [lo, hi].

    Surrogates (U+D800..U+DFFF) are not scalar values and are excluded.
    """
    out: list[list[tuple[int, int]]] = []
    stack = [(lo, hi)]
    while stack:
        a, b = stack.pop()
        if a > b:
            continue
        # Exclude the surrogate block.
        if a <= 0xDFFF and b >= 0xD800:
            stack.append((0xE000, b))
            stack.append((a, 0xD7FF))
            continue
        # Split at encoding-length boundaries.
        split = False
        for m in _MAX_BY_LEN[:-1]:
            if a <= m < b:
                stack.append((m + 1, b))
                stack.append((a, m))
                split = True
                break
        if split:
            continue
        if b <= 0x7F:
            out.append([(a, b)])
            continue
        n = _enc_len(a)
        done = False
        for i in range(1, n):
            mask = (1 << (6 * i)) - 1
            if (a & ~mask) != (b & ~mask):
                if (a & mask) != 0:
                    stack.append(((a | mask) + 1, b))
                    stack.append((a, a | mask))
                    done = True
                    break
                if (b & mask) != mask:
                    stack.append(((b & ~mask), b))
                    stack.append((a, (b & ~mask) - 1))
                    done = True
                    break
        if done:
            continue
        ea = chr(a).encode("utf-8")
        eb = chr(b).encode("utf-8")
        out.append([(x, y) for x, y in zip(ea, eb)])
    out.sort()
    return out


def _enc_len(c: int) -> int:
    for n, m in enumerate(_MAX_BY_LEN, start=1):
        if c <= m:
            return n
    raise ValueError(f"code point {c:#x} is beyond U+10FFFF")


def can_continue(lexeme: Any, state: Hashable) -> bool:
    """Some byte continues ``state``: a ByteDFA's live bytes, a lexeme's own ``can_continue``, else
    assumed (a lexeme without the probe is checked byte by byte by its ``step``)."""
    if isinstance(lexeme, ByteDFA):
        return bool(lexeme.live_bytes(state))  # type: ignore[arg-type]
    probe = getattr(lexeme, "can_continue", None)
    return True if probe is None else bool(probe(state))
