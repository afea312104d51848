"""The agent workload: tool calls over a vocabulary with special tokens (issue 29, docs/design.md §5).

Theory of operation
-------------------
An agent request's spec is the *composed* tool-call language an engine is sent: an xgrammar structural
tag (``token_triggered_tags``) of free tokens, then at most one call ``<|tool_call|>`` NAME
``<arg_value>`` ARGUMENTS ``<|/tool_call|>`` where ARGUMENTS is a JSON text of that tool's parameter
schema (:func:`tool_call_specs`). The checker replays every sequence against that composed language.

The engine does not compile it. It serves the request as agent stacks do, in two grammars switched
mid-generation (:class:`ToolSwitch`): a *head* grammar (free tokens, the trigger, one of the names, the
delimiter) and, once the delimiter completes the name, the chosen tool's *tail* grammar (its
arguments, then the end token). :class:`SwitchingMatcher` is that swap, behind the backend matcher
protocol, so forks, beams, speculative walks and rollbacks, preemption and replay all go through it: a
rollback past the switch drops the tail and rolls the head back. The composed language is, by
construction, the head's language with each name's tail appended; a clean run agreeing with the
reference on every mask is the check that the split is exact.

Jump-forward (``Request.jump_forward``): after a sampled token, the tokens that spell the grammar's
forced bytes (the longest string every completion starts with, across tag text and special tokens) are
appended without a model call, and streamed as they are appended — text is emitted only once it is
certain. The checker verifies each such token against the reference's own forced bytes.

``agent_vocabulary`` is the tool-call BPE (the special tokens of
:data:`props.corpus.features.TOOLCALL_SPECIAL_TOKENS`), ``agent_workload`` the schedule,
``ToolCallingModel`` an adversarial model that sometimes reaches for the trigger token.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from props.corpus.features import TOOLCALL_SPECIAL_TOKENS
from refdecoder import Accepted, Spec, StructuralTag, special_token_bytes, split_special_tokens
from refdecoder.sampler import SamplingParams

from ._models import AdversarialModel, NoisyDraft, _rng

__all__ = [
    "TRIGGER",
    "DELIMITER",
    "END",
    "AGENT_TOOLS",
    "ToolSwitch",
    "SwitchingMatcher",
    "ToolCallingModel",
    "tool_call_specs",
    "agent_vocabulary",
    "special_ids",
    "forced_token_ids",
    "lifted_bytes",
    "agent_draft",
    "agent_params",
]

#: The special tokens of the tool-call format: trigger, the delimiter that completes a name, the end.
TRIGGER, DELIMITER, END = "<|tool_call|>", "<arg_value>", "<|/tool_call|>"

#: Tools as ``(name, parameters schema)``: two names sharing a prefix (``get_``), a dotted name, enums,
#: an optional property, a nested array; small enough that each request compiles in well under a second.
AGENT_TOOLS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "get_weather",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 6},
                "unit": {"enum": ["c", "f"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
    (
        "get_time",
        {
            "type": "object",
            "properties": {"tz": {"enum": ["utc", "cet", "日本"]}},
            "required": ["tz"],
            "additionalProperties": False,
        },
    ),
    (
        "search.web",
        {
            "type": "object",
            "properties": {"q": {"type": "string", "maxLength": 5}, "k": {"type": "boolean"}},
            "required": ["q", "k"],
            "additionalProperties": False,
        },
    ),
)


def _token(name: str) -> dict[str, Any]:
    return {"type": "token", "token": name}


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1}


@dataclass(frozen=True)
class ToolSwitch:
    """How an engine serves a tool-call request in two grammars: ``head`` up to and including the
    ``delimiter`` token that completes a tool name after the ``trigger`` token; then ``tails[name]``
    (the arguments and the end token). Token ids are the vocabulary's."""

    head: Spec
    trigger: int
    delimiter: int
    tails: tuple[tuple[str, Spec], ...]

    def tail(self, name: str) -> Spec:
        for n, spec in self.tails:
            if n == name:
                return spec
        raise KeyError(f"no tool named {name!r} (tools: {[n for n, _ in self.tails]})")


