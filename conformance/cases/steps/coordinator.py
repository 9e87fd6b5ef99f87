"""Behaviour cases of the transaction coordinator's (``TransactionCoordinator``, ``TransactionStateManager``): a
transactional id's metadata, its requests and events, and what a step wrote to the transaction log.

The rules every component's cases share are in :mod:`txnspec.conformance.cases.steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.values import (
    RESULTS,
    Observation,
    error_name,
    get_bool,
    get_choice,
    get_int,
    get_str,
    get_str_list,
    named_choice,
    state_name,
)


@dataclass(frozen=True)
class TxnMetadataCase:
    """A transactional id's metadata as a case gives it (and as the targets report it back)."""

    state: str
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    partitions: tuple[str, ...]
    txn_start_ms: int
    txn_last_update_ms: int
    transaction_version: int
    pending_state: str | None = None
    has_failed_epoch_fence: bool = False

    INT_FIELDS = ("producer_id", "prev_producer_id", "next_producer_id", "producer_epoch", "last_producer_epoch",
                  "txn_timeout_ms", "txn_start_ms", "txn_last_update_ms", "transaction_version")

    @staticmethod
    def parse(m: Any) -> TxnMetadataCase:
        if not isinstance(m, Mapping):
            raise CaseInputError(f"'metadata' must be an object or null, got {m!r}")
        state = state_name(get_str(m, "state"))
        pending = get_str(m, "pending_state", None, nullable=True)
        values = {name: get_int(m, name) for name in TxnMetadataCase.INT_FIELDS}
        if values["transaction_version"] not in (0, 1, 2):
            raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {values['transaction_version']}")
        flag = m.get("has_failed_epoch_fence", False)
        if not isinstance(flag, bool):
            raise CaseInputError(f"'has_failed_epoch_fence' must be true or false, got {flag!r}")
        return TxnMetadataCase(state=state, partitions=tuple(sorted(get_str_list(m, "partitions"))),
                               pending_state=None if pending is None else state_name(pending),
                               has_failed_epoch_fence=flag, **values)

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "producer_id": self.producer_id, "prev_producer_id": self.prev_producer_id,
                "next_producer_id": self.next_producer_id, "producer_epoch": self.producer_epoch,
                "last_producer_epoch": self.last_producer_epoch, "txn_timeout_ms": self.txn_timeout_ms,
                "partitions": sorted(self.partitions), "txn_start_ms": self.txn_start_ms,
                "txn_last_update_ms": self.txn_last_update_ms, "transaction_version": self.transaction_version,
                "pending_state": self.pending_state, "has_failed_epoch_fence": self.has_failed_epoch_fence}

    def transit_json(self) -> dict[str, Any]:
        """As a record of the transaction log (no in-memory fields)."""
        view = self.as_json()
        for key in ("pending_state", "has_failed_epoch_fence"):
            del view[key]
        return view


@dataclass(frozen=True)
class CoordinatorGiven:
    transactional_id: str
    now_ms: int
    next_producer_id: int
    txn_max_timeout_ms: int
    metadata: TxnMetadataCase | None
    transaction_two_phase_commit_enable: bool = False  # the broker config (KIP-939)

    @staticmethod
    def parse(given: Mapping[str, Any]) -> CoordinatorGiven:
        md = given.get("metadata")
        return CoordinatorGiven(get_str(given, "transactional_id"), get_int(given, "now_ms", minimum=0),
                                get_int(given, "next_producer_id", 0, minimum=0),
                                get_int(given, "txn_max_timeout_ms", 900_000, minimum=1),
                                None if md is None else TxnMetadataCase.parse(md),
                                get_bool(given, "transaction_two_phase_commit_enable", False))


@dataclass(frozen=True)
class InitProducerIdStep:
    transactional_id: str | None
    txn_timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    enable_two_pc: bool = False  # v6 (KIP-939)
    keep_prepared_txn: bool = False


@dataclass(frozen=True)
class AddPartitionsToTxnStep:
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    partitions: tuple[str, ...]
    transaction_version: int = 0


@dataclass(frozen=True)
class AddOffsetsToTxnStep:
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True)
class EndTxnStep:
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    result: str  # "COMMIT" or "ABORT"
    transaction_version: int = 0


@dataclass(frozen=True)
class AbortTimedOutTransactionsStep:
    now_ms: int


@dataclass(frozen=True)
class ExpireTransactionalIdsStep:
    now_ms: int
    expiration_ms: int


