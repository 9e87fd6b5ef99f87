"""The ``sometimes`` partners of the safety invariants: states that show an invariant was not checked vacuously.

Models
    Each ``always`` property of :mod:`txnspec.spec.safety` has a partner here that some reachable state must
    satisfy (a run that never commits cannot claim that "committed data is never lost"): a transaction committed
    or aborted, a batch appended, a producer initialised or fenced, offsets committed (after a rebalance too), an
    expired producer or transactional id used again, an admin's abort, a prepared transaction open, committed or
    kept (KIP-939). :func:`txnspec.spec.properties.properties` pairs each invariant with its partner.

Kafka sources followed
    None directly: these read the system model's state and ghost (:mod:`txnspec.spec.ghost`).

Assumptions
    A partner is chosen so that it is reachable in every scenario that checks its invariant
    (``tests/spec/test_properties.py``).

Not modelled
    How often a partner is reached: one state suffices.
"""

from __future__ import annotations

from txnspec.spec.safety import ABORT, COMMIT, told
from txnspec.spec.system import FATAL_ERROR, PREPARED, SystemState
from txnspec.spec.txn_state import ONGOING


def prepared_transaction_open(state: SystemState) -> bool:
    return any(p.phase is PREPARED and p.prepared[0] != -1 and any(
        md.state is ONGOING and md.producer_id == p.prepared[0] for _, md in state.coordinator.cache)
        for p in state.producers)


def prepared_transaction_committed(state: SystemState) -> bool:
    return any(p.decision is not None and p.decision[1] is COMMIT and "committed" in told(state, p.decision[0])
               for p in state.producers)


def prepared_transaction_kept(state: SystemState) -> bool:
    return bool(state.ghost.kept)


def transaction_committed(state: SystemState) -> bool:
    return any(outcome == "committed" for _, outcome in state.ghost.told)


def transaction_aborted(state: SystemState) -> bool:
    return any(result is ABORT for _, _, result, _ in state.ghost.decisions)


def batch_appended(state: SystemState) -> bool:
    return bool(state.ghost.batches)


def producer_initialised(state: SystemState) -> bool:
    return any(p.producer_id >= 0 for p in state.producers)


def offsets_committed(state: SystemState) -> bool:
    return bool(state.group.committed)


def offsets_committed_after_rebalance(state: SystemState) -> bool:
    return state.ghost.committed_after_rebalance


def producer_fenced(state: SystemState) -> bool:
    return any(p.phase is FATAL_ERROR for p in state.producers)


def appended_after_producer_expiry(state: SystemState) -> bool:
    return state.ghost.appended_after_expiry


def expired_id_reinitialised(state: SystemState) -> bool:
    return state.ghost.reinitialised_after_expiry


def admin_aborted_a_transaction(state: SystemState) -> bool:
    return bool(state.ghost.admin_aborted)


def plain_commit_overtakes_pending_offsets(state: SystemState) -> bool:
    return state.ghost.plain_overtook_pending
