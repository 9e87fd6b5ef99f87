"""Durable storage: append-only segment files with per-batch CRC32, producer-state snapshots, recovery.

Follows the ideas of Kafka's ``FileRecords`` / ``LogSegment`` (batches appended to a file, each with a
length and a CRC: ``DefaultRecordBatch``'s CRC32C here CRC32), ``LogLoader.recoverSegment`` (read forward,
stop at the first incomplete or corrupt batch and truncate the file there), ``ProducerStateManager``
snapshot files (``<offset>.snapshot``, written atomically) and ``UnifiedLog.rebuildProducerState`` (load the
latest snapshot not beyond the log end, replay the batches after it).

Layout of ``data_dir``: one directory per partition holding ``00000000000000000000.log`` (frames:
4-byte big-endian length, 4-byte CRC32 of the payload, payload = the batch as JSON) and
``<offset>.snapshot`` files; ``producer_ids`` holds the end of the reserved producer-id block, so ids are
never handed out twice across restarts.

Assumed: the operating system keeps written bytes across a process crash (SIGKILL); ``fsync`` is used for
snapshots and the producer-id block (``fsync_appends=True`` also fsyncs every batch, against power loss).
Left out: segment rolling, indexes, retention.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from typing import Any

from txnspec.impl.log import ControlType, Record, RecordBatch, RecordValue
from txnspec.impl.partition import Partition

_HEADER = struct.Struct(">II")
SEGMENT = "00000000000000000000.log"
PID_BLOCK_SIZE = 1000


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
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


class SegmentStore:
    """One partition's segment file (a :class:`txnspec.impl.log.BatchStore`)."""

    def __init__(self, directory: str, fsync_appends: bool = False) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.path = os.path.join(directory, SEGMENT)
        self.fsync_appends = fsync_appends
        self.positions: list[tuple[int, int]] = []  # (base offset, file position)
        self.truncated_bytes = 0
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def recover(self) -> list[RecordBatch]:
        """Read every valid batch; truncate a torn or corrupt tail (``LogLoader.recoverSegment``)."""
        with open(self.path, "rb") as f:
            data = f.read()
        batches: list[RecordBatch] = []
        self.positions = []
        pos = 0
        expected_offset: int | None = None
        while pos + _HEADER.size <= len(data):
            length, crc = _HEADER.unpack_from(data, pos)
            payload = data[pos + _HEADER.size: pos + _HEADER.size + length]
            if len(payload) != length or zlib.crc32(payload) != crc:
                break
            try:
                batch = decode_batch(payload)
            except (ValueError, KeyError, TypeError, IndexError):
                break
            if expected_offset is not None and batch.base_offset != expected_offset:
                break
            self.positions.append((batch.base_offset, pos))
            batches.append(batch)
            expected_offset = batch.next_offset
            pos += _HEADER.size + length
        if pos < len(data):
            self.truncated_bytes = len(data) - pos
            os.truncate(self.path, pos)
        return batches

    def append(self, batch: RecordBatch) -> None:
        pos = os.lseek(self._fd, 0, os.SEEK_END)
        os.write(self._fd, frame(encode_batch(batch)))
        self.positions.append((batch.base_offset, pos))
        if self.fsync_appends:
            os.fsync(self._fd)

    def truncate_to(self, offset: int) -> None:
        keep = [(o, p) for o, p in self.positions if o < offset]
        cut = self.positions[len(keep)][1] if len(keep) < len(self.positions) else None
        if cut is not None:
            os.truncate(self.path, cut)
        self.positions = keep

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def partition_dirs(data_dir: str) -> list[str]:
    return sorted(d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d)))


def _atomic_write(path: str, payload: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_snapshot(data_dir: str, p: Partition) -> str:
    """Write ``<log end offset>.snapshot`` (producer state + aborted index), CRC-framed, atomically."""
    snap = p.snapshot()
    path = os.path.join(data_dir, p.name, f"{int(snap['offset']):020d}.snapshot")  # type: ignore[call-overload]
    _atomic_write(path, frame(json.dumps(snap).encode()))
    for old in os.listdir(os.path.join(data_dir, p.name)):
        if old.endswith(".snapshot") and os.path.join(data_dir, p.name, old) != path:
            os.remove(os.path.join(data_dir, p.name, old))
    return path


def latest_snapshot(directory: str, log_end_offset: int) -> dict[str, Any] | None:
    """The newest valid snapshot at or below ``log_end_offset`` (a corrupt one is ignored)."""
    names = sorted((n for n in os.listdir(directory) if n.endswith(".snapshot")), reverse=True)
    for name in names:
        if int(name.split(".")[0]) > log_end_offset:
            continue
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        if len(data) < _HEADER.size:
            continue
        length, crc = _HEADER.unpack_from(data, 0)
        payload = data[_HEADER.size:]
        if len(payload) == length and zlib.crc32(payload) == crc:
            snap: dict[str, Any] = json.loads(payload)
            return snap
    return None


def open_partition(data_dir: str, name: str, kwargs: dict[str, int], fsync_appends: bool = False) -> Partition:
    """Open (and recover) a partition's directory: valid batches, producer state from snapshot + replay."""
    directory = os.path.join(data_dir, name)
    store = SegmentStore(directory, fsync_appends)
    batches = store.recover()
    p = Partition(name, store=store, **kwargs)
    p.log.batches = batches
    p.log._bases = [b.base_offset for b in batches]
    p.log._end = batches[-1].next_offset if batches else p.log.log_start_offset
    p.rebuild_producer_state(latest_snapshot(directory, p.log_end_offset))
    return p


class ProducerIdBlockFile:
    """Producer ids are reserved in blocks; the block end is written (fsync'd) before an id of it is used."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.block_end = 0
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            self.block_end = int(text) if text.isdigit() else 0

    def start(self) -> int:
        """The first id this run may use: the end of the last reserved block (ids before it may be used)."""
        return self.block_end

    def reserve(self, next_id: int) -> None:
        """Called after each allocation with the next id; reserve a new block when it runs out."""
        if next_id > self.block_end:
            self.block_end = next_id - 1 + PID_BLOCK_SIZE
            _atomic_write(self.path, str(self.block_end).encode())


__all__ = ["SegmentStore", "decode_batch", "encode_batch", "latest_snapshot", "open_partition", "partition_dirs",
           "write_snapshot"]
