"""Every codec on ``txnspec serve``: confluent-kafka (librdkafka) and kafka-python produce with each
``compression.type`` (transactionally and idempotently) and read the records back; the batch is bounded as
sent (``max.message.bytes``), checked (CRC, records) after decompression, and recompressed when the topic's
``compression.type`` says so."""

from __future__ import annotations

import gzip
import struct
import time
import uuid
from typing import Any

import pytest
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c
from test_serve_clients import QUIET, TIMEOUT, read_all  # the same reader as the client tests

from txnspec.audit.connection import BrokerConnection
from txnspec.serve import configs
from txnspec.serve import records as wire_records
from txnspec.serve.records import Codec
from txnspec.serve.server import ServerThread

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def server() -> Any:
    with ServerThread(transaction_version=2) as s:
        yield s


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_produces_each_codec_transactionally_and_reads_it_back(server: ServerThread,
                                                                                codec: str) -> None:
    from confluent_kafka import Producer

    topic = f"c-{codec}-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"tx-{topic}",
                         "compression.type": codec, "linger.ms": 5, **QUIET})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    values = [f"{codec}-{i}-".encode() * 20 for i in range(200)]  # compressible, several records a batch
    for v in values:
        producer.produce(topic, v)
    producer.commit_transaction(TIMEOUT)
    got = read_all(server.bootstrap, topic, 1, "read_committed")
    assert [v for _, _, v in got] == values
    stored = server.call(lambda: [DefaultRecordBatch(b).compression_type for (p, _), b in
                                  server.server.broker.produced.items() if p == f"{topic}-0"])
    assert stored and set(stored) == {int(Codec[codec.upper()])}  # kept as the client compressed it


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_produces_each_codec_idempotently(server: ServerThread, codec: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"k-{codec}-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, compression_type=codec, enable_idempotence=True,
                             linger_ms=5)
    for i in range(50):
        producer.send(topic, f"{codec}-{i}".encode())
    producer.flush(TIMEOUT)
    producer.close(TIMEOUT)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 50 and time.monotonic() < deadline:  # read until the 50 sent are in, not 3 s past them
        got += [m.value for batch in consumer.poll(timeout_ms=500).values() for m in batch]
    end = consumer.end_offsets([tp])[tp]
    consumer.close()
    assert got == [f"{codec}-{i}".encode() for i in range(50)] and end == 50  # and nothing after them


def produce(server: ServerThread, topic: str, records: bytes, version: int = 9) -> Any:
    conn = BrokerConnection(server.config.host, server.config.port, timeout=TIMEOUT)
    try:
        data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])
        r = conn.call(ProduceRequest, ProduceResponse, version, transactional_id=None, acks=-1, timeout_ms=1000,
                      topic_data=[data])
        return r.responses[0].partition_responses[0]
    finally:
        conn.close()


def batch(values: list[bytes | None], codec: Codec = Codec.NONE, keys: list[bytes | None] | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)  # compresses only if smaller
    for i, v in enumerate(values):
        builder.append(i, 0, None if keys is None else keys[i], v, [])
    return bytes(builder.build())


def create_topic(server: ServerThread, name: str, **config: str) -> None:
    given = configs.parse_all({k.replace("_", "."): v for k, v in config.items()})
    server.call(lambda: server.server.broker.create_topic(name, 1, given))


def test_max_message_bytes_bounds_the_batch_as_sent_not_decompressed(server: ServerThread) -> None:
    """UnifiedLog.analyzeAndValidateRecords: batch.sizeInBytes against max.message.bytes (the issue's case: a
    gzip batch of a few KiB holding 3 MiB was refused MESSAGE_TOO_LARGE)."""
    create_topic(server, "sized", max_message_bytes="10000")
    big = batch([b"x" * (3 << 20)], Codec.GZIP)
    assert len(big) < 10000
    ok = produce(server, "sized", big)
    assert (ok.error_code, ok.base_offset) == (0, 0)
    plain = batch([b"y" * 10_000])
    refused = produce(server, "sized", plain)
    assert refused.error_code == 10 and f"{len(plain)} bytes" in refused.error_message  # MESSAGE_TOO_LARGE
    assert produce(server, "sized", batch([b"z" * 100])).error_code == 0


def with_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, calc_crc32c(memoryview(data)[21:]))
    return bytes(data)


