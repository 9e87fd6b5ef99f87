"""The transaction coordinator: its request handlers, its failover and its periodic tasks.

Follows Kafka TRUNK ``core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala``
(``handleInitProducerId`` with ``prepareInitProducerIdTransit``, ``handleAddPartitionsToTransaction``,
``handleEndTransaction`` up to and after its append, ``onElection`` / ``onResignation``,
``abortTimedOutTransactions``, ``handleDescribeTransactions`` / ``handleListTransactions``). KafkaApis' request
checks (InitProducerId's pid/epoch pairing, AddOffsetsToTxn's ``__consumer_offsets`` partition) are done here too.
The parts it composes, each a module of its own: the metadata cache and the transaction log
(:mod:`~txnspec.impl.txn_state_manager`, records in :mod:`~txnspec.impl.txn_log`, partitions in
:mod:`~txnspec.impl.internal_topics`), EndTxn's decision (:mod:`~txnspec.impl.end_txn`), the marker channel
(:mod:`~txnspec.impl.txn_markers`, :attr:`TransactionCoordinator.marker_channel`) and the producer ids
(:mod:`~txnspec.impl.producer_id_manager`).

What is modelled: every branch of the handlers above; failover = a new coordinator epoch loading the log,
completing Prepare* transactions by re-sending markers, or per partition: :meth:`TransactionCoordinator.emigrate`
(``removeTransactionsForTxnTopicPartition``: NOT_COORDINATOR), :meth:`~TransactionCoordinator.begin_load` /
:meth:`~TransactionCoordinator.finish_load` (the loading window: COORDINATOR_LOAD_IN_PROGRESS,
``getAndMaybeAddTransactionState`` checks loading first); log-append failure injection
(:meth:`~txnspec.impl.txn_state_manager.TransactionStateManager.fail_next_append`) with Kafka's error mapping.

Sans-I/O: handlers take ``now_ms`` and return results; the markers they queue are drained from the marker
channel (:meth:`~txnspec.impl.txn_markers.TransactionMarkerChannelManager.drain_markers`).

KIP-939 as Kafka 4.4 ships it (docs/kip-939.md): ``enable2Pc`` needs ``transaction.two.phase.commit.enable``
(else ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``), lifts the timeout bound and stores ``Int.MaxValue``, which
``timedOutTransactions`` skips; ``keepPreparedTxn`` → ``UNSUPPORTED_VERSION``. These few branches stay in
``handle_init_producer_id`` and ``timed_out_transactions``, where Kafka has them.

Assumed / left out: one coordinator epoch for every transaction-log partition (Kafka keeps one per
partition); no ACLs (nor the ``TWO_PHASE_COMMIT``
one); Describe/ListTransactions are plain views.

Long because it is Kafka's one ``TransactionCoordinator`` class: the handlers share its metadata cache,
epoch and load state; its parts (the log, the markers, EndTxn's decision, the producer ids) are modules already.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from txnspec.impl.end_txn import EndTxnResult, end_txn_tv1_transit, end_txn_tv2_transit
from txnspec.impl.errors import Errors
from txnspec.impl.internal_topics import offsets_partition_for
from txnspec.impl.log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlType
from txnspec.impl.partition import Partition
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.producer_id_manager import AllocationError, ProducerIdManager
from txnspec.impl.txn_log import value_to_json
from txnspec.impl.txn_markers import TransactionMarkerChannelManager
from txnspec.impl.txn_metadata import (
    INT_MAX,
    TV_0,
    CoordinatorIllegalState,
    ProducerFenced,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from txnspec.impl.txn_state_manager import CoordinatorConfig, TransactionStateManager

S = TransactionState


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class LoadRecovery(Protocol):
    """What a durable broker gives the first load to settle a transaction log cut behind the data logs
    (``impl.txn_recovery.TxnLogRecovery``)."""

    def prune_delivered_markers(self, loaded: Mapping[str, TransactionMetadata]) -> None: ...

    def adopt_lost_transitions(self, loaded: Mapping[str, TransactionMetadata], now_ms: int,
                               write: Callable[[str, TransactionMetadata], None]) -> None: ...


class TransactionCoordinator:
    """The transaction coordinator of one broker (see the module docstring).

    >>> from txnspec.impl.partition import Partition
    >>> from txnspec.impl.txn_metadata import TV_2
    >>> tc = TransactionCoordinator([Partition("__transaction_state-0")], ProducerIdManager(1000))
    >>> tc.handle_init_producer_id("tx", 60000, now_ms=0)
    InitProducerIdResult(error=<Errors.NONE: (0, False)>, producer_id=1000, producer_epoch=0)
    >>> tc.handle_add_partitions_to_txn("tx", 1000, 0, ["t-0"], TV_2, now_ms=1).name
    'NONE'
    >>> tc.handle_end_txn("tx", 1000, 0, ControlType.COMMIT, TV_2, now_ms=2).producer_epoch
    1
    >>> [m.partition for m in tc.marker_channel.drain_markers()]
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
        self.marker_channel = TransactionMarkerChannelManager(self.txn_manager, self.config, rules)
        if load:
            self.load(coordinator_epoch, now_ms)

    # --- failover ---

    def load(self, coordinator_epoch: int, now_ms: int) -> None:
        """Become the coordinator (``onElection``): load the log and re-send markers of Prepare* txns."""
        self.marker_channel.clear()
        loaded = self.txn_manager.load(coordinator_epoch)
        if self.recovery is not None:
            self.recovery.prune_delivered_markers(loaded)
        for _tid, md in loaded.items():
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and self.config.resend_prepared_markers:
                result = ControlType.COMMIT if md.state is S.PREPARE_COMMIT else ControlType.ABORT
                self.marker_channel.add_txn_markers_to_send(coordinator_epoch, result, md, md.prepare_complete(now_ms),
                                                            now_ms)
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
        self.marker_channel.clear()

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
                self.marker_channel.add_txn_markers_to_send(tm.coordinator_epoch, result, md,
                                                            md.prepare_complete(now_ms), now_ms)

    def emigrate(self, index: int) -> None:
        """``removeTransactionsForTxnTopicPartition``: partition ``index`` is led elsewhere now; its cache and
        markers go, a load under way is cancelled."""
        self._drop_partition(index)
        self.txn_manager.loading_partitions.discard(index)
        self.txn_manager.not_led.add(index)

    def _drop_partition(self, index: int) -> None:
        self.txn_manager.drop_partition(index)
        self.marker_channel.remove_markers_for_txn_topic_partition(index)

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
            except AllocationError as exc:
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
            except AllocationError as exc:
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
                    except AllocationError as exc:
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
            pre = end_txn_tv2_transit(md, pid, epoch, result, is_from_client, client_tv, now_ms,
                                      self.producer_ids.generate_producer_id)
        else:
            pre = end_txn_tv1_transit(md, pid, epoch, result, is_from_client, now_ms)
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
        self.marker_channel.add_txn_markers_to_send(coordinator_epoch, result, md, complete, now_ms)
        if tv2:
            return EndTxnResult(Errors.NONE, complete.producer_id, complete.producer_epoch)
        return EndTxnResult(Errors.NONE)

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


__all__ = ["EndTxnResult", "InitProducerIdResult", "LoadRecovery", "TransactionCoordinator"]
