"""Per-partition checkpoints of a data directory: what must be there when the broker opens it again.

Follows Kafka's ``OffsetCheckpointFile`` (``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint`` in each log directory, written by ``LogManager``): text lines
``0`` (version), the entry count, then ``topic partition offset``; written atomically (temporary file,
fsync, rename, directory fsync). The recovery point of a partition is the offset below which its segment was
fsync'd; the log start offset is its first offset.

What they make detectable on open: a partition directory or segment file that is gone although the
checkpoint lists the partition, a segment whose first frame is missing (its first offset is not the log
start offset), and a segment shorter than its recovery point. What they cannot: a cut exactly at a frame
boundary above the recovery point (with ``fsync=False`` the recovery point only moves on ``flush``/``close``),
and the loss of the checkpoint files themselves together with what they describe (a missing checkpoint file
is taken as a directory written before checkpoints existed, with a warning).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field

from txnspec.impl.durability import Durability
from txnspec.impl.errors import KafkaStorageException
from txnspec.impl.topic_partition import TopicPartition

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
VERSION = 0
log = logging.getLogger("txnspec.impl.storage")


class CorruptDataError(KafkaStorageException):
    """A file of the data directory is damaged in a way no crash explains; names the file and byte offset."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path}: {reason} at byte {position}")
        self.path = path
        self.position = position
        self.reason = reason


class StorageError(KafkaStorageException):
    """A write to (or an open of) the data directory failed (``KAFKA_STORAGE_ERROR``); names the path (and the
    partition whose segment it is, if one)."""

    def __init__(self, path: str, message: str, partition: str | None = None) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.partition = partition


def atomic_write(path: str, payload: bytes, policy: Durability, fsync: bool = True, sync_dir: bool = True) -> None:
    """Write ``payload`` to ``path`` whole or leave the old file: a (fsync'd) temporary file renamed over it,
    the rename made durable by a directory fsync unless ``sync_dir`` is off (then power loss may bring back
    the old file, whole)."""
    tmp = path + ".tmp"
    ops = policy.ops
    try:
        fd = ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[ops.write(fd, view):]
            if fsync and policy.fsync_files:
                ops.fsync(fd)
        finally:
            ops.close(fd)
        ops.replace(tmp, path)
        if fsync and sync_dir and policy.fsync_directories:
            ops.fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise StorageError(path, f"writing it failed: {exc.strerror or exc}") from exc


def read_checkpoint(path: str) -> dict[str, int] | None:
    """The entries of one checkpoint file (None if it does not exist); :class:`CorruptDataError` if malformed."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(path, f"reading it failed: {exc.strerror or exc}") from exc
    try:
        lines = raw.decode("ascii").splitlines()
        if int(lines[0]) != VERSION:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        entries: dict[str, int] = {}
        for line in lines[2:]:
            topic, number, offset = line.split(" ")
            if not topic or int(number) < 0 or int(offset) < 0:
                raise ValueError(line)
            entries[TopicPartition(topic, int(number))] = int(offset)
        if len(entries) != count:
            raise ValueError(f"{count} entries announced, {len(entries)} found")
    except (UnicodeDecodeError, ValueError, IndexError) as exc:
        raise CorruptDataError(path, 0, f"malformed checkpoint ({exc})") from exc
    return entries


def render(entries: dict[str, int]) -> bytes:
    lines = [str(VERSION), str(len(entries))]
    typed = ((TopicPartition.of(name), offset) for name, offset in entries.items())
    parts = sorted((tp.topic, tp.partition, offset) for tp, offset in typed)
    lines += [f"{t} {n} {o}" for t, n, o in parts]
    return ("\n".join(lines) + "\n").encode("ascii")


@dataclass
class Checkpoints:
    """The two checkpoint files of a data directory, kept in memory and rewritten when they change."""

    data_dir: str
    policy: Durability
    fsync: bool = False
    recovery_points: dict[str, int] = field(default_factory=dict)
    log_starts: dict[str, int] = field(default_factory=dict)
    found: bool = True  # the files existed when the directory was opened

    @classmethod
    def load(cls, data_dir: str, policy: Durability, fsync: bool) -> Checkpoints:
        rp = read_checkpoint(os.path.join(data_dir, RECOVERY_POINT))
        ls = read_checkpoint(os.path.join(data_dir, LOG_START))
        cp = cls(data_dir, policy, fsync, rp or {}, ls or {}, found=rp is not None)
        if rp is None and any(os.path.isdir(os.path.join(data_dir, d)) for d in os.listdir(data_dir)):
            log.warning("recovery: %s is missing: a lost segment or first frame cannot be detected this time",
                        os.path.join(data_dir, RECOVERY_POINT))
        return cp

    def known(self, name: str) -> bool:
        return name in self.recovery_points or name in self.log_starts

    def add(self, name: str, log_start: int = 0) -> None:
        if name not in self.recovery_points:
            self.recovery_points[name] = log_start
            self.log_starts[name] = log_start
            self.write()

    def lower(self, name: str, offset: int) -> None:
        """Before a segment is cut back to ``offset``: the recovery point must not stay above it."""
        if self.recovery_points.get(name, 0) > offset:
            self.recovery_points[name] = offset
            self.write(log_start=False, strict=True)

    def advance(self, points: dict[str, int]) -> None:
        """Segments were fsync'd up to these offsets."""
        changed = {n: o for n, o in points.items() if self.recovery_points.get(n) != o}
        if changed:
            self.recovery_points.update(changed)
            # no directory fsync: after power loss the previous file, a lower recovery point, is safe; this
            # halves what the checkpoint adds to each fsync'd append
            self.write(log_start=False, sync_dir=False)

    def forget(self, name: str) -> None:
        self.recovery_points.pop(name, None)
        self.log_starts.pop(name, None)
        self.write()

    def write(self, log_start: bool = True, strict: bool = False, sync_dir: bool = True) -> None:
        """Rewrite the files. A failure is a warning unless ``strict``: a checkpoint only makes losses
        detectable, and an append already durable must not fail because its checkpoint could not follow
        (the recovery point stays lower, which is safe)."""
        try:
            if log_start:
                atomic_write(os.path.join(self.data_dir, LOG_START), render(self.log_starts), self.policy,
                             self.fsync)
            atomic_write(os.path.join(self.data_dir, RECOVERY_POINT), render(self.recovery_points), self.policy,
                         self.fsync, sync_dir)
        except StorageError as exc:
            if strict:
                raise
            log.warning("checkpoint not written: %s", exc)


__all__ = ["LOG_START", "RECOVERY_POINT", "Checkpoints", "CorruptDataError", "StorageError", "atomic_write",
           "read_checkpoint", "render"]
