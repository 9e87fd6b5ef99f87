"""Benchmarks of the reference implementation: transactional produce/commit cycles per second and
read_committed fetch throughput, in memory and in durable mode without and with fsync per append.

    python bench/impl_bench.py [--cycles N] [--records R]

Each cycle: begin_transaction, R sends to two partitions, commit_transaction (markers written before the
next cycle). The fetch benchmark reads the whole output back at READ_COMMITTED through the consumer.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from txnspec.impl.cluster import Cluster


def run(data_dir: str | None, cycles: int, records: int, tv: int, fsync: bool = False) -> tuple[float, float, int]:
    cluster = Cluster(transaction_version=tv, data_dir=data_dir, fsync=fsync)
    p = cluster.producer("bench")
    p.init_transactions()
    start = time.perf_counter()
    for i in range(cycles):
        p.begin_transaction()
        for j in range(records):
            p.send(f"out-{j % 2}", f"{i}:{j}")
        p.commit_transaction()
        if i % 10 == 9:
            p.begin_transaction()
            p.send("out-0", "aborted")
            p.flush()
            p.abort_transaction()
    produce_s = time.perf_counter() - start
    start = time.perf_counter()
    n = sum(len(cluster.read(f"out-{k}", "READ_COMMITTED")) for k in range(2))
    fetch_s = time.perf_counter() - start
    return cycles / produce_s, n / fetch_s, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=500)
    ap.add_argument("--records", type=int, default=10)
    args = ap.parse_args()
    print("| mode | TV | cycles | records/cycle | commit cycles/s | read_committed records/s | records read |")
    print("|---|---|---|---|---|---|---|")
    for tv in (2, 1):
        for mode in ("memory", "durable", "durable+fsync"):
            with tempfile.TemporaryDirectory() as d:
                cps, rps, n = run(None if mode == "memory" else d, args.cycles, args.records, tv,
                                  fsync=mode == "durable+fsync")
            print(f"| {mode} | {tv} | {args.cycles} | {args.records} | {cps:,.0f} | {rps:,.0f} | {n:,} |")


if __name__ == "__main__":
    main()
