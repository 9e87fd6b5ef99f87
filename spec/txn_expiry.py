"""The coordinator's scheduled tasks: aborting timed-out transactions and expiring idle transactional ids.

Models
    The timeout scan (:func:`abort_timed_out_transactions`, and :func:`abort_timed_out_transaction` for one
    transaction, which the model checker calls with time abstract): fence the epoch, then abort as an EndTxn from
    the coordinator would. Expiration (:func:`expire_transactional_ids`, :func:`expire_transactional_id`): an idle
    id (Empty or Complete*, nothing pending, no markers being written) is written as a tombstone and leaves the
    cache.

Kafka sources followed (trunk, 4.x)
    ``core/.../transaction/TransactionCoordinator.scala`` (``abortTimedOutTransactions``),
    ``TransactionStateManager.scala`` (``timedOutTransactions``, ``removeExpiredTransactionalIds``),
    ``TransactionMetadata.java`` (``prepareFenceProducerEpoch``, ``prepareDead``).

Assumptions
    A scan is one step; the two-phase-commit exception of the timeout filter is
    :func:`txnspec.spec.two_phase.is_timeout_candidate`.

Not modelled
    Batching of tombstones; the scans' schedule (``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
    ``transaction.remove.expired.transaction.cleanup.interval.ms``): the system model takes a scan at any time.
"""

from __future__ import annotations

from txnspec.spec.coordinator import end_transaction
from txnspec.spec.coordinator_state import (
    DEFAULT_CONFIG,
    Appended,
    CoordinatorConfig,
    CoordinatorResult,
    CoordinatorState,
    TxnTransit,
    put_entry,
    with_metadata,
)
from txnspec.spec.errors import Errors
from txnspec.spec.messages import TransactionResult, WriteTxnMarkers
from txnspec.spec.two_phase import is_timeout_candidate
from txnspec.spec.txn_metadata import prepare_dead, prepare_fence_producer_epoch, prepare_transition_to
from txnspec.spec.txn_state import EXPIRATION_ALLOWED, ONGOING
from txnspec.spec.values import replace

# --- timeouts, expiration, failover ---------------------------------------------------------------

def timed_out_transactions(cs: CoordinatorState, now_ms: int) -> tuple[str, ...]:
    """``TransactionStateManager.timedOutTransactions``: Ongoing, nothing pending, start + timeout < now."""
    return tuple(tid for tid, md in cs.cache
                 if is_timeout_candidate(md) and md.txn_start_ms + md.txn_timeout_ms < now_ms)


def abort_timed_out_transaction(cs: CoordinatorState, tid: str, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                                append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """Abort one transaction the coordinator found timed out: fence the epoch, then abort it.

    The model checker calls this for any Ongoing transaction (time is abstract there); the periodic
    scan :func:`abort_timed_out_transactions` calls it for each candidate of the clock.
    """
    md = cs.metadata(tid)
    if md is None or md.pending_state is not None or md.state is not ONGOING:
        return CoordinatorResult(cs)
    fence = prepare_fence_producer_epoch(md, config)
    cs, pending = prepare_transition_to(cs, md, fence, config)
    if pending is None:
        return CoordinatorResult(cs)
    cs = with_metadata(cs, pending, tid)
    ended = end_transaction(cs, tid, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT,
                            from_client=False, client_transaction_version=config.transaction_version,
                            config=config, append_error=append_error)
    return CoordinatorResult(ended.state, None, ended.appended, ended.markers)


def abort_timed_out_transactions(cs: CoordinatorState, now_ms: int, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                                 append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``TransactionCoordinator.abortTimedOutTransactions``: the periodic scan at ``now_ms``."""
    cs = replace(cs, now_ms=now_ms)
    appended: Appended = ()
    markers: tuple[tuple[str, WriteTxnMarkers], ...] = ()
    for tid in timed_out_transactions(cs, now_ms):
        step = abort_timed_out_transaction(cs, tid, config=config, append_error=append_error)
        cs, appended, markers = step.state, appended + step.appended, markers + step.markers
    return CoordinatorResult(cs, None, appended, markers)


def expire_transactional_ids(cs: CoordinatorState, now_ms: int, expiration_ms: int, *,
                             config: CoordinatorConfig = DEFAULT_CONFIG,
                             append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``removeExpiredTransactionalIds``: idle ids (Empty/Complete*, nothing pending, not updated for
    ``expiration_ms``) are written as tombstones and removed from the cache."""
    cs = replace(cs, now_ms=now_ms)
    appended: list[tuple[str, TxnTransit | None]] = []
    for tid, md in cs.cache:
        if md.pending_state is None and md.state in EXPIRATION_ALLOWED \
                and md.txn_last_update_ms <= now_ms - expiration_ms:
            cs, pending = prepare_transition_to(cs, md, prepare_dead(md), config)
            if pending is None:
                continue
            if append_error is not Errors.NONE:
                cs = with_metadata(cs, replace(pending, pending_state=None), tid)
                continue
            cs = replace(cs, txn_log=put_entry(cs.txn_log, tid, None))
            cs = with_metadata(cs, None, tid)
            appended.append((tid, None))
    return CoordinatorResult(cs, None, tuple(appended))


def expire_transactional_id(cs: CoordinatorState, tid: str, *, config: CoordinatorConfig = DEFAULT_CONFIG
                            ) -> CoordinatorResult:
    """``removeExpiredTransactionalIds`` for one id whose ``transactional.id.expiration.ms`` has passed (the system
    model's abstract time): Empty or Complete*, nothing pending, no markers being written; ``prepareDead``, the
    tombstone, and the id leaves the cache. Anything else is left as it is."""
    md = cs.metadata(tid)
    if md is None or md.pending_state is not None or md.state not in EXPIRATION_ALLOWED \
            or cs.completion(tid) is not None:
        return CoordinatorResult(cs)
    cs, pending = prepare_transition_to(cs, md, prepare_dead(md), config)
    if pending is None:
        return CoordinatorResult(cs)
    cs = replace(cs, txn_log=put_entry(cs.txn_log, tid, None))
    return CoordinatorResult(with_metadata(cs, None, tid), None, ((tid, None),))


__all__ = [
    "abort_timed_out_transaction", "abort_timed_out_transactions", "expire_transactional_id",
    "expire_transactional_ids", "timed_out_transactions",
]
