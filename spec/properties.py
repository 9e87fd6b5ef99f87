"""The properties of Kafka's exactly-once protocol, as named predicates over a system state.

Safety invariants (``always``), each with a ``sometimes`` partner that shows the invariant was not
checked on an empty space (a run that never commits cannot claim that "committed data is never lost");
liveness (``leads_to``) judged by the checker under weak fairness of the protocol's own actions.

Kafka's guarantees these follow: KIP-98 (idempotence: no duplicate, in-order sequences per producer
epoch; transactions: atomic outcome, read_committed isolation, zombie fencing), KIP-447 (offsets
committed exactly when the output commits), KIP-890 (no hanging transaction), Jepsen's anomaly
vocabulary for what a reader must never see (G1a aborted read, lost write).

Ghost state: the properties read the tags the system model attaches to batches and decisions (see
:class:`txnspec.spec.system.Ghost`); the protocol never reads them.

Cost: the checker judges every property on every new state, and most states share their ghost, partitions or
coordinator with many others. So :func:`properties` hands the checker each predicate memoised on the parts of the
state it reads (:class:`Judges`): each distinct combination of those parts is judged once.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from typing import Any

from txnspec.checker.model import Property
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import partition as partition_mod
from txnspec.spec.errors import Errors
from txnspec.spec.messages import IsolationLevel, TransactionResult
from txnspec.spec.system import FATAL_ERROR, INITIALIZING, PREPARED, READY, System, SystemState, Tag
from txnspec.spec.system_state import UNREAD, projection
from txnspec.spec.txn_state import ONGOING, PREPARE_STATES
from txnspec.spec.values import memoised

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


# --- safety invariants -------------------------------------------------------------------------------

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


def no_fenced_member_offsets_commit(state: SystemState) -> bool:
    """No offsets the group took from a member fenced by a rebalance (evicted, of an older generation, or of a
    member epoch at which it did not hold the partition) are ever committed (KIP-447, KIP-848: the zombie's
    input position never overrides the new owner's)."""
    return not state.ghost.fenced_offsets_committed


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


# --- liveness --------------------------------------------------------------------------------------

def some_transaction_prepared(state: SystemState) -> bool:
    return any(md.state in PREPARE_STATES for _, md in state.coordinator.cache)


def no_transaction_prepared(state: SystemState) -> bool:
    return not some_transaction_prepared(state)


def some_partition_unstable(state: SystemState) -> bool:
    return any(partition_mod.open_transactions(p) for _, p in state.partitions)


def every_partition_stable(state: SystemState) -> bool:
    return not some_partition_unstable(state)


def some_producer_initializing(state: SystemState) -> bool:
    return any(p.phase is INITIALIZING for p in state.producers)


def no_producer_initializing(state: SystemState) -> bool:
    return not some_producer_initializing(state)


Predicate = Callable[[SystemState], bool]


class Judges:
    """Predicates memoised on ``parts``, the fields of the state they read: each is run on a projection holding
    only those (any other part fails loudly), once per distinct combination. Predicates that read the same parts
    share one table, whose entry holds every one's verdict: a table's memory is mostly the parts of past states
    that its keys keep alive, so a key is held once, not once per predicate (issue 16's bytes a state)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], tuple[list[Predicate], Callable[..., tuple[bool, ...]]]] = {}

    def on(self, predicate: Predicate, *parts: str) -> Predicate:
        """``predicate`` judged on ``parts``: call every ``on`` before judging any state."""
        if parts not in self._groups:
            group: list[Predicate] = []

            @memoised(1 << 9)  # (values.TABLE_SIZE / 2: a verdict costs less to compute again than a step)
            def judge(*values: Any) -> tuple[bool, ...]:
                seen = projection(network=UNREAD, **dict(zip(parts, values, strict=True)))
                return tuple(bool(p(seen)) for p in group)

            judge.__qualname__ = f"judged_on({', '.join(parts)})"
            self._groups[parts] = (group, judge)
        group, judge = self._groups[parts]
        index = len(group)
        group.append(predicate)
        read = operator.attrgetter(*parts)
        if len(parts) == 1:
            return functools.wraps(predicate)(lambda state: judge(read(state))[index])
        return functools.wraps(predicate)(lambda state: judge(*read(state))[index])


def properties(system: System) -> tuple[Property[Any], ...]:
    """The properties checked for ``system``; partners are chosen so each is reachable in every scenario."""
    s = system.scenario
    fetch = system.protocol.fetch

    def visible_data(state: SystemState) -> bool:
        return any(visible_offsets(state, p, fetch) for p, _ in state.partitions)

    def read_committed(state: SystemState) -> bool:
        return read_committed_only_committed(state, fetch)

    read_committed.__doc__ = read_committed_only_committed.__doc__

    on = Judges().on
    gp = ("ghost", "partitions")  # the parts most invariants read
    # a scenario whose transactions write only offsets (KIP-447's rebalance) has no batch to reach: the data
    # properties then hold vacuously, and their partner is a committed transaction instead
    appended = "batch_appended" if s.records_per_transaction else "transaction_committed"
    returns_data = "read_committed_returns_data" if s.records_per_transaction else "transaction_committed"

    props: list[Property[Any]] = [
        Property.always("valid_coordinator_transitions", valid_coordinator_transitions,
                        partner="transaction_committed", description=valid_coordinator_transitions.__doc__ or ""),
        Property.always("no_duplicate_append", on(no_duplicate_append, "ghost"), partner=appended,
                        description=no_duplicate_append.__doc__ or ""),
        Property.always("sequences_contiguous", on(sequences_contiguous(system), "ghost"), partner=appended,
                        description="Per (partition, producer id, epoch) sequences are contiguous in log order."),
        Property.always("fenced_appends_never_commit", on(fenced_appends_never_commit, *gp), partner=appended,
                        description=(fenced_appends_never_commit.__doc__ or "").splitlines()[0]),
        Property.always("fenced_producer_never_commits", fenced_producer_never_commits,
                        partner="transaction_committed", description=fenced_producer_never_commits.__doc__ or ""),
        Property.always("unique_producer_epochs", on(unique_producer_epochs, "producers"),
                        partner="producer_initialised", description=unique_producer_epochs.__doc__ or ""),
        Property.always("read_committed_only_committed", on(read_committed, *gp),
                        partner=returns_data, description=read_committed_only_committed.__doc__ or ""),
        Property.always("committed_data_never_lost", on(committed_data_never_lost, *gp),
                        partner="transaction_committed", description=committed_data_never_lost.__doc__ or ""),
        Property.always("atomic_outcome", on(atomic_outcome, *gp), partner="transaction_aborted",
                        description=atomic_outcome.__doc__ or ""),
        Property.always("end_txn_applies_to_its_transaction", on(end_txn_applies_to_its_transaction, "ghost"),
                        partner="transaction_committed", description=end_txn_applies_to_its_transaction.__doc__ or ""),
        Property.always("offsets_only_with_committed_output",
                        on(offsets_only_with_committed_output, "group", "ghost"),
                        partner="offsets_committed" if s.commit_offsets else "transaction_committed",
                        description=offsets_only_with_committed_output.__doc__ or ""),
        Property.always("no_hanging_transaction", on(no_hanging_transaction, "partitions", "coordinator"),
                        partner=appended, description=no_hanging_transaction.__doc__ or ""),
        Property.sometimes("transaction_committed", transaction_committed,
                           description="Some application was told its transaction committed."),
        Property.sometimes("transaction_aborted", transaction_aborted,
                           description="The coordinator decided to abort some transaction."),
        Property.sometimes("producer_initialised", producer_initialised,
                           description="Some producer obtained a producer id and epoch."),
        Property.leads_to("prepared_transactions_complete", on(some_transaction_prepared, "coordinator"),
                          on(no_transaction_prepared, "coordinator"),
                          description="A PrepareCommit or PrepareAbort transaction eventually completes."),
        Property.leads_to("last_stable_offset_advances", on(some_partition_unstable, "partitions"),
                          on(every_partition_stable, "partitions"),
                          description="Every transaction open on a partition is eventually closed by a marker."),
        Property.leads_to("init_producer_id_completes", on(some_producer_initializing, "producers"),
                          on(no_producer_initializing, "producers"),
                          description="InitProducerId eventually succeeds (or the producer is fenced)."),
    ]
    if s.records_per_transaction:
        props.append(Property.sometimes("batch_appended", batch_appended,
                                        description="Some batch was appended to a partition."))
        props.append(Property.sometimes("read_committed_returns_data", on(visible_data, "partitions"),
                                        description="A read_committed consumer sees some record."))
    if s.commit_offsets:
        props.append(Property.sometimes("offsets_committed", offsets_committed,
                                        description="Consumer offsets were committed by a transaction."))
    if s.group_members:
        props.append(Property.always("no_fenced_member_offsets_commit", no_fenced_member_offsets_commit,
                                     partner="offsets_committed_after_rebalance",
                                     description=(no_fenced_member_offsets_commit.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("offsets_committed_after_rebalance", offsets_committed_after_rebalance,
                                        description="A member of the generation after a rebalance committed "
                                                    "offsets."))
    if s.budget("expire_producer"):
        props.append(Property.always("no_duplicate_after_producer_expiry",
                                     on(no_duplicate_after_producer_expiry, "ghost"),
                                     partner="appended_after_producer_expiry",
                                     description=(no_duplicate_after_producer_expiry.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("appended_after_producer_expiry", appended_after_producer_expiry,
                                        description="A producer appended to a partition that had expired its id."))
    if s.budget("expire_transactional_id"):
        props.append(Property.always("expired_id_never_resurrects_epoch",
                                     on(expired_id_never_resurrects_epoch, "ghost", "coordinator"),
                                     partner="expired_id_reinitialised",
                                     description=(expired_id_never_resurrects_epoch.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("expired_id_reinitialised", expired_id_reinitialised,
                                        description="An expired transactional id was initialised again."))
    if s.budget("admin_abort"):
        props.append(Property.sometimes("admin_aborted_a_transaction", admin_aborted_a_transaction,
                                        description="An admin aborted a transaction open on a partition "
                                                    "(Admin.abortTransaction)."))
    if s.budget("plain_commit"):
        props.append(Property.always("plain_commit_survives_marker", on(plain_commit_survives_marker, "group", "ghost"),
                                     partner="plain_commit_overtakes_pending_offsets",
                                     description=(plain_commit_survives_marker.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("plain_commit_overtakes_pending_offsets",
                                        plain_commit_overtakes_pending_offsets,
                                        description="A plain commit landed while an older transactional offset of the "
                                                    "same partition was pending."))
    if s.budget("slow_failover"):
        props.append(Property.always("nothing_cached_while_unloaded",
                                     on(nothing_cached_while_unloaded(system.coordinator_config), "coordinator"),
                                     partner="answered_while_loading",
                                     description=(nothing_cached_while_unloaded.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("answered_while_loading", answered_while_loading,
                                        description=answered_while_loading.__doc__ or ""))
        props.append(Property.sometimes("answered_not_coordinator", answered_not_coordinator,
                                        description=answered_not_coordinator.__doc__ or ""))
    if s.two_phase_commit:
        props.append(Property.always("prepared_never_timed_out", on(prepared_never_timed_out, "ghost"),
                                     partner="prepared_transaction_open",
                                     description=(prepared_never_timed_out.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("prepared_transaction_open", prepared_transaction_open,
                                        description="A transaction the client prepared is Ongoing at the "
                                                    "coordinator (where a timeout could abort it)."))
        props.append(Property.always("prepared_outcome_follows_external_decision",
                                     on(prepared_outcome_follows_external_decision, "producers", "ghost"),
                                     partner="prepared_transaction_committed",
                                     description=(prepared_outcome_follows_external_decision.__doc__
                                                  or "").splitlines()[0]))
        props.append(Property.sometimes("prepared_transaction_committed", prepared_transaction_committed,
                                        description="A prepared transaction the external coordinator decided to "
                                                    "commit was committed."))
    if s.two_phase_commit and s.budget("crash"):
        props.append(Property.always("no_write_under_kept_epoch", on(no_write_under_kept_epoch, *gp),
                                     partner="prepared_transaction_kept",
                                     description=(no_write_under_kept_epoch.__doc__ or "").splitlines()[0]))
        props.append(Property.sometimes("prepared_transaction_kept", prepared_transaction_kept,
                                        description="A restarted instance kept its predecessor's transaction "
                                                    "(InitProducerId with keepPreparedTxn)."))
    if s.has_zombies:
        props.append(Property.sometimes("producer_fenced", producer_fenced,
                                        description="A zombie producer instance was fenced (fatal error)."))
    return tuple(props)


def is_final(system: System) -> Callable[[SystemState], bool]:
    """A state with nothing left to do: every producer finished (or fenced) and the network is empty."""
    n = system.scenario.transactions_per_producer

    def final(state: SystemState) -> bool:
        return not state.network and all(
            p.phase is FATAL_ERROR or (p.phase is READY and p.txn_no >= n) for p in state.producers)
    return final

