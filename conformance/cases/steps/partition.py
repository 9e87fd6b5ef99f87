"""Behaviour cases of a partition leader's (``UnifiedLog``, ``ProducerStateManager``): batches, markers, verification,
producer expiry and fetches.

The rules every component's cases share are in :mod:`txnspec.conformance.cases.steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.values import (
    ISOLATIONS,
    RESULTS,
    Observation,
    error_name,
    get_bool,
    get_choice,
    get_int,
    named_choice,
)


@dataclass(frozen=True)
class BatchCase:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int

    def as_json(self) -> dict[str, int]:
        return {"first_seq": self.first_seq, "last_seq": self.last_seq, "first_offset": self.first_offset,
                "last_offset": self.last_offset}


@dataclass(frozen=True)
class ProducerEntryCase:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    batches: tuple[BatchCase, ...]
    current_txn_first_offset: int  # -1: no open transaction

    def as_json(self) -> dict[str, Any]:
        return {"producer_epoch": self.producer_epoch, "coordinator_epoch": self.coordinator_epoch,
                "batches": [b.as_json() for b in self.batches],
                "current_txn_first_offset": self.current_txn_first_offset}


@dataclass(frozen=True)
class VerificationEntryCase:
    """A producer's ``VerificationStateEntry`` as a target reports it (a txnspec extension; never given)."""

    producer_id: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool

    def as_json(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "lowest_sequence": self.lowest_sequence, "epoch": self.epoch,
                "supports_epoch_bump": self.supports_epoch_bump}


@dataclass(frozen=True)
class PartitionGiven:
    log_start_offset: int
    log_end_offset: int
    high_watermark: int | None  # None: follows the log end offset
    producers: tuple[ProducerEntryCase, ...]  # by producer id

    @staticmethod
    def parse(given: Mapping[str, Any]) -> PartitionGiven:
        producers_json = given.get("producers", {})
        if not isinstance(producers_json, Mapping):
            raise CaseInputError("'producers' must be an object keyed by producer id")
        start = get_int(given, "log_start_offset", 0, minimum=0)
        end = get_int(given, "log_end_offset", start, minimum=start)
        hw = given.get("high_watermark")
        if hw is not None and (isinstance(hw, bool) or not isinstance(hw, int) or hw < 0):
            raise CaseInputError(f"'high_watermark' must be null or a non-negative integer, got {hw!r}")
        return PartitionGiven(start, end, hw, tuple(sorted((_entry(k, e) for k, e in producers_json.items()),
                                                           key=lambda e: e.producer_id)))


def _entry(key: str, e: Any) -> ProducerEntryCase:
    try:
        pid = int(key)
    except ValueError:
        raise CaseInputError(f"producer id keys must be integers, got {key!r}") from None
    if not isinstance(e, Mapping):
        raise CaseInputError(f"producer {key} must be an object")
    batches = e.get("batches", [])
    if not isinstance(batches, list) or not all(isinstance(b, Mapping) for b in batches):
        raise CaseInputError(f"producer {key}: 'batches' must be a list of objects")
    return ProducerEntryCase(
        pid, get_int(e, "producer_epoch", -1, minimum=-1), get_int(e, "coordinator_epoch", -1, minimum=-1),
        tuple(BatchCase(get_int(b, "first_seq", minimum=0), get_int(b, "last_seq", minimum=0),
                        get_int(b, "first_offset", minimum=0), get_int(b, "last_offset", minimum=0)) for b in batches),
        get_int(e, "current_txn_first_offset", -1, minimum=-1))


@dataclass(frozen=True)
class Verification:
    """A data append's ``verification`` (a txnspec extension, FORMAT.md): the transaction coordinator's answer to
    the leader's verification of the batch, and the Produce version the client sent."""

    coordinator_error: str  # Kafka's error name; NONE: verified
    produce_version: int = 12


@dataclass(frozen=True)
class AppendDataStep:
    producer_id: int
    producer_epoch: int
    first_seq: int
    count: int
    transactional: bool
    verification: Verification | None = None


