"""Several nodes in one process (``txnspec serve --nodes N``): which node leads a partition and which
coordinates a transactional id or a group, as Kafka spreads them, over one implementation.

Each node listens on its own port and answers with its own node id; the state behind them is one
:class:`txnspec.impl.broker.Broker` (every partition fully replicated on every node, so a stopped node loses
nothing: its partitions and coordinators move to the next live node in their replica order, as a leader
election over an in-sync replica set would move them, and the leader epoch goes up). A partition's replicas are
the nodes in order from ``(partition_for(topic) + index) % N``; its leader the first live one. A transactional
id's coordinator leads its ``__transaction_state`` partition and a group's its ``__consumer_offsets``
partition, of 50 each for the choice of node (Kafka's defaults; the implementation keeps its own count).
Requests to another node are answered as Kafka answers them: NOT_LEADER_OR_FOLLOWER for a partition,
NOT_COORDINATOR for a transactional id or a group. With one node every check passes.

Left out: a coordinator moving keeps its state (Kafka's new coordinator loads it from the log, with a new
coordinator epoch); the controller is the lowest live node and takes every admin request from any node (Kafka
forwards them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from txnspec.impl.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, partition_for

ROUTING_PARTITIONS = 50  # offsets.topic.num.partitions, transaction.state.log.num.partitions


@dataclass
class Nodes:
    count: int
    live: set[int] = field(default_factory=set)
    leader_epoch: int = 0  # goes up whenever a node stops or starts (every leadership may have moved)

    def __post_init__(self) -> None:
        if not self.live:
            self.live = set(range(self.count))

    def replicas(self, topic: str, index: int) -> list[int]:
        first = (partition_for(topic, self.count) + index) % self.count
        return [(first + i) % self.count for i in range(self.count)]

    def leader(self, topic: str, index: int) -> int | None:
        return next((n for n in self.replicas(topic, index) if n in self.live), None)

    def txn_coordinator(self, transactional_id: str) -> int | None:
        return self.leader(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, ROUTING_PARTITIONS))

    def group_coordinator(self, group_id: str) -> int | None:
        return self.leader(GROUP_METADATA_TOPIC, partition_for(group_id, ROUTING_PARTITIONS))

    @property
    def controller(self) -> int:
        return min(self.live) if self.live else -1

    def stop(self, node: int) -> None:
        self.live.discard(node)
        self.leader_epoch += 1

    def start(self, node: int) -> None:
        self.live.add(node)
        self.leader_epoch += 1


__all__ = ["ROUTING_PARTITIONS", "Nodes"]
