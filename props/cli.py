"""The ``maskcert`` command line. Thin: it parses arguments, calls library code, prints, exits.

Exit codes: 0 success (no failing finding), 1 findings / violations / refusal, 2 usage error or a
missing optional dependency.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from refdecoder.errors import MaskcertError


def _cmd_tokenizers(args: argparse.Namespace) -> int:
    from tokenizers_matrix import format_matrix

    print(format_matrix(args.level))
    return 0


def _cmd_check_schema(args: argparse.Namespace) -> int:
    import refdecoder
    from refdecoder.errors import LimitExceeded, SpecError, Unsupported

    try:
        if args.regex is not None:
            spec: refdecoder.Spec = refdecoder.Regex(args.regex)
        elif args.gbnf is not None:
            spec = refdecoder.Gbnf(Path(args.gbnf).read_text(encoding="utf-8"))
        else:
            if args.file is None:
                print("maskcert check-schema: give a schema FILE, --regex PATTERN or --gbnf FILE", file=sys.stderr)
                return 2
            try:
                schema = json.loads(Path(args.file).read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as e:
                print(f"maskcert check-schema: {args.file}: expected a JSON Schema file ({e})", file=sys.stderr)
                return 2
            profile = refdecoder.JsonProfile(formats=args.formats)
            spec = refdecoder.JsonSchema(schema, profile)
        grammar = refdecoder.compile(spec)
    except OSError as e:
        print(f"maskcert check-schema: {e}", file=sys.stderr)
        return 2
    except Unsupported as e:
        print(f"refused: keyword={e.keyword} pointer={e.json_pointer or '/'} reason={e.reason}")
        return 1
    except LimitExceeded as e:
        print(f"refused: limit={e.limit} value={e.value} bound={e.bound} where={e.where or '/'}")
        return 1
    except SpecError as e:
        print(f"invalid: {e}")
        return 1
    print(f"supported fingerprint={grammar.fingerprint}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    """Benchmarks as tables with ratios against the third-party engines measured in the same run."""
    out: dict[str, object] = {}
    if args.what in ("sampler", "all"):
        from props.bench.sampler import format_table as sampler_table
        from props.bench.sampler import run_sampler_bench

        rows = run_sampler_bench(threads=args.threads, repeat=args.repeat)
        print(sampler_table(rows))
        out["sampler"] = rows
    if args.what in ("masks", "all"):
        import tokenizers_matrix
        from props.bench.masks import format_table as masks_table
        from props.bench.masks import run_mask_bench

        shared = tokenizers_matrix.shared_data_dir()
        if args.schemas:
            schemas = Path(args.schemas)
        elif shared is not None:
            schemas = shared / "jsonschemabench-maskbench"
        else:
            schemas = Path("jsonschemabench-maskbench")
        if not schemas.exists():
            print(f"maskcert bench masks: {schemas} not found: give --schemas DIR", file=sys.stderr)
            return 2
        results = {}
        for name in args.tokenizer:
            vocab = tokenizers_matrix.get(name) if not Path(name).exists() else tokenizers_matrix.load(name)
            result = run_mask_bench(vocab, schemas, limit=args.limit, time_budget_s=args.budget)
            print(f"## {vocab.name}")
            print(masks_table(result))
            results[vocab.name] = result
        out["masks"] = results
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from serving_sim import cli_simulate

    return int(cli_simulate(args))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="maskcert", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tokenizers", help="print the tokenizer matrix")
    t.add_argument("--level", choices=["ci", "full"], default="ci")
    t.set_defaults(func=_cmd_tokenizers)

    c = sub.add_parser("check-schema", help="compile a spec and print 'supported' or each refusal")
    c.add_argument("file", nargs="?", help="a JSON Schema file")
    c.add_argument("--regex", help="a Python-syntax regex (full match)")
    c.add_argument("--gbnf", help="a GBNF grammar file")
    c.add_argument("--formats", choices=["annotation", "assert"], default="annotation")
    c.set_defaults(func=_cmd_check_schema)

    b = sub.add_parser("bench", help="benchmarks with ratios against third-party engines")
    b.add_argument("what", choices=["masks", "sampler", "all"], nargs="?", default="all")
    b.add_argument("--tokenizer", action="append", default=None,
                   help="matrix name or tokenizer file (repeatable; default: deepseek-v3-litellm)")  # fmt: skip
    b.add_argument("--schemas", help="JSONSchemaBench-style folder (default: shared maskbench)")
    b.add_argument("--limit", type=int, default=50, help="schemas per run")
    b.add_argument("--budget", type=float, default=None, help="seconds per tokenizer")
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--repeat", type=int, default=50)
    b.add_argument("--json", help="also write the results as JSON here")
    b.set_defaults(func=_cmd_bench)

    from serving_sim import add_simulate_arguments

    sim = sub.add_parser("simulate", help="run the serving simulation; exit 1 on any invariant violation")
    add_simulate_arguments(sim)
    sim.set_defaults(func=_cmd_simulate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "bench" and args.tokenizer is None:
        args.tokenizer = ["deepseek-v3-litellm"]
    try:
        return int(args.func(args))
    except MaskcertError as e:
        print(f"maskcert {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"maskcert {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
