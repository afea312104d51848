"""The ``maskcert`` command line. Thin: it parses arguments, calls library code, prints, exits.

Exit codes: 0 success (no failing finding), 1 findings / violations / refusal, 2 usage error or a
missing optional dependency (and any usage error a command did not catch itself), 3 maskcert itself
failed (certify: on some case): a bug in maskcert, 4 (certify ``--require-complete``) the run did not
check every spec, 128 + N stopped by signal N (certify, matrix, fuzz, bisect: the report or summary is
still written; ``--resume`` continues certify and matrix).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refdecoder.errors import MaskcertError


def _cmd_tokenizers(args: argparse.Namespace) -> int:
    from tokenizers_matrix import format_matrix

    print(format_matrix(args.level))
    return 0


def _limits_from(items: Sequence[str] | None) -> Any:
    """``refdecoder.Limits`` with each ``--limit NAME=VALUE`` applied (SpecError on a bad one)."""
    import refdecoder

    limits = refdecoder.Limits()
    for item in items or []:
        limits = refdecoder.parse_limit(item, limits)
    return limits


def refdecoder_reference_profile() -> Any:
    """The profile ``--backend reference`` certifies under by default (ReferenceBackend's)."""
    from props.backends.reference import ReferenceBackend

    return ReferenceBackend().profile.json


def refdecoder_drafts() -> tuple[str, ...]:
    """The drafts ``check-schema --draft`` takes (``refdecoder.grammar.JSON_SCHEMA_DRAFTS``)."""
    from refdecoder.grammar import JSON_SCHEMA_DRAFTS

    return JSON_SCHEMA_DRAFTS


def refdecoder_gbnf_dialects() -> tuple[str, ...]:
    """The dialects ``check-schema --gbnf-dialect`` takes (``refdecoder.grammar.GBNF_DIALECTS``)."""
    from refdecoder.grammar import GBNF_DIALECTS

    return GBNF_DIALECTS


def _limit_hint(limit: str) -> str:
    """Every limit is a ``Limits`` field (``refdecoder.errors.LimitName``): ``--limit`` raises it."""
    return f" (raise it with --limit {limit}=N)"


def _cmd_check_schema(args: argparse.Namespace) -> int:
    """Exit 0 supported, 1 refused or invalid spec, 2 usage error or an unreadable spec file."""
    import refdecoder
    from maskcert.json_profiles import ProfileError, explain_profile, parse_profile
    from refdecoder.errors import LimitExceeded, SpecError, SpecFileError, Unsupported

    try:
        limits = _limits_from(args.limit)
        profile = parse_profile(
            [
                *(args.profile or []),
                *([f"formats={args.formats}"] if args.formats else []),
                *([f"draft={args.draft}"] if args.draft else []),
            ]
        )
    except (SpecError, ProfileError) as e:
        print(f"maskcert check-schema: {e}", file=sys.stderr)
        return 2
    if args.explain:
        from maskcert.explain import format_limits

        print(format_limits(limits))
    try:
        if args.regex is not None:
            spec: refdecoder.Spec = refdecoder.Regex(args.regex)
        elif args.gbnf is not None:
            data = Path(args.gbnf).read_bytes()
            spec = refdecoder.Gbnf(
                refdecoder.read_spec_text(data, args.gbnf, expected="a GBNF grammar file", limits=limits),
                dialect=args.gbnf_dialect,
            )
        else:
            if args.file is None:
                print(
                    "maskcert check-schema: give a schema FILE, --regex PATTERN or --gbnf FILE",
                    file=sys.stderr,
                )
                return 2
            data = Path(args.file).read_bytes()
            schema = refdecoder.read_spec_json(data, args.file, expected="a JSON Schema file", limits=limits)
            spec = refdecoder.JsonSchema(schema, profile)
            if args.explain:
                from maskcert.explain import format_decisions, keyword_decisions

                print(explain_profile(profile))
                print(format_decisions(keyword_decisions(schema, profile)))
        grammar = refdecoder.compile(spec, limits)
    except OSError as e:
        print(f"maskcert check-schema: {e}", file=sys.stderr)
        return 2
    except SpecFileError as e:
        hint = _limit_hint(e.limit) if e.limit else ""
        print(f"maskcert check-schema: {e}{hint}", file=sys.stderr)
        return 2
    except Unsupported as e:
        print(f"refused: keyword={e.keyword} pointer={e.where or '/'} reason={e.reason}")
        return 1
    except LimitExceeded as e:
        print(
            f"refused: limit={e.limit} value={e.value} bound={e.bound} where={e.where or '/'}"
            f"{_limit_hint(e.limit)}"
        )
        return 1
    except SpecError as e:
        print(f"invalid: {e}")
        return 1
    print(f"supported fingerprint={grammar.fingerprint}")
    return 0


def _cmd_matrix_history(args: argparse.Namespace) -> int:
    """``matrix --versions`` and ``matrix --diff`` (maskcert.history): exit 1 on a regression (the
    history's between consecutive releases run, or the diff's), 2 on usage errors, 128 + N when
    signal N stopped it (the same command continues it)."""
    import signal

    from maskcert.certification import CertifyError
    from maskcert.history import HistoryError, diff_releases, parse_versions_arg, run_history
    from props.backends import BackendUnavailable, engines
    from refdecoder.errors import VocabularyError

    def say(line: str) -> None:
        print(f"maskcert matrix: {line}", file=sys.stderr, flush=True)

    out = Path(args.out)
    try:
        if args.backend or args.resume or args.from_report or (args.versions and args.diff):
            raise HistoryError(
                "maskcert matrix: expected --versions or --diff alone (not with --backend, --resume, "
                "--from-report or each other)"
            )
        if args.diff:
            d = diff_releases(
                args.diff[0],
                args.diff[1],
                out=out,
                tokenizer=args.tokenizer,
                features=args.feature or [],
                seed=args.seed,
                budget_s=args.budget,
                progress=say,
            )
            data = d.data
            print(
                f"{data['a']} -> {data['b']}: {data['features']} features, {len(data['changed'])} changed, "
                f"{data['regressions']} regression(s)"
            )
            same = 0
            for c in data["changed"]:
                if c["before"] == c["after"] and not c["regression"]:
                    same += 1  # the same kind of wrong, other defect signatures certified first
                    continue
                flag = "REGRESSION " if c["regression"] else ""
                print(f"  {flag}{c['feature']}: {c['before']} -> {c['after']}")
            if same:
                print(f"  {same} more with the same status and other defect signatures (diff.md lists them)")
            print(f"diff: {out / 'diff.md'}")
            return 1 if d.regressions else 0
        shard = None
        if args.shard:
            k, sep, n = str(args.shard).partition("/")
            if not sep or not k.isdigit() or not n.isdigit():
                raise HistoryError(f"--shard {args.shard!r}: expected K/N, e.g. 1/2")
            shard = (int(k), int(n))
        name, span = parse_versions_arg(args.versions)
        h = run_history(
            name,
            span,
            out=out,
            sample=args.sample,
            tokenizer=args.tokenizer,
            features=args.feature or [],
            seed=args.seed,
            budget_s=args.budget,
            shard=shard,
            bisect_budget_s=args.bisect_budget,
            progress=say,
        )
    except (CertifyError, BackendUnavailable, VocabularyError, engines.EngineInstallError) as e:
        print(f"maskcert matrix: {e}", file=sys.stderr)
        return 2
    print(f"{name}: releases run {', '.join(h.data['ran'])}")
    if shard is not None:
        return 0
    for r in h.data["regressions"]:
        print(f"  REGRESSION {r['feature']}: {r['from']} {r['before']} -> {r['to']} {r['after']}")
    still = sum(d["in_newest"] for d in h.data["defects"])
    print(f"defects: {len(h.data['defects'])} ({still} in the newest release); history: {out / 'history.md'}")
    if h.data.get("interrupted"):
        print(f"interrupted by {h.data['interrupted']}: run the same command to continue", file=sys.stderr)
        return 128 + int(getattr(signal, str(h.data["interrupted"])))
    return 1 if h.data["regressions"] else 0


def _cmd_site(args: argparse.Namespace) -> int:
    """The static conformance site (maskcert.site): exit 0, 2 on bad input."""
    from maskcert.site import SiteError, build_site

    try:
        result = build_site(args.history, args.out)
    except SiteError as e:
        print(f"maskcert site: {e}", file=sys.stderr)
        return 2
    print(f"site: {Path(args.out) / 'index.html'} ({len(result.pages)} pages)")
    return 0


def _cmd_matrix(args: argparse.Namespace) -> int:
    """The feature matrix (maskcert.matrix); exit 1 when an engine has an unsound or crash cell, 2 on
    usage errors, 128 + N when signal N stopped it (``--resume OUT`` continues it)."""
    import signal

    if args.versions or args.diff:
        return _cmd_matrix_history(args)
    if args.sample is not None or args.shard:
        print("maskcert matrix: --sample and --shard need --versions", file=sys.stderr)
        return 2

    from maskcert.certification import CertifyError
    from maskcert.matrix import MatrixError, matrix_from_reports, run_matrix
    from props.backends import BackendUnavailable
    from props.output.report import ReportError
    from refdecoder.errors import VocabularyError

    out = Path(args.resume or args.out)
    saved = out / "matrix-run.json"  # the run's own parameters, for --resume
    try:
        if args.from_report:
            if args.backend or args.resume:
                raise MatrixError("maskcert matrix: expected --from-report or --backend/--resume, not both")
            m = matrix_from_reports(args.from_report, features=args.feature or [], out=out)
        else:
            params: dict[str, Any] = {
                "backends": args.backend or ["reference"],
                "tokenizer": args.tokenizer,
                "features": args.feature or [],
                "seed": args.seed,
            }
            if args.resume:
                try:
                    params = json.loads(saved.read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError) as e:
                    raise MatrixError(
                        f"maskcert matrix: --resume {args.resume}: expected the output directory of a "
                        f"maskcert matrix run ({saved}: {e})"
                    ) from e
            else:
                out.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(params, indent=1) + "\n", encoding="utf-8")
            m = run_matrix(
                params["backends"],
                tokenizer=params["tokenizer"],
                features=params["features"],
                out=out,
                budget_s=args.budget,
                seed=params["seed"],
                progress=sys.stderr.isatty(),
                resume=bool(args.resume),
            )
    except (CertifyError, BackendUnavailable, VocabularyError, MatrixError, ReportError) as e:
        print(f"maskcert matrix: {e}", file=sys.stderr)
        return 2
    for engine, counts in m.counts().items():
        print(f"{engine}: " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())))
    print(f"matrix: {out / 'matrix.html'}")
    if m.data.get("interrupted"):
        signum = int(getattr(signal, str(m.data["interrupted"])))
        missing = f"; not run: {', '.join(m.data['not_run'])}" if m.data.get("not_run") else ""
        print(
            f"interrupted by {m.data['interrupted']}{missing} (maskcert matrix --resume {out} continues it)",
            file=sys.stderr,
        )
        return 128 + signum
    bad = {c["status"] for c in m.data["cells"]} & {"unsound", "unsound+incomplete", "crash"}
    return 1 if bad else 0


