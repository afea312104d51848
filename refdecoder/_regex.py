"""Regular expressions compiled to exact :class:`~refdecoder._fsa.CodepointDFA` languages.

Two flavours, one back end:

* ``flavor="python"``: Python ``re`` str patterns with default flags. The pattern is first compiled
  by ``re`` itself (so a pattern is malformed exactly when Python says so, at Python's offset), then
  translated from ``re``'s own parse tree (``re._parser``; ``sre_parse`` on 3.10), so every quirk of
  ``re`` syntax (octal vs. group references, ``{`` as a literal, ``]`` first in a class, verbose
  mode, ...) is Python's by construction. ``\\d \\w \\s`` are the code point sets ``re`` matches,
  measured once (:mod:`refdecoder._cpclasses`).
* ``flavor="ecma"``: ECMA-262 as used by JSON Schema ``pattern``: the ``u`` flag's Unicode semantics
  (the pattern and the subject are sequences of code points; ``\\u{...}``, ``\\p{...}``, surrogate
  pair escapes denote one code point), no other flags. Where ``u`` mode calls a pattern a syntax
  error but Annex B reads it as a plain literal (a lone ``]``, ``{`` or ``}``; an identity escape
  of a non-alphanumeric character such as ``\\:``; ``[\\w-x]``), we take the Annex B literal, since
  no engine reads it otherwise. Escapes whose meaning differs between the modes (``\\a``, ``\\1``
  when there is no group, ``\\c`` without a letter, ``\\u`` without hex digits, ...) are refused.

Semantics (docs/design.md §2: exact or refuse). Lazy quantifiers denote the same language as greedy ones
(without backreferences, ordered choice only affects *which* match is found, not whether one
exists). Anchors are zero-width assertions about the position: ``^``/``\\A`` hold at 0, ``\\Z``
and ECMA ``$`` at the end, Python's ``$`` at the end or just before a final ``"\\n"``. They are
handled exactly, anywhere in the pattern, by a product of the Thompson NFA with a six-state
*phase* automaton (still at position 0? / no end promised, end promised, "exactly one \\n then
end" promised); ``search`` mode is ``Σ* p Σ*`` built the same way. Refused with
:class:`~refdecoder.errors.Unsupported`: backreferences, lookaround, ``\\b``/``\\B``, atomic groups,
possessive quantifiers, conditionals, Python's flags ``i`` and ``m`` (the latter where an anchor
is under it), ECMA modifiers ``(?i:...)``, and ECMA ``\\p{...}`` properties other than
General_Category values, ``Any``, ``ASCII``, ``Assigned`` and ``ASCII_Hex_Digit``. Subjects are
strings of scalar values: an escape of a lone surrogate matches nothing.
"""

from __future__ import annotations

import importlib
import re
import warnings
from functools import lru_cache
from typing import Any, Literal

from refdecoder._cpclasses import (
    ECMA_LINE_TERMINATORS,
    ecma_class,
    python_category,
    python_dot,
    unicode_property,
)
from refdecoder._cpset import ALPHABET, CPSet, complement, normalize, union
from refdecoder._fsa import CodepointDFA, Nfa, canonical, determinize, dfa_bound
from refdecoder._lexeme import ByteDFA
from refdecoder._limits import Limits, check_bound, current_limits
from refdecoder.errors import LimitExceeded, SpecError, Unsupported

__all__ = ["compile_regex_dfa", "regex_byte_dfa", "MAX_REGEX_NFA_STATES", "Flavor", "Mode"]

Flavor = Literal["python", "ecma"]
Mode = Literal["fullmatch", "search"]

#: The default bound on the Thompson NFA of one pattern (counted repetitions are expanded): a fifth
#: of ``Limits.nfa_states`` (its anchor-phase product may take two fifths), see :func:`_regex_nfa_bound`.
MAX_REGEX_NFA_STATES = Limits().nfa_states // 5


