"""The system model: producers, the transaction coordinator, partition leaders, the group coordinator and
the network, composed into the state machine the checkers explore.

System
    ``Scenario.producer_transactional_ids``: one or more producer instances per transactional id (two on
    one id are a zombie pair), one transaction coordinator, one leader per partition, one group coordinator,
    and a network of in-flight requests and responses. Each *action* is one pure function from a state to labelled
    successors (guard and effect together); the checker calls :func:`next_steps`. Each label is an
    :class:`~txnspec.spec.actions.Action`: data (kind, actor, message or fault), rendered as text only
    for reports.

    This module composes: :mod:`~txnspec.spec.producer` (the client, a projection of
    :mod:`~txnspec.spec.client`), :mod:`~txnspec.spec.network`, :mod:`~txnspec.spec.brokers` (coordinator,
    leaders, group coordinator, verification), :mod:`~txnspec.spec.faults` (the environment),
    :mod:`~txnspec.spec.ghost` (what only properties read), over the state of
    :mod:`~txnspec.spec.system_state`. It holds the application's calls and the delivery of messages.

    * Application and client (``Producer``): ``initTransactions``, ``beginTransaction``, ``send``,
      ``sendOffsetsToTransaction``, ``commitTransaction``, ``abortTransaction``; the client's Sender
      dispatches what it can after each step (one transactional request in flight, as Kafka's Sender;
      EndTxn only once no produce is in flight; TV1 adds partitions before producing; TV2 produces
      directly; requests of equal priority, AddPartitionsToTxn, AddOffsetsToTxn and TxnOffsetCommit, go in
      the order ``TransactionManager.pendingRequests`` holds them, a retried one at the back and the first
      TxnOffsetCommit behind its group-coordinator lookup). Errors are classified as Kafka's
      ``TransactionManager`` does: retriable (resend),
      abortable (``ABORTABLE_ERROR``, the application must abort; for TV < 2 the abort is followed by
      an InitProducerId epoch bump, KIP-360), fatal (``FATAL_ERROR``).
    * Coordinator: each delivered request runs the handler of :mod:`txnspec.spec.coordinator`; markers
      go out as ``WriteTxnMarkers`` messages, one per partition; their answers complete the transaction.
    * Partition leaders: a transactional produce is verified first (TV1 with
      ``transaction.partition.verification.enable``: the partition must be in the ongoing transaction;
      TV2: the leader adds the partition itself, KIP-890), then appended by the rules of
      :mod:`txnspec.spec.partition`; markers are appended and answered.
    * Group coordinator: ``TxnOffsetCommit`` is held pending until the marker on the group's
      ``__consumer_offsets`` partition commits or drops it.
    * Environment (each within the scenario's fault budget): lose or duplicate a message, a failed
      transaction-log append, a transaction timeout, a coordinator failover, a producer crash and
      restart, and a client giving up on an in-flight produce (delivery timeout).

Assumptions
    * Messages are delivered in any order (a bag): this covers delay and reordering.
    * The verification call from a partition leader to the coordinator (and the TV2 implicit
      AddPartitionsToTxn) is atomic with the append. Kafka makes it an RPC and guards the race with a
      ``VerificationGuard``; the spec takes the guard as correct.
    * Time is abstract: a timeout may fire for any Ongoing transaction; producer-state and
      transactional-id expiration are left to the component handlers and the behaviour cases.
    * At most ``Scenario.max_in_flight`` produces in flight per partition and producer (1 to 5, default 1;
      ``max.in.flight.requests.per.connection``, here per partition), retried in sequence order
      (:mod:`~txnspec.spec.producer`).
    * ``FindCoordinator`` always finds the one coordinator.

Cost
    The checker meets each part of a state (a producer, a partition, the coordinator, the bag of messages) in
    many states, so a step is computed once per distinct combination of the parts it reads, and the successor
    is assembled from shared parts (``SystemState._make``): the application's calls and the client's handling
    of an answer are memoised on the producer and the contexts of its messages in flight
    (:func:`_application_calls`, :func:`_producer_receives`), each broker's handling on its own state, the
    coordinator's and the ghost (:mod:`txnspec.spec.brokers`), the network's operations on the bag
    (:mod:`txnspec.spec.network`); what they return is interned, so stored states share their parts. Actions
    are interned too (the checker keeps one per stored state). ``tests/spec/test_values.py`` checks the result
    against the handlers run on whole states.

Ghost state (never read by the protocol, only by properties)
    Every produce carries the tag ``(producer, incarnation, transaction number)`` of the transaction
    the application sent it in; :class:`Ghost` records which tag each appended batch had, the
    coordinator's decisions with the tag of the transaction decided, what the application was told,
    and which producer instance last initialised each transactional id.
"""

