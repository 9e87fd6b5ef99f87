"""Benchmark: what a stable fingerprint costs against ``hash()``, per successor, in a breadth-first search.

    python bench/fingerprint_bench.py [scenario] [states]        (default: default 20000)

The first ``states`` states of the scenario's breadth-first order are expanded three times, each time into
fresh successor objects (as a search makes them, sharing unchanged sub-states with their parent):
(1) successors only, (2) successors and ``hash()`` of each (the in-process fingerprint of checker/levels.py;
the spec's values cache their hash, so an unchanged sub-state is hashed once), (3) successors and
:func:`txnspec.checker.stable_fingerprint` (BLAKE2b over the canonical encoding, digests of sub-states
remembered by identity), with a fresh fingerprinter, and (4) the same fingerprinter with its memory off
(every state encoded whole). Each figure is the best of three runs; the fingerprinting cost is the time
over (1), per successor, and as a share of (1).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections import deque
from typing import Any


def _sample(model: Any, count: int) -> list[Any]:
    seen = set(model.init_states())
    queue = deque(seen)
    order: list[Any] = []
    while queue and len(order) < count:
        state = queue.popleft()
        order.append(state)
        for _, nxt in model.next_steps(state):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return order


def _expand(model: Any, states: list[Any], mark: Any) -> tuple[float, int]:
    next_steps = model.next_steps
    successors = 0
    started = time.perf_counter()
    for state in states:
        for _, nxt in next_steps(state):
            mark(nxt)
            successors += 1
    return time.perf_counter() - started, successors


def main(argv: list[str]) -> dict[str, Any]:
    from txnspec.checker.stable_fingerprint import Fingerprinter
    from txnspec.spec.model import build_model

    scenario = argv[0] if argv else "default"
    count = int(argv[1]) if len(argv) > 1 else 20_000
    model = build_model(scenario)
    states = _sample(model, count)
    gc.disable()
    runs: dict[str, list[float]] = {"successors": [], "hash": [], "stable": [], "stable_no_memory": []}
    successors = 0
    for _ in range(3):
        seconds, successors = _expand(model, states, lambda s: None)
        runs["successors"].append(seconds)
        runs["hash"].append(_expand(model, states, hash)[0])
        runs["stable"].append(_expand(model, states, Fingerprinter().fingerprint)[0])
        runs["stable_no_memory"].append(_expand(model, states, Fingerprinter(limit=0).fingerprint)[0])
    best = {k: min(v) for k, v in runs.items()}
    base = best["successors"]
    result: dict[str, Any] = {"scenario": scenario, "states": len(states), "successors": successors,
                              "seconds": {k: round(v, 3) for k, v in best.items()}}
    for kind in ("hash", "stable", "stable_no_memory"):
        extra = best[kind] - base
        result[f"{kind}_us_per_successor"] = round(extra / successors * 1e6, 2)
        result[f"{kind}_share_of_successors"] = round(extra / base, 3)
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
