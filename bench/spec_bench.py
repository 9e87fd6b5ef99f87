"""Benchmark: the checker on the Kafka spec's scenarios, against a plain set-and-deque BFS of the same
successor function (the CPython limit for this model), measured side by side in one run.

    python bench/spec_bench.py [scenario ...]        (default: default large)

For each scenario: distinct states, transitions, seconds and states/s for (1) a plain BFS that only
collects states, (2) ``txnspec.checker.check`` with the safety properties only, (3) with every property
including liveness (which records the state graph); and peak memory per stored state of (2), from the
process's peak RSS growth (``resource.getrusage``) over a fresh child process per measurement.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import sys
import time
from collections import deque
from typing import Any


def plain_bfs(scenario: str) -> dict[str, Any]:
    from txnspec.spec.model import build_model

    model = build_model(scenario)
    start, cpu_start = time.perf_counter(), time.process_time()
    seen = set(model.init_states())
    queue = deque(seen)
    transitions = 0
    next_steps = model.next_steps
    while queue:
        state = queue.popleft()
        for _, nxt in next_steps(state):
            transitions += 1
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return {"states": len(seen), "transitions": transitions, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu_start}


def _txnspec(scenario: str, liveness: bool) -> dict[str, Any]:
    from txnspec.checker import check
    from txnspec.spec.model import build_model

    model = build_model(scenario)
    names = None if liveness else [p.name for p in model.properties if p.expectation.value != "leads_to"]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = check(model, properties=names)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"states": result.states, "transitions": result.transitions, "seconds": result.seconds,
            "ok": result.ok, "bytes_per_state": (after - before) * 1024 / max(result.states, 1)}


def _run(kind: str, scenario: str, queue: Any) -> None:
    if kind == "plain":
        queue.put(plain_bfs(scenario))
    else:
        queue.put(_txnspec(scenario, liveness=(kind == "all")))


def measure(kind: str, scenario: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_run, args=(kind, scenario, queue))
    process.start()
    result = queue.get()
    process.join()
    return dict(result)


def main(scenarios: list[str]) -> None:
    rows = []
    for scenario in scenarios:
        plain = measure("plain", scenario)
        safety = measure("safety", scenario)
        full = measure("all", scenario)
        assert plain["states"] == safety["states"] == full["states"], (plain, safety, full)
        for name, r in (("plain set+deque BFS", plain), ("txnspec check, safety", safety),
                        ("txnspec check, all (liveness)", full)):
            rate = r["states"] / r["seconds"]
            row = {"scenario": scenario, "engine": name, "states": r["states"], "transitions": r["transitions"],
                   "seconds": round(r["seconds"], 1), "states_per_s": round(rate),
                   "ratio_to_plain": round(rate / (plain["states"] / plain["seconds"]), 2)}
            if "bytes_per_state" in r:
                row["peak_bytes_per_state"] = round(r["bytes_per_state"])
            rows.append(row)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["default", "large"])