@dataclass(frozen=True)
class AppendMarkerStep:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: str  # "COMMIT" or "ABORT"
    transaction_version: int = 0


@dataclass(frozen=True)
class HighWatermarkStep:
    offset: int


@dataclass(frozen=True)
class StartVerificationStep:
    """The leader starts verifying a producer's transactional batch (``maybeStartTransactionVerification``)."""

    producer_id: int
    producer_epoch: int
    sequence: int
    supports_epoch_bump: bool


@dataclass(frozen=True)
class ExpireProducersStep:
    now_ms: int
    expiration_ms: int | None  # None: the partition's configured producer-id expiration


@dataclass(frozen=True)
class FetchStep:
    offset: int
    isolation: str  # "READ_COMMITTED" or "READ_UNCOMMITTED"


PartitionStep = (AppendDataStep | AppendMarkerStep | HighWatermarkStep | StartVerificationStep | ExpireProducersStep
                 | FetchStep)


def _verification(when: Mapping[str, Any]) -> Verification | None:
    verification = when.get("verification")
    if verification is None:
        return None
    if not isinstance(verification, Mapping):
        raise CaseInputError("'verification' must be an object")
    return Verification(error_name({"error": verification.get("coordinator_error")}),
                        get_int(verification, "produce_version", 12, minimum=3))


def parse_partition_step(when: Mapping[str, Any]) -> PartitionStep:
    if "append" in when:
        kind = get_choice(when, "append", ("data", "marker"))
        pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
        if kind == "data":
            return AppendDataStep(pid, epoch, get_int(when, "first_seq"), get_int(when, "count", minimum=1),
                                  get_bool(when, "transactional"), _verification(when))
        return AppendMarkerStep(pid, epoch, get_int(when, "coordinator_epoch"), get_choice(when, "result", RESULTS),
                                get_int(when, "transaction_version", 0))
    if "event" in when:
        event = named_choice(when, "event", ("HighWatermark", "ExpireProducers", "StartVerification"),
                             "partition event")
        if event == "HighWatermark":
            return HighWatermarkStep(get_int(when, "offset", minimum=0))
        if event == "StartVerification":
            return StartVerificationStep(get_int(when, "producer_id", minimum=0),
                                         get_int(when, "producer_epoch", minimum=0),
                                         get_int(when, "sequence", minimum=0), get_bool(when, "supports_epoch_bump"))
        expiration = get_int(when, "expiration_ms", minimum=0) if "expiration_ms" in when else None
        return ExpireProducersStep(get_int(when, "now_ms", minimum=0), expiration)
    if "read" in when:
        named_choice(when, "read", ("fetch",), "partition read")
        return FetchStep(get_int(when, "offset", minimum=0), get_choice(when, "isolation", ISOLATIONS))
    raise CaseInputError(f"a partition step needs 'append', 'event' or 'read': {dict(when)!r}")


@dataclass(frozen=True)
class PartitionObservation(Observation):
    """What a partition step shows; the fields of an append or a fetch only after one."""

    last_stable_offset: int
    first_unstable_offset: int  # -1: none
    state: dict[str, Any]  # log start / end offsets, high watermark (None: follows the log end), producers
    error: str | None = None
    duplicate: bool | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    records: list[int] | None = None
    high_watermark: int | None = None
    aborted_transactions: list[dict[str, int]] | None = None


def partition_state_json(log_start_offset: int, log_end_offset: int, high_watermark: int | None,
                         producers: list[ProducerEntryCase],
                         verifying: list[VerificationEntryCase] | None = None) -> dict[str, Any]:
    return {"log_start_offset": log_start_offset, "log_end_offset": log_end_offset, "high_watermark": high_watermark,
            "producers": {str(e.producer_id): e.as_json() for e in sorted(producers, key=lambda e: e.producer_id)},
            "verification_states": [v.as_json() for v in sorted(verifying or (), key=lambda v: v.producer_id)]}


