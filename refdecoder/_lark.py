"""Lark front-end, llguidance's dialect (docs/design.md §2 "Lark"): grammar text to a network.

Theory of operation
-------------------
``_lark_reader`` reads the text. Here terminals (uppercase names, string and regex literals, ``%regex``,
rules with lexeme attributes) become code point automata (``_fsa``); rules become a syntax tree over
*symbols*: lexemes (one automaton each), special tokens and embedded ``%json`` networks.
``_lark_lexer.check_lexer`` decides whether llguidance's greedy lexer reads the grammar as its
context-free reading does, or refuses it. The context-free reading is then built by the shared
pipeline (``_gbnf.compile_rules``) with ``%ignore`` placed where llguidance allows it: between two
lexemes, never before the first, never after the last, never before a ``%json``.

"Between two lexemes" is not local to a rule, so each rule ``A`` is compiled twice: ``A`` (every lexeme
may be preceded by ignored text) and ``A@first`` (``A``'s strings that produce at least one symbol, the
first one without ignored text before it — ``_first`` below). The root is ``start@first``, or empty.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from ._fsa import CodepointDFA, canonical
from ._gbnf import compile_rules
from ._grammar_ast import AltE, EmbedE, Expr, ParsedGrammar, Ref, RepE, Rule, SeqE, SpecialE
from ._ir import GrammarBuilder, Network
from ._lark_lexer import END, START, EmbedInfo, LexemeInfo, Sym, check_lexer, merged_next, symbols_overlap
from ._lark_reader import (
    Definition,
    LAlt,
    LarkText,
    LExpr,
    LJson,
    LName,
    LRange,
    LRegex,
    LRegexExt,
    LRep,
    LSeq,
    LSpecial,
    LStr,
    is_terminal_name,
    read_lark,
)
from ._regex import compile_regex_dfa
from ._special import special_dfa
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import Grammar, JsonProfile, JsonSchema, Lark, Limits, Spec

__all__ = ["compile_lark_network", "COMMON", "LLGUIDANCE_JSON_PROFILE"]

#: ``%json`` as llguidance reads it (its docs/json_schema.md): any whitespace inside, none around the
#: value ("Whitespace is not allowed before the first { or after the last }"), properties in schema
#: order, ``additionalProperties`` absent means true and its keys may repeat, known formats enforced.
#: llguidance by default allows ``\\uXXXX`` only for control characters; no profile says that, so the
#: reference reads its ``json_allow_general_unicode_escapes: true`` language (a superset: docs/design.md).
LLGUIDANCE_JSON_PROFILE = JsonProfile(
    whitespace="any",
    property_order="schema",
    additional_properties_default=True,
    allow_duplicate_keys=True,
    unicode_escapes=True,
    formats="assert",
    top_level_whitespace=False,
    legacy_dependencies="ignore",  # "Unimplemented keys: dependencies" (a warning), then ignored
)

#: ``%import common.X``: the reference's own definitions of lark's common.lark terminals (same names,
#: same languages), except where llguidance reads one differently — ``ESCAPED_STRING`` may contain a
#: newline and ends at the first unescaped quote; ``C_COMMENT`` ends at the first ``*/`` (lark's lazy
#: ``.*?``, as a language).
COMMON = r"""
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+" | "-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e" | "E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+" | "-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+" | "-"] NUMBER
ESCAPED_STRING: "\"" /([^"\\]|\\(?s:.))*/ "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_" | LETTER) ("_" | LETTER | DIGIT)*
WS_INLINE: (" " | /\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
"""

#: Non-ASCII members of ASCII letters' simple case folding orbits (Unicode CaseFolding.txt).
_FOLD_EXTRA = {"k": {"\u212a"}, "s": {"\u017f"}}

_LEXEME_ATTRS = ("lazy", "capture", "stop", "suffix", "stop_capture", "max_tokens", "temperature")


# -- the rule tree over symbols ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sym:
    sym: Sym


@dataclass(frozen=True)
class _Ref:
    name: str
    line: int
    col: int


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt:
    options: tuple[_Node, ...]


@dataclass(frozen=True)
class _Rep:
    item: _Node
    lo: int
    hi: int | None


_Node = _Sym | _Ref | _Seq | _Alt | _Rep
_EPS: _Node = _Seq(())


def _where(line: int, col: int, name: str) -> str:
    return f"line {line} col {col} ({name})"


class _Compiler:
    def __init__(self, spec: Lark, limits: Limits, embed: Callable[[Spec, Limits], Network]) -> None:
        self.spec = spec
        self.limits = limits
        self.embed = embed  # ``_compile.compile_network``, passed in (no import cycle)
        text = read_lark(spec.text, limits.nesting_depth)
        self.defs: dict[str, Definition] = {}
        for d in text.definitions:
            if d.name in self.defs:
                raise SpecError(
                    f"{d.name!r} defined twice", _where(d.line, d.col, d.name), "one definition per name"
                )
            self.defs[d.name] = d
        self.common = {d.name: d for d in read_lark(COMMON).definitions}
        self.imported: set[str] = set()  # names defined by %import common (as aliases)
        for imp in text.imports:
            if imp.name not in self.common:
                raise SpecError(
                    f"unknown common terminal {imp.name!r}",
                    _where(imp.line, imp.col, "%import"),
                    f"one of {', '.join(sorted(n for n in self.common if not n.startswith('_')))}",
                )
            if imp.alias in self.defs:
                raise SpecError(
                    f"{imp.alias!r} defined twice",
                    _where(imp.line, imp.col, "%import"),
                    "one definition per name",
                )
            self.defs[imp.alias] = Definition(
                imp.alias, LName(imp.name, imp.line, imp.col), (), imp.line, imp.col
            )
            self.imported.add(imp.alias)
        self.text: LarkText = text
        self.term_memo: dict[tuple[str, bool], CodepointDFA] = {}
        self.term_stack: list[str] = []
        self.lexemes: list[LexemeInfo] = []
        self.lexeme_cp: list[CodepointDFA | None] = []
        self.lexeme_special: list[frozenset[int] | None] = []
        self.lexeme_index: dict[object, int] = {}
        self.embeds: list[tuple[Network, EmbedInfo]] = []
        self.names = dict(spec.special_tokens)

    # -- terminals: code point automata -----------------------------------------------------------------

    def terminal(self, name: str, line: int, col: int, common: bool) -> CodepointDFA:
        """The language of terminal ``name`` (in the grammar, or in ``COMMON`` when ``common``)."""
        key = (name, common)
        if key in self.term_memo:
            return self.term_memo[key]
        table = self.common if common else self.defs
        if name not in table:
            raise SpecError(
                f"undefined terminal {name!r}", _where(line, col, name), f"a definition '{name}: ...'"
            )
        d = table[name]
        imported = not common and name in self.imported
        tag = ("common." if common else "") + name
        if tag in self.term_stack:
            cycle = " -> ".join(self.term_stack[self.term_stack.index(tag) :] + [tag])
            raise SpecError(
                f"recursive terminal {name!r} ({cycle})",
                _where(d.line, d.col, name),
                "terminals that do not refer to themselves (they are regular); use a lowercase rule",
            )
        self.term_stack.append(tag)
        try:
            if imported:
                assert isinstance(d.body, LName)
                dfa = self.terminal(d.body.name, line, col, True)
            else:
                dfa = self.regular(d.body, name, common)
        finally:
            self.term_stack.pop()
        self.term_memo[key] = dfa
        return dfa

    def regular(self, e: LExpr, where: str, common: bool = False) -> CodepointDFA:
        """A terminal-level expression as an automaton (one function per construct below)."""
        if isinstance(e, LStr):
            return self.string_literal(e)
        if isinstance(e, LRange):
            return CodepointDFA.from_intervals([(e.lo, e.hi)])
        if isinstance(e, LRegex):
            return self.regex_literal(e)
        if isinstance(e, LRegexExt):
            return self.structured_regex(e)
        if isinstance(e, LName):
            if not is_terminal_name(e.name):
                raise SpecError(
                    f"terminal {where!r} refers to rule {e.name!r}",
                    _where(e.line, e.col, where),
                    "only terminals (uppercase names), strings and regexes inside a terminal",
                )
            return self.terminal(e.name, e.line, e.col, common)
        if isinstance(e, LSeq):
            out = CodepointDFA.epsilon()
            for item in e.items:
                out = out.concat(self.regular(item, where, common))
            return out
        if isinstance(e, LAlt):
            out = CodepointDFA.empty()
            for o in e.options:
                out = out.union(self.regular(o, where, common))
            return out
        if isinstance(e, LRep):
            self._check_count(e, where)
            return self.regular(e.item, where, common).repeat(e.lo, e.hi)
        if isinstance(e, LSpecial):
            raise SpecError(
                f"special token <{e.text}> inside terminal {where!r}",
                _where(e.line, e.col, where),
                "special tokens in rules only (llguidance: they cannot be used inside of terminals)",
            )
        assert isinstance(e, LJson)
        raise SpecError(f"%json inside terminal {where!r}", _where(e.line, e.col, where), "%json in a rule")

    def _check_count(self, e: LRep, where: str) -> None:
        bound = self.limits.repeat_bound
        for v in (e.lo, e.hi):
            if v is not None and v > bound:
                raise LimitExceeded("repeat_bound", v, bound, where)

    def string_literal(self, e: LStr) -> CodepointDFA:
        if not e.icase:
            return CodepointDFA.literal(e.text) if e.text else CodepointDFA.epsilon()
        # "..."i: each character or any other of its simple case folding orbit (Rust's (?i); for ASCII
        # letters the orbits are {x, X} but for k (KELVIN SIGN) and s (LONG S))
        if not e.text.isascii():
            raise Unsupported(
                "lark-string-flag",
                _where(e.line, e.col, repr(e.text)),
                "case-insensitive strings with non-ASCII characters (the reference folds ASCII only)",
            )
        out = CodepointDFA.epsilon()
        for ch in e.text:
            orbit = {ch, ch.lower(), ch.upper()} | _FOLD_EXTRA.get(ch.lower(), set())
            out = out.concat(CodepointDFA.from_intervals([(ord(x), ord(x)) for x in sorted(orbit)]))
        return out

    def regex_literal(self, e: LRegex) -> CodepointDFA:
        where = _where(e.line, e.col, f"/{e.pattern}/")
        for flag in e.flags:
            if flag not in "is":
                raise Unsupported(
                    "lark-regex-flag", where, f"the flag {flag!r} (the reference reads i and s)"
                )
        body = _rust_regex_as_python(e.pattern, where)
        flags = "".join(sorted(set(e.flags)))
        pattern = f"(?{flags}:{body})" if flags else body
        return self._regex(pattern, where)

    def _regex(self, pattern: str, where: str) -> CodepointDFA:
        return compile_regex_dfa(pattern, flavor="python", mode="fullmatch", where=where)

    def structured_regex(self, e: LRegexExt) -> CodepointDFA:
        """``%regex {"substring_chunks" | "substring_words" | "substring_chars": ...}``: the
        concatenations of contiguous runs of chunks (llguidance's docs/syntax.md "Substring")."""
        where = _where(e.line, e.col, "%regex")
        spec = e.spec
        if not isinstance(spec, dict) or len(spec) != 1:
            raise Unsupported(
                "%regex", where, "only one of substring_chunks, substring_words, substring_chars"
            )
        ((key, value),) = spec.items()
        chunk_list = (
            key == "substring_chunks" and isinstance(value, list) and all(isinstance(v, str) for v in value)
        )
        if chunk_list or (key == "substring_chars" and isinstance(value, str)):
            chunks = list(value)
        elif key == "substring_words" and isinstance(value, str) and value.isascii():
            # words, runs of white space, and single other characters (checked against llguidance)
            chunks = [c for c in re.split(r"(\s+|[^\w\s])", value) if c]
        else:
            raise Unsupported("%regex", where, f"{key!r} with a {type(value).__name__} value")
        if len(chunks) * (len(chunks) + 1) // 2 > self.limits.enum_size:
            raise LimitExceeded(
                "enum_size", len(chunks) * (len(chunks) + 1) // 2, self.limits.enum_size, where
            )
        subs = {"".join(chunks[i:j]) for i in range(len(chunks) + 1) for j in range(i, len(chunks) + 1)}
        nonempty = [s for s in subs if s]
        out = CodepointDFA.from_strings(nonempty) if nonempty else CodepointDFA.empty()
        return out.union(CodepointDFA.epsilon())

    # -- rules: trees over symbols ------------------------------------------------------------------------

    def lexeme(self, dfa: CodepointDFA, lazy: bool, label: str) -> _Node:
        """A lexeme occurrence; the empty string is no lexeme (a nullable terminal is optional)."""
        nonempty = dfa.difference(CodepointDFA.epsilon())
        if lazy:
            nonempty = _shortest_matches(nonempty)
        if nonempty.is_empty():
            return _EPS if dfa.accepts("") else _Alt(())
        key = (nonempty.key, lazy)
        if key not in self.lexeme_index:
            self.lexeme_index[key] = len(self.lexemes)
            self.lexemes.append(LexemeInfo(nonempty.to_utf8(), lazy, label))
            self.lexeme_cp.append(nonempty)
            self.lexeme_special.append(None)
        node = _Sym(("lex", self.lexeme_index[key]))
        return _Alt((_EPS, node)) if dfa.accepts("") else node

    def special(self, e: LSpecial, rule: str) -> _Node:
        ids = self.special_ids(e, rule)
        key = ("special", ids)
        if key not in self.lexeme_index:
            self.lexeme_index[key] = len(self.lexemes)
            self.lexemes.append(LexemeInfo(special_dfa(ids), False, f"<{e.text}>"))
            self.lexeme_cp.append(None)
            self.lexeme_special.append(ids)
        return _Sym(("lex", self.lexeme_index[key]))

    def special_ids(self, e: LSpecial, rule: str) -> frozenset[int]:
        where = _where(e.line, e.col, rule)
        text = e.text
        if text.startswith("[") and text.endswith("]"):
            body = text[1:-1]
            if body.startswith("^") or body == "*":
                raise Unsupported(
                    "lark-token-range",
                    where,
                    f"<{text}> names tokens by the vocabulary's size, which a grammar spec does not carry",
                )
            ids: set[int] = set()
            for part in body.split(","):
                lo_s, _, hi_s = part.strip().partition("-")
                if not lo_s.isdigit() or (hi_s and not hi_s.isdigit()):
                    raise SpecError(f"bad token id list <{text}>", where, "ids and ranges like <[1,5-7]>")
                lo, hi = int(lo_s), int(hi_s or lo_s)
                if hi < lo or hi - lo > self.limits.enum_size:
                    raise SpecError(
                        f"bad token id range {part!r}",
                        where,
                        f"lo-hi with lo <= hi (at most {self.limits.enum_size})",
                    )
                ids.update(range(lo, hi + 1))
            return frozenset(ids)
        name = f"<{text}>"
        if name not in self.names:
            known = ", ".join(sorted(self.names)) or "none (pass Lark(..., special_tokens={name: id}))"
            raise SpecError(
                f"unknown special token {name}", where, f"one of the spec's special tokens: {known}"
            )
        return frozenset({self.names[name]})

    def embed_json(self, e: LJson, rule: str) -> _Node:
        where = _where(e.line, e.col, rule)
        schema = e.schema
        profile = LLGUIDANCE_JSON_PROFILE
        if isinstance(schema, dict) and "x-guidance" in schema:
            opts = schema["x-guidance"]
            if not isinstance(opts, dict) or set(opts) - {"whitespace_flexible"}:
                raise Unsupported(
                    "x-guidance",
                    where,
                    "the reference reads only whitespace_flexible among %json's x-guidance options",
                )
            if opts.get("whitespace_flexible", True) is False:
                profile = dataclasses.replace(profile, whitespace="none")
            schema = {k: v for k, v in schema.items() if k != "x-guidance"}
        spec = JsonSchema(schema, profile)
        network = self.embed(spec, self.limits)
        first = _first_bytes_of(network, spec, self.limits)
        label = f"%json at line {e.line} col {e.col}"
        self.embeds.append((network, EmbedInfo(first, label, f"json/whitespace={profile.whitespace}")))
        return _Sym(("embed", len(self.embeds) - 1))

    def rule_tree(self, e: LExpr, rule: str) -> _Node:
        """A rule body over symbols: each literal, regex and terminal name is one lexeme."""
        if isinstance(e, (LStr, LRange, LRegex, LRegexExt)):
            label = _label(e)
            return self.lexeme(self.regular(e, rule), False, label)
        if isinstance(e, LName):
            if is_terminal_name(e.name):
                return self.lexeme(self.terminal(e.name, e.line, e.col, False), False, e.name)
            if e.name not in self.defs:
                raise SpecError(
                    f"undefined rule {e.name!r}", _where(e.line, e.col, rule), f"a definition '{e.name}: ...'"
                )
            d = self.defs[e.name]
            if _lexeme_attrs(d):
                return self.lexeme(self.rule_lexeme(d), dict(d.attrs).get("lazy") is True, e.name)
            return _Ref(e.name, e.line, e.col)
        if isinstance(e, LSpecial):
            return self.special(e, rule)
        if isinstance(e, LJson):
            return self.embed_json(e, rule)
        if isinstance(e, LSeq):
            return _Seq(tuple(self.rule_tree(i, rule) for i in e.items))
        if isinstance(e, LAlt):
            return _Alt(tuple(self.rule_tree(o, rule) for o in e.options))
        assert isinstance(e, LRep)
        self._check_count(e, rule)
        return _Rep(self.rule_tree(e.item, rule), e.lo, e.hi)

    def rule_lexeme(self, d: Definition) -> CodepointDFA:
        """A rule with lexeme attributes is one lexeme (llguidance: "for rules bodies of which are
        terminals"); ``capture`` names a capture only, ``lazy`` changes the match (``_shortest_matches``),
        the rest is refused."""
        where = _where(d.line, d.col, d.name)
        for key, _ in d.attrs:
            if key in ("stop", "suffix", "stop_capture"):
                raise Unsupported(
                    f"lark-{key}",
                    where,
                    f"{key}= hides or appends text around the lexeme (backtracking on EOS for stop); "
                    "use [lazy] with the delimiter in the regex",
                )
            if key in ("max_tokens", "temperature"):
                raise Unsupported(
                    f"lark-{key}",
                    where,
                    f"{key}= depends on sampling and tokens, and makes llguidance keep the lexeme in a "
                    "lexeme class of its own, which changes how %json alternatives merge",
                )
            if key not in _LEXEME_ATTRS:
                raise Unsupported("lark-attribute", where, f"unknown attribute {key!r}")
        if d.name in self.term_stack:
            raise SpecError(
                f"recursive lexeme rule {d.name!r}", where, "a lexeme rule that does not refer to itself"
            )
        self.term_stack.append(d.name)
        try:
            return self.regular_rule(d.body, d.name)
        finally:
            self.term_stack.pop()

    def regular_rule(self, e: LExpr, where: str) -> CodepointDFA:
        if isinstance(e, LName) and not is_terminal_name(e.name):
            if e.name not in self.defs:
                raise SpecError(
                    f"undefined rule {e.name!r}",
                    _where(e.line, e.col, where),
                    f"a definition '{e.name}: ...'",
                )
            raise SpecError(
                f"lexeme rule {where!r} refers to rule {e.name!r}",
                _where(e.line, e.col, where),
                "a body of terminals, strings and regexes only",
            )
        if isinstance(e, LSeq):
            out = CodepointDFA.epsilon()
            for item in e.items:
                out = out.concat(self.regular_rule(item, where))
            return out
        if isinstance(e, LAlt):
            out = CodepointDFA.empty()
            for o in e.options:
                out = out.union(self.regular_rule(o, where))
            return out
        if isinstance(e, LRep):
            return self.regular_rule(e.item, where).repeat(e.lo, e.hi)
        return self.regular(e, where)

    # -- the whole grammar ------------------------------------------------------------------------------

    def compile(self) -> Network:
        if "start" not in self.defs or is_terminal_name("start"):
            raise SpecError("no 'start' rule", "grammar", "a rule 'start: ...' (llguidance's root)")
        rules: dict[str, _Node] = {}
        lines: dict[str, tuple[int, int]] = {}
        for name, d in self.defs.items():
            if is_terminal_name(name):
                if d.attrs and any(k != "capture" for k, _ in d.attrs):
                    raise Unsupported(
                        "lark-attribute", _where(d.line, d.col, name), "attributes on a terminal"
                    )
                continue
            lines[name] = (d.line, d.col)
            if _lexeme_attrs(d):
                rules[name] = self.lexeme(self.rule_lexeme(d), dict(d.attrs).get("lazy") is True, name)
            else:
                for key, _ in d.attrs:
                    if key != "capture":
                        raise Unsupported(
                            "lark-attribute",
                            _where(d.line, d.col, name),
                            f"{key!r} on a rule that is not a lexeme",
                        )
                rules[name] = self.rule_tree(d.body, name)
        for name, d in self.defs.items():  # terminals nobody uses still must be well-formed
            if is_terminal_name(name):
                self.terminal(name, d.line, d.col, False)
        rules = {name: rules[name] for name in _reachable(rules, "start")}  # unused rules read nothing
        ignore: CodepointDFA | None = None
        for i, e in enumerate(self.text.ignores):
            dfa = self.regular(e, f"%ignore #{i + 1}")
            ignore = dfa if ignore is None else ignore.union(dfa)
        if ignore is not None:
            ignore = ignore.difference(CodepointDFA.epsilon())
            if ignore.is_empty():
                ignore = None
        nullable = _nullable(rules)
        embeds = [info for _, info in self.embeds]
        follow = merged_next(_follow(rules, nullable, "start"), self.lexemes, embeds)
        # Trailing ignored text (llguidance: only where the parser still expects a lexeme): never
        # possible, possible after every sentence, or decided by the parse's right edge (LL(1)).
        mode = "never"
        if ignore is not None and _may_end_before_lexeme(follow):
            if _always_extendable(rules, nullable, "start"):
                mode = "always"
            else:
                rules = _desugar_reps(rules, lines)
                nullable = _nullable(rules)
                conflict = _ll1_conflict(
                    rules, nullable, "start", lambda a, b: symbols_overlap(a, b, self.lexemes, embeds)
                )
                if conflict is not None:
                    raise Unsupported(
                        "lark-lexer",
                        "%ignore",
                        "llguidance accepts ignored text at the very end only where the parser still "
                        "expects a lexeme; the reference decides that from the parse's right edge, which "
                        f"needs an LL(1) grammar (or one that always expects more), and {conflict}",
                    )
                mode = "edge"
        check_lexer(
            follow,
            self.lexemes,
            embeds,
            ignore.to_utf8() if ignore else None,
            trailing_ignore=mode != "never",
        )
        return self.build(rules, nullable, mode, ignore, lines)

    def build(
        self,
        rules: dict[str, _Node],
        nullable: dict[str, bool],
        mode: str,
        ignore: CodepointDFA | None,
        lines: dict[str, tuple[int, int]],
    ) -> Network:
        """The context-free reading; ``mode`` says where ignored text may end the string: ``never``,
        ``always`` (after every nonempty sentence), ``edge`` (after a sentence whose parse, unique in
        an LL(1) grammar, still expects a lexeme: ``_edge`` below)."""
        plain: dict[int, Expr] = {}
        first: dict[int, Expr] = {}

        def lex_net(dfa: CodepointDFA) -> EmbedE:
            b = GrammarBuilder()
            return EmbedE(b.finish(b.lex(dfa.to_utf8())), "lexeme")

        def symbol(sym: Sym, after: bool) -> Expr:
            """A symbol; ``after``: some lexeme came before, so ignored text may precede it."""
            memo = plain if after else first
            kind, index = sym
            key = index if kind == "lex" else -1 - index
            if key in memo:
                return memo[key]
            ids = self.lexeme_special[index] if kind == "lex" else None
            if kind == "embed":
                out: Expr = EmbedE(self.embeds[index][0], self.embeds[index][1].label)
            elif ids is not None:
                tok = SpecialE(ids)
                out = SeqE((RepE(lex_net(ignore), 0, 1), tok)) if (after and ignore is not None) else tok
            else:
                cp = self.lexeme_cp[index]
                assert cp is not None
                out = lex_net(ignore.optional().concat(cp) if (after and ignore is not None) else cp)
            memo[key] = out
            return out

        refs: list[tuple[Ref, str]] = []

        def ref(name: str, line: int, col: int, in_rule: str) -> Ref:
            r = Ref(name, line, col)
            refs.append((r, in_rule))
            return r

        def after(n: _Node, rule: str) -> Expr:
            if isinstance(n, _Sym):
                return symbol(n.sym, True)
            if isinstance(n, _Ref):
                return ref(n.name, n.line, n.col, rule)
            if isinstance(n, _Seq):
                return SeqE(tuple(after(i, rule) for i in n.items))
            if isinstance(n, _Alt):
                return AltE(tuple(after(o, rule) for o in n.options))
            return RepE(after(n.item, rule), n.lo, n.hi)

        def nonempty_first(n: _Node, rule: str) -> Expr:
            """``_first``: the strings of ``n`` with at least one symbol, no ignore before the first."""
            if isinstance(n, _Sym):
                return symbol(n.sym, False)
            if isinstance(n, _Ref):
                return ref(n.name + "@first", n.line, n.col, rule)
            if isinstance(n, _Alt):
                return AltE(tuple(nonempty_first(o, rule) for o in n.options))
            if isinstance(n, _Seq):
                if not n.items:
                    return AltE(())
                head, rest = n.items[0], _Seq(n.items[1:])
                options: list[Expr] = [SeqE((nonempty_first(head, rule), after(rest, rule)))]
                if _node_nullable(head, nullable):
                    options.append(nonempty_first(rest, rule))
                return AltE(tuple(options))
            if n.hi == 0:
                return AltE(())
            lo = 0 if _node_nullable(n.item, nullable) else max(n.lo - 1, 0)
            hi = None if n.hi is None else n.hi - 1
            return SeqE((nonempty_first(n.item, rule), RepE(after(n.item, rule), lo, hi)))

        rule_first = _rule_first(rules, nullable)
        nothing: Expr = AltE(())

        def empty_if(cond: bool) -> Expr:
            return SeqE(()) if cond else nothing

        def eps_edge(n: _Node, edge: str) -> Expr:
            """``n`` deriving the empty string, with that edge (``any``, or ``open`` iff a lexeme could
            start ``n``)."""
            if edge == "any":
                return empty_if(_node_nullable(n, nullable))
            opens = any(s[0] == "lex" for s in _first_syms(n, nullable, rule_first))
            return empty_if(_node_nullable(n, nullable) and opens == (edge == "open"))

        def edge_of(n: _Node, rule: str, first_bare: bool, edge: str) -> Expr:
            """``_edge``: the nonempty strings of ``n`` (first symbol bare if ``first_bare``) whose parse
            ends ``open`` (the parser still expects a lexeme) or ``closed``. In an LL(1) grammar (no
            repetitions left: ``_desugar_reps``) the parse of every prefix is unique, so this is
            exactly where llguidance's parser expects more."""
            if isinstance(n, _Sym):
                return symbol(n.sym, not first_bare) if edge == "closed" else nothing
            if isinstance(n, _Ref):
                return ref(f"{n.name}@{'f' if first_bare else 'n'}{edge}", n.line, n.col, rule)
            if isinstance(n, _Alt):
                return AltE(tuple(edge_of(o, rule, first_bare, edge) for o in n.options))
            assert isinstance(n, _Seq)
            if not n.items:
                return nothing
            x, r = n.items[0], _Seq(n.items[1:])
            x_any = nonempty_first(x, rule) if first_bare else after(x, rule)
            # r nonempty: its edge decides (x done); r empty: open iff x is open or r could start
            options: list[Expr] = [
                SeqE((x_any, edge_of(r, rule, False, edge))),
                SeqE(
                    (edge_of(x, rule, first_bare, edge), eps_edge(r, "any" if edge == "open" else "closed"))
                ),
            ]
            if edge == "open":
                options.append(SeqE((edge_of(x, rule, first_bare, "closed"), eps_edge(r, "open"))))
            if first_bare:  # x empty: r carries the first symbol
                options.append(SeqE((empty_if(_node_nullable(x, nullable)), edge_of(r, rule, True, edge))))
            return AltE(tuple(options))

        out: dict[str, Rule] = {}
        for name, body in rules.items():
            line, col = lines[name]
            out[name] = Rule(name, after(body, name), line, col)
            out[name + "@first"] = Rule(name + "@first", nonempty_first(body, name), line, col)
            if mode == "edge":
                for tag, bare, edge in (
                    ("fopen", True, "open"),
                    ("fclosed", True, "closed"),
                    ("nopen", False, "open"),
                    ("nclosed", False, "closed"),
                ):
                    out[f"{name}@{tag}"] = Rule(f"{name}@{tag}", edge_of(body, name, bare, edge), line, col)
        trailing = lex_net(ignore) if ignore is not None and mode != "never" else None
        root_options: list[Expr] = []
        if mode == "edge":
            assert trailing is not None
            root_options.append(ref("start@fclosed", 1, 1, "start"))
            root_options.append(SeqE((ref("start@fopen", 1, 1, "start"), RepE(trailing, 0, 1))))
        else:
            root_first: Expr = ref("start@first", 1, 1, "start")
            root_options.append(
                SeqE((root_first, RepE(trailing, 0, 1))) if trailing is not None else root_first
            )
        if nullable["start"]:
            root_options.append(SeqE(()))
        out["start@root"] = Rule("start@root", AltE(tuple(root_options)), 1, 1)
        return compile_rules(ParsedGrammar(out, refs, {}), "start@root", self.limits)


# -- helpers ------------------------------------------------------------------------------------------------


def _reachable(rules: dict[str, _Node], root: str) -> list[str]:
    """The rules ``root`` uses, directly or not (``root`` first)."""
    seen = [root]
    todo = [root]

    def refs(n: _Node) -> list[str]:
        if isinstance(n, _Ref):
            return [n.name]
        if isinstance(n, _Seq):
            return [r for i in n.items for r in refs(i)]
        if isinstance(n, _Alt):
            return [r for o in n.options for r in refs(o)]
        if isinstance(n, _Rep):
            return refs(n.item)
        return []

    while todo:
        for r in refs(rules[todo.pop()]):
            if r not in seen and r in rules:
                seen.append(r)
                todo.append(r)
    return seen


def _first_bytes_of(network: Network, spec: JsonSchema, limits: Limits) -> frozenset[int]:
    """The bytes the strings of ``network`` can start with."""
    g = Grammar(network, spec, limits)
    start = g.initial()
    return frozenset(b for b in range(256) if g.advance(start, bytes([b])) is not None)


def _label(e: LExpr) -> str:
    if isinstance(e, LStr):
        return repr(e.text)
    if isinstance(e, LRegex):
        return f"/{e.pattern}/{e.flags}"
    if isinstance(e, LRange):
        return f"{chr(e.lo)!r}..{chr(e.hi)!r}"
    return "%regex"


def _lexeme_attrs(d: Definition) -> bool:
    return any(k != "capture" for k, _ in d.attrs)


def _shortest_matches(dfa: CodepointDFA) -> CodepointDFA:
    """A lazy lexeme's language: the strings of ``dfa`` no proper prefix of which is in it (the lexer
    ends the lexeme at its first accepting position; llguidance's docs/syntax.md "Lazy lexemes")."""
    rows = [() if dfa.is_final(s) else dfa.row(s) for s in range(dfa.num_states)]
    return canonical(rows, dfa.start(), dfa.finals)


#: Rust's ``\s``: Unicode White_Space (Python's ``\s`` adds U+001C..U+001F, which Rust does not match).
_RUST_SPACE = "\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"


def _rust_regex_as_python(pattern: str, where: str) -> str:
    """llguidance reads regexes with Rust's ``regex`` crate, the reference with Python's syntax. The
    pattern in Python syntax with Rust's meaning: ``\\s`` becomes Rust's White_Space class (and
    ``\\S``, ``[\\s\\S]`` alike); what the two read differently otherwise is refused (``\\w``, ``\\b``
    and ``\\p`` are Unicode properties in Rust, nested classes and ``&&``/``--``/``~~`` set operations,
    Rust-only escapes)."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            if e == "s":
                out.append(_RUST_SPACE if in_class else f"[{_RUST_SPACE}]")
            elif e == "S" and not in_class:
                out.append(f"[^{_RUST_SPACE}]")
            elif e in "swbSWBpPzA" or (e == "x" and pattern[i + 2 : i + 3] == "{"):
                raise Unsupported(
                    "lark-regex",
                    where,
                    f"\\{e} is read differently by Rust's regex crate (llguidance) and Python; "
                    "write the class out ([A-Za-z0-9_], ...)",
                )
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            if in_class:
                raise Unsupported(
                    "lark-regex", where, "nested character classes (Rust reads them as set unions)"
                )
            if pattern[i : i + 6] in ("[\\s\\S]", "[\\S\\s]"):
                out.append("(?s:.)")
                i += 6
                continue
            in_class = True
            j = i + 1
            if pattern[j : j + 1] == "^":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1
            out.append(pattern[i:j])
            i = j
            continue
        if c == "]" and in_class:
            in_class = False
        elif c in "^$" and not in_class:
            raise Unsupported(
                "lark-regex", where, f"the anchor {c!r} (Python's '$' also matches before a final newline)"
            )
        elif in_class and pattern[i : i + 2] in ("&&", "--", "~~"):
            raise Unsupported("lark-regex", where, "class set operations (&&, --, ~~) of Rust's regex crate")
        out.append(c)
        i += 1
    return "".join(out)


def _node_nullable(n: _Node, nullable: dict[str, bool]) -> bool:
    if isinstance(n, _Sym):
        return False
    if isinstance(n, _Ref):
        return nullable.get(n.name, False)
    if isinstance(n, _Seq):
        return all(_node_nullable(i, nullable) for i in n.items)
    if isinstance(n, _Alt):
        return any(_node_nullable(o, nullable) for o in n.options)
    return n.lo == 0 or _node_nullable(n.item, nullable)


def _nullable(rules: dict[str, _Node]) -> dict[str, bool]:
    out = {name: False for name in rules}
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if not out[name] and _node_nullable(body, out):
                out[name] = changed = True
    return out


def _first_syms(n: _Node, nullable: dict[str, bool], rule_first: dict[str, set[Sym]]) -> set[Sym]:
    if isinstance(n, _Sym):
        return {n.sym}
    if isinstance(n, _Ref):
        return rule_first.get(n.name, set())
    if isinstance(n, _Alt):
        return set().union(*(_first_syms(o, nullable, rule_first) for o in n.options)) if n.options else set()
    if isinstance(n, _Rep):
        return _first_syms(n.item, nullable, rule_first) if n.hi != 0 else set()
    out: set[Sym] = set()
    for i in n.items:
        out |= _first_syms(i, nullable, rule_first)
        if not _node_nullable(i, nullable):
            break
    return out


def _rule_first(rules: dict[str, _Node], nullable: dict[str, bool]) -> dict[str, set[Sym]]:
    """The symbols each rule's strings can start with (a fixpoint)."""
    rule_first: dict[str, set[Sym]] = {name: set() for name in rules}
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            f = _first_syms(body, nullable, rule_first)
            if not f <= rule_first[name]:
                rule_first[name] |= f
                changed = True
    return rule_first


def _always_extendable(rules: dict[str, _Node], nullable: dict[str, bool], root: str) -> bool:
    """Whether after *every* complete sentence the Earley parser still expects a lexeme (so llguidance
    takes ignored text at the very end of every sentence). A sufficient, structural condition on the
    node that ends every parse: an unbounded repetition at the end of the root, or a rule there with a
    left-recursive alternative ``A: A X ...`` (the item ``A → A · X ...`` is in the final Earley set
    whenever ``A`` completes); alternatives must all qualify."""
    rule_first = _rule_first(rules, nullable)

    def lexeme_first(n: _Node) -> bool:
        return any(s[0] == "lex" for s in _first_syms(n, nullable, rule_first))

    def left_recursive_tail(name: str) -> bool:
        body = rules[name]
        options = body.options if isinstance(body, _Alt) else (body,)
        for o in options:
            head = o.items[0] if isinstance(o, _Seq) and o.items else None
            if isinstance(head, _Ref) and head.name == name and lexeme_first(_Seq(o.items[1:])):  # type: ignore[union-attr]
                return True
        return False

    def ends_open(n: _Node, seen: frozenset[str]) -> bool:
        if isinstance(n, _Rep):
            return n.hi is None and lexeme_first(n.item)
        if isinstance(n, _Seq):
            return bool(n.items) and ends_open(n.items[-1], seen)
        if isinstance(n, _Alt):
            return bool(n.options) and all(ends_open(o, seen) for o in n.options)
        if isinstance(n, _Ref):
            if n.name not in rules or n.name in seen:
                return False
            return left_recursive_tail(n.name) or ends_open(rules[n.name], seen | {n.name})
        return False

    return ends_open(_Ref(root, 1, 1), frozenset())


def _may_end_before_lexeme(follow: dict[Sym, set[Sym]]) -> bool:
    """Some symbol may end the string and may also be followed by a lexeme (``Next`` is a superset:
    False proves that trailing ignored text is never possible)."""
    return any(END in nxt and p != START and any(x[0] == "lex" for x in nxt) for p, nxt in follow.items())


#: Repetitions ``{lo,hi}`` the LL(1) reading unfolds (``hi - lo`` optional copies) at most.
_UNFOLD = 64


def _desugar_reps(rules: dict[str, _Node], lines: dict[str, tuple[int, int]]) -> dict[str, _Node]:
    """The same language without repetitions: ``Y{lo,}`` as ``lo`` copies then a right-recursive rule
    ``R: Y R | ε``, ``Y{lo,hi}`` as ``lo`` copies then nested optionals — the shapes an LL(1) parser
    (and llguidance's Earley parser, for the right edge) reads one iteration at a time."""
    out = dict(rules)
    counter = [0]

    def d(n: _Node, rule: str) -> _Node:
        if isinstance(n, (_Sym, _Ref)):
            return n
        if isinstance(n, _Seq):
            return _Seq(tuple(d(i, rule) for i in n.items))
        if isinstance(n, _Alt):
            return _Alt(tuple(d(o, rule) for o in n.options))
        y = d(n.item, rule)
        if n.hi is None:
            counter[0] += 1
            name = f"{rule}@rep{counter[0]}"
            lines[name] = lines[rule]
            out[name] = _Alt((_Seq((y, _Ref(name, *lines[rule]))), _EPS))
            tail: _Node = _Ref(name, *lines[rule])
        else:
            if n.hi - n.lo > _UNFOLD:
                raise Unsupported(
                    "lark-lexer",
                    rule,
                    f"a repetition with up to {n.hi - n.lo} optional copies (at most {_UNFOLD} are unfolded to "
                    "decide where llguidance accepts trailing ignored text)",
                )
            tail = _EPS
            for _ in range(n.hi - n.lo):
                tail = _Alt((_Seq((y, tail)), _EPS))
        return _Seq((y,) * n.lo + (tail,))

    for name in list(rules):
        out[name] = d(rules[name], name)
    return out


def _ll1_conflict(
    rules: dict[str, _Node],
    nullable: dict[str, bool],
    root: str,
    overlap: Callable[[Sym, Sym], bool],
) -> str | None:
    """Whether the grammar is strong LL(1) over symbols, where two symbols the lexer could hand over
    for the same text count as one (Aho, Sethi & Ullman, *Compilers*, §4.4: for each ``A → α | β``,
    ``FIRST(α)`` and ``FIRST(β)``, and ``FOLLOW(A)`` where one is nullable, are disjoint). None if it
    is, else a description of the first conflict."""
    rule_first = _rule_first(rules, nullable)
    rule_follow = _rule_follow(rules, nullable, root, rule_first)

    def conflict(a: set[Sym], b: set[Sym]) -> tuple[Sym, Sym] | None:
        for x in a:
            for y in b:
                if (x == END and y == END) or (END not in (x, y) and overlap(x, y)):
                    return x, y
        return None

    def walk(n: _Node, after: set[Sym], rule: str) -> str | None:
        if isinstance(n, _Alt):
            sets = []
            for o in n.options:
                s = set(_first_syms(o, nullable, rule_first))
                if _node_nullable(o, nullable):
                    s |= after
                sets.append(s)
            for i in range(len(sets)):
                for j in range(i + 1, len(sets)):
                    c = conflict(sets[i], sets[j])
                    if c is not None:
                        return f"two alternatives in rule {rule.split('@')[0]!r} can both go on with the same lexeme"
            for o in n.options:
                found = walk(o, after, rule)
                if found:
                    return found
            return None
        if isinstance(n, _Seq):
            for k, item in enumerate(n.items):
                rest = _Seq(n.items[k + 1 :])
                nxt = set(_first_syms(rest, nullable, rule_first))
                if _node_nullable(rest, nullable):
                    nxt |= after
                found = walk(item, nxt, rule)
                if found:
                    return found
        return None

    for name, body in rules.items():
        found = walk(body, rule_follow[name], name)
        if found:
            return found
    return None


def _rule_follow(
    rules: dict[str, _Node], nullable: dict[str, bool], root: str, rule_first: dict[str, set[Sym]]
) -> dict[str, set[Sym]]:
    """FOLLOW of each rule (``END`` after the root), a fixpoint."""
    return _follow_sets(rules, nullable, root, rule_first)[0]


def _follow(rules: dict[str, _Node], nullable: dict[str, bool], root: str) -> dict[Sym, set[Sym]]:
    """``Next(P)``: the symbols that can come right after ``P`` (``START``: first; ``END``: may end)."""
    rule_first = _rule_first(rules, nullable)
    follow: dict[Sym, set[Sym]] = {START: set(rule_first[root]) | ({END} if nullable[root] else set())}
    follow.update(_follow_sets(rules, nullable, root, rule_first)[1])
    return follow


def _follow_sets(
    rules: dict[str, _Node], nullable: dict[str, bool], root: str, rule_first: dict[str, set[Sym]]
) -> tuple[dict[str, set[Sym]], dict[Sym, set[Sym]]]:
    """FOLLOW of each rule and of each symbol, one fixpoint (the classic FOLLOW computation)."""
    rule_follow: dict[str, set[Sym]] = {name: set() for name in rules}
    rule_follow[root].add(END)
    follow: dict[Sym, set[Sym]] = {}

    def walk(n: _Node, after: set[Sym]) -> bool:
        grew = False
        if isinstance(n, _Sym):
            cur = follow.setdefault(n.sym, set())
            if not after <= cur:
                cur |= after
                grew = True
        elif isinstance(n, _Ref):
            if n.name in rule_follow and not after <= rule_follow[n.name]:
                rule_follow[n.name] |= after
                grew = True
        elif isinstance(n, _Alt):
            for o in n.options:
                grew |= walk(o, after)
        elif isinstance(n, _Rep):
            inner = after | _first_syms(n.item, nullable, rule_first) if (n.hi is None or n.hi > 1) else after
            grew |= walk(n.item, inner)
        else:
            for k, item in enumerate(n.items):
                rest = _Seq(n.items[k + 1 :])
                nxt = _first_syms(rest, nullable, rule_first)
                if _node_nullable(rest, nullable):
                    nxt = nxt | after
                grew |= walk(item, nxt)
        return grew

    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            changed |= walk(body, set(rule_follow[name]))
    return rule_follow, follow


def compile_lark_network(spec: Lark, limits: Limits, embed: Callable[[Spec, Limits], Network]) -> Network:
    """A Lark grammar (llguidance's dialect) as a network, or a typed refusal (module docstring);
    ``embed`` compiles its ``%json`` and ``%regex`` specs (``_compile.compile_network``)."""
    if spec.dialect != "llguidance":
        raise Unsupported("lark-dialect", spec.dialect, "the reference reads llguidance's dialect only")
    size = len(spec.text.encode("utf-8", "surrogatepass"))
    if size > limits.schema_bytes:
        raise LimitExceeded("schema_bytes", size, limits.schema_bytes, "Lark grammar")
    return _Compiler(spec, limits, embed).compile()
