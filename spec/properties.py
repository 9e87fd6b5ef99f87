"""The properties of Kafka's exactly-once protocol: each named predicate with its kind, partner and description.

Safety invariants (``always``, :mod:`txnspec.spec.safety`), each with a ``sometimes`` partner
(:mod:`txnspec.spec.sometimes`) that shows the invariant was not checked on an empty space (a run that never
commits cannot claim that "committed data is never lost"); liveness (``leads_to``, its state predicates here)
judged by the checker under weak fairness of the protocol's own actions. :func:`properties` chooses, for a
system, the properties its scenario can reach.

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
from collections.abc import Callable
from typing import Any

from txnspec.checker.model import Property
from txnspec.spec import partition as partition_mod
from txnspec.spec.safety import (
    answered_not_coordinator,
    answered_while_loading,
    atomic_outcome,
    committed_data_never_lost,
    end_txn_applies_to_its_transaction,
    expired_id_never_resurrects_epoch,
    fenced_appends_never_commit,
    fenced_producer_never_commits,
    no_duplicate_after_producer_expiry,
    no_duplicate_append,
    no_fenced_member_offsets_commit,
    no_hanging_transaction,
    no_write_under_kept_epoch,
    nothing_cached_while_unloaded,
    offsets_only_with_committed_output,
    plain_commit_survives_marker,
    prepared_never_timed_out,
    prepared_outcome_follows_external_decision,
    read_committed_only_committed,
    sequences_contiguous,
    unique_producer_epochs,
    valid_coordinator_transitions,
    visible_offsets,
)
from txnspec.spec.sometimes import (
    admin_aborted_a_transaction,
    appended_after_producer_expiry,
    batch_appended,
    expired_id_reinitialised,
    offsets_committed,
    offsets_committed_after_rebalance,
    plain_commit_overtakes_pending_offsets,
    prepared_transaction_committed,
    prepared_transaction_kept,
    prepared_transaction_open,
    producer_fenced,
    producer_initialised,
    transaction_aborted,
    transaction_committed,
)
from txnspec.spec.system import FATAL_ERROR, INITIALIZING, READY, System, SystemState
from txnspec.spec.system_state import UNREAD, projection
from txnspec.spec.txn_state import PREPARE_STATES
from txnspec.spec.values import memoised

# --- liveness: the state predicates of leads_to ---------------------------------------------------

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
