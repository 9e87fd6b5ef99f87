"""The partitioned search beside the other engines (issue 34, item 4): wall time, the coordinator's share, memory.

Two modes.

In this process (default): for a scenario and a depth bound, runs ``check_levels`` (workers expand, the coordinator
merges every level's fingerprints) and ``check_partitioned`` (each worker owns a part of the fingerprints: no merge
in the coordinator) with the same number of workers, alternately, ``--rounds`` times (the workers are forked).
Prints states, transitions, wall seconds, the coordinator's CPU seconds and their share of the wall time (the
serial part of the search that the coordinator's own work makes; waiting at a level's barrier for the slowest
worker is not in it).

Fresh processes (``--fresh``): each engine of ``--engines`` runs as one ``txnspec check --no-liveness --json`` in a
fresh process, one after the other, ``--rounds`` times: ``exact`` (the one-process exact engine),
``partitioned-N`` (``--store partitioned --workers N``), ``levels-N`` (``--workers N``). While each runs, the
proportional set size (PSS: a page shared by forked processes counts once in all) of the command and its
children is sampled every 0.2 s; bytes a state are the peak PSS less the peak of the same command on ``tiny``
(the interpreter and the spec loaded), over the states. The load average before each run is printed.

Usage::

    python bench/partitioned_bench.py --scenario large --max-depth 20 --workers 2 --rounds 2
    python bench/partitioned_bench.py --fresh --scenario large --engines exact,partitioned-1,partitioned-2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (Linux's /proc)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _pss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def _command(engine: str, scenario: str, max_depth: int | None) -> list[str]:
    argv = [sys.executable, "-m", "txnspec.cli", "check", "--scenario", scenario, "--no-liveness", "--json"]
    if max_depth is not None:
        argv += ["--max-depth", str(max_depth)]
    if engine == "exact":
        return argv
    kind, _, workers = engine.rpartition("-")
    if kind == "partitioned":
        return [*argv, "--store", "partitioned", "--workers", workers]
    if kind == "levels":
        return [*argv, "--store", "fingerprints", "--workers", workers]
    raise SystemExit(f"unknown engine {engine!r} (exact, partitioned-N, levels-N)")


def _fresh_run(argv: list[str]) -> tuple[dict, float, int]:
    """The verdict, the wall seconds and the peak PSS of the command's process tree."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _pss(_tree(process.pid)))
        time.sleep(0.2)
    out, err = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {err.strip()}")
    return json.loads(out), wall, peak


def fresh(args: argparse.Namespace) -> int:
    engines = args.engines.split(",")
    idle = {engine: _fresh_run(_command(engine, "tiny", None))[2] for engine in engines}
    print("| round | engine | load before | states | wall s | states/s | coordinator CPU s | coordinator / wall "
          "| peak PSS MB | bytes/state |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for engine in engines:
            load = os.getloadavg()[0]
            verdict, wall, peak = _fresh_run(_command(engine, args.scenario, args.max_depth))
            states, cpu = verdict["states"], verdict.get("coordinator_seconds")
            share = f"{cpu:.2f} | {cpu / wall:.2%}" if cpu is not None else "– | –"
            print(f"| {round_} | {engine} | {load:.1f} | {states:,} | {wall:.1f} | {states / wall:,.0f} | {share} | "
                  f"{peak / 2**20:,.0f} | {(peak - idle[engine]) / max(states, 1):,.0f} |", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--max-depth", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="each engine in a fresh process, memory sampled")
    parser.add_argument("--engines", default="exact,partitioned-1,partitioned-2")
    args = parser.parse_args()
    if args.fresh:
        return fresh(args)
    from txnspec.checker.levels import check_levels
    from txnspec.checker.partitioned import check_partitioned
    from txnspec.spec.model import build_model

    model = build_model(args.scenario)
    depth = 20 if args.max_depth is None else args.max_depth
    names = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    print("| round | engine | states | transitions | wall s | coordinator CPU s | coordinator / wall |")
    print("|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for engine in (check_levels, check_partitioned):
            started, cpu = time.perf_counter(), time.process_time()
            result = engine(model, properties=names, workers=args.workers, max_depth=depth)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(f"| {round_} | {engine.__name__} | {result.states:,} | {result.transitions:,} | {wall:.1f} | "
                  f"{cpu:.2f} | {cpu / wall:.2%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
