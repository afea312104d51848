"""JSON string literals over a code point automaton, read lazily byte by byte (docs/design.md §2).

Theory of operation
-------------------
A JSON string language is a :class:`~refdecoder._fsa.CodepointDFA` ``D`` over the decoded text plus
RFC 8259 §7's spellings: quotes around the body, each code point written raw (UTF-8, RFC 3629 §3,
if it is not a control character, ``"`` or ``\\``), as a short escape (``\\" \\\\ \\/ \\b \\f \\n
\\r \\t``) or, when the profile allows ``\\u`` escapes, as ``\\uXXXX`` (hex digits in either case) or
a UTF-16 surrogate pair ``\\uD8xx\\uDCxx`` for code points above U+FFFF. A lone surrogate escape
spells no code point.

:meth:`CodepointDFA.to_json_string <refdecoder._fsa.CodepointDFA.to_json_string>` tabulates that
language as a byte DFA, about six byte states per code point state (the continuation bytes, the
escape digits and the pair halves of every transition). For the large automata of formats —
``date-time``: 11,046 code point states, 66,274 byte states; ``hostname``: 23,809 and 178,125 — the
table passes ``Limits.automaton_states`` and would take 256 words per state. :class:`JsonStringLexeme`
reads the same language without a table: a state is ``q``, the state of ``D`` between code points,
or ``q`` with the encoding read so far of the next code point (its UTF-8 lead and continuation
bytes, or the escape and the hex digits typed); ``step`` decodes one byte further.

Trimness (the Lexeme contract, ``refdecoder/_lexeme.py``): ``D`` is canonical, hence trim, so a
state between code points can always be completed (every scalar value has a spelling; without
``\\u`` escapes the control characters other than the five short ones have none, and ``D`` is first
intersected with the strings of the others; if that leaves nothing, the lexeme is empty and cannot
even open its quote, as the byte table of the language is). A partial encoding determines an interval of code
points it can still become (a UTF-8 prefix: the values with those leading bits, within the length's
range and without surrogates; a ``\\u`` prefix: the values with those leading hex digits, where a
high surrogate stands for the 1,024 code points of its pair); ``step`` keeps it only if that
interval meets a transition of ``q``. So every state ``step`` returns can reach the closing quote.

:meth:`witness` completes a state with the fewest bytes: the pending code point by its cheapest
possible spelling, then the shortest path to a final state of ``D`` weighted by the cheapest
spelling of each transition (Dijkstra on the reversed automaton, computed on first use).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Hashable
from functools import lru_cache
from typing import Any

from ._cpset import complement, normalize
from ._fsa import ByteViewTooLarge, CodepointDFA
from ._lexeme import ByteDFA

__all__ = ["JsonStringLexeme", "json_string_lexeme", "BYTE_STATES_PER_STATE"]

_OPEN = -1  # before the opening quote
_CLOSED = -2  # after the closing quote: the only final state
_SURR_LO, _SURR_HI = 0xD800, 0xDFFF
_HIGH_HI = 0xDBFF
_SHORT = {ord('"'): 0x22, ord("\\"): 0x5C, ord("/"): 0x2F, ord("b"): 8, ord("f"): 0xC, ord("n"): 0xA}
_SHORT.update({ord("r"): 0xD, ord("t"): 9})
_SHORT_OF = {cp: letter for letter, cp in _SHORT.items()}  # code point -> escape letter
_HEX = {**{0x30 + i: i for i in range(10)}, **{0x41 + i: 10 + i for i in range(6)}}
_HEX.update({0x61 + i: 10 + i for i in range(6)})
# UTF-8 (RFC 3629 §4): lead byte -> (its value bits, continuation bytes to come); the code points
# each length may spell (shorter forms are overlong), by continuation bytes
_LEADS = {b: (b & 0x1F, 1) for b in range(0xC2, 0xE0)}
_LEADS.update({b: (b & 0x0F, 2) for b in range(0xE0, 0xF0)})
_LEADS.update({b: (b & 0x07, 3) for b in range(0xF0, 0xF5)})
_RANGE = {1: (0x80, 0x7FF), 2: (0x800, 0xFFFF), 3: (0x10000, 0x10FFFF)}
# control characters without a spelling when \u escapes are off (RFC 8259 §7)
_NO_SHORT_CONTROLS = tuple((c, c) for c in range(0x20) if c not in _SHORT_OF)


class JsonStringLexeme:
    """The JSON string literals (quotes included) whose value is in ``dfa``'s language, read lazily
    (see the module doc). ``dfa`` must not be empty. Implements the Lexeme protocol of
    ``refdecoder/_lexeme.py`` with ``can_continue`` and ``witness``."""

    __slots__ = ("_dfa", "_escapes", "_key", "_rows", "_los", "_finals", "_dist")

    def __init__(self, dfa: CodepointDFA, unicode_escapes: bool = True) -> None:
        if dfa.is_empty():
            raise ValueError("the language is empty: no lexeme represents it (check is_empty() first)")
        self._key = ("json-string", dfa.key, unicode_escapes)
        if not unicode_escapes:  # drop the strings no spelling reaches, so that D stays trim
            dfa = dfa.intersection(_spellable_without_u_escapes())
        # None spellable (a control character without a short escape in every member): an empty
        # lexeme, which cannot even open its quote, like the byte table of that language
        self._dfa = dfa
        self._escapes = unicode_escapes
        self._rows = [dfa.row(q) for q in range(dfa.num_states)] if not dfa.is_empty() else []
        self._los = [[lo for lo, _, _ in row] for row in self._rows]
        self._finals = dfa.finals
        self._dist: list[int] | None = None

    # -- the Lexeme protocol --------------------------------------------------------------------
    @property
    def key(self) -> Hashable:
        return self._key

    def start(self) -> Hashable:
        return _OPEN

    def is_final(self, state: Hashable) -> bool:
        return state == _CLOSED

    def can_continue(self, state: Hashable) -> bool:
        return state != _CLOSED and not (state == _OPEN and self._dfa.is_empty())

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        if isinstance(state, int):
            if state >= 0:
                return self._between(state, byte)
            return 0 if state == _OPEN and byte == 0x22 and not self._dfa.is_empty() else None
        st: tuple[Any, ...] = state  # type: ignore[assignment]
        kind, q = st[0], st[1]
        if kind == "u":  # UTF-8: ("u", q, value bits, continuation bytes left, bytes in all)
            if not 0x80 <= byte <= 0xBF:
                return None
            acc, need, total = (st[2] << 6) | (byte & 0x3F), st[3] - 1, st[4]
            if need == 0:
                lo, hi = _RANGE[total - 1]
                return self._to(q, acc) if lo <= acc <= hi and not _SURR_LO <= acc <= _SURR_HI else None
            return ("u", q, acc, need, total) if self._utf8_possible(q, acc, need, total) else None
        if kind == "e":  # after a backslash
            cp = _SHORT.get(byte)
            if cp is not None:
                return self._to(q, cp)
            return ("x", q, 0, 0) if byte == 0x75 and self._escapes else None
        digit = _HEX.get(byte)
        if kind == "x":  # ("x", q, value, digits typed) after "\u"
            if digit is None:
                return None
            acc, k = st[2] * 16 + digit, st[3] + 1
            if k < 4:
                return ("x", q, acc, k) if self._unit_possible(q, acc, k) else None
            if acc < _SURR_LO or acc > _SURR_HI:
                return self._to(q, acc)
            return ("h", q, acc) if acc <= _HIGH_HI and self._unit_possible(q, acc, 4) else None
        if kind == "h":  # a high surrogate escape read: its pair must follow
            return ("hu", q, st[2]) if byte == 0x5C else None
        if kind == "hu":
            return ("l", q, st[2], 0, 0) if byte == 0x75 else None
        # ("l", q, high, value, digits typed) of the low surrogate
        if digit is None:
            return None
        high, acc, k = st[2], st[3] * 16 + digit, st[4] + 1
        lo, hi = _low_range(acc, k)
        if lo > hi:
            return None
        base = 0x10000 + ((high - _SURR_LO) << 10) - 0xDC00
        if k == 4:
            return self._to(q, base + acc)
        return ("l", q, high, acc, k) if self._meets(q, base + lo, base + hi) else None

    # -- decoding helpers -----------------------------------------------------------------------
    def _between(self, q: int, byte: int) -> Hashable | None:
        if byte == 0x22:
            return _CLOSED if q in self._finals else None
        if byte == 0x5C:
            return ("e", q) if self._escape_possible(q) else None
        if byte < 0x80:
            return self._to(q, byte) if byte >= 0x20 else None
        lead = _LEADS.get(byte)
        if lead is None:
            return None
        acc, need = lead[0], lead[1]
        return ("u", q, acc, need, need + 1) if self._utf8_possible(q, acc, need, need + 1) else None

    def _to(self, q: int, cp: int) -> int | None:
        return self._dfa.step(q, cp)

    def _meets(self, q: int, lo: int, hi: int) -> bool:
        """Some transition of ``q`` reads a code point in [lo, hi] (the row is sorted, disjoint)."""
        k = bisect_right(self._los[q], hi) - 1
        return k >= 0 and self._rows[q][k][1] >= lo

    def _meets_scalars(self, q: int, lo: int, hi: int) -> bool:
        """:meth:`_meets` on [lo, hi] without the surrogate block."""
        if lo <= _SURR_HI and hi >= _SURR_LO:
            return (lo < _SURR_LO and self._meets(q, lo, _SURR_LO - 1)) or (
                hi > _SURR_HI and self._meets(q, _SURR_HI + 1, hi)
            )
        return lo <= hi and self._meets(q, lo, hi)

    def _utf8_possible(self, q: int, acc: int, need: int, total: int) -> bool:
        lo, hi = _RANGE[total - 1]
        shift = 6 * need
        return self._meets_scalars(q, max(lo, acc << shift), min(hi, ((acc + 1) << shift) - 1))

    def _unit_possible(self, q: int, acc: int, k: int) -> bool:
        """Some code point can still be spelled by a ``\\u`` escape whose first ``k`` hex digits
        have value ``acc`` (a high surrogate counts for the code points of its pairs)."""
        shift = 4 * (4 - k)
        lo, hi = acc << shift, ((acc + 1) << shift) - 1
        if self._meets_scalars(q, lo, hi):
            return True
        h1, h2 = max(lo, _SURR_LO), min(hi, _HIGH_HI)
        return h1 <= h2 and self._meets(q, _pair_base(h1), _pair_base(h2) + 0x3FF)

    def _escape_possible(self, q: int) -> bool:
        if self._escapes and self._rows[q]:
            return True  # every scalar value has a \u spelling
        return any(self._dfa.step(q, cp) is not None for cp in _SHORT_OF)

    # -- witnesses ------------------------------------------------------------------------------
    def witness(self, state: Hashable) -> bytes | None:
        """A shortest suffix that takes ``state`` to the closing quote (None only for the start of
        an empty lexeme, which no stack keeps: see the module doc)."""
        if state == _CLOSED:
            return b""
        if self._dfa.is_empty():
            return None
        if state == _OPEN:
            return b'"' + self._path(0)
        if isinstance(state, int):
            return self._path(state)
        st: tuple[Any, ...] = state  # type: ignore[assignment]
        kind, q = st[0], st[1]
        options: list[tuple[int, int, int, Any]] = []  # (lo, hi, bytes still to type, spelling)
        if kind == "u":
            acc, need, total = st[2], st[3], st[4]
            lo, hi = _RANGE[total - 1]
            shift = 6 * need
            lo, hi = max(lo, acc << shift), min(hi, ((acc + 1) << shift) - 1)
            for a, b in _without_surrogates(lo, hi):
                options.append((a, b, need, lambda cp, n=need: chr(cp).encode("utf-8")[-n:]))
        elif kind == "e":
            for cp, letter in _SHORT_OF.items():
                options.append((cp, cp, 1, lambda cp, c=letter: bytes([c])))
            if self._escapes:
                options.append((0, 0xFFFF, 5, lambda cp: b"u%04x" % cp))
                options.append((0x10000, 0x10FFFF, 11, lambda cp: b"u" + _pair(cp)[2:]))
        elif kind == "x":
            acc, k = st[2], st[3]
            shift = 4 * (4 - k)
            lo, hi = acc << shift, ((acc + 1) << shift) - 1
            options.append((lo, hi, 4 - k, lambda cp, k=k: (b"%04x" % cp)[k:]))
            h1, h2 = max(lo, _SURR_LO), min(hi, _HIGH_HI)
            if h1 <= h2:
                options.append(
                    (_pair_base(h1), _pair_base(h2) + 0x3FF, 10 - k, lambda cp, k=k: _pair(cp)[2 + k :])
                )
        elif kind in ("h", "hu"):
            base = _pair_base(st[2])
            skip = 0 if kind == "h" else 1
            options.append((base, base + 0x3FF, 6 - skip, lambda cp, s=skip: _pair(cp)[6 + s :]))
        else:  # "l"
            base = _pair_base(st[2])
            acc, k = st[3], st[4]
            lo, hi = _low_range(acc, k)
            options.append(
                (base + lo - 0xDC00, base + hi - 0xDC00, 4 - k, lambda cp, k=k: _pair(cp)[8 + k :])
            )
        best: tuple[int, int, int, Any] | None = None
        dist = self._distances()
        for lo, hi, extra, spell in options:
            for a, b in _without_surrogates(lo, hi):
                for rlo, rhi, t in self._rows[q]:
                    if rlo <= b and rhi >= a:
                        cost = extra + dist[t]
                        if best is None or cost < best[0]:
                            best = (cost, max(a, rlo), t, spell)
        if best is None:
            raise AssertionError(f"JsonStringLexeme: state {state!r} has no completion (trimness broken)")
        _, cp, t, spell = best
        return spell(cp) + self._path(t)

    def _path(self, q: int) -> bytes:
        """The cheapest spelling of a shortest-in-bytes word from ``q`` to the closing quote."""
        dist = self._distances()
        out = bytearray()
        while True:
            if q in self._finals and dist[q] == 1:
                out += b'"'
                return bytes(out)
            for lo, hi, t in self._rows[q]:
                cost, cp = self._cheapest(lo, hi)
                if cost + dist[t] == dist[q]:
                    out += _spell(cp, self._escapes)
                    q = t
                    break
            else:
                raise AssertionError("JsonStringLexeme: no edge on a shortest path (distances broken)")

    def _distances(self) -> list[int]:
        """Bytes from each code point state to the closing quote, by Dijkstra on reversed edges."""
        if self._dist is None:
            n = len(self._rows)
            preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
            for s, row in enumerate(self._rows):
                for lo, hi, t in row:
                    preds[t].append((s, self._cheapest(lo, hi)[0]))
            inf = 1 << 60
            dist = [inf] * n
            heap = [(1, f) for f in sorted(self._finals)]
            for _, f in heap:
                dist[f] = 1
            while heap:
                d, t = heapq.heappop(heap)
                if d > dist[t]:
                    continue
                for s, w in preds[t]:
                    if d + w < dist[s]:
                        dist[s] = d + w
                        heapq.heappush(heap, (d + w, s))
            self._dist = dist
        return self._dist

    def _cheapest(self, lo: int, hi: int) -> tuple[int, int]:
        """(bytes, code point): a code point of [lo, hi] with the shortest spelling, readable ones
        first among equals (witnesses end up in reports)."""
        plain = len(_READABLE)
        cands: list[tuple[int, int, int]] = []
        for a, b in _without_surrogates(lo, hi):
            cands.extend((1, rank, c) for rank, c in enumerate(_READABLE) if a <= c <= b)
            raw = next((c for c in range(max(a, 0x20), min(b, 0x7F) + 1) if c not in (0x22, 0x5C)), None)
            if raw is not None:
                cands.append((1, plain, raw))
            cands.extend((2, plain, c) for c in _SHORT_OF if a <= c <= b)
            for first, last, n in ((0x80, 0x7FF, 2), (0x800, 0xFFFF, 3), (0x10000, 0x10FFFF, 4)):
                if a <= last and b >= first:
                    cands.append((n, plain, max(a, first)))
            if self._escapes:
                cands.extend((6, plain, c) for c, _ in _NO_SHORT_CONTROLS if a <= c <= b)
        assert cands, "an interval of spellable scalar values is not empty"
        cost, _, cp = min(cands)
        return cost, cp

    def __repr__(self) -> str:
        return f"JsonStringLexeme(states={self._dfa.size}, unicode_escapes={self._escapes})"


_READABLE = tuple(ord(c) for c in "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:+ ")


def _spell(cp: int, unicode_escapes: bool) -> bytes:
    """The shortest spelling of one code point inside a JSON string (raw where allowed)."""
    if cp >= 0x20 and cp not in (0x22, 0x5C):
        return chr(cp).encode("utf-8")
    letter = _SHORT_OF.get(cp)
    if letter is not None:
        return b"\\" + bytes([letter])
    assert unicode_escapes, "a control character without a short escape needs \\u"
    return b"\\u%04x" % cp


def _pair_base(high: int) -> int:
    """The first code point of the surrogate pairs that start with ``high``."""
    return 0x10000 + ((high - _SURR_LO) << 10)


def _pair(cp: int) -> bytes:
    """``\\uD8xx\\uDCxx`` for a code point above U+FFFF."""
    v = cp - 0x10000
    return b"\\u%04x\\u%04x" % (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))


def _low_range(acc: int, k: int) -> tuple[int, int]:
    """The low surrogates whose first ``k`` hex digits have value ``acc`` (empty: lo > hi)."""
    shift = 4 * (4 - k)
    return max(0xDC00, acc << shift), min(_SURR_HI, ((acc + 1) << shift) - 1)


def _without_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    if lo <= _SURR_HI and hi >= _SURR_LO:
        return [r for r in ((lo, _SURR_LO - 1), (_SURR_HI + 1, hi)) if r[0] <= r[1]]
    return [(lo, hi)] if lo <= hi else []


@lru_cache(maxsize=1)
def _spellable_without_u_escapes() -> CodepointDFA:
    """The strings whose every code point has a spelling without ``\\u`` escapes."""
    return CodepointDFA.from_intervals(complement(normalize(_NO_SHORT_CONTROLS))).star()


#: Above this many byte states per code point state no byte table is tried: the tables of the
#: formats measure 6-8 (``date`` 5.9, ``uri`` 6.4, ``time`` 6.0, ``hostname`` 7.5).
BYTE_STATES_PER_STATE = 8


def json_string_lexeme(
    dfa: CodepointDFA, unicode_escapes: bool, automaton_states: int
) -> ByteDFA | JsonStringLexeme:
    """The lexeme of the JSON string literals whose value is in ``dfa``'s language: its byte table
    (:meth:`CodepointDFA.to_json_string`, fast masks through lexeme tables) when that table has at
    most ``automaton_states`` states, else :class:`JsonStringLexeme`, which reads the same language
    lazily. The table is not tried when ``dfa`` alone has more than ``automaton_states /``
    :data:`BYTE_STATES_PER_STATE` states or more than ``automaton_states`` transitions (code point
    intervals: ``idn-email``'s domain has 374 states but 229,052 intervals, and its table took ~10 s
    to build where the lazy lexeme takes 0.02 s); otherwise its construction stops at the bound."""
    if dfa.num_states * BYTE_STATES_PER_STATE <= automaton_states and dfa.num_edges <= automaton_states:
        try:
            return dfa.to_json_string(
                unicode_escapes=unicode_escapes, max_states=automaton_states, limit="automaton_states"
            )
        except ByteViewTooLarge:
            pass
    return JsonStringLexeme(dfa, unicode_escapes)
