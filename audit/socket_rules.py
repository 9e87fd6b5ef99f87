"""The socket transport of the wire-level rule audit (:mod:`.wire`): :class:`~.wire.Transport` over Kafka's
binary protocol (kafka-python's ``kafka.protocol`` structs, ``DefaultRecordBatchBuilder`` batches), each rule on
a fresh single-partition topic, ``InitProducerId`` with a transactional id sent to the coordinator
``FindCoordinator`` names.

Assumptions: a broker answers a coordinator that is loading or moving, and a new partition whose leader does not
host it yet, with the retriable errors below, which are asked again a bounded number of times (about 20 s) as a
client does. Left out: more than one partition per rule; the Produce versions before 3 (no v2 batches).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from txnspec.audit.connection import BrokerConnection, WireError, error_name
from txnspec.audit.wire import Answer, InitAnswer

RETRIABLE_COORDINATOR_ERRORS = frozenset({"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                                          "NOT_COORDINATOR", "CONCURRENT_TRANSACTIONS"})
NOT_YET_LEADER = frozenset({"NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE"})
COORDINATOR_RETRIES = 80   # resends of a request a coordinator answers retriably (0.25 s apart: 20 s)
RETRY_PAUSE_SECONDS = 0.25
# a new topic's readiness (in metadata, hosted by its leader) is polled finely within the same 20 s: a KRaft
# broker takes milliseconds, and a 0.25 s pause per topic added seconds to each audit of Kafka
READY_POLL_SECONDS = 0.025
READY_POLLS = round(COORDINATOR_RETRIES * RETRY_PAUSE_SECONDS / READY_POLL_SECONDS)


@dataclass
class SocketTransport:
    bootstrap: str
    create_topic: Callable[[str], None]
    run: str = "0"
    conn: BrokerConnection | None = None
    produce_version: int = 0
    init_version: int = 0
    others: dict[str, BrokerConnection] = field(default_factory=dict)  # coordinators other than the bootstrap

    def connect(self) -> None:
        host, _, port = self.bootstrap.split(",")[0].rpartition(":")
        self.conn = BrokerConnection(host, int(port))
        from kafka.protocol.producer.produce import ProduceRequest
        from kafka.protocol.producer.transaction import InitProducerIdRequest

        self.produce_version = self.conn.version(ProduceRequest, 3, 9)
        self.init_version = self.conn.version(InitProducerIdRequest, 0, 4)

    def fresh_partition(self, rule: str) -> str:
        topic = f"txnspec-wire-{self.run}-{rule.replace('.', '-').replace('_', '-')}"
        self.create_topic(topic)
        return topic

    def init_producer_id(self) -> tuple[int, int]:
        """InitProducerId without a transactional id (idempotent producer); a coordinator that is still loading
        is asked again, as a client does."""
        answer = self._init(self._connection(), {"transactional_id": None, "transaction_timeout_ms": 60000},
                            expected_producer=(-1, -1))
        if answer.error != "NONE":
            raise WireError(f"InitProducerId answered {answer.error}")
        return answer.producer_id, answer.epoch

    def init_transactional(self, rule: str, transactional_id: str | None, producer_id: int, epoch: int,
                           timeout_ms: int) -> InitAnswer:
        """InitProducerId, with the rule's transactional id (or none, or empty), sent to the transaction
        coordinator FindCoordinator names, as a client does (Kafka creates ``__transaction_state`` on the first
        FindCoordinator); the coordinator's retriable answers (loading, not the coordinator yet, a transition
        in progress) are retried a bounded number of times."""
        if self.init_version < 3 and producer_id != -1:
            raise WireError(f"the broker's InitProducerId v{self.init_version} has no expected producer id/epoch")
        conn = self._connection() if not transactional_id else self._transaction_coordinator(transactional_id)
        return self._init(conn, {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms},
                          expected_producer=(producer_id, epoch))

    def _connection(self, address: str | None = None) -> BrokerConnection:
        assert self.conn is not None
        if address is None or address == self.bootstrap.split(",")[0]:
            return self.conn
        if address not in self.others:
            host, _, port = address.rpartition(":")
            self.others[address] = BrokerConnection(host, int(port))
        return self.others[address]

    def _transaction_coordinator(self, transactional_id: str) -> BrokerConnection:
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

        conn = self._connection()
        version = conn.version(FindCoordinatorRequest, 1, 3)
        for _ in range(COORDINATOR_RETRIES):
            r = conn.call(FindCoordinatorRequest, FindCoordinatorResponse, version, key=transactional_id, key_type=1)
            if int(r.error_code) == 0:
                return self._connection(f"{r.host}:{r.port}")
            time.sleep(RETRY_PAUSE_SECONDS)
        raise WireError(f"FindCoordinator({transactional_id}) answered {error_name(int(r.error_code))}")

    def _init(self, conn: BrokerConnection, fields: dict[str, Any], expected_producer: tuple[int, int]
              ) -> InitAnswer:
        from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

        if self.init_version >= 3:
            fields.update(producer_id=expected_producer[0], producer_epoch=expected_producer[1])
        for _ in range(COORDINATOR_RETRIES):
            r = conn.call(InitProducerIdRequest, InitProducerIdResponse, self.init_version, **fields)
            name = error_name(int(r.error_code))
            if name not in RETRIABLE_COORDINATOR_ERRORS:
                break
            time.sleep(RETRY_PAUSE_SECONDS)
        return InitAnswer(name, int(r.producer_id), int(r.producer_epoch))

    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int) -> Answer:
        from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
        from kafka.record.default_records import DefaultRecordBatchBuilder

        assert self.conn is not None
        builder = DefaultRecordBatchBuilder(2, 0, False, producer_id, epoch, base_sequence, 1 << 20)
        now_ms = int(time.time() * 1000)
        for i in range(count):
            builder.append(i, now_ms, None, f"{base_sequence + i}".encode(), [])  # CreateTime: see socket_wire
        records = bytes(builder.build())
        request = {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                   "topic_data": [ProduceRequest.TopicProduceData(
                       name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                           index=0, records=records)])]}
        for _ in range(READY_POLLS):
            response = self.conn.call(ProduceRequest, ProduceResponse, self.produce_version, **request)
            partition = response.responses[0].partition_responses[0]
            name = error_name(int(partition.error_code))
            if name not in NOT_YET_LEADER:  # a new partition's leader may not host it yet: a client retries
                break
            time.sleep(READY_POLL_SECONDS)
        return Answer(name, int(partition.base_offset))


@contextlib.contextmanager
def socket_transport(bootstrap: str, run: str) -> Iterator[SocketTransport]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "broker.address.family": "v4",
                         "allow.auto.create.topics": True})

    def create(topic: str) -> None:
        """A Metadata request where the broker creates topics on demand (the mock), else CreateTopics."""
        found = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if found is None or found.error is not None:
            for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                with contextlib.suppress(Exception):
                    future.result(5)
            found = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        for _ in range(READY_POLLS):  # a KRaft controller publishes a new topic a moment later
            if found is not None and found.error is None:
                break
            time.sleep(READY_POLL_SECONDS)
            found = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if found is None or found.error is not None:
            raise WireError(f"cannot create topic {topic}: {found.error if found else 'not in metadata'}")

    transport = SocketTransport(bootstrap, create, run)
    transport.connect()
    try:
        yield transport
    finally:
        for conn in [transport.conn, *transport.others.values()]:
            if conn is not None:
                conn.close()
