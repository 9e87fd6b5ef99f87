"""The transaction coordinator: transaction metadata, its transitions, and one handler per request.

System
    One transaction coordinator owning the transaction-log partition of every transactional id it
    serves. For each id it keeps a :class:`TxnMetadata` in its cache (Kafka's
    ``TransactionMetadata``); every change is first *prepared* (the target goes into
    ``pending_state`` and an immutable :class:`TxnTransit` is built), then written to the
    transaction log, then *completed* (the cache takes the transit's fields). Handlers:
    ``InitProducerId``, ``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``EndTxn`` (transaction version
    0/1 and 2 paths), marker acknowledgements and completion, the timeout scan, transactional-id
    expiration and the load after a failover.

Kafka sources followed (trunk, 4.x)
    ``core/.../transaction/TransactionCoordinator.scala`` (``handleInitProducerId``,
    ``prepareInitProducerIdTransit``, ``handleAddPartitionsToTransaction``, ``endTransaction``,
    ``endTransactionWithTV1``, ``abortTimedOutTransactions``), ``TransactionStateManager.scala``
    (``appendTransactionToLog``, ``removeExpiredTransactionalIds``, ``loadTransactionsForTxnTopicPartition``),
    ``TransactionMarkerRequestCompletionHandler.scala`` and
    ``transaction-coordinator/.../TransactionMetadata.java`` (every ``prepare*`` helper and
    ``completeTransitionTo``).

Assumptions
    * A request is handled atomically: Kafka holds the metadata lock while it checks and prepares, and
      the log append and its callback follow. The spec folds check, prepare, append and callback into
      one step; ``append_error`` says whether the append failed. So ``PrepareEpochFence`` is never
      visible between steps (as in Kafka, where it is set and consumed under one lock).
    * The transaction log is kept compacted: the last record per transactional id (a tombstone removes
      the id). Reloading replays exactly that, which is what Kafka's load does with last-record-wins.
    * Producer ids come from a counter (``next_producer_id``), as a ``ProducerIdManager`` block would.
    * Epochs are bounded by ``CoordinatorConfig.max_epoch`` (Kafka: ``Short.MAX_VALUE`` = 32767) so the
      model checker can reach epoch exhaustion; "exhausted" is ``epoch >= max_epoch - 1`` as in Kafka.

Two-phase commit (KIP-939, as Kafka 4.4 ships it; docs/kip-939.md)
    ``Enable2Pc`` needs the broker config ``transaction.two.phase.commit.enable`` (else
    ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``), lifts the timeout bound and stores ``Int.MaxValue``: such a
    transaction is never a timeout candidate (:func:`is_timeout_candidate`). ``KeepPreparedTxn`` is answered
    ``UNSUPPORTED_VERSION``: 4.4's coordinator does not implement it yet. The KIP's design, which keeps the
    ongoing transaction, is the variant :func:`handle_init_producer_id_keeping_prepared`.

Not modelled
    The ``TWO_PHASE_COMMIT`` ACL, authorization, ``DescribeTransactions`` and ``ListTransactions``, a
    coordinator epoch per transaction-log partition (one coordinator epoch for all partitions: a new coordinator
    takes over every partition it loads at one new epoch), and batching of
    tombstones.

Transaction-log partitions and loading
    ``CoordinatorConfig.txn_log_partitions`` partitions of ``__transaction_state``; an id lives in
    ``abs(hashCode) % n``. A partition whose load is under way answers ``COORDINATOR_LOAD_IN_PROGRESS``, one
    this coordinator does not lead ``NOT_COORDINATOR`` (``TransactionStateManager.getAndMaybeAddTransactionState``);
    :func:`begin_load`, :func:`finish_load` and :func:`emigrate` are ``loadTransactionsForTxnTopicPartition``
    split at its read, and ``removeTransactionsForTxnTopicPartition`` (which cancels a load under way).

Deliberate deviations
    Kafka throws ``IllegalStateException`` when a transition is not in the valid-previous-states table
    or fails ``completeTransitionTo``'s checks. The spec records the offending transition in
    ``CoordinatorState.illegal_transitions`` instead (and answers ``UNKNOWN_SERVER_ERROR``), so that the
    model checker reports it as a violation of ``valid_coordinator_transitions`` with a trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from txnspec.spec.constants import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX_VALUE,
    group_offsets_partition,
    is_epoch_exhausted,
    java_string_hash,
)
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerId,
    InitProducerIdResponse,
    TransactionResult,
    WriteTxnMarkers,
)
from txnspec.spec.txn_state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_STATES,
    DEAD,
    EMPTY,
    EXPIRATION_ALLOWED,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARE_STATES,
    VALID_PREVIOUS_STATES,
    TxnState,
)
from txnspec.spec.values import replace, value

TV_0, TV_2 = 0, 2
INT_MAX_TIMEOUT = 2147483647  # KIP-939: a two-phase-commit transaction never times out


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

def _put(pairs: tuple[tuple[str, object], ...], key: str, value: object | None) -> tuple:  # type: ignore[type-arg]
    """A sorted association tuple with ``key`` set to ``value`` (removed when ``value`` is None)."""
    kept = [(k, v) for k, v in pairs if k != key]
    if value is not None:
        kept.append((key, value))
        kept.sort(key=lambda kv: kv[0])
    return tuple(kept)


def with_metadata(cs: CoordinatorState, md: TxnMetadata | None, tid: str) -> CoordinatorState:
    return replace(cs, cache=_put(cs.cache, tid, md))


def _allocate_producer_id(cs: CoordinatorState) -> tuple[CoordinatorState, int]:
    return replace(cs, next_producer_id=cs.next_producer_id + 1), cs.next_producer_id


def _illegal(cs: CoordinatorState, transactional_id: str, reason: str) -> CoordinatorState:
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


# --- TransactionMetadata: prepare and complete ---------------------------------------------------

def _transit(md: TxnMetadata, target: TxnState, **changes: object) -> TxnTransit:
    """The transit ``prepareTransitionTo`` builds: the metadata's fields, ``changes`` applied.

    ``prev_producer_id`` is always the current producer id (Kafka sets it on every transition).
    """
    values: dict[str, object] = {
        "producer_id": md.producer_id, "prev_producer_id": md.producer_id,
        "next_producer_id": md.next_producer_id, "producer_epoch": md.producer_epoch,
        "last_producer_epoch": md.last_producer_epoch, "txn_timeout_ms": md.txn_timeout_ms,
        "state": target, "partitions": md.partitions, "txn_start_ms": md.txn_start_ms,
        "txn_last_update_ms": md.txn_last_update_ms, "transaction_version": md.transaction_version,
    }
    values.update(changes)
    return TxnTransit(**values)  # type: ignore[arg-type]


def prepare_transition_to(cs: CoordinatorState, md: TxnMetadata, transit: TxnTransit, config: CoordinatorConfig
                          ) -> tuple[CoordinatorState, TxnMetadata | None]:
    """``TransactionMetadata.prepareTransitionTo``: the table check, then ``pending_state := target``.

    Returns the metadata with its pending state set, or ``None`` (and the state with the illegal
    transition recorded) where Kafka would throw.
    """
    target = transit.state
    problem = ""
    if md.pending_state is not None:
        problem = f"already has pending state {md.pending_state}"
    elif transit.producer_id < 0:
        problem = f"illegal new producer id {transit.producer_id}"
    elif target is not DEAD and transit.producer_epoch < 0:
        problem = f"illegal new producer epoch {transit.producer_epoch}"
    elif md.state not in config.valid_previous_states[target]:
        problem = f"{target} is not a valid successor of {md.state}"
    if problem:
        return _illegal(cs, md.transactional_id, f"{md.state} -> {target}: {problem}"), None
    return cs, replace(md, pending_state=target)


def _valid_producer_epoch(md: TxnMetadata, t: TxnTransit) -> bool:
    """``TransactionMetadata.validProducerEpoch`` (trunk)."""
    if supports_epoch_bump(t.transaction_version):
        if t.state in COMPLETE_STATES and t.producer_epoch == 0:  # completion of an epoch overflow
            return t.last_producer_epoch == md.last_producer_epoch and t.prev_producer_id == md.producer_id
        if t.state in PREPARE_STATES:
            return t.last_producer_epoch == md.producer_epoch and t.producer_id == md.producer_id
    return t.producer_epoch == md.producer_epoch and t.producer_id == md.producer_id


def _valid_producer_epoch_bump(md: TxnMetadata, t: TxnTransit) -> bool:
    return t.producer_epoch == md.producer_epoch + 1 or (t.producer_epoch == 0 and t.producer_id != md.producer_id)


def complete_transition_to(md: TxnMetadata, t: TxnTransit) -> TxnMetadata | IllegalTransition:
    """``TransactionMetadata.completeTransitionTo``: the checks, then the cache takes every field.

    Returns the new metadata, or the transition Kafka would refuse with ``IllegalStateException``.
    """
    target = md.pending_state
    if target is None:
        return IllegalTransition(md.transactional_id, "completing a transition without a pending state")
    if target is not t.state:
        return IllegalTransition(md.transactional_id, f"pending state {target} does not match the transit's {t.state}")
    ok = True
    if target is EMPTY:
        ok = ((md.producer_epoch == t.producer_epoch or _valid_producer_epoch_bump(md, t))
              and not t.partitions and t.txn_start_ms == -1)
    elif target is ONGOING:
        ok = (_valid_producer_epoch(md, t) and t.partitions >= md.partitions
              and md.txn_timeout_ms == t.txn_timeout_ms)
    elif target in PREPARE_STATES:
        allowed_empty_abort = (target is PREPARE_ABORT and supports_epoch_bump(t.transaction_version)
                               and md.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT))
        ok = (_valid_producer_epoch(md, t) and md.partitions == t.partitions
              and md.txn_timeout_ms == t.txn_timeout_ms
              and (md.txn_start_ms == t.txn_start_ms or allowed_empty_abort))
    elif target in COMPLETE_STATES:
        ok = _valid_producer_epoch(md, t) and md.txn_timeout_ms == t.txn_timeout_ms and t.txn_start_ms != -1
    else:  # PrepareEpochFence and Dead are never completed
        ok = False
    if not ok:
        return IllegalTransition(md.transactional_id, f"invalid completion {md.state} -> {t.state}")
    return TxnMetadata(
        md.transactional_id, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
        t.last_producer_epoch, t.txn_timeout_ms, t.state, t.partitions, t.txn_start_ms,
        t.txn_last_update_ms, t.transaction_version, pending_state=None,
        has_failed_epoch_fence=md.has_failed_epoch_fence)


def prepare_fence_producer_epoch(md: TxnMetadata, config: CoordinatorConfig) -> TxnTransit:
    """``prepareFenceProducerEpoch``: epoch + 1, unless a failed fence already bumped it in memory."""
    keep = md.has_failed_epoch_fence or md.producer_epoch == config.max_epoch
    return _transit(md, PREPARE_EPOCH_FENCE, producer_epoch=md.producer_epoch if keep else md.producer_epoch + 1)


def prepare_increment_producer_epoch(md: TxnMetadata, timeout_ms: int, expected_epoch: int | None, now_ms: int,
                                     max_epoch: int = SHORT_MAX_VALUE) -> TxnTransit | Errors:
    """``prepareIncrementProducerEpoch`` (KIP-360): bump, or accept a retry of the last bump, or fence.

    An exhausted epoch cannot be bumped: Kafka throws ``IllegalStateException``, which
    ``prepareInitProducerIdTransit`` turns into ``Errors.forException``, i.e. ``UNKNOWN_SERVER_ERROR``
    (reached when the caller expects an epoch other than the current, exhausted one)."""
    if is_epoch_exhausted(md.producer_epoch, max_epoch):
        return Errors.UNKNOWN_SERVER_ERROR
    if expected_epoch is None:
        epoch, last = md.producer_epoch + 1, NO_PRODUCER_EPOCH
    elif md.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == md.producer_epoch:
        epoch, last = md.producer_epoch + 1, md.producer_epoch
    elif expected_epoch == md.last_producer_epoch:  # a retry of a bump whose response was lost
        epoch, last = md.producer_epoch, md.last_producer_epoch
    else:
        return Errors.PRODUCER_FENCED
    return _transit(md, EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=timeout_ms,
                    partitions=frozenset(), txn_start_ms=-1, txn_last_update_ms=now_ms)


def prepare_producer_id_rotation(md: TxnMetadata, new_producer_id: int, timeout_ms: int, now_ms: int,
                                 record_last_epoch: bool) -> TxnTransit:
    """``prepareProducerIdRotation``: a fresh producer id at epoch 0 once the epoch is exhausted."""
    return _transit(md, EMPTY, producer_id=new_producer_id, producer_epoch=0,
                    last_producer_epoch=md.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                    txn_timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1, txn_last_update_ms=now_ms)


def prepare_add_partitions(md: TxnMetadata, partitions: frozenset[str], now_ms: int,
                           client_transaction_version: int) -> TxnTransit:
    starts_now = md.state in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT)
    return _transit(md, ONGOING, partitions=md.partitions | partitions,
                    txn_start_ms=now_ms if starts_now else md.txn_start_ms, txn_last_update_ms=now_ms,
                    transaction_version=client_transaction_version)


def prepare_abort_or_commit(md: TxnMetadata, target: TxnState, client_transaction_version: int,
                            next_producer_id: int, now_ms: int, no_partition_added: bool,
                            config: CoordinatorConfig) -> TxnTransit:
    """``prepareAbortOrCommit``: TV2 bumps the epoch at the Prepare step (KIP-890)."""
    if supports_epoch_bump(client_transaction_version):
        at_max = md.producer_epoch == config.max_epoch and target is PREPARE_ABORT
        epoch, last = (md.producer_epoch if at_max else md.producer_epoch + 1), md.producer_epoch
    else:
        epoch, last = md.producer_epoch, md.last_producer_epoch
    return _transit(md, target, producer_epoch=epoch, last_producer_epoch=last,
                    txn_start_ms=now_ms if no_partition_added else md.txn_start_ms,
                    next_producer_id=next_producer_id, txn_last_update_ms=now_ms,
                    transaction_version=client_transaction_version)


def prepare_complete(md: TxnMetadata, now_ms: int) -> TxnTransit:
    """``prepareComplete``: TV2 switches to the producer id allocated at Prepare after an overflow."""
    target = COMPLETE_COMMIT if md.state is PREPARE_COMMIT else COMPLETE_ABORT
    rotate = supports_epoch_bump(md.transaction_version) and md.next_producer_id != NO_PRODUCER_ID
    return _transit(md, target, producer_id=md.next_producer_id if rotate else md.producer_id,
                    producer_epoch=0 if rotate else md.producer_epoch, next_producer_id=NO_PRODUCER_ID,
                    partitions=frozenset(), txn_last_update_ms=now_ms)


def prepare_dead(md: TxnMetadata) -> TxnTransit:
    return _transit(md, DEAD, partitions=frozenset())


# --- the transaction log ------------------------------------------------------------------------

@value
class _Append:
    state: CoordinatorState
    error: Errors
    appended: Appended


def append_transaction_to_log(cs: CoordinatorState, md: TxnMetadata, transit: TxnTransit,
                              append_error: Errors, config: CoordinatorConfig, *,
                              retry_on_error: frozenset[Errors] = frozenset()) -> _Append:
    """``TransactionStateManager.appendTransactionToLog`` then ``completeTransitionTo``.

    ``md`` carries the pending state set by :func:`prepare_transition_to`. On failure the pending
    state is reset unless the mapped error is in ``retry_on_error`` (marker completion keeps it for
    ``COORDINATOR_NOT_AVAILABLE``); nothing is written.
    """
    tid = md.transactional_id
    if append_error is not Errors.NONE:
        error = map_append_error(append_error)
        kept = md if error in retry_on_error else replace(md, pending_state=None)
        return _Append(with_metadata(cs, kept, tid), error, ())
    logged = replace(cs, txn_log=_put(cs.txn_log, tid, transit))
    completed = complete_transition_to(md, transit)
    if isinstance(completed, IllegalTransition):
        cleared = with_metadata(logged, replace(md, pending_state=None), tid)
        return _Append(_illegal(cleared, completed.transactional_id, completed.reason), Errors.UNKNOWN_SERVER_ERROR,
                       ((tid, transit),))
    return _Append(with_metadata(logged, completed, tid), Errors.NONE, ((tid, transit),))


# --- InitProducerId ------------------------------------------------------------------------------

def _is_valid_producer_id(md: TxnMetadata, producer_id: int, epoch: int, config: CoordinatorConfig) -> bool:
    """``isValidProducerId`` (KIP-360): whom an InitProducerId with an expected id and epoch may bump."""
    return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
            or (producer_id == md.prev_producer_id and is_epoch_exhausted(epoch, config.max_epoch)))


def handle_init_producer_id(cs: CoordinatorState, request: InitProducerId, *,
                            config: CoordinatorConfig = DEFAULT_CONFIG,
                            append_error: Errors = Errors.NONE, keeps_prepared: bool = False) -> CoordinatorResult:
    """``TransactionCoordinator.handleInitProducerId`` with ``prepareInitProducerIdTransit``.

    No transactional id: a fresh producer id at epoch 0 and no state kept. Otherwise: create the
    metadata on first use; ``CONCURRENT_TRANSACTIONS`` while a transition is pending or a transaction
    is being prepared; ``PRODUCER_FENCED`` for an expected (pid, epoch) that is neither current nor a
    retry; a bump (or a producer-id rotation once the epoch is exhausted) from Empty/Complete*; and for
    an Ongoing transaction, a fence: abort it with epoch + 1 and answer ``CONCURRENT_TRANSACTIONS`` so
    the client retries (the fenced epoch is never returned).
    """
    def fail(state: CoordinatorState, error: Errors, appended: tuple = ()) -> CoordinatorResult:  # type: ignore[type-arg]
        return CoordinatorResult(state, InitProducerIdResponse(error), appended)

    tid = request.transactional_id
    if tid is None:
        cs, producer_id = _allocate_producer_id(cs)
        return CoordinatorResult(cs, InitProducerIdResponse(Errors.NONE, producer_id, 0))
    if tid == "":
        return fail(cs, Errors.INVALID_REQUEST)
    # KafkaApis: exactly one of producer id and epoch set is a malformed request.
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        return fail(cs, Errors.INVALID_REQUEST)
    # KIP-939 (4.4): 2PC only where the broker allows it; keepPreparedTxn is not implemented yet
    if request.enable_two_pc and not config.transaction_two_phase_commit_enable:
        return fail(cs, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.keep_prepared_txn and not keeps_prepared:
        return fail(cs, Errors.UNSUPPORTED_VERSION)
    if not (request.enable_two_pc or 0 < request.txn_timeout_ms <= config.txn_max_timeout_ms):
        return fail(cs, Errors.INVALID_TRANSACTION_TIMEOUT)  # validateTransactionTimeoutMs
    timeout_ms = INT_MAX_TIMEOUT if request.enable_two_pc else request.txn_timeout_ms
    expected = None if request.producer_id == NO_PRODUCER_ID else (request.producer_id, request.producer_epoch)
    unserved = ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        return fail(cs, unserved)

    md = cs.metadata(tid)
    if md is None:
        cs, producer_id = _allocate_producer_id(cs)
        md = TxnMetadata(tid, producer_id, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                         timeout_ms, EMPTY, frozenset(), -1, cs.now_ms, TV_0)
        cs = with_metadata(cs, md, tid)

    if md.pending_state is not None:
        return fail(cs, Errors.CONCURRENT_TRANSACTIONS)
    if expected is not None and not _is_valid_producer_id(md, *expected, config):
        return fail(cs, Errors.PRODUCER_FENCED)
    if md.state in PREPARE_STATES:
        return fail(cs, Errors.CONCURRENT_TRANSACTIONS)
    if md.state is ONGOING and request.keep_prepared_txn:
        return _keep_ongoing_transaction(cs, md, timeout_ms, append_error, config)
    if md.state is ONGOING:
        fence = prepare_fence_producer_epoch(md, config)
        cs, pending = prepare_transition_to(cs, md, fence, config)
        if pending is None:
            return fail(cs, Errors.UNKNOWN_SERVER_ERROR)
        cs = with_metadata(cs, pending, tid)
        ended = _end_transaction(cs, tid, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT,
                                 from_client=False, client_transaction_version=config.transaction_version,
                                 config=config, append_error=append_error)
        error = Errors.CONCURRENT_TRANSACTIONS if ended.error is Errors.NONE else ended.error
        return CoordinatorResult(ended.state, InitProducerIdResponse(error), ended.appended, ended.markers)
    if md.state not in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT):  # Dead, PrepareEpochFence
        return fail(_illegal(cs, tid, f"InitProducerId found state {md.state}"), Errors.UNKNOWN_SERVER_ERROR)

    transit: TxnTransit | Errors
    if is_epoch_exhausted(md.producer_epoch, config.max_epoch) and (
            expected is None or expected[1] == md.producer_epoch):
        cs, new_producer_id = _allocate_producer_id(cs)
        transit = prepare_producer_id_rotation(md, new_producer_id, timeout_ms, cs.now_ms,
                                               record_last_epoch=expected is not None)
    else:
        transit = prepare_increment_producer_epoch(md, timeout_ms,
                                                   None if expected is None else expected[1], cs.now_ms,
                                                   config.max_epoch)
    if isinstance(transit, Errors):
        return fail(cs, transit)
    cs, pending = prepare_transition_to(cs, md, transit, config)
    if pending is None:
        return fail(cs, Errors.UNKNOWN_SERVER_ERROR)
    done = append_transaction_to_log(cs, pending, transit, append_error, config)
    if done.error is not Errors.NONE:
        return fail(done.state, done.error, done.appended)
    return CoordinatorResult(done.state, InitProducerIdResponse(Errors.NONE, transit.producer_id,
                                                                transit.producer_epoch), done.appended)


def _keep_ongoing_transaction(cs: CoordinatorState, md: TxnMetadata, timeout_ms: int, append_error: Errors,
                              config: CoordinatorConfig) -> CoordinatorResult:
    """KIP-939's ``keepPreparedTxn`` on an Ongoing transaction (the KIP's design; 4.4 answers UNSUPPORTED_VERSION
    before getting here): the transaction stays open with its partitions, the epoch is bumped so that the crashed
    instance is fenced, and the answer carries both pairs: the new one to write with, and the ongoing one to match
    against the external coordinator's ``PreparedTxnState``.

    The KIP persists the ongoing pair in a tagged field of ``TransactionLogValue``; the spec keeps its epoch in
    ``last_producer_epoch`` (kept by a second recovery, cleared by the next transition), which a failover would
    lose: the 2PC scenarios have none. Epoch exhaustion (a new producer id) is left out."""
    tid = md.transactional_id
    ongoing_epoch = md.last_producer_epoch if md.last_producer_epoch != NO_PRODUCER_EPOCH else md.producer_epoch
    transit = _transit(md, ONGOING, producer_epoch=md.producer_epoch + 1, last_producer_epoch=ongoing_epoch,
                       txn_timeout_ms=timeout_ms, txn_last_update_ms=cs.now_ms)
    cs, pending = prepare_transition_to(cs, md, transit, config)
    if pending is None:
        return CoordinatorResult(cs, InitProducerIdResponse(Errors.UNKNOWN_SERVER_ERROR))
    if append_error is not Errors.NONE:
        cs = with_metadata(cs, replace(pending, pending_state=None), tid)
        return CoordinatorResult(cs, InitProducerIdResponse(map_append_error(append_error)))
    t = transit
    kept = TxnMetadata(tid, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
                       t.last_producer_epoch, t.txn_timeout_ms, t.state, t.partitions, t.txn_start_ms,
                       t.txn_last_update_ms, t.transaction_version, has_failed_epoch_fence=md.has_failed_epoch_fence)
    cs = with_metadata(replace(cs, txn_log=_put(cs.txn_log, tid, transit)), kept, tid)
    return CoordinatorResult(cs, InitProducerIdResponse(Errors.NONE, md.producer_id, transit.producer_epoch,
                                                        md.producer_id, ongoing_epoch), ((tid, transit),))


def handle_init_producer_id_keeping_prepared(cs: CoordinatorState, request: InitProducerId, *,
                                             config: CoordinatorConfig = DEFAULT_CONFIG,
                                             append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """KIP-939's design of ``handleInitProducerId`` (neither 4.4 nor trunk has it yet): ``keepPreparedTxn`` keeps
    an ongoing transaction (:func:`_keep_ongoing_transaction`) instead of answering UNSUPPORTED_VERSION."""
    return handle_init_producer_id(cs, request, config=config, append_error=append_error, keeps_prepared=True)


def is_timeout_candidate(md: TxnMetadata) -> bool:
    """``TransactionStateManager.timedOutTransactions``' filter, time aside: an Ongoing transaction with nothing
    pending that is not a distributed two-phase commit (``isDistributedTwoPhaseCommitTxn``: timeout
    ``Int.MaxValue``, KIP-939: only the external coordinator completes it)."""
    return md.pending_state is None and md.state is ONGOING and md.txn_timeout_ms != INT_MAX_TIMEOUT


# --- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------

def handle_add_partitions_to_txn(cs: CoordinatorState, request: AddPartitionsToTxn, *,
                                 config: CoordinatorConfig = DEFAULT_CONFIG,
                                 append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``TransactionCoordinator.handleAddPartitionsToTransaction`` (trunk check order).

    Pending transition first (``CONCURRENT_TRANSACTIONS``), then producer id, then epoch, then a
    transaction being prepared; partitions already in an Ongoing transaction answer ``NONE`` with no
    log write; otherwise Empty/Complete*/Ongoing -> Ongoing.
    """
    tid = request.transactional_id
    if not tid:
        return CoordinatorResult(cs, ErrorResponse(Errors.INVALID_REQUEST))
    md = cs.metadata(tid)
    unserved = ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        error = unserved
    elif md is None:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif md.pending_state is not None:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif md.producer_id != request.producer_id:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif md.producer_epoch != request.producer_epoch:
        error = Errors.PRODUCER_FENCED
    elif md.state in PREPARE_STATES:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif md.state is ONGOING and request.partitions <= md.partitions:
        error = Errors.NONE
    else:
        transit = prepare_add_partitions(md, request.partitions, cs.now_ms, request.transaction_version)
        cs, pending = prepare_transition_to(cs, md, transit, config)
        if pending is None:
            return CoordinatorResult(cs, ErrorResponse(Errors.UNKNOWN_SERVER_ERROR))
        done = append_transaction_to_log(cs, pending, transit, append_error, config)
        return CoordinatorResult(done.state, ErrorResponse(done.error), done.appended)
    return CoordinatorResult(cs, ErrorResponse(error))