def _regex_nfa_bound() -> int:
    """The running compilation's bound on one pattern's Thompson NFA (``Limits.nfa_states`` / 5)."""
    return current_limits().nfa_states // 5


try:  # Python >= 3.11
    _sre_parse: Any = importlib.import_module("re._parser")
    _sre_const: Any = importlib.import_module("re._constants")
except ImportError:  # pragma: no cover - Python 3.10
    _sre_parse = importlib.import_module("sre_parse")
    _sre_const = importlib.import_module("sre_constants")

# -- the shared syntax tree ---------------------------------------------------------------------
# ("c", CPSet)                 one code point from the set
# ("cat", (node, ...))         concatenation (empty tuple: the empty string)
# ("alt", (node, ...))         alternation
# ("rep", node, lo, hi|None)   counted repetition
# ("at", "bos"|"eos"|"eos_nl") zero-width assertion: start / end / end-or-before-final-newline
Node = tuple[Any, ...]
_EMPTY: Node = ("cat", ())


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------
def compile_regex_dfa(
    pattern: str,
    *,
    flavor: Flavor,
    mode: Mode,
    where: str = "",
    max_states: int | None = None,
) -> CodepointDFA:
    """The exact language of ``pattern`` as a code point DFA (memoized).

    ``mode="fullmatch"``: strings the whole of which the pattern matches (``re.fullmatch``);
    ``mode="search"``: strings some substring of which it matches (``re.search``, JSON Schema
    ``pattern``). ``where`` (a JSON pointer) is carried into errors. Raises :class:`SpecError`
    for malformed patterns (``where`` names the offset), :class:`Unsupported` for constructs that
    are refused, :class:`LimitExceeded` past ``max_states`` DFA states (default: the running
    compilation's ``Limits.dfa_states``).
    """
    if flavor not in ("python", "ecma"):
        raise ValueError(f"unknown regex flavor {flavor!r}")
    if mode not in ("fullmatch", "search"):
        raise ValueError(f"unknown regex mode {mode!r}")
    try:
        return _compile_cached(pattern, flavor, mode, dfa_bound(max_states), current_limits().repeat_bound)
    except SpecError as e:
        raise SpecError(e.what, f"{where} ({e.where})" if where else e.where, e.expected) from None
    except Unsupported as e:
        raise Unsupported(e.keyword, where, e.reason) from None
    except LimitExceeded as e:
        raise LimitExceeded(e.limit, e.value, e.bound, where) from None


def regex_byte_dfa(pattern: str, *, where: str = "", max_states: int | None = None) -> ByteDFA:
    """UTF-8 byte DFA of ``re.fullmatch(pattern, s)`` (python flavour), for ``Regex`` specs.

    Raises ValueError when no string matches (a ByteDFA cannot be empty; test
    ``compile_regex_dfa(...).is_empty()`` first).
    """
    dfa = compile_regex_dfa(pattern, flavor="python", mode="fullmatch", where=where, max_states=max_states)
    return dfa.to_utf8()


@lru_cache(maxsize=2048)
def _compile_cached(
    pattern: str, flavor: Flavor, mode: Mode, max_states: int, repeat_bound: int
) -> CodepointDFA:
    # repeat_bound is part of the key: a pattern refused under one limit is not served from the cache
    # under another (nor the reverse).
    node = _parse_python(pattern) if flavor == "python" else _EcmaParser(pattern).parse()
    return _compile_node(node, mode, max_states)


def _unsupported(reason: str, offset: int | None = None) -> Unsupported:
    at = f" (offset {offset})" if offset is not None else ""
    return Unsupported("regex", "", reason + at)


# ---------------------------------------------------------------------------------------------
# Python flavour: translate re's own parse tree
# ---------------------------------------------------------------------------------------------
_F_IGNORECASE = int(re.IGNORECASE)
_F_MULTILINE = int(re.MULTILINE)
_F_DOTALL = int(re.DOTALL)
_F_ASCII = int(re.ASCII)


