"""Record batches on the wire: v2 (``DefaultRecordBatch``, CRC32C) to and from the implementation's batches.

A Produce request carries, per partition, the bytes of record batches as a client built them; Kafka's
``LogValidator`` accepts exactly one v2 batch per partition from a v3+ Produce and checks its CRC32C
(``DefaultRecordBatch.ensureValid``). :func:`decode_produce` does the same with kafka-python's
``DefaultRecordBatch`` (which also decompresses) and returns the fields
:class:`txnspec.impl.messages.Produce` needs. :func:`encode_batch` writes a stored
:class:`txnspec.impl.log.RecordBatch` back as Kafka's ``MemoryRecords`` would hold it: the broker-assigned
base offset, control batches (transaction markers: attribute bit 5, key ``version=0, type``, value
``version=0, coordinatorEpoch``, as ``EndTransactionMarker``), CRC32C over attributes..end.

A fetched data batch is the client's own bytes (:func:`as_stored`: headers and compression kept, as Kafka
keeps them) while the server runs; batches it did not receive in this run (markers, batches recovered from
``--durable``) are written by :func:`encode_batch`. Left out: record headers and compression of recovered
batches (the implementation's :class:`~txnspec.impl.log.Record` keeps key, value and timestamp only), message
formats v0/v1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from txnspec.impl.log import ControlType, Record, RecordBatch

HEADER_BYTES = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
_ATTRIBUTES_AT = 21
_CRC_AT = 17
_CONTROL = 0x20
_MAGIC_AT = 16


class InvalidRecords(ValueError):
    """The records of a Produce request are not one valid v2 batch (Kafka answers INVALID_RECORD or
    CORRUPT_MESSAGE); the message names what was wrong."""

    def __init__(self, message: str, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


@dataclass(frozen=True)
class ProducedBatch:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    records: tuple[Record, ...]


def decode_produce(data: bytes | None) -> ProducedBatch:
    """The single v2 batch of a Produce partition (``LogValidator.validateBatch`` / ``ensureValid``)."""
    if not data:
        raise InvalidRecords("the partition's records are empty")
    if len(data) < HEADER_BYTES:
        raise InvalidRecords(f"{len(data)} bytes is shorter than a record batch header ({HEADER_BYTES})", True)
    magic = data[_MAGIC_AT]
    if magic != 2:
        raise InvalidRecords(f"record batch magic {magic}: only v2 batches are accepted from Produce v3+")
    (batch_length,) = struct.unpack_from(">i", data, 8)
    if batch_length + 12 != len(data):
        raise InvalidRecords("a Produce partition must hold exactly one record batch "
                             f"(batch length {batch_length + 12}, records {len(data)} bytes)",
                             corrupt=batch_length + 12 > len(data))
    batch = DefaultRecordBatch(bytes(data))
    if not batch.validate_crc():
        raise InvalidRecords("the record batch's CRC32C does not match its contents", True)
    if batch.is_control_batch:
        raise InvalidRecords("clients may not produce control batches")
    try:
        records = tuple(Record(None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
                               int(r.timestamp)) for r in batch)
    except Exception as exc:  # a record inside the batch that does not parse (after a valid CRC: a bad client)
        raise InvalidRecords(f"cannot read the batch's records: {exc}", True) from None
    if len(records) != batch.records_count or not records:
        raise InvalidRecords(f"the batch header says {batch.records_count} records, it holds {len(records)}", True)
    return ProducedBatch(int(batch.producer_id), int(batch.producer_epoch), int(batch.base_sequence),
                         bool(batch.is_transactional), records)


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
