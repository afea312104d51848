"""The syntax tree every grammar reader produces (llama.cpp GBNF, xgrammar's EBNF, Lark, structural
tags), over code points.

A grammar is a dict of :class:`Rule` by name; a rule's body is an :data:`Expr`: a character class
(:class:`Chars`), a string literal (:class:`Lit`), a rule reference (:class:`Ref`), a sequence
(:class:`SeqE`), an alternation (:class:`AltE`), a counted repetition (:class:`RepE`), one special
token of a set (:class:`SpecialE`, read as its encoding, ``_special``) or a whole compiled network
embedded as one symbol (:class:`EmbedE`: a JSON Schema inside a Lark grammar or a structural tag). A reader
returns a :class:`ParsedGrammar` (the rules, every reference with the rule it occurs in, and the
lookahead assertions by rule). The analysis (``_grammar_analysis``), the lookahead prover
(``_grammar_lookahead``), the left-recursion rewrite (``_gbnf_rewrite``) and the builder
(``_grammar_build``) work on these values only, whatever syntax they were read from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from . import _cpset
from ._ir import Network, network_nullable

__all__ = [
    "MAX_CODE_POINT",
    "Chars",
    "Lit",
    "Ref",
    "SeqE",
    "AltE",
    "RepE",
    "SpecialE",
    "EmbedE",
    "Expr",
    "Rule",
    "ParsedGrammar",
]

#: The largest Unicode code point (``.`` and negated classes range up to it; surrogates are excluded).
MAX_CODE_POINT = 0x10FFFF

# Nodes compare by identity (eq=False): the builder (``_grammar_build``) memoizes per node object.


@dataclass(frozen=True, eq=False)
class Chars:
    """One code point from ``ranges`` (inclusive, possibly empty when lo > hi), or not, if negated."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool

    def scalar_ranges(self) -> tuple[tuple[int, int], ...]:
        """The class as a normalized set of scalar values (negation applied; see ``_cpset``)."""
        ranges = _cpset.normalize(self.ranges)
        return _cpset.complement(ranges) if self.negated else ranges


@dataclass(frozen=True, eq=False)
class Lit:
    """A string literal as code points (never empty: an empty literal is no symbol)."""

    cps: tuple[int, ...]

    def utf8(self) -> bytes:
        """The literal's UTF-8 encoding."""
        return "".join(map(chr, self.cps)).encode("utf-8")


@dataclass(frozen=True, eq=False)
class Ref:
    """A reference to the rule ``name``, written at ``line``/``col`` (1-based) of the grammar text."""

    name: str
    line: int
    col: int


@dataclass(frozen=True, eq=False)
class SeqE:
    """The concatenation of ``items``."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class AltE:
    """The union of ``options`` (none: the empty language, no string at all)."""

    options: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class RepE:
    """``item`` repeated ``min`` to ``max`` times (``None``: unbounded)."""

    item: Expr
    min: int
    max: int | None


@dataclass(frozen=True, eq=False)
class SpecialE:
    """One special token whose vocabulary id is in ``ids`` (never empty), as a terminal: it reads the
    token's encoding (``_special.encode``), never its text."""

    ids: frozenset[int]


@dataclass(frozen=True, eq=False)
class EmbedE:
    """A compiled network read as one symbol (e.g. the JSON Schema of a Lark ``%json``); ``label``
    says where it came from, for messages. It never refers back to the grammar's rules."""

    network: Network
    label: str

    @property
    def nullable(self) -> bool:
        """The embedded language contains the empty string."""
        return network_nullable(self.network)


#: A grammar expression: the body of a rule, or a part of one.
Expr = Chars | Lit | Ref | SeqE | AltE | RepE | SpecialE | EmbedE


@dataclass(frozen=True)
class Rule:
    """A rule ``name ::= body`` defined at ``line``/``col`` (1-based) of the grammar text."""

    name: str
    body: Expr
    line: int
    col: int


class ParsedGrammar(NamedTuple):
    """What a reader returns: the rules by name, every reference with the name of the rule it occurs
    in (also those a ``{0}`` drops: llama.cpp checks them), and the lookahead assertions by rule."""

    rules: dict[str, Rule]
    refs: list[tuple[Ref, str]]
    lookaheads: dict[str, Expr]
