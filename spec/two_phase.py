"""Two-phase commit (KIP-939, as Kafka 4.4 ships it; docs/kip-939.md): what the coordinator does differently.

Models
    ``Enable2Pc`` (checked in :func:`txnspec.spec.coordinator.handle_init_producer_id`: it needs the broker config
    ``transaction.two.phase.commit.enable``, else ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``) lifts the timeout bound
    and stores :data:`INT_MAX_TIMEOUT`: such a transaction is never a timeout candidate
    (:func:`is_timeout_candidate`). ``KeepPreparedTxn`` is answered ``UNSUPPORTED_VERSION``: 4.4's coordinator does
    not implement it yet. The KIP's design, which keeps the ongoing transaction (:func:`keep_ongoing_transaction`),
    is the variant :func:`txnspec.spec.coordinator.handle_init_producer_id_keeping_prepared`.

Kafka sources followed (4.4)
    ``core/.../transaction/TransactionCoordinator.scala`` (``handleInitProducerId``),
    ``TransactionStateManager.scala`` (``timedOutTransactions``), ``TransactionMetadata.java``
    (``isDistributedTwoPhaseCommitTxn``); KIP-939 for the design of ``keepPreparedTxn``.

Assumptions
    The KIP persists the ongoing (producer id, epoch) in a tagged field of ``TransactionLogValue``; the spec keeps
    its epoch in ``last_producer_epoch``, which a failover would lose: the 2PC scenarios have none.

Not modelled
    The ``TWO_PHASE_COMMIT`` ACL; epoch exhaustion on a kept transaction (a new producer id).
"""

from __future__ import annotations

from txnspec.spec.constants import NO_PRODUCER_EPOCH
from txnspec.spec.coordinator_state import (
    CoordinatorConfig,
    CoordinatorResult,
    CoordinatorState,
    TxnMetadata,
    map_append_error,
    put_entry,
    with_metadata,
)
from txnspec.spec.errors import Errors
from txnspec.spec.messages import InitProducerIdResponse
from txnspec.spec.txn_metadata import prepare_transition_to, transit_from
from txnspec.spec.txn_state import ONGOING
from txnspec.spec.values import replace

INT_MAX_TIMEOUT = 2147483647  # KIP-939: a two-phase-commit transaction never times out


def keep_ongoing_transaction(cs: CoordinatorState, md: TxnMetadata, timeout_ms: int, append_error: Errors,
                             config: CoordinatorConfig) -> CoordinatorResult:
    """KIP-939's ``keepPreparedTxn`` on an Ongoing transaction (the KIP's design; 4.4 answers UNSUPPORTED_VERSION
    before getting here): the transaction stays open with its partitions, the epoch is bumped so that the crashed
    instance is fenced, and the answer carries both pairs: the new one to write with, and the ongoing one to match
    against the external coordinator's ``PreparedTxnState``.

    The KIP persists the ongoing pair in a tagged field of ``TransactionLogValue``; the spec keeps its epoch in
    ``last_producer_epoch`` (kept by a second recovery, cleared by the next transition), which a failover would
    lose: the 2PC scenarios have none. Epoch exhaustion (a new producer id) is left out."""
    tid = md.transactional_id
    ongoing_epoch = md.last_producer_epoch if md.last_producer_epoch != NO_PRODUCER_EPOCH else md.producer_epoch
    transit = transit_from(md, ONGOING, producer_epoch=md.producer_epoch + 1, last_producer_epoch=ongoing_epoch,
                           txn_timeout_ms=timeout_ms, txn_last_update_ms=cs.now_ms)
    cs, pending = prepare_transition_to(cs, md, transit, config)
    if pending is None:
        return CoordinatorResult(cs, InitProducerIdResponse(Errors.UNKNOWN_SERVER_ERROR))
    if append_error is not Errors.NONE:
        cs = with_metadata(cs, replace(pending, pending_state=None), tid)
        return CoordinatorResult(cs, InitProducerIdResponse(map_append_error(append_error)))
    t = transit
    kept = TxnMetadata(tid, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
                       t.last_producer_epoch, t.txn_timeout_ms, t.state, t.partitions, t.txn_start_ms,
                       t.txn_last_update_ms, t.transaction_version, has_failed_epoch_fence=md.has_failed_epoch_fence)
    cs = with_metadata(replace(cs, txn_log=put_entry(cs.txn_log, tid, transit)), kept, tid)
    return CoordinatorResult(cs, InitProducerIdResponse(Errors.NONE, md.producer_id, transit.producer_epoch,
                                                        md.producer_id, ongoing_epoch), ((tid, transit),))


def is_timeout_candidate(md: TxnMetadata) -> bool:
    """``TransactionStateManager.timedOutTransactions``' filter, time aside: an Ongoing transaction with nothing
    pending that is not a distributed two-phase commit (``isDistributedTwoPhaseCommitTxn``: timeout
    ``Int.MaxValue``, KIP-939: only the external coordinator completes it)."""
    return md.pending_state is None and md.state is ONGOING and md.txn_timeout_ms != INT_MAX_TIMEOUT


__all__ = [
    "INT_MAX_TIMEOUT", "is_timeout_candidate", "keep_ongoing_transaction",
]
