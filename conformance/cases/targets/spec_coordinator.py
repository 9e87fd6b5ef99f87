"""Coordinator cases on the spec: ``given`` becomes a :class:`CoordinatorState`, each ``when`` a handler call.

Case conventions (FORMAT.md): the coordinator never completes a prepared transaction by itself, so the
config sets ``complete_without_markers=False`` and ``MarkersWritten`` completes it; the cluster's
finalized transaction version (used for timeouts and fencing) is the metadata's; ``LogAppendFails``
makes the next step's transaction-log append fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.steps import coordinator as steps
from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import txn_expiry, txn_loading, txn_markers
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    InitProducerId,
    InitProducerIdResponse,
    TransactionResult,
)
from txnspec.spec.txn_state import TxnState


def metadata_from_case(tid: str, m: steps.TxnMetadataCase) -> coord_state.TxnMetadata:
    return coord_state.TxnMetadata(
        tid, m.producer_id, m.prev_producer_id, m.next_producer_id, m.producer_epoch, m.last_producer_epoch,
        m.txn_timeout_ms, TxnState.named(m.state), frozenset(m.partitions), m.txn_start_ms, m.txn_last_update_ms,
        m.transaction_version, None if m.pending_state is None else TxnState.named(m.pending_state),
        m.has_failed_epoch_fence)


def metadata_case(md: coord_state.TxnMetadata | None) -> steps.TxnMetadataCase | None:
    if md is None:
        return None
    return steps.TxnMetadataCase(
        md.state.value, md.producer_id, md.prev_producer_id, md.next_producer_id, md.producer_epoch,
        md.last_producer_epoch, md.txn_timeout_ms, tuple(sorted(md.partitions)), md.txn_start_ms,
        md.txn_last_update_ms, md.transaction_version, md.pending_state.value if md.pending_state else None,
        md.has_failed_epoch_fence)


def transit_case(record: coord_state.TxnTransit | None) -> steps.TxnMetadataCase | str:
    if record is None:
        return steps.TOMBSTONE
    return steps.TxnMetadataCase(
        record.state.value, record.producer_id, record.prev_producer_id, record.next_producer_id,
        record.producer_epoch, record.last_producer_epoch, record.txn_timeout_ms, tuple(sorted(record.partitions)),
        record.txn_start_ms, record.txn_last_update_ms, record.transaction_version)


def _transit_of(md: coord_state.TxnMetadata) -> coord_state.TxnTransit:
    return coord_state.TxnTransit(md.producer_id, md.prev_producer_id, md.next_producer_id, md.producer_epoch,
                                  md.last_producer_epoch, md.txn_timeout_ms, md.state, md.partitions, md.txn_start_ms,
                                  md.txn_last_update_ms, md.transaction_version)


class CoordinatorSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        g = steps.CoordinatorGiven.parse(given)
        self.tid = g.transactional_id
        md = None if g.metadata is None else metadata_from_case(self.tid, g.metadata)
        server_tv = md.transaction_version if md is not None else coord_state.TV_2
        self.config = coord_state.CoordinatorConfig(txn_max_timeout_ms=g.txn_max_timeout_ms,
                                                    transaction_version=server_tv, complete_without_markers=False,
                                                    transaction_two_phase_commit_enable=g.transaction_two_phase_commit_enable)
        self.state = coord_state.CoordinatorState(
            now_ms=g.now_ms, next_producer_id=g.next_producer_id,
            cache=((self.tid, md),) if md is not None else (),
            # What the cache holds was written to the log (a pending transition was not, yet).
            txn_log=((self.tid, _transit_of(md)),) if md is not None else ())
        self.next_append_error = Errors.NONE

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_coordinator_step(when)
        append_error, self.next_append_error = self.next_append_error, Errors.NONE
        result = self._step(step, append_error)
        if result is not None:
            self.state = result.state
        response = result.response if result is not None else None
        ids = isinstance(response, InitProducerIdResponse | EndTxnResponse)
        return steps.CoordinatorObservation(
            log_append=transit_case(result.appended[0][1]) if result is not None and result.appended else None,
            metadata=metadata_case(self.state.metadata(self.tid)),
            error=response.error.value if response is not None else None,
            producer_id=response.producer_id if ids else None,  # type: ignore[union-attr]
            producer_epoch=response.producer_epoch if ids else None,  # type: ignore[union-attr]
        ).as_json()

    def _step(self, step: steps.CoordinatorStep, append_error: Errors) -> coord_state.CoordinatorResult | None:
        config, cs = self.config, self.state
        if isinstance(step, steps.InitProducerIdStep):
            request = InitProducerId(step.transactional_id, step.txn_timeout_ms, step.producer_id, step.producer_epoch,
                                     step.enable_two_pc, step.keep_prepared_txn)
            return coord.handle_init_producer_id(cs, request, config=config, append_error=append_error)
        if isinstance(step, steps.AddPartitionsToTxnStep):
            add = AddPartitionsToTxn(step.transactional_id or "", step.producer_id, step.producer_epoch,
                                     frozenset(step.partitions), step.transaction_version)
            return coord.handle_add_partitions_to_txn(cs, add, config=config, append_error=append_error)
        if isinstance(step, steps.AddOffsetsToTxnStep):
            offsets = AddOffsetsToTxn(step.transactional_id or "", step.producer_id, step.producer_epoch,
                                      step.group_id)
            return coord.handle_add_offsets_to_txn(cs, offsets, config=config, append_error=append_error)
        if isinstance(step, steps.EndTxnStep):
            end = EndTxn(step.transactional_id or "", step.producer_id, step.producer_epoch,
                         TransactionResult(step.result), step.transaction_version)
            return coord.handle_end_txn(cs, end, config=config, append_error=append_error)
        if isinstance(step, steps.AbortTimedOutTransactionsStep):
            return txn_expiry.abort_timed_out_transactions(cs, step.now_ms, config=config, append_error=append_error)
        if isinstance(step, steps.ExpireTransactionalIdsStep):
            return txn_expiry.expire_transactional_ids(cs, step.now_ms, step.expiration_ms, config=config,
                                                       append_error=append_error)
        if isinstance(step, steps.MarkersWrittenStep):
            return txn_markers.markers_written(cs, self.tid, config=config, append_error=append_error)
        if isinstance(step, steps.CoordinatorLoadStep):
            return txn_loading.coordinator_failover(cs, config=config)
        if isinstance(step, steps.OwnershipStep):
            partition = coord_state.txn_log_partition(self.tid, config)
            if step.event == "CoordinatorLoading":
                return txn_loading.begin_load(cs, frozenset({partition}), config=config)
            if step.event == "CoordinatorLoaded":
                return txn_loading.finish_load(cs, partition, config=config)
            return txn_loading.emigrate(cs, partition, config=config)
        self.next_append_error = Errors.named(step.error)
        return None


def session(given: Mapping[str, Any]) -> CoordinatorSession:
    return CoordinatorSession(given)


__all__ = ["CoordinatorSession", "metadata_case", "session", "transit_case"]
