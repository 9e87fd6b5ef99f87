"""The model checker's engines side by side: one table of states/s and bytes a state (issue 16).

Each row runs ``txnspec check`` in a fresh process, one after the other, and reads its ``--json`` verdict:

* ``before``: the tree given by ``--base`` (e.g. a worktree of 597ae19), exact store, one process;
* ``exact``: this tree, exact store, one process (the new successor function);
* ``fingerprints``: ``--store fingerprints``, one process;
* ``workers N``: ``--workers N``;
* ``symmetry``: ``--workers N`` with the symmetry reduction (one state per class of renamings: fewer states,
  so its counts are its own; every other row of this tree runs with ``--no-symmetry``);
* ``partial-order``: the same with ``--partial-order`` as well (spec/reduction.py: fewer states again);
* ``spark local[N]`` and ``spark standalone, E executors`` (``--master``), when ``--spark`` is given; the
  standalone cluster (a master and E workers of one core on 127.0.0.1) is started here and stopped by PID.

Leads-to properties are left out of every row (``--no-liveness``; the fingerprint and Spark engines do not
judge them), so every row checks the same invariants. Bytes a state: the engine's own ``memory_bytes`` when
it reports one (the fingerprint engines: the growth of every process's peak), else the child's peak RSS minus
the peak RSS of the same tree checking ``tiny`` (the interpreter and the spec loaded), over the states.
Every row of this tree must report the same states and transitions as its first row of the scenario, or the
run fails: a faster engine that explores something else is not faster. (``before`` may differ where the spec
changed between the two trees; the table shows both counts.)

Usage::

    python bench/engines_bench.py --base /work/wt-base --scenarios default large
    python bench/engines_bench.py --scenarios full --max-depth 14 --rows exact fingerprints workers
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SYMMETRY = "symmetry reduced,"
ROWS = ("before", "exact", "fingerprints", "workers", "symmetry", "partial-order", "spark-local", "spark-standalone")


@dataclass
class Run:
    scenario: str
    engine: str
    states: int
    transitions: int
    seconds: float
    bytes_per_state: float | None
    complete: bool


def _txnspec(tree: Path) -> list[str]:
    script = tree / ".venv" / "bin" / "txnspec"
    return [str(script)] if script.exists() else [sys.executable, "-c", "from txnspec.cli import main; "
                                                   "raise SystemExit(main())"]


def _run(tree: Path, args: list[str]) -> tuple[dict, float, int]:
    """The verdict, the wall seconds and the peak RSS (bytes) of one ``txnspec check`` in ``tree``."""
    started = time.perf_counter()
    process = subprocess.Popen([*_txnspec(tree), "check", "--json", "--no-liveness", *args], cwd=tree,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1, 3):
        raise SystemExit(f"txnspec check {' '.join(args)} in {tree} failed (exit {status})")
    return json.loads(out), seconds, usage.ru_maxrss * 1024


def _row(scenario: str, engine: str, tree: Path, args: list[str], idle_rss: int) -> Run:
    verdict, seconds, peak = _run(tree, ["--scenario", scenario, *args])
    states = verdict["states"]
    memory = verdict.get("memory_bytes")
    if memory is None:
        memory = max(0, peak - idle_rss)
    return Run(scenario, engine, states, verdict["transitions"], seconds,
               memory / states if states else None, verdict.get("complete", True))


@contextlib.contextmanager
def _standalone(executors: int) -> Iterator[str]:
    import tempfile

    from txnspec.conformance.spark_cluster import standalone_cluster

    with tempfile.TemporaryDirectory(prefix="txnspec-bench-spark-") as directory, \
            standalone_cluster(Path(directory), workers=executors, cores=1) as cluster:
        yield cluster.master


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="the tree to compare with (row 'before'); skipped without it")
    parser.add_argument("--scenarios", nargs="+", default=["default"])
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-depth", type=int, help="bound every row's depth (for scenarios beyond reach)")
    parser.add_argument("--spark", action="store_true", help="add the Spark rows (local and standalone)")
    args = parser.parse_args(argv)
    depth = ["--max-depth", str(args.max_depth)] if args.max_depth else []
    rows = [r for r in args.rows if (r != "before" or args.base) and (not r.startswith("spark") or args.spark)]
    idle = {tree: _run(tree, ["--scenario", "tiny"])[2] for tree in {HERE, *([args.base] if args.base else [])}}
    runs: list[Run] = []
    for scenario in args.scenarios:
        plan: list[tuple[str, Path, list[str]]] = []
        if "before" in rows:
            plan.append(("before (--base)", args.base, []))
        if "exact" in rows:
            plan.append(("exact, 1 process", HERE, []))
        if "fingerprints" in rows:
            plan.append(("fingerprints, 1 process", HERE, ["--store", "fingerprints"]))
        if "workers" in rows:
            plan.append((f"fingerprints, {args.workers} workers", HERE, ["--workers", str(args.workers)]))
        if "symmetry" in rows:
            plan.append((f"{SYMMETRY} {args.workers} workers", HERE, ["--workers", str(args.workers)]))
        if "partial-order" in rows:
            plan.append((f"{SYMMETRY} partial order, {args.workers} workers", HERE,
                         ["--workers", str(args.workers), "--partial-order"]))
        if "spark-local" in rows:
            plan.append((f"Spark local[{args.workers}]", HERE, ["--master", f"local[{args.workers}]"]))
        for engine, tree, extra in plan:
            every_state = ["--no-symmetry"] if tree == HERE and not engine.startswith(SYMMETRY) else []
            runs.append(_row(scenario, engine, tree, [*extra, *every_state, *depth], idle[tree]))
            print(_line(runs[-1], runs), flush=True)
        if "spark-standalone" in rows:
            for executors in (1, 2):
                with _standalone(executors) as master:
                    runs.append(_row(scenario, f"Spark standalone, {executors} executor(s)", HERE,
                                     ["--master", master, "--no-symmetry", *depth], idle[HERE]))
                print(_line(runs[-1], runs), flush=True)
    print()
    print("| scenario | engine | states | transitions | seconds | states/s | states/s vs first | time vs first "
          "| bytes/state |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(_line(run, runs))
    first: dict[str, Run] = {}
    for run in runs:
        if run.engine.startswith(("before", SYMMETRY)):
            continue
        reference = first.setdefault(run.scenario, run)
        if (run.states, run.transitions) != (reference.states, reference.transitions):
            raise SystemExit(f"{run.engine} on {run.scenario}: {run.states:,} states, {run.transitions:,} "
                             f"transitions; {reference.engine}: {reference.states:,}, {reference.transitions:,}")
    return 0


def _line(run: Run, runs: list[Run]) -> str:
    reference = next(r for r in runs if r.scenario == run.scenario)
    rate = run.states / run.seconds
    ratio = rate / (reference.states / reference.seconds)
    speedup = reference.seconds / run.seconds
    memory = f"{run.bytes_per_state:,.0f}" if run.bytes_per_state is not None else "–"
    partial = "" if run.complete else " (to the depth bound)"
    return (f"| {run.scenario}{partial} | {run.engine} | {run.states:,} | {run.transitions:,} | {run.seconds:.1f} | "
            f"{rate:,.0f} | {ratio:.2f}x | {speedup:.2f}x | {memory} |")


if __name__ == "__main__":
    raise SystemExit(main())
