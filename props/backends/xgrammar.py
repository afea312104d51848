"""xgrammar behind the Backend protocol (``pip install xgrammar``; written against 0.2.9, supported from
0.1.17 by feature detection: see "Releases" below).

Theory of operation. One ``xgrammar.GrammarCompiler`` per vocabulary fingerprint, built from the
vocabulary's raw token bytes (``TokenizerInfo(encoded_vocab, VocabType.RAW, stop_token_ids=...)``:
special ids become empty strings, which xgrammar classifies as special tokens and never allows).
A matcher wraps one ``xgrammar.GrammarMatcher`` and the list of ids it accepted:

* ``mask()`` is ``fill_next_token_bitmask`` into an int32 ``[ceil(V/32)]`` array — xgrammar's own
  layout, EOS bits set by xgrammar itself. After EOS xgrammar refuses to compute a mask (its
  ``Check failed: !IsStopTokenAccepted()``); the adapter answers the empty mask instead.
* ``accept`` is ``accept_token``; a rejected token leaves xgrammar's state unchanged (documented in
  ``GrammarMatcher.accept_token``), so no fork is needed before probing.
* ``rollback(k)`` is xgrammar's ``rollback`` (unlimited since 0.1.2x: ``max_rollback_tokens`` is
  deprecated and always -1); ``fork()`` is xgrammar's ``GrammarMatcher.fork`` (deep copy of the parser
  state and token history). On an xgrammar without ``fork`` the adapter replays the accepted ids on
  a new matcher — O(n) in the tokens accepted so far.
* ``forced_bytes()`` is ``find_jump_forward_string`` (documented to stop before an incomplete UTF-8
  character, so it may be shorter than the true forced continuation); ``validate(ids)`` accepts the
  ids one by one and rolls back, the way vLLM's xgrammar backend checks speculative drafts.

Structural tags (``refdecoder.StructuralTag``, ``GrammarCompiler.compile_structural_tag``). A tag names
special tokens (``{"type": "token", "token": "<|tool_call|>"}``, ``exclude_tokens``, the
``token_triggered_tags`` triggers), and xgrammar resolves such a name in its ``TokenizerInfo``'s decoded
vocabulary: a special token must have its text there. Over the raw bytes above a special id is ``""``,
which xgrammar classifies as special (``TokenizerInfo.special_token_ids``) and never allows, so a tag
naming it by id allows nothing and naming it by text fails ("Token string ... not found in vocabulary").
So structural tags compile on a second ``GrammarCompiler`` per vocabulary whose ``TokenizerInfo`` gives
each named special id its text (``Vocabulary.special_names``; unnamed special ids stay ``""``). That is
what production builds: vLLM's and SGLang's xgrammar backends call
``TokenizerInfo.from_huggingface(tokenizer, vocab_size=..., stop_token_ids=...)``, which fills
``encoded_vocab`` from ``tokenizer.get_vocab()`` — every added and special token with its content as
text. The consequence (declared in the profile notes): in xgrammar a special token is a token whose text
is its name, allowed where the tag names it and also wherever that text is allowed (``any_text``
without ``excludes``, JSON strings); ``get_model_structural_tag(exclude_special_tokens=True)`` is how
the templates keep them out of free text. The reference reads a special token as one terminal, allowed
only where the tag names it, so the first shows as findings.

Releases. The adapter asks the installed xgrammar what it has, never its version string
(:data:`FEATURES`, read once at import):

* ``GrammarMatcher(max_rollback_tokens=...)`` defaults to 0 before 0.1.2x (no rollback at all: a
  "Check failed" on ``rollback``) and to -1, unlimited and deprecated, after. Where the default is 0
  the adapter passes :data:`ROLLBACK_LIMIT`.
* ``GrammarMatcher.is_completed`` (0.2.x) is "the matcher may stop here"; without it the adapter
  asks the mask whether a stop token is allowed, which is how those releases say it.
* ``GrammarMatcher.fork`` (0.2.x): without it a fork replays the accepted ids.
* ``compile_json_schema(max_whitespace_cnt=...)`` (0.1.2x): without it ``max_whitespace_cnt`` is an
  option the release does not have (:class:`~props.backends._common.UnsupportedOption`).
* ``fill_next_token_bitmask`` takes a ``torch.Tensor`` only (it reads ``bitmask.device``) where its
  annotation says so (before 0.1.2x); the adapter then passes ``torch.from_numpy`` of its array.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import xgrammar as xgr

from props.backends._common import (
    NativeMatcher,
    PerVocabulary,
    UnsupportedOption,
    check_rollback,
    dist_version,
    keyword_default,
    reject_at_edge,
)
from props.contract.backend import (
    Accepted,
    Backend,
    BackendMatcher,
    Compiled,
    CompileOutcome,
    DeclaredProfile,
    Refused,
    Rejected,
    TokenOutcome,
)
from props.corpus.toolcalls import TagOptions, TagRecord, registered_templates, tool_call_tags
from refdecoder import Choice, Gbnf, JsonProfile, JsonSchema, Lark, Regex, Spec, StructuralTag
from refdecoder.bitmask import num_words
from tokenizers_matrix import Vocabulary

__all__ = [
    "XGrammarBackend",
    "XGrammarMatcher",
    "declared_profile",
    "FEATURES",
    "ROLLBACK_LIMIT",
    "model_templates",
    "model_structural_tags",
]

_VERSION = dist_version("xgrammar")

#: What the installed xgrammar has (module docstring, "Releases").
FEATURES: dict[str, bool] = {
    "bounded_rollback": keyword_default(xgr.GrammarMatcher.__init__, "max_rollback_tokens") == 0,
    "is_completed": callable(getattr(xgr.GrammarMatcher, "is_completed", None)),
    "fork": callable(getattr(xgr.GrammarMatcher, "fork", None)),
    "max_whitespace_cnt": "max_whitespace_cnt"
    in inspect.signature(xgr.GrammarCompiler.compile_json_schema).parameters,
    # fill_next_token_bitmask(bitmask: torch.Tensor) reads bitmask.device (before 0.1.2x); later
    # releases take any array (numpy's ArrayLike in the annotation)
    "torch_bitmask": "torch"
    in str(inspect.signature(xgr.GrammarMatcher.fill_next_token_bitmask).parameters["bitmask"].annotation),
    # the structural-tag JSON form ({"type": "structural_tag", "format": ...}, xgrammar.structural_tag):
    # 0.1.2x and later; older releases take only the deprecated (tags, triggers) form
    "structural_tag": hasattr(xgr, "structural_tag") and hasattr(xgr, "StructuralTag"),
}
#: The rollback history the adapter asks of releases whose default is none (``bounded_rollback``).
ROLLBACK_LIMIT = 1 << 20

# xgrammar reports converter and parser errors as RuntimeError("[hh:mm:ss] /path/file.cc:LINE: message").
# Those are its documented refusals ("Raises RuntimeError: When converting the json schema fails",
# Grammar.from_json_schema / from_regex / from_ebnf docstrings). "Check failed" is a C++ assertion:
# an internal bug, never a refusal, so it propagates.
_CPP_PREFIX = re.compile(r"^\[[0-9:]+\]\s+\S+?:\d+:\s*")


def declared_profile(
    any_whitespace: bool = True, max_whitespace_cnt: int | None = None, strict_mode: bool = True
) -> DeclaredProfile:
    """The language xgrammar's ``compile_json_schema`` produces for these options.

    Sources (xgrammar 0.2.9, ``xgrammar/compiler.py``, ``GrammarCompiler.compile_json_schema`` and
    ``xgrammar/grammar.py``, ``Grammar.from_json_schema`` docstrings; confirmed on the EBNF that
    ``Grammar.from_json_schema(...)`` prints):

    * whitespace: ``any_whitespace=True`` (default) puts ``[ \\n\\r\\t]*`` in every gap -> ``"any"``;
      ``max_whitespace_cnt=N`` bounds each gap to N characters -> ``N``; ``any_whitespace=False`` uses
      ``separators``, and the adapter passes ``(",", ":")`` so that this is exactly ``"none"``
      (xgrammar's own default there, ``(", ", ": ")``, is a fixed single space no profile expresses).
    * property order: ``any_order=False`` (default) -> "properties follow the schema's declared order"
      -> ``"schema"``. ``any_order=True`` drops required-key and uniqueness checks, which no profile
      expresses, so the adapter does not offer it.
    * ``strict_mode=True`` (default) "is equivalent to setting unevaluatedProperties and
      unevaluatedItems to false" -> ``additional_properties_default=False``.
    * keys admitted by ``additionalProperties``/``patternProperties`` are not remembered, so they can
      repeat -> ``allow_duplicate_keys=True``; declared keys appear once, in order.
    * strings: ``basic_escape ::= ["\\\\/bfnrt] | "u" hex{4}`` -> ``unicode_escapes=True``.
    * ``format``: xgrammar compiles the formats it knows (date, time, date-time, email, uuid, ipv4,
      ipv6, hostname, uri, ...) into regexes and ignores the rest -> ``"assert"`` (the reference
      refuses formats it has no exact implementation for).
    """
    if not any_whitespace:
        ws: Any = "none"
    elif max_whitespace_cnt is not None:
        ws = int(max_whitespace_cnt)
    else:
        ws = "any"
    notes = [
        f"xgrammar/compiler.py GrammarCompiler.compile_json_schema: any_whitespace={any_whitespace}, "
        f"max_whitespace_cnt={max_whitespace_cnt}, strict_mode={strict_mode}, any_order=False",
        "whitespace: [ \\n\\r\\t]* between JSON tokens (printed EBNF of Grammar.from_json_schema), none before or "
        "after the top-level value -> top_level_whitespace=False",
        "property order = schema order (any_order=False: 'properties follow the schema's declared order')",
        "regex dialect: ECMAScript-like (xgrammar regex_converter); lookahead is ignored with a warning",
        "EOS: stop_token_ids = the vocabulary's EOS ids; special ids are empty strings (never allowed)",
        "structural tags: compiled with a TokenizerInfo in which every named special token has its name as "
        "text, as vLLM/SGLang build it (TokenizerInfo.from_huggingface reads get_vocab()): a tag's token "
        "formats resolve names there, and xgrammar allows a special token wherever its text is allowed too "
        "(any_text without excludes, JSON strings); unnamed special ids stay empty strings (never allowed)",
    ]
    if strict_mode:
        notes.append(
            "strict_mode=True also means unevaluatedItems=false: prefixItems without items admits no further "
            "items -> additional_items_default=False"
        )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace=ws,
            property_order="schema",
            additional_properties_default=not strict_mode,
            allow_duplicate_keys=True,
            unicode_escapes=True,
            formats="assert",
            top_level_whitespace=False,
            additional_items_default=not strict_mode,
            # measured: {"a": 1} passes dependencies {"a": ["b"]} in a 2020-12 schema
            legacy_dependencies="ignore",
        ),
        canonical_tokenization_only=False,
        # find_jump_forward_string stops before an incomplete UTF-8 character (its docstring).
        jump_forward_prefix_ok=True,
        notes=tuple(notes),
    )


@dataclass(frozen=True, eq=False)
class _Handle:
    """What ``compile`` returns inside ``Compiled.handle``."""

    grammar: Any  # xgrammar.CompiledGrammar
    vocab_size: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


def _refusal(e: RuntimeError) -> Refused | None:
    text = str(e)
    if "Check failed" in text:
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    reason = _CPP_PREFIX.sub("", first).strip()
    keyword = ""
    if "regex" in reason.lower() or "Regex" in reason:
        keyword = "pattern"
    m = re.match(r"Unsupported (\w+)", reason)
    if m:
        keyword = m.group(1)
    return Refused(f"xgrammar: {reason}", keyword, "")


# xgrammar 0.2.9's GrammarCompiler.compile_structural_tag reports an invalid tag or invalid JSON (its
# documented InvalidStructuralTagError / InvalidJSONError) as a failed C++ Check with this text: a
# refusal of the tag, not an internal assertion.
_TAG_ERROR = re.compile(r"(Invalid structural tag error|Invalid JSON error): (.*)", re.S)


def _tag_refusal(e: RuntimeError) -> Refused | None:
    documented = tuple(
        getattr(getattr(xgr, "exception", None), name, RuntimeError)
        for name in ("InvalidStructuralTagError", "InvalidJSONError")
    )
    if type(e) is not RuntimeError and isinstance(e, documented):
        return Refused(f"xgrammar: {str(e).strip()[:500]}", "structural_tag", "")
    m = _TAG_ERROR.search(str(e))
    if m is None:
        return _refusal(e)
    detail = " ".join(m.group(2).split())[:500]
    return Refused(
        f"xgrammar: {m.group(1)}: {detail} (raised as a failed Check, not as the documented exception)",
        "structural_tag",
        "",
    )


def _special_token_texts(vocabulary: Vocabulary) -> list[bytes]:
    """The encoded vocabulary of a ``TokenizerInfo`` as production builds it (module docstring,
    "Structural tags"): text tokens as their bytes, each named special id as its name, others ``b""``."""
    return [
        b if b is not None else (vocabulary.special_name(i) or "").encode("utf-8")
        for i, b in enumerate(vocabulary.token_bytes)
    ]


def _name_conflicts(spec: StructuralTag, vocabulary: Vocabulary) -> Refused | None:
    """A tag whose special-token table names an id the vocabulary spells otherwise: xgrammar resolves
    names in the vocabulary, the reference in the table, so the two would read different tags."""
    for name, token_id in dict(spec.special_tokens).items():
        if not 0 <= token_id < len(vocabulary):
            return Refused(
                f"xgrammar adapter: special token {name!r} is id {token_id}, outside the vocabulary"
            )
        text = vocabulary.token_bytes[token_id]
        own = vocabulary.special_name(token_id) if text is None else text.decode("utf-8", "replace")
        if own != name:
            return Refused(
                f"xgrammar adapter: the tag's table names id {token_id} {name!r}, but the vocabulary's token "
                f"{token_id} is {own!r} (xgrammar resolves token names in the vocabulary)",
                "special_tokens",
                "",
            )
    return None


def _ebnf_literal(text: str) -> str:
    """``text`` as an xgrammar EBNF string literal (JSON escapes, which its grammar parser accepts)."""
    return json.dumps(text, ensure_ascii=False)


class XGrammarBackend:
    """xgrammar as a Backend. Options are xgrammar's own ``compile_json_schema`` options (see
    :func:`declared_profile` for how each maps to the declared ``JsonProfile``)."""

    name = "xgrammar"
    version = _VERSION

    def __init__(
        self,
        any_whitespace: bool = True,
        max_whitespace_cnt: int | None = None,
        strict_mode: bool = True,
        max_threads: int = 8,
        cache_enabled: bool = True,
        max_compilers: int = 4,
    ) -> None:
        if max_whitespace_cnt is not None and (not any_whitespace or max_whitespace_cnt < 1):
            raise ValueError(
                "max_whitespace_cnt needs any_whitespace=True and a value >= 1 (xgrammar's rule)"
            )
        if max_whitespace_cnt is not None and not FEATURES["max_whitespace_cnt"]:
            raise UnsupportedOption(
                "xgrammar", _VERSION, "max_whitespace_cnt", "compile_json_schema has no max_whitespace_cnt"
            )
        self.any_whitespace = any_whitespace
        self.max_whitespace_cnt = max_whitespace_cnt
        self.strict_mode = strict_mode
        self.max_threads = max_threads
        self.cache_enabled = cache_enabled
        self.profile = declared_profile(any_whitespace, max_whitespace_cnt, strict_mode)
        self._compilers: PerVocabulary[xgr.GrammarCompiler] = PerVocabulary(
            self._build_compiler, max_compilers
        )
        # structural tags: special tokens keep their text (module docstring, "Structural tags")
        self._tag_compilers: PerVocabulary[xgr.GrammarCompiler] = PerVocabulary(
            self._build_tag_compiler, max_compilers
        )

    def _compiler(self, vocabulary: Vocabulary) -> xgr.GrammarCompiler:
        return self._compilers.get(vocabulary)

    def _tag_compiler(self, vocabulary: Vocabulary) -> xgr.GrammarCompiler:
        """The compiler of structural tags (module docstring, "Structural tags")."""
        return self._tag_compilers.get(vocabulary)

    def _build_tag_compiler(self, vocabulary: Vocabulary) -> xgr.GrammarCompiler:
        return self._raw_compiler(vocabulary, _special_token_texts(vocabulary))

    def _build_compiler(self, vocabulary: Vocabulary) -> xgr.GrammarCompiler:
        return self._raw_compiler(vocabulary, [b if b is not None else b"" for b in vocabulary.token_bytes])

    def _raw_compiler(self, vocabulary: Vocabulary, encoded: list[bytes]) -> xgr.GrammarCompiler:
        info = xgr.TokenizerInfo(
            encoded,
            xgr.VocabType.RAW,
            vocab_size=len(encoded),
            stop_token_ids=sorted(vocabulary.eos_ids),
        )
        compiler = xgr.GrammarCompiler(info, max_threads=self.max_threads, cache_enabled=self.cache_enabled)
        return compiler

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        """Compile with xgrammar; its converter/parser errors are refusals, assertion failures are not.

        A ``JsonSchema`` is compiled with this backend's options (its ``profile`` is the reference's
        business: the certifier compiles the reference with :attr:`profile`). A ``StructuralTag``
        compiles on the compiler whose special tokens keep their text (module docstring)."""
        if isinstance(spec, Lark):
            return Refused(
                "xgrammar adapter: Lark grammars (llguidance's dialect) are not an xgrammar spec kind",
                "lark",
                "",
            )
        if isinstance(spec, StructuralTag):
            return self._compile_tag(spec, vocabulary)
        compiler = self._compiler(vocabulary)
        t0 = time.perf_counter()
        try:
            if isinstance(spec, JsonSchema):
                kwargs: dict[str, Any] = {
                    "any_whitespace": self.any_whitespace,
                    "strict_mode": self.strict_mode,
                }
                if not self.any_whitespace:
                    kwargs["separators"] = (",", ":")
                if self.max_whitespace_cnt is not None:
                    kwargs["max_whitespace_cnt"] = self.max_whitespace_cnt
                grammar = compiler.compile_json_schema(json.dumps(spec.schema), **kwargs)
            elif isinstance(spec, Regex):
                grammar = compiler.compile_regex(spec.pattern)
            elif isinstance(spec, Gbnf):
                grammar = compiler.compile_grammar(spec.text, root_rule_name=spec.root)
            elif isinstance(spec, Choice):
                if not spec.options:
                    return Refused("xgrammar: an empty choice list has no EBNF form", "choice", "")
                ebnf = "root ::= " + " | ".join(_ebnf_literal(o) for o in spec.options)
                grammar = compiler.compile_grammar(ebnf)
            else:
                return Refused(f"xgrammar adapter: unknown spec type {type(spec).__name__}", "", "")
        except RuntimeError as e:
            refused = _refusal(e)
            if refused is None:
                raise
            return refused
        return _compiled(grammar, vocabulary, t0)

    def _compile_tag(self, spec: StructuralTag, vocabulary: Vocabulary) -> CompileOutcome:
        if not FEATURES["structural_tag"]:
            return Refused(
                f"xgrammar {_VERSION}: no structural tags in their JSON form (xgrammar.structural_tag)",
                "structural_tag",
                "",
            )
        conflict = _name_conflicts(spec, vocabulary)
        if conflict is not None:
            return conflict
        compiler = self._tag_compiler(vocabulary)
        # xgrammar takes {"type": "structural_tag", "format": ...}; the spec may be the bare format
        tag = (
            spec.tag
            if spec.tag.get("type") == "structural_tag"
            else {"type": "structural_tag", "format": spec.tag}
        )
        t0 = time.perf_counter()
        try:
            grammar = compiler.compile_structural_tag(json.dumps(tag))
        except RuntimeError as e:
            refused = _tag_refusal(e)
            if refused is None:
                raise
            return refused
        return _compiled(grammar, vocabulary, t0)

    def matcher(self, compiled: Compiled) -> XGrammarMatcher:
        handle: _Handle = compiled.handle
        return XGrammarMatcher(handle, _native_matcher(handle.grammar), [])


def _compiled(grammar: Any, vocabulary: Vocabulary, t0: float) -> Compiled:
    """A compiled grammar as the Backend protocol's value, its compile time from ``t0`` (perf_counter)."""
    handle = _Handle(
        grammar, len(vocabulary.token_bytes), frozenset(vocabulary.eos_ids), tuple(vocabulary.token_bytes)
    )
    return Compiled(handle, (time.perf_counter() - t0) * 1000)


