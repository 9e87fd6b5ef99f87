"""Partition cases on the implementation: a :class:`Partition` built from ``given``.

How ``given`` becomes a partition: the log starts at ``log_start_offset``; each given producer batch
becomes a stored batch at its offsets (transactional when it lies in the producer's open transaction) and
the gaps up to ``log_end_offset`` are plain records; the producer entries are then installed exactly as
given. ``high_watermark: null`` follows the log end offset, an integer pins it. Appends are at time 0
(CONVENTIONS.md); ``records`` of a fetch are the offsets the consumer's ``CompletedFetch`` returns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from txnspec.conformance.case_format import CaseInputError
from txnspec.conformance.case_targets.case_values import get_bool, get_choice, get_int
from txnspec.impl.consumer import visible_records
from txnspec.impl.log import ControlType, Record, RecordBatch, decrement_sequence
from txnspec.impl.partition import IsolationLevel, Partition
from txnspec.impl.producer_state import BatchMetadata, ProducerStateEntry, TxnMetadata


def _entries(given: Mapping[str, Any]) -> list[tuple[ProducerStateEntry, list[tuple[int, int, int, int]]]]:
    producers = given.get("producers", {})
    if not isinstance(producers, Mapping):
        raise CaseInputError("'producers' must be an object keyed by producer id")
    out = []
    for key, e in producers.items():
        try:
            pid = int(key)
        except ValueError:
            raise CaseInputError(f"producer id keys must be integers, got {key!r}") from None
        if not isinstance(e, Mapping):
            raise CaseInputError(f"producer {key} must be an object")
        batches = e.get("batches", [])
        if not isinstance(batches, list) or not all(isinstance(b, Mapping) for b in batches):
            raise CaseInputError(f"producer {key}: 'batches' must be a list of objects")
        spans = []
        for b in batches:
            fs, ls = get_int(b, "first_seq", minimum=0), get_int(b, "last_seq", minimum=0)
            fo, lo = get_int(b, "first_offset", minimum=0), get_int(b, "last_offset", minimum=0)
            if lo < fo or decrement_sequence(ls, lo - fo) != fs:
                raise CaseInputError(f"producer {key}: batch {dict(b)} has sequences that do not match its offsets")
            spans.append((fs, ls, fo, lo))
        first = get_int(e, "current_txn_first_offset", -1, minimum=-1)
        entry = ProducerStateEntry(pid, get_int(e, "producer_epoch", -1, minimum=-1),
                                   get_int(e, "coordinator_epoch", -1, minimum=-1), 0, None if first < 0 else first,
                                   deque(BatchMetadata(ls, lo, lo - fo, 0) for fs, ls, fo, lo in spans[-5:]))
        out.append((entry, spans))
    return out


def _build(given: Mapping[str, Any]) -> Partition:
    start = get_int(given, "log_start_offset", 0, minimum=0)
    end = get_int(given, "log_end_offset", start, minimum=start)
    hw = given.get("high_watermark")
    if hw is not None and (isinstance(hw, bool) or not isinstance(hw, int) or hw < 0):
        raise CaseInputError(f"'high_watermark' must be null or a non-negative integer, got {hw!r}")
    p = Partition("topic-0", log_start_offset=start)
    entries = _entries(given)
    placed = sorted((fo, lo, fs, e) for e, spans in entries for fs, _ls, fo, lo in spans if fo >= start)
    for fo, lo, fs, e in placed:
        if fo < p.log_end_offset or lo >= end:
            raise CaseInputError(f"given batches overlap or lie beyond the log end offset {end}")
        if fo > p.log_end_offset:
            p.log.append(RecordBatch(-1, (Record(),) * (fo - p.log_end_offset)))
        txn = e.current_txn_first_offset is not None and fo >= e.current_txn_first_offset
        p.log.append(RecordBatch(-1, (Record(),) * (lo - fo + 1), e.producer_id, max(e.producer_epoch, 0), fs, txn))
    if end > p.log_end_offset:
        p.log.append(RecordBatch(-1, (Record(),) * (end - p.log_end_offset)))
    for e, _ in entries:
        p.producer_state.producers[e.producer_id] = e
        if e.current_txn_first_offset is not None:
            p.producer_state.ongoing_txns[e.current_txn_first_offset] = TxnMetadata(e.producer_id,
                                                                                    e.current_txn_first_offset)
    p.producer_state.update_map_end_offset(end)
    if hw is not None:
        p.update_high_watermark(hw)
    return p


def state_view(p: Partition) -> dict[str, Any]:
    return {"log_start_offset": p.log_start_offset, "log_end_offset": p.log_end_offset,
            "high_watermark": None if p.hw_follows_leo else p.high_watermark,
            "producers": {str(pid): {
                "producer_epoch": e.producer_epoch, "coordinator_epoch": e.coordinator_epoch,
                "batches": [{"first_seq": b.first_seq, "last_seq": b.last_seq, "first_offset": b.first_offset,
                             "last_offset": b.last_offset} for b in e.batch_metadata],
                "current_txn_first_offset": -1 if e.current_txn_first_offset is None else e.current_txn_first_offset}
                for pid, e in sorted(p.producer_state.producers.items())}}


class PartitionSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        self.partition = _build(given)
        self.expiration_ms = self.partition.producer_state.producer_id_expiration_ms

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        p = self.partition
        obs: dict[str, Any] = {}
        if "append" in when:
            kind = get_choice(when, "append", ("data", "marker"))
            pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
            if kind == "data":
                count = get_int(when, "count", minimum=1)
                r = p.append_records(pid, epoch, get_int(when, "first_seq"), [Record()] * count,
                                     get_bool(when, "transactional"))
                obs["error"] = r.error.name
                if r.error.name == "NONE":
                    obs.update(duplicate=r.duplicate, first_offset=r.base_offset, last_offset=r.last_offset)
            else:
                result = ControlType[get_choice(when, "result", ("COMMIT", "ABORT"))]
                r = p.write_txn_marker(pid, epoch, get_int(when, "coordinator_epoch"), result,
                                       get_int(when, "transaction_version", 0))
                obs["error"] = r.error.name
                if r.error.name == "NONE":
                    obs.update(first_offset=r.base_offset, last_offset=r.last_offset)
        elif "event" in when:
            event = get_choice(when, "event", ("HighWatermark", "ExpireProducers"))
            if event == "HighWatermark":
                p.update_high_watermark(get_int(when, "offset", minimum=0))
            else:
                p.producer_state.producer_id_expiration_ms = get_int(when, "expiration_ms", self.expiration_ms,
                                                                     minimum=0)
                p.remove_expired_producers(get_int(when, "now_ms", minimum=0))
        elif "read" in when:
            get_choice(when, "read", ("fetch",))
            isolation = IsolationLevel(get_choice(when, "isolation", ("READ_COMMITTED", "READ_UNCOMMITTED")))
            offset = get_int(when, "offset", minimum=0)
            f = p.read(offset, isolation)
            records, _ = visible_records(p.name, f.batches, offset, isolation, f.aborted_transactions)
            obs.update(error=f.error.name, records=[r.offset for r in records], high_watermark=f.high_watermark,
                       last_stable_offset=f.last_stable_offset,
                       aborted_transactions=[{"producer_id": t.producer_id, "first_offset": t.first_offset,
                                              "last_offset": t.last_offset, "last_stable_offset": t.last_stable_offset}
                                             for t in f.aborted_transactions or ()])
        else:
            raise CaseInputError(f"a partition step needs 'append', 'event' or 'read': {dict(when)!r}")
        obs.setdefault("last_stable_offset", p.last_stable_offset)
        fuo = p.first_unstable_offset
        obs["first_unstable_offset"] = -1 if fuo is None else fuo
        obs["state"] = state_view(p)
        return obs


def session(given: Mapping[str, Any]) -> PartitionSession:
    return PartitionSession(given)
