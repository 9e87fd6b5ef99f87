"""The producer client's batches: draining, sequence numbers, retries, and resolving sequences after a failure.

Models
    The Sender drains per partition as ``RecordAccumulator.drain`` does (:func:`next_produce`): a retry first, in
    sequence order (``insertInSequenceOrder``), and only when no batch before it is in flight; a batch takes the
    partition's next sequence. A batch that fails for good gives its sequence back
    (:func:`adjust_sequences_due_to_failed_batch`), an acknowledged one advances the last acknowledged sequence,
    and :func:`maybe_resolve_sequences` settles a partition whose sequences are unresolved. Aborting undrained
    batches (``abortUndrainedBatches``) is here too.

Kafka classes followed (trunk, 4.5.0-SNAPSHOT, ``clients/.../producer/internals/``)
    ``RecordAccumulator.java`` (``drain``, ``shouldStopDrainBatchesForPartition``, ``shouldBackoff``,
    ``reenqueue``, ``insertInSequenceOrder``, ``abortUndrainedBatches``), ``TxnPartitionMap.java``
    (``adjustSequencesDueToFailedBatch``), ``TransactionManager.java`` (``markSequenceUnresolved``,
    ``maybeResolveSequences``, ``isNextSequence``, ``handleCompletedBatch``).

Assumptions
    Retries are unlimited (``retries`` = Integer.MAX_VALUE): a retriable produce error always re-enqueues its batch.

Not modelled
    The acknowledgement of a batch already expired (its late answer is ignored), the renumbering of later batches
    in flight when one fails for good, batch splitting (MESSAGE_TOO_LARGE), record sizes.
"""

from __future__ import annotations

from dataclasses import replace

from txnspec.spec.client_errors import KAFKA_EXCEPTION
from txnspec.spec.client_state import DEFAULT_CONFIG, FATAL_ERROR, ClientConfig, ClientState
from txnspec.spec.client_transitions import (
    abortable_error_if_possible,
    decrement_sequence,
    increment_sequence,
    set_pair,
)
from txnspec.spec.messages import Produce


def send_allowed(c: ClientState, partition: str) -> bool:
    """``isSendToPartitionAllowed``."""
    return c.state is not FATAL_ERROR and partition in c.partitions


