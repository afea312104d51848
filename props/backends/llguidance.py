"""llguidance behind the Backend protocol (``pip install llguidance``; written against 1.9.1, supported
from 0.7.1, the first release with ``LLMatcher``, by feature detection: see "Releases" below).

Theory of operation. One ``llguidance.LLTokenizer`` per vocabulary fingerprint, built through
``llguidance.TokenizerWrapper`` from the vocabulary's raw token bytes: special ids become
``b"\\xff" + name`` (llguidance's marker for special tokens, as in ``llguidance/llamacpp.py``), the
EOS ids are passed as ``eos_token``, and the wrapper's tokenize function is the vocabulary's own
``encode``. A spec becomes an llguidance grammar with llguidance's own constructors
(``LLMatcher.grammar_from_json_schema`` / ``grammar_from_regex``, ``llguidance.grammar_from("gbnf" |
"choice", ...)``); ``LLMatcher.validate_grammar_with_warnings`` is the compile step, and its error is
the refusal.

Special tokens and Lark (``refdecoder.Lark``, compiled with ``LLMatcher.grammar_from_lark``). In the
``LLTokenizer`` every special id is ``b"\\xff" + its name`` — llguidance's marker, the one production
gives it too: ``llguidance.hf.from_tokenizer`` hands the tokenizer.json to the Rust ``toktrie_hf``,
which marks each added token with ``special: true`` the same way. So a Lark ``<|tool_call|>`` resolves
to the special token named ``<|tool_call|>``, ``<[id]>`` to any id, and the token is never text: it is
allowed only where the grammar names it, as the reference reads it. A spec whose ``special_tokens``
table names an id the vocabulary calls otherwise is refused (the two sides would read different
grammars). Structural tags are xgrammar's format, not llguidance's (its ``StructTag`` is another one):
refused.

An ``LLMatcher`` never raises for grammar or token errors: it enters a sticky error state
(``_lib.pyi``, ``LLMatcher.__new__`` note). So the adapter never feeds it a token it would refuse:

* ``accept(t)`` is ``consume_token(t)``'s verdict, taken without risking the live matcher: when
  ``validate_tokens([t])`` (no state change) says yes, ``consume_token`` on the matcher (a refusal
  then raises :class:`LLGuidanceError`, a ``crash``); otherwise ``consume_token`` on a
  ``deep_copy``, adopted only if llguidance accepts the token there.
* ``rollback(k)`` is llguidance's ``rollback`` after a bounds check (rolling back too far puts the
  matcher in the error state); ``fork()`` is ``deep_copy``.
* ``mask()`` is ``compute_bitmask`` (one bit per token, xgrammar's layout, EOS bits set by
  llguidance). After EOS llguidance keeps offering EOS; the adapter answers the empty mask then.
* ``forced_bytes()`` is ``compute_ff_bytes``, a forced special token (llguidance's ``b"\\xff[id]"``)
  written as maskcert's ``refdecoder.special_token_bytes(id)``; ``validate(ids)`` is ``validate_tokens``.

Releases. The adapter asks the installed llguidance what it has (:data:`FEATURES`, read once at
import from the extension's ``__text_signature__`` and attributes, never from its version string):

* ``LLTokenizer(eos_token=...)`` takes a list of ids in 1.x and one id before; the adapter passes the
  list and, when the release refuses it (``TypeError``), the smallest EOS id (other EOS ids are then
  special tokens, never allowed).
* ``LLMatcher.validate_grammar_with_warnings`` (0.7.1x) -> ``validate_grammar`` (returns the error
  text) -> neither (0.7.1-0.7.10): the grammar is validated by building an ``LLMatcher``, whose
  constructor raises ``ValueError`` for an invalid grammar (its docstring).
* ``LLParserLimits`` and ``LLMatcher(limits=...)`` (0.7.1x): without them the ``limits`` option is one
  the release lacks (:class:`~props.backends._common.UnsupportedOption`).
* ``grammar_from("choice", ...)``: without it a choice list is the Lark grammar
  ``start: "a" | "b"`` (JSON string literals, which llguidance's Lark accepts).
* ``LLMatcher.rollback`` returns ``None`` before 0.7.2x and a success flag after; either way the
  adapter then checks ``is_error()``.
* ``JsonCompileOptions.json_allow_general_unicode_escapes`` (1.3 and later): without it (the JSON
  compiler answers "unknown field", probed once on the byte vocabulary) the adapter does not pass it,
  and the declared profile is llguidance's default (``unicode_escapes=False``).
* Some releases (0.7.1x) put a *stopped* matcher in the error state when ``validate_tokens`` is asked
  about EOS; so ``accept`` on a stopped matcher always probes on a ``deep_copy`` (``validate`` still
  asks ``validate_tokens``, and its error is a ``crash``, the release's defect).
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import llguidance as llg
import numpy as np

from props.backends._common import (
    NativeMatcher,
    PerVocabulary,
    UnsupportedOption,
    check_rollback,
    dist_version,
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
from refdecoder import (
    Choice,
    Gbnf,
    JsonProfile,
    JsonSchema,
    Lark,
    Regex,
    Spec,
    StructuralTag,
    special_token_bytes,
)
from refdecoder.bitmask import num_words
from refdecoder.errors import MaskcertError
from tokenizers_matrix import Vocabulary

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

__all__ = ["LLGuidanceBackend", "LLGuidanceMatcher", "LLGuidanceError", "declared_profile"]

_VERSION = dist_version("llguidance", getattr(llg, "__version__", "unknown"))


def _has_choice_format() -> bool:
    try:
        llg.grammar_from("choice", '["a"]')
    except ValueError:  # grammar_from's "Unknown grammar type" (releases before 0.7.1x)
        return False
    return True


#: What the installed llguidance has (module docstring, "Releases").
FEATURES: dict[str, bool] = {
    "validate_with_warnings": callable(getattr(llg.LLMatcher, "validate_grammar_with_warnings", None)),
    "validate_grammar": callable(getattr(llg.LLMatcher, "validate_grammar", None)),
    "limits": hasattr(llg, "LLParserLimits")
    and "limits" in str(getattr(llg.LLMatcher, "__text_signature__", "") or ""),
    "choice": _has_choice_format(),
}


@functools.cache
def general_unicode_escapes_supported() -> bool:
    """Whether the JSON compiler knows ``json_allow_general_unicode_escapes`` (probed on the byte
    vocabulary: an unknown option is a grammar error, not an exception)."""
    import tokenizers_matrix as tm

    grammar = llg.LLMatcher.grammar_from_json_schema(
        '{"type": "string"}', overrides={"json_allow_general_unicode_escapes": True}
    )
    tok = _lltokenizer(tm.byte_vocabulary())
    try:
        native = llg.LLMatcher(tok, grammar, log_level=0)
    except ValueError:  # the oldest releases raise for an invalid grammar
        return False
    return not native.is_error()


def _lltokenizer(vocabulary: Vocabulary) -> llg.LLTokenizer:
    wrapper = llg.TokenizerWrapper(_ByteTokenizer(vocabulary))
    eos = sorted(vocabulary.eos_ids)
    try:
        return llg.LLTokenizer(wrapper, eos_token=eos)
    except TypeError:  # releases before 1.x take one EOS id ("Releases" in the module docstring)
        return llg.LLTokenizer(wrapper, eos_token=eos[0])


class LLGuidanceError(MaskcertError, RuntimeError):
    """llguidance misbehaved where the adapter cannot answer: an ``LLMatcher`` in its error state
    (never entered on purpose), or a mask that allows ids outside the vocabulary. A ``crash``."""

    def __init__(self, operation: str, message: str) -> None:
        self.operation = operation
        self.message = message
        super().__init__(f"llguidance {operation}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:  # crosses the worker's pipe as itself
        return (type(self), (self.operation, self.message))


def declared_profile(
    whitespace_flexible: bool = True, general_unicode_escapes: bool = True
) -> DeclaredProfile:
    """The language llguidance's JSON compiler produces with these options.

    Sources (llguidance 1.9.1): ``llguidance/_lib.pyi``, ``class JsonCompileOptions`` (the option
    defaults) and upstream ``docs/json_schema.md``; each point confirmed on the matcher in
    ``tests/test_adapters.py``.

    * whitespace: ``whitespace_flexible`` "defaults to true (r"[\\x20\\x0A\\x0D\\x09]+")" -> ``"any"``;
      false with the default separators ``","`` / ``":"`` -> ``"none"``.
    * property order: declared properties in the order of ``properties``, then additional ones
      (docs/json_schema.md) -> ``"schema"``.
    * ``additionalProperties`` absent means true (JSON Schema's meaning) -> ``True``; keys admitted by
      ``additionalProperties`` can repeat -> ``allow_duplicate_keys=True``.
    * escapes: by default llguidance allows ``\\uXXXX`` only for control characters, and never
      ``\\/``. Neither is a profile, so the adapter sets ``json_allow_general_unicode_escapes=True``
      ("permit printable Unicode escapes in strings without regex constraints") and declares
      ``unicode_escapes=True``; what remains (no ``\\/``, no escapes inside strings with a ``pattern``
      or ``format``) shows as completeness differences.
    * ``format``: known formats are enforced, unknown ones are an error ("Unknown format") ->
      ``"assert"``; unimplemented keywords are errors unless ``lenient`` ("Unimplemented keys").
    """
    notes = [
        f"llguidance/_lib.pyi JsonCompileOptions: whitespace_flexible={whitespace_flexible} (default true), "
        "item_separator ',', key_separator ':', lenient=false, coerce_one_of=false, "
        f"json_allow_general_unicode_escapes={general_unicode_escapes} (adapter setting; llguidance's default is false)",
        "no whitespace before or after the top-level value -> top_level_whitespace=False",
        'string characters: [^"\\\\\\x00-\\x1F\\x7F] raw (U+007F must be escaped); no \\/ escape at all',
        "property order = order of 'properties' (docs/json_schema.md); additionalProperties default true",
        "regex dialect: Rust regex crate (grammar_from_regex); Gbnf through llguidance.grammar_from('gbnf')",
        "special tokens: b'\\xff' + name in the LLTokenizer (as llguidance.hf.from_tokenizer marks added "
        "special tokens): Lark <|name|> / <[id]> name them, and they are never text",
    ]
    if not general_unicode_escapes:
        notes.append(
            "llguidance's default escapes (\\uXXXX only for control characters) match no profile: "
            "unicode_escapes=False is declared, so \\u escapes of control characters show as differences"
        )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace="any" if whitespace_flexible else "none",
            property_order="schema",
            additional_properties_default=True,
            allow_duplicate_keys=True,
            unicode_escapes=general_unicode_escapes,
            formats="assert",
            top_level_whitespace=False,
            # measured: {"a": 1} passes dependencies {"a": ["b"]} in a 2020-12 schema
            legacy_dependencies="ignore",
        ),
        canonical_tokenization_only=False,
        notes=tuple(notes),
    )


class _ByteTokenizer:
    """The tokenizer object ``llguidance.TokenizerWrapper`` expects, over a maskcert Vocabulary."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        eos = sorted(vocabulary.eos_ids)
        self.eos_token_id = eos[0]
        self.bos_token_id = None
        self.tokens: list[bytes] = []
        for i, data in enumerate(vocabulary.token_bytes):
            if data is None:
                name = vocabulary.special_name(i) or f"<special_{i}>"
                data = b"\xff" + name.encode("utf-8")
            self.tokens.append(data)
        self.special_token_ids = sorted(vocabulary.special_ids)
        self._vocabulary = vocabulary

    def __call__(self, text: str) -> list[int]:
        # TokenizerWrapper probes with bytes first; refusing bytes makes it pass str (what encode takes).
        if not isinstance(text, str):
            raise TypeError("this tokenizer takes str")
        return list(self._vocabulary.encode(text))


@dataclass(frozen=True, eq=False)
class _Handle:
    grammar: str  # llguidance's serialized grammar
    tokenizer: Any  # llguidance.LLTokenizer
    vocab_size: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)
    limits: Any = None