def _native_matcher(grammar: Any) -> xgr.GrammarMatcher:
    if FEATURES["bounded_rollback"]:
        return xgr.GrammarMatcher(grammar, max_rollback_tokens=ROLLBACK_LIMIT)
    return xgr.GrammarMatcher(grammar)


class XGrammarMatcher(NativeMatcher[xgr.GrammarMatcher]):
    """One sequence on an ``xgrammar.GrammarMatcher`` (see the module docstring)."""

    state_prefix = "xgrammar"

    def mask(self) -> np.ndarray:
        out = np.zeros(num_words(self._h.vocab_size), dtype=np.int32)
        if self._m.is_terminated():
            return out  # xgrammar refuses to fill a mask after EOS; nothing is allowed then
        if FEATURES["torch_bitmask"]:
            import torch  # the releases that want a tensor depend on torch

            self._m.fill_next_token_bitmask(torch.from_numpy(out).unsqueeze(0))  # shares out's memory
        else:
            self._m.fill_next_token_bitmask(out)
        return out

    def accept(self, token_id: int) -> TokenOutcome:
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._m.is_terminated()
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        if not self._m.accept_token(token_id):
            return Rejected(
                token_id, data, self._state_id(), "xgrammar GrammarMatcher.accept_token returned False"
            )
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), self._m.is_terminated())

    def is_accepting(self) -> bool:
        if self._m.is_terminated():
            return False
        if FEATURES["is_completed"]:
            return bool(self._m.is_completed())
        mask = self.mask()  # releases without is_completed: a stop token is allowed exactly here
        return any(int(mask[t >> 5]) >> (t & 31) & 1 for t in self._h.eos_ids)

    def is_terminated(self) -> bool:
        return bool(self._m.is_terminated())

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        if k == 0:
            return
        self._m.rollback(k)
        del self._ids[len(self._ids) - k :]

    def fork(self) -> XGrammarMatcher:
        if FEATURES["fork"]:
            return XGrammarMatcher(self._h, self._m.fork(), list(self._ids))
        native = _native_matcher(self._h.grammar)  # older xgrammar: replay, O(n)
        for t in self._ids:
            if not native.accept_token(t):
                raise RuntimeError(
                    f"xgrammar replay diverged: token {t} accepted before is rejected on replay"
                )
        return XGrammarMatcher(self._h, native, list(self._ids))

    def forced_bytes(self) -> bytes:
        if self._m.is_terminated():
            return b""
        return str(self._m.find_jump_forward_string()).encode("utf-8")

    def validate(self, ids: list[int]) -> int:
        """How many leading ``ids`` xgrammar accepts one by one (then rolled back: state unchanged)."""
        n = 0
        for t in ids:
            if not 0 <= t < self._h.vocab_size or self._m.is_terminated() or not self._m.accept_token(t):
                break
            n += 1
        if n:
            self._m.rollback(n)
        return n

    def __repr__(self) -> str:
        return f"XGrammarMatcher(num_accepted={len(self._ids)}, terminated={self.is_terminated()})"


def model_templates() -> tuple[str, ...]:
    """The model templates the installed xgrammar registers for ``get_model_structural_tag``."""
    return registered_templates(xgr)


def model_structural_tags(tools: list[dict[str, Any]], options: Sequence[TagOptions]) -> list[TagRecord]:
    """The structural tag xgrammar's own ``get_model_structural_tag`` makes of ``tools`` for each of
    ``options`` (their ``tools`` field is ignored: the list given is used), or the engine's refusal
    (``props.corpus.toolcalls.tool_call_tags``; ``maskcert certify --tools``)."""
    keyed = [replace(o, tools="tools") for o in options]
    return tool_call_tags(xgr, keyed, {"tools": tools})


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: XGrammarBackend, matcher: XGrammarMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
