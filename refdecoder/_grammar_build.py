"""The grammar builder: a checked syntax tree (``_grammar_ast``) lowered to the grammar network (``_ir``).

Called by the pipeline (``_gbnf``) once the rules are read, their references and lookaheads checked and
their left recursion rewritten away (:func:`build_network`).

**Regular merging.** A sub-expression without references to recursive rules denotes a regular
language; it is compiled to *one* minimal :class:`~refdecoder._lexeme.ByteDFA` (Thompson's ε-NFA over
the parts' DFAs and the subset construction, both ``_fsa``'s :class:`~refdecoder._fsa.Nfa` and
:func:`~refdecoder._fsa.determinize` over byte intervals; Moore minimization in ``ByteDFA.build``) as long
as the subset construction stays under ``_MERGE_CAP`` states (or ``Limits.automaton_states``, if
smaller). This is exact: a ``Lex`` node's language is all the parser uses, and
``L(Lex(A·B)) = L(Seq(Lex A, Lex B))``. It only shrinks the parser's stack sets, so the cap is a
tuning threshold, not a refusal. Anything larger, or recursive, becomes ``Seq`` / ``Alt`` / ``Repeat``
nodes (``Repeat`` counts natively, so ``x{0,100000}`` costs one node, never an expansion). A character
class is its code point set's UTF-8 automaton (``CodepointDFA.to_utf8``).

Refused: a network whose lexeme states plus nodes exceed ``Limits.automaton_states``.
"""

from __future__ import annotations

from collections.abc import Callable

from ._fsa import CodepointDFA, Edge, Nfa, determinize
from ._grammar_analysis import reference_graph, sccs
from ._grammar_ast import AltE, Chars, Expr, Lit, Ref, RepE, Rule, SeqE
from ._ir import Alt, GrammarBuilder, Lex, Network, Seq
from ._lexeme import ByteDFA
from ._limits import Deadline, Limits
from .errors import LimitExceeded, Unsupported

__all__ = ["build_network"]

_MERGE_CAP = 1_500  # subset-construction states above which a regular piece is left structural
_HUGE = 1 << 40  # size of a non-regular piece
_WHERE = "gbnf subset construction"


def build_network(
    rules: dict[str, Rule], root: str, limits: Limits, *, merge_regular: bool = True
) -> Network:
    """The network of ``rules`` from ``root`` (defined, no left recursion left). ``merge_regular=False``
    keeps every construct structural (for tests)."""
    return _Builder(rules, limits, merge_regular).compile(root)


class _TooBig(Exception):
    pass


class _Empty:
    """The empty language (no string at all); distinct from the empty string."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()
_NOT_REGULAR = object()
RegValue = ByteDFA | _Empty


class _Clock:
    """The meter of the builder's ε-NFAs (``Nfa.meter``): no fuel, the compile clock checked every 256
    charges."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.calls = 0

    def __call__(self, units: int, where: str) -> None:
        self.calls += 1
        if self.calls % 256 == 0:
            self.deadline.check(_WHERE)


def _byte_edges(row: dict[int, int]) -> list[Edge]:
    """A byte row ``{byte: target}`` as ``(lo, hi, target)`` edges, one per run of bytes with one target."""
    out: list[Edge] = []
    for b in sorted(row):
        t = row[b]
        if out and out[-1][2] == t and out[-1][1] + 1 == b:
            out[-1] = (out[-1][0], b, t)
        else:
            out.append((b, b, t))
    return out


