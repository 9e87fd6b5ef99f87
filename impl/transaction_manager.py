"""The transactional producer's state machine: Kafka's ``TransactionManager`` without its handlers.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/TransactionManager.java``:
``transitionTo`` over the table of :mod:`~txnspec.impl.client_states` (an invalid transition on the Sender side
poisons the manager: FATAL_ERROR), ``initializeTransactions`` incl. the KIP-360 epoch-bump variant and KIP-939's
``keepPreparedTxn``, ``beginTransaction``, ``prepareTransaction`` (KIP-939), ``maybeAddPartition``,
``sendOffsetsToTransaction``, ``beginCommit`` / ``beginAbort`` / ``beginCompletingTransaction``,
``handleCachedTransactionRequestResult`` / ``throwIfPendingState``, ``maybeFailWithError``, ``nextRequest`` with
the priority queue and the local EndTxn when nothing was added, ``canRetry`` and ``maybeTransitionToErrorState``
(``handleFailedBatch``) for produce errors. The handlers it queues are :mod:`~txnspec.impl.txn_handlers`.

Assumed: the TV of the client is fixed at construction; a request's answer arrives through the Sender
(:mod:`~txnspec.impl.sender`). Left out: ``max.block.ms``, the TV upgrade detection
(``ApiVersions``), metrics.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping

from txnspec.impl.client_results import TransactionalRequestResult
from txnspec.impl.client_states import VALID_PREVIOUS_STATES, St, State
from txnspec.impl.errors import (
    ClusterAuthorizationException,
    Errors,
    IllegalStateException,
    InvalidPidMappingException,
    InvalidProducerEpochException,
    InvalidTxnStateException,
    KafkaException,
    ProducerFencedException,
    RetriableException,
    TransactionAbortableException,
    TransactionalIdAuthorizationException,
    UnsupportedVersionException,
)
from txnspec.impl.log import ControlType
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.messages import CoordinatorType
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.producer_batch import ProducerBatch, TxnPartitionEntry
from txnspec.impl.txn_handlers import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnOffsetCommitHandler,
    TxnRequestHandler,
)

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


__all__ = ["TransactionManager"]
