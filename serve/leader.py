"""The partition leader's requests: Produce, Fetch (isolation levels, aborted transactions, the LSO, long
polling) and ListOffsets, on the implementation's partitions.

As ``ReplicaManager`` / ``UnifiedLog``: one v2 batch per produced partition (:mod:`.records`), acks -1, 0 or 1
(acks=0 gets no response); a Fetch answers the batches below the high watermark (read_uncommitted) or the last
stable offset (read_committed, with the aborted transactions overlapping them), at least one batch and then
as many as fit ``partition_max_bytes`` and ``max_bytes`` (KIP-74), and waits up to ``max_wait_ms`` while
fewer than ``min_bytes`` are ready. A fetched data batch is the client's own bytes when it was produced in this
run, else it is encoded from the implementation's log (cached, bounded).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.topics import DeleteRecordsResponse
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsResponse
from kafka.protocol.producer.produce import ProduceResponse

from txnspec.impl.errors import Errors
from txnspec.impl.messages import Produce
from txnspec.impl.partition import IsolationLevel, Partition
from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve import records as wire_records
from txnspec.serve.broker import Handler, Pending, WireBroker
from txnspec.serve.protocol import Request

FETCH_MAX_BATCHES = 2000  # batches read from the log per partition and Fetch (bytes are bounded after)
ENCODED_CACHE_BATCHES = 20_000  # fetched batches kept encoded (memory stays bounded: the cache is then cleared)
INVALID_REQUIRED_ACKS = 21


def handle_produce(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = ProduceResponse
    P = R.TopicProduceResponse.PartitionProduceResponse
    acks = int(body.acks)
    responses = []
    for t in body.topic_data:
        answers = []
        for pd in t.partition_data:
            index = int(pd.index)
            answers.append(_produce_partition(wb, request, t.name, index, pd.records, acks, P))
        responses.append(R.TopicProduceResponse(name=t.name, partition_responses=answers))
    if acks == 0:
        return None
    return R(version=v, responses=responses, throttle_time_ms=0)


def _produce_partition(wb: WireBroker, request: Request, topic: str, index: int, data: bytes | None, acks: int,
                       P: Any) -> Any:
    def fail(code: int, message: str | None = None) -> Any:
        return P(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                 record_errors=[], error_message=message)

    if acks not in (-1, 0, 1):
        return fail(INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, got {acks}")
    partition = wb.partition(topic, index)
    if partition is None:
        return fail(Errors.UNKNOWN_TOPIC_OR_PARTITION.code)
    if not wb.leads(request, topic, index):
        return fail(Errors.NOT_LEADER_OR_FOLLOWER.code)
    config = wb.topics[topic].config
    try:
        batch = wire_records.decode_produce(data, request.version, compacted="compact" in config("cleanup.policy"),
                                            max_message_bytes=int(config("max.message.bytes")),
                                            max_decompressed_bytes=int(config("max.decompressed.message.bytes")))
    except wire_records.InvalidRecords as exc:
        answer = fail(int(exc.error), str(exc))
        answer.record_errors = [P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                for i, m in exc.record_errors]
        return answer
    if acks == -1 and int(config("min.insync.replicas")) > 1:  # Partition.appendRecordsToLeader: one replica
        return fail(Errors.NOT_ENOUGH_REPLICAS.code, f"The size of the current ISR 1 is insufficient to satisfy the "
                    f"min.isr requirement of {config('min.insync.replicas')} for partition {topic}-{index}")
    target = wire_records.target_codec(str(config("compression.type")), batch.codec)
    tid = request.body.transactional_id
    if batch.is_transactional and not tid:
        return fail(Errors.INVALID_REQUEST.code, "a transactional batch needs the request's transactional id")
    r = wb.broker.handle(Produce(TopicPartition(topic, index), batch.producer_id, batch.producer_epoch,
                                 batch.base_sequence, batch.records, batch.is_transactional,
                                 tid if batch.is_transactional else None, wb.request_tv(request),
                                 api_version=request.version), wb.now())
    if r.error is not Errors.NONE:
        return fail(r.error.code, str(r.extra.get("message") or "") or None)
    if not r.extra.get("duplicate"):
        stored = bytes(data or b"") if target is batch.codec else wire_records.recompress(bytes(data or b""), target)
        wb.produced[(partition.name, r.base_offset)] = wire_records.as_stored(stored, r.base_offset)
    return P(index=index, error_code=0, base_offset=r.base_offset, log_append_time_ms=-1,
             log_start_offset=partition.log_start_offset, record_errors=[], error_message=None)


def fetch_partition(wb: WireBroker, topic: str, index: int, offset: int, committed: bool, max_bytes: int,
                    leads: bool = True) -> tuple[Any, int]:
    """One partition of a Fetch response and the bytes of records in it (``ReplicaManager.readFromLog``)."""
    D = FetchResponse.FetchableTopicResponse.PartitionData
    partition = wb.partition(topic, index)
    if partition is None or not leads:
        code = Errors.UNKNOWN_TOPIC_OR_PARTITION if partition is None else Errors.NOT_LEADER_OR_FOLLOWER
        return D(partition_index=index, error_code=code.code, high_watermark=-1,
                 last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                 records=None), 0
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    f = partition.read(offset, isolation, FETCH_MAX_BATCHES)
    chunks: list[bytes] = []
    size = 0
    for batch in f.batches:
        key = (partition.name, batch.base_offset)
        encoded = wb.produced.get(key) or wb._encoded.get(key)
        if encoded is None:
            if len(wb._encoded) >= ENCODED_CACHE_BATCHES:
                wb._encoded.clear()
            encoded = wb._encoded[key] = wire_records.encode_batch(batch)
        if chunks and size + len(encoded) > max_bytes:
            break  # KIP-74: at least one batch, then as many as fit
        chunks.append(encoded)
        size += len(encoded)
    aborted = None
    if committed:
        A = D.AbortedTransaction
        aborted = [A(producer_id=a.producer_id, first_offset=a.first_offset) for a in (f.aborted_transactions or ())]
    return D(partition_index=index, error_code=f.error.code, high_watermark=f.high_watermark,
             last_stable_offset=f.last_stable_offset, log_start_offset=f.log_start_offset,
             aborted_transactions=aborted, preferred_read_replica=-1, records=b"".join(chunks)), size


def handle_fetch(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    committed = v >= 4 and int(body.isolation_level) == 1
    deadline = wb.now() + max(0, int(body.max_wait_ms))

    def answer() -> tuple[Any, int]:
        total_budget = int(body.max_bytes) if v >= 3 else 1 << 31
        responses, total = [], 0
        for t in body.topics:
            parts = []
            for p in t.partitions:
                budget = max(0, min(int(p.partition_max_bytes), total_budget - total))
                data, size = fetch_partition(wb, t.topic, int(p.partition), int(p.fetch_offset), committed, budget,
                                             wb.leads(request, t.topic, int(p.partition)))
                parts.append(data)
                total += size
            responses.append(FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return FetchResponse(version=v, throttle_time_ms=0, error_code=0, session_id=0, responses=responses), total

    response, total = answer()
    if total >= max(1, int(body.min_bytes)) or deadline <= wb.now() or any(
            p.error_code != 0 for r in response.responses for p in r.partitions):
        return response

    def poll() -> Any | None:
        again, size = answer()
        return again if size >= max(1, int(body.min_bytes)) else None

    return Pending(poll, lambda: answer()[0], deadline)


EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6  # ListOffsetsRequest (v8, v9, v11)


def _offset_for_timestamp(partition: Partition, timestamp: int, committed: bool) -> tuple[int, int]:
    """``UnifiedLog.fetchOffsetByTimestamp``: (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local,
    -5 latest tiered and -6 earliest pending upload (no tiered storage: none), else the first record at or
    after ``timestamp``) -> (timestamp, offset); offset -1 when there is none."""
    end = partition.last_stable_offset if committed else partition.high_watermark
    if timestamp == -1:
        return -1, end
    if timestamp in (-2, EARLIEST_LOCAL):
        return -1, partition.log_start_offset
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1
    best: tuple[int, int] = (-1, -1)
    for batch in partition.log.read(partition.log_start_offset, end):
        if batch.is_control:
            continue
        for i, r in enumerate(batch.records):
            if timestamp == -3:
                if r.timestamp > best[0]:
                    best = (r.timestamp, batch.base_offset + i)
            elif r.timestamp >= timestamp:
                return r.timestamp, batch.base_offset + i
    return best


def handle_list_offsets(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    committed = v >= 2 and int(body.isolation_level) == 1
    R = ListOffsetsResponse
    P = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            partition = wb.partition(t.name, int(p.partition_index))
            if partition is None or not wb.leads(request, t.name, int(p.partition_index)):
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION if partition is None else Errors.NOT_LEADER_OR_FOLLOWER
                parts.append(P(partition_index=p.partition_index, error_code=code.code, timestamp=-1, offset=-1,
                               leader_epoch=-1))
                continue
            ts, offset = _offset_for_timestamp(partition, int(p.timestamp), committed)
            parts.append(P(partition_index=p.partition_index, error_code=0, timestamp=ts, offset=offset,
                           leader_epoch=wb.nodes.leader_epoch if offset >= 0 else -1))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(version=v, throttle_time_ms=0, topics=topics)


def handle_delete_records(wb: WireBroker, request: Request) -> Any:
    """``ReplicaManager.deleteRecords``: each partition's log start offset moves up to the offset asked (-1: the
    high watermark); above the high watermark is OFFSET_OUT_OF_RANGE; the answer's low watermark is the new
    log start offset. A Fetch below it is OFFSET_OUT_OF_RANGE and ListOffsets' earliest names it."""
    body, v = request.body, request.version
    R = DeleteRecordsResponse
    T, P = R.DeleteRecordsTopicResult, R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            partition = wb.partition(t.name, index)
            if partition is None or not wb.leads(request, t.name, index):
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION if partition is None else Errors.NOT_LEADER_OR_FOLLOWER
                parts.append(P(partition_index=index, low_watermark=-1, error_code=code.code))
                continue
            error, low = wb.broker.delete_records(TopicPartition(t.name, index), int(p.offset))
            parts.append(P(partition_index=index, low_watermark=low, error_code=error.code))
        topics.append(T(name=t.name, partitions=parts))
    return R(version=v, throttle_time_ms=0, topics=topics)


HANDLERS: dict[str, Handler] = {"Produce": handle_produce, "Fetch": handle_fetch, "ListOffsets": handle_list_offsets,
                                "DeleteRecords": handle_delete_records}
