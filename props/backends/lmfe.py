"""lm-format-enforcer behind the Backend protocol (``pip install lm-format-enforcer``; written against
0.11.3, supported from 0.9.6 by feature detection: see "Releases" below).

Theory of operation. lm-format-enforcer (LMFE) is character-level: a ``CharacterLevelParser``
(``JsonSchemaParser``, ``RegexParser``, ``UnionParser`` of ``StringParser``) says which characters
may come next, and a ``TokenEnforcer`` walks a prefix tree of the vocabulary's decoded tokens to
turn that into allowed token ids. Its API is functional: ``get_allowed_tokens(token_sequence)``
answers for a whole sequence (states are memoized by sequence inside the enforcer), and it has no
accept call — its integrations only mask logits.

The adapter builds ``TokenEnforcerTokenizerData`` the way ``lmformatenforcer.integrations.
transformers.build_token_enforcer_tokenizer_data`` does for a byte-level tokenizer: each text token
as ``(id, bytes.decode("utf-8", "replace"), False)``, a decoder that decodes the whole id list and
strips trailing U+FFFD (``_decode_function``), and the EOS ids. Then:

* ``mask()`` is ``get_allowed_tokens(ids so far)`` packed into xgrammar's bit layout (LMFE adds the
  EOS ids itself when ``parser.can_end()``).
* ``accept(t)`` is membership in that list — LMFE's only verdict — followed by appending ``t``;
  nothing in LMFE changes, so there is no half-applied state.
* ``fork()`` copies the id list and ``rollback(k)`` truncates it: O(n) and O(1), and exact, because
  LMFE keys every state by its token sequence. After EOS the adapter answers the empty mask and
  never asks LMFE about a sequence that contains EOS.
* ``is_accepting()`` is "EOS is in the allowed list" (LMFE has no other notion).

Releases. The adapter asks the installed LMFE what it has (:data:`FEATURES`: signatures, dataclass
fields and constants, never the version string):

* ``CharacterLevelParserConfig`` fields ``max_consecutive_whitespaces``, ``force_json_field_order``,
  ``max_json_array_length`` (0.10): before them the whitespace bound is the constant
  ``consts.MAX_CONSECUTIVE_WHITESPACES`` (a different ``max_consecutive_whitespaces`` is an option
  the release lacks, :class:`~props.backends._common.UnsupportedOption`) and arrays have no default
  length cap, so nothing needs switching off.
* ``TokenEnforcerTokenizerData(eos_token_id=...)`` takes one id before 0.10 (annotation ``int``):
  the smallest EOS id then; ``use_bitmask`` and ``vocab_size`` (0.11) are passed where they exist.
* ``TokenEnforcer.get_allowed_tokens`` returns a list before 0.11 and a ``TokenList`` after.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import interegular
import pydantic
from lmformatenforcer import (
    CharacterLevelParser,
    CharacterLevelParserConfig,
    JsonSchemaParser,
    LMFormatEnforcerException,
    RegexParser,
    StringParser,
    TokenEnforcer,
    TokenEnforcerTokenizerData,
    UnionParser,
    consts,
)

from props.backends._common import (
    HistoryMatcher,
    PerVocabulary,
    UnsupportedOption,
    dist_version,
)
from props.contract.backend import (
    Backend,
    BackendMatcher,
    Compiled,
    CompileOutcome,
    DeclaredProfile,
    Refused,
)
from refdecoder import Choice, Gbnf, JsonProfile, JsonSchema, Regex, Spec
from tokenizers_matrix import Vocabulary

__all__ = ["LMFormatEnforcerBackend", "LMFormatEnforcerMatcher", "declared_profile"]

_VERSION = dist_version("lm-format-enforcer")

#: The whitespace bound of the installed release (a config default from 0.10, a constant before).
DEFAULT_MAX_CONSECUTIVE_WHITESPACES: int = int(
    getattr(consts, "DEFAULT_MAX_CONSECUTIVE_WHITESPACES", None) or consts.MAX_CONSECUTIVE_WHITESPACES
)
_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(CharacterLevelParserConfig))
_DATA_PARAMS = inspect.signature(TokenEnforcerTokenizerData.__init__).parameters

#: What the installed LMFE has (module docstring, "Releases").
FEATURES: dict[str, bool] = {
    "config_whitespace": "max_consecutive_whitespaces" in _CONFIG_FIELDS,
    "config_array_length": "max_json_array_length" in _CONFIG_FIELDS,
    "config_field_order": "force_json_field_order" in _CONFIG_FIELDS,
    "eos_list": "List" in str(_DATA_PARAMS["eos_token_id"].annotation),
    "bitmask": "use_bitmask" in _DATA_PARAMS,
}

# Errors that lmformatenforcer raises for schemas it does not handle (jsonschemaparser.get_parser:
# ``raise Exception("Unsupported type ...")`` etc.), as opposed to bugs.
_REFUSAL_PREFIXES = (
    "Unsupported type",
    "Unsupported enum type",
    "No definitions found",
    "JsonSchemaParser: Value schema is None",
)


def declared_profile(
    max_consecutive_whitespaces: int = DEFAULT_MAX_CONSECUTIVE_WHITESPACES,
) -> DeclaredProfile:
    """The language of ``JsonSchemaParser`` with LMFE's defaults.

    Sources (lm-format-enforcer 0.11.3): ``lmformatenforcer/consts.py`` and
    ``characterlevelparser.CharacterLevelParserConfig`` (the defaults), ``jsonschemaparser.py``:

    * whitespace: any of ``WHITESPACE_CHARACTERS = " \\t\\n\\r"`` wherever a value or separator may
      start, at most ``DEFAULT_MAX_CONSECUTIVE_WHITESPACES = 12`` in a row
      (``JsonSchemaParser.get_allowed_characters``), before and after the top-level value too -> ``12``.
    * property order: ``DEFAULT_FORCE_JSON_FIELD_ORDER = False`` -> ``"any"`` (when forced, the order
      is that of ``required``, which no profile expresses).
    * ``ObjectParsingState``: with ``properties`` the keys come from ``properties`` only, whatever
      ``additionalProperties`` says -> ``additional_properties_default=False``; a declared key is not
      offered twice (``existing_keys``), keys of a property-less object are not remembered ->
      ``allow_duplicate_keys=True``.
    * strings: ``BACKSLASH_ESCAPING_CHARACTERS = '"\\\\/bfnrt'`` plus ``u`` and 4 hex digits ->
      ``unicode_escapes=True``.
    * ``format`` is never read by ``get_parser`` -> ``"annotation"``.

    ``DEFAULT_MAX_JSON_ARRAY_LENGTH = 20`` (arrays without ``maxItems`` get at most 20 items) is not a
    profile; the adapter configures ``max_json_array_length=0`` ("no default maximum",
    ``ListParsingState.__init__``) so that the declared profile holds.
    """
    notes = (
        f"lmformatenforcer/consts.py: max_consecutive_whitespaces={max_consecutive_whitespaces} (default "
        f"{DEFAULT_MAX_CONSECUTIVE_WHITESPACES}), DEFAULT_FORCE_JSON_FIELD_ORDER=False; the adapter sets "
        "CharacterLevelParserConfig.max_json_array_length=0 (LMFE's default caps arrays at 20 items)",
        "character-level: string contents are limited to the tokenizer alphabet (characters that are single "
        "tokens), tokens that are partial UTF-8 decode to U+FFFD and are allowed wherever U+FFFD is",
        "keywords get_parser does not read (minimum, maximum, multipleOf, uniqueItems, patternProperties, "
        "format, not, ...) are ignored, not refused",
        "additionalProperties is honoured only for objects without 'properties'",
        "regex dialect: interegular (Python-like) through RegexParser; Gbnf unsupported",
    )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace=max_consecutive_whitespaces,
            property_order="any",
            additional_properties_default=False,
            allow_duplicate_keys=True,
            unicode_escapes=True,
            formats="annotation",
            # measured (0.11.3): {"a": 1} passes dependencies {"a": ["b"]} in a 2020-12 schema
            legacy_dependencies="ignore",
        ),
        canonical_tokenization_only=False,
        notes=notes,
    )


def _tokenizer_data(vocabulary: Vocabulary) -> TokenEnforcerTokenizerData:
    """As ``integrations.transformers.build_token_enforcer_tokenizer_data`` builds it, from bytes."""
    regular = [
        (i, data.decode("utf-8", errors="replace"), False)
        for i, data in enumerate(vocabulary.token_bytes)
        if data is not None
    ]

    def decode(ids: list[int]) -> str:
        return str(vocabulary.decode(ids).decode("utf-8", errors="replace")).rstrip("\ufffd")

    eos = sorted(vocabulary.eos_ids)
    eos_arg: Any = eos if FEATURES["eos_list"] else eos[0]  # one EOS id before 0.10 ("Releases")
    if FEATURES["bitmask"]:
        return TokenEnforcerTokenizerData(regular, decode, eos_arg, False, len(vocabulary.token_bytes))
    return TokenEnforcerTokenizerData(regular, decode, eos_arg)


@dataclass(frozen=True, eq=False)
class _Handle:
    enforcer: TokenEnforcer
    vocab_size: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


class LMFormatEnforcerBackend:
    """lm-format-enforcer as a Backend (see the module docstring and :func:`declared_profile`)."""

    name = "lm-format-enforcer"
    version = _VERSION

    def __init__(
        self,
        max_consecutive_whitespaces: int = DEFAULT_MAX_CONSECUTIVE_WHITESPACES,
        max_vocabularies: int = 4,
    ) -> None:
        if (
            max_consecutive_whitespaces != DEFAULT_MAX_CONSECUTIVE_WHITESPACES
            and not FEATURES["config_whitespace"]
        ):
            raise UnsupportedOption(
                "lm-format-enforcer",
                _VERSION,
                "max_consecutive_whitespaces",
                f"this release fixes it at consts.MAX_CONSECUTIVE_WHITESPACES = {DEFAULT_MAX_CONSECUTIVE_WHITESPACES}",
            )
        self.max_consecutive_whitespaces = max_consecutive_whitespaces
        self.profile = declared_profile(max_consecutive_whitespaces)
        self._data: PerVocabulary[TokenEnforcerTokenizerData] = PerVocabulary(
            self._build_tokenizer_data, max_vocabularies
        )

    def _tokenizer_data(self, vocabulary: Vocabulary) -> TokenEnforcerTokenizerData:
        return self._data.get(vocabulary)

    def _build_tokenizer_data(self, vocabulary: Vocabulary) -> TokenEnforcerTokenizerData:
        data = _tokenizer_data(vocabulary)
        return data

    def _config(self, data: TokenEnforcerTokenizerData) -> CharacterLevelParserConfig:
        options: dict[str, Any] = {"alphabet": data.tokenizer_alphabet}
        if FEATURES["config_whitespace"]:
            options["max_consecutive_whitespaces"] = self.max_consecutive_whitespaces
        if FEATURES["config_field_order"]:
            options["force_json_field_order"] = False
        if FEATURES["config_array_length"]:
            options["max_json_array_length"] = 0
        return CharacterLevelParserConfig(**options)

    def _parser(self, spec: Spec, config: CharacterLevelParserConfig) -> CharacterLevelParser | Refused:
        if isinstance(spec, JsonSchema):
            if spec.schema is False:
                return Refused(
                    "lm-format-enforcer: JsonSchemaParser has no form of the empty schema 'false'", "", ""
                )
            # JsonSchemaParser documents None as "any json output is allowed": the meaning of 'true'.
            return JsonSchemaParser(None if spec.schema is True else spec.schema, config)
        if isinstance(spec, Regex):
            return RegexParser(spec.pattern, config)
        if isinstance(spec, Choice):
            if not spec.options:
                return Refused("lm-format-enforcer: an empty choice list has no parser form", "choice", "")
            return UnionParser([StringParser(o) for o in spec.options])
        if isinstance(spec, Gbnf):
            return Refused("lm-format-enforcer has no context-free grammar parser for GBNF", "gbnf", "")
        return Refused(f"lm-format-enforcer adapter: unknown spec type {type(spec).__name__}", "", "")

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        data = self._tokenizer_data(vocabulary)
        config = self._config(data)
        t0 = time.perf_counter()
        try:
            parser = self._parser(spec, config)
        except (
            LMFormatEnforcerException,
            pydantic.ValidationError,
            interegular.patterns.Unsupported,
            interegular.patterns.InvalidSyntax,
        ) as e:
            return Refused(
                f"lm-format-enforcer: {type(e).__name__}: {' '.join(str(e).split())[:400]}", "", ""
            )
        except Exception as e:
            if type(e) in (Exception, ValueError) and str(e).startswith(_REFUSAL_PREFIXES):
                return Refused(f"lm-format-enforcer: {e}", "", "")
            raise
        if isinstance(parser, Refused):
            return parser
        enforcer = TokenEnforcer(data, parser)
        # TokenEnforcer.__init__ replaces the parser's config with a default one (keeping only the
        # alphabet); put ours back so that max_json_array_length=0 holds for nested arrays as well.
        parser.config = config
        handle = _Handle(
            enforcer,
            len(vocabulary.token_bytes),
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> LMFormatEnforcerMatcher:
        return LMFormatEnforcerMatcher(compiled.handle, [])


class LMFormatEnforcerMatcher(HistoryMatcher):
    """One sequence: the ids accepted so far, asked of the shared ``TokenEnforcer``."""

    state_prefix = "lmfe"
    masked_reason = "not in TokenEnforcer.get_allowed_tokens"
    _h: _Handle

    @property
    def enforcer(self) -> TokenEnforcer:
        return self._h.enforcer

    def allowed_ids(self) -> list[int]:
        """``TokenEnforcer.get_allowed_tokens`` for the ids so far, as LMFE returns it (before EOS)."""
        allowed = self._h.enforcer.get_allowed_tokens(list(self._ids))
        tokens = getattr(allowed, "allowed_tokens", allowed)  # a list before 0.11 ("Releases")
        if tokens is None:  # the engine broke its own contract: a crash finding, not the adapter's fault
            raise RuntimeError(
                f"lm-format-enforcer: TokenEnforcer.get_allowed_tokens returned None after {len(self._ids)} "
                "tokens (documented to return the allowed tokens)"
            )
        return list(tokens)


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(
        backend: LMFormatEnforcerBackend, matcher: LMFormatEnforcerMatcher
    ) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
