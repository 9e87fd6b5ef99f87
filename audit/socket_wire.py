"""The socket transport of the wire-level trace audit: :class:`~.trace_replay.TxnWire` over Kafka's binary
protocol (kafka-python's ``kafka.protocol`` structs, ``DefaultRecordBatchBuilder`` batches, ``MemoryRecords`` to
read), routed by ``FindCoordinator`` and partition leader, and the consumer's filtering of fetched batches.

Assumptions: each partition of the scenario is partition 0 of its own fresh topic; the transaction version is
the broker's (``tv1`` unless it finalises ``transaction.version`` >= 2 and speaks ``EndTxn`` v5).
Left out: FindCoordinator answers are used for routing, not checked; the requests of TV2 verification
(``verify_only``) are broker-to-broker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from txnspec.audit.connection import BrokerConnection, WireError, error_name
from txnspec.audit.trace_replay import (
    FETCH_ROUNDS,
    PAUSE_SECONDS,
    RETRIABLE,
    RETRIES,
    FetchedBatch,
    consumer_records,
    first_error_name,
)

# a new topic's readiness is polled finely (the same 10 s bound as RETRIES pauses): a KRaft broker hosts it a few
# milliseconds after it is created, and a 0.25 s pause per topic was most of an audit's wall time on Kafka
READY_POLL_SECONDS = 0.025
READY_POLLS = round(RETRIES * PAUSE_SECONDS / READY_POLL_SECONDS)


@dataclass
class SocketTxnWire:
    """The requests of :class:`TxnWire` as kafka-python protocol structs, routed to the coordinator a
    ``FindCoordinator`` names and to the partition's leader."""

    bootstrap: str
    create_topics: Callable[[list[str]], dict[str, str]]  # topics -> "host:port" of each one's leader
    connections: dict[str, BrokerConnection] = field(default_factory=dict)
    leaders: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    transaction_version: int = 1
    sleep: Callable[[float], None] = time.sleep

    def connect(self) -> None:
        from kafka.protocol.consumer.fetch import FetchRequest
        from kafka.protocol.consumer.group import OffsetFetchRequest
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
        from kafka.protocol.producer.produce import ProduceRequest
        from kafka.protocol.producer.transaction import (
            AddOffsetsToTxnRequest,
            AddPartitionsToTxnRequest,
            EndTxnRequest,
            InitProducerIdRequest,
            TxnOffsetCommitRequest,
        )

        conn = self._conn(self.bootstrap.split(",")[0])
        # TV2 only when the broker speaks EndTxn v5 and finalises transaction.version >= 2 (KIP-890)
        tv2 = conn.versions.get(EndTxnRequest.API_KEY, (0, 0))[1] >= 5 and conn.features.get("transaction.version",
                                                                                              0) >= 2
        self.transaction_version = 2 if tv2 else 1
        # a client speaks TV2 with Produce v12+, EndTxn v5 and TxnOffsetCommit v5; AddPartitionsToTxn v4+ is the
        # brokers' verification request, never a client's
        wanted = {"Produce": (ProduceRequest, 3, 12 if tv2 else 11), "Fetch": (FetchRequest, 4, 12),
                  "InitProducerId": (InitProducerIdRequest, 3, 5),
                  "AddPartitionsToTxn": (AddPartitionsToTxnRequest, 0, 3),
                  "AddOffsetsToTxn": (AddOffsetsToTxnRequest, 0, 4 if tv2 else 3),
                  "EndTxn": (EndTxnRequest, 0, 5 if tv2 else 4),
                  "TxnOffsetCommit": (TxnOffsetCommitRequest, 0, 5 if tv2 else 4),
                  "OffsetFetch": (OffsetFetchRequest, 1, 7), "FindCoordinator": (FindCoordinatorRequest, 1, 3)}
        self.versions = {name: conn.version(cls, low, high) for name, (cls, low, high) in wanted.items()}

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()

    def _conn(self, address: str) -> BrokerConnection:
        if address not in self.connections:
            host, _, port = address.rpartition(":")
            self.connections[address] = BrokerConnection(host, int(port))
        return self.connections[address]

    def _coordinator(self, key: str, key_type: int) -> BrokerConnection:
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

        bootstrap = self._conn(self.bootstrap.split(",")[0])
        for _ in range(RETRIES):
            r = bootstrap.call(FindCoordinatorRequest, FindCoordinatorResponse, self.versions["FindCoordinator"],
                               key=key, key_type=key_type)
            if int(r.error_code) == 0:
                return self._conn(f"{r.host}:{r.port}")
            self.pause()
        raise WireError(f"FindCoordinator({key}) answered {error_name(int(r.error_code))}")

    def pause(self) -> None:
        self.sleep(PAUSE_SECONDS)

    def prepare(self, topics: list[str]) -> None:
        """Create the topics and wait (bounded) until each one's leader serves it: a KRaft broker lists a new
        topic's leader in Metadata a moment before its replica manager hosts the partition."""
        self.leaders.update(self.create_topics(topics))
        for topic in topics:
            for _ in range(READY_POLLS):
                got = self._fetch_once(topic, False, 0)
                if not isinstance(got, str) or got not in RETRIABLE:
                    break
                self.sleep(READY_POLL_SECONDS)

    def _call(self, conn: BrokerConnection, name: str, **fields: Any) -> Any:
        import kafka.protocol.consumer.fetch as fetch_mod
        import kafka.protocol.consumer.group as group_mod
        import kafka.protocol.producer.produce as produce_mod
        import kafka.protocol.producer.transaction as txn_mod

        module = {"Produce": produce_mod, "Fetch": fetch_mod, "OffsetFetch": group_mod}.get(name, txn_mod)
        return conn.call(getattr(module, f"{name}Request"), getattr(module, f"{name}Response"),
                         self.versions[name], **fields)

    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, epoch: int) -> dict[str, Any]:
        r = self._call(self._coordinator(tid, 1), "InitProducerId", transactional_id=tid,
                       transaction_timeout_ms=timeout_ms, producer_id=producer_id, producer_epoch=epoch)
        return {"error": "NONE", "producer_id": int(r.producer_id), "epoch": int(r.producer_epoch)} \
            if int(r.error_code) == 0 else {"error": error_name(int(r.error_code))}

    def add_partitions(self, tid: str, producer_id: int, epoch: int, topics: list[str]) -> dict[str, Any]:
        from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest as Req

        topic_list = [Req.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics]
        r = self._call(self._coordinator(tid, 1), "AddPartitionsToTxn", v3_and_below_transactional_id=tid,
                       v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
                       v3_and_below_topics=topic_list)
        codes = [int(p.partition_error_code) for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]
        return {"error": _first_error(codes)}

    def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> dict[str, Any]:
        r = self._call(self._coordinator(tid, 1), "AddOffsetsToTxn", transactional_id=tid, producer_id=producer_id,
                       producer_epoch=epoch, group_id=group)
        return {"error": error_name(int(r.error_code))}

    def txn_offset_commit(self, tid: str, group: str, producer_id: int, epoch: int,
                          offsets: list[tuple[str, int]]) -> dict[str, Any]:
        from kafka.protocol.producer.transaction import TxnOffsetCommitRequest as Req

        topics = [Req.TxnOffsetCommitRequestTopic(name=t, partitions=[Req.TxnOffsetCommitRequestTopic.
                  TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=o, committed_leader_epoch=-1,
                                                  committed_metadata="")]) for t, o in offsets]
        fields: dict[str, Any] = {"transactional_id": tid, "group_id": group, "producer_id": producer_id,
                                  "producer_epoch": epoch, "topics": topics}
        if self.versions["TxnOffsetCommit"] >= 3:
            fields.update(generation_id=-1, member_id="", group_instance_id=None)
        r = self._call(self._coordinator(group, 0), "TxnOffsetCommit", **fields)
        return {"error": _first_error([int(p.error_code) for t in r.topics for p in t.partitions])}

    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool) -> dict[str, Any]:
        r = self._call(self._coordinator(tid, 1), "EndTxn", transactional_id=tid, producer_id=producer_id,
                       producer_epoch=epoch, committed=commit)
        out: dict[str, Any] = {"error": error_name(int(r.error_code))}
        if self.versions["EndTxn"] >= 5 and out["error"] == "NONE":
            out.update(producer_id=int(r.producer_id), epoch=int(r.producer_epoch))
        return out

    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int,
                tid: str | None) -> dict[str, Any]:
        from kafka.protocol.producer.produce import ProduceRequest
        from kafka.record.default_records import DefaultRecordBatchBuilder

        builder = DefaultRecordBatchBuilder(2, 0, tid is not None, producer_id, epoch, base_sequence, 1 << 20)
        now_ms = int(time.time() * 1000)
        for i in range(count):
            # CreateTime now, as a client stamps it: a timestamp of 0 is seven days past log.retention.ms, and
            # Kafka's first retention check (30 s after start) deletes such a partition's data
            builder.append(i, now_ms, None, f"{topic}:{producer_id}:{epoch}:{base_sequence + i}".encode(), [])
        data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))])
        r = self._call(self._leader(topic), "Produce", transactional_id=tid, acks=-1, timeout_ms=10000,
                       topic_data=[data])
        partition = r.responses[0].partition_responses[0]
        error = error_name(int(partition.error_code))
        return {"error": error, **({"base_offset": int(partition.base_offset)} if error == "NONE" else {})}

    def _leader(self, topic: str) -> BrokerConnection:
        return self._conn(self.leaders.get(topic, self.bootstrap.split(",")[0]))

    def _fetch_once(self, topic: str, committed: bool, offset: int) -> Any:
        """One Fetch of partition 0 from ``offset``: the partition's answer, or its error's name."""
        from kafka.protocol.consumer.fetch import FetchRequest as Req

        partition = Req.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                                  log_start_offset=-1, partition_max_bytes=1 << 20)
        # min_bytes 0 answers at once; a short max_wait because Tansu answers nothing at all with 0
        r = self._call(self._leader(topic), "Fetch", replica_id=-1, max_wait_ms=100, min_bytes=0, max_bytes=1 << 22,
                       isolation_level=1 if committed else 0, session_id=0, session_epoch=-1,
                       topics=[Req.FetchTopic(topic=topic, partitions=[partition])], forgotten_topics_data=[],
                       rack_id="")
        if not r.responses or not r.responses[0].partitions:
            return f"the response has no partition {topic}-0 (top-level {error_name(int(r.error_code))})"
        p = r.responses[0].partitions[0]
        error = error_name(int(p.error_code))
        return p if error == "NONE" else error

    def fetch(self, topic: str, committed: bool) -> dict[str, Any]:
        """What a consumer reads of partition 0 from offset 0 up to the high watermark (read_uncommitted) or the
        last stable offset (read_committed). A fetch may answer fewer batches than there are (Kafka 4.4 was seen
        to stop before a transaction marker), so the consumer fetches again from the offset after the last batch
        it got, as Kafka's ``Fetcher`` does, until it reaches that bound or gets nothing."""
        batches: list[FetchedBatch] = []
        aborted: set[tuple[int, int]] = set()
        offset, hw, lso = 0, 0, 0
        for _ in range(FETCH_ROUNDS):
            p = self._fetch_once(topic, committed, offset)
            if isinstance(p, str):
                return {"error": p}
            hw, lso = int(p.high_watermark), int(p.last_stable_offset)
            aborted.update((int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or []))
            new = [b for b in fetched_batches(bytes(p.records or b"")) if (b.offsets or (b.base_offset,))[-1] >= offset]
            if not new:
                break
            batches.extend(new)
            offset = (new[-1].offsets or (new[-1].base_offset,))[-1] + 1
            if offset >= (lso if committed else hw):
                break
        listed = sorted(aborted, key=lambda a: (a[1], a[0])) if committed else []
        return {"high_watermark": hw, "last_stable_offset": lso, "aborted_transactions": listed,
                "records": consumer_records(batches, listed, lso if committed else hw)}

    def offset_fetch(self, group: str, topic: str) -> dict[str, Any]:
        from kafka.protocol.consumer.group import OffsetFetchRequest as Req

        fields: dict[str, Any] = {"group_id": group, "topics": [Req.OffsetFetchRequestTopic(name=topic,
                                                                                         partition_indexes=[0])]}
        if self.versions["OffsetFetch"] >= 7:
            fields["require_stable"] = True
        r = self._call(self._coordinator(group, 0), "OffsetFetch", **fields)
        codes = [int(p.error_code) for t in r.topics for p in t.partitions]
        error = _first_error([int(getattr(r, "error_code", 0) or 0), *codes])
        offsets = [int(p.committed_offset) for t in r.topics for p in t.partitions]
        return {"error": error, "committed_offset": offsets[0] if offsets and error == "NONE" else -1}


