"""The transactional producer: Kafka's ``TransactionManager``, the transactional half of the ``Sender`` and a
small ``RecordAccumulator``, sans-I/O.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/TransactionManager.java``
(states and their valid previous states as data, ``initializeTransactions`` incl. the KIP-360 epoch-bump
variant, ``beginTransaction``, ``maybeAddPartition``, ``sendOffsetsToTransaction``, ``beginCommit`` /
``beginAbort`` / ``beginCompletingTransaction``, ``nextRequest`` with the priority queue, local EndTxn when
nothing was added, ``maybeFailWithError``, ``handleCachedTransactionRequestResult``, every
``TxnRequestHandler.handleResponse`` with its handlers' fatal / abortable / retriable classification,
``maybeTransitionToErrorState`` and ``handleFailedBatch`` for produce errors), ``Sender`` (one transactional
request in flight; no new produce while one is; ``canRetry`` for OUT_OF_ORDER_SEQUENCE_NUMBER), the
``RecordAccumulator.drain`` rules for several batches in flight per partition (``max_in_flight``, at most 5: a
retried batch goes again only when it is the first in flight, nothing new behind a batch waiting for its retry
or of an older epoch) and ``KafkaProducer`` (the application API with Kafka's names).

Theory of operation: the application calls the API methods (``init_transactions`` ... ``abort_transaction``,
``send``); they change state, queue handlers and return a :class:`TransactionalRequestResult` or a
:class:`RecordFuture` at once, raising only what Kafka raises synchronously. :meth:`Producer.poll` runs
Sender iterations and returns the requests to put on the wire (transactional requests before Produce);
:meth:`Producer.on_response` feeds back an answer, :meth:`Producer.on_disconnect` a lost request.
Blocking is the caller's business (:class:`txnspec.impl.cluster.Cluster` pumps the network until a result
completes). Invalid transitions raised on the Sender side poison the manager (FATAL_ERROR).

Assumed / left out: delivery timeouts, ``max.block.ms`` and backoff delays (retries are immediate, or held
until :meth:`Producer.end_retry_backoff` when ``retry_backoff`` is set, as the conformance adapter does); batch
size is a record count; no compression, partitioner or metadata; the TV of the client is fixed at
construction (no upgrade detection).

KIP-939 (two-phase commit, Kafka 4.4's client): ``enable_two_pc`` (``transaction.two.phase.commit.enable``) sends
``Enable2Pc``; :meth:`Producer.prepare_transaction` (``PREPARED_TRANSACTION``, the ``PreparedTxnState`` of the
current producer id and epoch), :meth:`Producer.complete_transaction` (commit exactly when the state handed in
matches, else abort), ``init_transactions(keep_prepared_txn=True)`` (a kept transaction's ongoing pair becomes
the prepared state). ``prepareTransaction`` flushes in Kafka; here the caller drains first (it refuses while a
batch is incomplete).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from txnspec.impl.errors import (
    ApiException,
    ClusterAuthorizationException,
    CommitFailedException,
    Errors,
    GroupAuthorizationException,
    IllegalStateException,
    InvalidPidMappingException,
    InvalidProducerEpochException,
    InvalidRequestError,
    InvalidTxnStateException,
    KafkaException,
    ProducerFencedException,
    RetriableException,
    TimeoutException,
    TopicAuthorizationException,
    TransactionAbortableException,
    TransactionAbortedException,
    TransactionalIdAuthorizationException,
    UnsupportedVersionException,
)
from txnspec.impl.log import INT_MAX, SHORT_MAX, ControlType, Record, RecordValue, increment_sequence
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    FindCoordinator,
    InitProducerId,
    Produce,
    Response,
    TransactionalRequest,
    TxnOffsetCommit,
)
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.topic_partition import TopicPartition


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


St = State
# TRUNK ``TransactionManager.State.isTransitionValid``: target -> valid sources (FATAL_ERROR from any).
VALID_PREVIOUS_STATES: dict[State, frozenset[State]] = {
    St.UNINITIALIZED: frozenset({St.READY, St.ABORTABLE_ERROR}),
    St.INITIALIZING: frozenset({St.UNINITIALIZED, St.COMMITTING_TRANSACTION, St.ABORTING_TRANSACTION}),
    St.READY: frozenset({St.INITIALIZING, St.COMMITTING_TRANSACTION, St.ABORTING_TRANSACTION}),
    St.IN_TRANSACTION: frozenset({St.READY}),
    St.PREPARED_TRANSACTION: frozenset({St.IN_TRANSACTION, St.INITIALIZING}),
    St.COMMITTING_TRANSACTION: frozenset({St.IN_TRANSACTION, St.PREPARED_TRANSACTION}),
    St.ABORTING_TRANSACTION: frozenset({St.IN_TRANSACTION, St.PREPARED_TRANSACTION, St.ABORTABLE_ERROR}),
    St.ABORTABLE_ERROR: frozenset({St.IN_TRANSACTION, St.COMMITTING_TRANSACTION, St.ABORTABLE_ERROR,
                                   St.INITIALIZING}),
    St.FATAL_ERROR: frozenset(State),
}


class Priority(enum.IntEnum):
    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


class TransactionalRequestResult:
    """``TransactionalRequestResult``: completes when the operation is done; ``acked`` once awaited."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.completed = False
        self.error: BaseException | None = None
        self.acked = False

    def done(self) -> None:
        self.completed = True

    def fail(self, error: BaseException) -> None:
        if not self.completed:
            self.error = error
            self.completed = True

    @property
    def is_successful(self) -> bool:
        return self.completed and self.error is None

    def result(self) -> None:
        """Raise what the operation failed with (Kafka's ``await``); marks the result acknowledged."""
        if not self.completed:
            raise IllegalStateException(f"{self.operation} has not completed yet")
        self.acked = True
        if self.error is not None:
            raise self.error


@dataclass
class RecordMetadata:
    partition: str
    offset: int


class RecordFuture:
    """The answer to ``send``: the record's offset, or the exception its batch failed with."""

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.completed = False
        self.metadata: RecordMetadata | None = None
        self.error: BaseException | None = None

    def _complete(self, offset: int) -> None:
        self.completed, self.metadata = True, RecordMetadata(self.partition, offset)

    def _fail(self, error: BaseException) -> None:
        if not self.completed:
            self.completed, self.error = True, error

    def get(self) -> RecordMetadata:
        if not self.completed:
            raise IllegalStateException("the record has not been acknowledged yet")
        if self.error is not None:
            raise self.error
        assert self.metadata is not None
        return self.metadata


