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

from txnspec.conformance.case_format import CaseInputError
from txnspec.conformance.case_targets.case_values import get_choice, get_int, get_str, get_str_list
from txnspec.impl.coordinator import CoordinatorConfig, ProducerIdManager, TransactionCoordinator, value_to_json
from txnspec.impl.errors import Errors, InvalidRequestError
from txnspec.impl.log import ControlType, Record
from txnspec.impl.partition import Partition
from txnspec.impl.txn_metadata import TV_2, TransactionMetadata, TransactionState, TxnTransitMetadata

INT_FIELDS = ("producer_id", "prev_producer_id", "next_producer_id", "producer_epoch", "last_producer_epoch",
              "txn_timeout_ms", "txn_start_ms", "txn_last_update_ms", "transaction_version")
REQUESTS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn")
EVENTS = ("AbortTimedOutTransactions", "ExpireTransactionalIds", "MarkersWritten", "CoordinatorLoad",
          "LogAppendFails")


def metadata_from_case(tid: str, m: Any) -> TransactionMetadata:
    if not isinstance(m, Mapping):
        raise CaseInputError(f"'metadata' must be an object or null, got {m!r}")
    try:
        state = TransactionState.named(get_str(m, "state"))
        pending_name = get_str(m, "pending_state", None, nullable=True)
        pending = None if pending_name is None else TransactionState.named(pending_name)
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None
    v = {name: get_int(m, name) for name in INT_FIELDS}
    if v["transaction_version"] not in (0, 1, 2):
        raise CaseInputError(f"'transaction_version' must be 0, 1 or 2, got {v['transaction_version']}")
    flag = m.get("has_failed_epoch_fence", False)
    if not isinstance(flag, bool):
        raise CaseInputError(f"'has_failed_epoch_fence' must be true or false, got {flag!r}")
    return TransactionMetadata(tid, v["producer_id"], v["prev_producer_id"], v["next_producer_id"],
                               v["producer_epoch"], v["last_producer_epoch"], v["txn_timeout_ms"], state,
                               set(get_str_list(m, "partitions")), v["txn_start_ms"], v["txn_last_update_ms"],
                               v["transaction_version"], pending, flag)


def metadata_view(md: TransactionMetadata | None) -> dict[str, Any] | None:
    if md is None:
        return None
    return {"state": md.state.value, "producer_id": md.producer_id, "prev_producer_id": md.prev_producer_id,
            "next_producer_id": md.next_producer_id, "producer_epoch": md.producer_epoch,
            "last_producer_epoch": md.last_producer_epoch, "txn_timeout_ms": md.txn_timeout_ms,
            "partitions": sorted(md.topic_partitions), "txn_start_ms": md.txn_start_timestamp,
            "txn_last_update_ms": md.txn_last_update_timestamp, "transaction_version": md.client_transaction_version,
            "pending_state": None if md.pending_state is None else md.pending_state.value,
            "has_failed_epoch_fence": md.has_failed_epoch_fence}


def transit_view(tid: str, t: TxnTransitMetadata | None) -> dict[str, Any]:
    if t is None:
        return {"tombstone": True, "transactional_id": tid}
    return {"state": t.txn_state.value, "producer_id": t.producer_id, "prev_producer_id": t.prev_producer_id,
            "next_producer_id": t.next_producer_id, "producer_epoch": t.producer_epoch,
            "last_producer_epoch": t.last_producer_epoch, "txn_timeout_ms": t.txn_timeout_ms,
            "partitions": sorted(t.topic_partitions), "txn_start_ms": t.txn_start_timestamp,
            "txn_last_update_ms": t.txn_last_update_timestamp, "transaction_version": t.client_transaction_version}


class CoordinatorSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        self.tid = get_str(given, "transactional_id")
        self.now_ms = get_int(given, "now_ms", minimum=0)
        md_json = given.get("metadata")
        md = None if md_json is None else metadata_from_case(self.tid, md_json)
        self.config = CoordinatorConfig(txn_max_timeout_ms=get_int(given, "txn_max_timeout_ms", 900_000, minimum=1),
                                        transaction_version=md.client_transaction_version if md else TV_2,
                                        manual_marker_completion=True)
        self.log = Partition("__transaction_state-0")
        self.coordinator = TransactionCoordinator(
            [self.log], ProducerIdManager(get_int(given, "next_producer_id", 0, minimum=0)), self.config,
            load=False)
        if md is not None:
            # What Kafka would have on disk: the record of the current state (a pending one was not written).
            self.log.append_records(-1, -1, -1, [Record(self.tid, value_to_json(md.prepare_no_transit(), 1))])
            self.coordinator.txn_manager.cache[self.tid] = md
        self.appends: list[tuple[str, TxnTransitMetadata | None]] = []
        self.coordinator.txn_manager.append_listener = lambda tid, t: self.appends.append((tid, t))
        self.inject: Errors | None = None

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        self.appends.clear()
        manager = self.coordinator.txn_manager
        if self.inject is not None:
            manager.fail_next_append(self.inject)
            self.inject = None
        try:
            if "request" in when:
                observation = self._request(when)
            elif "event" in when:
                observation = self._event(when)
            else:
                raise CaseInputError(f"a coordinator step needs 'request' or 'event': {dict(when)!r}")
        finally:
            manager._fail_next.clear()  # an injected failure applies to the next step only
        observation["log_append"] = transit_view(*self.appends[0]) if self.appends else None
        observation["state"] = {"metadata": metadata_view(self.coordinator.metadata(self.tid))}
        return observation

    def _request(self, when: Mapping[str, Any]) -> dict[str, Any]:
        name = get_choice(when, "request", REQUESTS)
        c, now = self.coordinator, self.now_ms
        if name == "InitProducerId":
            r = c.handle_init_producer_id(get_str(when, "transactional_id", nullable=True),
                                          get_int(when, "txn_timeout_ms"), get_int(when, "producer_id", -1),
                                          get_int(when, "producer_epoch", -1), now_ms=now)
            return {"error": r.error.name, "producer_id": r.producer_id, "producer_epoch": r.producer_epoch}
        tid = get_str(when, "transactional_id", nullable=True)
        pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
        if name == "AddPartitionsToTxn":
            tv = get_int(when, "transaction_version", 0)
            err = c.handle_add_partitions_to_txn(tid, pid, epoch, get_str_list(when, "partitions"), tv, now_ms=now)
            return {"error": err.name}
        if name == "AddOffsetsToTxn":
            return {"error": c.handle_add_offsets_to_txn(tid, pid, epoch, get_str(when, "group_id"),
                                                         now_ms=now).name}
        result = ControlType[get_choice(when, "result", ("COMMIT", "ABORT"))]
        end = c.handle_end_txn(tid, pid, epoch, result, get_int(when, "transaction_version", 0), now_ms=now)
        return {"error": end.error.name, "producer_id": end.producer_id, "producer_epoch": end.producer_epoch}

    def _event(self, when: Mapping[str, Any]) -> dict[str, Any]:
        name = get_choice(when, "event", EVENTS)
        c = self.coordinator
        if "now_ms" in when:
            self.now_ms = get_int(when, "now_ms", minimum=0)
        if name == "AbortTimedOutTransactions":
            results = c.abort_timed_out_transactions(self.now_ms)
            return {"error": results[0][1].error.name} if results else {}
        if name == "ExpireTransactionalIds":
            c.expire_transactional_ids(self.now_ms, get_int(when, "expiration_ms", minimum=0))
            return {}
        if name == "MarkersWritten":
            return {"error": c.markers_written(self.tid, self.now_ms).name}
        if name == "CoordinatorLoad":
            c.load(c.coordinator_epoch + 1, self.now_ms)
            return {}
        try:
            self.inject = Errors.named(get_str(when, "error"))
        except InvalidRequestError as exc:
            raise CaseInputError(str(exc)) from None
        return {}


def session(given: Mapping[str, Any]) -> CoordinatorSession:
    return CoordinatorSession(given)
