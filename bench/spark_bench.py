"""Benchmark: the breadth-first search on Spark (``txnspec check --master``) against the one-process engines.

    python bench/spark_bench.py [scenario] [config ...]

Configurations (default: all, in this order): ``exact`` (``txnspec check``'s engine, the safety properties),
``levels-2`` (``--workers 2``), ``local-2`` (Spark ``local[2]``), ``standalone-1`` and ``standalone-2`` (a
standalone master on 127.0.0.1 with one or two workers of one core each: one or two executors). Each runs in a
fresh process and prints one JSON line: states, transitions, depth, the search's seconds (Spark: without
starting the session, which is reported apart), and the CPU seconds of every process that worked for it
(the driver, its JVM and Python workers; for a standalone cluster also its daemons, executors and their
Python workers), so that a run on a machine shared with other work can still be compared. The load average
at the start is printed too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIGS = ("exact", "levels-2", "local-2", "standalone-1", "standalone-2")
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of_tree(roots: list[int]) -> float:
    """CPU seconds (user + system, of the processes and their reaped children) of ``roots`` and descendants."""
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(x) for x in fields[11:15]) / _TICK
    total, todo, seen = 0.0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += times.get(pid, 0.0)
        todo.extend(child for child, p in parent.items() if p == pid)
    return total


def run(scenario: str, config: str) -> dict[str, Any]:
    from txnspec.checker import check
    from txnspec.checker.levels import check_levels
    from txnspec.conformance.model_factory import ModelFactory

    factory = ModelFactory(scenario)
    model = factory()
    names = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    row: dict[str, Any] = {"scenario": scenario, "config": config, "load_average": os.getloadavg()[0]}
    if config in ("exact", "levels-2"):
        before = _cpu_of_tree([os.getpid()])  # with --workers 2, the forked workers are reaped children
        result = check(model, properties=names) if config == "exact" else check_levels(model, properties=names,
                                                                                          workers=2)
        row["cpu_seconds"] = round(_cpu_of_tree([os.getpid()]) - before, 1)
    else:
        row.update(_spark(factory, names, config))
        result = row.pop("result")
    row.update(states=result.states, transitions=result.transitions, depth=result.depth, ok=result.ok,
               seconds=round(result.seconds, 1), states_per_second=round(result.rate))
    return row


def _spark(factory: Any, names: list[str], config: str) -> dict[str, Any]:
    from txnspec.checker.spark_bfs import check_spark
    from txnspec.conformance.spark_cluster import standalone_cluster
    from txnspec.conformance.spark_job import spark_session

    with tempfile.TemporaryDirectory(prefix="txnspec-spark-bench-") as scratch:
        if config == "local-2":
            started = time.perf_counter()
            session = spark_session("local[2]", app_name="txnspec-check-bench")
            row: dict[str, Any] = {"session_seconds": round(time.perf_counter() - started, 1)}
            before = _cpu_of_tree([os.getpid()])
            row["result"] = check_spark(factory, session.sparkContext, properties=names)
            row["cpu_seconds"] = round(_cpu_of_tree([os.getpid()]) - before, 1)
            session.stop()
            return row
        executors = int(config.rsplit("-", 1)[1])
        with standalone_cluster(Path(scratch), workers=executors, cores=1, memory="4g") as cluster:
            daemons = [int(cluster.pid_file(cls, n).read_text()) for cls, n in cluster.daemons]
            started = time.perf_counter()
            session = spark_session(cluster.master, app_name="txnspec-check-bench")
            row = {"session_seconds": round(time.perf_counter() - started, 1)}
            before = _cpu_of_tree([os.getpid(), *daemons])
            row["result"] = check_spark(factory, session.sparkContext, properties=names)
            row["cpu_seconds"] = round(_cpu_of_tree([os.getpid(), *daemons]) - before, 1)
            session.stop()
            return row


def main(argv: list[str]) -> None:
    scenario = argv[0] if argv else "default"
    configs = argv[1:] or list(CONFIGS)
    for config in configs:
        if config not in CONFIGS:
            raise SystemExit(f"unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
        out = subprocess.run([sys.executable, __file__, "--one", scenario, config], capture_output=True, text=True,
                             check=False)
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else json.dumps(
            {"config": config, "error": out.stderr.strip()[-2000:]})
        print(line, flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        # SIGTERM ends the run through SystemExit, so that a standalone cluster is stopped on the way out
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        print(json.dumps(run(sys.argv[2], sys.argv[3])))
    else:
        main(sys.argv[1:])
