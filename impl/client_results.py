"""What the producer's API hands back at once and completes later: a transactional operation's result, a
record's future and its metadata.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/``:
``TransactionalRequestResult.java`` (``await`` raises what the operation failed with; an awaited result lets the
next operation go, ``isAcked``), ``FutureRecordMetadata.java`` / ``ProduceRequestResult.java`` and
``clients/producer/RecordMetadata.java``.

Assumed: sans-I/O, nothing blocks: :meth:`TransactionalRequestResult.result` and :meth:`RecordFuture.get` raise
``IllegalStateException`` while not completed (the caller pumps the network first). Left out: timeouts of
``await``, callbacks, a record's timestamp and sizes in its metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

from txnspec.impl.errors import IllegalStateException


class TransactionalRequestResult:
    """``TransactionalRequestResult``: completes when the operation is done; ``acked`` once awaited."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.completed = False
        self.error: BaseException | None = None
        self.acked = False

    def done(self) -> None:
        self.completed = True

    def fail(self, error: BaseException) -> None:
        if not self.completed:
            self.error = error
            self.completed = True

    @property
    def is_successful(self) -> bool:
        return self.completed and self.error is None

    def result(self) -> None:
        """Raise what the operation failed with (Kafka's ``await``); marks the result acknowledged."""
        if not self.completed:
            raise IllegalStateException(f"{self.operation} has not completed yet")
        self.acked = True
        if self.error is not None:
            raise self.error


@dataclass
class RecordMetadata:
    partition: str
    offset: int


class RecordFuture:
    """The answer to ``send``: the record's offset, or the exception its batch failed with."""

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.completed = False
        self.metadata: RecordMetadata | None = None
        self.error: BaseException | None = None

    def _complete(self, offset: int) -> None:
        self.completed, self.metadata = True, RecordMetadata(self.partition, offset)

    def _fail(self, error: BaseException) -> None:
        if not self.completed:
            self.completed, self.error = True, error

    def get(self) -> RecordMetadata:
        if not self.completed:
            raise IllegalStateException("the record has not been acknowledged yet")
        if self.error is not None:
            raise self.error
        assert self.metadata is not None
        return self.metadata


__all__ = ["RecordFuture", "RecordMetadata", "TransactionalRequestResult"]