def tool_call_specs(
    tools: Sequence[tuple[str, dict[str, Any]]], names: Mapping[str, int]
) -> tuple[StructuralTag, ToolSwitch]:
    """``(the composed structural tag, the engine's head/tail split of it)`` for ``tools`` over a
    vocabulary whose special tokens are ``names`` (name -> id)."""
    table = {n: names[n] for n in (TRIGGER, DELIMITER, END)}
    free = [DELIMITER, END]  # never in free text: only a call writes them
    composed = {
        "type": "structural_tag",
        "format": {
            "type": "token_triggered_tags",
            "trigger_tokens": [TRIGGER],
            "exclude_tokens": free,
            "stop_after_first": True,
            "tags": [
                {
                    "type": "tag",
                    "begin": _token(TRIGGER),
                    "content": {
                        "type": "sequence",
                        "elements": [{"type": "const_string", "value": n}, _token(DELIMITER), _arguments(s)],
                    },
                    "end": _token(END),
                }
                for n, s in tools
            ],
        },
    }
    text = {"type": "any_tokens", "exclude_tokens": [TRIGGER, *free]}
    head = {
        "type": "or",
        "elements": [
            text,
            {
                "type": "sequence",
                "elements": [
                    text,
                    _token(TRIGGER),
                    {"type": "or", "elements": [{"type": "const_string", "value": n} for n, _ in tools]},
                    _token(DELIMITER),
                ],
            },
        ],
    }
    tails = tuple(
        (n, StructuralTag({"type": "sequence", "elements": [_arguments(s), _token(END)]}, table))
        for n, s in tools
    )
    switch = ToolSwitch(StructuralTag(head, table), table[TRIGGER], table[DELIMITER], tails)
    return StructuralTag(composed, table), switch


def agent_vocabulary() -> Any:
    """The tool-call vocabulary: a byte-level BPE with the tool-call special tokens added (trained once,
    cached on disk; the vocabulary ``maskcert matrix`` certifies tool calls on)."""
    import tokenizers_matrix

    return tokenizers_matrix.train_bpe(special_tokens=TOOLCALL_SPECIAL_TOKENS, name="bpe-toolcall")


def special_ids(vocabulary: Any) -> dict[str, int]:
    """The vocabulary's special tokens, name -> id."""
    return {name: int(i) for i, name in vocabulary.special_names}


class SwitchingMatcher:
    """A backend matcher over a :class:`ToolSwitch`: the head's matcher until it accepts the delimiter,
    then the named tool's tail matcher (``make_tail(name)``). ``keep_tail_on_rollback`` is the
    ``switch_rollback_keeps_tail`` fault: a rollback past the switch keeps the arguments grammar."""

    def __init__(
        self,
        head: Any,
        switch: ToolSwitch,
        vocabulary: Any,
        make_tail: Callable[[str], Any],
        keep_tail_on_rollback: bool = False,
    ) -> None:
        self.head = head
        self.switch = switch
        self.vocabulary = vocabulary
        self.make_tail = make_tail
        self.keep_tail_on_rollback = keep_tail_on_rollback
        self.head_ids: list[int] = []  # tokens the head accepted
        self.tail: Any = None
        self.tool: str | None = None
        self.tail_count = 0  # tokens the tail accepted
        self.switches = 0

    @property
    def current(self) -> Any:
        return self.head if self.tail is None else self.tail

    @property
    def state(self) -> Any:
        return getattr(self.current, "state", None)

    def mask(self) -> np.ndarray:
        return np.asarray(self.current.mask(), dtype=np.int32)

    def accept(self, token_id: int) -> Any:
        if self.tail is not None:
            out = self.tail.accept(token_id)
            if isinstance(out, Accepted):
                self.tail_count += 1
            return out
        out = self.head.accept(token_id)
        if isinstance(out, Accepted):
            self.head_ids.append(int(token_id))
            if token_id == self.switch.delimiter:
                self._switch()
        return out

    def _switch(self) -> None:
        """The name is complete: the text between the last trigger and the delimiter names the tool."""
        start = max(i for i, t in enumerate(self.head_ids) if t == self.switch.trigger) + 1
        name = self.vocabulary.decode(self.head_ids[start:-1]).decode("utf-8", errors="replace")
        self.tool, self.tail, self.tail_count = name, self.make_tail(name), 0
        self.switches += 1

    def is_accepting(self) -> bool:
        return bool(self.current.is_accepting())

    def is_terminated(self) -> bool:
        return bool(self.current.is_terminated())

    def rollback(self, k: int) -> None:
        if k <= 0:
            return
        if self.tail is not None:
            if k <= self.tail_count:
                self.tail.rollback(k)
                self.tail_count -= k
                return
            k -= self.tail_count
            if not self.keep_tail_on_rollback:
                self.tail, self.tool, self.tail_count = None, None, 0
        self.head.rollback(k)
        del self.head_ids[len(self.head_ids) - k :]

    def fork(self) -> SwitchingMatcher:
        twin = SwitchingMatcher(
            self.head.fork(), self.switch, self.vocabulary, self.make_tail, self.keep_tail_on_rollback
        )
        twin.head_ids = list(self.head_ids)
        twin.tail = self.tail.fork() if self.tail is not None else None
        twin.tool, twin.tail_count, twin.switches = self.tool, self.tail_count, self.switches
        return twin

    def forced_bytes(self) -> bytes:
        """The current grammar's forced bytes (empty where its matcher does not offer them)."""
        probe = getattr(self.current, "forced_bytes", None)
        return bytes(probe()) if probe is not None else b""


