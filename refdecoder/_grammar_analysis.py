"""Grammar analysis over the syntax tree (``_grammar_ast``), shared by the left-recursion rewrite
(``_gbnf_rewrite``), the lookahead prover (``_grammar_lookahead``), the builder (``_grammar_build``) and
the pipeline's checks (``_gbnf``).

* :func:`nullable_rules`: which rules derive the empty string (least fixpoint); :func:`expr_nullable`
  for one expression given those.
* :func:`references` / :func:`reference_graph`: the rules an expression (a rule) refers to.
* :func:`left_references` / :func:`left_call_graph`: the rules an expression (a rule) may call before
  reading a character (``A -> B``; left recursion is a cycle of this graph).
* :func:`sccs`: strongly connected components (Tarjan 1972), dependencies first.
"""

from __future__ import annotations

from collections.abc import Callable

from ._grammar_ast import AltE, Chars, EmbedE, Expr, Lit, Ref, RepE, Rule, SeqE, SpecialE

__all__ = [
    "expr_nullable",
    "left_references",
    "references",
    "nullable_rules",
    "left_call_graph",
    "reference_graph",
    "sccs",
]


def expr_nullable(e: Expr, rule_nullable: Callable[[str], bool]) -> bool:
    """Whether ``e`` derives the empty string, given which rules do (``rule_nullable``)."""
    if isinstance(e, Lit):
        return False  # literals are never empty (an empty literal is no symbol)
    if isinstance(e, (Chars, SpecialE)):
        return False
    if isinstance(e, EmbedE):
        return e.nullable
    if isinstance(e, Ref):
        return rule_nullable(e.name)
    if isinstance(e, SeqE):
        return all(expr_nullable(i, rule_nullable) for i in e.items)
    if isinstance(e, AltE):
        return any(expr_nullable(o, rule_nullable) for o in e.options)
    return e.min == 0 or expr_nullable(e.item, rule_nullable)


def left_references(e: Expr, nullable: Callable[[Expr], bool], out: list[str]) -> None:
    """Append the rules ``e`` may call before reading anything (as the IR's left-call analysis), given
    which expressions derive the empty string (``nullable``)."""
    if isinstance(e, Ref):
        out.append(e.name)
    elif isinstance(e, SeqE):
        for i in e.items:
            left_references(i, nullable, out)
            if not nullable(i):
                break
    elif isinstance(e, AltE):
        for o in e.options:
            left_references(o, nullable, out)
    elif isinstance(e, RepE):
        left_references(e.item, nullable, out)


def references(e: Expr, out: list[str]) -> None:
    """Append every rule ``e`` refers to, in order (with repeats)."""
    if isinstance(e, Ref):
        out.append(e.name)
    elif isinstance(e, SeqE):
        for i in e.items:
            references(i, out)
    elif isinstance(e, AltE):
        for o in e.options:
            references(o, out)
    elif isinstance(e, RepE):
        references(e.item, out)


def nullable_rules(rules: dict[str, Rule]) -> dict[str, bool]:
    """Which rules derive the empty string (least fixpoint).

    Every rule is evaluated once; after that only the users of the rules that turned nullable in the
    last wave are evaluated again (each once per wave), so a chain of rules costs one evaluation per
    rule, not one round over all rules per link."""
    null = dict.fromkeys(rules, False)
    users: dict[str, set[str]] = {}
    for name, r in rules.items():
        refs: list[str] = []
        references(r.body, refs)
        for w in refs:
            users.setdefault(w, set()).add(name)
    wave = [name for name, r in rules.items() if expr_nullable(r.body, null.__getitem__)]
    while wave:
        for name in wave:
            null[name] = True
        dirty = {u for name in wave for u in users.get(name, ()) if not null[u]}
        wave = [u for u in dirty if expr_nullable(rules[u].body, null.__getitem__)]
    return null


def left_call_graph(rules: dict[str, Rule], null: dict[str, bool]) -> dict[str, list[str]]:
    """``A -> B`` when ``A`` may call ``B`` before reading a character."""

    def nullable(e: Expr) -> bool:
        return expr_nullable(e, null.__getitem__)

    graph: dict[str, list[str]] = {}
    for name, r in rules.items():
        calls: list[str] = []
        left_references(r.body, nullable, calls)
        graph[name] = list(dict.fromkeys(calls))
    return graph


def sccs(names: list[str], graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative; emitted dependencies-first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in names:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            succ = graph[v]
            if i < len(succ):
                work[-1] = (v, i + 1)
                w = succ[i]
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp: list[str] = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def reference_graph(rules: dict[str, Rule]) -> dict[str, list[str]]:
    """``A -> B`` when ``A``'s body refers to ``B`` (each target once, in order of first reference)."""
    graph: dict[str, list[str]] = {}
    for name, r in rules.items():
        refs: list[str] = []
        references(r.body, refs)
        graph[name] = list(dict.fromkeys(refs))
    return graph
