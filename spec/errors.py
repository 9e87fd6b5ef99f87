"""Kafka's error codes, by the names of ``org.apache.kafka.common.protocol.Errors``.

Only the errors the exactly-once protocol produces or reacts to are listed. The spec never raises to
report a protocol error: a handler returns a reply carrying one of these.
"""

from __future__ import annotations

import enum


class Errors(enum.StrEnum):
    NONE = "NONE"
    UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
    CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    RECORD_LIST_TOO_LARGE = "RECORD_LIST_TOO_LARGE"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    NETWORK_EXCEPTION = "NETWORK_EXCEPTION"
    COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
    COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
    NOT_COORDINATOR = "NOT_COORDINATOR"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
    INVALID_REQUIRED_ACKS = "INVALID_REQUIRED_ACKS"
    INVALID_REQUEST = "INVALID_REQUEST"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    UNSUPPORTED_FOR_MESSAGE_FORMAT = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    DUPLICATE_SEQUENCE_NUMBER = "DUPLICATE_SEQUENCE_NUMBER"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    PRODUCER_FENCED = "PRODUCER_FENCED"
    INVALID_TXN_STATE = "INVALID_TXN_STATE"
    INVALID_PRODUCER_ID_MAPPING = "INVALID_PRODUCER_ID_MAPPING"
    INVALID_TRANSACTION_TIMEOUT = "INVALID_TRANSACTION_TIMEOUT"
    CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"
    TRANSACTION_COORDINATOR_FENCED = "TRANSACTION_COORDINATOR_FENCED"
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    CLUSTER_AUTHORIZATION_FAILED = "CLUSTER_AUTHORIZATION_FAILED"
    GROUP_AUTHORIZATION_FAILED = "GROUP_AUTHORIZATION_FAILED"
    TOPIC_AUTHORIZATION_FAILED = "TOPIC_AUTHORIZATION_FAILED"
    UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"
    TRANSACTION_ABORTABLE = "TRANSACTION_ABORTABLE"
    OPERATION_NOT_ATTEMPTED = "OPERATION_NOT_ATTEMPTED"
    UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
    ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
    FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
    GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
    STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"
    FENCED_MEMBER_EPOCH = "FENCED_MEMBER_EPOCH"
    TRANSACTIONAL_ID_NOT_FOUND = "TRANSACTIONAL_ID_NOT_FOUND"
    UNSTABLE_OFFSET_COMMIT = "UNSTABLE_OFFSET_COMMIT"

    @classmethod
    def named(cls, name: str) -> Errors:
        """The error called ``name``; ``ValueError`` naming the bad value otherwise."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown Kafka error name {name!r}") from None


# ``Errors.exception()``: the exception class Kafka builds for an error code, by simple name (what a
# client throws to the application or keeps as its last error). Errors not listed map to ApiException.
EXCEPTION_NAMES: dict[Errors, str] = {
    Errors.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    Errors.CORRUPT_MESSAGE: "CorruptRecordException",
    Errors.MESSAGE_TOO_LARGE: "RecordTooLargeException",
    Errors.RECORD_LIST_TOO_LARGE: "RecordBatchTooLargeException",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
    Errors.NOT_LEADER_OR_FOLLOWER: "NotLeaderOrFollowerException",
    Errors.REQUEST_TIMED_OUT: "TimeoutException",
    Errors.NETWORK_EXCEPTION: "NetworkException",
    Errors.COORDINATOR_LOAD_IN_PROGRESS: "CoordinatorLoadInProgressException",
    Errors.COORDINATOR_NOT_AVAILABLE: "CoordinatorNotAvailableException",
    Errors.NOT_COORDINATOR: "NotCoordinatorException",
    Errors.NOT_ENOUGH_REPLICAS: "NotEnoughReplicasException",
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "NotEnoughReplicasAfterAppendException",
    Errors.KAFKA_STORAGE_ERROR: "KafkaStorageException",
    Errors.INVALID_REQUIRED_ACKS: "InvalidRequiredAcksException",
    Errors.INVALID_REQUEST: "InvalidRequestException",
    Errors.UNSUPPORTED_VERSION: "UnsupportedVersionException",
    Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT: "UnsupportedForMessageFormatException",
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: "OutOfOrderSequenceException",
    Errors.DUPLICATE_SEQUENCE_NUMBER: "DuplicateSequenceException",
    Errors.INVALID_PRODUCER_EPOCH: "InvalidProducerEpochException",
    Errors.PRODUCER_FENCED: "ProducerFencedException",
    Errors.INVALID_TXN_STATE: "InvalidTxnStateException",
    Errors.INVALID_PRODUCER_ID_MAPPING: "InvalidPidMappingException",
    Errors.INVALID_TRANSACTION_TIMEOUT: "InvalidTxnTimeoutException",
    Errors.CONCURRENT_TRANSACTIONS: "ConcurrentTransactionsException",
    Errors.TRANSACTION_COORDINATOR_FENCED: "TransactionCoordinatorFencedException",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationException",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    Errors.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    Errors.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    Errors.UNKNOWN_PRODUCER_ID: "UnknownProducerIdException",
    Errors.TRANSACTION_ABORTABLE: "TransactionAbortableException",
    Errors.OPERATION_NOT_ATTEMPTED: "OperationNotAttemptedException",
    Errors.UNKNOWN_MEMBER_ID: "UnknownMemberIdException",
    Errors.ILLEGAL_GENERATION: "IllegalGenerationException",
    Errors.FENCED_INSTANCE_ID: "FencedInstanceIdException",
    Errors.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
    Errors.STALE_MEMBER_EPOCH: "StaleMemberEpochException",
    Errors.FENCED_MEMBER_EPOCH: "FencedMemberEpochException",
    Errors.TRANSACTIONAL_ID_NOT_FOUND: "TransactionalIdNotFoundException",
    Errors.UNSTABLE_OFFSET_COMMIT: "UnstableOffsetCommitException",
}

# The errors whose exception is a ``RetriableException`` (``InvalidMetadataException`` included).
RETRIABLE_ERRORS: frozenset[Errors] = frozenset({
    Errors.CORRUPT_MESSAGE, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR, Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.KAFKA_STORAGE_ERROR, Errors.CONCURRENT_TRANSACTIONS,
    Errors.UNSTABLE_OFFSET_COMMIT,
})
