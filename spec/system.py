"""The system model: producers, the transaction coordinator, partition leaders, the group coordinator and
the network, composed into the state machine the checkers explore.

System
    ``Scenario.producers_per_id`` producer instances per transactional id (two on one id are a zombie
    pair), one transaction coordinator, one leader per partition, one group coordinator, and a network
    of in-flight requests and responses. Each *action* is one pure function from a state to labelled
    successors (guard and effect together); the checker calls :func:`next_steps`.

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
    * At most one produce in flight per partition and producer (``max.in.flight`` 1 per partition).
    * ``FindCoordinator`` always finds the one coordinator.

Ghost state (never read by the protocol, only by properties)
    Every produce carries the tag ``(producer, incarnation, transaction number)`` of the transaction
    the application sent it in; :class:`Ghost` records which tag each appended batch had, the
    coordinator's decisions with the tag of the transaction decided, what the application was told,
    and which producer instance last initialised each transactional id.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from txnspec.spec import coordinator as coord
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod
from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, group_offsets_partition
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerId,
    InitProducerIdResponse,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
    WriteTxnMarkers,
    WriteTxnMarkersResponse,
)
from txnspec.spec.protocol import CURRENT, Protocol
from txnspec.spec.scenarios import Scenario
from txnspec.spec.txn_state import ONGOING, PREPARE_STATES

COORDINATOR, GROUP = "coordinator", "group"
TXN_TIMEOUT_MS = 60_000


class Phase(enum.Enum):
    """``TransactionManager.State`` (the client's view of its transaction)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


UNINITIALIZED, INITIALIZING, READY = Phase.UNINITIALIZED, Phase.INITIALIZING, Phase.READY
IN_TRANSACTION, COMMITTING, ABORTING = Phase.IN_TRANSACTION, Phase.COMMITTING_TRANSACTION, Phase.ABORTING_TRANSACTION
ABORTABLE_ERROR, FATAL_ERROR = Phase.ABORTABLE_ERROR, Phase.FATAL_ERROR

# TransactionManager's classification of coordinator errors (RULES.md §5.3).
RETRIABLE = frozenset({Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR,
                       Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION,
                       Errors.NOT_ENOUGH_REPLICAS})
FATAL = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH, Errors.INVALID_TXN_STATE,
                   Errors.INVALID_PRODUCER_ID_MAPPING, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                   Errors.UNSUPPORTED_VERSION, Errors.UNKNOWN_SERVER_ERROR})
# Produce errors after which a TV1 client bumps its epoch on abort (unresolved sequences, KIP-360).
PRODUCE_FATAL = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_ID_MAPPING,
                           Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.UNSUPPORTED_VERSION})