@dataclass
class ProducerBatch:
    partition: str
    records: list[Record] = field(default_factory=list)
    futures: list[RecordFuture] = field(default_factory=list)
    base_sequence: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    attempts: int = 0
    in_flight: bool = False
    backing_off: bool = False  # answered with a retriable error, retry.backoff.ms not yet elapsed
    in_retry: bool = False  # re-enqueued at least once (ProducerBatch.inRetry)

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, len(self.records) - 1)


@dataclass
class TxnPartitionEntry:
    """``TxnPartitionEntry``: sequence bookkeeping of one partition."""

    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[ProducerBatch] = field(default_factory=list)


# --- request handlers (TransactionManager.TxnRequestHandler and subclasses) ---

class TxnRequestHandler:
    priority = Priority.END_TXN
    coordinator_type: CoordinatorType | None = CoordinatorType.TRANSACTION

    def __init__(self, tm: TransactionManager, result: TransactionalRequestResult | None = None) -> None:
        self.tm = tm
        self.result = result or TransactionalRequestResult(type(self).__name__)
        self.is_retry = False

    @property
    def coordinator_key(self) -> str:
        return self.tm.transactional_id or ""

    def build(self) -> TransactionalRequest:
        raise NotImplementedError

    def handle_response(self, r: Response) -> None:
        raise NotImplementedError

    def is_end_txn(self) -> bool:
        return False

    # outcomes
    def reenqueue(self) -> None:
        self.is_retry = True
        self.tm._enqueue(self)

    def fatal_error(self, e: BaseException) -> None:
        self.result.fail(e)
        self.tm._transition_to_fatal_error(e)

    def abortable_error(self, e: BaseException) -> None:
        self.result.fail(e)
        self.tm._transition_to_abortable_error(e)

    def abortable_error_if_possible(self, e: BaseException) -> None:
        if self.tm.can_handle_abortable_error:
            if self.tm.need_to_trigger_epoch_bump_from_client:
                self.tm.client_side_epoch_bump_required = True
            self.abortable_error(e)
        else:
            self.fatal_error(e)

    def lookup_and_retry(self) -> None:
        self.tm._lookup_coordinator(CoordinatorType.TRANSACTION, self.tm.transactional_id or "")
        self.reenqueue()


class FindCoordinatorHandler(TxnRequestHandler):
    priority = Priority.FIND_COORDINATOR
    coordinator_type = None

    def __init__(self, tm: TransactionManager, key_type: CoordinatorType, key: str) -> None:
        super().__init__(tm)
        self.key_type, self.key = key_type, key

    def build(self) -> FindCoordinator:
        return FindCoordinator(self.key_type, self.key)

    def handle_response(self, r: Response) -> None:
        e = r.error
        if e is Errors.NONE:
            self.tm.coordinators.add((self.key_type, self.key))
            self.result.done()
        elif e.retriable:
            self.reenqueue()
        elif e is Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            self.fatal_error(TransactionalIdAuthorizationException(e.name))
        elif e is Errors.GROUP_AUTHORIZATION_FAILED:
            self.abortable_error(GroupAuthorizationException(f"not authorized to access group {self.key}"))
        elif e is Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(e.exception())
        else:
            self.fatal_error(KafkaException(f"Could not find a coordinator with type {self.key_type.value} with key "
                                            f"{self.key} due to unexpected error: {e.name}"))


class InitProducerIdHandler(TxnRequestHandler):
    def __init__(self, tm: TransactionManager, is_epoch_bump: bool, keep_prepared_txn: bool = False) -> None:
        super().__init__(tm)
        self.is_epoch_bump = is_epoch_bump
        self.keep_prepared_txn = keep_prepared_txn
        self.priority = Priority.EPOCH_BUMP if is_epoch_bump else Priority.INIT_PRODUCER_ID
        self.pid, self.epoch = (tm.producer_id, tm.producer_epoch) if is_epoch_bump else (-1, -1)

    def build(self) -> InitProducerId:
        return InitProducerId(self.tm.transactional_id, self.tm.txn_timeout_ms, self.pid, self.epoch,
                              enable_two_pc=self.tm.enable_two_pc, keep_prepared_txn=self.keep_prepared_txn)

    def handle_response(self, r: Response) -> None:
        e, tm = r.error, self.tm
        if e is Errors.NONE:
            tm.producer_id, tm.producer_epoch = r.producer_id, r.producer_epoch
            if self.keep_prepared_txn and r.ongoing_txn_producer_id != -1:
                # KIP-939: the kept transaction is prepared; its ongoing pair is the state to complete against
                tm._transition_to(St.PREPARED_TRANSACTION)
                tm.prepared_txn_state = (r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch)
                # as 4.4's handler: transactionStarted stays false, so nextRequest completes the EndTxn of
                # completeTransaction locally, without an RPC (docs/kip-939.md, finding 4)
            else:
                tm._transition_to(St.READY)
            tm.last_error = None
            if self.is_epoch_bump:
                tm._reset_sequence_numbers()
            self.result.done()
        elif e in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE):
            self.lookup_and_retry()
        elif e.retriable:
            self.reenqueue()
        elif e in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED):
            self.abortable_error(e.exception())
        elif e in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED):
            self.fatal_error(ProducerFencedException("There is a newer producer with the same transactionalId "
                                                     "which fences the current one."))
        elif e is Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(e.exception())
        else:
            self.fatal_error(KafkaException(f"Unexpected error in InitProducerIdResponse; {e.name}"))


