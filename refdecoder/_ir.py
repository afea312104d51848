"""The grammar IR: a recursive transition network whose terminals are trim byte lexemes (docs/design.md §2).

Theory of operation
-------------------
A grammar is a list of *nodes*; a node is one of

* ``Lex(lexeme)`` — a terminal: a byte automaton (``_lexeme.Lexeme``); the only node that reads bytes;
* ``Seq(items)`` — the items one after another;
* ``Alt(options)`` — any one option;
* ``Repeat(item, min, max)`` — ``item`` between ``min`` and ``max`` times (``max=None``: unbounded);
* a *custom* node (``CustomNode``) — a finite description of a structure that would explode as plain
  rules, e.g. a JSON object whose properties may come in any order (the node's local state remembers
  which keys were seen instead of enumerating permutations).

Every non-lexical node speaks one tiny protocol: ``enter() -> local`` and ``actions(local)``, a tuple of
``(CALL, child, resume_local)`` and ``(RETURN,)`` actions. Two optional extensions let a custom node
remember *text* a lexeme read (a JSON object excluding keys it has already seen, ``_keymemory``):

* ``(CALL, child, resume_local, entry)``: a call that starts the child — a lexeme node — in the lexeme
  state ``entry`` instead of its start state (a parameter: e.g. "the keys not to write again");
* ``receive(resume_local, lexeme_state) -> local``: a custom node that defines it is handed the final
  state of each lexeme child it called when that child returns, and resumes at the local it returns
  (e.g. with the key just written added to the seen set). Such a node's calls are never tail calls. The parser (``_parser``) runs the network as a
nondeterministic pushdown automaton whose configuration is a *set of stacks* of ``(node, local)``
frames — the classic RTN/GLR view, with stacks deduplicated as values. A call whose resume point can
only return is a tail call and does not grow the stack, so right recursion runs in constant stack.

Exactness rests on two static facts checked by :meth:`GrammarBuilder.finish`:

1. every reachable node is *productive* (derives at least one byte string) — unproductive options are
   pruned, so every stack the parser keeps can be completed; together with trim lexemes this makes
   "some stack survives" equivalent to "the bytes read are a viable prefix" (no dead ends);
2. there is no *left recursion* (a node reaching itself through calls without reading a byte); such
   grammars are refused, as llama.cpp refuses them, because the stack set would be infinite.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, Union, runtime_checkable

from ._lexeme import Lexeme
from .errors import SpecError, Unsupported

__all__ = [
    "CALL",
    "RETURN",
    "Action",
    "Lex",
    "Seq",
    "Alt",
    "Repeat",
    "CustomNode",
    "Node",
    "GrammarBuilder",
    "Network",
    "receives",
    "network_nullable",
]

CALL = 0
RETURN = 1
Action = tuple  # (CALL, child: int, resume: Hashable[, entry: Hashable]) | (RETURN,)
_RET: tuple[int] = (RETURN,)
H = TypeVar("H", bound=Hashable)


@dataclass(frozen=True)
class Lex:
    lexeme: Lexeme


@dataclass(frozen=True)
class Seq:
    items: tuple[int, ...]

    def enter(self) -> int:
        return 0

    def actions(self, local: int) -> tuple[Action, ...]:
        if local == len(self.items):
            return (_RET,)
        return ((CALL, self.items[local], local + 1),)


@dataclass(frozen=True)
class Alt:
    options: tuple[int, ...]

    def enter(self) -> int:
        return -1

    def actions(self, local: int) -> tuple[Action, ...]:
        if local == -1:
            return tuple((CALL, o, 0) for o in self.options)
        return (_RET,)


@dataclass(frozen=True)
class Repeat:
    item: int
    min: int
    max: int | None

    def enter(self) -> int:
        return 0

    def actions(self, count: int) -> tuple[Action, ...]:
        out: list[Action] = []
        if count >= self.min:
            out.append(_RET)
        if self.max is None:
            # Counts beyond ``min`` are indistinguishable: saturate so the local state stays finite.
            out.append((CALL, self.item, min(count + 1, self.min)))
        elif count < self.max:
            out.append((CALL, self.item, count + 1))
        return tuple(out)


@runtime_checkable
class CustomNode(Protocol):
    """A structured node with its own finite local states.

    ``children()`` lists every node it may call; ``nullable(is_nullable)`` / ``productive(is_productive)``
    answer the static questions given the answers for children; ``left_calls(is_nullable)`` lists the
    children it may call before reading a byte. ``actions`` must only call productive children and
    only resume into locals from which the node can still return (the builder guarantees children are
    productive before ``prune`` is called with the productive set). A node with ``receive`` (see the
    module doc) must keep that promise for every final lexeme state it can be handed, and an ``entry``
    it passes must be a state of the child lexeme from which a final state is reachable (trimness).
    Its locals may then carry the text received, so they are finite for each bounded input only.
    """

    def enter(self) -> Hashable: ...

    def actions(self, local: Hashable) -> tuple[Action, ...]: ...

    def children(self) -> tuple[int, ...]: ...

    def nullable(self, is_nullable: Callable[[int], bool]) -> bool: ...

    def productive(self, is_productive: Callable[[int], bool]) -> bool: ...

    def left_calls(self, is_nullable: Callable[[int], bool]) -> tuple[int, ...]: ...

    def prune(self, is_productive: Callable[[int], bool]) -> CustomNode: ...


Node = Union[Lex, Seq, Alt, Repeat, CustomNode]


def receives(node: object) -> bool:
    """The node is handed the final states of the lexemes it calls (``receive``; a node may turn it
    off with a false ``receives`` attribute, e.g. an object without key memory)."""
    return callable(getattr(node, "receive", None)) and bool(getattr(node, "receives", True))


@dataclass(frozen=True)
class Network:
    """A finished, checked grammar network. ``root`` is a node id; ``empty`` means L = ∅."""

    nodes: tuple[Node, ...]
    root: int
    empty: bool


class GrammarBuilder:
    """Allocates node ids (forward references allowed for recursion), then checks and prunes."""

    def __init__(self) -> None:
        self._nodes: list[Node | None] = []
        self._lex_cache: dict[Hashable, int] = {}

    def reserve(self) -> int:
        self._nodes.append(None)
        return len(self._nodes) - 1

    def define(self, node_id: int, node: Node) -> int:
        if self._nodes[node_id] is not None:
            raise SpecError("node defined twice", f"node {node_id}", "one definition per reserved node")
        self._nodes[node_id] = node
        return node_id

    def add(self, node: Node) -> int:
        return self.define(self.reserve(), node)

    def lex(self, lexeme: Lexeme) -> int:
        key = lexeme.key
        if key not in self._lex_cache:
            self._lex_cache[key] = self.add(Lex(lexeme))
        return self._lex_cache[key]

    def seq(self, items: Sequence[int]) -> int:
        items = tuple(items)
        return items[0] if len(items) == 1 else self.add(Seq(items))

    def alt(self, options: Sequence[int]) -> int:
        opts = tuple(dict.fromkeys(options))
        return opts[0] if len(opts) == 1 else self.add(Alt(opts))

    def repeat(self, item: int, lo: int, hi: int | None) -> int:
        return self.add(Repeat(item, lo, hi))

    def embed(self, network: Network) -> int:
        """Copy a finished network's nodes into this builder (ids shifted) and return its root's new
        id; an empty network becomes an unproductive node. Custom nodes are re-targeted with their
        ``remap`` (children ids through a function)."""
        if network.empty:
            return self.add(Alt(()))
        offset = len(self._nodes)

        def shift(i: int) -> int:
            return i + offset

        for n in network.nodes:
            self._nodes.append(_remap(n, shift))
        return shift(network.root)

    def node(self, node_id: int) -> Node:
        n = self._nodes[node_id]
        if n is None:
            raise SpecError("node used but never defined", f"node {node_id}", "a definition")
        return n

    # -- static analysis ----------------------------------------------------------------------
    def finish(self, root: int) -> Network:
        nodes: list[Node] = [self.node(i) for i in range(len(self._nodes))]
        reverse = _reverse(nodes)
        nullable = _fixpoint(nodes, _nullable_rule, reverse)
        productive = _fixpoint(nodes, _productive_rule, reverse)
        _check_left_recursion(nodes, nullable)

        def is_prod(i: int) -> bool:
            return productive[i]

        pruned: list[Node] = []
        for n in nodes:
            if isinstance(n, Alt):
                opts = tuple(o for o in n.options if productive[o])
                pruned.append(Alt(opts))
            elif isinstance(n, Repeat) and not productive[n.item]:
                pruned.append(Repeat(n.item, 0, 0))
            elif isinstance(n, (Lex, Seq, Repeat)):
                pruned.append(n)
            else:
                assert isinstance(n, CustomNode)
                pruned.append(n.prune(is_prod))
        return Network(tuple(pruned), root, not productive[root])


def _remap(n: Node, f: Callable[[int], int]) -> Node:
    """``n`` with every child id ``i`` replaced by ``f(i)``."""
    if isinstance(n, Lex):
        return n
    if isinstance(n, Seq):
        return Seq(tuple(map(f, n.items)))
    if isinstance(n, Alt):
        return Alt(tuple(map(f, n.options)))
    if isinstance(n, Repeat):
        return Repeat(f(n.item), n.min, n.max)
    remap = getattr(n, "remap", None)
    if remap is None:
        raise Unsupported(
            "embedding",
            type(n).__name__,
            "this structured node cannot be copied into another grammar (it has no remap)",
        )
    out: Node = remap(f)
    return out


def network_nullable(network: Network) -> bool:
    """The network's language contains the empty string."""
    if network.empty:
        return False
    return _fixpoint(list(network.nodes), _nullable_rule)[network.root]