@dataclass(frozen=True)
class MarkersWrittenStep:
    now_ms: int | None = None


@dataclass(frozen=True)
class CoordinatorLoadStep:
    now_ms: int | None = None


@dataclass(frozen=True)
class OwnershipStep:
    """The case's transaction-log partition changes hands (``TransactionStateManager``): ``CoordinatorLoading``
    (``loadTransactionsForTxnTopicPartition`` starts, at a new coordinator epoch), ``CoordinatorLoaded`` (its read
    is done: the ids enter the cache unless the load was cancelled) or ``CoordinatorEmigration``
    (``removeTransactionsForTxnTopicPartition``)."""

    event: str


@dataclass(frozen=True)
class LogAppendFailsStep:
    """The next step's (first) transaction-log append fails with ``error``."""

    error: str


CoordinatorStep = (InitProducerIdStep | AddPartitionsToTxnStep | AddOffsetsToTxnStep | EndTxnStep
                   | AbortTimedOutTransactionsStep | ExpireTransactionalIdsStep | MarkersWrittenStep
                   | CoordinatorLoadStep | OwnershipStep | LogAppendFailsStep)
COORDINATOR_REQUESTS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn")
OWNERSHIP_EVENTS = ("CoordinatorLoading", "CoordinatorLoaded", "CoordinatorEmigration")
COORDINATOR_EVENTS = ("AbortTimedOutTransactions", "ExpireTransactionalIds", "MarkersWritten", "CoordinatorLoad",
                      "LogAppendFails", *OWNERSHIP_EVENTS)


def parse_coordinator_step(when: Mapping[str, Any]) -> CoordinatorStep:
    if "request" in when:
        name = named_choice(when, "request", COORDINATOR_REQUESTS, "coordinator request")
        tid = get_str(when, "transactional_id", nullable=True)
        if name == "InitProducerId":
            return InitProducerIdStep(tid, get_int(when, "txn_timeout_ms"), get_int(when, "producer_id", -1),
                                      get_int(when, "producer_epoch", -1), get_bool(when, "enable_two_pc", False),
                                      get_bool(when, "keep_prepared_txn", False))
        pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
        if name == "AddPartitionsToTxn":
            return AddPartitionsToTxnStep(tid, pid, epoch, tuple(get_str_list(when, "partitions")),
                                          get_int(when, "transaction_version", 0))
        if name == "AddOffsetsToTxn":
            return AddOffsetsToTxnStep(tid, pid, epoch, get_str(when, "group_id"))
        return EndTxnStep(tid, pid, epoch, get_choice(when, "result", RESULTS), get_int(when, "transaction_version", 0))
    if "event" in when:
        name = named_choice(when, "event", COORDINATOR_EVENTS, "coordinator event")
        if name == "AbortTimedOutTransactions":
            return AbortTimedOutTransactionsStep(get_int(when, "now_ms", minimum=0))
        if name == "ExpireTransactionalIds":
            return ExpireTransactionalIdsStep(get_int(when, "now_ms", minimum=0),
                                              get_int(when, "expiration_ms", minimum=0))
        if name == "LogAppendFails":
            return LogAppendFailsStep(error_name(when))
        if name in OWNERSHIP_EVENTS:
            return OwnershipStep(name)
        now = get_int(when, "now_ms", minimum=0) if "now_ms" in when else None
        return MarkersWrittenStep(now) if name == "MarkersWritten" else CoordinatorLoadStep(now)
    raise CaseInputError(f"a coordinator step needs 'request' or 'event': {dict(when)!r}")


TOMBSTONE = "tombstone"


@dataclass(frozen=True)
class CoordinatorObservation(Observation):
    """``log_append``: the first record the step wrote to the transaction log (:data:`TOMBSTONE` for a
    tombstone, None when nothing was written); ``metadata``: the id's metadata after the step."""

    log_append: TxnMetadataCase | str | None
    metadata: TxnMetadataCase | None
    error: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.error is not None:
            out["error"] = self.error
        if self.producer_id is not None:
            out.update(producer_id=self.producer_id, producer_epoch=self.producer_epoch)
        record = self.log_append
        out["log_append"] = {"tombstone": True} if record == TOMBSTONE else \
            None if record is None else record.transit_json()  # type: ignore[union-attr]
        out["state"] = {"metadata": None if self.metadata is None else self.metadata.as_json()}
        return out