class AddPartitionsToTxnHandler(TxnRequestHandler):
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS

    def __init__(self, tm: TransactionManager, partitions: set[str]) -> None:
        super().__init__(tm)
        self.partitions = set(partitions)

    def build(self) -> AddPartitionsToTxn:
        return AddPartitionsToTxn(self.tm.transactional_id or "", self.tm.producer_id, self.tm.producer_epoch,
                                  tuple(sorted(self.partitions)))

    def handle_response(self, r: Response) -> None:
        tm = self.tm
        errors = dict(r.partition_errors) if r.partition_errors else dict.fromkeys(self.partitions, r.error)
        unauthorized: set[str] = set()
        has_partition_errors = False
        for tp in sorted(errors):
            e = errors[tp]
            if e is Errors.NONE:
                continue
            if e in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
                self.lookup_and_retry()
                return
            if e is Errors.CONCURRENT_TRANSACTIONS or e.retriable:
                self.reenqueue()
                return
            if e in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED):
                self.fatal_error(Errors.PRODUCER_FENCED.exception())
                return
            if e in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                     Errors.INVALID_PRODUCER_ID_MAPPING):
                self.fatal_error(e.exception())
                return
            if e is Errors.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(TopicPartition.of(tp).topic)
            elif e is Errors.UNKNOWN_PRODUCER_ID:
                self.abortable_error_if_possible(e.exception())
                return
            elif e is Errors.TRANSACTION_ABORTABLE:
                self.abortable_error(e.exception())
                return
            else:
                has_partition_errors = True
        tm.pending_partitions -= set(errors)
        if unauthorized:
            self.abortable_error(TopicAuthorizationException(f"not authorized to access topics {sorted(unauthorized)}"))
        elif has_partition_errors:
            self.abortable_error(KafkaException(f"Could not add partitions to transaction due to errors: {errors}"))
        else:
            tm.partitions_in_transaction |= set(errors)
            tm.transaction_started = True
            self.result.done()


class AddOffsetsToTxnHandler(TxnRequestHandler):
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS

    def __init__(self, tm: TransactionManager, group_id: str, offsets: dict[str, int],
                 member: MemberIdentity | None = None) -> None:
        super().__init__(tm)
        self.group_id, self.offsets, self.member = group_id, offsets, member

    def build(self) -> AddOffsetsToTxn:
        return AddOffsetsToTxn(self.tm.transactional_id or "", self.tm.producer_id, self.tm.producer_epoch,
                               self.group_id)

    def handle_response(self, r: Response) -> None:
        e = r.error
        if e is Errors.NONE:
            self.tm._enqueue(TxnOffsetCommitHandler(self.tm, self.group_id, self.offsets, self.result, self.member))
            self.tm.transaction_started = True
        elif e in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self.lookup_and_retry()
        elif e.retriable:
            self.reenqueue()
        elif e is Errors.UNKNOWN_PRODUCER_ID:
            self.abortable_error_if_possible(e.exception())
        elif e in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED):
            self.fatal_error(Errors.PRODUCER_FENCED.exception())
        elif e in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                   Errors.INVALID_PRODUCER_ID_MAPPING):
            self.fatal_error(e.exception())
        elif e is Errors.GROUP_AUTHORIZATION_FAILED:
            self.abortable_error(GroupAuthorizationException(f"not authorized to access group {self.group_id}"))
        elif e is Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(e.exception())
        else:
            self.fatal_error(KafkaException(f"Unexpected error in AddOffsetsToTxnResponse: {e.name}"))


class TxnOffsetCommitHandler(TxnRequestHandler):
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS
    coordinator_type = CoordinatorType.GROUP

    def __init__(self, tm: TransactionManager, group_id: str, offsets: dict[str, int],
                 result: TransactionalRequestResult | None = None, member: MemberIdentity | None = None) -> None:
        super().__init__(tm, result)
        self.group_id, self.pending, self.member = group_id, dict(offsets), member

    @property
    def coordinator_key(self) -> str:
        return self.group_id

    def build(self) -> TxnOffsetCommit:
        return TxnOffsetCommit(self.tm.transactional_id or "", self.group_id, self.tm.producer_id,
                               self.tm.producer_epoch, tuple(sorted(self.pending.items())), member=self.member)

    def handle_response(self, r: Response) -> None:
        errors = dict(r.partition_errors) if r.partition_errors else dict.fromkeys(self.pending, r.error)
        reloaded = False
        for tp in sorted(errors):
            e = errors[tp]
            if e is Errors.NONE:
                self.pending.pop(tp, None)
            elif e in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR, Errors.REQUEST_TIMED_OUT):
                if not reloaded:
                    reloaded = True
                    self.tm._lookup_coordinator(CoordinatorType.GROUP, self.group_id)
            elif e in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.COORDINATOR_LOAD_IN_PROGRESS) or e.retriable:
                pass
            elif e is Errors.GROUP_AUTHORIZATION_FAILED:
                self.abortable_error(GroupAuthorizationException(f"not authorized to access group {self.group_id}"))
                break
            elif e in (Errors.FENCED_INSTANCE_ID, Errors.TRANSACTION_ABORTABLE):
                self.abortable_error(e.exception())
                break
            elif e in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.GROUP_ID_NOT_FOUND,
                       Errors.STALE_MEMBER_EPOCH):
                self.abortable_error(CommitFailedException("Transaction offset Commit failed due to consumer group "
                                                           "metadata mismatch: " + e.name))
                break
            elif e in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED):
                self.fatal_error(Errors.PRODUCER_FENCED.exception())
                break
            elif e in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT):
                self.fatal_error(e.exception())
                break
            else:
                self.fatal_error(KafkaException(f"Unexpected error in TxnOffsetCommitResponse: {e.name}"))
                break
        if self.result.completed:
            self.pending.clear()
        elif not self.pending:
            self.result.done()
        else:
            self.reenqueue()


class EndTxnHandler(TxnRequestHandler):
    priority = Priority.END_TXN

    def __init__(self, tm: TransactionManager, result: ControlType) -> None:
        super().__init__(tm)
        self.txn_result = result
        self.pid, self.epoch, self.tv = tm.producer_id, tm.producer_epoch, tm.transaction_version

    def is_end_txn(self) -> bool:
        return True

    def build(self) -> EndTxn:
        return EndTxn(self.tm.transactional_id or "", self.tm.producer_id, self.tm.producer_epoch, self.txn_result,
                      self.tv)

    def handle_response(self, r: Response) -> None:
        e, tm = r.error, self.tm
        if e is Errors.NONE:
            if tm.is_transaction_v2_enabled and r.producer_id != -1:
                tm.producer_id, tm.producer_epoch = r.producer_id, r.producer_epoch
                tm._reset_sequence_numbers()
            tm._complete_transaction()
            self.result.done()
        elif e in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self.lookup_and_retry()
        elif e.retriable:
            self.reenqueue()
        elif e in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED):
            self.fatal_error(Errors.PRODUCER_FENCED.exception())
        elif e in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                   Errors.INVALID_PRODUCER_ID_MAPPING):
            self.fatal_error(e.exception())
        elif e is Errors.UNKNOWN_PRODUCER_ID:
            self.abortable_error_if_possible(e.exception())
        elif e is Errors.TRANSACTION_ABORTABLE:
            if self.txn_result is ControlType.ABORT:
                self.fatal_error(KafkaException("Failed to abort transaction", e.exception()))
            else:
                self.abortable_error(e.exception())
        else:
            self.fatal_error(KafkaException(f"Unhandled error in EndTxnResponse: {e.name}"))


