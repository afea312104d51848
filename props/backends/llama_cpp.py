"""llama.cpp's grammar sampler behind the Backend protocol, through ``llama-cpp-python``'s ctypes bindings
(``bash ci/install_llama_cpp.sh`` builds it from its source distribution; written against and run on
0.3.36, the only release maskcert has run: see "Releases" below).

Theory of operation. llama.cpp constrains sampling with a *grammar sampler*
(``llama_sampler_init_grammar(vocab, grammar, root)``, ``src/llama-sampler.cpp``) that works on token
*pieces*: ``llama_grammar_apply_impl`` (``src/llama-grammar.cpp``) takes each candidate's cached
``llama_vocab::token_to_piece(id)`` (rendered with ``special = true``), masks end-of-generation (EOG)
ids unless some grammar stack is empty, masks empty pieces, and rejects the pieces whose code points
(UTF-8 decoded, partial sequences carried in ``partial_utf8``) no stack can take. A sampler needs a
``llama_vocab`` from a loaded model, so the adapter writes one vocabulary-only GGUF per maskcert
vocabulary (:func:`vocab_gguf`: a ``gpt2`` (byte-level BPE) tokenizer, each text token as its bytes
in GPT-2's byte-to-unicode spelling, which ``llama_decode_text`` turns back into the bytes; special
ids as ``CONTROL`` tokens named as in the tokenizer, which is what ``convert_hf_to_gguf.py`` writes)
and loads it with ``llama_model_params.vocab_only = true``. After loading, the adapter checks that
llama.cpp's piece of every id is the vocabulary's bytes (special ids: their name) and that its EOG
set (``llama_vocab_is_eog``, which llama.cpp partly decides by token *text*, ``llama_vocab::impl::load``)
is the vocabulary's EOS set; a vocabulary that cannot be given to llama.cpp that way is
:class:`LlamaVocabularyError`. Special ids that are not EOS keep their name as piece: llama.cpp's
grammar can match them as text, as it does on a converted model.

* ``mask()``: ``llama_sampler_apply`` on a ``llama_token_data_array`` of every id with logit 0; an id
  whose logit is then ``-inf`` is masked.
* ``accept(t)``: the same sampler's verdict on ``t`` alone (``llama_sampler_apply`` on one candidate);
  when it allows ``t``, ``llama_sampler_accept``. llama.cpp must not be given a token its grammar
  cannot take: ``llama_grammar_accept_impl`` aborts the process for an EOG token outside an accepting
  state (``GGML_ABORT``) and throws ``Unexpected empty grammar stack`` for others, which no C caller
  can catch.
* ``fork()`` is ``llama_sampler_clone``; ``rollback(k)`` replays the remaining ids on a clone of the
  compiled (initial) sampler: llama.cpp's grammar has no undo. After EOG the adapter answers the
  empty mask.
* ``is_accepting()`` is llama.cpp's ``allow_eog``: the verdict on the smallest EOS id.

Specs: GBNF as it is (llama.cpp's own format; the root rule by name), JSON Schema through the
package's own converter ``llama_cpp.llama_grammar.json_schema_to_gbnf`` (what ``LlamaGrammar.
from_json_schema`` does; a port of llama.cpp's ``json_schema_to_grammar.py``), a choice list as a GBNF
alternation of string literals. Regexes are refused: llama.cpp's sampler API has no regex front-end.

Releases. Only llama-cpp-python 0.3.36 (llama.cpp as vendored in its sdist) has been built and run;
the adapter uses the sampler API of ``llama.h`` since the 0.3 series (``llama_model_load_from_file``,
``llama_model_get_vocab``, ``llama_sampler_init_grammar(vocab, ...)``) and detects nothing else.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp as _ll
from llama_cpp.llama_grammar import json_schema_to_gbnf

from props.backends._common import (
    NativeMatcher,
    PerVocabulary,
    check_rollback,
    dist_version,
    mask_of,
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
from refdecoder import Choice, Gbnf, JsonProfile, JsonSchema, Regex, Spec
from refdecoder.errors import MaskcertError
from tokenizers_matrix import Vocabulary

__all__ = [
    "LlamaCppBackend",
    "LlamaCppMatcher",
    "LlamaCppError",
    "LlamaVocabularyError",
    "declared_profile",
    "vocab_gguf",
    "gbnf_choice",
]

_VERSION = dist_version("llama_cpp_python", getattr(llama_cpp, "__version__", "unknown"))

# The converter's own "unsupported" signals (llama_cpp/llama_grammar.py, SchemaConverter): an
# AssertionError or ValueError whose message starts with one of these; any other exception of the
# converter is a crash.
_REFUSAL_PREFIXES = (
    "Unrecognized schema",
    "Unsupported ref",
    "Unsupported pattern syntax",
    'Pattern must start with "^" and end with "$"',
    "Invalid quantifier",
    "Unbalanced",
    "Error resolving ref",
    "Fetching remote schemas is not allowed",
)

# -- the vocabulary-only GGUF ---------------------------------------------------------------------
# Shared with the reproducer template (# @source), so written with the standard library only.


def gpt2_byte_text(data: bytes) -> str:
    """``data`` in GPT-2's byte-to-unicode spelling (``bytes_to_unicode`` of GPT-2's encoder.py), which
    llama.cpp's ``llama_decode_text`` turns back into the bytes."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return "".join(table[b] for b in data)


