"""Kafka's two internal topics and which of their partitions an id lives in.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/common/internals/Topic.java``
(``TRANSACTION_STATE_TOPIC_NAME``, ``GROUP_METADATA_TOPIC_NAME``), ``TransactionStateManager.partitionFor`` and
``GroupMetadataManager.partitionFor`` (both ``Utils.abs(key.hashCode) % partitionCount``), with
``String.hashCode`` and ``Utils.abs`` as Java computes them.

Assumed: the partition counts are given (``transaction.state.log.num.partitions``,
``offsets.topic.num.partitions``, 50 by default). Left out: the topics' creation and their configs.
"""

from __future__ import annotations

from txnspec.impl.topic_partition import TopicPartition

TRANSACTION_STATE_TOPIC = "__transaction_state"
GROUP_METADATA_TOPIC = "__consumer_offsets"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """``Utils.abs(key.hashCode) % n`` (Kafka's ``abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def offsets_partition_for(group_id: str, num_partitions: int = 50) -> str:
    return TopicPartition(GROUP_METADATA_TOPIC, partition_for(group_id, num_partitions))


__all__ = ["GROUP_METADATA_TOPIC", "TRANSACTION_STATE_TOPIC", "java_string_hash", "offsets_partition_for",
           "partition_for"]
