"""The environment of the system model: faults within the scenario's budget, and the recovery steps the
protocol takes by itself (timeouts, re-sends).

System
    Faults, each at most as often as the scenario's budget allows: lose or duplicate a message, a
    transaction timeout, a coordinator failover, a producer crash and restart, a client giving up on an
    in-flight produce (``delivery.timeout.ms``), a consumer-group rebalance that evicts the first producer's
    member (KIP-447: that producer becomes a zombie of the group). (A failed transaction-log append is a variant of a
    delivery to the coordinator: :func:`txnspec.spec.system.delivery_steps`.)
    Recovery, not budgeted: the coordinator aborts a transaction no live producer can end any more
    (``TransactionCoordinator.abortTimedOutTransactions``), a client re-sends a request lost with its answer
    (``NetworkClient`` request timeout) or a batch answered with a retriable error (the first in flight of its
    partition only: ``RecordAccumulator.shouldStopDrainBatchesForPartition``), the coordinator re-sends a marker
    no longer in flight (``TransactionMarkerChannelManager``).

Assumptions
    Time is abstract: a timeout may fire for any Ongoing transaction. Only a client duplicates a message (it
    re-sends a request it gave up on while the first copy is on its way); TCP never duplicates a response.
"""

from __future__ import annotations

from collections.abc import Iterator

from txnspec.spec import coordinator as coord
from txnspec.spec import group as group_mod
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.brokers import coordinator_step, marker_envelope
from txnspec.spec.messages import Produce, WriteTxnMarkersResponse
from txnspec.spec.network import COORDINATOR, NETWORK, Envelope, producer_index, remove_one, send
from txnspec.spec.producer import (
    FATAL_ERROR,
    READY,
    UNINITIALIZED,
    expire_batch,
    first_in_flight,
    request_timed_out,
    restarted,
)
from txnspec.spec.system_state import System, SystemState, correlations_in_flight, replace_producer, with_dispatch
from txnspec.spec.txn_state import ONGOING
from txnspec.spec.values import replace

K = ActionKind


def environment_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    b = state.budget
    if b.loss or b.duplicate:
        seen: set[Envelope] = set()
        for envelope in state.network:
            if envelope in seen:
                continue
            seen.add(envelope)
            if b.loss:
                yield (Action(K.LOSE, NETWORK, envelope),
                       replace(state, network=remove_one(state.network, envelope), budget=replace(b, loss=b.loss - 1)))
            if b.duplicate and producer_index(envelope.source) is not None \
                    and len(state.network) < system.scenario.max_messages_in_flight:
                duplicated = replace(state, network=send(state.network, envelope),
                                     budget=replace(b, duplicate=b.duplicate - 1))
                yield Action(K.DUPLICATE, envelope.source, envelope), duplicated
    if b.timeout:
        for tid, md in state.coordinator.cache:
            if md.state is ONGOING and md.pending_state is None:
                timed = _abort_timed_out(system, replace(state, budget=replace(b, timeout=b.timeout - 1)), tid)
                yield Action(K.TIMEOUT, COORDINATOR, transactional_id=tid), timed
    for tid, md in state.coordinator.cache:
        if md.state is ONGOING and md.pending_state is None and _abandoned(state, tid):
            yield Action(K.ABANDONED_TIMEOUT, COORDINATOR, transactional_id=tid), _abort_timed_out(system, state, tid)
    if b.failover:
        result = system.protocol.coordinator_failover(state.coordinator, config=system.coordinator_config)
        failed = replace(state, coordinator=result.state, budget=replace(b, failover=b.failover - 1))
        markers = [marker_envelope(system, m, tid) for tid, m in result.markers]
        yield Action(K.FAILOVER, COORDINATOR), replace(failed, network=send(failed.network, *markers))
    for p in state.producers:
        who = p.address
        if b.crash and p.phase is not UNINITIALIZED:
            yield (Action(K.CRASH, who),
                   replace(replace_producer(state, restarted(p)), budget=replace(b, crash=b.crash - 1)))
        if b.expire_batch:
            transit = correlations_in_flight(state, p)
            for batch in sorted(p.in_flight):
                expired = replace(state, budget=replace(b, expire_batch=b.expire_batch - 1))
                gave_up = expire_batch(system.client, p, batch, waiting=batch not in transit)
                yield (Action(K.EXPIRE_BATCH, who, partition=batch[0], batch=batch),
                       with_dispatch(system, expired, gave_up))
    if b.rebalance:
        yield _rebalance(system, replace(state, budget=replace(b, rebalance=b.rebalance - 1)))
    yield from client_retry_steps(system, state)
    yield from marker_retry_steps(system, state)


