"""The producer client's transaction manager: its states, what it sends, and how it classifies errors.

System
    One transactional producer as the application sees it (``KafkaProducer`` API calls) and as the
    broker sees it (the requests its ``Sender`` dispatches). The state machine is Kafka's
    ``TransactionManager.State`` with its table of valid transitions (:data:`VALID_TRANSITIONS`, data);
    each API call and each response is one pure function returning the new state and an
    :class:`Outcome`: the exception thrown to the application (by its simple class name) and the
    requests dispatched.

Kafka sources followed (trunk)
    ``clients/.../producer/internals/TransactionManager.java`` (``initializeTransactions``,
    ``beginTransaction``, ``maybeAddPartition``, ``sendOffsetsToTransaction``, ``beginCommit``,
    ``beginAbort``, ``maybeFailWithError``, ``maybeTransitionToErrorState``,
    ``transitionToAbortableErrorOrFatalError``, ``resetTransactionState`` and every ``*Handler``'s
    ``handleResponse``), ``Sender`` (one transactional request in flight, coordinator lookup first).

Assumptions
    * The coordinator supports epoch bumps (InitProducerId v3+, ``coordinatorSupportsBumpingEpoch``):
      with transaction version < 2 an abortable error is recovered by an InitProducerId epoch bump after
      the abort; with version 2 the coordinator bumps at every EndTxn.
    * Requests are dispatched as soon as nothing blocks them: the transactional ones one at a time in
      Kafka's priority order (FindCoordinator, InitProducerId, AddPartitionsToTxn/AddOffsetsToTxn,
      TxnOffsetCommit, EndTxn), produces once their partition is in the transaction.
    * A record is one batch; each ``send`` produces one record.

Not modelled
    Two-phase commit (``PREPARED_TRANSACTION``, KIP-939), timeouts of blocking calls and their cached
    results, idempotent-only producers, batching and ``max.in.flight``, metadata.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from txnspec.spec.errors import Errors


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = State
# TransactionManager.State.isTransitionValid (trunk): target -> the states it may follow. FATAL_ERROR: any.
VALID_TRANSITIONS: Mapping[State, frozenset[State]] = MappingProxyType({
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.PREPARED_TRANSACTION: frozenset({S.IN_TRANSACTION, S.INITIALIZING}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.PREPARED_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.PREPARED_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(State),
})

FENCED = "ProducerFencedException"
ILLEGAL_STATE = "IllegalStateException"
KAFKA = "KafkaException"

# TransactionManager's retriable errors (RetriableException subclasses the handlers retry).
RETRIABLE = frozenset({Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.CONCURRENT_TRANSACTIONS,
                       Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION, Errors.NOT_ENOUGH_REPLICAS,
                       Errors.UNKNOWN_TOPIC_OR_PARTITION})
COORDINATOR_MOVED = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})

# The exception class Kafka raises for an error code (Errors.exception()), by simple name.
EXCEPTION_NAMES: Mapping[Errors, str] = MappingProxyType({
    Errors.PRODUCER_FENCED: FENCED, Errors.INVALID_PRODUCER_EPOCH: "InvalidProducerEpochException",
    Errors.INVALID_TXN_STATE: "InvalidTxnStateException",
    Errors.INVALID_PRODUCER_ID_MAPPING: "InvalidPidMappingException",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationException",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    Errors.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    Errors.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    Errors.UNSUPPORTED_VERSION: "UnsupportedVersionException",
    Errors.TRANSACTION_ABORTABLE: "TransactionAbortableException",
    Errors.UNKNOWN_PRODUCER_ID: "UnknownProducerIdException",
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: "OutOfOrderSequenceException",
})
# maybeTransitionToErrorState: the produce errors that are fatal for a transactional producer.
PRODUCE_FATAL = frozenset({Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           Errors.PRODUCER_FENCED, Errors.UNSUPPORTED_VERSION, Errors.INVALID_PRODUCER_ID_MAPPING})


@dataclass(frozen=True, slots=True)
class ClientState:
    """``TransactionManager``: the client's view of its producer id, epoch and transaction."""

    transactional_id: str
    state: State = S.UNINITIALIZED
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_version: int = 0
    last_error: str | None = None
    in_flight: str | None = None  # the transactional request awaiting its response
    txn_coordinator_known: bool = False
    group_coordinator_known: bool = False
    init_pending: bool = False  # an InitProducerId is to be sent
    new_partitions: frozenset[str] = frozenset()  # TV1: to be added with AddPartitionsToTxn
    pending_partitions: frozenset[str] = frozenset()  # in an AddPartitionsToTxn in flight
    partitions: frozenset[str] = frozenset()  # in the transaction
    unsent: tuple[str, ...] = ()  # records (by partition) waiting to be produced
    produce_in_flight: frozenset[str] = frozenset()
    offsets_stage: str | None = None  # "add" (AddOffsetsToTxn) -> "commit" (TxnOffsetCommit) -> None
    transaction_started: bool = False
    epoch_bump_required: bool = False  # clientSideEpochBumpRequired
    end_result: str | None = None  # "COMMIT" / "ABORT" once the application asked
    coordinator_supports_epoch_bump: bool = True

    @property
    def tv2(self) -> bool:
        return self.transaction_version >= 2

    @property
    def is_completing(self) -> bool:
        return self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one step showed: the exception thrown to the application and the requests dispatched, in
    order (transactional requests first; ``"FindCoordinator:GROUP"`` names a lookup's key type)."""

    throws: str | None = None
    sends: tuple[str, ...] = ()


def transition_to(c: ClientState, target: State, error: str | None = None) -> ClientState | None:
    """``transitionTo``: None when the table refuses (Kafka throws ``IllegalStateException``)."""
    if c.state not in VALID_TRANSITIONS[target]:
        return None
    if target is S.ABORTABLE_ERROR and c.state is S.ABORTING_TRANSACTION:
        return c  # transitionToAbortableError is a no-op while aborting
    return replace(c, state=target, last_error=error if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR) else c.last_error)


