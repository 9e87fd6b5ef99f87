"""KIP-848 on ``txnspec serve`` with a real client: confluent-kafka's consumer with ``group.protocol=consumer``
joins through ConsumerGroupHeartbeat, is assigned the partition (its topic id resolved through Metadata v12+),
consumes, and a transactional producer commits its position with the consumer's group metadata."""

from __future__ import annotations

import time

import pytest

from txnspec.serve.protocol import APIS
from txnspec.serve.server import ServerThread

confluent_kafka = pytest.importorskip("confluent_kafka")


def test_consumer_group_heartbeat_is_advertised_at_kafka_44s_versions() -> None:
    api = APIS[68]
    assert (api.name, api.min_version, api.max_version) == ("ConsumerGroupHeartbeat", 0, 1)


def test_a_kip_848_consumer_joins_consumes_and_commits_transactional_offsets(txnspec_server: ServerThread) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = txnspec_server.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce("in", value=b"v%d" % i, partition=0)
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g848", "group.protocol": "consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe(["in"])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value())
    assert got == [b"v%d" % i for i in range(5)]
    assert [(tp.topic, tp.partition) for tp in consumer.assignment()] == [("in", 0)]
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t848"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce("out", value=b"x")
    txn.send_offsets_to_transaction([TopicPartition("in", 0, 5)], consumer.consumer_group_metadata(), 10)
    txn.commit_transaction(10)
    assert [tp.offset for tp in consumer.committed([TopicPartition("in", 0)], 10)] == [5]

    def group() -> tuple[int, list[tuple[int, list[str]]]]:
        g = txnspec_server.server.broker.broker.consumer_groups.groups["g848"]
        return g.group_epoch, [(m.member_epoch, sorted(m.assigned)) for m in g.members.values()]

    assert txnspec_server.call(group) == (1, [(1, ["in-0"])])  # one member, at the group's first epoch
    consumer.close()
    assert txnspec_server.call(group) == (2, [])  # the leave (epoch -1) removed it and bumped the epoch
