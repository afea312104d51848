"""The exact byte-level matcher over a grammar network (docs/design.md §2).

The network (``_ir``) is run as a nondeterministic pushdown automaton — a recursive transition network
in the sense of Woods (1970), simulated breadth-first like a GLR parser without the graph-structured
stack: the configuration is the *set* of stacks that are still alive, each stack a tuple of
``(node_id, local)`` frames whose top frame is a lexeme frame ``(lex_node_id, lexeme_state)``.

* ``_closure`` expands non-lexical frames (calls and returns, no bytes read) until every stack's top is
  a lexeme frame; a stack that returns from the root marks the configuration *accepting*.
* ``step`` feeds one byte to every top lexeme frame; frames whose lexeme dies are dropped; a lexeme
  that reaches a final state may also return to its caller (then closure again).

Because every stack is completable (trim lexemes, productive nodes: see ``_ir``), the configuration is
non-empty iff the bytes read are a viable prefix — the matcher never reports a dead end as alive.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from ._ir import CALL, Lex, Network, receives
from ._lexeme import ByteDFA, can_continue
from .errors import LimitExceeded

__all__ = ["State", "Parser", "Frame", "Stack", "stable_key"]

Frame = tuple[int, Any]
Stack = tuple[Frame, ...]


def stable_key(x: Any) -> Any:
    """A sort key for stacks, frames and their parts that is the same in every process: a state's
    stacks form a frozenset, whose order follows string hashes (PYTHONHASHSEED), so a choice among
    them ("the first shortest") must sort by this key, not by iteration order. Frozensets (a lexeme's
    local state can be one) are sorted; each atom is tagged with its type name so unlike atoms compare."""
    if isinstance(x, tuple):
        return (0, tuple(stable_key(y) for y in x))
    if isinstance(x, frozenset):
        return (1, tuple(sorted(stable_key(y) for y in x)))
    return (2, type(x).__name__, x)


class State:
    """An immutable matcher state: the live stacks and whether the bytes read are in the language.

    Forking is assignment; equal states have equal futures. ``id`` is a short digest of the state's
    hash, used in outcomes and error messages: the same within a process, but not across processes
    once a frame holds a string (``hash`` follows PYTHONHASHSEED). Every ``accept`` names its new
    state, so a digest of the stacks in ``stable_key`` order there cost a quarter of the reference's
    own time when certifying itself.
    """

    __slots__ = ("stacks", "accepting", "_hash")
    stacks: frozenset[Stack]
    accepting: bool
    _hash: int

    def __init__(self, stacks: frozenset[Stack], accepting: bool) -> None:
        # Set once, past the immutability guard of __setattr__ (a state is made on every parser step).
        setattr_ = object.__setattr__
        setattr_(self, "stacks", stacks)
        setattr_(self, "accepting", accepting)
        setattr_(self, "_hash", hash((stacks, accepting)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, State)
            and self._hash == other._hash
            and self.accepting == other.accepting
            and self.stacks == other.stacks
        )

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, "_hash"):
            raise AttributeError("State is immutable")
        object.__setattr__(self, name, value)

    @property
    def is_dead(self) -> bool:
        return not self.stacks and not self.accepting

    @property
    def id(self) -> str:
        return f"{self._hash & 0xFFFFFFFFFFFF:012x}"

    def __repr__(self) -> str:
        return f"State(id={self.id}, stacks={len(self.stacks)}, accepting={self.accepting})"


class Parser:
    """Runs a :class:`Network`. Pure functions of states; caches are memo tables only."""

    def __init__(self, network: Network, max_stacks: int = 4096, max_depth: int = 100_000) -> None:
        self.network = network
        self.max_stacks = max_stacks
        self.max_depth = max_depth
        self._actions: dict[tuple[int, Hashable], tuple[Any, ...]] = {}
        self._enter: dict[int, Hashable] = {}
        self._initial: State | None = None
        # nodes handed the final state of the lexemes they call (``_ir``: ``receive``)
        self._receivers = frozenset(i for i, n in enumerate(network.nodes) if receives(n))

    # -- network access with memo tables ----------------------------------------------------------
    def _node_actions(self, node_id: int, local: Hashable) -> tuple[Any, ...]:
        key = (node_id, local)
        acts = self._actions.get(key)
        if acts is None:
            node = self.network.nodes[node_id]
            acts = node.actions(local)  # type: ignore[union-attr,arg-type]
            self._actions[key] = acts
        return acts

    def _entry(self, node_id: int) -> Hashable:
        if node_id not in self._enter:
            node = self.network.nodes[node_id]
            if isinstance(node, Lex):
                self._enter[node_id] = node.lexeme.start()
            else:
                self._enter[node_id] = node.enter()
        return self._enter[node_id]

    def _is_tail(self, node_id: int, local: Hashable) -> bool:
        if node_id in self._receivers:
            return False
        acts = self._node_actions(node_id, local)
        return len(acts) == 1 and acts[0][0] != CALL

    def _pop(self, stack: Stack) -> Stack:
        """``stack`` without its top lexeme frame, which has just reached a final state; a receiving
        caller resumes at the local its ``receive`` gives for that final state (``_ir``)."""
        base = stack[:-1]
        if base and base[-1][0] in self._receivers:
            node_id, local = base[-1]
            node = self.network.nodes[node_id]
            return base[:-1] + ((node_id, node.receive(local, stack[-1][1])),)  # type: ignore[union-attr]
        return base

    # -- closure and step -------------------------------------------------------------------------
    def _closure(self, pending: list[Stack], out: set[Stack]) -> bool:
        """Expand ``pending`` stacks (top frame not yet expanded) into ``out``; True if accepting."""
        nodes = self.network.nodes
        accepting = False
        seen: set[Stack] = set()
        while pending:
            stack = pending.pop()
            if stack in seen:
                continue
            seen.add(stack)
            if not stack:
                accepting = True
                continue
            node_id, local = stack[-1]
            node = nodes[node_id]
            if isinstance(node, Lex):
                if can_continue(node.lexeme, local):
                    out.add(stack)
                if len(out) > self.max_stacks:
                    raise LimitExceeded("parser_stacks", len(out), self.max_stacks)
                if node.lexeme.is_final(local):
                    pending.append(self._pop(stack))
                continue
            base = stack[:-1]
            for act in self._node_actions(node_id, local):
                if act[0] == CALL:
                    child, resume = act[1], act[2]
                    child_frame = (child, act[3] if len(act) > 3 else self._entry(child))
                    if self._is_tail(node_id, resume):
                        pending.append(base + (child_frame,))
                    else:
                        if len(stack) >= self.max_depth:
                            raise LimitExceeded("nesting_depth", len(stack), self.max_depth)
                        pending.append(base + ((node_id, resume), child_frame))
                else:
                    pending.append(base)
        return accepting

    def initial(self) -> State:
        if self._initial is None:
            if self.network.empty:
                self._initial = State(frozenset(), False)
            else:
                root = self.network.root
                out: set[Stack] = set()
                acc = self._closure([((root, self._entry(root)),)], out)
                self._initial = State(frozenset(out), acc)
        return self._initial

    def step(self, state: State, byte: int) -> State | None:
        nodes = self.network.nodes
        pending: list[Stack] = []
        kept: set[Stack] = set()
        for stack in state.stacks:
            node_id, lstate = stack[-1]
            lexeme = nodes[node_id].lexeme  # type: ignore[union-attr]
            nxt = lexeme.step(lstate, byte)
            if nxt is None:
                continue
            new = stack[:-1] + ((node_id, nxt),)
            if can_continue(lexeme, nxt):
                kept.add(new)
            if lexeme.is_final(nxt):
                pending.append(self._pop(new))
        accepting = self._closure(pending, kept) if pending else False
        if not kept and not accepting:
            return None
        if len(kept) > self.max_stacks:
            raise LimitExceeded("parser_stacks", len(kept), self.max_stacks)
        return State(frozenset(kept), accepting)

    def _tops(self, state: State) -> Iterator[tuple[Any, Any]]:
        """Each stack's top lexeme and its state, in the order ``state.stacks`` iterates."""
        nodes = self.network.nodes
        for stack in state.stacks:
            node_id, lstate = stack[-1]
            yield nodes[node_id].lexeme, lstate  # type: ignore[union-attr]

    def step_key(self, state: State, byte: int) -> tuple[Hashable | None, ...]:
        """Each stack's top lexeme stepped on ``byte``, in the order ``state.stacks`` iterates: all
        that :meth:`step` reads of ``byte``, so two bytes with the same key from the same state step
        to the same result (inside a string, most bytes lead to the same state)."""
        return tuple(lexeme.step(lstate, byte) for lexeme, lstate in self._tops(state))

    def readable_bound(self, state: State) -> bytes | None:
        """Without stepping a lexeme: a superset of the bytes on which :meth:`step` returns a state
        (``step`` keeps only stacks whose top lexeme reads the byte), as the union of the top lexemes'
        byte-table rows and declared ``alphabet``; None when a top lexeme has neither."""
        acc: set[int] = set()
        for lexeme, lstate in self._tops(state):
            if isinstance(lexeme, ByteDFA):
                acc.update(lexeme.live_bytes(lstate))
            else:
                alphabet = getattr(lexeme, "alphabet", None)
                if alphabet is None:
                    return None
                acc.update(alphabet)
        return bytes(sorted(acc))

    def live_bytes(self, state: State) -> bytes:
        """Bytes that some stack's top lexeme can read (a superset check is redone by ``step``)."""
        return self.byte_candidates(state)[0]

    def byte_candidates(self, state: State) -> tuple[bytes, frozenset[int]]:
        """``(readable, onward)``: the bytes some stack's top lexeme can read (:meth:`live_bytes`), and
        those among them on which some top lexeme reads on to a state that ``can_continue``. ``step``
        keeps that stack for an onward byte, so it returns a state there (or raises LimitExceeded
        where the other stacks' closure outgrows its bounds); the other readable bytes need ``step``."""
        acc: set[int] = set()
        onward: set[int] = set()
        for lexeme, lstate in self._tops(state):
            if isinstance(lexeme, ByteDFA):
                acc.update(lexeme.live_bytes(lstate))
                onward |= lexeme.onward_bytes(lstate)
            else:  # a lexeme may declare the bytes it can ever read (``alphabet``)
                for b in getattr(lexeme, "alphabet", None) or range(256):
                    nxt = lexeme.step(lstate, b)
                    if nxt is not None:
                        acc.add(b)
                        if can_continue(lexeme, nxt):
                            onward.add(b)
        return bytes(sorted(acc)), frozenset(onward)
