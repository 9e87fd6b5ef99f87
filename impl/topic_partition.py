"""A partition's identity: Kafka's ``org.apache.kafka.common.TopicPartition`` (a topic and a partition index).

Kafka's ``TopicPartition.toString`` is ``topic-N``, and the implementation names partitions by that text: its
maps are keyed by it, its directories are called so (``UnifiedLog.logDirName``), its records hold it. A
:class:`TopicPartition` is that name *and* its two fields: a ``str`` equal to (and hashed as) ``topic-N``, so
every map keyed by names finds it, whose :attr:`~TopicPartition.topic` and :attr:`~TopicPartition.partition`
are read, never cut out of the text again. Whoever names a partition (serve from the wire's topic and index, the
lock-step adapter from the spec's topics, the broker for its internal topics) makes one.

Text that arrives as text (a directory found on disk, a name a test or a request wrote) is read once by
:meth:`TopicPartition.parse`, Kafka's ``UnifiedLog.parseTopicPartitionName``: the one place a name is parsed.

Left out: topic ids (``TopicIdPartition``), which nothing here uses.
"""

from __future__ import annotations

from typing import Any

MAX_NAME_LENGTH = 249  # Topic.MAX_NAME_LENGTH


class TopicPartition(str):
    """``topic-N`` with its fields: ``TopicPartition("in", 0) == "in-0"``, ``.topic == "in"``, ``.partition == 0``
    (Kafka's ``partition()``; it hides ``str.partition``, which nothing calls on a partition's name: a call fails
    loudly, ``'int' object is not callable``).

    >>> tp = TopicPartition("orders-eu", 3)
    >>> tp, tp.topic, tp.partition
    ('orders-eu-3', 'orders-eu', 3)
    >>> {"orders-eu-3": 1}[tp], TopicPartition.parse("orders-eu-3").topic, TopicPartition.parse("orders")
    (1, 'orders-eu', None)
    """

    topic: str
    partition: int  # type: ignore[assignment]  # Kafka's partition(); hides str.partition (never called on a name)

    def __new__(cls, topic: str, partition: int) -> TopicPartition:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"a topic must be a non-empty string, got {topic!r}")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ValueError(f"a partition index must be an integer >= 0, got {partition!r}")
        self = super().__new__(cls, f"{topic}-{partition}")
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TopicPartition is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TopicPartition is immutable: cannot delete {name}")

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]  # pickle and copy rebuild from fields
        return self.topic, self.partition

    def __reduce__(self) -> tuple[Any, ...]:
        return TopicPartition, (self.topic, self.partition)

    @classmethod
    def parse(cls, text: object) -> TopicPartition | None:
        """The partition a text name ``topic-N`` stands for, or None if it is not one
        (``UnifiedLog.parseTopicPartitionName``: the index after the last dash, a non-empty topic before it)."""
        if isinstance(text, TopicPartition):
            return text
        if not isinstance(text, str) or len(text) > MAX_NAME_LENGTH:
            return None
        topic, dash, index = text.rpartition("-")
        if not dash or not topic or not index.isascii() or not index.isdigit():
            return None
        return cls(topic, int(index))

    @classmethod
    def of(cls, name: str) -> TopicPartition:
        """``name`` itself if it is a :class:`TopicPartition`, else the text read once (:meth:`parse`); a text
        that names no partition is a :class:`ValueError` naming it."""
        tp = cls.parse(name)
        if tp is None:
            raise ValueError(f"a partition is named 'topic-N', got {name!r}")
        return tp


__all__ = ["MAX_NAME_LENGTH", "TopicPartition"]
