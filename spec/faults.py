"""The environment of the system model: faults within the scenario's budget (and, from
:mod:`txnspec.spec.recovery`, the recovery steps the protocol takes by itself).

System
    Faults, each at most as often as the scenario's budget allows: lose or duplicate a message, a
    transaction timeout, a coordinator failover (atomic, or slow: resigned, elected, each transaction-log
    partition loaded on its own, :func:`slow_failover_steps`), a producer crash and restart, a client giving up on an
    in-flight produce (``delivery.timeout.ms``), a consumer-group rebalance that evicts the first producer's
    member (KIP-447: that producer becomes a zombie of the group; under KIP-848's consumer protocol its member
    is fenced by a session timeout or a reassignment, and the other members' heartbeats reconcile them). (A
    failed transaction-log append is a variant of a delivery to the coordinator:
    :func:`txnspec.spec.system.delivery_steps`.)
    The recovery steps the protocol takes by itself, not budgeted (a transaction no live producer can end aborted
    by its timeout, a client's re-sends, the coordinator's marker re-sends), are :mod:`txnspec.spec.recovery`;
    :func:`environment_steps` offers them with the faults.

Cost
    Each step is memoised on the parts of the state it reads (the coordinator for a timeout or a failover), as in
    :mod:`txnspec.spec.system`.

Assumptions
    Time is abstract: a timeout may fire for any Ongoing transaction. Only a client duplicates a message (it
    re-sends a request it gave up on while the first copy is on its way); TCP never duplicates a response.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from txnspec.spec import consumer_group as cg
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod
from txnspec.spec import txn_loading
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.brokers import marker_envelope
from txnspec.spec.coordinator_state import CoordinatorState
from txnspec.spec.errors import Errors
from txnspec.spec.messages import Produce, TransactionResult, WriteTxnMarkers
from txnspec.spec.network import COORDINATOR, GROUP, NETWORK, Envelope, contexts, deliveries, producer_index, send
from txnspec.spec.producer import expire_batch, restarted
from txnspec.spec.producer_state import INITIALIZING, UNINITIALIZED
from txnspec.spec.recovery import _abandoned, _abort_timed_out, client_retry_steps, marker_retry_steps
from txnspec.spec.system_state import (
    System,
    SystemState,
    dispatched,
    projection,
    spend,
    with_partition,
    with_producer,
)
from txnspec.spec.txn_state import ONGOING, PREPARE_STATES
from txnspec.spec.values import intern, replace

K = ActionKind


def environment_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    b = state.budget
    make = SystemState._make
    cs, partitions, group, producers, network, ghost = (state.coordinator, state.partitions, state.group,
                                                        state.producers, state.network, state.ghost)
    if b.loss or b.duplicate:
        for envelope, rest in deliveries(network):
            if b.loss:
                yield (intern(Action(K.LOSE, NETWORK, envelope)),
                       make(cs, partitions, group, producers, rest, spend(b, "loss"), ghost))
            if b.duplicate and producer_index(envelope.source) is not None \
                    and len(network) < system.scenario.max_messages_in_flight:
                yield (intern(Action(K.DUPLICATE, envelope.source, envelope)),
                       make(cs, partitions, group, producers, send(network, envelope), spend(b, "duplicate"), ghost))
    if b.timeout:
        for tid, md in cs.cache:
            if system.protocol.is_timeout_candidate(md):
                cs2, ghost2, sent = system.memo(timeout_effect)(cs, ghost, tid)
                yield (intern(Action(K.TIMEOUT, COORDINATOR, transactional_id=tid)),
                       make(cs2, partitions, group, producers, send(network, *sent), spend(b, "timeout"), ghost2))
    for tid, md in cs.cache:
        if system.protocol.is_timeout_candidate(md) and _abandoned(state, tid):
            cs2, ghost2, sent = system.memo(timeout_effect)(cs, ghost, tid)
            yield (intern(Action(K.ABANDONED_TIMEOUT, COORDINATOR, transactional_id=tid)),
                   make(cs2, partitions, group, producers, send(network, *sent), b, ghost2))
    if b.failover:
        cs2, sent = system.memo(failover_effect)(cs)
        yield (intern(Action(K.FAILOVER, COORDINATOR)),
               make(cs2, partitions, group, producers, send(network, *sent), spend(b, "failover"), ghost))
    if b.slow_failover or cs.not_led or cs.loading:
        yield from slow_failover_steps(system, state)
    for p in producers:
        who = p.address
        # 2PC: no crash while initialising: the crashed instance's late InitProducerId (without keepPreparedTxn)
        # would abort its successor's prepared transaction, a hazard of KIP-939's design (docs/kip-939.md)
        if b.crash and p.phase is not UNINITIALIZED and not (system.client.two_phase_commit
                                                              and p.phase is INITIALIZING):
            yield (intern(Action(K.CRASH, who)),
                   make(cs, partitions, group, with_producer(producers, restarted(p)), network, spend(b, "crash"),
                        ghost))
        if b.expire_batch:
            used = contexts(network, who)
            for batch in sorted(p.in_flight):
                gave_up = expire_batch(system.client, p, batch, waiting=batch not in used)
                q, sent = dispatched(system.client, gave_up, used)
                yield (intern(Action(K.EXPIRE_BATCH, who, partition=batch[0], batch=batch)),
                       make(cs, partitions, group, with_producer(producers, q), send(network, *sent),
                            spend(b, "expire_batch"), ghost))
    if b.rebalance:
        spent = replace(state, budget=spend(b, "rebalance"))
        if system.scenario.group_protocol == "consumer":
            yield from _fence_member(system, spent)
        else:
            yield _rebalance(system, spent)
    if state.group.consumer_groups:
        yield from heartbeat_steps(system, state)
    if b.expire_producer or b.expire_transactional_id or b.plain_commit:
        yield from expiry_steps(system, state)
    if b.admin_abort:
        yield from admin_abort_steps(system, state)
    yield from client_retry_steps(system, state)
    yield from marker_retry_steps(system, state)


def expiry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """Issue 31's paths, each within its budget, at a moment Kafka's timers allow:

    * a partition expires a producer id (``removeExpiredProducers``, its verification entries with it) only
      once nothing of that producer is in flight to the partition or waiting for a retry there: Kafka's
      ``producer.id.expiration.ms`` (a day) is far longer than ``delivery.timeout.ms`` (two minutes);
    * the coordinator expires a transactional id (``removeExpiredTransactionalIds``) only in Empty or Complete*
      with nothing pending and no message of its producers in flight: ``transactional.id.expiration.ms`` (a
      week) is far longer than any request's timeout;
    * an admin commits the group's input offset with a plain ``OffsetCommit`` (outside group management) at any
      time."""
    b, make = state.budget, SystemState._make
    cs, partitions, group, producers, network, ghost = (state.coordinator, state.partitions, state.group,
                                                        state.producers, state.network, state.ghost)
    if b.expire_producer:
        for name in system.scenario.partitions:
            pstate = state.partition(name)
            for pid in sorted({pid for pid, _ in pstate.producers} | {pid for pid, _ in pstate.verifying}):
                if not _producer_idle(state, name, pid):
                    continue
                expired = system.protocol.expire_producer_ids(pstate, frozenset({pid}))
                if expired == pstate:
                    continue
                ghost2 = replace(ghost, expired_producers=ghost.expired_producers | {(name, pid)})
                yield (intern(Action(K.EXPIRE_PRODUCERS, name, partition=name)),
                       make(cs, with_partition(partitions, name, intern(expired)), group, producers, network,
                            spend(b, "expire_producer"), intern(ghost2)))
    if b.expire_transactional_id:
        for tid, md in cs.cache:
            instances = {p.index for p in producers if p.transactional_id == tid}
            if any(producer_index(e.source) in instances or producer_index(e.target) in instances for e in network):
                continue
            result = system.protocol.expire_transactional_id(cs, tid, config=system.coordinator_config)
            if result.state is cs:
                continue
            ghost2 = replace(ghost, expired_ids=ghost.expired_ids | {tid},
                             retired_producer_ids=ghost.retired_producer_ids | {md.producer_id})
            yield (intern(Action(K.EXPIRE_TRANSACTIONAL_ID, COORDINATOR, transactional_id=tid)),
                   make(intern(result.state), partitions, group, producers, network,
                        spend(b, "expire_transactional_id"), intern(ghost2)))
    if b.plain_commit:
        yield _plain_commit(system, replace(state, budget=spend(b, "plain_commit")))


ADMIN = "admin"  # the lifeline of an admin client (its answer ends with it: no actor waits for it)


def admin_abort_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """``kafka-transactions.sh abort``: an admin finds a transaction open on a partition (``describeProducers``)
    and sends ``Admin.abortTransaction`` (``AbortTransactionHandler``): one ``WriteTxnMarkers`` ABORT to the
    partition leader with the producer id and epoch and the coordinator epoch the partition reported
    (``coordinatorEpoch().orElse(0)``), transaction version 0; the leader appends it as any marker
    (``append_end_txn_marker``). The coordinator is not consulted and does not learn of it.

    The admin aborts only what the tool's workflow is for: a transaction no coordinator drives any more
    (``find-hanging``), or one its coordinator can only abort (Ongoing, nothing pending, and no live instance
    of its id can end it: ``abandoned``). An abort of a transaction a producer may still commit breaks its
    atomicity, which the tool leaves to its user."""
    b, make = state.budget, SystemState._make
    for name in system.scenario.partitions:
        pstate = state.partition(name)
        for pid in partition_mod.open_transactions(pstate):
            if not _admin_may_abort(state, name, pid):
                continue
            entry = pstate.entry(pid)
            marker = WriteTxnMarkers(name, pid, entry.producer_epoch, max(entry.coordinator_epoch, 0),
                                     TransactionResult.ABORT, 0)
            pstate2, _ = system.protocol.append_end_txn_marker(pstate, pid, marker.producer_epoch,
                                                               marker.coordinator_epoch, marker.result,
                                                               marker.transaction_version, limits=system.limits)
            ghost2 = replace(state.ghost, admin_aborted=state.ghost.admin_aborted | {(name, pid)})
            yield (intern(Action(K.ADMIN_ABORT, name, Envelope(ADMIN, name, marker), partition=name)),
                   make(state.coordinator, with_partition(state.partitions, name, intern(pstate2)), state.group,
                        state.producers, state.network, spend(b, "admin_abort"), intern(ghost2)))


def _admin_may_abort(state: SystemState, partition: str, producer_id: int) -> bool:
    for tid, md in state.coordinator.cache:
        if (md.producer_id == producer_id or md.prev_producer_id == producer_id) \
                and md.state in (ONGOING, *PREPARE_STATES) and partition in md.partitions:
            return md.state is ONGOING and md.pending_state is None and _abandoned(state, tid)
    return True  # hanging: no coordinator drives it


def _producer_idle(state: SystemState, partition: str, producer_id: int) -> bool:
    """Nothing of ``producer_id`` is in flight to ``partition`` or waiting there for a retry."""
    if any(isinstance(e.body, Produce) and e.target == partition and e.body.producer_id == producer_id
           for e in state.network):
        return False
    return not any(key[0] == partition and key[1] == producer_id for p in state.producers for key in p.in_flight)


def _plain_commit(system: System, state: SystemState) -> tuple[Action, SystemState]:
    """An admin's ``OffsetCommit`` of the group's input offset (offset 0, outside group management): a record in
    the group's ``__consumer_offsets`` partition, visible at once (``OffsetMetadataManager.replay``)."""
    s, name, proto = system.scenario, system.offsets_partition, system.protocol
    offsets = ((PLAIN_COMMIT_PARTITION, 0),)
    group, ghost = state.group, state.ghost
    error = proto.validate_offset_commit(group, s.group_id, "", None, -1, transactional=False)
    assert error is Errors.NONE, "plain_commit needs a group outside group management (Scenario checks it)"
    offsets_log, appended = proto.append_data(state.partition(name), -1, -1, -1, len(offsets), False,
                                              limits=system.limits, detect_duplicates=False, validate_sequence=False)
    record = appended.base_offset
    group, _ = proto.handle_offset_commit(group, s.group_id, offsets, record_offset=record)
    overtook = any(p.group_id == s.group_id and any(q == PLAIN_COMMIT_PARTITION and r.record_offset < record
                                                    for q, r in p.offsets) for p in state.group.pending)
    ghost = replace(ghost, plain_commits=(*ghost.plain_commits, ((s.group_id, PLAIN_COMMIT_PARTITION), record)),
                    plain_overtook_pending=ghost.plain_overtook_pending or overtook)
    return (Action(K.OFFSET_COMMIT, GROUP),
            replace(state, partitions=with_partition(state.partitions, name, intern(offsets_log)),
                    group=intern(group), ghost=intern(ghost)))


