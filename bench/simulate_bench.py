"""Bug-finding on ``full`` by simulation (issue 34, goal 3): every seeded Kafka bug, measured in one run.

For each bug variant, ``txnspec check --scenario full --variant V --simulate --seconds S --workers W --json``
runs twice in a fresh process: once judging every property (what a user who checks "on the big configuration"
sees: the first violation of any property) and once with ``--property`` the variant's own (the bug it stands
for). Each row gives the property reported, the time the walkers took to meet it (from the start of the walks),
the walks, the counterexample's length before and after shrinking, the wall time of the command (Python start,
shrinking included) and its CPU time (the command and its worker processes: on a loaded machine the wall time
is inflated, the CPU time much less), and the length of the shortest counterexample breadth first finds on the
variant's small scenario (``tests/spec/test_variants.py``), with the shrunk length over it. Then ``current`` runs
``--current-seconds`` of simulation on ``full``: it must meet no violation.

Usage::

    python bench/simulate_bench.py                      # 60 s a variant, 2 workers, current for 600 s
    python bench/simulate_bench.py --seconds 20 --current-seconds 30 --variants zombie-not-fenced
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

# variant -> (small scenario, property, shortest counterexample there): tests/spec/test_variants.py's table
BUGS = {
    "zombie-not-fenced": ("zombie", "fenced_producer_never_commits", 19),
    "kafka-17754": ("delayed-end-txn", "end_txn_applies_to_its_transaction", 19),
    "hanging-transaction": ("delayed-produce", "no_hanging_transaction", 11),
    "late-produce-joins-next": ("delayed-produce", "read_committed_only_committed", 23),
    "no-duplicate-detection": ("retry", "no_duplicate_append", 8),
    "failover-without-markers": ("failover", "prepared_transactions_complete", 13),
    "zombie-offsets-not-fenced": ("rebalance", "no_fenced_member_offsets_commit", 11),
}


def run(argv: list[str], timeout: float) -> tuple[int, dict[str, Any], float, float]:
    """``txnspec`` with ``argv`` in a fresh process: exit status, JSON report, wall and CPU seconds (the command
    and its workers, which it waits for)."""
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "txnspec.cli", *argv, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode not in (0, 1):
        raise RuntimeError(f"txnspec {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done.returncode, json.loads(done.stdout), wall, cpu


def shortest_on_small(variant: str) -> int:
    """The length breadth first finds on the variant's small scenario, measured now (and checked against the pin)."""
    from txnspec.checker import check
    from txnspec.spec.model import build_model

    scenario, prop, pinned = BUGS[variant]
    cex = check(build_model(scenario, variant), properties=[prop]).verdict(prop).counterexample
    assert cex is not None and len(cex) == pinned, (variant, cex and len(cex), pinned)
    return len(cex)


def row(variant: str, what: str, status: int, report: dict[str, Any], wall: float, cpu: float, small: int) -> str:
    sim = report["simulation"]
    if status == 0:
        return (f"| {variant} | {what}: none | not found in {sim['seconds']:.0f} s | {sim['walks']:,} | - | - | "
                f"{wall:.0f} | {cpu:.0f} | {small} | - |")
    violated = [p["name"] for p in report["properties"] if p["status"] == "violated"] or ["deadlock"]
    # the small scenario's shortest is the variant's property's: another property's path is not compared with it
    ratio = f"{sim['shrunk_length'] / small:.2f}" if violated[0] == BUGS[variant][1] else "(another property)"
    return (f"| {variant} | {what}: {violated[0]} | {sim['seconds_to_violation']:.1f} | {sim['walks']:,} | "
            f"{sim['found_length']} | {sim['shrunk_length']} | {wall:.1f} | {cpu:.1f} | {small} | {ratio} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--current-seconds", type=float, default=600.0)
    parser.add_argument("--variants", nargs="*", default=list(BUGS))
    args = parser.parse_args()
    unknown = sorted(set(args.variants) - set(BUGS))
    if unknown:
        parser.error(f"unknown variants {', '.join(unknown)} (known: {', '.join(BUGS)})")
    print(f"started {time.strftime('%H:%M:%S', time.gmtime())} UTC, load average {os.getloadavg()[0]:.1f}", flush=True)
    print("| variant | properties judged: first violated | s to find | walks | length found | shrunk | "
          "command s | CPU s | BFS shortest on small scenario | shrunk / shortest |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for variant in args.variants:
        small = shortest_on_small(variant)
        prop = BUGS[variant][1]
        base = ["check", "--scenario", "full", "--variant", variant, "--simulate", "--seconds", str(args.seconds),
                "--workers", str(args.workers), "--seed", str(args.seed)]
        for what, argv in (("all", base), (f"{prop} only", [*base, "--property", prop])):
            status, report, wall, cpu = run(argv, args.seconds * 4 + 120)
            print(row(variant, what, status, report, wall, cpu, small), flush=True)
    print(f"current started {time.strftime('%H:%M:%S', time.gmtime())} UTC, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    status, report, wall, cpu = run(["check", "--scenario", "full", "--variant", "current", "--simulate",
                                     "--seconds", str(args.current_seconds), "--workers", str(args.workers),
                                     "--seed", str(args.seed)], args.current_seconds * 2 + 120)
    sim = report["simulation"]
    print(f"\ncurrent on full, {args.current_seconds:.0f} s, {args.workers} workers: exit {status}, "
          f"{report['verdict']}; {sim['walks']:,} walks, {sim['steps']:,} steps, {sim['distinct']:,} distinct states, "
          f"longest walk {sim['longest']}, CPU {cpu:.0f} s, never taken: {', '.join(report['never_taken']) or 'none'}")
    print(f"finished {time.strftime('%H:%M:%S', time.gmtime())} UTC, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
