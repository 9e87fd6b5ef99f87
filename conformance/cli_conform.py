"""``txnspec conform``: generate traces from the spec and replay them against an adapter, on Spark.

Exit 0 when every trace replayed without divergence, 1 on a divergence (the first ones are printed,
shrunk; all are in the Parquet results), 2 on bad arguments or when Spark cannot start (no Java).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from txnspec.conformance.cli import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, UsageError, subcommand


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="tiny", help="a named scenario (txnspec check --list)")
    p.add_argument("--variant", default=None, help="a protocol variant (default current, or the --variant-file's)")
    p.add_argument("--traces", type=int, default=100, help="how many traces in all (covering ones count)")
    p.add_argument("--strategy", choices=("covering", "random", "both"), default="both",
                   help="covering traces from the checker's graph, seeded random walks, or both (default)")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--out", type=Path, default=Path("out/conform"), help="output directory (overwritten)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random walks")
    p.add_argument("--max-steps", type=int, default=200, help="length bound of a random walk")
    p.add_argument("--adapter", default="spec",
                   help="system under test: spec, impl, or spec-mutant:NAME (a deliberately wrong spec)")
    p.add_argument("--max-states", type=int, default=None, help="cap the checker's exploration for covering traces")
    p.add_argument("--no-shrink", action="store_true", help="do not shrink divergences")
    p.add_argument("--variant-file", type=Path, metavar="FILE.py",
                   help="load a user-written variant (a module defining VARIANT); used when --variant is not given")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--html-out", type=Path, help="write a self-contained HTML report (divergences as diagrams)")


@subcommand("conform", "generate traces from the spec and replay them against spec or impl on Spark", _arguments)
def cmd_conform(args: argparse.Namespace) -> int:
    import sys

    from txnspec.conformance.adapters import make_adapter
    from txnspec.conformance.cli_main import java_problem
    from txnspec.spec.scenarios import scenario_named

    if args.traces <= 0:
        raise UsageError("--traces must be a positive number")
    if args.max_steps <= 0:
        raise UsageError("--max-steps must be a positive number")
    variant_file = None
    if args.variant_file is not None:
        from txnspec.conformance.cli_diff import load_variant_files

        (loaded,) = load_variant_files([args.variant_file])
        args.variant = args.variant or loaded
        variant_file = str(args.variant_file.resolve())
    args.variant = args.variant or "current"
    try:
        scenario_named(args.scenario)
        from txnspec.spec.variants import variant_named

        variant_named(args.variant)
        make_adapter(args.adapter)
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    problem = java_problem()
    if problem:
        print(f"txnspec conform: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from txnspec.conformance.spark_job import JobConfig, render, run_job

    config = JobConfig(scenario=args.scenario, traces=args.traces, strategy=args.strategy, variant=args.variant,
                       seed=args.seed, max_steps=args.max_steps, adapter=args.adapter, shrink=not args.no_shrink,
                       variant_file=variant_file)
    from txnspec.conformance.progress import progress_line

    show = sys.stderr.isatty() and not args.json
    with progress_line(show) as line:
        result = run_job(config, master=args.master, out=args.out, max_states=args.max_states,
                         progress=(lambda done, total: line(f"{done:,} of {total:,} traces done")) if show else None)
    if args.html_out is not None:
        from txnspec.conformance.html_report import conform_page, write_page
        from txnspec.conformance.traces import Trace

        shrunk = [Trace.from_line(d["shrunk_trace"]) for d in result.summary["first_divergences"]
                  if d.get("shrunk_trace")]
        write_page(args.html_out, conform_page(result.summary, shrunk))
    if args.json:
        print(json.dumps(result.summary, indent=2, sort_keys=True))
    else:
        print(render(result.summary))
    failed = result.summary["diverged"] + result.summary["errors"]
    return EXIT_OK if failed == 0 else EXIT_VIOLATION
