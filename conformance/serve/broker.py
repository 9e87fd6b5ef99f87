"""The reference implementation behind Kafka's requests: one broker, node 0, leader of every partition and
coordinator of every transactional id and group.

:class:`WireBroker` turns each decoded request (:mod:`.protocol`) into calls on
:class:`txnspec.impl.broker.Broker` and the answers into the response struct of the request's version, as
``KafkaApis`` does: topic checks (UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED for the rest of an
AddPartitionsToTxn), version-dependent error codes (PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH to
clients older than the version that introduced it), one v2 batch per produced partition (:mod:`.records`).
The transaction version of a request follows ``TransactionVersion``: Produce v12+ and EndTxn v5+ are TV2
when the broker's finalized ``transaction.version`` is 2.

After every request the coordinator's markers are written at once (``deliver_markers``: the implementation's
marker channel with no delay); :meth:`WireBroker.tick` lets wall time reach the implementation's clock
(transaction timeouts, id expiration, session timeouts), as the in-process :class:`~txnspec.impl.cluster.
Cluster` does with ``advance``. A request that must wait (a Fetch below ``min_bytes``, a JoinGroup or
SyncGroup during a rebalance) answers a :class:`Pending`, which the server polls after each change until
its deadline.

Group RPCs (JoinGroup ... OffsetFetch) are in :mod:`.groups`. Left out: topic ids (requests that name
topics by id are not advertised), fetch sessions (every Fetch is a full one: session id 0), quotas, ACLs,
DeleteTopics and configs, more than one broker.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin.topics import CreateTopicsResponse
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataResponse
from kafka.protocol.producer.produce import ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

from txnspec.conformance.serve import records as wire_records
from txnspec.conformance.serve.protocol import Request, advertised
from txnspec.impl.broker import Broker, BrokerConfig
from txnspec.impl.coordinator import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from txnspec.impl.errors import Errors
from txnspec.impl.log import ControlType
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    FindCoordinator,
    InitProducerId,
    Produce,
    TxnOffsetCommit,
)
from txnspec.impl.partition import IsolationLevel, Partition

NODE_ID = 0
CLUSTER_ID = "txnspec-serve"
INTERNAL_TOPICS = (TRANSACTION_STATE_TOPIC, GROUP_METADATA_TOPIC)
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# KafkaApis answers INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED to clients older than these versions
PRODUCER_FENCED_SINCE = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2,
                         "TxnOffsetCommit": 2}
FETCH_MAX_BATCHES = 2000  # batches read from the log per partition and Fetch (bytes are bounded after)
ENCODED_CACHE_BATCHES = 20_000  # fetched batches kept encoded (memory stays bounded: the cache is then cleared)


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 9092  # the advertised port (the one bound)
    transaction_version: int = 2
    data_dir: str | None = None
    default_partitions: int = 1
    topics: tuple[str, ...] = ()  # created at start: "name" or "name:partitions"
    auto_create_topics: bool = True
    max_request_bytes: int = 100 * 1024 * 1024


@dataclass
class Pending:
    """A request answered later: ``poll()`` gives the response once it can, ``expire()`` at the deadline."""

    poll: Callable[[], Any | None]
    expire: Callable[[], Any]
    deadline_ms: int


@dataclass
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(init=False)

    def __post_init__(self) -> None:
        self.topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"txnspec-serve:{self.name}")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def topic_name_problem(name: object) -> str:
    if not isinstance(name, str) or not _TOPIC_NAME.match(name) or name in (".", ".."):
        return f"invalid topic name {name!r}: 1-249 of [a-zA-Z0-9._-]"
    return ""


class WireBroker:
    """The implementation's broker behind Kafka's requests (see the module docstring)."""

    def __init__(self, config: ServeConfig, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        self.broker = Broker(BrokerConfig(transaction_version=config.transaction_version),
                             data_dir=config.data_dir, now_ms=clock())
        self.topics: dict[str, Topic] = {}
        counts = (self.broker.config.num_txn_log_partitions, self.broker.config.num_offsets_partitions)
        self.internal = {name: Topic(name, n) for name, n in zip(INTERNAL_TOPICS, counts, strict=True)}
        for name in self.broker.partitions:  # durable mode: the topics found on disk
            topic, _, index = name.rpartition("-")
            if topic and topic not in INTERNAL_TOPICS and index.isdigit():
                known = self.topics.get(topic)
                self.topics[topic] = Topic(topic, max(int(index) + 1, known.partitions if known else 0))
        for spec in config.topics:
            name, _, count = spec.partition(":")
            self.create_topic(name, int(count) if count else config.default_partitions)
        self.changes = 0  # bumped whenever logs, offsets or groups may have changed (waiters re-poll)
        self._encoded: dict[tuple[str, int], bytes] = {}
        # the client's bytes of each batch appended in this run, as Kafka's log holds them (as large as the log,
        # which the implementation keeps in memory too)
        self.produced: dict[tuple[str, int], bytes] = {}
        self.deliver_markers()

    # --- time, markers, topics ---

    def now(self) -> int:
        return self.clock()

    def deliver_markers(self) -> None:
        """Write every marker the coordinator queued (and those its completions queue in turn)."""
        for _ in range(1000):
            if not self.broker.deliver_markers(self.now()):
                return
            self.changes += 1

    def tick(self) -> None:
        """Let wall time reach the implementation: timeouts, expirations, retried completions, sessions."""
        now = self.now()
        self.broker.tick(now)
        self.broker.membership.tick(now)
        self.deliver_markers()
        self.changes += 1

    def create_topic(self, name: str, partitions: int) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = Topic(name, partitions)
            for i in range(partitions):
                self.broker.partition(f"{name}-{i}")
        return topic

    def partition(self, topic: str, index: int) -> Partition | None:
        known = self.topics.get(topic)
        if known is None or not 0 <= index < known.partitions:
            return None
        return self.broker.partition(f"{topic}-{index}")

    def flush(self) -> None:
        self.broker.flush()

    # --- dispatch ---

    def handle(self, request: Request) -> Any:
        """The response struct to ``request`` (or a :class:`Pending`); None for Produce with acks=0."""
        from txnspec.conformance.serve import groups

        handler = _HANDLERS.get(request.api.name) or getattr(groups, f"handle_{request.api.name}")
        response = handler(self, request)
        if request.api.name not in ("ApiVersions", "Metadata", "FindCoordinator", "Fetch", "ListOffsets",
                                    "OffsetFetch"):
            self.deliver_markers()
            self.changes += 1
        return response

    def error_for(self, request: Request, error: Errors) -> int:
        since = PRODUCER_FENCED_SINCE.get(request.api.name)
        if error is Errors.PRODUCER_FENCED and since is not None and request.version < since:
            return Errors.INVALID_PRODUCER_EPOCH.code
        return error.code

    def request_tv(self, request: Request, since: int) -> int:
        return 2 if self.config.transaction_version >= 2 and request.version >= since else 0


# --- cluster metadata -------------------------------------------------------------------------------------

def handle_api_versions(wb: WireBroker, request: Request) -> Any:
    v = request.version
    fields: dict[str, Any] = {"error_code": 0, "api_keys": advertised(v), "throttle_time_ms": 0}
    if v >= 3:
        R = ApiVersionsResponse
        fields["supported_features"] = [R.SupportedFeatureKey(name="transaction.version", min_version=0,
                                                              max_version=2)]
        level = wb.config.transaction_version
        fields["finalized_features_epoch"] = 1
        fields["finalized_features"] = [R.FinalizedFeatureKey(name="transaction.version", max_version_level=level,
                                                              min_version_level=level)] if level > 0 else []
        fields["zk_migration_ready"] = False
    return ApiVersionsResponse(version=v, **fields)


def _metadata_topic(wb: WireBroker, name: str, error: Errors, v: int) -> Any:
    M = MetadataResponse.MetadataResponseTopic
    topic = wb.topics.get(name) or wb.internal.get(name)
    partitions = [] if topic is None else [
        M.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=NODE_ID, leader_epoch=0,
                                    replica_nodes=[NODE_ID], isr_nodes=[NODE_ID], offline_replicas=[])
        for i in range(topic.partitions)]
    return M(error_code=error.code, name=name, topic_id=topic.topic_id if topic else uuid.UUID(int=0),
             is_internal=name in wb.internal, partitions=partitions)


def handle_metadata(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    requested = body.topics
    if requested is None or (v == 0 and not requested):
        names = sorted(wb.topics)
        topics = [_metadata_topic(wb, n, Errors.NONE, v) for n in names]
    else:
        topics = []
        auto = wb.config.auto_create_topics and (v < 4 or bool(body.allow_auto_topic_creation))
        for t in requested:
            name = t.name
            if topic_name_problem(name):
                topics.append(_metadata_topic(wb, str(name), Errors.INVALID_REQUEST, v)
                              if name is None else _invalid_topic(str(name)))
            elif name in wb.topics or name in wb.internal:
                topics.append(_metadata_topic(wb, name, Errors.NONE, v))
            elif auto:
                wb.create_topic(name, wb.config.default_partitions)
                topics.append(_metadata_topic(wb, name, Errors.NONE, v))
            else:
                topics.append(_metadata_topic(wb, name, Errors.UNKNOWN_TOPIC_OR_PARTITION, v))
    broker = MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host=wb.config.host, port=wb.config.port,
                                                     rack=None)
    return MetadataResponse(version=v, throttle_time_ms=0, brokers=[broker], cluster_id=CLUSTER_ID,
                            controller_id=NODE_ID, topics=topics,
                            error_code=0)


INVALID_TOPIC_EXCEPTION = 17


def _invalid_topic(name: str) -> Any:
    return MetadataResponse.MetadataResponseTopic(error_code=INVALID_TOPIC_EXCEPTION, name=name,
                                                  topic_id=uuid.UUID(int=0), is_internal=False, partitions=[])


def handle_find_coordinator(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    key_type = int(body.key_type) if v >= 1 else 0
    keys = list(body.coordinator_keys or []) if v >= 4 else [body.key]

    def answer(key: str) -> tuple[int, str | None]:
        if key_type not in (0, 1):
            return Errors.INVALID_REQUEST.code, f"unknown coordinator type {key_type}"
        kind = CoordinatorType.TRANSACTION if key_type == 1 else CoordinatorType.GROUP
        r = wb.broker.handle(FindCoordinator(kind, key or ""), wb.now())
        return r.error.code, None

    R = FindCoordinatorResponse
    if v >= 4:
        coordinators = []
        for key in keys:
            code, message = answer(key)
            coordinators.append(R.Coordinator(key=key, node_id=NODE_ID if code == 0 else -1, host=wb.config.host
                                              if code == 0 else "", port=wb.config.port if code == 0 else -1,
                                              error_code=code, error_message=message))
        return R(version=v, throttle_time_ms=0, coordinators=coordinators)
    code, message = answer(keys[0])
    return R(version=v, throttle_time_ms=0, error_code=code, error_message=message,
             node_id=NODE_ID if code == 0 else -1, host=wb.config.host if code == 0 else "",
             port=wb.config.port if code == 0 else -1)


TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 36, 37, 38


def handle_create_topics(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = CreateTopicsResponse
    results = []
    for t in body.topics:
        count = wb.config.default_partitions if t.num_partitions == -1 else int(t.num_partitions)
        code, message = 0, None
        if topic_name_problem(t.name) or t.name in INTERNAL_TOPICS:
            code, message = INVALID_TOPIC_EXCEPTION, topic_name_problem(t.name) or f"{t.name} is internal"
        elif t.name in wb.topics:
            code, message = TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        elif t.assignments:
            count = len(t.assignments)
        if code == 0 and count < 1:
            code, message = INVALID_PARTITIONS, f"Number of partitions must be larger than 0, got {count}."
        if code == 0 and int(t.replication_factor) not in (-1, 1):
            code, message = INVALID_REPLICATION_FACTOR, (f"Replication factor: {t.replication_factor} larger than "
                                                         "available brokers: 1.")
        if code == 0 and not body.validate_only:
            wb.create_topic(t.name, count)
        topic = wb.topics.get(t.name)
        results.append(R.CreatableTopicResult(
            name=t.name, topic_id=topic.topic_id if topic else uuid.UUID(int=0), error_code=code,
            error_message=message, num_partitions=count if code == 0 else -1,
            replication_factor=1 if code == 0 else -1, configs=[]))
    return R(version=v, throttle_time_ms=0, topics=results)


# --- transactions ---------------------------------------------------------------------------------------

def handle_init_producer_id(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    pid, epoch = (int(body.producer_id), int(body.producer_epoch)) if v >= 3 else (-1, -1)
    r = wb.broker.handle(InitProducerId(body.transactional_id, int(body.transaction_timeout_ms), pid, epoch),
                         wb.now())
    return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=wb.error_for(request, r.error),
                                  producer_id=r.producer_id, producer_epoch=r.producer_epoch)


def _add_partitions(wb: WireBroker, request: Request, tid: str, pid: int, epoch: int, topics: Any,
                    verify_only: bool) -> list[Any]:
    """One transaction of an AddPartitionsToTxn: per-partition errors, as ``handleAddPartitionsToTransaction``
    after KafkaApis' topic checks."""
    R = AddPartitionsToTxnResponse
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    unknown = {(t, p) for t, p in wanted if wb.partition(t, p) is None}
    if unknown:
        errors = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION.code if tp in unknown else
                  Errors.OPERATION_NOT_ATTEMPTED.code for tp in wanted}
    elif verify_only:
        err, md = wb.broker.txn_coordinator.txn_manager.get_transaction_state(tid)
        if err is Errors.NONE and (md is None or md.producer_id != pid):
            err = Errors.INVALID_PRODUCER_ID_MAPPING
        elif err is Errors.NONE and md is not None and md.producer_epoch != epoch:
            err = Errors.PRODUCER_FENCED
        errors = {tp: (err if err is not Errors.NONE else Errors.NONE if md is not None and f"{tp[0]}-{tp[1]}"
                       in md.topic_partitions else Errors.INVALID_TXN_STATE).code for tp in wanted}
    else:
        r = wb.broker.handle(AddPartitionsToTxn(tid, pid, epoch, tuple(f"{t}-{p}" for t, p in wanted)), wb.now())
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
                offsets.append((f"{t.name}-{int(p.partition_index)}", int(p.committed_offset)))
    codes: dict[tuple[str, int], int] = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION.code for tp in unknown}
    if offsets:
        member = MemberIdentity(body.member_id or "", body.group_instance_id, int(body.generation_id)) if v >= 3 \
            else MemberIdentity()
        r = wb.broker.handle(TxnOffsetCommit(body.transactional_id, body.group_id, int(body.producer_id),
                                             int(body.producer_epoch), tuple(offsets), member=member), wb.now())
        errors = dict(r.partition_errors)
        for name, _ in offsets:
            topic, _, index = name.rpartition("-")
            codes[(topic, int(index))] = wb.error_for(request, errors.get(name, r.error))
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append(R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
            partition_index=p, error_code=code))
    return R(version=v, throttle_time_ms=0, topics=[R.TxnOffsetCommitResponseTopic(name=t, partitions=ps)
                                                   for t, ps in by_topic.items()])


