"""Completions read off the grammar network: a byte string taking a matcher state to acceptance.

Theory of operation. A state is a set of stacks (``_parser``); each stack is one derivation in
progress: its top frame is a lexeme in some lexeme state, every frame below it a node waiting at a
*resume* local for its child to return. A completion of one stack is therefore

    (a shortest word taking the top lexeme to a final state)
    + for each frame below, from the top down: (a shortest way from its resume local to RETURN),

and the state's shortest completion is the shortest of its stacks' (every accepting continuation is
the continuation of some stack's derivation). The pieces:

* **Lexemes**: a byte DFA by breadth-first search from the lexeme state to a final state;
  a number lexeme by its own :meth:`~refdecoder._numbers.NumberLexeme.witness`; any other lexeme by
  breadth-first search through its ``step`` (bounded).
* **Nodes** (``W(n)``: a shortest word a node derives from its entry local to RETURN): Knuth's
  generalization of Dijkstra's algorithm to context-free grammars (D. E. Knuth, "A generalization of
  Dijkstra's algorithm", Information Processing Letters 6(1), 1977), run here as a worklist fixpoint:
  every node starts unknown; a node's witness is recomputed whenever a child's witness shortens,
  until nothing changes.
* **A node from a local**: Dijkstra over the node's locals, where ``(CALL, child, resume)`` is an edge
  to ``resume`` of length ``len(W(child))`` and ``(RETURN,)`` ends the path. A call with an entry
  state (``_ir``) weighs the lexeme's shortest word from that state, and a node that receives its
  lexemes' final states resumes at what ``receive`` makes of the state after that word. Locals are
  finite for bounded words by the IR's contract; the search is bounded all the same (custom nodes
  such as objects have many), and gives up (None) past the bound.

Nothing here decides membership: callers verify a completion with :meth:`Grammar.advance` before
using it (``props.checks.witness.shortest_completion`` does, and falls back to a search over states
when this gives up). ``tests/test_complete.py`` checks, on many grammars and states, that every
completion is accepted and is as short as breadth-first search's.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Iterable
from typing import Any

from ._ir import CALL, Alt, Lex, Network, Repeat, Seq, receives
from ._lexeme import ByteDFA
from ._parser import Stack, State, stable_key

__all__ = ["Completer"]

# Bytes tried first when several give a word of the same length: readable witnesses.
_ORDER = (
    list(b"abcdefghijklmnopqrstuvwxyz0123456789")
    + [b for b in range(0x20, 0x7F) if not chr(b).isalnum()]
    + list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
)
_ORDER += [b for b in range(256) if b not in set(_ORDER)]
_RANK = [_ORDER.index(b) for b in range(256)]  # each byte's place in _ORDER

# A byte DFA's shortest words, shared by every Completer: a ByteDFA's key is a digest of its
# canonical table, so equal keys are the same automaton and the breadth-first search below gives the
# same word. Grammars share most lexemes (string bodies, keys, literals): the candidates of one
# defect's minimization are hundreds of grammars over nearly the same lexemes.
# Emptied when full (65,536 words: a few MB).
_DFA_WORDS: dict[tuple[Hashable, Hashable, int], Any] = {}
_DFA_WORDS_KEPT = 1 << 16
_UNSET = object()


class Completer:
    """Completions over one network (see the module doc). Memo tables only; pure otherwise."""

    def __init__(
        self,
        network: Network,
        *,
        max_locals: int = 500,
        max_lexeme_states: int = 20_000,
        max_len: int = 100_000,
        max_stacks: int = 256,
    ) -> None:
        self.network = network
        self.max_locals = max_locals
        self.max_lexeme_states = max_lexeme_states
        self.max_len = max_len
        self.max_stacks = max_stacks
        self._node_words: dict[int, bytes] | None = None
        self._from_local: dict[tuple[int, Hashable], bytes | None] = {}
        self._lexeme_words: dict[tuple[int, Hashable], bytes | None] = {}

    # -- public -----------------------------------------------------------------------------------
    def complete(self, state: State) -> bytes | None:
        """A shortest completion of ``state`` found structurally, or None if a bound was hit."""
        if state.accepting:
            return b""
        best: bytes | None = None
        stacks: Iterable[Stack] = state.stacks
        if len(state.stacks) > self.max_stacks:  # the shortest stacks, ties in a fixed order
            stacks = sorted(stacks, key=lambda st: (len(st), stable_key(st)))[: self.max_stacks]
        # The shortest word, the smallest of those: not the first met, since a frozenset's order
        # follows string hashes and the same state must complete the same in every process.
        for stack in stacks:
            word = self._complete_stack(stack)
            if word is not None and (best is None or (len(word), word) < (len(best), best)):
                best = word
        return best

    # -- stacks -----------------------------------------------------------------------------------
    def _complete_stack(self, stack: tuple[tuple[int, Any], ...]) -> bytes | None:
        node_id, lstate = stack[-1]
        top = self.network.nodes[node_id]
        assert isinstance(top, Lex), "a stack's top frame is a lexeme frame"
        first = self._lexeme_word(node_id, top, lstate)
        if first is None:
            return None
        parts = [first]
        size = len(first)
        below = list(stack[:-1])
        if below and receives(self.network.nodes[below[-1][0]]):
            final = _run(top.lexeme, lstate, first)  # the caller is handed the lexeme's final state
            frame_node, local = below[-1]
            below[-1] = (frame_node, self.network.nodes[frame_node].receive(local, final))  # type: ignore[union-attr]
        for frame_node, local in reversed(below):
            rest = self.from_local(frame_node, local)
            if rest is None:
                return None
            parts.append(rest)
            size += len(rest)
            if size > self.max_len:
                return None
        return b"".join(parts)

    # -- lexemes ----------------------------------------------------------------------------------
    def _lexeme_word(self, node_id: int, node: Lex, lstate: Hashable) -> bytes | None:
        key = (node_id, lstate)
        if key not in self._lexeme_words:
            lexeme = node.lexeme
            if isinstance(lexeme, ByteDFA):
                shared = (lexeme.key, lstate, self.max_lexeme_states)
                word = _DFA_WORDS.get(shared, _UNSET)  # one get, one set: safe between threads
                if word is _UNSET:
                    word = self._lexeme_word_uncached(lexeme, lstate)
                    if len(_DFA_WORDS) >= _DFA_WORDS_KEPT:
                        _DFA_WORDS.clear()
                    _DFA_WORDS[shared] = word
            else:
                word = self._lexeme_word_uncached(lexeme, lstate)
            self._lexeme_words[key] = word
        return self._lexeme_words[key]

    def _lexeme_word_uncached(self, lexeme: Any, lstate: Hashable) -> bytes | None:
        if lexeme.is_final(lstate):
            return b""
        witness = getattr(lexeme, "witness", None)
        if witness is not None:  # a number lexeme: its own constructive witness
            word: bytes = witness(lstate)
            return word
        # Breadth-first search over lexeme states: the first final state reached is a nearest one.
        prev: dict[Hashable, tuple[Hashable, int]] = {lstate: (lstate, -1)}
        queue: deque[Hashable] = deque([lstate])
        is_dfa = isinstance(lexeme, ByteDFA)
        while queue:
            s = queue.popleft()
            # A DFA's live bytes in _ORDER's order (the same order as trying every byte of _ORDER).
            for b in sorted(lexeme.live_bytes(s), key=_RANK.__getitem__) if is_dfa else _ORDER:
                t = lexeme.step(s, b)
                if t is None or t in prev:
                    continue
                prev[t] = (s, b)
                if lexeme.is_final(t):
                    out = bytearray()
                    while t != lstate:
                        t, byte = prev[t]
                        out.append(byte)
                    return bytes(reversed(out))
                if len(prev) > self.max_lexeme_states:
                    return None
                queue.append(t)
        return None  # unreachable for a trim lexeme; None keeps the caller on its fallback

    # -- nodes ------------------------------------------------------------------------------------
    def from_local(self, node_id: int, local: Hashable) -> bytes | None:
        """A shortest word taking node ``node_id`` from ``local`` to RETURN (None past the bound)."""
        key = (node_id, local)
        if key not in self._from_local:
            words = self._words()
            self._from_local[key] = self._dijkstra(node_id, local, words)
        return self._from_local[key]

    def _words(self) -> dict[int, bytes]:
        if self._node_words is None:
            self._node_words = self._solve()
        return self._node_words

    def _children(self, node: Any) -> tuple[int, ...]:
        if isinstance(node, Lex):
            return ()
        if isinstance(node, Seq):
            return node.items
        if isinstance(node, Alt):
            return node.options
        if isinstance(node, Repeat):
            return (node.item,)
        return tuple(node.children())

    def _solve(self) -> dict[int, bytes]:
        """``W(n)`` for every node whose witness is found within the bounds (Knuth 1977, as a
        worklist fixpoint: a node is revisited whenever one of its children's words shortens)."""
        nodes = self.network.nodes
        parents: dict[int, list[int]] = {}
        for i, node in enumerate(nodes):
            for c in set(self._children(node)):
                parents.setdefault(c, []).append(i)
        words: dict[int, bytes] = {}
        work = deque(self._postorder())  # children before parents: few recomputations
        queued = set(work)
        while work:
            i = work.popleft()
            queued.discard(i)
            node = nodes[i]
            if isinstance(node, Lex):
                word = self._lexeme_word(i, node, node.lexeme.start())
            else:
                word = self._dijkstra(i, node.enter(), words)
            if word is None or (i in words and len(words[i]) <= len(word)):
                continue
            words[i] = word
            for p in parents.get(i, ()):
                if p not in queued:
                    queued.add(p)
                    work.append(p)
        return words

    def _postorder(self) -> list[int]:
        """Every node, each after the children it reaches first from the root (iterative DFS)."""
        nodes = self.network.nodes
        order: list[int] = []
        done: set[int] = set()
        for root in [self.network.root, *range(len(nodes))]:
            if root in done:
                continue
            done.add(root)
            stack = [(root, iter(self._children(nodes[root])))]
            while stack:
                node_id, it = stack[-1]
                child = next((c for c in it if c not in done), None)
                if child is None:
                    stack.pop()
                    order.append(node_id)
                else:
                    done.add(child)
                    stack.append((child, iter(self._children(nodes[child]))))
        return order

    def _dijkstra(self, node_id: int, start: Hashable, words: dict[int, bytes]) -> bytes | None:
        node = self.network.nodes[node_id]
        if isinstance(node, Lex):  # a lexeme frame below the top cannot occur; entry only
            return words.get(node_id)
        best: dict[Hashable, int] = {start: 0}
        # (length so far, tie-breaker, local, the words so far as a linked list of parts)
        heap: list[tuple[int, int, Any, Any]] = [(0, 0, start, None)]
        tick = 0
        expanded = 0
        while heap:
            dist, _, local, path = heapq.heappop(heap)
            if dist > best.get(local, dist):
                continue
            expanded += 1
            if expanded > self.max_locals:
                return self._greedy(node, start, words)
            actions = node.actions(local)
            if any(a[0] != CALL for a in actions):  # RETURN: the first one popped is a shortest
                parts: list[bytes] = []
                while path is not None:
                    path, part = path
                    parts.append(part)
                return b"".join(reversed(parts))
            for act in actions:
                edge = self._edge(node, act, words)
                if edge is None:
                    continue
                w, resume = edge
                nd = dist + len(w)
                if nd > self.max_len:
                    continue
                if nd < best.get(resume, nd + 1):
                    best[resume] = nd
                    tick += 1
                    heapq.heappush(heap, (nd, tick, resume, (path, w)))
        return None

    def _edge(self, node: Any, act: Any, words: dict[int, bytes]) -> tuple[bytes, Hashable] | None:
        """A call action as an edge: (the child's shortest word, the local it resumes at). A call
        with an ``entry`` starts its lexeme there; a receiving node resumes at what ``receive`` makes
        of the lexeme's final state after that word (``_ir``)."""
        child, resume = act[1], act[2]
        child_node = self.network.nodes[child]
        if len(act) > 3:
            assert isinstance(child_node, Lex), "only lexeme children take an entry state"
            word = self._lexeme_word(child, child_node, act[3])
            entry = act[3]
        else:
            word = words.get(child)
            entry = child_node.lexeme.start() if isinstance(child_node, Lex) else None
        if word is None:
            return None
        if isinstance(child_node, Lex) and receives(node):
            resume = node.receive(resume, _run(child_node.lexeme, entry, word))
        return word, resume

    def _greedy(self, node: Any, start: Hashable, words: dict[int, bytes]) -> bytes | None:
        """Some word from ``start`` to RETURN when Dijkstra's search grew too large (e.g. an object
        with many required keys, whose locals are the subsets of keys written): depth first, the
        shortest child word first, each local visited once. The IR's contract (every resume local can
        still return, locals are finite) makes this succeed; it is bounded all the same."""
        seen = {start}
        stack: list[tuple[Hashable, list[tuple[bytes, Hashable]], int]] = []
        parts: list[bytes] = []
        local = start
        budget = 20 * self.max_locals
        while budget > 0:
            budget -= 1
            actions = node.actions(local)
            if any(a[0] != CALL for a in actions):
                return b"".join(parts)
            edges = [e for e in (self._edge(node, a, words) for a in actions) if e is not None]
            options = sorted(edges, key=lambda e: len(e[0]))
            stack.append((local, options, 0))
            while stack:
                here, opts, k = stack[-1]
                while k < len(opts) and opts[k][1] in seen:
                    k += 1
                if k < len(opts):
                    word, resume = opts[k]
                    stack[-1] = (here, opts, k + 1)
                    seen.add(resume)
                    parts.append(word)
                    local = resume
                    break
                stack.pop()  # a dead end: undo the word that led here
                if parts:
                    parts.pop()
            else:
                return None
        return None


def _run(lexeme: Any, state: Hashable, word: bytes) -> Hashable:
    """The lexeme state after reading ``word`` from ``state`` (the word is known to be read)."""
    for b in word:
        state = lexeme.step(state, b)
        assert state is not None, "a lexeme witness is read by its lexeme"
    return state
