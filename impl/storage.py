"""Durable storage: append-only segment files with per-batch CRC32, producer-state snapshots, recovery.

Follows Kafka's ``FileRecords`` / ``LogSegment`` (batches appended to a file, each with a length and a CRC:
``DefaultRecordBatch``'s CRC32C here CRC32), ``LogSegment.recover`` (read forward, truncate at the first
invalid batch), ``ProducerStateManager`` snapshot files (``<offset>.snapshot``, written atomically) and
``UnifiedLog.rebuildProducerState`` (load the latest snapshot not beyond the log end, replay the batches after it).

Layout of ``data_dir``: one directory per partition holding ``00000000000000000000.log`` (frames: 4-byte
big-endian length, 4-byte CRC32 of the payload, payload = the batch as JSON) and ``<offset>.snapshot`` files;
``producer_ids`` holds the end of the reserved producer-id block, so ids are never handed out twice.

Writes are whole or nothing: :meth:`SegmentStore.append` loops on short writes and, if the disk refuses
(full, a file-size limit, an I/O error), cuts the file back to its last whole frame and raises
:class:`StorageError`; the caller's in-memory state is untouched. If the file cannot be cut back, or an
``fsync`` fails (its pages may be lost, so nothing written since the last good ``fsync`` can be trusted), the
store goes offline until the broker restarts and recovery runs, as Kafka takes a failed log directory offline.

Recovery tells a crash from damage. A frame whose declared length runs past the end of the file (or a header
cut short) is what a crash leaves, a torn tail: it is truncated and logged with its size. A complete frame
whose CRC fails or that does not decode, a frame at an offset out of sequence, a first frame that is not at
the log start offset, a segment shorter than its recovery point, a missing segment of a partition the
checkpoints list (:mod:`txnspec.impl.checkpoint`): no crash explains them, with fsync on or off. Opening
fails with :class:`CorruptDataError` naming the file and byte offset, unless the caller asks for recovery
(``recover_corruption=True``), which truncates there as ``LogSegment.recover`` does and reports the frames
dropped and the transactions they belong to (:class:`RecoveryReport`). A producer-id block that is not a
number, or lower than an id already in the logs, is also :class:`CorruptDataError`: ids must never be reused.
Snapshots carry a CRC32; a damaged or unreadable one is ignored with a warning and the log replayed.
Every mechanism reads its switch from a :class:`~txnspec.impl.durability.Durability` policy and makes its
system calls through the policy's ``FileOps``.

Parts of their own: the frame format (:mod:`txnspec.impl.frames`), the snapshot files
(:mod:`txnspec.impl.snapshots`), the producer-id block file (:mod:`txnspec.impl.producer_id_block`).

Durability: with ``fsync=False`` an acknowledged append is in the operating system's page cache, so it
survives the process being killed (SIGKILL) but not power loss; with ``fsync=True`` every append, snapshot and
producer-id block is fsync'd (and new files' directories) before it is acknowledged, and the recovery-point
checkpoint follows every append; with ``fsync=False`` it moves on ``flush``/``close``.
Left out: segment rolling, indexes, retention.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txnspec.impl import durability as _durability
from txnspec.impl.checkpoint import Checkpoints, CorruptDataError, StorageError
from txnspec.impl.durability import Durability
from txnspec.impl.frames import HEADER, encode_batch, frame, frames_after, is_torn, read_frame
from txnspec.impl.log import RecordBatch
from txnspec.impl.partition import Partition
from txnspec.impl.snapshots import latest_snapshot
from txnspec.impl.topic_partition import TopicPartition

BASE_OFFSET = 0  # one segment, from the log start
SEGMENT = f"{BASE_OFFSET:020d}.log"  # LogFileUtils.logFile: the base offset, 20 digits
log = logging.getLogger("txnspec.impl.storage")


@dataclass(frozen=True)
class RecoveryReport:
    """What recovery cut from one segment: a torn tail, or (asked for) everything from a corrupt frame on."""

    path: str
    position: int  # the file now ends here
    dropped_bytes: int
    reason: str
    corrupt: bool  # valid frames followed the bad one (only reported when recovery was asked for)
    dropped_frames: int = 0  # valid frames after the bad one, dropped with it
    first_dropped_offset: int | None = None
    transactions: tuple[tuple[int, int], ...] = ()  # (producer id, epoch) of dropped transactional batches
    markers: tuple[tuple[int, int, str], ...] = ()  # (producer id, epoch, COMMIT|ABORT) of dropped markers
    transactional_ids: tuple[str, ...] = ()  # keys of dropped transaction-log records

    def __str__(self) -> str:
        if not self.corrupt:
            return f"{self.path}: truncated a torn tail of {self.dropped_bytes} bytes at byte {self.position} " \
                   f"({self.reason})"
        parts = [f"{self.path}: {self.reason} at byte {self.position}: dropped {self.dropped_bytes} bytes, "
                 f"{self.dropped_frames} valid frames after it (from offset {self.first_dropped_offset})"]
        if self.transactions:
            parts.append(f"transactional batches of (producer id, epoch) {list(self.transactions)}")
        if self.markers:
            parts.append(f"markers {list(self.markers)}")
        if self.transactional_ids:
            parts.append(f"transactional ids {list(self.transactional_ids)}")
        return "; ".join(parts)


FailureSink = Callable[[StorageError], None]


class SegmentStore:
    """One partition's segment file (a :class:`txnspec.impl.log.BatchStore`)."""

    def __init__(self, directory: str, fsync: bool = False, failures: FailureSink | None = None,
                 policy: Durability | None = None, checkpoints: Checkpoints | None = None) -> None:
        self.policy = policy or _durability.DEFAULT
        self.ops = self.policy.ops
        self.directory = directory
        base = os.path.basename(os.path.normpath(directory))  # Kafka's parseTopicPartitionName of its directory
        self.name = TopicPartition.parse(base) or base
        self.path = os.path.join(directory, SEGMENT)
        self.base_offset = BASE_OFFSET
        self.fsync = fsync
        self.failures = failures
        self.checkpoints = checkpoints
        self.positions: list[tuple[int, int]] = []  # (base offset, file position)
        self.size = 0
        self.offline: str | None = None  # why the store refuses writes until a restart
        self.recovery: RecoveryReport | None = None
        self._fd: int | None = None
        try:
            created = not os.path.isdir(directory)
            os.makedirs(directory, exist_ok=True)
            new_file = not os.path.exists(self.path)
            self.missing = new_file and checkpoints is not None and checkpoints.known(self.name)
            self._fd = self.ops.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            if fsync and new_file:
                self._sync(self._fd)
                self._sync_dir(directory)
                if created:
                    self._sync_dir(os.path.dirname(os.path.abspath(directory)))
        except OSError as exc:
            self.close()
            raise StorageError(exc.filename or self.path, f"opening the segment failed: {exc.strerror or exc}") \
                from exc

    def _sync(self, fd: int) -> None:
        if self.policy.fsync_files:
            self.ops.fsync(fd)

    def _sync_dir(self, path: str) -> None:
        if self.policy.fsync_directories:
            self.ops.fsync_dir(path)

    def recover(self, recover_corruption: bool = False, log_start: int | None = None,
                recovery_point: int = 0) -> list[RecordBatch]:
        """Read every valid batch; truncate a torn tail; fail on damage unless asked to recover it."""
        with open(self.path, "rb") as f:
            data = f.read()
        # a log start above the segment's base is DeleteRecords': the frames below it are still in the file
        start = self.base_offset if log_start is None else min(log_start, self.base_offset)
        batches: list[RecordBatch] = []
        self.positions = []
        pos = 0
        reason = ""
        if self.missing:
            reason = f"segment missing although {self.name} is in the checkpoints (starts at offset {start})"
        while pos < len(data) and not reason:
            batch, reason = read_frame(data, pos, self.policy.check_frame_crc)
            due = batches[-1].next_offset if batches else start
            if batch is not None and batch.base_offset != due:
                reason = f"base offset {batch.base_offset} where {due} was due" + (
                    " (the first frame is missing)" if not batches else "")
                batch = None
            if batch is None:
                break
            self.positions.append((batch.base_offset, pos))
            batches.append(batch)
            pos += HEADER.size + HEADER.unpack_from(data, pos)[0]
        self.size = pos
        end = batches[-1].next_offset if batches else start
        torn = pos < len(data) and is_torn(reason)
        if (not reason or torn) and end < recovery_point:
            reason = f"log ends at offset {end} below its recovery point {recovery_point} (fsync'd data is gone)"
            torn = False
        if not reason:
            return batches
        later = frames_after(data, pos) if pos < len(data) else []
        torn = torn and not later  # valid frames after a torn one: no crash leaves that
        if not torn and not recover_corruption:
            more = f" followed by {len(later)} valid frames" if later else ""
            raise CorruptDataError(self.path, pos, f"{reason}{more} (damage, not a crash); open with "
                                   "recover_corruption=True to truncate there")
        self.recovery = _report(self.path, pos, len(data) - pos, reason, later, corrupt=not torn)
        log.warning("recovery: %s", self.recovery)
        if pos < len(data):
            os.truncate(self.path, pos)
        return batches

    def append(self, batch: RecordBatch) -> None:
        """Write ``batch`` whole (looping on short writes) or not at all; :class:`StorageError` if not."""
        if self.offline is not None:
            raise StorageError(self.path, f"offline since an earlier failure ({self.offline}); restart to recover")
        assert self._fd is not None, "append to a closed segment"
        data = memoryview(frame(encode_batch(batch)))
        start = self.size
        written = 0
        try:
            while written < len(data):
                n = self.ops.write(self._fd, data[written:])
                if n <= 0:
                    raise OSError(errno.EIO, "write wrote nothing")
                written += n
                if not self.policy.loop_short_writes:
                    break
        except OSError as exc:
            self._fail(start, f"append of offset {batch.base_offset} failed after {written} of {len(data)} "
                              f"bytes: {exc.strerror or exc}")
        if self.fsync:
            try:
                self._sync(self._fd)
            except OSError as exc:
                self._fail(start, f"fsync after offset {batch.base_offset} failed: {exc.strerror or exc}",
                           offline=True)
        self.positions.append((batch.base_offset, start))
        self.size = start + len(data)
        if self.fsync and self.checkpoints is not None:
            self.checkpoints.advance({self.name: batch.next_offset})

    def _fail(self, cut: int, message: str, offline: bool = False) -> None:
        """Cut the file back to ``cut`` (its last whole frame) and raise; offline if that is not possible."""
        try:
            os.ftruncate(self._fd, cut)  # type: ignore[arg-type]
        except OSError as exc:
            offline = True
            message += f"; cutting the file back to byte {cut} failed too: {exc.strerror or exc}"
        if offline:
            self.offline = message
        error = StorageError(self.path, message, self.name)
        if self.failures is not None:
            self.failures(error)
        raise error

    def truncate_to(self, offset: int) -> None:
        keep = [(o, p) for o, p in self.positions if o < offset]
        cut = self.positions[len(keep)][1] if len(keep) < len(self.positions) else None
        if cut is not None:
            if self.checkpoints is not None:  # lowered first: a crash between the two never looks like damage
                self.checkpoints.lower(self.name, self.positions[len(keep)][0])
            os.ftruncate(self._fd, cut)  # type: ignore[arg-type]
            self.size = cut
        self.positions = keep

    def flush(self) -> None:
        """fsync the segment (always: a flush or a clean close is when a non-fsync store makes data durable)."""
        if self._fd is not None and self.policy.fsync_files:
            self.ops.fsync(self._fd)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self.ops.close(fd)


