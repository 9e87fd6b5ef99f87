"""Partition cases on the spec: ``given`` becomes a :class:`PartitionState`, each step an append, an event
or a fetch.

The given producer entries are taken as they are (with their batches' offsets); an entry with an open
transaction also opens it in the partition's ongoing transactions. Appends are at time 0 (the format has
no timestamps; CONVENTIONS.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.case_format import CaseInputError
from txnspec.conformance.case_targets.case_values import get_bool, get_choice, get_int
from txnspec.spec import partition as part
from txnspec.spec.messages import IsolationLevel, TransactionResult


def _entry_from_case(pid: str, e: Mapping[str, Any]) -> tuple[int, part.ProducerStateEntry]:
    try:
        producer_id = int(pid)
    except ValueError:
        raise CaseInputError(f"producer id keys must be integers, got {pid!r}") from None
    if not isinstance(e, Mapping):
        raise CaseInputError(f"producer {pid} must be an object")
    batches = e.get("batches", [])
    if not isinstance(batches, list):
        raise CaseInputError(f"producer {pid}: 'batches' must be a list")
    metadata = tuple(part.BatchMetadata(get_int(b, "first_seq"), get_int(b, "last_seq"), get_int(b, "first_offset"),
                                        get_int(b, "last_offset")) for b in batches)
    return producer_id, part.ProducerStateEntry(
        get_int(e, "producer_epoch", -1), get_int(e, "coordinator_epoch", -1), metadata,
        get_int(e, "current_txn_first_offset", -1), 0)


def state_view(state: part.PartitionState) -> dict[str, Any]:
    return {
        "log_start_offset": state.log_start_offset, "log_end_offset": state.log_end_offset,
        "high_watermark": state.high_watermark,
        "producers": {str(pid): {
            "producer_epoch": e.producer_epoch, "coordinator_epoch": e.coordinator_epoch,
            "batches": [{"first_seq": b.first_seq, "last_seq": b.last_seq, "first_offset": b.first_offset,
                         "last_offset": b.last_offset} for b in e.batches],
            "current_txn_first_offset": e.current_txn_first_offset} for pid, e in state.producers},
    }


class PartitionSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        producers_json = given.get("producers", {})
        if not isinstance(producers_json, Mapping):
            raise CaseInputError("'producers' must be an object keyed by producer id")
        producers = tuple(sorted(_entry_from_case(pid, e) for pid, e in producers_json.items()))
        start = get_int(given, "log_start_offset", 0, minimum=0)
        end = get_int(given, "log_end_offset", start, minimum=start)
        hw = given.get("high_watermark")
        if hw is not None and (isinstance(hw, bool) or not isinstance(hw, int) or hw < 0):
            raise CaseInputError(f"'high_watermark' must be null or a non-negative integer, got {hw!r}")
        ongoing = tuple(sorted((e.current_txn_first_offset, pid) for pid, e in producers
                               if e.current_txn_first_offset != -1))
        self.state = part.PartitionState(log_start_offset=start, log_end_offset=end, high_watermark=hw,
                                         producers=producers, ongoing=ongoing)

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        observation: dict[str, Any] = {}
        if "append" in when:
            kind = get_choice(when, "append", ("data", "marker"))
            pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
            if kind == "data":
                self.state, reply = part.append_data(self.state, pid, epoch, get_int(when, "first_seq"),
                                                     get_int(when, "count", minimum=1), get_bool(when, "transactional"))
                observation.update(error=reply.error.value)
                if reply.error.value == "NONE":
                    observation.update(duplicate=reply.duplicate, first_offset=reply.base_offset,
                                       last_offset=reply.last_offset)
            else:
                result = TransactionResult(get_choice(when, "result", ("COMMIT", "ABORT")))
                self.state, marker_reply = part.append_end_txn_marker(
                    self.state, pid, epoch, get_int(when, "coordinator_epoch"), result,
                    get_int(when, "transaction_version", 0))
                observation.update(error=marker_reply.error.value)
        elif "event" in when:
            event = when["event"]
            if event == "HighWatermark":
                self.state = part.update_high_watermark(self.state, get_int(when, "offset", minimum=0))
            elif event == "ExpireProducers":
                self.state = part.expire_producers(self.state, get_int(when, "now_ms", minimum=0),
                                                   get_int(when, "expiration_ms", part.PRODUCER_ID_EXPIRATION_MS))
            else:
                raise CaseInputError(f"unknown partition event {event!r}")
        elif "read" in when:
            if when["read"] != "fetch":
                raise CaseInputError(f"unknown partition read {when['read']!r}")
            isolation = IsolationLevel(get_choice(when, "isolation", ("READ_COMMITTED", "READ_UNCOMMITTED")))
            response = part.fetch(self.state, get_int(when, "offset", minimum=0), isolation)
            observation.update(error=response.error.value, records=list(response.records),
                               last_stable_offset=response.last_stable_offset,
                               aborted_transactions=[{"producer_id": a.producer_id, "first_offset": a.first_offset}
                                                     for a in response.aborted_transactions])
        else:
            raise CaseInputError(f"a partition step needs 'append', 'event' or 'read': {dict(when)!r}")
        observation.setdefault("last_stable_offset", self.state.last_stable_offset)
        observation["first_unstable_offset"] = self.state.first_unstable_offset
        observation["state"] = state_view(self.state)
        return observation


def session(given: Mapping[str, Any]) -> PartitionSession:
    return PartitionSession(given)