_BUDGET_IN_PROCESS = (
    "maskcert certify: --budget with --in-process: expected the engine in its worker subprocess (drop "
    "--in-process): a call of {backend} in this process cannot be cut when the budget ends"
)


def _cmd_certify(args: argparse.Namespace) -> int:
    """Certify a backend; exit 1 on soundness/eos/crash findings, 2 on usage errors."""
    from maskcert.certification import CertifyConfig, CertifyError, certify
    from maskcert.sharding import signal_name
    from props.backends import BackendUnavailable
    from props.contract.attribution import AdapterFault
    from props.corpus import CorpusError
    from refdecoder.errors import SpecError, VocabularyError

    options: dict[str, object] = {}
    for item in args.option or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            print(
                f"maskcert certify: --option {item!r}: expected KEY=VALUE (VALUE as JSON, else a string)",
                file=sys.stderr,
            )
            return 2
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    if args.profile:
        from maskcert.json_profiles import ProfileError, parse_profile

        if args.backend != "reference":
            print(
                f"maskcert certify: --profile: expected --backend reference (an engine certifies under the "
                f"profile its adapter declares; {args.backend}'s options go through --option)",
                file=sys.stderr,
            )
            return 2
        try:
            options["profile"] = parse_profile(args.profile, refdecoder_reference_profile()).as_dict()
        except ProfileError as e:
            print(f"maskcert certify: {e}", file=sys.stderr)
            return 2
    call: dict[str, Any] = {
        "backend": args.backend,
        "tokenizers": args.tokenizer or ["bpe", "sp-bpe-bytefallback"],
        "corpus": args.corpus
        or (
            []
            if (args.schema or args.regex or args.gbnf or args.lark or args.structural_tag or args.tools)
            else ["builtin"]
        ),
        "schemas": args.schema or [],
        "regexes": args.regex or [],
        "gbnfs": args.gbnf or [],
        "larks": args.lark or [],
        "structural_tags": args.structural_tag or [],
        "seed": args.seed,
        "examples": args.examples,
        "shrink_searches": args.shrink_searches,
        "backend_options": options,
        "isolate": False if args.in_process else None,
        "limit": args.limit or [],
    }
    if args.compile_limit is not None:  # a run parameter: it decides which compiles are findings
        call["compile_limit_s"] = args.compile_limit
    if args.compare_at is not None:  # a run parameter: it decides which steps are compared
        call["compare_at"] = args.compare_at
    out = Path(args.resume or args.out)
    saved = out / "checkpoint" / "cli.json"
    if args.tools and not args.resume:  # the specs become files of the run (maskcert/toolcall_certify.py)
        from maskcert.toolcall_certify import ToolCallRequest, write_specs
        from props.corpus.toolcalls import ToolsError

        try:
            request = ToolCallRequest(
                args.tools, args.tool_choice, args.parallel, args.reasoning, tuple(args.model_format or ())
            )
            written = write_specs(args.backend, request, out)
        except (CertifyError, ToolsError) as e:
            print(f"maskcert certify: {e}", file=sys.stderr)
            return 2
        call["structural_tags"] = [*call["structural_tags"], *map(str, written.structural_tags)]
        call["schemas"] = [*call["schemas"], *map(str, written.schemas)]
        call["toolcalls"] = request.to_json()
    if args.resume:
        given = [
            flag
            for flag, value, default in (
                ("--backend", args.backend, "reference"),
                ("--tokenizer", args.tokenizer, None),
                ("--corpus", args.corpus, None),
                ("--schema", args.schema, None),
                ("--regex", args.regex, None),
                ("--gbnf", args.gbnf, None),
                ("--lark", args.lark, None),
                ("--structural-tag", args.structural_tag, None),
                ("--tools", args.tools, None),
                ("--seed", args.seed, 0),
                ("--examples", args.examples, 8),
                ("--shrink-searches", args.shrink_searches, False),
                ("--option", args.option, None),
                ("--in-process", args.in_process, False),
                ("--limit", args.limit, None),
                ("--profile", args.profile, None),
                ("--compile-limit", args.compile_limit, None),
                ("--compare-at", args.compare_at, None),
            )
            if value != default
        ]
        if given:
            print(
                f"maskcert certify: --resume {args.resume}: the run's own parameters are used; "
                f"expected no {', '.join(given)} (only --workers, --cluster, --budget, --minimize-seconds, "
                "--baseline, --write-baseline and --require-complete may change)",
                file=sys.stderr,
            )
            return 2
        try:
            call = json.loads(saved.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            print(
                f"maskcert certify: --resume {args.resume}: expected the report directory of a run "
                f"started with maskcert certify ({saved}: {e})",
                file=sys.stderr,
            )
            return 2
    elif args.budget is not None and args.in_process and args.backend != "reference":
        print(_BUDGET_IN_PROCESS.format(backend=args.backend), file=sys.stderr)
        return 2
    else:
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(call, indent=1) + "\n", encoding="utf-8")
    if args.budget is not None and call.get("isolate") is False and call.get("backend") != "reference":
        print(_BUDGET_IN_PROCESS.format(backend=call.get("backend")), file=sys.stderr)  # a resumed run's
        return 2
    try:
        run = dict(call)  # the run's own parameters (cli.json), then the flags that may change on resume
        backend = run.pop("backend")
        limit_items = run.pop("limit", [])
        toolcalls = run.pop("toolcalls", None)
        config = CertifyConfig(
            **run,
            limits=_limits_from(limit_items) if limit_items else None,
            budget_s=args.budget,
            workers=args.workers,
            cluster=args.cluster,
            out=out,
            baseline=args.baseline,
            minimize_s=args.minimize_seconds,
            progress=True,
            resume=bool(args.resume),
            limits_probes=bool(args.limits_probes),
            require_complete=bool(args.require_complete),
        )
        report = certify(backend, config)
        if toolcalls:  # the template promises, beside the specs' checks (maskcert/toolcall_certify.py)
            from maskcert.toolcall_certify import ToolCallRequest, with_promises, write_specs

            made = write_specs(backend, ToolCallRequest(**toolcalls), out)
            report, notes = with_promises(report, made)
            report = report.write(out)
            for line in (*made.refused, *notes):
                print(f"maskcert certify --tools: {line}", file=sys.stderr)
        if args.write_baseline:
            report.write_baseline(args.write_baseline)
    except (BackendUnavailable, CertifyError, CorpusError, VocabularyError, SpecError) as e:
        print(f"maskcert certify: {e}", file=sys.stderr)
        return 2
    except AdapterFault as e:  # inside the tested versions: maskcert's own bug, not the engine's
        print(f"maskcert internal error (please report): {e}", file=sys.stderr)
        return 3
    by = report.by_invariant()
    summary = ", ".join(f"{k} {v}" for k, v in sorted(by.items())) or "none"
    specs = report.specs
    print(
        f"{report.backend.name} {report.backend.version}: {specs.checked} specs checked "
        f"({specs.refused_by_backend} refused by the backend, {specs.refused_by_reference} "
        f"by the reference, {specs.refused_by_both} by both) on {len(report.tokenizers)} tokenizer(s) "
        f"in {report.elapsed_s:.0f} s"
    )
    if report.incomplete is not None:
        why = report.incomplete
        print(
            f"incomplete: {', '.join(why.reasons())}; {len(why.unfinished)} (spec, tokenizer) pairs not checked "
            f"(maskcert certify --resume {out} checks them)",
            file=sys.stderr if report.require_complete or report.interrupted is not None else sys.stdout,
        )
    elif report.interrupted is not None:
        print(
            f"interrupted by {signal_name(report.interrupted)} after the checks (defects may not be minimized)"
        )
    print(f"findings: {summary}")
    print(f"defects: {len(report.defects)} (findings grouped by root cause; report.md lists them first)")
    for defect in report.defects[:10]:
        print(f"  {defect.id} {defect.severity:<8} {defect.summary()}")
    if report.resumed:
        print(f"resumed: {report.resumed} (spec, tokenizer) pairs came from the checkpoint")
    if report.baseline is not None:
        b = report.baseline
        print(f"baseline: {len(b.known)} known, {len(b.new)} new, {len(b.fixed)} fixed")
    for err in report.internal_errors:
        print(f"maskcert internal error (please report): {err.splitlines()[0]}", file=sys.stderr)
    if report.self_check:
        print(f"reference self-check notes: {len(report.self_check)} (see the report)")
    print(f"report: {out / 'report.md'}")
    if report.interrupted is not None:
        print(f"interrupted by {signal_name(report.interrupted)}: exit {report.exit_code}")
    return report.exit_code


