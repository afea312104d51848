"""When llguidance's lexer reads a Lark grammar exactly as its context-free reading does (docs/design.md
§2 "Lark"): a sufficient condition, checked on the lexemes' byte automata, or a typed refusal.

Theory of operation
-------------------
llguidance lexes (its docs/syntax.md, "Terminals vs rules", "Lazy lexemes", "Subgrammar details"; the
behaviour below was confirmed against llguidance 1.9.1 in tests/test_lark.py):

* the lexer runs one automaton over the union of the lexemes the Earley parser allows next, plus the
  ``%ignore`` lexeme;
* it is *greedy* and never backtracks: it reads a byte while some lexeme of the union can still read it;
  when none can, the lexemes that accept what was read are all handed to the parser and the byte starts
  the next lexeme (no lexeme accepts: the string is rejected);
* a *lazy* lexeme (``[lazy]``) ends at its first accepting position and preempts the rest of the union;
* ``%ignore`` text may stand between two lexemes only (not before the first, not after the last), and
  not before the first lexeme of an embedded ``%json`` (its own lexeme class).

The *context-free reading* takes each lexeme as its regular language and allows one ignore match between
two lexemes where the lexer does. Every string the lexer accepts is in it (each lexeme the lexer emits
is one the parser allowed). The converse holds when every cut the context-free reading makes is one the
greedy lexer makes too. Write ``Next(P)`` for the symbols (lexemes, embedded ``%json``) that can follow
``P`` (a symbol, or the start) and ``Comp(T) = ∪ {Next(P) : T ∈ Next(P)}`` — a superset of every union
the lexer can be running while it reads ``T`` (the parser's allowed set after a lexeme sequence ending in
``P`` is inside ``Next(P)``). The grammar is read exactly if:

* **cut** — for each lexeme ``T``, ``u ∈ L(T)``, byte ``c`` that can start what follows ``T`` (the next
  symbol, or the ignore), and ``T' ∈ Comp(T) ∪ {ignore}``: ``u·c`` is no prefix of ``L(T')`` (the lexer
  then stops exactly where ``T`` does; for the ignore, ``I·I ⊆ I`` is required, so a run of ignored text
  is one match);
* **ignore** — no lexeme's language meets the ignore's (the lexer could not tell them apart);
* **lazy** — a lazy ``T`` and ``T' ∈ Comp(T)``: no prefix of a string of ``T'`` (the string itself
  included: on a tie llguidance hands over the lazy lexeme only) is in ``T``'s shortest-match
  language (else ``T`` would preempt ``T'``);
* **embedded JSON** — an embed and the lexemes of ``Comp`` start with different bytes, embeds in one
  ``Comp`` share a lexeme class (llguidance merges them: ``%json {"anyOf": [A, B]}``, its docs), no
  embed directly follows an embed, and no byte that continues a JSON number can follow one.

Where the lexer hands the parser several lexemes that accept the same text, what may follow is the
union of their ``Next`` sets (``merged_next``); the checks use that union.

By induction over a context-free parse, the lexer then makes the same cuts and emits lexemes including
the parse's own, so the languages are equal. A grammar that fails a check is refused with
``Unsupported("lark-lexer", where, reason)`` naming the terminals and a witness.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ._lexeme import ByteDFA
from ._special import render
from .errors import Unsupported

__all__ = ["LexemeInfo", "EmbedInfo", "Sym", "START", "END", "check_lexer", "merged_next", "symbols_overlap"]

N = TypeVar("N", bound=Hashable)

#: Bytes that continue a complete JSON number (a top-level JSON value has no trailing whitespace and
#: ends with ``}`` ``]`` ``"`` or a literal otherwise, after which nothing continues it).
NUMBER_BYTES = frozenset(b"0123456789.eE+-")


@dataclass(frozen=True)
class LexemeInfo:
    """One lexeme: its byte automaton (lazy: already its shortest-match language), for messages."""

    dfa: ByteDFA
    lazy: bool
    label: str


@dataclass(frozen=True)
class EmbedInfo:
    """An embedded network (``%json``): the bytes its strings can start with, and its lexeme class
    (embeds of one class that may come next at one place are merged by llguidance)."""

    first: frozenset[int]
    label: str
    lexeme_class: str = "json"


#: A symbol: ``("lex", i)`` or ``("embed", i)``; ``START`` / ``END`` mark the ends of the string.
Sym = tuple[str, int]
START: Sym = ("start", -1)
END: Sym = ("end", -1)


def _first_bytes(dfa: ByteDFA) -> frozenset[int]:
    return frozenset(dfa.live_bytes(dfa.start()))


def _continuations(t: ByteDFA, other: ByteDFA) -> dict[int, bytes]:
    """Bytes ``c`` with some ``u ∈ L(t)`` such that ``u·c`` is a prefix of ``L(other)``, each with such a
    ``u`` (a product walk; both automata are trim)."""
    start = (t.start(), other.start())
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    found: dict[int, bytes] = {}
    while queue:
        p, q = queue.popleft()
        if t.is_final(p):
            for c in other.live_bytes(q):
                if c not in found:
                    found[c] = _path(parent, (p, q))
        for c in t.live_bytes(p):
            q2 = other.step(q, c)
            if q2 is None:
                continue
            p2 = t.step(p, c)
            assert p2 is not None
            nxt = (p2, q2)
            if nxt not in parent:
                parent[nxt] = ((p, q), c)
                queue.append(nxt)
    return found


def _path(parent: Mapping[N, tuple[N, int] | None], node: N) -> bytes:
    """The bytes on the breadth-first tree ``parent`` from its root to ``node``."""
    out = bytearray()
    step = parent[node]
    while step is not None:
        node, c = step
        out.append(c)
        step = parent[node]
    return bytes(reversed(out))


def _common_string(a: ByteDFA, b: ByteDFA) -> bytes | None:
    """A string in both languages, or None."""
    return _product_search(a, b, lambda p, q: a.is_final(p) and b.is_final(q))


def _preempted(lazy: ByteDFA, other: ByteDFA) -> bytes | None:
    """A string of ``lazy``'s language that is a prefix of a string of ``other`` (proper or not: on a
    tie llguidance hands over the lazy lexeme only), or None."""
    return _product_search(lazy, other, lambda p, q: lazy.is_final(p))


def _product_search(a: ByteDFA, b: ByteDFA, goal: Callable[[int, int], bool]) -> bytes | None:
    """A shortest string read by both ``a`` and ``b`` (breadth first over their product) that ends in
    a pair of states meeting ``goal``, or None."""
    start = (a.start(), b.start())
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        p, q = queue.popleft()
        if goal(p, q):
            return _path(parent, (p, q))
        for c in a.live_bytes(p):
            q2 = b.step(q, c)
            p2 = a.step(p, c)
            if q2 is None or p2 is None:
                continue
            if (p2, q2) not in parent:
                parent[(p2, q2)] = ((p, q), c)
                queue.append((p2, q2))
    return None


def _closed_under_concat(dfa: ByteDFA) -> bytes | None:
    """``L·L ⊆ L``? None if so, else a string ``u·v`` (``u, v ∈ L``) outside ``L``: for each final
    state ``f``, walk ``(f, start)`` and check that ``f`` reads everything ``start`` reads."""
    for f in sorted(dfa.finals):
        start = (f, dfa.start())
        parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
        queue = deque([start])
        while queue:
            p, q = queue.popleft()
            if dfa.is_final(q) and not dfa.is_final(p):
                return _shortest_to(dfa, f) + _path(parent, (p, q))
            for c in dfa.live_bytes(q):
                p2 = dfa.step(p, c)
                q2 = dfa.step(q, c)
                assert q2 is not None
                if p2 is None:
                    return _shortest_to(dfa, f) + _path(parent, (p, q)) + bytes([c]) + dfa.shortest_suffix(q2)
                if (p2, q2) not in parent:
                    parent[(p2, q2)] = ((p, q), c)
                    queue.append((p2, q2))
    return None


def _shortest_to(dfa: ByteDFA, target: int) -> bytes:
    parent: dict[int, tuple[int, int] | None] = {dfa.start(): None}
    queue = deque([dfa.start()])
    while queue:
        s = queue.popleft()
        if s == target:
            return _path(parent, s)
        for c in dfa.live_bytes(s):
            t = dfa.step(s, c)
            assert t is not None
            if t not in parent:
                parent[t] = (s, c)
                queue.append(t)
    return b""  # pragma: no cover - every state of a trim DFA is reachable


def symbols_overlap(a: Sym, b: Sym, lexemes: list[LexemeInfo], embeds: list[EmbedInfo]) -> bool:
    """Whether the lexer could hand the parser ``a`` and ``b`` for the same text (the same symbol, two
    lexemes whose languages meet, or an embed and a symbol that can start with the same byte)."""
    if a == b:
        return True
    if a[0] == "lex" and b[0] == "lex":
        return _common_string(lexemes[a[1]].dfa, lexemes[b[1]].dfa) is not None

    def first(s: Sym) -> frozenset[int]:
        if s[0] == "lex":
            return _first_bytes(lexemes[s[1]].dfa)
        return embeds[s[1]].first if s[0] == "embed" else frozenset()

    return bool(first(a) & first(b))


def _show(data: bytes) -> str:
    return repr(render(data))


def merged_next(
    follow: dict[Sym, set[Sym]], lexemes: list[LexemeInfo], embeds: list[EmbedInfo]
) -> dict[Sym, set[Sym]]:
    """``Next`` closed under the lexer's ties: where ``P`` and an overlapping rival ``Q`` (both allowed
    at one place) accept the same text, the lexer hands both to the parser, so what may follow is
    ``Next(P) ∪ Next(Q)`` (seen with llguidance: ``start: /b?a/? "ba"`` takes ignored text after
    ``ba``, read both as ``"ba"`` and as ``/b?a/`` waiting for ``"ba"``)."""
    out = {p: set(nxt) for p, nxt in follow.items()}
    overlaps: dict[tuple[Sym, Sym], bool] = {}
    changed = True
    while changed:  # a tie widens what follows, which can bring new ties: to a fixpoint
        changed = False
        comp: dict[Sym, set[Sym]] = {}
        for nxt in out.values():
            for s in nxt:
                comp.setdefault(s, set()).update(nxt)
        for p in out:
            for q in comp.get(p, set()):
                if q == p or q not in follow or out[q] <= out[p]:
                    continue
                if (p, q) not in overlaps:
                    overlaps[(p, q)] = symbols_overlap(p, q, lexemes, embeds)
                if overlaps[(p, q)]:
                    out[p] |= out[q]
                    changed = True
    return out


def check_lexer(
    follow: dict[Sym, set[Sym]],
    lexemes: list[LexemeInfo],
    embeds: list[EmbedInfo],
    ignore: ByteDFA | None,
    *,
    trailing_ignore: bool = False,
) -> None:
    """Refuse (``Unsupported("lark-lexer", ...)``) unless the conditions of the module docstring hold.
    ``follow[P]`` is ``Next(P)`` for every symbol and the start (``END`` marks the end of the string);
    ``trailing_ignore``: every nonempty sentence may end with ignored text (the caller proved that the
    parser expects more after every sentence), else no sentence may, which ``Next`` must show."""
    comp: dict[Sym, set[Sym]] = {}
    for nxt in follow.values():
        for s in nxt:
            comp.setdefault(s, set()).update(nxt)

    def name(s: Sym) -> str:
        if s[0] == "lex":
            return lexemes[s[1]].label
        if s[0] == "embed":
            return embeds[s[1]].label
        return "the end"

    def first(s: Sym) -> frozenset[int]:
        if s[0] == "lex":
            return _first_bytes(lexemes[s[1]].dfa)
        if s[0] == "embed":
            return embeds[s[1]].first
        return frozenset()

    ign_first = _first_bytes(ignore) if ignore is not None else frozenset()

    # ignore: one match per gap, and never a lexeme's text
    if ignore is not None and not trailing_ignore:
        for p, nxt in follow.items():
            if END in nxt and p != START and any(x != END for x in nxt):
                raise Unsupported(
                    "lark-lexer",
                    "%ignore",
                    f"the string may end after {name(p)} or go on with {name(min(x for x in nxt if x != END))}: "
                    "llguidance then accepts ignored text at the very end (only where another lexeme could "
                    "follow), which the reference does not model",
                )
        witness = _closed_under_concat(ignore)
        if witness is not None:
            raise Unsupported(
                "lark-lexer",
                "%ignore",
                f"two ignored matches in a row ({_show(witness)}) are not one match: llguidance re-lexes "
                "the gap greedily match by match, which the reference reads exactly only when the ignore "
                "language is closed under concatenation (e.g. /[ \\t]+/; one %ignore, not WS and COMMENT)",
            )
        used = set().union(*follow.values()) if follow else set()
        for i, lx in enumerate(lexemes):
            if ("lex", i) not in used:
                continue
            both = _common_string(ignore, lx.dfa)
            if both is not None:
                raise Unsupported(
                    "lark-lexer",
                    lx.label,
                    f"{lx.label} and %ignore both match {_show(both)}: the lexer cannot tell them apart",
                )

    lex_syms: list[Sym] = [("lex", i) for i in range(len(lexemes))]
    checks: list[tuple[LexemeInfo, set[int], list[tuple[str, ByteDFA, bool]]]] = []
    for t in lex_syms:
        if t not in comp and t not in follow:
            continue
        lx = lexemes[t[1]]
        nxt = follow.get(t, set())
        cut_bytes: set[int] = set()
        for x in nxt:
            cut_bytes |= first(x)
        if any(x[0] == "lex" for x in nxt):
            cut_bytes |= ign_first
        rivals: list[tuple[str, ByteDFA, bool]] = [
            (lexemes[r[1]].label, lexemes[r[1]].dfa, lexemes[r[1]].lazy)
            for r in sorted(comp.get(t, {t}) | {t})
            if r[0] == "lex"
        ]
        if ignore is not None:
            rivals.append(("%ignore", ignore, False))
        checks.append((lx, cut_bytes, rivals))
    for lx, _, rivals in checks:  # lazy preemption first: it explains a refusal best
        for rname, rdfa, rlazy in rivals:
            if lx.lazy and rdfa is not lx.dfa:
                early = _preempted(lx.dfa, rdfa)
                if early is not None:
                    raise Unsupported(
                        "lark-lexer",
                        lx.label,
                        f"lazy {lx.label} matches {_show(early)}, which {rname} (allowed at the same place) "
                        "can match or extend: the lazy lexeme would end the match there, alone",
                    )
            if rlazy and rdfa is not lx.dfa:
                early = _preempted(rdfa, lx.dfa)
                if early is not None:
                    raise Unsupported(
                        "lark-lexer",
                        rname,
                        f"lazy {rname} matches {_show(early)}, which {lx.label} (allowed at the same place) "
                        "can match or extend: the lazy lexeme would end the match there, alone",
                    )
    for lx, cut_bytes, rivals in checks:
        for rname, rdfa, _ in rivals:
            for c, u in _continuations(lx.dfa, rdfa).items():
                if c in cut_bytes:
                    raise Unsupported(
                        "lark-lexer",
                        lx.label,
                        f"after {lx.label} matches {_show(u)}, the next lexeme can start with "
                        f"{_show(bytes([c]))}, but {rname} can read on ({_show(u + bytes([c]))}): llguidance's "
                        "lexer is greedy and does not backtrack, so it would not stop where the grammar "
                        "does (maximal munch)",
                    )

    if ignore is not None:  # the ignore run itself: whatever lexeme comes after it
        after_something = set().union(*(v for k, v in follow.items() if k != START)) if follow else set()
        cut_bytes = set()
        for x in after_something:
            if x[0] == "lex":
                cut_bytes |= first(x)
        rivals = [
            (lexemes[r[1]].label, lexemes[r[1]].dfa, False) for r in sorted(after_something) if r[0] == "lex"
        ]
        rivals.append(("%ignore", ignore, False))
        for rname, rdfa, _ in rivals:
            for c, u in _continuations(ignore, rdfa).items():
                if c in cut_bytes:
                    raise Unsupported(
                        "lark-lexer",
                        "%ignore",
                        f"after ignored text {_show(u)}, a lexeme can start with {_show(bytes([c]))}, but "
                        f"{rname} can read on ({_show(u + bytes([c]))}): the greedy lexer would not stop there",
                    )

    for e_index, emb in enumerate(embeds):
        e: Sym = ("embed", e_index)
        if ign_first & emb.first:
            raise Unsupported(
                "lark-lexer",
                emb.label,
                f"%ignore and {emb.label} can both start with {_show(bytes([min(ign_first & emb.first)]))}",
            )
        for r in sorted(comp.get(e, set())):
            shared = first(r) & emb.first if r[0] == "lex" else frozenset()
            if shared:
                raise Unsupported(
                    "lark-lexer",
                    emb.label,
                    f"{name(r)} and {emb.label} can both start at one place with "
                    f"{_show(bytes([min(shared)]))}: the lexer would read both at once and keep the "
                    "longer, which the reference does not model",
                )
            # Two %json of one class at one place: llguidance merges their classes, and its docs say
            # the grammar is then that of %json {"anyOf": [A, B]} — the context-free reading. (llguidance
            # 1.9.1 also takes white space before the merged value, against those docs: tests/test_lark.py.)
            if r[0] == "embed" and r != e and embeds[r[1]].lexeme_class != emb.lexeme_class:
                raise Unsupported(
                    "lark-lexer",
                    emb.label,
                    f"{emb.label} and {name(r)} may both come next at one place but have different lexeme "
                    "classes (white space options): llguidance then picks one class, which the reference "
                    "does not model",
                )
        for x in follow.get(e, set()):
            if x[0] == "embed":
                raise Unsupported(
                    "lark-lexer",
                    emb.label,
                    f"{name(x)} may follow {emb.label} directly: llguidance then takes JSON white space "
                    "between them (and after the first where the second could follow), which the reference "
                    "does not model",
                )
        cut_bytes = set()
        for x in follow.get(e, set()):
            cut_bytes |= first(x)
            if x[0] == "lex":
                cut_bytes |= ign_first
        bad = cut_bytes & NUMBER_BYTES
        if bad:
            raise Unsupported(
                "lark-lexer",
                emb.label,
                f"what follows {emb.label} can start with {_show(bytes([min(bad)]))}, which could continue a "
                "JSON number inside it: the greedy lexer would read it as part of the JSON",
            )
