"""Transaction admin (KIP-664) on ``txnspec serve``: a transaction left open by its producer is found
(ListTransactions, DescribeTransactions), its partition's open transaction described (DescribeProducers: the
start offset that holds the last stable offset back), and aborted by the admin (WriteTxnMarkers), as
``kafka-transactions.sh`` does; the last stable offset then moves past it and read_committed sees nothing of it.
``workflow`` takes any bootstrap address: the same steps were run on Kafka 4.4.0 with the same answers."""

from __future__ import annotations

import shutil
import time
import uuid
from typing import Any

import pytest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from test_serve_clients import QUIET, TIMEOUT, read_all

from txnspec.audit.connection import BrokerConnection
from txnspec.serve.server import ServerThread


def last_stable_offset(conn: BrokerConnection, topic: str) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    r = conn.call(ListOffsetsRequest, ListOffsetsResponse, 7, replica_id=-1, isolation_level=1, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    return int(r.topics[0].partitions[0].offset)


def workflow(bootstrap: str, topic: str, tid: str) -> dict[str, Any]:
    """Leave a transaction open, find it and abort it as an admin; what each step answered."""
    from confluent_kafka import Producer

    out: dict[str, Any] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **QUIET})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"hanging-{i}".encode())
    assert producer.flush(TIMEOUT) == 0  # sent, never committed: the producer goes away
    host, port = bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout=TIMEOUT)
    try:
        out["lso_before"] = last_stable_offset(conn, topic)
        listed = conn.call(ListTransactionsRequest, ListTransactionsResponse, 1, state_filters=["Ongoing", "Bogus"],
                           producer_id_filters=[], duration_filter=-1)
        out["listed"] = [(t.transactional_id, t.transaction_state) for t in listed.transaction_states
                         if t.transactional_id == tid]
        out["unknown_states"] = list(listed.unknown_state_filters)
        longer = conn.call(ListTransactionsRequest, ListTransactionsResponse, 1, state_filters=[],
                           producer_id_filters=[], duration_filter=3_600_000)
        out["listed_running_over_an_hour"] = [t.transactional_id for t in longer.transaction_states
                                              if t.transactional_id == tid]
        described = conn.call(DescribeTransactionsRequest, DescribeTransactionsResponse, 0,
                              transactional_ids=[tid, f"{tid}-unknown"])
        known, unknown = described.transaction_states
        out["described"] = (known.error_code, known.transaction_state, known.transaction_timeout_ms,
                            [(t.topic, list(t.partitions)) for t in known.topics])
        out["described_unknown"] = unknown.error_code
        producers = conn.call(DescribeProducersRequest, DescribeProducersResponse, 0, topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])])
        (state,) = [s for s in producers.topics[0].partitions[0].active_producers
                    if s.producer_id == known.producer_id]
        out["producer"] = (state.producer_epoch == known.producer_epoch, state.last_sequence,
                           state.current_txn_start_offset)
        epoch = max(state.coordinator_epoch, 0)  # TransactionsCommand: the partition's coordinator epoch, or 0
        M = WriteTxnMarkersRequest.WritableTxnMarker
        aborted = conn.call(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, markers=[M(
            producer_id=state.producer_id, producer_epoch=state.producer_epoch, transaction_result=False,
            topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])], coordinator_epoch=epoch)])
        out["abort"] = aborted.markers[0].topics[0].partitions[0].error_code
        deadline = time.monotonic() + TIMEOUT
        past = state.current_txn_start_offset + 4  # three records and the marker
        while last_stable_offset(conn, topic) < past and time.monotonic() < deadline:
            time.sleep(0.1)
        out["lso_after"] = last_stable_offset(conn, topic)
    finally:
        conn.close()
    out["read_committed"] = [v for _, _, v in read_all(bootstrap, topic, 1, "read_committed")]
    return out


EXPECTED = {  # Kafka 4.4.0 answered exactly these to the same steps, at TV1 and TV2
    "lso_before": 2, "listed": [("hanging", "Ongoing")], "unknown_states": ["Bogus"],
    "listed_running_over_an_hour": [], "described": (0, "Ongoing", 60000, [("held", [0])]),
    "described_unknown": 105, "producer": (True, 3, 2), "abort": 0, "lso_after": 6,
    "read_committed": [b"committed"],
}