from __future__ import annotations

from collections.abc import Iterator

from txnspec.spec.actions import ACTION_KINDS, Action, ActionKind, deliver
from txnspec.spec.brokers import coordinator_effect, group_effect, partition_effect
from txnspec.spec.errors import Errors
from txnspec.spec.faults import environment_steps
from txnspec.spec.ghost import AppendedBatch, Ghost
from txnspec.spec.messages import (
    AddPartitionsToTxn,
    EndTxn,
    InitProducerId,
    Produce,
    ProduceResponse,
    TransactionResult,
)
from txnspec.spec.network import (
    COORDINATOR,
    GROUP,
    Envelope,
    Tag,
    contexts,
    deliveries,
    describe,
    producer_address,
    producer_index,
    send,
)
from txnspec.spec.producer import receive
from txnspec.spec.producer_state import (
    ABORTABLE_ERROR,
    ABORTING,
    COMMITTING,
    FATAL_ERROR,
    IN_TRANSACTION,
    INITIALIZING,
    PREPARED,
    READY,
    UNINITIALIZED,
    ClientConfig,
    OffsetsStage,
    Phase,
    Producer,
    Queued,
)
from txnspec.spec.system_state import (
    Budget,
    System,
    SystemState,
    dispatched,
    initial_state,
    spend,
    with_partition,
    with_producer,
)
from txnspec.spec.values import intern, memoised, replace

K = ActionKind

__all__ = [
    "ABORTABLE_ERROR", "ABORTING", "ACTION_KINDS", "COMMITTING", "COORDINATOR", "FATAL_ERROR", "GROUP",
    "INITIALIZING", "IN_TRANSACTION", "PREPARED", "READY", "UNINITIALIZED", "Action", "ActionKind", "AppendedBatch",
    "Budget", "Envelope", "Ghost", "Phase", "Producer", "System", "SystemState", "Tag", "application_steps",
    "delivery_steps", "describe", "initial_state", "next_steps", "producer_address",
]


# --- application actions -------------------------------------------------------------------------------

def application_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """The application's calls on its ``KafkaProducer``, each followed by the client's Sender."""
    make, network = SystemState._make, state.network
    for p in state.producers:
        for action, q, sent in _application_calls(system.client, p, contexts(network, p.address)):
            yield action, make(state.coordinator, state.partitions, state.group, with_producer(state.producers, q),
                               send(network, *sent), state.budget, state.ghost)


@memoised()
def _application_calls(c: ClientConfig, p: Producer, used: frozenset[object]
                       ) -> tuple[tuple[Action, Producer, tuple[Envelope, ...]], ...]:
    """The calls ``p``'s application can make, each with the producer after it and what its Sender then sent
    (``used``: the contexts of ``p``'s messages in flight), memoised: a producer meets the same network
    contexts in many states."""
    calls = []
    for action, q, runs_sender in _calls(c, p):
        q, sent = dispatched(c, q, used) if runs_sender else (q, ())
        calls.append((intern(action), intern(q), sent))
    return tuple(calls)


