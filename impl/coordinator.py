"""The transaction coordinator, its transaction log and its marker channel.

Follows Kafka TRUNK ``core/src/main/scala/kafka/coordinator/transaction/``: ``TransactionCoordinator``
(``handleInitProducerId`` with ``prepareInitProducerIdTransit``, ``handleAddPartitionsToTransaction``,
``handleEndTransaction`` with the TV1 path ``endTransactionWithTV1`` and the TV2 path,
``abortTimedOutTransactions``), ``TransactionStateManager`` (``appendTransactionToLog`` with its error
mapping, ``timedOutTransactions``, ``removeExpiredTransactionalIds``, ``loadTransactionsForTxnTopicPartition``),
``TransactionLog`` (key/value records in ``__transaction_state``) and ``TransactionMarkerChannelManager`` /
``TransactionMarkerRequestCompletionHandler``. KafkaApis' request checks (InitProducerId's
pid/epoch pairing, AddOffsetsToTxn's ``__consumer_offsets`` partition) are done here too.

What is modelled: every branch of the handlers above; the transaction log stored as records in internal
partitions ``__transaction_state-N`` of the same partition store, ``abs(javaHash(tid)) % N``; value version 0
(server TV 0: no previous/next producer id) or 1; ``lastProducerEpoch`` never persisted; failover = a new
coordinator epoch loading the log, completing Prepare* transactions by re-sending markers, or per partition:
:meth:`TransactionCoordinator.emigrate` (``removeTransactionsForTxnTopicPartition``: NOT_COORDINATOR),
:meth:`~TransactionCoordinator.begin_load` / :meth:`~TransactionCoordinator.finish_load` (the loading window:
COORDINATOR_LOAD_IN_PROGRESS, ``getAndMaybeAddTransactionState`` checks loading first); log-append
failure injection (:meth:`TransactionStateManager.fail_next_append`) with Kafka's error mapping.

Sans-I/O: handlers take ``now_ms`` and return results; markers to write are queued as
:class:`TxnMarker` values the caller drains with :meth:`TransactionCoordinator.drain_markers` and answers
with :meth:`TransactionCoordinator.on_marker_response`. ``manual_marker_completion=True`` makes the
coordinator never complete a prepared transaction by itself, even one without partitions: it waits for
:meth:`TransactionCoordinator.markers_written` (the behaviour cases' ``MarkersWritten`` convention).

KIP-939 as Kafka 4.4 ships it (docs/kip-939.md): ``enable2Pc`` needs ``transaction.two.phase.commit.enable``
(else ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``), lifts the timeout bound and stores ``Int.MaxValue``, which
``timedOutTransactions`` skips; ``keepPreparedTxn`` → ``UNSUPPORTED_VERSION``.

Assumed / left out: one coordinator epoch for every transaction-log partition (Kafka keeps one per
partition); no ACLs (nor the ``TWO_PHASE_COMMIT``
one); Describe/ListTransactions are plain views.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from txnspec.impl.errors import Errors, KafkaStorageException
from txnspec.impl.log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, ControlType, Record
from txnspec.impl.partition import Partition
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.topic_partition import TopicPartition
from txnspec.impl.txn_metadata import (
    INT_MAX,
    TV_0,
    TV_2,
    CoordinatorIllegalState,
    ProducerFenced,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)

S = TransactionState
TRANSACTION_STATE_TOPIC = "__transaction_state"
GROUP_METADATA_TOPIC = "__consumer_offsets"
DEFAULT_TXN_MAX_TIMEOUT_MS = 900_000
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """``Utils.abs(key.hashCode) % n`` (Kafka's ``abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def offsets_partition_for(group_id: str, num_partitions: int = 50) -> str:
    return TopicPartition(GROUP_METADATA_TOPIC, partition_for(group_id, num_partitions))


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One ``WriteTxnMarkers`` entry for one partition."""

    transactional_id: str
    partition: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: ControlType
    transaction_version: int


@dataclass
class CoordinatorConfig:
    txn_max_timeout_ms: int = DEFAULT_TXN_MAX_TIMEOUT_MS
    transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
    transaction_version: int = TV_2  # the finalized ``transaction.version`` feature of the cluster
    num_txn_log_partitions: int = 1
    num_offsets_partitions: int = 50
    manual_marker_completion: bool = False
    # Short.MAX_VALUE in Kafka (RecordBatch.NO_PRODUCER_EPOCH aside, epochs are shorts); a smaller bound lets a
    # test reach epoch exhaustion and the producer-id rotation after it in a few transactions, as the spec's
    # bounded scenarios do
    max_producer_epoch: int = SHORT_MAX
    # loading re-sends the markers of PrepareCommit/PrepareAbort (off only in the durability sabotage matrix)
    resend_prepared_markers: bool = True
    transaction_two_phase_commit_enable: bool = False  # transaction.two.phase.commit.enable (KIP-939)


class ProducerIdManager:
    """Hands out producer ids (``ProducerIdManager.generateProducerId``); ``persist`` records the next id."""

    def __init__(self, next_producer_id: int = 0, persist: Callable[[int], None] | None = None) -> None:
        self.next_producer_id = next_producer_id
        self.persist = persist
        self.fail_next: Errors | None = None

    def generate_producer_id(self) -> int:
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise _AllocationError(err)
        pid = self.next_producer_id
        if self.persist is not None:
            try:
                self.persist(pid + 1)  # reserved durably before it is handed out
            except KafkaStorageException as exc:
                # as RPCProducerIdManager when no block is available: retriable, the id is not used
                raise _AllocationError(Errors.COORDINATOR_LOAD_IN_PROGRESS) from exc
        self.next_producer_id = pid + 1
        return pid


class _AllocationError(Exception):
    def __init__(self, error: Errors) -> None:
        super().__init__(error.name)
        self.error = error


# --- TransactionLog: records of __transaction_state ---

def value_to_json(t: TxnTransitMetadata, server_tv: int) -> str:
    """``TransactionLog.valueToBytes``: version 1 iff the server TV >= 1. The previous and next producer ids and
    the client transaction version are tagged fields of version 1 (``TransactionLogValue.json``): version 0
    does not carry them."""
    value: dict[str, object] = {
        "version": 1 if server_tv >= 1 else 0, "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
        "timeout_ms": t.txn_timeout_ms, "status": t.txn_state.id,
        "partitions": None if t.txn_state is S.EMPTY else sorted(t.topic_partitions),
        "last_update_ms": t.txn_last_update_timestamp, "start_ms": t.txn_start_timestamp}
    if server_tv >= 1:
        value["prev_producer_id"] = t.prev_producer_id
        value["next_producer_id"] = t.next_producer_id
        value["client_tv"] = t.client_transaction_version
    return json.dumps(value, sort_keys=True)


def metadata_from_json(transactional_id: str, raw: str, max_epoch: int = SHORT_MAX) -> TransactionMetadata:
    """``TransactionLog.read``: ``last_producer_epoch`` is not stored, so it loads as -1; a tagged field a
    version-0 value lacks loads as its default (previous / next producer id -1, client transaction version 0)."""
    v = json.loads(raw)
    return TransactionMetadata(
        transactional_id, v["producer_id"], v.get("prev_producer_id", NO_PRODUCER_ID),
        v.get("next_producer_id", NO_PRODUCER_ID), v["producer_epoch"], NO_PRODUCER_EPOCH, v["timeout_ms"],
        TransactionState.from_id(v["status"]), set(v["partitions"] or ()), v["start_ms"], v["last_update_ms"],
        v.get("client_tv", 0), max_epoch=max_epoch)


AppendListener = Callable[[str, "TxnTransitMetadata | None"], None]

_APPEND_ERROR_MAPPING = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}


@dataclass
class TransactionStateManager:
    """The metadata cache and the transaction log (``TransactionStateManager``)."""

    log_partitions: Sequence[Partition]
    config: CoordinatorConfig
    coordinator_epoch: int = 0
    cache: dict[str, TransactionMetadata] = field(default_factory=dict)
    loading: bool = False
    active: bool = True
    # per transaction-log partition (index): loads under way (loadingPartitions) and partitions led elsewhere
    loading_partitions: set[int] = field(default_factory=set)
    not_led: set[int] = field(default_factory=set)
    append_listener: AppendListener | None = None
    _fail_next: list[Errors] = field(default_factory=list)
    rules: Rules = KAFKA

    def partition_for(self, transactional_id: str) -> Partition:
        return self.log_partitions[partition_for(transactional_id, len(self.log_partitions))]

    def fail_next_append(self, error: Errors) -> None:
        """Make the next transaction-log append fail with ``error`` (as the replica manager would answer)."""
        self._fail_next.append(error)

    def get_transaction_state(self, transactional_id: str) -> tuple[Errors, TransactionMetadata | None]:
        if not self.active:
            return Errors.NOT_COORDINATOR, None
        if self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, None
        if self.loading_partitions or self.not_led:  # getAndMaybeAddTransactionState: loading is checked first
            index = partition_for(transactional_id, len(self.log_partitions))
            if index in self.loading_partitions:
                return Errors.COORDINATOR_LOAD_IN_PROGRESS, None
            if index in self.not_led:
                return Errors.NOT_COORDINATOR, None
        return Errors.NONE, self.cache.get(transactional_id)

    def validate_transaction_timeout_ms(self, enable_two_pc: bool, timeout_ms: int) -> bool:
        return enable_two_pc or 0 < timeout_ms <= self.config.txn_max_timeout_ms

    def _write(self, transactional_id: str, value: str | None, now_ms: int) -> Errors:
        if self._fail_next:
            return self._fail_next.pop(0)
        return self.partition_for(transactional_id).append_records(
            NO_PRODUCER_ID, NO_PRODUCER_EPOCH, -1, [Record(transactional_id, value, now_ms)], now_ms=now_ms).error

    def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransitMetadata,
                                  now_ms: int, retry_on_error: Callable[[Errors], bool] = lambda _: False) -> Errors:
        """Write ``transit`` and complete the transition on success; reset ``pending_state`` on failure."""
        err, md = self.get_transaction_state(transactional_id)
        if err is not Errors.NONE:
            return err
        if md is None or coordinator_epoch != self.coordinator_epoch:
            return Errors.NOT_COORDINATOR
        status = self._write(transactional_id, value_to_json(transit, self.config.transaction_version), now_ms)
        error = _APPEND_ERROR_MAPPING.get(status, status)
        if error is Errors.NONE:
            if self.append_listener is not None:
                self.append_listener(transactional_id, transit)
            err, md = self.get_transaction_state(transactional_id)
            if err is not Errors.NONE:
                return err
            if md is None or coordinator_epoch != self.coordinator_epoch:
                return Errors.NOT_COORDINATOR
            md.complete_transition_to(transit)
            return Errors.NONE
        if md is not None and not self.rules.waits_for_log_append:
            md.complete_transition_to(transit)
            return error
        if md is not None and coordinator_epoch == self.coordinator_epoch and not retry_on_error(error):
            md.pending_state = None
        return error

    def timed_out_transactions(self, now_ms: int) -> list[tuple[str, int, int]]:
        if not self.active or self.loading:
            return []
        return [(tid, md.producer_id, md.producer_epoch) for tid, md in self.cache.items()
                if md.state is S.ONGOING and md.pending_state is None and not md.is_distributed_two_phase_commit_txn
                and md.txn_start_timestamp + md.txn_timeout_ms < now_ms]

    def remove_expired_transactional_ids(self, now_ms: int, expiration_ms: int) -> list[str]:
        """Write tombstones for idle ids (``removeExpiredTransactionalIds``); returns the ids removed."""
        if not self.active or self.loading:
            return []
        removed: list[str] = []
        for tid, md in list(self.cache.items()):
            if md.pending_state is None and md.state.is_expiration_allowed \
                    and md.txn_last_update_timestamp <= now_ms - expiration_ms:
                transit = md.prepare_dead()
                status = self._write(tid, None, now_ms)
                if status is Errors.NONE and md.pending_state is S.DEAD \
                        and md.producer_epoch == transit.producer_epoch:
                    if self.append_listener is not None:
                        self.append_listener(tid, None)
                    del self.cache[tid]
                    removed.append(tid)
                else:
                    md.pending_state = None
        return removed

    def read_partition(self, index: int) -> dict[str, TransactionMetadata]:
        """Replay one transaction-log partition (last record per key wins; a tombstone removes)."""
        loaded: dict[str, TransactionMetadata] = {}
        p = self.log_partitions[index]
        for batch in p.log.read(p.log_start_offset, p.log_end_offset + 1):
            for rec in batch.records:
                if not isinstance(rec.key, str):
                    continue  # unknown key version: skipped as Kafka does
                if rec.value is None:
                    loaded.pop(rec.key, None)
                else:
                    try:
                        loaded[rec.key] = metadata_from_json(rec.key, str(rec.value), self.config.max_producer_epoch)
                    except (ValueError, KeyError):
                        continue  # unknown value version: skipped (TRUNK)
        return loaded

    def load(self, coordinator_epoch: int) -> dict[str, TransactionMetadata]:
        """Replay every transaction-log partition and serve them all."""
        loaded: dict[str, TransactionMetadata] = {}
        for index in range(len(self.log_partitions)):
            loaded.update(self.read_partition(index))
        self.cache = loaded
        self.coordinator_epoch = coordinator_epoch
        self.loading = False
        self.active = True
        self.loading_partitions.clear()
        self.not_led.clear()
        return loaded

    def drop_partition(self, index: int) -> None:
        """Forget the cached ids of one partition."""
        n = len(self.log_partitions)
        self.cache = {tid: md for tid, md in self.cache.items() if partition_for(tid, n) != index}


class LoadRecovery(Protocol):
    """What a durable broker gives the first load to settle a transaction log cut behind the data logs
    (``impl.txn_recovery.TxnLogRecovery``)."""

    def prune_delivered_markers(self, loaded: Mapping[str, TransactionMetadata]) -> None: ...

    def adopt_lost_transitions(self, loaded: Mapping[str, TransactionMetadata], now_ms: int,
                               write: Callable[[str, TransactionMetadata], None]) -> None: ...


@dataclass
class _PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransitMetadata
    result: ControlType
    unsent: set[str]


class TransactionCoordinator:
    """The transaction coordinator of one broker (see the module docstring).

    >>> from txnspec.impl.partition import Partition
    >>> tc = TransactionCoordinator([Partition("__transaction_state-0")], ProducerIdManager(1000))
    >>> tc.handle_init_producer_id("tx", 60000, now_ms=0)
    InitProducerIdResult(error=<Errors.NONE: (0, False)>, producer_id=1000, producer_epoch=0)
    >>> tc.handle_add_partitions_to_txn("tx", 1000, 0, ["t-0"], TV_2, now_ms=1).name
    'NONE'
    >>> tc.handle_end_txn("tx", 1000, 0, ControlType.COMMIT, TV_2, now_ms=2).producer_epoch
    1
    >>> [m.partition for m in tc.drain_markers()]
    ['t-0']
    """

    def __init__(self, log_partitions: Sequence[Partition], producer_ids: ProducerIdManager | None = None,
                 config: CoordinatorConfig | None = None, *, coordinator_epoch: int = 0, load: bool = True,
                 now_ms: int = 0, recovery: LoadRecovery | None = None, rules: Rules = KAFKA) -> None:
        self.config = config or CoordinatorConfig()
        self.rules = rules
        self.recovery = recovery  # durable broker: settles a transaction log cut behind the data logs
        self.producer_ids = producer_ids or ProducerIdManager()
        self.txn_manager = TransactionStateManager(log_partitions, self.config, coordinator_epoch, rules=rules)
        self._pending: dict[str, _PendingCompleteTxn] = {}
        self._outbox: list[TxnMarker] = []
        if load:
            self.load(coordinator_epoch, now_ms)

    # --- failover ---

    def load(self, coordinator_epoch: int, now_ms: int) -> None:
        """Become the coordinator (``onElection``): load the log and re-send markers of Prepare* txns."""
        self._pending.clear()
        self._outbox.clear()
        loaded = self.txn_manager.load(coordinator_epoch)
        if self.recovery is not None:
            self.recovery.prune_delivered_markers(loaded)
        for _tid, md in loaded.items():
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and self.config.resend_prepared_markers:
                result = ControlType.COMMIT if md.state is S.PREPARE_COMMIT else ControlType.ABORT
                self._add_txn_markers_to_send(coordinator_epoch, result, md, md.prepare_complete(now_ms), now_ms)
        if self.recovery is not None:
            self.recovery.adopt_lost_transitions(loaded, now_ms, lambda tid, md: self._record(tid, md, now_ms))

    def _record(self, transactional_id: str, md: TransactionMetadata, now_ms: int) -> None:
        """Write ``md`` as it stands (a state recovery settled) so the next load starts from it."""
        self.txn_manager._write(transactional_id, value_to_json(md.prepare_no_transit(),
                                                                self.config.transaction_version), now_ms)

    def resign(self) -> None:
        """Stop being the coordinator (``onResignation``): drop the cache and every pending marker."""
        self.txn_manager.active = False
        self.txn_manager.cache = {}
        self._pending.clear()
        self._outbox.clear()

    def begin_load(self, indexes: set[int], coordinator_epoch: int) -> None:
        """Lead the transaction-log partitions ``indexes`` at ``coordinator_epoch`` and start loading them
        (``loadTransactionsForTxnTopicPartition`` up to its read): they answer COORDINATOR_LOAD_IN_PROGRESS."""
        tm = self.txn_manager
        for index in indexes:
            self._drop_partition(index)
        tm.coordinator_epoch = coordinator_epoch
        tm.loading_partitions |= indexes
        tm.not_led -= indexes

    def finish_load(self, index: int, now_ms: int) -> None:
        """The read of partition ``index`` is done: unless the load was cancelled (``loadingPartitions.contains``),
        its ids enter the cache and the markers of its prepared transactions are sent."""
        tm = self.txn_manager
        if index not in tm.loading_partitions:
            return
        tm.loading_partitions.discard(index)
        loaded = tm.read_partition(index)
        tm.cache.update(loaded)
        for _tid, md in sorted(loaded.items()):
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and self.config.resend_prepared_markers:
                result = ControlType.COMMIT if md.state is S.PREPARE_COMMIT else ControlType.ABORT
                self._add_txn_markers_to_send(tm.coordinator_epoch, result, md, md.prepare_complete(now_ms), now_ms)

    def emigrate(self, index: int) -> None:
        """``removeTransactionsForTxnTopicPartition``: partition ``index`` is led elsewhere now; its cache and
        markers go, a load under way is cancelled."""
        self._drop_partition(index)
        self.txn_manager.loading_partitions.discard(index)
        self.txn_manager.not_led.add(index)

    def _drop_partition(self, index: int) -> None:
        n = len(self.txn_manager.log_partitions)
        self.txn_manager.drop_partition(index)
        for tid in [tid for tid in self._pending if partition_for(tid, n) == index]:
            del self._pending[tid]
        self._outbox = [m for m in self._outbox if partition_for(m.transactional_id, n) != index]

    @property
    def coordinator_epoch(self) -> int:
        return self.txn_manager.coordinator_epoch

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        return self.txn_manager.cache.get(transactional_id)

    # --- InitProducerId ---

    def handle_init_producer_id(self, transactional_id: str | None, txn_timeout_ms: int,
                                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH, *,
                                now_ms: int, enable_two_pc: bool = False,
                                keep_prepared_txn: bool = False) -> InitProducerIdResult:
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(Errors.INVALID_REQUEST)  # KafkaApis: one of pid/epoch set
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if transactional_id is None:
            try:
                return InitProducerIdResult(Errors.NONE, self.producer_ids.generate_producer_id(), 0)
            except _AllocationError as exc:
                return InitProducerIdResult(exc.error)
        if transactional_id == "":
            return InitProducerIdResult(Errors.INVALID_REQUEST)
        if enable_two_pc and not self.config.transaction_two_phase_commit_enable:
            return InitProducerIdResult(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if keep_prepared_txn:  # 4.4: "the feature hasn't been implemented yet"
            return InitProducerIdResult(Errors.UNSUPPORTED_VERSION)
        if not self.txn_manager.validate_transaction_timeout_ms(enable_two_pc, txn_timeout_ms):
            return InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT)
        if enable_two_pc:
            txn_timeout_ms = INT_MAX  # a 2PC transaction never times out (isDistributedTwoPhaseCommitTxn)
        err, md = self.txn_manager.get_transaction_state(transactional_id)
        if err is not Errors.NONE:
            return InitProducerIdResult(err)
        if md is None:
            try:
                pid = self.producer_ids.generate_producer_id()
            except _AllocationError as exc:
                return InitProducerIdResult(exc.error)
            md = TransactionMetadata(transactional_id, pid, txn_timeout_ms=txn_timeout_ms,
                                     txn_last_update_timestamp=now_ms, client_transaction_version=TV_0,
                                     max_epoch=self.config.max_producer_epoch)
            self.txn_manager.cache[transactional_id] = md
        coordinator_epoch = self.txn_manager.coordinator_epoch
        prepared = self._prepare_init_producer_id_transit(md, txn_timeout_ms, expected, now_ms)
        if isinstance(prepared, Errors):
            return InitProducerIdResult(prepared)
        if prepared.txn_state is S.PREPARE_EPOCH_FENCE:
            end = self._end_transaction(transactional_id, prepared.producer_id, prepared.producer_epoch,
                                        ControlType.ABORT, False, self.config.transaction_version, now_ms)
            return InitProducerIdResult(end.error if end.error is not Errors.NONE else Errors.CONCURRENT_TRANSACTIONS)
        error = self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, prepared, now_ms)
        if error is Errors.NONE:
            return InitProducerIdResult(Errors.NONE, prepared.producer_id, prepared.producer_epoch)
        return InitProducerIdResult(error)

    def _prepare_init_producer_id_transit(self, md: TransactionMetadata, timeout_ms: int,
                                          expected: tuple[int, int] | None, now_ms: int) -> TxnTransitMetadata | Errors:
        def is_valid_producer_id(e: tuple[int, int]) -> bool:
            return md.producer_epoch == NO_PRODUCER_EPOCH or e[0] == md.producer_id \
                or (e[0] == md.prev_producer_id and is_epoch_exhausted(e[1], md.max_epoch))

        if md.pending_transition_in_progress:
            return Errors.CONCURRENT_TRANSACTIONS
        if expected is not None and not is_valid_producer_id(expected):
            return Errors.PRODUCER_FENCED
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return Errors.CONCURRENT_TRANSACTIONS
        try:
            if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
                if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                    try:
                        new_pid = self.producer_ids.generate_producer_id()
                    except _AllocationError as exc:
                        return exc.error
                    return md.prepare_producer_id_rotation(new_pid, timeout_ms, now_ms, expected is not None)
                return md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                           now_ms)
            if md.state is S.ONGOING:
                if not self.rules.init_fences_ongoing:
                    return md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                               now_ms)
                return md.prepare_fence_producer_epoch()
        except ProducerFenced:
            return Errors.PRODUCER_FENCED
        except CoordinatorIllegalState:
            return Errors.UNKNOWN_SERVER_ERROR
        raise CoordinatorIllegalState(f"Found transactionalId {md.transactional_id} with state {md.state.value}. "
                                      "This is illegal as we should never have transitioned to this state.")

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---

    def handle_add_partitions_to_txn(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                     partitions: Sequence[str], transaction_version: int = TV_0, *,
                                     now_ms: int) -> Errors:
        """The error for every partition of the request (Kafka answers one error for all of them)."""
        if not transactional_id:
            return Errors.INVALID_REQUEST
        err, md = self.txn_manager.get_transaction_state(transactional_id)
        if err is not Errors.NONE:
            return err
        if md is None:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        wanted = frozenset(partitions)
        if md.pending_transition_in_progress:
            return Errors.CONCURRENT_TRANSACTIONS
        if md.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch and self.rules.fences_stale_epochs:
            return Errors.PRODUCER_FENCED
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return Errors.CONCURRENT_TRANSACTIONS
        if md.state is S.ONGOING and wanted <= md.topic_partitions:
            return Errors.NONE
        try:
            transit = md.prepare_add_partitions(wanted, now_ms, transaction_version)
        except CoordinatorIllegalState:
            return Errors.UNKNOWN_SERVER_ERROR
        return self.txn_manager.append_transaction_to_log(transactional_id, self.txn_manager.coordinator_epoch,
                                                          transit, now_ms)

    def handle_add_offsets_to_txn(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                  group_id: str, *, now_ms: int) -> Errors:
        """KafkaApis: AddPartitionsToTxn (TV0) of the group's ``__consumer_offsets`` partition."""
        partition = offsets_partition_for(group_id, self.config.num_offsets_partitions)
        return self.handle_add_partitions_to_txn(transactional_id, producer_id, producer_epoch, [partition], TV_0,
                                                 now_ms=now_ms)

    # --- EndTxn ---

    def handle_end_txn(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                       result: ControlType, transaction_version: int = TV_0, *, now_ms: int) -> EndTxnResult:
        return self._end_transaction(transactional_id, producer_id, producer_epoch, result, True,
                                     transaction_version, now_ms)

    def _end_transaction(self, tid: str | None, pid: int, epoch: int, result: ControlType, is_from_client: bool,
                         client_tv: int, now_ms: int) -> EndTxnResult:
        if not tid:
            return EndTxnResult(Errors.INVALID_REQUEST)
        err, md = self.txn_manager.get_transaction_state(tid)
        if err is not Errors.NONE:
            return EndTxnResult(err)
        if md is None:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        coordinator_epoch = self.txn_manager.coordinator_epoch
        if supports_epoch_bump(client_tv):
            pre = self._end_txn_tv2_transit(md, pid, epoch, result, is_from_client, client_tv, now_ms)
        else:
            pre = self._end_txn_tv1_transit(md, pid, epoch, result, is_from_client, now_ms)
        if isinstance(pre, EndTxnResult):
            return pre
        transit, is_epoch_fence = pre
        error = self.txn_manager.append_transaction_to_log(tid, coordinator_epoch, transit, now_ms)
        if error is not Errors.NONE:
            if is_epoch_fence and not supports_epoch_bump(client_tv):
                current = self.txn_manager.cache.get(tid)
                if current is not None and self.txn_manager.coordinator_epoch == coordinator_epoch:
                    current.has_failed_epoch_fence = True
            return EndTxnResult(error)
        return self._send_txn_markers_callback(tid, pid, epoch, result, client_tv, coordinator_epoch, now_ms)

    def _end_txn_tv1_transit(self, md: TransactionMetadata, pid: int, epoch: int, result: ControlType,
                             is_from_client: bool, now_ms: int) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
        if md.producer_id != pid:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if (is_from_client and epoch != md.producer_epoch) or epoch < md.producer_epoch:
            return EndTxnResult(Errors.PRODUCER_FENCED)
        if md.pending_state is not None and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        commit = result is ControlType.COMMIT
        state = md.state
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            fence = False
            if next_state is S.PREPARE_ABORT and md.pending_state is S.PREPARE_EPOCH_FENCE:
                fence = True
                md.pending_state = None
                md.producer_epoch = epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            return md.prepare_abort_or_commit(next_state, TV_0, NO_PRODUCER_ID, now_ms, False), fence
        if state is S.COMPLETE_COMMIT:
            return EndTxnResult(Errors.NONE if commit else Errors.INVALID_TXN_STATE)
        if state is S.COMPLETE_ABORT:
            return EndTxnResult(Errors.INVALID_TXN_STATE if commit else Errors.NONE)
        if state is S.PREPARE_COMMIT:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS if commit else Errors.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            return EndTxnResult(Errors.INVALID_TXN_STATE if commit else Errors.CONCURRENT_TRANSACTIONS)
        if state is S.EMPTY:
            return EndTxnResult(Errors.INVALID_TXN_STATE)
        raise CoordinatorIllegalState(f"Found transactionalId {md.transactional_id} with state {state.value}. "
                                      "This is illegal as we should never have transitioned to this state.")

    def _end_txn_tv2_transit(self, md: TransactionMetadata, pid: int, epoch: int, result: ControlType,
                             is_from_client: bool, client_tv: int,
                             now_ms: int) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
        pid_copy, epoch_copy = md.producer_id, md.producer_epoch
        is_epoch_fence = md.pending_state is S.PREPARE_EPOCH_FENCE
        retry_on_overflow = not is_epoch_fence and md.prev_producer_id == pid and epoch == md.max_epoch - 1 \
            and md.producer_epoch == 0
        retry_on_epoch_bump = not is_epoch_fence and md.producer_epoch == epoch + 1
        if not is_epoch_fence:
            if md.state in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
                valid_epoch = epoch == md.producer_epoch
            elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid_epoch = retry_on_epoch_bump
            else:
                valid_epoch = retry_on_epoch_bump or retry_on_overflow or epoch == md.producer_epoch
        else:
            valid_epoch = (not is_from_client or epoch == md.producer_epoch) and epoch >= md.producer_epoch
        is_retry = retry_on_epoch_bump or retry_on_overflow
        commit = result is ControlType.COMMIT

        def completion(next_state: TransactionState, no_partition_added: bool) -> tuple[TxnTransitMetadata, bool] \
                | EndTxnResult:
            next_pid = NO_PRODUCER_ID
            if md.pending_state is not S.PREPARE_EPOCH_FENCE and md.is_producer_epoch_exhausted:
                try:
                    next_pid = self.producer_ids.generate_producer_id()
                except _AllocationError as exc:
                    return EndTxnResult(exc.error)
            try:
                return md.prepare_abort_or_commit(next_state, client_tv, next_pid, now_ms,
                                                  no_partition_added), is_epoch_fence
            except CoordinatorIllegalState:
                return EndTxnResult(Errors.UNKNOWN_SERVER_ERROR)

        if md.pending_state is not None and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        if md.producer_id != pid and not retry_on_overflow:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnResult(Errors.PRODUCER_FENCED)
        state = md.state
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if next_state is S.PREPARE_ABORT and is_epoch_fence:
                md.pending_state = None
            return completion(next_state, False)
        if state is S.COMPLETE_COMMIT:
            if commit:
                return EndTxnResult(Errors.NONE, pid_copy, epoch_copy) if is_retry \
                    else EndTxnResult(Errors.INVALID_TXN_STATE)
            return EndTxnResult(Errors.INVALID_TXN_STATE) if is_retry else completion(S.PREPARE_ABORT, True)
        if state is S.COMPLETE_ABORT:
            if not commit:
                return EndTxnResult(Errors.NONE, pid_copy, epoch_copy) if is_retry \
                    else completion(S.PREPARE_ABORT, True)
            return EndTxnResult(Errors.INVALID_TXN_STATE)
        if state is S.PREPARE_COMMIT:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS if commit else Errors.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            return EndTxnResult(Errors.INVALID_TXN_STATE if commit else Errors.CONCURRENT_TRANSACTIONS)
        if state is S.EMPTY:
            return EndTxnResult(Errors.INVALID_TXN_STATE) if commit else completion(S.PREPARE_ABORT, True)
        raise CoordinatorIllegalState(f"Found transactionalId {md.transactional_id} with state {state.value}. "
                                      "This is illegal as we should never have transitioned to this state.")

    def _send_txn_markers_callback(self, tid: str, pid: int, epoch: int, result: ControlType, client_tv: int,
                                   coordinator_epoch: int, now_ms: int) -> EndTxnResult:
        err, md = self.txn_manager.get_transaction_state(tid)
        if err is not Errors.NONE:
            return EndTxnResult(err)
        if md is None:
            raise CoordinatorIllegalState(f"The coordinator still owns the transaction partition for {tid}, but "
                                          "there is no metadata in the cache; this is not expected")
        if self.txn_manager.coordinator_epoch != coordinator_epoch:
            return EndTxnResult(Errors.NOT_COORDINATOR)
        tv2 = supports_epoch_bump(client_tv)
        if md.producer_id != pid:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if (md.producer_epoch not in (epoch, epoch + 1)) if tv2 else md.producer_epoch != epoch:
            return EndTxnResult(Errors.PRODUCER_FENCED)
        if md.pending_transition_in_progress:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        expected = S.PREPARE_COMMIT if result is ControlType.COMMIT else S.PREPARE_ABORT
        if md.state is not expected:
            return EndTxnResult(Errors.INVALID_TXN_STATE)
        complete = md.prepare_complete(now_ms)
        self._add_txn_markers_to_send(coordinator_epoch, result, md, complete, now_ms)
        if tv2:
            return EndTxnResult(Errors.NONE, complete.producer_id, complete.producer_epoch)
        return EndTxnResult(Errors.NONE)

    # --- markers (TransactionMarkerChannelManager) ---

    def _add_txn_markers_to_send(self, coordinator_epoch: int, result: ControlType, md: TransactionMetadata,
                                 transit: TxnTransitMetadata, now_ms: int) -> None:
        tid = md.transactional_id
        pending = _PendingCompleteTxn(tid, coordinator_epoch, md, transit, result, set(md.topic_partitions))
        self._pending[tid] = pending
        sent_epoch = coordinator_epoch if self.rules.markers_carry_own_coordinator_epoch else coordinator_epoch + 1
        for p in self.rules.marker_partitions(md.topic_partitions):
            self._outbox.append(TxnMarker(tid, p, md.producer_id, md.producer_epoch, sent_epoch, result,
                                          md.client_transaction_version))
        if not self.config.manual_marker_completion:
            self._maybe_write_txn_completion(tid, now_ms)

    def drain_markers(self) -> list[TxnMarker]:
        """The ``WriteTxnMarkers`` entries to send now (each once; a retriable failure re-queues it)."""
        out, self._outbox = self._outbox, []
        return out

    def pending_markers(self, transactional_id: str) -> set[str]:
        p = self._pending.get(transactional_id)
        return set(p.metadata.topic_partitions) if p is not None else set()

    def on_marker_response(self, marker: TxnMarker, error: Errors, now_ms: int) -> None:
        """A partition leader's answer to one marker (``TransactionMarkerRequestCompletionHandler``)."""
        pending = self._pending.get(marker.transactional_id)
        if pending is None or pending.coordinator_epoch != marker.coordinator_epoch \
                or self.txn_manager.coordinator_epoch != marker.coordinator_epoch:
            return  # a stale marker of an older coordinator epoch
        md = pending.metadata
        if error in (Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION):
            md.remove_partition(marker.partition)
            self._maybe_write_txn_completion(marker.transactional_id, now_ms)
        elif error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
                       Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT, Errors.KAFKA_STORAGE_ERROR,
                       Errors.NETWORK_EXCEPTION):
            self._outbox.append(marker)  # retried
        elif error in (Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED):
            del self._pending[marker.transactional_id]  # give up on this transaction's markers
        else:
            raise CoordinatorIllegalState(f"Unexpected error {error.name} while sending txn marker for "
                                          f"{marker.transactional_id}")

    def markers_written(self, transactional_id: str, now_ms: int) -> Errors:
        """Every partition acknowledged its marker: complete the prepared transaction (cases' MarkersWritten)."""
        pending = self._pending.get(transactional_id)
        if pending is None:
            md = self.txn_manager.cache.get(transactional_id)
            if md is None or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return Errors.INVALID_TXN_STATE
            if md.pending_state is (S.COMPLETE_COMMIT if md.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT):
                # prepareComplete ran but no channel holds its transition: Kafka's
                # completeTransitionTo(prepareComplete(now)) completes it (TransactionCoordinatorTest
                # shouldReturnConcurrentTxnOnAddPartitionsIfEndTxnV2EpochOverflowAndNotComplete)
                md.pending_state = None
            if md.pending_transition_in_progress:
                return Errors.INVALID_TXN_STATE
            result = ControlType.COMMIT if md.state is S.PREPARE_COMMIT else ControlType.ABORT
            self._add_txn_markers_to_send(self.coordinator_epoch, result, md, md.prepare_complete(now_ms), now_ms)
            pending = self._pending.get(transactional_id)
            if pending is None:
                return Errors.NONE  # completed at once (no partitions, automatic completion)
        pending.metadata.topic_partitions.clear()
        self._outbox = [m for m in self._outbox if m.transactional_id != transactional_id]
        return self._maybe_write_txn_completion(transactional_id, now_ms, force=True)

    def _maybe_write_txn_completion(self, tid: str, now_ms: int, force: bool = False) -> Errors:
        pending = self._pending.get(tid)
        if pending is None or pending.metadata.topic_partitions:
            return Errors.NONE
        if self.config.manual_marker_completion and not force:
            return Errors.NONE
        del self._pending[tid]
        error = self.txn_manager.append_transaction_to_log(
            tid, pending.coordinator_epoch, pending.transit, now_ms,
            retry_on_error=lambda e: e is Errors.COORDINATOR_NOT_AVAILABLE)
        if error is Errors.COORDINATOR_NOT_AVAILABLE:
            self._pending[tid] = pending  # retried on the next marker tick
        elif error not in (Errors.NONE, Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS):
            raise CoordinatorIllegalState(f"Unexpected error {error.name} while appending to transaction log "
                                          f"for {tid}")
        return error

    def retry_completions(self, now_ms: int) -> None:
        """Retry Complete* writes that failed with COORDINATOR_NOT_AVAILABLE (``txnLogAppendRetryQueue``)."""
        for tid in list(self._pending):
            if not self._pending[tid].metadata.topic_partitions:
                self._maybe_write_txn_completion(tid, now_ms, force=True)

    # --- periodic tasks ---

    def abort_timed_out_transactions(self, now_ms: int, transactional_id: str | None = None
                                     ) -> list[tuple[str, EndTxnResult]]:
        """``abortTimedOutTransactions``; with ``transactional_id``, that id's transaction only (a harness that
        times out one transaction of several, as a model with abstract time does)."""
        out = []
        for tid, pid, _epoch in self.txn_manager.timed_out_transactions(now_ms):
            if transactional_id is not None and tid != transactional_id:
                continue
            md = self.txn_manager.cache.get(tid)
            if md is None or md.producer_id != pid or md.pending_transition_in_progress:
                continue
            fence = md.prepare_fence_producer_epoch()
            result = self.rules.timed_out_result
            out.append((tid, self._end_transaction(tid, fence.producer_id, fence.producer_epoch, result,
                                                   False, self.config.transaction_version, now_ms)))
        return out

    def expire_transactional_ids(self, now_ms: int, expiration_ms: int | None = None) -> list[str]:
        return self.txn_manager.remove_expired_transactional_ids(
            now_ms, self.config.transactional_id_expiration_ms if expiration_ms is None else expiration_ms)

    # --- Describe / List ---

    def describe_transaction(self, transactional_id: str) -> tuple[Errors, TransactionMetadata | None]:
        if not transactional_id:
            return Errors.INVALID_REQUEST, None
        err, md = self.txn_manager.get_transaction_state(transactional_id)
        if err is not Errors.NONE:
            return (Errors.COORDINATOR_NOT_AVAILABLE if err is Errors.NOT_COORDINATOR else err), None
        if md is None or md.state is S.DEAD:
            return Errors.TRANSACTIONAL_ID_NOT_FOUND, None
        return Errors.NONE, md

    def list_transactions(self) -> list[tuple[str, int, str]]:
        return sorted((tid, md.producer_id, md.state.value) for tid, md in self.txn_manager.cache.items()
                      if md.state is not S.DEAD)


__all__ = ["DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS", "DEFAULT_TXN_MAX_TIMEOUT_MS", "GROUP_METADATA_TOPIC", "INT_MAX",
           "TRANSACTION_STATE_TOPIC", "TV_0", "TV_2", "CoordinatorConfig", "EndTxnResult", "InitProducerIdResult",
           "ProducerIdManager", "TransactionCoordinator", "TransactionStateManager", "TxnMarker",
           "java_string_hash", "metadata_from_json", "offsets_partition_for", "partition_for", "value_to_json"]