def _fatal(c: ClientState, error: str) -> ClientState:
    return replace(c, state=S.FATAL_ERROR, last_error=error)


def _abortable(c: ClientState, error: str, bump: bool = False) -> ClientState:
    if c.state is S.ABORTING_TRANSACTION:
        return c
    moved = transition_to(c, S.ABORTABLE_ERROR, error)
    if moved is None:  # an invalid transition on the Sender thread poisons the manager
        return _fatal(c, ILLEGAL_STATE)
    return replace(moved, epoch_bump_required=moved.epoch_bump_required or bump)


def _abortable_or_fatal(c: ClientState, error: str) -> ClientState:
    """``transitionToAbortableErrorOrFatalError``."""
    if c.coordinator_supports_epoch_bump or c.tv2:
        return _abortable(c, error, bump=c.coordinator_supports_epoch_bump and not c.tv2)
    return _fatal(c, error)


def maybe_fail_with_error(c: ClientState) -> str | None:
    """``maybeFailWithError``: the exception an API call throws in an error state."""
    if c.state not in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
        return None
    if c.last_error in (FENCED, "InvalidProducerEpochException"):
        return c.last_error
    return KAFKA


# --- the Sender: what goes out after a step ------------------------------------------------------

def dispatch(c: ClientState) -> tuple[ClientState, tuple[str, ...]]:
    """Send what nothing blocks: one transactional request (coordinator lookup first), then produces."""
    sent: list[str] = []
    if c.state is not S.FATAL_ERROR and c.in_flight is None:
        request = _next_transactional_request(c)
        if request == "EndTxn:local":
            c = _reset_transaction_state(c)
            return dispatch(c)
        if request is not None:
            c = replace(c, in_flight=request)
            sent.append(request)
            if request == "AddPartitionsToTxn":
                c = replace(c, pending_partitions=c.new_partitions, new_partitions=frozenset())
    if c.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
        for partition in dict.fromkeys(c.unsent):
            if partition in c.partitions and partition not in c.produce_in_flight:
                remaining = list(c.unsent)
                remaining.remove(partition)
                c = replace(c, unsent=tuple(remaining), produce_in_flight=c.produce_in_flight | {partition})
                sent.append("Produce")
    return c, tuple(sent)


