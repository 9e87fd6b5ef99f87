"""The durability policy of the durable implementation: each safety mechanism a named, injectable switch.

A :class:`Durability` value travels from ``Cluster``/``Broker`` (``durability=...``) to the storage code; every
mechanism that keeps acknowledged data safe reads its switch from it, and every file operation goes through
its :class:`FileOps`, so a test can record or refuse them (a short ``write``, ``ENOSPC``, which ``fsync`` calls
reach a directory). :data:`DEFAULT` has every mechanism on; :func:`sabotaged` turns one off, and the sabotage
matrix (``tests/impl/test_sabotage_matrix.py``, ``docs/durability.md``) shows a test failing for each.

Leaves out: anything about the in-memory cluster (it has nothing to lose).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace


class FileOps:
    """The operating-system calls the storage makes (``os``'s, by default); a test subclasses it."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: memoryview | bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fsync_dir(self, path: str) -> None:
        """Make a file created or renamed in ``path`` survive power loss (its directory entry)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def close(self, fd: int) -> None:
        os.close(fd)


@dataclass(frozen=True)
class Durability:
    """Which safety mechanisms are on (all, unless a sabotage test turned one off)."""

    check_frame_crc: bool = True  # a segment frame whose CRC32 fails is damage, never data
    check_snapshot_checksum: bool = True  # a snapshot whose CRC32 fails is ignored (the log is replayed)
    restore_aborted_index: bool = True  # a snapshot brings back the aborted-transaction index it saved
    persist_producer_ids: bool = True  # the producer-id block end is written before an id of it is used
    resend_prepared_markers: bool = True  # loading re-sends the markers of PrepareCommit/PrepareAbort
    loop_short_writes: bool = True  # a short write() is continued until the frame is whole
    fsync_files: bool = True  # with fsync=True: fsync each append, snapshot, block and checkpoint
    fsync_directories: bool = True  # fsync the directory of every file created or renamed (with fsync)
    ops: FileOps = field(default_factory=FileOps, compare=False)


DEFAULT = Durability()

SABOTAGES: dict[str, str] = {
    "check_frame_crc": "no frame CRC check",
    "check_snapshot_checksum": "no snapshot checksum",
    "restore_aborted_index": "no aborted-index restore",
    "persist_producer_ids": "no producer-id persistence",
    "resend_prepared_markers": "no marker resend",
    "loop_short_writes": "no short-write loop",
    "fsync_files": "no fsync",
    "fsync_directories": "no directory fsync",
}


def sabotaged(name: str, base: Durability = DEFAULT) -> Durability:
    """``base`` with mechanism ``name`` off; ``ValueError`` naming the known ones."""
    if name not in SABOTAGES:
        raise ValueError(f"unknown durability mechanism {name!r}; known: {', '.join(SABOTAGES)}")
    return replace(base, **{name: False})  # type: ignore[arg-type]


__all__ = ["DEFAULT", "SABOTAGES", "Durability", "FileOps", "sabotaged"]