def _name_conflicts(spec: Lark, vocabulary: Vocabulary) -> Refused | None:
    """A grammar whose special-token table names an id that is not that special token of the
    vocabulary: llguidance resolves ``<|name|>`` in its tokenizer, the reference in the table, so the
    two would read different grammars."""
    for name, token_id in dict(spec.special_tokens).items():
        if not 0 <= token_id < len(vocabulary) or vocabulary.special_name(token_id) != name:
            own = (
                vocabulary.token_repr(token_id)
                if 0 <= token_id < len(vocabulary)
                else "outside the vocabulary"
            )
            return Refused(
                f"llguidance adapter: the grammar's table names special token {name!r} id {token_id}, but the "
                f"vocabulary's id {token_id} is {own} (llguidance resolves <|name|> in its tokenizer)",
                "special_tokens",
                "",
            )
    return None


_UNIMPLEMENTED = re.compile(r'Unimplemented keys: \["([^"]+)"')
# A special token in compute_ff_bytes (llguidance 1.9.1 writes the token id in brackets after 0xFF).
_FORCED_SPECIAL = re.compile(rb"\xff\[([0-9]+)\]")


def _refused(message: str) -> Refused:
    keyword = ""
    m = _UNIMPLEMENTED.search(message)
    if m:
        keyword = m.group(1)
    elif "Unknown format" in message:
        keyword = "format"
    elif "oneOf" in message:
        keyword = "oneOf"
    text = " ".join(message.split())[:500] or "grammar error"
    return Refused(f"llguidance: {text}", keyword, "")


