"""outlines-core behind the Backend protocol (``pip install outlines-core``; written against 0.2.14,
supported from 0.1.14 by feature detection: see "Releases" below).

Theory of operation. outlines-core compiles a *regex* against a vocabulary into an ``Index`` (a
token-level DFA) and walks it with a ``Guide``. One ``outlines_core.Vocabulary`` per vocabulary
fingerprint, built from the raw token bytes (``Vocabulary(eos_token_id, {bytes: [ids]})``; special
ids are left out). Specs become regexes: ``Regex`` as is, ``Choice`` as an escaped alternation,
``JsonSchema`` through ``outlines_core.json_schema.build_regex_from_schema``. outlines-core has no
context-free grammars, so ``Gbnf`` is refused.

* ``mask()`` is ``Guide.write_mask_into`` (xgrammar's layout; the EOS bit set by outlines-core in
  final states).
* EOS: outlines-core's ``Index`` offers EOS in final states but has no transition for it
  (``Guide.advance(eos)`` raises "No next state found"); its callers stop generating when EOS is
  sampled. The adapter does the same: EOS is accepted iff the Guide's mask has the EOS bit, and then
  the adapter's matcher is terminated without touching the Guide. Only one EOS id exists for
  outlines-core (the vocabulary's smallest EOS id); other EOS ids are never allowed.
* ``accept(t)``: ``Index.get_next_state(state, t)`` decides (no state change); only an allowed token
  reaches ``Guide.advance``, so a refusal never raises.
* ``rollback(k)`` is ``Guide.rollback_state`` while the Guide keeps enough states
  (``max_rollback``), else a replay on a fresh Guide. ``fork()`` replays the accepted ids on a fresh
  Guide, O(n): ``copy.copy(guide)`` goes through ``Guide.from_binary`` and loses ``max_rollback``
  (the copy can roll back only as many steps as the original had stored).

Releases. The adapter asks the installed outlines-core what it has (:data:`FEATURES`, from the
extension's ``__text_signature__`` and attributes, never its version string):

* ``Guide(index, max_rollback=...)``, ``rollback_state`` and ``get_allowed_rollback`` (0.2.1x): without
  them every rollback replays the remaining ids on a fresh ``Guide``.
* ``Guide.write_mask_into`` (0.2.1x): without it the mask is ``Guide.get_tokens()`` packed;
  ``Guide.advance(return_tokens=False)`` is used where it exists.
* ``build_regex_from_schema(max_recursion_depth=...)``: without it the release's own depth applies,
  and a different ``max_recursion_depth`` is an option it lacks
  (:class:`~props.backends._common.UnsupportedOption`).
* 0.1.x is another API (``outlines_core.fsm``): the token index is ``guide.create_states_mapping``
  over interegular's Python-like regexes, built from a tokenizer object whose ``vocabulary`` is keyed
  by raw bytes (:class:`_FsmTokenizer`); the adapter wraps it as an ``Index`` and ``Guide``
  (:class:`_FsmIndex`, :class:`_FsmGuide`; states are values, so forks and rollbacks replay), and
  escapes choice lists for that dialect. JSON comes from ``outlines_core.fsm.json_schema``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import outlines_core as oc

try:
    from outlines_core.json_schema import build_regex_from_schema
except ImportError:  # 0.1.x ("Releases" in the module docstring)
    from outlines_core.fsm.json_schema import build_regex_from_schema

from props.backends._common import (
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
from refdecoder import Choice, Gbnf, JsonProfile, JsonSchema, Regex, Spec
from refdecoder.bitmask import num_words, pack_ids
from tokenizers_matrix import Vocabulary

__all__ = ["OutlinesCoreBackend", "OutlinesCoreMatcher", "declared_profile", "WHITESPACE_PATTERN"]

_VERSION = dist_version("outlines_core")


def _text_signature(obj: Any) -> str:
    return str(getattr(obj, "__text_signature__", "") or "")


_GUIDE: Any = getattr(oc, "Guide", None)


def _index_errors() -> tuple[type[Exception], ...]:
    """outlines-core's documented refusals: ``ValueError`` (0.2: "Failed to build DFA", JSON schema
    errors); 0.1.x also lets interegular's parse errors through, and raises ``NotImplementedError``
    for schema constructs it lacks."""
    if callable(getattr(oc, "Index", None)):
        return (ValueError,)
    import interegular

    return (
        ValueError,
        NotImplementedError,
        interegular.patterns.Unsupported,
        interegular.patterns.InvalidSyntax,
    )


_INDEX_ERRORS = _index_errors()

#: What the installed outlines-core has (module docstring, "Releases").
FEATURES: dict[str, bool] = {
    "index": callable(getattr(oc, "Index", None)) and _GUIDE is not None,
    "rollback": "max_rollback" in _text_signature(_GUIDE)
    and callable(getattr(_GUIDE, "rollback_state", None)),
    "write_mask_into": callable(getattr(_GUIDE, "write_mask_into", None)),
    "max_recursion_depth": "max_recursion_depth" in _text_signature(build_regex_from_schema),
    "advance_return_tokens": "return_tokens" in _text_signature(getattr(_GUIDE, "advance", None)),
}


class _FsmTokenizer:
    """What outlines-core 0.1.x's ``reduced_vocabulary`` reads of a tokenizer, over raw token bytes:
    ``vocabulary`` keyed by ``bytes`` takes its byte path ("BPE tokenizers where the tokens are
    directly stored as bytes"). One id per distinct byte string (the first): a dict has one value."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.eos_token_id = min(vocabulary.eos_ids)
        self.eos_token = vocabulary.special_name(self.eos_token_id) or "</s>"
        self.special_tokens: set[Any] = set()
        self.vocabulary: dict[bytes, int] = {}
        for i, data in enumerate(vocabulary.token_bytes):
            if data:
                self.vocabulary.setdefault(data, i)

    def convert_token_to_string(self, token: bytes) -> str:
        return token.decode("utf-8", errors="replace")


class _FsmIndex:
    """outlines-core 0.1.x's token index (``fsm.guide.create_states_mapping``: a dict state -> token ->
    state with EOS mapped to itself in final states, or from 0.1.2x a Rust ``Index`` with
    ``get_allowed_tokens``) behind the calls the adapter makes of a 0.2 ``Index``, answering as
    ``RegexGuide`` does (a state without transitions writes EOS)."""

    def __init__(self, regex: str, tokenizer: _FsmTokenizer) -> None:
        from outlines_core.fsm.guide import create_states_mapping

        self.native, _empty, self.finals = create_states_mapping(regex, tokenizer)
        self.eos_id = tokenizer.eos_token_id
        self.rust = callable(getattr(self.native, "get_allowed_tokens", None))
        self.initial = int(self.native.get_initial_state()) if self.rust else 0

    def get_next_state(self, state: int, token_id: int) -> int | None:
        nxt = (
            self.native.get_next_state(state, token_id)
            if self.rust
            else self.native.get(state, {}).get(token_id)
        )
        return None if nxt is None else int(nxt)

    def allowed(self, state: int) -> list[int]:
        tokens = self.native.get_allowed_tokens(state) if self.rust else self.native.get(state)
        return [int(t) for t in tokens] if tokens is not None else [self.eos_id]

    def is_final(self, state: int) -> bool:
        return bool(self.native.is_final_state(state)) if self.rust else state in self.finals


class _FsmGuide:
    """A 0.2 ``Guide``'s calls over :class:`_FsmIndex` (state 0 first, as ``RegexGuide.initial_state``)."""

    def __init__(self, index: _FsmIndex) -> None:
        self._index = index
        self._state = index.initial

    def get_state(self) -> int:
        return self._state

    def get_tokens(self) -> list[int]:
        return self._index.allowed(self._state)

    def advance(self, token_id: int) -> None:
        nxt = self._index.get_next_state(self._state, token_id)
        if nxt is None:
            raise ValueError(
                f"No next state found for the current state: {self._state} with token ID: {token_id}"
            )
        self._state = nxt

    def is_finished(self) -> bool:
        return self._index.is_final(self._state)


def _advance(guide: Any, token_id: int) -> None:
    if FEATURES["advance_return_tokens"] and not isinstance(guide, _FsmGuide):
        guide.advance(token_id, return_tokens=False)  # skips building the next allowed-token list
    else:
        guide.advance(token_id)


# outlines-core's own default is outlines_core.json_schema.WHITESPACE == r"[ ]?": at most one U+0020.
# No profile says "spaces only", so the adapter passes the same bound over JSON's four whitespace
# characters, which is exactly JsonProfile(whitespace=1).
WHITESPACE_PATTERN = r"[ \t\n\r]?"

_META = set("\\.+*?()|[]{}^$#&-~")


def _escape_python(text: str) -> str:
    """``text`` as a literal in 0.1.x's regex syntax (interegular's, Python-like)."""
    return "".join("\\" + ch if ch in "\\.^$*+?{}[]|()" else ch for ch in text)


def _escape(text: str) -> str:
    """``text`` as a literal in outlines-core's regex syntax (the Rust ``regex`` crate's)."""
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return "".join(out)


def declared_profile(whitespace_pattern: str | None = WHITESPACE_PATTERN) -> DeclaredProfile:
    """The language of ``build_regex_from_schema(schema, whitespace_pattern)``.

    Sources (outlines-core 0.2.14): ``outlines_core/_json_schema.py`` (re-exported constants
    ``WHITESPACE = r"[ ]?"``, ``STRING_INNER``), ``build_regex_from_schema.__doc__`` ("Creates regex
    string from JSON schema with optional whitespace pattern", ``max_recursion_depth=3``), and the
    regexes it returns for probe schemas:

    * whitespace: the pattern is placed in each gap of objects and after ``[``, ``,`` and before
      ``]`` in arrays; with the adapter's ``[ \\t\\n\\r]?`` that is ``1``; ``""`` is ``"none"``.
    * property order: properties are emitted in the order of ``properties`` -> ``"schema"``.
    * ``additionalProperties`` absent: no other keys -> ``False`` (and ``additionalProperties: true``
      next to ``properties`` is ignored as well); undeclared keys of a property-less object can repeat
      -> ``allow_duplicate_keys=True``.
    * strings: ``STRING_INNER = ([^"\\\\\\x00-\\x1F\\x7F-\\x9F]|\\\\["\\\\/bfnrt])`` -> no ``\\u`` escapes
      -> ``unicode_escapes=False``.
    * ``format``: date, date-time, time, uuid, email, uri are regexes; others raise "Format ... is not
      supported by Outlines" -> ``"assert"``.
    """
    if whitespace_pattern == "":
        ws: Any = "none"
    else:
        ws = 1
    notes = [
        f"outlines_core.json_schema.build_regex_from_schema(schema, whitespace_pattern={whitespace_pattern!r}) "
        "(outlines-core's own default is WHITESPACE = r'[ ]?')",
        "no whitespace before or after the top-level value; arrays put whitespace only after '[' and ',' and "
        "before ']' (not before ','); untyped objects/arrays are unrolled to max_recursion_depth=3",
        "strings exclude raw U+007F..U+009F (STRING_INNER); numbers need a sign in the exponent "
        "([eE][+-][0-9]+)",
        "property order = order of 'properties'; additionalProperties absent or true next to properties: closed",
        "regex dialect: Rust regex crate (Index); Gbnf unsupported (no context-free grammars)",
        "EOS: one id (the smallest EOS id); EOS is offered in final states but has no Index transition",
    ]
    if whitespace_pattern not in ("", WHITESPACE_PATTERN):
        notes.append(
            f"whitespace pattern {whitespace_pattern!r} is not a JsonProfile; declared as whitespace=1"
        )
    return DeclaredProfile(
        json=JsonProfile(
            whitespace=ws,
            property_order="schema",
            additional_properties_default=False,
            allow_duplicate_keys=True,
            unicode_escapes=False,
            formats="assert",
            top_level_whitespace=False,
            # measured: {"a": 1} passes dependencies {"a": ["b"]} in a 2020-12 schema
            legacy_dependencies="ignore",
        ),
        canonical_tokenization_only=False,
        notes=tuple(notes),
    )


@dataclass(frozen=True, eq=False)
class _Handle:
    index: Any  # outlines_core.Index
    regex: str
    vocab_size: int
    eos_id: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...]

    def __repr__(self) -> str:
        return f"_Handle(regex={self.regex[:80]!r}, vocab_size={self.vocab_size}, eos_id={self.eos_id})"


