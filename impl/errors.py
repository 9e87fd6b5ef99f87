"""Kafka's error codes and the client exception classes, by Kafka's own names.

Follows ``org.apache.kafka.common.protocol.Errors`` (name, numeric code, retriable flag and the exception
``Errors.exception()`` builds) and the ``org.apache.kafka.common.errors`` hierarchy the producer throws.

What is modelled: the codes the exactly-once protocol produces or reacts to, with Kafka's numeric codes;
the exception classes a transactional producer may throw or keep as its last error (``ApiException``
subclasses, ``RetriableException``, ``ProducerFencedException`` ...), so that ``type(e).__name__`` is the
Java simple class name. Left out: every other code (``UNKNOWN_SERVER_ERROR`` stands in when a broker
would answer with something this project does not know).

Bad input to a public API of ``impl`` raises :class:`InvalidRequestError` (a ``ValueError``) with a
message naming the field: that is this implementation's documented answer where Kafka's wire protocol
would have rejected the request before any handler saw it.
"""

from __future__ import annotations

import enum


class Errors(enum.Enum):
    """Kafka error names with their wire codes: ``Errors.PRODUCER_FENCED.code == 90``."""

    UNKNOWN_SERVER_ERROR = (-1, False)
    NONE = (0, False)
    OFFSET_OUT_OF_RANGE = (1, False)
    CORRUPT_MESSAGE = (2, True)
    UNKNOWN_TOPIC_OR_PARTITION = (3, True)
    NOT_LEADER_OR_FOLLOWER = (6, True)
    REQUEST_TIMED_OUT = (7, True)
    MESSAGE_TOO_LARGE = (10, False)
    NETWORK_EXCEPTION = (13, True)
    COORDINATOR_LOAD_IN_PROGRESS = (14, True)
    COORDINATOR_NOT_AVAILABLE = (15, True)
    NOT_COORDINATOR = (16, True)
    RECORD_LIST_TOO_LARGE = (18, False)
    NOT_ENOUGH_REPLICAS = (19, True)
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (20, True)
    INVALID_REQUIRED_ACKS = (21, False)
    ILLEGAL_GENERATION = (22, False)
    INCONSISTENT_GROUP_PROTOCOL = (23, False)
    UNKNOWN_MEMBER_ID = (25, False)
    INVALID_SESSION_TIMEOUT = (26, False)
    REBALANCE_IN_PROGRESS = (27, False)
    TOPIC_AUTHORIZATION_FAILED = (29, False)
    GROUP_AUTHORIZATION_FAILED = (30, False)
    CLUSTER_AUTHORIZATION_FAILED = (31, False)
    UNSUPPORTED_VERSION = (35, False)
    INVALID_REQUEST = (42, False)
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, False)
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False)
    DUPLICATE_SEQUENCE_NUMBER = (46, False)
    INVALID_PRODUCER_EPOCH = (47, False)
    INVALID_TXN_STATE = (48, False)
    INVALID_PRODUCER_ID_MAPPING = (49, False)
    INVALID_TRANSACTION_TIMEOUT = (50, False)
    CONCURRENT_TRANSACTIONS = (51, True)
    TRANSACTION_COORDINATOR_FENCED = (52, False)
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False)
    KAFKA_STORAGE_ERROR = (56, True)
    UNKNOWN_PRODUCER_ID = (59, False)
    GROUP_ID_NOT_FOUND = (69, False)
    MEMBER_ID_REQUIRED = (79, False)
    FENCED_INSTANCE_ID = (82, False)
    UNSTABLE_OFFSET_COMMIT = (88, True)
    PRODUCER_FENCED = (90, False)
    OPERATION_NOT_ATTEMPTED = (55, False)
    INVALID_RECORD = (87, False)
    TRANSACTIONAL_ID_NOT_FOUND = (105, False)
    FENCED_MEMBER_EPOCH = (110, False)
    STALE_MEMBER_EPOCH = (113, False)
    TRANSACTION_ABORTABLE = (120, False)

    def __init__(self, code: int, retriable: bool) -> None:
        self.code = code
        self.retriable = retriable

    @classmethod
    def named(cls, name: object) -> Errors:
        """The error called ``name``; :class:`InvalidRequestError` naming the value otherwise."""
        if isinstance(name, str) and name in cls.__members__:
            return cls[name]
        raise InvalidRequestError(f"unknown Kafka error name {name!r}")

    def exception(self, message: str = "") -> KafkaException:
        """The exception Kafka's ``Errors.exception()`` builds for this code."""
        cls = _EXCEPTIONS.get(self, ApiException)
        return cls(message or self.name)


class InvalidRequestError(ValueError):
    """A request or API call with a malformed field (wrong type, out of range). The message names it."""


# --- The client exception hierarchy (org.apache.kafka.common.errors), by simple Java name. ---

