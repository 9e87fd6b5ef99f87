"""The reference implementation behind Kafka's requests: one broker, node 0, leader of every partition and
coordinator of every transactional id and group.

:class:`WireBroker` turns each decoded request (:mod:`.protocol`) into calls on
:class:`txnspec.impl.broker.Broker` and the answers into the response struct of the request's version, as
``KafkaApis`` does: topic checks (UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED for the rest of an
AddPartitionsToTxn), version-dependent error codes (PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH to
clients older than the version that introduced it), one v2 batch per produced partition (:mod:`.records`).
The transaction version of a request follows ``TransactionVersion``: Produce v12+, EndTxn v5+ and
AddPartitionsToTxn v4+ are TV2 whatever the broker's finalized ``transaction.version`` (a TV1 broker accepts a
Produce v12 without AddPartitionsToTxn and answers a fenced EndTxn v5 as a TV2 retry, as Kafka 4.1/4.4 do).

After every request the coordinator's markers are written at once (``deliver_markers``: the implementation's
marker channel with no delay); :meth:`WireBroker.tick` lets wall time reach the implementation's clock
(transaction timeouts, id expiration, session timeouts), as the in-process :class:`~txnspec.impl.cluster.
Cluster` does with ``advance``. A request that must wait (a Fetch below ``min_bytes``, a JoinGroup or
SyncGroup during a rebalance) answers a :class:`Pending`, which the server polls after each change until
its deadline.

The handlers are grouped by the component that answers in Kafka: cluster metadata, ApiVersions and
FindCoordinator in :mod:`.metadata`, topic, config and cluster admin in
:mod:`.admin`, group admin in :mod:`.group_admin`, transaction admin in :mod:`.txn_admin`, the transaction
coordinator's in :mod:`.transactions`, the partition leader's in :mod:`.leader`, the group coordinator's in
:mod:`.groups`; :mod:`.dispatch` gathers them into the dispatch table. This module holds what they share:
the broker's topics, nodes, clock and configuration. Left out: topic ids (requests that name
topics by id are not advertised), fetch sessions (every Fetch is a full one: session id 0), quotas, ACLs,
more than one broker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from txnspec.impl.broker import Broker, BrokerConfig
from txnspec.impl.errors import Errors
from txnspec.impl.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from txnspec.impl.partition import Partition
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve import configs
from txnspec.serve.configs import Value, value_of
from txnspec.serve.nodes import Nodes
from txnspec.serve.protocol import Request

NODE_ID = 0
TOPICS_FILE = "serve-topics.json"  # durable mode: topic configs and partition counts, beside the partitions
UNBOUNDED = (1 << 63) - 1
CLUSTER_ID = "txnspec-serve"
INTERNAL_TOPICS = (TRANSACTION_STATE_TOPIC, GROUP_METADATA_TOPIC)
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# KafkaApis answers INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED to clients older than these versions
# the request versions a client of transaction version 2 sends (the first with KIP-890 part 2's semantics)
REQUEST_TV2_SINCE = {"Produce": 12, "EndTxn": 5, "AddPartitionsToTxn": 4}
PRODUCER_FENCED_SINCE = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2,
                         "TxnOffsetCommit": 2}


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 9092  # the advertised port (the one bound); with several nodes, node i's is ports[i]
    nodes: int = 1
    ports: list[int] = field(default_factory=list)  # each node's bound port (filled when bound)
    transaction_version: int = 2
    data_dir: str | None = None
    fsync: bool = False  # fsync every append before it is acknowledged (survives power loss), durable mode only
    recover_corruption: bool = False  # truncate damaged segments at the damage instead of refusing to start
    default_partitions: int = 1
    topics: tuple[str, ...] = ()  # created at start: "name" or "name:partitions"
    auto_create_topics: bool = True
    max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes: one frame
    # queued.max.request.bytes: the bytes of frames being read or handled, all connections together (-1: unbounded)
    queued_max_request_bytes: int = 100 * 1024 * 1024
    rules: Rules = KAFKA  # the implementation's replaceable rules (tests serve a seeded bug with other rules)
    # KIP-939 as Kafka 4.4 ships it: the broker's transaction.two.phase.commit.enable, and
    # unstable.api.versions.enable (InitProducerId v6, the 2PC fields, is an unstable version in 4.4)
    transaction_two_phase_commit_enable: bool = False
    unstable_api_versions_enable: bool = False


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
    configs: dict[str, Value] = field(default_factory=dict)  # the topic's own values (configs.TOPIC_CONFIGS)
    incarnation: int = 0  # how many topics of this name were deleted before it in this run
    topic_id: uuid.UUID = field(init=False)

    def config(self, name: str) -> Value:
        return value_of(self.configs, name)

    def __post_init__(self) -> None:
        # stable across restarts; a topic created again after a deletion gets a new id, as in Kafka
        suffix = f":{self.incarnation}" if self.incarnation else ""
        self.topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"txnspec-serve:{self.name}{suffix}")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def topic_name_problem(name: object) -> str:
    if not isinstance(name, str) or not _TOPIC_NAME.match(name) or name in (".", ".."):
        return f"invalid topic name {name!r}: 1-249 of [a-zA-Z0-9._-]"
    return ""


class WireBroker:
    """The implementation's broker behind Kafka's requests (see the module docstring)."""

    def __init__(self, config: ServeConfig, handlers: Mapping[str, Handler],
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.handlers = handlers  # by Kafka's API name (txnspec.serve.dispatch.HANDLERS)
        self.clock = clock
        self.broker = Broker(BrokerConfig(transaction_version=config.transaction_version,
                                          transaction_two_phase_commit_enable=config.transaction_two_phase_commit_enable),
                             data_dir=config.data_dir, now_ms=clock(), fsync=config.fsync,
                             recover_corruption=config.recover_corruption, rules=config.rules)
        self.topics: dict[str, Topic] = {}
        self.deleted: Counter[str] = Counter()  # topics deleted in this run, by name
        counts = (self.broker.config.num_txn_log_partitions, self.broker.config.num_offsets_partitions)
        self.internal = {name: Topic(name, n) for name, n in zip(INTERNAL_TOPICS, counts, strict=True)}
        for name in self.broker.partitions:  # durable mode: the topics found on disk
            tp = TopicPartition.parse(name)
            if tp is not None and tp.topic not in INTERNAL_TOPICS:
                known = self.topics.get(tp.topic)
                self.topics[tp.topic] = Topic(tp.topic, max(tp.partition + 1, known.partitions if known else 0))
        self._load_topics()
        for spec in config.topics:
            name, _, count = spec.partition(":")
            self.create_topic(name, int(count) if count else config.default_partitions)
        self.changes = 0  # bumped whenever logs, offsets or groups may have changed (waiters re-poll)
        self.nodes = Nodes(max(1, config.nodes))
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
        self.broker.consumer_groups.tick(now)  # KIP-848 session timeouts
        self.deliver_markers()
        self.changes += 1

    def create_topic(self, name: str, partitions: int, configs: dict[str, Value] | None = None) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = Topic(name, partitions, dict(configs or {}), self.deleted[name])
            for i in range(partitions):
                self.partition(name, i)
            self.save_topics()
        return topic

    def _topics_file(self) -> str | None:
        return os.path.join(self.config.data_dir, TOPICS_FILE) if self.config.data_dir else None

    def _load_topics(self) -> None:
        """Durable mode: the topics' configs (and partition counts, for partitions never written) kept by
        :meth:`save_topics`; a config no longer valid is dropped."""
        path = self._topics_file()
        if path is None or not os.path.isfile(path):
            return
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
        for name, entry in kept.items():
            topic = self.topics.setdefault(name, Topic(name, int(entry["partitions"])))
            topic.partitions = max(topic.partitions, int(entry["partitions"]))
            for i in range(topic.partitions):
                self.partition(name, i)
            for key, text in entry["configs"].items():
                with contextlib.suppress(configs.ConfigError):
                    topic.configs[key] = configs.parse(key, text)

    def save_topics(self) -> None:
        """Durable mode: every topic's partition count and configs, written atomically (topic admin calls it)."""
        path = self._topics_file()
        if path is None:
            return
        kept = {t.name: {"partitions": t.partitions, "configs": {k: configs.as_text(v) for k, v in t.configs.items()}}
                for t in self.topics.values()}
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(kept, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    def partition(self, topic: str, index: int) -> Partition | None:
        known = self.topics.get(topic)
        if known is None or not 0 <= index < known.partitions:
            return None
        p = self.broker.partition(TopicPartition(topic, index))
        # serve bounds the batch as sent by the topic's max.message.bytes (records.decode_produce) before the
        # implementation sees it; the implementation's own bound is on an estimate of the uncompressed size
        p.max_message_bytes = UNBOUNDED
        return p

    def flush(self) -> None:
        self.broker.flush()

    def close(self) -> None:
        self.broker.close()

    # --- nodes (serve.nodes): who answers what ---

    def address(self, node: int) -> tuple[str, int]:
        ports = self.config.ports or [self.config.port]
        return self.config.host, ports[node] if node < len(ports) else ports[0]

    def leads(self, request: Request, topic: str, index: int) -> bool:
        return self.nodes.count == 1 or bool(self.nodes.leader(topic, index) == request.node_id)

    def coordinates_txn(self, request: Request, transactional_id: str | None) -> bool:
        return (self.nodes.count == 1 or not transactional_id
                or bool(self.nodes.txn_coordinator(transactional_id) == request.node_id))

    def coordinates_group(self, request: Request, group_id: str) -> bool:
        return self.nodes.count == 1 or bool(self.nodes.group_coordinator(group_id) == request.node_id)

    # --- dispatch ---

    def handle(self, request: Request) -> Any:
        """The response struct to ``request`` (or a :class:`Pending`); None for Produce with acks=0."""
        response = self.handlers[request.api.name](self, request)
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

    @staticmethod
    def request_tv(request: Request) -> int:
        """The transaction version of a request, from its version alone (``TransactionVersion.
        transactionVersionForEndTxn`` / ``ForAddPartitionsToTxn``, ``AddPartitionsToTxnManager.
        produceRequestVersionToTransactionSupportedOperation``): the finalized level does not enter."""
        since = REQUEST_TV2_SINCE.get(request.api.name)
        return 2 if since is not None and request.version >= since else 0


Handler = Callable[[WireBroker, Request], Any]


__all__ = ["NODE_ID", "Handler", "Pending", "ServeConfig", "Topic", "WireBroker", "topic_name_problem"]
