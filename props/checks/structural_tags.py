"""The reference's structural tags against the independent checker (issue 29).

For one structural tag (a record of the tool-call snapshot, :mod:`props.corpus.toolcalls`): compile it
with the reference (``refdecoder.StructuralTag``), generate valid and targeted invalid outputs
(:mod:`props.corpus.toolcall_texts`), and compare the reference's verdict on each output — its text as
UTF-8 and each special token as ``refdecoder.special_token_bytes(id)`` — with the checker's
(:mod:`props.corpus.structural_tag_check`). Texts the checker cannot decide are counted, not compared.
The checker reads ``json_schema`` formats as ``reading`` says: ``"xgrammar"`` (strict mode, asserted
formats: the defaults xgrammar documents, and the reading the reference takes) or ``"documented"``
(plain JSON Schema 2020-12), where the two differ by exactly the named divergences of the tests.

:func:`agreement` returns one :class:`Agreement` per tag; ``tests/test_structural_tag_agreement.py`` and
``ci/toolcall_agreement.py`` read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import refdecoder
from props.corpus.structural_tag_check import Part, Reading, Undecided, verdict
from props.corpus.toolcall_texts import ToolCallText, tool_call_texts

__all__ = ["Agreement", "Disagreement", "agreement", "output_bytes", "reference_status"]


@dataclass(frozen=True)
class Disagreement:
    """One output the reference and the checker judge differently."""

    parts: tuple[Part, ...]
    intent: str
    checker: bool
    reference: bool

    def describe(self) -> str:
        return (
            f"{self.intent}: {list(self.parts)!r}\n"
            f"  checker:   {'accepts' if self.checker else 'rejects'}\n"
            f"  reference: {'accepts' if self.reference else 'rejects'}"
        )


@dataclass(frozen=True)
class Agreement:
    """``status`` is ``"compiled"`` or the reference's refusal (``"refused: keyword: reason"``,
    ``"invalid: what"``); ``reading`` the checker's reading of ``json_schema``; ``texts`` the generated outputs, ``undecided`` how many of them the checker
    could not judge, ``disagreements`` the rest judged differently."""

    status: str
    reading: Reading
    texts: int
    undecided: int
    disagreements: tuple[Disagreement, ...]


def output_bytes(parts: Sequence[Part]) -> bytes:
    """The bytes the reference reads for an output: text as UTF-8, special tokens encoded."""
    return b"".join(
        p.encode("utf-8") if isinstance(p, str) else refdecoder.special_token_bytes(p) for p in parts
    )


def reference_status(
    tag: Mapping[str, Any], special_tokens: Mapping[str, int]
) -> tuple[refdecoder.Grammar | None, str]:
    """The compiled reference grammar and ``"compiled"``, or None and the refusal as a baseline records
    it (the reason's first line, without the JSON pointer's instance details)."""
    spec = refdecoder.StructuralTag(dict(tag), tuple(special_tokens.items()))
    try:
        return refdecoder.compile(spec), "compiled"
    except refdecoder.Unsupported as e:
        return None, f"refused: {e.keyword}: {e.reason}"
    except refdecoder.LimitExceeded as e:
        return None, f"refused: limit {e.limit}"
    except refdecoder.SpecError as e:
        return None, f"invalid: {e.what} at {e.where}"


def agreement(
    tag: Mapping[str, Any],
    special_tokens: Mapping[str, int],
    tool_names: Sequence[str] = (),
    texts: Sequence[ToolCallText] | None = None,
    reading: Reading = "xgrammar",
) -> Agreement:
    """The reference and the checker (reading ``json_schema`` as ``reading`` says) on the generated
    outputs of ``tag`` (or on ``texts``)."""
    if texts is None:
        texts = tool_call_texts(tag, special_tokens, tool_names)
    # the generator labels texts under the documented reading; any other is judged again
    expected = [
        t.expected if reading == "documented" else verdict(tag, t.parts, special_tokens, reading)
        for t in texts
    ]
    grammar, status = reference_status(tag, special_tokens)
    undecided = sum(1 for e in expected if isinstance(e, Undecided))
    if grammar is None:
        return Agreement(status, reading, len(texts), undecided, ())
    out = []
    for t, e in zip(texts, expected, strict=True):
        if isinstance(e, Undecided):
            continue
        got = grammar.accepts(output_bytes(t.parts))
        if got != e:
            out.append(Disagreement(t.parts, t.intent, e, got))
    return Agreement(status, reading, len(texts), undecided, tuple(out))