def _children(n: Node) -> tuple[int, ...]:
    if isinstance(n, Lex):
        return ()
    if isinstance(n, Seq):
        return n.items
    if isinstance(n, Alt):
        return n.options
    if isinstance(n, Repeat):
        return (n.item,)
    return n.children()


def _nullable_rule(n: Node, known: list[bool]) -> bool:
    if isinstance(n, Lex):
        return n.lexeme.is_final(n.lexeme.start())
    if isinstance(n, Seq):
        return all(known[i] for i in n.items)
    if isinstance(n, Alt):
        return any(known[i] for i in n.options)
    if isinstance(n, Repeat):
        return n.min == 0 or known[n.item]
    return n.nullable(lambda i: known[i])


def _productive_rule(n: Node, known: list[bool]) -> bool:
    if isinstance(n, Lex):
        return True  # lexemes are trim, hence non-empty
    if isinstance(n, Seq):
        return all(known[i] for i in n.items)
    if isinstance(n, Alt):
        return any(known[i] for i in n.options)
    if isinstance(n, Repeat):
        return n.min == 0 or known[n.item]
    return n.productive(lambda i: known[i])


def _reverse(nodes: list[Node]) -> tuple[list[list[int]], list[int]]:
    """Each node's parents (nodes that call it, once each) and each ``Seq``'s number of distinct items."""
    parents: list[list[int]] = [[] for _ in nodes]
    counts = [0] * len(nodes)
    for i, node in enumerate(nodes):
        kids = set(_children(node))
        for c in kids:
            parents[c].append(i)
        if isinstance(node, Seq):
            counts[i] = len(kids)
    return parents, counts


