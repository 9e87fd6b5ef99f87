"""Transaction admin (KIP-664) on the implementation's state, as Kafka answers it: DescribeProducers (the
partition's producer state, ``UnifiedLog.activeProducers``), DescribeTransactions and ListTransactions (the
coordinator's metadata, ``TransactionCoordinator.handleDescribeTransactions`` / ``TransactionStateManager.
listTransactionStates``) and WriteTxnMarkers, with which an admin aborts a hanging transaction at a partition
(``KafkaApis.handleWriteTxnMarkersRequest``: the marker is appended as the coordinator's would be, checked
against the partition's coordinator epoch and producer epoch by the implementation's ``write_txn_marker``).

Together they give ``kafka-transactions.sh``'s workflow: list and describe transactions, find a partition's
open transaction by its start offset, abort it. Left out: authorization (WriteTxnMarkers is a cluster
action in Kafka), the coordinator's own bookkeeping after an admin abort (its transaction stays as it was, as in
Kafka, until it completes or times out).
"""

from __future__ import annotations

import re
from typing import Any

from kafka.protocol.admin.transactions import (
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
)
from kafka.protocol.producer.transaction import WriteTxnMarkersResponse

from txnspec.impl.internal_topics import GROUP_METADATA_TOPIC
from txnspec.impl.log import ControlType
from txnspec.impl.topic_partition import TopicPartition
from txnspec.impl.txn_metadata import TransactionState
from txnspec.serve.broker import Handler, WireBroker
from txnspec.serve.codes import Code
from txnspec.serve.protocol import Request

STATE_NAMES = {s.value for s in TransactionState}


def handle_describe_producers(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DescribeProducersResponse.TopicResponse
    P = R.PartitionResponse
    topics = []
    for t in body.topics:
        parts = []
        for index in t.partition_indexes:
            partition = wb.partition(t.name, int(index))
            if partition is None or not wb.leads(request, t.name, int(index)):
                code = Code.UNKNOWN_TOPIC_OR_PARTITION if partition is None else Code.NOT_LEADER_OR_FOLLOWER
                parts.append(P(partition_index=index, error_code=code, error_message=None, active_producers=[]))
                continue
            producers = [P.ProducerState(
                producer_id=pid, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=-1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
                for pid, e in sorted(partition.producer_state.producers.items())]
            parts.append(P(partition_index=index, error_code=0, error_message=None, active_producers=producers))
        topics.append(R(name=t.name, partitions=parts))
    return DescribeProducersResponse(version=v, throttle_time_ms=0, topics=topics)


def _by_topic(partitions: set[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name in sorted(partitions):
        tp = TopicPartition.of(name)
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def handle_describe_transactions(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DescribeTransactionsResponse.TransactionState
    manager = wb.broker.txn_coordinator.txn_manager
    states = []
    for tid in body.transactional_ids:
        if not wb.coordinates_txn(request, tid):
            states.append(R(error_code=Code.NOT_COORDINATOR, transactional_id=tid, transaction_state="",
                            transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                            topics=[]))
            continue
        error, md = manager.get_transaction_state(tid)
        if error.code != 0 or md is None or md.state is TransactionState.DEAD:
            code = error.code if error.code != 0 else Code.TRANSACTIONAL_ID_NOT_FOUND
            states.append(R(error_code=code, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                            transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        states.append(R(error_code=0, transactional_id=tid, transaction_state=md.state.value,
                        transaction_timeout_ms=md.txn_timeout_ms, transaction_start_time_ms=md.txn_start_timestamp,
                        producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                        topics=[R.TopicData(topic=t, partitions=ps)
                                for t, ps in _by_topic(md.topic_partitions).items()]))
    return DescribeTransactionsResponse(version=v, throttle_time_ms=0, transaction_states=states)


def handle_list_transactions(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = ListTransactionsResponse
    manager = wb.broker.txn_coordinator.txn_manager
    wanted_states = list(body.state_filters or [])
    unknown = [s for s in wanted_states if s not in STATE_NAMES]
    states = {s for s in wanted_states if s in STATE_NAMES}
    producers = {int(p) for p in body.producer_id_filters or []}
    duration = int(body.duration_filter) if v >= 1 else -1
    pattern = body.transactional_id_pattern if v >= 2 else None
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return R(version=v, throttle_time_ms=0, error_code=Code.INVALID_REQUEST, unknown_state_filters=[],
                 transaction_states=[])
    if not manager.active:
        return R(version=v, throttle_time_ms=0, error_code=Code.COORDINATOR_NOT_AVAILABLE,
                 unknown_state_filters=unknown, transaction_states=[])
    now = wb.now()
    listed = []
    for tid, md in sorted(manager.cache.items()):
        if md.state is TransactionState.DEAD or not wb.coordinates_txn(request, tid):
            continue
        if producers and md.producer_id not in producers:
            continue
        if states and md.state.value not in states:
            continue
        if duration >= 0 and now - md.txn_start_timestamp <= duration:  # running longer than the filter only
            continue
        if matcher is not None and not matcher.fullmatch(tid):
            continue
        listed.append(R.TransactionState(transactional_id=tid, producer_id=md.producer_id,
                                         transaction_state=md.state.value))
    return R(version=v, throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=listed)


def handle_write_txn_markers(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    results = []
    for marker in body.markers:
        result = ControlType.COMMIT if marker.transaction_result else ControlType.ABORT
        tv = int(marker.transaction_version) if v >= 2 else 0
        topics = []
        for t in marker.topics:
            parts = []
            for index in t.partition_indexes:
                if t.name == GROUP_METADATA_TOPIC and 0 <= int(index) < wb.broker.config.num_offsets_partitions:
                    error = wb.broker.group_coordinator.write_txn_marker(
                        TopicPartition(t.name, int(index)), int(marker.producer_id), int(marker.producer_epoch),
                        int(marker.coordinator_epoch), result, tv, now_ms=wb.now())
                    code = error.code
                else:
                    partition = wb.partition(t.name, int(index))
                    if partition is None:
                        code = Code.UNKNOWN_TOPIC_OR_PARTITION
                    elif not wb.leads(request, t.name, int(index)):
                        code = Code.NOT_LEADER_OR_FOLLOWER
                    else:
                        code = partition.write_txn_marker(int(marker.producer_id), int(marker.producer_epoch),
                                                          int(marker.coordinator_epoch), result, tv,
                                                          now_ms=wb.now()).error.code
                parts.append(T.WritableTxnMarkerPartitionResult(partition_index=index, error_code=code))
            topics.append(T(name=t.name, partitions=parts))
        results.append(R(producer_id=marker.producer_id, topics=topics))
    wb.changes += 1
    return WriteTxnMarkersResponse(version=v, markers=results)


HANDLERS: dict[str, Handler] = {
    "DescribeProducers": handle_describe_producers, "DescribeTransactions": handle_describe_transactions,
    "ListTransactions": handle_list_transactions, "WriteTxnMarkers": handle_write_txn_markers,
}

__all__ = ["HANDLERS"]
