"""A partition's log: an append-only sequence of record batches, data and control.

Follows Kafka's ``RecordBatch`` (v2 format: ``DefaultRecordBatch``) and ``EndTransactionMarker``
(``clients/.../record/``) and the offset bookkeeping of ``UnifiedLog`` / ``LocalLog`` (log start offset,
log end offset, reads bounded by a maximum offset).

What is modelled: batches with base offset, producer id, producer epoch, base sequence, record count,
transactional and control flags; a control batch holds one ``COMMIT`` or ``ABORT`` marker record with
the coordinator epoch; sequences wrap at ``Integer.MAX_VALUE``. Storage is in memory, or durable through
a :class:`BatchStore` (see :mod:`txnspec.impl.storage`).

Assumed / left out: one replica per partition (the high watermark is kept by the owner, see
:mod:`txnspec.impl.partition`); no compaction, retention or compression; offsets are per record,
timestamps are the producer's (``CreateTime``) and never checked.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from txnspec.impl.errors import InvalidRequestError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT_MAX = 2_147_483_647
SHORT_MAX = 32_767

RecordValue = bytes | str | None


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: ``sequence + increment`` wrapping past Integer.MAX_VALUE."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``."""
    if sequence < decrement:
        return INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


class ControlType(enum.Enum):
    """``ControlRecordType`` of a transaction marker."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch. A marker's record has no key/value here (its type is on the batch)."""

    key: RecordValue = None
    value: RecordValue = None
    timestamp: int = 0


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """One batch as stored in the log (``DefaultRecordBatch``)."""

    base_offset: int
    records: tuple[Record, ...]
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    is_transactional: bool = False
    control_type: ControlType | None = None
    coordinator_epoch: int = -1
    timestamp: int = 0

    @property
    def is_control(self) -> bool:
        return self.control_type is not None

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, len(self.records) - 1)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def size_in_bytes(self) -> int:
        """An estimate of the v2 size: 61 bytes of batch header plus key/value lengths and ~10 per record."""
        total = 61
        for r in self.records:
            total += 10 + _value_size(r.key) + _value_size(r.value)
        return total


def _value_size(value: RecordValue) -> int:
    if value is None:
        return 0
    return len(value) if isinstance(value, bytes) else len(value.encode("utf-8"))


def control_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, control_type: ControlType,
                  timestamp: int = 0) -> RecordBatch:
    """A transaction marker batch (``MemoryRecords.withEndTransactionMarker``); offset assigned at append."""
    return RecordBatch(-1, (Record(timestamp=timestamp),), producer_id, producer_epoch, NO_SEQUENCE, True,
                       control_type, coordinator_epoch, timestamp)


class BatchStore(Protocol):
    """Where a :class:`Log` keeps its batches durably (``impl.storage.SegmentStore``)."""

    def append(self, batch: RecordBatch) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def flush(self) -> None: ...


@dataclass
class Log:
    """The batches of one partition, in offset order.

    >>> log = Log("t-0")
    >>> b = log.append(RecordBatch(-1, (Record(value="a"), Record(value="b"))))
    >>> (b.base_offset, b.last_offset, log.log_end_offset)
    (0, 1, 2)
    >>> [x.base_offset for x in log.read(1, 2)]
    [0]
    """

    name: str
    log_start_offset: int = 0
    store: BatchStore | None = None
    batches: list[RecordBatch] = field(default_factory=list)
    _bases: list[int] = field(default_factory=list)
    _end: int = -1

    def __post_init__(self) -> None:
        if self._end < self.log_start_offset:
            self._end = self.log_start_offset
        self._bases = [b.base_offset for b in self.batches]
        if self.batches:
            self._end = self.batches[-1].next_offset

    @property
    def log_end_offset(self) -> int:
        return self._end

    def append(self, batch: RecordBatch) -> RecordBatch:
        """Assign offsets from the log end offset and append; returns the stored batch."""
        if not batch.records:
            raise InvalidRequestError("a record batch must hold at least one record")
        stored = replace(batch, base_offset=self._end)
        if self.store is not None:
            self.store.append(stored)
        self.batches.append(stored)
        self._bases.append(stored.base_offset)
        self._end = stored.next_offset
        return stored

    def skip_to(self, offset: int) -> None:
        """Start an empty log at ``offset`` (a case's given log end offset with unknown contents)."""
        if self.batches:
            raise ValueError("skip_to is only for an empty log")
        self.log_start_offset = self._end = offset

    def read(self, start_offset: int, max_offset: int, max_batches: int | None = None) -> list[RecordBatch]:
        """Batches holding offsets ``>= start_offset`` that lie wholly below ``max_offset``."""
        i = bisect.bisect_right(self._bases, start_offset) - 1
        i = max(i, 0)
        out: list[RecordBatch] = []
        for batch in self.batches[i:]:
            if batch.last_offset < start_offset:
                continue
            if batch.last_offset >= max_offset:
                break
            out.append(batch)
            if max_batches is not None and len(out) >= max_batches:
                break
        return out

    def advance_start(self, offset: int) -> None:
        """Move the log start offset up to ``offset`` (DeleteRecords) and drop the batches wholly below it from
        memory; a batch straddling it stays, its records below the start no longer read. The store keeps its
        files: the start offset is checkpointed, and recovery reads from there."""
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        i = bisect.bisect_right(self._bases, offset) - 1
        while i >= 0 and self.batches[i].next_offset > offset:
            i -= 1
        del self.batches[:i + 1]
        del self._bases[:i + 1]
        if self._end < offset:
            self._end = offset

    def batch_after(self, offset: int) -> int:
        """Base offset of the first batch starting at or after ``offset`` (else the log end offset)."""
        i = bisect.bisect_left(self._bases, offset)
        return self._bases[i] if i < len(self._bases) else self._end

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or above ``offset`` (a batch straddling it is dropped whole)."""
        i = bisect.bisect_left(self._bases, offset)
        while i > 0 and self.batches[i - 1].next_offset > offset:
            i -= 1
        del self.batches[i:]
        del self._bases[i:]
        self._end = self.batches[-1].next_offset if self.batches else max(self.log_start_offset, min(offset,
                                                                                                   self._end))
        if self.store is not None:
            self.store.truncate_to(self._end)


def data_offsets(batches: Sequence[RecordBatch]) -> list[int]:
    """Offsets of the data records in ``batches`` (control batches excluded)."""
    return [b.base_offset + i for b in batches if not b.is_control for i in range(len(b.records))]


__all__ = ["INT_MAX", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE", "SHORT_MAX", "BatchStore",
           "ControlType", "Log", "Record", "RecordBatch", "RecordValue", "control_batch", "data_offsets",
           "decrement_sequence", "increment_sequence"]