Tag = tuple[int, int, int]  # (producer index, incarnation, transaction number): ghost


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message in flight. ``context``: a correlation for responses, ``(tid, coordinator epoch)`` for markers."""

    source: str
    target: str
    body: Any
    context: Any = None
    tag: Tag | None = None

    def __str__(self) -> str:
        return f"{self.source}->{self.target}: {describe(self.body)}"


def describe(body: Any) -> str:
    name = type(body).__name__
    if isinstance(body, InitProducerId):
        return f"InitProducerId({body.transactional_id}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, AddPartitionsToTxn):
        return f"AddPartitionsToTxn({','.join(sorted(body.partitions))}, pid={body.producer_id}, " \
               f"epoch={body.producer_epoch})"
    if isinstance(body, AddOffsetsToTxn | TxnOffsetCommit):
        return f"{name}({body.group_id}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, EndTxn):
        return f"EndTxn({body.result}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, Produce):
        return f"Produce({body.partition}, pid={body.producer_id}, epoch={body.producer_epoch}, " \
               f"seq={body.base_sequence})"
    if isinstance(body, WriteTxnMarkers):
        return f"WriteTxnMarkers({body.partition}, {body.result}, pid={body.producer_id}, " \
               f"epoch={body.producer_epoch}, coordinatorEpoch={body.coordinator_epoch})"
    if isinstance(body, InitProducerIdResponse | EndTxnResponse):
        return f"{name}({body.error}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, ProduceResponse):
        extra = ", duplicate" if body.duplicate else ""
        return f"ProduceResponse({body.error}, offset={body.base_offset}{extra})"
    error = getattr(body, "error", None)
    return f"{name}({error})" if error is not None else name


@dataclass(frozen=True, slots=True)
class Action:
    """An action label: ``kind`` for coverage, ``source``/``target`` as lifelines of a sequence diagram.

    ``awaited``, for a delivery between a producer and a server: whether the message is the one the
    producer's client waits for (its live request, or the answer to it) rather than a stale duplicated
    copy; None for other actions. Copies share their text, so a replay against another implementation
    needs it to deliver the same copy."""

    kind: str
    text: str
    source: str = ""
    target: str = ""
    awaited: bool | None = None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Producer:
    """One producer instance: the application's progress and its client's ``TransactionManager``."""

    index: int
    transactional_id: str
    incarnation: int = 0
    phase: Phase = UNINITIALIZED
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    awaiting: tuple[str, int] | None = None  # (request name, correlation) of the transactional request in flight
    added: frozenset[str] = frozenset()  # partitions the coordinator knows are in the transaction
    to_add: frozenset[str] = frozenset()  # TV1: partitions waiting for AddPartitionsToTxn
    adding: frozenset[str] = frozenset()  # TV1: the partitions of the AddPartitionsToTxn in flight
    # TransactionManager.pendingRequests among its equal-priority handlers, oldest first: "partitions" (the
    # AddPartitionsToTxn of to_add) and "offsets" (AddOffsetsToTxn or TxnOffsetCommit, as ``offsets`` says)
    queued: tuple[str, ...] = ()
    # TV1: the group coordinator was found (TransactionManager keeps it). The first TxnOffsetCommit first looks it
    # up and is re-enqueued behind the handlers queued meanwhile; TV2 queues nothing beside it, so the flag stays
    # False there (equal states stay equal)
    group_found: bool = False
    unsent: tuple[str, ...] = ()  # records waiting for their partition to be added
    # produces outstanding, as (partition, producer id, epoch, base sequence): what correlates a response
    in_flight: frozenset[tuple[str, int, int, int]] = frozenset()
    sequences: tuple[tuple[str, int], ...] = ()
    offsets: str = "none"  # consume-transform-produce: none -> add (TV1) -> commit -> done
    started: bool = False  # transactionStarted: something was added, so EndTxn must be sent
    bump_required: bool = False  # TV1 after an abortable produce error: bump the epoch after the abort
    # TV1: beginCompletingTransaction found the bump required and queued its InitProducerId behind EndTxn. A bump
    # required only later (a batch expired while completing: maybeResolveSequences) is queued by nobody: after
    # EndTxn the client is INITIALIZING with nothing to send, and no call of the application is valid any more
    bump_queued: bool = False
    end_result: TransactionResult | None = None
    txn_no: int = 0
    records_sent: int = 0

    def next_sequence(self, partition: str) -> int:
        for p, seq in self.sequences:
            if p == partition:
                return seq
        return 0

    @property
    def tag(self) -> Tag:
        return (self.index, self.incarnation, self.txn_no)


@dataclass(frozen=True, slots=True)
class AppendedBatch:
    """Ghost record of one data batch appended to a partition, with the transaction it was sent in."""

    partition: str
    base_offset: int
    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    transactional: bool
    tag: Tag | None
    fenced_at_append: bool  # the coordinator had already moved past (pid, epoch) when it was appended


@dataclass(frozen=True, slots=True)
class Ghost:
    batches: tuple[AppendedBatch, ...] = ()
    open_txn: tuple[tuple[str, Tag], ...] = ()  # tid -> the transaction the coordinator has Ongoing
    # (tid, the transaction the coordinator had open, the result, the transaction of the request that decided
    # it: None when the coordinator decided by itself, on a timeout or when fencing), in decision order
    decisions: tuple[tuple[str, Tag | None, TransactionResult, Tag | None], ...] = ()
    told: tuple[tuple[Tag, str], ...] = ()  # what the application was told: "committed" / "aborted" / "fatal"
    owner: tuple[tuple[str, tuple[int, int]], ...] = ()  # tid -> (producer, incarnation) last initialised
    fenced_commit: bool = False  # a commit was decided for a request from a fenced instance


@dataclass(frozen=True, slots=True)
class Budget:
    loss: int = 0
    duplicate: int = 0
    append_failure: int = 0
    timeout: int = 0
    failover: int = 0
    crash: int = 0
    expire_batch: int = 0


@dataclass(frozen=True, slots=True)
class SystemState:
    coordinator: coord.CoordinatorState
    partitions: tuple[tuple[str, Any], ...]  # partition name -> partition_mod.PartitionState
    group: Any  # group_mod.GroupState
    producers: tuple[Producer, ...]
    network: tuple[Envelope, ...] = ()  # a bag, kept sorted so equal bags are equal tuples
    budget: Budget = Budget()
    ghost: Ghost = Ghost()

    def partition(self, name: str) -> Any:
        for p, state in self.partitions:
            if p == name:
                return state
        raise KeyError(name)


@dataclass(frozen=True)
class System:
    """A scenario and a protocol: everything :func:`next_steps` needs besides the state."""

    scenario: Scenario
    protocol: Protocol = CURRENT
    coordinator_config: coord.CoordinatorConfig = field(init=False)
    limits: Any = field(init=False)
    offsets_partition: str = field(init=False)

    def __post_init__(self) -> None:
        s = self.scenario
        config = replace(self.protocol.coordinator_config, max_epoch=s.max_epoch,
                         transaction_version=s.transaction_version)
        object.__setattr__(self, "coordinator_config", config)
        object.__setattr__(self, "limits", partition_mod.PartitionLimits(max_sequence=s.max_sequence,
                                                                         max_epoch=s.max_epoch))
        object.__setattr__(self, "offsets_partition", group_offsets_partition(s.group_id))

    @property
    def tv2(self) -> bool:
        return self.scenario.transaction_version >= 2


# --- small helpers -------------------------------------------------------------------------------------

def _sort_key(envelope: Envelope) -> str:
    return repr(envelope)


def send(network: tuple[Envelope, ...], *envelopes: Envelope) -> tuple[Envelope, ...]:
    if not envelopes:
        return network
    return tuple(sorted((*network, *envelopes), key=_sort_key))


def remove_one(network: tuple[Envelope, ...], envelope: Envelope) -> tuple[Envelope, ...]:
    i = network.index(envelope)
    return network[:i] + network[i + 1:]


def _set(pairs: tuple[tuple[Any, Any], ...], key: Any, value: Any) -> tuple[tuple[Any, Any], ...]:
    kept = [(k, v) for k, v in pairs if k != key]
    kept.append((key, value))
    kept.sort(key=lambda kv: repr(kv[0]))
    return tuple(kept)


def _get(pairs: tuple[tuple[Any, Any], ...], key: Any, default: Any = None) -> Any:
    for k, v in pairs:
        if k == key:
            return v
    return default


def _replace_producer(state: SystemState, producer: Producer) -> SystemState:
    producers = list(state.producers)
    producers[producer.index] = producer
    return replace(state, producers=tuple(producers))


def _set_partition(state: SystemState, name: str, partition_state: Any) -> SystemState:
    return replace(state, partitions=tuple((p, partition_state if p == name else s) for p, s in state.partitions))


def producer_address(p: Producer) -> str:
    return f"producer-{p.index}"


# --- initial state ---------------------------------------------------------------------------------------

def initial_state(system: System) -> SystemState:
    s = system.scenario
    producers = tuple(
        Producer(index=i * s.producers_per_id + k, transactional_id=tid)
        for i, tid in enumerate(s.transactional_ids) for k in range(s.producers_per_id))
    budget = Budget(**{fault: s.budget(fault) for fault in Budget.__dataclass_fields__})
    return SystemState(
        coordinator=coord.CoordinatorState(),
        partitions=tuple((p, partition_mod.PartitionState())
                         for p in (*s.partitions, *((system.offsets_partition,) if s.commit_offsets else ()))),
        group=group_mod.GroupState(),
        producers=producers,
        budget=budget,
    )


# --- the client's Sender: what a producer sends after each step ---------------------------------------

def _next_correlation(p: Producer, name: str, used: frozenset[Any]) -> Producer:
    """A correlation id no message in flight uses. Kafka's ids only grow; reusing the smallest free one is
    equivalent (a response can only be confused with a request still in flight) and keeps the space finite."""
    correlation = next(c for c in range(len(used) + 1) if c not in used)
    return replace(p, awaiting=(name, correlation))


def _awaited(p: Producer) -> int:
    assert p.awaiting is not None
    return p.awaiting[1]


def dispatch(system: System, p: Producer, used: frozenset[Any] = frozenset()) -> tuple[Producer, tuple[Envelope, ...]]:
    """``Sender.runOnce``: send every request the client can send now (see module doc).

    ``used``: the correlation ids of this producer's messages in flight."""
    out: list[Envelope] = []
    src = producer_address(p)
    tid = p.transactional_id
    if p.phase is FATAL_ERROR:
        return p, ()
    if p.awaiting is None:
        if p.phase is INITIALIZING and (p.producer_id == NO_PRODUCER_ID or p.bump_queued):
            bump = p.producer_id != NO_PRODUCER_ID
            p = _next_correlation(p, "InitProducerId", used)
            out.append(Envelope(src, COORDINATOR, InitProducerId(
                tid, TXN_TIMEOUT_MS, p.producer_id if bump else -1, p.producer_epoch if bump else -1),
                _awaited(p), p.tag))
        elif p.phase in (IN_TRANSACTION, COMMITTING) and (p.queued or p.to_add):
            # nextRequest: new partitions become an AddPartitionsToTxn queued behind the handlers already
            # waiting (equal priority, first come first served); the oldest is sent
            if p.to_add and "partitions" not in p.queued:
                p = replace(p, queued=(*p.queued, "partitions"))
            head, p = p.queued[0], replace(p, queued=p.queued[1:])
            if head == "offsets" and p.offsets == "commit" and not system.tv2 and not p.group_found and p.queued:
                # Sender: no coordinator for the handler -> lookupCoordinator(GROUP) and reenqueue(); the
                # FindCoordinator (answered at once here) goes first, then the oldest handler
                head, p = p.queued[0], replace(p, queued=(*p.queued[1:], "offsets"), group_found=True)
            elif head == "offsets" and p.offsets == "commit" and not system.tv2:
                p = replace(p, group_found=True)
            if head == "partitions":
                # newPartitionsInTransaction move to pendingPartitionsInTransaction: a partition sent while
                # this request is in flight waits for the next one
                p = replace(_next_correlation(p, "AddPartitionsToTxn", used), adding=p.to_add, to_add=frozenset())
                out.append(Envelope(src, COORDINATOR, AddPartitionsToTxn(
                    tid, p.producer_id, p.producer_epoch, p.adding, 0), _awaited(p), p.tag))
            elif p.offsets == "add":
                p = _next_correlation(p, "AddOffsetsToTxn", used)
                out.append(Envelope(src, COORDINATOR, AddOffsetsToTxn(
                    tid, p.producer_id, p.producer_epoch, system.scenario.group_id), _awaited(p), p.tag))
            elif p.offsets == "commit":
                p = _next_correlation(p, "TxnOffsetCommit", used)
                offsets = (("input-0", p.txn_no),)
                out.append(Envelope(src, GROUP, TxnOffsetCommit(
                    tid, system.scenario.group_id, p.producer_id, p.producer_epoch, offsets), _awaited(p), p.tag))
    # Produce: records whose partition is in the transaction (TV2: every partition is, implicitly). Kafka's
    # Sender sends no produce while a transactional request is in flight (Sender.runOnce waits for it).
    unsent = list(p.unsent)
    for partition in p.unsent if p.awaiting is None else ():
        busy = any(q[0] == partition for q in p.in_flight)
        ready = system.tv2 or partition in p.added
        if busy or not ready or p.phase not in (IN_TRANSACTION, COMMITTING):
            continue
        seq = p.next_sequence(partition)
        nxt = 0 if seq >= system.scenario.max_sequence else seq + 1
        unsent.remove(partition)
        key = (partition, p.producer_id, p.producer_epoch, seq)
        p = replace(p, in_flight=p.in_flight | {key}, sequences=_set(p.sequences, partition, nxt),
                    started=True, unsent=tuple(unsent))
        out.append(Envelope(src, partition, Produce(partition, p.producer_id, p.producer_epoch, seq, 1, True, tid),
                            key, p.tag))
    # EndTxn once everything before it is done (KafkaProducer flushes before committing).
    if p.awaiting is None and p.phase in (COMMITTING, ABORTING) and p.end_result is not None:
        produce_pending = bool(p.in_flight) and system.protocol.client_waits_for_produce_before_end_txn
        offsets_pending = p.offsets in ("add", "commit") and p.phase is COMMITTING
        if not p.to_add and not p.unsent and not produce_pending and not offsets_pending:
            result = p.end_result
            if p.started or p.offsets == "done":
                p = _next_correlation(p, "EndTxn", used)
                out.append(Envelope(src, COORDINATOR, EndTxn(
                    tid, p.producer_id, p.producer_epoch, result, system.scenario.transaction_version),
                    _awaited(p), p.tag))
            else:  # nothing was added: the transaction completes locally (no EndTxn)
                p = _transaction_completed(system, p, result)
                p, more = dispatch(system, p, used)
                return p, (*out, *more)
    return p, tuple(out)


