"""An independent GBNF recognizer, used only to check the reference (docs/design.md §4, invariant 1).

It shares no code with ``_gbnf``: a token-based second reader of GBNF text; repetition rewritten into
plain BNF exactly as llama.cpp's ``handle_repetitions`` does (``S{m,n}`` → ``S``×m, then nested optional
rules; ``S*`` → ``S' ::= S S' | ε``); and Earley's recognizer (Earley 1970) over *code points*, with
Aycock & Horspool's (2002) fix for nullable nonterminals. Unproductive productions are removed first, so
"the Earley set at position n is non-empty" is exactly "the first n code points are a viable prefix".

API: :func:`gbnf_accepts` (is the text in the language), :func:`gbnf_viable_bytes` (is a byte string —
possibly ending inside a UTF-8 character — a prefix of some UTF-8 string in the language), and
:func:`gbnf_generate` (a random string of the language, bounded depth).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["gbnf_accepts", "gbnf_viable_bytes", "gbnf_generate", "load_bnf", "Bnf"]

_MAXCP = 0x10FFFF
_SURR = (0xD800, 0xDFFF)

# A terminal matches one code point: (ranges, negated); ranges may be empty (lo > hi) as in llama.cpp.
Terminal = tuple[tuple[tuple[int, int], ...], bool]
Symbol = str | Terminal


@dataclass(frozen=True)
class Bnf:
    """Plain BNF: ``prods[i] = (lhs, rhs)``; ``by_lhs[name]`` are production indices; all productive."""

    prods: tuple[tuple[str, tuple[Symbol, ...]], ...]
    by_lhs: dict[str, tuple[int, ...]]
    nullable: frozenset[str]
    root: str
    height: dict[str, int]  # least derivation-tree height of each nonterminal (for generation)


# -- second reader: tokens, then recursive descent ------------------------------------------------------

_ESC = {"t": 9, "r": 13, "n": 10, "\\": 92, '"': 34, "[": 91, "]": 93}
_HEX = {"x": 2, "u": 4, "U": 8}


def _is_name(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "-_")


def _char(text: str, i: int) -> tuple[int, int]:
    if i >= len(text):
        raise ValueError("unexpected end")
    if text[i] != "\\":
        return ord(text[i]), i + 1
    e = text[i + 1 : i + 2]
    if e in _ESC:
        return _ESC[e], i + 2
    if e in _HEX:
        k = _HEX[e]
        h = text[i + 2 : i + 2 + k]
        if len(h) != k:
            raise ValueError("short hex escape")
        return int(h, 16), i + 2 + k
    raise ValueError(f"bad escape at {i}")


def _tokens(text: str) -> list[tuple]:
    toks: list[tuple] = []
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t":
            i += 1
        elif c == "#":
            while i < n and text[i] not in "\r\n":
                i += 1
        elif c in "\r\n":
            i += 1
            if depth == 0 and toks and toks[-1][0] not in ("NL", "|", "::="):
                toks.append(("NL",))
        elif c == '"':
            i += 1
            cps = []
            while i < n and text[i] != '"':
                cp, i = _char(text, i)
                cps.append(cp)
            if i >= n:
                raise ValueError("unterminated string")
            i += 1
            toks.append(("STR", tuple(cps)))
        elif c == "[":
            i += 1
            neg = text[i : i + 1] == "^"
            if neg:
                i += 1
            rs = []
            while i < n and text[i] != "]":
                lo, i = _char(text, i)
                hi = lo
                if text[i : i + 1] == "-" and text[i + 1 : i + 2] not in ("]", ""):
                    hi, i = _char(text, i + 1)
                rs.append((lo, hi))
            if i >= n:
                raise ValueError("unterminated class")
            i += 1
            toks.append(("CLS", (tuple(rs), neg)))
        elif text.startswith("::=", i):
            toks.append(("::=",))
            i += 3
        elif _is_name(c):
            j = i
            while j < n and _is_name(text[j]):
                j += 1
            toks.append(("NAME", text[i:j]))
            i = j
        elif c == "{":
            j = text.index("}", i)
            body = text[i + 1 : j].replace(" ", "").replace("\t", "")
            if "," in body:
                a, b = body.split(",")
                toks.append(("REP", int(a), int(b) if b else None))
            else:
                toks.append(("REP", int(body), int(body)))
            i = j + 1
        elif c in "()|.*+?":
            depth += {"(": 1, ")": -1}.get(c, 0)
            toks.append((c,))
            i += 1
        else:
            raise ValueError(f"unexpected {c!r} at {i}")
    toks.append(("NL",))
    return toks


class _Reader2:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.k = 0
        self.rules: dict[str, list[tuple[Symbol, ...]]] = {}
        self.fresh = 0

    def peek(self, off: int = 0) -> tuple:
        j = self.k + off
        return self.toks[j] if j < len(self.toks) else ("EOF",)

    def new_name(self, base: str) -> str:
        self.fresh += 1
        return f"{base}~{self.fresh}"

    def read(self) -> dict[str, list[tuple[Symbol, ...]]]:
        while self.peek()[0] != "EOF":
            if self.peek()[0] == "NL":
                self.k += 1
                continue
            t = self.peek()
            if t[0] != "NAME" or self.peek(1)[0] != "::=":
                raise ValueError(f"expected a rule head, got {t}")
            name = t[1]
            self.k += 2
            alts = self.alts(name)
            if name in self.rules:
                raise ValueError(f"duplicate rule {name}")
            self.rules[name] = alts
            if self.peek()[0] not in ("NL", "EOF"):
                raise ValueError(f"expected end of rule, got {self.peek()}")
        return self.rules

    def alts(self, name: str) -> list[tuple[Symbol, ...]]:
        out = [self.seq(name)]
        while self.peek()[0] == "|":
            self.k += 1
            out.append(self.seq(name))
        return out

    def seq(self, name: str) -> tuple[Symbol, ...]:
        syms: list[Symbol] = []
        last = None  # index in syms where the last symbol starts
        while True:
            t = self.peek()
            kind = t[0]
            if kind == "STR":
                last = len(syms) if t[1] else None
                syms.extend((((cp, cp),), False) for cp in t[1])
            elif kind == "CLS":
                if not t[1][0]:
                    raise ValueError("empty class")
                last = len(syms)
                syms.append(t[1])
            elif kind == "NAME" and self.peek(1)[0] != "::=":
                last = len(syms)
                syms.append(t[1])
            elif kind == "(":
                self.k += 1
                sub = self.new_name(name)
                self.rules[sub] = self.alts(name)
                if self.peek()[0] != ")":
                    raise ValueError("expected )")
                last = len(syms)
                syms.append(sub)
            elif kind == ".":
                last = len(syms)
                syms.append((((0, _MAXCP),), False))
            elif kind in ("*", "+", "?", "REP"):
                if last is None:
                    raise ValueError("repetition without a symbol")
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(kind, (0, 0))
                if kind == "REP":
                    lo, hi = t[1], t[2]
                    if hi is not None and hi < lo:
                        raise ValueError("max < min")
                self.k += 1
                prev = tuple(syms[last:])
                del syms[last:]
                # llama.cpp's handle_repetitions, rule by rule.
                syms.extend(prev * lo)
                if hi is None:
                    rec = self.new_name(name)
                    self.rules[rec] = [prev + (rec,), ()]
                    syms.append(rec)
                elif hi > lo:
                    inner: str | None = None
                    for _ in range(hi - lo):
                        rec = self.new_name(name)
                        self.rules[rec] = [prev + ((inner,) if inner else ()), ()]
                        inner = rec
                    assert inner is not None
                    syms.append(inner)
                if len(syms) == last:
                    last = None
                continue
            else:
                return tuple(syms)
            self.k += 1


def _nonempty(term: Terminal, lo: int = 0, hi: int = _MAXCP) -> bool:
    """Does the terminal match some scalar value in [lo, hi]?"""
    ranges, neg = term
    rs = sorted((max(a, lo), min(b, hi)) for a, b in ranges if max(a, lo) <= min(b, hi))
    if neg:
        comp = []
        nxt = lo
        for a, b in rs:
            if a > nxt:
                comp.append((nxt, a - 1))
            nxt = max(nxt, b + 1)
        if nxt <= hi:
            comp.append((nxt, hi))
        rs = comp
    return any(a < _SURR[0] or b > _SURR[1] for a, b in rs)


def _matches(term: Terminal, cp: int) -> bool:
    ranges, neg = term
    return any(a <= cp <= b for a, b in ranges) != neg


@lru_cache(maxsize=64)
def load_bnf(grammar: str, root: str = "root") -> Bnf:
    rules = _Reader2(grammar).read()
    for alts in rules.values():
        for rhs in alts:
            for s in rhs:
                if isinstance(s, str) and s not in rules:
                    raise ValueError(f"undefined rule {s}")
    if root not in rules:
        raise ValueError("no root")
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            if name not in productive and any(
                all((s in productive) if isinstance(s, str) else _nonempty(s) for s in rhs) for rhs in alts
            ):
                productive.add(name)
                changed = True
    prods: list[tuple[str, tuple[Symbol, ...]]] = []
    by_lhs: dict[str, list[int]] = {}
    for name, alts in rules.items():
        by_lhs[name] = []
        for rhs in alts:
            if all((s in productive) if isinstance(s, str) else _nonempty(s) for s in rhs):
                by_lhs[name].append(len(prods))
                prods.append((name, rhs))
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs in prods:
            if lhs not in nullable and all(isinstance(s, str) and s in nullable for s in rhs):
                nullable.add(lhs)
                changed = True
    by = {k: tuple(v) for k, v in by_lhs.items()}
    return Bnf(tuple(prods), by, frozenset(nullable), root, _heights(prods, by))


# -- Earley --------------------------------------------------------------------------------------------

Item = tuple[int, int, int]  # (production, dot, origin)


def _earley(bnf: Bnf, cps: list[int]) -> list[set[Item]]:
    """Earley sets S_0..S_k for the longest prefix that keeps S_k non-empty (k <= len(cps))."""
    prods, by_lhs, nullable = bnf.prods, bnf.by_lhs, bnf.nullable
    sets: list[set[Item]] = [set()]
    waits: list[dict[str, list[Item]]] = []  # waits[i][B]: items of S_i whose next symbol is B
    pending = [(p, 0, 0) for p in by_lhs[bnf.root]]
    for i in range(len(cps) + 1):
        cur = sets[i]
        waiting: dict[str, list[Item]] = {}
        waits.append(waiting)
        completed: set[str] = set()  # nonterminals completed with origin i (nullable ones)
        agenda = [it for it in pending if it not in cur]
        cur.update(agenda)
        nxt: set[Item] = set()
        while agenda:
            p, d, o = agenda.pop()
            lhs, rhs = prods[p]
            if d == len(rhs):
                if o == i:
                    completed.add(lhs)
                for p2, d2, o2 in list(waits[o].get(lhs, ())):
                    new = (p2, d2 + 1, o2)
                    if new not in cur:
                        cur.add(new)
                        agenda.append(new)
                continue
            sym = rhs[d]
            if isinstance(sym, str):
                waiting.setdefault(sym, []).append((p, d, o))
                for q in by_lhs[sym]:
                    new = (q, 0, i)
                    if new not in cur:
                        cur.add(new)
                        agenda.append(new)
                if sym in nullable or sym in completed:
                    new = (p, d + 1, o)
                    if new not in cur:
                        cur.add(new)
                        agenda.append(new)
            elif i < len(cps) and _matches(sym, cps[i]):
                nxt.add((p, d + 1, o))
        if i == len(cps) or not nxt:
            break
        sets.append(set())
        pending = list(nxt)
    return sets


def gbnf_accepts(text: str, grammar: str, root: str = "root") -> bool:
    bnf = load_bnf(grammar, root)
    cps = [ord(c) for c in text]
    if any(_SURR[0] <= c <= _SURR[1] for c in cps):
        return False
    if not bnf.by_lhs[root]:
        return False
    sets = _earley(bnf, cps)
    if len(sets) != len(cps) + 1:
        return False
    return any(bnf.prods[p][0] == root and d == len(bnf.prods[p][1]) and o == 0 for p, d, o in sets[len(cps)])


def _partial_interval(tail: bytes) -> tuple[int, int] | None:
    """Code points whose UTF-8 encoding starts with ``tail`` (an incomplete sequence), as an interval."""
    lead = tail[0]
    if 0xC2 <= lead <= 0xDF:
        n, bits, lo_cp = 2, lead & 0x1F, 0x80
    elif 0xE0 <= lead <= 0xEF:
        n, bits, lo_cp = 3, lead & 0x0F, 0x800
    elif 0xF0 <= lead <= 0xF4:
        n, bits, lo_cp = 4, lead & 0x07, 0x10000
    else:
        return None
    if len(tail) >= n or any(not 0x80 <= b <= 0xBF for b in tail[1:]):
        return None
    for b in tail[1:]:
        bits = (bits << 6) | (b & 0x3F)
    rest = n - len(tail)
    lo = max(bits << (6 * rest), lo_cp)
    hi = min(((bits + 1) << (6 * rest)) - 1, _MAXCP)
    if lo > hi or (_SURR[0] <= lo and hi <= _SURR[1]):
        return None
    return lo, hi


def gbnf_viable_bytes(data: bytes, grammar: str, root: str = "root") -> bool:
    """Is ``data`` a prefix of the UTF-8 encoding of some string in the language?"""
    bnf = load_bnf(grammar, root)
    if not bnf.by_lhs[root]:
        return False
    head, interval = data, None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        for k in (1, 2, 3):
            if len(data) < k:
                break
            try:
                text = data[:-k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            interval = _partial_interval(data[-k:])
            break
        if interval is None:
            return False
    cps = [ord(c) for c in text]
    sets = _earley(bnf, cps)
    if len(sets) != len(cps) + 1:
        return False
    if interval is None:
        return True
    lo, hi = interval
    for p, d, _o in sets[-1]:
        rhs = bnf.prods[p][1]
        if d < len(rhs) and not isinstance(rhs[d], str) and _nonempty(rhs[d], lo, hi):  # type: ignore[arg-type]
            return True
    return False


# -- random generation ----------------------------------------------------------------------------------

_POOL = [ord(c) for c in "aZ09 _-.,:;!?\"'\\/()[]{}<>+*#=\t\n\réß中Ж😀\u2028\x85\x7f\x00"]


def _pick_char(term: Terminal, rng: random.Random) -> int:
    ranges, neg = term
    if not neg:
        live = [
            (a, min(b, _MAXCP)) for a, b in ranges if a <= min(b, _MAXCP) and _nonempty((((a, b),), False))
        ]
        for _ in range(100):
            a, b = rng.choice(live)
            cp = rng.randint(a, b) if rng.random() < 0.7 else rng.choice((a, b))
            if not _SURR[0] <= cp <= _SURR[1]:
                return cp
    for _ in range(200):
        cp = rng.choice(_POOL) if rng.random() < 0.8 else rng.randint(0, _MAXCP)
        if not _SURR[0] <= cp <= _SURR[1] and _matches(term, cp):
            return cp
    for cp in range(_MAXCP + 1):  # pragma: no cover - a class excluding everything common
        if not _SURR[0] <= cp <= _SURR[1] and _matches(term, cp):
            return cp
    raise ValueError("empty terminal")


def gbnf_generate(
    grammar: str, rng: random.Random, root: str = "root", max_depth: int = 12, max_len: int = 200
) -> str:
    """A random string of the language: free choices up to ``max_depth``, then shortest derivations."""
    bnf = load_bnf(grammar, root)
    if not bnf.by_lhs[root]:
        raise ValueError("the language is empty")
    height = bnf.height
    out: list[int] = []

    def gen(sym: str, depth: int) -> None:
        prods = bnf.by_lhs[sym]
        if depth > max_depth or len(out) > max_len:
            best = min(_prod_height(bnf.prods[p][1], height) for p in prods)
            prods = tuple(p for p in prods if _prod_height(bnf.prods[p][1], height) == best)
        rhs = bnf.prods[rng.choice(prods)][1]
        for s in rhs:
            if isinstance(s, str):
                gen(s, depth + 1)
            else:
                out.append(_pick_char(s, rng))

    gen(root, 0)
    return "".join(map(chr, out))


def _prod_height(rhs: tuple[Symbol, ...], height: dict[str, int]) -> int:
    return 1 + max((height[s] for s in rhs if isinstance(s, str)), default=0)


def _heights(
    prods: list[tuple[str, tuple[Symbol, ...]]], by_lhs: dict[str, tuple[int, ...]]
) -> dict[str, int]:
    inf = 1 << 30
    h = dict.fromkeys(by_lhs, inf)
    changed = True
    while changed:
        changed = False
        for lhs, rhs in prods:
            v = _prod_height(rhs, h)
            if v < h[lhs]:
                h[lhs] = v
                changed = True
    return h
