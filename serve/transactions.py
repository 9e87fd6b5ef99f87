"""The transaction coordinator's requests: InitProducerId, AddPartitionsToTxn (v0-3 from clients, v4+ the
brokers' batched and ``verifyOnly`` form), AddOffsetsToTxn, TxnOffsetCommit (with the KIP-447 member fields of
v3+), EndTxn (v5: the epoch bumped by every TV2 transaction), on :class:`txnspec.impl.broker.Broker`.

As ``KafkaApis``: partitions of unknown topics are UNKNOWN_TOPIC_OR_PARTITION and the others of the same
AddPartitionsToTxn OPERATION_NOT_ATTEMPTED; TxnOffsetCommit of an unknown topic's partition is
UNKNOWN_TOPIC_OR_PARTITION; PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to clients older than
the version that introduced it (``PRODUCER_FENCED_SINCE``).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

from txnspec.impl.errors import Errors
from txnspec.impl.log import ControlType
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.messages import AddOffsetsToTxn, AddPartitionsToTxn, EndTxn, InitProducerId, TxnOffsetCommit
from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve.broker import Handler, WireBroker
from txnspec.serve.protocol import Request

NOT_COORDINATOR = Errors.NOT_COORDINATOR.code  # a request for a transaction or group another node coordinates


def handle_init_producer_id(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    pid, epoch = (int(body.producer_id), int(body.producer_epoch)) if v >= 3 else (-1, -1)
    if not wb.coordinates_txn(request, body.transactional_id):
        return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=NOT_COORDINATOR, producer_id=-1,
                                      producer_epoch=-1)
    # v6 (KIP-939): Enable2Pc and KeepPreparedTxn; the answer's ongoing pair of a kept transaction
    two_pc, keep = (bool(body.enable2_pc), bool(body.keep_prepared_txn)) if v >= 6 else (False, False)
    r = wb.broker.handle(InitProducerId(body.transactional_id, int(body.transaction_timeout_ms), pid, epoch,
                                        enable_two_pc=two_pc, keep_prepared_txn=keep), wb.now())
    return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=wb.error_for(request, r.error),
                                  producer_id=r.producer_id, producer_epoch=r.producer_epoch,
                                  ongoing_txn_producer_id=r.ongoing_txn_producer_id,
                                  ongoing_txn_producer_epoch=r.ongoing_txn_producer_epoch)


def _add_partitions(wb: WireBroker, request: Request, tid: str, pid: int, epoch: int, topics: Any,
                    verify_only: bool) -> list[Any]:
    """One transaction of an AddPartitionsToTxn: per-partition errors, as ``handleAddPartitionsToTransaction``
    after KafkaApis' topic checks."""
    R = AddPartitionsToTxnResponse
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    unknown = {(t, p) for t, p in wanted if wb.partition(t, p) is None}
    if not wb.coordinates_txn(request, tid):
        errors = dict.fromkeys(wanted, NOT_COORDINATOR)
    elif unknown:
        errors = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION.code if tp in unknown else
                  Errors.OPERATION_NOT_ATTEMPTED.code for tp in wanted}
    elif verify_only:
        err, md = wb.broker.txn_coordinator.txn_manager.get_transaction_state(tid)
        if err is Errors.NONE and (md is None or md.producer_id != pid):
            err = Errors.INVALID_PRODUCER_ID_MAPPING
        elif err is Errors.NONE and md is not None and md.producer_epoch != epoch:
            err = Errors.PRODUCER_FENCED
        errors = {tp: (err if err is not Errors.NONE else Errors.NONE if md is not None and TopicPartition(*tp)
                       in md.topic_partitions else Errors.INVALID_TXN_STATE).code for tp in wanted}
    elif wb.request_tv(request) >= 2:  # v4+, the brokers' form: the coordinator takes it as TV2
        err = wb.broker.txn_coordinator.handle_add_partitions_to_txn(tid, pid, epoch,
                                                                     [TopicPartition(t, p) for t, p in wanted],
                                                                     wb.request_tv(request), now_ms=wb.now())
        errors = dict.fromkeys(wanted, wb.error_for(request, err))
    else:
        names = tuple(TopicPartition(t, p) for t, p in wanted)
        r = wb.broker.handle(AddPartitionsToTxn(tid, pid, epoch, names), wb.now())
        errors = dict.fromkeys(wanted, wb.error_for(request, r.error))
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in errors.items():
        result = R.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult
        by_topic.setdefault(t, []).append(result(partition_index=p, partition_error_code=code))
    return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


