"""formatron (and its engine kbnf) behind the Backend protocol (``pip install formatron``; written
against formatron 0.5.0 with kbnf 0.4.2, run from 0.4.0: see "Releases" below).

Theory of operation. formatron turns a spec into a KBNF grammar (``formatron/formatter.py``,
``FormatterBuilder``: one rule per extractor, then ``start ::= <main rule>;``) and hands it to
kbnf's ``Engine``, an Earley recognizer over the vocabulary's token bytes. The adapter uses
formatron only for that grammar and drives kbnf itself, step by step:

* Per vocabulary fingerprint one ``kbnf.Vocabulary``: ``{id: kbnf.Token(bytes)}`` for every text
  token, and ``{id: text}`` (the bytes decoded with U+FFFD for debugging, what kbnf's
  ``Vocabulary::new`` calls ``id_to_token_string``). Special ids are left out: kbnf answers
  ``UnknownTokenID`` for them and never allows them. (formatron's own
  ``integrations/transformers.create_engine_vocabulary`` puts special tokens in as their text, e.g.
  ``b"<|endoftext|>"``; maskcert's vocabularies have no text for them.)
* ``compile`` builds the grammar with formatron (JSON Schema: ``formatron.schemas.json_schema.
  create_schema`` then ``FormatterBuilder.json``; regex: ``FormatterBuilder.regex``; choice:
  ``FormatterBuilder.choose``; each appended with ``append_str`` so that nothing follows it),
  takes ``Formatter.grammar_str`` and builds one pristine ``kbnf.Engine`` from it (``Config()``
  defaults). A matcher starts from ``copy.copy`` of that engine (kbnf's ``__copy__`` is a Rust
  ``Clone`` of the whole engine, ``src/ffi_bindings.rs``).
* ``mask()`` is ``compute_allowed_token_ids`` then ``get_allowed_token_ids_from_last_computation``.
  kbnf has no EOS: its engine *finishes* as soon as the start nonterminal is complete ("KBNF ends
  eagerly", crate docs ``src/lib.rs``; ``EngineBase::earley_complete_one_item`` sets ``finished``),
  and formatron's generation loop then allows EOS and nothing else (``integrations/transformers.py``,
  ``FormattersLogitsProcessor.__call__``: ``if formatter.is_completed(): scores[i, :] = -inf;
  scores[i, eos] = 0``). So: before the engine finishes the mask is kbnf's and holds no EOS; once it
  has finished the mask is the EOS ids alone; after EOS it is empty. (formatron's processor takes
  one ``eos_token_id``; the adapter treats every EOS id of the vocabulary alike.)
* ``accept(t)`` is ``try_accept_new_token``; kbnf raises ``ValueError`` with the text of
  ``AcceptTokenError`` (``src/engine_like.rs``): ``Rejected`` ("internal states are not updated", so
  no fork is needed before probing) and ``Finished`` are rejections, anything else is a crash.
  EOS is accepted exactly when the engine has finished; ``is_accepting()`` is ``is_finished()``.
* ``fork()`` is ``copy.copy`` of the engine. kbnf has no rollback (only ``reset``): ``rollback(k)``
  replays the remaining ids on a copy of the pristine engine, O(n) in the ids kept.

Releases. Written against formatron 0.5.0 / kbnf 0.4.2; run on 0.4.0 (kbnf 0.3.13), 0.4.9 (kbnf
0.4.0) and 0.5.0 (kbnf 0.4.2). Every call the adapter makes exists unchanged across them
(``FormatterBuilder.json/regex/choose/append_str/build``, ``Formatter.grammar_str``,
``schemas.json_schema.create_schema``; kbnf's ``Engine``, ``Vocabulary``, ``Token``, ``Config``,
``try_accept_new_token``, ``compute_allowed_token_ids``,
``get_allowed_token_ids_from_last_computation``, ``is_finished``, ``__copy__``), so nothing is
detected; what the releases accept differs and shows as refusals and findings (0.4.0 takes object
roots only and compiles some keyword combinations that later releases assert against). The
reported version is formatron's; kbnf's is in the profile notes. All of these releases do
``from pydantic import typing`` (``schemas/json_schema.py``, ``schemas/dict_inference.py``), which
is Python's ``typing`` only while ``pydantic/__init__.py`` imports it (pydantic up to 2.11); from
pydantic 2.12 the name is pydantic's V1 shim and formatron fails at import with ``AttributeError:
... has no attribute 'Type'``. The adapter turns that into an ``ImportError`` naming the cause, so
the backend is "not available" rather than crashing.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import kbnf
import numpy as np

try:
    import jsonschema
    from formatron.formatter import FormatterBuilder
    from formatron.schemas import json_schema as formatron_json_schema
except AttributeError as _e:  # pragma: no cover - depends on the installed pydantic
    raise ImportError(
        f"formatron cannot be imported with the installed pydantic ({_e}): formatron/schemas/json_schema.py "
        "does 'from pydantic import typing', which works with pydantic<2.12 only; expected pydantic<2.12 "
        "(e.g. pip install --target DIR --no-deps 'pydantic==2.11.10' 'pydantic_core==2.33.2' and DIR first "
        "on PYTHONPATH)"
    ) from _e
import referencing.exceptions

from props.backends._common import PerVocabulary, check_rollback, dist_version, mask_of, reject_at_edge
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
from tokenizers_matrix import Vocabulary

__all__ = ["FormatronBackend", "FormatronMatcher", "declared_profile", "SCHEMA_ID", "KBNF_VERSION"]

_VERSION = dist_version("formatron")
KBNF_VERSION = dist_version("kbnf")

#: What ``create_schema`` requires of a root schema (its docstring: "The schema must have a valid '$id'
#: and '$schema' fields", "a valid JSON Schema according to the JSON Schema Draft 2020-12 standard"):
#: the adapter adds the ``$id`` where the schema has none and always declares 2020-12.
SCHEMA_ID = "https://maskcert.invalid/formatron-schema.json"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# kbnf's AcceptTokenError texts (src/engine_like.rs, the Display of each variant), raised as ValueError.
_REJECTED = "The input token id is rejected"
_FINISHED = "is finished, as defined by its grammar"

# formatron's unsupported-schema errors that are assertions with a message (formatron/formats/json.py
# and formatron/schemas/json_schema.py, 0.5.0): refusals, as opposed to a bare AssertionError.
_ASSERTION_REFUSALS = (
    "pattern is mutually exclusive",
    "substring_of is mutually exclusive",
    "Only 'anyOf', '$id', and '$schema' are allowed",
    "cannot be an empty union",
    "cannot be an empty literal",
)


def declared_profile() -> DeclaredProfile:
    """The language of formatron's JSON grammar (``formatron/formats/json.py``, 0.5.0).

    * whitespace: every JSON token is a regex that starts with ``SPACE_NONTERMINAL = "[ \\t\\n]*"``
      (``GRAMMAR_HEADER``) -> ``"any"``; ``\\r`` is never allowed, which shows as completeness
      differences.
    * top-level whitespace: allowed before the value (``object_begin``/``array_begin`` start with
      the whitespace class), never after it (the engine finishes at the closing bracket) -> ``True``,
      so the missing trailing whitespace shows as completeness differences, not as soundness ones.
    * property order: ``schema`` (``_register_all_predefined_types.schema``) emits the declared
      properties in order, each key once, joined by ``comma`` -> ``"schema"``.
    * ``additionalProperties``: "we always assume additionalProperties is false" (``create_schema``
      docstring) for objects with ``properties`` -> ``False``; an object without ``properties`` is
      ``dict[str, Any]``, the grammar's ``object`` rule, whose keys may repeat ->
      ``allow_duplicate_keys=True``.
    * strings: ``\\\\u[0-9A-Fa-f]{4}`` is in the ``string`` rule -> ``unicode_escapes=True`` (no
      ``\\/`` there; strings with ``minLength``/``maxLength`` allow it).
    * ``format`` is never read by ``create_schema`` -> ``"annotation"``.
    * ``prefixItems`` without ``items``: ``_handle_list_metadata`` sets ``additional_items=True`` ->
      ``additional_items_default=True`` (the specification's default).
    """
    notes = (
        "formatron/formats/json.py GRAMMAR_HEADER: SPACE_NONTERMINAL='[ \\t\\n]*' before every JSON token "
        "(no \\r), nothing after the top-level value",
        "formatron/schemas/json_schema.py create_schema: root type must be object or array; additionalProperties "
        "assumed false; properties in schema order; keywords it does not list (format, multipleOf, allOf, "
        "oneOf, not, ...) are ignored, not refused",
        "kbnf ends eagerly (kbnf src/lib.rs 'KBNF ends eagerly'): once the start rule is complete only EOS is "
        "allowed (formatron FormattersLogitsProcessor), so a regex or choice can never continue past a "
        "complete match",
        "regex dialect: Python's re (formatron RegexExtractor compiles it) checked, then Rust regex "
        "(kbnf_regex_automata) in the grammar; Gbnf unsupported (KBNF is another grammar syntax)",
        f"driven on kbnf {KBNF_VERSION}: special ids are not in the kbnf Vocabulary (never allowed)",
    )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace="any",
            property_order="schema",
            additional_properties_default=False,
            allow_duplicate_keys=True,
            unicode_escapes=True,
            formats="annotation",
            top_level_whitespace=True,
            additional_items_default=True,
            # its reading of a 2020-12 `dependencies` is not measured: refused, not guessed
            legacy_dependencies="refuse",
        ),
        canonical_tokenization_only=False,
        notes=notes,
    )


def kbnf_vocabulary(vocabulary: Vocabulary) -> kbnf.Vocabulary:
    """The ``kbnf.Vocabulary`` of a maskcert vocabulary: its text tokens only (module docstring)."""
    tokens = {i: kbnf.Token(b) for i, b in enumerate(vocabulary.token_bytes) if b is not None}
    strings = {
        i: b.decode("utf-8", errors="replace") for i, b in enumerate(vocabulary.token_bytes) if b is not None
    }
    return kbnf.Vocabulary(tokens, strings)


def _grammar(spec: Spec, kvocab: kbnf.Vocabulary) -> str | Refused:
    """formatron's KBNF grammar for ``spec`` (``Formatter.grammar_str``), or a refusal."""
    builder = FormatterBuilder()
    if isinstance(spec, JsonSchema):
        schema = spec.schema
        if not isinstance(schema, dict):
            return Refused(
                "formatron: create_schema takes a JSON Schema object (a dict), not a boolean schema", "", ""
            )
        # create_schema wants '$id' and '$schema' and reads 2020-12 only (its docstring); maskcert reads
        # every json-schema.org dialect with 2020-12 semantics too, so the dialect is declared as such.
        schema = {"$id": SCHEMA_ID, **schema, "$schema": SCHEMA_DIALECT}
        extractor: Any = builder.json(formatron_json_schema.create_schema(schema))
    elif isinstance(spec, Regex):
        extractor = builder.regex(spec.pattern)
    elif isinstance(spec, Choice):
        if not spec.options:
            return Refused("formatron: an empty choice list has no grammar form", "choice", "")
        extractor = builder.choose(*spec.options)
    elif isinstance(spec, Gbnf):
        return Refused(
            "formatron grammars are KBNF (rules end with ';', the start rule is 'start', character classes "
            'only inside #"regex" terminals), not GBNF; formatron has no GBNF front end',
            "gbnf",
            "",
        )
    else:
        return Refused(f"formatron adapter: unknown spec type {type(spec).__name__}", "", "")
    builder.append_str(f"{extractor}")  # "${nonterminal}": the extractor alone, nothing after it
    formatter = builder.build(kvocab, lambda ids: "")
    return str(formatter.grammar_str)


def _refused(e: BaseException, stage: str) -> Refused:
    text = " ".join(str(e).split())[:500] or type(e).__name__
    keyword = "pattern" if isinstance(e, re.error) or "Pattern" in text else ""
    return Refused(f"{stage}: {type(e).__name__}: {text}", keyword, "")


def _is_refusal(e: BaseException) -> bool:
    """formatron's and kbnf's documented errors for a spec they do not handle (``create_schema``'s
    "Raises": ``jsonschema.exceptions.ValidationError``, ``ValueError``; the JSON generators'
    ``TypeError(... is not supported in json_generators!)``; ``re.error`` from ``RegexExtractor``;
    kbnf's ``CreateEngineError`` as ``ValueError``; an unresolvable ``$ref``; the assertions in
    :data:`_ASSERTION_REFUSALS`)."""
    if isinstance(
        e,
        (
            ValueError,
            re.error,
            jsonschema.exceptions.ValidationError,
            jsonschema.exceptions.SchemaError,
            referencing.exceptions.Unresolvable,
            referencing.exceptions.NoSuchResource,
        ),
    ):
        return True
    if isinstance(e, TypeError):
        return "is not supported in json_generators" in str(e) or "Unsupported type in json schema" in str(e)
    return isinstance(e, AssertionError) and any(p in str(e) for p in _ASSERTION_REFUSALS)


@dataclass(frozen=True, eq=False)
class _Handle:
    grammar: str  # the KBNF grammar formatron generated
    engine: Any  # the pristine kbnf.Engine (never advanced: matchers start from copies)
    vocab_size: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


class FormatronBackend:
    """formatron's grammars on kbnf's engine as a Backend (see the module docstring)."""

    name = "formatron"
    version = _VERSION

    def __init__(self, max_vocabularies: int = 4) -> None:
        self.profile = declared_profile()
        self._vocabularies: PerVocabulary[kbnf.Vocabulary] = PerVocabulary(kbnf_vocabulary, max_vocabularies)

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        kvocab = self._vocabularies.get(vocabulary)
        t0 = time.perf_counter()
        try:
            grammar = _grammar(spec, kvocab)
        except Exception as e:
            if _is_refusal(e):
                return _refused(e, "formatron")
            raise
        if isinstance(grammar, Refused):
            return grammar
        try:
            engine = kbnf.Engine(grammar, kvocab, kbnf.Config())
        except ValueError as e:  # kbnf's CreateEngineError (src/engine.rs), e.g. a regex Rust's crate refuses
            return _refused(e, "kbnf")
        handle = _Handle(
            grammar,
            engine,
            len(vocabulary.token_bytes),
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> FormatronMatcher:
        h: _Handle = compiled.handle
        return FormatronMatcher(h, copy.copy(h.engine), [])


class FormatronMatcher:
    """One sequence on a ``kbnf.Engine`` (see the module docstring)."""

    def __init__(self, handle: _Handle, engine: Any, ids: list[int]) -> None:
        self._h = handle
        self._engine = engine  # kbnf.Engine
        self._ids = ids  # accepted ids, ending with the EOS id once terminated

    @property
    def native(self) -> Any:
        """The ``kbnf.Engine`` (for tests and reproducers)."""
        return self._engine

    def accepted_ids(self) -> list[int]:
        return list(self._ids)

    def _state_id(self) -> str:
        return f"formatron@{len(self._ids)}"

    def _terminated(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._h.eos_ids

    def allowed_ids(self) -> list[int]:
        """The ids formatron's generation loop leaves allowed here (module docstring)."""
        if self._terminated():
            return []
        if self._engine.is_finished():
            return sorted(self._h.eos_ids)
        self._engine.compute_allowed_token_ids()
        return list(self._engine.get_allowed_token_ids_from_last_computation())

    def mask(self) -> np.ndarray:
        return mask_of(self.allowed_ids, self._h.vocab_size, self._terminated())

    def accept(self, token_id: int) -> TokenOutcome:
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._terminated()
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        if token_id in self._h.eos_ids:
            if not self._engine.is_finished():
                return Rejected(token_id, data, self._state_id(), "EOS before the kbnf engine finished")
            self._ids.append(token_id)
            return Accepted(token_id, data, self._state_id(), True)
        if data is None:
            return Rejected(token_id, data, self._state_id(), "a special id (not in the kbnf Vocabulary)")
        try:
            self._engine.try_accept_new_token(token_id)
        except ValueError as e:
            if _REJECTED in str(e) or _FINISHED in str(e):
                return Rejected(token_id, data, self._state_id(), f"kbnf: {e}")
            raise
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), False)

    def is_accepting(self) -> bool:
        return not self._terminated() and bool(self._engine.is_finished())

    def is_terminated(self) -> bool:
        return self._terminated()

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        if k == 0:
            return
        kept = self._ids[: len(self._ids) - k]
        engine = copy.copy(self._h.engine)
        for i, t in enumerate(kept):
            if t in self._h.eos_ids:
                break  # only ever the last id; the engine has finished before it
            try:
                engine.try_accept_new_token(t)
            except ValueError as e:
                raise RuntimeError(
                    f"kbnf replay diverged: token {t} accepted at position {i} is refused on replay ({e})"
                ) from e
        self._engine = engine
        self._ids = kept

    def fork(self) -> FormatronMatcher:
        return FormatronMatcher(self._h, copy.copy(self._engine), list(self._ids))

    def __repr__(self) -> str:
        return f"FormatronMatcher(num_accepted={len(self._ids)}, terminated={self._terminated()})"


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: FormatronBackend, matcher: FormatronMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
