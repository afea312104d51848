"""The structural-tag front-end: xgrammar's structural-tag JSON, read from its documentation
(``structural_tag.md``, ``advanced_usage.md`` of xgrammar 0.2.9) and compiled to the grammar syntax
tree (docs/design.md §2 "Structural tags"). It never imports xgrammar.

Theory of operation
-------------------
A structural tag is a tree of *format* objects, each a chunk of output. :data:`FORMATS` maps each
``type`` to one function (docs/style.md §3) that checks its fields and returns the chunk's language
as an :data:`~refdecoder._grammar_ast.Expr`; :class:`Ctx` carries the JSON pointer (``Ctx.at`` is the
one descend helper, so every error names where it happened) and the *end condition* of the nearest
enclosing ``tag`` (advanced_usage.md "Automatic End Detection": a string end is excluded from the
string-level unlimited formats ``any_text`` and ``triggered_tags``, a token end from the token-level
ones ``any_tokens``, ``token_triggered_tags``, ``exclude_token``; nothing across levels). The tree
becomes one rule ``root`` and goes through the shared pipeline (``_gbnf.compile_rules``).

Levels. Text is UTF-8 over Unicode scalar values; a special token is its encoding (``_special``) and
never its text. "Any token" at the byte level is any text character or the encoding of any special
token not excluded (``_structural_text.tokens_region``). What depends on how text is split into
tokens (``exclude_token``: exactly *one* token; ``max_tokens`` > 0) cannot be decided over bytes and
is refused with :class:`~refdecoder.errors.Unsupported`, as are the ``json_schema`` styles other than
``json``, ``any_order``, and the deprecated ``qwen_xml_parameter`` (the documentation gives no exact
grammar for them). Malformed tags raise :class:`~refdecoder.errors.SpecError` with the JSON pointer of
the bad part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._gbnf import compile_rules
from ._grammar_ast import AltE, EmbedE, Expr, Lit, ParsedGrammar, RepE, Rule, SeqE, SpecialE
from ._ir import Network
from ._regex import compile_regex_dfa
from ._structural_text import avoiding, before_first, embed_text, tokens_region
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import Gbnf, JsonProfile, JsonSchema, Limits, Spec, StructuralTag

__all__ = ["compile_structural_tag_network", "FORMATS", "JSON_PROFILE", "Ctx"]

#: The language of a ``json_schema`` format with ``style: "json"``: xgrammar compiles it as
#: ``compile_json_schema`` with its defaults (any whitespace inside, none around the value, schema
#: property order, strict mode), the profile of ``props/backends/xgrammar.py::declared_profile``.
JSON_PROFILE = JsonProfile(
    whitespace="any",
    property_order="schema",
    additional_properties_default=False,
    allow_duplicate_keys=True,
    unicode_escapes=True,
    formats="assert",
    top_level_whitespace=False,
    additional_items_default=False,
    legacy_dependencies="ignore",
)

#: The largest count a ``max_tokens`` / ``max_chars`` may state (structural_tag.md "any_text").
_MAX_COUNT = 2_147_483_647
_JSON_STYLES = (
    "json",
    "qwen_xml",
    "minimax_xml",
    "minimax_m3_xml",
    "deepseek_xml",
    "deepseek_v4_1_xml",
    "glm_xml",
    "cohere_xml",
    "kimi_k3_xml",
    "gemma",
)
_JSON_EXTRA = ("max_whitespace_cnt", "excludes")
_FLAGS = ("at_least_one", "stop_after_first")
_EMPTY = SeqE(())


@dataclass(frozen=True)
class Ctx:
    """Where a format sits: its JSON pointer, the special-token name table, the limits, and the end of
    the nearest enclosing ``tag`` (its end strings, or its end token)."""

    path: str
    names: Mapping[str, int]
    limits: Limits
    embed: Callable[[Spec, Limits], Network]  # ``_compile.compile_network``, passed in (no import cycle)
    string_ends: tuple[str, ...] = ()
    token_ends: frozenset[int] = frozenset()

    def at(self, *keys: str | int) -> Ctx:
        """The context one level down (JSON pointer escaping of RFC 6901)."""
        tail = "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in keys)
        return replace(self, path=self.path + tail)

    def bad(self, what: str, expected: str) -> SpecError:
        return SpecError(what, self.path or "/", expected)


# -- fields ---------------------------------------------------------------------------------------------


def _fields(ctx: Ctx, obj: Any, kind: str, required: Sequence[str], optional: Sequence[str] = ()) -> None:
    if not isinstance(obj, dict):
        raise ctx.bad(f"a {kind} format is {type(obj).__name__}", f"a JSON object with type {kind!r}")
    known = {"type", *required, *optional}
    for key in obj:
        if key not in known:
            raise ctx.at(key).bad(f"unknown field {key!r} of {kind}", f"one of {sorted(known)}")
    for key in required:
        if key not in obj:
            raise ctx.bad(f"{kind} without {key!r}", f"the required field {key!r} (fields: {sorted(known)})")


def _text(ctx: Ctx, value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ctx.bad(f"{what} is {type(value).__name__}", "a string")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ctx.bad(f"{what} holds a lone surrogate", "a string of Unicode scalar values")
    return value


def _bool(ctx: Ctx, obj: dict[str, Any], key: str, default: bool) -> bool:
    value = obj.get(key, default)
    if not isinstance(value, bool):
        raise ctx.at(key).bad(f"{key} is {type(value).__name__}", "true or false")
    return value


def _count(ctx: Ctx, value: Any, what: str, lo: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.bad(f"{what} is {type(value).__name__}", f"an integer >= {lo}")
    if not lo <= value <= _MAX_COUNT:
        raise ctx.bad(f"{what} is {value}", f"an integer in [{lo}, {_MAX_COUNT}]")
    return value


def _words(ctx: Ctx, value: Any, what: str, *, nonempty_list: bool = False) -> tuple[str, ...]:
    """A list of non-empty strings (an empty string is contained in every text)."""
    if not isinstance(value, list):
        raise ctx.bad(f"{what} is {type(value).__name__}", "a list of strings")
    if nonempty_list and not value:
        raise ctx.bad(f"{what} is empty", "at least one string")
    out = tuple(_text(ctx.at(i), v, f"{what}[{i}]") for i, v in enumerate(value))
    for i, w in enumerate(out):
        if not w:
            raise ctx.at(i).bad(f"{what}[{i}] is empty", "a non-empty string (every text contains '')")
    return out


def _token_id(ctx: Ctx, value: Any) -> int:
    """A token given as an id (a special token's vocabulary id) or as a name in the name table."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ctx.bad(f"a token is {type(value).__name__}", "a token id (int) or a special token name (str)")
    if isinstance(value, int):
        if value < 0:
            raise ctx.bad(f"token id {value}", "a non-negative token id")
        return value
    if value not in ctx.names:
        known = ", ".join(sorted(ctx.names)[:12]) or "none given"
        raise ctx.bad(f"unknown special token {value!r}", f"a name of StructuralTag.special_tokens ({known})")
    return ctx.names[value]


def _token_ids(ctx: Ctx, value: Any, what: str, *, nonempty_list: bool = False) -> frozenset[int]:
    if not isinstance(value, list):
        raise ctx.bad(f"{what} is {type(value).__name__}", "a list of token ids or names")
    if nonempty_list and not value:
        raise ctx.bad(f"{what} is empty", "at least one token")
    return frozenset(_token_id(ctx.at(i), v) for i, v in enumerate(value))


def _max_tokens(ctx: Ctx, obj: dict[str, Any], kind: str) -> int | None:
    """``max_tokens``: ``null``, or 0 (empty content only); a positive budget counts tokens, which
    depends on how the text is split, and is refused."""
    value = obj.get("max_tokens")
    if value is None:
        return None
    n = _count(ctx.at("max_tokens"), value, "max_tokens")
    if n > 0:
        raise Unsupported(
            f"{kind}.max_tokens",
            ctx.at("max_tokens").path,
            f"a budget of {n} tokens depends on how the text is split into tokens, which no byte-level "
            "language decides; use max_tokens 0 or null (or max_chars for any_text)",
        )
    return n


def _lit(text: str) -> Expr:
    return Lit(tuple(map(ord, text))) if text else _EMPTY


def _string_ends(ctx: Ctx, kind: str) -> tuple[str, ...]:
    """The enclosing tag's end strings, which an unlimited string-level format must not contain."""
    if "" in ctx.string_ends:
        raise ctx.bad(
            f"{kind} inside a tag whose end is the empty string",
            "a non-empty end string: unlimited content stops only at its enclosing tag's end",
        )
    return ctx.string_ends


def _nested(ctx: Ctx, key: str, spec: Spec) -> Network:
    """Another spec's network, with its errors placed under ``ctx.path/key``."""
    here = ctx.at(key).path

    def where(inner: str) -> str:
        return here + inner if inner.startswith("/") or not inner else f"{here} ({inner})"

    try:
        return ctx.embed(spec, ctx.limits)
    except SpecError as e:
        raise SpecError(e.what, where(e.where), e.expected) from None
    except Unsupported as e:
        raise Unsupported(e.keyword, where(e.where), e.reason) from None
    except LimitExceeded as e:
        raise LimitExceeded(e.limit, e.value, e.bound, where(e.where)) from None


def _format(ctx: Ctx, obj: Any) -> Expr:
    if not isinstance(obj, dict):
        raise ctx.bad(f"a format is {type(obj).__name__}", "a format object {'type': ...}")
    kind = obj.get("type")
    if kind not in FORMATS:
        raise ctx.at("type").bad(f"unknown format type {kind!r}", f"one of {sorted(FORMATS)}")
    return FORMATS[kind](ctx, obj)


def _formats(ctx: Ctx, obj: dict[str, Any], key: str) -> list[Expr]:
    items = obj[key]
    if not isinstance(items, list) or not items:
        raise ctx.at(key).bad(f"{key} is {items!r:.40}", "a non-empty list of formats")
    return [_format(ctx.at(key, i), item) for i, item in enumerate(items)]


# -- primitive formats (structural_tag.md "Primitive Formats") ------------------------------------------


def const_string(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Exactly ``value``."""
    _fields(ctx, obj, "const_string", ["value"])
    return _lit(_text(ctx.at("value"), obj["value"], "value"))


def json_schema(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """A JSON text of the schema, under :data:`JSON_PROFILE` (``max_whitespace_cnt`` bounds each gap)."""
    # max_whitespace_cnt and excludes are the installed release's fields, not the documentation's
    _fields(ctx, obj, "json_schema", ["json_schema"], ["style", "any_order", *_JSON_EXTRA])
    schema = obj["json_schema"]
    if not isinstance(schema, (dict, bool)):
        raise ctx.at("json_schema").bad(f"json_schema is {type(schema).__name__}", "a JSON Schema (object)")
    style = obj.get("style", "json")
    if style not in _JSON_STYLES:
        raise ctx.at("style").bad(f"unknown style {style!r}", f"one of {list(_JSON_STYLES)}")
    if style != "json":
        raise Unsupported(
            "json_schema.style",
            ctx.at("style").path,
            f"style {style!r}: the documentation shows examples of its XML form, not a grammar the reference "
            "could decide exactly (value escaping, whitespace, how non-string values are written)",
        )
    if _bool(ctx, obj, "any_order", False):
        raise Unsupported(
            "json_schema.any_order",
            ctx.at("any_order").path,
            "any_order drops required-key and uniqueness checks at every nesting level, which no JsonProfile "
            "expresses; use any_order false",
        )
    if _words(ctx.at("excludes"), obj.get("excludes", []), "excludes"):
        raise Unsupported(
            "json_schema.excludes",
            ctx.at("excludes").path,
            "excluded substrings of JSON string values (not in the documentation) are not implemented",
        )
    profile = JSON_PROFILE
    cnt = obj.get("max_whitespace_cnt")
    if cnt is not None:
        gap = _count(ctx.at("max_whitespace_cnt"), cnt, "max_whitespace_cnt", 1)
        profile = replace(profile, whitespace=gap)
    return _embed(ctx, "json_schema", JsonSchema(schema, profile))


def _embed(ctx: Ctx, key: str, spec: Spec) -> Expr:
    return EmbedE(_nested(ctx, key, spec), f"{key} at {ctx.path or '/'}")


def grammar(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """The language of an xgrammar EBNF grammar (root rule ``root``), read by ``_xgrammar_reader``."""
    _fields(ctx, obj, "grammar", ["grammar"])
    text = _text(ctx.at("grammar"), obj["grammar"], "grammar")
    return _embed(ctx, "grammar", Gbnf(text, dialect="xgrammar"))


def regex(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """The strings the pattern matches whole, read as ECMA-262 with the ``u`` flag, except that ``.``
    matches every code point: ebnf_grammar.md "Regex" (the syntax of ``Grammar.from_regex``; without
    flags "the pattern is used verbatim and ``.`` matches every codepoint")."""
    _fields(ctx, obj, "regex", ["pattern"])
    pattern = _text(ctx.at("pattern"), obj["pattern"], "pattern")
    where = ctx.at("pattern").path
    try:
        dfa = compile_regex_dfa(_dot_all(pattern), flavor="ecma", mode="fullmatch", where=where)
    except SpecError:  # malformed as written: report the offset in the pattern as written
        compile_regex_dfa(pattern, flavor="ecma", mode="fullmatch", where=where)
        raise
    except LimitExceeded as e:
        raise LimitExceeded(e.limit, e.value, e.bound, where) from None
    return embed_text(dfa, ctx.limits, where, f"regex at {ctx.path or '/'}")


def _dot_all(pattern: str) -> str:
    """``pattern`` with each ``.`` outside a class and not escaped spelled ``[\\s\\S]`` (every code
    point); a malformed pattern stays malformed, for the regex reader to report."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":  # ECMA "[]" is the empty class: it closes at once
                out.append("[]")
                in_class = False
                i += 2
                continue
        elif c == ".":
            c = r"[\s\S]"
        out.append(c)
        i += 1
    return "".join(out)


def any_text(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Any text containing none of ``excludes`` nor the enclosing tag's end strings, of at most
    ``max_chars`` code points; ``max_tokens`` 0 is the empty text."""
    _fields(ctx, obj, "any_text", [], ["excludes", "max_tokens", "max_chars"])
    words = _words(ctx.at("excludes"), obj.get("excludes", []), "excludes") + _string_ends(ctx, "any_text")
    if _max_tokens(ctx, obj, "any_text") == 0:
        return _EMPTY
    dfa = avoiding(words)
    if obj.get("max_chars") is not None:
        n = _count(ctx.at("max_chars"), obj["max_chars"], "max_chars")
        if n > ctx.limits.repeat_bound:
            raise LimitExceeded("repeat_bound", n, ctx.limits.repeat_bound, ctx.at("max_chars").path)
        dfa = dfa.length_between(0, n)
    return embed_text(dfa, ctx.limits, ctx.path, f"any_text at {ctx.path or '/'}")


# -- composition formats (structural_tag.md "Composition Formats") --------------------------------------


def sequence(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """The elements one after the other."""
    _fields(ctx, obj, "sequence", ["elements"])
    return SeqE(tuple(_formats(ctx, obj, "elements")))


def or_(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Any one of the elements."""
    _fields(ctx, obj, "or", ["elements"])
    return AltE(tuple(_formats(ctx, obj, "elements")))


def optional(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    _fields(ctx, obj, "optional", ["content"])
    return RepE(_format(ctx.at("content"), obj["content"]), 0, 1)


def plus(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    _fields(ctx, obj, "plus", ["content"])
    return RepE(_format(ctx.at("content"), obj["content"]), 1, None)


def star(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    _fields(ctx, obj, "star", ["content"])
    return RepE(_format(ctx.at("content"), obj["content"]), 0, None)


def repeat(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """``content`` ``min`` to ``max`` times (``max`` -1: unbounded)."""
    _fields(ctx, obj, "repeat", ["min", "max", "content"])
    lo = _count(ctx.at("min"), obj["min"], "min")
    raw_hi = obj["max"]
    hi = None if raw_hi == -1 and not isinstance(raw_hi, bool) else _count(ctx.at("max"), raw_hi, "max")
    if hi is not None and hi < lo:
        raise ctx.at("max").bad(f"max {hi} < min {lo}", "max >= min, or -1 for no upper bound")
    for key, n in (("min", lo), ("max", hi)):
        if n is not None and n > ctx.limits.repeat_bound:
            raise LimitExceeded("repeat_bound", n, ctx.limits.repeat_bound, ctx.at(key).path)
    return RepE(_format(ctx.at("content"), obj["content"]), lo, hi)


# -- tagging and dispatch (structural_tag.md "Tagging and Dispatch Formats") -----------------------------


@dataclass(frozen=True)
class _Tag:
    begin: str | int  # a string, or a special token id
    expr: Expr


def _tag(ctx: Ctx, obj: Any) -> _Tag:
    """``begin`` content ``end``; the content sees the end as its end condition (advanced_usage.md)."""
    if isinstance(obj, dict) and obj.get("type", "tag") != "tag":
        raise ctx.at("type").bad(f"a tag of type {obj.get('type')!r}", "a tag format (type 'tag')")
    _fields(ctx, obj, "tag", ["begin", "content", "end"])
    begin: str | int
    raw_begin = obj["begin"]
    if isinstance(raw_begin, str):
        begin = _text(ctx.at("begin"), raw_begin, "begin")
        begin_expr = _lit(begin)
    else:
        begin = _token_format(ctx.at("begin"), raw_begin, "begin")
        begin_expr = SpecialE(frozenset({begin}))
    raw_end = obj["end"]
    inner = ctx.at("content")
    if isinstance(raw_end, str):
        end = _text(ctx.at("end"), raw_end, "end")
        end_expr = _lit(end)
        inner = replace(inner, string_ends=(end,), token_ends=frozenset())
    elif isinstance(raw_end, list):
        if not raw_end:
            raise ctx.at("end").bad("end is an empty list", "a string, strings (at least one) or a token")
        ends = tuple(_text(ctx.at("end", i), e, f"end[{i}]") for i, e in enumerate(raw_end))
        end_expr = AltE(tuple(_lit(e) for e in ends))
        inner = replace(inner, string_ends=ends, token_ends=frozenset())
    else:
        token = _token_format(ctx.at("end"), raw_end, "end")
        end_expr = SpecialE(frozenset({token}))
        inner = replace(inner, string_ends=(), token_ends=frozenset({token}))
    content = _format(inner, obj["content"])
    return _Tag(begin, SeqE((begin_expr, content, end_expr)))


def _token_format(ctx: Ctx, obj: Any, what: str) -> int:
    if not isinstance(obj, dict):
        raise ctx.bad(f"{what} is {type(obj).__name__}", "a string or a token format {'type': 'token', ...}")
    if obj.get("type", "token") != "token":
        raise ctx.at("type").bad(f"{what} of type {obj.get('type')!r}", "a string or a token format")
    _fields(ctx, obj, "token", ["token"])
    return _token_id(ctx.at("token"), obj["token"])


def _tags(ctx: Ctx, obj: dict[str, Any]) -> list[_Tag]:
    items = obj["tags"]
    if not isinstance(items, list) or not items:
        raise ctx.at("tags").bad(f"tags is {items!r:.40}", "a non-empty list of tag formats")
    return [_tag(ctx.at("tags", i), t) for i, t in enumerate(items)]


def tag(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    return _tag(ctx, obj).expr


def _dispatched(free: Expr, first: Expr, once: bool) -> Expr:
    """Free text with dispatched parts: ``first`` is "free text then one dispatched part", ``free``
    the text after the last one; ``once``: at most one part, and nothing after it."""
    return AltE((free, first)) if once else SeqE((RepE(first, 0, None), free))


def _check_suffixes(ctx: Ctx, key: str, words: Sequence[str], kind: str) -> None:
    """First appearance is ambiguous when one pattern ends with another: both appear at once, and the
    documentation does not say which one fires."""
    for i, a in enumerate(words):
        for j, b in enumerate(words):
            if i != j and a.endswith(b):
                raise Unsupported(
                    kind,
                    ctx.at(key, i).path,
                    f"{a!r} ends with {b!r}: both appear at the same place and the documentation does not say "
                    "which one dispatches",
                )


def _check_overlaps(ctx: Ctx, key: str, patterns: Sequence[str], excludes: Sequence[str], kind: str) -> None:
    """An excluded string that can end inside a pattern's appearance (it is a substring of the pattern,
    or a proper suffix of it begins the pattern) appears together with the pattern: whether the free
    text stops there or the pattern dispatches, the documentation does not say."""
    for i, p in enumerate(patterns):
        for x in excludes:
            if x in p or any(p.startswith(x[k:]) for k in range(1, len(x))):
                raise Unsupported(
                    kind,
                    ctx.at(key, i).path,
                    f"the excluded {x!r} can appear overlapping {p!r}: the documentation does not say whether "
                    "the free text stops there or the pattern dispatches",
                )


def triggered_tags(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Free text up to the first appearance of a trigger, then a tag beginning with that trigger;
    again after the tag. Free text contains no ``excludes`` and not the enclosing tag's end; with
    ``at_least_one`` there is no text before the first tag, with ``stop_after_first`` nothing after it."""
    _fields(ctx, obj, "triggered_tags", ["triggers", "tags"], [*_FLAGS, "excludes"])
    triggers = _words(ctx.at("triggers"), obj["triggers"], "triggers", nonempty_list=True)
    _check_suffixes(ctx, "triggers", triggers, "triggered_tags")
    tags = _tags(ctx, obj)
    by_trigger: dict[str, list[Expr]] = {t: [] for t in triggers}
    for i, t in enumerate(tags):
        if not isinstance(t.begin, str):
            raise ctx.at("tags", i, "begin").bad("a token begin in triggered_tags", "a string begin")
        matching = [r for r in triggers if t.begin.startswith(r)]
        if len(matching) != 1:
            raise ctx.at("tags", i, "begin").bad(
                f"begin {t.begin!r} starts with {len(matching)} triggers {matching}",
                f"exactly one trigger of {list(triggers)} as its prefix",
            )
        by_trigger[matching[0]].append(t.expr)
    excludes = _words(ctx.at("excludes"), obj.get("excludes", []), "excludes")
    words = excludes + _string_ends(ctx, "triggered_tags")
    _check_overlaps(ctx, "triggers", triggers, words, "triggered_tags")
    clean = avoiding(words)
    label = f"triggered_tags at {ctx.path or '/'}"
    firsts: list[Expr] = []
    for trigger, exprs in by_trigger.items():
        if exprs:
            text = before_first(triggers, trigger).intersection(clean)
            firsts.append(SeqE((embed_text(text, ctx.limits, ctx.path, label), AltE(tuple(exprs)))))
    free = embed_text(clean.intersection(avoiding(triggers)), ctx.limits, ctx.path, label)
    at_least_one = _bool(ctx, obj, "at_least_one", False)
    stop = _bool(ctx, obj, "stop_after_first", False)
    if at_least_one:  # no leading free text (structural_tag.md: "disallows leading free text")
        first_tag = AltE(tuple(t.expr for t in tags))
        if stop:
            return first_tag
        return SeqE((first_tag, RepE(AltE(tuple(firsts)), 0, None), free))
    return _dispatched(free, AltE(tuple(firsts)), stop)


def tags_with_separator(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Tags joined by ``separator``, nothing else: at least one with ``at_least_one``, at most one with
    ``stop_after_first``."""
    _fields(ctx, obj, "tags_with_separator", ["tags", "separator"], ["at_least_one", "stop_after_first"])
    one = AltE(tuple(t.expr for t in _tags(ctx, obj)))
    sep = _lit(_text(ctx.at("separator"), obj["separator"], "separator"))
    at_least_one = _bool(ctx, obj, "at_least_one", False)
    if _bool(ctx, obj, "stop_after_first", False):
        return one if at_least_one else RepE(one, 0, 1)
    some = SeqE((one, RepE(SeqE((sep, one)), 0, None)))
    return some if at_least_one else RepE(some, 0, 1)


def _rules(ctx: Ctx, obj: dict[str, Any]) -> list[tuple[Any, Expr]]:
    items = obj["rules"]
    if not isinstance(items, list) or not items:
        raise ctx.at("rules").bad(f"rules is {items!r:.40}", "a non-empty list of [pattern, format] pairs")
    out = []
    for i, rule in enumerate(items):
        if not isinstance(rule, list) or len(rule) != 2:
            raise ctx.at("rules", i).bad(f"rule {rule!r:.40}", "a pair [pattern, format]")
        out.append((rule[0], _format(ctx.at("rules", i, 1), rule[1])))
    return out


def dispatch(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Free text up to the first appearance of a pattern, the pattern, then its format; with ``loop``
    free text again after it. Free text contains no ``excludes`` (dispatch is not one of the unlimited
    formats, so an enclosing tag's end is not added: structural_tag.md puts it in ``excludes``)."""
    _fields(ctx, obj, "dispatch", ["rules"], ["loop", "excludes"])
    rules = _rules(ctx, obj)
    patterns = [_text(ctx.at("rules", i, 0), p, "pattern") for i, (p, _) in enumerate(rules)]
    for i, p in enumerate(patterns):
        if not p:
            raise ctx.at("rules", i, 0).bad("empty pattern", "a non-empty string")
    _check_suffixes(ctx, "rules", patterns, "dispatch")
    excludes = _words(ctx.at("excludes"), obj.get("excludes", []), "excludes")
    _check_overlaps(ctx, "rules", patterns, excludes, "dispatch")
    clean = avoiding(excludes)
    label = f"dispatch at {ctx.path or '/'}"
    firsts = []
    for p, (_, f) in zip(patterns, rules):
        text = before_first(patterns, p).intersection(clean)
        firsts.append(SeqE((embed_text(text, ctx.limits, ctx.path, label), _lit(p), f)))
    free = embed_text(clean.intersection(avoiding(patterns)), ctx.limits, ctx.path, label)
    return _dispatched(free, AltE(tuple(firsts)), not _bool(ctx, obj, "loop", True))


# -- token-level formats (structural_tag.md "Token-level Formats") --------------------------------------


def token(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """One special token (by id, or by name through ``StructuralTag.special_tokens``)."""
    return SpecialE(frozenset({_token_format(ctx, obj, "token")}))


def exclude_token(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Refused: exactly one token, when it is ordinary text, is a piece of text whose extent depends on
    the vocabulary and on how the output was split into tokens."""
    _fields(ctx, obj, "exclude_token", [], ["exclude_tokens"])
    _token_ids(ctx.at("exclude_tokens"), obj.get("exclude_tokens", []), "exclude_tokens")
    raise Unsupported(
        "exclude_token",
        ctx.path,
        "'exactly one token' includes one ordinary token, whose text depends on the vocabulary and on how the "
        "output is split into tokens; no byte-level language decides it (any_tokens, zero or more, is exact)",
    )


def any_tokens(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Zero or more tokens, none of them ``exclude_tokens`` nor the enclosing tag's end token: text,
    and special tokens not excluded (``max_tokens`` 0: nothing)."""
    _fields(ctx, obj, "any_tokens", [], ["exclude_tokens", "max_tokens"])
    excluded = _token_ids(ctx.at("exclude_tokens"), obj.get("exclude_tokens", []), "exclude_tokens")
    if _max_tokens(ctx, obj, "any_tokens") == 0:
        return _EMPTY
    return tokens_region(excluded | ctx.token_ends)


def token_triggered_tags(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """``triggered_tags`` over tokens: any tokens but the triggers, ``exclude_tokens`` and the enclosing
    tag's end token; a trigger token begins one of the tags that begin with it."""
    _fields(ctx, obj, "token_triggered_tags", ["trigger_tokens", "tags"], ["exclude_tokens", *_FLAGS])
    raw = obj["trigger_tokens"]
    triggers = _token_ids(ctx.at("trigger_tokens"), raw, "trigger_tokens", nonempty_list=True)
    tags = _tags(ctx, obj)
    for i, t in enumerate(tags):
        if isinstance(t.begin, str) or t.begin not in triggers:
            raise ctx.at("tags", i, "begin").bad(
                f"begin {t.begin!r}", f"a token format naming one of the trigger tokens {sorted(triggers)}"
            )
    excluded = _token_ids(ctx.at("exclude_tokens"), obj.get("exclude_tokens", []), "exclude_tokens")
    free = tokens_region(triggers | excluded | ctx.token_ends)
    one = AltE(tuple(t.expr for t in tags))
    at_least_one = _bool(ctx, obj, "at_least_one", False)
    stop = _bool(ctx, obj, "stop_after_first", False)
    if at_least_one:
        return one if stop else SeqE((one, RepE(SeqE((free, one)), 0, None), free))
    return _dispatched(free, SeqE((free, one)), stop)


def token_dispatch(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """``dispatch`` over tokens: any tokens but the rules' tokens and ``exclude_tokens``, then a rule's
    token and its format; with ``loop`` again after it."""
    _fields(ctx, obj, "token_dispatch", ["rules"], ["loop", "exclude_tokens"])
    rules = _rules(ctx, obj)
    ids = [_token_id(ctx.at("rules", i, 0), p) for i, (p, _) in enumerate(rules)]
    if len(set(ids)) != len(ids):
        why = "two rules share a token: the documentation does not say which one fires"
        raise Unsupported("token_dispatch", ctx.at("rules").path, why)
    excluded = _token_ids(ctx.at("exclude_tokens"), obj.get("exclude_tokens", []), "exclude_tokens")
    free = tokens_region(frozenset(ids) | excluded)
    firsts = AltE(tuple(SeqE((free, SpecialE(frozenset({i})), f)) for i, (_, f) in zip(ids, rules)))
    return _dispatched(free, firsts, not _bool(ctx, obj, "loop", True))


def qwen_xml_parameter(ctx: Ctx, obj: dict[str, Any]) -> Expr:
    """Refused: the deprecated spelling of ``json_schema`` with ``style: "qwen_xml"``."""
    _fields(ctx, obj, "qwen_xml_parameter", ["json_schema"])
    if not isinstance(obj["json_schema"], (dict, bool)):
        raise ctx.at("json_schema").bad("json_schema is not a schema", "a JSON Schema (object)")
    raise Unsupported(
        "qwen_xml_parameter",
        ctx.path,
        "Qwen XML parameters (json_schema style 'qwen_xml'): the documentation shows examples, not a grammar "
        "the reference could decide exactly",
    )


#: One function per format type of xgrammar 0.2.9 (docs/style.md §3).
FORMATS: dict[str, Callable[[Ctx, dict[str, Any]], Expr]] = {
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


def compile_structural_tag_network(
    spec: StructuralTag, limits: Limits, embed: Callable[[Spec, Limits], Network]
) -> Network:
    """The network of a structural tag: ``{"type": "structural_tag", "format": {...}}`` (the
    ``response_format`` shape of structural_tag.md "Request Shape") or a bare format object.
    ``embed`` compiles the specs it nests (JSON Schema, regex, grammar): ``_compile.compile_network``."""
    ctx = Ctx("", dict(spec.special_tokens), limits, embed)
    tag = spec.tag
    if tag.get("type") == "structural_tag" or ("type" not in tag and "format" in tag):  # "type" has a default
        _fields(ctx, tag, "structural_tag", ["format"])
        ctx = ctx.at("format")
        tag = tag["format"]
    root = _format(ctx, tag)
    return compile_rules(ParsedGrammar({"root": Rule("root", root, 1, 1)}, [], {}), "root", limits)
