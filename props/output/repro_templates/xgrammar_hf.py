# @template-only begin
"""xgrammar-hf's section of a reproducer script (see __init__.py): xgrammar's transformers
LogitsProcessor, called as model.generate calls it, on padded float32 logits."""

from __future__ import annotations

import json
from typing import Any

# @template-only end
# -- xgrammar's transformers LogitsProcessor, as props/backends/xgrammar_hf.py drives it --------------
import xgrammar as xgr
from xgrammar.contrib import hf as xgr_hf

# @template-only begin
from props.output.repro_templates.common import (
    OPTIONS,
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    gbnf_parts,
)

# @template-only end

# xgrammar.contrib.hf works on torch tensors and imports torch itself: use that module, so that this
# script imports nothing but xgrammar.
torch = xgr_hf.torch
PROMPT = [0, 0, 0]


def padded_width(size: int) -> int:
    pad = int(OPTIONS.get("pad_to", 64))
    return size if pad == 1 else (size // pad + 1) * pad


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        self.width = padded_width(vocab["size"])
        encoded = [b if b is not None else b"" for b in vocab["token_bytes"]]
        # The adapter reads a tokenizer.json through TokenizerInfo.from_huggingface where it has one;
        # this script has the vocabulary's bytes only, so it builds the same table from them.
        info = xgr.TokenizerInfo(
            encoded, xgr.VocabType.RAW, vocab_size=self.width, stop_token_ids=list(vocab["eos_ids"])
        )
        self.compiler = xgr.GrammarCompiler(
            info, max_threads=OPTIONS["max_threads"], cache_enabled=OPTIONS["cache_enabled"]
        )

    def compile(self, spec: dict[str, Any]) -> Any:
        kind, source = spec["kind"], spec["source"]
        if kind == "json_schema":
            kwargs: dict[str, Any] = {
                "any_whitespace": OPTIONS["any_whitespace"],
                "strict_mode": OPTIONS["strict_mode"],
            }
            if not OPTIONS["any_whitespace"]:
                kwargs["separators"] = (",", ":")
            if OPTIONS["max_whitespace_cnt"] is not None:
                kwargs["max_whitespace_cnt"] = OPTIONS["max_whitespace_cnt"]
            return self.compiler.compile_json_schema(json.dumps(source), **kwargs)
        if kind == "regex":
            return self.compiler.compile_regex(source)
        if kind == "gbnf":
            text, root = gbnf_parts(source)
            return self.compiler.compile_grammar(text, root_rule_name=root)
        if not source:
            raise Refusal("xgrammar: an empty choice list has no EBNF form")
        return self.compiler.compile_grammar(
            "root ::= " + " | ".join(json.dumps(o, ensure_ascii=False) for o in source)
        )

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, Refusal) or (isinstance(exc, RuntimeError) and "Check failed" not in str(exc))

    def matcher(self, compiled: Any) -> Matcher:
        return Matcher(self.vocab, compiled, self.width, [])


class Matcher(HistoryMatcher):
    """One generated sequence: a new processor is fed the prompt, then one more id per call."""

    def __init__(self, vocab: VocabInfo, compiled: Any, width: int, ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.compiled, self.width = compiled, width

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        proc: Any = xgr_hf.LogitsProcessor(self.compiled)
        scores = None
        for k in range(len(self.ids) + 1):
            scores = proc(torch.tensor([PROMPT + self.ids[:k]]), torch.zeros((1, self.width)))
        assert scores is not None
        finite = torch.nonzero(scores[0] > float("-inf")).flatten().tolist()
        # ids past the vocabulary (padding) left finite are reported too: they are not text tokens
        return [int(t) for t in finite]

    def accept(self, t: int) -> bool:
        if not self.can_take(t) or t not in self.allowed_ids():
            return False
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.is_terminated() and any(e in self.allowed_ids() for e in self.vocab["eos_ids"])

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.compiled, self.width, list(self.ids))

    def forced_bytes(self) -> bytes:
        return b""  # the processor offers no jump-forward

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
