"""The transaction markers: sent for a prepared transaction, answered per partition, then Complete* written.

Models
    Once a transaction is prepared (PrepareCommit or PrepareAbort written) the coordinator queues one
    ``WriteTxnMarkers`` per partition of the transaction (:func:`add_txn_markers_to_send`), handles each
    partition's answer (:func:`handle_write_txn_markers_response`: done, retried, or given up) and writes the
    Complete* record when the last partition is done; :func:`markers_written` is every marker acknowledged at once.

Kafka sources followed (trunk, 4.x)
    ``core/.../transaction/TransactionMarkerChannelManager.scala`` (``addTxnMarkersToSend``, ``tryAppendToLog``)
    and ``TransactionMarkerRequestCompletionHandler.scala`` (the errors that complete, retry or give up).

Assumptions
    A prepared transaction with no partitions has no marker to wait for: its Complete record is written at once
    (``CoordinatorConfig.complete_without_markers``; the behaviour cases leave it to an explicit step).

Not modelled
    The channel's queues per broker, request batching and its retry backoff: the network re-delivers.
"""

from __future__ import annotations

from txnspec.spec.coordinator_state import (
    DEFAULT_CONFIG,
    Appended,
    CoordinatorConfig,
    CoordinatorResult,
    CoordinatorState,
    PendingCompletion,
    TxnMetadata,
    TxnTransit,
    put_entry,
    record_illegal,
    with_metadata,
)
from txnspec.spec.errors import Errors
from txnspec.spec.messages import TransactionResult, WriteTxnMarkers
from txnspec.spec.txn_metadata import AppendOutcome, append_transaction_to_log, prepare_complete, prepare_transition_to
from txnspec.spec.txn_state import COMPLETE_ABORT, COMPLETE_COMMIT, PREPARE_COMMIT, PREPARE_STATES
from txnspec.spec.values import replace

# --- markers and completion ------------------------------------------------------------------------

def markers_for(cs: CoordinatorState, md: TxnMetadata, result: TransactionResult
                ) -> tuple[tuple[str, WriteTxnMarkers], ...]:
    """One ``WriteTxnMarkers`` per partition still waiting, with the metadata's (bumped) pid and epoch."""
    return tuple((md.transactional_id, WriteTxnMarkers(p, md.producer_id, md.producer_epoch, cs.coordinator_epoch,
                                                       result, md.transaction_version))
                 for p in sorted(md.partitions))


def add_txn_markers_to_send(cs: CoordinatorState, md: TxnMetadata, result: TransactionResult, complete: TxnTransit,
                            config: CoordinatorConfig
                            ) -> tuple[CoordinatorState, tuple[tuple[str, WriteTxnMarkers], ...], Appended]:
    """``TransactionMarkerChannelManager.addTxnMarkersToSend``: queue markers; none to send completes at once."""
    tid = md.transactional_id
    cs = replace(cs, completions=put_entry(cs.completions, tid,
                                           PendingCompletion(cs.coordinator_epoch, result, complete)))
    if not md.partitions and config.complete_without_markers:
        done = _write_complete(cs, tid, Errors.NONE, config)
        return done.state, (), done.appended
    return cs, markers_for(cs, md, result), ()


# TransactionMarkerRequestCompletionHandler: what the coordinator does with each per-partition answer.
MARKER_DONE_ERRORS = frozenset({Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION})


MARKER_RETRY_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT, Errors.KAFKA_STORAGE_ERROR,
    Errors.NETWORK_EXCEPTION})


MARKER_GIVE_UP_ERRORS = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})


def handle_write_txn_markers_response(cs: CoordinatorState, tid: str, partition: str, coordinator_epoch: int,
                                      error: Errors, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                                      append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """One partition's answer to a marker. Done: ``removePartition``; the last one writes Complete*.

    A retriable error leaves the partition waiting (the channel re-sends); ``INVALID_PRODUCER_EPOCH``
    or ``TRANSACTION_COORDINATOR_FENCED`` make the coordinator give up on this transaction's markers
    (Kafka then leaves the transaction prepared until the id's partition is reloaded). An answer for a
    completion the coordinator no longer tracks (stale coordinator epoch) is ignored.
    """
    pending = cs.completion(tid)
    md = cs.metadata(tid)
    if pending is None or md is None or pending.coordinator_epoch != coordinator_epoch:
        return CoordinatorResult(cs)
    if error in MARKER_RETRY_ERRORS:
        return CoordinatorResult(cs)
    if error in MARKER_GIVE_UP_ERRORS:
        return CoordinatorResult(replace(cs, completions=put_entry(cs.completions, tid, None)))
    if error not in MARKER_DONE_ERRORS:
        return CoordinatorResult(record_illegal(cs, tid, f"unexpected marker error {error}"))
    if partition not in md.partitions:
        return CoordinatorResult(cs)
    md = replace(md, partitions=md.partitions - {partition})
    cs = with_metadata(cs, md, tid)
    if md.partitions:
        return CoordinatorResult(cs)
    done = _write_complete(cs, tid, append_error, config)
    return CoordinatorResult(done.state, None, done.appended)


def _write_complete(cs: CoordinatorState, tid: str, append_error: Errors, config: CoordinatorConfig) -> AppendOutcome:
    """All markers acknowledged: append the Complete* record (``tryAppendToLog``)."""
    pending = cs.completion(tid)
    md = cs.metadata(tid)
    assert pending is not None and md is not None
    done = append_transaction_to_log(cs, md, pending.complete, append_error, config,
                                     retry_on_error=frozenset({Errors.COORDINATOR_NOT_AVAILABLE}))
    if done.error is Errors.COORDINATOR_NOT_AVAILABLE:
        return done  # stays queued, pending state kept: the channel retries
    return AppendOutcome(replace(done.state, completions=put_entry(done.state.completions, tid, None)), done.error,
                         done.appended)


def markers_written(cs: CoordinatorState, tid: str, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                    append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """Every partition of ``tid``'s prepared transaction acknowledged its marker: Prepare* -> Complete*."""
    md = cs.metadata(tid)
    if md is None or md.state not in PREPARE_STATES:
        return CoordinatorResult(cs)
    if cs.completion(tid) is None:
        if md.pending_state is (COMPLETE_COMMIT if md.state is PREPARE_COMMIT else COMPLETE_ABORT):
            # prepareComplete ran (its transition is pending) but no channel holds it: Kafka's
            # completeTransitionTo(prepareComplete(now)) completes it (TransactionCoordinatorTest
            # shouldReturnConcurrentTxnOnAddPartitionsIfEndTxnV2EpochOverflowAndNotComplete)
            md = replace(md, pending_state=None)
        complete = prepare_complete(md, cs.now_ms)
        cs, pending_md = prepare_transition_to(cs, replace(md, has_failed_epoch_fence=False), complete, config)
        if pending_md is None:
            return CoordinatorResult(cs)
        result = TransactionResult.COMMIT if md.state is PREPARE_COMMIT else TransactionResult.ABORT
        cs = with_metadata(cs, pending_md, tid)
        cs = replace(cs, completions=put_entry(cs.completions, tid,
                                               PendingCompletion(cs.coordinator_epoch, result, complete)))
        md = pending_md
    cs = with_metadata(cs, replace(md, partitions=frozenset()), tid)
    done = _write_complete(cs, tid, append_error, config)
    return CoordinatorResult(done.state, None, done.appended)


__all__ = [
    "MARKER_DONE_ERRORS", "MARKER_GIVE_UP_ERRORS", "MARKER_RETRY_ERRORS", "add_txn_markers_to_send",
    "handle_write_txn_markers_response", "markers_for", "markers_written",
]
