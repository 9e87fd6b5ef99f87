"""The transactional producer's request handlers: what each transactional request is built from, and what its
answer does to the manager (done, retried, a coordinator looked up again, an abortable or a fatal error).

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/TransactionManager.java``:
``TxnRequestHandler`` (``reenqueue``, ``fatalError``, ``abortableError``, ``abortableErrorIfPossible``,
``lookupCoordinator``) and every subclass's ``handleResponse`` with its fatal / abortable / retriable
classification: ``FindCoordinatorHandler``, ``InitProducerIdHandler`` (with KIP-939's ``keepPreparedTxn``: the
kept transaction becomes ``PREPARED_TRANSACTION``), ``AddPartitionsToTxnHandler``, ``AddOffsetsToTxnHandler``,
``TxnOffsetCommitHandler``, ``EndTxnHandler``.

Assumed: a handler sees its manager through :class:`Manager`, the part of
:class:`txnspec.impl.transaction_manager.TransactionManager` it reads and changes (the manager builds the
handlers, so this module does not import it). Left out: request versions, throttling, the handlers' timing
(``retryBackoffMs``).

Long because it holds every subclass of Kafka's ``TxnRequestHandler`` (six), each a short ``handleResponse``
table of fatal, abortable and retriable answers that a reader compares side by side, as Kafka keeps them.
"""

from __future__ import annotations

from typing import Protocol

from txnspec.impl.client_results import TransactionalRequestResult
from txnspec.impl.client_states import Priority, St, State
from txnspec.impl.errors import (
    CommitFailedException,
    Errors,
    GroupAuthorizationException,
    KafkaException,
    ProducerFencedException,
    TopicAuthorizationException,
    TransactionalIdAuthorizationException,
)
from txnspec.impl.log import ControlType
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    FindCoordinator,
    InitProducerId,
    Response,
    TransactionalRequest,
    TxnOffsetCommit,
)
from txnspec.impl.topic_partition import TopicPartition


class Manager(Protocol):
    """What a handler reads and changes of its ``TransactionManager``."""

    transactional_id: str | None
    txn_timeout_ms: int
    transaction_version: int
    enable_two_pc: bool
    producer_id: int
    producer_epoch: int
    prepared_txn_state: tuple[int, int]
    last_error: BaseException | None
    coordinators: set[tuple[CoordinatorType, str]]
    pending_partitions: set[str]
    partitions_in_transaction: set[str]
    transaction_started: bool
    client_side_epoch_bump_required: bool

    @property
    def is_transaction_v2_enabled(self) -> bool: ...

    @property
    def can_handle_abortable_error(self) -> bool: ...

    @property
    def need_to_trigger_epoch_bump_from_client(self) -> bool: ...

    def _transition_to(self, target: State, error: BaseException | None = None) -> None: ...

    def _transition_to_abortable_error(self, e: BaseException) -> None: ...

    def _transition_to_fatal_error(self, e: BaseException) -> None: ...

    def _enqueue(self, handler: TxnRequestHandler) -> None: ...

    def _lookup_coordinator(self, key_type: CoordinatorType, key: str) -> None: ...

    def _reset_sequence_numbers(self) -> None: ...

    def _complete_transaction(self) -> None: ...


class TxnRequestHandler:
    priority = Priority.END_TXN
    coordinator_type: CoordinatorType | None = CoordinatorType.TRANSACTION

    def __init__(self, tm: Manager, result: TransactionalRequestResult | None = None) -> None:
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

    def __init__(self, tm: Manager, key_type: CoordinatorType, key: str) -> None:
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
    def __init__(self, tm: Manager, is_epoch_bump: bool, keep_prepared_txn: bool = False) -> None:
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

    def __init__(self, tm: Manager, partitions: set[str]) -> None:
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

    def __init__(self, tm: Manager, group_id: str, offsets: dict[str, int],
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

    def __init__(self, tm: Manager, group_id: str, offsets: dict[str, int],
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

    def __init__(self, tm: Manager, result: ControlType) -> None:
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


__all__ = ["AddOffsetsToTxnHandler", "AddPartitionsToTxnHandler", "EndTxnHandler", "FindCoordinatorHandler",
           "InitProducerIdHandler", "Manager", "TxnOffsetCommitHandler", "TxnRequestHandler"]