PLAIN_COMMIT_PARTITION = "input-0"  # the input partition whose position the applications commit


def timeout_effect(system: System, cs: CoordinatorState, ghost: Any, tid: str
                   ) -> tuple[CoordinatorState, Any, tuple[Envelope, ...]]:
    """:func:`_abort_timed_out` as a function of what it reads (used with ``System.memo``)."""
    after = _abort_timed_out(system, projection(coordinator=cs, ghost=ghost), tid)
    return intern(after.coordinator), intern(after.ghost), after.network


def failover_effect(system: System, cs: CoordinatorState) -> tuple[CoordinatorState, tuple[Envelope, ...]]:
    """A coordinator failover: the new coordinator and the markers it sends (used with ``System.memo``)."""
    result = system.protocol.coordinator_failover(cs, config=system.coordinator_config)
    return intern(result.state), send((), *(marker_envelope(system, m, tid) for tid, m in result.markers))


def slow_failover_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """A failover with its two windows (``TransactionStateManager``): the coordinator resigns every
    transaction-log partition (``removeTransactionsForTxnTopicPartition``: requests answered NOT_COORDINATOR,
    markers in flight stay on their way), a new coordinator is elected for them at coordinator epoch + 1 and
    starts loading them (``loadTransactionsForTxnTopicPartition``: COORDINATOR_LOAD_IN_PROGRESS), and each
    partition's load then finishes on its own (its ids served, its prepared transactions completed). Only the
    resignation is a budgeted fault; the election and each load are the protocol's own steps."""
    b, cs, config = state.budget, state.coordinator, system.coordinator_config
    if b.slow_failover:
        resigned = cs
        for index in range(config.txn_log_partitions):
            resigned = txn_loading.emigrate(resigned, index, config=config).state
        yield (intern(Action(K.RESIGN, COORDINATOR)),
               replace(state, coordinator=intern(resigned), budget=spend(b, "slow_failover")))
    if cs.not_led and not cs.loading:
        elected = txn_loading.begin_load(cs, cs.not_led, config=config).state
        yield intern(Action(K.ELECT, COORDINATOR)), replace(state, coordinator=intern(elected))
    for index in sorted(cs.loading):
        result = txn_loading.finish_load(cs, index, config=config)
        markers = [marker_envelope(system, m, tid) for tid, m in result.markers]
        yield (intern(Action(K.LOAD_TXN_PARTITION, COORDINATOR, partition=txn_log_name(index))),
               replace(state, coordinator=intern(result.state), network=send(state.network, *markers)))


