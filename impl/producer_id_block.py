"""The durable end of the reserved producer-id block: ids are reserved in blocks, and the block's end is written
(fsync'd) before an id of it is handed out, so a restart never hands out an id twice.

Follows Kafka TRUNK ``server-common/src/main/java/org/apache/kafka/server/common/ProducerIdsBlock.java`` (a
block of ``PRODUCER_ID_BLOCK_SIZE`` = 1000 ids) and the controller's record of the next block
(``ProducerIdControlManager``, ``ProducerIdsRecord``), here one file ``producer_ids`` in the broker's data dir.

Assumed: one broker reserves for itself; a block end that is not a number, or not above an id already in the
logs, is :class:`~txnspec.impl.checkpoint.CorruptDataError` (ids must never be reused). Left out: the
controller's quorum and its ``AllocateProducerIds`` RPC.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from txnspec.impl import durability as _durability
from txnspec.impl.checkpoint import CorruptDataError, StorageError, atomic_write
from txnspec.impl.durability import Durability

PID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ProducerIdBlockFile:
    """Producer ids are reserved in blocks; the block end is written (fsync'd) before an id of it is used."""

    def __init__(self, path: str, failures: Callable[[StorageError], None] | None = None,
                 policy: Durability | None = None) -> None:
        self.path = path
        self.failures = failures
        self.policy = policy or _durability.DEFAULT
        self.block_end = 0
        if os.path.exists(path):
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError as exc:
                raise StorageError(path, f"reading it failed: {exc.strerror or exc}") from exc
            text = raw.decode("ascii", "replace").strip()
            if not text.isdigit():
                raise CorruptDataError(path, 0, f"producer-id block {raw[:40]!r} is not a number (ids could be "
                                                "reused); restore the file or write an id above every id in use")
            self.block_end = int(text)

    def start(self) -> int:
        """The first id this run may use: the end of the last reserved block (ids before it may be used)."""
        return self.block_end

    def check_above(self, used: int, where: str) -> None:
        """Refuse to start if an id already in the logs is at or above the block end (a damaged block)."""
        if used >= self.block_end:
            raise CorruptDataError(self.path, 0, f"producer-id block ends at {self.block_end} but producer id "
                                                 f"{used} is in {where} (ids would be reused)")

    def reserve(self, next_id: int) -> None:
        """Called before an id below ``next_id`` is handed out; reserves a new block when it runs out."""
        if next_id > self.block_end:
            end = next_id - 1 + PID_BLOCK_SIZE
            if self.policy.persist_producer_ids:
                try:
                    atomic_write(self.path, str(end).encode(), self.policy)
                except StorageError as exc:  # the id is not handed out (ProducerIdManager answers a retriable error)
                    if self.failures is not None:
                        self.failures(exc)
                    raise
            self.block_end = end


__all__ = ["PID_BLOCK_SIZE", "ProducerIdBlockFile"]
