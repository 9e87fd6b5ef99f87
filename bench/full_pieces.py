"""Where the states of ``full`` come from: its pieces, each explored until done or for a bounded time (issue 16).

``full`` (two transactional ids, the first with a zombie instance, two partitions, consumer offsets, a
duplicate, a timeout and a failover) is beyond an exhaustive search on one machine. This bench measures how
far below it the smallest configuration with every one of its ingredients still is, and what each fault
multiplies. Every piece is ``full``'s actors with the application narrowed, the narrowing each piece names:

* ``fixed-partitions``: each transactional id writes to one partition of its own (t1 to p0, t2 to p1), as a
  keyed partitioner does, instead of choosing either for each record;
* ``no-voluntary-abort``: the application aborts only after an abortable error (it commits otherwise);
* ``fencing-only``: the zombie pair's second instance initialises (fencing the first) and runs no transaction
  (transactions per instance 1, 0, 1).

The narrowing wraps the application's calls (``txnspec.spec.system._calls``) in this process; the spec is not
changed, and the search (fingerprints, forked workers, the partial-order reduction, no symmetry: the narrowed
actors have none) is ``txnspec check``'s. Deadlocks are not judged (a ``fencing-only`` instance stays Ready,
which the scenario's final-state test does not know). Each piece runs in a child process killed after
``--seconds``; the table gives its states, the depth reached and the growth of the last level over the one
before (1.0 or less: the search is past its widest level), or "complete".

Usage::

    python bench/full_pieces.py --seconds 600
    python bench/full_pieces.py --pieces base timeout --seconds 120
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

NARROW = {"only": {"t1": "p0", "t2": "p1"}, "no_voluntary_abort": True}
PIECES: dict[str, dict[str, Any]] = {  # name -> the faults and the narrowing
    "base": {"faults": {}, **NARROW},
    "timeout": {"faults": {"timeout": 1}, **NARROW},
    "duplicate": {"faults": {"duplicate": 1}, **NARROW},
    "failover": {"faults": {"failover": 1}, **NARROW},
    "all-faults-fencing-only": {"faults": {"duplicate": 1, "timeout": 1, "failover": 1}, **NARROW,
                                "transactions": (1, 0, 1)},
    "full": {"faults": {"duplicate": 1, "timeout": 1, "failover": 1}},
}


def _narrowed(calls: Any, only: dict[str, str], no_voluntary_abort: bool,
              transactions: tuple[int, ...] | None) -> Any:
    from txnspec.spec.actions import ActionKind as K
    from txnspec.spec.producer_state import IN_TRANSACTION

    def narrowed(c: Any, p: Any) -> Iterator[Any]:
        for action, q, runs_sender in calls(c, p):
            if action.kind is K.SEND and only.get(p.transactional_id, action.partition) != action.partition:
                continue
            if no_voluntary_abort and action.kind is K.ABORT_TRANSACTION and p.phase is IN_TRANSACTION:
                continue
            if transactions and action.kind is K.BEGIN_TRANSACTION and p.txn_no >= transactions[p.index]:
                continue
            yield action, q, runs_sender
    return narrowed


def child(piece: str, workers: int) -> None:
    """Explore one piece, printing one JSON line a level and one at the end."""
    from txnspec.checker.levels import check_levels
    from txnspec.checker.model import Expectation
    from txnspec.spec import system
    from txnspec.spec.model import build_model
    from txnspec.spec.scenarios import FULL

    spec = PIECES[piece]
    if "only" in spec:
        system._calls = _narrowed(system._calls, spec["only"], spec["no_voluntary_abort"],
                                  spec.get("transactions"))
    model = build_model(FULL.with_(name=f"full-{piece}", faults=spec["faults"])).partial_order()
    names = [p.name for p in model.properties if p.expectation is not Expectation.LEADS_TO]
    started = time.perf_counter()

    def level(states: int, depth: int, rate: float, memory: int) -> None:
        print(json.dumps({"depth": depth, "states": states, "seconds": time.perf_counter() - started}), flush=True)

    result = check_levels(model, properties=names, workers=workers, symmetry=False, check_deadlock=False,
                          progress=level)
    print(json.dumps({"complete": True, "states": result.states, "verdict": result.verdict_text,
                      "seconds": time.perf_counter() - started}), flush=True)


def measure(piece: str, seconds: float, workers: int) -> dict[str, Any]:
    process = subprocess.Popen([sys.executable, __file__, "--child", piece, "--workers", str(workers)],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(line) for line in process.stdout or ()),
                              daemon=True)
    reader.start()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join(timeout=10)
    last = lines[-1] if lines else {}
    per_depth = {line["depth"]: line["states"] for line in lines if "depth" in line}
    depth = max(per_depth, default=0)
    growth = None  # the last level's width over the one before, when the last three levels were reported
    if all(d in per_depth for d in (depth - 1, depth - 2)):
        growth = (per_depth[depth] - per_depth[depth - 1]) / (per_depth[depth - 1] - per_depth[depth - 2])
    return {"piece": piece, "complete": bool(last.get("complete")), "states": last.get("states", 0),
            "depth": depth, "growth": growth, "seconds": last.get("seconds", 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", nargs="+", choices=PIECES, default=list(PIECES))
    parser.add_argument("--seconds", type=float, default=600.0, help="the bound on each piece's run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--child", choices=PIECES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workers)
        return
    print(f"| piece | states | depth | last level's growth | seconds |  (bound {args.seconds:.0f} s a piece)")
    print("|---|---|---|---|---|")
    for piece in args.pieces:
        row = measure(piece, args.seconds, args.workers)
        growth = "complete" if row["complete"] else f"{row['growth']:.2f}x" if row["growth"] else "?"
        print(f"| {piece} | {row['states']:,} | {row['depth']} | {growth} | {row['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