def txn_log_name(index: int) -> str:
    """The name of a ``__transaction_state`` partition."""
    return f"__transaction_state-{index}"


def _rebalance(system: System, state: SystemState) -> tuple[Action, SystemState]:
    """KIP-447's zombie: the first producer's consumer misses a rebalance (its process stalls) and is evicted;
    the others rejoin and learn the next generation, the input partitions move to them. The stalled producer
    goes on with its open transaction, its offset commits naming the old generation."""
    zombie, *others = state.producers
    group = group_mod.complete_rebalance(state.group, system.scenario.group_id,
                                         tuple((p.member_id, None) for p in others))
    rebalanced = group.group(system.scenario.group_id)
    assert rebalanced is not None  # complete_rebalance creates the group if it has to
    producers = intern((zombie, *(intern(replace(p, generation=rebalanced.generation_id)) for p in others)))
    return Action(K.REBALANCE, zombie.address), replace(state, group=intern(group), producers=producers)


def _fence_member(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """KIP-848's zombie: the first producer's consumer is fenced while its transaction is open, in one of two
    ways. REBALANCE: its process stalls past the session timeout and the coordinator removes its member
    (``consumerGroupFenceMember``: group epoch bumped, the target recomputed without it). REASSIGN: the target
    moves its partition to the next member (a new target at the next group epoch) and its background heartbeat
    releases the partition (``CurrentAssignmentBuilder``: its member epoch moves to the group epoch, nothing
    assigned). Either way its application goes on with its open transaction, whose offsets name the old epoch;
    the other member takes the partition at its next heartbeat (:func:`heartbeat_steps`)."""
    zombie, *others = state.producers
    group = state.group.consumer_group(system.scenario.group_id)
    assert group is not None and others  # the scenario's check: a consumer group of the producers' members
    member = group.member(zombie.member_id)
    if member is None:
        return
    removed = cg.fence_member(group, zombie.member_id)
    yield Action(K.REBALANCE, zombie.address), replace(state, group=intern(state.group.with_consumer_group(removed)))
    heir = others[0].member_id
    moved = cg.new_target(group, tuple((p, heir if m == zombie.member_id else m) for p, m in group.target))
    released = cg.reconcile(moved, member, owned=())
    moved = state.group.with_consumer_group(cg.with_member(moved, released))
    yield Action(K.REASSIGN, zombie.address), replace(state, group=intern(moved))


def heartbeat_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """A member behind its group's epoch heartbeats (``ConsumerGroupHeartbeat`` with its epoch and the partitions
    it owns) and is reconciled; its application learns the new member epoch, which the group metadata of its
    next ``sendOffsetsToTransaction`` carries. Not the zombie's: its process is stalled (:func:`_fence_member`)."""
    group = state.group.consumer_group(system.scenario.group_id)
    if group is None:
        return
    for p in state.producers[1:]:
        member = group.member(p.member_id)
        if member is None:
            continue
        after, result = cg.heartbeat(group, member.member_id, member.member_epoch, member.owned)
        if after == group or result.error is not Errors.NONE:
            continue
        q = intern(replace(p, generation=result.member_epoch))
        yield (Action(K.HEARTBEAT, p.address),
               replace(state, group=intern(state.group.with_consumer_group(after)),
                       producers=intern(with_producer(state.producers, q))))
