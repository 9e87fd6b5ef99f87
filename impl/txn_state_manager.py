"""The transaction coordinator's metadata cache and its transaction log: which ids this broker serves, and the
appends that make a transition durable before the cache takes it.

Follows Kafka TRUNK ``core/src/main/scala/kafka/coordinator/transaction/TransactionStateManager.scala``:
``TransactionConfig`` (here :class:`CoordinatorConfig`), ``getTransactionState`` /
``getAndMaybeAddTransactionState`` (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, loading checked first),
``validateTransactionTimeoutMs``, ``appendTransactionToLog`` with its error mapping and its
``completeTransitionTo`` / ``pendingState`` reset, ``timedOutTransactions``, ``removeExpiredTransactionalIds``
(tombstones), ``loadTransactionsForTxnTopicPartition`` (the replay of one partition: last record per key,
a tombstone removes, an unknown key or value version is skipped) and ``removeTransactionsForTxnTopicPartition``.

Assumed: the log partitions are :class:`~txnspec.impl.partition.Partition` values of the broker's store,
``abs(javaHash(tid)) % N``; one coordinator epoch for every transaction-log partition (Kafka keeps one per
partition); an append is answered at once (a failure is injected with :meth:`TransactionStateManager.fail_next_append`).
Left out: the append's replication and ``required.acks``, the load's scheduler and its metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from txnspec.impl.errors import Errors
from txnspec.impl.internal_topics import partition_for
from txnspec.impl.log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, Record
from txnspec.impl.partition import Partition
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.txn_log import metadata_from_json, value_to_json
from txnspec.impl.txn_metadata import TV_2, TransactionMetadata, TransactionState, TxnTransitMetadata

S = TransactionState
DEFAULT_TXN_MAX_TIMEOUT_MS = 900_000
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000


@dataclass
class CoordinatorConfig:
    """The coordinator's configuration (Kafka's ``TransactionConfig``; the broker configs named beside)."""

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


__all__ = ["DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS", "DEFAULT_TXN_MAX_TIMEOUT_MS", "AppendListener",
           "CoordinatorConfig", "TransactionStateManager"]
