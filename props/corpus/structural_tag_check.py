"""An independent structural-tag recognizer, used only to check the reference (docs/design.md §4,
invariant 1).

It is written from xgrammar's documentation of structural tags (``structural_tag.md``,
``advanced_usage.md``, ``tool_calling_and_reasoning.md``) and shares no code with
``refdecoder._structural_tag``: no automata, no grammar network. An output is a sequence of text and
special-token ids (``list[str | int]``), flattened to *symbols* (one per code point, one per special
token); every format object denotes a relation ``ends(pos)`` — the positions where a match of it that
starts at ``pos`` can end — computed by direct recursion over the format tree and memoized on
``(node, pos)``. The output is in the language when the whole format can end at the last symbol.

Readings of the documentation, one per format (where the text is open to two readings, the one taken is
named here, and the agreement test shows whether the reference reads it alike):

* ``const_string``: the exact text. ``regex``: a Python ``re`` full match (ECMA ``\\d``/``\\w`` as ASCII)
  of a text stretch. ``any_text``: any text stretch that contains none of its ``excludes`` (empty
  strings exclude nothing); ``max_chars`` bounds its code points; ``max_tokens`` counts tokens, which
  text has not (undecided).
* ``json_schema`` (``style: "json"``): one JSON value, no whitespace around it (lark_grammar.md: "whitespace
  outside the JSON value is controlled by the surrounding grammar"), RFC 8259 whitespace inside, no
  duplicate keys, declared properties in declared order (undeclared ones after them), valid for the
  schema under ``jsonschema``; ``max_whitespace_cnt`` caps each whitespace run. Other styles,
  ``any_order`` and ``excludes`` are documented by example only (undecided). Two readings of "valid
  for the schema" (``reading``): ``"documented"``, JSON Schema 2020-12 as written (an absent
  ``additionalProperties`` allows undeclared keys, ``format`` is an annotation); ``"xgrammar"``, the
  defaults xgrammar documents for ``compile_json_schema`` (``strict_mode=True``: "the generated grammar
  will not allow properties and items that is not specified in the schema", so an absent
  ``additionalProperties`` next to ``properties`` and an absent ``items`` next to ``prefixItems`` are
  false) with formats asserted by ``props.corpus.format_check``'s RFC readings.
* ``sequence``, ``or``, ``optional``, ``plus``, ``star``, ``repeat`` (``max: -1`` unbounded): as named.
* ``tag``: begin, content, one of the ends. Automatic end detection (advanced_usage.md): the end strings
  of the nearest enclosing tag join the excludes of the string-level unlimited formats below it
  (``any_text``, ``triggered_tags``), its end token the excluded tokens of the token-level ones
  (``any_tokens``, ``token_triggered_tags``, ``exclude_token``).
* ``triggered_tags``: free text, in which no trigger *starts* (the first trigger encountered dispatches)
  and no exclude occurs, alternating with tags: ``T (tag T)*``; ``at_least_one`` allows no leading
  text (``tag (T tag)* T``); ``stop_after_first`` ends the format after the first tag (``T tag?``, or
  ``tag``).
* ``tags_with_separator``: ``(tag (sep tag)*)?``, at least one with ``at_least_one``, at most one with
  ``stop_after_first``; no text outside the tags.
* ``dispatch``: free text in which no pattern starts and no exclude occurs, then a pattern and its
  format: ``T (p F T)*`` with ``loop``, ``T (p F)?`` without.
* ``token``: that special token. ``exclude_token``: one token not excluded — a special token, or a
  text token, which without a vocabulary is any non-empty text stretch. ``any_tokens``: any text and
  any special tokens but the excluded ones (``max_tokens`` > 0 is vocabulary-dependent: undecided).
  ``token_triggered_tags`` and ``token_dispatch``: as their string-level versions, free regions being
  ``any_tokens`` without the trigger tokens.
* ``grammar`` (xgrammar's EBNF) and ``qwen_xml_parameter`` (not in the documentation): undecided.

An undecided construct never guesses: a text whose verdict depends on it gets :class:`Undecided` (with
the reasons), one that is accepted or rejected without reaching it still gets its verdict.

API: :func:`verdict` (``True``, ``False`` or :class:`Undecided`), :func:`matches` (a bool, or
:class:`CheckerUndecided` raised), :func:`undecided_constructs` (what in a tag the checker cannot judge),
:func:`token_names` (the token strings a tag names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from props.contract.findings import SpecKind, SpecRef
from props.corpus._errors import CorpusError
from props.corpus._validate import ecma_digits, validate_output

__all__ = [
    "Part",
    "Undecided",
    "CheckerUndecided",
    "TagFormatError",
    "verdict",
    "matches",
    "undecided_constructs",
    "token_names",
    "flatten",
    "Names",
    "READINGS",
    "Reading",
]

#: One piece of an output: text, or a special token's id.
Part = str | int

#: How a ``json_schema`` format's "valid for the schema" is read (module docstring).
Reading = Literal["documented", "xgrammar"]
READINGS: tuple[Reading, ...] = ("documented", "xgrammar")

#: The ``JsonProfile`` fields each reading adds to the checker's JSON validation.
_READING_PROFILE: dict[str, dict[str, Any]] = {
    "documented": {},
    "xgrammar": {
        "additional_properties_default": False,
        "additional_items_default": False,
        "formats": "assert",
        "legacy_dependencies": "ignore",
    },
}


class TagFormatError(CorpusError):
    """A structural tag that is not a documented format tree: ``path`` is the JSON pointer of the
    offending object, ``expected`` what the documentation allows there."""


@dataclass(frozen=True)
class Undecided:
    """The checker cannot decide the text: its verdict depends on the constructs named in ``reasons``."""

    reasons: tuple[str, ...]


class CheckerUndecided(CorpusError):
    """:func:`matches` on a text the checker cannot decide (``detail`` lists the reasons)."""


# -- the format tree, read ------------------------------------------------------------------------------
# Each node's ``ends(m, pos)`` returns (definite end positions, reasons some end may be unknown).

_R = tuple[frozenset[int], frozenset[str]]
_NONE: _R = (frozenset(), frozenset())


class _Node:
    def ends(self, m: _Match, pos: int) -> _R:
        raise NotImplementedError


@dataclass(eq=False)
class _Const(_Node):
    value: str

    def ends(self, m: _Match, pos: int) -> _R:
        if not self.value:
            return frozenset({pos}), frozenset()
        if m.text_at(pos).startswith(self.value):
            return frozenset({pos + len(self.value)}), frozenset()
        return _NONE


@dataclass(eq=False)
class _Undecidable(_Node):
    reason: str

    def ends(self, m: _Match, pos: int) -> _R:
        return frozenset(), frozenset({self.reason})


@dataclass(eq=False)
class _Regex(_Node):
    pattern: re.Pattern[str]

    def ends(self, m: _Match, pos: int) -> _R:
        text = m.text_at(pos)
        ends = frozenset(pos + k for k in range(len(text) + 1) if self.pattern.fullmatch(text, 0, k))
        return ends, frozenset()


def _free_length(text: str, starts: Iterable[str], occurs: Iterable[str]) -> int:
    """The longest free stretch at the start of ``text``: no string of ``starts`` begins inside it, no
    string of ``occurs`` lies wholly inside it (empty strings constrain nothing)."""
    limit = len(text)
    for s in starts:
        k = text.find(s) if s else -1
        if k >= 0:
            limit = min(limit, k)
    for s in occurs:
        k = text.find(s) if s else -1
        if k >= 0:
            limit = min(limit, k + len(s) - 1)
    return limit


@dataclass(eq=False)
class _FreeText(_Node):
    """``any_text`` (``starts`` empty) and the free text of ``triggered_tags`` and ``dispatch``."""

    starts: tuple[str, ...]
    occurs: tuple[str, ...]
    max_chars: int | None = None

    def ends(self, m: _Match, pos: int) -> _R:
        n = _free_length(m.text_at(pos), self.starts, self.occurs)
        if self.max_chars is not None:
            n = min(n, self.max_chars)
        return frozenset(range(pos, pos + n + 1)), frozenset()


@dataclass(eq=False)
class _FreeTokens(_Node):
    """``any_tokens``: text and special tokens, none of ``excluded``."""

    excluded: frozenset[int]

    def ends(self, m: _Match, pos: int) -> _R:
        out = [pos]
        for q in range(pos, len(m.syms)):
            s = m.syms[q]
            if isinstance(s, int) and s in self.excluded:
                break
            out.append(q + 1)
        return frozenset(out), frozenset()


@dataclass(eq=False)
class _OneToken(_Node):
    """``token`` (``allowed``) and ``exclude_token`` (``excluded``; a text token is any non-empty text)."""

    allowed: frozenset[int] | None = None
    excluded: frozenset[int] = frozenset()

    def ends(self, m: _Match, pos: int) -> _R:
        if pos >= len(m.syms):
            return _NONE
        s = m.syms[pos]
        if isinstance(s, int):
            ok = s in self.allowed if self.allowed is not None else s not in self.excluded
            return (frozenset({pos + 1}) if ok else frozenset()), frozenset()
        if self.allowed is not None:
            return _NONE
        return frozenset(range(pos + 1, pos + len(m.text_at(pos)) + 1)), frozenset()


@dataclass(eq=False)
class _Json(_Node):
    schema: Any
    max_ws: int | None
    reading: str

    def ends(self, m: _Match, pos: int) -> _R:
        text = m.text_at(pos)
        try:
            value, end = _SCANNER.raw_decode(text, 0)
        except ValueError:
            return _NONE
        cands = [end]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # A number can end at any prefix of its digits that is a number too ("12" then "3").
            cands = [k for k in range(1, end + 1) if _NUMBER.fullmatch(text, 0, k)]
        profile: dict[str, Any] = {
            "top_level_whitespace": False,
            "property_order": "schema",
            "whitespace": "any" if self.max_ws is None else self.max_ws,
            **_READING_PROFILE[self.reading],
        }
        spec = SpecRef(SpecKind.JSON_SCHEMA, self.schema, profile=profile)
        ok = [k for k in cands if validate_output(spec, text[:k].encode("utf-8", "surrogatepass")) is None]
        return frozenset(pos + k for k in ok), frozenset()


_SCANNER = json.JSONDecoder()
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


@dataclass(eq=False)
class _Seq(_Node):
    elements: tuple[_Node, ...]

    def ends(self, m: _Match, pos: int) -> _R:
        cur, why = frozenset({pos}), frozenset[str]()
        for e in self.elements:
            nxt: set[int] = set()
            for p in cur:
                ends, w = m.ends(e, p)
                nxt |= ends
                why |= w
            cur = frozenset(nxt)
            if not cur:
                break
        return cur, why


@dataclass(eq=False)
class _Or(_Node):
    elements: tuple[_Node, ...]

    def ends(self, m: _Match, pos: int) -> _R:
        out: set[int] = set()
        why: set[str] = set()
        for e in self.elements:
            ends, w = m.ends(e, pos)
            out |= ends
            why |= w
        return frozenset(out), frozenset(why)


@dataclass(eq=False)
class _Repeat(_Node):
    content: _Node
    lo: int
    hi: int | None  # None: unbounded

    def ends(self, m: _Match, pos: int) -> _R:
        out: set[int] = {pos} if self.lo == 0 else set()
        why: set[str] = set()
        cur, seen, k = {pos}, {pos} if self.lo == 0 else set(), 0
        while cur and (self.hi is None or k < self.hi):
            nxt: set[int] = set()
            for p in cur:
                ends, w = m.ends(self.content, p)
                nxt |= ends
                why |= w
            k += 1
            if k >= self.lo:
                if self.hi is None:
                    nxt -= seen  # a position reached again adds no new ends
                    seen |= nxt
                out |= nxt
            cur = nxt
        return frozenset(out), frozenset(why)


# -- matching -------------------------------------------------------------------------------------------


def flatten(parts: Iterable[Part]) -> tuple[str | int, ...]:
    """The symbols of an output: one per code point of its text, one per special token."""
    out: list[str | int] = []
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, (str, int)):
            raise CorpusError("output part", "text (str) or a special token id (int)", repr(p)[:60])
        if isinstance(p, str):
            out.extend(p)
        else:
            out.append(p)
    return tuple(out)


class _Match:
    def __init__(self, syms: tuple[str | int, ...]) -> None:
        self.syms = syms
        self.memo: dict[tuple[int, int], _R] = {}
        self._texts: dict[int, str] = {}

    def text_at(self, pos: int) -> str:
        """The text from ``pos`` up to the next special token (or the end)."""
        t = self._texts.get(pos)
        if t is None:
            q = pos
            while q < len(self.syms) and isinstance(self.syms[q], str):
                q += 1
            t = "".join(str(s) for s in self.syms[pos:q])
            self._texts[pos] = t
        return t

    def ends(self, node: _Node, pos: int) -> _R:
        key = (id(node), pos)
        r = self.memo.get(key)
        if r is None:
            r = node.ends(self, pos)
            self.memo[key] = r
        return r


# -- reading the documented JSON form -------------------------------------------------------------------


@dataclass(frozen=True)
class _Ends:
    """The end condition inherited from the nearest enclosing tag (advanced_usage.md)."""

    strings: tuple[str, ...] = ()
    tokens: frozenset[int] = frozenset()


@dataclass
class _Reader:
    tokens: Mapping[str, int]
    reading: str = "documented"
    undecided: list[str] = field(default_factory=list)

    def token(self, t: Any, where: str) -> int:
        if isinstance(t, bool) or not isinstance(t, (int, str)):
            raise TagFormatError(where, "a token id (int) or token string")
        if isinstance(t, int):
            if t < 0:
                raise TagFormatError(where, "a non-negative token id", str(t))
            return t
        if t not in self.tokens:
            raise TagFormatError(where, "a token string the tokenizer knows (special_tokens)", repr(t))
        return self.tokens[t]

    def undecidable(self, reason: str) -> _Node:
        self.undecided.append(reason)
        return _Undecidable(reason)

    def read(self, f: Any, where: str, ends: _Ends) -> _Node:
        if not isinstance(f, dict) or not isinstance(f.get("type"), str):
            raise TagFormatError(where, "a format object with a string 'type'")
        kind = f["type"]
        fn = _FORMATS.get(kind)
        if fn is None:
            expected = f"one of the documented format types ({', '.join(_FORMATS)})"
            raise TagFormatError(f"{where}/type", expected, kind)
        return fn(self, f, where, ends)

    def read_tag(self, f: Any, where: str, ends: _Ends) -> _Node:
        if not isinstance(f, dict) or f.get("type", "tag") != "tag":
            raise TagFormatError(where, "a tag format object")
        return _tag(self, f, where, ends)


def _need(f: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in f:
        raise TagFormatError(where, f"field {key!r} ({what})")
    v = f[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise TagFormatError(f"{where}/{key}", what, repr(v)[:60])
    return v


def _strings(f: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = f.get(key) or []
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise TagFormatError(f"{where}/{key}", "a list of strings", repr(v)[:60])
    return tuple(v)


def _flag(f: dict[str, Any], key: str, where: str, default: bool) -> bool:
    v = f.get(key, default)
    if not isinstance(v, bool):
        raise TagFormatError(f"{where}/{key}", "true or false", repr(v))
    return v


def _limit(f: dict[str, Any], key: str, where: str) -> int | None:
    v = f.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2_147_483_647:
        raise TagFormatError(f"{where}/{key}", "null or an integer in 0..2147483647", repr(v))
    return v


def const_string(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _Const(_need(f, "value", where, str, "a string"))


def regex(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    pattern = _need(f, "pattern", where, str, "a regular expression")
    try:
        return _Regex(re.compile(ecma_digits(pattern)))
    except re.error as e:
        raise TagFormatError(f"{where}/pattern", "a regular expression", str(e)) from e


def json_schema(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    schema = _need(f, "json_schema", where, (dict, bool), "a JSON Schema")
    style = f.get("style", "json")
    if style != "json":
        return r.undecidable(f"json_schema style {style!r} (documented by one example only)")
    if _flag(f, "any_order", where, False):
        return r.undecidable("json_schema any_order")
    if f.get("excludes"):
        return r.undecidable("json_schema excludes (not in the documentation)")
    return _Json(schema, _limit(f, "max_whitespace_cnt", where), r.reading)


def grammar(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    _need(f, "grammar", where, str, "an EBNF grammar")
    return r.undecidable("grammar (xgrammar EBNF: no independent reader in the checker)")


def qwen_xml_parameter(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return r.undecidable("qwen_xml_parameter (not in the documentation)")


def any_text(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    if _limit(f, "max_tokens", where) is not None:
        return r.undecidable("any_text max_tokens (counts tokens; text has none)")
    return _FreeText((), _strings(f, "excludes", where) + ends.strings, _limit(f, "max_chars", where))


def _elements(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> tuple[_Node, ...]:
    elems = _need(f, "elements", where, list, "a list of formats")
    return tuple(r.read(e, f"{where}/elements/{i}", ends) for i, e in enumerate(elems))


def sequence(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _Seq(_elements(r, f, where, ends))


def or_(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _Or(_elements(r, f, where, ends))


def _content(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return r.read(_need(f, "content", where, dict, "a format"), f"{where}/content", ends)


def optional(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _Repeat(_content(r, f, where, ends), 0, 1)


def plus(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _Repeat(_content(r, f, where, ends), 1, None)


def star(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _Repeat(_content(r, f, where, ends), 0, None)


def repeat(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    lo = _need(f, "min", where, int, "a non-negative integer")
    hi = _need(f, "max", where, int, "an integer >= min, or -1")
    if lo < 0 or (hi != -1 and hi < lo):
        raise TagFormatError(where, "0 <= min <= max, or max = -1", f"min={lo}, max={hi}")
    return _Repeat(_content(r, f, where, ends), lo, None if hi == -1 else hi)


def _delimiter(r: _Reader, d: Any, where: str) -> _Node:
    if isinstance(d, str):
        return _Const(d)
    if isinstance(d, dict) and d.get("type") == "token":
        return _OneToken(allowed=frozenset({r.token(d.get("token"), f"{where}/token")}))
    raise TagFormatError(where, "a string or a token format object", repr(d)[:60])


def _tag(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    if "begin" not in f or "end" not in f:
        raise TagFormatError(where, "a tag with 'begin', 'content' and 'end'")
    begin = _delimiter(r, f["begin"], f"{where}/begin")
    end = f["end"]
    if isinstance(end, list):
        if not end or not all(isinstance(e, str) for e in end):
            raise TagFormatError(f"{where}/end", "a non-empty list of strings", repr(end)[:60])
        end_nodes: tuple[_Node, ...] = tuple(_Const(e) for e in end)
        inner = _Ends(strings=tuple(end))
    elif isinstance(end, str):
        end_nodes, inner = (_Const(end),), _Ends(strings=(end,))
    elif isinstance(end, dict) and end.get("type") == "token":
        end_id = r.token(end.get("token"), f"{where}/end/token")
        end_nodes, inner = (_OneToken(allowed=frozenset({end_id})),), _Ends(tokens=frozenset({end_id}))
    else:
        expected = "a string, a list of strings or a token format object"
        raise TagFormatError(f"{where}/end", expected, repr(end)[:60])
    content = _content(r, f, where, inner)
    return _Seq((begin, content, end_nodes[0] if len(end_nodes) == 1 else _Or(end_nodes)))


def tag(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _tag(r, f, where, ends)


def _tags(r: _Reader, f: dict[str, Any], where: str) -> _Node:
    tags = _need(f, "tags", where, list, "a list of tag formats")
    if not tags:
        raise TagFormatError(f"{where}/tags", "at least one tag")
    return _Or(tuple(r.read_tag(t, f"{where}/tags/{i}", _Ends()) for i, t in enumerate(tags)))


def _dispatched(free: _Node, alt: _Node, at_least_one: bool, stop_after_first: bool) -> _Node:
    """``triggered_tags``' shape over its free region and its alternatives (the module docstring)."""
    if stop_after_first:
        return alt if at_least_one else _Seq((free, _Repeat(alt, 0, 1)))
    if at_least_one:
        return _Seq((alt, free, _Repeat(_Seq((alt, free)), 0, None)))
    return _Seq((free, _Repeat(_Seq((alt, free)), 0, None)))


