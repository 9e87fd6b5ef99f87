"""EndTxn's decision: from a transaction's metadata and the request, the transition to append (PrepareCommit /
PrepareAbort) or the answer at once, in the transaction version 1 path and the transaction version 2 path.

Follows Kafka TRUNK ``core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala``:
``endTransactionWithTV1`` and ``endTransaction`` (TV2: the retry of a completed commit or abort answered with the
bumped epoch, ``retryOnEpochBump`` / ``retryOnOverflow``, the epoch fence of a timed-out transaction with
``isFromClient = false``, the producer id rotation when the epoch is exhausted), each up to its
``appendTransactionToLog``. The append, the markers and the answer after them stay in
:class:`txnspec.impl.coordinator.TransactionCoordinator`.

Assumed: the caller holds the metadata (``inLock``) and appends the returned transition. Left out: nothing of
these branches; the request checks before them (an empty id, not the coordinator) are the coordinator's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from txnspec.impl.errors import Errors
from txnspec.impl.log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlType
from txnspec.impl.producer_id_manager import AllocationError
from txnspec.impl.txn_metadata import (
    TV_0,
    CoordinatorIllegalState,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

S = TransactionState


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


def end_txn_tv1_transit(md: TransactionMetadata, pid: int, epoch: int, result: ControlType, is_from_client: bool,
                        now_ms: int) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
    """``endTransactionWithTV1`` up to its append: the transition to write and whether it ends an epoch fence,
    or the answer at once."""
    if md.producer_id != pid:
        return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
    if (is_from_client and epoch != md.producer_epoch) or epoch < md.producer_epoch:
        return EndTxnResult(Errors.PRODUCER_FENCED)
    if md.pending_state is not None and md.pending_state is not S.PREPARE_EPOCH_FENCE:
        return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
    commit = result is ControlType.COMMIT
    state = md.state
    if state is S.ONGOING:
        next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        fence = False
        if next_state is S.PREPARE_ABORT and md.pending_state is S.PREPARE_EPOCH_FENCE:
            fence = True
            md.pending_state = None
            md.producer_epoch = epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        return md.prepare_abort_or_commit(next_state, TV_0, NO_PRODUCER_ID, now_ms, False), fence
    if state is S.COMPLETE_COMMIT:
        return EndTxnResult(Errors.NONE if commit else Errors.INVALID_TXN_STATE)
    if state is S.COMPLETE_ABORT:
        return EndTxnResult(Errors.INVALID_TXN_STATE if commit else Errors.NONE)
    if state is S.PREPARE_COMMIT:
        return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS if commit else Errors.INVALID_TXN_STATE)
    if state is S.PREPARE_ABORT:
        return EndTxnResult(Errors.INVALID_TXN_STATE if commit else Errors.CONCURRENT_TRANSACTIONS)
    if state is S.EMPTY:
        return EndTxnResult(Errors.INVALID_TXN_STATE)
    raise CoordinatorIllegalState(f"Found transactionalId {md.transactional_id} with state {state.value}. "
                                  "This is illegal as we should never have transitioned to this state.")

def end_txn_tv2_transit(md: TransactionMetadata, pid: int, epoch: int, result: ControlType, is_from_client: bool,
                        client_tv: int, now_ms: int,
                        generate_producer_id: Callable[[], int]) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
    """``endTransaction`` (TV2) up to its append, as :func:`end_txn_tv1_transit`; an exhausted epoch takes a new
    producer id from ``generate_producer_id``."""
    pid_copy, epoch_copy = md.producer_id, md.producer_epoch
    is_epoch_fence = md.pending_state is S.PREPARE_EPOCH_FENCE
    retry_on_overflow = not is_epoch_fence and md.prev_producer_id == pid and epoch == md.max_epoch - 1 \
        and md.producer_epoch == 0
    retry_on_epoch_bump = not is_epoch_fence and md.producer_epoch == epoch + 1
    if not is_epoch_fence:
        if md.state in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
            valid_epoch = epoch == md.producer_epoch
        elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_epoch_bump
        else:
            valid_epoch = retry_on_epoch_bump or retry_on_overflow or epoch == md.producer_epoch
    else:
        valid_epoch = (not is_from_client or epoch == md.producer_epoch) and epoch >= md.producer_epoch
    is_retry = retry_on_epoch_bump or retry_on_overflow
    commit = result is ControlType.COMMIT

    def completion(next_state: TransactionState, no_partition_added: bool) -> tuple[TxnTransitMetadata, bool] \
            | EndTxnResult:
        next_pid = NO_PRODUCER_ID
        if md.pending_state is not S.PREPARE_EPOCH_FENCE and md.is_producer_epoch_exhausted:
            try:
                next_pid = generate_producer_id()
            except AllocationError as exc:
                return EndTxnResult(exc.error)
        try:
            return md.prepare_abort_or_commit(next_state, client_tv, next_pid, now_ms,
                                              no_partition_added), is_epoch_fence
        except CoordinatorIllegalState:
            return EndTxnResult(Errors.UNKNOWN_SERVER_ERROR)

    if md.pending_state is not None and md.pending_state is not S.PREPARE_EPOCH_FENCE:
        return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
    if md.producer_id != pid and not retry_on_overflow:
        return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
    if not valid_epoch:
        return EndTxnResult(Errors.PRODUCER_FENCED)
    state = md.state
    if state is S.ONGOING:
        next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if next_state is S.PREPARE_ABORT and is_epoch_fence:
            md.pending_state = None
        return completion(next_state, False)
    if state is S.COMPLETE_COMMIT:
        if commit:
            return EndTxnResult(Errors.NONE, pid_copy, epoch_copy) if is_retry \
                else EndTxnResult(Errors.INVALID_TXN_STATE)
        return EndTxnResult(Errors.INVALID_TXN_STATE) if is_retry else completion(S.PREPARE_ABORT, True)
    if state is S.COMPLETE_ABORT:
        if not commit:
            return EndTxnResult(Errors.NONE, pid_copy, epoch_copy) if is_retry \
                else completion(S.PREPARE_ABORT, True)
        return EndTxnResult(Errors.INVALID_TXN_STATE)
    if state is S.PREPARE_COMMIT:
        return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS if commit else Errors.INVALID_TXN_STATE)
    if state is S.PREPARE_ABORT:
        return EndTxnResult(Errors.INVALID_TXN_STATE if commit else Errors.CONCURRENT_TRANSACTIONS)
    if state is S.EMPTY:
        return EndTxnResult(Errors.INVALID_TXN_STATE) if commit else completion(S.PREPARE_ABORT, True)
    raise CoordinatorIllegalState(f"Found transactionalId {md.transactional_id} with state {state.value}. "
                                  "This is illegal as we should never have transitioned to this state.")


__all__ = ["EndTxnResult", "end_txn_tv1_transit", "end_txn_tv2_transit"]
