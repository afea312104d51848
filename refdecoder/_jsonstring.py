"""JSON string literals over a code point automaton, read lazily byte by byte (docs/design.md §2).

Theory of operation
-------------------
A JSON string language is a :class:`~refdecoder._fsa.CodepointDFA` ``D`` over the decoded text plus
RFC 8259 §7's spellings: quotes around the body, each code point written raw (UTF-8, RFC 3629 §3,
if it is not a control character, ``"`` or ``\\``), as a short escape (``\\" \\\\ \\/ \\b \\f \\n
\\r \\t``) or, when the profile allows ``\\u`` escapes, as ``\\uXXXX`` (hex digits in either case) or
a UTF-16 surrogate pair ``\\uD8xx\\uDCxx`` for code points above U+FFFF. A lone surrogate escape
spells no code point. Under ``unicode_escapes="controls"`` a ``\\u`` escape spells only U+0000..U+001F
(every escape's interval is clipped to ``u_escape_max``; every code point keeps a spelling, so ``D`` is
not narrowed).

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

Length bounds
-------------
``JsonStringLexeme(D, escapes, lengths=(lo, hi))`` reads ``D ∩ {length in [lo, hi]}`` (length in
code points: an escape is one) without the product automaton, which for ``date-time`` beside
``maxLength: 64`` passes ``Limits.dfa_states`` (``_shapes.CountedStrings`` decides when). A state
between code points is ``n * N + q``: ``q`` the state of ``D``, ``n`` the code points read, ``N``
the states of ``D``. Trimness: :func:`remaining_lengths` gives, per ``q``, the exact set of lengths
``r <= hi`` of the words from ``q`` to a final state, and a code point is taken into ``t`` only if
some ``r`` with ``lo <= n + 1 + r <= hi`` is in ``t``'s set (``_viable``); a partial encoding is kept
only if its interval meets a transition into such a ``t``; the closing quote needs a final ``q`` and
``n >= lo``. So every state returned can still reach the closing quote within the bounds, and the
language read is exactly ``D ∩ {length in [lo, hi]}``. The witness is a Dijkstra forward over the
viable pairs ``(q, n)`` (each ``n <= hi``, so it ends), with the same per-transition costs.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Hashable
from functools import lru_cache
from typing import Any

from ._cpset import complement, normalize
from ._fsa import ByteViewTooLarge, CodepointDFA, UnicodeEscapes, u_escape_max
from ._lexeme import ByteDFA
from ._limits import spend

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

    __slots__ = (
        "_dfa",
        "_escapes",
        "_u_max",
        "_key",
        "_rows",
        "_los",
        "_finals",
        "_dist",
        "_n",
        "_lengths",
        "_reach",
        "_empty",
        "_rest",
    )

    def __init__(
        self,
        dfa: CodepointDFA,
        unicode_escapes: UnicodeEscapes = True,
        lengths: tuple[int, int] | None = None,
    ) -> None:
        if dfa.is_empty():
            raise ValueError("the language is empty: no lexeme represents it (check is_empty() first)")
        if lengths is not None and not 0 <= lengths[0] <= lengths[1]:
            raise ValueError(f"length bounds {lengths!r}: want 0 <= lo <= hi")
        self._key = ("json-string", dfa.key, unicode_escapes, lengths)
        if not unicode_escapes:  # drop the strings no spelling reaches, so that D stays trim
            dfa = dfa.intersection(_spellable_without_u_escapes())
        # None spellable (a control character without a short escape in every member): an empty
        # lexeme, which cannot even open its quote, like the byte table of that language
        self._dfa = dfa
        self._escapes = unicode_escapes
        self._u_max = u_escape_max(unicode_escapes)  # the highest code point a \u escape spells
        self._rows = [dfa.row(q) for q in range(dfa.num_states)] if not dfa.is_empty() else []
        self._los = [[lo for lo, _, _ in row] for row in self._rows]
        self._finals = dfa.finals
        self._dist: list[int] | None = None
        # Counted form (see "Length bounds" in the module doc): a state between code points is
        # n * N + q (q: the state of D, n: code points read); N = 1 and n = 0 when not counting.
        self._lengths = lengths
        self._n = max(1, dfa.num_states) if lengths is not None else 0
        self._reach = remaining_lengths(dfa, lengths[1]) if lengths is not None and self._rows else None
        self._empty = dfa.is_empty() or (lengths is not None and not self._viable(0, 0))
        self._rest: dict[int, tuple[int, bytes]] = {}

    # -- the Lexeme protocol --------------------------------------------------------------------
    @property
    def key(self) -> Hashable:
        return self._key

    def start(self) -> Hashable:
        return _OPEN

    def is_final(self, state: Hashable) -> bool:
        return state == _CLOSED

    def can_continue(self, state: Hashable) -> bool:
        return state != _CLOSED and not (state == _OPEN and self._empty)

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        if isinstance(state, int):
            if state >= 0:
                return self._between(state, byte)
            return 0 if state == _OPEN and byte == 0x22 and not self._empty else None
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
            return ("x", q, 0, 0) if byte == 0x75 and self._unit_possible(q, 0, 0) else None
        digit = _HEX.get(byte)
        if kind == "x":  # ("x", q, value, digits typed) after "\u"
            if digit is None:
                return None
            acc, k = st[2] * 16 + digit, st[3] + 1
            if k < 4:
                return ("x", q, acc, k) if self._unit_possible(q, acc, k) else None
            if acc > self._u_max:
                return None
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
    # A state ``s`` between code points (also the second field of a partial state) is ``n * N + q``
    # when counting, else ``q``: :meth:`_split` takes it apart.
    def _split(self, s: int) -> tuple[int, int]:
        """``(q, n)``: the state of ``D`` and the code points read (0 when not counting)."""
        if self._lengths is None:
            return s, 0
        n, q = divmod(s, self._n)
        return q, n

    def _viable(self, q: int, n: int) -> bool:
        """Some word takes ``q`` to a final state of ``D`` with a total length in the bounds (always
        when not counting: ``D`` is trim)."""
        if self._lengths is None:
            return True
        assert self._reach is not None
        lo, hi = self._lengths
        return self._reach.meets(q, lo - n, hi - n)

    def _between(self, s: int, byte: int) -> Hashable | None:
        q, n = self._split(s)
        if byte == 0x22:
            ok = q in self._finals and (self._lengths is None or n >= self._lengths[0])
            return _CLOSED if ok else None
        if byte == 0x5C:
            return ("e", s) if self._escape_possible(s) else None
        if byte < 0x80:
            return self._to(s, byte) if byte >= 0x20 else None
        lead = _LEADS.get(byte)
        if lead is None:
            return None
        acc, need = lead[0], lead[1]
        return ("u", s, acc, need, need + 1) if self._utf8_possible(s, acc, need, need + 1) else None

    def _to(self, s: int, cp: int) -> int | None:
        if self._lengths is None:
            return self._dfa.step(s, cp)
        q, n = self._split(s)
        t = self._dfa.step(q, cp)
        return (n + 1) * self._n + t if t is not None and self._viable(t, n + 1) else None

    def _meets(self, s: int, lo: int, hi: int) -> bool:
        """Some transition of ``s`` reads a code point in [lo, hi] (the row is sorted, disjoint)
        into a state that can still be completed."""
        q, n = self._split(s)
        row = self._rows[q]
        k = bisect_right(self._los[q], hi) - 1
        if self._lengths is None:
            return k >= 0 and row[k][1] >= lo
        while k >= 0 and row[k][1] >= lo:  # the edges that meet [lo, hi] are contiguous
            if self._viable(row[k][2], n + 1):
                return True
            k -= 1
        return False

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
        lo, hi = acc << shift, min(((acc + 1) << shift) - 1, self._u_max)
        if lo > hi:
            return False
        if self._meets_scalars(q, lo, hi):
            return True
        h1, h2 = max(lo, _SURR_LO), min(hi, _HIGH_HI)
        return h1 <= h2 and self._meets(q, _pair_base(h1), _pair_base(h2) + 0x3FF)

    def _escape_possible(self, s: int) -> bool:
        if self._u_max >= 0 and self._meets(s, 0, self._u_max):
            return True  # every scalar value up to _u_max has a \u spelling
        return any(self._to(s, cp) is not None for cp in _SHORT_OF)

    # -- witnesses ------------------------------------------------------------------------------
    def witness(self, state: Hashable) -> bytes | None:
        """A shortest suffix that takes ``state`` to the closing quote (None only for the start of
        an empty lexeme, which no stack keeps: see the module doc)."""
        if state == _CLOSED:
            return b""
        if self._empty:
            return None
        if state == _OPEN:
            return b'"' + self._path(0)
        if isinstance(state, int):
            return self._path(state)
        st: tuple[Any, ...] = state  # type: ignore[assignment]
        q, n = self._split(st[1])
        options = self._pending(st)
        best: tuple[int, int, int, Any] | None = None
        for lo, hi, extra, spell in options:
            for a, b in _without_surrogates(lo, hi):
                for rlo, rhi, t in self._rows[q]:
                    if rlo <= b and rhi >= a:
                        if self._lengths is not None:
                            if not self._viable(t, n + 1):
                                continue
                            t += (n + 1) * self._n
                        cost = extra + self._cost(t)
                        if best is None or cost < best[0]:
                            best = (cost, max(a, rlo), t, spell)
        if best is None:
            raise AssertionError(f"JsonStringLexeme: state {state!r} has no completion (trimness broken)")
        _, cp, t, spell = best
        return spell(cp) + self._path(t)

    def _pending(self, st: tuple[Any, ...]) -> list[tuple[int, int, int, Any]]:
        """The code points a partial encoding ``st`` can still become, as ``(lo, hi, bytes still to
        type, spelling of the rest)`` per way of finishing it."""
        kind = st[0]
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
            if self._u_max >= 0:
                options.append((0, min(0xFFFF, self._u_max), 5, lambda cp: b"u%04x" % cp))
            if self._u_max > 0xFFFF:
                options.append((0x10000, 0x10FFFF, 11, lambda cp: b"u" + _pair(cp)[2:]))
        elif kind == "x":
            acc, k = st[2], st[3]
            shift = 4 * (4 - k)
            lo, hi = acc << shift, min(((acc + 1) << shift) - 1, self._u_max)
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
        return options

    def _cost(self, s: int) -> int:
        """Bytes of a shortest completion of the state ``s`` between code points."""
        if self._lengths is None:
            return self._distances()[s]
        return self._counted_rest(s)[0]

    def _path(self, q: int) -> bytes:
        """The cheapest spelling of a shortest-in-bytes word from ``q`` to the closing quote."""
        if self._lengths is not None:
            return self._counted_rest(q)[1]
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

    def _counted_rest(self, s: int) -> tuple[int, bytes]:
        """(bytes, spelling) of a shortest completion of ``s`` (counting): Dijkstra forward over
        the viable pairs (q, n), n <= hi, each edge weighted by its cheapest spelling, the closing
        quote (1 byte) taken at a final q with lo <= n."""
        done = self._rest.get(s)
        if done is not None:
            return done
        assert self._lengths is not None
        lo_len = self._lengths[0]
        best: dict[int, int] = {s: 0}
        back: dict[int, tuple[int, int]] = {}  # state -> (previous state, code point)
        heap = [(0, s)]
        goal: tuple[int, int] | None = None
        while heap:
            d, u = heapq.heappop(heap)
            if d > best[u]:
                continue
            q, n = self._split(u)
            if q in self._finals and n >= lo_len:
                goal = (d + 1, u)
                break
            for rlo, rhi, t in self._rows[q]:
                if not self._viable(t, n + 1):
                    continue
                w, cp = self._cheapest(rlo, rhi)
                v = (n + 1) * self._n + t
                if d + w < best.get(v, 1 << 60):
                    best[v] = d + w
                    back[v] = (u, cp)
                    heapq.heappush(heap, (d + w, v))
        if goal is None:
            raise AssertionError("JsonStringLexeme: a viable state has no completion (reach broken)")
        cost, u = goal
        cps: list[int] = []
        while u != s:
            u, cp = back[u]
            cps.append(cp)
        out = b"".join(_spell(cp, self._escapes) for cp in reversed(cps)) + b'"'
        if len(self._rest) >= 4096:  # completions can be hi bytes long: keep the memo small
            self._rest.clear()
        self._rest[s] = (cost, out)
        return cost, out

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


def _spell(cp: int, unicode_escapes: UnicodeEscapes) -> bytes:
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


class RemainingLengths:
    """Per state ``q`` of an automaton, the lengths ``r <= hi`` of the words that take ``q`` to a
    final state (:func:`remaining_lengths`), kept as the first ``r0 + period`` layers' bits: a
    length ``r >= r0 + period`` is in iff ``r0 + (r - r0) % period`` is (``period`` 0: all ``hi + 1``
    layers are stored)."""

    __slots__ = ("masks", "r0", "period", "hi")

    def __init__(self, masks: list[int], r0: int, period: int, hi: int) -> None:
        self.masks, self.r0, self.period, self.hi = masks, r0, period, hi

    def meets(self, q: int, a: int, b: int) -> bool:
        """Some length in ``[a, b]`` (clipped to ``[0, hi]``) takes ``q`` to a final state."""
        a, b = max(a, 0), min(b, self.hi)
        if a > b:
            return False
        m = self.masks[q]
        width = self.r0 + self.period  # the stored bits: lengths 0 .. width - 1
        if m & ((1 << (min(b, width - 1) + 1)) - 1) & ~((1 << a) - 1):
            return True
        if b < width or self.period == 0:
            return False
        a = max(a, width)  # the repeats: residues of [a, b] in the stored cycle [r0, width)
        cycle = m >> self.r0
        if b - a + 1 >= self.period:
            return cycle != 0
        s = (a - self.r0) % self.period
        doubled = cycle | (cycle << self.period)
        return (doubled >> s) & ((1 << (b - a + 1)) - 1) != 0

    def bits(self, q: int) -> int:
        """All of ``q``'s lengths as one mask (bit ``r``: length ``r``), for tests."""
        return sum(1 << r for r in range(self.hi + 1) if self.meets(q, r, r))