def triggered_tags(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    triggers = _strings(f, "triggers", where)
    if not triggers:
        raise TagFormatError(f"{where}/triggers", "at least one trigger")
    for i, t in enumerate(f["tags"] if isinstance(f.get("tags"), list) else []):
        if isinstance(t, dict) and not isinstance(t.get("begin"), str):
            raise TagFormatError(f"{where}/tags/{i}/begin", "a string begin (triggered_tags)")
    free = _FreeText(triggers, _strings(f, "excludes", where) + ends.strings)
    return _dispatched(
        free,
        _tags(r, f, where),
        _flag(f, "at_least_one", where, False),
        _flag(f, "stop_after_first", where, False),
    )


def tags_with_separator(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    alt = _tags(r, f, where)
    sep = _Const(_need(f, "separator", where, str, "a string"))
    at_least_one = _flag(f, "at_least_one", where, False)
    if _flag(f, "stop_after_first", where, False):
        return alt if at_least_one else _Repeat(alt, 0, 1)
    some = _Seq((alt, _Repeat(_Seq((sep, alt)), 0, None)))
    return some if at_least_one else _Repeat(some, 0, 1)


def _rules(f: dict[str, Any], where: str) -> list[tuple[Any, Any]]:
    rules = _need(f, "rules", where, list, "a list of [pattern, format] pairs")
    for i, rule in enumerate(rules):
        if not isinstance(rule, list) or len(rule) != 2:
            raise TagFormatError(f"{where}/rules/{i}", "a [pattern, format] pair")
    return [(a, b) for a, b in rules]


def dispatch(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    rules = _rules(f, where)
    for i, (p, _) in enumerate(rules):
        if not isinstance(p, str) or not p:
            raise TagFormatError(f"{where}/rules/{i}/0", "a non-empty pattern string")
    alt = _Or(
        tuple(_Seq((_Const(p), r.read(x, f"{where}/rules/{i}/1", ends))) for i, (p, x) in enumerate(rules))
    )
    free = _FreeText(tuple(p for p, _ in rules), _strings(f, "excludes", where))
    if _flag(f, "loop", where, True):
        return _Seq((free, _Repeat(_Seq((alt, free)), 0, None)))
    return _Seq((free, _Repeat(alt, 0, 1)))


def token(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    if "token" not in f:
        raise TagFormatError(where, "field 'token'")
    return _OneToken(allowed=frozenset({r.token(f["token"], f"{where}/token")}))


def _token_list(r: _Reader, f: dict[str, Any], key: str, where: str) -> frozenset[int]:
    v = f.get(key) or []
    if not isinstance(v, list):
        raise TagFormatError(f"{where}/{key}", "a list of token ids or strings", repr(v)[:60])
    return frozenset(r.token(t, f"{where}/{key}/{i}") for i, t in enumerate(v))


def exclude_token(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    return _OneToken(excluded=_token_list(r, f, "exclude_tokens", where) | ends.tokens)


def any_tokens(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    excluded = _token_list(r, f, "exclude_tokens", where) | ends.tokens
    n = _limit(f, "max_tokens", where)
    if n == 0:
        return _Const("")
    if n is not None:
        return r.undecidable("any_tokens max_tokens > 0 (vocabulary-dependent)")
    return _FreeTokens(excluded)


def token_triggered_tags(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    triggers = _token_list(r, f, "trigger_tokens", where)
    if not triggers:
        raise TagFormatError(f"{where}/trigger_tokens", "at least one trigger token")
    for i, t in enumerate(f["tags"] if isinstance(f.get("tags"), list) else []):
        begin = t.get("begin") if isinstance(t, dict) else None
        if isinstance(t, dict) and not (isinstance(begin, dict) and begin.get("type") == "token"):
            raise TagFormatError(f"{where}/tags/{i}/begin", "a token format begin (token_triggered_tags)")
    free = _FreeTokens(triggers | _token_list(r, f, "exclude_tokens", where) | ends.tokens)
    return _dispatched(
        free,
        _tags(r, f, where),
        _flag(f, "at_least_one", where, False),
        _flag(f, "stop_after_first", where, False),
    )


def token_dispatch(r: _Reader, f: dict[str, Any], where: str, ends: _Ends) -> _Node:
    rules = [(r.token(p, f"{where}/rules/{i}/0"), x) for i, (p, x) in enumerate(_rules(f, where))]
    alt = _Or(
        tuple(
            _Seq((_OneToken(allowed=frozenset({p})), r.read(x, f"{where}/rules/{i}/1", ends)))
            for i, (p, x) in enumerate(rules)
        )
    )
    free = _FreeTokens(frozenset(p for p, _ in rules) | _token_list(r, f, "exclude_tokens", where))
    if _flag(f, "loop", where, True):
        return _Seq((free, _Repeat(_Seq((alt, free)), 0, None)))
    return _Seq((free, _Repeat(alt, 0, 1)))


#: One function per documented format type (docs/style.md §3).
_FORMATS: dict[str, Callable[[_Reader, dict[str, Any], str, _Ends], _Node]] = {
    "const_string": const_string,
    "json_schema": json_schema,
    "grammar": grammar,
    "regex": regex,
    "any_text": any_text,
    "sequence": sequence,
    "or": or_,
    "optional": optional,
    "plus": plus,
    "star": star,
    "repeat": repeat,
    "tag": tag,
    "triggered_tags": triggered_tags,
    "tags_with_separator": tags_with_separator,
    "dispatch": dispatch,
    "token": token,
    "exclude_token": exclude_token,
    "any_tokens": any_tokens,
    "token_triggered_tags": token_triggered_tags,
    "token_dispatch": token_dispatch,
    "qwen_xml_parameter": qwen_xml_parameter,
}


def _root_format(tag: Any) -> tuple[Any, str]:
    if isinstance(tag, dict) and tag.get("type") == "structural_tag":
        if "format" not in tag:
            raise TagFormatError("", "a structural tag with a 'format'")
        return tag["format"], "/format"
    return tag, ""


@lru_cache(maxsize=256)
def _compiled(key: str, tokens_key: str, reading: str) -> tuple[_Node, tuple[str, ...]]:
    tag = json.loads(key)
    r = _Reader(dict(json.loads(tokens_key)), reading)
    fmt, where = _root_format(tag)
    node = r.read(fmt, where, _Ends())
    return node, tuple(dict.fromkeys(r.undecided))


#: A special-token name table: a mapping, or (name, id) pairs as ``refdecoder.StructuralTag`` keeps it.
Names = Mapping[str, int] | Iterable[tuple[str, int]]


def _tree(
    tag: Any, special_tokens: Names | None, reading: Reading = "documented"
) -> tuple[_Node, tuple[str, ...]]:
    if reading not in _READING_PROFILE:
        raise CorpusError("structural tag checker reading", f"one of {list(READINGS)}", repr(reading))
    try:
        key = json.dumps(tag, ensure_ascii=False)  # not sorted: property order is part of a schema
        names = dict(special_tokens or {})
    except (TypeError, ValueError) as e:
        raise TagFormatError("", "a JSON value and a special-token name table", str(e)) from e
    return _compiled(key, json.dumps(sorted(names.items())), reading)


def verdict(
    tag: Any, parts: Sequence[Part], special_tokens: Names | None = None, reading: Reading = "documented"
) -> bool | Undecided:
    """Is the output ``parts`` (text and special-token ids) in the language of ``tag`` (the documented
    JSON form, ``{"type": "structural_tag", "format": ...}`` or a bare format)? ``special_tokens``
    resolves the token strings a tag names; ``reading`` says how ``json_schema`` is read (module
    docstring). Raises :class:`TagFormatError` for a malformed tag or an unknown reading."""
    node, _ = _tree(tag, special_tokens, reading)
    syms = flatten(parts)
    m = _Match(syms)
    ends, why = m.ends(node, 0)
    if len(syms) in ends:
        return True
    return Undecided(tuple(sorted(why))) if why else False


def matches(tag: Any, parts: Sequence[Part], special_tokens: Names | None = None) -> bool:
    """:func:`verdict` as a bool; :class:`CheckerUndecided` when the checker cannot decide."""
    v = verdict(tag, parts, special_tokens)
    if isinstance(v, Undecided):
        raise CheckerUndecided("structural tag output", "a text the checker can decide", "; ".join(v.reasons))
    return v


def undecided_constructs(tag: Any, special_tokens: Names | None = None) -> tuple[str, ...]:
    """The constructs of ``tag`` the checker cannot judge (empty: it decides every text)."""
    return _tree(tag, special_tokens)[1]


def token_names(tag: Any) -> tuple[str, ...]:
    """The token strings ``tag`` names (in ``token`` objects and token lists), sorted."""
    names: set[str] = set()

    def walk(f: Any) -> None:
        if isinstance(f, dict):
            if f.get("type") == "token" and isinstance(f.get("token"), str):
                names.add(f["token"])
            for key in ("exclude_tokens", "trigger_tokens"):
                for t in f.get(key) or []:
                    if isinstance(t, str):
                        names.add(t)
            if f.get("type") == "token_dispatch":
                for rule in f.get("rules") or []:
                    if isinstance(rule, list) and rule and isinstance(rule[0], str):
                        names.add(rule[0])
            for k, v in f.items():
                if k != "json_schema":
                    walk(v)
        elif isinstance(f, list):
            for v in f:
                walk(v)

    walk(tag)
    return tuple(sorted(names))
