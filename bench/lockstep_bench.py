"""The main conformance stage's work per trace in one process: generate a random walk on the spec, replay it on
the implementation (``spark_job.run_task``, no shrinking), wall and CPU seconds.

    python bench/lockstep_bench.py [--traces 500] [--scenario default]

Run against the tree before the lock-step relation (issue 29) by extracting it (``git archive e0b9f2b spec
checker impl conformance | tar -x -C /tmp/old/src``, a ``txnspec`` namespace of symlinks in
``/tmp/old/path/txnspec/``) and ``PYTHONPATH=/tmp/old/path python bench/lockstep_bench.py``; alternate the two.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=500)
    parser.add_argument("--scenario", default="default")
    args = parser.parse_args(argv)

    from txnspec.conformance.spark_job import JobConfig, plan_tasks, run_task

    config = JobConfig(args.scenario, args.traces, strategy="random", adapter="impl", shrink=False)
    t0, c0 = time.monotonic(), time.process_time()
    verdicts = [run_task(config, *task)["verdict"] for task in plan_tasks(config)]
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    print(f"{args.scenario}: {args.traces} traces, {verdicts.count('pass')} passed; wall {wall:.1f} s "
          f"({args.traces / wall:.0f} traces/s), CPU {cpu:.1f} s ({args.traces / cpu:.0f} traces/CPU-s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
