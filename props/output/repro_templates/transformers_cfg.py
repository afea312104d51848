# @template-only begin
"""transformers-CFG's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

# @template-only end
# -- transformers-CFG, as props/backends/transformers_cfg.py drives it ---------------------------------
import logging  # noqa: F401 - for the @source definitions below (as the next three imports)

# @template-only begin
from typing import Any

# @template-only end
from transformers_cfg.grammar_utils import IncrementalGrammarConstraint
from transformers_cfg.parser import parse_ebnf  # noqa: F401
from transformers_cfg.tokenization.byte_trie import ByteTrie  # noqa: F401
from transformers_cfg.tokenization.middle.TokenizerMiddleMapping import TokenizerMiddleMapping  # noqa: F401

# @template-only begin
from props.backends.transformers_cfg import RawMapping, gbnf_literal, parse, raw_trie
from props.output.repro_templates.common import (
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    gbnf_parts,
)

# @template-only end
# @source props.backends.transformers_cfg:gbnf_literal,_ParseErrors,parse,RawMapping,raw_trie


class RawTokens:
    """What the recognizer and RawMapping read of a tokenizer (as the adapter's _RawTokens), from the
    vocabulary file."""

    def __init__(self, vocab: VocabInfo) -> None:
        self.eos_token_id: int = min(vocab["eos_ids"])
        self.bos_token_id: int | None = None
        self.all_special_ids: list[int] = list(vocab["special_ids"])
        self.token_bytes: tuple[bytes | None, ...] = tuple(vocab["token_bytes"])

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes[int(i)] or b"" for i in ids).decode("utf-8", errors="replace")


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        self.tokens = RawTokens(vocab)
        self.mapping = RawMapping(self.tokens)  # token id -> bytes (b"" for special ids)
        self.trie = raw_trie(self.tokens)  # as ByteTrie.from_tokenizer builds it

    def compile(self, spec: dict[str, Any]) -> Any:
        kind, source = spec["kind"], spec["source"]
        if kind == "choice":
            if not source:
                raise Refusal("transformers-cfg: an empty choice list has no grammar form")
            text, root = "root ::= " + " | ".join(gbnf_literal(o) for o in source) + "\n", "root"
        elif kind == "gbnf":
            text, root = gbnf_parts(source)
        else:
            raise Refusal(f"transformers-cfg has no {kind} front end")
        parsed, error = parse(text)
        if root not in parsed.symbol_table:
            raise Refusal(f"transformers-cfg: parse_ebnf: {error or 'no rule ' + repr(root)}")
        return IncrementalGrammarConstraint(
            text, root, self.tokens, trie=self.trie, homomorphism=self.mapping
        )

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, Refusal)

    def matcher(self, recognizer: Any) -> Matcher:
        return Matcher(self.vocab, recognizer, [recognizer.string_recognizer.get_initial_parsing_state()], [])


class Matcher(HistoryMatcher):
    """The recognizer's AcceptState after each accepted id (states are values)."""

    def __init__(self, vocab: VocabInfo, recognizer: Any, states: list[Any], ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.recognizer, self.states = recognizer, states

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        acceptance = self.recognizer.filter_vocab(self.states[-1], None).tolist()
        return [i for i, ok in enumerate(acceptance) if ok]

    def accept(self, t: int) -> bool:
        if not self.can_take(t):
            return False
        if self.vocab["token_bytes"][t] is None and t != self.recognizer.eos_token_id:
            return False
        if not self.recognizer.try_accept_token_id(t, self.states[-1]):
            return False
        self.states.append(self.recognizer._update_state_with_token_id(t, self.states[-1]))
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        if self.is_terminated():
            return False
        return bool(self.recognizer.filter_vocab(self.states[-1], None)[self.recognizer.eos_token_id])

    def undo(self, k: int) -> None:
        del self.states[len(self.states) - k :]

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.recognizer, list(self.states), list(self.ids))

    def forced_bytes(self) -> bytes:
        raise NotImplementedError("transformers-cfg has no jump-forward API")

    def validate(self, ids: list[int]) -> int:
        probe, n = self.fork(), 0
        for t in ids:
            if not probe.accept(t):
                break
            n += 1
        return n


# @template-only begin
def _conforms(vocab: VocabInfo) -> EngineLike:
    return Engine(vocab)


# @template-only end
