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

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.steps import partition as steps
from txnspec.impl.broker import PRODUCE_VERSION_ADD_PARTITION, PRODUCE_VERSION_GENERIC_ERROR, verification_error
from txnspec.impl.consumer import visible_records
from txnspec.impl.errors import Errors
from txnspec.impl.log import ControlType, Record, RecordBatch, decrement_sequence
from txnspec.impl.partition import IsolationLevel, Partition
from txnspec.impl.producer_state import BatchMetadata, ProducerStateEntry, TxnMetadata


def _entries(g: steps.PartitionGiven) -> list[tuple[ProducerStateEntry, list[tuple[int, int, int, int]]]]:
    out = []
    for e in g.producers:
        spans = []
        for b in e.batches:
            fs, ls, fo, lo = b.first_seq, b.last_seq, b.first_offset, b.last_offset
            if lo < fo or decrement_sequence(ls, lo - fo) != fs:
                raise CaseInputError(f"producer {e.producer_id}: batch {b.as_json()} has sequences that do not "
                                     "match its offsets")
            spans.append((fs, ls, fo, lo))
        first = e.current_txn_first_offset
        entry = ProducerStateEntry(e.producer_id, e.producer_epoch, e.coordinator_epoch, 0,
                                   None if first < 0 else first,
                                   deque(BatchMetadata(ls, lo, lo - fo, 0) for fs, ls, fo, lo in spans[-5:]))
        out.append((entry, spans))
    return out


def _build(g: steps.PartitionGiven) -> Partition:
    start, end, hw = g.log_start_offset, g.log_end_offset, g.high_watermark
    p = Partition("topic-0", log_start_offset=start)
    entries = _entries(g)
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
    producers = [steps.ProducerEntryCase(
        pid, e.producer_epoch, e.coordinator_epoch,
        tuple(steps.BatchCase(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batch_metadata),
        -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
        for pid, e in sorted(p.producer_state.producers.items())]
    verifying = [steps.VerificationEntryCase(pid, v.lowest_sequence, v.epoch, v.supports_epoch_bump)
                 for pid, v in sorted(p.producer_state.verification_states.items())]
    return steps.partition_state_json(p.log_start_offset, p.log_end_offset,
                                      None if p.hw_follows_leo else p.high_watermark, producers, verifying)


def _verification_refusal(verification: steps.Verification | None) -> Errors | None:
    """The error of a data append whose verification the coordinator did not pass: the leader's mapping in
    :mod:`txnspec.impl.broker`."""
    if verification is None or verification.coordinator_error == "NONE":
        return None
    return verification_error(Errors[verification.coordinator_error],
                              verification.produce_version >= PRODUCE_VERSION_GENERIC_ERROR,
                              verification.produce_version >= PRODUCE_VERSION_ADD_PARTITION)


class PartitionSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        self.partition = _build(steps.PartitionGiven.parse(given))
        self.expiration_ms = self.partition.producer_state.producer_id_expiration_ms

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_partition_step(when)
        p = self.partition
        found: dict[str, Any] = {}
        refused = _verification_refusal(step.verification) if isinstance(step, steps.AppendDataStep) else None
        if refused is not None:
            found["error"] = refused.name
        elif isinstance(step, steps.AppendDataStep):
            r = p.append_records(step.producer_id, step.producer_epoch, step.first_seq, [Record()] * step.count,
                                 step.transactional)
            found["error"] = r.error.name
            if r.error is Errors.NONE:
                found.update(duplicate=r.duplicate, first_offset=r.base_offset, last_offset=r.last_offset)
        elif isinstance(step, steps.AppendMarkerStep):
            r = p.write_txn_marker(step.producer_id, step.producer_epoch, step.coordinator_epoch,
                                   ControlType[step.result], step.transaction_version)
            found["error"] = r.error.name
            if r.error is Errors.NONE:
                found.update(first_offset=r.base_offset, last_offset=r.last_offset)
        elif isinstance(step, steps.HighWatermarkStep):
            p.update_high_watermark(step.offset)
        elif isinstance(step, steps.StartVerificationStep):
            found["error"] = p.maybe_start_transaction_verification(step.producer_id, step.sequence,
                                                                    step.producer_epoch, step.supports_epoch_bump).name
        elif isinstance(step, steps.ExpireProducersStep):
            p.producer_state.producer_id_expiration_ms = \
                self.expiration_ms if step.expiration_ms is None else step.expiration_ms
            p.remove_expired_producers(step.now_ms)
        else:
            isolation = IsolationLevel(step.isolation)
            f = p.read(step.offset, isolation)
            records, _ = visible_records(p.name, f.batches, step.offset, isolation, f.aborted_transactions)
            found.update(error=f.error.name, records=[r.offset for r in records], high_watermark=f.high_watermark,
                         last_stable_offset=f.last_stable_offset,
                         aborted_transactions=[{"producer_id": t.producer_id, "first_offset": t.first_offset,
                                                "last_offset": t.last_offset,
                                                "last_stable_offset": t.last_stable_offset}
                                               for t in f.aborted_transactions or ()])
        found.setdefault("last_stable_offset", p.last_stable_offset)
        fuo = p.first_unstable_offset
        return steps.PartitionObservation(first_unstable_offset=-1 if fuo is None else fuo, state=state_view(p),
                                          **found).as_json()


def session(given: Mapping[str, Any]) -> PartitionSession:
    return PartitionSession(given)
