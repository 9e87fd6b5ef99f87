"""The producer client's state: ``TransactionManager.State`` and its table, the configuration, the state value.

Models
    :class:`ClientState` is ``TransactionManager`` plus the parts of ``RecordAccumulator`` and ``Sender`` that
    decide what goes out: the priority queue of transactional requests with at most one in flight
    (:class:`TxnRequestHandler`, :class:`Priority`), the coordinators known, records not yet drained, batches in
    flight or waiting for a retry, and the next sequence number per partition. :data:`VALID_PREVIOUS_STATES` is
    ``State.isTransitionValid`` as data. Every step of the client returns ``(new state, ClientOutcome)``: the
    exception thrown to the application and the requests dispatched; :class:`Thrown` and :class:`Poisoned` are
    the two ways a step leaves early.

Kafka classes followed (trunk, 4.5.0-SNAPSHOT, ``clients/.../producer/internals/``)
    ``TransactionManager.java`` (``State``, ``State.isTransitionValid``, ``Priority``, ``TxnRequestHandler``,
    ``PendingStateTransition``), ``RecordAccumulator.java`` and ``TxnPartitionMap.java`` (the batches and
    sequences kept), ``ProducerConfig`` (the settings of :class:`ClientConfig`).

Assumptions
    * ``coordinatorSupportsBumpingEpoch`` (InitProducerId v3+), ``max.in.flight.requests``, ``batch.size`` (as a
      record count) and whether ``retry.backoff.ms`` is a step of its own are configuration (:class:`ClientConfig`);
      by default the coordinator supports epoch bumps, one batch per partition is in flight
      (``guaranteeMessageOrder``), a batch takes every record not yet drained and a retry goes at once.
    * A call that has not completed is a call still pending (``pending_transition``, Kafka's
      ``PendingStateTransition`` of a timed-out call).

Not modelled
    Record sizes, metadata, back-off timing (a back-off is one step).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeAlias

from txnspec.spec.constants import INT_MAX_VALUE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID
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


class Thrown(Exception):
    """Control flow: an exception thrown on the application thread (the state is left as it was)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class Poisoned(Exception):
    """Control flow: an invalid transition on the Sender thread; ``state`` is the poisoned manager."""

    def __init__(self, state: ClientState) -> None:
        super().__init__("poisoned")
        self.state = state


__all__ = [
    "ABORTABLE_ERROR", "ABORTING_TRANSACTION", "COMMITTING_TRANSACTION", "DEFAULT_CONFIG", "FATAL_ERROR",
    "INITIALIZING", "IN_TRANSACTION", "PREPARED_TRANSACTION", "READY", "UNINITIALIZED", "VALID_PREVIOUS_STATES",
    "ClientConfig", "ClientOutcome", "ClientState", "Poisoned", "Priority", "Response", "State", "Thrown",
    "TxnRequest", "TxnRequestHandler", "is_transition_valid",
]