_FATAL_PRODUCE_EXCEPTIONS = (ClusterAuthorizationException, TransactionalIdAuthorizationException,
                             ProducerFencedException, UnsupportedVersionException, InvalidPidMappingException)


class TransactionManager:
    """Kafka's ``TransactionManager`` (see the module docstring)."""

    def __init__(self, transactional_id: str | None, txn_timeout_ms: int = 60_000, transaction_version: int = 2,
                 coordinator_supports_bumping_epoch: bool = True, rules: Rules = KAFKA,
                 enable_two_pc: bool = False) -> None:
        self.transactional_id = transactional_id
        self.enable_two_pc = enable_two_pc
        self.prepared_txn_state: tuple[int, int] = (-1, -1)
        self.rules = rules
        self.txn_timeout_ms = txn_timeout_ms
        self.transaction_version = transaction_version
        self.coordinator_supports_bumping_epoch = coordinator_supports_bumping_epoch
        self.state = St.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.pending_requests: list[tuple[int, int, TxnRequestHandler]] = []
        self._counter = itertools.count()
        self.in_flight: TxnRequestHandler | None = None
        self.coordinators: set[tuple[CoordinatorType, str]] = set()
        self.new_partitions: set[str] = set()
        self.pending_partitions: set[str] = set()
        self.partitions_in_transaction: set[str] = set()
        self.transaction_started = False
        self.client_side_epoch_bump_required = False
        self.pending_transition: tuple[TransactionalRequestResult, State, str] | None = None
        self.partitions: dict[str, TxnPartitionEntry] = {}
        self._on_sender_thread = False

    # --- predicates ---

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def is_transaction_v2_enabled(self) -> bool:
        return self.transaction_version >= 2

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def can_handle_abortable_error(self) -> bool:
        return self.coordinator_supports_bumping_epoch or self.is_transaction_v2_enabled

    @property
    def need_to_trigger_epoch_bump_from_client(self) -> bool:
        return self.coordinator_supports_bumping_epoch and not self.is_transaction_v2_enabled

    @property
    def is_completing(self) -> bool:
        return self.state in (St.COMMITTING_TRANSACTION, St.ABORTING_TRANSACTION)

    @property
    def has_fatal_error(self) -> bool:
        return self.state is St.FATAL_ERROR

    @property
    def has_error(self) -> bool:
        return self.state in (St.ABORTABLE_ERROR, St.FATAL_ERROR)

    def is_send_to_partition_allowed(self, partition: str) -> bool:
        if self.state is St.FATAL_ERROR:
            return False
        return not self.is_transactional or partition in self.partitions_in_transaction

    # --- transitions ---

    def _transition_to(self, target: State, error: BaseException | None = None) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            message = f"TransactionalId {self.transactional_id}: Invalid transition attempted from state " \
                      f"{self.state.value} to state {target.value}"
            exc = IllegalStateException(message)
            if self._on_sender_thread:
                self.state, self.last_error = St.FATAL_ERROR, exc
            raise exc
        if target in (St.FATAL_ERROR, St.ABORTABLE_ERROR):
            if error is None:
                raise ValueError(f"Cannot transition to {target.value} with a null exception")
            self.last_error = error
        else:
            self.last_error = None
        self.state = target

    def _transition_to_abortable_error(self, e: BaseException) -> None:
        if self.state is St.ABORTING_TRANSACTION:
            return
        self._transition_to(St.ABORTABLE_ERROR, e)

    def _transition_to_fatal_error(self, e: BaseException) -> None:
        self._transition_to(St.FATAL_ERROR, e)
        if self.pending_transition is not None:
            self.pending_transition[0].fail(e)

    def maybe_fail_with_error(self) -> None:
        if not self.has_error:
            return
        e = self.last_error
        ident = f"Producer with transactionalId '{self.transactional_id}' and " \
                f"(producerId={self.producer_id}, epoch={self.producer_epoch})"
        if isinstance(e, ProducerFencedException):
            raise ProducerFencedException(f"{ident} has been fenced by another producer with the same "
                                          "transactionalId")
        if isinstance(e, InvalidProducerEpochException):
            raise InvalidProducerEpochException(f"{ident} attempted to produce with an old epoch")
        if isinstance(e, IllegalStateException):
            raise IllegalStateException(f"{ident} cannot execute transactional method because of previous invalid "
                                        "state transition attempt", e)
        raise KafkaException("Cannot execute transactional method because we are in an error state", e)

    def _ensure_transactional(self) -> None:
        if not self.is_transactional:
            raise IllegalStateException("Transactional method invoked on a non-transactional producer.")

    def _cached(self, next_state: State, operation: str, supplier: object) -> TransactionalRequestResult:
        self._ensure_transactional()
        if self.pending_transition is not None:
            result, state, op = self.pending_transition
            if result.acked:
                self.pending_transition = None
            elif next_state is not state:
                raise IllegalStateException(f"Cannot attempt operation `{operation}` because the previous call to "
                                            f"`{op}` timed out and must be retried")
            else:
                return result
        result = supplier()  # type: ignore[operator]
        self.pending_transition = (result, next_state, operation)
        return result  # type: ignore[no-any-return]

    # --- application API ---

    def initialize_transactions(self, bump_epoch: bool = False,
                                keep_prepared_txn: bool = False) -> TransactionalRequestResult:
        self.maybe_fail_with_error()

        def supplier() -> TransactionalRequestResult:
            if not bump_epoch:
                self._transition_to(St.INITIALIZING)
                self.producer_id, self.producer_epoch = -1, -1
            handler = InitProducerIdHandler(self, bump_epoch, keep_prepared_txn)
            self._enqueue(handler)
            return handler.result
        return self._cached(St.INITIALIZING, "initTransactions", supplier)

    def begin_transaction(self) -> None:
        self._ensure_transactional()
        self._throw_if_pending_state("beginTransaction")
        self.maybe_fail_with_error()
        self._transition_to(St.IN_TRANSACTION)

    def prepare_transaction(self) -> tuple[int, int]:
        """``prepareTransaction`` (KIP-939): IN_TRANSACTION -> PREPARED_TRANSACTION, remembering (pid, epoch)."""
        self._ensure_transactional()
        self._throw_if_pending_state("prepareTransaction")
        self.maybe_fail_with_error()
        self._transition_to(St.PREPARED_TRANSACTION)
        self.prepared_txn_state = (self.producer_id, self.producer_epoch)
        return self.prepared_txn_state

    def _throw_if_pending_state(self, operation: str) -> None:
        if self.pending_transition is not None:
            result, _, op = self.pending_transition
            if result.acked:
                self.pending_transition = None
            else:
                raise IllegalStateException(f"Cannot attempt operation `{operation}` because the previous call to "
                                            f"`{op}` timed out and must be retried")

    def maybe_add_partition(self, partition: str) -> None:
        self.maybe_fail_with_error()
        self._throw_if_pending_state("send")
        if not self.is_transactional:
            return
        if not self.has_producer_id:
            raise IllegalStateException(f"Cannot add partition {partition} to transaction before completing a call "
                                        "to initTransactions")
        if self.state is not St.IN_TRANSACTION:
            raise IllegalStateException(f"Cannot add partition {partition} to transaction while in state "
                                        f"{self.state.value}")
        self.partitions.setdefault(partition, TxnPartitionEntry())
        if self.is_transaction_v2_enabled:
            self.partitions_in_transaction.add(partition)
            self.transaction_started = True
        elif partition in self.partitions_in_transaction or partition in self.pending_partitions:
            return
        else:
            self.new_partitions.add(partition)

    def send_offsets_to_transaction(self, offsets: Mapping[str, int], group_id: str,
                                    member: MemberIdentity | None = None) -> TransactionalRequestResult:
        """``member``: the consumer's ``ConsumerGroupMetadata`` (KIP-447), checked by the group coordinator."""
        self._ensure_transactional()
        self._throw_if_pending_state("sendOffsetsToTransaction")
        self.maybe_fail_with_error()
        if self.state is not St.IN_TRANSACTION:
            raise IllegalStateException("Cannot send offsets if a transaction is not in progress "
                                        f"(currentState= {self.state.value})")
        handler: TxnRequestHandler
        if self.is_transaction_v2_enabled:
            handler = TxnOffsetCommitHandler(self, group_id, dict(offsets), member=member)
            self.transaction_started = True
        else:
            handler = AddOffsetsToTxnHandler(self, group_id, dict(offsets), member)
        self._enqueue(handler)
        return handler.result

    def begin_commit(self) -> TransactionalRequestResult:
        def supplier() -> TransactionalRequestResult:
            self.maybe_fail_with_error()
            self._transition_to(St.COMMITTING_TRANSACTION)
            return self._begin_completing_transaction(ControlType.COMMIT)
        return self._cached(St.COMMITTING_TRANSACTION, "commitTransaction", supplier)

    def begin_abort(self) -> TransactionalRequestResult:
        def supplier() -> TransactionalRequestResult:
            if self.state is not St.ABORTABLE_ERROR:
                self.maybe_fail_with_error()
            self._transition_to(St.ABORTING_TRANSACTION)
            self.new_partitions.clear()
            return self._begin_completing_transaction(ControlType.ABORT)
        return self._cached(St.ABORTING_TRANSACTION, "abortTransaction", supplier)

    def _begin_completing_transaction(self, result: ControlType) -> TransactionalRequestResult:
        if self.new_partitions:
            self._enqueue(self._add_partitions_handler())
        handler = EndTxnHandler(self, result)
        self._enqueue(handler)
        if self.client_side_epoch_bump_required:
            bump = InitProducerIdHandler(self, True)
            self._enqueue(bump)
            return bump.result
        return handler.result

    def _complete_transaction(self) -> None:
        self._transition_to(St.INITIALIZING if self.client_side_epoch_bump_required else St.READY)
        self.prepared_txn_state = (-1, -1)
        self.last_error = None
        self.client_side_epoch_bump_required = False
        self.transaction_started = False
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.partitions_in_transaction.clear()

    # --- queue ---

    def _enqueue(self, handler: TxnRequestHandler) -> None:
        heapq.heappush(self.pending_requests, (int(handler.priority), next(self._counter), handler))

    def _add_partitions_handler(self) -> AddPartitionsToTxnHandler:
        self.pending_partitions |= self.new_partitions
        handler = AddPartitionsToTxnHandler(self, self.new_partitions)
        self.new_partitions = set()
        return handler

    def _lookup_coordinator(self, key_type: CoordinatorType, key: str) -> None:
        self.coordinators.discard((key_type, key))
        self._enqueue(FindCoordinatorHandler(self, key_type, key))

    def _maybe_terminate_request_with_error(self, handler: TxnRequestHandler) -> bool:
        if self.has_error:
            if self.state is St.ABORTABLE_ERROR and isinstance(handler, FindCoordinatorHandler):
                return False
            handler.result.fail(self.last_error or KafkaException("error state"))
            return True
        return False

    def next_request(self, has_incomplete_batches: bool) -> TxnRequestHandler | None:
        if self.new_partitions:
            self._enqueue(self._add_partitions_handler())
        if not self.pending_requests:
            return None
        handler = self.pending_requests[0][2]
        if handler.is_end_txn() and has_incomplete_batches:
            return None
        heapq.heappop(self.pending_requests)
        if self._maybe_terminate_request_with_error(handler):
            return None
        if handler.is_end_txn() and not self.transaction_started:
            handler.result.done()
            if self.state is not St.FATAL_ERROR:
                self._complete_transaction()
            if not self.pending_requests:
                return None
            handler = heapq.heappop(self.pending_requests)[2]
        return handler

    # --- sequences ---

    def _reset_sequence_numbers(self) -> None:
        for entry in self.partitions.values():
            entry.next_sequence, entry.last_acked_sequence = 0, -1

    # --- produce outcomes (Sender.completeBatch / failBatch) ---

    def can_retry(self, error: Errors, batch: ProducerBatch, earlier_unfinished: bool = False) -> bool:
        """``TransactionManager.canRetry``. An OUT_OF_ORDER_SEQUENCE_NUMBER is retried when the batch is not the
        next one: an earlier batch of its producer id and epoch is unfinished (in flight or waiting for its
        retry). Kafka asks ``!isNextSequence`` (lastAckedSequence + 1); the two differ only after an earlier batch
        failed, when Kafka retries until the delivery timeout fails the batch (the gap stays) and this fails it
        at once, as the spec does (``spec/producer.py``)."""
        if batch.producer_id != self.producer_id:
            return False
        if error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return earlier_unfinished and self.rules.retries_out_of_order_behind_earlier
        return error.retriable

    def maybe_transition_to_error_state(self, e: BaseException) -> None:
        if isinstance(e, _FATAL_PRODUCE_EXCEPTIONS):
            self._transition_to_fatal_error(e)
        elif self.is_transactional:
            if self.need_to_trigger_epoch_bump_from_client and not self.is_completing:
                self.client_side_epoch_bump_required = True
            if isinstance(e, RetriableException | InvalidTxnStateException):
                e = TransactionAbortableException("Transaction Request was aborted after exhausting retries.", e)
            self._transition_to_abortable_error(e)


