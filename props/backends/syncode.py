"""SynCode behind the Backend protocol (``pip install --target DIR --no-deps syncode`` plus its missing
dependencies: syncode 0.4.16 pins ``transformers==4.53.2`` and ``regex==2024.11.6``, which would replace
the environment's; written against and run on 0.4.16, the only release maskcert has run).

Theory of operation. SynCode constrains generation with a transformers ``LogitsProcessor``,
``syncode.SyncodeLogitsProcessor(grammar, tokenizer, ...)`` (``syncode/grammar_mask/logits_processor.py``),
over a Lark grammar (``syncode.Grammar``: a builtin name such as ``"json"``, or Lark text). Building it
builds an LALR parser (``syncode/parsers/__init__.py``, ``create_parser``) and a ``MaskStore``
(``syncode/mask_store/mask_store.py``: one token mask per terminal-DFA state and next terminal, over the
tokenizer's vocabulary); calling it with ``(input_ids, scores)`` re-parses the decoded ids
(``GrammarConstrainer.mask_scores``, ``grammar_constrainer.py``) and sets the scores of tokens outside
the mask to ``-inf``. It needs no model: the adapter gives it a ``transformers.PreTrainedTokenizerFast``
over the vocabulary's own ``tokenizers`` object (vocabularies loaded from a Hugging Face
``tokenizer.json``; for others, a byte-level BPE ``tokenizer.json`` listing the vocabulary's tokens,
:func:`byte_level_tokenizer_json`), after checking that SynCode's ``ByteTokenizer`` reads every text id as the
vocabulary's bytes and that the vocabulary has one EOS id (SynCode knows ``tokenizer.eos_token_id``
only).

* ``mask()``: the processor on ``input_ids = [ids so far]`` (``parse_output_only=False``: the ids are
  the whole output) and zero scores; an id left at ``-inf`` is masked. SynCode documents two
  fallbacks that leave *every* id allowed: no acceptable token ("mask no tokens") and a parse failure
  ("Falling back to unconstrained decoding"); the adapter reports the mask as SynCode returns it.
* ``accept(t)``: membership in that mask (SynCode has no accept call), then ``t`` is appended.
* ``fork()`` copies the id list, ``rollback(k)`` truncates it: SynCode's state is the ids (its
  incremental parser caches by prefix). After EOS the adapter answers the empty mask.
* ``is_accepting()``: EOS in the mask.

Specs. SynCode has no JSON Schema, regex or GBNF front-end, only Lark grammars. The adapter passes:
a JSON Schema that constrains nothing (``true``, ``{}``) as SynCode's builtin ``json`` grammar (its
own "JSON" language: ``syncode/parsers/grammars/json.lark``); a choice list as the Lark rule
``start: "a" | "b"``; a regex as the Lark terminal ``start: PATTERN`` / ``PATTERN: /.../`` when Lark's
literal reads it back unchanged (:func:`lark_regex`). Everything else is refused.

``mode``: ``"grammar_strict"`` (the default of ``syncode.Syncode``; the mask under-approximates, "it
sometimes breaks LLM tokens") or ``"grammar_mask"`` (the default of ``SyncodeLogitsProcessor``; the mask
over-approximates, "allows a wider range of tokens"): ``GrammarConstrainer``'s docstring.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import interegular
import numpy as np
import syncode
import syncode.common
import torch
from syncode.larkm.exceptions import LarkError
from syncode.larkm.lark import Lark
from syncode.mask_store.byte_tokenizer import ByteTokenizer
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from props.backends._common import (
    HistoryMatcher,
    PerVocabulary,
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
from refdecoder.errors import MaskcertError
from tokenizers_matrix import Vocabulary

__all__ = [
    "SyncodeBackend",
    "SyncodeMatcher",
    "SyncodeVocabularyError",
    "declared_profile",
    "lark_regex",
    "lark_choice",
]

_VERSION = dist_version("syncode")
MODES = ("grammar_strict", "grammar_mask")

# SynCode writes its parser and mask-store pickles under common.SYNCODE_CACHE (default 'cache/' in the
# working directory) even with use_cache=False (MaskStore.init_mask_store); keep them out of the way.
syncode.common.SYNCODE_CACHE = tempfile.mkdtemp(prefix="maskcert-syncode-") + "/"


class SyncodeVocabularyError(MaskcertError, ValueError):
    """A vocabulary SynCode cannot be given as it is (``detail`` says why): use another tokenizer."""

    def __init__(self, vocabulary: str, detail: str) -> None:
        self.vocabulary = vocabulary
        self.detail = detail
        super().__init__(
            f"vocabulary {vocabulary!r} cannot be given to SynCode: {detail}; expected a vocabulary with one "
            "EOS id and distinct token spellings, whose tokens SynCode's ByteTokenizer reads as their bytes"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.vocabulary, self.detail))


def declared_profile() -> DeclaredProfile:
    """What the specs the adapter passes mean to SynCode (syncode 0.4.16).

    Only the schema that constrains nothing reaches SynCode, as its builtin ``json`` grammar
    (``syncode/parsers/grammars/json.lark``): ``%ignore WS`` with ``WS: /[ \\t\\f\\r\\n]/+`` -> any
    whitespace between tokens, and around the top-level value (``whitespace="any"``,
    ``top_level_whitespace=True``); keys can repeat (``pair: NONEMPTY_STRING ":" value``) ->
    ``allow_duplicate_keys=True``. The other choices are JSON Schema's defaults: no schema reaches
    SynCode that they would change. What ``json.lark`` does differently from JSON — a top-level value
    must be an object or array, strings are ``/"[^"]+"/`` (no escape handling, raw control
    characters), numbers may carry ``+`` and leading zeros, form feed is whitespace — is SynCode's
    grammar, and shows as findings.
    """
    notes = (
        "JSON: only true/{} (syncode/parsers/grammars/json.lark, SynCode's builtin 'json'); other schemas refused "
        "(no JSON Schema front-end in syncode 0.4.16)",
        "json.lark: %ignore WS, WS: /[ \\t\\f\\r\\n]/+ -> whitespace 'any', around the top-level value too",
        "regex: a single Lark terminal (start: PATTERN), Python re syntax as Lark reads /.../; GBNF refused",
        'choice: the Lark rule start: "a" | "b"',
        "mode grammar_strict under-approximates, grammar_mask over-approximates the mask "
        "(GrammarConstrainer docstring): differences of that kind are SynCode's design",
    )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace="any",
            property_order="any",
            additional_properties_default=True,
            allow_duplicate_keys=True,
            unicode_escapes=True,
            formats="annotation",
            top_level_whitespace=True,
            # its reading of a 2020-12 `dependencies` is not measured: refused, not guessed
            legacy_dependencies="refuse",
        ),
        canonical_tokenization_only=False,
        notes=notes,
    )


# -- specs as Lark text -----------------------------------------------------------------------------

_EVALUATED_ESCAPE = re.compile(r"\\[\\Uuxnftr]|[\x00-\x1f]")


def _terminal_value(text: str, name: str) -> str | None:
    """The pattern value Lark (syncode's ``larkm``) reads for terminal ``name`` of grammar ``text``."""
    for terminal in Lark(text, parser="lalr", lexer="basic", start="start").terminals:
        if terminal.name == name:
            return str(terminal.pattern.value)
    return None


def lark_regex(pattern: str) -> str | None:
    """The Lark grammar ``start: PATTERN`` / ``PATTERN: /pattern/`` (``/`` written ``\\/``, which Python's
    ``re`` reads as ``/``), or None when Lark's regex literal would not hand ``pattern`` to ``re``
    unchanged: Lark evaluates ``\\\\``, ``\\n``, ``\\t``, ``\\xHH``, ``\\uHHHH``, ... as Python string
    escapes (``_fix_escaping`` in ``syncode/larkm/load_grammar.py``) and takes no raw control character."""
    if _EVALUATED_ESCAPE.search(pattern):
        return None
    body = re.sub(r"(\\.)|/", lambda m: m.group(1) or "\\/", pattern)
    text = f"start: PATTERN\nPATTERN: /{body}/\n"
    try:
        value = _terminal_value(text, "PATTERN")
    except LarkError:
        return None
    return text if value == body else None


def lark_choice(options: tuple[str, ...]) -> str | None:
    """The Lark rule ``start: "a" | "b"`` with each option a string literal Lark reads back as the
    option (checked on Lark's own reading), or None when some option has no such literal."""
    literals = []
    for o in options:
        if not o or _EVALUATED_ESCAPE.search(o):
            return None
        literal = '"' + o.replace('"', '\\"') + '"'
        try:
            value = _terminal_value(f"start: T\nT: {literal}\n", "T")
        except LarkError:
            return None
        if value != o:
            return None
        literals.append(literal)
    return "start: " + " | ".join(literals) + "\n"


# -- the backend ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Tokenizer:
    hf: PreTrainedTokenizerFast
    size: int


@dataclass(frozen=True, eq=False)
class _Handle:
    processor: Any  # syncode.SyncodeLogitsProcessor
    grammar: str  # what syncode.Grammar was given
    tokenizer: PreTrainedTokenizerFast
    vocab_size: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


def gpt2_byte_text(data: bytes) -> str:
    """``data`` in GPT-2's byte-to-unicode spelling (how a byte-level BPE tokenizer.json lists tokens)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return "".join(table[b] for b in data)


def byte_level_tokenizer_json(
    token_bytes: Sequence[bytes | None], special_names: Mapping[int, str]
) -> str | None:
    """A byte-level BPE ``tokenizer.json`` (no merges) listing these tokens, special ids as special added
    tokens named as given: what SynCode reads of a tokenizer (``get_vocab``, ``decode``, the special
    ids) for a vocabulary without a tokenizer.json of its own. None when two ids share a spelling."""
    names = {i: special_names.get(i) or f"<special_{i}>" for i, d in enumerate(token_bytes) if d is None}
    table = {gpt2_byte_text(d) if d is not None else names[i]: i for i, d in enumerate(token_bytes)}
    if len(table) != len(token_bytes):
        return None
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    model: dict[str, Any] = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
    }
    model |= {
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "vocab": table,
        "merges": [],
    }
    return json.dumps(
        {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": i, "content": n, **flags} for i, n in sorted(names.items())],
            "normalizer": None,
            "pre_tokenizer": byte_level,
            "post_processor": None,
            "decoder": byte_level,
            "model": model,
        }
    )


def _tokenizer(vocabulary: Vocabulary) -> _Tokenizer:
    """The vocabulary's own tokenizer.json when it has one, else :func:`byte_level_tokenizer_json`;
    checked as the module docstring says."""
    if len(vocabulary.eos_ids) != 1:
        raise SyncodeVocabularyError(vocabulary.name, f"{len(vocabulary.eos_ids)} EOS ids")
    (eos,) = vocabulary.eos_ids
    inner = getattr(vocabulary.codec, "tokenizer", None)
    if inner is None or not hasattr(inner, "to_str"):
        text = byte_level_tokenizer_json(vocabulary.token_bytes, dict(vocabulary.special_names))
        if text is None:
            raise SyncodeVocabularyError(vocabulary.name, "two ids share a spelling")
        inner = Tokenizer.from_str(text)
    name = vocabulary.special_name(eos) or f"<special_{eos}>"
    hf = PreTrainedTokenizerFast(tokenizer_object=inner, eos_token=name)
    if hf.eos_token_id != eos:
        raise SyncodeVocabularyError(
            vocabulary.name, f"the tokenizer's EOS is id {hf.eos_token_id}, not {eos}"
        )
    reader = ByteTokenizer(hf)
    for i, data in vocabulary.text_tokens():
        got = reader.decode([i])
        if got != data:
            raise SyncodeVocabularyError(
                vocabulary.name, f"ByteTokenizer reads id {i} as {got!r}, not {data!r}"
            )
    return _Tokenizer(hf, len(vocabulary))


class SyncodeBackend:
    """SynCode as a Backend (see the module docstring and :func:`declared_profile`)."""

    name = "syncode"
    version = _VERSION

    def __init__(self, mode: str = "grammar_strict", max_vocabularies: int = 2) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: expected one of {MODES}")
        self.mode = mode
        self.profile = declared_profile()
        self._tokenizers: PerVocabulary[_Tokenizer] = PerVocabulary(_tokenizer, max_vocabularies)

    def _grammar(self, spec: Spec) -> str | Refused:
        if isinstance(spec, JsonSchema):
            if spec.schema is True or spec.schema == {}:
                return "json"
            return Refused("syncode has no JSON Schema front-end (Lark grammars only)", "", "")
        if isinstance(spec, Choice):
            text = lark_choice(spec.options)
            if text is None:
                return Refused(
                    "syncode: a choice option is empty or has no Lark string literal that reads back as it",
                    "choice",
                    "",
                )
            return text
        if isinstance(spec, Regex):
            text = lark_regex(spec.pattern)
            if text is None:
                return Refused(
                    "syncode: the pattern has no Lark regex literal that hands it to re unchanged",
                    "regex",
                    "",
                )
            return text
        if isinstance(spec, Gbnf):
            return Refused("syncode has no GBNF front-end (Lark grammars only)", "gbnf", "")
        return Refused(f"syncode adapter: unknown spec type {type(spec).__name__}", "", "")

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        tok = self._tokenizers.get(vocabulary)
        t0 = time.perf_counter()
        grammar = self._grammar(spec)
        if isinstance(grammar, Refused):
            return grammar
        try:
            processor = syncode.SyncodeLogitsProcessor(
                syncode.Grammar(grammar), tok.hf, use_cache=False, parse_output_only=False, mode=self.mode
            )
        except (LarkError, interegular.patterns.Unsupported, interegular.patterns.InvalidSyntax) as e:
            text = " ".join(str(e).split())[:400]
            return Refused(f"syncode: {type(e).__name__}: {text}", "", "")
        handle = _Handle(
            processor, grammar, tok.hf, tok.size, frozenset(vocabulary.eos_ids), tuple(vocabulary.token_bytes)
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> SyncodeMatcher:
        return SyncodeMatcher(compiled.handle, [])


class SyncodeMatcher(HistoryMatcher):
    """One sequence: the ids so far, masked by the shared ``SyncodeLogitsProcessor``."""

    state_prefix = "syncode"
    masked_reason = "syncode: the logits processor masks it"
    _h: _Handle

    def allowed_ids(self) -> list[int]:
        """The ids SynCode's processor leaves finite for the ids so far (before EOS)."""
        input_ids = torch.tensor([self._ids], dtype=torch.long).reshape(1, len(self._ids))
        scores = torch.zeros((1, self._h.vocab_size), dtype=torch.float32)
        out = self._h.processor(input_ids, scores)
        return np.flatnonzero(torch.isfinite(out[0]).numpy()).tolist()


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: SyncodeBackend, matcher: SyncodeMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
