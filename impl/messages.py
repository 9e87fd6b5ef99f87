"""Requests and responses between clients and brokers, one frozen class per Kafka RPC, named as Kafka names them.

Only the fields the exactly-once protocol uses are kept (``InitProducerIdRequestData``,
``AddPartitionsToTxnRequestData`` v3 and below, ``AddOffsetsToTxnRequestData``, ``EndTxnRequestData``,
``TxnOffsetCommitRequestData``, ``FindCoordinatorRequestData``, ``ProduceRequestData`` with one batch,
``FetchRequestData`` with one partition). ``correlation_id`` pairs a response with its request, as in
Kafka's request header.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from txnspec.impl.errors import Errors
from txnspec.impl.log import ControlType, Record
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.partition import IsolationLevel


class CoordinatorType(enum.Enum):
    GROUP = "GROUP"
    TRANSACTION = "TRANSACTION"


@dataclass(frozen=True, slots=True)
class FindCoordinator:
    key_type: CoordinatorType
    key: str
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class InitProducerId:
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    correlation_id: int = 0
    enable_two_pc: bool = False  # v6 (KIP-939)
    keep_prepared_txn: bool = False


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[str, ...]
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[str, int], ...]
    correlation_id: int = 0
    member: MemberIdentity | None = None  # v3+ (KIP-447): checked against the group's generation when given
    api_version: int | None = None  # the TxnOffsetCommit version on the wire; None: the broker's transaction version


@dataclass(frozen=True, slots=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: ControlType
    transaction_version: int = 0
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class Produce:
    partition: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[Record, ...]
    is_transactional: bool
    transactional_id: str | None = None
    transaction_version: int = 0
    correlation_id: int = 0
    api_version: int | None = None  # the Produce version on the wire; None: the newest of its transaction version


@dataclass(frozen=True, slots=True)
class Fetch:
    partition: str
    offset: int
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    max_batches: int | None = None
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    group_id: str
    partitions: tuple[str, ...]
    require_stable: bool = True
    correlation_id: int = 0


TransactionalRequest = FindCoordinator | InitProducerId | AddPartitionsToTxn | AddOffsetsToTxn | TxnOffsetCommit \
    | EndTxn
Request = TransactionalRequest | Produce | Fetch | OffsetFetch


@dataclass(frozen=True, slots=True)
class Response:
    """A response: ``error`` plus what the request kind carries (pid/epoch, offsets, per-partition errors)."""

    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1
    base_offset: int = -1
    partition_errors: tuple[tuple[str, Errors], ...] = ()
    offsets: tuple[tuple[str, int], ...] = ()
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)
    correlation_id: int = 0
    # InitProducerId v6 (KIP-939): the transaction kept by keepPreparedTxn, -1/-1 when none
    ongoing_txn_producer_id: int = -1
    ongoing_txn_producer_epoch: int = -1


def request_name(request: object) -> str:
    """The Kafka RPC name of a request value (its class name)."""
    return type(request).__name__


__all__ = ["AddOffsetsToTxn", "AddPartitionsToTxn", "CoordinatorType", "EndTxn", "Fetch", "FindCoordinator",
           "InitProducerId", "OffsetFetch", "Produce", "Request", "Response", "TransactionalRequest",
           "TxnOffsetCommit", "request_name"]