def _calls(c: ClientConfig, p: Producer) -> Iterator[tuple[Action, Producer, bool]]:
    """The application's calls on ``p``: the action, the producer after the call, and whether the client's
    Sender runs after it."""
    tv2 = c.tv2
    who = p.address
    if p.phase is UNINITIALIZED and p.awaiting is None:
        # KIP-939: an instance restarted after a crash keeps the prepared transaction (initTransactions(true))
        keep = c.two_phase_commit and p.incarnation > 0
        yield Action(K.INIT_TRANSACTIONS, who), replace(p, phase=INITIALIZING, keep_prepared=keep), True
    elif p.phase is READY and p.txn_no < c.transactions_per_producer:
        q = replace(p, phase=IN_TRANSACTION, txn_no=p.txn_no + 1, records_sent=0)
        yield Action(K.BEGIN_TRANSACTION, who), q, False
    elif p.phase is IN_TRANSACTION:
        if p.records_sent < c.records_per_transaction:
            for partition in c.partitions:
                add = not tv2 and partition not in p.added | p.to_add | p.adding
                q = replace(p, records_sent=p.records_sent + 1, unsent=(*p.unsent, partition),
                            to_add=p.to_add | {partition} if add else p.to_add)
                yield Action(K.SEND, who, partition=partition), q, True
        if c.commit_offsets and p.offsets is OffsetsStage.NONE:
            # TransactionManager.sendOffsetsToTransaction: TV2 sends TxnOffsetCommit at once and marks the
            # transaction started (so abort sends EndTxn even if the commit then fails); TV1 waits for
            # AddOffsetsToTxn
            q = replace(p, offsets=OffsetsStage.COMMIT if tv2 else OffsetsStage.ADD,
                        queued=(*p.queued, Queued.OFFSETS), started=p.started or tv2,
                        offsets_generation=p.generation)
            yield Action(K.SEND_OFFSETS_TO_TRANSACTION, who), q, True
        if c.two_phase_commit and p.records_sent == c.records_per_transaction:
            yield from _prepare(p)
        elif p.records_sent == c.records_per_transaction and (not c.commit_offsets
                                                              or p.offsets is not OffsetsStage.NONE):
            # beginCompletingTransaction queues the AddPartitionsToTxn of new partitions at once
            queued = (*p.queued, Queued.PARTITIONS) if p.to_add and Queued.PARTITIONS not in p.queued \
                else p.queued
            q = replace(p, phase=COMMITTING, end_result=TransactionResult.COMMIT, queued=queued,
                        bump_queued=p.bump_required and not tv2)
            yield Action(K.COMMIT_TRANSACTION, who), q, True
    if p.phase is PREPARED:
        yield from _complete(c, p)
    # commitTransaction blocks until its EndTxn handler completes, and a handler queued in an error state fails
    # only once no batch is incomplete (TransactionManager.nextRequest, maybeTerminateRequestWithError): an
    # abort after a failed commit waits for the batches in flight
    commit_pending = p.end_result is TransactionResult.COMMIT and bool(p.in_flight) \
        and c.waits_for_produce_before_end_txn
    if p.phase in (IN_TRANSACTION, ABORTABLE_ERROR) and p.awaiting is None and not commit_pending:
        # beginAbort drops partitions not yet added and records not yet sent
        offsets = OffsetsStage.NONE if p.offsets in (OffsetsStage.ADD, OffsetsStage.COMMIT) else p.offsets
        q = replace(p, phase=ABORTING, end_result=TransactionResult.ABORT, to_add=frozenset(), unsent=(),
                    bump_queued=p.bump_required and not tv2, offsets=offsets, queued=())
        yield Action(K.ABORT_TRANSACTION, who), q, True


def _prepare(p: Producer) -> Iterator[tuple[Action, Producer, bool]]:
    """``KafkaProducer.prepareTransaction`` (KIP-939): it flushes first, so it returns once every record is
    acknowledged; the client remembers its (producer id, epoch) as the ``PreparedTxnState``."""
    if not (p.unsent or p.in_flight or p.to_add or p.adding or p.queued) and p.awaiting is None:
        q = replace(p, phase=PREPARED, prepared=(p.producer_id, p.producer_epoch))
        yield Action(K.PREPARE_TRANSACTION, p.address), q, False


def _complete(c: ClientConfig, p: Producer) -> Iterator[tuple[Action, Producer, bool]]:
    """The external coordinator of a prepared transaction: it decides once, durably (commit only for a
    transaction this instance prepared; a kept one without a decision is presumed aborted), storing the
    ``PreparedTxnState`` with a commit; then ``completeTransaction(stored)`` commits exactly when the stored state
    equals the client's (``KafkaProducer.completeTransaction``)."""
    who = p.address
    if p.decision is None:
        if not p.kept:
            q = replace(p, decision=(p.tag, TransactionResult.COMMIT), recorded=p.prepared)
            yield Action(K.DECIDE_COMMIT, who), q, False
        yield Action(K.DECIDE_ABORT, who), replace(p, decision=(p.tag, TransactionResult.ABORT)), False
        return
    matches = p.recorded == p.prepared or not c.complete_compares_prepared_state
    result = TransactionResult.COMMIT if matches else TransactionResult.ABORT
    q = replace(p, phase=COMMITTING if matches else ABORTING, end_result=result)
    yield Action(K.COMPLETE_TRANSACTION, who), q, True


