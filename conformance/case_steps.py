"""Behaviour cases as typed values: the one parser of a case's ``given`` and ``when`` (``txn-case/1``,
``conformance/data/FORMAT.md``), and the one shape of what a target observes.

Both case targets (the spec's, :mod:`txnspec.conformance.case_targets.spec_target`, and the implementation's,
:mod:`txnspec.conformance.case_targets.impl_target`) consume these values: a field is read, checked and
defaulted here once, so the two targets cannot read a case differently. A malformed value is a
:class:`~txnspec.conformance.case_format.CaseInputError` naming the field.

Observations: each target reports a :class:`CoordinatorObservation`, :class:`PartitionObservation`,
:class:`ClientObservation` or :class:`GroupObservation`; :meth:`as_json` gives the object a case's ``then`` is
compared with (a field the target does not report, None, is left out, so ``then`` cannot check it).

Why one module of this size: it is the format itself, one section per component in FORMAT.md's order
(coordinator, partition, client, group), each a few small frozen dataclasses and one ``parse_*`` function; the
sections share the field readers and the observation base. A split per component is the next step if a fifth
component comes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from txnspec.conformance.case_format import CaseInputError
from txnspec.conformance.case_targets.case_values import get_bool, get_choice, get_int, get_str, get_str_list
from txnspec.spec.errors import Errors
from txnspec.spec.txn_state import TxnState

RESULTS = ("COMMIT", "ABORT")
ISOLATIONS = ("READ_COMMITTED", "READ_UNCOMMITTED")


def _error(when: Mapping[str, Any]) -> str:
    try:
        return Errors.named(get_str(when, "error")).value
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None


def _state_name(value: str) -> str:
    try:
        return TxnState.named(value).value
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None


def _named(when: Mapping[str, Any], key: str, known: tuple[str, ...], what: str) -> str:
    value = when.get(key)
    if value not in known:
        raise CaseInputError(f"unknown {what} {value!r} (known: {', '.join(known)})")
    return str(value)


class _Observation:
    def as_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)  # type: ignore[arg-type]
                if getattr(self, f.name) is not None}


# --- coordinator -------------------------------------------------------------------------------------------

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
        state = _state_name(get_str(m, "state"))
        pending = get_str(m, "pending_state", None, nullable=True)
        values = {name: get_int(m, name) for name in TxnMetadataCase.INT_FIELDS}
        if values["transaction_version"] not in (0, 1, 2):
            raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {values['transaction_version']}")
        flag = m.get("has_failed_epoch_fence", False)
        if not isinstance(flag, bool):
            raise CaseInputError(f"'has_failed_epoch_fence' must be true or false, got {flag!r}")
        return TxnMetadataCase(state=state, partitions=tuple(sorted(get_str_list(m, "partitions"))),
                               pending_state=None if pending is None else _state_name(pending),
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

    @staticmethod
    def parse(given: Mapping[str, Any]) -> CoordinatorGiven:
        md = given.get("metadata")
        return CoordinatorGiven(get_str(given, "transactional_id"), get_int(given, "now_ms", minimum=0),
                                get_int(given, "next_producer_id", 0, minimum=0),
                                get_int(given, "txn_max_timeout_ms", 900_000, minimum=1),
                                None if md is None else TxnMetadataCase.parse(md))


@dataclass(frozen=True)
class InitProducerIdStep:
    transactional_id: str | None
    txn_timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1


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
class LogAppendFailsStep:
    """The next step's (first) transaction-log append fails with ``error``."""

    error: str


CoordinatorStep = (InitProducerIdStep | AddPartitionsToTxnStep | AddOffsetsToTxnStep | EndTxnStep
                   | AbortTimedOutTransactionsStep | ExpireTransactionalIdsStep | MarkersWrittenStep
                   | CoordinatorLoadStep | LogAppendFailsStep)
COORDINATOR_REQUESTS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn")
COORDINATOR_EVENTS = ("AbortTimedOutTransactions", "ExpireTransactionalIds", "MarkersWritten", "CoordinatorLoad",
                      "LogAppendFails")


