"""Coordinator cases on the implementation: a :class:`TransactionCoordinator` over a one-partition
``__transaction_state`` log.

How ``given`` becomes a coordinator: the metadata (if any) is written to the transaction log as the record
of its current state (what Kafka would have on disk) and installed in the cache with its in-memory fields
(``last_producer_epoch``, ``pending_state``, ``has_failed_epoch_fence``) as given; the producer-id
allocator starts at ``next_producer_id``. Case conventions (FORMAT.md, CONVENTIONS.md) live here, not in
the coordinator: the coordinator runs in ``manual_marker_completion`` mode (a prepared transaction waits
for ``MarkersWritten``), the cluster's finalized transaction version is the given metadata's (TV2 when the
id is unknown), ``LogAppendFails`` injects a failure into the next step's first transaction-log append, and
``log_append`` is the first transit (or tombstone) the step handed to a successful append.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.steps import coordinator as steps
from txnspec.impl.coordinator import TransactionCoordinator
from txnspec.impl.errors import Errors
from txnspec.impl.log import ControlType, Record
from txnspec.impl.partition import Partition
from txnspec.impl.producer_id_manager import ProducerIdManager
from txnspec.impl.txn_log import value_to_json
from txnspec.impl.txn_metadata import TV_2, TransactionMetadata, TransactionState, TxnTransitMetadata
from txnspec.impl.txn_state_manager import CoordinatorConfig


def metadata_from_case(tid: str, m: steps.TxnMetadataCase) -> TransactionMetadata:
    return TransactionMetadata(tid, m.producer_id, m.prev_producer_id, m.next_producer_id, m.producer_epoch,
                               m.last_producer_epoch, m.txn_timeout_ms, TransactionState.named(m.state),
                               set(m.partitions), m.txn_start_ms, m.txn_last_update_ms, m.transaction_version,
                               None if m.pending_state is None else TransactionState.named(m.pending_state),
                               m.has_failed_epoch_fence)


def metadata_case(md: TransactionMetadata | None) -> steps.TxnMetadataCase | None:
    if md is None:
        return None
    return steps.TxnMetadataCase(
        md.state.value, md.producer_id, md.prev_producer_id, md.next_producer_id, md.producer_epoch,
        md.last_producer_epoch, md.txn_timeout_ms, tuple(sorted(md.topic_partitions)), md.txn_start_timestamp,
        md.txn_last_update_timestamp, md.client_transaction_version,
        None if md.pending_state is None else md.pending_state.value, md.has_failed_epoch_fence)


def transit_case(t: TxnTransitMetadata | None) -> steps.TxnMetadataCase | str:
    if t is None:
        return steps.TOMBSTONE
    return steps.TxnMetadataCase(
        t.txn_state.value, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
        t.last_producer_epoch, t.txn_timeout_ms, tuple(sorted(t.topic_partitions)), t.txn_start_timestamp,
        t.txn_last_update_timestamp, t.client_transaction_version)


class CoordinatorSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        g = steps.CoordinatorGiven.parse(given)
        self.tid = g.transactional_id
        self.now_ms = g.now_ms
        md = None if g.metadata is None else metadata_from_case(self.tid, g.metadata)
        self.config = CoordinatorConfig(txn_max_timeout_ms=g.txn_max_timeout_ms,
                                        transaction_version=md.client_transaction_version if md else TV_2,
                                        manual_marker_completion=True,
                                        transaction_two_phase_commit_enable=g.transaction_two_phase_commit_enable)
        self.log = Partition("__transaction_state-0")
        self.coordinator = TransactionCoordinator([self.log], ProducerIdManager(g.next_producer_id), self.config,
                                                  load=False)
        if md is not None:
            # What Kafka would have on disk: the record of the current state (a pending one was not written), as a
            # value of the cluster's transaction version (version 0 at TV 0: no tagged fields).
            value = value_to_json(md.prepare_no_transit(), self.config.transaction_version)
            self.log.append_records(-1, -1, -1, [Record(self.tid, value)])
            self.coordinator.txn_manager.cache[self.tid] = md
        self.appends: list[tuple[str, TxnTransitMetadata | None]] = []
        self.coordinator.txn_manager.append_listener = lambda tid, t: self.appends.append((tid, t))
        self.inject: Errors | None = None

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_coordinator_step(when)
        self.appends.clear()
        manager = self.coordinator.txn_manager
        if self.inject is not None:
            manager.fail_next_append(self.inject)
            self.inject = None
        try:
            error, producer_id, producer_epoch = self._step(step)
        finally:
            manager._fail_next.clear()  # an injected failure applies to the next step only
        return steps.CoordinatorObservation(
            log_append=transit_case(self.appends[0][1]) if self.appends else None,
            metadata=metadata_case(self.coordinator.metadata(self.tid)),
            error=error, producer_id=producer_id, producer_epoch=producer_epoch).as_json()

    def _step(self, step: steps.CoordinatorStep) -> tuple[str | None, int | None, int | None]:
        """The step's answer: its error, and the producer id and epoch it hands out (None: not answered)."""
        c = self.coordinator
        if isinstance(step, steps.InitProducerIdStep):
            r = c.handle_init_producer_id(step.transactional_id, step.txn_timeout_ms, step.producer_id,
                                          step.producer_epoch, now_ms=self.now_ms, enable_two_pc=step.enable_two_pc,
                                          keep_prepared_txn=step.keep_prepared_txn)
            return r.error.name, r.producer_id, r.producer_epoch
        if isinstance(step, steps.AddPartitionsToTxnStep):
            err = c.handle_add_partitions_to_txn(step.transactional_id, step.producer_id, step.producer_epoch,
                                                 list(step.partitions), step.transaction_version, now_ms=self.now_ms)
            return err.name, None, None
        if isinstance(step, steps.AddOffsetsToTxnStep):
            err = c.handle_add_offsets_to_txn(step.transactional_id, step.producer_id, step.producer_epoch,
                                              step.group_id, now_ms=self.now_ms)
            return err.name, None, None
        if isinstance(step, steps.EndTxnStep):
            end = c.handle_end_txn(step.transactional_id, step.producer_id, step.producer_epoch,
                                   ControlType[step.result], step.transaction_version, now_ms=self.now_ms)
            return end.error.name, end.producer_id, end.producer_epoch
        if isinstance(step, steps.LogAppendFailsStep):
            self.inject = Errors.named(step.error)
            return None, None, None
        if isinstance(step, steps.OwnershipStep):  # the case's id lives in the one partition, index 0
            if step.event == "CoordinatorLoading":
                c.begin_load({0}, c.coordinator_epoch + 1)
            elif step.event == "CoordinatorLoaded":
                c.finish_load(0, self.now_ms)
            else:
                c.emigrate(0)
            return None, None, None
        if step.now_ms is not None:
            self.now_ms = step.now_ms
        if isinstance(step, steps.AbortTimedOutTransactionsStep):
            results = c.abort_timed_out_transactions(self.now_ms)
            return (results[0][1].error.name if results else None), None, None
        if isinstance(step, steps.ExpireTransactionalIdsStep):
            c.expire_transactional_ids(self.now_ms, step.expiration_ms)
            return None, None, None
        if isinstance(step, steps.MarkersWrittenStep):
            return c.marker_channel.markers_written(self.tid, self.now_ms).name, None, None
        c.load(c.coordinator_epoch + 1, self.now_ms)
        return None, None, None


def session(given: Mapping[str, Any]) -> CoordinatorSession:
    return CoordinatorSession(given)
