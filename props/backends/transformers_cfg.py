"""transformers-CFG behind the Backend protocol (``pip install transformers-cfg``; written against
0.2.7 and run on it: see "Releases" below).

Theory of operation. transformers-CFG parses a llama.cpp-style EBNF grammar (``parser.parse_ebnf``)
into an encoding that ``recognizer.StringRecognizer`` runs as a pushdown automaton over Unicode code
points; ``token_grammar_recognizer.IncrementalTokenRecognizer`` (``grammar_utils.
IncrementalGrammarConstraint``, its old name) lifts it to token ids with a byte trie of the
vocabulary (``tokenization/byte_trie.ByteTrie``) and a map from ids to bytes (a
``TokenizerMiddleMapping``, its "homomorphism"). A parse state is an ``AcceptState`` (a set of
stacks and a partial UTF-8 sequence) that every update returns anew, never changing the old one.

The recognizer's constructor takes the trie and the map as arguments (``trie=``,
``homomorphism=``); by default it derives both from a Hugging Face tokenizer
(``TokenizerMiddleMapping.from_hf_tokenizer``). The adapter gives them from the vocabulary's raw
token bytes, as the other adapters give their engines raw bytes, so that any vocabulary can be
certified and what is certified is the recognizer: the map answers a text token's bytes and ``b""``
for a special id (as ``GPT2TokenizerMiddleMapping.map`` does for special ids), and the trie holds
every text token, built as ``ByteTrie.from_tokenizer`` builds it (``insert(bytes, id)`` per id,
``vocab_size`` = the vocabulary size). transformers-CFG's own derivation is not used because (0.2.7,
transformers 5.x) a plain ``PreTrainedTokenizerFast`` gets no map (``from_hf_tokenizer`` returns
``None`` unless ``'Meta-Llama-3'`` is in its name), and the GPT-2 map (``ByteProxyMapping``) reloads
the tokenizer with ``use_fast=False`` by name and then the slow ``gpt2`` tokenizer from the Hugging
Face Hub, which a certification run cannot reach.

* ``mask()`` is ``filter_vocab(state, cpu)`` (what ``GrammarConstrainedLogitsProcessor`` calls per
  row in its default ``full_mask`` mode): per stack, the trie walk of
  ``get_next_token_acceptance_for_single_stack``, EOS where a stack is empty
  (``validate_and_set_eos_acceptance``), OR-ed over the stacks; EOS alone when no stack is left.
* ``accept(t)`` is ``try_accept_token_id(t, state)`` (the recognizer's own verdict, no state change)
  and, when it says yes, ``_update_state_with_token_id(t, state)``, the per-token update the
  processor's ``update_state_with_batch_token_seqs`` runs. EOS is the recognizer's single
  ``eos_token_id``: the smallest EOS id of the vocabulary (other EOS ids are text-less specials,
  never allowed).
* ``is_accepting()`` is the EOS bit of the mask (what ``generate`` samples from).
* States are values, so ``fork()`` shares the current state and ``rollback(k)`` returns to the state
  ``k`` ids back (a list of the states after each id).

Specs: GBNF directly (``start_rule_name`` = the spec's root); a choice list as the GBNF rule
``root ::= "a" | "b"``; no regex and no JSON Schema front end ships with the package (its JSON
grammars are example ``.ebnf`` files in the repository), so those are refused. ``parse_ebnf``
reports a syntax error by logging it and returning an empty grammar (``except RuntimeError``);
the adapter parses first and refuses a grammar that comes back without the start rule.

Releases. Written against 0.2.7 and run on it (transformers 5.24, torch 2.13). The recognizer's
constructor has taken ``trie=`` and ``homomorphism=`` since the byte-trie rewrite; the adapter asks
for them by keyword and an older release without them fails as an adapter fault (a usage error).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from transformers_cfg.grammar_utils import IncrementalGrammarConstraint
from transformers_cfg.parser import parse_ebnf
from transformers_cfg.tokenization.byte_trie import ByteTrie
from transformers_cfg.tokenization.middle.TokenizerMiddleMapping import TokenizerMiddleMapping

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

__all__ = [
    "TransformersCFGBackend",
    "TransformersCFGMatcher",
    "declared_profile",
    "gbnf_literal",
    "RawMapping",
    "raw_trie",
    "TokenTable",
]

_VERSION = dist_version("transformers-cfg")
_CPU = torch.device("cpu")


def declared_profile() -> DeclaredProfile:
    """transformers-CFG has no JSON Schema front end, so its JSON profile is never used; the notes
    say what its grammars mean (``parser.py``, ``recognizer.py``, 0.2.7)."""
    return DeclaredProfile(
        # its reading of a 2020-12 `dependencies` is not measured: refused, not guessed
        json=JsonProfile(legacy_dependencies="refuse"),
        canonical_tokenization_only=False,
        notes=(
            "transformers_cfg/parser.py parse_ebnf: llama.cpp-style EBNF (GBNF); a syntax error is logged and "
            "yields an empty grammar, which the adapter refuses",
            "JSON Schema and regex: no converter ships with transformers-cfg 0.2.7 (refused)",
            "token map and byte trie from the raw token bytes through the recognizer's homomorphism= and trie= "
            "arguments; special ids map to b'' and are not in the trie",
            "EOS: the recognizer's single eos_token_id (the smallest EOS id); it is allowed where a stack is "
            "empty (validate_and_set_eos_acceptance), accepted where AcceptState.can_stop() says so",
        ),
    )


def gbnf_literal(text: str) -> str:
    """``text`` as a transformers-CFG string literal (``parser.parse_char``: ``\\"``, ``\\\\``,
    ``\\xNN`` for control characters; other characters as themselves)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class _ParseErrors(logging.Filter):
    """Takes what ``parse_ebnf`` logs on logger ``transformers_cfg.parser`` when it fails: it calls
    ``logger.warning("error parsing grammar:", err)``, whose format has no placeholder for ``err``
    (formatting it raises ``TypeError`` in any handler), so the record is kept from the handlers and
    ``err`` read from its arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("error parsing grammar"):
            return True  # any other record goes on as usual
        args = record.args if isinstance(record.args, tuple) else ()
        self.errors.append(" ".join(str(a) for a in args) or str(record.msg))
        return False


def parse(text: str) -> tuple[Any, str]:
    """``parse_ebnf(text)`` and the parse error it logged ("" when none)."""
    errors = _ParseErrors()
    logger = logging.getLogger("transformers_cfg.parser")
    logger.addFilter(errors)
    try:
        parsed = parse_ebnf(text)
    finally:
        logger.removeFilter(errors)
    return parsed, "; ".join(errors.errors)


class _RawTokens:
    """What the recognizer reads of a tokenizer (``AbsTokenRecognizer.__init__``: ``eos_token_id``;
    ``TokenizerMiddleMapping.__init__``: ``bos_token_id``, ``all_special_ids``;
    ``_update_state_with_single_token_seq``: ``decode`` for its debug log)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.eos_token_id: int = min(vocabulary.eos_ids)
        self.bos_token_id: int | None = None
        self.all_special_ids: list[int] = sorted(vocabulary.special_ids)
        self.token_bytes: tuple[bytes | None, ...] = tuple(vocabulary.token_bytes)

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes[int(i)] or b"" for i in ids).decode("utf-8", errors="replace")