def parse_coordinator_step(when: Mapping[str, Any]) -> CoordinatorStep:
    if "request" in when:
        name = _named(when, "request", COORDINATOR_REQUESTS, "coordinator request")
        tid = get_str(when, "transactional_id", nullable=True)
        if name == "InitProducerId":
            return InitProducerIdStep(tid, get_int(when, "txn_timeout_ms"), get_int(when, "producer_id", -1),
                                      get_int(when, "producer_epoch", -1))
        pid, epoch = get_int(when, "producer_id"), get_int(when, "producer_epoch")
        if name == "AddPartitionsToTxn":
            return AddPartitionsToTxnStep(tid, pid, epoch, tuple(get_str_list(when, "partitions")),
                                          get_int(when, "transaction_version", 0))
        if name == "AddOffsetsToTxn":
            return AddOffsetsToTxnStep(tid, pid, epoch, get_str(when, "group_id"))
        return EndTxnStep(tid, pid, epoch, get_choice(when, "result", RESULTS), get_int(when, "transaction_version", 0))
    if "event" in when:
        name = _named(when, "event", COORDINATOR_EVENTS, "coordinator event")
        if name == "AbortTimedOutTransactions":
            return AbortTimedOutTransactionsStep(get_int(when, "now_ms", minimum=0))
        if name == "ExpireTransactionalIds":
            return ExpireTransactionalIdsStep(get_int(when, "now_ms", minimum=0),
                                              get_int(when, "expiration_ms", minimum=0))
        if name == "LogAppendFails":
            return LogAppendFailsStep(_error(when))
        now = get_int(when, "now_ms", minimum=0) if "now_ms" in when else None
        return MarkersWrittenStep(now) if name == "MarkersWritten" else CoordinatorLoadStep(now)
    raise CaseInputError(f"a coordinator step needs 'request' or 'event': {dict(when)!r}")


TOMBSTONE = "tombstone"


@dataclass(frozen=True)
class CoordinatorObservation(_Observation):
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


# --- partition ---------------------------------------------------------------------------------------------

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
    return Verification(_error({"error": verification.get("coordinator_error")}),
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
        event = _named(when, "event", ("HighWatermark", "ExpireProducers", "StartVerification"), "partition event")
        if event == "HighWatermark":
            return HighWatermarkStep(get_int(when, "offset", minimum=0))
        if event == "StartVerification":
            return StartVerificationStep(get_int(when, "producer_id", minimum=0),
                                         get_int(when, "producer_epoch", minimum=0),
                                         get_int(when, "sequence", minimum=0), get_bool(when, "supports_epoch_bump"))
        expiration = get_int(when, "expiration_ms", minimum=0) if "expiration_ms" in when else None
        return ExpireProducersStep(get_int(when, "now_ms", minimum=0), expiration)
    if "read" in when:
        _named(when, "read", ("fetch",), "partition read")
        return FetchStep(get_int(when, "offset", minimum=0), get_choice(when, "isolation", ISOLATIONS))
    raise CaseInputError(f"a partition step needs 'append', 'event' or 'read': {dict(when)!r}")


@dataclass(frozen=True)
class PartitionObservation(_Observation):
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
                         producers: list[ProducerEntryCase]) -> dict[str, Any]:
    return {"log_start_offset": log_start_offset, "log_end_offset": log_end_offset, "high_watermark": high_watermark,
            "producers": {str(e.producer_id): e.as_json() for e in sorted(producers, key=lambda e: e.producer_id)}}


# --- client ------------------------------------------------------------------------------------------------

CLIENT_STATES = ("UNINITIALIZED", "INITIALIZING", "READY", "IN_TRANSACTION", "PREPARED_TRANSACTION",
                 "COMMITTING_TRANSACTION", "ABORTING_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR")
CALLS = ("initTransactions", "beginTransaction", "commitTransaction", "abortTransaction", "send",
         "sendOffsetsToTransaction")