def _transaction_completed(system: System, p: Producer, result: TransactionResult) -> Producer:
    phase = INITIALIZING if p.bump_required and not system.tv2 else READY
    return replace(p, phase=phase, added=frozenset(), to_add=frozenset(), queued=(), unsent=(), offsets="none",
                   started=False, end_result=None, bump_required=False if phase is READY else p.bump_required,
                   records_sent=0)


def _correlations_in_flight(state: SystemState, p: Producer) -> frozenset[Any]:
    address = producer_address(p)
    return frozenset(e.context for e in state.network
                     if (e.source == address or e.target == address) and isinstance(e.context, int))


def _with_dispatch(system: System, state: SystemState, p: Producer, *extra: Envelope) -> SystemState:
    p, out = dispatch(system, p, _correlations_in_flight(state, p))
    state = _replace_producer(state, p)
    return replace(state, network=send(state.network, *extra, *out))


def _tell(state: SystemState, tag: Tag, outcome: str) -> SystemState:
    return replace(state, ghost=replace(state.ghost, told=(*state.ghost.told, (tag, outcome))))


# --- application actions -------------------------------------------------------------------------------

def application_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    s = system.scenario
    for p in state.producers:
        who = producer_address(p)
        if p.phase is UNINITIALIZED and p.awaiting is None:
            q = replace(p, phase=INITIALIZING)
            yield Action("initTransactions", f"{who}.initTransactions()", who, who), _with_dispatch(system, state, q)
        elif p.phase is READY and p.txn_no < s.transactions_per_producer:
            q = replace(p, phase=IN_TRANSACTION, txn_no=p.txn_no + 1, records_sent=0)
            yield Action("beginTransaction", f"{who}.beginTransaction()", who, who), _replace_producer(state, q)
        elif p.phase is IN_TRANSACTION:
            if p.records_sent < s.records_per_transaction:
                for partition in s.partitions:
                    add = not system.tv2 and partition not in p.added | p.to_add | p.adding
                    q = replace(p, records_sent=p.records_sent + 1, unsent=(*p.unsent, partition),
                                to_add=p.to_add | {partition} if add else p.to_add)
                    yield (Action("send", f"{who}.send({partition})", who, who),
                           _with_dispatch(system, state, q))
            if s.commit_offsets and p.offsets == "none":
                q = replace(p, offsets="commit" if system.tv2 else "add", queued=(*p.queued, "offsets"))
                yield (Action("sendOffsetsToTransaction", f"{who}.sendOffsetsToTransaction()", who, who),
                       _with_dispatch(system, state, q))
            if p.records_sent == s.records_per_transaction and (not s.commit_offsets or p.offsets != "none"):
                # beginCompletingTransaction queues the AddPartitionsToTxn of new partitions at once
                queued = (*p.queued, "partitions") if p.to_add and "partitions" not in p.queued else p.queued
                q = replace(p, phase=COMMITTING, end_result=TransactionResult.COMMIT, queued=queued,
                            bump_queued=p.bump_required and not system.tv2)
                yield (Action("commitTransaction", f"{who}.commitTransaction()", who, who),
                       _with_dispatch(system, state, q))
        if p.phase in (IN_TRANSACTION, ABORTABLE_ERROR) and p.awaiting is None:
            # beginAbort drops partitions not yet added and records not yet sent
            q = replace(p, phase=ABORTING, end_result=TransactionResult.ABORT, to_add=frozenset(), unsent=(),
                        bump_queued=p.bump_required and not system.tv2,
                        offsets="none" if p.offsets in ("add", "commit") else p.offsets, queued=())
            yield (Action("abortTransaction", f"{who}.abortTransaction()", who, who),
                   _with_dispatch(system, state, q))


