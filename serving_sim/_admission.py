"""Admission control: checks a request must pass before it is queued (docs/design.md §5).

Cheap structural checks first (sizes, nesting depth, option counts, batch rows, option combinations);
the compile-time budget is enforced by the compile cache (``compile_with_budget``), and a
``finish_within_max_tokens`` request's token budget by the reference (``_budget.BudgetCache.problem``:
the spec's shortest output must fit ``max_tokens``). A refused request never takes a batch slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refdecoder import Choice, Gbnf, JsonSchema, Regex, Spec

from ._request import Request

__all__ = ["AdmissionLimits", "spec_depth", "admission_problem"]


@dataclass(frozen=True)
class AdmissionLimits:
    max_spec_bytes: int = 64_000
    max_spec_depth: int = 32
    max_choices: int = 4_096
    max_prompt_tokens: int = 4_096
    max_tokens: int = 4_096
    max_speculative: int = 8
    compile_budget_s: float = 10.0


def _json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_json_depth(v) for v in value), default=0)
    return 0


def _paren_depth(text: str) -> int:
    depth = best = 0
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "([{":
            depth += 1
            best = max(best, depth)
        elif ch in ")]}":
            depth = max(0, depth - 1)
    return best


def spec_depth(spec: Spec) -> int:
    """Nesting depth: JSON containers for a schema, brackets for a regex or grammar, 1 for a choice."""
    if isinstance(spec, JsonSchema):
        return _json_depth(spec.schema)
    if isinstance(spec, Regex):
        return _paren_depth(spec.pattern)
    if isinstance(spec, Gbnf):
        return _paren_depth(spec.text)
    return 1


def admission_problem(
    request: Request, limits: AdmissionLimits, max_rows: int, vocab_size: int
) -> str | None:
    """Why ``request`` must be refused before queueing, or None."""
    r = request
    if not r.prompt:
        return "prompt is empty: give at least one token id"
    bad = [t for t in r.prompt + r.stop_ids if not 0 <= t < vocab_size]
    if bad:
        return f"token id {bad[0]} is outside the vocabulary [0, {vocab_size})"
    if len(r.prompt) > limits.max_prompt_tokens:
        return f"prompt has {len(r.prompt)} tokens (limit {limits.max_prompt_tokens})"
    if not 1 <= r.max_tokens <= limits.max_tokens:
        return f"max_tokens={r.max_tokens} (expected 1..{limits.max_tokens})"
    if r.n < 1 or r.beam_width < 1:
        return f"n={r.n}, beam_width={r.beam_width}: both must be >= 1"
    if r.beam_width > 1 and r.n > 1:
        return "beam search returns beam_width outputs: use n=1 with beam_width > 1"
    if r.beam_width > 1 and r.speculative:
        return "speculative decoding is not supported with beam search"
    if not 0 <= r.speculative <= limits.max_speculative:
        return f"speculative={r.speculative} (expected 0..{limits.max_speculative})"
    rows = max(r.n, r.beam_width)
    if rows > max_rows:
        return f"request needs {rows} batch rows; the engine has {max_rows}"
    if r.spec is not None and r.stop_ids:
        return "stop_ids with a spec: the grammar decides where a constrained output ends (use EOS)"
    if r.spec is None and r.finish_within_max_tokens:
        return "finish_within_max_tokens without a spec: only a constrained output has a shortest end"
    if r.spec is None:
        return None
    size = len(r.spec.canonical().encode())
    if size > limits.max_spec_bytes:
        return f"spec is {size} bytes (limit {limits.max_spec_bytes})"
    depth = spec_depth(r.spec)
    if depth > limits.max_spec_depth:
        return f"spec nests {depth} deep (limit {limits.max_spec_depth})"
    if isinstance(r.spec, Choice) and len(r.spec.options) > limits.max_choices:
        return f"choice has {len(r.spec.options)} options (limit {limits.max_choices})"
    return None
