"""A request's transaction version comes from its version alone, as Kafka 4.4 decides it
(``TransactionVersion.transactionVersionForEndTxn``, ``...ForAddPartitionsToTxn``,
``AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation``): the answers a TV1 broker
gives TV2 requests, measured on Kafka 4.1.1 and 4.4.0 (issue 32), pinned here over the socket."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from txnspec.audit.connection import BrokerConnection
from txnspec.serve.server import ServerThread

NONE, INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, TRANSACTION_ABORTABLE = 0, 48, 51, 90, 120


@pytest.fixture(params=[1, 2], ids=["tv1", "tv2"])
def served(request: Any) -> Iterator[tuple[ServerThread, BrokerConnection]]:
    with ServerThread(transaction_version=request.param, topics=("t",)) as server:
        c = BrokerConnection(server.config.host, server.config.port, timeout=10)
        try:
            yield server, c
        finally:
            c.close()


@pytest.fixture
def conn(served: tuple[ServerThread, BrokerConnection]) -> BrokerConnection:
    return served[1]


def init(conn: BrokerConnection, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    """InitProducerId as a client makes it: retried while the fenced transaction's abort completes (51)."""
    for _ in range(50):
        r = conn.call(InitProducerIdRequest, InitProducerIdResponse, 5, transactional_id=tid,
                      transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1)
        if r.error_code != CONCURRENT_TRANSACTIONS:
            break
        time.sleep(0.1)
    assert r.error_code == 0
    return int(r.producer_id), int(r.producer_epoch)


def produce(conn: BrokerConnection, version: int, tid: str, pid: int, epoch: int, sequence: int = 0) -> int:
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, sequence, 1 << 20)
    builder.append(0, 0, None, b"v", [])
    data = ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))])
    r = conn.call(ProduceRequest, ProduceResponse, version, transactional_id=tid, acks=-1, timeout_ms=1000,
                  topic_data=[data])
    return int(r.responses[0].partition_responses[0].error_code)


def end_txn(conn: BrokerConnection, version: int, tid: str, pid: int, epoch: int, commit: bool = True) -> int:
    r = conn.call(EndTxnRequest, EndTxnResponse, version, transactional_id=tid, producer_id=pid,
                  producer_epoch=epoch, committed=commit)
    return int(r.error_code)


def test_produce_v12_needs_no_add_partitions_at_either_level(conn: BrokerConnection) -> None:
    """Kafka 4.1.1/4.4.0 at TV1: a Produce v12 of a transaction never added is accepted (the leader adds the
    partition, as TV2 does); before this serve answered 120 TRANSACTION_ABORTABLE at TV1."""
    pid, epoch = init(conn, "p12")
    assert produce(conn, 12, "p12", pid, epoch) == NONE
    assert end_txn(conn, 5, "p12", pid, epoch) == NONE


def test_produce_v11_of_a_partition_never_added_is_refused(conn: BrokerConnection) -> None:
    """The TV1 path (verification): v11 handles TRANSACTION_ABORTABLE, so it gets it."""
    pid, epoch = init(conn, "p11")
    assert produce(conn, 11, "p11", pid, epoch) == TRANSACTION_ABORTABLE


def add_partition(conn: BrokerConnection, tid: str, pid: int, epoch: int) -> int:
    add = conn.call(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 3, v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])])
    return int(add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


@pytest.mark.parametrize("path", ["produce-v12", "add-partitions-v3"])
def test_a_producer_fenced_by_its_timeout_gets_invalid_txn_state_from_end_txn_v5(
        served: tuple[ServerThread, BrokerConnection], path: str) -> None:
    """The issue's case: the coordinator aborts a timed-out transaction and bumps the epoch (PrepareEpochFence);
    the producer's EndTxn v5 (TV2) with the old epoch matches the last epoch, a retry of a completed abort:
    INVALID_TXN_STATE (48) for a commit; EndTxn v4 (TV0) is PRODUCER_FENCED (90). Kafka 4.4.0 answers exactly
    these at TV1 and TV2 (the transaction begun either way); serve answered 90 and 90 at TV1 before."""
    server, conn = served
    pid, epoch = init(conn, "timed-out", timeout_ms=1000)
    if path == "produce-v12":
        assert produce(conn, 12, "timed-out", pid, epoch) == NONE
    else:
        assert add_partition(conn, "timed-out", pid, epoch) == NONE
        assert produce(conn, 11, "timed-out", pid, epoch) == NONE

    def state() -> str:
        _, md = server.server.broker.broker.txn_coordinator.txn_manager.get_transaction_state("timed-out")
        return md.state.value if md is not None else ""

    deadline = time.monotonic() + 10
    while server.call(state) != "CompleteAbort":
        assert time.monotonic() < deadline, f"the transaction was not aborted by its timeout: {server.call(state)}"
        time.sleep(0.1)
    assert end_txn(conn, 5, "timed-out", pid, epoch) == INVALID_TXN_STATE
    assert end_txn(conn, 4, "timed-out", pid, epoch) == PRODUCER_FENCED


def test_a_producer_fenced_by_a_new_instance_is_producer_fenced_at_every_end_txn_version(
        conn: BrokerConnection) -> None:
    """InitProducerId of a second instance bumps the epoch twice when a transaction was open (fence, then the
    retry after the abort): the old epoch is not the last one, so EndTxn v5 is PRODUCER_FENCED as v4 is
    (Kafka 4.4.0 at TV1 and TV2: epochs 0 -> 2, 90 and 90)."""
    pid, epoch = init(conn, "fenced")
    assert add_partition(conn, "fenced", pid, epoch) == NONE
    assert produce(conn, 11, "fenced", pid, epoch) == NONE
    assert init(conn, "fenced") == (pid, epoch + 2)
    assert end_txn(conn, 5, "fenced", pid, epoch) == PRODUCER_FENCED
    assert end_txn(conn, 4, "fenced", pid, epoch) == PRODUCER_FENCED


def txn_offset_commit(conn: BrokerConnection, version: int, tid: str, pid: int, epoch: int, group: str) -> int:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    r = conn.call(TxnOffsetCommitRequest, TxnOffsetCommitResponse, version, transactional_id=tid, group_id=group,
                  producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
                  topics=[T(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                      partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")])])
    return int(r.topics[0].partitions[0].error_code)


def committed(conn: BrokerConnection, group: str) -> int:
    r = conn.call(OffsetFetchRequest, OffsetFetchResponse, 7, group_id=group, require_stable=False,
                  topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])
    return int(r.topics[0].partitions[0].committed_offset)


@pytest.mark.parametrize(("version", "expected"), [(5, (NONE, 7)), (4, (TRANSACTION_ABORTABLE, -1))])
def test_txn_offset_commit_v5_adds_the_offsets_partition_at_either_level(conn: BrokerConnection, version: int,
                                                                          expected: tuple[int, int]) -> None:
    """txnOffsetCommitRequestVersionToTransactionSupportedOperation: v5 adds the group's offsets partition to the
    transaction (no AddOffsetsToTxn), v4 is only verified (TRANSACTION_ABORTABLE): Kafka 4.4.0 at TV1 and TV2
    (measured); serve answered 120 to v5 at TV1 and 0 to v4 at TV2 before."""
    tid, group = f"offsets-v{version}", f"g-v{version}"
    pid, epoch = init(conn, tid)
    assert produce(conn, 12, tid, pid, epoch) == NONE
    answer = txn_offset_commit(conn, version, tid, pid, epoch, group)
    assert end_txn(conn, 5, tid, pid, epoch) == NONE
    assert (answer, committed(conn, group)) == expected