RESPONSES = ("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
             "EndTxn", "Produce")


@dataclass(frozen=True)
class ClientGiven:
    transactional_id: str
    state: str  # TransactionManager.State
    producer_id: int
    producer_epoch: int
    transaction_version: int

    @staticmethod
    def parse(given: Mapping[str, Any]) -> ClientGiven:
        state = given.get("state")
        if state not in CLIENT_STATES:
            raise CaseInputError(f"unknown client state {state!r}")
        tv = get_int(given, "transaction_version", 0)
        if tv not in (0, 1, 2):
            raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {tv}")
        return ClientGiven(get_str(given, "transactional_id"), str(state), get_int(given, "producer_id", -1),
                           get_int(given, "producer_epoch", -1), tv)


@dataclass(frozen=True)
class CallStep:
    """The application calls ``call`` (``partition`` for ``send``; ``group_id`` and ``offsets`` for
    ``sendOffsetsToTransaction``)."""

    call: str
    partition: str | None = None
    group_id: str | None = None
    offsets: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ResponseStep:
    """The answer to the client's request ``response`` in flight (``key_type``: of a FindCoordinator; None:
    whatever lookup is in flight)."""

    response: str
    error: str
    producer_id: int = -1
    producer_epoch: int = -1
    key_type: str | None = None


ClientStep = CallStep | ResponseStep


def parse_client_step(when: Mapping[str, Any]) -> ClientStep:
    if "call" in when:
        call = _named(when, "call", CALLS, "client call")
        if call == "send":
            return CallStep(call, partition=get_str(when, "partition"))
        if call == "sendOffsetsToTransaction":
            offsets = when.get("offsets", {})
            if not isinstance(offsets, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in offsets.items()):
                raise CaseInputError("'offsets' must be an object of partition -> offset")
            return CallStep(call, group_id=get_str(when, "group_id"), offsets=tuple(offsets.items()))
        return CallStep(call)
    if "response" in when:
        name = _named(when, "response", RESPONSES, "response to")
        key_type = get_choice(when, "key_type", ("TRANSACTION", "GROUP")) if "key_type" in when else None
        return ResponseStep(name, _error(when), get_int(when, "producer_id", -1), get_int(when, "producer_epoch", -1),
                            key_type)
    raise CaseInputError(f"a client step needs 'call' or 'response': {dict(when)!r}")


@dataclass(frozen=True)
class ClientObservation(_Observation):
    state: str
    throws: str | None  # the exception's simple name, or None
    sends: str | None  # the first request dispatched during the step
    producer_id: int
    producer_epoch: int

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "throws": self.throws, "fatal": self.state == "FATAL_ERROR",
                "sends": self.sends, "producer_id": self.producer_id, "producer_epoch": self.producer_epoch}


# --- group -------------------------------------------------------------------------------------------------

def _offsets(obj: Mapping[str, Any], key: str) -> tuple[tuple[str, int], ...]:
    offsets = obj.get(key)
    if not isinstance(offsets, Mapping) or not all(isinstance(k, str) and isinstance(v, int)
                                                   and not isinstance(v, bool) and v >= 0 for k, v in offsets.items()):
        raise CaseInputError(f"{key!r} must be an object of partition -> non-negative offset, got {offsets!r}")
    return tuple(offsets.items())


def _members(obj: Mapping[str, Any], key: str) -> tuple[tuple[str, str | None], ...]:
    members = obj.get(key, {})
    if not isinstance(members, Mapping) or not all(
            isinstance(k, str) and k and (v is None or isinstance(v, str)) for k, v in members.items()):
        raise CaseInputError(f"{key!r} must be an object of member id -> group instance id (or null), got {members!r}")
    instances = [v for v in members.values() if v is not None]
    if len(set(instances)) != len(instances):
        raise CaseInputError(f"{key!r}: a group instance id belongs to one member only")
    return tuple(sorted(members.items()))


