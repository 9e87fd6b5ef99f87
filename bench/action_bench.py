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
import time
from collections import deque

from txnspec.spec.model import build_model


def main(scenario: str, label: str) -> None:
    model = build_model(scenario)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
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
    cpu = time.process_time() - cpu_start
    print(label, len(seen), transitions, f"cpu {cpu:.1f}s", f"{len(seen) / cpu:.0f} states/cpu-s",
          f"wall {time.perf_counter() - wall_start:.1f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "default", sys.argv[2] if len(sys.argv) > 2 else "")
