"""The blocking client API of the oracle cluster: a producer and a consumer whose calls pump the network until
they complete, with Kafka's names.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/KafkaProducer.java`` (a
transactional call blocks on its ``TransactionalRequestResult``; ``commitTransaction`` flushes first; ``flush``)
and ``clients/consumer/KafkaConsumer.java`` (``assign`` from the group's committed offsets with
``require_stable``, ``seek``, ``position``, ``poll``, ``commitSync``).

Assumed: the handles see their cluster through :class:`Pump` (its clock, its broker, its ``run``); a call whose
result cannot complete (the network held, a peer down) raises ``TimeoutException`` and may be called again.
Fetches and offset commits are direct calls on the broker, not messages. Left out: ``max.block.ms``,
``poll``'s timeout, subscriptions and rebalances (KIP-848 groups are driven in :mod:`txnspec.impl.consumer_groups`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from txnspec.impl.broker import Broker
from txnspec.impl.client import Producer
from txnspec.impl.client_results import RecordFuture, TransactionalRequestResult
from txnspec.impl.client_states import State
from txnspec.impl.consumer import Consumer, ConsumerRecord
from txnspec.impl.errors import Errors, IllegalStateException, TimeoutException
from txnspec.impl.log import RecordValue
from txnspec.impl.messages import Fetch


class Pump(Protocol):
    """What a handle needs of its cluster: the clock, the broker, and a run of the network."""

    now_ms: int
    broker: Broker

    def run(self, until: Callable[[], bool] | None = None, max_steps: int = 100_000) -> None: ...


class ProducerHandle:
    """Blocking-style producer API with Kafka's names; each call pumps the network until it completes."""

    def __init__(self, cluster: Pump, name: str, producer: Producer) -> None:
        self.cluster, self.name, self.producer = cluster, name, producer

    def _await(self, result: TransactionalRequestResult) -> None:
        self.cluster.run(until=lambda: result.completed)
        if not result.completed:
            raise TimeoutException(f"Timeout expired while awaiting {result.operation} (the network is held "
                                   "or a peer is down); call it again to retry")
        result.result()

    def init_transactions(self) -> None:
        self._await(self.producer.init_transactions())

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()

    def send(self, partition: str, value: RecordValue = None, key: RecordValue = None) -> RecordFuture:
        return self.producer.send(partition, value, key, timestamp=self.cluster.now_ms)

    def flush(self) -> None:
        self.cluster.run(until=lambda: not self.producer.has_incomplete_batches())

    def send_offsets_to_transaction(self, offsets: Mapping[str, int], group_id: str) -> None:
        self._await(self.producer.send_offsets_to_transaction(offsets, group_id))

    def commit_transaction(self) -> None:
        self.flush()
        self._await(self.producer.commit_transaction())

    def abort_transaction(self) -> None:
        self._await(self.producer.abort_transaction())

    def close(self) -> None:
        self.producer.close()

    @property
    def state(self) -> State:
        return self.producer.state

    @property
    def producer_id(self) -> int:
        return self.producer.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.producer.producer_epoch


class ConsumerHandle:
    """A consumer of assigned partitions reading through the broker (fetches are direct calls)."""

    def __init__(self, cluster: Pump, consumer: Consumer) -> None:
        self.cluster, self.consumer = cluster, consumer

    def assign(self, partitions: Iterable[str]) -> None:
        """Assign partitions, starting at the group's committed offsets (``require_stable``) or 0."""
        parts = list(partitions)
        offsets: dict[str, int] = {}
        if self.consumer.group_id is not None:
            self.cluster.run()
            err, offsets = self.cluster.broker.group_coordinator.fetch_offsets(self.consumer.group_id, parts,
                                                                               require_stable=True)
            if err is not Errors.NONE:
                raise err.exception(f"OffsetFetch for {self.consumer.group_id}: {err.name}")
        self.consumer.assign(parts, offsets)

    def seek(self, partition: str, offset: int) -> None:
        self.consumer.seek(partition, offset)

    def position(self, partition: str) -> int:
        return self.consumer.position(partition)

    def poll(self, max_batches: int | None = None) -> list[ConsumerRecord]:
        """Fetch from every assigned partition, after letting the network settle (markers land)."""
        self.cluster.run()
        out: list[ConsumerRecord] = []
        for partition, offset, isolation in self.consumer.fetch_requests():
            response = self.cluster.broker.handle(Fetch(partition, offset, isolation, max_batches),
                                                  self.cluster.now_ms)
            fetched = response.extra.get("fetch")
            if fetched is not None:
                out.extend(self.consumer.on_fetch(partition, fetched))  # type: ignore[arg-type]
        return out

    def read_all(self, partition: str) -> list[ConsumerRecord]:
        """Every visible record of ``partition`` from offset 0 (a fresh position)."""
        self.consumer.assign([partition])
        out: list[ConsumerRecord] = []
        while True:
            got = self.poll()
            if not got:
                return out
            out.extend(got)

    def commit_sync(self, offsets: Mapping[str, int]) -> None:
        if self.consumer.group_id is None:
            raise IllegalStateException("commit_sync needs a consumer with a group_id")
        errors = self.cluster.broker.group_coordinator.handle_offset_commit(self.consumer.group_id, offsets,
                                                                            now_ms=self.cluster.now_ms)
        for err in errors.values():
            if err is not Errors.NONE:
                raise err.exception(err.name)


__all__ = ["ConsumerHandle", "ProducerHandle", "Pump"]