def sequence_precedes(first: Produce, second: Produce, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """``first`` was sent before ``second`` on the same partition with the same producer id and epoch: its
    sequence is lower (``TxnPartitionEntry.inflightBatchesBySequence``), taken across the wrap to 0 after
    ``config.max_sequence`` within the in-flight window (Kafka's sequences never wrap in flight; a model's small
    ``max_sequence`` may)."""
    if (first.partition, first.producer_id, first.producer_epoch) \
            != (second.partition, second.producer_id, second.producer_epoch):
        return False
    distance = (second.base_sequence - first.base_sequence) % (config.max_sequence + 1)
    return 0 < distance < config.max_in_flight_per_partition


def earlier_in_flight(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """A batch sent before ``batch`` is still in flight or waiting for its retry: ``batch`` is not the next
    sequence the broker expects (``isNextSequence``) nor the first in flight (``firstInFlightSequence``)."""
    return any(sequence_precedes(b, batch, config) for b in (*c.in_flight_batches, *c.retry_batches))


def reenqueue_batch(c: ClientState, batch: Produce, config: ClientConfig) -> ClientState:
    """``RecordAccumulator.reenqueue``: the batch goes back in sequence order (``insertInSequenceOrder``), keeping
    its sequence, and backs off (``retry.backoff.ms``) when the configuration says so."""
    retry = [b for b in c.retry_batches if b.partition != batch.partition or sequence_precedes(b, batch, config)]
    later = [b for b in c.retry_batches if b not in retry]
    c = replace(c, retry_batches=(*retry, batch, *later), retried=c.retried | {batch})
    return replace(c, backing_off=c.backing_off | {batch}) if config.retry_backoff else c


def adjust_sequences_due_to_failed_batch(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG
                                         ) -> ClientState:
    """``TxnPartitionMap.adjustSequencesDueToFailedBatch``: a batch of the current producer id and epoch that failed
    for good gives its sequence numbers back, so the partition's next batch takes them. (Kafka also renumbers the
    later batches in flight; here they keep theirs: the transaction aborts, and an epoch bump or TV2's EndTxn
    restarts the sequences.)"""
    if (batch.producer_id, batch.producer_epoch) != (c.producer_id, c.producer_epoch) \
            or not any(p == batch.partition for p, _ in c.sequences):
        return c  # the partition's sequences restarted since (a new epoch): nothing to give back
    seq = decrement_sequence(c.next_sequence(batch.partition), batch.record_count, config.max_sequence)
    return replace(c, sequences=set_pair(c.sequences, batch.partition, seq))


def next_produce(c: ClientState, partition: str, config: ClientConfig = DEFAULT_CONFIG
                 ) -> tuple[ClientState, Produce | None]:
    """``RecordAccumulator.drain`` for one partition: the next batch to send, with its sequence, if any.

    A batch waiting for a retry goes first, unchanged, once its back-off has elapsed (``shouldBackoff``) and no
    batch before it is in flight (``shouldStopDrainBatchesForPartition``: ``firstInFlightSequence``); while one
    waits, no new batch goes. Otherwise the partition's undrained records (at most ``config.max_batch_records``)
    form one batch with the current producer id and epoch and the partition's next sequence (which then
    advances, wrapping to 0 after ``config.max_sequence``), unless a batch of an older producer id or epoch is
    still in flight (``hasStaleProducerIdAndEpoch``).
    """
    if not send_allowed(c, partition) or not c.has_producer_id:
        return c, None
    in_flight = [b for b in c.in_flight_batches if b.partition == partition]
    if len(in_flight) >= config.max_in_flight_per_partition:
        return c, None  # muted
    retries = [b for b in c.retry_batches if b.partition == partition]
    if retries:
        batch = retries[0]  # the first of the partition's deque
        if batch in c.backing_off or any(sequence_precedes(b, batch, config) for b in in_flight):
            return c, None
        retry = list(c.retry_batches)
        retry.remove(batch)
        return replace(c, retry_batches=tuple(retry), in_flight_batches=(*c.in_flight_batches, batch)), batch
    undrained = sum(n for p, n in c.accumulator if p == partition)
    if undrained == 0:
        return c, None
    if any((b.producer_id, b.producer_epoch) != (c.producer_id, c.producer_epoch) for b in in_flight):
        return c, None  # no new batch while batches of an older epoch are in flight
    if any(p == partition for p, _ in c.unresolved):
        return c, None  # nor while the fate of an expired batch's sequence is unknown (hasUnresolvedSequence)
    count = undrained if config.max_batch_records is None else min(undrained, config.max_batch_records)
    seq = c.next_sequence(partition)
    batch = Produce(partition, c.producer_id, c.producer_epoch, seq, count, True, c.transactional_id)
    accumulator = tuple((p, n - count if p == partition else n) for p, n in c.accumulator)
    c = replace(c, accumulator=tuple((p, n) for p, n in accumulator if n > 0),
                sequences=set_pair(c.sequences, partition, increment_sequence(seq, count, config.max_sequence)),
                in_flight_batches=(*c.in_flight_batches, batch))
    return c, batch


def abort_undrained_batches(c: ClientState) -> ClientState:
    """``RecordAccumulator.abortUndrainedBatches``: records without a sequence are dropped."""
    return replace(c, accumulator=())


def abort_batches(c: ClientState) -> ClientState:
    """``Sender.maybeAbortBatches``: every incomplete batch fails (fatal error)."""
    return replace(c, accumulator=(), retry_batches=(), in_flight_batches=(), backing_off=frozenset(),
                   retried=frozenset())


def acknowledged(c: ClientState, batch: Produce, config: ClientConfig) -> ClientState:
    """``maybeUpdateLastAckedSequence``: the partition's last acknowledged sequence moves up to the batch's last
    (sequences compared across the wrap: newer within half the sequence space)."""
    last = increment_sequence(batch.base_sequence, batch.record_count - 1, config.max_sequence)
    known = [seq for p, seq in c.last_acked if p == batch.partition]
    if known and not 0 < (last - known[0]) % (config.max_sequence + 1) <= (config.max_sequence + 1) // 2:
        return c
    return replace(c, last_acked=set_pair(c.last_acked, batch.partition, last))


def is_next_sequence(c: ClientState, partition: str, sequence: int, config: ClientConfig) -> bool:
    """``isNextSequence``: ``sequence`` follows the partition's last acknowledged one (-1 when none)."""
    last = next((seq for p, seq in c.last_acked if p == partition), -1)
    return sequence == increment_sequence(last, 1, config.max_sequence)


def maybe_resolve_sequences(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``maybeResolveSequences`` (each Sender iteration): a partition whose batches are all done is resolved if its
    next sequence follows the last acknowledged one (later batches were written after all); otherwise the client
    cannot know what the broker holds: abortable with a client epoch bump for TV < 2, fatal if no bump is possible
    (``transitionToAbortableErrorOrFatalError``)."""
    for partition, _ in c.unresolved:
        if any(b.partition == partition for b in (*c.in_flight_batches, *c.retry_batches)):
            continue
        c = replace(c, unresolved=set_pair(c.unresolved, partition, None))
        if not is_next_sequence(c, partition, c.next_sequence(partition), config):
            c = abortable_error_if_possible(c, KAFKA_EXCEPTION, config)
    return c


__all__ = [
    "abort_batches", "abort_undrained_batches", "acknowledged", "adjust_sequences_due_to_failed_batch",
    "earlier_in_flight", "is_next_sequence", "maybe_resolve_sequences", "next_produce", "reenqueue_batch",
    "send_allowed", "sequence_precedes",
]
