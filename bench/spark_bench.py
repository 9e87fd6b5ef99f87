"""Benchmark: the breadth-first search on Spark (``txnspec check --master``) against the one-process engines.

    python bench/spark_bench.py [scenario] [config ...] [--max-depth D] [--rounds R]

Configurations (default: all, in this order): ``exact`` (``txnspec check``'s engine, the safety properties),
``levels-2`` (``--workers 2``), ``partitioned-2`` (``--store partitioned --workers 2``), ``local-2`` (Spark
``local[2]``), ``local-2-stable`` (the same with the stable fingerprints and sockets between the tasks, as on a
cluster of several hosts), ``standalone-1`` and ``standalone-2`` (a standalone master on 127.0.0.1 with one or two
workers of one core each: one or two executors). Each runs in a fresh process and prints one JSON line: states,
transitions, depth, the search's seconds (Spark: from the barrier job's start, with its tasks' start and their
model's build, reported apart as ``tasks_start_seconds``; without starting the session, reported as
``session_seconds``), how the states were stored (Spark: which fingerprints and transport the tasks used), and the
CPU seconds of every process that worked for it (the driver, its JVM and Python workers; for a standalone cluster
also its daemons, executors and their Python workers), so that a run on a machine shared with other work can still
be compared. The 1-minute load average at the start and at the end is printed too. With ``--max-depth`` every
configuration stops at that depth (the same states); ``--rounds`` repeats the configurations in turn. After the JSON
lines, a Markdown table gives each run's states a second (wall and CPU) and its ratio to the ``levels-2`` run of the
same round (issue 34: Spark ``local[2]`` at least half the throughput of ``--workers 2``).
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

CONFIGS = ("exact", "levels-2", "partitioned-2", "local-2", "local-2-stable", "standalone-1", "standalone-2")
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


def run(scenario: str, config: str, max_depth: int | None) -> dict[str, Any]:
    from txnspec.checker import check
    from txnspec.checker.levels import check_levels
    from txnspec.checker.partitioned import check_partitioned
    from txnspec.conformance.model_factory import ModelFactory

    factory = ModelFactory(scenario)
    model = factory()
    names = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    row: dict[str, Any] = {"scenario": scenario, "config": config, "max_depth": max_depth,
                           "load_average": os.getloadavg()[0]}
    if config in ("exact", "levels-2", "partitioned-2"):
        before = _cpu_of_tree([os.getpid()])  # with --workers 2, the forked workers are reaped children
        if config == "exact":
            result = check(model, properties=names, max_depth=max_depth)
        elif config == "levels-2":
            result = check_levels(model, properties=names, workers=2, max_depth=max_depth)
        else:
            result = check_partitioned(model, properties=names, workers=2, max_depth=max_depth)
        row["cpu_seconds"] = round(_cpu_of_tree([os.getpid()]) - before, 1)
    else:
        row.update(_spark(factory, names, config, max_depth))
        result = row.pop("result")
    row.update(states=result.states, transitions=result.transitions, depth=result.depth, ok=result.ok,
               seconds=round(result.seconds, 1), states_per_second=round(result.rate), store=result.store,
               load_average_after=os.getloadavg()[0])
    return row


def _timing_tasks_start(row: dict[str, Any]) -> None:
    """Record in ``row`` how long the barrier stage's tasks took to connect (job start to every hello): the part
    of the Spark row's seconds that is not the search itself."""
    from txnspec.checker import spark_bfs

    start, connect = spark_bfs._Coordinator.start, spark_bfs._Coordinator.connect

    def timed_start(self: Any, plan: Any) -> None:
        self.began = time.perf_counter()
        start(self, plan)

    def timed_connect(self: Any) -> Any:
        answer = connect(self)
        row["tasks_start_seconds"] = round(time.perf_counter() - self.began, 1)
        return answer

    spark_bfs._Coordinator.start, spark_bfs._Coordinator.connect = timed_start, timed_connect  # type: ignore


