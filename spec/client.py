"""The producer client's transaction manager: its states, the requests its Sender dispatches, and how it
classifies every response.

System
    One transactional producer (KIP-98, KIP-360, KIP-890 client side) as the application sees it (the
    ``KafkaProducer``/``TransactionManager`` API calls, on the *application thread*) and as the brokers
    see it (the requests its ``Sender`` dispatches and the responses it handles, on the *Sender
    thread*). :class:`ClientState` is ``TransactionManager`` plus the parts of ``RecordAccumulator`` and
    ``Sender`` that decide what goes out: the priority queue of transactional requests with at most one
    in flight, the coordinators known, records not yet drained, batches in flight or waiting for a retry,
    and the next sequence number per partition.

    It is the one client: the model checker's producer (:mod:`txnspec.spec.producer`) is a named projection of
    it (:mod:`txnspec.spec.projection`) and reads its error rules, which are data here (:data:`RESPONSE_RULES`,
    one table per response handler; :func:`classify_produce_error` for a Produce).

    Every API call and every response is one pure function returning ``(new state, ClientOutcome)``:
    the exception thrown to the application (Kafka's simple class name) and the requests dispatched
    during the step. After each call or response the Sender runs until it can send nothing more without a
    further response (:func:`run_sender`). An ``IllegalStateException`` on the application thread leaves
    the state unchanged; an invalid transition on the Sender thread poisons the manager (FATAL_ERROR with
    an ``IllegalStateException`` as last error, KAFKA-14831).

Kafka classes followed (trunk, 4.5.0-SNAPSHOT)
    ``clients/.../producer/internals/TransactionManager.java`` (``State.isTransitionValid``,
    ``initializeTransactions``, ``beginTransaction``, ``prepareTransaction``, ``maybeAddPartition``,
    ``sendOffsetsToTransaction``, ``beginCommit``, ``beginAbort``, ``beginCompletingTransaction``,
    ``maybeFailWithError``, ``handleCachedTransactionRequestResult``, ``throwIfPendingState``,
    ``nextRequest``, ``maybeTerminateRequestWithError``, ``lookupCoordinator``,
    ``maybeTransitionToErrorState``, ``handleFailedBatch``, ``canRetry``, ``markSequenceUnresolved``,
    ``maybeResolveSequences``, ``resetTransactionState``, and each ``*Handler.handleResponse``);
    ``Sender.runOnce`` / ``maybeSendAndPollTransactionalRequest`` / ``completeBatch`` / ``sendProducerData``
    (expired batches); ``RecordAccumulator.drain`` (``shouldStopDrainBatchesForPartition``, ``shouldBackoff``),
    ``reenqueue`` (``insertInSequenceOrder``) and ``abortUndrainedBatches``; ``TxnPartitionMap``
    (``adjustSequencesDueToFailedBatch``); ``KafkaProducer.send`` (``doSend``: the record is appended before
    ``maybeAddPartition``; an ``ApiException`` goes into the future, not to the caller).

Assumptions
    * The application awaits each blocking call (``initTransactions``, ``commitTransaction``,
      ``abortTransaction``) until its result completes; a result that has not completed is a call still
      pending (``pending_transition``, Kafka's ``PendingStateTransition`` of a timed-out call): calling the
      same operation again returns it, any other transactional operation throws IllegalStateException.
    * Retries are unlimited (``retries`` = Integer.MAX_VALUE): a retriable produce error always re-enqueues its
      batch. A batch expires (``delivery.timeout.ms``) only when :func:`expire_batch` says so.
    * ``coordinatorSupportsBumpingEpoch`` (InitProducerId v3+), ``max.in.flight.requests``, ``batch.size`` (as
      a record count) and whether ``retry.backoff.ms`` is a step of its own are configuration
      (:class:`ClientConfig`); by default the coordinator supports epoch bumps, one batch per partition is in
      flight (``guaranteeMessageOrder``), a batch takes every record not yet drained and a retry goes at once.
    * The priority queue is FIFO among equal priorities (Java's heap leaves that order unspecified).
    * A produce error on a transactional producer is never a retention loss (the response's log start
      offset is assumed known and not past the last acknowledged offset), so UNKNOWN_PRODUCER_ID fails
      the batch; OUT_OF_ORDER_SEQUENCE_NUMBER answering the first batch in flight fails it (its sequence is taken
      as the next one the broker expects: ``isNextSequence``), and is retried behind an earlier batch still in
      flight while the partition's sequences are resolved.

Not modelled
    Idempotent-only producers (``bumpIdempotentEpochAndResetIdIfNeeded``), the acknowledgement of a batch
    already expired (its late answer is ignored), the renumbering of later batches in flight when one fails for good,
    batch splitting (MESSAGE_TOO_LARGE), record sizes, metadata, back-off timing (a back-off is one step).

KIP-939 (two-phase commit, 4.4's client)
    ``prepareTransaction``, ``completeTransaction(state)`` (commit exactly when the state matches, else abort),
    ``initTransactions(keepPreparedTxn)`` and InitProducerId v6's ``Enable2Pc`` (``ClientConfig.enable_two_pc``).
    As in 4.4, a transaction kept by ``keepPreparedTxn`` leaves ``transactionStarted`` false, so its EndTxn is
    completed locally (docs/kip-939.md, finding 4).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TypeAlias

from txnspec.spec.constants import INT_MAX_VALUE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txnspec.spec.errors import EXCEPTION_NAMES, RETRIABLE_ERRORS, Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    FindCoordinator,
    InitProducerId,
    InitProducerIdResponse,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
)


class State(enum.Enum):
    """``TransactionManager.State``."""

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
UNINITIALIZED, INITIALIZING, READY = S.UNINITIALIZED, S.INITIALIZING, S.READY
IN_TRANSACTION, PREPARED_TRANSACTION = S.IN_TRANSACTION, S.PREPARED_TRANSACTION
COMMITTING_TRANSACTION, ABORTING_TRANSACTION = S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION
ABORTABLE_ERROR, FATAL_ERROR = S.ABORTABLE_ERROR, S.FATAL_ERROR

# State.isTransitionValid (trunk): target -> the states it may follow. FATAL_ERROR follows any state.
VALID_PREVIOUS_STATES: Mapping[State, frozenset[State]] = MappingProxyType({
    UNINITIALIZED: frozenset({READY, ABORTABLE_ERROR}),
    INITIALIZING: frozenset({UNINITIALIZED, COMMITTING_TRANSACTION, ABORTING_TRANSACTION}),
    READY: frozenset({INITIALIZING, COMMITTING_TRANSACTION, ABORTING_TRANSACTION}),
    IN_TRANSACTION: frozenset({READY}),
    PREPARED_TRANSACTION: frozenset({IN_TRANSACTION, INITIALIZING}),
    COMMITTING_TRANSACTION: frozenset({IN_TRANSACTION, PREPARED_TRANSACTION}),
    ABORTING_TRANSACTION: frozenset({IN_TRANSACTION, PREPARED_TRANSACTION, ABORTABLE_ERROR}),
    ABORTABLE_ERROR: frozenset({IN_TRANSACTION, COMMITTING_TRANSACTION, ABORTABLE_ERROR, INITIALIZING}),
    FATAL_ERROR: frozenset(State),
})


def is_transition_valid(source: State, target: State) -> bool:
    """``State.isTransitionValid``."""
    return source in VALID_PREVIOUS_STATES[target]


class Priority(enum.IntEnum):
    """``TransactionManager.Priority``: the order in which queued transactional requests go out."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


# Exception simple names (what the application sees).
PRODUCER_FENCED = "ProducerFencedException"
INVALID_PRODUCER_EPOCH = "InvalidProducerEpochException"
ILLEGAL_STATE = "IllegalStateException"
KAFKA_EXCEPTION = "KafkaException"
TRANSACTION_ABORTABLE = "TransactionAbortableException"
COMMIT_FAILED = "CommitFailedException"
TOPIC_AUTHORIZATION = "TopicAuthorizationException"
GROUP_AUTHORIZATION = "GroupAuthorizationException"
TRANSACTIONAL_ID_AUTHORIZATION = "TransactionalIdAuthorizationException"
CLUSTER_AUTHORIZATION = "ClusterAuthorizationException"
AUTHENTICATION = "AuthenticationException"
INVALID_TXN_STATE = "InvalidTxnStateException"

