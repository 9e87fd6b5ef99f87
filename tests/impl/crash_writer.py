"""A transactional writer for the kill test: run as ``python crash_writer.py DATA_DIR START_MS SEED VALUE_BYTES``.

It recovers the durable cluster in DATA_DIR, then loops: begin, send 4 records ("<txn>:<i>:<padding>", the
padding VALUE_BYTES long) to two partitions, flush (the records are on the broker's disk: ``W <txn>``), then
commit (3 of 4) or abort, printing ``C <txn>`` / ``A <txn>`` once the call returned. The parent kills it with
SIGKILL at a random moment, or while a large write is under way. Transaction numbers start at START_MS, so
they never repeat across runs.
"""

from __future__ import annotations

import random
import sys
import time

from txnspec.impl.broker import BrokerConfig
from txnspec.impl.cluster import Cluster

RECORDS = 4


def main() -> None:
    data_dir, start_ms, seed, value_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    cluster = Cluster(transaction_version=rng.choice([1, 2]) if seed % 3 else 2, data_dir=data_dir, now_ms=start_ms,
                      config=BrokerConfig(max_message_bytes=8 * value_bytes + 1_048_588))
    cluster.run()
    txn = start_ms  # transaction ids are unique across generations (START_MS differs per run)
    p = cluster.producer("writer")
    p.init_transactions()
    padding = "x" * value_bytes
    print("READY", flush=True)
    while True:
        p.begin_transaction()
        for i in range(RECORDS):
            p.send(f"out-{i % 2}", f"{txn}:{i}:{padding}")
        p.flush()
        print(f"W {txn}", flush=True)
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
