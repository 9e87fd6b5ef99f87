"""Topic, config, cluster and group admin on ``txnspec serve`` through the clients' own admin APIs:
confluent-kafka's ``AdminClient`` and kafka-python's ``KafkaAdminClient``. Configs are validated as Kafka does
(an unknown name or a bad value is INVALID_CONFIG), kept, described, altered, and act where they change
behaviour (``max.message.bytes``); topics are deleted with their data; groups listed, described and deleted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from test_serve_clients import QUIET, TIMEOUT, read_all  # the reader of the client tests

from txnspec.serve.server import ServerThread


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(transaction_version=2) as s:
        yield s


@pytest.fixture
def admin(server: ServerThread) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": server.bootstrap, **QUIET})


def name() -> str:
    return f"a-{uuid.uuid4().hex[:8]}"


def create(admin: Any, topic: str, partitions: int = 1, **config: str) -> None:
    from confluent_kafka.admin import NewTopic

    futures = admin.create_topics([NewTopic(topic, partitions, 1, config={k.replace("_", "."): v
                                                                          for k, v in config.items()})])
    futures[topic].result(TIMEOUT)


def error_of(future: Any) -> Any:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    return caught.value.args[0]


def test_create_topics_refuses_an_unknown_config_and_a_bad_value_as_kafka(admin: Any) -> None:
    from confluent_kafka.admin import NewTopic

    bad = name()
    futures = admin.create_topics([NewTopic(bad, 1, 1, config={"no.such.config": "1"}),
                                   NewTopic(bad + "x", 1, 1, config={"max.message.bytes": "ten"}),
                                   NewTopic(bad + "y", 1, 1, config={"cleanup.policy": "shred"})])
    unknown, wrong, policy = (error_of(futures[t]) for t in (bad, bad + "x", bad + "y"))
    assert (unknown.code(), unknown.str()) == (40, "Unknown topic config name: no.such.config")
    assert wrong.code() == 40 and "Not a number of type INT" in wrong.str()
    assert policy.code() == 40 and "String must be one of: compact, delete" in policy.str()
    assert not set(admin.list_topics(timeout=TIMEOUT).topics) & {bad, bad + "x", bad + "y"}


def test_configs_are_kept_described_altered_and_honoured(admin: Any, server: ServerThread) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic = name()
    create(admin, topic, max_message_bytes="10485760", retention_ms="3600000", cleanup_policy="delete")
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert described["max.message.bytes"].value == "10485760"
    assert described["retention.ms"].value == "3600000" and not described["retention.ms"].is_default
    assert described["retention.bytes"].value == "-1" and described["retention.bytes"].is_default
    assert len(described) == 37  # every topic config of Kafka 4.4's LogConfig (as 4.4.0 lists them)
    # honoured: a 3 MiB record fits the topic's 10 MiB limit (the broker default 1 MiB would refuse it)
    producer = Producer({"bootstrap.servers": server.bootstrap, "message.max.bytes": 5 << 20,
                         "compression.type": "none", **QUIET})
    producer.produce(topic, b"x" * (3 << 20))
    assert producer.flush(TIMEOUT) == 0
    assert [len(v) for _, _, v in read_all(server.bootstrap, topic, 1, "read_uncommitted")] == [3 << 20]
    # incremental: SET one, DELETE another (back to the default); an unknown name fails the resource
    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([change])[change].result(TIMEOUT)
    after = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert (after["retention.bytes"].value, after["retention.ms"].value) == ("1000", "604800000")
    wrong = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.nonsense", "1", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([wrong])[wrong]).code() == 40
    # lower max.message.bytes: the same record is now refused as too large
    lower = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "100000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([lower])[lower].result(TIMEOUT)
    failed: list[Any] = []
    producer.produce(topic, b"y" * (3 << 20), on_delivery=lambda err, _msg: failed.append(err))
    producer.flush(TIMEOUT)
    assert [e.code() for e in failed] == [10]  # MSG_SIZE_TOO_LARGE (MESSAGE_TOO_LARGE)


def test_create_partitions_and_delete_topics(admin: Any, server: ServerThread) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewPartitions

    topic = name()
    create(admin, topic, 2)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(TIMEOUT)
    assert len(admin.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == 5
    assert error_of(admin.create_partitions([NewPartitions(topic, 3)])[topic]).code() == 37  # INVALID_PARTITIONS
    producer = Producer({"bootstrap.servers": server.bootstrap, **QUIET})
    producer.produce(topic, b"old", partition=4)
    assert producer.flush(TIMEOUT) == 0
    admin.delete_topics([topic])[topic].result(TIMEOUT)
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics
    assert error_of(admin.delete_topics([topic])[topic]).code() == 3  # UNKNOWN_TOPIC_OR_PARTITION
    create(admin, topic, 5)  # created again: empty, none of the deleted topic's records
    assert read_all(server.bootstrap, topic, 5, "read_uncommitted") == []


def test_describe_cluster(admin: Any, server: ServerThread) -> None:
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert cluster.cluster_id == "txnspec-serve"
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", server.config.port)]
    assert cluster.controller.id == 0


def test_groups_are_listed_described_and_deleted(admin: Any, server: ServerThread) -> None:
    from confluent_kafka import Consumer, ConsumerGroupState, Producer

    topic = name()
    create(admin, topic)
    producer = Producer({"bootstrap.servers": server.bootstrap, **QUIET})
    producer.produce(topic, b"v")
    assert producer.flush(TIMEOUT) == 0
    group = f"g-{topic}"
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "described", **QUIET})
    consumer.subscribe([topic])
    msg = None
    for _ in range(int(TIMEOUT / 0.5)):
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            break
    assert msg is not None and not msg.error()
    consumer.commit(asynchronous=False)
    listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(TIMEOUT)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
    assert [(m.client_id, m.host, [tp.topic for tp in m.assignment.topic_partitions])
            for m in described.members] == [("described", "/127.0.0.1", [topic])]
    assert error_of(admin.delete_consumer_groups([group])[group]).code() == 68  # NON_EMPTY_GROUP
    consumer.close()
    empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(TIMEOUT)
    assert group in {g.group_id for g in empty.valid}
    admin.delete_consumer_groups([group])[group].result(TIMEOUT)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    offsets = server.call(lambda: dict(server.server.broker.broker.group_coordinator.committed))
    assert not [k for k in offsets if k[0] == group]
    missing = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    assert (missing.state, missing.members) == (ConsumerGroupState.DEAD, [])  # librdkafka asks DescribeGroups v5
    assert error_of(admin.delete_consumer_groups([group])[group]).code() == 69


def test_kafka_python_admin_creates_describes_and_deletes(server: ServerThread) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    client = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        topic = name()
        client.create_topics([NewTopic(topic, 2, 1, topic_configs={"cleanup.policy": "compact"})])
        assert topic in client.list_topics()
        described = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                            configs=["cleanup.policy"])])
        assert described["topic"][topic]["cleanup.policy"]["value"] == "compact"
        assert described["topic"][topic]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert client.describe_cluster()["cluster_id"] == "txnspec-serve"
        client.delete_topics([topic])
        assert topic not in client.list_topics()
    finally:
        client.close()
