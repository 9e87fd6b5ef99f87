"""The producer client's own state changes: transitions, the request queue, error states, sequence bookkeeping.

Models
    The ``TransactionManager`` methods every other part of the client uses: a state transition checked against
    the table (:func:`transition_to`: an ``IllegalStateException`` on the application thread leaves the state
    unchanged, an invalid transition on the Sender thread poisons the manager: FATAL_ERROR with an
    ``IllegalStateException`` as last error, KAFKA-14831), enqueueing and completing transactional requests, a
    coordinator lookup, the fatal and abortable error states (KIP-360's epoch bump when the coordinator supports
    it), the checks that throw before a call (pending call, prepared transaction, error state), resetting the
    transaction and the sequences, and the transaction version learnt from the finalized features.

Kafka classes followed (trunk, 4.5.0-SNAPSHOT, ``clients/.../producer/internals/``)
    ``TransactionManager.java`` (``transitionTo``, ``enqueueRequest``, ``completeTransaction``,
    ``lookupCoordinator``, ``transitionToFatalError``, ``transitionToAbortableError``,
    ``canHandleAbortableError``, ``needToTriggerEpochBumpFromClient``, ``abortableErrorIfPossible``,
    ``maybeFailWithError``, ``throwIfPendingState``, ``throwIfInPreparedState``, ``resetSequenceNumbers``,
    ``resetTransactionState``, ``maybeTransitionToErrorState``, ``maybeUpdateTransactionV2Enabled``),
    ``ProducerIdAndEpoch``-style sequence arithmetic (``DefaultRecordBatch.incrementSequence``).

Assumptions
    The application awaits each blocking call until its result completes; calling the same operation again
    returns the pending result, any other transactional operation throws IllegalStateException.

Not modelled
    Idempotent-only producers (``bumpIdempotentEpochAndResetIdIfNeeded``).
"""

from __future__ import annotations

from dataclasses import replace

from txnspec.spec.client_errors import (
    FATAL_EXCEPTIONS,
    ILLEGAL_STATE,
    INVALID_PRODUCER_EPOCH,
    KAFKA_EXCEPTION,
    PRODUCER_FENCED,
    TRANSACTION_ABORTABLE,
    exception_of,
)
from txnspec.spec.client_state import (
    ABORTABLE_ERROR,
    ABORTING_TRANSACTION,
    DEFAULT_CONFIG,
    FATAL_ERROR,
    INITIALIZING,
    PREPARED_TRANSACTION,
    READY,
    ClientConfig,
    ClientState,
    Poisoned,
    Priority,
    State,
    Thrown,
    TxnRequestHandler,
    is_transition_valid,
)
from txnspec.spec.constants import INT_MAX_VALUE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txnspec.spec.errors import RETRIABLE_ERRORS
from txnspec.spec.messages import CoordinatorType, FindCoordinator


def increment_sequence(sequence: int, increment: int, max_sequence: int = INT_MAX_VALUE) -> int:
    """``DefaultRecordBatch.incrementSequence``: wraps to 0 after ``max_sequence``."""
    if sequence > max_sequence - increment:
        return increment - (max_sequence - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int, max_sequence: int = INT_MAX_VALUE) -> int:
    """``DefaultRecordBatch.decrementSequence``."""
    if sequence < decrement:
        return max_sequence - (decrement - sequence) + 1
    return sequence - decrement


def set_pair(pairs: tuple[tuple[str, int], ...], key: str, value: int | None) -> tuple[tuple[str, int], ...]:
    kept = [(k, v) for k, v in pairs if k != key]
    if value is not None:
        kept.append((key, value))
    return tuple(sorted(kept))


def transition_to(c: ClientState, target: State, error: str | None = None, *, sender: bool) -> ClientState:
    """``transitionTo``: an invalid transition throws on the application thread and poisons on the Sender's."""
    if not is_transition_valid(c.state, target):
        if sender:
            raise Poisoned(replace(c, state=FATAL_ERROR, last_error=ILLEGAL_STATE))
        raise Thrown(ILLEGAL_STATE)
    if target in (ABORTABLE_ERROR, FATAL_ERROR):
        assert error is not None, f"Cannot transition to {target.value} with a null exception"
        return replace(c, state=target, last_error=error)
    return replace(c, state=target, last_error=None)


