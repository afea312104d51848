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
from outlines_core.json_schema import build_regex_from_schema

# @template-only begin
from props.backends.outlines_core import _escape
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
# @source props.backends.outlines_core:_META,_escape


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        table: dict[bytes, list[int]] = {}
        for i, data in enumerate(vocab["token_bytes"]):
            if data is not None:
                table.setdefault(data, []).append(i)
        self.eos_id = min(vocab["eos_ids"])  # outlines-core has one EOS id
        self.oc_vocab = oc.Vocabulary(self.eos_id, table)

    def regex(self, spec: dict[str, Any]) -> str:
        kind, source = spec["kind"], spec["source"]
        if kind == "regex":
            return source
        if kind == "choice":
            if not source:
                raise Refusal("outlines-core: an empty choice list has no regex form")
            return "|".join(_escape(o) for o in source)
        if kind == "json_schema":
            return str(
                build_regex_from_schema(
                    json.dumps(source),
                    whitespace_pattern=OPTIONS["whitespace_pattern"],
                    max_recursion_depth=OPTIONS["max_recursion_depth"],
                )
            )
        raise Refusal("outlines-core compiles regular expressions only; GBNF is a context-free grammar")

    def compile(self, spec: dict[str, Any]) -> oc.Index:
        regex = self.regex(spec)
        print(f"outlines-core regex: {regex[:300]!r}")
        return oc.Index(regex, self.oc_vocab)

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, (Refusal, ValueError))

    def matcher(self, index: oc.Index) -> Matcher:
        return Matcher(self, index, oc.Guide(index, max_rollback=OPTIONS["max_rollback"]), [], False)


class Matcher(HistoryMatcher):
    """EOS has no Index transition: accepting it ends the matcher (``terminated``), as the adapter."""

    def __init__(
        self, engine: Engine, index: oc.Index, guide: oc.Guide, ids: list[int], terminated: bool
    ) -> None:
        super().__init__(engine.vocab, ids)
        self.engine, self.index, self.guide, self.terminated = engine, index, guide, terminated

    def raw_allowed(self) -> list[int]:
        size = self.vocab["size"]
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
        self.guide.advance(t, return_tokens=False)
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.terminated and bool(self.guide.is_finished())

    def is_terminated(self) -> bool:
        return self.terminated

    def replay(self, ids: list[int]) -> oc.Guide:
        guide = oc.Guide(self.index, max_rollback=OPTIONS["max_rollback"])
        for t in ids:
            guide.advance(t, return_tokens=False)
        return guide

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self.ids) + int(self.terminated))
        if k and self.terminated:
            self.terminated = False
            k -= 1
        if k == 0:
            return
        if k <= self.guide.get_allowed_rollback():
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
