"""Per-run serving metrics (docs/design.md §5): latencies, mask cost and density, cache and speculation rates.

"Model waited for masks" models the usual overlap of mask computation with the forward pass: each
step the model waits ``max(0, mask_ms - forward_ms)``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Metrics", "summarize"]


def summarize(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0, "mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    a = np.asarray(values, dtype=np.float64)
    return {
        "n": len(values),
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


@dataclass
class Metrics:
    steps: int = 0
    tokens: int = 0
    compile_cold_ms: list[float] = field(default_factory=list)
    compile_warm_ms: list[float] = field(default_factory=list)
    mask_ms: list[float] = field(default_factory=list)  # per step, all rows
    forward_ms: list[float] = field(default_factory=list)
    sample_ms: list[float] = field(default_factory=list)
    model_wait_ms: float = 0.0
    ttft_ms: list[float] = field(default_factory=list)
    ttft_steps: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    mask_density: list[float] = field(default_factory=list)  # allowed fraction per constrained row
    grammar_removed_mass: list[float] = field(default_factory=list)
    finish_reasons: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    preemptions: int = 0
    resumes: int = 0
    cancellations: int = 0
    spec_steps: int = 0
    spec_proposed: int = 0
    spec_accepted: int = 0
    spec_grammar_rejections: int = 0
    spec_probability_rejections: int = 0
    nan_logits: int = 0

    def record_step(self, mask_ms: float, forward_ms: float, sample_ms: float) -> None:
        self.steps += 1
        self.mask_ms.append(mask_ms)
        self.forward_ms.append(forward_ms)
        self.sample_ms.append(sample_ms)
        self.model_wait_ms += max(0.0, mask_ms - forward_ms)

    def merge(self, other: Metrics) -> Metrics:
        out = Metrics()
        for name in self.__dataclass_fields__:
            a, b = getattr(self, name), getattr(other, name)
            setattr(out, name, a + b)
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "tokens": self.tokens,
            "compile_ms_cold": summarize(self.compile_cold_ms),
            "compile_ms_warm": summarize(self.compile_warm_ms),
            "mask_ms_per_step": summarize(self.mask_ms),
            "forward_ms_per_step": summarize(self.forward_ms),
            "sample_ms_per_step": summarize(self.sample_ms),
            "model_waited_for_masks_ms": self.model_wait_ms,
            "ttft_ms": summarize(self.ttft_ms),
            "ttft_steps": summarize(self.ttft_steps),
            "inter_token_ms": summarize(self.itl_ms),
            "mask_density": summarize(self.mask_density),
            "grammar_removed_mass": summarize(self.grammar_removed_mass),
            "finish_reasons": dict(sorted(self.finish_reasons.items())),
            "refused": self.refused,
            "preemptions": self.preemptions,
            "resumes": self.resumes,
            "cancellations": self.cancellations,
            "speculative": {
                "steps": self.spec_steps,
                "proposed": self.spec_proposed,
                "accepted": self.spec_accepted,
                "grammar_rejections": self.spec_grammar_rejections,
                "probability_rejections": self.spec_probability_rejections,
                "acceptance_rate": self.spec_accepted / self.spec_proposed if self.spec_proposed else 0.0,
            },
            "nan_logits": self.nan_logits,
        }