def _next_transactional_request(c: ClientState) -> str | None:
    wants: str | None = None
    if c.init_pending:
        wants = "InitProducerId"
    elif c.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION) and c.new_partitions:
        wants = "AddPartitionsToTxn"
    elif c.offsets_stage == "add":
        wants = "AddOffsetsToTxn"
    elif c.offsets_stage == "commit":
        if not c.group_coordinator_known:
            return "FindCoordinator:GROUP"
        return "TxnOffsetCommit"
    elif c.is_completing and c.end_result is not None:
        blocked = c.new_partitions or c.pending_partitions or c.produce_in_flight or c.unsent
        if blocked:
            return None
        if not c.transaction_started:
            return "EndTxn:local"  # nothing was added: the transaction completes without an RPC
        wants = "EndTxn"
    if wants is not None and not c.txn_coordinator_known:
        return "FindCoordinator:TRANSACTION"
    return wants


def _reset_transaction_state(c: ClientState) -> ClientState:
    """``resetTransactionState``: READY, or INITIALIZING with an epoch bump to send first."""
    bump = c.epoch_bump_required
    return replace(c, state=S.INITIALIZING if bump else S.READY, last_error=None, epoch_bump_required=False,
                   transaction_started=False, new_partitions=frozenset(), pending_partitions=frozenset(),
                   partitions=frozenset(), unsent=(), offsets_stage=None, end_result=None, init_pending=bump)


def _step(c: ClientState, throws: str | None = None) -> tuple[ClientState, Outcome]:
    c, sends = dispatch(c)
    return c, Outcome(throws, sends)


# --- API calls (the application thread) ------------------------------------------------------------

def init_transactions(c: ClientState) -> tuple[ClientState, Outcome]:
    """``initTransactions``: INITIALIZING, and InitProducerId (after a coordinator lookup)."""
    error = maybe_fail_with_error(c) if c.state is S.FATAL_ERROR else None
    if error:
        return c, Outcome(error)
    moved = transition_to(c, S.INITIALIZING)
    if moved is None:
        return c, Outcome(ILLEGAL_STATE)
    return _step(replace(moved, init_pending=True, producer_id=-1, producer_epoch=-1))


def begin_transaction(c: ClientState) -> tuple[ClientState, Outcome]:
    error = maybe_fail_with_error(c)
    if error:
        return c, Outcome(error)
    moved = transition_to(c, S.IN_TRANSACTION)
    return (c, Outcome(ILLEGAL_STATE)) if moved is None else _step(moved)


def send(c: ClientState, partition: str) -> tuple[ClientState, Outcome]:
    """``KafkaProducer.send`` of one record: ``failIfNotReadyForSend`` then ``maybeAddPartition``."""
    if c.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
        return c, Outcome(KAFKA)
    if c.state is not S.IN_TRANSACTION or c.producer_id < 0:
        return c, Outcome(ILLEGAL_STATE)
    if c.tv2:
        c = replace(c, partitions=c.partitions | {partition}, transaction_started=True)
    elif partition not in c.partitions | c.pending_partitions:
        c = replace(c, new_partitions=c.new_partitions | {partition})
    return _step(replace(c, unsent=(*c.unsent, partition)))


def send_offsets_to_transaction(c: ClientState, group_id: str) -> tuple[ClientState, Outcome]:
    error = maybe_fail_with_error(c)
    if error:
        return c, Outcome(error)
    if c.state is not S.IN_TRANSACTION:
        return c, Outcome(ILLEGAL_STATE)
    return _step(replace(c, offsets_stage="commit" if c.tv2 else "add"))


def commit_transaction(c: ClientState) -> tuple[ClientState, Outcome]:
    """``beginCommit``: an error state throws; EndTxn(COMMIT) once the transaction's requests are done."""
    error = maybe_fail_with_error(c)
    if error:
        return c, Outcome(error)
    moved = transition_to(c, S.COMMITTING_TRANSACTION)
    return (c, Outcome(ILLEGAL_STATE)) if moved is None else _step(replace(moved, end_result="COMMIT"))


