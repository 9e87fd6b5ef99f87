"""The partitioned search beside the level-synchronous workers (issue 34, item 4): wall time and the
coordinator's share.

For a scenario and a depth bound, runs ``check_levels`` (workers expand, the coordinator merges every level's
fingerprints) and ``check_partitioned`` (each worker owns a part of the fingerprints: no merge in the coordinator)
with the same number of workers, alternately, ``--rounds`` times, in this process (the workers are forked). Prints
states, transitions, wall seconds, the coordinator's CPU seconds and their share of the wall time (the serial part
of the search that the coordinator's own work makes; waiting at a level's barrier for the slowest worker is not
in it).

Usage::

    python bench/partitioned_bench.py --scenario large --max-depth 20 --workers 2 --rounds 2
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--max-depth", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from txnspec.checker.levels import check_levels
    from txnspec.checker.partitioned import check_partitioned
    from txnspec.spec.model import build_model

    model = build_model(args.scenario)
    names = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    print("| round | engine | states | transitions | wall s | coordinator CPU s | coordinator / wall |")
    print("|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for engine in (check_levels, check_partitioned):
            started, cpu = time.perf_counter(), time.process_time()
            result = engine(model, properties=names, workers=args.workers, max_depth=args.max_depth)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(f"| {round_} | {engine.__name__} | {result.states:,} | {result.transitions:,} | {wall:.1f} | "
                  f"{cpu:.2f} | {cpu / wall:.2%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