# ApiException subclasses among the exceptions a transactional call can throw: KafkaProducer.send returns
# them in the future instead of throwing (and hands them to maybeTransitionToErrorState).
API_EXCEPTIONS = frozenset(EXCEPTION_NAMES.values()) | {COMMIT_FAILED}


def exception_of(error: Errors) -> str:
    """``Errors.exception()`` by simple class name."""
    return str(EXCEPTION_NAMES.get(error, "ApiException"))


# --- the error rules: one table per response handler (used here and by spec/producer.py) ---------------

class Reaction(enum.Enum):
    """A branch of a ``TxnRequestHandler.handleResponse``, or how ``Sender.completeBatch`` settles a produce."""

    DONE = "done"  # result.done() (a produce: completeBatch)
    LOOKUP_AND_RETRY = "lookup and retry"  # lookupCoordinator, then reenqueue
    RETRY = "retry"  # reenqueue (a produce: reenqueueBatch, keeping its sequence)
    ABORTABLE = "abortable"  # abortableError (a produce: maybeTransitionToErrorState)
    ABORTABLE_IF_POSSIBLE = "abortable if possible"  # abortableErrorIfPossible: a TV < 2 client bumps its epoch
    FATAL = "fatal"  # fatalError

    @property
    def retries(self) -> bool:
        return self in (Reaction.RETRY, Reaction.LOOKUP_AND_RETRY)


# maybeTransitionToErrorState: a failed produce (or send) with one of these is fatal for any producer.
PRODUCE_FATAL_ERRORS = frozenset({Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                  Errors.PRODUCER_FENCED, Errors.UNSUPPORTED_VERSION,
                                  Errors.INVALID_PRODUCER_ID_MAPPING})
FATAL_EXCEPTIONS = frozenset(exception_of(e) for e in PRODUCE_FATAL_ERRORS)
COORDINATOR_MOVED = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})
FENCED_ERRORS = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH})
# AddPartitionsToTxn / AddOffsetsToTxn / EndTxn: fatal with the error's own exception (trunk).
FATAL_COORDINATOR_ERRORS = frozenset({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                                      Errors.INVALID_PRODUCER_ID_MAPPING})
# TxnOffsetCommitHandler: the group membership errors of KIP-447 (CommitFailedException)
MEMBERSHIP_ERRORS = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.GROUP_ID_NOT_FOUND,
                               Errors.STALE_MEMBER_EPOCH})

# A rule: (the errors it applies to, None for any error no earlier rule took; the reaction; the exception's simple
# name, None for the error's own). The first rule whose errors hold the response's error decides.
Rule: TypeAlias = tuple[frozenset[Errors] | None, Reaction, str | None]
_R = Reaction
_OK: Rule = (frozenset({Errors.NONE}), _R.DONE, None)
_RETRY: tuple[Rule, ...] = ((COORDINATOR_MOVED, _R.LOOKUP_AND_RETRY, None), (RETRIABLE_ERRORS, _R.RETRY, None))
_FENCED: Rule = (FENCED_ERRORS, _R.FATAL, PRODUCER_FENCED)
_ABORTABLE: Rule = (frozenset({Errors.TRANSACTION_ABORTABLE}), _R.ABORTABLE, TRANSACTION_ABORTABLE)
_UNKNOWN_PID: Rule = (frozenset({Errors.UNKNOWN_PRODUCER_ID}), _R.ABORTABLE_IF_POSSIBLE, None)
_COORDINATOR_FATAL: Rule = (FATAL_COORDINATOR_ERRORS, _R.FATAL, None)
_ELSE_FATAL: Rule = (None, _R.FATAL, KAFKA_EXCEPTION)
_ONE = frozenset

# TransactionManager's handlers (trunk), row by row; the key is the request (EndTxn by its result).
RESPONSE_RULES: Mapping[str, tuple[Rule, ...]] = MappingProxyType({
    "FindCoordinator": (
        _OK, (RETRIABLE_ERRORS, _R.RETRY, None),
        (_ONE({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}), _R.FATAL, TRANSACTIONAL_ID_AUTHORIZATION),
        (_ONE({Errors.GROUP_AUTHORIZATION_FAILED}), _R.ABORTABLE, GROUP_AUTHORIZATION), _ABORTABLE, _ELSE_FATAL),
    "InitProducerId": (
        _OK, *_RETRY,
        (_ONE({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED}), _R.ABORTABLE, None),
        _FENCED, _ABORTABLE, _ELSE_FATAL),
    # AddPartitionsToTxnHandler: after TRANSACTION_ABORTABLE the pending partitions are dropped (see the handler)
    "AddPartitionsToTxn": (
        _OK, *_RETRY, _FENCED, _COORDINATOR_FATAL, _UNKNOWN_PID, _ABORTABLE,
        (_ONE({Errors.TOPIC_AUTHORIZATION_FAILED}), _R.ABORTABLE, TOPIC_AUTHORIZATION),
        (None, _R.ABORTABLE, KAFKA_EXCEPTION)),  # OPERATION_NOT_ATTEMPTED or unexpected: "Could not add partitions"
    "AddOffsetsToTxn": (
        _OK, *_RETRY, _UNKNOWN_PID, _FENCED, _COORDINATOR_FATAL,
        (_ONE({Errors.GROUP_AUTHORIZATION_FAILED}), _R.ABORTABLE, GROUP_AUTHORIZATION), _ABORTABLE, _ELSE_FATAL),
    # the group coordinator is looked up again after a timeout too; fatal or abortable drops the pending offsets
    "TxnOffsetCommit": (
        _OK, (COORDINATOR_MOVED | {Errors.REQUEST_TIMED_OUT}, _R.LOOKUP_AND_RETRY, None),
        (RETRIABLE_ERRORS, _R.RETRY, None),
        (_ONE({Errors.GROUP_AUTHORIZATION_FAILED}), _R.ABORTABLE, GROUP_AUTHORIZATION),
        (_ONE({Errors.FENCED_INSTANCE_ID, Errors.TRANSACTION_ABORTABLE}), _R.ABORTABLE, None),
        (MEMBERSHIP_ERRORS, _R.ABORTABLE, COMMIT_FAILED), _FENCED,
        (_ONE({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT}), _R.FATAL, None),
        _ELSE_FATAL),
    "EndTxn(COMMIT)": (_OK, *_RETRY, _FENCED, _COORDINATOR_FATAL, _UNKNOWN_PID, _ABORTABLE, _ELSE_FATAL),
    # "Failed to abort transaction": TRANSACTION_ABORTABLE on an abort is fatal
    "EndTxn(ABORT)": (_OK, *_RETRY, _FENCED, _COORDINATOR_FATAL, _UNKNOWN_PID,
                      (_ONE({Errors.TRANSACTION_ABORTABLE}), _R.FATAL, KAFKA_EXCEPTION), _ELSE_FATAL),
})


def classify_response(request_name: str, error: Errors, result: TransactionResult | None = None
                      ) -> tuple[Reaction, str | None]:
    """What the handler of ``request_name`` does with ``error`` (``result``: an EndTxn's), and the exception it
    fails with (None when it does not fail)."""
    key = f"EndTxn({result.value})" if request_name == "EndTxn" and result is not None else request_name
    for errors, reaction, exception in RESPONSE_RULES[key]:
        if errors is None or error in errors:
            failed = reaction in (_R.ABORTABLE, _R.ABORTABLE_IF_POSSIBLE, _R.FATAL)
            return reaction, (exception or exception_of(error)) if failed else None
    raise AssertionError(f"no rule of {key} takes {error}")  # pragma: no cover: every table ends with None


def classify_produce_error(error: Errors, earlier_in_flight: bool) -> Reaction:
    """``Sender.completeBatch`` for a transactional producer: NONE and DUPLICATE_SEQUENCE_NUMBER complete the batch;
    ``canRetry`` retries a retriable error, and an OUT_OF_ORDER_SEQUENCE_NUMBER answering a batch that is not the
    next one (``!isNextSequence``: an earlier batch of the partition is still in flight); any other error fails
    the batch (``failBatch``), fatal or abortable as ``maybeTransitionToErrorState`` says."""
    if error in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
        return _R.DONE
    if error in RETRIABLE_ERRORS or (error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and earlier_in_flight):
        return _R.RETRY
    return _R.FATAL if error in PRODUCE_FATAL_ERRORS else _R.ABORTABLE


