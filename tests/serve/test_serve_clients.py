"""Real clients on ``txnspec serve``: confluent-kafka (librdkafka), kafka-python, aiokafka and the Java client
run transactions, see aborted records hidden at read_committed, and a zombie fenced."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from typing import Any

import pytest

from txnspec.serve.server import ServerThread

QUIET: dict[str, Any] = {"log_level": 0, "broker.address.family": "v4"}
TIMEOUT = 10.0


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False, **QUIET})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT, cached=False)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append((int(msg.partition() or 0), int(msg.offset() or 0), bytes(msg.value() or b"")))
            positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
            if msg is None and all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions):
                return sorted(got)
        raise AssertionError(f"did not reach the end of {topic} in {TIMEOUT} s: {got}")
    finally:
        consumer.close()


def read_headers(bootstrap: str, topic: str) -> list[Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "headers", **QUIET})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        msg = consumer.poll(TIMEOUT)
        assert msg is not None and not msg.error()
        headers = msg.headers() or []
        return list(headers.items() if isinstance(headers, dict) else headers)
    finally:
        consumer.close()


@pytest.mark.parametrize("tv", [2, 1])
def test_confluent_kafka_transactions_aborted_records_hidden_and_a_zombie_fenced(tv: int) -> None:
    from confluent_kafka import KafkaException, Producer

    with ServerThread(transaction_version=tv, topics=("out:2",)) as server:
        bootstrap = server.bootstrap
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "app", **QUIET})
        p.init_transactions(TIMEOUT)
        p.begin_transaction()
        p.produce("out", b"committed", partition=0, headers=[("trace-id", b"42")])
        p.produce("out", b"committed-too", partition=1)
        p.commit_transaction(TIMEOUT)
        p.begin_transaction()
        p.produce("out", b"aborted", partition=0)
        p.flush(TIMEOUT)
        p.abort_transaction(TIMEOUT)
        # a zombie: the transaction is open when a new instance of the same transactional.id initialises
        p.begin_transaction()
        p.produce("out", b"zombie", partition=1)
        p.flush(TIMEOUT)
        successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": "app", **QUIET})
        successor.init_transactions(TIMEOUT)
        with pytest.raises(KafkaException) as fenced:
            p.commit_transaction(TIMEOUT)
        assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort()
        successor.begin_transaction()
        successor.produce("out", b"after", partition=0)
        successor.commit_transaction(TIMEOUT)

        committed = [v for _, _, v in read_all(bootstrap, "out", 2, "read_committed")]
        assert read_headers(bootstrap, "out") == [("trace-id", b"42")]  # the client's batch, as Kafka stores it
        uncommitted = [v for _, _, v in read_all(bootstrap, "out", 2, "read_uncommitted")]
    assert sorted(committed) == [b"after", b"committed", b"committed-too"]
    assert sorted(uncommitted) == [b"aborted", b"after", b"committed", b"committed-too", b"zombie"]


def test_kafka_python_transactional_produce_and_a_read_committed_group_consumer(kafka_bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic("kp", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id="kp-app")
    producer.init_transactions()
    for value, commit in ((b"one", True), (b"gone", False), (b"two", True)):
        producer.begin_transaction()
        producer.send("kp", value)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer("kp", bootstrap_servers=kafka_bootstrap, group_id="kp-group", enable_auto_commit=False,
                             isolation_level="read_committed", auto_offset_reset="earliest")
    values = read_to_the_end(consumer, {"kp": 1})
    consumer.commit()
    committed = consumer.committed(TopicPartition("kp", 0))
    consumer.close()
    assert values == [b"one", b"two"]
    assert committed == 6  # two commits, one abort: three data records and three markers


def read_to_the_end(consumer: Any, topics: dict[str, int]) -> list[bytes]:
    """A kafka-python group consumer's values until its position is every partition's end (its isolation level's:
    the last stable offset at read_committed), within TIMEOUT: not a consumer timeout waited out after them."""
    from kafka import TopicPartition

    tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        values += [m.value for batch in consumer.poll(timeout_ms=300).values() for m in batch]
        if set(tps) <= consumer.assignment():
            ends = consumer.end_offsets(tps)
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
    return values


@pytest.fixture(params=[1, 3], ids=["one-node", "nodes3"])
def aiokafka_bootstrap(request: pytest.FixtureRequest) -> Any:
    with ServerThread(transaction_version=1, nodes=request.param) as server:
        yield server.bootstrap


def test_aiokafka_transactional_produce_and_read_committed(aiokafka_bootstrap: str) -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=aiokafka_bootstrap, transactional_id="aio-app")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("aio", b"kept")
            await producer.begin_transaction()
            await producer.send_and_wait("aio", b"dropped")
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("aio", bootstrap_servers=aiokafka_bootstrap, group_id="aio-group",
                                             isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=3000)
            return [m.value for msgs in batches.values() for m in msgs]
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), 30)) == [b"kept"]


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("mvn") is None, reason="needs a JDK and Maven")
@pytest.mark.slow  # the default tier runs it on three nodes (test_serve_nodes.py) and beside Kafka (test_audit_kafka)
@pytest.mark.parametrize("tv", [2, 1])
def test_the_java_client_consume_transform_produce_with_a_zombie_and_a_restart(tv: int) -> None:
    from txnspec.serve.java_harness import run_harness

    with ServerThread(transaction_version=tv) as server:
        result = run_harness(server.bootstrap)
        served = server.call(lambda: {name: version for name, version in server.server.requests})
    # TV2 (KIP-890 part 2): no AddPartitionsToTxn or AddOffsetsToTxn, EndTxn v5 bumps the epoch; TV1: the old path
    assert (served.get("EndTxn"), "AddPartitionsToTxn" in served) == ((5, False) if tv == 2 else (4, True))
    assert result["ok"], result
    assert result["output"] == [f"V{i}" for i in range(10)]
    assert result["committed_offset"] == 10
    assert result["zombie_commit"] == "ProducerFencedException"
    assert (result["stale_generation_commit"], result["current_generation_commit"]) == ("CommitFailedException",
                                                                                        "committed")  # KIP-447


def test_concurrent_transactional_producers_each_transaction_all_or_nothing(kafka_bootstrap: str) -> None:
    """Six confluent-kafka producers commit and abort interleaved transactions over two partitions at once."""
    import threading

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap, **QUIET})
    admin.create_topics([NewTopic("many", 2, 1)])["many"].result(TIMEOUT)
    committed: list[str] = []
    aborted: list[str] = []
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            p = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"many-{n}", **QUIET})
            p.init_transactions(TIMEOUT)
            for t in range(15):
                p.begin_transaction()
                for i in range(3):
                    p.produce("many", f"{n}-{t}-{i}".encode(), partition=(t + i) % 2)
                if (n + t) % 4 == 0:
                    p.flush(TIMEOUT)
                    p.abort_transaction(TIMEOUT)
                    aborted.extend(f"{n}-{t}-{i}" for i in range(3))
                else:
                    p.commit_transaction(TIMEOUT)
                    committed.extend(f"{n}-{t}-{i}" for i in range(3))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    seen = [v.decode() for _, _, v in read_all(kafka_bootstrap, "many", 2, "read_committed")]
    assert sorted(seen) == sorted(committed)
    assert len(committed) + len(aborted) == 6 * 15 * 3 and aborted
