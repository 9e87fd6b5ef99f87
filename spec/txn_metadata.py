"""``TransactionMetadata``'s transitions: prepare a transit, write it to the log, complete it.

Models
    Every change of a transactional id's metadata: :func:`prepare_transition_to` checks Kafka's table of valid
    previous states and sets the pending state; one ``prepare*`` helper per kind of transition builds the
    :class:`~txnspec.spec.coordinator_state.TxnTransit` (an epoch bump, a producer-id rotation, partitions added,
    Prepare*, Complete*, Dead, the epoch fence); :func:`append_transaction_to_log` writes it and
    :func:`complete_transition_to` checks it and lets the cache take its fields.

Kafka sources followed (trunk, 4.x)
    ``transaction-coordinator/.../TransactionMetadata.java`` (``prepareTransitionTo``, ``prepareFenceProducerEpoch``,
    ``prepareIncrementProducerEpoch``, ``prepareProducerIdRotation``, ``prepareAddPartitions``,
    ``prepareAbortOrCommit``, ``prepareComplete``, ``prepareDead``, ``completeTransitionTo``,
    ``validProducerEpoch``), ``core/.../transaction/TransactionStateManager.scala`` (``appendTransactionToLog``).

Assumptions
    The append and its callback are one step with the prepare: ``append_error`` says whether the append failed, and
    on failure the pending state is reset (unless the caller retries, as marker completion does).

Deliberate deviations
    Kafka throws ``IllegalStateException`` when a transition is not in the valid-previous-states table or fails
    ``completeTransitionTo``'s checks. The spec records the offending transition in
    ``CoordinatorState.illegal_transitions`` instead (and answers ``UNKNOWN_SERVER_ERROR``), so that the model
    checker reports it as a violation of ``valid_coordinator_transitions`` with a trace.
"""

from __future__ import annotations

from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX_VALUE, is_epoch_exhausted
from txnspec.spec.coordinator_state import (
    Appended,
    CoordinatorConfig,
    CoordinatorState,
    IllegalTransition,
    TxnMetadata,
    TxnTransit,
    map_append_error,
    put_entry,
    record_illegal,
    supports_epoch_bump,
    with_metadata,
)
from txnspec.spec.errors import Errors
from txnspec.spec.txn_state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_STATES,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARE_STATES,
    TxnState,
)
from txnspec.spec.values import replace, value

# --- TransactionMetadata: prepare and complete ---------------------------------------------------

def transit_from(md: TxnMetadata, target: TxnState, **changes: object) -> TxnTransit:
    """The transit ``prepareTransitionTo`` builds: the metadata's fields, ``changes`` applied.

    ``prev_producer_id`` is always the current producer id (Kafka sets it on every transition).
    """
    values: dict[str, object] = {
        "producer_id": md.producer_id, "prev_producer_id": md.producer_id,
        "next_producer_id": md.next_producer_id, "producer_epoch": md.producer_epoch,
        "last_producer_epoch": md.last_producer_epoch, "txn_timeout_ms": md.txn_timeout_ms,
        "state": target, "partitions": md.partitions, "txn_start_ms": md.txn_start_ms,
        "txn_last_update_ms": md.txn_last_update_ms, "transaction_version": md.transaction_version,
    }
    values.update(changes)
    return TxnTransit(**values)  # type: ignore[arg-type]


def prepare_transition_to(cs: CoordinatorState, md: TxnMetadata, transit: TxnTransit, config: CoordinatorConfig
                          ) -> tuple[CoordinatorState, TxnMetadata | None]:
    """``TransactionMetadata.prepareTransitionTo``: the table check, then ``pending_state := target``.

    Returns the metadata with its pending state set, or ``None`` (and the state with the illegal
    transition recorded) where Kafka would throw.
    """
    target = transit.state
    problem = ""
    if md.pending_state is not None:
        problem = f"already has pending state {md.pending_state}"
    elif transit.producer_id < 0:
        problem = f"illegal new producer id {transit.producer_id}"
    elif target is not DEAD and transit.producer_epoch < 0:
        problem = f"illegal new producer epoch {transit.producer_epoch}"
    elif md.state not in config.valid_previous_states[target]:
        problem = f"{target} is not a valid successor of {md.state}"
    if problem:
        return record_illegal(cs, md.transactional_id, f"{md.state} -> {target}: {problem}"), None
    return cs, replace(md, pending_state=target)


