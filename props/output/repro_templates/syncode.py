# @template-only begin
"""SynCode's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

# @template-only end
# -- SynCode, as props/backends/syncode.py drives it ---------------------------------------------------
import json
import os
import re  # noqa: F401 - for the @source definitions below
import tempfile
from collections.abc import Mapping, Sequence  # noqa: F401 - for the @source definitions below
from typing import Any

import syncode
import syncode.common

# torch and transformers are SynCode's own dependencies: taken from its modules, so that the script
# needs nothing beyond the syncode package
from syncode.common import AutoTokenizer
from syncode.grammar_mask.logits_processor import torch
from syncode.larkm.exceptions import LarkError
from syncode.larkm.lark import Lark  # noqa: F401
from syncode.mask_store.byte_tokenizer import ByteTokenizer

# @template-only begin
from props.backends.syncode import (  # noqa: F401
    _EVALUATED_ESCAPE,
    _terminal_value,
    byte_level_tokenizer_json,
    gpt2_byte_text,
    lark_choice,
    lark_regex,
)
from props.output.repro_templates.common import (
    OPTIONS,
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
)

# @template-only end
# @source props.backends.syncode:_EVALUATED_ESCAPE,_terminal_value,lark_regex,lark_choice,gpt2_byte_text,byte_level_tokenizer_json

syncode.common.SYNCODE_CACHE = tempfile.mkdtemp(prefix="syncode-") + "/"


def hf_tokenizer(vocab: VocabInfo) -> Any:
    """SynCode's tokenizer for the vocabulary file: :func:`byte_level_tokenizer_json` in a folder, loaded
    with transformers (the adapter gives a vocabulary loaded from a tokenizer.json that file itself;
    SynCode reads only the tokens, special ids and EOS, checked here as the adapter checks them)."""
    text = byte_level_tokenizer_json(vocab["token_bytes"], vocab["special_names"])
    if text is None:
        raise RuntimeError("two ids of the vocabulary file share a spelling: no byte-level tokenizer.json")
    folder = tempfile.mkdtemp(prefix="syncode-tokenizer-")
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text)
    eos = vocab["eos_ids"][0]
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        name = vocab["special_names"].get(eos) or f"<special_{eos}>"
        json.dump({"eos_token": name, "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    tok = AutoTokenizer.from_pretrained(folder)
    reader = ByteTokenizer(tok)
    for i, data in enumerate(vocab["token_bytes"]):
        if data is not None and reader.decode([i]) != data:
            raise RuntimeError(
                f"SynCode's ByteTokenizer reads id {i} as {reader.decode([i])!r}, not {data!r}"
            )
    return tok


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        if len(vocab["eos_ids"]) != 1:
            raise RuntimeError("SynCode knows one EOS id; the vocabulary file has several")
        self.tokenizer = hf_tokenizer(vocab)

    def compile(self, spec: dict[str, Any]) -> Any:
        kind, source = spec["kind"], spec["source"]
        text: str | None
        if kind == "json_schema":
            if source is not True and source != {}:
                raise Refusal("syncode has no JSON Schema front-end (Lark grammars only)")
            text = "json"
        elif kind == "choice":
            text = lark_choice(tuple(source))
        elif kind == "regex":
            text = lark_regex(source)
        else:
            raise Refusal("syncode has no GBNF front-end (Lark grammars only)")
        if text is None:
            raise Refusal(f"syncode: the {kind} has no Lark literal that reads back unchanged")
        return syncode.SyncodeLogitsProcessor(
            syncode.Grammar(text),
            self.tokenizer,
            use_cache=False,
            parse_output_only=False,
            mode=OPTIONS["mode"],
        )

    def is_refusal(self, exc: Exception) -> bool:
        if isinstance(exc, (Refusal, LarkError)):
            return True
        return any(
            c.__module__.startswith("interegular") and c.__name__ in ("Unsupported", "InvalidSyntax")
            for c in type(exc).__mro__
        )

    def matcher(self, processor: Any) -> Matcher:
        return Matcher(self.vocab, processor, [])


class Matcher(HistoryMatcher):
    """SynCode's state is the ids so far: rollback and fork only cut or copy them."""

    def __init__(self, vocab: VocabInfo, processor: Any, ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.processor = processor

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        input_ids = torch.tensor([self.ids], dtype=torch.long).reshape(1, len(self.ids))
        scores = torch.zeros((1, self.vocab["size"]), dtype=torch.float32)
        out = self.processor(input_ids, scores)
        return [i for i, finite in enumerate(torch.isfinite(out[0]).tolist()) if finite]

    def accept(self, t: int) -> bool:
        if not self.can_take(t) or t not in self.allowed_ids():
            return False
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.is_terminated() and self.vocab["eos_ids"][0] in self.allowed_ids()

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.processor, list(self.ids))

    def forced_bytes(self) -> bytes:
        raise NotImplementedError("SynCode has no jump-forward API")

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
