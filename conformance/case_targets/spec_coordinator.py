"""Coordinator cases on the spec: ``given`` becomes a :class:`CoordinatorState`, each ``when`` a handler call.

Case conventions (FORMAT.md): the coordinator never completes a prepared transaction by itself, so the
config sets ``complete_without_markers=False`` and ``MarkersWritten`` completes it; the cluster's
finalized transaction version (used for timeouts and fencing) is the metadata's; ``LogAppendFails``
makes the next step's transaction-log append fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.case_format import CaseInputError
from txnspec.conformance.case_targets.case_values import get_choice, get_int, get_str, get_str_list
from txnspec.spec import coordinator as coord
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

METADATA_FIELDS = ("producer_id", "prev_producer_id", "next_producer_id", "producer_epoch", "last_producer_epoch",
                   "txn_timeout_ms", "txn_start_ms", "txn_last_update_ms", "transaction_version")


def metadata_from_case(tid: str, m: Mapping[str, Any]) -> coord.TxnMetadata:
    if not isinstance(m, Mapping):
        raise CaseInputError(f"'metadata' must be an object or null, got {m!r}")
    try:
        state = TxnState.named(get_str(m, "state"))
        pending_name = get_str(m, "pending_state", None, nullable=True)
        pending = TxnState.named(pending_name) if pending_name is not None else None
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None
    values = {name: get_int(m, name) for name in METADATA_FIELDS}
    if values["transaction_version"] not in (0, 1, 2):
        raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {values['transaction_version']}")
    flag = m.get("has_failed_epoch_fence", False)
    if not isinstance(flag, bool):
        raise CaseInputError("'has_failed_epoch_fence' must be true or false")
    return coord.TxnMetadata(
        tid, values["producer_id"], values["prev_producer_id"], values["next_producer_id"],
        values["producer_epoch"], values["last_producer_epoch"], values["txn_timeout_ms"], state,
        frozenset(get_str_list(m, "partitions")), values["txn_start_ms"], values["txn_last_update_ms"],
        values["transaction_version"], pending, flag)


def metadata_view(md: coord.TxnMetadata | None) -> dict[str, Any] | None:
    if md is None:
        return None
    return {
        "state": md.state.value, "producer_id": md.producer_id, "prev_producer_id": md.prev_producer_id,
        "next_producer_id": md.next_producer_id, "producer_epoch": md.producer_epoch,
        "last_producer_epoch": md.last_producer_epoch, "txn_timeout_ms": md.txn_timeout_ms,
        "partitions": sorted(md.partitions), "txn_start_ms": md.txn_start_ms,
        "txn_last_update_ms": md.txn_last_update_ms, "transaction_version": md.transaction_version,
        "pending_state": md.pending_state.value if md.pending_state else None,
        "has_failed_epoch_fence": md.has_failed_epoch_fence,
    }


def transit_view(record: coord.TxnTransit | None) -> dict[str, Any]:
    if record is None:
        return {"tombstone": True}
    return {
        "state": record.state.value, "producer_id": record.producer_id, "prev_producer_id": record.prev_producer_id,
        "next_producer_id": record.next_producer_id, "producer_epoch": record.producer_epoch,
        "last_producer_epoch": record.last_producer_epoch, "txn_timeout_ms": record.txn_timeout_ms,
        "partitions": sorted(record.partitions), "txn_start_ms": record.txn_start_ms,
        "txn_last_update_ms": record.txn_last_update_ms, "transaction_version": record.transaction_version,
    }


def _transit_of(md: coord.TxnMetadata) -> coord.TxnTransit:
    return coord.TxnTransit(md.producer_id, md.prev_producer_id, md.next_producer_id, md.producer_epoch,
                            md.last_producer_epoch, md.txn_timeout_ms, md.state, md.partitions, md.txn_start_ms,
                            md.txn_last_update_ms, md.transaction_version)


class CoordinatorSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        self.tid = get_str(given, "transactional_id")
        md_json = given.get("metadata")
        md = None if md_json is None else metadata_from_case(self.tid, md_json)
        server_tv = md.transaction_version if md is not None else coord.TV_2
        self.config = coord.CoordinatorConfig(
            txn_max_timeout_ms=get_int(given, "txn_max_timeout_ms", 900_000, minimum=1),
            transaction_version=server_tv, complete_without_markers=False)
        self.state = coord.CoordinatorState(
            now_ms=get_int(given, "now_ms", minimum=0),
            next_producer_id=get_int(given, "next_producer_id", 0, minimum=0),
            cache=((self.tid, md),) if md is not None else (),
            # What the cache holds was written to the log (a pending transition was not, yet).
            txn_log=((self.tid, _transit_of(md)),) if md is not None else ())
        self.next_append_error = Errors.NONE

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        append_error, self.next_append_error = self.next_append_error, Errors.NONE
        result: coord.CoordinatorResult | None
        if "request" in when:
            result = self._request(when, append_error)
        elif "event" in when:
            result = self._event(when, append_error)
        else:
            raise CaseInputError(f"a coordinator step needs 'request' or 'event': {dict(when)!r}")
        if result is None:
            return {}
        self.state = result.state
        observation: dict[str, Any] = {
            "log_append": transit_view(result.appended[0][1]) if result.appended else None,
            "state": {"metadata": metadata_view(self.state.metadata(self.tid))},
        }
        if result.response is not None:
            observation["error"] = result.response.error.value
            if isinstance(result.response, InitProducerIdResponse | EndTxnResponse):
                observation["producer_id"] = result.response.producer_id
                observation["producer_epoch"] = result.response.producer_epoch
        return observation

    def _request(self, when: Mapping[str, Any], append_error: Errors) -> coord.CoordinatorResult:
        name = when["request"]
        if name not in ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"):
            raise CaseInputError(f"unknown coordinator request {name!r}")
        config = self.config
        if name == "InitProducerId":
            request = InitProducerId(get_str(when, "transactional_id", nullable=True),
                                     get_int(when, "txn_timeout_ms"), get_int(when, "producer_id", -1),
                                     get_int(when, "producer_epoch", -1))
            return coord.handle_init_producer_id(self.state, request, config=config, append_error=append_error)
        tid = get_str(when, "transactional_id", nullable=True) or ""
        pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
        if name == "AddPartitionsToTxn":
            tv = get_int(when, "transaction_version", 0)
            partitions = frozenset(get_str_list(when, "partitions"))
            return coord.handle_add_partitions_to_txn(self.state, AddPartitionsToTxn(tid, pid, epoch, partitions, tv),
                                                      config=config, append_error=append_error)
        if name == "AddOffsetsToTxn":
            return coord.handle_add_offsets_to_txn(
                self.state, AddOffsetsToTxn(tid, pid, epoch, get_str(when, "group_id")), config=config,
                append_error=append_error)
        if name == "EndTxn":
            result = TransactionResult(get_choice(when, "result", ("COMMIT", "ABORT")))
            tv = get_int(when, "transaction_version", 0)
            return coord.handle_end_txn(self.state, EndTxn(tid, pid, epoch, result, tv), config=config,
                                        append_error=append_error)
        raise CaseInputError(f"unknown coordinator request {name!r}")

    def _event(self, when: Mapping[str, Any], append_error: Errors) -> coord.CoordinatorResult | None:
        name = when["event"]
        config = self.config
        if name == "AbortTimedOutTransactions":
            return coord.abort_timed_out_transactions(self.state, get_int(when, "now_ms", minimum=0), config=config,
                                                      append_error=append_error)
        if name == "ExpireTransactionalIds":
            return coord.expire_transactional_ids(self.state, get_int(when, "now_ms", minimum=0),
                                                  get_int(when, "expiration_ms", minimum=0), config=config,
                                                  append_error=append_error)
        if name == "MarkersWritten":
            return coord.markers_written(self.state, self.tid, config=config, append_error=append_error)
        if name == "CoordinatorLoad":
            return coord.coordinator_failover(self.state, config=self.config)
        if name == "LogAppendFails":
            try:
                self.next_append_error = Errors.named(get_str(when, "error"))
            except ValueError as exc:
                raise CaseInputError(str(exc)) from None
            return None
        raise CaseInputError(f"unknown coordinator event {name!r}")


def session(given: Mapping[str, Any]) -> CoordinatorSession:
    return CoordinatorSession(given)


__all__ = ["CoordinatorSession", "metadata_view", "session", "transit_view"]