def vocab_gguf(
    token_bytes: Sequence[bytes | None], eos_ids: Sequence[int], special_names: Mapping[int, str]
) -> bytes:
    """A vocabulary-only GGUF (version 3, no tensors) that llama.cpp loads with ``vocab_only``: the
    metadata of llama.cpp's own ``models/ggml-vocab-gpt-2.gguf`` with these tokens. Text tokens are
    ``NORMAL`` in GPT-2's byte spelling; a one-byte token whose spelling an earlier id already has is
    the ``BYTE`` token ``<0xNN>`` (SentencePiece byte fallback; llama.cpp needs distinct token texts);
    special ids are ``CONTROL`` tokens spelled by their name. EOS ids go to ``eos_token_id`` and, for
    a second and third, ``eot_token_id`` / ``eom_token_id`` (llama.cpp's other EOG keys). ValueError
    for what GGUF cannot hold that way (two ids with one spelling, more than three EOS ids)."""
    # GGUF value types (ggml/include/gguf.h, enum gguf_type) and llama.cpp token types (llama.h)
    uint32, int32, float32, string_, array_ = 4, 5, 6, 8, 9
    normal, control, byte = 1, 3, 6
    texts: list[str] = []
    types: list[int] = []
    seen: dict[str, int] = {}
    for i, data in enumerate(token_bytes):
        if data is None:
            text, kind = special_names.get(i) or f"[SPECIAL_{i}]", control
        else:
            text, kind = gpt2_byte_text(data), normal
            if text in seen and len(data) == 1:
                text, kind = f"<0x{data[0]:02X}>", byte
        if text in seen:
            raise ValueError(f"ids {seen[text]} and {i} are both spelled {text!r}")
        seen[text] = i
        texts.append(text)
        types.append(kind)
    eos = sorted(eos_ids)
    if not 1 <= len(eos) <= 3:
        raise ValueError(f"{len(eos)} EOS ids: a GGUF names one to three (eos, eot, eom)")

    def string(s: str) -> bytes:
        raw = s.encode("utf-8")
        return struct.pack("<Q", len(raw)) + raw

    def value(kind: int, v: Any) -> bytes:
        if kind == string_:
            return string(v)
        return struct.pack({uint32: "<I", int32: "<i", float32: "<f"}[kind], v)

    def array(kind: int, items: Sequence[Any]) -> bytes:
        return struct.pack("<IQ", kind, len(items)) + b"".join(value(kind, v) for v in items)

    meta: list[tuple[str, int, Any]] = [
        ("general.architecture", string_, "gpt2"),
        ("general.name", string_, "maskcert-vocabulary"),
        ("gpt2.block_count", uint32, 12),
        ("gpt2.context_length", uint32, 1024),
        ("gpt2.embedding_length", uint32, 768),
        ("gpt2.feed_forward_length", uint32, 3072),
        ("gpt2.attention.head_count", uint32, 12),
        ("gpt2.attention.layer_norm_epsilon", float32, 1e-5),
        ("general.file_type", uint32, 1),
        ("tokenizer.ggml.model", string_, "gpt2"),
        ("tokenizer.ggml.pre", string_, "gpt-2"),
        ("tokenizer.ggml.tokens", array_, (string_, texts)),
        ("tokenizer.ggml.token_type", array_, (int32, types)),
        ("tokenizer.ggml.merges", array_, (string_, [])),
        ("tokenizer.ggml.bos_token_id", uint32, eos[0]),
        *[(f"tokenizer.ggml.{key}_token_id", uint32, i) for key, i in zip(("eos", "eot", "eom"), eos)],
    ]
    out = [b"GGUF", struct.pack("<IQQ", 3, 0, len(meta))]
    for key, kind, v in meta:
        out.append(string(key) + struct.pack("<I", kind))
        out.append(array(*v) if kind == array_ else value(kind, v))
    return b"".join(out)