# --- delivery ---------------------------------------------------------------------------------------

def _delivers_awaited(state: SystemState, envelope: Envelope) -> bool | None:
    """Whether ``envelope`` is what its producer's client waits for (see :class:`Action`)."""
    address = envelope.source if envelope.source.startswith("producer-") else envelope.target
    if not address.startswith("producer-"):
        return None
    p = state.producers[int(address.split("-")[1])]
    if isinstance(envelope.body, Produce | ProduceResponse):
        return envelope.context in p.in_flight
    return p.awaiting is not None and p.awaiting[1] == envelope.context


def delivery_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    seen: set[Envelope] = set()
    for envelope in state.network:
        if envelope in seen:
            continue
        seen.add(envelope)
        rest = replace(state, network=remove_one(state.network, envelope))
        label = Action(f"deliver {type(envelope.body).__name__}", f"deliver {envelope}",
                       envelope.source, envelope.target, _delivers_awaited(state, envelope))
        if envelope.target == COORDINATOR:
            yield label, _coordinator_receives(system, rest, envelope, Errors.NONE)
            if state.budget.append_failure and isinstance(envelope.body, InitProducerId | AddPartitionsToTxn | EndTxn):
                failed = replace(rest, budget=replace(rest.budget, append_failure=rest.budget.append_failure - 1))
                yield (Action("append fails", f"deliver {envelope} (log append fails)", envelope.source,
                              envelope.target),
                       _coordinator_receives(system, failed, envelope, Errors.NOT_ENOUGH_REPLICAS))
        elif envelope.target == GROUP:
            received = _group_receives(system, rest, envelope)
            if received is not rest:
                yield label, received
        elif envelope.target.startswith("producer-"):
            yield label, _producer_receives(system, rest, envelope)
        else:
            next_state = _partition_receives(system, rest, envelope)
            if next_state is not None:
                yield label, next_state


