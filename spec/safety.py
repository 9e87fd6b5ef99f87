"""The safety invariants of Kafka's exactly-once protocol (``always``), as named predicates over a system state.

Models
    What must hold in every reachable state: the coordinator's transitions are Kafka's table; no duplicate,
    contiguous sequences per producer epoch (KIP-98 idempotence); fenced appends and fenced producers never commit,
    epochs are unique per producer (zombie fencing); a read_committed reader sees only committed data and no
    committed data is lost, a transaction's outcome is atomic, an EndTxn applies to its own transaction (KIP-98
    transactions); offsets commit only with their output and never from a fenced member (KIP-447, KIP-848); no
    hanging transaction (KIP-890); the coordinator caches and answers nothing for a partition it has not loaded;
    expiry of producer state and of transactional ids breaks no guarantee; two-phase commit (KIP-939): never
    timed out, the outcome follows the external decision, no write under a kept epoch commits. And what a reader
    sees (:func:`visible_offsets`), which several of them read. The ``sometimes`` partners are
    :mod:`txnspec.spec.sometimes`; :func:`txnspec.spec.properties.properties` pairs them.

Kafka sources followed
    The guarantees of KIP-98, KIP-447, KIP-848, KIP-890 and KIP-939; Jepsen's anomaly vocabulary for what a reader
    must never see (G1a aborted read, lost write). The predicates read the partition model's fetch
    (:func:`txnspec.spec.partition.fetch`, Kafka's ``CompletedFetch`` at read_committed).

Assumptions
    Ghost state: the predicates read the tags the system model attaches to batches and decisions
    (:mod:`txnspec.spec.ghost`); the protocol never reads them.

Not modelled
    Guarantees of read_uncommitted readers, of consumer positions other than committed offsets.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import partition as partition_mod
from txnspec.spec.errors import Errors
from txnspec.spec.messages import IsolationLevel, TransactionResult
from txnspec.spec.system import FATAL_ERROR, System, SystemState, Tag
from txnspec.spec.txn_state import ONGOING, PREPARE_STATES

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT


# --- what a reader sees ------------------------------------------------------------------------------

def visible_offsets(state: SystemState, partition: str, fetch: Callable[..., Any] = partition_mod.fetch
                    ) -> tuple[int, ...]:
    """Offsets of the data records a read_committed consumer gets from the start of the partition."""
    return _read_committed(fetch, state.partition(partition))


@functools.lru_cache(maxsize=1 << 16)  # a partition's state is shared by many system states
def _read_committed(fetch: Callable[..., Any], partition_state: Any) -> tuple[int, ...]:
    return tuple(fetch(partition_state, 0, IsolationLevel.READ_COMMITTED).records)


def decisions_of(state: SystemState, tag: Tag) -> set[TransactionResult]:
    return {result for _, decided, result, _ in state.ghost.decisions if decided == tag}


def told(state: SystemState, tag: Tag) -> set[str]:
    return {outcome for t, outcome in state.ghost.told if t == tag}


def batch_outcomes(state: SystemState) -> Iterator[tuple[Tag, str, TransactionResult]]:
    """For each transactional batch that a marker has closed: (its tag, partition, the marker's result)."""
    for batch in state.ghost.batches:
        if batch.tag is None or not batch.transactional:
            continue
        result = partition_mod.transaction_result_at(state.partition(batch.partition), batch.producer_id,
                                                     batch.base_offset)
        if result is not None:
            yield batch.tag, batch.partition, result


def valid_coordinator_transitions(state: SystemState) -> bool:
    """Every coordinator transition is in Kafka's valid-previous-states table and passes its checks."""
    return not state.coordinator.illegal_transitions


def no_duplicate_append(state: SystemState) -> bool:
    """No (partition, producer id, epoch, sequence) appended twice (idempotence)."""
    seen: set[tuple[str, int, int, int]] = set()
    for b in state.ghost.batches:
        if b.producer_id < 0:
            continue
        key = (b.partition, b.producer_id, b.producer_epoch, b.first_seq)
        if key in seen:
            return False
        seen.add(key)
    return True


def sequences_contiguous(system: System) -> Callable[[SystemState], bool]:
    """Per (partition, producer id, epoch), sequences follow each other in log order (wrapping at the bound)."""
    max_sequence = system.scenario.max_sequence

    def holds(state: SystemState) -> bool:
        last: dict[tuple[str, int, int], int] = {}
        for b in sorted(state.ghost.batches, key=lambda b: (b.partition, b.base_offset)):
            if b.producer_id < 0:
                continue
            key = (b.partition, b.producer_id, b.producer_epoch)
            if key in last:
                expected = 0 if last[key] >= max_sequence else last[key] + 1
                if b.first_seq != expected:
                    return False
            last[key] = b.last_seq
        return True
    return holds


def fenced_appends_never_commit(state: SystemState) -> bool:
    """A batch appended with a (producer id, epoch) the coordinator had already fenced is never committed.

    (Such an append can happen: a zombie's produce may reach a partition before the abort marker that
    fences it there; the marker then aborts it. What must never happen is that it commits.)"""
    return not any(b.fenced_at_append and result is COMMIT
                   for b in state.ghost.batches if b.tag is not None
                   for result in [partition_mod.transaction_result_at(state.partition(b.partition), b.producer_id,
                                                                      b.base_offset)])


def fenced_producer_never_commits(state: SystemState) -> bool:
    """No commit is decided on the request of a producer instance that another instance has fenced."""
    return not state.ghost.fenced_commit


def unique_producer_epochs(state: SystemState) -> bool:
    """No two live producer instances hold the same (producer id, epoch)."""
    held: set[tuple[int, int]] = set()
    for p in state.producers:
        if p.phase is FATAL_ERROR or p.producer_id < 0:
            continue
        key = (p.producer_id, p.producer_epoch)
        if key in held:
            return False
        held.add(key)
    return True


def read_committed_only_committed(state: SystemState, fetch: Callable[..., Any] = partition_mod.fetch) -> bool:
    """read_committed returns only records of transactions the coordinator decided to commit
    (no aborted read, G1a; nothing of an undecided transaction, i.e. nothing at or above the LSO)."""
    for partition, _ in state.partitions:
        visible = set(visible_offsets(state, partition, fetch))
        for b in state.ghost.batches:
            if b.partition != partition or not b.transactional or b.base_offset not in visible:
                continue
            if b.tag is None or decisions_of(state, b.tag) != {COMMIT} or "aborted" in told(state, b.tag):
                return False
    return True


def committed_data_never_lost(state: SystemState) -> bool:
    """A record of a transaction the application was told committed is never aborted (lost write)."""
    return all(not (result is ABORT and "committed" in told(state, tag)) for tag, _, result in batch_outcomes(state))


def atomic_outcome(state: SystemState) -> bool:
    """Every marker that closes a batch of a transaction carries the coordinator's one decision for it;
    no transaction is committed on one partition and aborted on another; a decision is never reversed."""
    closed: dict[Tag, set[TransactionResult]] = {}
    for tag, _, result in batch_outcomes(state):
        closed.setdefault(tag, set()).add(result)
    for tag, results in closed.items():
        decided = decisions_of(state, tag)
        if len(results) > 1 or len(decided) > 1 or (decided and results != decided):
            return False
    return all(len(decisions_of(state, tag)) <= 1 for _, tag, _, _ in state.ghost.decisions if tag is not None)


def end_txn_applies_to_its_transaction(state: SystemState) -> bool:
    """An EndTxn decides the transaction it was sent for, never a later one (KAFKA-17754)."""
    return all(by is None or opened is None or by == opened for _, opened, _, by in state.ghost.decisions)


def offsets_only_with_committed_output(state: SystemState) -> bool:
    """Consumer offsets become visible only from a transaction whose output commits (KIP-447).

    The application commits, as its input position, the number of its transaction: a visible offset
    ``n`` must come from a transaction ``n`` that the coordinator decided to commit."""
    plain = {(key, record_offset) for key, record_offset in state.ghost.plain_commits}
    for key, record in state.group.committed:
        if plain and (key, record.record_offset) in plain:
            continue  # an admin's plain OffsetCommit, from no transaction
        tags = {tag for _, tag, _, _ in state.ghost.decisions if tag is not None and tag[2] == record.offset}
        if not any(decisions_of(state, tag) == {COMMIT} and "aborted" not in told(state, tag) for tag in tags):
            return False
    return True


def no_hanging_transaction(state: SystemState) -> bool:
    """Every transaction open on a partition is one the coordinator is still driving (KIP-890): in its cache, or,
    while the id's transaction-log partition is not loaded (a slow failover), in the transaction log it will load."""
    cs = state.coordinator
    driving = [md for _, md in cs.cache]
    if cs.not_led or cs.loading:
        cached = {tid for tid, _ in cs.cache}
        driving += [t for tid, t in cs.txn_log if tid not in cached]
    for partition, pstate in state.partitions:
        for producer_id in partition_mod.open_transactions(pstate):
            if not any((md.producer_id == producer_id or md.prev_producer_id == producer_id)
                       and md.state in (ONGOING, *PREPARE_STATES) and partition in md.partitions
                       for md in driving):
                return False
    return True


def nothing_cached_while_unloaded(config: Any) -> Callable[[SystemState], bool]:
    """The coordinator holds no metadata of a transactional id whose transaction-log partition it does not lead
    or has not loaded yet: it answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS instead of creating or
    changing a state that the load would then overwrite (``getAndMaybeAddTransactionState``)."""
    def holds(state: SystemState) -> bool:
        cs = state.coordinator
        if not cs.not_led and not cs.loading:
            return True
        return all(coord_state.ownership_error(cs, tid, config) is Errors.NONE for tid, _ in cs.cache)
    holds.__doc__ = nothing_cached_while_unloaded.__doc__
    return holds


def answered_while_loading(state: SystemState) -> bool:
    """A client got COORDINATOR_LOAD_IN_PROGRESS from the coordinator."""
    return any(getattr(e.body, "error", None) is Errors.COORDINATOR_LOAD_IN_PROGRESS for e in state.network)


def answered_not_coordinator(state: SystemState) -> bool:
    """A client got NOT_COORDINATOR from the coordinator."""
    return any(getattr(e.body, "error", None) is Errors.NOT_COORDINATOR for e in state.network)


def no_duplicate_after_producer_expiry(state: SystemState) -> bool:
    """A partition that expired a producer id never appends a batch of that producer twice: the producer's
    retries end long before its id expires (``delivery.timeout.ms`` < ``producer.id.expiration.ms``)."""
    seen: set[tuple[str, int, int, int]] = set()
    for b in state.ghost.batches:
        if (b.partition, b.producer_id) not in state.ghost.expired_producers:
            continue
        key = (b.partition, b.producer_id, b.producer_epoch, b.first_seq)
        if key in seen:
            return False
        seen.add(key)
    return True


def expired_id_never_resurrects_epoch(state: SystemState) -> bool:
    """Once a transactional id expired, no transactional id's metadata holds its producer id again: a new
    InitProducerId gets a fresh producer id (epoch 0), never the old (producer id, epoch) back, so the expired
    id's former producers stay fenced (INVALID_PRODUCER_ID_MAPPING)."""
    retired = state.ghost.retired_producer_ids
    return not retired or all(md.producer_id not in retired for _, md in state.coordinator.cache)


def plain_commit_survives_marker(state: SystemState) -> bool:
    """A plain OffsetCommit is never overwritten by an older transactional commit of the same partition when the
    transaction's marker lands (``replayEndTransactionMarker`` keeps the most recent record)."""
    for key, record_offset in state.ghost.plain_commits:
        committed = dict(state.group.committed).get(key)
        if committed is None or committed.record_offset < record_offset:
            return False
    return True


# --- sometimes -----------------------------------------------------------------------------------------

def prepared_never_timed_out(state: SystemState) -> bool:
    """A two-phase-commit transaction is never aborted by the coordinator's timeout (KIP-939: only the external
    coordinator completes it; ``timedOutTransactions`` skips ``isDistributedTwoPhaseCommitTxn``)."""
    return not state.ghost.two_phase_timed_out


def prepared_outcome_follows_external_decision(state: SystemState) -> bool:
    """A prepared transaction ends as its external coordinator decided: ``completeTransaction`` commits exactly
    when the ``PreparedTxnState`` it is handed matches the client's (KIP-939), and nothing else ends it."""
    for p in state.producers:
        if p.decision is not None:
            tag, decided = p.decision
            if any(result is not decided for _, opened, result, _ in state.ghost.decisions if opened == tag):
                return False
    return True


def no_write_under_kept_epoch(state: SystemState) -> bool:
    """No batch appended under the (producer id, epoch) of a transaction kept by ``keepPreparedTxn`` after it was
    kept ever commits (KIP-939: the recovering instance may only complete; a late produce of the crashed instance
    can still reach a partition, which learns of the bumped epoch only from the marker, so it must be aborted)."""
    for partition, offset in state.ghost.written_under_kept:
        for b in state.ghost.batches:
            if (b.partition, b.base_offset) == (partition, offset) and partition_mod.transaction_result_at(
                    state.partition(partition), b.producer_id, offset) is COMMIT:
                return False
    return True


def no_fenced_member_offsets_commit(state: SystemState) -> bool:
    """No offsets the group took from a member fenced by a rebalance (evicted, of an older generation, or of a
    member epoch at which it did not hold the partition) are ever committed (KIP-447, KIP-848: the zombie's
    input position never overrides the new owner's)."""
    return not state.ghost.fenced_offsets_committed