def gbnf_choice(options: Sequence[str]) -> str:
    """A choice list as the GBNF ``root ::= "a" | "b"``: string literals with llama.cpp's escapes
    (``parse_char`` in ``src/llama-grammar.cpp``: ``\\"``, ``\\\\`` and ``\\xHH`` for control
    characters)."""

    def literal(option: str) -> str:
        out = []
        for c in option:
            if c in '"\\':
                out.append("\\" + c)
            elif ord(c) < 0x20 or ord(c) == 0x7F:
                out.append(f"\\x{ord(c):02X}")
            else:
                out.append(c)
        return '"' + "".join(out) + '"'

    return "root ::= " + " | ".join(literal(o) for o in options) + "\n"


# -- the library ----------------------------------------------------------------------------------


class LlamaCppError(MaskcertError, RuntimeError):
    """llama.cpp failed where it should not: a NULL from a constructor, a grammar its own converter
    wrote that its parser rejects. A ``crash``."""

    def __init__(self, operation: str, message: str) -> None:
        self.operation = operation
        self.message = message
        super().__init__(f"llama.cpp {operation}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:  # crosses the worker's pipe as itself
        return (type(self), (self.operation, self.message))


class LlamaVocabularyError(MaskcertError, ValueError):
    """A maskcert vocabulary that llama.cpp cannot hold as it is (``vocabulary`` names it, ``detail``
    says why): use another tokenizer."""

    def __init__(self, vocabulary: str, detail: str) -> None:
        self.vocabulary = vocabulary
        self.detail = detail
        super().__init__(
            f"vocabulary {vocabulary!r} cannot be given to llama.cpp as it is: {detail}; expected a "
            "vocabulary whose tokens have distinct spellings, one to three EOS ids, and no other id that "
            "llama.cpp ends generation on"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.vocabulary, self.detail))


