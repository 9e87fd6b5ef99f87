"""``txnspec main``: the project's main job, what README's first command runs.

1. the Kafka behaviour cases on the spec (and on the implementation once it is there);
2. the model check of the ``default`` scenario under the current protocol;
3. the conformance suite on local Spark: 10,000 traces of the ``default`` scenario generated from the spec
   (transition-covering and random) replayed in lock step against the implementation
   (``--conform-scenario``, ``--traces``);
4. the conformance matrix, short: every Kafka scenario at TV2 and TV1 against the implementation
   (``--matrix-traces`` random walks each), one line per run with its verdicts and coverage.

Each stage prints its own report; the last line sums them up. Exit 0 only if every stage passed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import txnspec.conformance as conformance_package
from txnspec.cli.base import EXIT_OK, EXIT_VIOLATION, Command, UsageError, run_alone
from txnspec.cli.cases import COMMAND as CASES
from txnspec.cli.check import COMMAND as CHECK
from txnspec.cli.conform import COMMAND as CONFORM
from txnspec.conformance.environment import java_problem

PUBLIC_CASES = Path(conformance_package.__file__).resolve().parent / "data" / "public.jsonl"


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="default", help="the scenario to model-check")
    p.add_argument("--traces", type=int, default=10_000, help="traces for the Spark conformance run")
    p.add_argument("--conform-scenario", default="default",
                   help="the scenario whose traces are replayed against the implementation on Spark")
    p.add_argument("--out", type=Path, default=Path("out"), help="where the conformance results go")
    p.add_argument("--matrix-traces", type=int, default=100,
                   help="random walks per scenario and transaction version in the conformance matrix")
    p.add_argument("--skip-spark", action="store_true", help="skip the Spark stages (conformance and matrix)")


def cmd_main(args: argparse.Namespace) -> int:
    from txnspec.spec.scenarios import scenario_named

    for option, value in (("--traces", args.traces), ("--matrix-traces", args.matrix_traces)):
        if value <= 0:
            raise UsageError(f"{option} must be a positive number, got {value}")
    for option, name in (("--scenario", args.scenario), ("--conform-scenario", args.conform_scenario)):
        try:
            scenario_named(name)
        except (KeyError, ValueError) as exc:
            raise UsageError(f"{option}: {str(exc).strip(chr(39) + chr(34))}") from None
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {str(args.out)!r} exists and is not a folder")
    stages: list[tuple[str, int, float]] = []

    def stage(name: str, command: Command, argv: list[str]) -> None:
        print(f"\n=== {name}: txnspec {command.name} {' '.join(argv)}", flush=True)
        started = time.monotonic()
        status = run_alone(command, argv)
        stages.append((name, status, time.monotonic() - started))

    stage("cases on the spec", CASES, [str(PUBLIC_CASES), "--target", "spec", "--quiet"])
    stage("cases on the implementation", CASES, [str(PUBLIC_CASES), "--target", "impl", "--quiet"])
    stage(f"model check ({args.scenario})", CHECK, ["--scenario", args.scenario])
    if not args.skip_spark:
        problem = java_problem()
        if problem:
            print(f"\n=== Spark conformance: cannot run: {problem}", file=sys.stderr)
            stages.append(("Spark conformance", EXIT_VIOLATION, 0.0))
        else:
            stage("Spark conformance (implementation)", CONFORM,
                  ["--scenario", args.conform_scenario, "--adapter", "impl",
                   "--traces", str(args.traces), "--out", str(args.out)])
            stage("conformance matrix (implementation, TV2 and TV1)", CONFORM,
                  ["--matrix", "--short", "--adapter", "impl", "--traces", str(args.matrix_traces),
                   "--out", str(args.out / "matrix")])
    print("\n=== summary")
    for name, status, seconds in stages:
        print(f"  {'ok  ' if status == EXIT_OK else 'FAIL'} {name} ({seconds:.1f} s)")
    failed = sum(status != EXIT_OK for _, status, _ in stages)
    print(f"{len(stages) - failed} passed, {failed} failed")
    return EXIT_OK if failed == 0 else EXIT_VIOLATION


COMMAND = Command("main", "the main job: behaviour cases, model check of the default scenario, Spark conformance",
                  _arguments, cmd_main)