def _coordinator_receives(system: System, state: SystemState, env: Envelope, append_error: Errors) -> SystemState:
    proto, config = system.protocol, system.coordinator_config
    body = env.body
    cs = state.coordinator
    if isinstance(body, InitProducerId):
        result = proto.handle_init_producer_id(cs, body, config=config, append_error=append_error)
    elif isinstance(body, AddPartitionsToTxn):
        result = proto.handle_add_partitions_to_txn(cs, body, config=config, append_error=append_error)
    elif isinstance(body, AddOffsetsToTxn):
        result = proto.handle_add_offsets_to_txn(cs, body, config=config, append_error=append_error)
    elif isinstance(body, EndTxn):
        result = proto.handle_end_txn(cs, body, config=config, append_error=append_error)
    elif isinstance(body, WriteTxnMarkersResponse):
        tid, coordinator_epoch, partition = env.context
        result = proto.handle_write_txn_markers_response(cs, tid, partition, coordinator_epoch, body.error,
                                                         config=config)
    else:
        raise TypeError(f"the coordinator does not handle {type(body).__name__}")
    state = replace(state, ghost=_coordinator_ghost(state, result, env))
    state = replace(state, coordinator=result.state)
    out = [Envelope(COORDINATOR, env.source, result.response, env.context)] if result.response is not None else []
    out += [_marker_envelope(system, m, tid) for tid, m in result.markers]
    return replace(state, network=send(state.network, *out))


def _marker_envelope(system: System, marker: WriteTxnMarkers, tid: str) -> Envelope:
    target = GROUP if marker.partition == system.offsets_partition else marker.partition
    return Envelope(COORDINATOR, target, marker, (tid, marker.coordinator_epoch, marker.partition))


def _coordinator_ghost(state: SystemState, result: coord.CoordinatorResult, env: Envelope) -> Ghost:
    """Record which application transaction the coordinator opened or decided (ghost only)."""
    ghost = state.ghost
    for tid, record in result.appended:
        if record is None:
            continue
        before = state.coordinator.metadata(tid)
        if record.state is ONGOING and (before is None or before.state is not ONGOING) and env.tag is not None:
            ghost = replace(ghost, open_txn=_set(ghost.open_txn, tid, env.tag))
        if record.state in PREPARE_STATES:
            opened = _get(ghost.open_txn, tid)
            decided = TransactionResult.COMMIT if record.state.value == "PrepareCommit" else TransactionResult.ABORT
            decided_by = env.tag if isinstance(env.body, EndTxn) else None
            ghost = replace(ghost, decisions=(*ghost.decisions, (tid, opened, decided, decided_by)),
                            open_txn=tuple((t, g) for t, g in ghost.open_txn if t != tid))
            if decided is TransactionResult.COMMIT and isinstance(env.body, EndTxn) and env.tag is not None:
                owner = _get(ghost.owner, tid)
                if owner is not None and owner != env.tag[:2]:
                    ghost = replace(ghost, fenced_commit=True)
    if isinstance(env.body, InitProducerId) and isinstance(result.response, InitProducerIdResponse) \
            and result.response.error is Errors.NONE and env.tag is not None and env.body.transactional_id:
        ghost = replace(ghost, owner=_set(ghost.owner, env.body.transactional_id, env.tag[:2]))
    return ghost


def _partition_receives(system: System, state: SystemState, env: Envelope) -> SystemState | None:
    body, proto, name = env.body, system.protocol, env.target
    pstate = state.partition(name)
    if isinstance(body, WriteTxnMarkers):
        pstate, reply = proto.append_end_txn_marker(pstate, body.producer_id, body.producer_epoch,
                                                    body.coordinator_epoch, body.result, body.transaction_version,
                                                    limits=system.limits)
        state = _set_partition(state, name, pstate)
        return replace(state, network=send(state.network, Envelope(name, COORDINATOR, WriteTxnMarkersResponse(
            reply.error), env.context)))
    if not isinstance(body, Produce):
        raise TypeError(f"a partition leader does not handle {type(body).__name__}")
    verified = _verify_transactional_produce(system, state, pstate, body, env.tag)
    if verified is None:
        return None  # TV2: the leader retries CONCURRENT_TRANSACTIONS itself; the produce waits
    state, error = verified
    if error is not Errors.NONE:
        response = ProduceResponse(error)
    else:
        fenced = _is_fenced_at_coordinator(state.coordinator, body)
        pstate, response = proto.append_data(pstate, body.producer_id, body.producer_epoch, body.base_sequence,
                                             body.record_count, body.transactional, limits=system.limits)
        state = _set_partition(state, name, pstate)
        if response.error is Errors.NONE and not response.duplicate:
            last = body.base_sequence + body.record_count - 1
            batch = AppendedBatch(name, response.base_offset, body.producer_id, body.producer_epoch,
                                  body.base_sequence, last, body.transactional, env.tag, fenced)
            state = replace(state, ghost=replace(state.ghost, batches=(*state.ghost.batches, batch)))
    return replace(state, network=send(state.network, Envelope(name, env.source, response, env.context)))


