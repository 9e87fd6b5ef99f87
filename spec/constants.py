"""Constants of Kafka's record format and protocol (``RecordBatch``, ``TransactionMetadata``).

The spec works with Kafka's true bounds in its component handlers (the behaviour cases use them);
scenarios for the model checker map them onto small configurable bounds (see ``spec/scenarios.py``).
"""

from __future__ import annotations

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1

SHORT_MAX_VALUE = 32767  # the largest epoch; clients never receive it from InitProducerId
INT_MAX_VALUE = 2147483647  # sequences wrap from here to 0

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry keeps the last 5 batches for duplicate detection
CONSUMER_OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions default
LATE_TRANSACTION_BUFFER_MS = 300_000


def is_epoch_exhausted(epoch: int, max_epoch: int = SHORT_MAX_VALUE) -> bool:
    """``TransactionMetadata.isEpochExhausted``: ``epoch >= Short.MaxValue - 1``.

    The coordinator keeps the last epoch for itself so that it can always fence once more.
    """
    return epoch >= max_epoch - 1


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit, signed), over UTF-16 code units."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def group_offsets_partition(group_id: str) -> str:
    """The ``__consumer_offsets`` partition of a group: ``abs(hashCode) % 50`` (Kafka's ``Utils.abs``)."""
    h = java_string_hash(group_id)
    # Utils.abs maps Integer.MIN_VALUE to 0, where Math.abs would stay negative.
    magnitude = 0 if h == -(1 << 31) else abs(h)
    return f"__consumer_offsets-{magnitude % CONSUMER_OFFSETS_PARTITIONS}"

# the input partition whose position the modelled applications commit (spec/producer.py dispatch); a consumer
# group of KIP-848 assigns it (spec/consumer_group.py)
INPUT_PARTITION = "input-0"
