"""The regular languages structural tags put between their structured parts (docs/design.md §2
"Structural tags"): free text that avoids some strings, free text up to the *first* appearance of a
trigger, and runs of tokens at the byte level (text interleaved with special-token encodings).

Theory of operation
-------------------
Free text is a string of Unicode scalar values (UTF-8; never the bytes 0xFE/0xFF, which only the
special-token encoding of ``_special`` uses). Over the alphabet Σ of scalar values, with a finite set
of words W:

* ``avoiding(W)`` = Σ* ∖ Σ*WΣ*: the text that contains no word of W. Its minimal DFA is the
  Aho–Corasick automaton of W with the accepting ("a word was seen") states removed (Aho & Corasick,
  "Efficient string matching", CACM 1975); it is built here by the subset construction of Σ*WΣ* and
  complement, which yields the same minimal automaton.
* ``before_first(P, p)`` = { u : u·p ∉ Σ*PΣ⁺ }: the text u after which the pattern p, read next,
  is the *first* appearance of any pattern of P (no occurrence of a pattern of P ends before the end of
  u·p). It is the right quotient (Σ*PΣ⁺)ᶜ / p, computed on the minimal DFA by moving the accepting
  states: q is accepting iff δ*(q, p) is. This is "text until a trigger is encountered" of
  ``triggered_tags`` and ``dispatch`` — stricter than ``avoiding(P)·p`` exactly when a pattern
  overlaps itself or another one (trigger ``aa``: ``aaab`` is not ``a`` then ``aab``).
* ``special_except(X)``: the encodings ``0xFF <decimal id> 0xFE`` of every special token id not in X
  (ids without leading zeros; ``0`` is ``0``), a byte DFA; with :data:`ANY_CHAR` it spells "any token"
  (``tokens_region``).

Each language becomes one lexeme (a trim minimal byte DFA) embedded as one symbol (``EmbedE``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ._fsa import ByteViewTooLarge, CodepointDFA, canonical
from ._grammar_ast import MAX_CODE_POINT, AltE, Chars, EmbedE, Expr, RepE
from ._ir import GrammarBuilder
from ._lexeme import ByteDFA
from ._special import END, MARK
from .errors import LimitExceeded
from .grammar import Limits

__all__ = ["ANY_CHAR", "avoiding", "before_first", "special_except", "embed_text", "tokens_region"]

#: One Unicode scalar value (a character of free text).
ANY_CHAR = Chars(((0, MAX_CODE_POINT),), False)

_DIGITS = tuple(range(0x30, 0x3A))


def avoiding(words: Iterable[str]) -> CodepointDFA:
    """Σ* ∖ Σ*WΣ*: the strings that contain no word of ``words`` (non-empty words)."""
    ws = sorted(set(words))
    sigma = CodepointDFA.any_string()
    if not ws:
        return sigma
    return sigma.concat(CodepointDFA.from_strings(ws), sigma).complement()


def before_first(patterns: Iterable[str], pattern: str) -> CodepointDFA:
    """{ u : no pattern of ``patterns`` ends inside u·``pattern`` before its end } (``pattern`` among
    ``patterns``): the free text that ``pattern``, read next, ends at its first trigger."""
    sigma = CodepointDFA.any_string()
    later = sigma.concat(CodepointDFA.from_strings(sorted(set(patterns))), CodepointDFA.any_char(), sigma)
    return _right_quotient(later.complement(), pattern)


def _right_quotient(dfa: CodepointDFA, word: str) -> CodepointDFA:
    """{ u : u·word ∈ L(dfa) }: same transitions, accepting where reading ``word`` ends accepting."""
    rows = [dfa.row(q) for q in range(dfa.num_states)]
    finals = []
    for q in range(dfa.num_states):
        r: int | None = q
        for ch in word:
            r = dfa.step(r, ord(ch)) if r is not None else None
        if r is not None and dfa.is_final(r):
            finals.append(q)
    return canonical(rows, dfa.start(), finals)


def embed_text(dfa: CodepointDFA, limits: Limits, where: str, label: str) -> Expr:
    """The text language ``dfa`` (UTF-8) as one embedded lexeme; the empty language is ``AltE(())``."""
    if dfa.is_empty():
        return AltE(())
    try:
        lexeme = dfa.to_utf8(max_states=limits.automaton_states, limit="automaton_states")
    except ByteViewTooLarge as e:
        raise LimitExceeded(e.limit, e.value, e.bound, where) from None
    builder = GrammarBuilder()
    return EmbedE(builder.finish(builder.lex(lexeme)), label)


def special_except(excluded: frozenset[int]) -> ByteDFA:
    """The encodings of every special token id except ``excluded``: ``MARK (0 | [1-9][0-9]*) END``
    run in step with a trie of the excluded ids' digits, rejecting at ``END`` where an excluded id ends."""
    trie: dict[tuple[int, int], int] = {}  # (node, digit) -> node; node 0 is the root
    ends: set[int] = set()
    for i in excluded:
        node = 0
        for d in str(i).encode("ascii"):
            node = trie.setdefault((node, d), len(trie) + 1)
        ends.add(node)
    # states: (phase, trie node or -1 once off the trie); phase "M" after MARK, "Z" after a leading
    # 0, "N" inside a number; plus a start and one final state.
    ids: dict[tuple[str, int], int] = {}
    trans: dict[int, dict[int, int]] = {0: {}, 1: {}}  # 0: start, 1: final
    queue: list[tuple[str, int]] = []

    def state(key: tuple[str, int]) -> int:
        if key not in ids:
            ids[key] = len(trans)
            trans[ids[key]] = {}
            queue.append(key)
        return ids[key]

    trans[0][MARK] = state(("M", 0))
    while queue:
        phase, node = queue.pop()
        row = trans[ids[(phase, node)]]
        if phase in ("M", "N"):
            for d in _DIGITS:
                if phase == "M" and d == 0x30:
                    nxt = ("Z", trie.get((node, d), -1))
                else:
                    nxt = ("N", trie.get((node, d), -1) if node >= 0 else -1)
                row[d] = state(nxt)
        if phase in ("Z", "N") and node not in ends:
            row[END] = 1
    return ByteDFA.build(trans, 0, [1])


def tokens_region(excluded: frozenset[int]) -> Expr:
    """Zero or more tokens at the byte level, none of them the special tokens ``excluded``: text
    characters and the encodings of the other special tokens, in any order (``any_tokens``)."""
    builder = GrammarBuilder()
    special = EmbedE(builder.finish(builder.lex(special_except(excluded))), "special token")
    return RepE(AltE((ANY_CHAR, special)), 0, None)