def complete_result(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    """The handler's result completed (done or failed): a pending call waiting for it is acknowledged."""
    return replace(c, pending_transition=None) if handler.completes_call else c


def enqueue(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    """``enqueueRequest`` into the priority queue (FIFO among equal priorities)."""
    queue = list(c.pending_requests)
    at = next((i for i, h in enumerate(queue) if h.priority > handler.priority), len(queue))
    queue.insert(at, handler)
    return replace(c, pending_requests=tuple(queue))


def reenqueue(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    return enqueue(c, replace(handler, is_retry=True))


def lookup_coordinator(c: ClientState, key_type: CoordinatorType, key: str) -> ClientState:
    """``lookupCoordinator``: forget the coordinator and enqueue a FindCoordinator for it."""
    if key_type is CoordinatorType.GROUP:
        c = replace(c, group_coordinator_known=False)
    else:
        c = replace(c, txn_coordinator_known=False)
    return enqueue(c, TxnRequestHandler(FindCoordinator(key_type, key), Priority.FIND_COORDINATOR))


def fatal_error(c: ClientState, error: str) -> ClientState:
    """``transitionToFatalError`` (always valid); the pending call's result fails with it."""
    return replace(c, state=FATAL_ERROR, last_error=error, pending_transition=None)


def abortable_error(c: ClientState, error: str) -> ClientState:
    """``transitionToAbortableError``: a no-op while aborting; otherwise the table decides (Sender thread)."""
    if c.state is ABORTING_TRANSACTION:
        return c
    return transition_to(c, ABORTABLE_ERROR, error, sender=True)


def can_handle_abortable_error(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """``canHandleAbortableError``: the epoch can be bumped, by the client or by the coordinator (TV2)."""
    return config.coordinator_supports_bumping_epoch or c.tv2


def need_to_trigger_epoch_bump_from_client(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """``needToTriggerEpochBumpFromClient``."""
    return config.coordinator_supports_bumping_epoch and not c.tv2


def abortable_error_if_possible(c: ClientState, error: str, config: ClientConfig) -> ClientState:
    """``abortableErrorIfPossible``: abortable (with a client epoch bump for TV < 2) or fatal."""
    if can_handle_abortable_error(c, config):
        if need_to_trigger_epoch_bump_from_client(c, config):
            c = replace(c, client_side_epoch_bump_required=True)
        return abortable_error(c, error)
    return fatal_error(c, error)


def maybe_fail_with_error(c: ClientState) -> str | None:
    """``maybeFailWithError``: the exception an operation throws in an error state (None: no error)."""
    if not c.has_error:
        return None
    if c.last_error in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ILLEGAL_STATE):
        return c.last_error
    return KAFKA_EXCEPTION


def fail_if_error(c: ClientState) -> None:
    error = maybe_fail_with_error(c)
    if error is not None:
        raise Thrown(error)


def throw_if_pending_state(c: ClientState) -> None:
    """``throwIfPendingState``: an earlier blocking call has not completed (it timed out)."""
    if c.pending_transition is not None:
        raise Thrown(ILLEGAL_STATE)


def throw_if_in_prepared_state(c: ClientState) -> None:
    """``KafkaProducer.throwIfInPreparedState``."""
    if c.state is PREPARED_TRANSACTION:
        raise Thrown(ILLEGAL_STATE)


def reset_sequence_numbers(c: ClientState) -> ClientState:
    """``resetSequenceNumbers``: every partition starts again at sequence 0, nothing acknowledged."""
    return replace(c, sequences=(), last_acked=(), unresolved=())


def reset_transaction_state(c: ClientState) -> ClientState:
    """``resetTransactionState`` (Sender thread): READY, or INITIALIZING when the client bumps the epoch."""
    c = transition_to(c, INITIALIZING if c.client_side_epoch_bump_required else READY, sender=True)
    return replace(c, last_error=None, client_side_epoch_bump_required=False, transaction_started=False,
                   new_partitions=frozenset(), pending_partitions=frozenset(), partitions=frozenset(),
                   prepared_txn_state=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH))


def maybe_transition_to_error_state(c: ClientState, exception: str,
                                    config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``maybeTransitionToErrorState`` (a failed send or produce): fatal for the authorization, fencing,
    version and pid-mapping exceptions, abortable otherwise (retriable ones and InvalidTxnStateException
    become TransactionAbortableException); a TV < 2 client bumps its epoch on the abort unless the
    transaction is already completing."""
    if exception in FATAL_EXCEPTIONS:
        return fatal_error(c, exception)
    retriable = {exception_of(e) for e in RETRIABLE_ERRORS}
    if exception in retriable or exception == "InvalidTxnStateException":
        exception = TRANSACTION_ABORTABLE
    if need_to_trigger_epoch_bump_from_client(c, config) and not c.is_completing:
        c = replace(c, client_side_epoch_bump_required=True)
    return abortable_error(c, exception)


def maybe_update_transaction_v2_enabled(c: ClientState, on_initialization: bool) -> ClientState:
    """``maybeUpdateTransactionV2Enabled``: adopt the finalized ``transaction.version``; an upgrade to 2
    outside initialization requires a client epoch bump (the old TV1 epoch is fenced)."""
    finalized = c.finalized_transaction_version
    if finalized is None or finalized == c.transaction_version:
        return c
    upgraded = not c.tv2 and finalized >= 2
    c = replace(c, transaction_version=finalized)
    if upgraded and not on_initialization:
        c = replace(c, client_side_epoch_bump_required=True)
    return c


def finalized_features_changed(c: ClientState, transaction_version: int) -> ClientState:
    """The brokers' finalized ``transaction.version`` changed (``ApiVersions``); adopted at the next
    ``beginCompletingTransaction`` or ``initTransactions``."""
    return replace(c, finalized_transaction_version=transaction_version)


__all__ = [
    "abortable_error", "abortable_error_if_possible", "can_handle_abortable_error", "complete_result",
    "decrement_sequence", "enqueue", "fail_if_error", "fatal_error", "finalized_features_changed",
    "increment_sequence", "lookup_coordinator", "maybe_fail_with_error", "maybe_transition_to_error_state",
    "need_to_trigger_epoch_bump_from_client", "reenqueue", "reset_sequence_numbers", "reset_transaction_state",
    "set_pair", "throw_if_in_prepared_state", "throw_if_pending_state", "transition_to",
]