def test_bad_compressed_batches_get_kafkas_error_codes(server: ServerThread) -> None:
    create_topic(server, "bad")
    good = bytearray(batch([b"a" * 50, b"b" * 50], Codec.GZIP))
    corrupt = bytearray(good)
    corrupt[-3] ^= 0x55
    assert produce(server, "bad", bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE: the CRC
    garbage = bytearray(good[:61]) + b"not gzip at all"
    struct.pack_into(">i", garbage, 8, len(garbage) - 12)
    assert produce(server, "bad", with_crc(garbage)).error_code == -1  # KafkaException: cannot decompress
    inner = gzip.compress(b"\x01\x02\x03")  # decompresses, but no record structure inside
    structure = bytearray(good[:61]) + inner
    struct.pack_into(">i", structure, 8, len(structure) - 12)
    assert produce(server, "bad", with_crc(structure)).error_code == 87  # INVALID_RECORD
    zstd = batch([b"z" * 100], Codec.ZSTD)
    assert DefaultRecordBatch(zstd).compression_type == Codec.ZSTD
    assert produce(server, "bad", zstd, version=6).error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE before v7
    assert produce(server, "bad", zstd, version=7).error_code == 0
    codec7 = bytearray(batch([b"q"]))
    struct.pack_into(">h", codec7, 21, 7)
    assert produce(server, "bad", with_crc(codec7)).error_code == -1  # CompressionType.forId: unknown id
    assert produce(server, "bad", bytes(good)).error_code == 0


def test_max_decompressed_message_bytes_bounds_each_record_of_a_compressed_batch(server: ServerThread) -> None:
    """Kafka 4.4's max.decompressed.message.bytes: one record after decompression (InvalidRecordException)."""
    create_topic(server, "decompressed", max_decompressed_message_bytes="1000")
    assert produce(server, "decompressed", batch([b"a" * 900, b"b" * 1000], Codec.GZIP)).error_code == 87  # 1009 bytes
    assert produce(server, "decompressed", batch([b"a" * 900, b"b" * 980], Codec.GZIP)).error_code == 0
    assert produce(server, "decompressed", batch([b"c" * 5000])).error_code == 0  # uncompressed: not bounded


def test_a_compacted_topic_refuses_records_without_a_key_naming_each(server: ServerThread) -> None:
    """LogValidator.validateKey: INVALID_RECORD with a record error per keyless record (Produce v8+)."""
    create_topic(server, "compacted", cleanup_policy="compact")
    r = produce(server, "compacted", batch([b"a" * 99, b"b" * 99, b"c" * 99], Codec.LZ4, keys=[b"k", None, None]))
    assert r.error_code == 87
    assert [e.batch_index for e in r.record_errors] == [1, 2]
    assert produce(server, "compacted", batch([b"a"], Codec.LZ4, keys=[b"k"])).error_code == 0


@pytest.mark.parametrize("target", ["gzip", "uncompressed", "zstd"])
def test_a_topic_compression_type_recompresses_the_batch(server: ServerThread, target: str) -> None:
    from confluent_kafka import Producer

    topic = f"re-{target}"
    create_topic(server, topic, compression_type=target)
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "snappy", **QUIET})
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), headers=[("h", f"{i}".encode())])
    assert producer.flush(TIMEOUT) == 0
    stored = server.call(lambda: [b for (p, _), b in server.server.broker.produced.items() if p == f"{topic}-0"])
    expected = Codec.NONE if target == "uncompressed" else Codec[target.upper()]
    assert stored and {DefaultRecordBatch(b).compression_type for b in stored} == {int(expected)}
    assert all(DefaultRecordBatch(b).validate_crc() for b in stored)
    assert [v for _, _, v in read_all(server.bootstrap, topic, 1, "read_uncommitted")] == [
        f"v{i}".encode() for i in range(20)]
    headers = [list(r.headers) for b in stored for r in DefaultRecordBatch(b)]
    assert headers == [[("h", f"{i}".encode())] for i in range(20)]


def test_recompress_keeps_producer_fields_and_records() -> None:
    builder = DefaultRecordBatchBuilder(2, 0, True, 7, 3, 11, 1 << 20)
    builder.append(0, 5, b"k", b"v", [("a", b"1")])
    builder.append(1, 6, None, b"w", [])
    out = wire_records.recompress(bytes(builder.build()), Codec.ZSTD)
    b = DefaultRecordBatch(out)
    assert b.validate_crc()
    assert (b.compression_type, b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (
        4, 7, 3, 11, True)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(out)] == [
        (0, 5, b"k", b"v", [("a", b"1")]), (1, 6, None, b"w", [])]
