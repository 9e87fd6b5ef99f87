r"""The broker's data directory (durable mode): opening it, checkpoints, snapshots, flush and close.

Follows Kafka's ``LogManager``: ``loadLogs`` opens every partition directory found (recovering each segment,
:mod:`txnspec.impl.storage`), a partition the checkpoints list whose directory is gone is data loss (refused
unless ``recover_corruption``), the recovery points and log starts are written as ``OffsetCheckpointFile``\s
(:mod:`txnspec.impl.checkpoint`), ``checkpoint`` flushes the segments and moves the recovery points to the log
ends. A failed write of the transaction log makes the coordinator reload it (as Kafka moves the coordinator away
from a failed log directory). The producer-id block file keeps ids from being handed out twice across restarts.

:class:`BrokerStorage` is the part of :class:`txnspec.impl.broker.Broker` that touches the disk; the broker's
request handling stays in :mod:`txnspec.impl.broker`. With ``data_dir`` None every method here is a no-op (or
never called): the broker lives in memory.

Left out: several log directories, segment rolling and retention (one segment per partition).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from txnspec.impl.checkpoint import Checkpoints, CorruptDataError, StorageError
from txnspec.impl.coordinator import TransactionCoordinator
from txnspec.impl.durability import Durability
from txnspec.impl.errors import KafkaStorageException
from txnspec.impl.internal_topics import TRANSACTION_STATE_TOPIC
from txnspec.impl.partition import Partition
from txnspec.impl.topic_partition import TopicPartition

if TYPE_CHECKING:
    from txnspec.impl.producer_id_block import ProducerIdBlockFile
    from txnspec.impl.storage import RecoveryReport


class BrokerStorage:
    """The broker's durable side (see the module docstring): mixed into :class:`~txnspec.impl.broker.Broker`."""

    config: Any  # the broker's BrokerConfig
    data_dir: str | None
    fsync: bool
    durability: Durability
    checkpoints: Checkpoints | None
    partitions: dict[str, Partition]
    closed: bool
    _opening: bool
    storage_failures: list[KafkaStorageException]
    recovery_reports: list[RecoveryReport]
    txn_coordinator: TransactionCoordinator
    _txn_log_failed: bool
    _appends_since_snapshot: int
    _pid_block: ProducerIdBlockFile

    def _partition_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError  # the broker's

    def _open_data_dir(self, data_dir: str, recover_corruption: bool) -> tuple[int, Callable[[int], None]]:
        """Recover every partition found on disk (or listed in the checkpoints): the next producer id and how
        to reserve more. An OS error names its path (:class:`KafkaStorageException`)."""
        from txnspec.impl import storage
        from txnspec.impl.producer_id_block import ProducerIdBlockFile
        try:
            os.makedirs(data_dir, exist_ok=True)
            self.checkpoints = Checkpoints.load(data_dir, self.durability, self.fsync)
            self._pid_block = ProducerIdBlockFile(os.path.join(data_dir, "producer_ids"),
                                                  self._on_storage_failure, self.durability)
            names = set(storage.partition_dirs(data_dir))
            for name in sorted(set(self.checkpoints.recovery_points) - names):
                where = os.path.join(data_dir, name)
                if not recover_corruption:
                    raise CorruptDataError(where, 0, "partition directory missing although the checkpoints list "
                                           "it (open with recover_corruption=True to start it empty)")
                storage.log.warning("recovery: %s missing although the checkpoints list it; started empty", where)
                self.checkpoints.forget(name)
            for name in sorted(names):
                p = storage.open_partition(data_dir, name, self._partition_kwargs(), self.fsync,
                                           self._on_storage_failure, recover_corruption, self.durability,
                                           self.checkpoints)
                self.partitions[name] = p
                if isinstance(p.log.store, storage.SegmentStore) and p.log.store.recovery is not None:
                    self.recovery_reports.append(p.log.store.recovery)
        except OSError as exc:
            raise StorageError(exc.filename or data_dir, f"opening the data directory failed: "
                               f"{exc.strerror or exc}") from exc
        return self._pid_block.start(), self._pid_block.reserve

    def _checkpoint_all(self) -> None:
        """After opening: every partition is listed; recovery points at most the log ends (all of it with fsync,
        whose appends were fsync'd)."""
        cp = self.checkpoints
        if cp is None:
            return
        for name, p in self.partitions.items():
            if not cp.known(name):
                cp.recovery_points[name] = p.log_start_offset
                cp.log_starts[name] = p.log_start_offset
        points = {n: (p.log_end_offset if self.fsync else min(cp.recovery_points.get(n, 0), p.log_end_offset))
                  for n, p in self.partitions.items()}
        cp.recovery_points.update(points)
        cp.write(strict=True)  # a data directory that cannot take a checkpoint fails now, naming the file

    def _check_producer_id_block(self) -> None:
        """Every producer id in the logs must lie below the reserved block's end, or ids would be reused."""
        for name, p in self.partitions.items():
            pids = [b.producer_id for b in p.log.batches if b.has_producer_id]
            if pids:
                self._pid_block.check_above(max(pids), name)
        for tid, md in self.txn_coordinator.txn_manager.cache.items():
            self._pid_block.check_above(max(md.producer_id, md.prev_producer_id, md.next_producer_id),
                                        f"the transaction log (transactional id {tid!r})")

    def _on_storage_failure(self, error: KafkaStorageException) -> None:
        self.storage_failures.append(error)
        failed = TopicPartition.parse(getattr(error, "partition", None))
        if failed is not None and failed.topic == TRANSACTION_STATE_TOPIC:
            self._txn_log_failed = True

    def _after_storage_failure(self, now_ms: int) -> None:
        """A transaction-log write failed: the coordinator reloads from what the log holds (a new coordinator
        epoch; prepared transactions get their markers again), as Kafka moves the coordinator away from a
        failed log directory and the next one loads the log (``onElection``)."""
        if self._txn_log_failed and self.txn_coordinator.txn_manager.active:
            self._txn_log_failed = False
            self.txn_coordinator.load(self.txn_coordinator.coordinator_epoch + 1, now_ms)

    def _new_durable_partition(self, name: str) -> Partition:
        """A partition first used in durable mode: its directory opened (or created), listed in the checkpoints
        once the broker is open (partitions made while opening are checkpointed together, at the end)."""
        from txnspec.impl import storage
        assert self.data_dir is not None
        try:
            p = storage.open_partition(self.data_dir, name, self._partition_kwargs(), self.fsync,
                                       self._on_storage_failure, policy=self.durability, checkpoints=self.checkpoints)
        except OSError as exc:
            raise StorageError(exc.filename or self.data_dir, f"creating {name} failed: "
                               f"{exc.strerror or exc}") from exc
        if self.checkpoints is not None and not self._opening:
            self.partitions[name] = p
            self.checkpoints.add(name, p.log_start_offset)
        return p

    def _maybe_snapshot(self, p: Partition) -> None:
        if self.data_dir is None:
            return
        self._appends_since_snapshot += 1
        if self._appends_since_snapshot >= self.config.snapshot_every_appends:
            from txnspec.impl import snapshots
            self._appends_since_snapshot = 0
            try:
                snapshots.write_snapshot(self.data_dir, p, self.durability)
            except KafkaStorageException as exc:  # a snapshot only saves recovery work: the append stands
                snapshots.log.warning("snapshot not written: %s", exc)

    def flush(self) -> None:
        """fsync every segment, then move the recovery points to the log ends (``LogManager.checkpoint``)."""
        for p in self.partitions.values():
            if p.log.store is not None:
                p.log.store.flush()
        if self.checkpoints is not None:
            self.checkpoints.advance({n: p.log_end_offset for n, p in self.partitions.items()})

    def delete_partition(self, name: str) -> None:
        """Remove partition ``name`` (a deleted topic's): close its files, take it out of the checkpoints, then
        delete its directory. In that order a crash in between leaves a directory the checkpoints do not list
        (recovered as an orphan), never a listed directory that is gone (reported as data loss on open)."""
        partition = self.partitions.pop(name, None)
        close = getattr(getattr(getattr(partition, "log", None), "store", None), "close", None)
        if close is not None:
            close()
        if self.checkpoints is not None:
            self.checkpoints.forget(name)
        if self.data_dir is not None:
            shutil.rmtree(os.path.join(self.data_dir, name), ignore_errors=True)

    def close(self) -> None:
        """A clean shutdown: flush (durable mode) and close every file. Idempotent; the broker is unusable after."""
        try:
            if self.checkpoints is not None and not self.closed:
                self.flush()
        finally:
            self._close_files()

    def _close_files(self) -> None:
        self.closed = True
        for p in self.partitions.values():
            close = getattr(p.log.store, "close", None)
            if close is not None:
                close()


__all__ = ["BrokerStorage"]
