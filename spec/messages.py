"""Requests and responses of the exactly-once protocol, one frozen class per Kafka RPC.

System: the messages that producers, consumers, the transaction coordinator, partition leaders and
the group coordinator exchange (KIP-98, KIP-360, KIP-890), named exactly as the Kafka RPCs
(``org.apache.kafka.common.requests.*Request``).

Assumptions: a Produce request carries one batch for one partition (Kafka batches many partitions
per request; each partition is validated independently, so one is enough). Payloads are left out: a
batch is its producer id, epoch, base sequence, record count and transactional flag.

Not modelled: versions of each RPC other than what separates transaction version 0/1 from 2
(``transaction_version`` on the request), throttling, tagged fields.
"""

from __future__ import annotations

import enum

from txnspec.spec.errors import Errors
from txnspec.spec.values import value


class TransactionResult(enum.StrEnum):
    """``org.apache.kafka.common.requests.TransactionResult``."""

    COMMIT = "COMMIT"
    ABORT = "ABORT"


class IsolationLevel(enum.StrEnum):
    READ_UNCOMMITTED = "READ_UNCOMMITTED"
    READ_COMMITTED = "READ_COMMITTED"


# --- requests ------------------------------------------------------------------------------------

@value
class InitProducerId:
    """``InitProducerIdRequest``; ``transactional_id`` None for an idempotent-only producer.

    ``producer_id``/``producer_epoch`` are -1/-1 unless the client asks for an epoch bump (KIP-360);
    ``enable_two_pc``/``keep_prepared_txn`` are version 6's ``Enable2Pc``/``KeepPreparedTxn`` (KIP-939).
    """

    transactional_id: str | None
    txn_timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    enable_two_pc: bool = False
    keep_prepared_txn: bool = False


@value
class AddPartitionsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[str]
    transaction_version: int = 0


@value
class AddOffsetsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@value
class TxnOffsetCommit:
    """``TxnOffsetCommitRequest`` to the group coordinator; offsets are ``((partition, offset), ...)``. The member
    fields (v3+, KIP-447) name the consumer whose position is committed; the defaults are a producer outside
    group management."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[str, int], ...]
    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None


@value
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    transaction_version: int = 0


@value
class Produce:
    """One record batch for one partition."""

    partition: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    transactional: bool
    transactional_id: str | None = None


@value
class WriteTxnMarkers:
    """One ``WritableTxnMarker`` for one partition, from the coordinator to that partition's leader."""

    partition: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: TransactionResult
    transaction_version: int = 0


@value
class Fetch:
    partition: str
    offset: int
    isolation: IsolationLevel


class CoordinatorType(enum.StrEnum):
    """``FindCoordinatorRequest.CoordinatorType``."""

    GROUP = "GROUP"
    TRANSACTION = "TRANSACTION"


@value
class FindCoordinator:
    """``FindCoordinatorRequest`` for one key: the transactional id (TRANSACTION) or the group id (GROUP).

    Its response is an :class:`ErrorResponse` (the coordinator's node is not modelled).
    """

    key_type: CoordinatorType
    key: str


# --- responses -----------------------------------------------------------------------------------

@value
class InitProducerIdResponse:
    """Version 6 adds the (producer id, epoch) of the transaction kept by ``KeepPreparedTxn`` (KIP-939), -1/-1
    when none was kept."""

    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1
    ongoing_txn_producer_id: int = -1
    ongoing_txn_producer_epoch: int = -1


@value
class ErrorResponse:
    """A response that carries only an error (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit)."""

    error: Errors


@value
class EndTxnResponse:
    """EndTxn response; from TV2 on it carries the producer id and epoch to use next."""

    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1


@value
class ProduceResponse:
    """``error`` NONE with ``duplicate`` True: a retry of a batch already in the log, original offsets."""

    error: Errors
    base_offset: int = -1
    last_offset: int = -1
    duplicate: bool = False


@value
class WriteTxnMarkersResponse:
    error: Errors


@value
class AbortedTransaction:
    producer_id: int
    first_offset: int


@value
class FetchResponse:
    """``records``: offsets of the data records the consumer application sees after client filtering."""

    error: Errors
    high_watermark: int = -1
    last_stable_offset: int = -1
    records: tuple[int, ...] = ()
    aborted_transactions: tuple[AbortedTransaction, ...] = ()
