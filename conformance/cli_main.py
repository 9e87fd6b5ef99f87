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
import shutil
import subprocess
import sys
import time
from pathlib import Path

from txnspec.conformance.cli import EXIT_OK, EXIT_VIOLATION, subcommand
from txnspec.conformance.cli import main as cli_main

CASES = Path(__file__).resolve().parent / "data" / "public.jsonl"


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="default", help="the scenario to model-check")
    p.add_argument("--traces", type=int, default=10_000, help="traces for the Spark conformance run")
    p.add_argument("--conform-scenario", default="default",
                   help="the scenario whose traces are replayed against the implementation on Spark")
    p.add_argument("--out", type=Path, default=Path("out"), help="where the conformance results go")
    p.add_argument("--matrix-traces", type=int, default=100,
                   help="random walks per scenario and transaction version in the conformance matrix")
    p.add_argument("--skip-spark", action="store_true", help="skip the Spark stages (conformance and matrix)")


def java_problem() -> str | None:
    """Why Spark cannot start here, or None. Spark needs a Java runtime (17 or 21) on PATH or JAVA_HOME."""
    java = shutil.which("java")
    if java is None:
        return ("Spark needs Java 17 (or 21) and none was found: install a JDK (e.g. `apt-get install "
                "openjdk-17-jre-headless`) or set JAVA_HOME; the other stages do not need it")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`java -version` failed ({exc}); Spark needs a working Java 17 runtime"
    if out.returncode != 0:
        return f"`java -version` failed: {out.stderr.strip()[:200]}"
    return None


@subcommand("main", "the main job: behaviour cases, model check of the default scenario, Spark conformance",
            _arguments)
def cmd_main(args: argparse.Namespace) -> int:
    stages: list[tuple[str, int, float]] = []

    def stage(name: str, argv: list[str]) -> None:
        print(f"\n=== {name}: txnspec {' '.join(argv)}", flush=True)
        started = time.monotonic()
        status = cli_main(argv)
        stages.append((name, status, time.monotonic() - started))

    stage("cases on the spec", ["cases", str(CASES), "--target", "spec", "--quiet"])
    try:
        import txnspec.conformance.case_targets.impl_target
        stage("cases on the implementation", ["cases", str(CASES), "--target", "impl", "--quiet"])
    except ModuleNotFoundError:
        print("\n(the implementation's case target is not built yet: skipped)")
    stage(f"model check ({args.scenario})", ["check", "--scenario", args.scenario])
    if not args.skip_spark:
        problem = java_problem()
        if problem:
            print(f"\n=== Spark conformance: cannot run: {problem}", file=sys.stderr)
            stages.append(("Spark conformance", EXIT_VIOLATION, 0.0))
        else:
            try:
                import txnspec.conformance.spark_job  # noqa: F401
                stage("Spark conformance (implementation)",
                      ["conform", "--scenario", args.conform_scenario, "--adapter", "impl",
                       "--traces", str(args.traces), "--out", str(args.out)])
                stage("conformance matrix (implementation, TV2 and TV1)",
                      ["conform", "--matrix", "--short", "--adapter", "impl", "--traces", str(args.matrix_traces),
                       "--out", str(args.out / "matrix")])
            except ModuleNotFoundError:
                print("\n(the Spark conformance job is not built yet: skipped)")
    print("\n=== summary")
    for name, status, seconds in stages:
        print(f"  {'ok  ' if status == EXIT_OK else 'FAIL'} {name} ({seconds:.1f} s)")
    failed = sum(status != EXIT_OK for _, status, _ in stages)
    print(f"{len(stages) - failed} passed, {failed} failed")
    return EXIT_OK if failed == 0 else EXIT_VIOLATION
