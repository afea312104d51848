"""The grammar builder: a checked syntax tree (``_grammar_ast``) lowered to the grammar network (``_ir``).

Called by the pipeline (``_gbnf``) once the rules are read, their references and lookaheads checked and
their left recursion rewritten away (:func:`build_network`).

**Regular merging.** A sub-expression without references to recursive rules denotes a regular
language; it is compiled to *one* minimal :class:`~refdecoder._lexeme.ByteDFA` (Thompson's ε-NFA over
the parts' DFAs and the subset construction, both ``_fsa``'s :class:`~refdecoder._fsa.Nfa` and
:func:`~refdecoder._fsa.determinize` over byte intervals; minimization in
:func:`~refdecoder._fsa.canonical_bytes`, the table ``ByteDFA.build`` would give) as long
as the subset construction stays under ``_MERGE_CAP`` states (or ``Limits.automaton_states``, if
smaller). This is exact: a ``Lex`` node's language is all the parser uses, and
``L(Lex(A·B)) = L(Seq(Lex A, Lex B))``. It only shrinks the parser's stack sets, so the cap is a
tuning threshold, not a refusal. Anything larger, or recursive, becomes ``Seq`` / ``Alt`` / ``Repeat``
nodes (``Repeat`` counts natively, so ``x{0,100000}`` costs one node, never an expansion). A character
class is its code point set's UTF-8 automaton (``CodepointDFA.to_utf8``).

**Linear time.** A regular rule referenced more than once gets its own DFA, built once and embedded
where it is used. A regular rule referenced once is *deferred* (``_Builder.decide``): its body is spliced
into the one piece that uses it, and its own DFA is built only when a structural node needs it. Building
each rule's DFA would cost quadratic time on a chain ``rN ::= "a" rN+1 | "b"`` (each DFA contains the
next); Thompson's construction runs over a work list, so splicing may nest to any depth. A structural
rule's node is its body's node itself, not a call of it.

Refused: a network whose lexeme states plus nodes exceed ``Limits.automaton_states``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._fsa import CodepointDFA, Edge, Nfa, byte_literal, canonical_bytes, determinize
from ._grammar_analysis import references, sccs
from ._grammar_ast import AltE, Chars, EmbedE, Expr, Lit, Ref, RepE, Rule, SeqE, SpecialE
from ._ir import Alt, GrammarBuilder, Lex, Network, Repeat, Seq
from ._lexeme import ByteDFA
from ._limits import Deadline, Limits
from ._special import special_dfa
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

    def __init__(
        self,
        deadline: Deadline,
        cap: int,
        leaf: Callable[[Expr], RegValue],
        inline: Callable[[Ref], Expr | None] = lambda e: None,
    ) -> None:
        self.cap = cap
        self.leaf = leaf  # the DFA (or EMPTY) of a Chars / Lit / regular Ref
        self.inline = inline  # the body of a Ref to splice in (a rule without a DFA of its own), or None
        self.clock = _Clock(deadline)
        self._rows: dict[object, tuple[Sequence[Sequence[Edge]], frozenset[int]]] = {}
        self._classes: dict[tuple[tuple[int, int], ...], RegValue] = {}
        self._literals: dict[bytes, ByteDFA] = {}

    def rows(self, d: ByteDFA) -> tuple[Sequence[Sequence[Edge]], frozenset[int]]:
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
        """Thompson's construction (Thompson 1968): a fragment with one entry and one exit.

        Iterative, over a work list of ``(piece, entry, exit)``, so that spliced rules (``inline``) may
        nest to any depth. Invariant: a piece adds edges out of its entry, into its exit and among
        states of its own only, never into its entry nor out of its exit (a loop returns to a state of
        its own), so pieces may share entry and exit states (the options of an alternation, the last
        item of a sequence and the sequence) and ε-chains stay short."""
        start, end = nfa.state(), nfa.state()
        work: list[tuple[Expr, int, int]] = [(e, start, end)]
        while work:
            e, s, t = work.pop()
            if isinstance(e, Ref):
                body = self.inline(e)
                if body is not None:
                    work.append((body, s, t))
                    continue
            if isinstance(e, Lit):
                data = e.utf8()
                cur = s
                for byte in data[:-1]:
                    nxt = nfa.state()
                    nfa.edge(cur, byte, byte, nxt)
                    cur = nxt
                if data:
                    nfa.edge(cur, data[-1], data[-1], t)
                else:
                    nfa.epsilon(s, t)
            elif isinstance(e, (Chars, Ref, SpecialE)):
                v = self.leaf(e)
                if not isinstance(v, _Empty):  # EMPTY: no path from entry to exit
                    a, b = self.embed(nfa, v)
                    nfa.epsilon(s, a)
                    nfa.epsilon(b, t)
            elif isinstance(e, SeqE):
                if not e.items:
                    nfa.epsilon(s, t)
                cur = s
                for k, item in enumerate(e.items):
                    nxt = t if k == len(e.items) - 1 else nfa.state()
                    work.append((item, cur, nxt))
                    cur = nxt
            elif isinstance(e, AltE):
                for o in e.options:
                    work.append((o, s, t))
            else:
                assert isinstance(e, RepE)  # an EmbedE is never regular (``_regular``)
                cur = nfa.state()
                nfa.epsilon(s, cur)
                for _ in range(e.min):
                    nxt = nfa.state()
                    work.append((e.item, cur, nxt))
                    cur = nxt
                nfa.epsilon(cur, t)
                if e.max is None:  # item* : loop back through one more copy
                    work.append((e.item, cur, cur))
                else:  # item (item (item)?)? ... : every further copy may stop
                    for _ in range(e.max - e.min):
                        nxt = nfa.state()
                        work.append((e.item, cur, nxt))
                        nfa.epsilon(nxt, t)
                        cur = nxt
        return start, end

    def dfa(self, e: Expr) -> RegValue:
        """The minimal DFA of ``e`` (all of whose references are regular); ``_TooBig`` over the cap.

        The ε-NFA and the subset construction are ``_fsa``'s (:class:`~refdecoder._fsa.Nfa` over byte
        intervals, :func:`~refdecoder._fsa.determinize`), metered by the compile clock; past ``cap``
        subset states (or ``Limits.nfa_states`` NFA states) the piece is left structural: exact either
        way. :func:`~refdecoder._fsa.canonical_bytes` then minimizes (its canonical rows, the same
        runs of bytes as :meth:`rows`, are kept for embedding the DFA in larger pieces)."""
        try:
            nfa = Nfa(meter=self.clock)
            s, t = self.frag(nfa, e)
            rows, finals = determinize(nfa, [s], [t], max_states=self.cap, where=_WHERE)
        except LimitExceeded as exc:
            if exc.limit not in ("dfa_states", "nfa_states"):
                raise
            raise _TooBig from None
        got = canonical_bytes(rows, 0, finals)
        if got is None:
            return EMPTY
        d, table = got
        self._rows.setdefault(d.key, (table, d.finals))
        return d

    def literal(self, data: bytes) -> ByteDFA:
        """``ByteDFA.literal(data)``, memoized (literals recur across rules)."""
        got = self._literals.get(data)
        if got is None:
            got = self._literals[data] = byte_literal(data)
        return got


class _Builder:
    """Lowers the rules to a network: regular rules and pieces to ``Lex`` nodes, the rest to ``Seq`` /
    ``Alt`` / ``Repeat`` nodes, rules the root reaches only."""

    def __init__(self, rules: dict[str, Rule], limits: Limits, merge: bool) -> None:
        self.rules = rules
        self.limits = limits
        self.merge = merge
        self.deadline = Deadline(limits.compile_seconds)
        self.reg = _Regular(self.deadline, min(_MERGE_CAP, limits.automaton_states), self.leaf, self.inline)
        self.builder = GrammarBuilder()
        self.rule_value: dict[str, object] = {}  # RegValue, or _NOT_REGULAR
        self.deferred: set[str] = set()  # regular rules used once, not decided yet (see ``compile``)
        self.rule_nodes: dict[str, int] = {}
        self.pending: list[str] = []
        self._reg_memo: dict[int, object] = {}
        self._size_memo: dict[int, int] = {}
        self._too_big: set[int] = set()  # pieces whose subset construction ran past the cap
        self._node_memo: dict[int, int] = {}
        self._unproductive: int | None = None

    # -- regular values
    def leaf(self, e: Expr) -> RegValue:
        if isinstance(e, Chars):
            return self.reg.chars(e)
        if isinstance(e, Lit):
            return self.reg.literal(e.utf8())
        if isinstance(e, SpecialE):
            return special_dfa(e.ids)
        assert isinstance(e, Ref)
        v = self.rule_value[e.name]
        if v is _NOT_REGULAR:  # a deferred rule decided since the estimate: leave the piece structural
            raise _TooBig
        assert isinstance(v, (ByteDFA, _Empty))
        return v

    def inline(self, e: Ref) -> Expr | None:
        """The body to splice into a piece for a reference to a deferred rule (else None: a leaf)."""
        return self.rules[e.name].body if e.name in self.deferred else None

    def value_of(self, name: str) -> object:
        """The rule's value (a DFA, EMPTY or ``_NOT_REGULAR``), deciding a deferred rule now."""
        if name in self.deferred:
            self.decide(name)
        return self.rule_value[name]

    def decide(self, name: str) -> None:
        """Build a deferred rule's DFA (its deferred references spliced in). When the subset construction
        runs past the cap, the deferred rules spliced in whose pieces are more than half as large are
        left structural as well, without trying each one: on a chain of rules each would fail the
        same way, one rule after another, for a quadratic cost. Exact either way (merging is tuning)."""
        self.deferred.remove(name)
        body = self.rules[name].body
        v = self.rule_value[name] = self.regular(body)
        if v is not _NOT_REGULAR or id(body) not in self._too_big:
            return
        half = self.size(body) // 2
        stack = [body]
        while stack:
            e = stack.pop()
            if isinstance(e, Ref):
                if e.name in self.deferred and self.size(self.rules[e.name].body) > half:
                    self.deferred.remove(e.name)
                    self.rule_value[e.name] = _NOT_REGULAR
                    stack.append(self.rules[e.name].body)
            elif isinstance(e, SeqE):
                stack.extend(e.items)
            elif isinstance(e, AltE):
                stack.extend(e.options)
            elif isinstance(e, RepE):
                stack.append(e.item)

    def size(self, e: Expr) -> int:
        """An upper bound on the Thompson NFA's states; ``_HUGE`` when ``e`` is not regular."""
        got = self._size_memo.get(id(e))
        if got is None:
            got = self._size_memo[id(e)] = min(self._size(e), _HUGE)
        return got

    def _size(self, e: Expr) -> int:
        if isinstance(e, Lit):
            return len(e.utf8()) + 1
        if isinstance(e, EmbedE):
            return _HUGE  # a network, not an automaton
        if isinstance(e, Ref) and e.name in self.deferred:
            return self.size(self.rules[e.name].body)  # spliced in
        if isinstance(e, (Chars, SpecialE)) or (
            isinstance(e, Ref) and self.rule_value[e.name] is not _NOT_REGULAR
        ):
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
        if isinstance(e, (Chars, Lit, SpecialE)):
            return self.leaf(e)
        if isinstance(e, EmbedE):
            return _NOT_REGULAR
        if isinstance(e, Ref):
            return self.value_of(e.name)
        if not self.merge or self.size(e) > 4 * self.reg.cap:
            return _NOT_REGULAR
        try:
            return self.reg.dfa(e)
        except _TooBig:
            self._too_big.add(id(e))
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
        if isinstance(e, EmbedE):
            return b.embed(e.network)
        if isinstance(e, Ref):
            return self.rule_node(e.name)
        assert isinstance(e, (SeqE, AltE, RepE))  # leaves (classes, literals, specials) are regular
        n = self.structure(e)
        return n if isinstance(n, int) else b.add(n)

    def structure(self, e: SeqE | AltE | RepE) -> int | Seq | Alt | Repeat:
        """The structural node of ``e`` (not yet added), or the id it reduces to (one item or option)."""
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
            return items[0] if len(items) == 1 else Seq(tuple(items))
        if isinstance(e, AltE):
            small = [self.size(o) < _HUGE for o in e.options]
            options = self.merged_runs([o for o, s in zip(e.options, small) if s], AltE)
            options += [self.node(o) for o, s in zip(e.options, small) if not s]
            opts = tuple(dict.fromkeys(options))
            if not opts:
                return self.unproductive()
            return opts[0] if len(opts) == 1 else Alt(opts)
        assert isinstance(e, RepE)
        return Repeat(self.node(e.item), e.min, e.max)

    def define_rule(self, name: str) -> None:
        """Define a structural rule's reserved node as its body's node itself (one node fewer per rule
        than a call of it), or as a call when the body reduces to another node."""
        body = self.rules[name].body
        nid = self.rule_nodes[name]
        if isinstance(body, (SeqE, AltE, RepE)) and self.regular(body) is _NOT_REGULAR:
            n = self.structure(body)
            if not isinstance(n, int):
                self.builder.define(nid, n)
                return
            self.builder.define(nid, _call(n))
            return
        self.builder.define(nid, _call(self.node(body)))

    def merged_runs(self, run: list[Expr], kind: Callable[[tuple[Expr, ...]], Expr]) -> list[int]:
        """Nodes for consecutive regular pieces, combined (by ``SeqE`` or ``AltE``) into as few DFAs as
        fit under the cap: batches by size estimate, halved while a batch's DFA is still too big."""
        if not self.merge or len(run) <= 1:
            return [self.node(e) for e in run]
        batches: list[list[Expr]] = []
        size = 0
        for e in run:
            k = self.size(e)
            if not batches or size + k > 4 * self.reg.cap:
                batches.append([])
                size = 0
            batches[-1].append(e)
            size += k
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
            v = self.value_of(name)
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
        graph: dict[str, list[str]] = {}  # the reference graph of the rules the root reaches
        uses: dict[str, int] = {}  # references to each rule from those (with repeats)
        reachable = [root]
        seen = {root}
        for name in reachable:
            refs: list[str] = []
            references(rules[name].body, refs)
            for w in refs:
                uses[w] = uses.get(w, 0) + 1
            graph[name] = list(dict.fromkeys(refs))
            for w in graph[name]:
                if w not in seen:
                    seen.add(w)
                    reachable.append(w)
        # Dependencies first. A regular rule used once is *deferred*: its body is spliced into the one
        # piece that uses it, and its own DFA is built only if a structural node needs it (``decide``).
        # Building every rule's DFA would cost quadratic time on a chain ``rN ::= "a" rN+1 | "b"``, each
        # DFA containing the next.
        for comp in sccs(reachable, graph):
            self.deadline.check("gbnf rules")
            recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
            for name in comp:
                body = rules[name].body
                if recursive or any(self.rule_value.get(w) is _NOT_REGULAR for w in graph[name]):
                    self.rule_value[name] = _NOT_REGULAR
                elif self.merge and uses.get(name, 0) <= 1:
                    self.deferred.add(name)
                    self.size(body)  # memoized bottom-up, so estimates never recurse through rules
                else:
                    self.rule_value[name] = self.regular(body)
        root_node = self.rule_node(root)
        while self.pending:
            self.deadline.check("gbnf rules")
            name = self.pending.pop()
            self.define_rule(name)
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