def abort_transaction(c: ClientState) -> tuple[ClientState, Outcome]:
    """``beginAbort``: allowed from an abortable error; partitions not yet added are dropped."""
    if c.state is not S.ABORTABLE_ERROR:
        error = maybe_fail_with_error(c)
        if error:
            return c, Outcome(error)
    moved = transition_to(c, S.ABORTING_TRANSACTION)
    if moved is None:
        return c, Outcome(ILLEGAL_STATE)
    return _step(replace(moved, end_result="ABORT", new_partitions=frozenset(), unsent=()))


# --- responses (the Sender thread) ---------------------------------------------------------------

def on_response(c: ClientState, request: str, error: Errors, producer_id: int = -1, producer_epoch: int = -1,
                key_type: str = "TRANSACTION", partition: str | None = None) -> tuple[ClientState, Outcome]:
    """The response to ``request`` (``FindCoordinator``, ``InitProducerId``, ``AddPartitionsToTxn``,
    ``AddOffsetsToTxn``, ``TxnOffsetCommit``, ``EndTxn`` or ``Produce`` for ``partition``)."""
    if request == "Produce":
        return _step(_on_produce(c, error, partition))
    if request not in _HANDLERS:
        raise ValueError(f"unknown response {request!r}")
    handler = _HANDLERS[request]
    c = replace(c, in_flight=None)
    if request == "FindCoordinator":
        return _step(_on_find_coordinator(c, error, key_type))
    retry = error in RETRIABLE or (error in COORDINATOR_MOVED and request != "TxnOffsetCommit")
    if retry:  # the handler re-enqueues its request (after a new lookup when the coordinator moved)
        if request == "AddPartitionsToTxn":
            c = replace(c, new_partitions=c.new_partitions | c.pending_partitions, pending_partitions=frozenset())
        if error in COORDINATOR_MOVED:
            c = replace(c, txn_coordinator_known=False)
        return _step(c)
    assert handler is not None
    return _step(handler(c, error, producer_id, producer_epoch))


def _on_find_coordinator(c: ClientState, error: Errors, key_type: str) -> ClientState:
    if error is Errors.NONE:
        return replace(c, group_coordinator_known=True) if key_type == "GROUP" \
            else replace(c, txn_coordinator_known=True)
    if error in RETRIABLE or error in COORDINATOR_MOVED:
        return c
    if error is Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return _fatal(c, EXCEPTION_NAMES[error])
    if error in (Errors.GROUP_AUTHORIZATION_FAILED, Errors.TRANSACTION_ABORTABLE):
        return _abortable(c, EXCEPTION_NAMES[error])
    return _fatal(c, KAFKA)


def _fenced_or(c: ClientState, error: Errors) -> ClientState | None:
    if error in (Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH):
        return _fatal(c, FENCED)
    return None


def _on_init_producer_id(c: ClientState, error: Errors, producer_id: int, producer_epoch: int) -> ClientState:
    if error is Errors.NONE:
        ready = transition_to(replace(c, init_pending=False), S.READY)
        if ready is None:
            return _fatal(c, ILLEGAL_STATE)
        return replace(ready, producer_id=producer_id, producer_epoch=producer_epoch, epoch_bump_required=False)
    fenced = _fenced_or(c, error)
    if fenced is not None:
        return fenced
    if error in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED,
                 Errors.TRANSACTION_ABORTABLE):
        return _abortable(replace(c, init_pending=False), EXCEPTION_NAMES[error])
    return _fatal(c, EXCEPTION_NAMES.get(error, KAFKA))


def _on_add_partitions(c: ClientState, error: Errors, *_: int) -> ClientState:
    if error is Errors.NONE:
        return replace(c, partitions=c.partitions | c.pending_partitions, pending_partitions=frozenset(),
                       transaction_started=True)
    c = replace(c, pending_partitions=frozenset())
    fenced = _fenced_or(c, error)
    if fenced is not None:
        return fenced
    if error in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                 Errors.INVALID_PRODUCER_ID_MAPPING):
        return _fatal(c, EXCEPTION_NAMES[error])
    if error is Errors.UNKNOWN_PRODUCER_ID:
        return _abortable_or_fatal(c, EXCEPTION_NAMES[error])
    return _abortable(c, EXCEPTION_NAMES.get(error, KAFKA))