class LLGuidanceBackend:
    """llguidance as a Backend; options are llguidance's ``JsonCompileOptions`` (see
    :func:`declared_profile`)."""

    name = "llguidance"
    version = _VERSION

    def __init__(
        self,
        whitespace_flexible: bool = True,
        general_unicode_escapes: bool = True,
        limits: dict[str, Any] | None = None,
        log_level: int = 1,
        max_tokenizers: int = 4,
    ) -> None:
        self.whitespace_flexible = whitespace_flexible
        # without the option in this release, llguidance's own default applies ("Releases")
        self.general_unicode_escapes = general_unicode_escapes and general_unicode_escapes_supported()
        self.profile = declared_profile(whitespace_flexible, self.general_unicode_escapes)
        if limits and not FEATURES["limits"]:
            raise UnsupportedOption("llguidance", _VERSION, "limits", "this release has no LLParserLimits")
        self._limits = llg.LLParserLimits(**limits) if limits else None
        self._log_level = log_level
        self._tokenizers: PerVocabulary[llg.LLTokenizer] = PerVocabulary(
            self._build_tokenizer, max_tokenizers
        )

    def json_options(self) -> JsonCompileOptions:
        options: JsonCompileOptions = {"whitespace_flexible": self.whitespace_flexible}
        if self.general_unicode_escapes:
            options["json_allow_general_unicode_escapes"] = True
        return options

    def _tokenizer(self, vocabulary: Vocabulary) -> llg.LLTokenizer:
        return self._tokenizers.get(vocabulary)

    def _build_tokenizer(self, vocabulary: Vocabulary) -> llg.LLTokenizer:
        return _lltokenizer(vocabulary)

    def _grammar(self, spec: Spec) -> str | Refused:
        if isinstance(spec, JsonSchema):
            schema = spec.schema
            if schema is False:  # options apply to object schemas only; 'false' has no strings anyway
                return str(llg.LLMatcher.grammar_from_json_schema("false"))
            if schema is True:
                schema = {}  # the same schema (JSON Schema 2020-12 §4.3.2), in the form options apply to
            return str(
                llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=self.json_options())
            )
        if isinstance(spec, Regex):
            return str(llg.LLMatcher.grammar_from_regex(spec.pattern))
        if isinstance(spec, Choice):
            if not spec.options:
                return Refused("llguidance: an empty choice list has no grammar form", "choice", "")
            if FEATURES["choice"]:
                return str(llg.grammar_from("choice", json.dumps(list(spec.options))))
            alternatives = " | ".join(json.dumps(o, ensure_ascii=False) for o in spec.options)
            return str(llg.LLMatcher.grammar_from_lark(f"start: {alternatives}"))
        if isinstance(spec, Gbnf):
            text = spec.text
            if spec.root != "root":
                # llguidance's GBNF converter starts at the rule named 'root' (gbnf_to_lark.resolve).
                if re.search(r"(?m)^\s*root\s*::=", text):
                    return Refused(
                        "llguidance: GBNF start rule must be 'root', and 'root' names another rule",
                        "root",
                        "",
                    )
                text = f"root ::= {spec.root}\n{text}"
            try:
                return str(llg.grammar_from("gbnf", text))
            except ValueError as e:  # grammar_from's documented conversion failure
                return Refused(f"llguidance: {e}", "", "")
        if isinstance(spec, Lark):
            # the grammar text as it is: <|name|> and <[id]> resolve in the LLTokenizer (module docstring)
            return str(llg.LLMatcher.grammar_from_lark(spec.text))
        if isinstance(spec, StructuralTag):
            return Refused(
                "llguidance adapter: xgrammar structural tags are not an llguidance spec kind "
                "(llguidance's own StructTag is another format)",
                "structural_tag",
                "",
            )
        return Refused(f"llguidance adapter: unknown spec type {type(spec).__name__}", "", "")

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        if isinstance(spec, Lark):
            conflict = _name_conflicts(spec, vocabulary)
            if conflict is not None:
                return conflict
        tok = self._tokenizer(vocabulary)
        t0 = time.perf_counter()
        grammar = self._grammar(spec)
        if isinstance(grammar, Refused):
            return grammar
        error = self._validate(grammar, tok)
        if error is not None:
            return _refused(error)
        handle = _Handle(
            grammar,
            tok,
            len(vocabulary.token_bytes),
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
            self._limits,
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def _validate(self, grammar: str, tok: Any) -> str | None:
        """The grammar's error message, None when llguidance accepts it (the compile step)."""
        if FEATURES["validate_with_warnings"]:
            kwargs = {"limits": self._limits} if FEATURES["limits"] else {}
            is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, tok, **kwargs)
            return (messages[0] if messages else "") if is_error else None
        if FEATURES["validate_grammar"]:
            return str(llg.LLMatcher.validate_grammar(grammar, tok)) or None
        try:  # the oldest releases: the constructor validates ("Raises: ValueError")
            native = llg.LLMatcher(tok, grammar, log_level=0)
        except ValueError as e:
            return str(e) or "invalid grammar"
        return str(native.get_error()) or "invalid grammar" if native.is_error() else None

    def _native(self, h: _Handle) -> llg.LLMatcher:
        if FEATURES["limits"]:
            return llg.LLMatcher(h.tokenizer, h.grammar, log_level=self._log_level, limits=h.limits)
        return llg.LLMatcher(h.tokenizer, h.grammar, log_level=self._log_level)

    def matcher(self, compiled: Compiled) -> LLGuidanceMatcher:
        h: _Handle = compiled.handle
        native = self._native(h)
        if native.is_error():
            raise LLGuidanceError("LLMatcher()", native.get_error())
        return LLGuidanceMatcher(h, native, [])


