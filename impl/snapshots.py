"""Producer-state snapshot files: ``<offset>.snapshot`` beside a partition's segment, written atomically, the
newest readable one loaded at recovery.

Follows Kafka TRUNK ``storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerStateManager.java``
(``takeSnapshot``, ``writeSnapshot`` with its CRC, ``deleteSnapshotsBefore``, ``latestSnapshotFile``; a
snapshot that does not read is skipped, ``CorruptSnapshotException``, and the log replayed instead).

Assumed: one snapshot is kept (older ones are deleted once a newer one is written); the snapshot holds the
producer state and the aborted-transactions index (:meth:`txnspec.impl.partition.Partition.snapshot`), as JSON
in one CRC frame (:mod:`txnspec.impl.frames`). Its warnings go to ``txnspec.impl.storage``'s logger, with
recovery's. Left out: snapshots at segment rolls (there is one segment), the snapshot file's binary schema.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from typing import Any

from txnspec.impl import durability as _durability
from txnspec.impl.checkpoint import atomic_write
from txnspec.impl.durability import Durability
from txnspec.impl.frames import HEADER, frame
from txnspec.impl.partition import Partition

log = logging.getLogger("txnspec.impl.storage")


def write_snapshot(data_dir: str, p: Partition, policy: Durability | None = None) -> str:
    """Write ``<log end offset>.snapshot`` (producer state + aborted index), CRC-framed, atomically."""
    snap = p.snapshot()
    path = os.path.join(data_dir, p.name, f"{int(snap['offset']):020d}.snapshot")  # type: ignore[call-overload]
    atomic_write(path, frame(json.dumps(snap).encode()), policy or _durability.DEFAULT)
    for old in os.listdir(os.path.join(data_dir, p.name)):
        if old.endswith(".snapshot") and os.path.join(data_dir, p.name, old) != path:
            os.remove(os.path.join(data_dir, p.name, old))
    return path


def _snapshot_offset(name: str) -> int | None:
    stem = name[:-len(".snapshot")]
    return int(stem) if stem.isdigit() else None


def latest_snapshot(directory: str, log_end_offset: int, policy: Durability | None = None) -> dict[str, Any] | None:
    """The newest valid snapshot at or below ``log_end_offset``. A damaged or unreadable one is skipped with a
    warning: a snapshot only saves work, the log replayed from its start rebuilds the same state."""
    check = (policy or _durability.DEFAULT).check_snapshot_checksum
    names = sorted((n for n in os.listdir(directory) if n.endswith(".snapshot")), reverse=True)
    for name in names:
        path = os.path.join(directory, name)
        offset = _snapshot_offset(name)
        if offset is None or offset > log_end_offset:
            continue
        why = "unreadable"
        try:
            with open(path, "rb") as f:
                data = f.read()
            length, crc = HEADER.unpack_from(data, 0) if len(data) >= HEADER.size else (-1, 0)
            payload = data[HEADER.size:]
            if len(payload) != length or (check and zlib.crc32(payload) != crc):
                why = "its checksum fails"
            else:
                snap = json.loads(payload.decode("utf-8"))
                if isinstance(snap, dict) and snap.get("offset") == offset:
                    return snap
                why = "its contents do not match its name"
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            why = f"unreadable ({exc})"
        log.warning("recovery: snapshot %s ignored, %s (the log is replayed instead)", path, why)
    return None


__all__ = ["latest_snapshot", "write_snapshot"]