def handle_add_offsets_to_txn(cs: CoordinatorState, request: AddOffsetsToTxn, *,
                              config: CoordinatorConfig = DEFAULT_CONFIG,
                              append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``KafkaApis.handleAddOffsetsToTxnRequest``: add the group's ``__consumer_offsets`` partition (TV 0)."""
    add = AddPartitionsToTxn(request.transactional_id, request.producer_id, request.producer_epoch,
                             frozenset({group_offsets_partition(request.group_id)}), TV_0)
    return handle_add_partitions_to_txn(cs, add, config=config, append_error=append_error)


# --- EndTxn ----------------------------------------------------------------------------------------

@value
class _Ended:
    state: CoordinatorState
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    appended: Appended = ()
    markers: tuple[tuple[str, WriteTxnMarkers], ...] = ()


def handle_end_txn(cs: CoordinatorState, request: EndTxn, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                   append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``TransactionCoordinator.handleEndTransaction``: the TV2 path for transaction version 2 clients,
    the TV1 path (``endTransactionWithTV1``) otherwise."""
    ended = _end_transaction(cs, request.transactional_id, request.producer_id, request.producer_epoch,
                             request.result, from_client=True,
                             client_transaction_version=request.transaction_version,
                             config=config, append_error=append_error)
    return CoordinatorResult(ended.state, EndTxnResponse(ended.error, ended.producer_id, ended.producer_epoch),
                             ended.appended, ended.markers)


def _end_transaction(cs: CoordinatorState, tid: str, producer_id: int, epoch: int, result: TransactionResult, *,
                     from_client: bool, client_transaction_version: int, config: CoordinatorConfig,
                     append_error: Errors) -> _Ended:
    if not tid:
        return _Ended(cs, Errors.INVALID_REQUEST)
    unserved = ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        return _Ended(cs, unserved)
    md = cs.metadata(tid)
    if md is None:
        return _Ended(cs, Errors.INVALID_PRODUCER_ID_MAPPING)
    tv2 = supports_epoch_bump(client_transaction_version)
    decision = (_decide_end_txn_v2 if tv2 else _decide_end_txn_v1)(
        cs, md, producer_id, epoch, result, from_client, config)
    if isinstance(decision, _Ended):
        return decision
    cs, md, transit, is_fence = decision
    cs, pending = prepare_transition_to(cs, md, transit, config)
    if pending is None:
        return _Ended(cs, Errors.UNKNOWN_SERVER_ERROR)
    done = append_transaction_to_log(cs, pending, transit, append_error, config)
    if done.error is not Errors.NONE:
        cs = done.state
        if is_fence and not tv2:
            # TV1: the fenced epoch is already in memory; a retried fence must not bump it again.
            failed = cs.metadata(tid)
            if failed is not None:
                cs = with_metadata(cs, replace(failed, has_failed_epoch_fence=True), tid)
        return _Ended(cs, done.error, appended=done.appended)
    return _send_txn_markers(done.state, tid, producer_id, epoch, result, tv2, done.appended, config)


_Decision = tuple[CoordinatorState, TxnMetadata, TxnTransit, bool]


def _invalid_txn_state(cs: CoordinatorState) -> _Ended:
    return _Ended(cs, Errors.INVALID_TXN_STATE)


def _decide_end_txn_v1(cs: CoordinatorState, md: TxnMetadata, producer_id: int, epoch: int,
                       result: TransactionResult, from_client: bool, config: CoordinatorConfig
                       ) -> _Ended | _Decision:
    """``endTransactionWithTV1``: strict epoch equality for clients; idempotent retries of a Complete."""
    if md.producer_id != producer_id:
        return _Ended(cs, Errors.INVALID_PRODUCER_ID_MAPPING)
    if (from_client and epoch != md.producer_epoch) or epoch < md.producer_epoch:
        return _Ended(cs, Errors.PRODUCER_FENCED)
    is_fence = md.pending_state is PREPARE_EPOCH_FENCE
    if md.pending_state is not None and not is_fence:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS)
    commit = result is TransactionResult.COMMIT
    if md.state is ONGOING:
        target = PREPARE_COMMIT if commit else PREPARE_ABORT
        fencing = target is PREPARE_ABORT and is_fence
        if fencing:
            # Kafka sets the fenced epoch in memory before the append and never rolls it back.
            md = replace(md, pending_state=None, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)
            cs = with_metadata(cs, md, md.transactional_id)
        transit = prepare_abort_or_commit(md, target, TV_0, NO_PRODUCER_ID, cs.now_ms, False, config)
        return cs, md, transit, fencing
    if md.state is COMPLETE_COMMIT:
        return _Ended(cs, Errors.NONE) if commit else _invalid_txn_state(cs)
    if md.state is COMPLETE_ABORT:
        return _Ended(cs, Errors.NONE) if not commit else _invalid_txn_state(cs)
    if md.state is PREPARE_COMMIT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if commit else _invalid_txn_state(cs)
    if md.state is PREPARE_ABORT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if not commit else _invalid_txn_state(cs)
    if md.state is EMPTY:
        return _invalid_txn_state(cs)
    return _Ended(_illegal(cs, md.transactional_id, f"EndTxn found state {md.state}"), Errors.UNKNOWN_SERVER_ERROR)


def _decide_end_txn_v2(cs: CoordinatorState, md: TxnMetadata, producer_id: int, epoch: int,
                       result: TransactionResult, from_client: bool, config: CoordinatorConfig
                       ) -> _Ended | _Decision:
    """``endTransaction`` for transaction version 2 (KIP-890): every end bumps the epoch; a retry
    carries the epoch before the bump (or, after an overflow, the old producer id at ``max_epoch - 1``)."""
    is_fence = md.pending_state is PREPARE_EPOCH_FENCE
    retry_on_overflow = (not is_fence and md.prev_producer_id == producer_id
                         and epoch == config.max_epoch - 1 and md.producer_epoch == 0)
    retry_on_epoch_bump = not is_fence and md.producer_epoch == epoch + 1
    if not is_fence:
        if md.state in PREPARE_STATES:
            valid_epoch = retry_on_epoch_bump
        elif md.state in COMPLETE_STATES:
            valid_epoch = retry_on_epoch_bump or retry_on_overflow or epoch == md.producer_epoch
        else:  # Ongoing, Empty, Dead, PrepareEpochFence
            valid_epoch = epoch == md.producer_epoch
    else:
        valid_epoch = (not from_client or epoch == md.producer_epoch) and epoch >= md.producer_epoch
    is_retry = retry_on_epoch_bump or retry_on_overflow

    if md.pending_state is not None and not is_fence:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS)
    if md.producer_id != producer_id and not retry_on_overflow:
        return _Ended(cs, Errors.INVALID_PRODUCER_ID_MAPPING)
    if not valid_epoch:
        return _Ended(cs, Errors.PRODUCER_FENCED)

    def prepare(target: TxnState, no_partition_added: bool) -> _Decision:
        state, meta = cs, md
        next_producer_id = NO_PRODUCER_ID
        if is_epoch_exhausted(meta.producer_epoch, config.max_epoch):
            state, next_producer_id = _allocate_producer_id(state)
        if target is PREPARE_ABORT and is_fence:
            meta = replace(meta, pending_state=None)  # one bump only, by prepareAbortOrCommit
            state = with_metadata(state, meta, meta.transactional_id)
        transit = prepare_abort_or_commit(meta, target, TV_2, next_producer_id, state.now_ms,
                                          no_partition_added, config)
        return state, meta, transit, is_fence

    commit = result is TransactionResult.COMMIT
    current = _Ended(cs, Errors.NONE, md.producer_id, md.producer_epoch)
    if md.state is ONGOING:
        return prepare(PREPARE_COMMIT if commit else PREPARE_ABORT, False)
    if md.state is COMPLETE_COMMIT:
        if commit:
            return current if is_retry else _invalid_txn_state(cs)
        return _invalid_txn_state(cs) if is_retry else prepare(PREPARE_ABORT, True)
    if md.state is COMPLETE_ABORT:
        if not commit:
            return current if is_retry else prepare(PREPARE_ABORT, True)
        return _invalid_txn_state(cs)
    if md.state is PREPARE_COMMIT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if commit else _invalid_txn_state(cs)
    if md.state is PREPARE_ABORT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if not commit else _invalid_txn_state(cs)
    if md.state is EMPTY:
        return prepare(PREPARE_ABORT, True) if not commit else _invalid_txn_state(cs)
    return _Ended(_illegal(cs, md.transactional_id, f"EndTxn found state {md.state}"), Errors.UNKNOWN_SERVER_ERROR)


def _send_txn_markers(cs: CoordinatorState, tid: str, producer_id: int, epoch: int, result: TransactionResult,
                      tv2: bool, appended: Appended, config: CoordinatorConfig
                      ) -> _Ended:
    """``sendTxnMarkersCallback``: re-check, ``prepareComplete``, reply, hand the markers to the channel."""
    md = cs.metadata(tid)
    assert md is not None  # the append just completed on this coordinator
    expected_state = PREPARE_COMMIT if result is TransactionResult.COMMIT else PREPARE_ABORT
    if md.producer_id != producer_id:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif (md.producer_epoch not in (epoch, epoch + 1)) if tv2 else (md.producer_epoch != epoch):
        error = Errors.PRODUCER_FENCED
    elif md.pending_state is not None:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif md.state is not expected_state:
        error = Errors.INVALID_TXN_STATE
    else:
        error = Errors.NONE
    if error is not Errors.NONE:
        return _Ended(cs, error, appended=appended)
    complete = prepare_complete(md, cs.now_ms)
    cs, pending = prepare_transition_to(cs, replace(md, has_failed_epoch_fence=False), complete, config)
    if pending is None:
        return _Ended(cs, Errors.UNKNOWN_SERVER_ERROR, appended=appended)
    cs = with_metadata(cs, pending, tid)
    cs, markers, more = add_txn_markers_to_send(cs, pending, result, complete, config)
    return _Ended(cs, Errors.NONE, complete.producer_id if tv2 else NO_PRODUCER_ID,
                  complete.producer_epoch if tv2 else NO_PRODUCER_EPOCH, appended + more, markers)


# --- markers and completion ------------------------------------------------------------------------

def markers_for(cs: CoordinatorState, md: TxnMetadata, result: TransactionResult
                ) -> tuple[tuple[str, WriteTxnMarkers], ...]:
    """One ``WriteTxnMarkers`` per partition still waiting, with the metadata's (bumped) pid and epoch."""
    return tuple((md.transactional_id, WriteTxnMarkers(p, md.producer_id, md.producer_epoch, cs.coordinator_epoch,
                                                       result, md.transaction_version))
                 for p in sorted(md.partitions))


def add_txn_markers_to_send(cs: CoordinatorState, md: TxnMetadata, result: TransactionResult, complete: TxnTransit,
                            config: CoordinatorConfig
                            ) -> tuple[CoordinatorState, tuple[tuple[str, WriteTxnMarkers], ...], Appended]:
    """``TransactionMarkerChannelManager.addTxnMarkersToSend``: queue markers; none to send completes at once."""
    tid = md.transactional_id
    cs = replace(cs, completions=_put(cs.completions, tid, PendingCompletion(cs.coordinator_epoch, result, complete)))
    if not md.partitions and config.complete_without_markers:
        done = _write_complete(cs, tid, Errors.NONE, config)
        return done.state, (), done.appended
    return cs, markers_for(cs, md, result), ()


# TransactionMarkerRequestCompletionHandler: what the coordinator does with each per-partition answer.
MARKER_DONE_ERRORS = frozenset({Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION})
MARKER_RETRY_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT, Errors.KAFKA_STORAGE_ERROR,
    Errors.NETWORK_EXCEPTION})