def forced_token_ids(vocabulary: Any, forced: bytes) -> list[int]:
    """Tokens spelling a prefix of ``forced`` (a grammar's forced bytes, special tokens in their
    encoding): a special token where its encoding comes next, else the longest text token whose bytes
    are a prefix of the rest. Each such token is allowed in turn (every prefix of forced bytes is
    viable). Stops where no token fits, and before EOS."""
    out: list[int] = []
    for piece in split_special_tokens(forced) if 0xFF in forced else [forced]:
        if isinstance(piece, int):
            if piece in vocabulary.eos_ids or not vocabulary.is_special(piece):
                return out
            out.append(piece)
            continue
        pos = 0
        while pos < len(piece):
            fits = list(vocabulary.index.matches(piece, pos))  # shortest first
            if not fits:
                return out
            token_id, pos = fits[-1]
            out.append(token_id)
    return out


def lifted_bytes(vocabulary: Any, token_id: int) -> bytes:
    """The bytes a grammar that names special tokens reads for ``token_id``."""
    data = vocabulary.token_bytes[token_id]
    return special_token_bytes(token_id) if data is None else bytes(data)


class ToolCallingModel(AdversarialModel):
    """:class:`AdversarialModel` that reaches for the trigger token in ``call_rate`` of positions (so
    outputs do call tools), and for the other special tokens now and then."""

    name = "tool-calling"

    def __init__(self, vocabulary: Any, seed: int = 0, *, call_rate: float = 0.3, **kw: Any) -> None:
        kw.setdefault("eos_rate", 0.12)
        kw.setdefault("collapse_rate", 0.01)
        super().__init__(vocabulary, seed, **kw)
        ids = special_ids(vocabulary)
        self.trigger = ids[TRIGGER]
        self.specials = np.asarray(
            sorted(i for i in ids.values() if i not in vocabulary.eos_ids), dtype=np.int64
        )
        self.call_rate = call_rate

    def logits_for(self, context: Sequence[int]) -> np.ndarray:
        x = super().logits_for(context)
        if _rng(self.seed, context, b"call").random() < self.call_rate:
            x[self.trigger] += 9.0
        x[self.specials] += 1.0
        return x


def agent_draft(model: Any, seed: int = 1) -> NoisyDraft:
    """The agent workload's draft: grammar-guided, rarely straying, so its walks run on through the
    name, the delimiter and the arguments (and a rejection before the delimiter rolls back past the
    switch)."""
    return NoisyDraft(model, seed=seed, stray=0.05)


def agent_params(rng: random.Random) -> SamplingParams:
    return rng.choice(
        [
            SamplingParams(temperature=0.0),
            SamplingParams(temperature=1.0),
            SamplingParams(temperature=0.8, top_k=30),
        ]
    )
