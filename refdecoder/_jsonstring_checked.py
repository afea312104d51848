"""JSON string literals whose decoded value a code point *checker* decides, read lazily byte by byte:
``format: "regex"`` (``refdecoder._ecma_pattern``), a language no automaton holds.

A checker is an object with ``key``, ``start()``, ``step(state, cp)`` (None where the prefix has no
completion: every state it returns is viable), ``is_final(state)``, ``allowed(state)`` (the code
points ``step`` takes, as a ``CPSet``) and ``complete(state)`` (code points to a final state).
:class:`CheckedJsonStringLexeme` is :class:`~refdecoder._jsonstring.JsonStringLexeme` with the code
point automaton replaced by the checker: the JSON spellings, the UTF-8 and ``\\u`` decoding and the
partial-encoding trimness (a partial encoding is kept only if the code points it can still become
meet ``allowed``) are the parent's; a state between code points is ``("p", checker state, n)`` with
``n`` the code points read, counted up to ``min_length`` (``minLength``: a final checker state may
take more code points and stay final, which :meth:`witness` relies on and the checker's tests check).

Trimness: ``step`` keeps a code point only if the checker does (so the checker state is viable), and
a viable checker state can reach any length from its completion on, so ``n`` never blocks: every
state returned can reach the closing quote.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

from ._cpset import CPSet, intersect
from ._fsa import CodepointDFA, UnicodeEscapes
from ._jsonstring import _CLOSED, _OPEN, JsonStringLexeme, _spell, _without_surrogates

__all__ = ["Checker", "CheckedJsonStringLexeme"]

#: A code point that a final checker state reads and stays final with (the padding of ``witness``).
_PAD = ord("a")


class Checker(Protocol):
    @property
    def key(self) -> Hashable: ...

    def start(self) -> Any: ...

    def step(self, state: Any, cp: int) -> Any | None: ...

    def is_final(self, state: Any) -> bool: ...

    def allowed(self, state: Any) -> CPSet: ...

    def complete(self, state: Any) -> list[int]: ...


class _Finals:
    """``q in lexeme._finals`` for a between state ``q``: the checker accepts, the length reached."""

    def __init__(self, checker: Checker, min_length: int) -> None:
        self._checker = checker
        self._min = min_length

    def __contains__(self, q: object) -> bool:
        assert isinstance(q, tuple)
        return q[2] >= self._min and self._checker.is_final(q[1])


class CheckedJsonStringLexeme(JsonStringLexeme):
    """The JSON string literals (quotes included) of the values ``checker`` accepts with at least
    ``min_length`` code points (see the module doc)."""

    __slots__ = ("_checker", "_min", "_initial")

    def __init__(self, checker: Checker, unicode_escapes: UnicodeEscapes = True, min_length: int = 0) -> None:
        super().__init__(CodepointDFA.any_string(), unicode_escapes)
        self._checker = checker
        self._min = min_length
        self._key = ("json-string-checked", checker.key, unicode_escapes, min_length)  # type: ignore[assignment]
        self._finals = _Finals(checker, min_length)  # type: ignore[assignment]
        self._initial: Hashable = ("p", checker.start(), 0)

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        if state == _OPEN:
            return self._initial if byte == 0x22 else None
        if isinstance(state, tuple) and state[0] == "p":
            return self._between(state, byte)  # type: ignore[arg-type]
        return super().step(state, byte)

    def _to(self, s: Any, cp: int) -> Any:
        _, cs, n = s
        nxt = self._checker.step(cs, cp)
        return None if nxt is None else ("p", nxt, min(n + 1, self._min))

    def _meets(self, s: Any, lo: int, hi: int) -> bool:
        return bool(intersect(self._checker.allowed(s[1]), ((lo, hi),)))

    def witness(self, state: Hashable) -> bytes | None:
        """A suffix to the closing quote: the pending code point (the smallest the checker takes,
        by its cheapest way of finishing), then the checker's completion, padded to ``min_length``.
        Not always the shortest."""
        if state == _CLOSED:
            return b""
        if state == _OPEN:
            return b'"' + self._suffix(self._initial)
        st: Any = state
        if st[0] == "p":
            return self._suffix(st)
        best: tuple[int, bytes] | None = None
        for lo, hi, _, spell in self._pending(st):
            for a, b in _without_surrogates(lo, hi):
                hit = intersect(self._checker.allowed(st[1][1]), ((a, b),))
                if hit:
                    cp = hit[0][0]
                    word = spell(cp) + self._suffix(self._to(st[1], cp))
                    if best is None or len(word) < best[0]:
                        best = (len(word), word)
        if best is None:
            raise AssertionError(f"CheckedJsonStringLexeme: {state!r} has no completion (trimness broken)")
        return best[1]

    def _suffix(self, s: Any) -> bytes:
        _, cs, n = s
        cps = self._checker.complete(cs)
        out = b"".join(_spell(cp, self._escapes) for cp in cps)
        n += len(cps)
        if n < self._min:
            out += _spell(_PAD, self._escapes) * (self._min - n)
        return out + b'"'

    def __repr__(self) -> str:
        return f"CheckedJsonStringLexeme({self._checker.key!r}, min_length={self._min})"
