"""The same requests to Apache Kafka (the newest 4.x, started by the project on 127.0.0.1) and to ``txnspec
serve``, the same answers: what issue 32 measured and what this branch changed (request transaction versions,
KIP-511, ApiVersions v5, every codec and the batch size as sent, topic configs and admin, group admin, ListOffsets
v11, the transaction admin workflow of ``kafka-transactions.sh``). ``-m kafka``: it needs Java 17 and Maven."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import test_serve_request_tv as tv_steps
import test_serve_txn_admin as txn_admin
from kafka.protocol.admin.configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from test_serve_clients import QUIET, TIMEOUT, read_all

from txnspec.audit import kafka
from txnspec.audit.connection import BrokerConnection
from txnspec.serve.protocol import ApiVersionsRequest, ApiVersionsResponse
from txnspec.serve.server import ServerThread

pytestmark = pytest.mark.kafka
# each comparison at TV1 too runs with -m slow: the default tier starts one Kafka here (TV2), and the audit's
# comparison at TV1 is tests/audit/test_audit_kafka.py's
TV1 = pytest.param(1, marks=pytest.mark.slow)


# real_kafka: the shared fixture of tests/conftest.py (one Kafka per transaction version, kept for the run)


def both(real_kafka: Callable[[int], kafka.RunningKafka], tv: int, steps: Callable[[str], Any]) -> tuple[Any, Any]:
    on_kafka = steps(real_kafka(tv).bootstrap)
    with ServerThread(transaction_version=tv) as server:
        on_serve = steps(server.bootstrap)
    return on_kafka, on_serve


def connect(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=TIMEOUT)


def create(conn: BrokerConnection, name: str, partitions: int = 1, rf: int = 1, **configs: str) -> Any:
    T = CreateTopicsRequest.CreatableTopic
    r = conn.call(CreateTopicsRequest, CreateTopicsResponse, 7, topics=[T(
        name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
        configs=[T.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])],
        timeout_ms=10_000, validate_only=False)
    return r.topics[0]


def ready(conn: BrokerConnection, key: str, key_type: int) -> None:
    """The coordinator of ``key`` is up (Kafka creates its internal topic on the first FindCoordinator)."""
    for _ in range(120):
        if conn.call(FindCoordinatorRequest, FindCoordinatorResponse, 3, key=key, key_type=key_type).error_code == 0:
            return
        time.sleep(0.25)
    raise AssertionError(f"no coordinator for {key}")


def led(conn: BrokerConnection, topic: str) -> None:
    """Every partition of ``topic`` has a leader: Kafka answers CreateTopics before the controller's leader election
    reaches the broker, and a Produce in between gets NOT_LEADER_OR_FOLLOWER (CI, 2026-11-26)."""
    for _ in range(120):
        r = conn.call(MetadataRequest, MetadataResponse, 12, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False,
                      topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=topic)])
        partitions = r.topics[0].partitions
        if r.topics[0].error_code == 0 and partitions and all(p.leader_id >= 0 for p in partitions):
            return
        time.sleep(0.25)
    raise AssertionError(f"no leader for {topic}")


def init(conn: BrokerConnection, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    for _ in range(120):  # a coordinator still loading (14, 15, 16) or a fenced abort completing (51)
        r = conn.call(InitProducerIdRequest, InitProducerIdResponse, 5, transactional_id=tid,
                      transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1)
        if r.error_code not in (14, 15, 16, 51):
            break
        time.sleep(0.25)
    assert r.error_code == 0, r
    return int(r.producer_id), int(r.producer_epoch)


def request_tv_answers(bootstrap: str) -> dict[str, Any]:
    conn = connect(bootstrap)
    try:
        create(conn, "t")
        led(conn, "t")
        ready(conn, "p12", 1)
        tv_steps.init = init  # the same steps, with a wait for Kafka's coordinator
        out: dict[str, Any] = {}
        pid, epoch = init(conn, "p12")
        out["produce_v12_never_added"] = tv_steps.produce(conn, 12, "p12", pid, epoch)
        out["end_txn_v5"] = tv_steps.end_txn(conn, 5, "p12", pid, epoch)
        pid, epoch = init(conn, "p11")
        out["produce_v11_never_added"] = tv_steps.produce(conn, 11, "p11", pid, epoch)
        pid, epoch = init(conn, "fenced")
        out["add"] = tv_steps.add_partition(conn, "fenced", pid, epoch)
        out["produce_v11"] = tv_steps.produce(conn, 11, "fenced", pid, epoch)
        out["epochs"] = (epoch, init(conn, "fenced")[1])
        out["fenced_end_txn_v5_v4"] = (tv_steps.end_txn(conn, 5, "fenced", pid, epoch),
                                       tv_steps.end_txn(conn, 4, "fenced", pid, epoch))
        ready(conn, "g-v5", 0)
        for version in (5, 4):
            tid, group = f"offsets-v{version}", f"g-v{version}"
            pid, epoch = init(conn, tid)
            tv_steps.produce(conn, 12, tid, pid, epoch)
            for _ in range(40):  # Kafka: COORDINATOR_LOAD_IN_PROGRESS (14) while the offsets partition loads
                answer = tv_steps.txn_offset_commit(conn, version, tid, pid, epoch, group)
                if answer != 14:
                    break
                time.sleep(0.25)
            tv_steps.end_txn(conn, 5, tid, pid, epoch)
            time.sleep(0.5)
            out[f"txn_offset_commit_v{version}"] = (answer, tv_steps.committed(conn, group))
        pid, epoch = init(conn, "timed-out", timeout_ms=1000)
        out["timed_out_produce_v12"] = tv_steps.produce(conn, 12, "timed-out", pid, epoch)
        deadline = time.monotonic() + 30  # Kafka looks for timed-out transactions every 10 s
        while time.monotonic() < deadline:
            answer = tv_steps.end_txn(conn, 4, "timed-out", pid, epoch + 1, commit=False)  # the bumped epoch
            if answer != 51:
                break
            time.sleep(0.5)
        out["timed_out_end_txn_v5_v4"] = (tv_steps.end_txn(conn, 5, "timed-out", pid, epoch),
                                          tv_steps.end_txn(conn, 4, "timed-out", pid, epoch))
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("tv", [TV1, 2])
def test_request_transaction_versions_answer_as_on_kafka(real_kafka: Any, tv: int) -> None:
    on_kafka, on_serve = both(real_kafka, tv, request_tv_answers)
    assert on_serve == on_kafka
    assert on_kafka["produce_v12_never_added"] == 0 and on_kafka["produce_v11_never_added"] == 120


def admin_answers(bootstrap: str) -> dict[str, Any]:
    conn = connect(bootstrap)
    out: dict[str, Any] = {}
    try:
        out["create"] = create(conn, "conf", 2, retention_ms="1000").error_code
        for name, kwargs in (("again", {}), ("rf3", {"rf": 3}), ("p0", {"partitions": 0})):
            topic = "conf" if name == "again" else name
            answer = create(conn, topic, **kwargs)  # type: ignore[arg-type]
            out[f"create_{name}"] = (answer.error_code, answer.error_message)
        for config, value in (("no.such", "1"), ("max.message.bytes", "ten"), ("retention.ms", "-5"),
                              ("cleanup.policy", "shred")):
            answer = create(conn, f"bad-{uuid.uuid4().hex[:6]}", **{config.replace(".", "_"): value})
            out[f"create_{config}={value}"] = (answer.error_code, answer.error_message)
        time.sleep(1)
        R = DescribeConfigsRequest.DescribeConfigsResource
        described = conn.call(DescribeConfigsRequest, DescribeConfigsResponse, 4, resources=[
            R(resource_type=2, resource_name="conf", configuration_keys=None),
            R(resource_type=2, resource_name="nope", configuration_keys=None)],
            include_synonyms=False, include_documentation=False)
        out["describe"] = [(r.error_code, r.error_message, len(r.configs)) for r in described.results]
        out["describe_configs"] = sorted((c.name, c.value, c.config_source, c.config_type, c.read_only)
                                         for c in described.results[0].configs)
        A = IncrementalAlterConfigsRequest.AlterConfigsResource
        for name, change in (("unknown", (A.AlterableConfig(name="x.y", config_operation=0, value="1"))),
                             ("append_to_long", A.AlterableConfig(name="retention.ms", config_operation=2, value="5"))):
            r = conn.call(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 1, resources=[
                A(resource_type=2, resource_name="conf", configs=[change])], validate_only=False)
            out[f"alter_{name}"] = (r.responses[0].error_code, r.responses[0].error_message)
        P = CreatePartitionsRequest.CreatePartitionsTopic
        for count, assignments in ((1, None), (2, None), (4, [P.CreatePartitionsAssignment(broker_ids=[7])])):
            r = conn.call(CreatePartitionsRequest, CreatePartitionsResponse, 3, topics=[
                P(name="conf", count=count, assignments=assignments)], timeout_ms=10_000, validate_only=True)
            out[f"partitions_{count}"] = [(x.error_code, x.error_message) for x in r.results]
        ready(conn, "nogroup", 0)
        for v in (5, 6):
            for _ in range(40):  # Kafka: COORDINATOR_LOAD_IN_PROGRESS while the offsets partition loads
                r = conn.call(DescribeGroupsRequest, DescribeGroupsResponse, v, groups=["nogroup"],
                              include_authorized_operations=False)
                if r.groups[0].error_code != 14:
                    break
                time.sleep(0.25)
            out[f"describe_group_v{v}"] = [(g.error_code, g.error_message, g.group_state) for g in r.groups]
        out["delete_group"] = [g.error_code for g in conn.call(DeleteGroupsRequest, DeleteGroupsResponse, 2,
                                                               groups_names=["nogroup"]).results]
        T = ListOffsetsRequest.ListOffsetsTopic
        for ts in (-1, -2, -3, -4, -5, -6):
            r = conn.call(ListOffsetsRequest, ListOffsetsResponse, 11, replica_id=-1, isolation_level=0,
                          timeout_ms=1000, topics=[T(name="conf", partitions=[T.ListOffsetsPartition(
                              partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
            p = r.topics[0].partitions[0]
            out[f"list_offsets_{ts}"] = (p.error_code, p.timestamp, p.offset, p.leader_epoch)
        out["api_versions_v6"] = unsupported_api_versions(bootstrap)
        out["api_versions_v5_elsewhere"] = api_versions_v5(bootstrap, "another-cluster", 0)
        out["api_versions_v5_half"] = api_versions_v5(bootstrap, None, 0)
        return out
    finally:
        conn.close()


def unsupported_api_versions(bootstrap: str) -> tuple[Any, ...]:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        payload = struct.pack(">hhih", 18, 6, 42, 4) + b"test\x00"
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        answer = ApiVersionsResponse.decode(sock.recv(size, socket.MSG_WAITALL), version=0, header=True)
        retry = struct.pack(">hhih", 18, 0, 43, 4) + b"test"
        sock.sendall(struct.pack(">i", len(retry)) + retry)
        still_open = len(sock.recv(4, socket.MSG_WAITALL)) == 4
    return answer.error_code, [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys], still_open


def api_versions_v5(bootstrap: str, cluster_id: str | None, node_id: int) -> bytes:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        request = ApiVersionsRequest(version=5, client_software_name="t", client_software_version="1",
                                     cluster_id=cluster_id, node_id=node_id)
        request.with_header(correlation_id=7, client_id="test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        return sock.recv(size, socket.MSG_WAITALL)


def test_topic_config_group_and_version_admin_answer_as_on_kafka(real_kafka: Any) -> None:
    on_kafka, on_serve = both(real_kafka, 2, admin_answers)
    assert on_serve == on_kafka
    assert on_kafka["create_no.such=1"] == (40, "Unknown topic config name: no.such")
    assert on_kafka["api_versions_v6"] == (35, [(18, 0, 5)], True)


def codec_answers(bootstrap: str) -> dict[str, Any]:
    from confluent_kafka import Producer

    out: dict[str, Any] = {}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        topic = f"codec-{codec}"
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}",
                             "compression.type": codec, "linger.ms": 5, **QUIET})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(200):
            producer.produce(topic, f"{codec}-{i}-".encode() * 20)
        producer.commit_transaction(TIMEOUT)
        out[codec] = len(read_all(bootstrap, topic, 1, "read_committed"))
    conn = connect(bootstrap)
    try:
        create(conn, "sized", max_message_bytes="10000")
        led(conn, "sized")

        def produce(records: bytes) -> int:
            data = ProduceRequest.TopicProduceData(name="sized", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])
            r = conn.call(ProduceRequest, ProduceResponse, 9, transactional_id=None, acks=-1, timeout_ms=1000,
                          topic_data=[data])
            return int(r.responses[0].partition_responses[0].error_code)

        for name, codec, size in (("gzip_3_mib", 1, 3 << 20), ("plain_10_kb", 0, 10_000)):
            builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
            builder.append(0, int(time.time() * 1000), None, b"x" * size, [])
            out[name] = produce(bytes(builder.build()))
    finally:
        conn.close()
    return out


def test_every_codec_and_the_batch_size_as_sent_answer_as_on_kafka(real_kafka: Any) -> None:
    on_kafka, on_serve = both(real_kafka, 2, codec_answers)
    assert on_serve == on_kafka == {"none": 200, "gzip": 200, "snappy": 200, "lz4": 200, "zstd": 200,
                                    "gzip_3_mib": 0, "plain_10_kb": 10}


@pytest.mark.parametrize("tv", [TV1, 2])
def test_the_transaction_admin_workflow_answers_as_on_kafka(real_kafka: Any, tv: int) -> None:
    def steps(bootstrap: str) -> dict[str, Any]:
        conn = connect(bootstrap)
        try:
            create(conn, "held")
            led(conn, "held")
            ready(conn, "hanging", 1)
        finally:
            conn.close()
        return txn_admin.workflow(bootstrap, "held", "hanging")

    on_kafka, on_serve = both(real_kafka, tv, steps)
    assert on_serve == on_kafka == txn_admin.EXPECTED


@pytest.mark.parametrize("tv", [2, TV1])
@pytest.mark.parametrize("client", ["kafkajs", "sarama"])
def test_kafkajs_and_sarama_run_the_matrix_workload_as_on_kafka(real_kafka: Any, client: str, tv: int) -> None:
    """The client matrix's workload with each client's stock settings: the same RESULT from Kafka and serve."""
    from txnspec.serve.client_harness import ClientUnavailable, run_client

    try:
        on_kafka, on_serve = both(real_kafka, tv, lambda bootstrap: run_client(client, bootstrap, timeout=150))
    except ClientUnavailable as exc:
        pytest.skip(f"{client} unavailable: {exc}")
    assert on_kafka["ok"] and on_kafka["output"] == [f"V{i}" for i in range(10)], on_kafka
    assert on_serve == on_kafka


def admin_abort_answers(bootstrap: str) -> dict[str, int]:
    """A transaction left open after a committed one (whose marker set the partition's coordinator epoch): the
    admin's WriteTxnMarkers ABORT with an older producer epoch, then a coordinator epoch below the partition's,
    then the partition's own: each answer, and the last stable offset after."""
    from confluent_kafka import Producer
    from kafka.protocol.admin.transactions import DescribeProducersRequest, DescribeProducersResponse
    from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

    topic = f"admin-{uuid.uuid4().hex[:6]}"
    for _ in range(2):  # a second instance: the producer's epoch is at least 1, so an older one exists
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, **QUIET})
        producer.init_transactions(TIMEOUT)
    for value, commit in ((b"committed", True), (b"open", False)):
        producer.begin_transaction()
        producer.produce(topic, value)
        if commit:
            producer.commit_transaction(TIMEOUT)
    assert producer.flush(TIMEOUT) == 0
    conn = connect(bootstrap)
    try:
        described = conn.call(DescribeProducersRequest, DescribeProducersResponse, 0, topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])])
        (state,) = described.topics[0].partitions[0].active_producers
        M = WriteTxnMarkersRequest.WritableTxnMarker

        def abort(producer_epoch: int, coordinator_epoch: int) -> int:
            r = conn.call(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, markers=[M(
                producer_id=state.producer_id, producer_epoch=producer_epoch, transaction_result=False,
                topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
                coordinator_epoch=coordinator_epoch)])
            return int(r.markers[0].topics[0].partitions[0].error_code)

        out = {"start_offset": int(state.current_txn_start_offset),
               "older_producer_epoch": abort(state.producer_epoch - 1, max(state.coordinator_epoch, 0)),
               "older_coordinator_epoch": abort(state.producer_epoch, state.coordinator_epoch - 1),
               "own": abort(state.producer_epoch, max(state.coordinator_epoch, 0))}
        T = ListOffsetsRequest.ListOffsetsTopic
        lso = conn.call(ListOffsetsRequest, ListOffsetsResponse, 7, replica_id=-1, isolation_level=1, topics=[
            T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                              timestamp=-1)])])
        out["lso_after"] = int(lso.topics[0].partitions[0].offset)
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("tv", [TV1, 2])
def test_the_admin_abort_answers_as_on_kafka(real_kafka: Any, tv: int) -> None:
    """Admin.abortTransaction's marker at the partition: an older producer epoch INVALID_PRODUCER_EPOCH (47), a
    coordinator epoch below the partition's TRANSACTION_COORDINATOR_FENCED (52), the partition's own aborts."""
    on_kafka, on_serve = both(real_kafka, tv, admin_abort_answers)
    assert on_serve == on_kafka
    assert (on_kafka["older_producer_epoch"], on_kafka["older_coordinator_epoch"], on_kafka["own"]) == (47, 52, 0)


@pytest.mark.parametrize("tv", [2, TV1])
def test_the_java_admin_workflow_answers_as_on_kafka(real_kafka: Any, tv: int) -> None:
    """kafka-transactions.sh's workflow through the Java Admin client (TxnAdmin.java: list, describe, find the
    open transaction's start offset at its partition, abort it): the same RESULT from Kafka and serve."""
    from txnspec.serve.java_harness import run_harness

    on_kafka, on_serve = both(real_kafka, tv, lambda bootstrap: run_harness(bootstrap, main="TxnAdmin"))
    assert on_kafka["ok"], on_kafka
    assert on_serve == on_kafka


def test_delete_records_answers_as_on_kafka(real_kafka: Any) -> None:
    """confluent-kafka's AdminClient.delete_records: the log start offset, earliest, a consumer's reset, a Fetch
    below the start, -1 and an offset above the high watermark, the same on Kafka and serve."""
    import test_serve_delete_records as delete_records

    on_kafka, on_serve = both(real_kafka, 2, delete_records.delete_records_answers)
    assert on_serve == on_kafka == delete_records.EXPECTED
