# @template-only begin
"""llguidance's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

import json
from typing import Any

# @template-only end
# -- llguidance, as props/backends/llguidance.py drives it --------------------------------------------
import llguidance as llg

# @template-only begin
from llguidance._lib import JsonCompileOptions

from props.output.repro_templates.common import (
    OPTIONS,
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    bits_to_ids,
    encode,
    gbnf_parts,
)

# @template-only end


class ByteTokenizer:
    """What llguidance.TokenizerWrapper expects: special ids as b"\\xff" + name; encode() is the
    fewest-token segmentation (the adapter uses the vocabulary's own encode)."""

    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        self.eos_token_id = vocab["eos_ids"][0]
        self.bos_token_id = None
        self.tokens: list[bytes] = []
        for i, data in enumerate(vocab["token_bytes"]):
            if data is None:
                data = b"\xff" + vocab["special_names"].get(i, f"<special_{i}>").encode("utf-8")
            self.tokens.append(data)
        self.special_token_ids = list(vocab["special_ids"])

    def __call__(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError("this tokenizer takes str")
        return encode(self.vocab, text.encode("utf-8"))


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        wrapper = llg.TokenizerWrapper(ByteTokenizer(vocab))
        try:
            self.tokenizer = llg.LLTokenizer(wrapper, eos_token=list(vocab["eos_ids"]))
        except TypeError:  # releases before 1.x take one EOS id
            self.tokenizer = llg.LLTokenizer(wrapper, eos_token=vocab["eos_ids"][0])
        self.limits = llg.LLParserLimits(**OPTIONS["limits"]) if OPTIONS["limits"] else None
        # json_allow_general_unicode_escapes exists from 1.3; without it llguidance's default applies
        self.general_escapes = bool(OPTIONS["general_unicode_escapes"]) and self._valid(
            llg.LLMatcher.grammar_from_json_schema(
                '{"type": "string"}', overrides={"json_allow_general_unicode_escapes": True}
            )
        )

    def _valid(self, grammar: str) -> bool:
        try:
            return not llg.LLMatcher(self.tokenizer, grammar, log_level=0).is_error()
        except ValueError:  # the oldest releases raise for an invalid grammar
            return False

    def grammar(self, spec: dict[str, Any]) -> str:
        kind, source = spec["kind"], spec["source"]
        if kind == "json_schema":
            if source is False:
                return str(llg.LLMatcher.grammar_from_json_schema("false"))
            schema = {} if source is True else source
            overrides: JsonCompileOptions = {"whitespace_flexible": OPTIONS["whitespace_flexible"]}
            if self.general_escapes:
                overrides["json_allow_general_unicode_escapes"] = True
            return str(llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides))
        if kind == "regex":
            return str(llg.LLMatcher.grammar_from_regex(source))
        if kind == "lark":  # <|name|> resolves to the special token b"\xff" + name of the tokenizer
            return str(llg.LLMatcher.grammar_from_lark(source["text"]))
        if kind == "structural_tag":
            raise Refusal("llguidance adapter: xgrammar structural tags are not an llguidance spec kind")
        if kind == "choice":
            if not source:
                raise Refusal("llguidance: an empty choice list has no grammar form")
            try:
                return str(llg.grammar_from("choice", json.dumps(list(source))))
            except ValueError:  # releases without the "choice" format: the same Lark alternatives
                alternatives = " | ".join(json.dumps(o, ensure_ascii=False) for o in source)
                return str(llg.LLMatcher.grammar_from_lark(f"start: {alternatives}"))
        text, root = gbnf_parts(source)
        if root != "root":
            import re

            if re.search(r"(?m)^\s*root\s*::=", text):
                raise Refusal("llguidance: GBNF start rule must be 'root', and 'root' names another rule")
            text = f"root ::= {root}\n{text}"
        try:
            return str(llg.grammar_from("gbnf", text))
        except ValueError as e:
            raise Refusal(f"llguidance: {e}") from e

    def compile(self, spec: dict[str, Any]) -> str:
        grammar = self.grammar(spec)
        if hasattr(llg.LLMatcher, "validate_grammar_with_warnings"):
            kwargs = {"limits": self.limits} if self.limits is not None else {}
            is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(
                grammar, self.tokenizer, **kwargs
            )
            error = (messages[0] if messages else "grammar error") if is_error else ""
        elif hasattr(llg.LLMatcher, "validate_grammar"):
            error = str(llg.LLMatcher.validate_grammar(grammar, self.tokenizer))
        else:
            error = "" if self._valid(grammar) else "grammar error"
        if error:
            raise Refusal("llguidance: " + error)
        return grammar

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, Refusal)

    def matcher(self, grammar: str) -> Matcher:
        kwargs = {"limits": self.limits} if self.limits is not None else {}
        native = llg.LLMatcher(self.tokenizer, grammar, log_level=OPTIONS["log_level"], **kwargs)
        if native.is_error():
            raise RuntimeError(f"llguidance LLMatcher(): {native.get_error()}")
        return Matcher(self.vocab, native, [])


class Matcher(HistoryMatcher):
    def __init__(self, vocab: VocabInfo, native: llg.LLMatcher, ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.native = native

    def check(self, operation: str) -> None:
        if self.native.is_error():
            raise RuntimeError(f"llguidance {operation}: {self.native.get_error()}")

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        raw = bytes(self.native.compute_bitmask())
        self.check("compute_bitmask")
        words = [int.from_bytes(raw[i : i + 4], "little") for i in range(0, len(raw) - len(raw) % 4, 4)]
        return bits_to_ids(words, self.vocab["size"])

    def accept(self, t: int) -> bool:
        # consume_token's verdict without entering llguidance's sticky error state (as the adapter)
        if not self.can_take(t):
            return False
        n = 0 if self.native.is_stopped() else self.native.validate_tokens([t])
        self.check("validate_tokens")
        if n >= 1:
            if not self.native.consume_token(t):
                raise RuntimeError(f"llguidance consume_token refused a token validate_tokens accepted: {t}")
        else:
            probe = self.native.deep_copy()
            if not probe.consume_token(t):
                return False
            self.native = probe
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.is_terminated() and bool(self.native.is_accepting())

    def undo(self, k: int) -> None:
        if self.native.rollback(k) is False or self.native.is_error():  # None before 0.7.2x
            raise RuntimeError(f"llguidance rollback: {self.native.get_error()}")

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.native.deep_copy(), list(self.ids))

    def forced_bytes(self) -> bytes:
        if self.is_terminated():
            return b""
        import re

        out = bytes(self.native.compute_ff_bytes())
        self.check("compute_ff_bytes")
        # a forced special token comes as b"\xff[id]"; the finding writes it b"\xff" id b"\xfe"
        return re.sub(rb"\xff\[([0-9]+)\]", lambda m: b"\xff" + m.group(1) + b"\xfe", out)

    def validate(self, ids: list[int]) -> int:
        if self.is_terminated():
            return 0
        n = int(self.native.validate_tokens(list(ids)))
        self.check("validate_tokens")
        return n


# @template-only begin
def _conforms(vocab: VocabInfo) -> EngineLike:
    return Engine(vocab)


# @template-only end
