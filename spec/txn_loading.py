"""Loading the transaction log: a failover, a partition's load split at its read, and its emigration.

Models
    ``CoordinatorConfig.txn_log_partitions`` partitions of ``__transaction_state``; an id lives in
    ``abs(hashCode) % n``. A partition whose load is under way answers ``COORDINATOR_LOAD_IN_PROGRESS``, one this
    coordinator does not lead ``NOT_COORDINATOR`` (:func:`txnspec.spec.coordinator_state.ownership_error`).
    :func:`begin_load`, :func:`finish_load` and :func:`emigrate` are ``loadTransactionsForTxnTopicPartition``
    split at its read, and ``removeTransactionsForTxnTopicPartition`` (which cancels a load under way);
    :func:`coordinator_failover` and :func:`load_from_log` load every partition at once. Every loaded prepared
    transaction is completed: ``prepareComplete`` and its markers (re)sent.

Kafka sources followed (trunk, 4.x)
    ``core/.../transaction/TransactionStateManager.scala`` (``loadTransactionsForTxnTopicPartition``,
    ``addLoadedTransactionsToCache``, ``removeTransactionsForTxnTopicPartition``), ``TransactionLog.scala``
    (``readTxnRecordValue``), ``TransactionCoordinator.scala`` (``onElection``, ``onResignation``).

Assumptions
    The log is compacted, so reloading replays the last record per id, which is what Kafka's load does with
    last-record-wins. A new coordinator takes over every partition it loads at one new coordinator epoch.

Not modelled
    A coordinator epoch per transaction-log partition.
"""

from __future__ import annotations

from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txnspec.spec.coordinator_state import (
    DEFAULT_CONFIG,
    Appended,
    CoordinatorConfig,
    CoordinatorResult,
    CoordinatorState,
    TxnMetadata,
    TxnTransit,
    txn_log_partition,
    with_metadata,
)
from txnspec.spec.messages import TransactionResult, WriteTxnMarkers
from txnspec.spec.txn_markers import add_txn_markers_to_send
from txnspec.spec.txn_metadata import prepare_complete, prepare_transition_to
from txnspec.spec.txn_state import PREPARE_COMMIT, PREPARE_STATES
from txnspec.spec.values import replace


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
    "begin_load", "coordinator_failover", "emigrate", "finish_load", "load_from_log",
]
