# @template-only begin
"""formatron's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

# @template-only end
# -- formatron (kbnf), as props/backends/formatron.py drives it ---------------------------------------
import copy
import re

# @template-only begin
from typing import Any

# @template-only end
import formatron.formatter
from formatron.formatter import FormatterBuilder
from formatron.schemas import json_schema as formatron_json_schema

# @template-only begin
from props.backends.formatron import (
    _ASSERTION_REFUSALS,
    _FINISHED,
    _REJECTED,
    SCHEMA_DIALECT,
    SCHEMA_ID,
)
from props.output.repro_templates.common import (
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
)

# @template-only end
# @source props.backends.formatron:SCHEMA_ID,SCHEMA_DIALECT,_REJECTED,_FINISHED,_ASSERTION_REFUSALS

#: formatron's engine, the kbnf module formatron/formatter.py imports (pip install formatron brings it)
kbnf: Any = formatron.formatter.kbnf


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        table = vocab["token_bytes"]
        tokens = {i: kbnf.Token(b) for i, b in enumerate(table) if b is not None}
        strings = {i: b.decode("utf-8", errors="replace") for i, b in enumerate(table) if b is not None}
        self.kvocab = kbnf.Vocabulary(tokens, strings)  # special ids are left out: never allowed

    def compile(self, spec: dict[str, Any]) -> Any:
        """The pristine ``kbnf.Engine`` of formatron's grammar for ``spec``."""
        kind, source = spec["kind"], spec["source"]
        builder = FormatterBuilder()
        extractor: Any
        if kind == "json_schema":
            if not isinstance(source, dict):
                raise Refusal("formatron: create_schema takes a JSON Schema object, not a boolean schema")
            schema = {"$id": SCHEMA_ID, **source, "$schema": SCHEMA_DIALECT}  # read as 2020-12
            extractor = builder.json(formatron_json_schema.create_schema(schema))
        elif kind == "regex":
            extractor = builder.regex(source)
        elif kind == "choice":
            if not source:
                raise Refusal("formatron: an empty choice list has no grammar form")
            extractor = builder.choose(*source)
        else:
            raise Refusal("formatron grammars are KBNF, not GBNF")
        builder.append_str(f"{extractor}")  # the extractor alone, nothing after it
        grammar = builder.build(self.kvocab, lambda ids: "").grammar_str
        print(f"KBNF grammar ({len(grammar)} characters):\n{grammar[:3000]}")
        return kbnf.Engine(grammar, self.kvocab, kbnf.Config())

    def is_refusal(self, exc: Exception) -> bool:
        if isinstance(exc, (Refusal, ValueError, re.error)):
            return True
        for cls in type(exc).__mro__:
            if (
                cls.__module__.startswith("jsonschema") and cls.__name__ in ("ValidationError", "SchemaError")
            ) or (
                cls.__module__.startswith("referencing")
                and cls.__name__ in ("Unresolvable", "NoSuchResource")
            ):
                return True
        if isinstance(exc, TypeError):
            return "is not supported in json_generators" in str(
                exc
            ) or "Unsupported type in json schema" in str(exc)
        return isinstance(exc, AssertionError) and any(p in str(exc) for p in _ASSERTION_REFUSALS)

    def matcher(self, pristine: Any) -> Matcher:
        return Matcher(self.vocab, pristine, copy.copy(pristine), [])


class Matcher(HistoryMatcher):
    """A kbnf engine: EOS only once it has finished ("KBNF ends eagerly"; formatron's processor then
    allows EOS alone); no rollback in kbnf, so a rollback replays the ids on a copy of the pristine one."""

    def __init__(self, vocab: VocabInfo, pristine: Any, engine: Any, ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.pristine, self.engine = pristine, engine

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        if self.engine.is_finished():
            return list(self.vocab["eos_ids"])
        self.engine.compute_allowed_token_ids()
        return sorted(self.engine.get_allowed_token_ids_from_last_computation())

    def accept(self, t: int) -> bool:
        if not self.can_take(t):
            return False
        if t in self.vocab["eos_ids"]:
            if not self.engine.is_finished():
                return False
        elif self.vocab["token_bytes"][t] is None:
            return False
        else:
            try:
                self.engine.try_accept_new_token(t)
            except ValueError as e:
                if _REJECTED in str(e) or _FINISHED in str(e):
                    return False
                raise
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.is_terminated() and bool(self.engine.is_finished())

    def undo(self, k: int) -> None:
        engine = copy.copy(self.pristine)
        for t in self.ids[: len(self.ids) - k]:
            if t not in self.vocab["eos_ids"]:
                engine.try_accept_new_token(t)  # raises if the replay diverges
        self.engine = engine

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.pristine, copy.copy(self.engine), list(self.ids))

    def forced_bytes(self) -> bytes:
        raise NotImplementedError("kbnf has no jump-forward API")

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