def handle_add_partitions_to_txn(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = AddPartitionsToTxnResponse
    if v <= 3:
        results = _add_partitions(wb, request, body.v3_and_below_transactional_id,
                                  int(body.v3_and_below_producer_id), int(body.v3_and_below_producer_epoch),
                                  body.v3_and_below_topics, False)
        return R(version=v, throttle_time_ms=0, results_by_topic_v3_and_below=results)
    per_txn = [R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_add_partitions(
        wb, request, t.transactional_id, int(t.producer_id), int(t.producer_epoch), t.topics, bool(t.verify_only)))
        for t in body.transactions]
    return R(version=v, throttle_time_ms=0, error_code=0, results_by_transaction=per_txn)


def handle_add_offsets_to_txn(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    if not wb.coordinates_txn(request, body.transactional_id):
        return AddOffsetsToTxnResponse(version=v, throttle_time_ms=0, error_code=NOT_COORDINATOR)
    r = wb.broker.handle(AddOffsetsToTxn(body.transactional_id, int(body.producer_id), int(body.producer_epoch),
                                         body.group_id), wb.now())
    return AddOffsetsToTxnResponse(version=v, throttle_time_ms=0, error_code=wb.error_for(request, r.error))


def handle_txn_offset_commit(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = TxnOffsetCommitResponse
    offsets, unknown = [], []
    for t in body.topics:
        for p in t.partitions:
            if wb.partition(t.name, int(p.partition_index)) is None:
                unknown.append((t.name, int(p.partition_index)))
            else:
                offsets.append((TopicPartition(t.name, int(p.partition_index)), int(p.committed_offset)))
    codes: dict[tuple[str, int], int] = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION.code for tp in unknown}
    if offsets and not wb.coordinates_group(request, body.group_id):  # the group's coordinator takes it
        codes.update({(tp.topic, tp.partition): NOT_COORDINATOR for tp, _ in offsets})
    elif offsets:
        member = MemberIdentity(body.member_id or "", body.group_instance_id, int(body.generation_id)) if v >= 3 \
            else MemberIdentity()
        r = wb.broker.handle(TxnOffsetCommit(body.transactional_id, body.group_id, int(body.producer_id),
                                             int(body.producer_epoch), tuple(offsets), member=member,
                                             api_version=v), wb.now())
        errors = dict(r.partition_errors)
        for tp, _ in offsets:
            codes[(tp.topic, tp.partition)] = wb.error_for(request, errors.get(tp, r.error))
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append(R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
            partition_index=p, error_code=code))
    return R(version=v, throttle_time_ms=0, topics=[R.TxnOffsetCommitResponseTopic(name=t, partitions=ps)
                                                   for t, ps in by_topic.items()])


def handle_end_txn(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    result = ControlType.COMMIT if body.committed else ControlType.ABORT
    if not wb.coordinates_txn(request, body.transactional_id):
        return EndTxnResponse(version=v, throttle_time_ms=0, error_code=NOT_COORDINATOR, producer_id=-1,
                              producer_epoch=-1)
    r = wb.broker.handle(EndTxn(body.transactional_id, int(body.producer_id), int(body.producer_epoch), result,
                                wb.request_tv(request)), wb.now())
    return EndTxnResponse(version=v, throttle_time_ms=0, error_code=wb.error_for(request, r.error),
                          producer_id=r.producer_id, producer_epoch=r.producer_epoch)


HANDLERS: dict[str, Handler] = {
    "InitProducerId": handle_init_producer_id, "AddPartitionsToTxn": handle_add_partitions_to_txn,
    "AddOffsetsToTxn": handle_add_offsets_to_txn, "TxnOffsetCommit": handle_txn_offset_commit,
    "EndTxn": handle_end_txn,
}