class KafkaException(Exception):
    """``org.apache.kafka.common.KafkaException``."""

    def __init__(self, message: str = "", cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.__cause__ = cause


class IllegalStateException(KafkaException):
    """Java's ``IllegalStateException`` (not a KafkaException in Java; a subclass here for convenience)."""


class ApiException(KafkaException):
    """An error a broker answered with."""


class RetriableException(ApiException):
    pass


class InvalidMetadataException(RetriableException):
    pass


class ProducerFencedException(ApiException):
    pass


class InvalidProducerEpochException(ApiException):
    pass


class OutOfOrderSequenceException(ApiException):
    pass


class InvalidTxnStateException(ApiException):
    pass


class InvalidPidMappingException(ApiException):
    pass


class TransactionAbortableException(ApiException):
    pass


class TransactionAbortedException(ApiException):
    pass


class TransactionCoordinatorFencedException(ApiException):
    pass


class UnknownProducerIdException(ApiException):
    pass


class UnsupportedVersionException(ApiException):
    pass


class UnsupportedForMessageFormatException(ApiException):
    pass


class AuthorizationException(ApiException):
    pass


class TransactionalIdAuthorizationException(AuthorizationException):
    pass


class ClusterAuthorizationException(AuthorizationException):
    pass


class GroupAuthorizationException(AuthorizationException):
    pass


class TopicAuthorizationException(AuthorizationException):
    pass


class CommitFailedException(KafkaException):
    pass


class FencedInstanceIdException(ApiException):
    pass


class InvalidTxnTimeoutException(ApiException):
    pass


class InvalidRequestException(ApiException):
    pass


class UnknownServerException(ApiException):
    pass


class RecordTooLargeException(ApiException):
    pass


class RecordBatchTooLargeException(ApiException):
    pass


class CorruptRecordException(RetriableException):
    pass


class TimeoutException(RetriableException):
    pass


class NetworkException(InvalidMetadataException):
    pass


class NotLeaderOrFollowerException(InvalidMetadataException):
    pass


class UnknownTopicOrPartitionException(InvalidMetadataException):
    pass


class NotEnoughReplicasException(RetriableException):
    pass


class NotEnoughReplicasAfterAppendException(RetriableException):
    pass


class CoordinatorLoadInProgressException(RetriableException):
    pass


class CoordinatorNotAvailableException(RetriableException):
    pass


class NotCoordinatorException(RetriableException):
    pass


class ConcurrentTransactionsException(RetriableException):
    pass


class KafkaStorageException(InvalidMetadataException):
    pass


class UnstableOffsetCommitException(RetriableException):
    pass


class IllegalGenerationException(ApiException):
    pass


class UnknownMemberIdException(ApiException):
    pass


class DuplicateSequenceException(ApiException):
    pass


class InvalidRecordException(ApiException):
    pass


class OffsetOutOfRangeException(ApiException):
    pass


_EXCEPTIONS: dict[Errors, type[KafkaException]] = {
    Errors.UNKNOWN_SERVER_ERROR: UnknownServerException,
    Errors.CORRUPT_MESSAGE: CorruptRecordException,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicOrPartitionException,
    Errors.NOT_LEADER_OR_FOLLOWER: NotLeaderOrFollowerException,
    Errors.REQUEST_TIMED_OUT: TimeoutException,
    Errors.MESSAGE_TOO_LARGE: RecordTooLargeException,
    Errors.NETWORK_EXCEPTION: NetworkException,
    Errors.COORDINATOR_LOAD_IN_PROGRESS: CoordinatorLoadInProgressException,
    Errors.COORDINATOR_NOT_AVAILABLE: CoordinatorNotAvailableException,
    Errors.NOT_COORDINATOR: NotCoordinatorException,
    Errors.RECORD_LIST_TOO_LARGE: RecordBatchTooLargeException,
    Errors.NOT_ENOUGH_REPLICAS: NotEnoughReplicasException,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: NotEnoughReplicasAfterAppendException,
    Errors.ILLEGAL_GENERATION: IllegalGenerationException,
    Errors.UNKNOWN_MEMBER_ID: UnknownMemberIdException,
    Errors.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationException,
    Errors.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationException,
    Errors.CLUSTER_AUTHORIZATION_FAILED: ClusterAuthorizationException,
    Errors.UNSUPPORTED_VERSION: UnsupportedVersionException,
    Errors.INVALID_REQUEST: InvalidRequestException,
    Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT: UnsupportedForMessageFormatException,
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequenceException,
    Errors.DUPLICATE_SEQUENCE_NUMBER: DuplicateSequenceException,
    Errors.INVALID_PRODUCER_EPOCH: InvalidProducerEpochException,
    Errors.INVALID_TXN_STATE: InvalidTxnStateException,
    Errors.INVALID_PRODUCER_ID_MAPPING: InvalidPidMappingException,
    Errors.INVALID_TRANSACTION_TIMEOUT: InvalidTxnTimeoutException,
    Errors.CONCURRENT_TRANSACTIONS: ConcurrentTransactionsException,
    Errors.TRANSACTION_COORDINATOR_FENCED: TransactionCoordinatorFencedException,
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: TransactionalIdAuthorizationException,
    Errors.KAFKA_STORAGE_ERROR: KafkaStorageException,
    Errors.UNKNOWN_PRODUCER_ID: UnknownProducerIdException,
    Errors.FENCED_INSTANCE_ID: FencedInstanceIdException,
    Errors.UNSTABLE_OFFSET_COMMIT: UnstableOffsetCommitException,
    Errors.PRODUCER_FENCED: ProducerFencedException,
    Errors.TRANSACTION_ABORTABLE: TransactionAbortableException,
    Errors.INVALID_RECORD: InvalidRecordException,
    Errors.OFFSET_OUT_OF_RANGE: OffsetOutOfRangeException,
}

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations", "enum")]