class OutlinesCoreBackend:
    """outlines-core as a Backend (see the module docstring and :func:`declared_profile`)."""

    name = "outlines-core"
    version = _VERSION

    def __init__(
        self,
        whitespace_pattern: str | None = WHITESPACE_PATTERN,
        max_recursion_depth: int = 3,
        max_rollback: int = 4096,
        max_vocabularies: int = 4,
    ) -> None:
        if max_recursion_depth != 3 and not FEATURES["max_recursion_depth"]:
            raise UnsupportedOption(
                "outlines-core",
                _VERSION,
                "max_recursion_depth",
                "build_regex_from_schema has no max_recursion_depth",
            )
        self.whitespace_pattern = whitespace_pattern
        self.max_recursion_depth = max_recursion_depth
        self.max_rollback = max_rollback
        self.profile = declared_profile(whitespace_pattern)
        self._vocabs: PerVocabulary[Any] = PerVocabulary(self._build_vocabulary, max_vocabularies)

    def _vocabulary(self, vocabulary: Vocabulary) -> Any:
        return self._vocabs.get(vocabulary)

    def _build_vocabulary(self, vocabulary: Vocabulary) -> Any:
        if not FEATURES["index"]:
            return _FsmTokenizer(vocabulary)
        table: dict[bytes, list[int]] = {}
        for i, data in enumerate(vocabulary.token_bytes):
            if data is not None:
                table.setdefault(data, []).append(i)
        voc = oc.Vocabulary(min(vocabulary.eos_ids), table)
        return voc

    def regex_of(self, spec: Spec) -> str | Refused:
        """The regex outlines-core is given for ``spec`` (its ``ValueError`` is a refusal)."""
        if isinstance(spec, Regex):
            return spec.pattern
        if isinstance(spec, Choice):
            if not spec.options:
                return Refused("outlines-core: an empty choice list has no regex form", "choice", "")
            escape = _escape if FEATURES["index"] else _escape_python
            return "|".join(escape(o) for o in spec.options)
        if isinstance(spec, JsonSchema):
            try:
                depth = (
                    {"max_recursion_depth": self.max_recursion_depth}
                    if FEATURES["max_recursion_depth"]
                    else {}
                )
                return str(
                    build_regex_from_schema(
                        json.dumps(spec.schema), whitespace_pattern=self.whitespace_pattern, **depth
                    )
                )
            except _INDEX_ERRORS as e:
                return _refused(e)
        if isinstance(spec, Gbnf):
            return Refused(
                "outlines-core compiles regular expressions only; GBNF is a context-free grammar", "gbnf", ""
            )
        return Refused(f"outlines-core adapter: unknown spec type {type(spec).__name__}", "", "")

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        voc = self._vocabulary(vocabulary)
        t0 = time.perf_counter()
        regex = self.regex_of(spec)
        if isinstance(regex, Refused):
            return regex
        try:
            index = oc.Index(regex, voc) if FEATURES["index"] else _FsmIndex(regex, voc)
        except _INDEX_ERRORS as e:  # outlines-core's IndexError ("Failed to build DFA", ...)
            return _refused(e)
        handle = _Handle(
            index,
            regex,
            len(vocabulary.token_bytes),
            min(vocabulary.eos_ids),
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> OutlinesCoreMatcher:
        h: _Handle = compiled.handle
        return OutlinesCoreMatcher(h, _guide(h.index, self.max_rollback), [], False, self.max_rollback)


def _guide(index: Any, max_rollback: int) -> Any:
    if isinstance(index, _FsmIndex):
        return _FsmGuide(index)
    if FEATURES["rollback"]:
        return oc.Guide(index, max_rollback=max_rollback)
    return oc.Guide(index)


def _refused(e: Exception) -> Refused:
    text = " ".join(str(e).split())[:500]
    keyword = "format" if text.startswith("Format ") else ""
    return Refused(f"outlines-core: {text}", keyword, "")


class OutlinesCoreMatcher:
    """One sequence on an ``outlines_core.Guide`` (see the module docstring)."""

    def __init__(
        self, handle: _Handle, guide: Any, history: list[int], terminated: bool, max_rollback: int
    ) -> None:
        self._h = handle
        self._g = guide
        self._ids = history  # the ids given to the Guide (EOS never is)
        self._terminated = terminated
        self._max_rollback = max_rollback

    @property
    def native(self) -> Any:
        return self._g

    def accepted_ids(self) -> list[int]:
        return list(self._ids) + ([self._h.eos_id] if self._terminated else [])

    def _state_id(self) -> str:
        return f"outlines-core:{self._g.get_state()}"

    def _raw_mask(self) -> np.ndarray:
        if not FEATURES["write_mask_into"]:
            allowed = np.asarray(self._g.get_tokens(), dtype=np.int64)
            return pack_ids(allowed[allowed < self._h.vocab_size], self._h.vocab_size)
        out = np.zeros(num_words(self._h.vocab_size), dtype=np.int32)
        self._g.write_mask_into(out.ctypes.data, out.size, 4)
        return out

    def mask(self) -> np.ndarray:
        if self._terminated:
            return np.zeros(num_words(self._h.vocab_size), dtype=np.int32)
        return self._raw_mask()

    def _eos_allowed(self) -> bool:
        e = self._h.eos_id
        return bool((int(self._raw_mask()[e >> 5]) >> (e & 31)) & 1)

    def accept(self, token_id: int) -> TokenOutcome:
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._terminated
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        if token_id == self._h.eos_id:
            if not self._eos_allowed():
                return Rejected(
                    token_id, data, self._state_id(), "outlines-core's mask does not offer EOS here"
                )
            self._terminated = True
            return Accepted(token_id, data, self._state_id(), True)
        if self._h.index.get_next_state(self._g.get_state(), token_id) is None:
            return Rejected(
                token_id, data, self._state_id(), "outlines-core Index has no transition for this token"
            )
        _advance(self._g, token_id)
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), False)

    def is_accepting(self) -> bool:
        return not self._terminated and bool(self._g.is_finished())

    def is_terminated(self) -> bool:
        return self._terminated

    def _replay(self, ids: list[int]) -> Any:
        guide = _guide(self._h.index, self._max_rollback)
        for t in ids:
            _advance(guide, t)
        return guide

    def rollback(self, k: int) -> None:
        total = len(self._ids) + int(self._terminated)
        check_rollback(k, total)
        if k and self._terminated:
            self._terminated = False
            k -= 1
        if k == 0:
            return
        if FEATURES["rollback"] and k <= self._g.get_allowed_rollback():
            self._g.rollback_state(k)
            del self._ids[len(self._ids) - k :]
        else:
            del self._ids[len(self._ids) - k :]
            self._g = self._replay(self._ids)

    def fork(self) -> OutlinesCoreMatcher:
        return OutlinesCoreMatcher(
            self._h, self._replay(self._ids), list(self._ids), self._terminated, self._max_rollback
        )

    def __repr__(self) -> str:
        return f"OutlinesCoreMatcher(num_accepted={len(self._ids)}, terminated={self._terminated})"


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(
        backend: OutlinesCoreBackend, matcher: OutlinesCoreMatcher
    ) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