def remaining_lengths(dfa: CodepointDFA, hi: int) -> RemainingLengths:
    """Per state ``q`` of ``dfa``, the lengths ``r <= hi`` of the words that take ``q`` to a final
    state. Layer ``r`` (the states with such a word of exactly ``r`` code points) is the
    predecessors of layer ``r - 1`` (layer 0: the finals), so the sets are exact. Each layer is a
    function of the one before, so once layer ``r`` equals an earlier layer ``r0`` the sequence
    repeats with period ``r - r0`` (``date-time``: from layer 22 on, period 1), and no more layers
    are computed: :class:`RemainingLengths` reads the repeats off the stored cycle."""
    n = dfa.num_states
    preds: list[set[int]] = [set() for _ in range(n)]
    for s in range(n):
        for _, _, t in dfa.row(s):
            preds[t].add(s)
    seen: dict[frozenset[int], int] = {}
    layers: list[frozenset[int]] = []
    layer = frozenset(dfa.finals)
    while len(layers) <= hi and layer not in seen:
        seen[layer] = len(layers)
        layers.append(layer)
        spend(1 + len(layer))
        layer = frozenset(p for t in layer for p in preds[t])
    masks = [0] * n
    r0 = seen.get(layer, len(layers)) if len(layers) <= hi else len(layers)
    for k, members in enumerate(layers):
        for q in members:
            masks[q] |= 1 << k
    return RemainingLengths(masks, r0, len(layers) - r0, hi)


@lru_cache(maxsize=1)
def _spellable_without_u_escapes() -> CodepointDFA:
    """The strings whose every code point has a spelling without ``\\u`` escapes."""
    return CodepointDFA.from_intervals(complement(normalize(_NO_SHORT_CONTROLS))).star()


#: Above this many byte states per code point state no byte table is tried: the tables of the
#: formats measure 6-8 (``date`` 5.9, ``uri`` 6.4, ``time`` 6.0, ``hostname`` 7.5).
BYTE_STATES_PER_STATE = 8


def json_string_lexeme(
    dfa: CodepointDFA, unicode_escapes: UnicodeEscapes, automaton_states: int
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
