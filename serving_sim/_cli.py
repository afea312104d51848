"""``maskcert simulate``: arguments, and the function the CLI calls (exit 0 clean, 1 violations, 2 usage)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from refdecoder.errors import MaskcertError

from ._faults import FAULTS

__all__ = ["add_simulate_arguments", "cli_simulate", "main"]


def add_simulate_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--backend", default="reference", help="backend adapter name (default: reference)")
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS), metavar="NAME",
                        help="switch on a named fault (repeatable); see --list-faults")
    parser.add_argument("--list-faults", action="store_true", help="print the fault names and exit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--requests", type=int, default=24, help="requests in the workload (default 24)")
    parser.add_argument("--model", choices=["adversarial", "tiny-llama"], default="adversarial")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--resume-mode", choices=["replay", "snapshot"], default="replay")
    parser.add_argument("--max-violations", type=int, default=20, help="violations printed in full")
    return parser


def cli_simulate(args: argparse.Namespace | Mapping[str, Any]) -> int:
    """Run ``maskcert simulate`` with parsed arguments (a Namespace or a dict); print; return the exit code."""
    from props.backends import BackendUnavailable

    from ._simulate import exit_code, format_report, run_simulation

    a = dict(vars(args)) if isinstance(args, argparse.Namespace) else dict(args)
    if a.get("list_faults"):
        width = max(len(n) for n in FAULTS)
        for name, text in FAULTS.items():
            print(f"{name:<{width}}  {text}")
        return 0
    faults = a.get("fault") or []
    if isinstance(faults, str):
        faults = [faults]
    try:
        report = run_simulation(
            a.get("backend", "reference"),
            None,
            int(a.get("seed", 0)),
            int(a.get("requests", 24)),
            faults=faults,
            model=a.get("model", "adversarial"),
            max_tokens=int(a.get("max_tokens", 24)),
            resume_mode=a.get("resume_mode", "replay"),
        )
    except BackendUnavailable as e:
        print(f"maskcert simulate: {e}", file=sys.stderr)
        return 2
    except MaskcertError as e:
        print(f"maskcert simulate: {e}", file=sys.stderr)
        return 2
    print(format_report(report, int(a.get("max_violations", 20))))
    return exit_code(report)


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_simulate_arguments(argparse.ArgumentParser(prog="maskcert simulate", description=__doc__))
    return cli_simulate(parser.parse_args(argv))
