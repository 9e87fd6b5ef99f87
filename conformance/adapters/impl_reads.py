"""What a consumer reads from the implementation's partitions: the observation of visible records.

System
    For each partition and isolation level, the offsets a fresh :class:`txnspec.impl.consumer.Consumer` reads
    from offset 0 through the broker's ``Fetch`` (``read_committed`` stops at the last stable offset and skips
    aborted batches through the aborted-transaction index, as Kafka's ``CompletedFetch`` does).

Cost
    The lock-step adapter observes after every step. A log is append-only, so its log start and end, high
    watermark, last stable offset and aborted-index length say whether it changed: a partition is fetched
    again only then (otherwise the last read is returned).

Left out
    Fetch sessions, ``max.partition.fetch.bytes`` (a fetch returns what the broker gives, up to 1000 rounds).
"""

from __future__ import annotations

from typing import Any

from txnspec.impl.consumer import Consumer
from txnspec.impl.messages import Fetch
from txnspec.impl.partition import IsolationLevel


class VisibleReads:
    """The offsets a consumer reads from each partition of ``cluster`` (a :class:`txnspec.impl.cluster.Cluster`),
    remembered while the partition is unchanged."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.cache: dict[tuple[str, str], tuple[Any, tuple[int, ...]]] = {}

    def offsets(self, partition: str, isolation: str) -> list[int]:
        """The offsets a consumer reads from 0 at ``isolation`` (``READ_COMMITTED`` or ``READ_UNCOMMITTED``)."""
        p = self.cluster.broker.partition(partition)
        key = (p.log_start_offset, p.log_end_offset, p.high_watermark, p.last_stable_offset, len(p.txn_index.entries))
        cached = self.cache.get((partition, isolation))
        if cached is not None and cached[0] == key:
            return list(cached[1])
        offsets = self._fetch_all(partition, isolation)
        self.cache[(partition, isolation)] = (key, tuple(offsets))
        return offsets

    def _fetch_all(self, partition: str, isolation: str) -> list[int]:
        consumer = Consumer(IsolationLevel(isolation), None, rules=self.cluster.rules)
        consumer.assign([partition])
        offsets: list[int] = []
        for _ in range(1000):
            got = []
            for name, offset, level in consumer.fetch_requests():
                response = self.cluster.broker.handle(Fetch(name, offset, level, None), self.cluster.now_ms)
                fetched = response.extra.get("fetch")
                if fetched is not None:
                    got.extend(consumer.on_fetch(name, fetched))
            if not got:
                break
            offsets.extend(r.offset for r in got)
        return offsets


__all__ = ["VisibleReads"]
