"""Partition cases on the spec: ``given`` becomes a :class:`PartitionState`, each step an append, an event
or a fetch.

The given producer entries are taken as they are (with their batches' offsets); an entry with an open
transaction also opens it in the partition's ongoing transactions. Appends are at time 0 (the format has
no timestamps; CONVENTIONS.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.steps import partition as steps
from txnspec.spec import partition as part
from txnspec.spec import verification as spec_verification
from txnspec.spec.errors import Errors
from txnspec.spec.messages import IsolationLevel, TransactionResult


def _entry(e: steps.ProducerEntryCase) -> tuple[int, part.ProducerStateEntry]:
    metadata = tuple(part.BatchMetadata(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches)
    return e.producer_id, part.ProducerStateEntry(e.producer_epoch, e.coordinator_epoch, metadata,
                                                  e.current_txn_first_offset, 0)


def state_view(state: part.PartitionState) -> dict[str, Any]:
    producers = [steps.ProducerEntryCase(
        pid, e.producer_epoch, e.coordinator_epoch,
        tuple(steps.BatchCase(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches),
        e.current_txn_first_offset) for pid, e in state.producers]
    verifying = [steps.VerificationEntryCase(pid, v.lowest_sequence, v.epoch, v.supports_epoch_bump)
                 for pid, v in state.verifying]
    return steps.partition_state_json(state.log_start_offset, state.log_end_offset, state.high_watermark, producers,
                                      verifying)


def _verification_refusal(verification: steps.Verification | None) -> Errors | None:
    """The error of a data append whose verification the coordinator did not pass (the leader's mapping)."""
    if verification is None or verification.coordinator_error == "NONE":
        return None
    version = verification.produce_version
    return spec_verification.verification_error(Errors(verification.coordinator_error),
                                                version >= spec_verification.PRODUCE_VERSION_GENERIC_ERROR,
                                                version >= spec_verification.PRODUCE_VERSION_ADD_PARTITION)


class PartitionSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        g = steps.PartitionGiven.parse(given)
        producers = tuple(sorted(_entry(e) for e in g.producers))
        ongoing = tuple(sorted((e.current_txn_first_offset, pid) for pid, e in producers
                               if e.current_txn_first_offset != -1))
        self.state = part.PartitionState(log_start_offset=g.log_start_offset, log_end_offset=g.log_end_offset,
                                         high_watermark=g.high_watermark, producers=producers, ongoing=ongoing)

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_partition_step(when)
        found: dict[str, Any] = {}
        refused = _verification_refusal(step.verification) if isinstance(step, steps.AppendDataStep) else None
        if refused is not None:
            found.update(error=refused.value)
        elif isinstance(step, steps.AppendDataStep):
            self.state, reply = part.append_data(self.state, step.producer_id, step.producer_epoch, step.first_seq,
                                                 step.count, step.transactional)
            found.update(error=reply.error.value)
            if reply.error is Errors.NONE:
                found.update(duplicate=reply.duplicate, first_offset=reply.base_offset, last_offset=reply.last_offset)
        elif isinstance(step, steps.AppendMarkerStep):
            self.state, marker_reply = part.append_end_txn_marker(
                self.state, step.producer_id, step.producer_epoch, step.coordinator_epoch,
                TransactionResult(step.result), step.transaction_version)
            found.update(error=marker_reply.error.value)
        elif isinstance(step, steps.HighWatermarkStep):
            self.state = part.update_high_watermark(self.state, step.offset)
        elif isinstance(step, steps.StartVerificationStep):
            self.state, started = part.start_verification(self.state, step.producer_id, step.sequence,
                                                          step.producer_epoch, step.supports_epoch_bump)
            found.update(error=started.value)
        elif isinstance(step, steps.ExpireProducersStep):
            expiration = part.PRODUCER_ID_EXPIRATION_MS if step.expiration_ms is None else step.expiration_ms
            self.state = part.expire_producers(self.state, step.now_ms, expiration)
        else:
            response = part.fetch(self.state, step.offset, IsolationLevel(step.isolation))
            found.update(error=response.error.value, records=list(response.records),
                         last_stable_offset=response.last_stable_offset,
                         aborted_transactions=[{"producer_id": a.producer_id, "first_offset": a.first_offset}
                                               for a in response.aborted_transactions])
        found.setdefault("last_stable_offset", self.state.last_stable_offset)
        return steps.PartitionObservation(first_unstable_offset=self.state.first_unstable_offset,
                                          state=state_view(self.state), **found).as_json()


def session(given: Mapping[str, Any]) -> PartitionSession:
    return PartitionSession(given)
