"""GBNF front-end: llama.cpp's grammar syntax compiled to the grammar IR (docs/design.md §2).

Theory of operation
-------------------
1. **Parse** (:func:`parse_gbnf`). The reader follows llama.cpp's ``llama_grammar_parser``
   (``src/llama-grammar.cpp``: ``parse_rule`` / ``parse_alternates`` / ``parse_sequence`` /
   ``parse_char`` / ``parse_space``) function by function, so layout rules are llama.cpp's: a rule ends at
   a newline that is not inside parentheses and does not follow ``|`` or ``::=``; ``#`` comments run to the
   end of the line; a postfix operator (``* + ? {m} {m,} {m,n}``) applies to the last symbol, a whole
   string literal being one symbol, and operators chain (``x{2}*`` is ``(x{2})*``). Rule names are
   ``[a-zA-Z0-9_-]+`` (``_`` is transformers-cfg's extension). The AST is over code points.
2. **Check**: the root rule exists, every referenced rule is defined, no rule is defined twice, and no
   rule is left-recursive (the same analysis as llama.cpp's ``llama_grammar_detect_left_recursion`` and
   ``_ir.GrammarBuilder.finish``: a rule that reaches itself through calls that may read nothing).
3. **Regular merging.** A sub-expression without references to recursive rules denotes a regular language;
   it is compiled to *one* minimal :class:`ByteDFA` (Thompson NFA over the parts' DFAs, subset
   construction, Moore minimization in ``ByteDFA.build``) as long as the subset construction stays under
   ``_MERGE_CAP`` states. This is exact: a ``Lex`` node's language is all the parser uses, and
   ``L(Lex(A·B)) = L(Seq(Lex A, Lex B))``. It only shrinks the parser's stack sets. Anything larger, or
   recursive, becomes ``Seq`` / ``Alt`` / ``Repeat`` nodes (``Repeat`` counts natively, so ``x{0,100000}``
   costs one node, never an expansion).

Semantics: the language is over Unicode scalar values written as UTF-8. ``.`` is any scalar value; a
negated class ``[^...]`` is every scalar value not listed; a class range ``[a-b]`` with ``a > b`` is empty
(as llama.cpp compares ``a <= c <= b``); ranges are clipped to scalar values (surrogates excluded).

Refused (never approximated): ``[]`` / ``[^]`` (llama.cpp reads them as *no symbol at all*),
``{m,n}`` with ``n < m`` (llama.cpp silently reads ``{m}``), a rule defined twice (llama.cpp silently keeps
the last), a single code point that is a surrogate or beyond U+10FFFF in a literal or class, token
terminals (``<...>``, ``!<...>``), NUL characters, and left recursion.

Accepted where llama.cpp refuses: ``x*`` / ``x+`` / ``x{m,}`` with a nullable ``x`` (e.g. ``("a"?)*``).
llama.cpp rewrites ``x*`` to ``x' ::= x x' | ε``, which is left-recursive when ``x`` is nullable; the
language is still well defined and the ``Repeat`` node decides it exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import _cpset
from ._ir import Alt, GrammarBuilder, Lex, Network, Seq, find_cycle
from ._lexeme import ByteDFA, utf8_sequences
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import Deadline, Gbnf, Limits

__all__ = [
    "compile_gbnf_network",
    "parse_gbnf",
    "GbnfRule",
    "Chars",
    "Lit",
    "Ref",
    "SeqE",
    "AltE",
    "RepE",
    "Expr",
]

MAX_CODE_POINT = 0x10FFFF
_MAX_REPEAT_COUNT = 1_000_000  # larger counts are refused (llama.cpp's stoul/int would wrap)
_MERGE_CAP = 1_500  # subset-construction states above which a regular piece is left structural
_HUGE = 1 << 40  # size of a non-regular piece

# -- AST ------------------------------------------------------------------------------------------
# Nodes compare by identity (eq=False): the compiler memoizes per node object.


@dataclass(frozen=True, eq=False)
class Chars:
    """One code point from ``ranges`` (inclusive, possibly empty when lo > hi), or not, if negated."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool


@dataclass(frozen=True, eq=False)
class Lit:
    """A string literal as code points (never empty: an empty literal is no symbol)."""

    cps: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Ref:
    name: str
    line: int
    col: int


@dataclass(frozen=True, eq=False)
class SeqE:
    items: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class AltE:
    options: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class RepE:
    item: Expr
    min: int
    max: int | None


