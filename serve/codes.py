"""Kafka's error codes that ``txnspec serve`` answers beyond the protocol errors of :class:`txnspec.impl.errors.
Errors` (topic and group admin, configs, record validation), by Kafka's names (``org.apache.kafka.common.protocol.
Errors``). Handlers answer ``Code.X`` (an int) where the implementation has no such error."""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    MESSAGE_TOO_LARGE = 10
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    INVALID_REQUIRED_ACKS = 21
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    GROUP_ID_NOT_FOUND = 69
    NON_EMPTY_GROUP = 68
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87
    TRANSACTIONAL_ID_NOT_FOUND = 105
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNKNOWN_TOPIC_ID = 100
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    REBOOTSTRAP_REQUIRED = 129


__all__ = ["Code"]