def _parse_python(pattern: str) -> Node:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(pattern)
        except re.error as e:
            raise SpecError(
                f"invalid Python regex: {e.msg}", f"offset {e.pos}", "a valid Python `re` pattern"
            ) from None
        except (OverflowError, RecursionError) as e:
            raise SpecError(f"invalid Python regex: {e}", "offset 0", "a valid Python `re` pattern") from None
        tree = _sre_parse.parse(pattern)
    return _PyTranslator().sub(tree, int(tree.state.flags))


class _PyTranslator:
    def __init__(self) -> None:
        self.maxrepeat = int(_sre_const.MAXREPEAT)

    def sub(self, items: Any, flags: int) -> Node:
        return ("cat", tuple(self.op(op, av, flags) for op, av in items))

    def chars(self, cps: CPSet, flags: int) -> Node:
        if flags & _F_IGNORECASE:
            raise _unsupported("case-insensitive matching (flag i) is not supported")
        return ("c", cps)

    def category(self, name: str, flags: int) -> CPSet:
        letter = {
            "CATEGORY_DIGIT": "d",
            "CATEGORY_NOT_DIGIT": "D",
            "CATEGORY_SPACE": "s",
            "CATEGORY_NOT_SPACE": "S",
            "CATEGORY_WORD": "w",
            "CATEGORY_NOT_WORD": "W",
        }.get(name)
        if letter is None:
            raise _unsupported(f"character category {name}")
        return python_category(letter, bool(flags & _F_ASCII))

    def op(self, op: Any, av: Any, flags: int) -> Node:
        name = op.name
        if name == "LITERAL":
            return self.chars(normalize([(av, av)]), flags)
        if name == "NOT_LITERAL":
            return self.chars(complement(normalize([(av, av)])), flags)
        if name == "ANY":
            return ("c", python_dot(bool(flags & _F_DOTALL)))
        if name == "IN":
            return self.chars(self.charset(av, flags), flags)
        if name == "BRANCH":
            return ("alt", tuple(self.sub(p, flags) for p in av[1]))
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, p = av
            return self.sub(p, (flags | add_flags) & ~del_flags)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, p = av
            return ("rep", self.sub(p, flags), int(lo), None if hi == self.maxrepeat else int(hi))
        if name == "AT":
            code = av.name
            if code in ("AT_BEGINNING", "AT_END") and flags & _F_MULTILINE:
                raise _unsupported("multiline anchors (flag m) are not supported")
            kind = {
                "AT_BEGINNING": "bos",
                "AT_BEGINNING_STRING": "bos",
                "AT_END": "eos_nl",
                "AT_END_STRING": "eos",
            }.get(code)
            if kind is None:
                raise _unsupported("word boundaries (\\b, \\B) are not supported")
            return ("at", kind)
        reasons = {
            "GROUPREF": "backreferences are not regular",
            "GROUPREF_EXISTS": "conditional groups (?(id)...) are not supported",
            "ASSERT": "lookaround assertions are not supported",
            "ASSERT_NOT": "lookaround assertions are not supported",
            "ATOMIC_GROUP": "atomic groups (?>...) are not supported",
            "POSSESSIVE_REPEAT": "possessive quantifiers are not supported",
        }
        raise _unsupported(reasons.get(name, f"regex construct {name}"))

    def charset(self, items: Any, flags: int) -> CPSet:
        negate = False
        parts: list[CPSet] = []
        for op, av in items:
            name = op.name
            if name == "NEGATE":
                negate = True
            elif name == "LITERAL":
                parts.append(normalize([(av, av)]))
            elif name == "RANGE":
                parts.append(normalize([(av[0], av[1])]))
            elif name == "CATEGORY":
                parts.append(self.category(av.name, flags))
            else:
                raise _unsupported(f"character set item {name}")
        s = union(*parts)
        return complement(s) if negate else s


