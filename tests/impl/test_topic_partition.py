"""``TopicPartition``: one partition id for the implementation, serve and the lock-step adapter (issue 28)."""

from __future__ import annotations

import copy
import json
import pickle
import re
from pathlib import Path

import pytest

from txnspec.impl.broker import Broker
from txnspec.impl.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[2]


def test_a_partition_is_its_name_with_its_fields() -> None:
    tp = TopicPartition("orders-eu", 3)
    assert (tp, tp.topic, tp.partition) == ("orders-eu-3", "orders-eu", 3)
    assert {"orders-eu-3": 1}[tp] == 1 and hash(tp) == hash("orders-eu-3")  # maps keyed by names find it
    assert json.dumps({tp: 1}) == '{"orders-eu-3": 1}'
    for again in (pickle.loads(pickle.dumps(tp)), copy.deepcopy(tp)):
        assert type(again) is TopicPartition and (again.topic, again.partition) == ("orders-eu", 3)
    with pytest.raises(AttributeError, match="immutable"):
        tp.topic = "x"  # type: ignore[misc]


@pytest.mark.parametrize("topic, partition", [("", 0), ("t", -1), ("t", True), (3, 0)])
def test_a_bad_partition_is_refused_naming_it(topic: object, partition: object) -> None:
    with pytest.raises(ValueError, match="must be"):
        TopicPartition(topic, partition)  # type: ignore[arg-type]


def test_text_is_read_once_where_it_arrives_as_text() -> None:
    assert TopicPartition.parse("a-b-12") == TopicPartition("a-b", 12) and TopicPartition.parse("a-b-12").topic == "a-b"
    assert [TopicPartition.parse(t) for t in ("p0", "-0", "p-x", "p-", "p-٣", 7, "t" * 250 + "-0")] == [None] * 7
    with pytest.raises(ValueError, match="'p0'"):
        TopicPartition.of("p0")
    tp = TopicPartition("t", 0)
    assert TopicPartition.of(tp) is tp  # a typed name is never parsed again


def test_the_broker_names_its_internal_partitions_and_finds_them_on_disk(tmp_path: Path) -> None:
    broker = Broker(data_dir=str(tmp_path))
    broker.partition("in-0")
    broker.close()
    reopened = Broker(data_dir=str(tmp_path))
    assert all(isinstance(name, TopicPartition) for name in reopened.partitions)
    assert {(n.topic, n.partition) for n in reopened.partitions} >= {("in", 0), ("__transaction_state", 0),
                                                                    ("__consumer_offsets", 49)}
    reopened.close()


def test_nothing_cuts_a_partition_name_apart_but_the_parser() -> None:
    """The implementation, serve, the adapters and the audit read a partition's topic and index from its fields;
    only :meth:`TopicPartition.parse` reads text (a directory on disk, a name a caller wrote)."""
    cutting = re.compile(r"""r?(split|partition)\(\s*["']-["']""")
    folders = ("impl", "serve", "conformance", "audit", "spec", "checker", "cli")
    found = [f"{p.relative_to(ROOT)}:{n}" for folder in folders
             for p in sorted((ROOT / folder).rglob("*.py")) if p.name != "topic_partition.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if cutting.search(line)]
    assert found == []
