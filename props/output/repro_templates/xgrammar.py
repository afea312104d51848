# @template-only begin
"""xgrammar's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

import json
from typing import Any

# @template-only end
# -- xgrammar, as props/backends/xgrammar.py drives it ------------------------------------------------
import xgrammar as xgr

# @template-only begin
from props.output.repro_templates.common import (
    OPTIONS,
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    bits_to_ids,
    gbnf_parts,
)

# @template-only end


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        encoded = [b if b is not None else b"" for b in vocab["token_bytes"]]
        info = xgr.TokenizerInfo(
            encoded, xgr.VocabType.RAW, vocab_size=len(encoded), stop_token_ids=list(vocab["eos_ids"])
        )
        self.compiler = xgr.GrammarCompiler(
            info, max_threads=OPTIONS["max_threads"], cache_enabled=OPTIONS["cache_enabled"]
        )

    def tag_compiler(self) -> xgr.GrammarCompiler:
        """Structural tags: a TokenizerInfo in which each named special token has its name as text,
        as TokenizerInfo.from_huggingface (vLLM, SGLang) builds it, so that a tag can name it."""
        vocab = self.vocab
        encoded = [
            b if b is not None else vocab["special_names"].get(i, "").encode("utf-8")
            for i, b in enumerate(vocab["token_bytes"])
        ]
        info = xgr.TokenizerInfo(
            encoded, xgr.VocabType.RAW, vocab_size=len(encoded), stop_token_ids=list(vocab["eos_ids"])
        )
        return xgr.GrammarCompiler(
            info, max_threads=OPTIONS["max_threads"], cache_enabled=OPTIONS["cache_enabled"]
        )

    def compile(self, spec: dict[str, Any]) -> xgr.CompiledGrammar:
        kind, source = spec["kind"], spec["source"]
        if kind == "structural_tag":
            tag = source["tag"]
            if tag.get("type") != "structural_tag":
                tag = {"type": "structural_tag", "format": tag}
            return self.tag_compiler().compile_structural_tag(json.dumps(tag))
        if kind == "lark":
            raise Refusal(
                "xgrammar adapter: Lark grammars (llguidance's dialect) are not an xgrammar spec kind"
            )
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
        # converter/parser errors are RuntimeErrors; "Check failed" is a C++ assertion (a bug), except
        # the invalid-tag and invalid-JSON errors compile_structural_tag raises as one (0.2.9)
        text = str(exc)
        tag_error = "Invalid structural tag error" in text or "Invalid JSON error" in text
        return isinstance(exc, Refusal) or (
            isinstance(exc, RuntimeError) and ("Check failed" not in text or tag_error)
        )

    def matcher(self, compiled: xgr.CompiledGrammar) -> Matcher:
        return Matcher(self.vocab, compiled, native_matcher(compiled), [])


def native_matcher(compiled: xgr.CompiledGrammar) -> xgr.GrammarMatcher:
    import inspect

    # releases before 0.1.2x keep no rollback history unless asked (max_rollback_tokens defaults to 0)
    param = inspect.signature(xgr.GrammarMatcher.__init__).parameters.get("max_rollback_tokens")
    if param is not None and param.default == 0:
        return xgr.GrammarMatcher(compiled, max_rollback_tokens=1 << 20)
    return xgr.GrammarMatcher(compiled)


class Matcher(HistoryMatcher):
    def __init__(
        self, vocab: VocabInfo, compiled: xgr.CompiledGrammar, native: xgr.GrammarMatcher, ids: list[int]
    ) -> None:
        super().__init__(vocab, ids)
        self.compiled, self.native = compiled, native

    def is_terminated(self) -> bool:
        return bool(self.native.is_terminated())

    def allowed_ids(self) -> list[int]:
        if self.native.is_terminated():
            return []
        bitmask = xgr.allocate_token_bitmask(1, self.vocab["size"])
        bitmask.zero_()
        self.native.fill_next_token_bitmask(bitmask)
        return bits_to_ids(bitmask[0].tolist(), self.vocab["size"])

    def accept(self, t: int) -> bool:
        if not self.can_take(t):
            return False
        ok = bool(self.native.accept_token(t))
        if ok:
            self.ids.append(t)
        return ok

    def is_accepting(self) -> bool:
        if self.native.is_terminated():
            return False
        if hasattr(self.native, "is_completed"):
            return bool(self.native.is_completed())
        return any(t in self.vocab["eos_ids"] for t in self.allowed_ids())  # releases without is_completed

    def undo(self, k: int) -> None:
        self.native.rollback(k)

    def fork(self) -> Matcher:
        fork = getattr(self.native, "fork", None)
        if fork is not None:
            return Matcher(self.vocab, self.compiled, fork(), list(self.ids))
        native = native_matcher(self.compiled)
        for t in self.ids:
            native.accept_token(t)
        return Matcher(self.vocab, self.compiled, native, list(self.ids))

    def forced_bytes(self) -> bytes:
        if self.native.is_terminated():
            return b""
        return str(self.native.find_jump_forward_string()).encode("utf-8")

    def validate(self, ids: list[int]) -> int:
        n = 0
        for t in ids:
            if not self.can_take(t) or not self.native.accept_token(t):
                break
            n += 1
        if n:
            self.native.rollback(n)
        return n


# @template-only begin
def _conforms(vocab: VocabInfo) -> EngineLike:
    return Engine(vocab)


# @template-only end