# ---------------------------------------------------------------------------------------------
# ECMA-262 flavour: a recursive-descent parser (ECMA-262 §22.2.1, u flag, Annex B literals)
# ---------------------------------------------------------------------------------------------
_SYNTAX = frozenset("^$\\.*+?()[]{}|")
_CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_HEX = frozenset("0123456789abcdefABCDEF")
_BRACED = re.compile(r"\{([0-9]+)(?:(,)([0-9]*))?\}")
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


class _EcmaParser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.n = len(pattern)
        self.i = 0

    # -- helpers --------------------------------------------------------------------------------
    def error(self, what: str, expected: str, at: int | None = None) -> SpecError:
        return SpecError(
            f"invalid ECMA-262 regex: {what}", f"offset {self.i if at is None else at}", expected
        )

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < self.n else ""

    def hex_run(self, start: int, count: int) -> int | None:
        chunk = self.p[start : start + count]
        if len(chunk) == count and all(c in _HEX for c in chunk):
            return int(chunk, 16)
        return None

    # -- grammar --------------------------------------------------------------------------------
    def parse(self) -> Node:
        node = self.disjunction()
        if self.i < self.n:
            raise self.error("unmatched ')'", "end of pattern")
        return node

    def disjunction(self) -> Node:
        alts = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.alternative())
        return alts[0] if len(alts) == 1 else ("alt", tuple(alts))

    def alternative(self) -> Node:
        items: list[Node] = []
        while self.i < self.n and self.p[self.i] not in "|)":
            items.append(self.term())
        return ("cat", tuple(items))

    def term(self) -> Node:
        start = self.i
        c = self.p[self.i]
        if c == "^":
            self.i += 1
            node: Node = ("at", "bos")
            quantifiable = False
        elif c == "$":
            self.i += 1
            node = ("at", "eos")
            quantifiable = False
        elif self.p.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.i):
            raise _unsupported("lookaround assertions are not supported", start)
        elif c == "\\" and self.peek(1) in ("b", "B"):
            raise _unsupported("word boundaries (\\b, \\B) are not supported", start)
        else:
            node = self.atom()
            quantifiable = True
        q_at = self.i
        q = self.quantifier()
        if q is None:
            return node
        if not quantifiable:
            raise self.error("nothing to repeat", "an atom before the quantifier", q_at)
        lo, hi = q
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and _BRACED.match(self.p, self.i)):
            raise self.error("nothing to repeat", "one quantifier per atom")
        return ("rep", node, lo, hi)

    def quantifier(self) -> tuple[int, int | None] | None:
        c = self.peek()
        q: tuple[int, int | None]
        if c == "*":
            q = (0, None)
            self.i += 1
        elif c == "+":
            q = (1, None)
            self.i += 1
        elif c == "?":
            q = (0, 1)
            self.i += 1
        elif c == "{":
            m = _BRACED.match(self.p, self.i)
            if m is None:
                return None  # Annex B: a literal '{', read by the next term
            if max(len(m.group(1)), len(m.group(3) or "")) > 12:  # before int(): no 4300-digit parse
                raise LimitExceeded("repeat_bound", m.group(0)[:40], current_limits().repeat_bound)
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            if hi is not None and hi < lo:
                raise self.error("numbers out of order in {} quantifier", "min <= max")
            check_bound("regex {n,m}", max(lo, hi or 0))
            self.i = m.end()
            q = (lo, hi)
        else:
            return None
        if self.peek() == "?":
            self.i += 1  # lazy: same language
        return q

    def atom(self) -> Node:
        c = self.p[self.i]
        if c == ".":
            self.i += 1
            return ("c", complement(ECMA_LINE_TERMINATORS))
        if c == "(":
            return self.group()
        if c == "[":
            return ("c", self.char_class())
        if c == "\\":
            return self.atom_escape()
        if c in "*+?":
            raise self.error("nothing to repeat", "an atom before the quantifier")
        if c == "{" and _BRACED.match(self.p, self.i):
            raise self.error("nothing to repeat", "an atom before the quantifier")
        self.i += 1  # a pattern character; ']', '{', '}' are Annex B literals
        return ("c", normalize([(ord(c), ord(c))]))

    def group(self) -> Node:
        start = self.i
        if self.p.startswith("(?:", self.i):
            self.i += 3
        elif self.p.startswith("(?<", self.i):
            end = self.p.find(">", self.i + 3)
            name = self.p[self.i + 3 : end] if end >= 0 else ""
            if end < 0 or not name or not name.replace("$", "_").isidentifier():
                raise self.error("invalid group name", "(?<name>...) with an identifier name")
            self.i = end + 1
        elif self.p.startswith("(?", self.i):
            if re.match(r"\(\?[a-zA-Z]*(-[a-zA-Z]*)?:", self.p[self.i :]):
                raise _unsupported("regex modifiers (?flags:...) are not supported", start)
            raise self.error("invalid group", "(?:, (?<name>, (?=, (?!, (?<= or (?<!")
        else:
            self.i += 1
        node = self.disjunction()
        if self.peek() != ")":
            raise self.error("unterminated group", "')'", self.i)
        self.i += 1
        return node

    def atom_escape(self) -> Node:
        start = self.i
        self.i += 1
        c = self.peek()
        if not c:
            raise self.error("\\ at end of pattern", "an escape")
        if c in "dDwWsS":
            self.i += 1
            return ("c", ecma_class(c))
        if c in "pP":
            return ("c", self.property_escape())
        if c in "123456789":
            raise _unsupported("backreferences are not regular", start)
        if c == "k":
            raise _unsupported("named backreferences are not regular", start)
        cp = self.character_escape(start)
        return ("c", normalize([(cp, cp)]))

    def character_escape(self, start: int) -> int:
        """At the character after a backslash; returns the code point and moves past it."""
        c = self.peek()
        if c in _CONTROL_ESCAPES:
            self.i += 1
            return _CONTROL_ESCAPES[c]
        if c == "c":
            letter = self.peek(1)
            if letter and letter.isascii() and letter.isalpha():
                self.i += 2
                return ord(letter) % 32
            raise _unsupported("\\c without a letter (Annex B reads it literally, u mode rejects it)", start)
        if c == "0":
            if self.peek(1).isdigit() and self.peek(1).isascii():
                raise _unsupported("legacy octal escapes are not supported", start)
            self.i += 1
            return 0
        if c == "x":
            v = self.hex_run(self.i + 1, 2)
            if v is None:
                raise _unsupported("\\x without two hex digits (Annex B reads 'x')", start)
            self.i += 3
            return v
        if c == "u":
            if self.peek(1) == "{":
                end = self.p.find("}", self.i + 2)
                digits = self.p[self.i + 2 : end] if end >= 0 else ""
                if not digits or not all(d in _HEX for d in digits) or int(digits, 16) > 0x10FFFF:
                    raise self.error("invalid \\u{...} escape", "1 or more hex digits up to 10FFFF", start)
                self.i = end + 1
                return int(digits, 16)
            v = self.hex_run(self.i + 1, 4)
            if v is None:
                raise _unsupported("\\u without four hex digits (Annex B reads 'u')", start)
            self.i += 5
            if 0xD800 <= v <= 0xDBFF and self.p.startswith("\\u", self.i):
                lo = self.hex_run(self.i + 2, 4)
                if lo is not None and 0xDC00 <= lo <= 0xDFFF:
                    self.i += 6
                    return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
            return v  # a lone surrogate matches nothing in a string of scalar values
        if c in _ASCII_ALNUM:
            raise _unsupported(f"identity escape \\{c} (a syntax error in u mode, '{c}' in Annex B)", start)
        self.i += 1
        return ord(c)

    def property_escape(self) -> CPSet:
        start = self.i - 1
        negated = self.peek() == "P"
        if self.peek(1) != "{":
            raise self.error("invalid property escape", "\\p{...}")
        end = self.p.find("}", self.i + 2)
        if end < 0:
            raise self.error("unterminated property escape", "'}'")
        body = self.p[self.i + 2 : end]
        self.i = end + 1
        name, _, value = body.partition("=")
        cps = unicode_property(name, value if "=" in body else None)
        if cps is None:
            raise _unsupported(f"Unicode property \\p{{{body}}} is not supported", start)
        return complement(cps) if negated else cps

    def char_class(self) -> CPSet:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        parts: list[CPSet] = []
        while True:
            if self.i >= self.n:
                raise self.error("unterminated character class", "']'", start)
            if self.p[self.i] == "]":
                self.i += 1
                break
            at = self.i
            a = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                b = self.class_atom()
                if isinstance(a, int) and isinstance(b, int):
                    if a > b:
                        raise self.error("range out of order in character class", "lo <= hi", at)
                    parts.append(normalize([(a, b)]))
                else:  # Annex B: a class escape at a range end makes '-' a literal
                    parts += [_as_set(a), normalize([(0x2D, 0x2D)]), _as_set(b)]
            else:
                parts.append(_as_set(a))
        s = union(*parts)
        return complement(s) if negate else s

    def class_atom(self) -> int | CPSet:
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        start = self.i
        self.i += 1
        e = self.peek()
        if not e:
            raise self.error("\\ at end of pattern", "an escape")
        if e in "dDwWsS":
            self.i += 1
            return ecma_class(e)
        if e in "pP":
            return self.property_escape()
        if e == "b":
            self.i += 1
            return 0x08
        if e == "-":
            self.i += 1
            return 0x2D
        if e in "123456789":
            raise _unsupported(f"\\{e} in a character class (octal in Annex B, an error in u mode)", start)
        return self.character_escape(start)