def _cmd_bench(args: argparse.Namespace) -> int:
    """Benchmarks as tables with ratios against the third-party engines measured in the same run.

    ``bench PART`` prints that part's table (``--json``: its raw result, as before for masks and
    sampler); ``bench all`` runs every part at small sizes and prints one Markdown report (progress on
    stderr); a part that cannot run or fails is shown so, and the others still run (exit 1 on a
    failure). ``--json``/``--md`` write the gathered report (``--json`` for all, compile and serving).
    """
    import os
    import platform
    import time

    from maskcert.bench import report

    parts = report.PARTS if args.what == "all" else (args.what,)
    size = "small" if args.what == "all" else "full"
    overrides = {
        "limit": args.limit,
        "budget": args.budget,
        "repeat": args.repeat,
        "requests": args.requests,
        "timeout": args.timeout,
        "backends": tuple(args.backend) if args.backend else None,
        "minimize": args.minimize_seconds,
        "isolate": False if args.in_process else None,
        "examples": args.examples,
    }
    results: dict[str, object] = {}
    failed = False
    for part in parts:
        t0 = time.perf_counter()
        if args.what == "all":
            print(f"maskcert bench: {part} ...", file=sys.stderr, flush=True)
        try:
            result = report.run_part(
                part,
                size,
                tokenizers=args.tokenizer or ["deepseek-v3-litellm"],
                schemas=args.schemas,
                overrides=overrides,
                threads=args.threads,
            )
        except report.PartNotRun as e:
            if args.what != "all":
                print(f"maskcert bench {part}: {e}", file=sys.stderr)
                return 2
            results[part] = {"skipped": str(e)}
        except Exception as e:  # noqa: BLE001 - one failing part is reported; the others still run
            if args.what != "all":
                raise
            failed = True
            results[part] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        else:
            results[part] = result
            if args.what != "all":
                print(report.part_table(part, result))
        if args.what == "all":
            print(
                f"maskcert bench: {part} done in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True
            )
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "parts": args.what,
    }
    gathered = report.gather(results, meta)
    markdown = report.format_markdown(gathered)
    if args.what == "all":
        print(markdown)
    if args.md:
        Path(args.md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.md).write_text(markdown, encoding="utf-8")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        # masks and sampler: the shape they wrote before the report existed; certify: its phases
        raw = args.what in ("masks", "sampler", "certify")
        doc = report.clean_json(results) if raw else gathered
        Path(args.json).write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    return 1 if failed else 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    """Versions of everything maskcert depends on and, for each known incompatibility, whether it
    applies here (its probe runs for real). Exit 1 with ``--strict`` when one applies."""
    from props.contract.compat import dependency_versions, diagnose, format_doctor

    versions = dependency_versions()
    diagnoses = diagnose(versions)
    if args.json:
        print(
            json.dumps(
                {
                    "dependencies": versions,
                    "incompatibilities": [
                        {
                            "id": d.incompatibility.id,
                            "applies": d.applies,
                            "in_known_range": d.in_range,
                            "probe_error": d.probe_error,
                            "summary": d.incompatibility.summary,
                            "workaround": d.incompatibility.workaround,
                        }
                        for d in diagnoses
                    ],
                },
                indent=1,
            )
        )
    else:
        print(format_doctor(versions, diagnoses))
    return 1 if args.strict and any(d.applies for d in diagnoses) else 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    """The serving simulation (serving_sim) on the named backend: exit 0 clean, 1 violations, 2 usage
    (an unavailable backend)."""
    from props.backends import load_backend
    from serving_sim import AGENT_FAULTS, FAULTS, exit_code, format_report, run_simulation

    if args.list_faults:
        width = max(len(n) for n in {**FAULTS, **AGENT_FAULTS})
        for name, text in FAULTS.items():
            print(f"{name:<{width}}  {text}")
        for name, text in AGENT_FAULTS.items():
            print(f"{name:<{width}}  (--workload agent) {text}")
        return 0
    try:
        report = run_simulation(
            load_backend(args.backend),
            None,
            args.seed,
            args.requests,
            faults=args.fault,
            model=args.model,
            max_tokens=args.max_tokens,
            resume_mode=args.resume_mode,
            workload=args.workload,
        )
    except MaskcertError as e:  # BackendUnavailable too
        print(f"maskcert simulate: {e}", file=sys.stderr)
        return 2
    print(format_report(report, args.max_violations))
    return exit_code(report)


