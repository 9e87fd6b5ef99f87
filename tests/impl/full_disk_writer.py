"""A transactional writer that runs into a real file-size limit: ``python full_disk_writer.py DATA_DIR TARGET``.

``TARGET`` is ``data`` (records of 20 kB; the limit falls inside the next frame of ``out-0``), ``txnlog``
(small records; the limit falls inside the next record of the transaction log) or ``marker`` (records of
20 kB, flushed; then the limit falls inside the commit markers of ``out-0``/``out-1``, after the coordinator
wrote PrepareCommit) or ``completion`` (small records; the limit falls inside the coordinator's CompleteCommit
record, after the markers). The limit is ``RLIMIT_FSIZE`` with SIGXFSZ ignored, so the kernel writes what fits and
then answers EFBIG, as a full disk answers ENOSPC. The writer commits 3 transactions, sets the limit, tries
a fourth (the failure is printed as ``E <message>``), checks that the file and the in-memory log it hit are
as before, lifts the limit, retries (the same commit, or the pending markers) and commits 3 more. It prints
``C <txn>`` once a commit returned and ``OK`` at the end.
"""

from __future__ import annotations

import os
import resource
import signal
import sys

from txnspec.impl.cluster import Cluster
from txnspec.impl.errors import KafkaStorageException
from txnspec.impl.storage import SEGMENT

PARTITIONS = ("out-0", "out-1")


def sizes(data_dir: str) -> dict[str, int]:
    return {d: os.path.getsize(os.path.join(data_dir, d, SEGMENT)) for d in os.listdir(data_dir)
            if os.path.exists(os.path.join(data_dir, d, SEGMENT))}


def main() -> None:
    data_dir, target = sys.argv[1], sys.argv[2]
    value = "x" if target in ("txnlog", "completion") else "x" * 20_000
    cluster = Cluster(data_dir=data_dir)
    p = cluster.producer("writer")
    p.init_transactions()

    def transaction(txn: int) -> None:
        p.begin_transaction()
        for part in PARTITIONS:
            p.send(part, f"{txn}:{value}")

    for txn in range(3):
        transaction(txn)
        p.commit_transaction()
        print(f"C {txn}", flush=True)
    cluster.run()  # the last commit's markers land
    transaction(3)
    decided_first = target in ("marker", "completion")  # the limit comes after PrepareCommit
    if target == "marker":
        p.flush()  # the data is written; the markers are next
    if target == "completion":
        p.commit_transaction()  # PrepareCommit written; markers and CompleteCommit come with the next run
        print("C 3", flush=True)
    before = sizes(data_dir)
    limited = "__transaction_state-0" if target in ("txnlog", "completion") else "out-0"
    end = cluster.broker.partition(limited).log_end_offset
    largest = max(before["out-0"], before["out-1"]) if target == "marker" else before[limited]
    margin = {"data": 10_000, "txnlog": 100, "marker": 40, "completion": 100}[target]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (largest + margin, resource.RLIM_INFINITY))
    try:
        if target == "marker":
            p.commit_transaction()
            print("C 3", flush=True)  # PrepareCommit is written: the commit is decided
        if decided_first:
            cluster.run()  # the markers (and the completion)
        else:
            p.commit_transaction()
        print("NO ERROR", flush=True)
    except KafkaStorageException as exc:
        print(f"E {exc}", flush=True)
    after = sizes(data_dir)
    assert after[limited] == before[limited], (limited, before[limited], after[limited])
    assert cluster.broker.partition(limited).log_end_offset == end  # memory and file agree: nothing appended
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    if decided_first:
        assert cluster.transaction_state("writer") == "PrepareCommit"
        cluster.run()  # the coordinator retries what failed
        assert cluster.transaction_state("writer") == "CompleteCommit"
    else:
        p.commit_transaction()  # the same commit, retried
        print("C 3", flush=True)
    for txn in range(4, 7):
        transaction(txn)
        p.commit_transaction()
        print(f"C {txn}", flush=True)
    print("OK", flush=True)


if __name__ == "__main__":
    main()