def _rebalance(system: System, state: SystemState) -> tuple[Action, SystemState]:
    """KIP-447's zombie: the first producer's consumer misses a rebalance (its process stalls) and is evicted;
    the others rejoin and learn the next generation, the input partitions move to them. The stalled producer
    goes on with its open transaction, its offset commits naming the old generation."""
    zombie, *others = state.producers
    group = group_mod.complete_rebalance(state.group, system.scenario.group_id,
                                         tuple((p.member_id, None) for p in others))
    rebalanced = group.group(system.scenario.group_id)
    assert rebalanced is not None  # complete_rebalance creates the group if it has to
    producers = (zombie, *(replace(p, generation=rebalanced.generation_id) for p in others))
    return Action(K.REBALANCE, zombie.address), replace(state, group=group, producers=producers)


def _abort_timed_out(system: System, state: SystemState, tid: str) -> SystemState:
    result = system.protocol.abort_timed_out_transaction(state.coordinator, tid, config=system.coordinator_config)
    timed = coordinator_step(state, result, Envelope(COORDINATOR, COORDINATOR, None))
    markers = [marker_envelope(system, m, t) for t, m in result.markers]
    return replace(timed, network=send(timed.network, *markers))


def _abandoned(state: SystemState, tid: str) -> bool:
    """No live producer instance can still end ``tid``'s transaction: Kafka's timeout will abort it."""
    return all(p.phase in (FATAL_ERROR, UNINITIALIZED, READY) for p in state.producers if p.transactional_id == tid) \
        and not any(producer_index(e.source) is not None for e in state.network)


def client_retry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """The client's request timeout: a request lost with its answer is sent again (``Sender``/``NetworkClient``)."""
    for p in state.producers:
        who = p.address
        mine = [e for e in state.network if e.source == who or e.target == who]
        if p.awaiting is not None and not any(e.context == p.awaiting[1] for e in mine):
            yield (Action(K.RETRY, who, request=p.awaiting[0]),
                   with_dispatch(system, state, request_timed_out(p)))
        # a produce that timed out goes back to the accumulator: Sender.runOnce drains it again only once no
        # transactional request is in flight (maybeSendAndPollTransactionalRequest), as dispatch does
        for key in sorted(p.in_flight) if p.awaiting is None else ():
            partition, producer_id, epoch, seq = key
            # a batch waiting for its retry goes again when it is the first in flight (RecordAccumulator.drain)
            if not any(e.context == key for e in mine) and first_in_flight(system.client, p, key):
                resend = Envelope(who, partition, Produce(partition, producer_id, epoch, seq, 1, True,
                                                          p.transactional_id), key, p.tag)
                # the Sender loop that drains the retry drains what may follow it (nothing, with one in flight)
                resent = replace(state, network=send(state.network, resend))
                in_retry = replace(p, retried=p.retried | {key}) if system.client.expires_batches else p
                yield Action(K.RETRY, who, resend), with_dispatch(system, resent, in_retry)


def marker_retry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """``TransactionMarkerChannelManager``: re-send a marker that is no longer in flight (lost, or retriable)."""
    cs = state.coordinator
    for tid, pending in cs.completions:
        md = cs.metadata(tid)
        if md is None or pending.coordinator_epoch != cs.coordinator_epoch:
            continue
        for _, marker in coord.markers_for(cs, md, pending.result):
            envelope = marker_envelope(system, marker, tid)
            answered = any(e.context == envelope.context and isinstance(e.body, WriteTxnMarkersResponse)
                           for e in state.network)
            if envelope in state.network or answered:
                continue
            yield Action(K.RESEND_MARKER, COORDINATOR, envelope), replace(state, network=send(state.network, envelope))