def _as_set(x: int | CPSet) -> CPSet:
    return normalize([(x, x)]) if isinstance(x, int) else x


# ---------------------------------------------------------------------------------------------
# Back end: Thompson NFA, anchor phases, subset construction
# ---------------------------------------------------------------------------------------------
class _Thompson:
    def __init__(self) -> None:
        self.nfa = Nfa(_regex_nfa_bound())
        self.asserts: dict[int, list[tuple[str, int]]] = {}

    def build(self, node: Node) -> tuple[int, int]:
        nfa = self.nfa
        kind = node[0]
        if kind == "c":
            s, f = nfa.state(), nfa.state()
            for lo, hi in node[1]:
                nfa.edge(s, lo, hi, f)
            return s, f
        if kind == "cat":
            s = cur = nfa.state()
            for item in node[1]:
                a, b = self.build(item)
                nfa.epsilon(cur, a)
                cur = b
            return s, cur
        if kind == "alt":
            s, f = nfa.state(), nfa.state()
            for item in node[1]:
                a, b = self.build(item)
                nfa.epsilon(s, a)
                nfa.epsilon(b, f)
            return s, f
        if kind == "rep":
            item, lo, hi = node[1], node[2], node[3]
            s = cur = nfa.state()
            for _ in range(lo):
                a, b = self.build(item)
                nfa.epsilon(cur, a)
                cur = b
            if hi is None:
                loop = nfa.state()
                nfa.epsilon(cur, loop)
                a, b = self.build(item)
                nfa.epsilon(loop, a)
                nfa.epsilon(b, loop)
                return s, loop
            end = nfa.state()
            nfa.epsilon(cur, end)
            for _ in range(hi - lo):
                a, b = self.build(item)
                nfa.epsilon(cur, a)
                cur = b
                nfa.epsilon(cur, end)
            return s, end
        if kind == "at":
            s, f = nfa.state(), nfa.state()
            self.asserts.setdefault(s, []).append((node[1], f))
            return s, f
        raise AssertionError(f"unknown node {kind!r}")


