"""Throughput of ``txnspec serve`` through confluent-kafka, side by side with librdkafka's mock cluster (and any
other broker given by bootstrap address, e.g. a real Kafka), in one run.

    python bench/serve_bench.py [--commits 300] [--records 200000] [--targets serve librdkafka-mock [HOST:PORT ...]]

Per target: (1) transactional commits per second: one producer, ``--commits`` transactions of one record
each, begin/produce/commit in a loop; (2) read_committed records per second: ``--records`` records written
in committed transactions of 100 (not timed), then one read_committed consumer reads them all from offset 0.
``serve`` is started as its own process (``txnspec serve`` on a free port, in memory, transaction version 2);
the mock lives inside this process, as ``txnspec audit`` starts it. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

QUIET: dict[str, Any] = {"log_level": 0, "broker.address.family": "v4"}
CLI = "import sys; from txnspec.cli import main; sys.exit(main())"


@contextlib.contextmanager
def target(name: str) -> Iterator[str]:
    from txnspec.audit.targets import free_port, open_target, wait_for_port

    if name != "serve":
        with open_target(name) as t:
            yield t.bootstrap
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--port", str(port)], stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_port("127.0.0.1", port, 30, proc, log)
            yield f"127.0.0.1:{port}"
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        with contextlib.suppress(Exception):
            future.result(10)
    admin.list_topics(topic=topic, timeout=10)


def commits_per_second(bootstrap: str, commits: int) -> float:
    from confluent_kafka import Producer

    topic = f"bench-commits-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 0, **QUIET})
    p.init_transactions(30)
    started = time.perf_counter()
    for i in range(commits):
        p.begin_transaction()
        p.produce(topic, f"v{i}".encode(), partition=0)
        p.commit_transaction(30)
    return commits / (time.perf_counter() - started)


def read_committed_per_second(bootstrap: str, records: int) -> float:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"bench-read-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 5, **QUIET})
    p.init_transactions(30)
    for start in range(0, records, 100):
        p.begin_transaction()
        for i in range(start, min(records, start + 100)):
            p.produce(topic, f"value-{i:08d}".encode(), partition=0)
        p.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "isolation.level": "read_committed",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = started + 120
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if not msg.error():
                got += 1
    seconds = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"read {got} of {records} records in 120 s")
    return records / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--targets", nargs="+", default=["serve", "librdkafka-mock"])
    args = parser.parse_args(argv)
    rows = []
    for name in args.targets:
        with target(name) as bootstrap:
            commits = commits_per_second(bootstrap, args.commits)
            reads = read_committed_per_second(bootstrap, args.records)
        rows.append((name, commits, reads))
        print(f"{name}: {commits:,.0f} commits/s, {reads:,.0f} read_committed records/s", file=sys.stderr)
    base = rows[0]
    print("| target | transactional commits/s | ratio | read_committed records/s | ratio |")
    print("|---|---|---|---|---|")
    for name, commits, reads in rows:
        print(f"| {name} | {commits:,.0f} | {commits / base[1]:.2f} | {reads:,.0f} | {reads / base[2]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