MARKER_GIVE_UP_ERRORS = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})


def handle_write_txn_markers_response(cs: CoordinatorState, tid: str, partition: str, coordinator_epoch: int,
                                      error: Errors, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                                      append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """One partition's answer to a marker. Done: ``removePartition``; the last one writes Complete*.

    A retriable error leaves the partition waiting (the channel re-sends); ``INVALID_PRODUCER_EPOCH``
    or ``TRANSACTION_COORDINATOR_FENCED`` make the coordinator give up on this transaction's markers
    (Kafka then leaves the transaction prepared until the id's partition is reloaded). An answer for a
    completion the coordinator no longer tracks (stale coordinator epoch) is ignored.
    """
    pending = cs.completion(tid)
    md = cs.metadata(tid)
    if pending is None or md is None or pending.coordinator_epoch != coordinator_epoch:
        return CoordinatorResult(cs)
    if error in MARKER_RETRY_ERRORS:
        return CoordinatorResult(cs)
    if error in MARKER_GIVE_UP_ERRORS:
        return CoordinatorResult(replace(cs, completions=_put(cs.completions, tid, None)))
    if error not in MARKER_DONE_ERRORS:
        return CoordinatorResult(_illegal(cs, tid, f"unexpected marker error {error}"))
    if partition not in md.partitions:
        return CoordinatorResult(cs)
    md = replace(md, partitions=md.partitions - {partition})
    cs = with_metadata(cs, md, tid)
    if md.partitions:
        return CoordinatorResult(cs)
    done = _write_complete(cs, tid, append_error, config)
    return CoordinatorResult(done.state, None, done.appended)


def _write_complete(cs: CoordinatorState, tid: str, append_error: Errors, config: CoordinatorConfig) -> _Append:
    """All markers acknowledged: append the Complete* record (``tryAppendToLog``)."""
    pending = cs.completion(tid)
    md = cs.metadata(tid)
    assert pending is not None and md is not None
    done = append_transaction_to_log(cs, md, pending.complete, append_error, config,
                                     retry_on_error=frozenset({Errors.COORDINATOR_NOT_AVAILABLE}))
    if done.error is Errors.COORDINATOR_NOT_AVAILABLE:
        return done  # stays queued, pending state kept: the channel retries
    return _Append(replace(done.state, completions=_put(done.state.completions, tid, None)), done.error, done.appended)


def markers_written(cs: CoordinatorState, tid: str, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                    append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """Every partition of ``tid``'s prepared transaction acknowledged its marker: Prepare* -> Complete*."""
    md = cs.metadata(tid)
    if md is None or md.state not in PREPARE_STATES:
        return CoordinatorResult(cs)
    if cs.completion(tid) is None:
        if md.pending_state is (COMPLETE_COMMIT if md.state is PREPARE_COMMIT else COMPLETE_ABORT):
            # prepareComplete ran (its transition is pending) but no channel holds it: Kafka's
            # completeTransitionTo(prepareComplete(now)) completes it (TransactionCoordinatorTest
            # shouldReturnConcurrentTxnOnAddPartitionsIfEndTxnV2EpochOverflowAndNotComplete)
            md = replace(md, pending_state=None)
        complete = prepare_complete(md, cs.now_ms)
        cs, pending_md = prepare_transition_to(cs, replace(md, has_failed_epoch_fence=False), complete, config)
        if pending_md is None:
            return CoordinatorResult(cs)
        result = TransactionResult.COMMIT if md.state is PREPARE_COMMIT else TransactionResult.ABORT
        cs = with_metadata(cs, pending_md, tid)
        cs = replace(cs, completions=_put(cs.completions, tid,
                                          PendingCompletion(cs.coordinator_epoch, result, complete)))
        md = pending_md
    cs = with_metadata(cs, replace(md, partitions=frozenset()), tid)
    done = _write_complete(cs, tid, append_error, config)
    return CoordinatorResult(done.state, None, done.appended)


# --- timeouts, expiration, failover ---------------------------------------------------------------

def timed_out_transactions(cs: CoordinatorState, now_ms: int) -> tuple[str, ...]:
    """``TransactionStateManager.timedOutTransactions``: Ongoing, nothing pending, start + timeout < now."""
    return tuple(tid for tid, md in cs.cache
                 if is_timeout_candidate(md) and md.txn_start_ms + md.txn_timeout_ms < now_ms)


def abort_timed_out_transaction(cs: CoordinatorState, tid: str, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                                append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """Abort one transaction the coordinator found timed out: fence the epoch, then abort it.

    The model checker calls this for any Ongoing transaction (time is abstract there); the periodic
    scan :func:`abort_timed_out_transactions` calls it for each candidate of the clock.
    """
    md = cs.metadata(tid)
    if md is None or md.pending_state is not None or md.state is not ONGOING:
        return CoordinatorResult(cs)
    fence = prepare_fence_producer_epoch(md, config)
    cs, pending = prepare_transition_to(cs, md, fence, config)
    if pending is None:
        return CoordinatorResult(cs)
    cs = with_metadata(cs, pending, tid)
    ended = _end_transaction(cs, tid, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT,
                             from_client=False, client_transaction_version=config.transaction_version,
                             config=config, append_error=append_error)
    return CoordinatorResult(ended.state, None, ended.appended, ended.markers)


def abort_timed_out_transactions(cs: CoordinatorState, now_ms: int, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                                 append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``TransactionCoordinator.abortTimedOutTransactions``: the periodic scan at ``now_ms``."""
    cs = replace(cs, now_ms=now_ms)
    appended: Appended = ()
    markers: tuple[tuple[str, WriteTxnMarkers], ...] = ()
    for tid in timed_out_transactions(cs, now_ms):
        step = abort_timed_out_transaction(cs, tid, config=config, append_error=append_error)
        cs, appended, markers = step.state, appended + step.appended, markers + step.markers
    return CoordinatorResult(cs, None, appended, markers)


def expire_transactional_ids(cs: CoordinatorState, now_ms: int, expiration_ms: int, *,
                             config: CoordinatorConfig = DEFAULT_CONFIG,
                             append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``removeExpiredTransactionalIds``: idle ids (Empty/Complete*, nothing pending, not updated for
    ``expiration_ms``) are written as tombstones and removed from the cache."""
    cs = replace(cs, now_ms=now_ms)
    appended: list[tuple[str, TxnTransit | None]] = []
    for tid, md in cs.cache:
        if md.pending_state is None and md.state in EXPIRATION_ALLOWED \
                and md.txn_last_update_ms <= now_ms - expiration_ms:
            cs, pending = prepare_transition_to(cs, md, prepare_dead(md), config)
            if pending is None:
                continue
            if append_error is not Errors.NONE:
                cs = with_metadata(cs, replace(pending, pending_state=None), tid)
                continue
            cs = replace(cs, txn_log=_put(cs.txn_log, tid, None))
            cs = with_metadata(cs, None, tid)
            appended.append((tid, None))
    return CoordinatorResult(cs, None, tuple(appended))


def expire_transactional_id(cs: CoordinatorState, tid: str, *, config: CoordinatorConfig = DEFAULT_CONFIG
                            ) -> CoordinatorResult:
    """``removeExpiredTransactionalIds`` for one id whose ``transactional.id.expiration.ms`` has passed (the system
    model's abstract time): Empty or Complete*, nothing pending, no markers being written; ``prepareDead``, the
    tombstone, and the id leaves the cache. Anything else is left as it is."""
    md = cs.metadata(tid)
    if md is None or md.pending_state is not None or md.state not in EXPIRATION_ALLOWED \
            or cs.completion(tid) is not None:
        return CoordinatorResult(cs)
    cs, pending = prepare_transition_to(cs, md, prepare_dead(md), config)
    if pending is None:
        return CoordinatorResult(cs)
    cs = replace(cs, txn_log=_put(cs.txn_log, tid, None))
    return CoordinatorResult(with_metadata(cs, None, tid), None, ((tid, None),))


def _loaded_metadata(tid: str, t: TxnTransit, config: CoordinatorConfig) -> TxnMetadata:
    """A log record read back (``TransactionLog.readTxnRecordValue``): in-memory fields start afresh
    (``last_producer_epoch`` -1, nothing pending, no failed fence). With the cluster at transaction version 0
    the values are version 0, which have no previous or next producer id and no client transaction version
    (tagged fields of version 1, ``TransactionLogValue.json``): they read back as their defaults, -1, -1, 0."""
    tagged = config.transaction_version >= 1
    return TxnMetadata(tid, t.producer_id, t.prev_producer_id if tagged else NO_PRODUCER_ID,
                       t.next_producer_id if tagged else NO_PRODUCER_ID, t.producer_epoch,
                       NO_PRODUCER_EPOCH, t.txn_timeout_ms, t.state, t.partitions, t.txn_start_ms,
                       t.txn_last_update_ms, t.transaction_version if tagged else 0)


def _load_ids(cs: CoordinatorState, loaded: tuple[tuple[str, TxnTransit], ...], now_ms: int,
              config: CoordinatorConfig) -> CoordinatorResult:
    """``addLoadedTransactionsToCache``, then every loaded Prepare* transaction completed: ``prepareComplete``
    and its markers (re)sent."""
    for tid, t in loaded:
        cs = with_metadata(cs, _loaded_metadata(tid, t, config), tid)
    markers: tuple[tuple[str, WriteTxnMarkers], ...] = ()
    appended: Appended = ()
    for tid, _t in loaded:
        md = cs.metadata(tid)
        if md is not None and md.state in PREPARE_STATES:
            result = TransactionResult.COMMIT if md.state is PREPARE_COMMIT else TransactionResult.ABORT
            complete = prepare_complete(md, now_ms)
            cs, pending = prepare_transition_to(cs, md, complete, config)
            if pending is None:
                continue
            cs = with_metadata(cs, pending, tid)
            cs, sent, more = add_txn_markers_to_send(cs, pending, result, complete, config)
            markers, appended = markers + sent, appended + more
    return CoordinatorResult(cs, None, appended, markers)


def load_from_log(txn_log: tuple[tuple[str, TxnTransit], ...], now_ms: int, coordinator_epoch: int,
                  next_producer_id: int, config: CoordinatorConfig = DEFAULT_CONFIG) -> CoordinatorResult:
    """``loadTransactionsForTxnTopicPartition`` of every partition at once: rebuild the cache from the log after
    a failover (see :func:`_loaded_metadata` and :func:`_load_ids`)."""
    cs = CoordinatorState(coordinator_epoch=coordinator_epoch, now_ms=now_ms, next_producer_id=next_producer_id,
                          txn_log=txn_log)
    return _load_ids(cs, txn_log, now_ms, config)


def _without_partition(cs: CoordinatorState, partition: int, config: CoordinatorConfig) -> CoordinatorState:
    """The cache entries and the markers being written of every id of ``partition`` dropped."""
    def kept(tid: str) -> bool:
        return txn_log_partition(tid, config) != partition
    return replace(cs, cache=tuple(kv for kv in cs.cache if kept(kv[0])),
                   completions=tuple(kv for kv in cs.completions if kept(kv[0])))


def begin_load(cs: CoordinatorState, partitions: frozenset[int], *, config: CoordinatorConfig = DEFAULT_CONFIG
               ) -> CoordinatorResult:
    """This coordinator becomes the leader of ``partitions`` at coordinator epoch + 1 and starts loading them
    (``loadTransactionsForTxnTopicPartition`` up to its read of the log: the partitions are in ``loadingPartitions``,
    their requests answered ``COORDINATOR_LOAD_IN_PROGRESS``); what it cached of them before is gone."""
    for partition in sorted(partitions):
        cs = _without_partition(cs, partition, config)
    return CoordinatorResult(replace(cs, coordinator_epoch=cs.coordinator_epoch + 1, loading=cs.loading | partitions,
                                     not_led=cs.not_led - partitions))


def finish_load(cs: CoordinatorState, partition: int, *, config: CoordinatorConfig = DEFAULT_CONFIG
                ) -> CoordinatorResult:
    """The read of ``partition``'s log is done. Unless the load was cancelled meanwhile (Kafka checks
    ``loadingPartitions.contains`` under the write lock), its ids enter the cache and its prepared transactions
    are completed (:func:`_load_ids`); the partition is served from then on. A cancelled load does nothing."""
    if partition not in cs.loading:
        return CoordinatorResult(cs)
    cs = replace(cs, loading=cs.loading - {partition})
    loaded = tuple(kv for kv in cs.txn_log if txn_log_partition(kv[0], config) == partition)
    return _load_ids(cs, loaded, cs.now_ms, config)


def emigrate(cs: CoordinatorState, partition: int, *, config: CoordinatorConfig = DEFAULT_CONFIG
             ) -> CoordinatorResult:
    """``removeTransactionsForTxnTopicPartition``: the partition's leadership moved away; its cache goes, a load
    under way is cancelled, and its ids are answered ``NOT_COORDINATOR`` from now on."""
    cs = _without_partition(cs, partition, config)
    return CoordinatorResult(replace(cs, loading=cs.loading - {partition}, not_led=cs.not_led | {partition}))


def coordinator_failover(cs: CoordinatorState, *, config: CoordinatorConfig = DEFAULT_CONFIG) -> CoordinatorResult:
    """A new coordinator (coordinator epoch + 1) takes over the transaction log and loads it."""
    return load_from_log(cs.txn_log, cs.now_ms, cs.coordinator_epoch + 1, cs.next_producer_id, config)


__all__ = [
    "CoordinatorConfig", "CoordinatorResult", "CoordinatorState", "IllegalTransition", "PendingCompletion",
    "TxnMetadata", "TxnTransit", "abort_timed_out_transaction", "abort_timed_out_transactions",
    "append_transaction_to_log", "begin_load", "complete_transition_to", "coordinator_failover", "emigrate",
    "expire_transactional_id", "expire_transactional_ids", "finish_load", "handle_add_offsets_to_txn",
    "handle_add_partitions_to_txn", "handle_end_txn", "handle_init_producer_id",
    "handle_write_txn_markers_response", "load_from_log", "markers_written", "ownership_error",
    "prepare_transition_to", "supports_epoch_bump", "timed_out_transactions", "txn_log_partition",
]