Expr = Chars | Lit | Ref | SeqE | AltE | RepE


@dataclass(frozen=True)
class GbnfRule:
    name: str
    body: Expr
    line: int
    col: int


# -- parsing (mirrors llama-grammar.cpp) --------------------------------------------------------------


def _is_word_char(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") or c == "-" or c == "_"


_SIMPLE_ESCAPES = {"t": 0x09, "r": 0x0D, "n": 0x0A, "\\": 0x5C, '"': 0x22, "[": 0x5B, "]": 0x5D}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Reader:
    def __init__(self, text: str, limits: Limits) -> None:
        self.text = text
        self.n = len(text)
        self.limits = limits
        self.rules: dict[str, GbnfRule] = {}
        self.refs: list[tuple[Ref, str]] = []  # (reference, rule it occurs in)
        self.rule = ""
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    # -- positions and errors
    def where(self, pos: int) -> tuple[int, int]:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, pos - self._line_starts[lo] + 1

    def at(self, pos: int) -> str:
        line, col = self.where(pos)
        return f"line {line} col {col}" + (f" (rule {self.rule})" if self.rule else "")

    def error(self, what: str, pos: int, expected: str) -> SpecError:
        if pos < self.n:
            what = f"{what} (found {self.text[pos : pos + 12]!r})"
        else:
            what = f"{what} (found end of input)"
        return SpecError(what, self.at(pos), expected)

    def ch(self, pos: int) -> str:
        return self.text[pos] if pos < self.n else ""

    # -- llama.cpp's helpers
    def parse_space(self, pos: int, newline_ok: bool) -> int:
        text, n = self.text, self.n
        while pos < n:
            c = text[pos]
            if c == "#":
                while pos < n and text[pos] not in "\r\n":
                    pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                pos += 1
            else:
                break
        return pos

    def parse_name(self, pos: int) -> int:
        end = pos
        while end < self.n and _is_word_char(self.text[end]):
            end += 1
        if end == pos:
            raise self.error("expecting a rule name", pos, "a name of letters, digits, '-' or '_'")
        return end

    def parse_int(self, pos: int) -> tuple[int, int]:
        end = pos
        while end < self.n and "0" <= self.text[end] <= "9":
            end += 1
        if end == pos:
            raise self.error("expecting an integer", pos, "a decimal count")
        if end - pos > 18:  # before int(): no 4300-digit parse
            raise LimitExceeded(
                "repetition_count", self.text[pos : pos + 20] + "...", _MAX_REPEAT_COUNT, self.at(pos)
            )
        value = int(self.text[pos:end])
        if value > _MAX_REPEAT_COUNT:
            raise LimitExceeded("repetition_count", value, _MAX_REPEAT_COUNT, self.at(pos))
        return value, end

    def parse_char(self, pos: int) -> tuple[int, int]:
        """One (possibly escaped) code point; returns (code point, next position)."""
        c = self.ch(pos)
        if c == "":
            raise self.error("unexpected end of input", pos, "a character")
        if c != "\\":
            return ord(c), pos + 1
        e = self.ch(pos + 1)
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e], pos + 2
        if e in _HEX_ESCAPES:
            size = _HEX_ESCAPES[e]
            digits = self.text[pos + 2 : pos + 2 + size]
            if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(
                    f"expecting {size} hex digits after \\{e}", pos, f"\\{e} and {size} hex digits"
                )
            return int(digits, 16), pos + 2 + size
        raise self.error(
            "unknown escape", pos, 'one of \\n \\r \\t \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH'
        )

    def scalar(self, cp: int, pos: int) -> int:
        if cp > MAX_CODE_POINT or 0xD800 <= cp <= 0xDFFF:
            raise Unsupported(
                "gbnf-code-point",
                self.rule,
                f"code point {cp:#x} at {self.at(pos)} is not a Unicode scalar value, so no UTF-8 text "
                "contains it; remove it (ranges that merely span surrogates are fine)",
            )
        return cp

    # -- grammar structure
    def parse(self) -> dict[str, GbnfRule]:
        if "\0" in self.text:
            raise self.error(
                "NUL character in grammar text", self.text.index("\0"), "no NUL (llama.cpp stops there)"
            )
        pos = self.parse_space(0, True)
        while pos < self.n:
            pos = self.parse_rule(pos)
        return self.rules

    def parse_rule(self, pos: int) -> int:
        self.rule = ""
        name_end = self.parse_name(pos)
        name = self.text[pos:name_end]
        line, col = self.where(pos)
        self.rule = name
        if name in self.rules:
            first = self.rules[name]
            raise SpecError(
                f"rule {name!r} defined twice (first at line {first.line} col {first.col})",
                self.at(pos),
                "one definition per rule (llama.cpp would silently keep the last one)",
            )
        pos = self.parse_space(name_end, False)
        if self.text[pos : pos + 3] != "::=":
            raise self.error("expecting '::='", pos, "'name ::= alternatives'")
        pos = self.parse_space(pos + 3, True)
        pos, body = self.parse_alternates(pos, False, 0)
        self.rules[name] = GbnfRule(name, body, line, col)
        c = self.ch(pos)
        if c == "\r":
            pos += 2 if self.ch(pos + 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c != "":
            if c == ")":
                raise self.error("unbalanced ')'", pos, "newline or end of input after a rule")
            raise self.error("unexpected character", pos, "a symbol, '|', or a newline ending the rule")
        return self.parse_space(pos, True)

    def parse_alternates(self, pos: int, nested: bool, depth: int) -> tuple[int, Expr]:
        if depth > self.limits.nesting_depth:
            raise LimitExceeded("nesting_depth", depth, self.limits.nesting_depth, self.at(pos))
        pos, seq = self.parse_sequence(pos, nested, depth)
        options = [seq]
        while self.ch(pos) == "|":
            pos = self.parse_space(pos + 1, True)
            pos, seq = self.parse_sequence(pos, nested, depth)
            options.append(seq)
        return pos, options[0] if len(options) == 1 else AltE(tuple(options))

    def parse_sequence(self, pos: int, nested: bool, depth: int) -> tuple[int, Expr]:
        """Symbols and postfix operators up to ``|``, ``)``, or (outside parentheses) a newline."""
        items: list[Expr] = []
        # llama.cpp's ``last_sym_start == rule.size()``: is there a symbol a postfix operator can take?
        has_last = False
        postfix_depth = 0
        while pos < self.n:
            c = self.text[pos]
            if c in "*+?{":
                if not has_last:
                    raise self.error("no symbol before a repetition operator", pos, "a symbol before */+/?/{")
                postfix_depth += 1
                if depth + postfix_depth > self.limits.nesting_depth:
                    raise LimitExceeded(
                        "nesting_depth", depth + postfix_depth, self.limits.nesting_depth, self.at(pos)
                    )
                pos, lo, hi = self.repetition(pos, nested)
                last = items.pop()
                if hi == 0:
                    has_last = False  # llama.cpp drops the symbol: nothing is left to repeat
                else:
                    items.append(RepE(last, lo, hi))
                continue
            reader = self._SYMBOLS.get(c) or (_Reader.rule_ref if _is_word_char(c) else None)
            if reader is None:
                if c in "<!":
                    raise Unsupported(
                        "gbnf-token",
                        self.rule,
                        f"token terminal at {self.at(pos)}: token ids depend on a vocabulary; the reference "
                        "matches bytes only",
                    )
                break
            pos, symbol = reader(self, pos, depth)
            has_last = symbol is not None
            if symbol is not None:
                items.append(symbol)
            pos = self.parse_space(pos, nested)
            postfix_depth = 0
        return pos, items[0] if len(items) == 1 else SeqE(tuple(items))

    # One reader per symbol kind: (position at the symbol, depth) -> (position after it, symbol or None).
    def string_literal(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        start = pos
        pos += 1
        cps: list[int] = []
        while self.ch(pos) != '"':
            if self.ch(pos) == "":
                raise self.error("unterminated string literal", start, "a closing '\"'")
            cp_pos = pos
            cp, pos = self.parse_char(pos)
            cps.append(self.scalar(cp, cp_pos))
        return pos + 1, Lit(tuple(cps)) if cps else None  # "" is no symbol at all in llama.cpp

    def char_class(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        start = pos
        pos += 1
        negated = self.ch(pos) == "^"
        if negated:
            pos += 1
        ranges: list[tuple[int, int]] = []
        while self.ch(pos) != "]":
            if self.ch(pos) == "":
                raise self.error("unterminated character class", start, "a closing ']'")
            lo_pos = pos
            lo, pos = self.parse_char(pos)
            if self.ch(pos) == "-" and self.ch(pos + 1) not in ("]", ""):
                upper, pos = self.parse_char(pos + 1)
                ranges.append((lo, upper))  # lo > upper is an empty range; ends are clipped later
            elif self.ch(pos) == "-" and self.ch(pos + 1) == "":
                raise self.error("unexpected end of input", pos + 1, "a range end")
            else:
                lo = self.scalar(lo, lo_pos)
                ranges.append((lo, lo))
        if not ranges:
            raise Unsupported(
                "gbnf-empty-class",
                self.rule,
                f"'{self.text[start : pos + 1]}' at {self.at(start)}: llama.cpp reads an empty class as no "
                "symbol at all (matching the empty string), other engines as no character; "
                'write "" or remove it',
            )
        return pos + 1, Chars(tuple(ranges), negated)

    def rule_ref(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        end = self.parse_name(pos)
        line, col = self.where(pos)
        ref = Ref(self.text[pos:end], line, col)
        self.refs.append((ref, self.rule))
        return end, ref

    def group(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        open_pos = pos
        pos = self.parse_space(pos + 1, True)
        pos, body = self.parse_alternates(pos, True, depth + 1)
        if self.ch(pos) != ")":
            raise self.error("expecting ')'", pos, f"')' closing the '(' at {self.at(open_pos)}")
        return pos + 1, body

    def any_char(self, pos: int, depth: int) -> tuple[int, Expr | None]:
        return pos + 1, Chars(((0, MAX_CODE_POINT),), False)

    _SYMBOLS: dict[str, Callable[[_Reader, int, int], tuple[int, Expr | None]]] = {
        '"': string_literal,
        "[": char_class,
        "(": group,
        ".": any_char,
    }

    def repetition(self, pos: int, nested: bool) -> tuple[int, int, int | None]:
        """``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}`` -> (position after it, min, max or None)."""
        c = self.text[pos]
        hi: int | None
        if c != "{":
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            return self.parse_space(pos + 1, nested), lo, hi
        op_pos = pos
        pos = self.parse_space(pos + 1, nested)
        lo, pos = self.parse_int(pos)
        pos = self.parse_space(pos, nested)
        if self.ch(pos) == "}":
            hi = lo
        elif self.ch(pos) == ",":
            pos = self.parse_space(pos + 1, nested)
            hi = None
            if "0" <= self.ch(pos) <= "9":
                hi, pos = self.parse_int(pos)
                pos = self.parse_space(pos, nested)
            if self.ch(pos) != "}":
                raise self.error("expecting '}'", pos, "'{m}', '{m,}' or '{m,n}'")
        else:
            raise self.error("expecting ',' or '}'", pos, "'{m}', '{m,}' or '{m,n}'")
        if hi is not None and hi < lo:
            raise Unsupported(
                "gbnf-repetition",
                self.rule,
                f"'{{{lo},{hi}}}' at {self.at(op_pos)} has max < min (llama.cpp silently reads "
                f"'{{{lo}}}'); write the count you mean",
            )
        return self.parse_space(pos + 1, nested), lo, hi


def parse_gbnf(text: str, limits: Limits | None = None) -> dict[str, GbnfRule]:
    """Parse GBNF text into rules (syntax only; names are not resolved). Raises ``SpecError``."""
    return _parse(text, limits or Limits())[0]


def _parse(text: str, limits: Limits) -> tuple[dict[str, GbnfRule], list[tuple[Ref, str]]]:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.schema_bytes:
        raise LimitExceeded("schema_bytes", size, limits.schema_bytes, "gbnf")
    reader = _Reader(text, limits)
    return reader.parse(), reader.refs


# -- static checks ----------------------------------------------------------------------------------


def _nullable(e: Expr, rule_nullable: Callable[[str], bool]) -> bool:
    if isinstance(e, Lit):
        return False  # literals are never empty (an empty literal is no symbol)
    if isinstance(e, Chars):
        return False
    if isinstance(e, Ref):
        return rule_nullable(e.name)
    if isinstance(e, SeqE):
        return all(_nullable(i, rule_nullable) for i in e.items)
    if isinstance(e, AltE):
        return any(_nullable(o, rule_nullable) for o in e.options)
    return e.min == 0 or _nullable(e.item, rule_nullable)


def _left_refs(e: Expr, nullable: Callable[[Expr], bool], out: list[str]) -> None:
    """Rules ``e`` may call before reading anything (as ``_ir._left_calls``)."""
    if isinstance(e, Ref):
        out.append(e.name)
    elif isinstance(e, SeqE):
        for i in e.items:
            _left_refs(i, nullable, out)
            if not nullable(i):
                break
    elif isinstance(e, AltE):
        for o in e.options:
            _left_refs(o, nullable, out)
    elif isinstance(e, RepE):
        _left_refs(e.item, nullable, out)


def _refs(e: Expr, out: list[str]) -> None:
    if isinstance(e, Ref):
        out.append(e.name)
    elif isinstance(e, SeqE):
        for i in e.items:
            _refs(i, out)
    elif isinstance(e, AltE):
        for o in e.options:
            _refs(o, out)
    elif isinstance(e, RepE):
        _refs(e.item, out)


def _check_left_recursion(rules: dict[str, GbnfRule]) -> None:
    null = dict.fromkeys(rules, False)
    changed = True
    while changed:
        changed = False
        for name, r in rules.items():
            if not null[name] and _nullable(r.body, null.__getitem__):
                null[name] = changed = True

    def nullable(e: Expr) -> bool:
        return _nullable(e, null.__getitem__)

    graph: dict[str, list[str]] = {}
    for name, r in rules.items():
        calls: list[str] = []
        _left_refs(r.body, nullable, calls)
        graph[name] = list(dict.fromkeys(calls))
    cycle = find_cycle(list(rules), graph.__getitem__)
    if cycle is not None:
        w = cycle[0]
        r = rules[w]
        raise Unsupported(
            "gbnf-left-recursion",
            w,
            f"rule {w!r} (line {r.line}) reaches itself without reading a character: "
            f"{' -> '.join(cycle)}; llama.cpp refuses this too. Rewrite it with repetition, "
            "e.g. 'expr ::= term (\"+\" term)*'",
        )


def _sccs(names: list[str], graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative; emitted dependencies-first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in names:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            succ = graph[v]
            if i < len(succ):
                work[-1] = (v, i + 1)
                w = succ[i]
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp: list[str] = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


# -- regular pieces: NFA over component DFAs, subset construction ----------------------------------------


class _TooBig(Exception):
    pass


class _Empty:
    """The empty language (no string at all); distinct from the empty string."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()
_NOT_REGULAR = object()
RegValue = ByteDFA | _Empty


class _Nfa:
    """Thompson-style NFA over bytes with epsilon moves; fragments are (entry, exit) pairs."""

    def __init__(self) -> None:
        self.trans: list[dict[int, list[int]]] = []
        self.eps: list[list[int]] = []

    def state(self) -> int:
        self.trans.append({})
        self.eps.append([])
        return len(self.trans) - 1

    def embed(self, rows: list[dict[int, int]], finals: Iterable[int]) -> tuple[int, int]:
        base = len(self.trans)
        for row in rows:
            self.trans.append({b: [base + t] for b, t in row.items()})
            self.eps.append([])
        end = self.state()
        for f in finals:
            self.eps[base + f].append(end)
        return base, end


def _determinize(nfa: _Nfa, start: int, final: int, cap: int, deadline: Deadline) -> RegValue:
    """Subset construction (Rabin & Scott 1959) over bytes, then ``ByteDFA.build`` minimizes."""
    eps = nfa.eps
    closures: dict[frozenset[int], frozenset[int]] = {}

    def closure(states: frozenset[int]) -> frozenset[int]:
        got = closures.get(states)
        if got is None:
            seen = set(states)
            todo = list(states)
            while todo:
                for t in eps[todo.pop()]:
                    if t not in seen:
                        seen.add(t)
                        todo.append(t)
            got = closures[states] = frozenset(seen)
        return got

    s0 = closure(frozenset((start,)))
    ids = {s0: 0}
    order = [s0]
    table: dict[int, dict[int, int]] = {}
    finals: list[int] = []
    i = 0
    while i < len(order):
        cur = order[i]
        if final in cur:
            finals.append(i)
        row: dict[int, set[int]] = {}
        for q in cur:
            for b, ts in nfa.trans[q].items():
                row.setdefault(b, set()).update(ts)
        out: dict[int, int] = {}
        by_targets: dict[frozenset[int], int] = {}
        for b, targets in row.items():
            key = frozenset(targets)
            j = by_targets.get(key)
            if j is None:
                nxt = closure(key)
                j = ids.get(nxt)
                if j is None:
                    j = ids[nxt] = len(order)
                    order.append(nxt)
                    if len(order) > cap:
                        raise _TooBig
                by_targets[key] = j
            out[b] = j
        table[i] = out
        i += 1
        if i % 256 == 0:
            deadline.check("gbnf subset construction")
    if not finals or ByteDFA.is_empty_language(table, 0, finals):
        return EMPTY
    return ByteDFA.build(table, 0, finals)


class _Regular:
    """Thompson NFAs over AST pieces whose leaves are lexeme DFAs; one subset construction per piece."""

    def __init__(self, deadline: Deadline, cap: int, leaf: Callable[[Expr], RegValue]) -> None:
        self.deadline = deadline
        self.cap = cap
        self.leaf = leaf  # the DFA (or EMPTY) of a Chars / Lit / regular Ref
        self._rows: dict[object, tuple[list[dict[int, int]], frozenset[int]]] = {}
        self._classes: dict[tuple[tuple[int, int], ...], RegValue] = {}

    def rows(self, d: ByteDFA) -> tuple[list[dict[int, int]], frozenset[int]]:
        got = self._rows.get(d.key)
        if got is None:
            t = d.transitions()
            got = self._rows[d.key] = ([t[s] for s in range(d.num_states)], d.finals)
        return got

    def chars(self, c: Chars) -> RegValue:
        ranges = _scalar_ranges(c)
        got = self._classes.get(ranges)
        if got is None:
            nfa = _Nfa()
            start, end = nfa.state(), nfa.state()
            for lo, hi in ranges:
                for seq in utf8_sequences(lo, hi):
                    prev = start
                    for k, (blo, bhi) in enumerate(seq):
                        nxt = end if k == len(seq) - 1 else nfa.state()
                        for byte in range(blo, bhi + 1):
                            nfa.trans[prev].setdefault(byte, []).append(nxt)
                        prev = nxt
            got = self._classes[ranges] = _determinize(nfa, start, end, 1 << 30, self.deadline)
        return got

    def frag(self, nfa: _Nfa, e: Expr) -> tuple[int, int]:
        """Thompson's construction (Thompson 1968): a fragment with one entry and one exit."""
        if isinstance(e, Lit):
            start = cur = nfa.state()
            for byte in _utf8(e):
                nxt = nfa.state()
                nfa.trans[cur][byte] = [nxt]
                cur = nxt
            return start, cur
        if isinstance(e, (Chars, Ref)):
            v = self.leaf(e)
            if isinstance(v, _Empty):
                return nfa.state(), nfa.state()  # no path from entry to exit
            rows, finals = self.rows(v)
            return nfa.embed(rows, finals)
        if isinstance(e, SeqE):
            start = cur = nfa.state()
            for item in e.items:
                s, t = self.frag(nfa, item)
                nfa.eps[cur].append(s)
                cur = t
            return start, cur
        if isinstance(e, AltE):
            start, end = nfa.state(), nfa.state()
            for o in e.options:
                s, t = self.frag(nfa, o)
                nfa.eps[start].append(s)
                nfa.eps[t].append(end)
            return start, end
        start = cur = nfa.state()
        for _ in range(e.min):
            s, t = self.frag(nfa, e.item)
            nfa.eps[cur].append(s)
            cur = t
        end = nfa.state()
        nfa.eps[cur].append(end)
        if e.max is None:  # item* : loop back through one more copy
            s, t = self.frag(nfa, e.item)
            nfa.eps[cur].append(s)
            nfa.eps[t].append(cur)
        else:  # item (item (item)?)? ... : every further copy may stop
            for _ in range(e.max - e.min):
                s, t = self.frag(nfa, e.item)
                nfa.eps[cur].append(s)
                nfa.eps[t].append(end)
                cur = t
        return start, end

    def dfa(self, e: Expr) -> RegValue:
        """The minimal DFA of ``e`` (all of whose references are regular); ``_TooBig`` over the cap."""
        nfa = _Nfa()
        s, t = self.frag(nfa, e)
        return _determinize(nfa, s, t, self.cap, self.deadline)


def _utf8(e: Lit) -> bytes:
    return "".join(map(chr, e.cps)).encode("utf-8")


def _scalar_ranges(c: Chars) -> tuple[tuple[int, int], ...]:
    """The class as a normalized set of scalar values (negation applied; see ``_cpset``)."""
    ranges = _cpset.normalize(c.ranges)
    return _cpset.complement(ranges) if c.negated else ranges


# -- the compiler ------------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, rules: dict[str, GbnfRule], limits: Limits, merge: bool) -> None:
        self.rules = rules
        self.limits = limits
        self.merge = merge
        self.deadline = Deadline(limits.compile_seconds)
        self.reg = _Regular(self.deadline, min(_MERGE_CAP, limits.automaton_states), self.leaf)
        self.builder = GrammarBuilder()
        self.rule_value: dict[str, object] = {}  # RegValue, or _NOT_REGULAR
        self.rule_nodes: dict[str, int] = {}
        self.pending: list[str] = []
        self._reg_memo: dict[int, object] = {}
        self._size_memo: dict[int, int] = {}
        self._node_memo: dict[int, int] = {}
        self._unproductive: int | None = None

    # -- regular values
    def leaf(self, e: Expr) -> RegValue:
        if isinstance(e, Chars):
            return self.reg.chars(e)
        if isinstance(e, Lit):
            return ByteDFA.literal(_utf8(e))
        assert isinstance(e, Ref)
        v = self.rule_value[e.name]
        assert isinstance(v, (ByteDFA, _Empty))
        return v

    def size(self, e: Expr) -> int:
        """An upper bound on the Thompson NFA's states; ``_HUGE`` when ``e`` is not regular."""
        got = self._size_memo.get(id(e))
        if got is None:
            got = self._size_memo[id(e)] = min(self._size(e), _HUGE)
        return got

    def _size(self, e: Expr) -> int:
        if isinstance(e, Lit):
            return len(_utf8(e)) + 1
        if isinstance(e, Chars) or (isinstance(e, Ref) and self.rule_value[e.name] is not _NOT_REGULAR):
            v = self.leaf(e)
            return v.num_states + 1 if isinstance(v, ByteDFA) else 2
        if isinstance(e, Ref):
            return _HUGE
        if isinstance(e, SeqE):
            return sum(self.size(i) for i in e.items) + 1
        if isinstance(e, AltE):
            return sum(self.size(o) for o in e.options) + 2
        copies = e.min + (1 if e.max is None else e.max - e.min)
        return max(copies, 1) * self.size(e.item) + 2

    def regular(self, e: Expr) -> object:
        """``e``'s language as a DFA or EMPTY, or ``_NOT_REGULAR`` (recursive, too big, or merging off)."""
        got = self._reg_memo.get(id(e))
        if got is None:
            got = self._reg_memo[id(e)] = self._regular(e)
        return got

    def _regular(self, e: Expr) -> object:
        if isinstance(e, (Chars, Lit)):
            return self.leaf(e)
        if isinstance(e, Ref):
            return self.rule_value[e.name]
        if not self.merge or self.size(e) > 4 * self.reg.cap:
            return _NOT_REGULAR
        try:
            return self.reg.dfa(e)
        except _TooBig:
            return _NOT_REGULAR

    # -- nodes
    def unproductive(self) -> int:
        if self._unproductive is None:
            self._unproductive = self.builder.add(_alt_none())
        return self._unproductive

    def value_node(self, v: object) -> int:
        if v is EMPTY:
            return self.unproductive()
        assert isinstance(v, ByteDFA)
        return self.builder.lex(v)

    def node(self, e: Expr) -> int:
        got = self._node_memo.get(id(e))
        if got is None:
            got = self._node_memo[id(e)] = self._node(e)
        return got

    def _node(self, e: Expr) -> int:
        v = self.regular(e)
        if v is not _NOT_REGULAR:
            return self.value_node(v)
        b = self.builder
        if isinstance(e, Ref):
            return self.rule_node(e.name)
        if isinstance(e, SeqE):
            items: list[int] = []
            run: list[Expr] = []
            for item in e.items:
                if self.size(item) < _HUGE:
                    run.append(item)
                else:
                    items.extend(self.merged_runs(run, SeqE))
                    run = []
                    items.append(self.node(item))
            items.extend(self.merged_runs(run, SeqE))
            return b.seq(items)
        if isinstance(e, AltE):
            options = self.merged_runs([o for o in e.options if self.size(o) < _HUGE], AltE)
            options += [self.node(o) for o in e.options if self.size(o) >= _HUGE]
            return b.alt(options) if options else self.unproductive()
        assert isinstance(e, RepE)
        return b.repeat(self.node(e.item), e.min, e.max)

    def merged_runs(self, run: list[Expr], kind: Callable[[tuple[Expr, ...]], Expr]) -> list[int]:
        """Nodes for consecutive regular pieces, combined (by ``SeqE`` or ``AltE``) into as few DFAs as
        fit under the cap: batches by size estimate, halved while a batch's DFA is still too big."""
        if not self.merge:
            return [self.node(e) for e in run]
        batches: list[list[Expr]] = []
        size = 0
        for e in run:
            if not batches or size + self.size(e) > 4 * self.reg.cap:
                batches.append([])
                size = 0
            batches[-1].append(e)
            size += self.size(e)
        out: list[int] = []
        while batches:
            batch = batches.pop(0)
            if len(batch) == 1:
                out.append(self.node(batch[0]))
                continue
            try:
                v = self.reg.dfa(kind(tuple(batch)))
            except _TooBig:
                half = len(batch) // 2
                batches[:0] = [batch[:half], batch[half:]]
                continue
            out.append(self.value_node(v))
        return out

    def rule_node(self, name: str) -> int:
        nid = self.rule_nodes.get(name)
        if nid is None:
            v = self.rule_value[name]
            if v is not _NOT_REGULAR:
                nid = self.value_node(v)
            else:
                nid = self.builder.reserve()
                self.pending.append(name)
            self.rule_nodes[name] = nid
        return nid

    # -- driver
    def compile(self, root: str) -> Network:
        rules = self.rules
        graph: dict[str, list[str]] = {}
        for name, r in rules.items():
            refs: list[str] = []
            _refs(r.body, refs)
            graph[name] = list(dict.fromkeys(refs))
        reachable = [root]
        seen = {root}
        for name in reachable:
            for w in graph[name]:
                if w not in seen:
                    seen.add(w)
                    reachable.append(w)
        for comp in _sccs(reachable, graph):
            self.deadline.check("gbnf rules")
            recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
            for name in comp:
                if recursive or any(self.rule_value[w] is _NOT_REGULAR for w in graph[name]):
                    self.rule_value[name] = _NOT_REGULAR
                else:
                    self.rule_value[name] = self.regular(rules[name].body)
        root_node = self.rule_node(root)
        while self.pending:
            self.deadline.check("gbnf rules")
            name = self.pending.pop()
            body = self.node(rules[name].body)
            self.builder.define(self.rule_nodes[name], _call(body))
        try:
            network = self.builder.finish(root_node)
        except Unsupported as e:  # the AST check refuses first; this is a safety net
            raise Unsupported("gbnf-left-recursion", root, e.reason) from e
        self.check_size(network)
        return network

    def check_size(self, network: Network) -> None:
        keys: dict[object, int] = {}
        for n in network.nodes:
            if isinstance(n, Lex) and isinstance(n.lexeme, ByteDFA):
                keys[n.lexeme.key] = n.lexeme.num_states
        total = sum(keys.values()) + len(network.nodes)
        if total > self.limits.automaton_states:
            raise LimitExceeded("automaton_states", total, self.limits.automaton_states, "gbnf")


def _alt_none() -> Alt:
    return Alt(())


def _call(body: int) -> Seq:
    return Seq((body,))


def compile_gbnf_network(spec: Gbnf, limits: Limits, *, merge_regular: bool = True) -> Network:
    """Compile a GBNF grammar. ``merge_regular=False`` keeps every construct structural (for tests)."""
    rules, refs = _parse(spec.text, limits)
    if spec.root not in rules:
        raise SpecError(
            f"root rule {spec.root!r} is not defined",
            "grammar",
            f"a rule '{spec.root} ::= ...' (defined: {', '.join(sorted(rules)[:8]) or 'none'})",
        )
    for ref, in_rule in refs:  # every reference, also those a '{0}' dropped (llama.cpp checks them)
        if ref.name not in rules:
            raise SpecError(
                f"undefined rule {ref.name!r}",
                f"line {ref.line} col {ref.col} (rule {in_rule})",
                f"a definition '{ref.name} ::= ...'",
            )
    _check_left_recursion(rules)
    return _Compiler(rules, limits, merge_regular).compile(spec.root)
