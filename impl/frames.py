"""The on-disk format of a partition's segment: a record batch as bytes, and the frame around it (length and
CRC), read back with the reason a frame is not whole.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/common/record/DefaultRecordBatch.java`` (a batch
carries its length and a checksum of what follows: CRC32C there, CRC32 here; ``ensureValid``) and
``FileRecords.java`` / ``FileLogInputStream`` (batches read forward from a position; a header or a batch cut
short ends the readable part). How recovery uses the reasons is :mod:`txnspec.impl.storage`.

Assumed: a frame is a 4-byte big-endian length, a 4-byte CRC32 of the payload, and the payload: the batch as
JSON opening with its base offset (``{"o":``), which is how :func:`frames_after` finds frames past damage.
Left out: Kafka's binary batch layout, compression, record headers.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

from txnspec.impl.log import ControlType, Record, RecordBatch, RecordValue

HEADER = struct.Struct(">II")
PAYLOAD_START = b'{"o":'  # every payload opens with its base offset (encode_batch): how a frame is found


def _enc(v: RecordValue) -> Any:
    if v is None:
        return None
    if isinstance(v, bytes):
        return ["b", base64.b64encode(v).decode("ascii")]
    return ["s", v]


def _dec(v: Any) -> RecordValue:
    if v is None:
        return None
    return base64.b64decode(v[1]) if v[0] == "b" else str(v[1])


def encode_batch(b: RecordBatch) -> bytes:
    return json.dumps({
        "o": b.base_offset, "p": b.producer_id, "e": b.producer_epoch, "s": b.base_sequence,
        "t": b.is_transactional, "c": None if b.control_type is None else b.control_type.value,
        "ce": b.coordinator_epoch, "ts": b.timestamp,
        "r": [[_enc(r.key), _enc(r.value), r.timestamp] for r in b.records]}, separators=(",", ":")).encode()


def decode_batch(raw: bytes) -> RecordBatch:
    d = json.loads(raw)
    return RecordBatch(d["o"], tuple(Record(_dec(k), _dec(v), ts) for k, v, ts in d["r"]), d["p"], d["e"], d["s"],
                       d["t"], None if d["c"] is None else ControlType(d["c"]), d["ce"], d["ts"])


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


TORN = ("incomplete frame header", "cut short")  # the reasons a crash explains (a torn tail)


def read_frame(data: bytes, pos: int, check_crc: bool = True) -> tuple[RecordBatch | None, str]:
    """The batch framed at ``pos``, or None and why not."""
    if pos + HEADER.size > len(data):
        return None, "incomplete frame header"
    length, crc = HEADER.unpack_from(data, pos)
    payload = data[pos + HEADER.size: pos + HEADER.size + length]
    if len(payload) != length:
        return None, f"frame of {length} bytes cut short"
    if check_crc and zlib.crc32(payload) != crc:
        return None, "CRC mismatch"
    try:
        return decode_batch(payload), ""
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, UnicodeDecodeError):
        return None, "undecodable batch"


def is_torn(reason: str) -> bool:
    return any(t in reason for t in TORN)


def frames_after(data: bytes, start: int) -> list[tuple[int, RecordBatch]]:
    """Valid frames beginning after ``start`` (found by their payload's opening bytes), in file order."""
    found: list[tuple[int, RecordBatch]] = []
    i = data.find(PAYLOAD_START, start + HEADER.size)
    while i >= 0:
        pos = i - HEADER.size
        batch, _ = read_frame(data, pos)
        if batch is not None:
            found.append((pos, batch))
            i = data.find(PAYLOAD_START, pos + HEADER.size + HEADER.unpack_from(data, pos)[0])
        else:
            i = data.find(PAYLOAD_START, i + 1)
    return found


__all__ = ["HEADER", "PAYLOAD_START", "TORN", "decode_batch", "encode_batch", "frame", "frames_after", "is_torn",
           "read_frame"]
