"""DeleteRecords on ``txnspec serve``, through confluent-kafka's ``AdminClient.delete_records``: the log start
offset moves up (never down), ListOffsets' earliest and a consumer's reset follow it, a Fetch below it is
OFFSET_OUT_OF_RANGE, -1 means the high watermark and an offset above it is OFFSET_OUT_OF_RANGE.
``delete_records_answers`` takes any bootstrap address (tests/serve/test_serve_vs_kafka.py runs it on Kafka)."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from test_serve_clients import QUIET, TIMEOUT

from txnspec.audit.connection import BrokerConnection
from txnspec.serve.server import ServerThread

OFFSET_OUT_OF_RANGE = 1


def _fetch_error(bootstrap: str, topic: str, offset: int) -> int:
    host, port = bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout=TIMEOUT)
    try:
        P = FetchRequest.FetchTopic.FetchPartition
        r = conn.call(FetchRequest, FetchResponse, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                      isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                      topics=[FetchRequest.FetchTopic(topic=topic, partitions=[P(
                          partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                          partition_max_bytes=1 << 20)])])
        return int(r.responses[0].partitions[0].error_code)
    finally:
        conn.close()


def delete_records_answers(bootstrap: str) -> dict[str, Any]:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"del-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(10):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0

    def delete(offset: int) -> Any:
        try:
            done = admin.delete_records([TopicPartition(topic, 0, offset)])
            return next(iter(done.values())).result(TIMEOUT).low_watermark
        except KafkaException as exc:
            return exc.args[0].name()

    out: dict[str, Any] = {"delete_4": delete(4), "delete_2": delete(2)}
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, **QUIET})
    try:
        out["watermarks"] = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT, cached=False)
        reader.assign([TopicPartition(topic, 0, 0)])  # below the start: the consumer resets to the earliest
        values = []
        while len(values) < 6:
            msg = reader.poll(TIMEOUT)
            assert msg is not None, values
            if not msg.error():
                values.append((msg.offset(), bytes(msg.value() or b"")))
        out["read_from_0"] = values
    finally:
        reader.close()
    out["fetch_below_start"] = _fetch_error(bootstrap, topic, 2)
    out["fetch_at_start"] = _fetch_error(bootstrap, topic, 4)
    out["delete_above_high_watermark"] = delete(11)
    out["delete_high_watermark"] = delete(-1)
    return out


EXPECTED = {"delete_4": 4, "delete_2": 4, "watermarks": (4, 10),
            "read_from_0": [(i, f"v{i}".encode()) for i in range(4, 10)],
            "fetch_below_start": OFFSET_OUT_OF_RANGE, "fetch_at_start": 0,
            "delete_above_high_watermark": "OFFSET_OUT_OF_RANGE", "delete_high_watermark": 10}


def test_delete_records_moves_the_log_start_offset() -> None:
    with ServerThread() as server:
        assert delete_records_answers(server.bootstrap) == EXPECTED


def test_the_log_start_offset_survives_a_durable_restart(tmp_path: Any) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    with ServerThread(data_dir=str(tmp_path)) as server:
        answers = delete_records_answers(server.bootstrap)
        topic = next(iter(AdminClient({"bootstrap.servers": server.bootstrap, **QUIET}).list_topics(
            timeout=TIMEOUT).topics))
    assert answers["delete_high_watermark"] == 10
    with ServerThread(data_dir=str(tmp_path)) as server:
        from confluent_kafka import Consumer

        reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "after", **QUIET})
        try:
            low_high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT, cached=False)
        finally:
            reader.close()
        assert low_high == (10, 10)
        assert _fetch_error(server.bootstrap, topic, 4) == OFFSET_OUT_OF_RANGE