def _valid_producer_epoch(md: TxnMetadata, t: TxnTransit) -> bool:
    """``TransactionMetadata.validProducerEpoch`` (trunk)."""
    if supports_epoch_bump(t.transaction_version):
        if t.state in COMPLETE_STATES and t.producer_epoch == 0:  # completion of an epoch overflow
            return t.last_producer_epoch == md.last_producer_epoch and t.prev_producer_id == md.producer_id
        if t.state in PREPARE_STATES:
            return t.last_producer_epoch == md.producer_epoch and t.producer_id == md.producer_id
    return t.producer_epoch == md.producer_epoch and t.producer_id == md.producer_id


def _valid_producer_epoch_bump(md: TxnMetadata, t: TxnTransit) -> bool:
    return t.producer_epoch == md.producer_epoch + 1 or (t.producer_epoch == 0 and t.producer_id != md.producer_id)


def complete_transition_to(md: TxnMetadata, t: TxnTransit) -> TxnMetadata | IllegalTransition:
    """``TransactionMetadata.completeTransitionTo``: the checks, then the cache takes every field.

    Returns the new metadata, or the transition Kafka would refuse with ``IllegalStateException``.
    """
    target = md.pending_state
    if target is None:
        return IllegalTransition(md.transactional_id, "completing a transition without a pending state")
    if target is not t.state:
        return IllegalTransition(md.transactional_id, f"pending state {target} does not match the transit's {t.state}")
    ok = True
    if target is EMPTY:
        ok = ((md.producer_epoch == t.producer_epoch or _valid_producer_epoch_bump(md, t))
              and not t.partitions and t.txn_start_ms == -1)
    elif target is ONGOING:
        ok = (_valid_producer_epoch(md, t) and t.partitions >= md.partitions
              and md.txn_timeout_ms == t.txn_timeout_ms)
    elif target in PREPARE_STATES:
        allowed_empty_abort = (target is PREPARE_ABORT and supports_epoch_bump(t.transaction_version)
                               and md.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT))
        ok = (_valid_producer_epoch(md, t) and md.partitions == t.partitions
              and md.txn_timeout_ms == t.txn_timeout_ms
              and (md.txn_start_ms == t.txn_start_ms or allowed_empty_abort))
    elif target in COMPLETE_STATES:
        ok = _valid_producer_epoch(md, t) and md.txn_timeout_ms == t.txn_timeout_ms and t.txn_start_ms != -1
    else:  # PrepareEpochFence and Dead are never completed
        ok = False
    if not ok:
        return IllegalTransition(md.transactional_id, f"invalid completion {md.state} -> {t.state}")
    return TxnMetadata(
        md.transactional_id, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
        t.last_producer_epoch, t.txn_timeout_ms, t.state, t.partitions, t.txn_start_ms,
        t.txn_last_update_ms, t.transaction_version, pending_state=None,
        has_failed_epoch_fence=md.has_failed_epoch_fence)


def prepare_fence_producer_epoch(md: TxnMetadata, config: CoordinatorConfig) -> TxnTransit:
    """``prepareFenceProducerEpoch``: epoch + 1, unless a failed fence already bumped it in memory."""
    keep = md.has_failed_epoch_fence or md.producer_epoch == config.max_epoch
    return transit_from(md, PREPARE_EPOCH_FENCE, producer_epoch=md.producer_epoch if keep else md.producer_epoch + 1)


def prepare_increment_producer_epoch(md: TxnMetadata, timeout_ms: int, expected_epoch: int | None, now_ms: int,
                                     max_epoch: int = SHORT_MAX_VALUE) -> TxnTransit | Errors:
    """``prepareIncrementProducerEpoch`` (KIP-360): bump, or accept a retry of the last bump, or fence.

    An exhausted epoch cannot be bumped: Kafka throws ``IllegalStateException``, which
    ``prepareInitProducerIdTransit`` turns into ``Errors.forException``, i.e. ``UNKNOWN_SERVER_ERROR``
    (reached when the caller expects an epoch other than the current, exhausted one)."""
    if is_epoch_exhausted(md.producer_epoch, max_epoch):
        return Errors.UNKNOWN_SERVER_ERROR
    if expected_epoch is None:
        epoch, last = md.producer_epoch + 1, NO_PRODUCER_EPOCH
    elif md.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == md.producer_epoch:
        epoch, last = md.producer_epoch + 1, md.producer_epoch
    elif expected_epoch == md.last_producer_epoch:  # a retry of a bump whose response was lost
        epoch, last = md.producer_epoch, md.last_producer_epoch
    else:
        return Errors.PRODUCER_FENCED
    return transit_from(md, EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=timeout_ms,
                        partitions=frozenset(), txn_start_ms=-1, txn_last_update_ms=now_ms)


