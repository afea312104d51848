"""Specs, limits and the :class:`Grammar` value every front-end compiles to.

``Grammar`` answers, for byte strings, exactly the questions of docs/design.md §1: is this a viable prefix of
L(G) (``advance`` returns a state, never a dead end), is it in L(G) (``is_accepting``), and which bytes
must come next (``forced_bytes``). States are immutable values (``_parser.State``).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Union

from ._complete import Completer
from ._fsa import UnicodeEscapes
from ._ir import Lex, Network
from ._lexeme import ByteDFA
from ._limits import Deadline, Limits
from ._parser import Parser, State, stable_key
from ._special import MARK, named_ids
from .errors import SpecError

__all__ = [
    "JSON_SCHEMA_DRAFTS",
    "JsonProfile",
    "Limits",
    "JsonSchema",
    "Regex",
    "Gbnf",
    "Choice",
    "Lark",
    "StructuralTag",
    "Spec",
    "Grammar",
    "State",
    "Deadline",
    "stable_key",
]


#: The JSON Schema drafts the reference reads, oldest first (``JsonProfile.draft``; ``refdecoder._drafts``).
JSON_SCHEMA_DRAFTS = ("draft-04", "draft-06", "draft-07", "2019-09", "2020-12")
_DEFAULT_DRAFT = "2020-12"
# Other spellings of the draft names (``--profile draft=7``, the test suite's folder names).
_DRAFT_ALIASES: dict[str | int, str] = {
    **{alias: f"draft-0{n}" for n in (4, 6, 7) for alias in (n, str(n), f"0{n}", f"draft{n}", f"draft-{n}")},
    **{alias: d for d in ("2019-09", "2020-12") for alias in (f"draft{d}", f"draft-{d}", f"draft/{d}")},
}


@dataclass(frozen=True)
class JsonProfile:
    """What a JSON-producing engine allows on purpose (docs/design.md §1 "languages, not opinions").

    * ``whitespace``: ``"any"`` (RFC 8259 ws: space, tab, LF, CR, any amount), ``"none"``, or an int N —
      at most N whitespace characters in each gap between tokens.
    * ``property_order``: ``"any"`` (as JSON Schema says) or ``"schema"`` (declared properties appear in
      the order the schema lists them; additional properties after them).
    * ``additional_properties_default``: what an absent ``additionalProperties`` means (the spec: True).
    * ``allow_duplicate_keys``: may an object repeat a key (default False; RFC 8259 says SHOULD be unique).
    * ``unicode_escapes``: may strings use ``\\uXXXX`` escapes: ``True`` (any code point, UTF-16
      surrogate pairs above U+FFFF), ``False`` (none: the controls without a short escape cannot be
      written), or ``"controls"`` (only for U+0000..U+001F, the characters JSON cannot write raw;
      every other character is written as itself, in UTF-8). The short escapes
      (``\\" \\\\ \\/ \\b \\f \\n \\r \\t``) are allowed in every mode.
    * ``number_spelling``: ``"any"`` (every RFC 8259 spelling of an admitted value) or ``"canonical"``
      (docs/design.md "The generation profile"): a zero is never written with a minus sign (``-0``,
      ``-0.0``, ``-0e5`` out); fraction digits end in a non-zero digit (``1.0``, ``1.50`` out); the
      exponent is ``[eE]``, an optional ``-`` and digits that begin with a non-zero digit (``1e05``,
      ``1e0``, ``1e+5`` out: an exponent of value 0 changes nothing, and ``+`` is as redundant as a
      leading zero, so each exponent value has one spelling); and where a number's conjunction only
      admits integers (``type: integer``, a ``multipleOf`` that is an integer, or one integer value)
      the text has neither fraction nor exponent (``1e2`` out where ``100`` is meant). The rules are
      on texts, not values: ``0e5``, ``15e-1`` and ``0.15e1`` are canonical. ``const``/``enum``
      numbers are values (the reference reads them as one-point predicates), so they obey the rules
      too: ``const: 1.50`` is written ``1.5`` (or ``15e-1``...), ``const: 5`` only ``5``.
    * ``formats``: ``"annotation"`` (draft 2020-12's default: ``format`` constrains nothing) or
      ``"assert"`` (the formats maskcert implements exactly are enforced; others are refused).
    * ``top_level_whitespace``: may whitespace (as ``whitespace`` allows) surround the top-level value;
      engines that emit exactly one value usually say no.
    * ``additional_items_default``: what an absent ``items`` next to ``prefixItems`` means (the spec:
      True, any further items; engines' "strict" modes: no further items). In drafts before 2020-12,
      what an absent ``additionalItems`` next to array-form ``items`` means.
    * ``draft``: the JSON Schema draft of a schema (or remote document) that declares no ``$schema``
      (one of ``JSON_SCHEMA_DRAFTS``; ``4``, ``draft7``, ``draft2019-09`` and the like are accepted and
      stored as the canonical name). A declared ``$schema`` always wins.
    * ``legacy_dependencies``: what ``dependencies`` means in a 2019-09 or 2020-12 schema, where the
      keyword was split into ``dependentRequired``/``dependentSchemas`` and is no longer defined.
      ``"apply"`` (default): the drafts 4-7 meaning (draft-07 Validation §6.5.7), the reading of the
      JSON-Schema-Test-Suite's optional ``dependencies-compatibility`` group (the 2020-12 meta-schema
      keeps the keyword, deprecated, for compatibility); ``"ignore"``: an unknown keyword, an
      annotation (the literal reading, and what xgrammar and llguidance do); ``"refuse"``: the
      compile refuses it (``Unsupported``), for a caller that will not pick a reading.

    :meth:`generation` is the profile of the spellings a person expects (docs/design.md "The generation
    profile"): a language like the engines' profiles, certifiable the same way.
    """

    whitespace: Literal["any", "none"] | int = "any"
    property_order: Literal["any", "schema"] = "any"
    additional_properties_default: bool = True
    allow_duplicate_keys: bool = False
    unicode_escapes: UnicodeEscapes = True
    formats: Literal["annotation", "assert"] = "annotation"
    top_level_whitespace: bool = True
    additional_items_default: bool = True
    draft: str = _DEFAULT_DRAFT
    number_spelling: Literal["any", "canonical"] = "any"
    legacy_dependencies: Literal["apply", "ignore", "refuse"] = "apply"

    @classmethod
    def generation(cls, whitespace: Literal["any", "none"] | int = "none") -> JsonProfile:
        """The generation profile: ``\\u`` escapes only for control characters, canonical number
        spellings and unique keys. ``whitespace`` is the caller's choice (default ``"none"``: compact
        JSON, no whitespace anywhere; ``"any"`` or a bound N as in the field); every other field keeps
        JSON Schema's own reading."""
        return cls(
            whitespace=whitespace,
            unicode_escapes="controls",
            number_spelling="canonical",
            allow_duplicate_keys=False,
        )

    def __post_init__(self) -> None:
        ws = self.whitespace
        if not (ws in ("any", "none") or (isinstance(ws, int) and not isinstance(ws, bool) and ws >= 0)):
            raise SpecError("bad JsonProfile.whitespace", repr(ws), '"any", "none" or an int >= 0')
        if not isinstance(self.unicode_escapes, bool) and self.unicode_escapes != "controls":
            raise SpecError(
                "bad JsonProfile.unicode_escapes", repr(self.unicode_escapes), 'True, False or "controls"'
            )
        if self.number_spelling not in ("any", "canonical"):
            raise SpecError(
                "bad JsonProfile.number_spelling", repr(self.number_spelling), '"any" or "canonical"'
            )
        if self.property_order not in ("any", "schema"):
            raise SpecError("bad JsonProfile.property_order", repr(self.property_order), '"any" or "schema"')
        if self.formats not in ("annotation", "assert"):
            raise SpecError("bad JsonProfile.formats", repr(self.formats), '"annotation" or "assert"')
        if self.legacy_dependencies not in ("apply", "ignore", "refuse"):
            raise SpecError(
                "bad JsonProfile.legacy_dependencies",
                repr(self.legacy_dependencies),
                '"apply", "ignore" or "refuse"',
            )
        if self.draft not in JSON_SCHEMA_DRAFTS:
            draft = _DRAFT_ALIASES.get(self.draft) if isinstance(self.draft, (str, int)) else None
            if draft is None:
                raise SpecError("bad JsonProfile.draft", repr(self.draft), f"one of {JSON_SCHEMA_DRAFTS}")
            object.__setattr__(self, "draft", draft)

    def as_dict(self) -> dict[str, Any]:
        """The fields; ``draft``, ``number_spelling`` and ``legacy_dependencies`` only when they are not
        the default, so that specs keep the fingerprints they had before those were options."""
        out = asdict(self)
        if self.legacy_dependencies == "apply":
            del out["legacy_dependencies"]
        if self.draft == _DEFAULT_DRAFT:
            del out["draft"]
        if self.number_spelling == "any":
            del out["number_spelling"]
        return out


@dataclass(frozen=True, eq=False)
class JsonSchema:
    """A JSON Schema with its profile. ``resources`` maps absolute URIs to schema documents that
    ``$ref`` may name (maskcert never fetches: the caller brings remote documents)."""

    schema: dict[str, Any] | bool
    profile: JsonProfile = field(default_factory=JsonProfile)
    resources: Mapping[str, Any] = field(default_factory=dict)

    def canonical(self) -> str:
        # Under ``property_order="schema"`` the order of ``properties`` is part of the language, so
        # the canonical form keeps the schema's key order (sorted keys would make two languages one).
        keep = self.profile.property_order == "schema"
        return "json-schema:" + _canon_json([self.schema, self.profile.as_dict(), dict(self.resources)], keep)


@dataclass(frozen=True)
class Regex:
    pattern: str

    def canonical(self) -> str:
        return "regex:" + json.dumps(self.pattern)


#: The grammar dialects ``Gbnf.dialect`` reads (``refdecoder._gbnf``): llama.cpp's GBNF (the default) and
#: xgrammar's EBNF (token-based layout, C escapes, lookahead assertions ``rule ::= body (= sequence)``).
GBNF_DIALECTS = ("llama.cpp", "xgrammar")


@dataclass(frozen=True)
class Gbnf:
    text: str
    root: str = "root"
    dialect: str = "llama.cpp"

    def __post_init__(self) -> None:
        if self.dialect not in GBNF_DIALECTS:
            raise SpecError("bad Gbnf.dialect", repr(self.dialect), f"one of {GBNF_DIALECTS}")

    def canonical(self) -> str:
        if self.dialect == "llama.cpp":  # specs of the default dialect keep their fingerprints
            return "gbnf:" + json.dumps([self.text, self.root])
        return "gbnf:" + json.dumps([self.text, self.root, self.dialect])


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]

    def __init__(self, options: Sequence[str]) -> None:
        if isinstance(options, str) or not all(isinstance(o, str) for o in options):
            raise SpecError("bad Choice options", repr(options)[:80], "a sequence of str")
        object.__setattr__(self, "options", tuple(options))

    def canonical(self) -> str:
        return "choice:" + json.dumps(sorted(set(self.options)))


#: A special-token name table: a mapping name -> vocabulary id, kept as sorted pairs once in a spec.
SpecialTokens = Union[Mapping[str, int], tuple[tuple[str, int], ...]]


def _name_table(table: Any, what: str) -> tuple[tuple[str, int], ...]:
    """A special-token name table (``{"<|tool_call|>": 151657}``) as sorted pairs, checked."""
    items = table.items() if isinstance(table, Mapping) else table
    try:
        pairs = [(name, token_id) for name, token_id in items]
    except (TypeError, ValueError) as e:
        raise SpecError(f"bad {what}.special_tokens", repr(table)[:80], "a mapping name -> token id") from e
    for name, token_id in pairs:
        if (
            not isinstance(name, str)
            or not name
            or isinstance(token_id, bool)
            or not isinstance(token_id, int)
        ):
            raise SpecError(
                f"bad {what}.special_tokens entry", repr((name, token_id))[:80], "a name -> int id"
            )
        if token_id < 0:
            raise SpecError(f"bad {what}.special_tokens entry", repr((name, token_id)), "a non-negative id")
    if len({n for n, _ in pairs}) != len(pairs):
        raise SpecError(f"bad {what}.special_tokens", "names", "each name once")
    return tuple(sorted(pairs))


#: The Lark dialects ``Lark.dialect`` reads (``refdecoder._lark``): llguidance's.
LARK_DIALECTS = ("llguidance",)


@dataclass(frozen=True)
class Lark:
    """A Lark grammar (llguidance's dialect, docs/design.md §2 "Lark"). ``special_tokens`` names the
    vocabulary ids of the special tokens the grammar writes as ``<|name|>`` (``<[id]>`` needs none);
    it is part of the spec's value, as the tokenizer is part of an llguidance grammar."""

    text: str
    special_tokens: SpecialTokens = ()
    dialect: str = "llguidance"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise SpecError("bad Lark.text", type(self.text).__name__, "grammar text (str)")
        if self.dialect not in LARK_DIALECTS:
            raise SpecError("bad Lark.dialect", repr(self.dialect), f"one of {LARK_DIALECTS}")
        object.__setattr__(self, "special_tokens", _name_table(self.special_tokens, "Lark"))

    def canonical(self) -> str:
        return "lark:" + json.dumps([self.text, list(map(list, self.special_tokens)), self.dialect])


@dataclass(frozen=True, eq=False)
class StructuralTag:
    """An xgrammar structural tag in its documented JSON form (``{"type": "structural_tag",
    "format": {...}}``, or the bare format), read by the reference's own reader
    (``refdecoder._structural_tag``; it never imports xgrammar). ``special_tokens`` as for :class:`Lark`."""

    tag: dict[str, Any]
    special_tokens: SpecialTokens = ()

    def __post_init__(self) -> None:
        if not isinstance(self.tag, dict):
            raise SpecError("bad StructuralTag.tag", type(self.tag).__name__, "a JSON object (dict)")
        object.__setattr__(self, "special_tokens", _name_table(self.special_tokens, "StructuralTag"))

    def canonical(self) -> str:
        # its json_schema formats read properties in schema order: key order is part of the language
        return "structural-tag:" + _canon_json([self.tag, list(map(list, self.special_tokens))], True)


Spec = Union[JsonSchema, Regex, Gbnf, Choice, Lark, StructuralTag]


def _canon_json(value: Any, keep_order: bool = False) -> str:
    """One text per JSON value: keys sorted, unless their order is part of the language."""
    try:
        return json.dumps(
            value, sort_keys=not keep_order, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    except (TypeError, ValueError) as e:
        raise SpecError("spec is not JSON", "/", f"JSON-serializable values ({e})") from e


_DEFAULT_LIMITS = Limits()


class Grammar:
    """A compiled spec. All methods are pure functions of their arguments (memo tables aside)."""

    def __init__(
        self, network: Network, spec: Spec, limits: Limits = _DEFAULT_LIMITS, memo_size: int = 200_000
    ):
        self.spec = spec
        self.limits = limits
        self._parser = Parser(network, max_stacks=limits.parser_stacks)
        self.fingerprint = hashlib.sha256(spec.canonical().encode()).hexdigest()
        self._memo: OrderedDict[tuple[State, int], State | None] = OrderedDict()
        self._memo_size = memo_size
        self._completer: Completer | None = None
        self._reads_special: bool | None = None

    @property
    def network(self) -> Network:
        return self._parser.network

    @property
    def reads_special_tokens(self) -> bool:
        """Some lexeme reads the special-token marker (``_special.MARK``): the grammar names special
        tokens, and a vocabulary lifts it with their encodings (``_tokens.special_view``). Text lexemes
        read UTF-8 only, so only a special-token terminal has such an edge."""
        if self._reads_special is None:
            self._reads_special = any(
                isinstance(n, Lex) and isinstance(n.lexeme, ByteDFA) and n.lexeme.reads_byte(MARK)
                for n in self.network.nodes
            )
        return self._reads_special

    @property
    def named_token_ids(self) -> frozenset[int] | None:
        """The token ids the grammar names as terminals (``_special.named_ids`` over its lexemes that
        read the marker), or None when some lexeme reads any special token (``any_tokens``)."""
        out: set[int] = set()
        for n in self.network.nodes:
            if isinstance(n, Lex) and isinstance(n.lexeme, ByteDFA) and n.lexeme.reads_byte(MARK):
                ids = named_ids(n.lexeme)
                if ids is None:
                    return None
                out |= ids
        return frozenset(out)

    def initial(self) -> State:
        return self._parser.initial()

    def advance_byte(self, state: State, byte: int) -> State | None:
        key = (state, byte)
        memo = self._memo
        if key in memo:
            memo.move_to_end(key)
            return memo[key]
        nxt = self._parser.step(state, byte)
        memo[key] = nxt
        if len(memo) > self._memo_size:
            memo.popitem(last=False)
        return nxt

    def advance(self, state: State, data: bytes) -> State | None:
        s: State | None = state
        for b in data:
            assert s is not None
            s = self.advance_byte(s, b)
            if s is None:
                return None
        return s

    def is_accepting(self, state: State) -> bool:
        return state.accepting

    def accepts(self, data: bytes) -> bool:
        s = self.advance(self.initial(), data)
        return s is not None and s.accepting

    def step_key(self, state: State, byte: int) -> Hashable:
        """What ``advance_byte(state, byte)`` reads of ``byte`` (``_parser.Parser.step_key``): equal
        keys from one state give equal results."""
        return self._parser.step_key(state, byte)

    def readable_bound(self, state: State) -> bytes | None:
        """A superset of the bytes ``b`` with ``advance_byte(state, b) is not None``, read off the top
        lexemes without a parser step (``_parser.Parser.readable_bound``); None when unknown."""
        return self._parser.readable_bound(state)

    def live_bytes(self, state: State) -> bytes:
        """Exactly the bytes ``b`` with ``advance_byte(state, b) is not None``: a byte on which a top
        lexeme reads on is live without a parser step (``_parser.Parser.byte_candidates``; inside a
        string that is nearly every byte), the other readable bytes are stepped."""
        readable, onward = self._parser.byte_candidates(state)
        return bytes(b for b in readable if b in onward or self.advance_byte(state, b) is not None)

    def completion(self, state: State) -> bytes | None:
        """A shortest byte string taking ``state`` to acceptance, read off the network
        (:mod:`refdecoder._complete`) and checked here byte by byte; None when its search bounds were
        hit (callers then search over states, e.g. ``props.checks.witness.shortest_completion``)."""
        if self._completer is None:
            self._completer = Completer(self.network)
        word = self._completer.complete(state)
        if word is None:
            return None
        end = self.advance(state, word)
        if end is None or not end.accepting:
            raise AssertionError(
                f"refdecoder: the structural completion {word[:80]!r} of state {state.id} is not "
                f"accepted by the matcher (spec {self.fingerprint[:12]}): a bug of refdecoder._complete"
            )
        return word

    def forced_bytes(self, state: State, limit: int = 4096) -> bytes:
        """The longest byte string every completion of ``state`` starts with."""
        out = bytearray()
        s = state
        while len(out) < limit and not s.accepting:
            live = self.live_bytes(s)
            if len(live) != 1:
                break
            nxt = self.advance_byte(s, live[0])
            assert nxt is not None
            out.append(live[0])
            s = nxt
        return bytes(out)

    def __repr__(self) -> str:
        return f"Grammar({type(self.spec).__name__}, fingerprint={self.fingerprint[:12]})"
