"""``txnspec serve --nodes 3``: one process, three node ids on three ports. Metadata and FindCoordinator tell
clients where partitions and coordinators are; the wrong node answers NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR;
clients (confluent-kafka, kafka-python, the Java client) run their transactions across the nodes, and keep
running when a node is stopped (its partitions and coordinators move) and started again."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from test_serve_clients import QUIET, TIMEOUT, read_all, read_to_the_end

from txnspec.audit.connection import BrokerConnection
from txnspec.serve.nodes import Nodes
from txnspec.serve.server import ServerThread

CLI = "import sys; from txnspec.cli import main; sys.exit(main())"
NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR = 6, 16


@pytest.fixture
def three() -> Iterator[ServerThread]:
    with ServerThread(transaction_version=2, nodes=3, topics=("t:6",)) as server:
        yield server


def on(server: ServerThread, node: int) -> BrokerConnection:
    return BrokerConnection(server.config.host, server.config.ports[node], timeout=TIMEOUT)


def test_partitions_and_coordinators_spread_over_the_nodes_and_move_when_one_stops() -> None:
    nodes = Nodes(3)
    leaders = [nodes.leader("t", i) for i in range(6)]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2]  # two partitions each
    groups = {nodes.group_coordinator(f"g{i}") for i in range(20)}
    txns = {nodes.txn_coordinator(f"tx{i}") for i in range(20)}
    assert groups == txns == {0, 1, 2}
    nodes.stop(1)
    assert 1 not in {nodes.leader("t", i) for i in range(6)} and nodes.leader_epoch == 1
    assert [nodes.leader("t", i) for i in range(6) if leaders[i] != 1] == [x for x in leaders if x != 1]
    nodes.start(1)
    assert [nodes.leader("t", i) for i in range(6)] == leaders and nodes.leader_epoch == 2


def test_metadata_and_find_coordinator_name_every_node_and_the_right_one(three: ServerThread) -> None:
    for node in range(3):
        conn = on(three, node)
        try:
            r = conn.call(MetadataRequest, MetadataResponse, 12, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False,
                          topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name="t")])
            f = conn.call(FindCoordinatorRequest, FindCoordinatorResponse, 3, key="app", key_type=1)
        finally:
            conn.close()
        assert sorted((b.node_id, b.port) for b in r.brokers) == list(enumerate(three.config.ports))
        expected = three.call(lambda: [three.server.broker.nodes.leader("t", i) for i in range(6)])
        assert [p.leader_id for p in sorted(r.topics[0].partitions, key=lambda p: p.partition_index)] == expected
        coordinator = three.call(lambda: three.server.broker.nodes.txn_coordinator("app"))
        assert (f.error_code, f.node_id, f.port) == (0, coordinator, three.config.ports[coordinator])


def test_the_wrong_node_answers_not_leader_or_not_coordinator(three: ServerThread) -> None:
    from test_serve_request_tv import produce

    tid = "routed"
    coordinator = three.call(lambda: three.server.broker.nodes.txn_coordinator(tid))
    other = (coordinator + 1) % 3
    for node, expected in ((other, NOT_COORDINATOR), (coordinator, 0)):
        conn = on(three, node)
        try:
            r = conn.call(InitProducerIdRequest, InitProducerIdResponse, 5, transactional_id=tid,
                          transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
        finally:
            conn.close()
        assert r.error_code == expected
    pid, epoch = r.producer_id, r.producer_epoch
    leader = three.call(lambda: three.server.broker.nodes.leader("t", 0))
    for node in range(3):
        conn = on(three, node)
        try:
            # Produce v12 to partition 0 of t (test_serve_request_tv.produce): only its leader takes it
            assert produce(conn, 12, tid, pid, epoch) == (0 if node == leader else NOT_LEADER_OR_FOLLOWER)
        finally:
            conn.close()
    group_node = three.call(lambda: three.server.broker.nodes.group_coordinator("grp"))
    conn = on(three, (group_node + 1) % 3)
    try:
        hb = conn.call(HeartbeatRequest, HeartbeatResponse, 4, group_id="grp", generation_id=1, member_id="m",
                       group_instance_id=None)
    finally:
        conn.close()
    assert hb.error_code == NOT_COORDINATOR


def transactions(bootstrap: str, topic: str, tid: str, rounds: int, between: Any = None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **QUIET})
    producer.init_transactions(TIMEOUT)
    for round_ in range(rounds):
        producer.begin_transaction()
        for i in range(30):
            producer.produce(topic, f"{round_}-{i}".encode(), partition=i % 6)
        producer.commit_transaction(3 * TIMEOUT)
        if between is not None:
            between(round_)


def test_confluent_kafka_commits_across_nodes_while_the_coordinator_node_stops_and_starts(
        three: ServerThread) -> None:
    tid = f"moving-{uuid.uuid4().hex[:6]}"
    coordinator = three.call(lambda: three.server.broker.nodes.txn_coordinator(tid))

    def between(round_: int) -> None:
        if round_ == 0:
            three.stop_node(coordinator)  # the transaction coordinator and two partition leaders go
        elif round_ == 1:
            three.start_node(coordinator)

    bootstrap = ",".join(f"127.0.0.1:{p}" for p in three.config.ports)
    transactions(bootstrap, "t", tid, 3, between)
    got = read_all(bootstrap, "t", 6, "read_committed")
    assert sorted(v for _, _, v in got) == sorted(f"{r}-{i}".encode() for r in range(3) for i in range(30))
    served = three.call(lambda: three.server.broker.nodes.live)
    assert served == {0, 1, 2}


def test_kafka_python_group_consumer_finds_its_coordinator_on_another_node(three: ServerThread) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=three.bootstrap)
    for i in range(12):
        producer.send("t", f"k{i}".encode(), partition=i % 6)
    producer.flush(TIMEOUT)
    producer.close(TIMEOUT)
    group = next(g for g in (f"group-{i}" for i in range(50))
                 if three.call(lambda g=g: three.server.broker.nodes.group_coordinator(g)) != 0)
    consumer = KafkaConsumer("t", bootstrap_servers=three.bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    got = sorted(read_to_the_end(consumer, {"t": 6}))
    consumer.commit()
    consumer.close()
    assert got == sorted(f"k{i}".encode() for i in range(12))
    committed = three.call(lambda: {tp for (g, tp) in three.server.broker.broker.group_coordinator.committed
                                    if g == group})
    assert committed == {f"t-{i}" for i in range(6)}


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("mvn") is None, reason="needs a JDK and Maven")
def test_the_java_client_and_admin_on_three_nodes() -> None:
    """The consume-transform-produce harness, and the Admin's transaction workflow (ListTransactions asks every
    node; the abort goes to the partition's leader) give their single-node results."""
    from test_serve_txn_admin import JAVA_EXPECTED

    from txnspec.serve.java_harness import run_harness

    with ServerThread(transaction_version=2, nodes=3) as server:
        result = run_harness(server.bootstrap)
        served = server.call(lambda: {name: version for name, version in server.server.requests})
        assert run_harness(server.bootstrap, main="TxnAdmin") == JAVA_EXPECTED
    assert result["ok"], result
    assert result["output"] == [f"V{i}" for i in range(10)] and result["committed_offset"] == 10
    assert result["zombie_commit"] == "ProducerFencedException"
    # as on one node (tests/serve/test_serve_clients.py, -m slow): TV2's path, KIP-447's refusal
    assert (served.get("EndTxn"), "AddPartitionsToTxn" in served) == (5, False)
    assert (result["stale_generation_commit"], result["current_generation_commit"]) == ("CommitFailedException",
                                                                                        "committed")


def test_nodes_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from txnspec.cli import main  # in process: refused before anything binds (as tests/conformance/test_hostile_inputs)

    for args in (["--nodes", "0"], ["--nodes", "3", "--port", "65534"]):
        assert main(["serve", *args]) == 2
        err = capsys.readouterr().err
        assert "--nodes" in err and "Traceback" not in err


def test_serve_announces_every_node() -> None:
    process = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--port", "0", "--nodes", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        process.terminate()
        process.wait(15)
    assert "node 0 on 127.0.0.1:" in line and "node 1 on 127.0.0.1:" in line, line
