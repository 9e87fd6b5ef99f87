"""Record batches on the wire: v2 (``DefaultRecordBatch``, CRC32C) to and from the implementation's batches.

A Produce request carries, per partition, the bytes of record batches as a client built them; Kafka accepts
exactly one v2 batch per partition from a v3+ Produce, bounds its size as sent by ``max.message.bytes``, checks
its CRC32C (``DefaultRecordBatch.ensureValid``) and validates every record after decompressing it
(``LogValidator``). :func:`decode_produce` does the same with kafka-python's ``DefaultRecordBatch``, whose
codecs are gzip (the standard library), snappy (python-snappy), lz4 (lz4) and zstd (zstandard), and returns the
fields :class:`txnspec.impl.messages.Produce` needs, or :class:`InvalidRecords` with Kafka's error code.
:func:`encode_batch` writes a stored :class:`txnspec.impl.log.RecordBatch` back as Kafka's ``MemoryRecords``
would hold it: the broker-assigned base offset, control batches (transaction markers: attribute bit 5, key
``version=0, type``, value ``version=0, coordinatorEpoch``, as ``EndTransactionMarker``), CRC32C over
attributes..end.

A fetched data batch is the client's own bytes (:func:`as_stored`: headers and compression kept, as Kafka
keeps them) while the server runs; batches it did not receive in this run (markers, batches recovered from
``--durable``) are written by :func:`encode_batch`. Left out: record headers and compression of recovered
batches (the implementation's :class:`~txnspec.impl.log.Record` keeps key, value and timestamp only), message
formats v0/v1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kafka import codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from txnspec.impl.log import ControlType, Record, RecordBatch
from txnspec.serve.codes import Code

HEADER_BYTES = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
_ATTRIBUTES_AT = 21
_CRC_AT = 17
_CONTROL = 0x20
_MAGIC_AT = 16


class Codec(IntEnum):
    """The compression of a v2 batch: attribute bits 0-2 (``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


ZSTD_SINCE_PRODUCE = 7  # ProduceRequest.validateRecords: zstd needs Produce v7+ (KIP-110)


class InvalidRecords(ValueError):
    """The records of a Produce partition are refused; ``error`` is Kafka's code for it, ``record_errors``
    (batch index, message) the per-record errors of ``RecordValidationException`` (Produce v8+)."""

    def __init__(self, message: str, error: Code = Code.INVALID_RECORD,
                 record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.error = error
        self.record_errors = record_errors


@dataclass(frozen=True)
class ProducedBatch:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    records: tuple[Record, ...]
    codec: Codec = Codec.NONE
    size: int = 0  # the batch's bytes as sent (compressed): what max.message.bytes bounds


def _varint_size(n: int) -> int:
    zigzag, size = (n << 1) ^ (n >> 63), 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def decode_produce(data: bytes | None, api_version: int = 9, *, max_message_bytes: int | None = None,
                   max_decompressed_bytes: int | None = None, compacted: bool = False) -> ProducedBatch:
    """The single v2 batch of a Produce partition, checked in Kafka's order: ``ProduceRequest.validateRecords``
    (one v2 batch, zstd only from v7), ``UnifiedLog.analyzeAndValidateRecords`` (base offset 0, the size as
    sent against ``max.message.bytes``, CRC32C), ``LogValidator.validateBatch`` (offset range and count, no
    control batch, a sequence when there is a producer id), then every record decompressed and read
    (``validateRecord``: a key on a compacted topic; a compressed batch's records each at most
    ``max.decompressed.message.bytes``, Kafka 4.4)."""
    if not data:
        raise InvalidRecords("Produce requests with version 3+ must have at least one record batch per partition")
    if len(data) < HEADER_BYTES:
        raise InvalidRecords(f"{len(data)} bytes is shorter than a record batch header ({HEADER_BYTES})",
                             Code.CORRUPT_MESSAGE)
    magic = data[_MAGIC_AT]
    if magic != 2:
        raise InvalidRecords(f"record batch magic {magic}: only v2 batches are accepted from Produce v3+")
    (batch_length,) = struct.unpack_from(">i", data, 8)
    if batch_length + 12 != len(data):
        raise InvalidRecords("a Produce partition must hold exactly one record batch "
                             f"(batch length {batch_length + 12}, records {len(data)} bytes)",
                             Code.CORRUPT_MESSAGE if batch_length + 12 > len(data) else Code.INVALID_RECORD)
    batch = DefaultRecordBatch(bytes(data))
    try:
        codec = Codec(batch.compression_type)
    except ValueError:  # CompressionType.forId: IllegalArgumentException, not an ApiException
        raise InvalidRecords(f"unknown compression type id {batch.compression_type}", Code.UNKNOWN_SERVER_ERROR) \
            from None
    if codec is Codec.ZSTD and api_version < ZSTD_SINCE_PRODUCE:
        raise InvalidRecords(f"Produce requests with version {api_version} are not allowed to use ZStandard "
                             "compression", Code.UNSUPPORTED_COMPRESSION_TYPE)
    if batch.base_offset != 0:
        raise InvalidRecords(f"The baseOffset of the record batch should be 0, but it is {batch.base_offset}")
    if max_message_bytes is not None and len(data) > max_message_bytes:
        raise InvalidRecords(f"The record batch size is {len(data)} bytes which exceeds the maximum configured "
                             f"value of {max_message_bytes}.", Code.MESSAGE_TOO_LARGE)
    if not batch.validate_crc():
        raise InvalidRecords("the record batch's CRC32C does not match its contents", Code.CORRUPT_MESSAGE)
    count = batch.records_count
    if count <= 0:
        raise InvalidRecords(f"Invalid reported count for record batch: {count}")
    if batch.last_offset_delta + 1 != count:
        raise InvalidRecords(f"Inconsistent batch offset range [0, {batch.last_offset_delta}] and count of "
                             f"records {count}")
    if batch.is_control_batch:
        raise InvalidRecords("Clients are not allowed to write control records")
    if batch.has_producer_id() and batch.base_sequence < 0:
        raise InvalidRecords(f"Invalid sequence number {batch.base_sequence} in record batch with producerId "
                             f"{batch.producer_id}")
    try:
        reader = iter(batch)  # decompresses the records (kafka.codec: gzip, python-snappy, lz4, zstandard)
    except Exception as exc:  # a codec's own error: Kafka's KafkaException "Failed to decompress", no ApiException
        raise InvalidRecords(f"cannot decompress the {codec.name.lower()} records: {exc}",
                             Code.UNKNOWN_SERVER_ERROR) from None
    try:
        read = [(r.key, r.value, r.timestamp, r.size_in_bytes) for r in reader]
    except Exception as exc:  # DefaultRecord.readFrom: InvalidRecordException "Found invalid record structure"
        raise InvalidRecords(f"Found invalid record structure: {exc}") from None
    if len(read) != count:
        raise InvalidRecords(f"the batch header says {count} records, it holds {len(read)}")
    if codec is not Codec.NONE and max_decompressed_bytes is not None:
        for i, (_, _, _, size) in enumerate(read):
            whole = size + _varint_size(size)  # DefaultRecord.sizeInBytes: the length varint and the body
            if whole > max_decompressed_bytes:
                raise InvalidRecords(f"Record {i} is {whole} bytes after decompression, more than "
                                     f"max.decompressed.message.bytes {max_decompressed_bytes}")
    if compacted:
        missing = tuple((i, "Compacted topic cannot accept message without key") for i, r in enumerate(read)
                        if r[0] is None)
        if missing:
            raise InvalidRecords(f"One or more records have been rejected due to {len(missing)} record errors in "
                                 f"total, and only showing the first three errors at most: {list(missing[:3])}",
                                 Code.INVALID_RECORD, missing)
    records = tuple(Record(None if k is None else bytes(k), None if v is None else bytes(v), int(t))
                    for k, v, t, _ in read)
    return ProducedBatch(int(batch.producer_id), int(batch.producer_epoch), int(batch.base_sequence),
                         bool(batch.is_transactional), records, codec, len(data))


_BROKER_CODECS = {"uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4,
                  "zstd": Codec.ZSTD}


def target_codec(compression_type: str, source: Codec) -> Codec:
    """``BrokerCompressionType.targetCompression``: the topic's ``compression.type``, or the producer's own."""
    return source if compression_type == "producer" else _BROKER_CODECS[compression_type]


_ENCODERS = {Codec.GZIP: codec.gzip_encode, Codec.SNAPPY: codec.snappy_encode, Codec.LZ4: codec.lz4_encode,
             Codec.ZSTD: codec.zstd_encode}


def recompress(data: bytes, target: Codec) -> bytes:
    """A validated batch rewritten with ``target`` (``LogValidator.buildRecordsAndAssignOffsets``): the same
    producer fields, records, timestamps and headers, consecutive offset deltas, a new CRC32C; compressed even
    when that does not make it smaller (Kafka always writes the topic's codec)."""
    batch = DefaultRecordBatch(data)
    builder = DefaultRecordBatchBuilder(2, 0, batch.is_transactional, batch.producer_id, batch.producer_epoch,
                                        batch.base_sequence, 1 << 31)
    for i, r in enumerate(batch):
        builder.append(i, r.timestamp, r.key, r.value, list(r.headers))
    out = builder.build()
    if target is not Codec.NONE:
        out[HEADER_BYTES:] = _ENCODERS[target](bytes(out[HEADER_BYTES:]))
        struct.pack_into(">i", out, 8, len(out) - 12)
        (attributes,) = struct.unpack_from(">h", out, _ATTRIBUTES_AT)
        struct.pack_into(">h", out, _ATTRIBUTES_AT, (attributes & ~0x07) | int(target))
        struct.pack_into(">I", out, _CRC_AT, calc_crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


def as_stored(data: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """A produced batch as the log holds it (``LogValidator`` without recompression): the client's bytes with
    the base offset and partition leader epoch the broker assigns, neither covered by the CRC."""
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


def _as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def encode_batch(batch: RecordBatch) -> bytes:
    """``batch`` as the v2 bytes a Fetch response carries, at its base offset."""
    builder = DefaultRecordBatchBuilder(2, 0, batch.is_transactional, batch.producer_id, batch.producer_epoch,
                                        batch.base_sequence, 1 << 30)
    if batch.control_type is not None:
        key = struct.pack(">hh", 0, batch.control_type.value)
        value = struct.pack(">hi", 0, batch.coordinator_epoch)
        builder.append(0, batch.timestamp, key, value, [])
    else:
        for i, r in enumerate(batch.records):
            builder.append(i, r.timestamp, _as_bytes(r.key), _as_bytes(r.value), [])
    out = builder.build()
    struct.pack_into(">q", out, 0, batch.base_offset)
    if batch.control_type is not None:
        (attributes,) = struct.unpack_from(">h", out, _ATTRIBUTES_AT)
        struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes | _CONTROL)
        struct.pack_into(">I", out, _CRC_AT, calc_crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


def control_type_of(data: bytes) -> ControlType | None:
    """The marker type of an encoded control batch (tests and debugging)."""
    batch = DefaultRecordBatch(data)
    if not batch.is_control_batch:
        return None
    return ControlType.ABORT if any(getattr(r, "abort", False) for r in batch) else ControlType.COMMIT
