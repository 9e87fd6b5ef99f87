"""``txnspec conform``: generate traces from the spec and replay them against an adapter, on Spark.

Exit 0 when every trace replayed without divergence, 1 on a divergence (the first ones are printed,
shrunk; all are in the Parquet results), 2 on bad arguments or when Spark cannot start (no Java, a
standalone master that cannot be reached or does not answer as a Spark master: refused within seconds, before
Spark starts, not after Spark's own three 20-second registration attempts).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from txnspec.cli.base import (
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATION,
    Command,
    UsageError,
    write_output,
)
from txnspec.conformance.environment import check_reachable, standalone_masters, start_standalone_session


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
    p.add_argument("--matrix", action="store_true",
                   help="run every Kafka scenario at TV2 and TV1 (random walks, --traces each) and print one table "
                        "of verdicts and coverage; --scenario, --variant and --strategy do not apply")
    p.add_argument("--short", action="store_true", help="with --matrix: one line per run, without the gaps")


def cmd_conform(args: argparse.Namespace) -> int:
    import sys

    from txnspec.conformance.adapters import make_adapter
    from txnspec.conformance.environment import java_problem
    from txnspec.spec.scenarios import scenario_named

    if args.traces <= 0:
        raise UsageError("--traces must be a positive number")
    if args.max_steps <= 0:
        raise UsageError("--max-steps must be a positive number")
    if args.matrix:
        return _matrix(args)
    variant_file = None
    if args.variant_file is not None:
        from txnspec.spec.variants.user import load_variant_files

        if args.variant is not None:
            raise UsageError(f"--variant {args.variant} and --variant-file each name the variant to check: "
                             "give one (a variant file can start from a built-in one, docs/variants.md)")
        (args.variant,) = load_variant_files([args.variant_file])
        variant_file = str(args.variant_file.resolve())
    args.variant = args.variant or "current"
    try:
        scenario_named(args.scenario)
        from txnspec.spec.variants import variant_named

        variant_named(args.variant)
        make_adapter(args.adapter)
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    if args.max_states is not None and args.max_states <= 0:
        raise UsageError("--max-states must be a positive number")
    standalone = standalone_masters(args.master)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {str(args.out)!r} exists and is not a folder")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        probe = args.out / ".txnspec-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--out {str(args.out)!r} cannot be written: {exc.strerror or exc}") from None
    check_reachable(args.master, standalone)
    problem = java_problem()
    if problem:
        print(f"txnspec conform: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from txnspec.conformance.spark_job import JobConfig, render, run_job, spark_session

    config = JobConfig(scenario=args.scenario, traces=args.traces, strategy=args.strategy, variant=args.variant,
                       seed=args.seed, max_steps=args.max_steps, adapter=args.adapter, shrink=not args.no_shrink,
                       variant_file=variant_file)
    from txnspec.cli.progress import progress_line

    show = sys.stderr.isatty() and not args.json
    session = start_standalone_session(args.master, spark_session) if standalone else None
    try:
        with progress_line(show) as line:
            result = run_job(config, master=args.master, out=args.out, max_states=args.max_states, session=session,
                             progress=(lambda done, total: line(f"{done:,} of {total:,} traces done")) if show
                             else None)
    finally:
        if session is not None:
            session.stop()
    if args.json:
        print(json.dumps(result.summary, indent=2, sort_keys=True))
    else:
        print(render(result.summary))
    sys.stdout.flush()  # the verdict is out before any file is written
    if args.html_out is not None:
        from txnspec.cli.html_report import conform_page, write_page
        from txnspec.conformance.traces import Trace

        shrunk = [Trace.from_line(d["shrunk_trace"]) for d in result.summary["first_divergences"]
                  if d.get("shrunk_trace")]
        write_output(args.html_out, "--html-out", lambda p: write_page(p, conform_page(result.summary, shrunk)))
    failed = result.summary["diverged"] + result.summary["errors"]
    return EXIT_OK if failed == 0 else EXIT_VIOLATION


def _matrix(args: argparse.Namespace) -> int:
    """``--matrix``: every Kafka scenario at both transaction versions, one Spark session, one table."""
    import sys

    from txnspec.conformance.adapters import make_adapter
    from txnspec.conformance.environment import java_problem
    from txnspec.conformance.matrix import render, run_matrix

    if args.variant_file is not None or args.html_out is not None:
        raise UsageError("--matrix takes neither --variant-file nor --html-out")
    try:
        make_adapter(args.adapter)
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    standalone = standalone_masters(args.master)
    check_reachable(args.master, standalone)
    problem = java_problem()
    if problem:
        print(f"txnspec conform: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from pyspark.sql import SparkSession

    from txnspec.conformance.spark_job import spark_session

    session = start_standalone_session(args.master, spark_session) if standalone else \
        SparkSession.getActiveSession()  # e.g. under spark-submit, or a notebook's session: not ours to stop
    own_session = standalone or session is None
    session = session or spark_session(args.master)
    show = sys.stderr.isatty() and not args.json
    try:
        cells = run_matrix(args.adapter, args.traces, out=args.out, session=session, seed=args.seed,
                           max_steps=args.max_steps,
                           on_cell=(lambda c: print(f"  {c.scenario} TV{c.transaction_version}: {c.passed}/"
                                                    f"{c.traces} passed", file=sys.stderr)) if show else None)
    finally:
        if own_session:
            session.stop()
    rows = [c.to_json() for c in cells]
    write_output(args.out / "matrix.json", "--out",
                 lambda p: p.write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n", encoding="utf-8"))
    print(json.dumps(rows, indent=2, sort_keys=True) if args.json else render(cells, args.adapter, short=args.short))
    failed = sum(c.diverged + c.errors for c in cells)
    return EXIT_OK if failed == 0 else EXIT_VIOLATION


COMMAND = Command("conform", "generate traces from the spec and replay them against spec or impl on Spark",
                  _arguments, cmd_conform)