# --- delivery ---------------------------------------------------------------------------------------

def _delivers_awaited(state: SystemState, envelope: Envelope) -> bool | None:
    """Whether ``envelope`` is what its producer's client waits for (see :class:`~txnspec.spec.actions.Action`)."""
    index = producer_index(envelope.source)
    if index is None:
        index = producer_index(envelope.target)
        if index is None:
            return None
    p = state.producers[index]
    if isinstance(envelope.body, Produce | ProduceResponse):
        return envelope.context in p.in_flight
    return p.awaiting is not None and p.awaiting[1] == envelope.context


_deliver = memoised()(deliver)  # one shared label per (envelope, awaited)


def delivery_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """Each distinct message in flight delivered (a bag: any order). Each broker's handling is memoised on the
    parts of the state it reads (:mod:`txnspec.spec.brokers`), the client's on the producer."""
    make = SystemState._make
    cs, partitions, group, producers, budget, ghost = (state.coordinator, state.partitions, state.group,
                                                       state.producers, state.budget, state.ghost)
    for envelope, rest in deliveries(state.network):
        label = _deliver(envelope, _delivers_awaited(state, envelope))
        target = envelope.target
        if target == COORDINATOR:
            cs2, ghost2, sent = system.memo(coordinator_effect)(cs, ghost, envelope, Errors.NONE)
            yield label, make(cs2, partitions, group, producers, send(rest, *sent), budget, ghost2)
            if budget.append_failure and isinstance(envelope.body, InitProducerId | AddPartitionsToTxn | EndTxn):
                cs2, ghost2, sent = system.memo(coordinator_effect)(cs, ghost, envelope, Errors.NOT_ENOUGH_REPLICAS)
                yield (intern(Action(K.APPEND_FAILS, COORDINATOR, envelope)),
                       make(cs2, partitions, group, producers, send(rest, *sent), spend(budget, "append_failure"),
                            ghost2))
        elif target == GROUP:
            name = system.offsets_partition
            grouped = system.memo(group_effect)(state.partition(name), group, cs, ghost, envelope)
            if grouped is not None:
                offsets_log, group2, cs2, ghost2, sent = grouped
                yield label, make(cs2, with_partition(partitions, name, offsets_log), group2, producers,
                                  send(rest, *sent), budget, ghost2)
        else:
            index = producer_index(target)
            if index is not None:
                received = _producer_receives(system.client, producers[index], envelope, contexts(rest, target))
                if received is None:
                    yield label, make(cs, partitions, group, producers, rest, budget, ghost)
                else:
                    p, told, sent = received
                    yield label, make(cs, partitions, group, with_producer(producers, p), send(rest, *sent), budget,
                                      ghost if told is None else _told(ghost, *told))
            elif isinstance(target, str):  # a partition's leader (every server's address is its name)
                appended = system.memo(partition_effect)(state.partition(target), cs, ghost, envelope)
                if appended is not None:
                    pstate, cs2, ghost2, sent = appended
                    yield label, make(cs2, with_partition(partitions, target, pstate), group, producers,
                                      send(rest, *sent), budget, ghost2)


@memoised()
def _producer_receives(c: ClientConfig, p: Producer, env: Envelope, used: frozenset[object]
                       ) -> tuple[Producer, tuple[Tag, str] | None, tuple[Envelope, ...]] | None:
    """The client handles ``env`` (:func:`~txnspec.spec.producer.receive`), then its Sender runs (``used``: the
    contexts of ``p``'s messages still in flight): the producer after, what the application was told of which
    transaction, what was sent; None when the answer changes nothing."""
    received = receive(c, p, env.body, env.context)
    if received is None:
        return None
    p, told = received
    outcome = None if told is None else (p.tag, told)
    p, sent = dispatched(c, p, used)
    return intern(p), outcome, sent


@memoised()
def _told(ghost: Ghost, tag: Tag, outcome: str) -> Ghost:
    return intern(ghost.tell(tag, outcome))


# --- the whole step relation -----------------------------------------------------------------------

def next_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    yield from application_steps(system, state)
    yield from delivery_steps(system, state)
    yield from environment_steps(system, state)