class LLGuidanceMatcher(NativeMatcher[llg.LLMatcher]):
    """One sequence on an ``llguidance.LLMatcher`` (see the module docstring)."""

    state_prefix = "llguidance"

    def _check(self, operation: str) -> None:
        if self._m.is_error():
            raise LLGuidanceError(operation, self._m.get_error())

    def _terminated(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._h.eos_ids

    def mask(self) -> np.ndarray:
        if self._terminated():
            return np.zeros(num_words(self._h.vocab_size), dtype=np.int32)
        raw = self._m.compute_bitmask()
        self._check("compute_bitmask")
        words = np.frombuffer(raw, dtype=np.int32)
        # llguidance's bit vector has room for one id past the vocabulary (17 words for 512 tokens):
        # padding, which must stay clear.
        n = num_words(self._h.vocab_size)
        tail = words[n:]
        v = self._h.vocab_size
        if tail.any() or (v % 32 and int(words[n - 1]) >> (v % 32) & ((1 << (32 - v % 32)) - 1)):
            raise LLGuidanceError("compute_bitmask", f"the mask allows ids >= the vocabulary size {v}")
        return words[:n].copy()

    def accept(self, token_id: int) -> TokenOutcome:
        """``consume_token``'s verdict, without ever leaving this matcher in llguidance's sticky error
        state: ``validate_tokens`` first (no state change); where it refuses, the token is consumed on a
        ``deep_copy`` that is adopted only if llguidance accepts it there. (``validate_tokens`` and
        ``consume_token`` disagree on EOS once the matcher has stopped; :meth:`validate` reports
        ``validate_tokens`` as it is.)"""
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._terminated()
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        # a stopped matcher is probed on a copy: some releases set the error state when validate_tokens
        # is asked about EOS there (module docstring, "Releases")
        n = 0 if self._m.is_stopped() else self._m.validate_tokens([token_id])
        self._check("validate_tokens")
        if n >= 1:
            if not self._m.consume_token(token_id):
                raise LLGuidanceError(
                    "consume_token", self._m.get_error() or "refused a token validate_tokens accepted"
                )
        else:
            probe = self._m.deep_copy()
            if not probe.consume_token(token_id):
                reason = (probe.get_error() or "consume_token returned False").strip().splitlines()[0]
                return Rejected(token_id, data, self._state_id(), f"llguidance: {reason}")
            self._m = probe
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), token_id in self._h.eos_ids)

    def is_accepting(self) -> bool:
        return not self._terminated() and bool(self._m.is_accepting())

    def is_terminated(self) -> bool:
        return self._terminated()

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        if k == 0:
            return
        ok = self._m.rollback(k)  # None before 0.7.2x, a success flag after
        if ok is False or self._m.is_error():
            raise LLGuidanceError("rollback", self._m.get_error())
        del self._ids[len(self._ids) - k :]

    def fork(self) -> LLGuidanceMatcher:
        return LLGuidanceMatcher(self._h, self._m.deep_copy(), list(self._ids))

    def forced_bytes(self) -> bytes:
        if self._terminated():
            return b""
        out = bytes(self._m.compute_ff_bytes())
        self._check("compute_ff_bytes")
        # a forced special token comes as llguidance's b"\xff[id]"; maskcert writes it b"\xff" id b"\xfe"
        return _FORCED_SPECIAL.sub(lambda m: special_token_bytes(int(m.group(1))), out)

    def validate(self, ids: Sequence[int]) -> int:
        if self._terminated():
            return 0
        n = int(self._m.validate_tokens(list(ids)))
        self._check("validate_tokens")
        return n

    def __repr__(self) -> str:
        return f"LLGuidanceMatcher(num_accepted={len(self._ids)}, terminated={self._terminated()})"


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: LLGuidanceBackend, matcher: LLGuidanceMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