TxnRequest: TypeAlias = FindCoordinator | InitProducerId | AddPartitionsToTxn | AddOffsetsToTxn | TxnOffsetCommit \
    | EndTxn
Response: TypeAlias = InitProducerIdResponse | EndTxnResponse | ErrorResponse | ProduceResponse


@dataclass(frozen=True, slots=True)
class TxnRequestHandler:
    """One queued transactional request (``TxnRequestHandler``) and what its completion means.

    ``completes_call``: its result is the one a pending API call waits for (Kafka's
    ``pendingTransition.result``). ``offsets``: AddOffsetsToTxn's offsets, committed after it succeeds, with
    ``member``: the member id and generation of the consumer group metadata (KIP-447) its TxnOffsetCommit carries.
    """

    request: TxnRequest
    priority: Priority
    is_retry: bool = False
    completes_call: bool = False
    offsets: tuple[tuple[str, int], ...] = ()
    member: tuple[str, int] = ("", -1)

    @property
    def name(self) -> str:
        return type(self.request).__name__

    @property
    def coordinator_type(self) -> CoordinatorType | None:
        """The coordinator it goes to (None: any broker, for FindCoordinator)."""
        if isinstance(self.request, FindCoordinator):
            return None
        if isinstance(self.request, TxnOffsetCommit):
            return CoordinatorType.GROUP
        return CoordinatorType.TRANSACTION

    @property
    def coordinator_key(self) -> str:
        if isinstance(self.request, TxnOffsetCommit):
            return str(self.request.group_id)
        key = self.request.key if isinstance(self.request, FindCoordinator) else self.request.transactional_id
        return str(key or "")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Producer configuration and broker capabilities the client's behaviour depends on."""

    txn_timeout_ms: int = 60_000  # transaction.timeout.ms
    coordinator_supports_bumping_epoch: bool = True  # the coordinator's InitProducerId is v3+
    max_in_flight_per_partition: int = 1  # 1: guaranteeMessageOrder (the partition is muted while in flight)
    max_sequence: int = INT_MAX_VALUE  # sequences wrap to 0 after this
    # batch.size as a record count (None: a batch takes every record of its partition not yet drained)
    max_batch_records: int | None = None
    # retry.backoff.ms: a batch re-enqueued for a retry waits until retry_backoff_elapsed (False: no wait)
    retry_backoff: bool = False
    enable_two_pc: bool = False  # transaction.two.phase.commit.enable (KIP-939)


DEFAULT_CONFIG = ClientConfig()


