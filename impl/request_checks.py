"""Whether a request is well-formed: the wire protocol's and ``KafkaApis``' checks before a request is handled.

Ids are int64 >= -1, epochs int16 >= -1, timeouts and sequences int32, transactional ids strings, partitions
``topic-N`` (a :class:`~txnspec.impl.topic_partition.TopicPartition`, or text naming one), records
:class:`~txnspec.impl.log.Record` values. A malformed request is answered ``INVALID_REQUEST`` with the reason
(:meth:`txnspec.impl.broker.Broker.handle`), never an exception.

Left out: the wire encoding itself (serve decodes bytes with Kafka's schemas before this), ACLs.
"""

from __future__ import annotations

from txnspec.impl.log import ControlType
from txnspec.impl.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    Fetch,
    FindCoordinator,
    InitProducerId,
    OffsetFetch,
    Produce,
    TxnOffsetCommit,
)
from txnspec.impl.topic_partition import TopicPartition

_INT16 = (-(1 << 15), (1 << 15) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _int(value: object, name: str, lo: int, hi: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} must be an integer, got {type(value).__name__}"
    if not lo <= value <= hi:
        return f"{name} must be in [{lo}, {hi}], got {value}"
    return ""


def _partition_name(value: object, name: str = "partition") -> str:
    if TopicPartition.parse(value) is None:
        return f"{name} must be a string 'topic-N', got {value!r}"
    return ""


def validate_request(request: object) -> str:
    """Why a request is malformed (the wire protocol's and KafkaApis' checks), or ``""``.

    Ids are int64 >= -1, epochs int16 >= -1, timeouts and sequences int32, transactional ids strings,
    partitions ``topic-N``; records are :class:`~txnspec.impl.log.Record` values of bytes/str/None.
    """
    from txnspec.impl.log import Record
    from txnspec.impl.partition import IsolationLevel
    checks: list[str] = []
    if not isinstance(request, FindCoordinator | InitProducerId | AddPartitionsToTxn | AddOffsetsToTxn | EndTxn
                      | TxnOffsetCommit | Produce | Fetch | OffsetFetch):
        return f"unknown request type {type(request).__name__}"
    tid = getattr(request, "transactional_id", "")
    if tid is not None and not isinstance(tid, str):
        checks.append(f"transactional_id must be a string or null, got {type(tid).__name__}")
    if hasattr(request, "producer_id"):
        checks.append(_int(request.producer_id, "producer_id", -1, _INT64[1]))
    if hasattr(request, "producer_epoch"):
        checks.append(_int(request.producer_epoch, "producer_epoch", -1, _INT16[1]))
    if isinstance(request, InitProducerId):
        checks.append(_int(request.transaction_timeout_ms, "transaction_timeout_ms", *_INT32))
    if isinstance(request, AddPartitionsToTxn):
        if not isinstance(request.partitions, tuple | list | frozenset | set):
            checks.append("partitions must be a collection")
        else:
            checks.extend(_partition_name(p) for p in request.partitions)
    if isinstance(request, AddOffsetsToTxn | TxnOffsetCommit | OffsetFetch) and (
            not isinstance(request.group_id, str) or not request.group_id):
        checks.append("group_id must be a non-empty string")
    if isinstance(request, TxnOffsetCommit):
        if not isinstance(request.offsets, tuple) or not all(
                isinstance(o, tuple) and len(o) == 2 for o in request.offsets):
            checks.append("offsets must be a tuple of (partition, offset) pairs")
        else:
            for tp, off in request.offsets:
                checks.extend((_partition_name(tp), _int(off, "offset", 0, _INT64[1])))
    if isinstance(request, EndTxn):
        if not isinstance(request.result, ControlType):
            checks.append("result must be COMMIT or ABORT")
        checks.append(_int(request.transaction_version, "transaction_version", 0, 2))
    if isinstance(request, Produce):
        checks.append(_partition_name(request.partition))
        checks.append(_int(request.base_sequence, "base_sequence", -1, _INT32[1]))
        checks.append(_int(request.transaction_version, "transaction_version", 0, 2))
        if not isinstance(request.is_transactional, bool):
            checks.append("is_transactional must be a bool")
        if not isinstance(request.records, tuple | list) or not request.records or not all(
                isinstance(r, Record) and all(v is None or isinstance(v, str | bytes) for v in (r.key, r.value))
                and isinstance(r.timestamp, int) for r in request.records):
            checks.append("records must be a non-empty sequence of Record(key, value) of bytes/str/None")
    if isinstance(request, Fetch):
        checks.append(_partition_name(request.partition))
        checks.append(_int(request.offset, "offset", 0, _INT64[1]))
        if not isinstance(request.isolation, IsolationLevel):
            checks.append("isolation must be an IsolationLevel")
        if request.max_batches is not None:
            checks.append(_int(request.max_batches, "max_batches", 1, _INT32[1]))
    if isinstance(request, OffsetFetch):
        if not isinstance(request.partitions, tuple | list):
            checks.append("partitions must be a sequence")
        else:
            checks.extend(_partition_name(p) for p in request.partitions)
    if isinstance(request, FindCoordinator) and not isinstance(request.key, str):
        checks.append("key must be a string")
    return "; ".join(c for c in checks if c)


# AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation: from Produce v11 (TxnOffsetCommit
# v4) the client handles TRANSACTION_ABORTABLE and gets it as it is; older requests get INVALID_TXN_STATE


__all__ = ["validate_request"]