def _cmd_fuzz(args: argparse.Namespace) -> int:
    """A fuzzing campaign (maskcert.fuzz): exit 0 clean, 1 findings or property errors, 2 bad options."""
    import os

    from maskcert.fuzz import CampaignConfig, FuzzUsageError, parse_budget, run_campaign
    from maskcert.sharding import signal_name
    from props.backends import BackendUnavailable
    from props.backends.engines import EngineInstallError

    try:
        config = CampaignConfig(
            target=args.target,
            backend=args.backend,
            tokenizers=tuple(args.tokenizer or ()),
            budget_s=parse_budget(args.budget),
            workers=args.workers,
            db=args.db or "",
            out_dir=args.out,
            seed=args.seed if args.seed is not None else int.from_bytes(os.urandom(7), "big"),
            cluster=args.cluster or "",
            isolate=args.isolate,
            properties=tuple(args.property or ()),
        )
        config.database  # noqa: B018 - checks --db before anything starts
        result = run_campaign(config)
    except (FuzzUsageError, BackendUnavailable, EngineInstallError) as e:
        print(f"maskcert fuzz: {e}", file=sys.stderr)
        return 2
    how = f"stopped by {signal_name(result.signal)}" if result.stopped == "signal" else "budget spent"
    print(
        f"maskcert fuzz: {how} after {result.elapsed_s:.1f}s, {result.examples} examples, "
        f"{len(result.findings)} findings ({len(result.new_ids)} new, {result.replayed} replayed), "
        f"{len(result.errors)} errors; seed {result.seed}; findings in {result.findings_path}"
    )
    for f in result.findings:
        print(f"  {f.id} {f.invariant:<22} {f.message}")
    for err in result.errors[:5]:
        print(f"  error: {err.splitlines()[-1] if err else err}", file=sys.stderr)
    return result.exit_code