@dataclass(frozen=True)
class GroupMembersCase:
    """A classic group as a case gives it (a txnspec extension): Stable at ``generation_id`` with ``members``
    (member id, group instance id or None), Empty when it has none."""

    group_id: str
    generation_id: int
    members: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class GroupGiven:
    offsets: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # group -> committed offsets, in given order
    groups: tuple[GroupMembersCase, ...]

    @staticmethod
    def parse(given: Mapping[str, Any]) -> GroupGiven:
        offsets = given.get("offsets", {})
        if not isinstance(offsets, Mapping):
            raise CaseInputError("'offsets' must be an object of group id -> {partition: offset}")
        groups = given.get("groups", {})
        if not isinstance(groups, Mapping) or not all(isinstance(g, Mapping) for g in groups.values()):
            raise CaseInputError("'groups' must be an object of group id -> {generation_id, members}")
        return GroupGiven(tuple((g, _offsets(offsets, g)) for g in offsets),
                          tuple(GroupMembersCase(g, get_int(v, "generation_id", minimum=0), _members(v, "members"))
                                for g, v in sorted(groups.items())))


@dataclass(frozen=True)
class OffsetCommitStep:
    group_id: str
    offsets: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TxnOffsetCommitStep:
    """A ``TxnOffsetCommit`` as it reaches the group coordinator; the member fields default to a producer
    outside group management (the generation fields are a txnspec extension, KIP-447)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[str, int], ...]
    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMarkerStep:
    producer_id: int
    producer_epoch: int
    result: str  # "COMMIT" or "ABORT"


@dataclass(frozen=True)
class RebalanceStep:
    """A rebalance of the group completed (a txnspec extension): the next generation with exactly ``members``."""

    group_id: str
    members: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class OffsetFetchStep:
    group_id: str
    partitions: tuple[str, ...]
    require_stable: bool


GroupStep = OffsetCommitStep | TxnOffsetCommitStep | GroupMarkerStep | RebalanceStep | OffsetFetchStep


def parse_group_step(when: Mapping[str, Any]) -> GroupStep:
    if "request" in when:
        request = _named(when, "request", ("OffsetCommit", "TxnOffsetCommit"), "group request")
        group_id = get_str(when, "group_id")
        if not group_id:
            raise CaseInputError("'group_id' must not be empty")
        if request == "OffsetCommit":
            return OffsetCommitStep(group_id, _offsets(when, "offsets"))
        return TxnOffsetCommitStep(group_id, get_int(when, "producer_id", minimum=0),
                                   get_int(when, "producer_epoch", minimum=0), _offsets(when, "offsets"),
                                   get_str(when, "member_id", ""), get_int(when, "generation_id", -1, minimum=-1),
                                   get_str(when, "group_instance_id", None, nullable=True))
    if "append" in when:
        get_choice(when, "append", ("marker",))
        return GroupMarkerStep(get_int(when, "producer_id", minimum=0), get_int(when, "producer_epoch", minimum=0),
                               get_choice(when, "result", RESULTS))
    if "event" in when:
        _named(when, "event", ("Rebalance",), "group event")
        return RebalanceStep(get_str(when, "group_id"), _members(when, "members"))
    if "read" in when:
        _named(when, "read", ("OffsetFetch",), "group read")
        partitions = get_str_list(when, "partitions")
        return OffsetFetchStep(get_str(when, "group_id"), tuple(partitions), get_bool(when, "require_stable", False))
    raise CaseInputError(f"a group step needs 'request', 'append', 'event' or 'read': {dict(when)!r}")


@dataclass(frozen=True)
class GroupObservation(_Observation):
    """What a group step shows: the request's error, or an OffsetFetch's partitions."""

    error: str | None = None
    partitions: dict[str, dict[str, Any]] | None = None  # partition -> {"offset", "error"}


def fetched_partition(error: str, offset: int | None) -> dict[str, Any]:
    """One partition of an OffsetFetch answer (``offset`` None: nothing committed, Kafka's INVALID_OFFSET)."""
    return {"offset": -1 if offset is None or error != "NONE" else offset, "error": error}
