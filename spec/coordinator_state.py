"""The transaction coordinator's state: its configuration, the metadata of each transactional id, the log.

Models
    For each transactional id the coordinator keeps a :class:`TxnMetadata` in its cache (Kafka's
    ``TransactionMetadata``); every change is first *prepared* (the target goes into ``pending_state`` and an
    immutable :class:`TxnTransit` is built), then written to the transaction log, then *completed* (the cache takes
    the transit's fields): those steps are :mod:`txnspec.spec.txn_metadata`. This module holds the values they work
    on (:class:`CoordinatorState`: the cache, the compacted log, the producer-id allocator, the markers being
    written), a handler's :class:`CoordinatorResult`, which transaction-log partition owns an id and whether this
    coordinator serves it, and the mapping of the log's append errors.

Kafka sources followed (trunk, 4.x)
    ``transaction-coordinator/.../TransactionMetadata.java`` and ``TxnTransitMetadata.java`` (the fields),
    ``core/.../transaction/TransactionStateManager.scala`` (``partitionFor``, ``getAndMaybeAddTransactionState``,
    the error mapping of ``appendTransactionToLog``), ``TransactionConfig`` (the broker settings read).

Assumptions
    * The transaction log is kept compacted: the last record per transactional id (a tombstone removes the id).
    * Producer ids come from a counter (``next_producer_id``), as a ``ProducerIdManager`` block would.
    * Epochs are bounded by ``CoordinatorConfig.max_epoch`` (Kafka: ``Short.MAX_VALUE`` = 32767) so the model
      checker can reach epoch exhaustion.

Not modelled
    A coordinator epoch per transaction-log partition (one coordinator epoch for all partitions), the
    ``TWO_PHASE_COMMIT`` ACL and authorization.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from txnspec.spec.constants import SHORT_MAX_VALUE, java_string_hash
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    EndTxnResponse,
    ErrorResponse,
    InitProducerIdResponse,
    TransactionResult,
    WriteTxnMarkers,
)
from txnspec.spec.txn_state import VALID_PREVIOUS_STATES, TxnState
from txnspec.spec.values import replace, value

TV_0, TV_2 = 0, 2


def supports_epoch_bump(transaction_version: int) -> bool:
    """``TransactionVersion.supportsEpochBump``: transaction version 2 (KIP-890) and later."""
    return transaction_version >= TV_2


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker configuration and bounds the coordinator's handlers read.

    ``transaction_version`` is the cluster's finalized ``transaction.version``: the coordinator uses it
    for the aborts it starts itself (timeouts, fencing an ongoing transaction).
    """

    max_epoch: int = SHORT_MAX_VALUE
    txn_max_timeout_ms: int = 900_000
    transaction_version: int = TV_2
    transaction_two_phase_commit_enable: bool = False  # transaction.two.phase.commit.enable (KIP-939)
    # A prepared transaction with no partitions has no marker to wait for: Kafka writes its Complete
    # record at once. The behaviour cases leave it to an explicit MarkersWritten step.
    complete_without_markers: bool = True
    txn_log_partitions: int = 1  # transaction.state.log.num.partitions (Kafka's default is 50)
    valid_previous_states: Mapping[TxnState, frozenset[TxnState]] = field(
        default_factory=lambda: VALID_PREVIOUS_STATES)


DEFAULT_CONFIG = CoordinatorConfig()


@value
class TxnTransit:
    """``TxnTransitMetadata``: the record a transition writes to the transaction log."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[str]
    txn_start_ms: int
    txn_last_update_ms: int
    transaction_version: int


@value
class TxnMetadata:
    """``TransactionMetadata``: the coordinator's cached view of one transactional id."""

    transactional_id: str
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[str]
    txn_start_ms: int
    txn_last_update_ms: int
    transaction_version: int
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False


@value
class PendingCompletion:
    """A prepared transaction whose markers are being written (Kafka's marker channel entry)."""

    coordinator_epoch: int
    result: TransactionResult
    complete: TxnTransit


@value
class IllegalTransition:
    """A step Kafka refuses with ``IllegalStateException``: whose transaction, and why (text, for reports)."""

    transactional_id: str
    reason: str

    def __str__(self) -> str:
        return f"{self.transactional_id}: {self.reason}"