def _cmd_bisect(args: argparse.Namespace) -> int:
    """Run a defect's reproducer across released versions of the engine (maskcert.bisect): exit 0
    with the first release showing it and the first fixing it, 2 on usage errors, 128 + N when
    signal N stopped it (what was run is still printed)."""
    from maskcert.bisect import BisectError, bisect, resolve_repro, versions_between
    from props.backends import REGISTRY, check_version, engines

    info = REGISTRY.get(args.backend)
    if info is None or info.name == "reference":
        names = ", ".join(n for n in REGISTRY if n != "reference")
        print(
            f"maskcert bisect: --backend {args.backend!r}: expected a registered engine ({names})",
            file=sys.stderr,
        )
        return 2
    try:
        script = resolve_repro(args.target)
        released = engines.released_versions(info.distribution, refresh=args.refresh)
        versions = versions_between(released, info.tested, args.versions)
        for v in versions[:1]:
            check_version(info.name, v)
        result = bisect(
            info.name,
            script,
            versions,
            prepare=lambda v: engines.install_engine(info.distribution, v),
            exhaustive=args.all,
            timeout_s=args.timeout,
            progress=lambda line: print(f"maskcert bisect: {line}", file=sys.stderr, flush=True),
        )
    except (BisectError, engines.EngineInstallError) as e:
        print(f"maskcert bisect: {e}", file=sys.stderr)
        return 2
    print(result.summary())
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
    return 0 if result.interrupted is None else 128 + result.interrupted