@dataclass(frozen=True, slots=True)
class ClientState:
    """``TransactionManager`` with the Sender's queue and the accumulator's batches (see module doc)."""

    transactional_id: str
    state: State = UNINITIALIZED
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_version: int = 0  # isTransactionV2Enabled := >= 2
    finalized_transaction_version: int | None = None  # what ApiVersions reports; None: as transaction_version
    last_error: str | None = None
    new_partitions: frozenset[str] = frozenset()  # newPartitionsInTransaction
    pending_partitions: frozenset[str] = frozenset()  # pendingPartitionsInTransaction
    partitions: frozenset[str] = frozenset()  # partitionsInTransaction
    pending_offsets: tuple[tuple[str, int], ...] = ()  # pendingTxnOffsetCommits, sorted
    transaction_started: bool = False
    client_side_epoch_bump_required: bool = False
    prepared_txn_state: tuple[int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    pending_requests: tuple[TxnRequestHandler, ...] = ()  # by priority, FIFO within one
    in_flight: TxnRequestHandler | None = None  # the one transactional request awaiting its response
    txn_coordinator_known: bool = False
    group_coordinator_known: bool = False
    pending_transition: tuple[State, str] | None = None  # (state, operation) of a call whose result is pending
    # idempotence and the accumulator
    sequences: tuple[tuple[str, int], ...] = ()  # next sequence per partition, sorted
    accumulator: tuple[tuple[str, int], ...] = ()  # undrained records: (partition, record count), in order
    retry_batches: tuple[Produce, ...] = ()  # sent batches re-enqueued for a retry (keeping their sequence), in order
    in_flight_batches: tuple[Produce, ...] = ()
    backing_off: frozenset[Produce] = frozenset()  # retry batches whose retry.backoff.ms has not elapsed
    retried: frozenset[Produce] = frozenset()  # batches re-enqueued at least once (ProducerBatch.inRetry)
    last_acked: tuple[tuple[str, int], ...] = ()  # lastAckedSequence per partition, sorted (none: -1)
    unresolved: tuple[tuple[str, int], ...] = ()  # partitionsWithUnresolvedSequences: partition -> next sequence

    @property
    def tv2(self) -> bool:
        return self.transaction_version >= 2

    @property
    def is_completing(self) -> bool:
        return self.state in (COMMITTING_TRANSACTION, ABORTING_TRANSACTION)

    @property
    def has_error(self) -> bool:
        return self.state in (ABORTABLE_ERROR, FATAL_ERROR)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and self.producer_epoch >= 0

    @property
    def has_incomplete_batches(self) -> bool:
        """``RecordAccumulator.hasIncomplete``."""
        return bool(self.accumulator or self.retry_batches or self.in_flight_batches)

    def next_sequence(self, partition: str) -> int:
        for p, seq in self.sequences:
            if p == partition:
                return seq
        return 0


@dataclass(frozen=True, slots=True)
class ClientOutcome:
    """What a step showed the world: the exception thrown to the application and the requests sent, in
    order (transactional requests before produces)."""

    throws: str | None = None
    sends: tuple[TxnRequest | Produce, ...] = ()

    @property
    def send_names(self) -> tuple[str, ...]:
        return tuple(type(r).__name__ for r in self.sends)


class _Throw(Exception):
    """Control flow: an exception thrown on the application thread (the state is left as it was)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Poisoned(Exception):
    """Control flow: an invalid transition on the Sender thread; ``state`` is the poisoned manager."""

    def __init__(self, state: ClientState) -> None:
        super().__init__("poisoned")
        self.state = state


# --- helpers ----------------------------------------------------------------------------------------

def increment_sequence(sequence: int, increment: int, max_sequence: int = INT_MAX_VALUE) -> int:
    """``DefaultRecordBatch.incrementSequence``: wraps to 0 after ``max_sequence``."""
    if sequence > max_sequence - increment:
        return increment - (max_sequence - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int, max_sequence: int = INT_MAX_VALUE) -> int:
    """``DefaultRecordBatch.decrementSequence``."""
    if sequence < decrement:
        return max_sequence - (decrement - sequence) + 1
    return sequence - decrement


def _set_pair(pairs: tuple[tuple[str, int], ...], key: str, value: int | None) -> tuple[tuple[str, int], ...]:
    kept = [(k, v) for k, v in pairs if k != key]
    if value is not None:
        kept.append((key, value))
    return tuple(sorted(kept))


def _transition(c: ClientState, target: State, error: str | None = None, *, sender: bool) -> ClientState:
    """``transitionTo``: an invalid transition throws on the application thread and poisons on the Sender's."""
    if not is_transition_valid(c.state, target):
        if sender:
            raise _Poisoned(replace(c, state=FATAL_ERROR, last_error=ILLEGAL_STATE))
        raise _Throw(ILLEGAL_STATE)
    if target in (ABORTABLE_ERROR, FATAL_ERROR):
        assert error is not None, f"Cannot transition to {target.value} with a null exception"
        return replace(c, state=target, last_error=error)
    return replace(c, state=target, last_error=None)


def _complete_result(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    """The handler's result completed (done or failed): a pending call waiting for it is acknowledged."""
    return replace(c, pending_transition=None) if handler.completes_call else c


def _enqueue(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    """``enqueueRequest`` into the priority queue (FIFO among equal priorities)."""
    queue = list(c.pending_requests)
    at = next((i for i, h in enumerate(queue) if h.priority > handler.priority), len(queue))
    queue.insert(at, handler)
    return replace(c, pending_requests=tuple(queue))


def _reenqueue(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    return _enqueue(c, replace(handler, is_retry=True))


def lookup_coordinator(c: ClientState, key_type: CoordinatorType, key: str) -> ClientState:
    """``lookupCoordinator``: forget the coordinator and enqueue a FindCoordinator for it."""
    if key_type is CoordinatorType.GROUP:
        c = replace(c, group_coordinator_known=False)
    else:
        c = replace(c, txn_coordinator_known=False)
    return _enqueue(c, TxnRequestHandler(FindCoordinator(key_type, key), Priority.FIND_COORDINATOR))


def _fatal_error(c: ClientState, error: str) -> ClientState:
    """``transitionToFatalError`` (always valid); the pending call's result fails with it."""
    return replace(c, state=FATAL_ERROR, last_error=error, pending_transition=None)


def _abortable_error(c: ClientState, error: str) -> ClientState:
    """``transitionToAbortableError``: a no-op while aborting; otherwise the table decides (Sender thread)."""
    if c.state is ABORTING_TRANSACTION:
        return c
    return _transition(c, ABORTABLE_ERROR, error, sender=True)


def can_handle_abortable_error(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """``canHandleAbortableError``: the epoch can be bumped, by the client or by the coordinator (TV2)."""
    return config.coordinator_supports_bumping_epoch or c.tv2


def need_to_trigger_epoch_bump_from_client(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """``needToTriggerEpochBumpFromClient``."""
    return config.coordinator_supports_bumping_epoch and not c.tv2


def _abortable_error_if_possible(c: ClientState, error: str, config: ClientConfig) -> ClientState:
    """``abortableErrorIfPossible``: abortable (with a client epoch bump for TV < 2) or fatal."""
    if can_handle_abortable_error(c, config):
        if need_to_trigger_epoch_bump_from_client(c, config):
            c = replace(c, client_side_epoch_bump_required=True)
        return _abortable_error(c, error)
    return _fatal_error(c, error)


def maybe_fail_with_error(c: ClientState) -> str | None:
    """``maybeFailWithError``: the exception an operation throws in an error state (None: no error)."""
    if not c.has_error:
        return None
    if c.last_error in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ILLEGAL_STATE):
        return c.last_error
    return KAFKA_EXCEPTION


def _fail_if_error(c: ClientState) -> None:
    error = maybe_fail_with_error(c)
    if error is not None:
        raise _Throw(error)


def _throw_if_pending_state(c: ClientState) -> None:
    """``throwIfPendingState``: an earlier blocking call has not completed (it timed out)."""
    if c.pending_transition is not None:
        raise _Throw(ILLEGAL_STATE)


def _throw_if_in_prepared_state(c: ClientState) -> None:
    """``KafkaProducer.throwIfInPreparedState``."""
    if c.state is PREPARED_TRANSACTION:
        raise _Throw(ILLEGAL_STATE)


def _reset_sequence_numbers(c: ClientState) -> ClientState:
    """``resetSequenceNumbers``: every partition starts again at sequence 0, nothing acknowledged."""
    return replace(c, sequences=(), last_acked=(), unresolved=())


def reset_transaction_state(c: ClientState) -> ClientState:
    """``resetTransactionState`` (Sender thread): READY, or INITIALIZING when the client bumps the epoch."""
    c = _transition(c, INITIALIZING if c.client_side_epoch_bump_required else READY, sender=True)
    return replace(c, last_error=None, client_side_epoch_bump_required=False, transaction_started=False,
                   new_partitions=frozenset(), pending_partitions=frozenset(), partitions=frozenset(),
                   prepared_txn_state=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH))


# --- the Sender -------------------------------------------------------------------------------------

def _add_partitions_handler(c: ClientState) -> tuple[ClientState, TxnRequestHandler]:
    """``addPartitionsToTransactionHandler``: every pending partition, the new ones included."""
    pending = c.pending_partitions | c.new_partitions
    c = replace(c, pending_partitions=pending, new_partitions=frozenset())
    request = AddPartitionsToTxn(c.transactional_id, c.producer_id, c.producer_epoch, pending, 0)
    return c, TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS)


def next_request(c: ClientState) -> tuple[ClientState, TxnRequestHandler | None]:
    """``TransactionManager.nextRequest(accumulator.hasIncomplete())``."""
    if c.new_partitions:
        c, handler = _add_partitions_handler(c)
        c = _enqueue(c, handler)
    if not c.pending_requests:
        return c, None
    head = c.pending_requests[0]
    if isinstance(head.request, EndTxn) and c.has_incomplete_batches:
        return c, None  # EndTxn waits until every batch is flushed
    c = replace(c, pending_requests=c.pending_requests[1:])
    # maybeTerminateRequestWithError: in an error state only a lookup may go out (while abortable)
    if c.has_error and not (c.state is ABORTABLE_ERROR and isinstance(head.request, FindCoordinator)):
        return _complete_result(c, head), None
    nxt: TxnRequestHandler | None = head
    if isinstance(head.request, EndTxn) and not c.transaction_started:
        # nothing was added to the transaction: it completes without an EndTxn
        c = _complete_result(c, head)
        if c.state is not FATAL_ERROR:
            c = reset_transaction_state(c)
        nxt = c.pending_requests[0] if c.pending_requests else None
        c = replace(c, pending_requests=c.pending_requests[1:])
    return c, nxt


def _send_allowed(c: ClientState, partition: str) -> bool:
    """``isSendToPartitionAllowed``."""
    return c.state is not FATAL_ERROR and partition in c.partitions


def sequence_precedes(first: Produce, second: Produce, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """``first`` was sent before ``second`` on the same partition with the same producer id and epoch: its
    sequence is lower (``TxnPartitionEntry.inflightBatchesBySequence``), taken across the wrap to 0 after
    ``config.max_sequence`` within the in-flight window (Kafka's sequences never wrap in flight; a model's small
    ``max_sequence`` may)."""
    if (first.partition, first.producer_id, first.producer_epoch) \
            != (second.partition, second.producer_id, second.producer_epoch):
        return False
    distance = (second.base_sequence - first.base_sequence) % (config.max_sequence + 1)
    return 0 < distance < config.max_in_flight_per_partition


def _earlier_in_flight(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG) -> bool:
    """A batch sent before ``batch`` is still in flight or waiting for its retry: ``batch`` is not the next
    sequence the broker expects (``isNextSequence``) nor the first in flight (``firstInFlightSequence``)."""
    return any(sequence_precedes(b, batch, config) for b in (*c.in_flight_batches, *c.retry_batches))


def _reenqueue_batch(c: ClientState, batch: Produce, config: ClientConfig) -> ClientState:
    """``RecordAccumulator.reenqueue``: the batch goes back in sequence order (``insertInSequenceOrder``), keeping
    its sequence, and backs off (``retry.backoff.ms``) when the configuration says so."""
    retry = [b for b in c.retry_batches if b.partition != batch.partition or sequence_precedes(b, batch, config)]
    later = [b for b in c.retry_batches if b not in retry]
    c = replace(c, retry_batches=(*retry, batch, *later), retried=c.retried | {batch})
    return replace(c, backing_off=c.backing_off | {batch}) if config.retry_backoff else c


def adjust_sequences_due_to_failed_batch(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG
                                         ) -> ClientState:
    """``TxnPartitionMap.adjustSequencesDueToFailedBatch``: a batch of the current producer id and epoch that failed
    for good gives its sequence numbers back, so the partition's next batch takes them. (Kafka also renumbers the
    later batches in flight; here they keep theirs: the transaction aborts, and an epoch bump or TV2's EndTxn
    restarts the sequences.)"""
    if (batch.producer_id, batch.producer_epoch) != (c.producer_id, c.producer_epoch) \
            or not any(p == batch.partition for p, _ in c.sequences):
        return c  # the partition's sequences restarted since (a new epoch): nothing to give back
    seq = decrement_sequence(c.next_sequence(batch.partition), batch.record_count, config.max_sequence)
    return replace(c, sequences=_set_pair(c.sequences, batch.partition, seq))


def next_produce(c: ClientState, partition: str, config: ClientConfig = DEFAULT_CONFIG
                 ) -> tuple[ClientState, Produce | None]:
    """``RecordAccumulator.drain`` for one partition: the next batch to send, with its sequence, if any.

    A batch waiting for a retry goes first, unchanged, once its back-off has elapsed (``shouldBackoff``) and no
    batch before it is in flight (``shouldStopDrainBatchesForPartition``: ``firstInFlightSequence``); while one
    waits, no new batch goes. Otherwise the partition's undrained records (at most ``config.max_batch_records``)
    form one batch with the current producer id and epoch and the partition's next sequence (which then
    advances, wrapping to 0 after ``config.max_sequence``), unless a batch of an older producer id or epoch is
    still in flight (``hasStaleProducerIdAndEpoch``).
    """
    if not _send_allowed(c, partition) or not c.has_producer_id:
        return c, None
    in_flight = [b for b in c.in_flight_batches if b.partition == partition]
    if len(in_flight) >= config.max_in_flight_per_partition:
        return c, None  # muted
    retries = [b for b in c.retry_batches if b.partition == partition]
    if retries:
        batch = retries[0]  # the first of the partition's deque
        if batch in c.backing_off or any(sequence_precedes(b, batch, config) for b in in_flight):
            return c, None
        retry = list(c.retry_batches)
        retry.remove(batch)
        return replace(c, retry_batches=tuple(retry), in_flight_batches=(*c.in_flight_batches, batch)), batch
    undrained = sum(n for p, n in c.accumulator if p == partition)
    if undrained == 0:
        return c, None
    if any((b.producer_id, b.producer_epoch) != (c.producer_id, c.producer_epoch) for b in in_flight):
        return c, None  # no new batch while batches of an older epoch are in flight
    if any(p == partition for p, _ in c.unresolved):
        return c, None  # nor while the fate of an expired batch's sequence is unknown (hasUnresolvedSequence)
    count = undrained if config.max_batch_records is None else min(undrained, config.max_batch_records)
    seq = c.next_sequence(partition)
    batch = Produce(partition, c.producer_id, c.producer_epoch, seq, count, True, c.transactional_id)
    accumulator = tuple((p, n - count if p == partition else n) for p, n in c.accumulator)
    c = replace(c, accumulator=tuple((p, n) for p, n in accumulator if n > 0),
                sequences=_set_pair(c.sequences, partition, increment_sequence(seq, count, config.max_sequence)),
                in_flight_batches=(*c.in_flight_batches, batch))
    return c, batch


def retry_backoff_elapsed(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG
                          ) -> tuple[ClientState, ClientOutcome]:
    """``retry.backoff.ms`` has elapsed for ``batch`` (re-enqueued with ``config.retry_backoff``): the Sender may
    drain it again."""
    return _step(replace(c, backing_off=c.backing_off - {batch}), config)


def _abort_undrained_batches(c: ClientState) -> ClientState:
    """``RecordAccumulator.abortUndrainedBatches``: records without a sequence are dropped."""
    return replace(c, accumulator=())


def _abort_batches(c: ClientState) -> ClientState:
    """``Sender.maybeAbortBatches``: every incomplete batch fails (fatal error)."""
    return replace(c, accumulator=(), retry_batches=(), in_flight_batches=(), backing_off=frozenset(),
                   retried=frozenset())


def awaiting_authorization_reset(c: ClientState) -> bool:
    """``Sender.shouldHandleAuthorizationError`` applies: the Sender's next iteration resets the client."""
    return c.state is ABORTABLE_ERROR and c.last_error in (TRANSACTIONAL_ID_AUTHORIZATION, CLUSTER_AUTHORIZATION)


def sender_handle_authorization_error(c: ClientState) -> tuple[ClientState, ClientOutcome]:
    """``Sender.shouldHandleAuthorizationError``: after an abortable authorization error the queued requests
    fail, every batch is aborted and the manager goes back to UNINITIALIZED (``transitionToUninitialized``),
    so that ``initTransactions`` can be called again. Returns the state unchanged if it does not apply."""
    if not awaiting_authorization_reset(c):
        return c, ClientOutcome()
    c = replace(c, last_error=AUTHENTICATION)  # failPendingRequests: abortableError(AuthenticationException)
    c = _abort_batches(c)
    try:
        c = _transition(c, UNINITIALIZED, sender=True)
    except _Poisoned as poisoned:
        return poisoned.state, ClientOutcome()
    return replace(c, pending_transition=None, last_error=None), ClientOutcome()


def _run_once(c: ClientState, config: ClientConfig) -> tuple[ClientState, tuple[TxnRequest | Produce, ...]]:
    """``Sender.runOnce``: one iteration (see :func:`run_sender`)."""
    if c.unresolved:
        c = maybe_resolve_sequences(c, config)
    if c.state is FATAL_ERROR:
        return _abort_batches(c), ()
    if awaiting_authorization_reset(c):
        return c, ()
    if c.in_flight is not None:
        return c, ()  # while a transactional request is outstanding the Sender only polls
    if c.state is ABORTABLE_ERROR or c.state is ABORTING_TRANSACTION:
        c = _abort_undrained_batches(c)
    c, handler = next_request(c)
    if handler is not None:
        kind = handler.coordinator_type
        known = kind is None or (c.group_coordinator_known if kind is CoordinatorType.GROUP
                                 else c.txn_coordinator_known)
        if not known:
            assert kind is not None
            c = lookup_coordinator(c, kind, handler.coordinator_key)  # maybeFindCoordinatorAndRetry
            return _reenqueue(c, handler), ()
        return replace(c, in_flight=handler), (handler.request,)
    sent: list[TxnRequest | Produce] = []
    for partition in dict.fromkeys([*(p for p, _ in c.accumulator), *(b.partition for b in c.retry_batches)]):
        while True:
            c, batch = next_produce(c, partition, config)
            if batch is None:
                break
            sent.append(batch)
    return c, tuple(sent)


def run_sender(c: ClientState, config: ClientConfig = DEFAULT_CONFIG
               ) -> tuple[ClientState, tuple[TxnRequest | Produce, ...]]:
    """Run the Sender until it can send nothing more without a further response."""
    sent: list[TxnRequest | Produce] = []
    for _ in range(64):
        try:
            after, out = _run_once(c, config)
        except _Poisoned as poisoned:
            after, out = poisoned.state, ()
        sent.extend(out)
        if after == c:
            return c, tuple(sent)
        c = after
    raise AssertionError("the Sender did not settle")  # pragma: no cover


def _step(c: ClientState, config: ClientConfig, throws: str | None = None) -> tuple[ClientState, ClientOutcome]:
    c, sent = run_sender(c, config)
    return c, ClientOutcome(throws, sent)


def _call(c: ClientState, effect: ClientState | _Throw, config: ClientConfig) -> tuple[ClientState, ClientOutcome]:
    if isinstance(effect, _Throw):
        return c, ClientOutcome(effect.name)
    return _step(effect, config)


# --- API calls (the application thread) ----------------------------------------------------------------

def _cached_call(c: ClientState, target: State, operation: str) -> tuple[bool, ClientState | None]:
    """``handleCachedTransactionRequestResult``: (True, state) when the pending call's result is returned."""
    if c.pending_transition is None:
        return False, None
    if c.pending_transition[0] is not target:
        raise _Throw(ILLEGAL_STATE)  # the previous call timed out and must be retried
    return True, c


def _initialize_transactions(c: ClientState, epoch_bump: bool, config: ClientConfig,
                             keep_prepared_txn: bool = False) -> ClientState:
    """``initializeTransactions(producerIdAndEpoch)``; an epoch bump keeps the state (EndTxn moves it)."""
    _fail_if_error(c)
    cached, same = _cached_call(c, INITIALIZING, "initTransactions")
    if cached and same is not None:
        return same
    if not epoch_bump:
        c = _transition(c, INITIALIZING, sender=False)
    pid, epoch = (c.producer_id, c.producer_epoch) if epoch_bump else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    request = InitProducerId(c.transactional_id, config.txn_timeout_ms, pid, epoch, config.enable_two_pc,
                             keep_prepared_txn)
    c = _enqueue(c, TxnRequestHandler(request, Priority.EPOCH_BUMP if epoch_bump else Priority.INIT_PRODUCER_ID,
                                      completes_call=True))
    return replace(c, pending_transition=(INITIALIZING, "initTransactions"))


def init_transactions(c: ClientState, config: ClientConfig = DEFAULT_CONFIG, keep_prepared_txn: bool = False
                      ) -> tuple[ClientState, ClientOutcome]:
    """``initTransactions(keepPreparedTxn)``: INITIALIZING, then InitProducerId (after a coordinator lookup).

    Throws IllegalStateException once initialized (READY -> INITIALIZING is not in the table)."""
    try:
        _throw_if_in_prepared_state(c)
        effect: ClientState | _Throw = _initialize_transactions(c, False, config, keep_prepared_txn)
    except _Throw as thrown:
        effect = thrown
    return _call(c, effect, config)


def begin_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``beginTransaction``: READY -> IN_TRANSACTION; nothing is sent."""
    try:
        _throw_if_in_prepared_state(c)
        _throw_if_pending_state(c)
        _fail_if_error(c)
        effect: ClientState | _Throw = _transition(c, IN_TRANSACTION, sender=False)
    except _Throw as thrown:
        effect = thrown
    return _call(c, effect, config)


def prepare_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG
                        ) -> tuple[ClientState, ClientOutcome]:
    """``prepareTransaction`` (KIP-939): IN_TRANSACTION -> PREPARED_TRANSACTION, remembering (pid, epoch).
    ``KafkaProducer.prepareTransaction`` first refuses a prepared client and one without 2PC."""
    try:
        _throw_if_in_prepared_state(c)
        if not config.enable_two_pc:
            raise _Throw(INVALID_TXN_STATE)
        _throw_if_pending_state(c)
        _fail_if_error(c)
        moved = _transition(c, PREPARED_TRANSACTION, sender=False)
        effect: ClientState | _Throw = replace(moved, prepared_txn_state=(c.producer_id, c.producer_epoch))
    except _Throw as thrown:
        effect = thrown
    return _call(c, effect, config)


def _maybe_add_partition(c: ClientState, partition: str) -> ClientState:
    """``maybeAddPartition``: TV2 counts the partition at once; TV < 2 queues an AddPartitionsToTxn."""
    _fail_if_error(c)
    _throw_if_pending_state(c)
    if not c.has_producer_id or c.state is not IN_TRANSACTION:
        raise _Throw(ILLEGAL_STATE)
    if c.tv2:
        return replace(c, partitions=c.partitions | {partition}, transaction_started=True)
    if partition in c.partitions or partition in c.new_partitions or partition in c.pending_partitions:
        return c
    return replace(c, new_partitions=c.new_partitions | {partition})


def maybe_transition_to_error_state(c: ClientState, exception: str,
                                    config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``maybeTransitionToErrorState`` (a failed send or produce): fatal for the authorization, fencing,
    version and pid-mapping exceptions, abortable otherwise (retriable ones and InvalidTxnStateException
    become TransactionAbortableException); a TV < 2 client bumps its epoch on the abort unless the
    transaction is already completing."""
    if exception in FATAL_EXCEPTIONS:
        return _fatal_error(c, exception)
    retriable = {exception_of(e) for e in RETRIABLE_ERRORS}
    if exception in retriable or exception == "InvalidTxnStateException":
        exception = TRANSACTION_ABORTABLE
    if need_to_trigger_epoch_bump_from_client(c, config) and not c.is_completing:
        c = replace(c, client_side_epoch_bump_required=True)
    return _abortable_error(c, exception)


def send(c: ClientState, partition: str, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``KafkaProducer.send`` of one record to ``partition``.

    The record is appended to the accumulator, then ``maybeAddPartition`` runs: an ``ApiException`` it
    throws (ProducerFencedException, InvalidProducerEpochException) goes into the returned future and to
    ``maybeTransitionToErrorState``; other exceptions (KafkaException, IllegalStateException) are thrown.
    """
    try:
        _throw_if_in_prepared_state(c)
    except _Throw as thrown:
        return c, ClientOutcome(thrown.name)
    accumulator = list(c.accumulator)
    if accumulator and accumulator[-1][0] == partition:
        accumulator[-1] = (partition, accumulator[-1][1] + 1)
    elif any(p == partition for p, _ in accumulator):
        i = max(i for i, (p, _) in enumerate(accumulator) if p == partition)
        accumulator[i] = (partition, accumulator[i][1] + 1)
    else:
        accumulator.append((partition, 1))
    appended = replace(c, accumulator=tuple(accumulator))
    try:
        added = _maybe_add_partition(appended, partition)
    except _Throw as thrown:
        if thrown.name in API_EXCEPTIONS:
            try:
                failed = maybe_transition_to_error_state(appended, thrown.name, config)
            except _Poisoned as poisoned:
                failed = poisoned.state
            return _step(failed, config)
        return _step(appended, config, thrown.name)
    return _step(added, config)


def send_offsets_to_transaction(c: ClientState, group_id: str, offsets: Mapping[str, int] | None = None,
                                config: ClientConfig = DEFAULT_CONFIG, member: tuple[str, int] = ("", -1)
                                ) -> tuple[ClientState, ClientOutcome]:
    """``sendOffsetsToTransaction``: TV2 sends TxnOffsetCommit directly (the transaction has started);
    TV < 2 sends AddOffsetsToTxn first, then TxnOffsetCommit. ``member``: the member id and generation of the
    ``ConsumerGroupMetadata`` (KIP-447; the default: outside group management)."""
    commit = tuple(sorted((offsets or {}).items()))
    try:
        _throw_if_pending_state(c)
        _fail_if_error(c)
        if c.state is not IN_TRANSACTION:
            raise _Throw(ILLEGAL_STATE)
    except _Throw as thrown:
        return c, ClientOutcome(thrown.name)
    if c.tv2:
        request: TxnRequest = TxnOffsetCommit(c.transactional_id, group_id, c.producer_id, c.producer_epoch, commit,
                                              *member)
        c = replace(c, pending_offsets=tuple(sorted(dict((*c.pending_offsets, *commit)).items())),
                    transaction_started=True)
        handler = TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS)
    else:
        request = AddOffsetsToTxn(c.transactional_id, c.producer_id, c.producer_epoch, group_id)
        handler = TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS, offsets=commit, member=member)
    return _step(_enqueue(c, handler), config)


def _begin_completing_transaction(c: ClientState, result: TransactionResult, config: ClientConfig) -> ClientState:
    """``beginCompletingTransaction``: flush partition adds, enqueue EndTxn (with the version the transaction
    started with), then an epoch bump if the client must bump (its result is then the call's)."""
    if c.new_partitions:
        c, handler = _add_partitions_handler(c)
        c = _enqueue(c, handler)
    end_txn = EndTxn(c.transactional_id, c.producer_id, c.producer_epoch, result, 2 if c.tv2 else 0)
    c = maybe_update_transaction_v2_enabled(c, on_initialization=False)
    if c.client_side_epoch_bump_required:
        c = _enqueue(c, TxnRequestHandler(end_txn, Priority.END_TXN))
        return _initialize_transactions(c, True, config)
    return _enqueue(c, TxnRequestHandler(end_txn, Priority.END_TXN, completes_call=True))


def commit_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``beginCommit``: an error state throws; EndTxn(COMMIT) once every batch and add is done."""
    try:
        cached, same = _cached_call(c, COMMITTING_TRANSACTION, "commitTransaction")
        if cached and same is not None:
            return _step(same, config)
        _fail_if_error(c)
        moved = _transition(c, COMMITTING_TRANSACTION, sender=False)
        effect: ClientState | _Throw = _begin_completing_transaction(moved, TransactionResult.COMMIT, config)
    except _Throw as thrown:
        effect = thrown
    if isinstance(effect, ClientState):
        effect = replace(effect, pending_transition=(COMMITTING_TRANSACTION, "commitTransaction"))
    return _call(c, effect, config)


def complete_transaction(c: ClientState, prepared_txn_state: tuple[int, int], config: ClientConfig = DEFAULT_CONFIG
                         ) -> tuple[ClientState, ClientOutcome]:
    """``KafkaProducer.completeTransaction`` (KIP-939): InvalidTxnStateException unless prepared; then
    ``commitTransaction`` exactly when ``prepared_txn_state`` is the client's, else ``abortTransaction``."""
    if c.state is not PREPARED_TRANSACTION:
        return _call(c, _Throw(INVALID_TXN_STATE), config)
    if tuple(prepared_txn_state) == c.prepared_txn_state:
        return commit_transaction(c, config)
    return abort_transaction(c, config)


def abort_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``beginAbort``: allowed from ABORTABLE_ERROR; partitions not yet added are dropped."""
    try:
        cached, same = _cached_call(c, ABORTING_TRANSACTION, "abortTransaction")
        if cached and same is not None:
            return _step(same, config)
        if c.state is not ABORTABLE_ERROR:
            _fail_if_error(c)
        moved = replace(_transition(c, ABORTING_TRANSACTION, sender=False), new_partitions=frozenset())
        effect: ClientState | _Throw = _begin_completing_transaction(moved, TransactionResult.ABORT, config)
    except _Throw as thrown:
        effect = thrown
    if isinstance(effect, ClientState):
        effect = replace(effect, pending_transition=(ABORTING_TRANSACTION, "abortTransaction"))
    return _call(c, effect, config)


def maybe_update_transaction_v2_enabled(c: ClientState, on_initialization: bool) -> ClientState:
    """``maybeUpdateTransactionV2Enabled``: adopt the finalized ``transaction.version``; an upgrade to 2
    outside initialization requires a client epoch bump (the old TV1 epoch is fenced)."""
    finalized = c.finalized_transaction_version
    if finalized is None or finalized == c.transaction_version:
        return c
    upgraded = not c.tv2 and finalized >= 2
    c = replace(c, transaction_version=finalized)
    if upgraded and not on_initialization:
        c = replace(c, client_side_epoch_bump_required=True)
    return c


def finalized_features_changed(c: ClientState, transaction_version: int) -> ClientState:
    """The brokers' finalized ``transaction.version`` changed (``ApiVersions``); adopted at the next
    ``beginCompletingTransaction`` or ``initTransactions``."""
    return replace(c, finalized_transaction_version=transaction_version)


# --- responses (the Sender thread) ---------------------------------------------------------------------

def on_response(c: ClientState, request_name: str, response: Response, request: Produce | None = None,
                config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """The response to the transactional request in flight (``request_name``: FindCoordinator,
    InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) or to a produce
    (``Produce``; ``request`` names the batch answered, by default the oldest in flight). The client
    handles it (``TxnRequestHandler.onComplete`` / ``Sender.completeBatch``), then the Sender runs."""
    if request_name == "Produce":
        if not isinstance(response, ProduceResponse):
            raise TypeError(f"a Produce response must be a ProduceResponse, got {response!r}")
        try:
            c = handle_produce_response(c, response, request, config)
        except _Poisoned as poisoned:
            c = poisoned.state
        return _step(c, config)
    handler = c.in_flight
    if handler is None or handler.name != request_name:
        raise ValueError(f"no {request_name} in flight (in flight: {handler.name if handler else None})")
    c = replace(c, in_flight=None)
    try:
        c = _HANDLERS[request_name](c, handler, response, config)
    except _Poisoned as poisoned:
        c = poisoned.state
    return _step(c, config)


def on_disconnect(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``onComplete`` with ``wasDisconnected``: the request in flight is retried, after a new lookup of its
    coordinator. (A produce lost this way is answered with NETWORK_EXCEPTION through :func:`on_response`.)"""
    handler = c.in_flight
    if handler is None:
        return c, ClientOutcome()
    c = replace(c, in_flight=None)
    if handler.coordinator_type is not None:
        c = lookup_coordinator(c, handler.coordinator_type, handler.coordinator_key)
    return _step(_reenqueue(c, handler), config)


def _done(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    return _complete_result(c, handler)


def _react(c: ClientState, handler: TxnRequestHandler, reaction: Reaction, exception: str | None,
           config: ClientConfig) -> ClientState:
    """A failed or retried response, as ``RESPONSE_RULES`` says (``reenqueue``, ``lookupCoordinator``,
    ``abortableError``, ``abortableErrorIfPossible``, ``fatalError``)."""
    if reaction is Reaction.LOOKUP_AND_RETRY:
        kind = handler.coordinator_type or CoordinatorType.TRANSACTION
        key = handler.coordinator_key if kind is CoordinatorType.GROUP else c.transactional_id
        return _reenqueue(lookup_coordinator(c, kind, key), handler)
    if reaction is Reaction.RETRY:
        return _reenqueue(c, handler)
    assert exception is not None
    c = _complete_result(c, handler)
    if reaction is Reaction.ABORTABLE:
        return _abortable_error(c, exception)  # TxnRequestHandler.abortableError
    if reaction is Reaction.ABORTABLE_IF_POSSIBLE:
        return _abortable_error_if_possible(c, exception, config)
    return _fatal_error(c, exception)  # TxnRequestHandler.fatalError


def handle_find_coordinator_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                     config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``FindCoordinatorHandler.handleResponse``."""
    assert isinstance(handler.request, FindCoordinator)
    reaction, exception = classify_response("FindCoordinator", response.error)
    if reaction is Reaction.DONE:
        if handler.request.key_type is CoordinatorType.GROUP:
            c = replace(c, group_coordinator_known=True)
        else:
            c = replace(c, txn_coordinator_known=True)
        return _done(c, handler)
    return _react(c, handler, reaction, exception, config)


def handle_init_producer_id_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                     config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``InitProducerIdHandler.handleResponse``: NONE -> READY with the new id/epoch (an epoch bump also
    restarts every sequence); authorization errors and TRANSACTION_ABORTABLE are abortable; fencing and
    anything unexpected are fatal."""
    reaction, exception = classify_response("InitProducerId", response.error)
    if reaction is Reaction.DONE:
        assert isinstance(response, InitProducerIdResponse)
        c = replace(c, producer_id=response.producer_id, producer_epoch=response.producer_epoch)
        assert isinstance(handler.request, InitProducerId)
        if handler.request.keep_prepared_txn and response.ongoing_txn_producer_id != NO_PRODUCER_ID:
            # KIP-939: the kept transaction is prepared, its ongoing pair the state to complete against
            c = _transition(c, PREPARED_TRANSACTION, sender=True)
            c = replace(c, prepared_txn_state=(response.ongoing_txn_producer_id, response.ongoing_txn_producer_epoch))
        else:
            c = _transition(c, READY, sender=True)
        # an epoch bump restarts every sequence; a first init adopts the finalized transaction version
        # (KafkaProducer.initTransactions after its await)
        epoch_bump = handler.priority is Priority.EPOCH_BUMP
        c = _reset_sequence_numbers(c) if epoch_bump else maybe_update_transaction_v2_enabled(c, True)
        return _done(c, handler)
    return _react(c, handler, reaction, exception, config)


def handle_add_partitions_to_txn_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                          config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``AddPartitionsToTxnHandler.handleResponse`` (one error for every partition of the request)."""
    assert isinstance(handler.request, AddPartitionsToTxn)
    reaction, exception = classify_response("AddPartitionsToTxn", response.error)
    partitions = handler.request.partitions
    if reaction is Reaction.DONE or exception in (TOPIC_AUTHORIZATION, KAFKA_EXCEPTION):
        # the handler's loop ran to its end: the partitions leave the pending set whatever the result
        c = replace(c, pending_partitions=c.pending_partitions - partitions)
    if reaction is Reaction.DONE:
        c = replace(c, partitions=c.partitions | partitions, transaction_started=True)
        return _done(c, handler)
    return _react(c, handler, reaction, exception, config)


def handle_add_offsets_to_txn_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                       config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``AddOffsetsToTxnHandler.handleResponse``: NONE enqueues the TxnOffsetCommit (same result)."""
    assert isinstance(handler.request, AddOffsetsToTxn)
    reaction, exception = classify_response("AddOffsetsToTxn", response.error)
    if reaction is Reaction.DONE:
        request = TxnOffsetCommit(c.transactional_id, handler.request.group_id, c.producer_id, c.producer_epoch,
                                  handler.offsets, *handler.member)
        c = replace(c, pending_offsets=tuple(sorted(dict((*c.pending_offsets, *handler.offsets)).items())),
                    transaction_started=True)
        return _enqueue(c, TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS,
                                             completes_call=handler.completes_call))
    return _react(c, handler, reaction, exception, config)


def handle_txn_offset_commit_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                      config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``TxnOffsetCommitHandler.handleResponse`` (one error for every partition): the group coordinator is
    looked up again on COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / REQUEST_TIMED_OUT; other retriable
    errors retry; group-membership errors are abortable (CommitFailedException); fencing is fatal."""
    assert isinstance(handler.request, TxnOffsetCommit)
    reaction, exception = classify_response("TxnOffsetCommit", response.error)
    if reaction is Reaction.DONE:
        committed = {p for p, _ in handler.request.offsets}
        c = replace(c, pending_offsets=tuple((p, o) for p, o in c.pending_offsets if p not in committed))
        if not c.pending_offsets:
            return _done(c, handler)
        return _reenqueue(c, handler)
    if not reaction.retries:
        c = replace(c, pending_offsets=())  # the result completed exceptionally
    return _react(c, handler, reaction, exception, config)


def handle_end_txn_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                            config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``EndTxnHandler.handleResponse``: NONE adopts the (pid, epoch) an EndTxn v5+ (TV2) response carries,
    restarting sequences, and resets the transaction (READY, or INITIALIZING before a client epoch bump).
    TRANSACTION_ABORTABLE is abortable on a commit but fatal (KafkaException) on an abort."""
    assert isinstance(handler.request, EndTxn)
    reaction, exception = classify_response("EndTxn", response.error, handler.request.result)
    if reaction is Reaction.DONE:
        if isinstance(response, EndTxnResponse) and response.producer_id != NO_PRODUCER_ID:
            c = _reset_sequence_numbers(replace(c, producer_id=response.producer_id,
                                                producer_epoch=response.producer_epoch))
        return _done(reset_transaction_state(c), handler)
    return _react(c, handler, reaction, exception, config)


def handle_produce_response(c: ClientState, response: ProduceResponse, request: Produce | None = None,
                            config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``Sender.completeBatch``: success (or DUPLICATE_SEQUENCE_NUMBER) completes the batch; a retriable
    error re-enqueues it with its sequence (:func:`classify_produce_error`); any other error fails it
    (``handleFailedBatch``): the manager's error state follows ``maybeTransitionToErrorState``;
    UNKNOWN_PRODUCER_ID restarts the partition's sequence at 0, other errors give the batch's sequence numbers
    back (``adjustSequencesDueToFailedBatch``)."""
    batch = request if request is not None else (c.in_flight_batches[0] if c.in_flight_batches else None)
    if batch is None or batch not in c.in_flight_batches:
        return c  # the batch was already aborted or answered: nothing to complete
    remaining = list(c.in_flight_batches)
    remaining.remove(batch)
    c = replace(c, in_flight_batches=tuple(remaining))
    error = response.error
    # canRetry: an OUT_OF_ORDER_SEQUENCE_NUMBER is retried only while the partition's sequences are resolved
    unresolved = any(p == batch.partition for p, _ in c.unresolved)
    reaction = classify_produce_error(error, _earlier_in_flight(c, batch, config) and not unresolved)
    if reaction is Reaction.RETRY:
        return _reenqueue_batch(c, batch, config)
    c = replace(c, retried=c.retried - {batch})
    if reaction is Reaction.DONE:
        return _acknowledged(c, batch, config)  # handleCompletedBatch
    # failBatch -> handleFailedBatch(batch, exception, adjustSequenceNumbers=True)
    c = maybe_transition_to_error_state(c, exception_of(error), config)
    if c.state is FATAL_ERROR:
        return c
    if error is Errors.UNKNOWN_PRODUCER_ID:  # resetSequenceForPartition
        return replace(c, sequences=_set_pair(c.sequences, batch.partition, None),
                       last_acked=_set_pair(c.last_acked, batch.partition, None))
    return adjust_sequences_due_to_failed_batch(c, batch, config)


def _acknowledged(c: ClientState, batch: Produce, config: ClientConfig) -> ClientState:
    """``maybeUpdateLastAckedSequence``: the partition's last acknowledged sequence moves up to the batch's last
    (sequences compared across the wrap: newer within half the sequence space)."""
    last = increment_sequence(batch.base_sequence, batch.record_count - 1, config.max_sequence)
    known = [seq for p, seq in c.last_acked if p == batch.partition]
    if known and not 0 < (last - known[0]) % (config.max_sequence + 1) <= (config.max_sequence + 1) // 2:
        return c
    return replace(c, last_acked=_set_pair(c.last_acked, batch.partition, last))


def _is_next_sequence(c: ClientState, partition: str, sequence: int, config: ClientConfig) -> bool:
    """``isNextSequence``: ``sequence`` follows the partition's last acknowledged one (-1 when none)."""
    last = next((seq for p, seq in c.last_acked if p == partition), -1)
    return sequence == increment_sequence(last, 1, config.max_sequence)


def expire_batch(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG
                 ) -> tuple[ClientState, ClientOutcome]:
    """``delivery.timeout.ms`` has passed for ``batch``, in flight or waiting for its retry
    (``Sender.sendProducerData``): ``failBatch`` with a TimeoutException and ``adjustSequenceNumbers`` false (nobody
    knows whether it was written), and a batch that was retried leaves its partition's sequence unresolved
    (``markSequenceUnresolved``) until :func:`maybe_resolve_sequences` settles it. An answer that comes later is
    ignored."""
    if batch not in c.in_flight_batches and batch not in c.retry_batches:
        return c, ClientOutcome()
    in_retry = batch in c.retried
    c = replace(c, in_flight_batches=tuple(b for b in c.in_flight_batches if b != batch),
                retry_batches=tuple(b for b in c.retry_batches if b != batch), backing_off=c.backing_off - {batch},
                retried=c.retried - {batch})
    try:
        c = maybe_transition_to_error_state(c, exception_of(Errors.REQUEST_TIMED_OUT), config)
    except _Poisoned as poisoned:
        c = poisoned.state
    if in_retry:
        after = increment_sequence(batch.base_sequence, batch.record_count, config.max_sequence)
        known = [seq for p, seq in c.unresolved if p == batch.partition]
        c = replace(c, unresolved=_set_pair(c.unresolved, batch.partition, known[0] if known else after))
    return _step(c, config)


def maybe_resolve_sequences(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``maybeResolveSequences`` (each Sender iteration): a partition whose batches are all done is resolved if its
    next sequence follows the last acknowledged one (later batches were written after all); otherwise the client
    cannot know what the broker holds: abortable with a client epoch bump for TV < 2, fatal if no bump is possible
    (``transitionToAbortableErrorOrFatalError``)."""
    for partition, _ in c.unresolved:
        if any(b.partition == partition for b in (*c.in_flight_batches, *c.retry_batches)):
            continue
        c = replace(c, unresolved=_set_pair(c.unresolved, partition, None))
        if not _is_next_sequence(c, partition, c.next_sequence(partition), config):
            c = _abortable_error_if_possible(c, KAFKA_EXCEPTION, config)
    return c


_Handler: TypeAlias = Callable[[ClientState, TxnRequestHandler, Response, ClientConfig], ClientState]
_HANDLERS: Mapping[str, _Handler] = {
    "FindCoordinator": handle_find_coordinator_response,
    "InitProducerId": handle_init_producer_id_response,
    "AddPartitionsToTxn": handle_add_partitions_to_txn_response,
    "AddOffsetsToTxn": handle_add_offsets_to_txn_response,
    "TxnOffsetCommit": handle_txn_offset_commit_response,
    "EndTxn": handle_end_txn_response,
}

__all__ = [
    "DEFAULT_CONFIG", "PRODUCE_FATAL_ERRORS", "RESPONSE_RULES", "VALID_PREVIOUS_STATES", "ClientConfig",
    "ClientOutcome", "ClientState", "Priority", "Reaction", "State", "TxnRequestHandler", "abort_transaction",
    "adjust_sequences_due_to_failed_batch", "awaiting_authorization_reset", "begin_transaction",
    "classify_produce_error", "classify_response", "commit_transaction", "complete_transaction", "decrement_sequence",
    "exception_of",
    "expire_batch", "finalized_features_changed", "increment_sequence", "init_transactions", "is_transition_valid",
    "maybe_fail_with_error", "maybe_resolve_sequences", "maybe_transition_to_error_state", "next_produce",
    "next_request", "on_disconnect", "on_response", "prepare_transaction", "retry_backoff_elapsed", "run_sender",
    "send", "send_offsets_to_transaction", "sender_handle_authorization_error", "sequence_precedes",
]
