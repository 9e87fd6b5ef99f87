"""The transaction coordinator's marker channel: the ``WriteTxnMarkers`` entries of a prepared transaction, their
answers, and the Complete* append once every partition has its marker.

Follows Kafka TRUNK ``core/src/main/scala/kafka/coordinator/transaction/TransactionMarkerChannelManager.scala``
(``addTxnMarkersToSend``, ``removeMarkersForTxnTopicPartition``, ``maybeWriteTxnCompletion``,
``txnLogAppendRetryQueue`` / ``retryLogAppends``) and ``TransactionMarkerRequestCompletionHandler.scala`` (each
partition's error: done, retried, or the transaction's markers given up).

Sans-I/O: markers to write are queued as :class:`TxnMarker` values the caller drains with
:meth:`TransactionMarkerChannelManager.drain_markers` and answers with
:meth:`TransactionMarkerChannelManager.on_marker_response`. ``manual_marker_completion=True`` (the coordinator's
config) makes the channel never complete a prepared transaction by itself, even one without partitions: it waits
for :meth:`TransactionMarkerChannelManager.markers_written` (the behaviour cases' ``MarkersWritten`` convention).

Assumed: a marker is answered by the caller (no broker-to-broker network, no request batching per broker).
Left out: the marker queue per destination broker, ``WriteTxnMarkers`` request versions, the channel's metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from txnspec.impl.errors import Errors
from txnspec.impl.internal_topics import partition_for
from txnspec.impl.log import ControlType
from txnspec.impl.policy import Rules
from txnspec.impl.txn_metadata import CoordinatorIllegalState, TransactionMetadata, TransactionState, TxnTransitMetadata
from txnspec.impl.txn_state_manager import CoordinatorConfig, TransactionStateManager

S = TransactionState


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One ``WriteTxnMarkers`` entry for one partition."""

    transactional_id: str
    partition: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: ControlType
    transaction_version: int


@dataclass
class _PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransitMetadata
    result: ControlType
    unsent: set[str]


