"""How the chaos validation scales with the history: synthetic histories of N transactions (P producers
interleaved over 3 partitions, 1-3 sends each, 3 in 4 committed, 1 in 20 with an unknown commit outcome, a
marker on each partition a transaction wrote when it ends), validated by ``audit/chaos/validate.py``.

    python bench/chaos_validate_scaling.py [--sizes 500,1000,2000,4000,8000] [--producers 4]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from txnspec.audit.chaos import history, validate

TOPIC = "chaos-out"


def synthetic(transactions: int, producers: int, seed: int = 0) -> list[history.Event]:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    clock = [0.0]
    calls: dict[str, int] = {}
    logs: dict[int, list[tuple[str, str | None]]] = {p: [] for p in range(3)}  # (value or marker, txn)
    committed: set[str] = set()

    def call(process: str, f: str, value: dict[str, Any], outcome: str = "ok",
             result: dict[str, Any] | None = None) -> None:
        calls[process] = calls.get(process, 0) + 1
        for kind, v in (("invoke", value), (outcome, result or {})):
            clock[0] += 0.001
            events.append({"index": len(events), "time": clock[0], "process": process, "call": calls[process],
                           "type": kind, "f": f, "value": v})

    open_txn: dict[int, tuple[str, set[int], int]] = {}
    counts = [0] * producers
    done = 0
    for p in range(producers):
        call(f"producer-{p}#0", "init", {"tid": f"chaos-p{p}", "instance": 0, "client": "java"})
    while done < transactions or open_txn:
        p = rng.randrange(producers)
        process = f"producer-{p}#0"
        if p not in open_txn:
            if done >= transactions:
                continue
            name = f"chaos-p{p}#0.{counts[p]}"
            counts[p] += 1
            done += 1
            call(process, "begin", {"tid": f"chaos-p{p}", "instance": 0, "txn": name})
            open_txn[p] = (name, set(), rng.randint(1, 3))
            continue
        name, touched, left = open_txn[p]
        if left > 0:
            partition = rng.randrange(3)
            value = f"{name}/{left}"
            offset = len(logs[partition])
            logs[partition].append((value, name))
            touched.add(partition)
            call(process, "send", {"topic": TOPIC, "partition": partition, "value": value, "txn": name},
                 result={"offset": offset})
            open_txn[p] = (name, touched, left - 1)
            continue
        roll = rng.random()
        if roll < 0.05:
            call(process, "commit", {"txn": name}, "info")
            if rng.random() < 0.5:
                committed.add(name)
        elif roll < 0.80:
            call(process, "commit", {"txn": name})
            committed.add(name)
        else:
            call(process, "abort", {"txn": name})
        for partition in touched:
            logs[partition].append(("", None))  # the marker: an offset no consumer sees
        del open_txn[p]
    ends = {f"{TOPIC}/{p}": len(log) for p, log in logs.items()}
    ru = [[TOPIC, p, o, v] for p, log in logs.items() for o, (v, t) in enumerate(log) if t is not None]
    rc = [r for r in ru if str(r[3]).rsplit("/", 1)[0] in committed]
    call("reader-read_committed", "read", {"isolation": "read_committed"},
         result={"records": rc, "ends": ends, "positions": ends})
    call("reader-read_uncommitted", "read", {"isolation": "read_uncommitted"},
         result={"records": ru, "ends": ends, "positions": ends})
    return [history.event_from_json(e, f"event {i}") for i, e in enumerate(events)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="500,1000,2000,4000,8000")
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()
    print("| transactions | records | markers | search nodes | explained | seconds | µs per record |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        events = synthetic(size, args.producers)
        started = time.perf_counter()
        verdict = validate.validate(events, 2)
        seconds = time.perf_counter() - started
        print(f"| {size:,} | {verdict.records:,} | {verdict.markers:,} | {verdict.nodes:,} | {verdict.explained} | "
              f"{seconds:.2f} | {seconds / max(verdict.records, 1) * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
