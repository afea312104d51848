"""Key memory: JSON object keys that exclude the keys already written (RFC 8259 §4).

Theory of operation
-------------------
RFC 8259 §4 says the names within an object SHOULD be unique, and ``JsonProfile(allow_duplicate_keys=
False)`` (the default) reads it as MUST: ``{"x":1,"x":2}`` is outside the language. Declared keys are
excluded by :class:`~refdecoder._jsonschema_emit.ObjectNode`'s ``seen`` set. Keys that are *not*
declared come from a key *region* — a code point language such as "any string but the declared keys"
or "the strings matching this patternProperties regex" — and may be any of infinitely many strings, so
the object must remember which ones it has read. It does, exactly, with the IR's two call extensions
(``_ir``):

* the object calls the region's :class:`KeyLexeme` with an ``entry`` state that carries ``E``, the keys
  of that region already written; the lexeme then reads the JSON string literals of ``D \\ E`` (``D``
  the region's language), built on first use as ``D.difference(literals(E))`` — a regular language,
  read by :func:`~refdecoder._jsonstring.json_string_lexeme` (a byte table, or lazily), hence trim:
  every state it reaches can still close the key with a string not in ``E``;
* the lexeme's state also records the raw bytes read; when the key closes, the object's ``receive``
  decodes them (``json.loads``: escapes make ``"a"`` and ``"\\u0061"`` the same key, as they are the
  same name) and adds the name to ``E``.

Keys are compared as decoded strings, so the exclusion is exact for every spelling. Because the
object only calls a region while ``D \\ E`` is not empty and counts what the regions can still add
(:func:`language_size`) when deciding whether ``minProperties`` can be met, every stack it keeps can
be completed — the IR's exactness argument carries over unchanged.

Masks: a key lexeme reads exactly what its inner byte table reads, so it offers ``dfa_view`` and the
token-mask fast path (``_tokens``, lexeme tables) uses that table; the inner tables are cached per
``E`` (at most :data:`MAX_CACHED` per region).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from ._fsa import CodepointDFA, UnicodeEscapes
from ._jsonstring import JsonStringLexeme, json_string_lexeme
from ._lexeme import ByteDFA, can_continue

__all__ = ["KeyLexeme", "language_size", "MAX_CACHED"]

MAX_CACHED = 64  # inner lexemes kept per region (one per distinct set of keys written)

Inner = ByteDFA | JsonStringLexeme
KeyState = tuple[frozenset[str], Hashable, bytes]  # (E, inner lexeme state, raw bytes read)


class KeyLexeme:
    """The JSON string literals of a key region ``D`` minus the names ``E`` carried by the state.

    A Lexeme (``refdecoder/_lexeme.py``) whose states are ``(E, inner state, raw bytes)``; ``start()``
    excludes nothing, :meth:`entry` excludes ``E``. ``D`` must not be empty.
    """

    __slots__ = ("region", "_escapes", "_automaton_states", "_key", "_inner")

    def __init__(self, region: CodepointDFA, unicode_escapes: UnicodeEscapes, automaton_states: int) -> None:
        if region.is_empty():
            raise ValueError("KeyLexeme: the region is empty (check is_empty() first)")
        self.region = region
        self._escapes = unicode_escapes
        self._automaton_states = automaton_states
        self._key = ("json-key-memory", region.key, unicode_escapes, automaton_states)
        self._inner: OrderedDict[frozenset[str], Inner | None] = OrderedDict()

    # -- the excluded keys ----------------------------------------------------------------------
    def inner(self, excluded: frozenset[str]) -> Inner | None:
        """The lexeme of ``D \\ excluded`` (None when that language is empty)."""
        hit = self._inner.get(excluded, False)
        if hit is not False:
            self._inner.move_to_end(excluded)
            return hit  # type: ignore[return-value]
        lang = self.region
        if excluded:
            lang = lang.difference(CodepointDFA.literals(sorted(excluded)))
        lex = None if lang.is_empty() else json_string_lexeme(lang, self._escapes, self._automaton_states)
        self._inner[excluded] = lex
        if len(self._inner) > MAX_CACHED:
            self._inner.popitem(last=False)
        return lex

    def entry(self, excluded: frozenset[str]) -> KeyState:
        """The state that starts a key not in ``excluded`` (which must leave some key: see
        :meth:`inner`)."""
        lex = self.inner(excluded)
        assert lex is not None, "a key lexeme is entered only while some key is left"
        return (excluded, lex.start(), b"")

    @staticmethod
    def name(state: Hashable) -> str:
        """The decoded key of a final state."""
        raw: bytes = state[2]  # type: ignore[index]
        value = json.loads(raw.decode("utf-8"))
        assert isinstance(value, str)
        return value

    def _lex(self, state: Any) -> Inner:
        lex = self.inner(state[0])
        assert lex is not None
        return lex

    # -- the Lexeme protocol --------------------------------------------------------------------
    @property
    def key(self) -> Hashable:
        return self._key

    def start(self) -> Hashable:
        return self.entry(frozenset())

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        st: Any = state
        t = self._lex(st).step(st[1], byte)
        return None if t is None else (st[0], t, st[2] + bytes((byte,)))

    def is_final(self, state: Hashable) -> bool:
        st: Any = state
        return self._lex(st).is_final(st[1])

    def can_continue(self, state: Hashable) -> bool:
        st: Any = state
        return can_continue(self._lex(st), st[1])

    def dfa_view(self, state: Hashable) -> tuple[ByteDFA, int] | None:
        """The byte table and its state that read exactly what this state reads (``_tokens``)."""
        st: Any = state
        lex = self._lex(st)
        return (lex, st[1]) if isinstance(lex, ByteDFA) else None

    def witness(self, state: Hashable) -> bytes:
        """A shortest suffix that closes the key (for completions, ``_complete``)."""
        st: Any = state
        lex = self._lex(st)
        if isinstance(lex, JsonStringLexeme):
            word = lex.witness(st[1])
            assert word is not None
            return word
        return lex.shortest_suffix(st[1])

    def __repr__(self) -> str:
        return f"KeyLexeme(region={self.region.size} states, unicode_escapes={self._escapes})"


def finite_words(dfa: CodepointDFA) -> list[str]:
    """Every string of a finite language (depth first over the acyclic automaton; callers bound its
    size first with :func:`language_size`)."""
    out: list[str] = []
    stack: list[tuple[int, str]] = [(dfa.start(), "")]
    while stack:
        q, s = stack.pop()
        if dfa.is_final(q):
            out.append(s)
        for lo, hi, t in dfa.row(q):
            stack.extend((t, s + chr(c)) for c in range(lo, hi + 1))
    return out


def language_size(dfa: CodepointDFA, cap: int) -> int | None:
    """How many strings ``dfa`` accepts, saturated at ``cap``; None when infinitely many.

    Counted by dynamic programming over the (acyclic, when finite) automaton: the strings from a
    state are the empty string if it is final, plus, per transition ``[lo, hi] -> t``, ``hi - lo + 1``
    times the strings from ``t``.
    """
    if dfa.is_empty():
        return 0
    if not dfa.is_finite():
        return None
    memo: dict[int, int] = {}
    stack = [dfa.start()]
    while stack:  # post-order without recursion (finite languages may have long strings)
        q = stack[-1]
        todo = [t for _, _, t in dfa.row(q) if t not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        n = 1 if dfa.is_final(q) else 0
        for lo, hi, t in dfa.row(q):
            n = min(cap, n + (hi - lo + 1) * memo[t])
        memo[q] = n
    return memo[dfa.start()]
