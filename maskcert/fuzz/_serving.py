"""The serving simulation under random seeds and configurations (``--target serving``).

``serving/simulation`` runs :func:`serving_sim.run_simulation` (adversarial model, the campaign's
backend, optional faults from ``options["faults"]``) with a drawn seed, request count, batch size,
KV budget and resume mode; every violation the replay checker reports becomes a finding.
``serving/determinism`` runs the same small workload twice and compares every output.

Findings are keyed coarsely — one per (serving invariant, spec, engine vocabulary) — and the
violation's own text, seed and configuration go into the certificate, so a campaign that trips one
bug on many seeds writes it once.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from maskcert.fuzz._property import Property, TargetContext, cover
from maskcert.fuzz._reference import spec_ref
from props.contract.findings import SIMULATION_FINDING, Finding, FindingFailure, Invariant, SpecKind, SpecRef

__all__ = ["serving_properties"]


def _findings(report: Any, config: dict[str, Any], faults: tuple[str, ...]) -> list[Finding]:
    specs = {h.request_id: h.request.spec for h in report.handles}
    out: list[Finding] = []
    for v in report.violations:
        spec = specs.get(v.request_id)
        ref = (
            spec_ref(spec)
            if spec is not None
            else SpecRef(SpecKind.CHOICE, [], name="unconstrained", corpus="serving")
        )
        out.append(
            Finding(
                invariant=SIMULATION_FINDING[v.invariant],
                backend=report.backend,
                backend_version="",
                spec=ref,
                tokenizer=v.engine.split(":", 1)[-1],
                tokenizer_fingerprint="",
                backend_verdict=f"serving:{v.invariant}",
                reference_verdict="replay",
                message=f"serving invariant {v.invariant!r} violated"
                + (f" (faults: {', '.join(faults)})" if faults else ""),
                certificate={
                    "violation": str(v),
                    "step": v.step,
                    "request_id": v.request_id,
                    "config": config,
                    "faults": list(faults),
                },
                walk="serving",
            )
        )
    return out


def serving_properties(ctx: TargetContext, faults: tuple[str, ...] | None = None) -> list[Property]:
    from serving_sim import run_simulation

    active = tuple(faults if faults is not None else ctx.options.get("faults", ()))
    backend = ctx.load_backend()
    vocabs = ctx.vocabularies(default=()) if ctx.tokenizers else None

    configs = st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "requests": st.integers(2, 14),
            "max_tokens": st.integers(4, 24),
            "max_rows": st.integers(1, 8),
            "kv_budget_tokens": st.integers(64, 240),
            "resume_mode": st.sampled_from(["replay", "snapshot"]),
        }
    )

    @given(config=configs)
    def simulation_is_clean(config: dict[str, Any]) -> None:
        report = run_simulation(
            backend=backend, faults=active, vocabularies=vocabs, model="adversarial", **config
        )
        for name, n in report.checked.items():
            if n:
                cover("check", name)
        for inv in ("soundness", "eos", "fork", "rollback", "speculative", "utf8"):
            cover("invariant", inv)
        if report.violations:
            raise FindingFailure(_findings(report, config, active))

    @given(seed=st.integers(0, 2**31 - 1), requests=st.integers(1, 6))
    def simulation_is_deterministic(seed: int, requests: int) -> None:
        runs = [
            run_simulation(
                backend=backend,
                faults=active,
                vocabularies=vocabs,
                seed=seed,
                requests=requests,
                max_tokens=12,
            )
            for _ in range(2)
        ]
        cover("invariant", "determinism")
        first, second = (
            [(h.request_id, [(c.token_ids, c.finish_reason) for c in h.outputs]) for h in r.handles]
            for r in runs
        )
        if first != second:
            diff = (
                next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
                if len(first) == len(second)
                else -1
            )
            h = runs[0].handles[max(diff, 0)]
            f = Finding(
                invariant=Invariant.DETERMINISM,
                backend=runs[0].backend,
                backend_version="",
                spec=spec_ref(h.request.spec)
                if h.request.spec is not None
                else SpecRef(SpecKind.CHOICE, [], name="unconstrained"),
                tokenizer="",
                tokenizer_fingerprint="",
                backend_verdict="outputs differ",
                reference_verdict="same outputs",
                message="two runs of the same seeded workload produced different outputs",
                certificate={
                    "seed": seed,
                    "requests": requests,
                    "request_id": h.request_id,
                    "first": first[max(diff, 0)] if first else None,
                    "second": second[max(diff, 0)] if second else None,
                },
                walk="serving",
            )
            raise FindingFailure([f])

    return [
        Property("serving/simulation", simulation_is_clean),
        Property("serving/determinism", simulation_is_deterministic),
    ]