def _report(path: str, position: int, dropped: int, reason: str,
            later: list[tuple[int, RecordBatch]], corrupt: bool) -> RecoveryReport:
    batches = [b for _, b in later]
    return RecoveryReport(
        path, position, dropped, reason, corrupt=corrupt, dropped_frames=len(later),
        first_dropped_offset=batches[0].base_offset if batches else None,
        transactions=tuple(sorted({(b.producer_id, b.producer_epoch) for b in batches
                                   if b.is_transactional and not b.is_control})),
        markers=tuple((b.producer_id, b.producer_epoch, b.control_type.name) for b in batches
                      if b.control_type is not None),
        transactional_ids=tuple(sorted({str(r.key) for b in batches if b.producer_id < 0 for r in b.records
                                        if isinstance(r.key, str) and "__transaction_state" in path})))


def partition_dirs(data_dir: str) -> list[str]:
    """The partitions found on disk, by their directories' names (``LogManager.loadLogs``)."""
    dirs = (d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d)))
    return sorted(TopicPartition.parse(d) or d for d in dirs)


def open_partition(data_dir: str, name: str, kwargs: dict[str, Any], fsync: bool = False,
                   failures: FailureSink | None = None, recover_corruption: bool = False,
                   policy: Durability | None = None, checkpoints: Checkpoints | None = None) -> Partition:
    """Open (and recover) a partition's directory: valid batches, producer state from snapshot + replay."""
    policy = policy or _durability.DEFAULT
    directory = os.path.join(data_dir, name)
    store = SegmentStore(directory, fsync, failures, policy, checkpoints)
    try:
        known = checkpoints is not None and checkpoints.known(name)
        batches = store.recover(recover_corruption,
                                checkpoints.log_starts.get(name) if checkpoints is not None and known else None,
                                checkpoints.recovery_points.get(name, 0) if checkpoints is not None else 0)
        p = Partition(name, store=store, **kwargs)
        start = batches[0].base_offset if batches else store.base_offset
        if checkpoints is not None and known:
            start = checkpoints.log_starts.get(name, start)
        p.log.log_start_offset = start
        p.log.batches = batches
        p.log._bases = [b.base_offset for b in batches]
        p.log._end = batches[-1].next_offset if batches else start
        snap = latest_snapshot(directory, p.log_end_offset, policy)
        if snap is not None and not policy.restore_aborted_index:
            snap = {k: v for k, v in snap.items() if k != "aborted"}
        try:
            p.rebuild_producer_state(snap)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            log.warning("recovery: snapshot of %s ignored, its contents do not load (%r); the log is replayed",
                        directory, exc)
            p.rebuild_producer_state(None)
    except BaseException:
        store.close()
        raise
    return p


__all__ = ["CorruptDataError", "RecoveryReport", "SegmentStore", "StorageError", "open_partition", "partition_dirs"]
