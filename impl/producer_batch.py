"""A batch of records on its way to one partition, and the producer's sequence bookkeeping of a partition.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/ProducerBatch.java``
(``baseSequence``, ``producerId`` / ``producerEpoch`` set when drained, ``attempts``, ``inRetry``) and
``TxnPartitionEntry.java`` (``nextSequence``, ``lastAckedSequence``, the batches in flight in sequence order).

Assumed: a batch's size is its record count. Left out: compression, byte sizes, ``createdMs`` and the delivery
timeout's clock (an expiry is the caller's step), the entry's ``lastAckedOffset``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from txnspec.impl.client_results import RecordFuture
from txnspec.impl.log import Record, increment_sequence


@dataclass
class ProducerBatch:
    partition: str
    records: list[Record] = field(default_factory=list)
    futures: list[RecordFuture] = field(default_factory=list)
    base_sequence: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    attempts: int = 0
    in_flight: bool = False
    backing_off: bool = False  # answered with a retriable error, retry.backoff.ms not yet elapsed
    in_retry: bool = False  # re-enqueued at least once (ProducerBatch.inRetry)

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, len(self.records) - 1)


@dataclass
class TxnPartitionEntry:
    """``TxnPartitionEntry``: sequence bookkeeping of one partition."""

    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[ProducerBatch] = field(default_factory=list)


__all__ = ["ProducerBatch", "TxnPartitionEntry"]
