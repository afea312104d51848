"""``maskcert bench certify``: what certifying costs, per engine, and where the time goes.

For the reference and each installed engine, :func:`run_certify_bench` runs :func:`maskcert.certify`
on the same JSONSchemaBench slice and vocabulary (minimization off: it has its own budget per defect)
and reads the run's ``profile`` (see :func:`maskcert.certification._profile`): the one-time costs of
the process (vocabulary, corpus, backend start), seconds per checked spec (median, p95) and seconds
per phase (compile, walks, witnesses, segmentation search, masks on each side, searches). The table's
ratio column compares each engine's per-spec cost with the reference's certify of itself, measured in
the same run. Engine mask times are measured in the parent, so they include the worker transport.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

__all__ = ["run_certify_bench", "format_table"]


def run_certify_bench(
    tokenizer: str,
    limit: int,
    *,
    examples: int = 8,
    engines: Sequence[str] | None = None,
    corpus: str = "jsonschemabench",
) -> dict[str, Any]:
    """Certify the reference and ``engines`` (default: every installed one) on ``limit`` schemas of
    ``corpus`` with ``tokenizer``; per backend its profile, specs checked, findings and wall time."""
    from maskcert.certification import CertifyConfig, CertifyError, certify
    from props.backends import ENGINES, BackendUnavailable, adapter_class

    names = ["reference", *(ENGINES if engines is None else engines)]
    out: dict[str, Any] = {"tokenizer": tokenizer, "limit": limit, "examples": examples, "backends": {}}
    unavailable: dict[str, str] = {}
    config = CertifyConfig(
        tokenizers=(tokenizer,),
        corpus=(f"{corpus}:limit={limit}",),
        examples=examples,
        minimize_s=0,
        progress=False,
    )
    for name in names:
        if name != "reference":
            try:
                adapter_class(name)
            except BackendUnavailable as e:
                unavailable[name] = str(e)
                continue
        t0 = time.monotonic()
        try:
            report = certify(name, config)
        except CertifyError as e:
            unavailable[name] = str(e)
            continue
        d = report.to_json()
        out["backends"][name] = {
            "version": report.backend.version,
            "wall_s": round(time.monotonic() - t0, 3),
            "specs": d["specs"],
            "findings": len(report.findings),
            "profile": d["profile"],
        }
    out["unavailable"] = unavailable
    return out


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{float(x):.3g}"


def format_table(result: dict[str, Any]) -> str:
    """Markdown: per backend the per-spec median and p95, one-time costs and wall time, the ratio to
    the reference's certify of itself; then each backend's phases, largest first."""
    backends: dict[str, Any] = result["backends"]
    ref = backends.get("reference", {}).get("profile", {}).get("spec_s", {}).get("median")
    lines = [
        f"certify on {result['limit']} schemas, {result['tokenizer']}, {result['examples']} examples per search",
        "",
        "| backend | version | specs checked | per spec median s | p95 s | engine / reference | "
        "vocabulary s | backend start s | wall s | findings |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, b in backends.items():
        p = b["profile"]
        med = p["spec_s"]["median"]
        ratio = f"{med / ref:.2f}×" if ref and med else "–"
        lines.append(
            f"| {name} | {b['version']} | {b['specs']['checked']}/{b['specs']['total']} | {_fmt(med)} | "
            f"{_fmt(p['spec_s']['p95'])} | {ratio} | {_fmt(p['setup_s'].get('load vocabularies'))} | "
            f"{_fmt(p['setup_s'].get('start backend'))} | {_fmt(b['wall_s'])} | {b['findings']} |"
        )
    for name, b in backends.items():
        phases = b["profile"]["phases_s"]
        lines += ["", f"where {name}'s time goes (seconds summed over specs; phases nest):", ""]
        lines += [f"- {k}: {v:.2f} s" for k, v in phases.items()]
    for name, why in result.get("unavailable", {}).items():
        lines.append(f"\n{name}: not run ({why})")
    return "\n".join(lines)
