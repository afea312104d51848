"""xgrammar's lookahead assertions decided by a follow analysis over the syntax tree (``_grammar_ast``).

``rule ::= body (= la)`` says: whatever text follows a completion of ``rule``, up to the end of the
text, must be consistent with ``L(la)·Σ*`` (a prefix of some string starting with a string of
``L(la)``). That is how xgrammar uses it: when it builds a mask it checks the bytes of a token that
lie beyond the rule's end against ``la`` (``GrammarMatcherForTokenMaskCache::AdaptCacheWithLookahead``),
and bytes that are not there are not checked. The reference never compiles the assertion: it accepts a
grammar only where the assertion removes nothing — every continuation of every use of the rule is
already consistent with it — and refuses otherwise. The proof (``_LookaheadProof.consistent``) walks
the continuation (the rest of the using rule's body, then, through ``_Follow``, what follows that rule
at each of its own uses) against ``la``: universally over the continuation's alternatives, existentially
over ``la``'s. Every step is a language inclusion (below); a cycle through ``_Follow`` is assumed
(coinduction: a string of the least fixpoint has a finite derivation, so it is checked through a
finite unfolding); out of steps (``Limits.lookahead_steps``) means no proof, hence a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _cpset
from ._grammar_analysis import references
from ._grammar_ast import AltE, Chars, EmbedE, Expr, Lit, Ref, RepE, Rule, SeqE, SpecialE
from ._limits import Limits
from .errors import Unsupported

__all__ = ["check_lookaheads"]


@dataclass(frozen=True)
class _Follow:
    """Whatever may follow a completion of ``rule`` (the end of the text included)."""

    rule: str


_Item = Expr | _Follow


class _NoProof(Exception):
    pass


def _flat(e: Expr) -> tuple[Expr, ...]:
    return e.items if isinstance(e, SeqE) else (e,)


def _same(a: Expr, b: Expr) -> bool:
    """Syntactic equality (hence equal languages)."""
    if a is b:
        return True
    if isinstance(a, Chars) and isinstance(b, Chars):
        return a.scalar_ranges() == b.scalar_ranges()
    if isinstance(a, Lit) and isinstance(b, Lit):
        return a.cps == b.cps
    if isinstance(a, Ref) and isinstance(b, Ref):
        return a.name == b.name
    if isinstance(a, SpecialE) and isinstance(b, SpecialE):
        return a.ids == b.ids
    if isinstance(a, SeqE) and isinstance(b, SeqE):
        return len(a.items) == len(b.items) and all(map(_same, a.items, b.items))
    if isinstance(a, AltE) and isinstance(b, AltE):
        return len(a.options) == len(b.options) and all(map(_same, a.options, b.options))
    if isinstance(a, RepE) and isinstance(b, RepE):
        return (a.min, a.max) == (b.min, b.max) and _same(a.item, b.item)
    return False


def _shape(e: Expr) -> object:
    """A hashable value equal for syntactically equal expressions (as ``_same``)."""
    if isinstance(e, Chars):
        return ("chars", e.scalar_ranges())
    if isinstance(e, Lit):
        return ("lit", e.cps)
    if isinstance(e, Ref):
        return ("ref", e.name)
    if isinstance(e, SpecialE):
        return ("special", tuple(sorted(e.ids)))
    if isinstance(e, SeqE):
        return ("seq", tuple(map(_shape, e.items)))
    if not isinstance(e, (AltE, RepE)):  # an embedded network: equal only to itself
        return ("embed", id(e))
    if isinstance(e, AltE):
        return ("alt", tuple(map(_shape, e.options)))
    return ("rep", e.min, e.max, _shape(e.item))


def _within(small: Chars, big: Chars) -> bool:
    s, b = small.scalar_ranges(), big.scalar_ranges()
    return _cpset.union(s, b) == b


class _LookaheadProof:
    def __init__(self, rules: dict[str, Rule], root: str, max_steps: int) -> None:
        self.rules = rules
        self.max_steps = max_steps
        self.uses: dict[str, list[tuple[tuple[_Item, ...], str]]] = {name: [] for name in rules}
        reachable = [root]
        seen = {root}
        for name in reachable:
            self.walk(rules[name].body, (_Follow(name),), name)
            refs: list[str] = []
            references(rules[name].body, refs)
            for w in refs:
                if w not in seen:
                    seen.add(w)
                    reachable.append(w)
        self.reachable = seen
        self.steps = 0
        self.assumed: set[tuple[str, tuple[object, ...]]] = set()

    def walk(self, e: Expr, cont: tuple[_Item, ...], in_rule: str) -> None:
        """Record, for each reference in ``e``, the continuation after it."""
        if isinstance(e, Ref):
            self.uses[e.name].append((cont, in_rule))
        elif isinstance(e, SeqE):
            for i, item in enumerate(e.items):
                self.walk(item, e.items[i + 1 :] + cont, in_rule)
        elif isinstance(e, AltE):
            for o in e.options:
                self.walk(o, cont, in_rule)
        elif isinstance(e, RepE) and e.max != 0:
            # after one copy: up to max-1 more (fewer than min-1 more over-approximates: still sound)
            more = () if e.max == 1 else (RepE(e.item, 0, None if e.max is None else e.max - 1),)
            self.walk(e.item, more + cont, in_rule)

    def check(self, rule: str, la: Expr) -> None:
        """Raise ``Unsupported("lookahead", ...)`` unless every use of ``rule`` implies ``la``."""
        if rule not in self.reachable:
            return
        r = self.rules[rule]
        for cont, in_rule in self.uses[rule]:
            if in_rule not in self.reachable:
                continue
            self.steps = 0
            self.assumed = set()
            out_of_steps = False
            try:
                ok = self.consistent(cont, _flat(la))
            except _NoProof:
                ok, out_of_steps = False, True
            if not ok:
                steps = (
                    f"; the proof ran out of its {self.max_steps} steps (raise them with --limit lookahead_steps=N)"
                    if out_of_steps
                    else ""
                )
                raise Unsupported(
                    "lookahead",
                    rule,
                    f"the lookahead assertion of rule {rule!r} (line {r.line}) restricts what may follow "
                    f"it, and the grammar does not imply it where rule {in_rule!r} "
                    f"(line {self.rules[in_rule].line}) uses it; the reference accepts a lookahead only "
                    "when the grammar already implies it (an assertion that removes text would make the "
                    f"language depend on how it is tokenized){steps}",
                )

    def consistent(self, seq: tuple[_Item, ...], la: tuple[Expr, ...]) -> bool:
        """Every text ``seq`` may stand for is consistent with ``L(la)·Σ*`` (a sufficient test)."""
        self.steps += 1
        if self.steps > self.max_steps:
            raise _NoProof
        if not la or not seq:  # la satisfied; or the text ends here (prefixes are consistent)
            return True
        head, rest = seq[0], seq[1:]
        if isinstance(head, _Follow):
            key = (head.rule, tuple(map(_shape, la)))
            if key in self.assumed:
                return True
            self.assumed.add(key)
            return all(self.consistent(cont, la) for cont, w in self.uses[head.rule] if w in self.reachable)
        if _same(head, la[0]):
            return self.consistent(rest, la[1:])
        # the continuation's alternatives: all of them
        if isinstance(head, Ref):
            return self.consistent(_flat(self.rules[head.name].body) + rest, la)
        if isinstance(head, SeqE):
            return self.consistent(head.items + rest, la)
        if isinstance(head, AltE):
            return all(self.consistent((o, *rest), la) for o in head.options)
        if isinstance(head, RepE):
            if head.max == 0:
                return self.consistent(rest, la)
            more = (
                ()
                if head.max == 1
                else (RepE(head.item, max(head.min - 1, 0), None if head.max is None else head.max - 1),)
            )
            once = self.consistent((head.item, *more, *rest), la)
            return once and (head.min > 0 or self.consistent(rest, la))
        # a terminal against la's first piece
        first, la_rest = la[0], la[1:]
        if not isinstance(head, (Chars, Lit)) or isinstance(first, (SpecialE, EmbedE)):
            return False  # a special token or an embedded grammar: no proof (a refusal, never wrong)
        if isinstance(first, Chars):
            if isinstance(head, Chars):
                return _within(head, first) and self.consistent(rest, la_rest)
            assert isinstance(head, Lit)
            return _cpset.contains(first.scalar_ranges(), head.cps[0]) and self.consistent(
                ((Lit(head.cps[1:]),) if len(head.cps) > 1 else ()) + rest, la_rest
            )
        if isinstance(first, Lit):
            if isinstance(head, Lit):
                n = min(len(head.cps), len(first.cps))
                if head.cps[:n] != first.cps[:n]:
                    return False
                head_left = ((Lit(head.cps[n:]),) if len(head.cps) > n else ()) + rest
                la_left = ((Lit(first.cps[n:]),) if len(first.cps) > n else ()) + la_rest
                return self.consistent(head_left, la_left)
            assert isinstance(head, Chars)
            single = head.scalar_ranges()
            return (
                len(single) == 1
                and single[0][0] == single[0][1] == first.cps[0]
                and self.consistent(rest, ((Lit(first.cps[1:]),) if len(first.cps) > 1 else ()) + la_rest)
            )
        # la's alternatives: one of them must do
        if isinstance(first, Ref):
            return self.consistent(seq, _flat(self.rules[first.name].body) + la_rest)
        if isinstance(first, SeqE):
            return self.consistent(seq, first.items + la_rest)
        if isinstance(first, AltE):
            return any(self.consistent(seq, (o, *la_rest)) for o in first.options)
        assert isinstance(first, RepE)
        if first.max == 0:
            return self.consistent(seq, la_rest)
        more = (
            ()
            if first.max == 1
            else (RepE(first.item, max(first.min - 1, 0), None if first.max is None else first.max - 1),)
        )
        if first.min > 0:
            return self.consistent(seq, (first.item, *more, *la_rest))
        absorbed = (
            first.max is None
            and isinstance(first.item, Chars)
            and isinstance(head, Chars)
            and _within(head, first.item)
            and self.consistent(rest, la)
        )
        return (
            absorbed or self.consistent(seq, la_rest) or self.consistent(seq, (first.item, *more, *la_rest))
        )


def check_lookaheads(rules: dict[str, Rule], lookaheads: dict[str, Expr], root: str, limits: Limits) -> None:
    """Return when every lookahead assertion of a rule the root reaches is implied by the grammar (the
    language is then the one without them); ``Unsupported("lookahead", rule, why)`` otherwise, also when
    the proof runs out of its ``limits.lookahead_steps`` steps."""
    if not lookaheads:
        return  # nothing to prove (and no use table to build over a large grammar)
    proof = _LookaheadProof(rules, root, limits.lookahead_steps)
    for rule, la in lookaheads.items():
        proof.check(rule, la)
