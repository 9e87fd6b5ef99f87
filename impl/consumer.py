"""The consumer side of a fetch: which records the application sees, at either isolation level.

Follows Kafka's ``CompletedFetch`` (``clients/src/main/java/org/apache/kafka/clients/consumer/internals/``,
``nextFetchedRecord`` / ``consumeAbortedTransactionsUpTo`` / ``isBatchAborted`` / ``containsAbortMarker``)
and the position bookkeeping of ``KafkaConsumer.poll``.

What is modelled: at READ_COMMITTED the aborted transactions of the fetch response go into a min-heap by
first offset; for each batch with a producer id, every aborted txn starting at or before the batch's last
offset moves its producer id into the aborted set; an ABORT marker removes its producer id; a
transactional batch of an aborted producer is skipped whole. Control records are never returned; the
position moves past them. READ_UNCOMMITTED returns every data record below the high watermark.

:class:`Consumer` is a sans-I/O consumer of assigned partitions: :meth:`Consumer.fetch_requests` says what to
fetch, :meth:`Consumer.on_fetch` turns a :class:`~txnspec.impl.partition.FetchResult` into records. Group
membership (JoinGroup, rebalances, generations) is left out: a consumer reads partitions it is given and
commits offsets through :mod:`txnspec.impl.group`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from txnspec.impl.errors import Errors, InvalidRequestError
from txnspec.impl.log import ControlType, RecordBatch, RecordValue
from txnspec.impl.partition import AbortedTxn, FetchResult, IsolationLevel
from txnspec.impl.policy import KAFKA, Rules


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    partition: str
    offset: int
    key: RecordValue
    value: RecordValue
    timestamp: int = 0
    producer_id: int = -1


def visible_records(partition: str, batches: Sequence[RecordBatch], fetch_offset: int,
                    isolation: IsolationLevel,
                    aborted_transactions: Iterable[AbortedTxn] | None,
                    rules: Rules = KAFKA) -> tuple[list[ConsumerRecord], int]:
    """The records an application gets from one fetch response, and the next fetch offset."""
    heap = [(t.first_offset, t.producer_id) for t in (aborted_transactions or ())]
    heapq.heapify(heap)
    aborted_pids: set[int] = set()
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    committed = isolation is IsolationLevel.READ_COMMITTED
    for batch in batches:
        if committed and batch.has_producer_id:
            while heap and heap[0][0] <= batch.last_offset:
                aborted_pids.add(heapq.heappop(heap)[1])
            if batch.control_type is ControlType.ABORT:
                aborted_pids.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_pids \
                    and rules.skips_aborted_batches:
                next_offset = batch.next_offset
                continue
        if not batch.is_control:
            for i, r in enumerate(batch.records):
                offset = batch.base_offset + i
                if offset >= fetch_offset:
                    out.append(ConsumerRecord(partition, offset, r.key, r.value, r.timestamp, batch.producer_id))
        next_offset = max(next_offset, batch.next_offset)
    return out, next_offset


@dataclass
class Consumer:
    """A consumer of explicitly assigned partitions with a position per partition.

    >>> from txnspec.impl.partition import Partition
    >>> from txnspec.impl.log import Record
    >>> p = Partition("t-0")
    >>> _ = p.append_records(5, 0, 0, [Record(value="x")], is_transactional=True)
    >>> c = Consumer(IsolationLevel.READ_COMMITTED)
    >>> c.assign(["t-0"])
    >>> c.on_fetch("t-0", p.read(0, c.isolation))
    []
    >>> _ = p.write_txn_marker(5, 0, 0, ControlType.COMMIT)
    >>> [r.value for r in c.on_fetch("t-0", p.read(c.position("t-0"), c.isolation))]
    ['x']
    """

    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    group_id: str | None = None
    positions: dict[str, int] = field(default_factory=dict)
    rules: Rules = KAFKA

    def assign(self, partitions: Iterable[str], offsets: dict[str, int] | None = None) -> None:
        for p in partitions:
            if not isinstance(p, str) or not p:
                raise InvalidRequestError(f"a partition name must be a non-empty string, got {p!r}")
            self.positions[p] = (offsets or {}).get(p, 0)

    def seek(self, partition: str, offset: int) -> None:
        if partition not in self.positions:
            raise InvalidRequestError(f"partition {partition!r} is not assigned")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidRequestError(f"offset must be a non-negative integer, got {offset!r}")
        self.positions[partition] = offset

    def position(self, partition: str) -> int:
        return self.positions[partition]

    def fetch_requests(self) -> list[tuple[str, int, IsolationLevel]]:
        return [(p, o, self.isolation) for p, o in sorted(self.positions.items())]

    def on_fetch(self, partition: str, response: FetchResult) -> list[ConsumerRecord]:
        if partition not in self.positions:
            raise InvalidRequestError(f"partition {partition!r} is not assigned")
        if response.error is not Errors.NONE:
            if response.error is Errors.OFFSET_OUT_OF_RANGE:
                self.positions[partition] = max(response.log_start_offset, 0)  # auto.offset.reset=earliest
            return []
        records, next_offset = visible_records(partition, response.batches, self.positions[partition],
                                               self.isolation, response.aborted_transactions, self.rules)
        self.positions[partition] = next_offset
        return records


__all__ = ["Consumer", "ConsumerRecord", "visible_records"]