def _on_add_offsets(c: ClientState, error: Errors, *_: int) -> ClientState:
    if error is Errors.NONE:
        return replace(c, offsets_stage="commit", transaction_started=True)
    c = replace(c, offsets_stage=None)
    fenced = _fenced_or(c, error)
    if fenced is not None:
        return fenced
    if error in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                 Errors.INVALID_PRODUCER_ID_MAPPING):
        return _fatal(c, EXCEPTION_NAMES[error])
    if error is Errors.UNKNOWN_PRODUCER_ID:
        return _abortable_or_fatal(c, EXCEPTION_NAMES[error])
    if error in (Errors.GROUP_AUTHORIZATION_FAILED, Errors.TRANSACTION_ABORTABLE):
        return _abortable(c, EXCEPTION_NAMES[error])
    return _fatal(c, KAFKA)


def _on_txn_offset_commit(c: ClientState, error: Errors, *_: int) -> ClientState:
    if error is Errors.NONE:
        return replace(c, offsets_stage=None, transaction_started=True)
    if error in COORDINATOR_MOVED or error is Errors.REQUEST_TIMED_OUT:
        return replace(c, group_coordinator_known=False)
    fenced = _fenced_or(c, error)
    if fenced is not None:
        return fenced
    c = replace(c, offsets_stage=None)
    if error in (Errors.GROUP_AUTHORIZATION_FAILED, Errors.FENCED_INSTANCE_ID, Errors.TRANSACTION_ABORTABLE):
        return _abortable(c, EXCEPTION_NAMES.get(error, KAFKA))
    if error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.GROUP_ID_NOT_FOUND,
                 Errors.STALE_MEMBER_EPOCH):
        return _abortable(c, "CommitFailedException")
    return _fatal(c, EXCEPTION_NAMES.get(error, KAFKA))


def _on_end_txn(c: ClientState, error: Errors, producer_id: int, producer_epoch: int) -> ClientState:
    if error is Errors.NONE:
        if c.tv2 and producer_id != -1:
            c = replace(c, producer_id=producer_id, producer_epoch=producer_epoch)
        return _reset_transaction_state(c)
    fenced = _fenced_or(c, error)
    if fenced is not None:
        return fenced
    if error is Errors.TRANSACTION_ABORTABLE:
        return _abortable(c, EXCEPTION_NAMES[error]) if c.end_result == "COMMIT" else _fatal(c, KAFKA)
    if error is Errors.UNKNOWN_PRODUCER_ID:
        return _abortable_or_fatal(c, EXCEPTION_NAMES[error])
    return _fatal(c, EXCEPTION_NAMES.get(error, KAFKA))


def _on_produce(c: ClientState, error: Errors, partition: str | None) -> ClientState:
    """The answer to one produce; an error goes through ``maybeTransitionToErrorState``."""
    answered = partition if partition is not None else min(c.produce_in_flight, default=None)
    c = replace(c, produce_in_flight=c.produce_in_flight - {answered} if answered else c.produce_in_flight)
    if error is Errors.NONE:
        return c
    if error in PRODUCE_FATAL:
        return _fatal(c, EXCEPTION_NAMES.get(error, KAFKA))
    bump = c.coordinator_supports_epoch_bump and not c.tv2 and not c.is_completing
    return _abortable(c, EXCEPTION_NAMES.get(error, KAFKA), bump=bump)


_HANDLERS: dict[str, Callable[[ClientState, Errors, int, int], ClientState] | None] = {
    "FindCoordinator": None, "InitProducerId": _on_init_producer_id, "AddPartitionsToTxn": _on_add_partitions,
    "AddOffsetsToTxn": _on_add_offsets, "TxnOffsetCommit": _on_txn_offset_commit, "EndTxn": _on_end_txn,
}
