# @template-only begin
"""outlines-core's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

# @template-only end
# -- outlines-core, as props/backends/outlines_core.py drives it --------------------------------------
import ctypes

# @template-only begin
import json
from typing import Any

# @template-only end
import outlines_core as oc

try:
    from outlines_core.json_schema import build_regex_from_schema
except ImportError:  # 0.1.x
    from outlines_core.fsm.json_schema import build_regex_from_schema

# @template-only begin
from props.backends.outlines_core import _escape, _escape_python, _FsmGuide, _FsmIndex
from props.output.repro_templates.common import (
    OPTIONS,
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    bits_to_ids,
    check_rollback,
)

# @template-only end
# @source props.backends.outlines_core:_META,_escape,_escape_python,_FsmIndex,_FsmGuide

#: outlines-core 0.2 has Index and Guide; 0.1.x builds its index from a tokenizer object (fsm.guide)
HAS_INDEX = callable(getattr(oc, "Index", None)) and getattr(oc, "Guide", None) is not None


class FsmTokenizer:
    """What 0.1.x's reduced_vocabulary reads: vocabulary keyed by raw bytes (its byte path)."""

    def __init__(self, vocab: VocabInfo) -> None:
        self.eos_token_id = min(vocab["eos_ids"])
        self.eos_token = "</s>"
        self.special_tokens: set[Any] = set()
        self.vocabulary: dict[bytes, int] = {}
        for i, data in enumerate(vocab["token_bytes"]):
            if data:
                self.vocabulary.setdefault(data, i)

    def convert_token_to_string(self, token: bytes) -> str:
        return token.decode("utf-8", errors="replace")


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        table: dict[bytes, list[int]] = {}
        for i, data in enumerate(vocab["token_bytes"]):
            if data is not None:
                table.setdefault(data, []).append(i)
        self.eos_id = min(vocab["eos_ids"])  # outlines-core has one EOS id
        self.oc_vocab: Any = oc.Vocabulary(self.eos_id, table) if HAS_INDEX else FsmTokenizer(vocab)

    def regex(self, spec: dict[str, Any]) -> str:
        kind, source = spec["kind"], spec["source"]
        if kind == "regex":
            return source
        if kind == "choice":
            if not source:
                raise Refusal("outlines-core: an empty choice list has no regex form")
            return "|".join((_escape if HAS_INDEX else _escape_python)(o) for o in source)
        if kind == "json_schema":
            depth: dict[str, Any] = {}
            if "max_recursion_depth" in str(getattr(build_regex_from_schema, "__text_signature__", "")):
                depth["max_recursion_depth"] = OPTIONS["max_recursion_depth"]  # releases that have it
            return str(
                build_regex_from_schema(
                    json.dumps(source), whitespace_pattern=OPTIONS["whitespace_pattern"], **depth
                )
            )
        raise Refusal("outlines-core compiles regular expressions only; GBNF is a context-free grammar")

    def compile(self, spec: dict[str, Any]) -> Any:
        regex = self.regex(spec)
        print(f"outlines-core regex: {regex[:300]!r}")
        return oc.Index(regex, self.oc_vocab) if HAS_INDEX else _FsmIndex(regex, self.oc_vocab)

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, (Refusal, ValueError))

    def matcher(self, index: Any) -> Matcher:
        return Matcher(self, index, new_guide(index), [], False)


def has_rollback() -> bool:
    """Guide(max_rollback=...), rollback_state and get_allowed_rollback exist (0.2.1x)."""
    return (
        HAS_INDEX
        and "max_rollback" in str(getattr(oc.Guide, "__text_signature__", ""))
        and hasattr(oc.Guide, "rollback_state")
    )


def new_guide(index: Any) -> Any:
    if not HAS_INDEX:
        return _FsmGuide(index)
    return oc.Guide(index, max_rollback=OPTIONS["max_rollback"]) if has_rollback() else oc.Guide(index)


def advance(guide: Any, t: int) -> None:
    if HAS_INDEX and "return_tokens" in str(getattr(oc.Guide.advance, "__text_signature__", "")):
        guide.advance(t, return_tokens=False)
    else:
        guide.advance(t)


class Matcher(HistoryMatcher):
    """EOS has no Index transition: accepting it ends the matcher (``terminated``), as the adapter."""

    def __init__(self, engine: Engine, index: Any, guide: Any, ids: list[int], terminated: bool) -> None:
        super().__init__(engine.vocab, ids)
        self.engine, self.index, self.guide, self.terminated = engine, index, guide, terminated

    def raw_allowed(self) -> list[int]:
        size = self.vocab["size"]
        if not hasattr(self.guide, "write_mask_into"):  # releases before 0.2.1x
            return sorted(t for t in self.guide.get_tokens() if t < size)
        n = (size + 31) // 32
        buf = (ctypes.c_int32 * n)()
        self.guide.write_mask_into(ctypes.addressof(buf), n, 4)
        return bits_to_ids(list(buf), size)

    def allowed_ids(self) -> list[int]:
        return [] if self.terminated else self.raw_allowed()

    def accept(self, t: int) -> bool:
        if not self.can_take(t):
            return False
        if t == self.engine.eos_id:  # the caller stops (as the adapter)
            if t not in self.raw_allowed():
                return False
            self.terminated = True
            return True
        if self.index.get_next_state(self.guide.get_state(), t) is None:
            return False
        advance(self.guide, t)
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.terminated and bool(self.guide.is_finished())

    def is_terminated(self) -> bool:
        return self.terminated

    def replay(self, ids: list[int]) -> Any:
        guide = new_guide(self.index)
        for t in ids:
            advance(guide, t)
        return guide

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self.ids) + int(self.terminated))
        if k and self.terminated:
            self.terminated = False
            k -= 1
        if k == 0:
            return
        if has_rollback() and k <= self.guide.get_allowed_rollback():
            self.guide.rollback_state(k)
            del self.ids[len(self.ids) - k :]
        else:
            del self.ids[len(self.ids) - k :]
            self.guide = self.replay(self.ids)

    def fork(self) -> Matcher:
        return Matcher(self.engine, self.index, self.replay(self.ids), list(self.ids), self.terminated)

    def forced_bytes(self) -> bytes:
        raise NotImplementedError("outlines-core has no jump-forward API")

    def validate(self, ids: list[int]) -> int:
        state, n = self.guide.get_state(), 0
        for t in ids:
            if t == self.engine.eos_id:
                break
            state = self.index.get_next_state(state, t)
            if state is None:
                break
            n += 1
        return n


# @template-only begin
def _conforms(vocab: VocabInfo) -> EngineLike:
    return Engine(vocab)


# @template-only end
