"""The GBNF front-end: grammar text (``Gbnf``) compiled to the grammar network (docs/design.md §2).

Theory of operation
-------------------
1. **Read** (:func:`read_grammar`) to the syntax tree (``_grammar_ast``, over code points) by the
   dialect's reader: ``"llama.cpp"`` (the default; ``_gbnf_reader``, llama.cpp's
   ``llama_grammar_parser`` function by function) or ``"xgrammar"`` (``_xgrammar_reader``, xgrammar
   0.2.9's ``EBNFParser``, whose lookahead assertions ``rule ::= body (= sequence)`` come with the rules).
2. **Check**: the root rule exists and every referenced rule is defined (also references a ``{0}``
   dropped, as llama.cpp checks them); each lookahead assertion is accepted only where the grammar
   already implies it (``_grammar_lookahead``: the language is then the one without them), else
   ``Unsupported("lookahead", rule, why)``.
3. **Left recursion** (a rule that reaches itself through calls that may read nothing: llama.cpp's
   ``llama_grammar_detect_left_recursion``, which refuses it) is rewritten away with the language kept
   exactly (``_gbnf_rewrite``: Paull's algorithm with ε-separation), or refused there when the rewrite
   would take more than ``Limits.rewrite_symbols`` symbols; ``_check_left_recursion`` then checks
   that none is left.
4. **Build** (``_grammar_build``): regular pieces merged into minimal byte DFAs, the rest structural.

Semantics: the language is over Unicode scalar values written as UTF-8. ``.`` is any scalar value; a
negated class ``[^...]`` is every scalar value not listed; a class range ``[a-b]`` with ``a > b`` is empty
(as llama.cpp compares ``a <= c <= b``); ranges are clipped to scalar values (surrogates excluded).
What each reader refuses is in its module docstring.

Accepted where llama.cpp refuses: left recursion (above), and ``x*`` / ``x+`` / ``x{m,}`` with a
nullable ``x`` (e.g. ``("a"?)*``).
llama.cpp rewrites ``x*`` to ``x' ::= x x' | ε``, which is left-recursive when ``x`` is nullable; the
language is still well defined and the ``Repeat`` node decides it exactly.
"""

from __future__ import annotations

from ._gbnf_reader import read_llama_cpp
from ._gbnf_rewrite import remove_left_recursion
from ._grammar_analysis import left_call_graph, nullable_rules
from ._grammar_ast import ParsedGrammar, Rule
from ._grammar_build import build_network
from ._grammar_lookahead import check_lookaheads
from ._ir import Network, find_cycle
from ._xgrammar_reader import read_xgrammar
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import Gbnf, Limits

__all__ = ["read_grammar", "parse_gbnf", "compile_gbnf_network", "compile_rules"]


def read_grammar(text: str, limits: Limits, dialect: str = "llama.cpp") -> ParsedGrammar:
    """Read grammar text of ``dialect`` (``"llama.cpp"`` or ``"xgrammar"``) to the syntax tree, after
    checking its size against ``limits.schema_bytes``; names are not resolved. Raises ``SpecError``."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.schema_bytes:
        raise LimitExceeded("schema_bytes", size, limits.schema_bytes, "gbnf")
    if dialect == "xgrammar":
        return read_xgrammar(text, limits)
    return read_llama_cpp(text, limits)


def parse_gbnf(text: str, limits: Limits | None = None, dialect: str = "llama.cpp") -> dict[str, Rule]:
    """Parse GBNF text into rules (syntax only; names are not resolved). Raises ``SpecError``."""
    return read_grammar(text, limits or Limits(), dialect).rules


def compile_gbnf_network(spec: Gbnf, limits: Limits, *, merge_regular: bool = True) -> Network:
    """Compile a GBNF grammar. ``merge_regular=False`` keeps every construct structural (for tests)."""
    parsed = read_grammar(spec.text, limits, spec.dialect)
    return compile_rules(parsed, spec.root, limits, merge_regular=merge_regular)


def compile_rules(parsed: ParsedGrammar, root: str, limits: Limits, *, merge_regular: bool = True) -> Network:
    """The pipeline after any reader (GBNF, xgrammar EBNF, Lark, structural tags): names resolved,
    lookaheads proved, left recursion rewritten away, then the network built from ``root``."""
    rules, refs, lookaheads = parsed
    if root not in rules:
        raise SpecError(
            f"root rule {root!r} is not defined",
            "grammar",
            f"a rule '{root} ::= ...' (defined: {', '.join(sorted(rules)[:8]) or 'none'})",
        )
    for ref, in_rule in refs:  # every reference, also those a '{0}' dropped (llama.cpp checks them)
        if ref.name not in rules:
            raise SpecError(
                f"undefined rule {ref.name!r}",
                f"line {ref.line} col {ref.col} (rule {in_rule})",
                f"a definition '{ref.name} ::= ...'",
            )
    check_lookaheads(rules, lookaheads, root, limits)  # each one holds already, or a refusal
    rewritten = remove_left_recursion(rules, limits)
    if rewritten is not rules:  # unchanged: its left-call graph was just found acyclic
        _check_left_recursion(rewritten)  # a safety net: the rewrite leaves none
    rules = rewritten
    return build_network(rules, root, limits, merge_regular=merge_regular)


def _check_left_recursion(rules: dict[str, Rule]) -> None:
    graph = left_call_graph(rules, nullable_rules(rules))
    cycle = find_cycle(list(rules), graph.__getitem__)
    if cycle is not None:
        w = cycle[0]
        r = rules[w]
        raise Unsupported(
            "gbnf-left-recursion",
            w,
            f"rule {w!r} (line {r.line}) reaches itself without reading a character: "
            f"{' -> '.join(cycle)} after the left-recursion rewrite (a bug of refdecoder._gbnf_rewrite: "
            "please report it); rewrite it with repetition, e.g. 'expr ::= term (\"+\" term)*'",
        )
