"""``txnspec serve --durable DIR`` killed with SIGKILL while a confluent-kafka transactional producer writes:
after each restart on the same directory every transaction whose commit returned is wholly visible at
read_committed, no aborted one is, and no transaction is torn or duplicated."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from txnspec.audit.targets import free_port, wait_for_port

QUIET = {"log_level": 0, "broker.address.family": "v4"}
CLI = "import sys; from txnspec.cli import main; sys.exit(main())"
RECORDS = 4


@contextlib.contextmanager
def serve(data_dir: Path, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--port", str(port), "--durable",
                                 str(data_dir), "--topics", "out:2"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for_port("127.0.0.1", port, 30, proc, log)
        yield proc, f"127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def write_until_killed(bootstrap: str, proc: subprocess.Popen[bytes], rng: random.Random, first: int,
                       committed: set[int], aborted: set[int]) -> None:
    """Transactions of 4 records over two partitions (1 in 4 aborted); SIGKILL the server at a random moment."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "writer", "message.timeout.ms": 3000,
                  "transaction.timeout.ms": 60_000, **QUIET})
    p.init_transactions(10)
    kill_at = time.monotonic() + rng.uniform(0.3, 1.0)
    txn = first
    try:
        while time.monotonic() < kill_at:
            p.begin_transaction()
            for i in range(RECORDS):
                p.produce("out", f"{txn}:{i}".encode(), partition=i % 2)
            if rng.random() < 0.25:
                p.abort_transaction(10)
                aborted.add(txn)
            else:
                p.commit_transaction(10)
                committed.add(txn)
            txn += 1
        p.begin_transaction()  # the kill lands in an open transaction, records on their way
        for i in range(RECORDS):
            p.produce("out", f"{txn}:{i}".encode(), partition=i % 2)
        p.poll(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def visible_transactions(bootstrap: str) -> Counter[int]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    fence = Producer({"bootstrap.servers": bootstrap, "transactional.id": "writer", **QUIET})
    fence.init_transactions(10)  # a new instance aborts whatever the killed run left open
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": "read_committed",
                         **QUIET})
    seen: Counter[int] = Counter()
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition("out", p), timeout=10, cached=False)[1]
                for p in (0, 1)}
        consumer.assign([TopicPartition("out", p, 0) for p in (0, 1)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen[int(bytes(msg.value() or b"").decode().split(":")[0])] += 1
            positions = consumer.position([TopicPartition("out", p) for p in (0, 1)])
            if msg is None and all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions):
                return seen
        raise AssertionError("the reader did not reach the end of the output")
    finally:
        consumer.close()


def kill_and_check(tmp_path: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    committed: set[int] = set()
    aborted: set[int] = set()
    for generation in range(kills):
        with serve(tmp_path / "data", tmp_path / "serve.log") as (proc, bootstrap):
            write_until_killed(bootstrap, proc, rng, generation * 1_000_000, committed, aborted)
        with serve(tmp_path / "data", tmp_path / "serve.log") as (_, bootstrap):
            seen = visible_transactions(bootstrap)
        assert all(n == RECORDS for n in seen.values()), {t: n for t, n in seen.items() if n != RECORDS}
        assert committed <= set(seen), sorted(committed - set(seen))[:10]
        assert not (aborted & set(seen)), sorted(aborted & set(seen))[:10]
    assert committed and aborted  # the run did commit and abort transactions before the kills


def test_nothing_committed_is_lost_when_the_server_is_killed(tmp_path: Path) -> None:
    kill_and_check(tmp_path, kills=2, seed=1)


@pytest.mark.slow
def test_nothing_committed_is_lost_over_many_kills(tmp_path: Path) -> None:
    kill_and_check(tmp_path, kills=8, seed=2)


def test_topic_configs_and_partition_counts_survive_a_restart(tmp_path: Path) -> None:
    """Durable mode keeps what topic admin set (serve-topics.json beside the partitions); a deleted topic stays
    deleted."""
    from txnspec.serve import configs
    from txnspec.serve.server import ServerThread

    data = str(tmp_path / "data")
    with ServerThread(transaction_version=2, data_dir=data) as server:
        given = configs.parse_all({"max.message.bytes": "10485760", "cleanup.policy": "compact"})
        server.call(lambda: server.server.broker.create_topic("kept", 3, given))
        server.call(lambda: server.server.broker.create_topic("gone", 2))

        def delete() -> None:
            from txnspec.serve.admin import delete_topic
            delete_topic(server.server.broker, "gone")

        server.call(delete)
    with ServerThread(transaction_version=2, data_dir=data) as again:
        topics = again.call(lambda: {t.name: (t.partitions, t.configs) for t in again.server.broker.topics.values()})
    assert topics == {"kept": (3, {"max.message.bytes": 10485760, "cleanup.policy": ("compact",)})}
