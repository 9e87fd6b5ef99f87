"""The producer's Sender and the drain of its record accumulator: which request goes on the wire next, and what
an answer, a lost request or an expired batch does to the batches and the transaction manager.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/Sender.java``
(``runOnce`` / ``maybeSendAndPollTransactionalRequest``: one transactional request in flight, no new produce
while one is, the idempotent producer's InitProducerId; ``completeBatch`` / ``failBatch`` with ``canRetry`` for
OUT_OF_ORDER_SEQUENCE_NUMBER; ``sendProducerData``'s expiry of a batch past its delivery timeout) and
``RecordAccumulator.java`` (``drain`` with ``shouldStopDrainBatchesForPartition``: several batches in flight per
partition, ``max_in_flight`` at most 5; a retried batch goes again only when it is the first in flight, nothing
new behind a batch waiting for its retry or of an older epoch).

Theory of operation: :meth:`Sender.poll` runs Sender iterations and returns the requests to put on the wire
(transactional requests before Produce); :meth:`Sender.on_response` feeds back an answer,
:meth:`Sender.on_disconnect` a lost request, :meth:`Sender.expire_batch` an elapsed delivery timeout.
:class:`txnspec.impl.client.Producer` extends it with ``KafkaProducer``'s API: one object holds both, as Kafka's
producer owns its Sender and its accumulator.

Assumed / left out: delivery timeouts and backoff delays are the caller's steps (retries are immediate, or
held until :meth:`Sender.end_retry_backoff` when ``retry_backoff`` is set, as the conformance adapter does); no
metadata, partitioner, linger or byte sizes.
"""

from __future__ import annotations

import itertools
from collections import deque

from txnspec.impl.client_states import St
from txnspec.impl.errors import (
    Errors,
    IllegalStateException,
    InvalidRequestError,
    KafkaException,
    TimeoutException,
    TransactionAbortedException,
)
from txnspec.impl.log import INT_MAX, increment_sequence
from txnspec.impl.messages import Produce, Response, TransactionalRequest
from txnspec.impl.producer_batch import ProducerBatch, TxnPartitionEntry
from txnspec.impl.transaction_manager import TransactionManager
from txnspec.impl.txn_handlers import InitProducerIdHandler, TxnRequestHandler