def prepare_producer_id_rotation(md: TxnMetadata, new_producer_id: int, timeout_ms: int, now_ms: int,
                                 record_last_epoch: bool) -> TxnTransit:
    """``prepareProducerIdRotation``: a fresh producer id at epoch 0 once the epoch is exhausted."""
    return transit_from(md, EMPTY, producer_id=new_producer_id, producer_epoch=0,
                        last_producer_epoch=md.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                        txn_timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1, txn_last_update_ms=now_ms)


def prepare_add_partitions(md: TxnMetadata, partitions: frozenset[str], now_ms: int,
                           client_transaction_version: int) -> TxnTransit:
    starts_now = md.state in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT)
    return transit_from(md, ONGOING, partitions=md.partitions | partitions,
                        txn_start_ms=now_ms if starts_now else md.txn_start_ms, txn_last_update_ms=now_ms,
                        transaction_version=client_transaction_version)


def prepare_abort_or_commit(md: TxnMetadata, target: TxnState, client_transaction_version: int,
                            next_producer_id: int, now_ms: int, no_partition_added: bool,
                            config: CoordinatorConfig) -> TxnTransit:
    """``prepareAbortOrCommit``: TV2 bumps the epoch at the Prepare step (KIP-890)."""
    if supports_epoch_bump(client_transaction_version):
        at_max = md.producer_epoch == config.max_epoch and target is PREPARE_ABORT
        epoch, last = (md.producer_epoch if at_max else md.producer_epoch + 1), md.producer_epoch
    else:
        epoch, last = md.producer_epoch, md.last_producer_epoch
    return transit_from(md, target, producer_epoch=epoch, last_producer_epoch=last,
                        txn_start_ms=now_ms if no_partition_added else md.txn_start_ms,
                        next_producer_id=next_producer_id, txn_last_update_ms=now_ms,
                        transaction_version=client_transaction_version)


def prepare_complete(md: TxnMetadata, now_ms: int) -> TxnTransit:
    """``prepareComplete``: TV2 switches to the producer id allocated at Prepare after an overflow."""
    target = COMPLETE_COMMIT if md.state is PREPARE_COMMIT else COMPLETE_ABORT
    rotate = supports_epoch_bump(md.transaction_version) and md.next_producer_id != NO_PRODUCER_ID
    return transit_from(md, target, producer_id=md.next_producer_id if rotate else md.producer_id,
                        producer_epoch=0 if rotate else md.producer_epoch, next_producer_id=NO_PRODUCER_ID,
                        partitions=frozenset(), txn_last_update_ms=now_ms)


def prepare_dead(md: TxnMetadata) -> TxnTransit:
    return transit_from(md, DEAD, partitions=frozenset())


# --- the transaction log ------------------------------------------------------------------------

@value
class AppendOutcome:
    state: CoordinatorState
    error: Errors
    appended: Appended


def append_transaction_to_log(cs: CoordinatorState, md: TxnMetadata, transit: TxnTransit,
                              append_error: Errors, config: CoordinatorConfig, *,
                              retry_on_error: frozenset[Errors] = frozenset()) -> AppendOutcome:
    """``TransactionStateManager.appendTransactionToLog`` then ``completeTransitionTo``.

    ``md`` carries the pending state set by :func:`prepare_transition_to`. On failure the pending
    state is reset unless the mapped error is in ``retry_on_error`` (marker completion keeps it for
    ``COORDINATOR_NOT_AVAILABLE``); nothing is written.
    """
    tid = md.transactional_id
    if append_error is not Errors.NONE:
        error = map_append_error(append_error)
        kept = md if error in retry_on_error else replace(md, pending_state=None)
        return AppendOutcome(with_metadata(cs, kept, tid), error, ())
    logged = replace(cs, txn_log=put_entry(cs.txn_log, tid, transit))
    completed = complete_transition_to(md, transit)
    if isinstance(completed, IllegalTransition):
        cleared = with_metadata(logged, replace(md, pending_state=None), tid)
        return AppendOutcome(record_illegal(cleared, completed.transactional_id, completed.reason),
                             Errors.UNKNOWN_SERVER_ERROR, ((tid, transit),))
    return AppendOutcome(with_metadata(logged, completed, tid), Errors.NONE, ((tid, transit),))


__all__ = [
    "AppendOutcome", "append_transaction_to_log", "complete_transition_to", "prepare_abort_or_commit",
    "prepare_add_partitions", "prepare_complete", "prepare_dead", "prepare_fence_producer_epoch",
    "prepare_increment_producer_epoch", "prepare_producer_id_rotation", "prepare_transition_to", "transit_from",
]
