"""Benchmark: the successor function of the Kafka system model, as CPU seconds of a plain breadth-first
search over a scenario (no checker bookkeeping), so that a change to the system model can be compared with
the tree before it side by side.

    python bench/action_bench.py default new                       # this tree
    PYTHONPATH=/tmp/old/path python bench/action_bench.py default old   # another tree (see bench/RESULTS.md)

Prints the distinct states, transitions, CPU seconds (``time.process_time``, steadier than wall time on a
loaded machine) and states per CPU second.
"""

from __future__ import annotations

import sys

from spec_bench import plain_bfs  # bench/ is the script's folder, hence on sys.path


def main(scenario: str, label: str) -> None:
    run = plain_bfs(scenario)
    cpu = run["cpu_seconds"]
    print(label, run["states"], run["transitions"], f"cpu {cpu:.1f}s", f"{run['states'] / cpu:.0f} states/cpu-s",
          f"wall {run['seconds']:.1f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "default", sys.argv[2] if len(sys.argv) > 2 else "")