class _Log:
    """llama.cpp's log, kept rather than printed: the last messages explain a NULL grammar."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.callback = _ll.llama_log_callback(self._log)  # kept alive: llama.cpp holds the pointer
        _ll.llama_log_set(self.callback, ctypes.c_void_p(0))

    def _log(self, level: int, text: bytes | None, user_data: Any) -> None:
        with self._lock:
            self.lines.append((text or b"").decode("utf-8", errors="replace"))
            del self.lines[:-50]

    def take(self) -> str:
        with self._lock:
            text = "".join(self.lines)
            self.lines.clear()
        return " ".join(text.split())


_LOG = _Log()
_ll.llama_backend_init()

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # struct llama_token_data


class _Model:
    """A vocabulary-only llama.cpp model (freed with this object; samplers keep it alive)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        try:
            data = vocab_gguf(
                vocabulary.token_bytes, sorted(vocabulary.eos_ids), dict(vocabulary.special_names)
            )
        except ValueError as e:
            raise LlamaVocabularyError(vocabulary.name, str(e)) from e
        params = _ll.llama_model_default_params()
        params.vocab_only = True
        fd, path = tempfile.mkstemp(suffix=".gguf", prefix="maskcert-vocab-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            _LOG.take()
            self.model = _ll.llama_model_load_from_file(path.encode(), params)
        finally:
            os.unlink(path)
        if not self.model:
            raise LlamaCppError("llama_model_load_from_file(vocab_only)", _LOG.take() or "NULL model")
        self.vocab = _ll.llama_model_get_vocab(self.model)
        self.size = int(_ll.llama_vocab_n_tokens(self.vocab))
        self._check(vocabulary)
        template = np.zeros(self.size, dtype=_TOKEN_DATA)
        template["id"] = np.arange(self.size, dtype=np.int32)
        self.template = template

    def piece(self, token_id: int) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = _ll.llama_token_to_piece(self.vocab, token_id, buf, len(buf), 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = _ll.llama_token_to_piece(self.vocab, token_id, buf, len(buf), 0, True)
        return buf.raw[:n]

    def _check(self, vocabulary: Vocabulary) -> None:
        """llama.cpp's pieces and EOG ids are the vocabulary's (module docstring)."""
        if self.size != len(vocabulary):
            raise LlamaVocabularyError(
                vocabulary.name, f"llama.cpp loaded {self.size} of {len(vocabulary)} ids"
            )
        for i, data in enumerate(vocabulary.token_bytes):
            want = data if data is not None else (vocabulary.special_name(i) or f"[SPECIAL_{i}]").encode()
            got = self.piece(i)
            if got != want:
                raise LlamaVocabularyError(
                    vocabulary.name, f"llama.cpp's piece of id {i} is {got!r}, not {want!r}"
                )
        eog = {i for i in range(self.size) if _ll.llama_vocab_is_eog(self.vocab, i)}
        if eog != set(vocabulary.eos_ids):
            raise LlamaVocabularyError(
                vocabulary.name,
                f"llama.cpp ends generation on ids {sorted(eog)[:8]} (partly by token text), the vocabulary "
                f"on its EOS ids {sorted(vocabulary.eos_ids)[:8]}",
            )

    def __del__(self) -> None:
        model = getattr(self, "model", None)
        if model:
            _ll.llama_model_free(model)


class _Sampler:
    """An owned ``llama_sampler *`` (freed with this object) and the model it points into."""

    def __init__(self, model: _Model, ptr: Any) -> None:
        self.model = model
        self.ptr = ptr

    def clone(self) -> _Sampler:
        ptr = _ll.llama_sampler_clone(self.ptr)
        if not ptr:
            raise LlamaCppError("llama_sampler_clone", "NULL sampler")
        return _Sampler(self.model, ptr)

    def apply(self, data: np.ndarray) -> None:
        """``llama_sampler_apply`` on ``data`` (a ``_TOKEN_DATA`` array, changed in place)."""
        cur = _ll.llama_token_data_array(
            data=data.ctypes.data_as(_ll.llama_token_data_p), size=len(data), selected=-1, sorted=False
        )
        _ll.llama_sampler_apply(self.ptr, ctypes.byref(cur))

    def allows(self, token_id: int) -> bool:
        one = np.zeros(1, dtype=_TOKEN_DATA)
        one["id"] = token_id
        self.apply(one)
        return bool(np.isfinite(one["logit"][0]))

    def __del__(self) -> None:
        ptr = getattr(self, "ptr", None)
        if ptr:
            _ll.llama_sampler_free(ptr)


def declared_profile() -> DeclaredProfile:
    """The language of ``json_schema_to_gbnf`` (llama-cpp-python 0.3.36, ``llama_cpp/llama_grammar.py``).

    * whitespace: ``SPACE_RULE = '" "?'`` — at most one U+0020 after ``{``, ``[``, ``,``, ``:``, a key
      and every value, the top-level value included, never before it. No profile says "one space, and
      only a space": the tightest one that contains it is ``whitespace=1`` with
      ``top_level_whitespace=True``; tab/LF/CR and a space before the top-level value then show as
      completeness differences (the engine's choice, not a defect).
    * property order: ``_build_object_rule`` puts the required properties first, then the optional
      ones, each in ``properties`` order (``prop_order`` empty) -> neither "schema" order (a required
      property declared after an optional one comes first) nor free order: ``"any"``, the superset;
      other orders show as completeness differences.
    * ``additionalProperties``: absent next to ``properties`` means none (``_build_object_rule`` gets
      ``None``) -> ``additional_properties_default=False``; keys it admits can repeat ->
      ``allow_duplicate_keys=True``.
    * strings: ``PRIMITIVE_RULES["char"]`` has ``\\uXXXX`` -> ``unicode_escapes=True``.
    * ``format``: ``date``, ``time``, ``date-time``, ``uuid`` get rules, every other format is ignored
      -> ``"annotation"`` (the enforced ones show as completeness differences).
    * ``prefixItems`` / ``items`` as a list become a fixed tuple -> ``additional_items_default=False``.
    """
    notes = (
        "llama_cpp/llama_grammar.py SPACE_RULE '\" \"?': one optional space after every token and after the "
        "top-level value (declared whitespace=1, top_level_whitespace=True: a superset)",
        "_build_object_rule: required properties first, then optional ones in 'properties' order "
        "(declared property_order='any': a superset); additionalProperties absent = false",
        'PRIMITIVE_RULES char: [^"\\\\] | escapes incl. \\uXXXX; formats date/time/date-time/uuid have rules, others ignored',
        "keywords the converter does not read (minimum, maximum, multipleOf, uniqueItems, not, ...) are ignored, "
        "not refused; an unknown schema shape is AssertionError('Unrecognized schema'), a refusal",
        "GBNF: llama.cpp's own; regex: refused (no regex front-end); choice: a GBNF alternation",
        "the grammar sampler matches token pieces: a special (CONTROL) id's piece is its name",
    )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace=1,
            property_order="any",
            additional_properties_default=False,
            allow_duplicate_keys=True,
            unicode_escapes=True,
            formats="annotation",
            top_level_whitespace=True,
            additional_items_default=False,
            # its reading of a 2020-12 `dependencies` is not measured: refused, not guessed
            legacy_dependencies="refuse",
        ),
        canonical_tokenization_only=False,
        notes=notes,
    )