def _is_fenced_at_coordinator(cs: coord.CoordinatorState, produce: Produce) -> bool:
    md = cs.metadata(produce.transactional_id or "")
    if md is None:
        return False
    if produce.producer_id == md.producer_id:
        return produce.producer_epoch < md.producer_epoch and not (
            md.state in PREPARE_STATES and produce.producer_epoch == md.last_producer_epoch)
    return produce.producer_id != md.prev_producer_id


def _verify_transactional_produce(system: System, state: SystemState, pstate: Any, body: Produce, tag: Tag | None
                                  ) -> tuple[SystemState, Errors] | None:
    """KIP-890: before a transactional batch starts a transaction on this partition, ask the coordinator."""
    if not body.transactional or partition_mod.has_ongoing_transaction(pstate, body.producer_id, body.producer_epoch):
        return state, Errors.NONE
    tid = body.transactional_id or ""
    if system.tv2:
        add = AddPartitionsToTxn(tid, body.producer_id, body.producer_epoch, frozenset({body.partition}), 2)
        result = system.protocol.handle_add_partitions_to_txn(state.coordinator, add,
                                                              config=system.coordinator_config)
        error = result.response.error
        if error is Errors.CONCURRENT_TRANSACTIONS:
            return None
        env = Envelope(body.partition, COORDINATOR, add, None, tag)
        state = replace(state, ghost=_coordinator_ghost(state, result, env), coordinator=result.state)
        if error is Errors.NONE:
            return state, Errors.NONE
        return state, _map_verification_error(error)
    if not system.scenario.partition_verification:
        return state, Errors.NONE
    md = state.coordinator.metadata(tid)
    if md is None or md.producer_id != body.producer_id:
        return state, Errors.INVALID_PRODUCER_ID_MAPPING
    if md.producer_epoch != body.producer_epoch:
        return state, Errors.INVALID_PRODUCER_EPOCH
    if md.state in PREPARE_STATES:
        return state, Errors.NOT_ENOUGH_REPLICAS
    if body.partition in md.partitions:
        return state, Errors.NONE
    # handleVerifyPartitionsInTransaction answers TRANSACTION_ABORTABLE for a partition not in the transaction
    return state, _map_verification_error(Errors.TRANSACTION_ABORTABLE)


def _map_verification_error(error: Errors) -> Errors:
    """What the producer sees of a failed verification; the modelled clients send Produce v11 (TV1) and v12
    (TV2) and TxnOffsetCommit v4 and v5, which all handle TRANSACTION_ABORTABLE."""
    return partition_mod.verification_error(error, generic_error_supported=True)


def _group_receives(system: System, state: SystemState, env: Envelope) -> SystemState:
    """The group coordinator. Its transactional offset commits are records in the group's
    ``__consumer_offsets`` partition, written with the producer's id and epoch (origin COORDINATOR: the
    epoch is checked, not the sequence), so that partition's producer state fences stale markers and
    stale commits exactly as a data partition does; the group's view follows the records."""
    body, proto, name = env.body, system.protocol, system.offsets_partition
    offsets_log = state.partition(name)
    if isinstance(body, WriteTxnMarkers):
        offsets_log, reply = proto.append_end_txn_marker(offsets_log, body.producer_id, body.producer_epoch,
                                                         body.coordinator_epoch, body.result,
                                                         body.transaction_version, limits=system.limits)
        state = _set_partition(state, name, offsets_log)
        if reply.error is Errors.NONE:
            group = proto.complete_pending_txn_offset_commit(state.group, body.producer_id,
                                                             body.result is TransactionResult.COMMIT)
            state = replace(state, group=group)
        return replace(state, network=send(state.network, Envelope(GROUP, COORDINATOR, WriteTxnMarkersResponse(
            reply.error), env.context)))
    if not isinstance(body, TxnOffsetCommit):
        raise TypeError(f"the group coordinator does not handle {type(body).__name__}")
    if system.tv2 and not partition_mod.has_ongoing_transaction(offsets_log, body.producer_id, body.producer_epoch):
        add = AddPartitionsToTxn(body.transactional_id, body.producer_id, body.producer_epoch,
                                 frozenset({name}), 2)
        result = system.protocol.handle_add_partitions_to_txn(state.coordinator, add,
                                                              config=system.coordinator_config)
        if result.response.error is Errors.CONCURRENT_TRANSACTIONS:
            return state  # the broker retries the verification itself: the commit waits
        verification = Envelope(GROUP, COORDINATOR, add, None, env.tag)
        state = replace(state, ghost=_coordinator_ghost(state, result, verification), coordinator=result.state)
        if result.response.error is not Errors.NONE:
            error = _map_verification_error(result.response.error)
            return replace(state, network=send(state.network, Envelope(GROUP, env.source, ErrorResponse(error),
                                                                       env.context)))
    offsets_log, appended = proto.append_data(offsets_log, body.producer_id, body.producer_epoch, -1, 1, True,
                                              limits=system.limits, detect_duplicates=False, validate_sequence=False)
    if appended.error is not Errors.NONE:
        return replace(state, network=send(state.network, Envelope(GROUP, env.source, ErrorResponse(appended.error),
                                                                   env.context)))
    group, response = proto.handle_txn_offset_commit(state.group, body)
    state = replace(_set_partition(state, name, offsets_log), group=group)
    return replace(state, network=send(state.network, Envelope(GROUP, env.source, response, env.context)))