# Phase of a thread: (at_start, end) with end 0 = free, 1 = must be at the end, 2 = exactly "\n"
# must follow and then the end (Python's `$` before a final newline).
_NL = 0x0A


def _phase_product(
    nfa: Nfa,
    asserts: dict[int, list[tuple[str, int]]],
    start: int,
    final: int,
    universal: list[int],
) -> tuple[Nfa, int, list[int], list[int]]:
    out = Nfa(_regex_nfa_bound() * 2)
    ids: dict[tuple[int, int, int], int] = {}
    queue: list[tuple[int, int, int]] = []

    def get(key: tuple[int, int, int]) -> int:
        j = ids.get(key)
        if j is None:
            j = ids[key] = out.state()
            queue.append(key)
        return j

    s0 = get((start, 1, 0))
    k = 0
    while k < len(queue):
        q, a, e = key = queue[k]
        k += 1
        src = ids[key]
        if e != 1:
            for lo, hi, t in nfa.edges[q]:
                if e == 2:
                    if lo <= _NL <= hi:
                        out.edge(src, _NL, _NL, get((t, 0, 1)))
                else:
                    out.edge(src, lo, hi, get((t, 0, 0)))
        for t in nfa.eps[q]:
            out.epsilon(src, get((t, a, e)))
        for kind, t in asserts.get(q, ()):
            if kind == "bos":
                if a:
                    out.epsilon(src, get((t, a, e)))
            elif kind == "eos":
                if e != 2:
                    out.epsilon(src, get((t, a, 1)))
            else:  # eos_nl
                if e == 0:
                    out.epsilon(src, get((t, a, 1)))
                    out.epsilon(src, get((t, a, 2)))
                else:
                    out.epsilon(src, get((t, a, e)))
    finals = [j for (q, _a, e), j in ids.items() if q == final and e != 2]
    univ = [j for (q, _a, e), j in ids.items() if q in universal and e == 0]
    return out, s0, finals, univ