class Sender:
    """The Sender of one producer and its accumulator (see the module docstring)."""

    def __init__(self, tm: TransactionManager, max_in_flight: int = 5) -> None:
        self.tm = tm
        self.max_in_flight = max_in_flight
        # retry.backoff.ms: False retries a batch at the next poll; True holds it (and the partition's batches
        # behind it) until end_retry_backoff(), for a driver that decides when the backoff elapses
        self.retry_backoff = False
        self.accumulator: dict[str, deque[ProducerBatch]] = {}
        self.in_flight_produce: dict[int, tuple[Produce, ProducerBatch]] = {}
        self.in_flight_txn: tuple[TransactionalRequest, TxnRequestHandler] | None = None
        self._correlation = itertools.count(1)
        self.closed = False

    def has_incomplete_batches(self) -> bool:
        return bool(self.in_flight_produce) or any(self.accumulator.values())

    def _abort_undrained_batches(self, e: BaseException) -> None:
        for queue in self.accumulator.values():
            for batch in [b for b in queue if not b.in_flight and b.base_sequence == -1]:
                queue.remove(batch)
                for f in batch.futures:
                    f._fail(e)

    def poll(self) -> list[TransactionalRequest | Produce]:
        """Run Sender iterations until nothing more can be sent; the requests to send, in order."""
        out: list[TransactionalRequest | Produce] = []
        if self.closed:
            return out
        for _ in range(64):
            sent = self._run_once()
            if not sent:
                break
            out.extend(sent)
        return out

    def _run_once(self) -> list[TransactionalRequest | Produce]:
        tm = self.tm
        if not tm.is_transactional and not tm.has_producer_id and tm.state is St.UNINITIALIZED \
                and self.in_flight_txn is None and any(self.accumulator.values()):
            tm._transition_to(St.INITIALIZING)  # the idempotent producer's InitProducerId (no coordinator)
            init = InitProducerIdHandler(tm, False)
            init.coordinator_type = None
            tm._enqueue(init)
        if tm.is_transactional or tm.pending_requests or self.in_flight_txn is not None:
            if self.in_flight_txn is not None:
                return []
            if tm.state is St.FATAL_ERROR:
                self._abort_undrained_batches(tm.last_error or KafkaException("fatal error"))
                return []
            if tm.state in (St.ABORTABLE_ERROR, St.ABORTING_TRANSACTION) and self.has_incomplete_batches():
                self._abort_undrained_batches(tm.last_error or TransactionAbortedException(
                    "Failing batch since transaction was aborted"))
            tm._on_sender_thread = True
            try:
                while True:  # a handler failed by the error state is dropped; look at the next one
                    before = len(tm.pending_requests)
                    handler = tm.next_request(self.has_incomplete_batches())
                    if handler is not None or len(tm.pending_requests) >= before or not tm.pending_requests:
                        break
            except IllegalStateException:
                return []
            finally:
                tm._on_sender_thread = False
            if handler is not None:
                if handler.coordinator_type is not None \
                        and (handler.coordinator_type, handler.coordinator_key) not in tm.coordinators:
                    tm._lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
                    handler.is_retry = True
                    tm._enqueue(handler)
                    return self._run_once()
                request = handler.build()
                request = _with_correlation(request, next(self._correlation))
                self.in_flight_txn = (request, handler)
                return [request]
            if tm.has_fatal_error or not tm.has_producer_id:
                return []
        elif not tm.has_producer_id:
            return []
        return self._drain()

    def _drain(self) -> list[TransactionalRequest | Produce]:
        tm = self.tm
        out: list[TransactionalRequest | Produce] = []
        for partition in sorted(self.accumulator):
            queue = self.accumulator[partition]
            if not queue or not tm.is_send_to_partition_allowed(partition):
                continue
            entry = tm.partitions.setdefault(partition, TxnPartitionEntry())
            earlier_in_flight = False  # the queue holds the partition's unfinished batches in sequence order
            for batch in list(queue):
                if batch.in_flight:
                    earlier_in_flight = True
                    continue
                if batch.backing_off:
                    break  # RecordAccumulator.drain: the first batch is backing off, the partition waits
                if len(entry.in_flight) >= self.max_in_flight:
                    break
                if batch.base_sequence != -1 and earlier_in_flight:
                    # RecordAccumulator.shouldStopDrainBatchesForPartition: a retried batch goes out only when it
                    # is the first in flight (firstInFlightSequence), and nothing new goes before it
                    break
                if batch.base_sequence == -1 and any((b.producer_id, b.producer_epoch) != (tm.producer_id,
                                                                                           tm.producer_epoch)
                                                     for b in entry.in_flight):
                    break  # no new batch while one of an older producer id or epoch is in flight
                earlier_in_flight = True
                if batch.base_sequence == -1 or batch.producer_epoch != tm.producer_epoch \
                        or batch.producer_id != tm.producer_id:
                    batch.base_sequence = entry.next_sequence
                    batch.producer_id, batch.producer_epoch = tm.producer_id, tm.producer_epoch
                    entry.next_sequence = increment_sequence(batch.base_sequence, len(batch.records))
                batch.in_flight = True
                batch.attempts += 1
                entry.in_flight.append(batch)
                request = Produce(partition, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                  tuple(batch.records), tm.is_transactional, tm.transactional_id,
                                  tm.transaction_version, next(self._correlation))
                self.in_flight_produce[request.correlation_id] = (request, batch)
                out.append(request)
        return out

    def on_response(self, request: TransactionalRequest | Produce, response: Response) -> None:
        """Feed back the broker's answer to a request returned by :meth:`poll`."""
        if isinstance(request, Produce):
            self._complete_batch(request, response)
            return
        if self.in_flight_txn is None or self.in_flight_txn[0] is not request:
            raise InvalidRequestError(f"no transactional request {type(request).__name__} is in flight")
        _, handler = self.in_flight_txn
        self.in_flight_txn = None
        self.tm._on_sender_thread = True
        try:
            handler.handle_response(response)
        except IllegalStateException:
            pass  # the manager is poisoned (FATAL_ERROR) by _transition_to
        finally:
            self.tm._on_sender_thread = False

    def on_earlier_attempt_response(self, request: Produce, response: Response) -> None:
        """The answer to a copy of a Produce whose correlation was already answered (the request was sent again
        while this copy was on its way). The broker answers by sequence, so while the batch (partition, producer
        id, epoch, base sequence) is unfinished this is its answer, as good as the attempt in flight now (whose
        own answer is then ignored); once the batch is finished it is stale."""
        queue = self.accumulator.get(request.partition, deque())
        batch = next((b for b in queue if (b.producer_id, b.producer_epoch, b.base_sequence)
                      == (request.producer_id, request.producer_epoch, request.base_sequence)), None)
        if batch is None:
            return
        for cid, (_, b) in list(self.in_flight_produce.items()):
            if b is batch:
                del self.in_flight_produce[cid]
        self.in_flight_produce[request.correlation_id] = (request, batch)
        self._complete_batch(request, response)

    def end_retry_backoff(self, partition: str | None = None, base_sequence: int | None = None) -> None:
        """``retry.backoff.ms`` elapsed for every batch waiting for its retry (see ``retry_backoff``), or only for
        the batch of ``partition`` with ``base_sequence`` (each batch backs off from its own failed attempt:
        ``ProducerBatch.reenqueued``)."""
        for name, queue in self.accumulator.items():
            for batch in queue:
                if (partition is None or name == partition) and (base_sequence is None
                                                                 or batch.base_sequence == base_sequence):
                    batch.backing_off = False

    def on_disconnect(self, request: TransactionalRequest | Produce) -> None:
        """The request (or its response) was lost: retry it, re-looking up the coordinator."""
        if isinstance(request, Produce):
            self._complete_batch(request, Response(Errors.NETWORK_EXCEPTION))
            return
        if self.in_flight_txn is None or self.in_flight_txn[0] is not request:
            return
        _, handler = self.in_flight_txn
        self.in_flight_txn = None
        if not self.tm.rules.reenqueues_lost_requests:
            return
        if handler.coordinator_type is not None:
            self.tm._lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
        handler.reenqueue()

    def expire_batch(self, partition: str, base_sequence: int | None = None) -> None:
        """The delivery timeout expired for a batch sent to ``partition``, in flight or waiting for its retry
        (``Sender.sendProducerData``: ``failBatch`` with a ``TimeoutException``; ``base_sequence`` names it when
        several were sent): the transaction must abort, and a TV < 2 producer bumps its epoch after the abort unless
        it was already completing (``maybeTransitionToErrorState``). A batch in retry may have been written, so
        its sequence is unresolved (``markSequenceUnresolved`` -> ``maybeResolveSequences``): the bump is then
        required also while completing. Its answer, if it ever comes, is ignored."""
        sent = [b for b in self.accumulator.get(partition, deque()) if b.base_sequence != -1
                and base_sequence in (None, b.base_sequence)]
        if not sent:
            which = "" if base_sequence is None else f" with base sequence {base_sequence}"
            raise InvalidRequestError(f"no Produce to {partition}{which} is in flight")
        batch = sent[0]
        for cid, (_, b) in list(self.in_flight_produce.items()):
            if b is batch:
                del self.in_flight_produce[cid]
        tm = self.tm
        entry = tm.partitions.setdefault(partition, TxnPartitionEntry())
        if batch in entry.in_flight:
            entry.in_flight.remove(batch)
        batch.in_flight = False
        queue = self.accumulator.get(partition, deque())
        if batch in queue:
            queue.remove(batch)
        exc = TimeoutException(f"expiring the batch to {partition}: the delivery timeout elapsed")
        for f in batch.futures:
            f._fail(exc)
        tm._on_sender_thread = True
        try:
            tm.maybe_transition_to_error_state(exc)
            if tm.is_transactional and tm.need_to_trigger_epoch_bump_from_client and batch.in_retry:
                tm.client_side_epoch_bump_required = True  # the sequence is unresolved
        except IllegalStateException:
            pass
        finally:
            tm._on_sender_thread = False

    def _complete_batch(self, request: Produce, response: Response) -> None:
        found = self.in_flight_produce.pop(request.correlation_id, None)
        if found is None:
            raise InvalidRequestError(f"no Produce with correlation id {request.correlation_id} is in flight")
        _, batch = found
        tm = self.tm
        entry = tm.partitions.setdefault(batch.partition, TxnPartitionEntry())
        if batch in entry.in_flight:
            entry.in_flight.remove(batch)
        batch.in_flight = False
        queue = self.accumulator.get(batch.partition, deque())
        e = response.error
        if e in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
            if batch in queue:
                queue.remove(batch)
            if batch.producer_epoch == tm.producer_epoch and batch.producer_id == tm.producer_id:
                entry.last_acked_sequence = batch.last_sequence
            for i, f in enumerate(batch.futures):
                f._complete(response.base_offset + i if response.base_offset >= 0 else -1)
            return
        earlier_unfinished = False
        for unfinished in queue:  # the partition's unfinished batches, in sequence order
            if unfinished is batch:
                break
            earlier_unfinished = earlier_unfinished or (unfinished.base_sequence != -1 and (
                unfinished.producer_id, unfinished.producer_epoch) == (batch.producer_id, batch.producer_epoch))
        if tm.can_retry(e, batch, earlier_unfinished) and tm.state is not St.FATAL_ERROR:
            batch.backing_off = self.retry_backoff
            batch.in_retry = True  # ProducerBatch.reenqueued
            return  # stays queued with its sequence; drained again in order
        if batch in queue:
            queue.remove(batch)
        exc: BaseException = e.exception(f"{e.name} from partition {batch.partition}")
        for f in batch.futures:
            f._fail(exc)
        tm._on_sender_thread = True
        try:
            tm.maybe_transition_to_error_state(exc)
        except IllegalStateException:
            pass
        finally:
            tm._on_sender_thread = False
        if not entry.in_flight:
            entry.next_sequence = increment_sequence(entry.last_acked_sequence, 1) \
                if entry.last_acked_sequence != INT_MAX else 0

    # --- views ---

    @property
    def producer_id(self) -> int:
        return self.tm.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.tm.producer_epoch

    def in_flight_requests(self) -> list[TransactionalRequest | Produce]:
        out: list[TransactionalRequest | Produce] = [] if self.in_flight_txn is None else [self.in_flight_txn[0]]
        out.extend(r for r, _ in self.in_flight_produce.values())
        return out


def _with_correlation(request: TransactionalRequest, correlation_id: int) -> TransactionalRequest:
    from dataclasses import replace
    return replace(request, correlation_id=correlation_id)


__all__ = ["Sender"]