def _cmd_audit(args: argparse.Namespace) -> int:
    """Decide an engine test suite's labelled cases with the reference (maskcert.audit): exit 1 when
    some label contradicts the spec, 0 otherwise, 2 on a malformed cases file."""
    from maskcert.audit import AuditCaseError, audit, read_cases

    try:
        cases = [c for path in args.cases for c in read_cases(path)]
    except AuditCaseError as e:
        print(f"maskcert audit: {e}", file=sys.stderr)
        return 2
    report = audit(cases)
    text = report.render_text(verbose=args.verbose)
    data = json.dumps(report.to_json(), indent=1, ensure_ascii=False)
    print(data if args.format == "json" else text, end="" if args.format == "text" else "\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "audit.txt").write_text(text, encoding="utf-8")
        (out / "audit.json").write_text(data, encoding="utf-8")
    return report.exit_code


def _cmd_audit_extract(args: argparse.Namespace) -> int:
    """Print an engine test suite's labelled cases (maskcert.audit_extract) as JSON Lines; what it
    could not read goes to stderr."""
    from maskcert.audit_extract import ExtractError, extract

    try:
        result = extract(args.engine, args.src_dir)
    except ExtractError as e:
        print(f"maskcert audit-extract: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(result.jsonl())
    print(
        f"maskcert audit-extract: {args.engine} {result.version}: {len(result.cases)} cases, "
        f"{len(result.skipped)} tests or files not read",
        file=sys.stderr,
    )
    for s in result.skipped:
        print(f"  not read: {s.source}: {s.reason}", file=sys.stderr)
    return 0


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
    c.add_argument(
        "--gbnf-dialect",
        choices=refdecoder_gbnf_dialects(),
        default="llama.cpp",
        help="the grammar's dialect: llama.cpp's GBNF (default) or xgrammar's EBNF (lookahead "
        "assertions are accepted where the grammar implies them)",
    )
    c.add_argument(
        "--formats",
        choices=["annotation", "assert"],
        default=None,
        help="as --profile formats=... (applied last)",
    )
    c.add_argument(
        "--draft",
        choices=list(refdecoder_drafts()),
        default=None,
        help="the JSON Schema draft of a schema without $schema (as --profile draft=...; default 2020-12)",
    )
    c.add_argument(
        "--profile",
        action="append",
        metavar="NAME|KEY=VALUE",
        help="the JSON profile: default, reference or an engine's name, then KEY=VALUE for one "
        "refdecoder.JsonProfile field (repeatable, applied in order; maskcert/json_profiles.py)",
    )
    c.add_argument(
        "--explain", action="store_true", help="print, per keyword, what the reference decided and why"
    )
    c.add_argument(
        "--limit",
        action="append",
        metavar="NAME=VALUE",
        help="raise or lower one refdecoder.Limits field (repeatable; docs/design.md, 'Limits')",
    )
    c.set_defaults(func=_cmd_check_schema)

    ce = sub.add_parser("certify", help="certify a backend's masks against the reference; write a report")
    ce.add_argument(
        "--backend", default="reference", help="adapter name or module:Class (default: reference)"
    )
    ce.add_argument(
        "--tokenizer",
        action="append",
        help="matrix name or tokenizer file (repeatable; default: bpe and sp-bpe-bytefallback)",
    )
    ce.add_argument(
        "--corpus",
        action="append",
        help="builtin | features[:PREFIX] | json-schema-test-suite | jsonschemabench "
        "(':Subset', ':limit=N', ':stride=N') | PATH (repeatable; default: builtin)",
    )
    ce.add_argument("--schema", action="append", help="a JSON Schema file (repeatable)")
    ce.add_argument("--regex", action="append", help="a regex, full match (repeatable)")
    ce.add_argument("--gbnf", action="append", help="a GBNF grammar file (repeatable)")
    ce.add_argument(
        "--lark",
        action="append",
        metavar="FILE",
        help="a Lark grammar file in llguidance's dialect; <|name|> names the vocabulary's special token "
        "of that name, <[id]> any id (repeatable)",
    )
    ce.add_argument(
        "--structural-tag",
        action="append",
        metavar="FILE",
        help='an xgrammar structural tag (JSON: {"type": "structural_tag", "format": ...} or a bare '
        "format); token names resolve in the vocabulary's special tokens (repeatable)",
    )
    ce.add_argument(
        "--tools",
        metavar="FILE",
        help="an OpenAI tools list (JSON): certify the tool-call path — xgrammar: the structural tag of "
        "each model template and the template's promises; other engines: the JSON Schema vLLM sends "
        "(maskcert/toolcall_certify.py)",
    )
    ce.add_argument(
        "--tool-choice",
        default="auto",
        metavar="auto|required|none|NAME",
        help="the request's tool_choice with --tools (default auto)",
    )
    ce.add_argument(
        "--parallel",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the request's parallel_tool_calls with --tools (default --parallel)",
    )
    ce.add_argument(
        "--reasoning",
        default="auto",
        choices=("enabled", "disabled", "auto"),
        help="the request's reasoning setting with --tools (default auto)",
    )
    ce.add_argument(
        "--model-format",
        action="append",
        metavar="NAME",
        help="an xgrammar model template with --tools (repeatable; default every one it registers)",
    )
    ce.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds for the whole run, report writing aside: an engine call still running then is "
        "cut (a 'limits' finding with its time) and unchecked specs are reported as such",
    )
    ce.add_argument(
        "--compile-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="an engine compile slower than this is killed and is a 'limits' finding with its time; "
        "the run goes on (default: 10)",
    )
    ce.add_argument(
        "--compare-at",
        choices=["every", "branching", "auto"],
        default=None,
        help="where valid walks compare masks: every step, only where the language branches (the "
        "reference does not force the next bytes), or auto (default): every step until the engine's "
        "median mask takes 100 ms, then only where it branches — slow engines still get covered",
    )
    ce.add_argument("--seed", type=int, default=0)
    ce.add_argument("--workers", type=int, default=1, help="processes, each with its own backend")
    ce.add_argument(
        "--cluster",
        default=None,
        help="run the --workers shards as tasks on this Ray cluster (ray://..., or local)",
    )
    ce.add_argument(
        "--resume",
        metavar="DIR",
        default=None,
        help="continue the killed or interrupted run whose report directory is DIR (its own parameters)",
    )
    ce.add_argument("--examples", type=int, default=8, help="Hypothesis examples per spec for each search")
    ce.add_argument(
        "--shrink-searches",
        action="store_true",
        help="shrink each Hypothesis search's failure before recording it (shorter walks in the findings; "
        "each defect is minimized after the checks either way; up to twice the time on an engine with "
        "many defects)",
    )
    ce.add_argument("--option", action="append", help="adapter constructor option KEY=VALUE (repeatable)")
    ce.add_argument(
        "--profile",
        action="append",
        metavar="NAME|KEY=VALUE",
        help="--backend reference only: the JSON profile it certifies under (as check-schema --profile)",
    )
    ce.add_argument("--in-process", action="store_true", help="no worker subprocess (debugging)")
    ce.add_argument(
        "--limit",
        action="append",
        metavar="NAME=VALUE",
        help="raise or lower one refdecoder.Limits field for the reference's compiles (repeatable)",
    )
    ce.add_argument("--out", default="certify-report", help="report directory (default: certify-report)")
    ce.add_argument(
        "--baseline", help="known defect signatures (a --write-baseline file): only new ones fail"
    )
    ce.add_argument(
        "--write-baseline", help="write this run's defect signatures here, for a later --baseline"
    )
    ce.add_argument(
        "--minimize-seconds",
        type=float,
        default=15.0,
        help="per defect: time to shrink its spec to a minimal example (0: off; default 15)",
    )
    ce.add_argument(
        "--limits-probes",
        action="store_true",
        help="also compile growing hostile specs on the backend (first tokenizer) and report the "
        "growth curves; a hang, crash or superlinear blowup is a 'limits' finding",
    )
    ce.add_argument(
        "--require-complete",
        action="store_true",
        help="exit 4 when the run did not check every (spec, tokenizer) pair (the budget ran out, a "
        "shard was lost) and nothing else failed: for CI jobs that must cover the whole corpus",
    )
    ce.set_defaults(func=_cmd_certify)

    mx = sub.add_parser("matrix", help="feature conformance matrix: engines x features, one status per cell")
    mx.add_argument("--backend", action="append", help="engine name (repeatable; default: reference)")
    mx.add_argument("--tokenizer", default="bpe", help="matrix name or tokenizer file (default: bpe)")
    mx.add_argument("--feature", action="append", help="feature id or prefix, e.g. json_schema/not, regex")
    mx.add_argument("--budget", type=float, default=None, help="seconds for the whole matrix")
    mx.add_argument(
        "--from-report",
        action="append",
        metavar="DIR",
        help="build the matrix from engine reports of separate runs on the probe suite (repeatable; "
        "one tokenizer), e.g. one `maskcert matrix --backend NAME` per engine run in parallel",
    )
    mx.add_argument("--seed", type=int, default=0)
    mx.add_argument("--out", default="matrix-report", help="output directory (default: matrix-report)")
    mx.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted or killed matrix run whose output directory is DIR (its own "
        "engines, tokenizer, features and seed; each engine from its checkpoint)",
    )
    mx.add_argument(
        "--versions",
        metavar="NAME==A..B",
        help="the matrix of every release of NAME in A..B (either end open) inside the adapter's tested "
        "range, then the history: regressions, each defect's first bad and first fixed release "
        "(history.json, history.md; releases/<version>/ each release's matrix, reused when unchanged)",
    )
    mx.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="with --versions: N releases spread evenly, always the first and newest",
    )
    mx.add_argument(
        "--shard",
        metavar="K/N",
        help="with --versions: run every N-th release from the K-th only (no history; a last run without "
        "--shard reuses the shards' matrices)",
    )
    mx.add_argument(
        "--bisect-budget",
        type=float,
        default=900.0,
        help="with --versions: seconds for bisecting defect bounds over releases not sampled (default 900; "
        "0: only the bisections an earlier run kept)",
    )
    mx.add_argument(
        "--diff",
        nargs=2,
        metavar=("A", "B"),
        help="what changed from release A to B (NAME==VERSION or a matrix.json), cell by cell with the "
        "proofs: diff.json, diff.md; exit 1 on a regression",
    )
    mx.set_defaults(func=_cmd_matrix)

    st = sub.add_parser(
        "site",
        help="a static conformance site from `matrix --versions` histories: engines, releases, features",
    )
    st.add_argument("out", help="output directory of the site")
    st.add_argument(
        "history", nargs="+", help="a `maskcert matrix --versions` output directory (one per engine)"
    )
    st.set_defaults(func=_cmd_site)

    d = sub.add_parser(
        "doctor", help="dependency versions and whether each known incompatibility applies here"
    )
    d.add_argument("--strict", action="store_true", help="exit 1 when a known incompatibility applies")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    d.set_defaults(func=_cmd_doctor)

    b = sub.add_parser("bench", help="benchmarks with ratios against third-party engines")
    b.add_argument(
        "what",
        choices=["all", "masks", "compile", "sampler", "serving", "certify"],
        nargs="?",
        default="all",
        help="one part, or all of them at small sizes into one report (default)",
    )
    b.add_argument(
        "--tokenizer",
        "--vocab",
        dest="tokenizer",
        action="append",
        default=None,
        help="matrix name or tokenizer file (repeatable; default: deepseek-v3-litellm; "
        "compile and certify use the first)",
    )
    b.add_argument(
        "--schemas",
        help="JSONSchemaBench-style folder (default: shared maskbench); certify: a folder or file of "
        "specs, or a corpus name (default: jsonschemabench:Github_easy)",
    )
    b.add_argument(
        "--limit",
        type=int,
        default=None,
        help="schemas per run (masks 50, compile 24, certify 10; all: 12, 16, 3)",
    )
    b.add_argument("--budget", type=float, default=None, help="masks: seconds per tokenizer (all: 90)")
    b.add_argument("--timeout", type=float, default=None, help="compile: seconds per schema (10; all: 5)")
    b.add_argument("--threads", type=int, default=1, help="sampler: torch threads")
    b.add_argument("--repeat", type=int, default=None, help="sampler: timed calls per shape (50; all: 20)")
    b.add_argument("--requests", type=int, default=None, help="serving: requests per backend (24; all: 16)")
    b.add_argument(
        "--backend",
        action="append",
        default=None,
        help="certify: a backend to certify (repeatable; 'reference' is the reference certifying itself; "
        "default: reference and xgrammar; all: every installed engine)",
    )
    b.add_argument(
        "--minimize-seconds",
        type=float,
        default=None,
        help="certify: seconds of minimization per defect (15, as certify; all: 0)",
    )
    b.add_argument("--examples", type=int, default=None, help="certify: examples per search (8; all: 2)")
    b.add_argument(
        "--in-process",
        action="store_true",
        help="certify: run the engine's adapter in this process, not in a worker (engine time then "
        "excludes the worker's round trips)",
    )
    b.add_argument(
        "--json", help="write the gathered report as JSON here (masks, sampler, certify: their raw results)"
    )
    b.add_argument("--md", help="write the gathered report as Markdown here")
    b.set_defaults(func=_cmd_bench)

    # No serving_sim import here: it pulls in torch (seconds), and every command builds this parser;
    # _cmd_simulate checks the fault names.
    sim = sub.add_parser("simulate", help="run the serving simulation; exit 1 on any invariant violation")
    sim.add_argument("--backend", default="reference", help="backend adapter name (default: reference)")
    sim.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="switch on a named fault (repeatable); see --list-faults",
    )
    sim.add_argument("--list-faults", action="store_true", help="print the fault names and exit")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--requests", type=int, default=24, help="requests in the workload (default 24)")
    sim.add_argument("--model", choices=["adversarial", "tiny-llama"], default="adversarial")
    sim.add_argument("--max-tokens", type=int, default=24)
    sim.add_argument("--resume-mode", choices=["replay", "snapshot"], default="replay")
    sim.add_argument(
        "--workload",
        choices=["mixed", "agent"],
        default="mixed",
        help="mixed specs and serving features (default), or agent: tool calls over a vocabulary with "
        "special tokens, the grammar switched to the chosen tool's arguments, jump-forward streams",
    )
    sim.add_argument("--max-violations", type=int, default=20, help="violations printed in full")
    sim.set_defaults(func=_cmd_simulate)

    fz = sub.add_parser("fuzz", help="run properties under the fuzz profile until a time budget is spent")
    fz.add_argument(
        "--backend", default="reference", help="adapter name or module:Class (default: reference)"
    )
    fz.add_argument(
        "--target",
        default="invariants",
        help="invariants | reference | sampler | serving | hostile | module:function (default: invariants)",
    )
    fz.add_argument(
        "--tokenizer", action="append", default=None, help="matrix name or tokenizer file (repeatable)"
    )
    fz.add_argument(
        "--budget", default="60s", help="wall-clock budget: 90, 30s, 10m, 2h, 1h30m (default: 60s)"
    )
    fz.add_argument(
        "--workers", type=int, default=1, help="local worker processes, or Ray tasks with --cluster"
    )
    fz.add_argument(
        "--db", help="example database: a directory or redis://HOST:PORT (default: OUT/hypothesis-db)"
    )
    fz.add_argument("--out", default="fuzz-out", help="findings.jsonl and campaign.json go here")
    fz.add_argument("--seed", type=int, default=None, help="base seed of every shard (default: random)")
    fz.add_argument(
        "--cluster", help="run shards as Ray tasks: 'local' (ray.init() defaults), 'auto' or ray://HOST:PORT"
    )
    fz.add_argument("--isolate", action="store_true", help="run the backend in a worker process")
    fz.add_argument(
        "--property",
        action="append",
        default=None,
        help="only the target's properties matching this fnmatch pattern (repeatable)",
    )
    fz.set_defaults(func=_cmd_fuzz)

    bi = sub.add_parser(
        "bisect",
        help="run a defect's reproducer across an engine's releases: first showing it, first fixing it",
    )
    bi.add_argument("target", help="a reproducer script (repro/<id>.py) or REPORT.json:DEFECT_ID")
    bi.add_argument("--backend", required=True, help="registered engine name (xgrammar, llguidance, ...)")
    bi.add_argument(
        "--versions", help="A..B: releases to search, inclusive (default: the adapter's supported range)"
    )
    bi.add_argument("--all", action="store_true", help="run every release instead of bisecting")
    bi.add_argument("--timeout", type=float, default=300.0, help="seconds per reproducer run (default 300)")
    bi.add_argument("--refresh", action="store_true", help="ask the package index again for the releases")
    bi.add_argument("--json", help="write the runs and the verdict as JSON here")
    bi.set_defaults(func=_cmd_bisect)

    au = sub.add_parser(
        "audit",
        help="decide an engine test suite's labelled cases (JSON Lines); exit 1 when a label contradicts the spec",
    )
    au.add_argument("cases", nargs="+", help="cases files (JSON Lines, docs/audit.md §1)")
    au.add_argument("--out", help="also write audit.txt and audit.json into this directory")
    au.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    au.add_argument("--verbose", action="store_true", help="list the agreeing cases too")
    au.set_defaults(func=_cmd_audit)

    ax = sub.add_parser(
        "audit-extract",
        help="print the labelled cases of an engine's own test suite (unpacked sources) as JSON Lines",
    )
    ax.add_argument("engine", choices=["outlines-core", "llguidance", "lm-format-enforcer"])
    ax.add_argument("src_dir", help="the engine's unpacked sources (an sdist or a checkout)")
    ax.set_defaults(func=_cmd_audit_extract)
    return p