class _Regular:
    """Thompson NFAs over syntax-tree pieces whose leaves are byte DFAs; one subset construction per piece
    (``cap`` subset states at most: :class:`_TooBig` beyond)."""

    def __init__(self, deadline: Deadline, cap: int, leaf: Callable[[Expr], RegValue]) -> None:
        self.cap = cap
        self.leaf = leaf  # the DFA (or EMPTY) of a Chars / Lit / regular Ref
        self.clock = _Clock(deadline)
        self._rows: dict[object, tuple[list[list[Edge]], frozenset[int]]] = {}
        self._classes: dict[tuple[tuple[int, int], ...], RegValue] = {}

    def rows(self, d: ByteDFA) -> tuple[list[list[Edge]], frozenset[int]]:
        """``d``'s transitions as rows of byte-interval edges (runs of bytes with one target)."""
        got = self._rows.get(d.key)
        if got is None:
            t = d.transitions()
            got = self._rows[d.key] = ([_byte_edges(t[s]) for s in range(d.num_states)], d.finals)
        return got

    def embed(self, nfa: Nfa, d: ByteDFA) -> tuple[int, int]:
        """A fragment for ``d``: its states copied in, its finals joined to one exit."""
        rows, finals = self.rows(d)
        start, ends = nfa.embed_rows(rows, finals)
        end = nfa.state()
        for f in ends:
            nfa.epsilon(f, end)
        return start, end

    def chars(self, c: Chars) -> RegValue:
        """The UTF-8 byte DFA of a class (``CodepointDFA.to_utf8``), or EMPTY."""
        ranges = c.scalar_ranges()
        got = self._classes.get(ranges)
        if got is None:
            cp = CodepointDFA.from_intervals(ranges)
            got = self._classes[ranges] = EMPTY if cp.is_empty() else cp.to_utf8()
        return got

    def frag(self, nfa: Nfa, e: Expr) -> tuple[int, int]:
        """Thompson's construction (Thompson 1968): a fragment with one entry and one exit."""
        if isinstance(e, Lit):
            start = cur = nfa.state()
            for byte in e.utf8():
                nxt = nfa.state()
                nfa.edge(cur, byte, byte, nxt)
                cur = nxt
            return start, cur
        if isinstance(e, (Chars, Ref)):
            v = self.leaf(e)
            if isinstance(v, _Empty):
                return nfa.state(), nfa.state()  # no path from entry to exit
            return self.embed(nfa, v)
        if isinstance(e, SeqE):
            start = cur = nfa.state()
            for item in e.items:
                s, t = self.frag(nfa, item)
                nfa.epsilon(cur, s)
                cur = t
            return start, cur
        if isinstance(e, AltE):
            start, end = nfa.state(), nfa.state()
            for o in e.options:
                s, t = self.frag(nfa, o)
                nfa.epsilon(start, s)
                nfa.epsilon(t, end)
            return start, end
        start = cur = nfa.state()
        for _ in range(e.min):
            s, t = self.frag(nfa, e.item)
            nfa.epsilon(cur, s)
            cur = t
        end = nfa.state()
        nfa.epsilon(cur, end)
        if e.max is None:  # item* : loop back through one more copy
            s, t = self.frag(nfa, e.item)
            nfa.epsilon(cur, s)
            nfa.epsilon(t, cur)
        else:  # item (item (item)?)? ... : every further copy may stop
            for _ in range(e.max - e.min):
                s, t = self.frag(nfa, e.item)
                nfa.epsilon(cur, s)
                nfa.epsilon(t, end)
                cur = t
        return start, end

    def dfa(self, e: Expr) -> RegValue:
        """The minimal DFA of ``e`` (all of whose references are regular); ``_TooBig`` over the cap.

        The ε-NFA and the subset construction are ``_fsa``'s (:class:`~refdecoder._fsa.Nfa` over byte
        intervals, :func:`~refdecoder._fsa.determinize`), metered by the compile clock; past ``cap``
        subset states (or ``Limits.nfa_states`` NFA states) the piece is left structural: exact either
        way. ``ByteDFA.build`` then minimizes."""
        try:
            nfa = Nfa(meter=self.clock)
            s, t = self.frag(nfa, e)
            rows, finals = determinize(nfa, [s], [t], max_states=self.cap, where=_WHERE)
        except LimitExceeded as exc:
            if exc.limit not in ("dfa_states", "nfa_states"):
                raise
            raise _TooBig from None
        table = {i: {b: j for lo, hi, j in row for b in range(lo, hi + 1)} for i, row in enumerate(rows)}
        if not finals or ByteDFA.is_empty_language(table, 0, finals):
            return EMPTY
        return ByteDFA.build(table, 0, finals)