def _fixpoint(
    nodes: list[Node],
    rule: Callable[[Node, list[bool]], bool],
    reverse: tuple[list[list[int]], list[int]] | None = None,
) -> list[bool]:
    """Least fixpoint of a monotone boolean property (nullable / productive) whose value at a node
    depends only on its children's (``rule``; on a ``Seq``, "all items").

    A worklist over reverse edges, as in Dowling & Gallier's linear-time Horn satisfiability (1984):
    every node is evaluated once, then again only when a child turns true; a ``Seq`` keeps a count of
    its distinct items not yet true and is evaluated when it reaches zero. O(nodes + edges) calls for
    the built-in nodes, where iterating the rule over all nodes until nothing changes took one round
    per level of a chain (quadratic). ``tests/test_compile_scale.py`` checks it against that iteration.
    """
    parents, counts = reverse if reverse is not None else _reverse(nodes)
    known = [False] * len(nodes)
    waiting = list(counts)  # a Seq's distinct items not yet known
    queue: list[int] = []
    for i, node in enumerate(nodes):
        if not known[i] and rule(node, known):
            known[i] = True
            queue.append(i)
    while queue:
        c = queue.pop()
        for p in parents[c]:
            if known[p]:
                continue
            node = nodes[p]
            if isinstance(node, Seq):
                waiting[p] -= 1
                if waiting[p]:
                    continue
            if rule(node, known):
                known[p] = True
                queue.append(p)
    return known


def _left_calls(n: Node, nullable: list[bool]) -> tuple[int, ...]:
    if isinstance(n, Lex):
        return ()
    if isinstance(n, Seq):
        out = []
        for i in n.items:
            out.append(i)
            if not nullable[i]:
                break
        return tuple(out)
    if isinstance(n, (Alt, Repeat)):
        return _children(n)
    return n.left_calls(lambda i: nullable[i])


def find_cycle(vertices: Iterable[H], succ: Callable[[H], Sequence[H]]) -> list[H] | None:
    """A directed cycle ``[v0, ..., v0]`` if the graph has one, else None (iterative DFS, colours)."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour: dict[H, int] = {}
    for start in vertices:
        if colour.get(start, WHITE) != WHITE:
            continue
        colour[start] = GREY
        stack: list[tuple[H, int]] = [(start, 0)]
        while stack:
            v, i = stack[-1]
            out = succ(v)
            if i < len(out):
                stack[-1] = (v, i + 1)
                w = out[i]
                state = colour.get(w, WHITE)
                if state == GREY:
                    path = [u for u, _ in stack]
                    return path[path.index(w) :] + [w]
                if state == WHITE:
                    colour[w] = GREY
                    stack.append((w, 0))
            else:
                colour[v] = BLACK
                stack.pop()
    return None


def _check_left_recursion(nodes: list[Node], nullable: list[bool]) -> None:
    """Refuse a node that can call itself before reading a byte."""
    graph = [_left_calls(n, nullable) for n in nodes]
    cycle = find_cycle(range(len(nodes)), graph.__getitem__)
    if cycle is not None:
        raise Unsupported(
            "left-recursion",
            f"node {cycle[0]}",
            "the grammar can reach the same rule again without reading a byte; "
            "rewrite it right-recursively or with repetition",
        )