class TokenTable(Protocol):
    """What :class:`RawMapping` and :func:`raw_trie` read (:class:`_RawTokens`, or a reproducer's)."""

    @property
    def eos_token_id(self) -> int: ...

    @property
    def bos_token_id(self) -> int | None: ...

    @property
    def all_special_ids(self) -> list[int]: ...

    @property
    def token_bytes(self) -> tuple[bytes | None, ...]: ...


class RawMapping(TokenizerMiddleMapping):
    """transformers-CFG's "homomorphism" from token ids to bytes, over raw token bytes: the
    attributes ``TokenizerMiddleMapping.__init__`` sets, and ``map`` as the GPT-2 map answers
    (``b""`` for a special id)."""

    def __init__(self, tokens: TokenTable) -> None:
        self.eos_token_id = tokens.eos_token_id
        self.bos_token_id = tokens.bos_token_id
        self.tokenizer = tokens
        self.special = tokens.all_special_ids
        self._length = len(tokens.token_bytes)
        self._bytes = tokens.token_bytes

    def map(self, token_id: int, verbose: bool = False) -> bytes:
        if hasattr(token_id, "item"):
            token_id = int(token_id.item())
        return self._bytes[token_id] or b""


def raw_trie(tokens: TokenTable) -> Any:
    """A ``ByteTrie`` as ``ByteTrie.from_tokenizer`` builds it, from raw bytes."""
    trie = ByteTrie()
    for token_id, data in enumerate(tokens.token_bytes):
        if data is not None:
            trie.insert(data, token_id)
    trie.vocab_size = len(tokens.token_bytes)
    return trie


@dataclass(frozen=True, eq=False)
class _Tables:
    tokens: _RawTokens
    mapping: RawMapping
    trie: Any


def _tables(vocabulary: Vocabulary) -> _Tables:
    tokens = _RawTokens(vocabulary)
    return _Tables(tokens, RawMapping(tokens), raw_trie(tokens))


@dataclass(frozen=True, eq=False)
class _Handle:
    grammar: str
    recognizer: Any  # IncrementalGrammarConstraint (shared: its caches only, never its last_size)
    vocab_size: int
    eos_id: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