@pytest.mark.parametrize("tv", [1, 2])
def test_a_hanging_transaction_is_found_and_aborted_by_the_admin(tv: int) -> None:
    with ServerThread(transaction_version=tv, topics=("held",)) as server:
        assert workflow(server.bootstrap, "held", "hanging") == EXPECTED


def test_list_transactions_filters_by_producer_and_pattern(txnspec_server: ServerThread) -> None:
    from confluent_kafka import Producer

    ids = []
    for name in ("app-1", "app-2", "other"):
        producer = Producer({"bootstrap.servers": txnspec_server.bootstrap, "transactional.id": name, **QUIET})
        producer.init_transactions(TIMEOUT)
        ids.append(name)
    conn = BrokerConnection(txnspec_server.config.host, txnspec_server.config.port, timeout=TIMEOUT)
    try:
        def listed(**filters: Any) -> list[str]:
            fields = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                      "transactional_id_pattern": None, **filters}
            r = conn.call(ListTransactionsRequest, ListTransactionsResponse, 2, **fields)
            return sorted(t.transactional_id for t in r.transaction_states)

        assert listed() == ["app-1", "app-2", "other"]
        assert listed(transactional_id_pattern="app-.*") == ["app-1", "app-2"]
        assert listed(transactional_id_pattern="app") == []  # the whole id must match
        assert listed(state_filters=["Empty"]) == ["app-1", "app-2", "other"]
        assert listed(state_filters=["Ongoing"]) == []
        first = conn.call(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, transactional_ids=["app-1"])
        assert listed(producer_id_filters=[first.transaction_states[0].producer_id]) == ["app-1"]
    finally:
        conn.close()


def test_an_admin_abort_with_a_stale_producer_epoch_is_refused(txnspec_server: ServerThread) -> None:
    """The partition's check of a marker (ProducerAppendInfo.appendEndTxnMarker): an epoch older than the
    producer's is INVALID_PRODUCER_EPOCH (47) and nothing is written."""
    from confluent_kafka import Producer

    topic = f"stale-{uuid.uuid4().hex[:6]}"
    first = Producer({"bootstrap.servers": txnspec_server.bootstrap, "transactional.id": topic, **QUIET})
    first.init_transactions(TIMEOUT)
    producer = Producer({"bootstrap.servers": txnspec_server.bootstrap, "transactional.id": topic, **QUIET})
    producer.init_transactions(TIMEOUT)  # epoch 1: the first instance is fenced
    producer.begin_transaction()
    producer.produce(topic, b"x")
    assert producer.flush(TIMEOUT) == 0
    conn = BrokerConnection(txnspec_server.config.host, txnspec_server.config.port, timeout=TIMEOUT)
    try:
        producers = conn.call(DescribeProducersRequest, DescribeProducersResponse, 0, topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0, 9])])
        (state,) = producers.topics[0].partitions[0].active_producers
        assert state.producer_epoch == 1
        assert producers.topics[0].partitions[1].error_code == 3  # no partition 9
        M = WriteTxnMarkersRequest.WritableTxnMarker
        refused = conn.call(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, markers=[M(
            producer_id=state.producer_id, producer_epoch=state.producer_epoch - 1, transaction_result=False,
            topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])], coordinator_epoch=0)])
        assert refused.markers[0].topics[0].partitions[0].error_code == 47
        assert last_stable_offset(conn, topic) == 0
    finally:
        conn.close()


JAVA_EXPECTED = {  # Kafka 4.4.0 answered exactly these to TxnAdmin.java (kafka-clients 4.1.0), at TV1 and TV2
    "listed": "Ongoing", "described": "Ongoing", "partitions": 1, "timeout_ms": 60000, "start_offset": 2,
    "lso_before": 2, "abort": "aborted", "lso_after": 6, "ok": True, "exit": 0,
}


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("mvn") is None, reason="needs a JDK and Maven")
@pytest.mark.parametrize("tv", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_the_java_admin_lists_describes_and_aborts_a_hanging_transaction(tv: int) -> None:
    from txnspec.serve.java_harness import run_harness

    with ServerThread(transaction_version=tv) as server:
        result = run_harness(server.bootstrap, main="TxnAdmin")
        served = server.call(lambda: {name for name, _ in server.server.requests})
    assert result == JAVA_EXPECTED
    assert {"ListTransactions", "DescribeTransactions", "DescribeProducers", "WriteTxnMarkers"} <= served