def _spark(factory: Any, names: list[str], config: str, max_depth: int | None) -> dict[str, Any]:
    from txnspec.checker.spark_bfs import check_spark
    from txnspec.conformance.spark_cluster import standalone_cluster
    from txnspec.conformance.spark_job import spark_session

    with tempfile.TemporaryDirectory(prefix="txnspec-spark-bench-") as scratch:
        if config.startswith("local-2"):
            started = time.perf_counter()
            session = spark_session("local[2]", app_name="txnspec-check-bench")
            row: dict[str, Any] = {"session_seconds": round(time.perf_counter() - started, 1)}
            _timing_tasks_start(row)
            before = _cpu_of_tree([os.getpid()])
            forced = {"fingerprints": "stable", "transport": "sockets"} if config == "local-2-stable" else {}
            row["result"] = check_spark(factory, session.sparkContext, properties=names, max_depth=max_depth,
                                        **forced)
            row["cpu_seconds"] = round(_cpu_of_tree([os.getpid()]) - before, 1)
            session.stop()
            return row
        executors = int(config.rsplit("-", 1)[1])
        with standalone_cluster(Path(scratch), workers=executors, cores=1, memory="4g") as cluster:
            daemons = [int(cluster.pid_file(cls, n).read_text()) for cls, n in cluster.daemons]
            started = time.perf_counter()
            session = spark_session(cluster.master, app_name="txnspec-check-bench")
            row = {"session_seconds": round(time.perf_counter() - started, 1)}
            _timing_tasks_start(row)
            before = _cpu_of_tree([os.getpid(), *daemons])
            row["result"] = check_spark(factory, session.sparkContext, properties=names, max_depth=max_depth)
            row["cpu_seconds"] = round(_cpu_of_tree([os.getpid(), *daemons]) - before, 1)
            session.stop()
            return row


def _table(rows: list[dict[str, Any]]) -> None:
    print("| round | configuration | load before, after | states | transitions | wall s | of it tasks' start s "
          "| session s | states/s | CPU s | states / CPU s | vs levels-2 (wall) | vs levels-2 (CPU) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "error" in row:
            print(f"| {row['round']} | {row['config']} | error: {row['error'][-200:]!r} |")
            continue
        base = next((r for r in rows if r["round"] == row["round"] and r["config"] == "levels-2" and "error" not in r),
                    None)
        per_cpu = row["states"] / max(row["cpu_seconds"], 1e-9)
        ratios = "– | –" if base is None else (f"{row['states_per_second'] / base['states_per_second']:.2f}x | "
                                                f"{per_cpu / (base['states'] / max(base['cpu_seconds'], 1e-9)):.2f}x")
        print(f"| {row['round']} | {row['config']} | {row['load_average']:.1f}, {row['load_average_after']:.1f} | "
              f"{row['states']:,} | {row['transitions']:,} | {row['seconds']} | "
              f"{row.get('tasks_start_seconds', '–')} | "
              f"{row.get('session_seconds', '–')} | {row['states_per_second']:,} | {row['cpu_seconds']} | "
              f"{per_cpu:,.0f} | {ratios} |")


def main(argv: list[str]) -> None:
    max_depth, rounds, rest = None, 1, []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--max-depth":
            max_depth = int(next(arguments))
        elif argument == "--rounds":
            rounds = int(next(arguments))
        else:
            rest.append(argument)
    scenario = rest[0] if rest else "default"
    configs = rest[1:] or list(CONFIGS)
    rows: list[dict[str, Any]] = []
    for config in configs:
        if config not in CONFIGS:
            raise SystemExit(f"unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
    for round_ in range(1, rounds + 1):
        for config in configs:
            out = subprocess.run([sys.executable, __file__, "--one", scenario, config, str(max_depth or 0)],
                                 capture_output=True, text=True, check=False)
            line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else json.dumps(
                {"config": config, "error": out.stderr.strip()[-2000:]})
            print(line, flush=True)
            rows.append({**json.loads(line), "round": round_})
    _table(rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        # SIGTERM ends the run through SystemExit, so that a standalone cluster is stopped on the way out
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        print(json.dumps(run(sys.argv[2], sys.argv[3], int(sys.argv[4]) or None)))
    else:
        main(sys.argv[1:])
