"""``Choice`` front-end: a finite set of strings is one trie-shaped ByteDFA."""

from __future__ import annotations

from ._ir import GrammarBuilder, Network
from ._lexeme import ByteDFA
from .errors import LimitExceeded
from .grammar import Choice, Limits


def compile_choice_network(spec: Choice, limits: Limits) -> Network:
    options = sorted({o.encode("utf-8") for o in spec.options})
    if len(options) > limits.enum_size:
        raise LimitExceeded("enum_size", len(options), limits.enum_size, "choice")
    builder = GrammarBuilder()
    if not options:
        # The empty language: a root that is never productive.
        return builder.finish(builder.alt([]))
    trans: dict[int, dict[int, int]] = {0: {}}
    finals = set()
    for opt in options:
        s = 0
        for b in opt:
            nxt = trans[s].get(b)
            if nxt is None:
                nxt = len(trans)
                trans[s][b] = nxt
                trans[nxt] = {}
            s = nxt
        finals.add(s)
    root = builder.lex(ByteDFA.build(trans, 0, finals))
    return builder.finish(root)
