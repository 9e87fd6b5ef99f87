"""A transactional writer for the kill test: run as ``python crash_writer.py DATA_DIR START_MS SEED``.

It recovers the durable cluster in DATA_DIR, then loops: begin, send 4 records ("<txn>:<i>") to two
partitions, then commit (3 of 4) or abort, printing ``C <txn>`` / ``A <txn>`` once the call returned. The
parent kills it with SIGKILL at a random moment. Transaction numbers start at START_MS, so they never repeat
across runs.
"""

from __future__ import annotations

import random
import sys
import time

from txnspec.impl.cluster import Cluster

RECORDS = 4


def main() -> None:
    data_dir, start_ms, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    cluster = Cluster(transaction_version=rng.choice([1, 2]) if seed % 3 else 2, data_dir=data_dir, now_ms=start_ms)
    cluster.run()
    txn = start_ms  # transaction ids are unique across generations (START_MS differs per run)
    p = cluster.producer("writer")
    p.init_transactions()
    print("READY", flush=True)
    while True:
        p.begin_transaction()
        for i in range(RECORDS):
            p.send(f"out-{i % 2}", f"{txn}:{i}")
        if rng.random() < 0.25:
            p.abort_transaction()
            print(f"A {txn}", flush=True)
        else:
            p.commit_transaction()
            print(f"C {txn}", flush=True)
        txn += 1
        cluster.advance(1)
        time.sleep(0.002)  # the harness, not the implementation, paces the loop


if __name__ == "__main__":
    main()