# --- responses at the producer ---------------------------------------------------------------------

def _producer_receives(system: System, state: SystemState, env: Envelope) -> SystemState:
    index = int(env.target.split("-")[1])
    p = state.producers[index]
    body = env.body
    if isinstance(body, ProduceResponse):
        if env.context not in p.in_flight:
            return state  # an answer to a duplicate, or to a produce the client gave up on
        p = replace(p, in_flight=p.in_flight - {env.context})
        if body.error is not Errors.NONE:
            p = _produce_failed(system, p, body.error)
        return _with_dispatch(system, state, p)
    if p.awaiting is None or p.awaiting[1] != env.context:
        return state  # a stale or duplicated answer: no request with that correlation is waiting
    name = p.awaiting[0]
    adding = p.adding
    p = replace(p, awaiting=None, adding=frozenset(), to_add=p.to_add | adding)  # re-enqueued unless added
    error = body.error
    if error in RETRIABLE:
        return _with_dispatch(system, state, _reenqueue(p, name))  # the Sender re-enqueues the request
    if error is not Errors.NONE:
        fatal = error in FATAL or name in ("InitProducerId",)
        if fatal:
            state = _tell(state, p.tag, "fatal") if p.phase in (COMMITTING, ABORTING) else state
            return _replace_producer(state, replace(p, phase=FATAL_ERROR))
        return _with_dispatch(system, state, _abortable(p))
    if name == "InitProducerId":
        p = replace(p, phase=READY, producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                    sequences=(), bump_required=False, bump_queued=False)
    elif name == "AddPartitionsToTxn":
        p = replace(p, added=p.added | adding, to_add=p.to_add - adding, started=True)
    elif name == "AddOffsetsToTxn":
        p = replace(p, offsets="commit", started=True, queued=(*p.queued, "offsets"))
    elif name == "TxnOffsetCommit":
        p = replace(p, offsets="done", started=True)
    elif name == "EndTxn":
        result = p.end_result
        assert result is not None
        state = _tell(state, p.tag, "committed" if result is TransactionResult.COMMIT else "aborted")
        if system.tv2 and body.producer_id != NO_PRODUCER_ID:
            p = replace(p, producer_id=body.producer_id, producer_epoch=body.producer_epoch, sequences=())
        p = _transaction_completed(system, p, result)
    return _with_dispatch(system, state, p)


def _reenqueue(p: Producer, name: str) -> Producer:
    """``TxnRequestHandler.reenqueue``: the handler goes back to the end of the queue."""
    kind = {"AddPartitionsToTxn": "partitions", "AddOffsetsToTxn": "offsets", "TxnOffsetCommit": "offsets"}.get(name)
    return replace(p, queued=(*p.queued, kind)) if kind is not None and kind not in p.queued else p


def _abortable(p: Producer) -> Producer:
    if p.phase in (IN_TRANSACTION, COMMITTING):
        return replace(p, phase=ABORTABLE_ERROR)
    return p


def _produce_failed(system: System, p: Producer, error: Errors, unresolved: bool = False) -> Producer:
    """A produce failed (``unresolved``: the client gave up on a batch it had sent, so it cannot know
    whether it was written: ``maybeResolveSequences`` then requires an epoch bump even while completing;
    an error answer goes through ``maybeTransitionToErrorState``, which bumps only outside completion)."""
    if error in PRODUCE_FATAL:
        return replace(p, phase=FATAL_ERROR)
    completing = p.phase in (COMMITTING, ABORTING)
    bump = not system.tv2 and system.protocol.client_bumps_epoch_after_abortable_error \
        and (unresolved or not completing)
    return replace(_abortable(p), bump_required=p.bump_required or bump)


# --- environment ---------------------------------------------------------------------------------