class _Builder:
    """Lowers the rules to a network: regular rules and pieces to ``Lex`` nodes, the rest to ``Seq`` /
    ``Alt`` / ``Repeat`` nodes, rules the root reaches only."""

    def __init__(self, rules: dict[str, Rule], limits: Limits, merge: bool) -> None:
        self.rules = rules
        self.limits = limits
        self.merge = merge
        self.deadline = Deadline(limits.compile_seconds)
        self.reg = _Regular(self.deadline, min(_MERGE_CAP, limits.automaton_states), self.leaf)
        self.builder = GrammarBuilder()
        self.rule_value: dict[str, object] = {}  # RegValue, or _NOT_REGULAR
        self.rule_nodes: dict[str, int] = {}
        self.pending: list[str] = []
        self._reg_memo: dict[int, object] = {}
        self._size_memo: dict[int, int] = {}
        self._node_memo: dict[int, int] = {}
        self._unproductive: int | None = None

    # -- regular values
    def leaf(self, e: Expr) -> RegValue:
        if isinstance(e, Chars):
            return self.reg.chars(e)
        if isinstance(e, Lit):
            return ByteDFA.literal(e.utf8())
        assert isinstance(e, Ref)
        v = self.rule_value[e.name]
        assert isinstance(v, (ByteDFA, _Empty))
        return v

    def size(self, e: Expr) -> int:
        """An upper bound on the Thompson NFA's states; ``_HUGE`` when ``e`` is not regular."""
        got = self._size_memo.get(id(e))
        if got is None:
            got = self._size_memo[id(e)] = min(self._size(e), _HUGE)
        return got

    def _size(self, e: Expr) -> int:
        if isinstance(e, Lit):
            return len(e.utf8()) + 1
        if isinstance(e, Chars) or (isinstance(e, Ref) and self.rule_value[e.name] is not _NOT_REGULAR):
            v = self.leaf(e)
            return v.num_states + 1 if isinstance(v, ByteDFA) else 2
        if isinstance(e, Ref):
            return _HUGE
        if isinstance(e, SeqE):
            return sum(self.size(i) for i in e.items) + 1
        if isinstance(e, AltE):
            return sum(self.size(o) for o in e.options) + 2
        copies = e.min + (1 if e.max is None else e.max - e.min)
        return max(copies, 1) * self.size(e.item) + 2

    def regular(self, e: Expr) -> object:
        """``e``'s language as a DFA or EMPTY, or ``_NOT_REGULAR`` (recursive, too big, or merging off)."""
        got = self._reg_memo.get(id(e))
        if got is None:
            got = self._reg_memo[id(e)] = self._regular(e)
        return got

    def _regular(self, e: Expr) -> object:
        if isinstance(e, (Chars, Lit)):
            return self.leaf(e)
        if isinstance(e, Ref):
            return self.rule_value[e.name]
        if not self.merge or self.size(e) > 4 * self.reg.cap:
            return _NOT_REGULAR
        try:
            return self.reg.dfa(e)
        except _TooBig:
            return _NOT_REGULAR

    # -- nodes
    def unproductive(self) -> int:
        if self._unproductive is None:
            self._unproductive = self.builder.add(_alt_none())
        return self._unproductive

    def value_node(self, v: object) -> int:
        if v is EMPTY:
            return self.unproductive()
        assert isinstance(v, ByteDFA)
        return self.builder.lex(v)

    def node(self, e: Expr) -> int:
        got = self._node_memo.get(id(e))
        if got is None:
            got = self._node_memo[id(e)] = self._node(e)
        return got

    def _node(self, e: Expr) -> int:
        v = self.regular(e)
        if v is not _NOT_REGULAR:
            return self.value_node(v)
        b = self.builder
        if isinstance(e, Ref):
            return self.rule_node(e.name)
        if isinstance(e, SeqE):
            items: list[int] = []
            run: list[Expr] = []
            for item in e.items:
                if self.size(item) < _HUGE:
                    run.append(item)
                else:
                    items.extend(self.merged_runs(run, SeqE))
                    run = []
                    items.append(self.node(item))
            items.extend(self.merged_runs(run, SeqE))
            return b.seq(items)
        if isinstance(e, AltE):
            options = self.merged_runs([o for o in e.options if self.size(o) < _HUGE], AltE)
            options += [self.node(o) for o in e.options if self.size(o) >= _HUGE]
            return b.alt(options) if options else self.unproductive()
        assert isinstance(e, RepE)
        return b.repeat(self.node(e.item), e.min, e.max)

    def merged_runs(self, run: list[Expr], kind: Callable[[tuple[Expr, ...]], Expr]) -> list[int]:
        """Nodes for consecutive regular pieces, combined (by ``SeqE`` or ``AltE``) into as few DFAs as
        fit under the cap: batches by size estimate, halved while a batch's DFA is still too big."""
        if not self.merge:
            return [self.node(e) for e in run]
        batches: list[list[Expr]] = []
        size = 0
        for e in run:
            if not batches or size + self.size(e) > 4 * self.reg.cap:
                batches.append([])
                size = 0
            batches[-1].append(e)
            size += self.size(e)
        out: list[int] = []
        while batches:
            batch = batches.pop(0)
            if len(batch) == 1:
                out.append(self.node(batch[0]))
                continue
            try:
                v = self.reg.dfa(kind(tuple(batch)))
            except _TooBig:
                half = len(batch) // 2
                batches[:0] = [batch[:half], batch[half:]]
                continue
            out.append(self.value_node(v))
        return out

    def rule_node(self, name: str) -> int:
        nid = self.rule_nodes.get(name)
        if nid is None:
            v = self.rule_value[name]
            if v is not _NOT_REGULAR:
                nid = self.value_node(v)
            else:
                nid = self.builder.reserve()
                self.pending.append(name)
            self.rule_nodes[name] = nid
        return nid

    # -- driver
    def compile(self, root: str) -> Network:
        rules = self.rules
        graph = reference_graph(rules)
        reachable = [root]
        seen = {root}
        for name in reachable:
            for w in graph[name]:
                if w not in seen:
                    seen.add(w)
                    reachable.append(w)
        for comp in sccs(reachable, graph):
            self.deadline.check("gbnf rules")
            recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
            for name in comp:
                if recursive or any(self.rule_value[w] is _NOT_REGULAR for w in graph[name]):
                    self.rule_value[name] = _NOT_REGULAR
                else:
                    self.rule_value[name] = self.regular(rules[name].body)
        root_node = self.rule_node(root)
        while self.pending:
            self.deadline.check("gbnf rules")
            name = self.pending.pop()
            body = self.node(rules[name].body)
            self.builder.define(self.rule_nodes[name], _call(body))
        try:
            network = self.builder.finish(root_node)
        except Unsupported as e:  # the AST check refuses first; this is a safety net
            raise Unsupported("gbnf-left-recursion", root, e.reason) from e
        self.check_size(network)
        return network

    def check_size(self, network: Network) -> None:
        keys: dict[object, int] = {}
        for n in network.nodes:
            if isinstance(n, Lex) and isinstance(n.lexeme, ByteDFA):
                keys[n.lexeme.key] = n.lexeme.num_states
        total = sum(keys.values()) + len(network.nodes)
        if total > self.limits.automaton_states:
            raise LimitExceeded("automaton_states", total, self.limits.automaton_states, "gbnf")


def _alt_none() -> Alt:
    return Alt(())


def _call(body: int) -> Seq:
    return Seq((body,))
