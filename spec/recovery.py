"""The recovery steps the protocol takes by itself, not budgeted: the coordinator aborts a transaction no live
producer can end any more, a client re-sends what it lost, the coordinator re-sends a marker no longer in flight.

System
    ``TransactionCoordinator.abortTimedOutTransactions`` for a transaction whose producers are all gone or idle
    and have nothing in flight (:func:`_abandoned`; the budgeted ``timeout`` fault of :mod:`.faults` fires for any
    Ongoing transaction); the client's request timeout (``NetworkClient``): a request lost with its answer is sent
    again, a batch answered with a retriable error or timed out goes again once it is the first in flight of its
    partition (``RecordAccumulator.shouldStopDrainBatchesForPartition``); ``TransactionMarkerChannelManager``
    re-sends a marker whose envelope and answer are both gone.

Cost
    A client's retries are memoised on the producer and the contexts of its messages in flight, the markers to
    re-send on the coordinator (``System.memo``), as in :mod:`txnspec.spec.system`.

Assumptions
    Time is abstract: a retry may happen at any moment after the loss. TCP never duplicates a response.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from txnspec.spec import txn_markers
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.brokers import coordinator_step, marker_envelope
from txnspec.spec.coordinator_state import CoordinatorState
from txnspec.spec.messages import Produce, WriteTxnMarkersResponse
from txnspec.spec.network import COORDINATOR, Envelope, contexts, producer_index, send
from txnspec.spec.producer import first_in_flight, request_timed_out
from txnspec.spec.producer_state import FATAL_ERROR, READY, UNINITIALIZED, ClientConfig, Producer
from txnspec.spec.system_state import (
    System,
    SystemState,
    dispatched,
    with_producer,
)
from txnspec.spec.values import SMALL_TABLE_SIZE, intern, memoised, replace

K = ActionKind


def _abort_timed_out(system: System, state: SystemState, tid: str) -> SystemState:
    result = system.protocol.abort_timed_out_transaction(state.coordinator, tid, config=system.coordinator_config)
    timed = coordinator_step(state, result, Envelope(COORDINATOR, COORDINATOR, None))
    markers = [marker_envelope(system, m, t) for t, m in result.markers]
    return replace(timed, network=send(timed.network, *markers))


def _abandoned(state: SystemState, tid: str) -> bool:
    """No live instance of ``tid`` can still end its transaction, and no message of one is in flight: Kafka's
    timeout will abort it. (Another id's messages cannot end it.)"""
    instances = {p.index for p in state.producers if p.transactional_id == tid}
    return all(state.producers[i].phase in (FATAL_ERROR, UNINITIALIZED, READY) for i in instances) \
        and not any(producer_index(e.source) in instances for e in state.network)


def client_retry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """The client's request timeout: a request lost with its answer is sent again (``Sender``/``NetworkClient``)."""
    network = state.network
    for p in state.producers:
        if p.awaiting is None and not p.in_flight:
            continue  # nothing to retry: skip the tables
        for action, q, sent in _client_retries(system.client, p, contexts(network, p.address)):
            yield action, SystemState._make(state.coordinator, state.partitions, state.group,
                                            with_producer(state.producers, q), send(network, *sent), state.budget,
                                            state.ghost)


@memoised()
def _client_retries(c: ClientConfig, p: Producer, used: frozenset[object]
                    ) -> tuple[tuple[Action, Producer, tuple[Envelope, ...]], ...]:
    """``p``'s retries given ``used``, the contexts of its messages in flight: each action, the producer after
    it, and what was sent (the retried produce first, then what the Sender sent)."""
    who = p.address
    retries = []
    if p.awaiting is not None and p.awaiting[1] not in used:
        q, sent = dispatched(c, request_timed_out(p), used)
        retries.append((intern(Action(K.RETRY, who, request=p.awaiting[0])), intern(q), sent))
    # a produce that timed out goes back to the accumulator: Sender.runOnce drains it again only once no
    # transactional request is in flight (maybeSendAndPollTransactionalRequest), as dispatch does
    for key in sorted(p.in_flight) if p.awaiting is None else ():
        partition, producer_id, epoch, seq = key
        # a batch waiting for its retry goes again when it is the first in flight (RecordAccumulator.drain)
        if key not in used and first_in_flight(c, p, key):
            resend = intern(Envelope(who, partition, Produce(partition, producer_id, epoch, seq, 1, True,
                                                             p.transactional_id), key, p.tag))
            # the Sender loop that drains the retry drains what may follow it (nothing, with one in flight)
            in_retry = replace(p, retried=p.retried | {key}) if c.expires_batches else p
            q, sent = dispatched(c, in_retry, used | {key})
            retries.append((intern(Action(K.RETRY, who, resend)), intern(q), (resend, *sent)))
    return tuple(retries)


def marker_retry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """``TransactionMarkerChannelManager``: re-send a marker that is no longer in flight (lost, or retriable)."""
    network = state.network
    resends = system.memo(marker_resends)(state.coordinator) if state.coordinator.completions else ()
    answered = _answered_markers(network) if resends else frozenset()
    for envelope in resends:
        if envelope in network or envelope.context in answered:
            continue
        yield (intern(Action(K.RESEND_MARKER, COORDINATOR, envelope)),
               replace(state, network=send(network, envelope)))


def marker_resends(system: System, cs: CoordinatorState) -> tuple[Envelope, ...]:
    """The markers the coordinator's channel would re-send if they were no longer in flight (used with
    ``System.memo``)."""
    resends = []
    for tid, pending in cs.completions:
        md = cs.metadata(tid)
        if md is None or pending.coordinator_epoch != cs.coordinator_epoch:
            continue
        for _, marker in txn_markers.markers_for(cs, md, pending.result):
            resends.append(intern(marker_envelope(system, marker, tid)))
    return tuple(resends)


@memoised(SMALL_TABLE_SIZE)
def _answered_markers(network: tuple[Envelope, ...]) -> frozenset[Any]:
    """The contexts of the marker answers in flight."""
    return frozenset(e.context for e in network if isinstance(e.body, WriteTxnMarkersResponse))
