"""A deterministic single-broker Kafka with an explicit network: the oracle users run inside their tests.

The :class:`Cluster` owns a :class:`~txnspec.impl.broker.Broker`, a clock and a network of messages.
Nothing happens by itself: requests wait in :attr:`Cluster.network` until :meth:`Cluster.run` (called by
the blocking client helpers) delivers them, in order by default. A test can hold, drop, duplicate or
reorder messages, crash and restart the coordinators or a producer, and advance time (timeouts fire only
then). There are no threads, sleeps or wall clock anywhere.

Example: a consume-transform-produce loop, a killed producer, a zombie, and reads at both isolation levels
(runnable: ``python -m doctest impl/cluster.py``)::

    >>> from txnspec.impl.cluster import Cluster
    >>> from txnspec.impl.errors import KafkaException, ProducerFencedException
    >>> cluster = Cluster()                                   # transaction version 2, in memory
    >>> cluster.produce_plain("input-0", ["a", "b", "c"])     # some input
    >>> p = cluster.producer("etl")
    >>> p.init_transactions()
    >>> consumer = cluster.consumer(group_id="etl-group", isolation="READ_COMMITTED")
    >>> consumer.assign(["input-0"])
    >>> p.begin_transaction()
    >>> for rec in consumer.poll():
    ...     _ = p.send("output-0", rec.value.upper())
    >>> p.send_offsets_to_transaction({"input-0": consumer.position("input-0")}, "etl-group")
    >>> p.commit_transaction()
    >>> [r.value for r in cluster.consumer(isolation="READ_COMMITTED").read_all("output-0")]
    ['A', 'B', 'C']
    >>> cluster.committed_offsets("etl-group", ["input-0"])
    {'input-0': 3}

    A producer that dies mid-transaction leaves records that read_committed consumers never see; the
    restarted instance (same transactional id) fences the zombie and aborts its transaction::

    >>> p.begin_transaction()
    >>> _ = p.send("output-0", "half-done")
    >>> cluster.run()
    >>> cluster.crash_producer(p)                   # the process is gone; its broker-side state stays
    >>> p2 = cluster.producer("etl")
    >>> p2.init_transactions()                      # bumps the epoch, aborts the open transaction
    >>> [r.value for r in cluster.consumer(isolation="READ_UNCOMMITTED").read_all("output-0")]
    ['A', 'B', 'C', 'half-done']
    >>> [r.value for r in cluster.consumer(isolation="READ_COMMITTED").read_all("output-0")]
    ['A', 'B', 'C']

    The old instance comes back (a zombie that missed all this) and carries on with its transaction: its
    write is rejected with the abortable INVALID_PRODUCER_EPOCH, and its abort learns it is fenced::

    >>> zombie = cluster.producer("etl", transactional_id_reuse=p)
    >>> _ = zombie.send("output-0", "zombie")
    >>> try:
    ...     zombie.commit_transaction()
    ... except KafkaException as e:
    ...     print(type(e).__name__)
    InvalidProducerEpochException
    >>> try:
    ...     zombie.abort_transaction()
    ... except ProducerFencedException as e:
    ...     print(type(e).__name__)
    ProducerFencedException
    >>> [r.value for r in cluster.read("output-0", "READ_COMMITTED")]
    ['A', 'B', 'C']

The network is :mod:`txnspec.impl.network`, the blocking handles :mod:`txnspec.impl.handles`; a pytest fixture
giving a fresh cluster per test is in :mod:`txnspec.impl.testing`. Kafka sources: none as such, this is the
harness around the broker (:mod:`txnspec.impl.broker`) and the clients.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from txnspec.impl.broker import Broker, BrokerConfig
from txnspec.impl.client import Producer
from txnspec.impl.consumer import Consumer, ConsumerRecord
from txnspec.impl.durability import Durability
from txnspec.impl.errors import Errors, InvalidRequestError, KafkaStorageException
from txnspec.impl.handles import ConsumerHandle, ProducerHandle
from txnspec.impl.log import Record, RecordValue
from txnspec.impl.messages import Produce, Request, Response
from txnspec.impl.network import Message, Network
from txnspec.impl.partition import IsolationLevel
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.txn_markers import TxnMarker


class Cluster:
    """The oracle: one broker, a clock, a network, and blocking client handles (see the module docstring)."""

    def __init__(self, *, transaction_version: int = 2, data_dir: str | None = None,
                 config: BrokerConfig | None = None, now_ms: int = 0, fsync: bool = False,
                 recover_corruption: bool = False, durability: Durability | None = None,
                 rules: Rules = KAFKA) -> None:
        """``data_dir``: keep the logs there (recovered if present). ``fsync``: fsync every append before
        it is acknowledged, so acknowledged data survives power loss and not only a killed process.
        ``recover_corruption``: open a damaged segment by truncating it at the damage (reported in
        ``broker.recovery_reports``) instead of refusing with ``storage.CorruptDataError``. ``durability``: the
        safety mechanisms (:mod:`txnspec.impl.durability`; all on by default). A durable cluster holds files
        open: :meth:`close` it (or use it as a context manager). ``rules``: the replaceable rules the broker and
        the clients follow (:mod:`txnspec.impl.policy`; Kafka's by default)."""
        if transaction_version not in (0, 1, 2):
            raise InvalidRequestError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
        self.config = config or BrokerConfig(transaction_version=transaction_version)
        self.config.transaction_version = transaction_version
        self.now_ms = now_ms
        self.data_dir = data_dir
        self.fsync = fsync
        self.rules = rules
        self.broker = Broker(self.config, data_dir=data_dir, now_ms=now_ms, fsync=fsync,
                             recover_corruption=recover_corruption, durability=durability, rules=rules)
        self.network = Network()
        self.producers: dict[str, Producer] = {}
        self._names = itertools.count(1)
        self.coordinator_up = True
        self.steps = 0

    def close(self) -> None:
        """Shut the broker down cleanly (durable: flush, checkpoint, close every file). Idempotent."""
        self.broker.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- clients ---

    def producer(self, transactional_id: str | None, *, txn_timeout_ms: int = 60_000,
                 transactional_id_reuse: ProducerHandle | None = None, enable_two_pc: bool = False) -> ProducerHandle:
        """A new producer (``transactional_id=None``: idempotent only). ``transactional_id_reuse`` revives a
        crashed handle's client state (a zombie that never learned it was replaced)."""
        if transactional_id_reuse is not None:
            handle = transactional_id_reuse
            handle.producer.closed = False
            self.producers[handle.name] = handle.producer
            return handle
        p = Producer(transactional_id, transaction_version=self.config.transaction_version,
                     txn_timeout_ms=txn_timeout_ms, rules=self.rules, enable_two_pc=enable_two_pc)
        name = f"producer-{next(self._names)}"
        self.producers[name] = p
        return ProducerHandle(self, name, p)

    def consumer(self, *, group_id: str | None = None, isolation: str | IsolationLevel = "READ_UNCOMMITTED"
                 ) -> ConsumerHandle:
        level = isolation if isinstance(isolation, IsolationLevel) else IsolationLevel(isolation)
        return ConsumerHandle(self, Consumer(level, group_id, rules=self.rules))

    def produce_plain(self, partition: str, values: Iterable[RecordValue]) -> None:
        """Append non-transactional records directly (test input)."""
        records = [Record(None, v, self.now_ms) for v in values]
        if records:
            r = self.broker.partition(partition).append_records(-1, -1, -1, records, now_ms=self.now_ms)
            if r.error is Errors.KAFKA_STORAGE_ERROR:
                raise KafkaStorageException(r.message)
            if r.error is not Errors.NONE:
                raise InvalidRequestError(f"cannot append to {partition}: {r.error.name} {r.message}")

    # --- time and faults ---

    def advance(self, ms: int) -> None:
        """Let ``ms`` milliseconds pass: transaction timeouts, id and producer expiration fire, then run."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise InvalidRequestError(f"advance needs a non-negative integer of milliseconds, got {ms!r}")
        self.now_ms += ms
        failures = len(self.broker.storage_failures)
        if self.coordinator_up:
            self.broker.tick(self.now_ms)
        if len(self.broker.storage_failures) > failures:
            raise self.broker.storage_failures[-1]  # a timeout's abort could not be written: retried next tick
        self.run()

    def crash_coordinator(self) -> None:
        """The transaction and group coordinators lose their memory and stop answering (NOT_COORDINATOR)."""
        self.broker.crash_coordinators()
        self.coordinator_up = False
        self.network.messages = [m for m in self.network.messages if not isinstance(m.request, TxnMarker)]

    def restart_coordinator(self) -> None:
        """A new coordinator epoch loads the logs and completes prepared transactions."""
        self.broker.restart_coordinators(self.now_ms)
        self.coordinator_up = True
        self._queue_markers()

    def crash_producer(self, handle: ProducerHandle) -> None:
        """The producer process dies: its messages in flight are lost, its handle refuses calls."""
        handle.producer.closed = True
        self.producers.pop(handle.name, None)
        self.network.messages = [m for m in self.network.messages if m.client != handle.name]
        handle.producer.in_flight_txn = None
        handle.producer.in_flight_produce.clear()

    # --- the network pump ---

    def _queue_markers(self) -> None:
        for marker in self.broker.txn_coordinator.marker_channel.drain_markers():
            self.network.send("coordinator", marker)

    def _dispatch(self) -> None:
        for name, p in list(self.producers.items()):
            for request in p.poll():
                self.network.send(name, request)
        self._queue_markers()

    def step(self) -> bool:
        """Deliver one message (the oldest not held); False if none can be delivered."""
        self._dispatch()
        m = self.network.next_deliverable()
        if m is None:
            return False
        self.deliver(m)
        return True

    def deliver(self, m: Message) -> None:
        """Deliver ``m`` now, whatever its position (reordering)."""
        net = self.network
        net.messages.remove(m)
        self.steps += 1
        for i, match in enumerate(net._drop):
            if match(m):
                del net._drop[i]
                net.log.append(f"dropped {m!r}")
                self.time_out(m)
                return
        copies = 1
        for i, match in enumerate(net._dup):
            if match(m):
                del net._dup[i]
                copies = 2
                break
        for _ in range(copies):
            self._deliver_one(m)
        self._dispatch()

    def time_out(self, m: Message) -> None:
        """The sender of lost message ``m`` (or of the request it answers) gives up waiting: a client retries
        (``NetworkClient`` request timeout), the coordinator re-sends a marker (``TransactionMarkerChannelManager``)."""
        if isinstance(m.request, TxnMarker):
            self.broker.txn_coordinator.marker_channel.on_marker_response(m.request, Errors.REQUEST_TIMED_OUT,
                                                                          self.now_ms)
        elif m.client in self.producers:
            self.producers[m.client].on_disconnect(m.request)  # type: ignore[arg-type]

    def _deliver_one(self, m: Message) -> None:
        net = self.network
        net.log.append(repr(m))
        if isinstance(m.request, TxnMarker):
            if self.coordinator_up:
                self.broker.write_marker(m.request, self.now_ms)
            return
        if m.response is None:
            response = self._answer(m.request)
            net.send(m.client, m.request, response)
            return
        p = self.producers.get(m.client)
        if p is None:
            return
        in_flight = p.in_flight_requests()
        if not any(r is m.request for r in in_flight):
            if isinstance(m.request, Produce):  # a copy of a batch's earlier attempt: its answer while unfinished
                p.on_earlier_attempt_response(m.request, m.response)
            return  # a duplicate or stale response: the client no longer waits for it
        p.on_response(m.request, m.response)  # type: ignore[arg-type]

    def _answer(self, request: Request) -> Response:
        name = type(request).__name__
        coordinator_rpc = name in ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
                                   "TxnOffsetCommit", "OffsetFetch")
        if coordinator_rpc and not self.coordinator_up:
            return Response(Errors.NOT_COORDINATOR, correlation_id=getattr(request, "correlation_id", 0))
        return self.broker.handle(request, self.now_ms)

    def run(self, until: Callable[[], bool] | None = None, max_steps: int = 100_000) -> None:
        """Deliver messages until ``until()`` holds or nothing can be delivered.

        A write the disk refused stops the run with that ``KafkaStorageException`` (the file and the
        reason): the request failed and changed nothing, the clients keep it queued, and calling the same
        operation again retries it (once there is space)."""
        failures = len(self.broker.storage_failures)
        for _ in range(max_steps):
            if until is not None and until():
                return
            if not self.step():
                return
            if len(self.broker.storage_failures) > failures:
                raise self.broker.storage_failures[-1]
        raise RuntimeError(f"the network did not settle within {max_steps} deliveries")

    # --- views ---

    def read(self, partition: str, isolation: str | IsolationLevel = "READ_COMMITTED") -> list[ConsumerRecord]:
        return self.consumer(isolation=isolation).read_all(partition)

    def committed_offsets(self, group_id: str, partitions: Iterable[str]) -> dict[str, int]:
        self.run()
        err, offsets = self.broker.group_coordinator.fetch_offsets(group_id, list(partitions))
        if err is not Errors.NONE:
            raise err.exception(f"OffsetFetch for {group_id}: {err.name}")
        return offsets

    def transaction_state(self, transactional_id: str) -> str | None:
        md = self.broker.txn_coordinator.metadata(transactional_id)
        return None if md is None else md.state.value


__all__ = ["Cluster"]
