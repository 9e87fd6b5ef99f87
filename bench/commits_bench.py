"""Benchmark: the spec's successor function of two trees side by side in one run (a base commit's worktree and
this tree), so that a change to the system model is measured against the tree before it under the same load.

    git worktree add --detach /work/wt-base 597ae19   # and its own venv, as the helper guide says
    python bench/commits_bench.py --base /work/wt-base [--rounds 3] [--engine bfs|safety|all] [scenario ...]

Each measurement runs in a fresh process of the tree's own interpreter (``TREE/.venv/bin/python``), which imports
that tree's ``txnspec``; the trees alternate round by round (base, new, base, new...). Engines: ``bfs`` is a plain
set-and-deque breadth-first search over the model's ``next_steps`` (the successor function alone, as
``bench/spec_bench.py``'s plain BFS), ``safety`` and ``all`` are ``txnspec.checker.check`` with the safety
properties only or with every property (liveness records the state graph). Each prints distinct states,
transitions, CPU seconds (``time.process_time``, steadier than wall time on a shared machine), wall seconds,
states per CPU second and bytes per stored state (the growth of the process's peak RSS over the search, divided
by the states); the summary gives, per tree, the round with the least CPU time, and the ratio new / base.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

_CHILD = r"""
import json, resource, sys, time
from collections import deque
import txnspec.spec
from txnspec.spec.model import build_model

scenario, engine = sys.argv[1], sys.argv[2]
model = build_model(scenario)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu, wall = time.process_time(), time.perf_counter()
if engine == "bfs":
    seen = set(model.init_states())
    queue = deque(seen)
    transitions = 0
    next_steps = model.next_steps
    while queue:
        for _, nxt in next_steps(queue.popleft()):
            transitions += 1
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    states = len(seen)
else:
    from txnspec.checker import check
    names = None if engine == "all" else [p.name for p in model.properties if p.expectation.value != "leads_to"]
    result = check(model, properties=names)
    states, transitions = result.states, result.transitions
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) * 1024
print(json.dumps({"states": states, "transitions": transitions, "cpu_s": cpu, "wall_s": wall,
                  "bytes_per_state": grown / states, "spec": txnspec.spec.__path__[0]}))
"""


def measure(tree: str, scenario: str, engine: str) -> dict[str, Any]:
    python = os.path.join(tree, ".venv", "bin", "python")
    done = subprocess.run([python, "-c", _CHILD, scenario, engine], capture_output=True, text=True, check=True,
                          cwd=tree)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not os.path.realpath(result["spec"]).startswith(os.path.realpath(tree)):
        raise RuntimeError(f"{python} imported txnspec from {result['spec']}, not from {tree}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", default=["default"])
    parser.add_argument("--base", required=True, help="the base commit's worktree (with its own .venv)")
    parser.add_argument("--new", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the tree to compare (default: this one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", choices=("bfs", "safety", "all"), default="bfs")
    args = parser.parse_args()
    rows = []
    for scenario in args.scenarios:
        best: dict[str, dict[str, Any]] = {}
        for round_no in range(1, args.rounds + 1):
            for label, tree in (("base", args.base), ("new", args.new)):
                r = measure(tree, scenario, args.engine)
                row = {"scenario": scenario, "engine": args.engine, "round": round_no, "tree": label,
                       "states": r["states"], "transitions": r["transitions"], "cpu_s": round(r["cpu_s"], 2),
                       "wall_s": round(r["wall_s"], 2), "states_per_cpu_s": round(r["states"] / r["cpu_s"]),
                       "bytes_per_state": round(r["bytes_per_state"])}
                print(json.dumps(row), flush=True)
                rows.append(row)
                if label not in best or row["cpu_s"] < best[label]["cpu_s"]:
                    best[label] = row
        base, new = best["base"], best["new"]
        if (base["states"], base["transitions"]) != (new["states"], new["transitions"]):
            sys.exit(f"{scenario}: the trees explore different spaces: {base} / {new}")
        print(json.dumps({"scenario": scenario, "engine": args.engine, "best_of": args.rounds,
                          "base_states_per_cpu_s": base["states_per_cpu_s"],
                          "new_states_per_cpu_s": new["states_per_cpu_s"],
                          "speedup": round(base["cpu_s"] / new["cpu_s"], 2),
                          "base_bytes_per_state": base["bytes_per_state"],
                          "new_bytes_per_state": new["bytes_per_state"]}), flush=True)


if __name__ == "__main__":
    main()