def handle_end_txn(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    result = ControlType.COMMIT if body.committed else ControlType.ABORT
    r = wb.broker.handle(EndTxn(body.transactional_id, int(body.producer_id), int(body.producer_epoch), result,
                                wb.request_tv(request, 5)), wb.now())
    return EndTxnResponse(version=v, throttle_time_ms=0, error_code=wb.error_for(request, r.error),
                          producer_id=r.producer_id, producer_epoch=r.producer_epoch)


# --- produce, fetch, list offsets -------------------------------------------------------------------------

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
    try:
        batch = wire_records.decode_produce(data)
    except wire_records.InvalidRecords as exc:
        return fail((Errors.CORRUPT_MESSAGE if exc.corrupt else Errors.INVALID_RECORD).code, str(exc))
    tid = request.body.transactional_id
    if batch.is_transactional and not tid:
        return fail(Errors.INVALID_REQUEST.code, "a transactional batch needs the request's transactional id")
    r = wb.broker.handle(Produce(f"{topic}-{index}", batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                 batch.records, batch.is_transactional, tid if batch.is_transactional else None,
                                 wb.request_tv(request, 12)), wb.now())
    if r.error is not Errors.NONE:
        return fail(r.error.code, str(r.extra.get("message") or "") or None)
    if not r.extra.get("duplicate"):
        wb.produced[(partition.name, r.base_offset)] = wire_records.as_stored(bytes(data or b""), r.base_offset)
    return P(index=index, error_code=0, base_offset=r.base_offset, log_append_time_ms=-1,
             log_start_offset=partition.log_start_offset, record_errors=[], error_message=None)


def fetch_partition(wb: WireBroker, topic: str, index: int, offset: int, committed: bool, max_bytes: int
                    ) -> tuple[Any, int]:
    """One partition of a Fetch response and the bytes of records in it (``ReplicaManager.readFromLog``)."""
    D = FetchResponse.FetchableTopicResponse.PartitionData
    partition = wb.partition(topic, index)
    if partition is None:
        return D(partition_index=index, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION.code, high_watermark=-1,
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
                data, size = fetch_partition(wb, t.topic, int(p.partition), int(p.fetch_offset), committed, budget)
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


def _offset_for_timestamp(partition: Partition, timestamp: int, committed: bool) -> tuple[int, int]:
    """``UnifiedLog.fetchOffsetByTimestamp``: (-1 latest, -2 earliest, -3 max timestamp, else the first
    record at or after ``timestamp``) -> (timestamp, offset)."""
    end = partition.last_stable_offset if committed else partition.high_watermark
    if timestamp == -1:
        return -1, end
    if timestamp == -2:
        return -1, partition.log_start_offset
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
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            partition = wb.partition(t.name, int(p.partition_index))
            if partition is None:
                parts.append(R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                    timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            ts, offset = _offset_for_timestamp(partition, int(p.timestamp), committed)
            parts.append(R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=0, timestamp=ts, offset=offset, leader_epoch=0))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(version=v, throttle_time_ms=0, topics=topics)


_HANDLERS: dict[str, Callable[[WireBroker, Request], Any]] = {
    "ApiVersions": handle_api_versions, "Metadata": handle_metadata, "FindCoordinator": handle_find_coordinator,
    "CreateTopics": handle_create_topics, "InitProducerId": handle_init_producer_id,
    "AddPartitionsToTxn": handle_add_partitions_to_txn, "AddOffsetsToTxn": handle_add_offsets_to_txn,
    "TxnOffsetCommit": handle_txn_offset_commit, "EndTxn": handle_end_txn, "Produce": handle_produce,
    "Fetch": handle_fetch, "ListOffsets": handle_list_offsets,
}

__all__ = ["NODE_ID", "Pending", "ServeConfig", "Topic", "WireBroker", "topic_name_problem"]