@dataclass(frozen=True, eq=False)
class _Handle:
    grammar: str  # GBNF
    root: str
    initial: _Sampler  # the compiled grammar, never advanced
    vocab_size: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


class LlamaCppBackend:
    """llama.cpp's grammar sampler as a Backend (see the module docstring and :func:`declared_profile`)."""

    name = "llama-cpp"
    version = _VERSION

    def __init__(self, max_vocabularies: int = 4) -> None:
        self.profile = declared_profile()
        self._models: PerVocabulary[_Model] = PerVocabulary(_Model, max_vocabularies)

    def _grammar(self, spec: Spec) -> tuple[str, str] | Refused:
        if isinstance(spec, Gbnf):
            return spec.text, spec.root
        if isinstance(spec, JsonSchema):
            schema = spec.schema
            if schema is False:
                return Refused(
                    "llama.cpp: json_schema_to_gbnf has no form of the empty schema 'false'", "", ""
                )
            if schema is True:
                schema = {}  # the same schema (JSON Schema 2020-12 §4.3.2), in the form the converter reads
            try:
                return json_schema_to_gbnf(json.dumps(schema)), "root"
            except (AssertionError, ValueError) as e:
                if str(e).startswith(_REFUSAL_PREFIXES):
                    text = " ".join(str(e).split())[:400]
                    return Refused(f"llama.cpp json_schema_to_gbnf: {type(e).__name__}: {text}", "", "")
                raise
        if isinstance(spec, Choice):
            if not spec.options:
                return Refused("llama.cpp: an empty choice list has no GBNF form", "choice", "")
            return gbnf_choice(spec.options), "root"
        if isinstance(spec, Regex):
            return Refused("llama.cpp's grammar sampler has no regex front-end (GBNF only)", "regex", "")
        return Refused(f"llama.cpp adapter: unknown spec type {type(spec).__name__}", "", "")

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        model = self._models.get(vocabulary)
        t0 = time.perf_counter()
        grammar = self._grammar(spec)
        if isinstance(grammar, Refused):
            return grammar
        text, root = grammar
        _LOG.take()
        ptr = _ll.llama_sampler_init_grammar(model.vocab, text.encode("utf-8"), root.encode("utf-8"))
        if not ptr:
            message = _LOG.take() or "llama_sampler_init_grammar returned NULL"
            if isinstance(spec, JsonSchema):  # the converter wrote a grammar llama.cpp's parser rejects
                raise LlamaCppError("llama_sampler_init_grammar(json_schema_to_gbnf(schema))", message)
            return Refused(f"llama.cpp: {message[:500]}", "", "")
        handle = _Handle(
            text,
            root,
            _Sampler(model, ptr),
            len(vocabulary.token_bytes),
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> LlamaCppMatcher:
        h: _Handle = compiled.handle
        return LlamaCppMatcher(h, h.initial.clone(), [])


class LlamaCppMatcher(NativeMatcher[_Sampler]):
    """One sequence on a clone of the compiled grammar sampler (see the module docstring)."""

    state_prefix = "llama-cpp"

    def _terminated(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._h.eos_ids

    def allowed(self) -> np.ndarray:
        """The ids llama.cpp's grammar sampler leaves finite (before EOS)."""
        data = self._m.model.template.copy()
        self._m.apply(data)
        return np.flatnonzero(np.isfinite(data["logit"]))

    def mask(self) -> np.ndarray:
        return mask_of(self.allowed, self._h.vocab_size, self._terminated())

    def accept(self, token_id: int) -> TokenOutcome:
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._terminated()
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        if not self._m.allows(token_id):
            return Rejected(token_id, data, self._state_id(), "llama.cpp: the grammar sampler masks it")
        _ll.llama_sampler_accept(self._m.ptr, token_id)
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), token_id in self._h.eos_ids)

    def is_accepting(self) -> bool:
        return not self._terminated() and self._m.allows(min(self._h.eos_ids))

    def is_terminated(self) -> bool:
        return self._terminated()

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        if k == 0:
            return
        keep = self._ids[: len(self._ids) - k]
        fresh = self._h.initial.clone()
        for t in keep:
            _ll.llama_sampler_accept(fresh.ptr, t)
        self._m = fresh
        self._ids = keep

    def fork(self) -> LlamaCppMatcher:
        return LlamaCppMatcher(self._h, self._m.clone(), list(self._ids))

    def __repr__(self) -> str:
        return f"LlamaCppMatcher(num_accepted={len(self._ids)}, terminated={self._terminated()})"


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: LlamaCppBackend, matcher: LlamaCppMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