def _first_error(codes: list[int]) -> str:
    """The error of a request answered per partition: the first that is not NONE or OPERATION_NOT_ATTEMPTED."""
    return first_error_name([error_name(c) for c in codes])


def consumer_view(records: bytes, aborted: list[tuple[int, int]], upper: int) -> list[int]:
    """:func:`consumer_records` of a fetch response's record bytes (kafka-python's ``MemoryRecords``)."""
    return consumer_records(fetched_batches(records), aborted, upper)


def fetched_batches(records: bytes) -> list[FetchedBatch]:
    """The batches of a fetch response's record bytes (kafka-python's ``MemoryRecords``)."""
    from kafka.record.memory_records import MemoryRecords

    batches: list[FetchedBatch] = []
    memory = MemoryRecords(records)
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:
            break
        control = None
        if batch.is_control_batch:
            control = "ABORT" if any(getattr(r, "abort", False) for r in batch) else "COMMIT"
        batches.append(FetchedBatch(int(batch.base_offset), tuple(int(r.offset) for r in batch),
                                    int(batch.producer_id), bool(batch.is_transactional), control))
    return batches


@contextlib.contextmanager
def socket_txn_wire(bootstrap: str) -> Iterator[SocketTxnWire]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "broker.address.family": "v4",
                         "allow.auto.create.topics": True})

    def create(topics: list[str]) -> dict[str, str]:
        if not topics:
            return {}
        missing = [t for t in topics if _metadata(admin, t) is None]
        if missing:
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in missing]).values():
                with contextlib.suppress(Exception):
                    future.result(5)
        leaders = {}
        for t in topics:
            leader = _metadata(admin, t)
            for _ in range(READY_POLLS):  # a new cluster's controller may take a while with its first topic
                if leader is not None:
                    break
                time.sleep(READY_POLL_SECONDS)
                leader = _metadata(admin, t)
            if leader is None:
                raise WireError(f"cannot create topic {t}")
            leaders[t] = leader
        return leaders

    wire = SocketTxnWire(bootstrap, create)
    try:
        wire.connect()
        yield wire
    finally:
        wire.close()


def _metadata(admin: Any, topic: str) -> str | None:
    """The leader of the topic's partition 0 as host:port, asking in a way that auto-creates (the mock)."""
    found = admin.list_topics(topic=topic, timeout=5)
    meta = found.topics.get(topic)
    if meta is None or meta.error is not None or 0 not in meta.partitions:
        return None
    broker = found.brokers.get(meta.partitions[0].leader)
    return f"{broker.host}:{broker.port}" if broker is not None else None