class TransformersCFGBackend:
    """transformers-CFG's recognizer as a Backend (see the module docstring)."""

    name = "transformers-cfg"
    version = _VERSION

    def __init__(self, max_vocabularies: int = 4) -> None:
        self.profile = declared_profile()
        self._tables: PerVocabulary[_Tables] = PerVocabulary(_tables, max_vocabularies)

    def _grammar(self, spec: Spec) -> tuple[str, str] | Refused:
        if isinstance(spec, Gbnf):
            return spec.text, spec.root
        if isinstance(spec, Choice):
            if not spec.options:
                return Refused("transformers-cfg: an empty choice list has no grammar form", "choice", "")
            return "root ::= " + " | ".join(gbnf_literal(o) for o in spec.options) + "\n", "root"
        if isinstance(spec, Regex):
            return Refused("transformers-cfg has no regex front end (grammars only)", "regex", "")
        if isinstance(spec, JsonSchema):
            return Refused(
                "transformers-cfg 0.2.7 ships no JSON Schema converter (JSON grammars are hand-written .ebnf)",
                "json_schema",
                "",
            )
        return Refused(f"transformers-cfg adapter: unknown spec type {type(spec).__name__}", "", "")

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        tables = self._tables.get(vocabulary)
        t0 = time.perf_counter()
        grammar = self._grammar(spec)
        if isinstance(grammar, Refused):
            return grammar
        text, root = grammar
        parsed, error = parse(text)
        if root not in parsed.symbol_table:
            why = (
                f"no rule {root!r}"
                if not error
                else f"error parsing grammar: {' '.join(error.split())[:300]}"
            )
            return Refused(f"transformers-cfg: parse_ebnf: {why}", "gbnf", "")
        recognizer = IncrementalGrammarConstraint(
            text, root, tables.tokens, trie=tables.trie, homomorphism=tables.mapping
        )
        handle = _Handle(
            text,
            recognizer,
            len(vocabulary.token_bytes),
            tables.tokens.eos_token_id,
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> TransformersCFGMatcher:
        h: _Handle = compiled.handle
        return TransformersCFGMatcher(h, [h.recognizer.string_recognizer.get_initial_parsing_state()], [])


class TransformersCFGMatcher:
    """One sequence: the ``AcceptState`` after each accepted id (see the module docstring)."""

    def __init__(self, handle: _Handle, states: list[Any], ids: list[int]) -> None:
        self._h = handle
        self._states = states  # states[k] = the state after the first k ids
        self._ids = ids

    @property
    def state(self) -> Any:
        """The current ``AcceptState`` (for tests and reproducers)."""
        return self._states[-1]

    def accepted_ids(self) -> list[int]:
        return list(self._ids)

    def _state_id(self) -> str:
        return f"transformers-cfg@{len(self._ids)}"

    def _terminated(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._h.eos_ids

    def allowed_ids(self) -> list[int]:
        """The ids ``filter_vocab`` allows in the current state (empty after EOS)."""
        if self._terminated():
            return []
        acceptance = self._h.recognizer.filter_vocab(self.state, _CPU)
        return [int(i) for i in torch.nonzero(acceptance).flatten().tolist()]

    def mask(self) -> np.ndarray:
        return mask_of(self.allowed_ids, self._h.vocab_size, self._terminated())

    def accept(self, token_id: int) -> TokenOutcome:
        edge = reject_at_edge(
            token_id, self._h.vocab_size, self._h.token_bytes, self._state_id(), self._terminated()
        )
        if edge is not None:
            return edge
        data = self._h.token_bytes[token_id]
        if data is None and token_id != self._h.eos_id:
            return Rejected(token_id, data, self._state_id(), "a special id other than the recognizer's EOS")
        recognizer = self._h.recognizer
        if not recognizer.try_accept_token_id(token_id, self.state):
            return Rejected(token_id, data, self._state_id(), "try_accept_token_id returned False")
        self._states.append(recognizer._update_state_with_token_id(token_id, self.state))
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), token_id == self._h.eos_id)

    def is_accepting(self) -> bool:
        if self._terminated():
            return False
        eos = self._h.eos_id
        return bool(self._h.recognizer.filter_vocab(self.state, _CPU)[eos])

    def is_terminated(self) -> bool:
        return self._terminated()

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        if k:
            del self._ids[len(self._ids) - k :]
            del self._states[len(self._states) - k :]

    def fork(self) -> TransformersCFGMatcher:
        return TransformersCFGMatcher(self._h, list(self._states), list(self._ids))

    def __repr__(self) -> str:
        return f"TransformersCFGMatcher(num_accepted={len(self._ids)}, terminated={self._terminated()})"


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(
        backend: TransformersCFGBackend, matcher: TransformersCFGMatcher
    ) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
