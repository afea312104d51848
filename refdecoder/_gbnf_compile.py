"""GBNF to a grammar network: read (``_gbnf``), lookaheads checked, left recursion rewritten
(``_gbnf_rewrite``), then built (``_gbnf``). A module of its own so that the rewrite, which works on
``_gbnf``'s syntax tree, and the reader do not import each other."""

from __future__ import annotations

from ._gbnf import _check_left_recursion, _check_lookaheads, _Compiler, _parse
from ._gbnf_rewrite import remove_left_recursion
from ._ir import Network
from ._limits import Deadline, Limits
from .errors import SpecError
from .grammar import Gbnf

__all__ = ["compile_gbnf_network"]


def compile_gbnf_network(spec: Gbnf, limits: Limits, *, merge_regular: bool = True) -> Network:
    """Compile a GBNF grammar. ``merge_regular=False`` keeps every construct structural (for tests)."""
    rules, refs, lookaheads = _parse(spec.text, limits, spec.dialect)
    if spec.root not in rules:
        raise SpecError(
            f"root rule {spec.root!r} is not defined",
            "grammar",
            f"a rule '{spec.root} ::= ...' (defined: {', '.join(sorted(rules)[:8]) or 'none'})",
        )
    for ref, in_rule in refs:  # every reference, also those a '{0}' dropped (llama.cpp checks them)
        if ref.name not in rules:
            raise SpecError(
                f"undefined rule {ref.name!r}",
                f"line {ref.line} col {ref.col} (rule {in_rule})",
                f"a definition '{ref.name} ::= ...'",
            )
    _check_lookaheads(rules, lookaheads, spec.root)  # each one holds already, or a refusal
    rules = remove_left_recursion(rules, Deadline(limits.compile_seconds))
    _check_left_recursion(rules)  # a safety net: the rewrite leaves none
    return _Compiler(rules, limits, merge_regular).compile(spec.root)