def environment_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    b = state.budget
    if b.loss or b.duplicate:
        seen: set[Envelope] = set()
        for envelope in state.network:
            if envelope in seen:
                continue
            seen.add(envelope)
            if b.loss:
                yield (Action("lose", f"lose {envelope}", envelope.source, envelope.target),
                       replace(state, network=remove_one(state.network, envelope), budget=replace(b, loss=b.loss - 1)))
            # A client re-sends a request it has given up on while the first copy is still on its way. The
            # coordinator re-sends a marker only after its send failed (marker_retry_steps); TCP never
            # duplicates a response.
            if b.duplicate and envelope.source.startswith("producer-") \
                    and len(state.network) < system.scenario.max_in_flight:
                duplicated = replace(state, network=send(state.network, envelope),
                                     budget=replace(b, duplicate=b.duplicate - 1))
                yield Action("duplicate", f"duplicate {envelope}", envelope.source, envelope.target), duplicated
    if b.timeout:
        for tid, md in state.coordinator.cache:
            if md.state is ONGOING and md.pending_state is None:
                result = system.protocol.abort_timed_out_transaction(state.coordinator, tid,
                                                                     config=system.coordinator_config)
                timed = replace(state, budget=replace(b, timeout=b.timeout - 1),
                                ghost=_coordinator_ghost(state, result, Envelope(COORDINATOR, COORDINATOR, None)),
                                coordinator=result.state)
                markers = [_marker_envelope(system, m, t) for t, m in result.markers]
                yield (Action("timeout", f"coordinator aborts timed-out {tid}", COORDINATOR, COORDINATOR),
                       replace(timed, network=send(timed.network, *markers)))
    for tid, md in state.coordinator.cache:
        if md.state is ONGOING and md.pending_state is None and _abandoned(state, tid):
            result = system.protocol.abort_timed_out_transaction(state.coordinator, tid,
                                                                 config=system.coordinator_config)
            timed = replace(state, ghost=_coordinator_ghost(state, result, Envelope(COORDINATOR, COORDINATOR, None)),
                            coordinator=result.state)
            markers = [_marker_envelope(system, m, t) for t, m in result.markers]
            yield (Action("abandoned timeout", f"coordinator aborts {tid}, abandoned by its producer", COORDINATOR,
                          COORDINATOR), replace(timed, network=send(timed.network, *markers)))
    if b.failover:
        result = system.protocol.coordinator_failover(state.coordinator, config=system.coordinator_config)
        failed = replace(state, coordinator=result.state, budget=replace(b, failover=b.failover - 1))
        markers = [_marker_envelope(system, m, tid) for tid, m in result.markers]
        yield (Action("failover", "coordinator fails over", COORDINATOR, COORDINATOR),
               replace(failed, network=send(failed.network, *markers)))
    for p in state.producers:
        who = producer_address(p)
        if b.crash and p.phase is not UNINITIALIZED:
            restarted = Producer(index=p.index, transactional_id=p.transactional_id, incarnation=p.incarnation + 1,
                                 txn_no=p.txn_no)
            yield (Action("crash", f"{who} crashes and restarts", who, who),
                   replace(_replace_producer(state, restarted), budget=replace(b, crash=b.crash - 1)))
        if b.expire_batch:
            for inflight in sorted(p.in_flight):
                q = _produce_failed(system, replace(p, in_flight=p.in_flight - {inflight}), Errors.REQUEST_TIMED_OUT,
                                    unresolved=True)
                expired = replace(state, budget=replace(b, expire_batch=b.expire_batch - 1))
                yield (Action("expire batch", f"{who} gives up on its produce to {inflight[0]}", who, who),
                       _with_dispatch(system, expired, q))
    yield from client_retry_steps(system, state)
    yield from marker_retry_steps(system, state)


def _abandoned(state: SystemState, tid: str) -> bool:
    """No live producer instance can still end ``tid``'s transaction: Kafka's timeout will abort it."""
    return all(p.phase in (FATAL_ERROR, UNINITIALIZED, READY) for p in state.producers if p.transactional_id == tid) \
        and not any(e.source.startswith("producer-") for e in state.network)


def is_request(body: Any) -> bool:
    return not type(body).__name__.endswith("Response")


def client_retry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """The client's request timeout: a request lost with its answer is sent again (``Sender``/``NetworkClient``)."""
    for p in state.producers:
        who = producer_address(p)
        mine = [e for e in state.network if e.source == who or e.target == who]
        if p.awaiting is not None and not any(e.context == p.awaiting[1] for e in mine):
            q = _reenqueue(replace(p, awaiting=None, adding=frozenset(), to_add=p.to_add | p.adding), p.awaiting[0])
            yield (Action("retry", f"{who} times out waiting for {p.awaiting[0]} and retries", who, who),
                   _with_dispatch(system, state, q))
        for key in sorted(p.in_flight):
            partition, producer_id, epoch, seq = key
            if not any(e.context == key for e in mine):
                resend = Envelope(who, partition, Produce(partition, producer_id, epoch, seq, 1, True,
                                                          p.transactional_id), key, p.tag)
                yield (Action("retry", f"{who} times out waiting for its produce to {partition} and retries", who,
                              partition), replace(state, network=send(state.network, resend)))


def marker_retry_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    """``TransactionMarkerChannelManager``: re-send a marker that is no longer in flight (lost, or retriable)."""
    cs = state.coordinator
    for tid, pending in cs.completions:
        md = cs.metadata(tid)
        if md is None or pending.coordinator_epoch != cs.coordinator_epoch:
            continue
        for _, marker in coord.markers_for(cs, md, pending.result):
            envelope = _marker_envelope(system, marker, tid)
            answered = any(e.context == envelope.context and isinstance(e.body, WriteTxnMarkersResponse)
                           for e in state.network)
            if envelope in state.network or answered:
                continue
            yield (Action("resend marker", f"coordinator re-sends {describe(marker)}", COORDINATOR, envelope.target),
                   replace(state, network=send(state.network, envelope)))


# --- the whole step relation -----------------------------------------------------------------------

def next_steps(system: System, state: SystemState) -> Iterator[tuple[Action, SystemState]]:
    yield from application_steps(system, state)
    yield from delivery_steps(system, state)
    yield from environment_steps(system, state)


ACTION_KINDS = (
    "initTransactions", "beginTransaction", "send", "sendOffsetsToTransaction", "commitTransaction",
    "abortTransaction", "deliver InitProducerId", "deliver AddPartitionsToTxn", "deliver AddOffsetsToTxn",
    "deliver TxnOffsetCommit", "deliver EndTxn", "deliver Produce", "deliver WriteTxnMarkers",
    "deliver InitProducerIdResponse", "deliver ErrorResponse", "deliver EndTxnResponse", "deliver ProduceResponse",
    "deliver WriteTxnMarkersResponse", "lose", "duplicate", "append fails", "timeout", "failover", "crash",
    "expire batch", "resend marker", "retry", "abandoned timeout",
)
