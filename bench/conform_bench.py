"""Conformance throughput: the same traces replayed in one process and on Spark ``local[2]``.

    python bench/conform_bench.py [--scenario tiny] [--adapter impl] [--sizes 1000 10000 100000]

For each size: random walks (no covering plan, no shrinking) generated and replayed by ``run_task`` in a
loop in this process, then by ``run_job`` on a Spark ``local[2]`` session started once (its start time is
reported apart). The Spark figure includes the Parquet write and the summary's aggregation jobs; the
driver collects only aggregates. Peak RSS of this (driver) process is reported at the end.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="tiny")
    parser.add_argument("--adapter", default="impl")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args(argv)

    from txnspec.conformance.spark_job import JobConfig, plan_tasks, run_job, run_task, spark_session

    rows = []
    started = time.monotonic()
    spark = spark_session("local[2]")
    session_seconds = time.monotonic() - started
    try:
        for size in args.sizes:
            config = JobConfig(args.scenario, size, strategy="random", adapter=args.adapter, shrink=False)
            t0 = time.monotonic()
            passed = sum(run_task(config, *task)["verdict"] == "pass" for task in plan_tasks(config))
            one = time.monotonic() - t0
            with tempfile.TemporaryDirectory() as out:
                t0 = time.monotonic()
                summary = run_job(config, master="local[2]", out=Path(out), session=spark).summary
                on_spark = time.monotonic() - t0
            assert summary["passed"] == passed, (summary["passed"], passed)
            rows.append((size, one, on_spark, passed))
    finally:
        spark.stop()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scenario {args.scenario}, adapter {args.adapter}; Spark local[2] session start {session_seconds:.1f} s")
    print("| traces | one process | traces/s | Spark local[2] run | traces/s | ratio (one process / Spark) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size, one, on_spark, _ in rows:
        print(f"| {size:,} | {one:.1f} s | {size / one:,.0f} | {on_spark:.1f} s | {size / on_spark:,.0f} | "
              f"{one / on_spark:.2f} |")
    print(f"driver peak RSS {peak_mb:,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
