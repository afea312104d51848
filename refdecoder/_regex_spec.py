"""``Regex`` front-end: a Python-syntax pattern, full match, over code points encoded as UTF-8.

Semantics (documented in ``_regex``): ``\\d``, ``\\w``, ``\\s`` and ``.`` mean exactly what Python's
``re`` means for ``str`` patterns with default flags (Unicode classes; ``.`` is any code point but
``\\n``); backreferences, lookaround and other non-regular constructs are refused with ``Unsupported``.
"""

from __future__ import annotations

from ._fsa import ByteViewTooLarge
from ._ir import GrammarBuilder, Network
from .errors import LimitExceeded
from .grammar import Limits, Regex


def compile_regex_network(spec: Regex, limits: Limits) -> Network:
    from ._regex import compile_regex_dfa

    dfa = compile_regex_dfa(spec.pattern, flavor="python", mode="fullmatch", where="pattern")
    builder = GrammarBuilder()
    if dfa.is_empty():
        return builder.finish(builder.alt([]))
    try:  # the byte table's construction stops at the bound (not at an internal cap)
        lexeme = dfa.to_utf8(max_states=limits.automaton_states, limit="automaton_states")
    except ByteViewTooLarge as e:
        raise LimitExceeded(e.limit, e.value, e.bound, "pattern") from None
    if lexeme.num_states > limits.automaton_states:
        raise LimitExceeded("automaton_states", lexeme.num_states, limits.automaton_states, "pattern")
    return builder.finish(builder.lex(lexeme))