class Producer:
    """A transactional (or idempotent, with ``transactional_id=None``) producer, sans-I/O.

    >>> p = Producer("tx", transaction_version=2)
    >>> r = p.init_transactions()
    >>> [type(q).__name__ for q in p.poll()]
    ['FindCoordinator']
    """

    def __init__(self, transactional_id: str | None, *, transaction_version: int = 2, txn_timeout_ms: int = 60_000,
                 batch_records: int = 1000, max_in_flight: int = 5,
                 coordinator_supports_bumping_epoch: bool = True, rules: Rules = KAFKA,
                 enable_two_pc: bool = False) -> None:
        if transactional_id is not None and (not isinstance(transactional_id, str) or not transactional_id):
            raise InvalidRequestError(f"transactional_id must be a non-empty string or None, got {transactional_id!r}")
        if transaction_version not in (0, 1, 2):
            raise InvalidRequestError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
        if isinstance(txn_timeout_ms, bool) or not isinstance(txn_timeout_ms, int) or txn_timeout_ms <= 0:
            raise InvalidRequestError(f"txn_timeout_ms must be a positive integer, got {txn_timeout_ms!r}")
        self.tm = TransactionManager(transactional_id, txn_timeout_ms, transaction_version,
                                     coordinator_supports_bumping_epoch, rules, enable_two_pc)
        self.batch_records = batch_records
        self.max_in_flight = max_in_flight
        # retry.backoff.ms: False retries a batch at the next poll; True holds it (and the partition's batches
        # behind it) until end_retry_backoff(), for a driver that decides when the backoff elapses
        self.retry_backoff = False
        self.accumulator: dict[str, deque[ProducerBatch]] = {}
        self.in_flight_produce: dict[int, tuple[Produce, ProducerBatch]] = {}
        self.in_flight_txn: tuple[TransactionalRequest, TxnRequestHandler] | None = None
        self._correlation = itertools.count(1)
        self.closed = False

    # --- Kafka's API names ---

    @property
    def state(self) -> State:
        return self.tm.state

    def init_transactions(self, keep_prepared_txn: bool = False) -> TransactionalRequestResult:
        """``initTransactions(keepPreparedTxn)`` (KIP-939: keep a prepared transaction of a crashed instance)."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        return self.tm.initialize_transactions(keep_prepared_txn=keep_prepared_txn)

    def begin_transaction(self) -> None:
        self._ensure_open()
        self._throw_if_in_prepared_state()
        self.tm.begin_transaction()

    def prepare_transaction(self) -> tuple[int, int]:
        """``KafkaProducer.prepareTransaction``: the ``PreparedTxnState`` (producer id, epoch). Kafka flushes first;
        here the caller must have drained (a batch still incomplete is refused)."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        if not self.tm.enable_two_pc:
            raise InvalidTxnStateException("Cannot prepare a transaction when 2PC is not enabled")
        if self.has_incomplete_batches():
            raise IllegalStateException("prepareTransaction flushes first: batches are still incomplete")
        return self.tm.prepare_transaction()

    def complete_transaction(self, prepared_txn_state: tuple[int, int]) -> TransactionalRequestResult:
        """``KafkaProducer.completeTransaction``: commit exactly when ``prepared_txn_state`` is the client's."""
        self._ensure_open()
        if self.tm.state is not St.PREPARED_TRANSACTION:
            raise InvalidTxnStateException("Cannot complete transaction because no transaction has been prepared. "
                                           "Call prepareTransaction() first, or make sure initTransaction(true) "
                                           "was called.")
        if tuple(prepared_txn_state) == self.tm.prepared_txn_state:
            return self.tm.begin_commit()
        return self.tm.begin_abort()

    def _throw_if_in_prepared_state(self) -> None:
        """``KafkaProducer.throwIfInPreparedState``: only commit, abort or complete in PREPARED_TRANSACTION."""
        if self.tm.is_transactional and self.tm.state is St.PREPARED_TRANSACTION:
            raise IllegalStateException("Cannot perform operation while the transaction is in a prepared state. "
                                        "Only commitTransaction(), abortTransaction(), or completeTransaction() "
                                        "are permitted.")

    def send(self, partition: str, value: RecordValue = None, key: RecordValue = None, *,
             timestamp: int = 0) -> RecordFuture:
        """``KafkaProducer.send``: ApiExceptions come back in the future, others are raised."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        if not isinstance(partition, str) or not partition:
            raise InvalidRequestError(f"partition must be a non-empty string, got {partition!r}")
        for name, v in (("value", value), ("key", key)):
            if v is not None and not isinstance(v, str | bytes):
                raise InvalidRequestError(f"{name} must be bytes, str or None, got {type(v).__name__}")
        future = RecordFuture(partition)
        # As KafkaProducer.doSend: the record is appended to the accumulator first, then the partition is
        # added to the transaction (which may throw, leaving the record behind until an abort drops it).
        queue = self.accumulator.setdefault(partition, deque())
        if not queue or queue[-1].base_sequence != -1 or len(queue[-1].records) >= self.batch_records:
            queue.append(ProducerBatch(partition))
        queue[-1].records.append(Record(key, value, timestamp))
        queue[-1].futures.append(future)
        try:
            self.tm.maybe_add_partition(partition)
        except ApiException as e:
            self.tm.maybe_transition_to_error_state(e)
            future._fail(e)
        return future

    def send_offsets_to_transaction(self, offsets: Mapping[str, int], group_id: str,
                                    member: MemberIdentity | None = None) -> TransactionalRequestResult:
        """``KafkaProducer.sendOffsetsToTransaction``; ``member`` is the consumer's group metadata (KIP-447)."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        if not isinstance(group_id, str) or not group_id:
            raise InvalidRequestError(f"group_id must be a non-empty string, got {group_id!r}")
        if not isinstance(offsets, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2 ** 63 - 1
                for k, v in offsets.items()):
            raise InvalidRequestError("offsets must map partition names to non-negative integer offsets")
        return self.tm.send_offsets_to_transaction(offsets, group_id, member)

    def commit_transaction(self) -> TransactionalRequestResult:
        self._ensure_open()
        return self.tm.begin_commit()

    def abort_transaction(self) -> TransactionalRequestResult:
        self._ensure_open()
        return self.tm.begin_abort()

    def close(self) -> None:
        self.closed = True

    def _ensure_open(self) -> None:
        if self.closed:
            raise IllegalStateException("Cannot perform operation after producer has been closed")

    # --- the Sender ---

    def has_incomplete_batches(self) -> bool:
        return bool(self.in_flight_produce) or any(self.accumulator.values())

    def _abort_undrained_batches(self, e: BaseException) -> None:
        for queue in self.accumulator.values():
            for batch in [b for b in queue if not b.in_flight and b.base_sequence == -1]:
                queue.remove(batch)
                for f in batch.futures:
                    f._fail(e)

    def poll(self) -> list[TransactionalRequest | Produce]:
        """Run Sender iterations until nothing more can be sent; the requests to send, in order."""
        out: list[TransactionalRequest | Produce] = []
        if self.closed:
            return out
        for _ in range(64):
            sent = self._run_once()
            if not sent:
                break
            out.extend(sent)
        return out

    def _run_once(self) -> list[TransactionalRequest | Produce]:
        tm = self.tm
        if not tm.is_transactional and not tm.has_producer_id and tm.state is St.UNINITIALIZED \
                and self.in_flight_txn is None and any(self.accumulator.values()):
            tm._transition_to(St.INITIALIZING)  # the idempotent producer's InitProducerId (no coordinator)
            init = InitProducerIdHandler(tm, False)
            init.coordinator_type = None
            tm._enqueue(init)
        if tm.is_transactional or tm.pending_requests or self.in_flight_txn is not None:
            if self.in_flight_txn is not None:
                return []
            if tm.state is St.FATAL_ERROR:
                self._abort_undrained_batches(tm.last_error or KafkaException("fatal error"))
                return []
            if tm.state in (St.ABORTABLE_ERROR, St.ABORTING_TRANSACTION) and self.has_incomplete_batches():
                self._abort_undrained_batches(tm.last_error or TransactionAbortedException(
                    "Failing batch since transaction was aborted"))
            tm._on_sender_thread = True
            try:
                while True:  # a handler failed by the error state is dropped; look at the next one
                    before = len(tm.pending_requests)
                    handler = tm.next_request(self.has_incomplete_batches())
                    if handler is not None or len(tm.pending_requests) >= before or not tm.pending_requests:
                        break
            except IllegalStateException:
                return []
            finally:
                tm._on_sender_thread = False
            if handler is not None:
                if handler.coordinator_type is not None \
                        and (handler.coordinator_type, handler.coordinator_key) not in tm.coordinators:
                    tm._lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
                    handler.is_retry = True
                    tm._enqueue(handler)
                    return self._run_once()
                request = handler.build()
                request = _with_correlation(request, next(self._correlation))
                self.in_flight_txn = (request, handler)
                return [request]
            if tm.has_fatal_error or not tm.has_producer_id:
                return []
        elif not tm.has_producer_id:
            return []
        return self._drain()

    def _drain(self) -> list[TransactionalRequest | Produce]:
        tm = self.tm
        out: list[TransactionalRequest | Produce] = []
        for partition in sorted(self.accumulator):
            queue = self.accumulator[partition]
            if not queue or not tm.is_send_to_partition_allowed(partition):
                continue
            entry = tm.partitions.setdefault(partition, TxnPartitionEntry())
            earlier_in_flight = False  # the queue holds the partition's unfinished batches in sequence order
            for batch in list(queue):
                if batch.in_flight:
                    earlier_in_flight = True
                    continue
                if batch.backing_off:
                    break  # RecordAccumulator.drain: the first batch is backing off, the partition waits
                if len(entry.in_flight) >= self.max_in_flight:
                    break
                if batch.base_sequence != -1 and earlier_in_flight:
                    # RecordAccumulator.shouldStopDrainBatchesForPartition: a retried batch goes out only when it
                    # is the first in flight (firstInFlightSequence), and nothing new goes before it
                    break
                if batch.base_sequence == -1 and any((b.producer_id, b.producer_epoch) != (tm.producer_id,
                                                                                           tm.producer_epoch)
                                                     for b in entry.in_flight):
                    break  # no new batch while one of an older producer id or epoch is in flight
                earlier_in_flight = True
                if batch.base_sequence == -1 or batch.producer_epoch != tm.producer_epoch \
                        or batch.producer_id != tm.producer_id:
                    batch.base_sequence = entry.next_sequence
                    batch.producer_id, batch.producer_epoch = tm.producer_id, tm.producer_epoch
                    entry.next_sequence = increment_sequence(batch.base_sequence, len(batch.records))
                batch.in_flight = True
                batch.attempts += 1
                entry.in_flight.append(batch)
                request = Produce(partition, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                  tuple(batch.records), tm.is_transactional, tm.transactional_id,
                                  tm.transaction_version, next(self._correlation))
                self.in_flight_produce[request.correlation_id] = (request, batch)
                out.append(request)
        return out

    def on_response(self, request: TransactionalRequest | Produce, response: Response) -> None:
        """Feed back the broker's answer to a request returned by :meth:`poll`."""
        if isinstance(request, Produce):
            self._complete_batch(request, response)
            return
        if self.in_flight_txn is None or self.in_flight_txn[0] is not request:
            raise InvalidRequestError(f"no transactional request {type(request).__name__} is in flight")
        _, handler = self.in_flight_txn
        self.in_flight_txn = None
        self.tm._on_sender_thread = True
        try:
            handler.handle_response(response)
        except IllegalStateException:
            pass  # the manager is poisoned (FATAL_ERROR) by _transition_to
        finally:
            self.tm._on_sender_thread = False

    def on_earlier_attempt_response(self, request: Produce, response: Response) -> None:
        """The answer to a copy of a Produce whose correlation was already answered (the request was sent again
        while this copy was on its way). The broker answers by sequence, so while the batch (partition, producer
        id, epoch, base sequence) is unfinished this is its answer, as good as the attempt in flight now (whose
        own answer is then ignored); once the batch is finished it is stale."""
        queue = self.accumulator.get(request.partition, deque())
        batch = next((b for b in queue if (b.producer_id, b.producer_epoch, b.base_sequence)
                      == (request.producer_id, request.producer_epoch, request.base_sequence)), None)
        if batch is None:
            return
        for cid, (_, b) in list(self.in_flight_produce.items()):
            if b is batch:
                del self.in_flight_produce[cid]
        self.in_flight_produce[request.correlation_id] = (request, batch)
        self._complete_batch(request, response)

    def end_retry_backoff(self, partition: str | None = None, base_sequence: int | None = None) -> None:
        """``retry.backoff.ms`` elapsed for every batch waiting for its retry (see ``retry_backoff``), or only for
        the batch of ``partition`` with ``base_sequence`` (each batch backs off from its own failed attempt:
        ``ProducerBatch.reenqueued``)."""
        for name, queue in self.accumulator.items():
            for batch in queue:
                if (partition is None or name == partition) and (base_sequence is None
                                                                 or batch.base_sequence == base_sequence):
                    batch.backing_off = False

    def on_disconnect(self, request: TransactionalRequest | Produce) -> None:
        """The request (or its response) was lost: retry it, re-looking up the coordinator."""
        if isinstance(request, Produce):
            self._complete_batch(request, Response(Errors.NETWORK_EXCEPTION))
            return
        if self.in_flight_txn is None or self.in_flight_txn[0] is not request:
            return
        _, handler = self.in_flight_txn
        self.in_flight_txn = None
        if not self.tm.rules.reenqueues_lost_requests:
            return
        if handler.coordinator_type is not None:
            self.tm._lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
        handler.reenqueue()

    def expire_batch(self, partition: str, base_sequence: int | None = None) -> None:
        """The delivery timeout expired for a batch sent to ``partition``, in flight or waiting for its retry
        (``Sender.sendProducerData``: ``failBatch`` with a ``TimeoutException``; ``base_sequence`` names it when
        several were sent): the transaction must abort, and a TV < 2 producer bumps its epoch after the abort unless
        it was already completing (``maybeTransitionToErrorState``). A batch in retry may have been written, so
        its sequence is unresolved (``markSequenceUnresolved`` -> ``maybeResolveSequences``): the bump is then
        required also while completing. Its answer, if it ever comes, is ignored."""
        sent = [b for b in self.accumulator.get(partition, deque()) if b.base_sequence != -1
                and base_sequence in (None, b.base_sequence)]
        if not sent:
            which = "" if base_sequence is None else f" with base sequence {base_sequence}"
            raise InvalidRequestError(f"no Produce to {partition}{which} is in flight")
        batch = sent[0]
        for cid, (_, b) in list(self.in_flight_produce.items()):
            if b is batch:
                del self.in_flight_produce[cid]
        tm = self.tm
        entry = tm.partitions.setdefault(partition, TxnPartitionEntry())
        if batch in entry.in_flight:
            entry.in_flight.remove(batch)
        batch.in_flight = False
        queue = self.accumulator.get(partition, deque())
        if batch in queue:
            queue.remove(batch)
        exc = TimeoutException(f"expiring the batch to {partition}: the delivery timeout elapsed")
        for f in batch.futures:
            f._fail(exc)
        tm._on_sender_thread = True
        try:
            tm.maybe_transition_to_error_state(exc)
            if tm.is_transactional and tm.need_to_trigger_epoch_bump_from_client and batch.in_retry:
                tm.client_side_epoch_bump_required = True  # the sequence is unresolved
        except IllegalStateException:
            pass
        finally:
            tm._on_sender_thread = False

    def _complete_batch(self, request: Produce, response: Response) -> None:
        found = self.in_flight_produce.pop(request.correlation_id, None)
        if found is None:
            raise InvalidRequestError(f"no Produce with correlation id {request.correlation_id} is in flight")
        _, batch = found
        tm = self.tm
        entry = tm.partitions.setdefault(batch.partition, TxnPartitionEntry())
        if batch in entry.in_flight:
            entry.in_flight.remove(batch)
        batch.in_flight = False
        queue = self.accumulator.get(batch.partition, deque())
        e = response.error
        if e in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
            if batch in queue:
                queue.remove(batch)
            if batch.producer_epoch == tm.producer_epoch and batch.producer_id == tm.producer_id:
                entry.last_acked_sequence = batch.last_sequence
            for i, f in enumerate(batch.futures):
                f._complete(response.base_offset + i if response.base_offset >= 0 else -1)
            return
        earlier_unfinished = False
        for unfinished in queue:  # the partition's unfinished batches, in sequence order
            if unfinished is batch:
                break
            earlier_unfinished = earlier_unfinished or (unfinished.base_sequence != -1 and (
                unfinished.producer_id, unfinished.producer_epoch) == (batch.producer_id, batch.producer_epoch))
        if tm.can_retry(e, batch, earlier_unfinished) and tm.state is not St.FATAL_ERROR:
            batch.backing_off = self.retry_backoff
            batch.in_retry = True  # ProducerBatch.reenqueued
            return  # stays queued with its sequence; drained again in order
        if batch in queue:
            queue.remove(batch)
        exc: BaseException = e.exception(f"{e.name} from partition {batch.partition}")
        for f in batch.futures:
            f._fail(exc)
        tm._on_sender_thread = True
        try:
            tm.maybe_transition_to_error_state(exc)
        except IllegalStateException:
            pass
        finally:
            tm._on_sender_thread = False
        if not entry.in_flight:
            entry.next_sequence = increment_sequence(entry.last_acked_sequence, 1) \
                if entry.last_acked_sequence != INT_MAX else 0

    # --- views ---

    @property
    def producer_id(self) -> int:
        return self.tm.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.tm.producer_epoch

    def in_flight_requests(self) -> list[TransactionalRequest | Produce]:
        out: list[TransactionalRequest | Produce] = [] if self.in_flight_txn is None else [self.in_flight_txn[0]]
        out.extend(r for r, _ in self.in_flight_produce.values())
        return out


def _with_correlation(request: TransactionalRequest, correlation_id: int) -> TransactionalRequest:
    from dataclasses import replace
    return replace(request, correlation_id=correlation_id)


assert SHORT_MAX == 32_767

__all__ = ["VALID_PREVIOUS_STATES", "Priority", "Producer", "ProducerBatch", "RecordFuture", "RecordMetadata", "State",
           "TransactionManager", "TransactionalRequestResult"]