@value
class CoordinatorState:
    """The coordinator's cache, its durable transaction log and its producer-id allocator."""

    coordinator_epoch: int = 0
    now_ms: int = 0
    next_producer_id: int = 0
    cache: tuple[tuple[str, TxnMetadata], ...] = ()
    txn_log: tuple[tuple[str, TxnTransit], ...] = ()
    completions: tuple[tuple[str, PendingCompletion], ...] = ()
    illegal_transitions: tuple[IllegalTransition, ...] = ()
    # transaction-log partitions whose load is under way (COORDINATOR_LOAD_IN_PROGRESS), and those this
    # coordinator does not lead (NOT_COORDINATOR); every other partition is loaded and served
    loading: frozenset[int] = frozenset()
    not_led: frozenset[int] = frozenset()

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        for tid, md in self.cache:
            if tid == transactional_id:
                return md
        return None

    def completion(self, transactional_id: str) -> PendingCompletion | None:
        for tid, pending in self.completions:
            if tid == transactional_id:
                return pending
        return None


# Transaction-log records written by one step: (transactional id, record), None for a tombstone.
Appended = tuple[tuple[str, "TxnTransit | None"], ...]


@value
class CoordinatorResult:
    """What one handler did: the new state, the reply, the log records written, the markers to send."""

    state: CoordinatorState
    response: InitProducerIdResponse | EndTxnResponse | ErrorResponse | None = None
    appended: Appended = ()
    markers: tuple[tuple[str, WriteTxnMarkers], ...] = ()  # (transactional id, marker for one partition)


def txn_log_partition(transactional_id: str, config: CoordinatorConfig) -> int:
    """``TransactionStateManager.partitionFor``: ``Utils.abs(transactionalId.hashCode) % partitions``."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % config.txn_log_partitions


def ownership_error(cs: CoordinatorState, transactional_id: str, config: CoordinatorConfig) -> Errors:
    """``getAndMaybeAddTransactionState``'s ``Left``: a partition loading answers ``COORDINATOR_LOAD_IN_PROGRESS``
    (checked first), one with no cache here ``NOT_COORDINATOR``; ``NONE`` when the id's partition is served."""
    if not cs.loading and not cs.not_led:
        return Errors.NONE
    partition = txn_log_partition(transactional_id, config)
    if partition in cs.loading:
        return Errors.COORDINATOR_LOAD_IN_PROGRESS
    return Errors.NOT_COORDINATOR if partition in cs.not_led else Errors.NONE


# --- small pure helpers over the state ----------------------------------------------------------

def put_entry(pairs: tuple[tuple[str, object], ...], key: str, value: object | None) -> tuple:  # type: ignore[type-arg]
    """A sorted association tuple with ``key`` set to ``value`` (removed when ``value`` is None)."""
    kept = [(k, v) for k, v in pairs if k != key]
    if value is not None:
        kept.append((key, value))
        kept.sort(key=lambda kv: kv[0])
    return tuple(kept)


def with_metadata(cs: CoordinatorState, md: TxnMetadata | None, tid: str) -> CoordinatorState:
    return replace(cs, cache=put_entry(cs.cache, tid, md))


def allocate_producer_id(cs: CoordinatorState) -> tuple[CoordinatorState, int]:
    return replace(cs, next_producer_id=cs.next_producer_id + 1), cs.next_producer_id


def record_illegal(cs: CoordinatorState, transactional_id: str, reason: str) -> CoordinatorState:
    return replace(cs, illegal_transitions=(*cs.illegal_transitions, IllegalTransition(transactional_id, reason)))


# Kafka's TransactionStateManager.appendTransactionToLog maps the log's errors onto coordinator errors.
APPEND_ERROR_MAPPING: Mapping[Errors, Errors] = MappingProxyType({
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
})


def map_append_error(error: Errors) -> Errors:
    return APPEND_ERROR_MAPPING.get(error, error)


__all__ = [
    "APPEND_ERROR_MAPPING", "DEFAULT_CONFIG", "CoordinatorConfig", "CoordinatorResult", "CoordinatorState",
    "IllegalTransition", "PendingCompletion", "TxnMetadata", "TxnTransit", "allocate_producer_id", "map_append_error",
    "ownership_error", "put_entry", "record_illegal", "supports_epoch_bump", "txn_log_partition", "with_metadata",
]
