"""The producer id allocator the transaction coordinator (and the idempotent producer's InitProducerId) draws on.

Follows Kafka TRUNK ``server-common/src/main/java/org/apache/kafka/server/common/ProducerIdsBlock.java`` and
``core/src/main/scala/kafka/coordinator/transaction/ProducerIdManager.scala`` (``generateProducerId``;
``RPCProducerIdManager`` answers ``COORDINATOR_LOAD_IN_PROGRESS`` while no block is available).

Assumed: one allocator per broker hands out consecutive ids; ``persist`` (a durable broker's) records the next id
before one is handed out, so a restart never reuses it. Left out: blocks of ids from the controller
(``AllocateProducerIds``) and their prefetching.
"""

from __future__ import annotations

from collections.abc import Callable

from txnspec.impl.errors import Errors, KafkaStorageException


class ProducerIdManager:
    """Hands out producer ids (``ProducerIdManager.generateProducerId``); ``persist`` records the next id."""

    def __init__(self, next_producer_id: int = 0, persist: Callable[[int], None] | None = None) -> None:
        self.next_producer_id = next_producer_id
        self.persist = persist
        self.fail_next: Errors | None = None

    def generate_producer_id(self) -> int:
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise AllocationError(err)
        pid = self.next_producer_id
        if self.persist is not None:
            try:
                self.persist(pid + 1)  # reserved durably before it is handed out
            except KafkaStorageException as exc:
                # as RPCProducerIdManager when no block is available: retriable, the id is not used
                raise AllocationError(Errors.COORDINATOR_LOAD_IN_PROGRESS) from exc
        self.next_producer_id = pid + 1
        return pid


class AllocationError(Exception):
    """No producer id could be allocated; ``error`` is what the request is answered."""

    def __init__(self, error: Errors) -> None:
        super().__init__(error.name)
        self.error = error


__all__ = ["AllocationError", "ProducerIdManager"]