class TransactionMarkerChannelManager:
    """The markers of the prepared transactions of one coordinator (see the module docstring)."""

    def __init__(self, txn_manager: TransactionStateManager, config: CoordinatorConfig, rules: Rules) -> None:
        self.txn_manager = txn_manager
        self.config = config
        self.rules = rules
        self._pending: dict[str, _PendingCompleteTxn] = {}
        self._outbox: list[TxnMarker] = []

    def clear(self) -> None:
        """Drop every pending transaction and marker (a new load, a resignation)."""
        self._pending.clear()
        self._outbox.clear()

    def remove_markers_for_txn_topic_partition(self, index: int) -> None:
        """``removeMarkersForTxnTopicPartition``: forget the transactions of transaction-log partition ``index``."""
        n = len(self.txn_manager.log_partitions)
        for tid in [tid for tid in self._pending if partition_for(tid, n) == index]:
            del self._pending[tid]
        self._outbox = [m for m in self._outbox if partition_for(m.transactional_id, n) != index]

    def add_txn_markers_to_send(self, coordinator_epoch: int, result: ControlType, md: TransactionMetadata,
                                transit: TxnTransitMetadata, now_ms: int) -> None:
        """``addTxnMarkersToSend``: queue a marker to every partition of ``md``'s transaction; ``transit`` (the
        Complete* transition) is written once every partition acknowledged."""
        tid = md.transactional_id
        pending = _PendingCompleteTxn(tid, coordinator_epoch, md, transit, result, set(md.topic_partitions))
        self._pending[tid] = pending
        sent_epoch = coordinator_epoch if self.rules.markers_carry_own_coordinator_epoch else coordinator_epoch + 1
        for p in self.rules.marker_partitions(md.topic_partitions):
            self._outbox.append(TxnMarker(tid, p, md.producer_id, md.producer_epoch, sent_epoch, result,
                                          md.client_transaction_version))
        if not self.config.manual_marker_completion:
            self._maybe_write_txn_completion(tid, now_ms)

    def drain_markers(self) -> list[TxnMarker]:
        """The ``WriteTxnMarkers`` entries to send now (each once; a retriable failure re-queues it)."""
        out, self._outbox = self._outbox, []
        return out

    def pending_markers(self, transactional_id: str) -> set[str]:
        p = self._pending.get(transactional_id)
        return set(p.metadata.topic_partitions) if p is not None else set()

    def on_marker_response(self, marker: TxnMarker, error: Errors, now_ms: int) -> None:
        """A partition leader's answer to one marker (``TransactionMarkerRequestCompletionHandler``)."""
        pending = self._pending.get(marker.transactional_id)
        if pending is None or pending.coordinator_epoch != marker.coordinator_epoch \
                or self.txn_manager.coordinator_epoch != marker.coordinator_epoch:
            return  # a stale marker of an older coordinator epoch
        md = pending.metadata
        if error in (Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION):
            md.remove_partition(marker.partition)
            self._maybe_write_txn_completion(marker.transactional_id, now_ms)
        elif error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
                       Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT, Errors.KAFKA_STORAGE_ERROR,
                       Errors.NETWORK_EXCEPTION):
            self._outbox.append(marker)  # retried
        elif error in (Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED):
            del self._pending[marker.transactional_id]  # give up on this transaction's markers
        else:
            raise CoordinatorIllegalState(f"Unexpected error {error.name} while sending txn marker for "
                                          f"{marker.transactional_id}")

    def markers_written(self, transactional_id: str, now_ms: int) -> Errors:
        """Every partition acknowledged its marker: complete the prepared transaction (cases' MarkersWritten)."""
        pending = self._pending.get(transactional_id)
        if pending is None:
            md = self.txn_manager.cache.get(transactional_id)
            if md is None or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return Errors.INVALID_TXN_STATE
            if md.pending_state is (S.COMPLETE_COMMIT if md.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT):
                # prepareComplete ran but no channel holds its transition: Kafka's
                # completeTransitionTo(prepareComplete(now)) completes it (TransactionCoordinatorTest
                # shouldReturnConcurrentTxnOnAddPartitionsIfEndTxnV2EpochOverflowAndNotComplete)
                md.pending_state = None
            if md.pending_transition_in_progress:
                return Errors.INVALID_TXN_STATE
            result = ControlType.COMMIT if md.state is S.PREPARE_COMMIT else ControlType.ABORT
            self.add_txn_markers_to_send(self.txn_manager.coordinator_epoch, result, md, md.prepare_complete(now_ms),
                                         now_ms)
            pending = self._pending.get(transactional_id)
            if pending is None:
                return Errors.NONE  # completed at once (no partitions, automatic completion)
        pending.metadata.topic_partitions.clear()
        self._outbox = [m for m in self._outbox if m.transactional_id != transactional_id]
        return self._maybe_write_txn_completion(transactional_id, now_ms, force=True)

    def _maybe_write_txn_completion(self, tid: str, now_ms: int, force: bool = False) -> Errors:
        pending = self._pending.get(tid)
        if pending is None or pending.metadata.topic_partitions:
            return Errors.NONE
        if self.config.manual_marker_completion and not force:
            return Errors.NONE
        del self._pending[tid]
        error = self.txn_manager.append_transaction_to_log(
            tid, pending.coordinator_epoch, pending.transit, now_ms,
            retry_on_error=lambda e: e is Errors.COORDINATOR_NOT_AVAILABLE)
        if error is Errors.COORDINATOR_NOT_AVAILABLE:
            self._pending[tid] = pending  # retried on the next marker tick
        elif error not in (Errors.NONE, Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS):
            raise CoordinatorIllegalState(f"Unexpected error {error.name} while appending to transaction log "
                                          f"for {tid}")
        return error

    def retry_completions(self, now_ms: int) -> None:
        """Retry Complete* writes that failed with COORDINATOR_NOT_AVAILABLE (``txnLogAppendRetryQueue``)."""
        for tid in list(self._pending):
            if not self._pending[tid].metadata.topic_partitions:
                self._maybe_write_txn_completion(tid, now_ms, force=True)


__all__ = ["TransactionMarkerChannelManager", "TxnMarker"]