def _hypothesis_home() -> None:
    """Hypothesis keeps its Unicode tables (``intervals_from_codec``: seconds to build) under its home
    directory, by default ``./.hypothesis`` of whatever directory maskcert runs in: a fresh one on every
    new checkout or CI job, littered with the tables. Unless ``HYPOTHESIS_STORAGE_DIRECTORY`` says
    otherwise, keep them once per machine, next to the engine cache (``$XDG_CACHE_HOME``/
    ``~/.cache``/maskcert/hypothesis). maskcert's searches use no example database."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    from hypothesis.configuration import set_hypothesis_home_dir

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    set_hypothesis_home_dir(Path(base) / "maskcert" / "hypothesis")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) in ("certify", "matrix", "fuzz", "bench"):
        _hypothesis_home()
    if getattr(args, "command", None) == "bench" and args.tokenizer is None:
        args.tokenizer = ["deepseek-v3-litellm"]
    try:
        return int(args.func(args))
    except MaskcertError as e:
        # Exit 1 means findings; an error no command handled is a usage error (the error hierarchy's
        # ValueErrors: bad input, names, options) or else maskcert's own failure.
        if isinstance(e, ValueError):
            print(f"maskcert {args.command}: {e}", file=sys.stderr)
            return 2
        print(f"maskcert {args.command}: internal error (please report): {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"maskcert {args.command}: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The ``maskcert`` console script: :func:`main`, then a prompt exit. Once the report is written
    and the exit handlers ran (workers shut down, pools closed), tearing down the interpreter only
    frees memory object by object — 10-15 s after a certify run holding millions of objects — so the
    process ends with ``os._exit`` instead (``main`` itself, as tests and libraries call it, is unchanged)."""
    import atexit
    import contextlib

    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be written
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    run()
