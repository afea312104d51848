"""Left-recursion removal for grammar rules (the syntax tree of ``_grammar_ast``), before the IR is built.

The IR refuses left recursion (``_ir``'s left-call check: the parser's stack set would be infinite),
but grammars written for Earley-based engines use it (``expr ::= expr "+" term | term``). This module
rewrites the rules of every left-recursive strongly connected component into rules with the *same
language* and no left recursion, by Paull's algorithm (Aho, Lam, Sethi, Ullman, *Compilers*, 2nd ed.,
§4.3.3, Algorithm 4.19), made to cover what the textbook version excludes (ε-productions, cycles
``A ::= A``, EBNF operators).

Theory of operation
-------------------
Let ``S`` be a strongly connected component of the *left-call* graph (``A -> B`` when ``A`` may call
``B`` before reading a character; nullable prefixes are skipped) that contains a cycle.

1. **ε-separation** (:meth:`_Rewriter.nonempty`). For an expression ``e``, ``ne(e)`` denotes
   ``L(e) \\ {ε}``, built structurally:
   ``ne(X1 X2 .. Xk) = ne(X1) X2 .. Xk | ne(X2 .. Xk)`` (the second option only when ``X1`` is
   nullable); ``ne(a | b) = ne(a) | ne(b)``; ``ne(x{m,M}) = ne(x){1,M}`` when ``x`` is nullable (a
   non-empty word of ``x^k`` is a product of 1..k non-empty words of ``x``, and ``x^k ⊆ x^M`` then),
   else ``ne(x){max(m,1),M}``; a nullable rule ``C`` gets a companion rule ``C+ ::= ne(body C)``
   (``+`` cannot occur in a GBNF name, so companion names never clash). In ``ne(e)`` the first item
   of every sequence and the item of every repetition on the *left spine* is non-nullable, so the
   rules a production may call before reading are exactly those its first symbol may call.
2. **Productions** (:meth:`_Rewriter.productions`). The left spine of ``ne(body)`` is unfolded into a
   list of productions ``(head, *tail)`` whose union is the body's language: alternations are split,
   ``x{m,M}`` with ``m >= 1`` becomes ``x x{m-1,M-1}``, and the unfolding stops at a reference to a
   rule of ``S`` or at a piece that cannot reach ``S`` before reading. Tails are untouched expressions
   (they may refer to any rule: only the head matters for left recursion).
3. **Paull** on the companion system ``B1 .. Bn`` (``Bi = Ai+`` for nullable ``Ai``, else ``Ai``): for
   ``i = 1..n``, substitute every production ``Bi -> Bj γ`` (``j < i``) by ``Bi -> δ γ`` for each
   current production ``Bj -> δ`` (unfolding a definition preserves the least solution), then remove
   direct left recursion: ``Bi -> Bi α1 | .. | Bi αp | β1 | .. | βq`` becomes
   ``Bi -> (β1 | .. | βq) (α1 | .. | αp)*``, dropping empty ``αk`` (a cycle ``Bi -> Bi`` adds no
   string: ``(α | ε)* = α*``). Finally a nullable ``Ai`` is ``Ai ::= Ai+ | ""``.

Exactness. A grammar denotes the least solution of its system of language equations. Unfolding a
definition does not change the least solution. For the direct step, let ``(X, Y)`` be the least
solution of the system with ``X = X·α(X,Y) ∪ β(X,Y)`` and ``(X', Y')`` that of the system with
``X = β(X,Y)·α(X,Y)*``. ``(X', Y')`` solves the first system (``β α* = β α* α ∪ β``), so
``(X, Y) ⊆ (X', Y')``; and ``(X, Y)`` is a pre-fixpoint of the second (Arden: every solution of
``X = X α ∪ β`` contains ``β α*``), so ``(X', Y') ⊆ (X, Y)`` by Knaster–Tarski. This holds whether or
not ``ε ∈ α`` and whether or not ``α``, ``β`` mention ``X`` (Arden's *uniqueness* needs ``ε ∉ α``; the
least solution does not). ε-separation is exact by the identities in 1.

No left recursion remains: every production of ``Bi`` starts with a non-nullable symbol that is a
terminal piece, a rule outside ``S`` (which cannot left-reach ``S``, else it would be in ``S``), or
``Bl`` with ``l > i`` (Aho et al.'s invariant), and ``(α ..)*`` only follows the non-nullable ``β``.
The pipeline (``_gbnf``) checks the result again and the IR checks the network.

Refused: a rewrite whose productions would exceed ``Limits.rewrite_symbols`` symbols (substitution can grow
exponentially), as ``Unsupported("gbnf-left-recursion", rule, why)`` naming the rule being rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._grammar_analysis import expr_nullable, left_call_graph, left_references, nullable_rules, sccs
from ._grammar_ast import AltE, Chars, EmbedE, Expr, Lit, Ref, RepE, Rule, SeqE, SpecialE
from ._limits import Deadline, Limits
from .errors import Unsupported

__all__ = ["remove_left_recursion"]

#: Symbols (summed over all productions of one component) above which a rewrite is refused.

Production = tuple[Expr, ...]
_NOTHING = AltE(())  # the empty language (no string at all)


def remove_left_recursion(rules: dict[str, Rule], limits: Limits) -> dict[str, Rule]:
    """The rules with every left-recursive component rewritten (module docstring), also those the root
    does not reach (llama.cpp checks every rule too); the same dict when there is none. Refused past
    ``limits.rewrite_symbols`` symbols; the compile clock is ``limits.compile_seconds``."""
    null = nullable_rules(rules)
    left = left_call_graph(rules, null)
    order = {name: i for i, name in enumerate(rules)}  # Paull's order: as the rules are written
    components = [
        sorted(c, key=order.__getitem__) for c in sccs(list(rules), left) if len(c) > 1 or c[0] in left[c[0]]
    ]
    if not components:
        return rules
    rewriter = _Rewriter(rules, null, Deadline(limits.compile_seconds), limits.rewrite_symbols)
    for component in components:
        rewriter.rewrite(component)
    return rewriter.rules


def _seq(items: Iterable[Expr]) -> Expr:
    t = tuple(items)
    return t[0] if len(t) == 1 else SeqE(t)


def _alt(options: Iterable[Expr]) -> Expr:
    t = tuple(options)
    return t[0] if len(t) == 1 else AltE(t)


class _Rewriter:
    def __init__(
        self, rules: dict[str, Rule], null: dict[str, bool], deadline: Deadline, max_symbols: int
    ) -> None:
        self.source = rules
        self.max_symbols = max_symbols
        self.rules = dict(rules)
        self.null = dict(null)
        self.deadline = deadline
        self.companion: dict[str, str] = {}  # nullable rule -> its ε-free companion

    def nullable(self, e: Expr) -> bool:
        return expr_nullable(e, self.null.__getitem__)

    # -- 1. ε-separation
    def nonempty_rule(self, name: str) -> str:
        """A rule whose language is ``L(name) \\ {ε}``: ``name`` itself when it is not nullable."""
        if not self.null[name]:
            return name
        got = self.companion.get(name)
        if got is None:
            got = self.companion[name] = name + "+"
            self.null[got] = False
            r = self.source[name]
            self.rules[got] = Rule(got, _NOTHING, r.line, r.col)  # placeholder while recursing
            self.rules[got] = Rule(got, self.nonempty(r.body), r.line, r.col)
        return got

    def nonempty(self, e: Expr) -> Expr:
        """``ne(e)``: an expression for ``L(e) \\ {ε}`` whose left spine starts non-nullable."""
        if isinstance(e, (Lit, Chars, SpecialE)):
            return e
        if isinstance(e, EmbedE):
            if e.nullable:  # L \ {ε} of an embedded network is not an expression of this tree
                raise Unsupported(
                    "gbnf-left-recursion",
                    e.label,
                    "a left-recursive rule starts with an embedded grammar that can be empty; "
                    "rewrite it with repetition",
                )
            return e
        if isinstance(e, Ref):
            name = self.nonempty_rule(e.name)
            return e if name == e.name else Ref(name, e.line, e.col)
        if isinstance(e, SeqE):
            options: list[Expr] = []
            for i, item in enumerate(e.items):
                options.append(_seq((self.nonempty(item), *e.items[i + 1 :])))
                if not self.nullable(item):
                    break
            return _alt(options)
        if isinstance(e, AltE):
            return _alt(self.nonempty(o) for o in e.options)
        if e.max == 0:
            return _NOTHING
        if self.nullable(e.item):
            return RepE(self.nonempty(e.item), 1, e.max)
        return RepE(self.nonempty(e.item), max(e.min, 1), e.max)

    # -- 2. productions
    def productions(self, e: Expr, system: set[str]) -> list[Production]:
        """``e`` (an ``ne`` form) as productions whose head is the only symbol that may call a rule of
        ``system`` before reading."""
        if isinstance(e, Ref) or not self.reaches(e, system):
            return [(e,)]
        if isinstance(e, AltE):
            return [p for o in e.options if o is not _NOTHING for p in self.productions(o, system)]
        if isinstance(e, SeqE):
            return [p + e.items[1:] for p in self.productions(e.items[0], system)]
        assert isinstance(e, RepE) and e.min >= 1, e  # ne forms repeat at least once on the spine
        rest: Production = ()
        if e.max is None:
            rest = (RepE(e.item, e.min - 1, None),)
        elif e.max > 1:
            rest = (RepE(e.item, e.min - 1, e.max - 1),)
        return [p + rest for p in self.productions(e.item, system)]

    def reaches(self, e: Expr, system: set[str]) -> bool:
        calls: list[str] = []
        left_references(e, self.nullable, calls)
        return any(c in system for c in calls)

    # -- 3. Paull's algorithm (Aho, Lam, Sethi, Ullman, Algorithm 4.19)
    def rewrite(self, component: list[str]) -> None:
        names = [self.null_free(a) for a in component]  # B1 .. Bn
        system = set(names)
        prods: dict[str, list[Production]] = {b: self.productions(self.rules[b].body, system) for b in names}
        for i, bi in enumerate(names):
            for bj in names[:i]:
                self.deadline.check("gbnf left-recursion rewrite")
                out: list[Production] = []
                for p in prods[bi]:
                    if _head_is(p, bj):
                        out.extend(q + p[1:] for q in prods[bj])
                    else:
                        out.append(p)
                prods[bi] = out
                self.check_size(component, i, prods)
            alphas = [p[1:] for p in prods[bi] if _head_is(p, bi) and len(p) > 1]
            betas = [p for p in prods[bi] if not _head_is(p, bi)]
            if alphas:
                star = RepE(_alt(_seq(a) for a in alphas), 0, None)
                prods[bi] = [b + (star,) for b in betas]
            else:
                prods[bi] = betas
        for a, b in zip(component, names):
            r = self.rules[b]
            self.rules[b] = Rule(b, _alt(_seq(p) for p in prods[b]), r.line, r.col)
            if b != a:  # A ::= A+ | ""
                ra = self.rules[a]
                self.rules[a] = Rule(a, AltE((Ref(b, ra.line, ra.col), SeqE(()))), ra.line, ra.col)

    def null_free(self, name: str) -> str:
        """``name``'s member of the ε-free system, its body in ``ne`` form."""
        if self.null[name]:
            return self.nonempty_rule(name)
        r = self.source[name]
        self.rules[name] = Rule(name, self.nonempty(r.body), r.line, r.col)
        return name

    def check_size(self, component: list[str], i: int, prods: dict[str, list[Production]]) -> None:
        size = sum(len(p) for ps in prods.values() for p in ps)
        if size > self.max_symbols:
            rule = component[i]
            r = self.source[rule]
            raise Unsupported(
                "gbnf-left-recursion",
                rule,
                f"removing the left recursion through rule {rule!r} (line {r.line}; component "
                f"{', '.join(component[:6])}{', ...' if len(component) > 6 else ''}) by Paull's algorithm "
                f"would take more than {self.max_symbols} symbols (raise it with --limit rewrite_symbols=N); "
                "or rewrite it with repetition, e.g. 'expr ::= term (\"+\" term)*'",
            )


def _head_is(p: Production, name: str) -> bool:
    return isinstance(p[0], Ref) and p[0].name == name