def _nfa_size(node: Node) -> int:
    """The states :meth:`_Thompson.build` makes for ``node``, counted without building them, so a
    nest of counted repeats (``((a{100}){100}){100}``) is refused before any work."""
    kind = node[0]
    if kind in ("c", "at"):
        return 2
    if kind == "cat":
        return 1 + sum(_nfa_size(x) for x in node[1])
    if kind == "alt":
        return 2 + sum(_nfa_size(x) for x in node[1])
    if kind == "rep":
        item, lo, hi = _nfa_size(node[1]), node[2], node[3]
        for bound in (lo, hi or 0):
            check_bound("regex {n,m}", bound)
        return 1 + lo * item + (1 + item if hi is None else 1 + (hi - lo) * item)
    raise AssertionError(f"unknown node {kind!r}")


def _compile_node(node: Node, mode: Mode, max_states: int) -> CodepointDFA:
    size = _nfa_size(node)
    bound = _regex_nfa_bound()
    if size > bound:
        raise LimitExceeded("nfa_states", size, bound)
    th = _Thompson()
    s, f = th.build(node)
    nfa = th.nfa
    universal: list[int] = []
    if mode == "search":
        prefix, suffix = nfa.state(), nfa.state()
        for lo, hi in ALPHABET:
            nfa.edge(prefix, lo, hi, prefix)
            nfa.edge(suffix, lo, hi, suffix)
        nfa.epsilon(prefix, s)
        nfa.epsilon(f, suffix)
        s, f = prefix, suffix
        universal = [suffix]
    if th.asserts:
        nfa, s, finals, universal = _phase_product(nfa, th.asserts, s, f, universal)
    else:
        finals = [f]
    rows, fin = determinize(nfa, [s], finals, max_states=max_states, universal=universal)
    return canonical(rows, 0, fin)
