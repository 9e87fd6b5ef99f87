"""Damage is never silent: corruption versus torn tails, checkpoints, snapshots, the OS layer, resources.

Each test here is one of the durability mechanisms the sabotage matrix turns off
(``tests/impl/test_sabotage_matrix.py``); the OS calls are recorded or refused through an injected
:class:`~txnspec.impl.durability.FileOps`.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import shutil
import struct
import tempfile
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from txnspec.impl.checkpoint import LOG_START, RECOVERY_POINT
from txnspec.impl.cluster import Cluster
from txnspec.impl.durability import DEFAULT, Durability, FileOps
from txnspec.impl.errors import KafkaStorageException
from txnspec.impl.storage import SEGMENT, CorruptDataError, RecoveryReport


def _frames(path: Path) -> list[int]:
    data, starts, pos = path.read_bytes(), [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 8 + int.from_bytes(data[pos:pos + 4], "big")
    return starts


def _committed(data_dir: Path, fsync: bool = False, policy: Durability | None = None) -> Cluster:
    c = Cluster(data_dir=str(data_dir), fsync=fsync, durability=policy)
    p = c.producer("app")
    p.init_transactions()
    for i in range(2):
        p.begin_transaction()
        p.send("out-0", f"v{i}")
        p.commit_transaction()
    c.run()
    return c


# --- torn tail versus corruption ---

@pytest.mark.parametrize("fsync", [False, True])
def test_a_flipped_bit_in_a_complete_last_frame_is_corruption_not_a_torn_tail(tmp_path: Path, fsync: bool) -> None:
    _committed(tmp_path, fsync).close()
    seg = tmp_path / "out-0" / SEGMENT
    last = _frames(seg)[-1]
    data = bytearray(seg.read_bytes())
    data[last + 12] ^= 0x01  # inside the payload of the last frame (a COMMIT marker): its length still fits
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as caught:
        Cluster(data_dir=str(tmp_path), fsync=fsync)
    assert caught.value.path == str(seg) and caught.value.position == last and "CRC mismatch" in str(caught.value)
    assert seg.read_bytes() == bytes(data)  # refusing changed nothing
    with Cluster(data_dir=str(tmp_path), fsync=fsync, recover_corruption=True) as c:
        [report] = c.broker.recovery_reports
        assert report.corrupt and report.position == last and report.reason == "CRC mismatch"
        assert seg.stat().st_size == last


@pytest.mark.parametrize("fsync", [False, True])
def test_a_frame_running_past_the_end_of_the_file_is_a_torn_tail(tmp_path: Path, fsync: bool,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    c = _committed(tmp_path, fsync)
    c.broker._close_files()  # a crash: no clean shutdown, so the recovery point did not move past the tail
    seg = tmp_path / "out-0" / SEGMENT
    whole = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(struct.pack(">II", 500, 0) + b'{"o":9,')
    with caplog.at_level(logging.WARNING, logger="txnspec.impl.storage"), \
            Cluster(data_dir=str(tmp_path), fsync=fsync) as again:
        [report] = again.broker.recovery_reports
        assert not report.corrupt and seg.stat().st_size == whole
        assert [r.value for r in again.read("out-0")] == ["v0", "v1"]
    assert f"truncated a torn tail of 15 bytes at byte {whole}" in caplog.text


# --- nothing disappears unnoticed ---

@pytest.mark.parametrize("partition", ["out-0", "__consumer_offsets-0", "__transaction_state-0"])
def test_a_deleted_segment_is_reported_naming_it(tmp_path: Path, partition: str) -> None:
    _committed(tmp_path).close()
    seg = tmp_path / partition / SEGMENT
    seg.unlink()
    with pytest.raises(CorruptDataError, match="segment missing although") as caught:
        Cluster(data_dir=str(tmp_path))
    assert caught.value.path == str(seg)


def test_a_deleted_partition_directory_is_reported(tmp_path: Path) -> None:
    _committed(tmp_path).close()
    for name in os.listdir(tmp_path / "out-0"):
        os.remove(tmp_path / "out-0" / name)
    os.rmdir(tmp_path / "out-0")
    with pytest.raises(CorruptDataError, match="partition directory missing") as caught:
        Cluster(data_dir=str(tmp_path))
    assert caught.value.path == str(tmp_path / "out-0")
    with Cluster(data_dir=str(tmp_path), recover_corruption=True) as c:  # asked for: started empty
        assert c.read("out-0") == []


def test_a_missing_first_frame_is_reported(tmp_path: Path) -> None:
    _committed(tmp_path).close()
    seg = tmp_path / "out-0" / SEGMENT
    data = seg.read_bytes()
    seg.write_bytes(data[_frames(seg)[1]:])  # the first frame (offset 0) removed cleanly
    with pytest.raises(CorruptDataError, match=r"base offset 1 where 0 was due \(the first frame is missing\)"):
        Cluster(data_dir=str(tmp_path))


@pytest.mark.parametrize("fsync", [False, True])
def test_a_log_cut_at_a_frame_boundary_below_its_recovery_point_is_reported(tmp_path: Path, fsync: bool) -> None:
    c = _committed(tmp_path, fsync)
    if fsync:
        c.broker._close_files()  # with fsync the recovery point follows every append, no clean close needed
    else:
        c.close()  # without fsync the recovery point moves on flush/close
    seg = tmp_path / "out-0" / SEGMENT
    os.truncate(seg, _frames(seg)[-1])  # exactly at a frame boundary: no torn frame to see
    with pytest.raises(CorruptDataError, match="log ends at offset 3 below its recovery point 4"):
        Cluster(data_dir=str(tmp_path), fsync=fsync)


def test_the_checkpoints_are_kafkas_format_and_a_malformed_one_is_an_error(tmp_path: Path) -> None:
    _committed(tmp_path).close()
    lines = (tmp_path / RECOVERY_POINT).read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2 and "out 0 4" in lines
    assert "out 0 0" in (tmp_path / LOG_START).read_text().splitlines()
    (tmp_path / RECOVERY_POINT).write_text("0\n7\nout 0 x\n")
    with pytest.raises(CorruptDataError, match=f"{RECOVERY_POINT}: malformed checkpoint"):
        Cluster(data_dir=str(tmp_path))


# --- snapshots ---

def _aborted_then_snapshot(tmp_path: Path) -> Path:
    """An aborted transaction on out-0, then a snapshot (its aborted index), then a committed one."""
    c = Cluster(data_dir=str(tmp_path))
    c.broker.config.snapshot_every_appends = 1
    p = c.producer("app")
    p.init_transactions()
    p.begin_transaction()
    p.send("out-0", "aborted")
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send("out-0", "kept")
    p.commit_transaction()
    c.close()
    [snap] = [n for n in os.listdir(tmp_path / "out-0") if n.endswith(".snapshot")]
    assert json.loads((tmp_path / "out-0" / snap).read_bytes()[8:])["aborted"]
    return tmp_path / "out-0" / snap


def test_the_aborted_index_comes_back_from_the_snapshot(tmp_path: Path) -> None:
    _aborted_then_snapshot(tmp_path)
    with Cluster(data_dir=str(tmp_path)) as c:  # replay starts at the snapshot: the abort is before it
        assert [r.value for r in c.read("out-0")] == ["kept"]


def test_a_snapshot_whose_checksum_fails_is_ignored_and_the_log_replayed(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    snap = _aborted_then_snapshot(tmp_path)
    raw = snap.read_bytes()
    doc = json.loads(raw[8:])
    doc["aborted"] = [[99, *t[1:]] for t in doc["aborted"]]  # well-formed, wrong: only the checksum tells
    payload = json.dumps(doc).encode()
    snap.write_bytes(struct.pack(">II", len(payload), zlib.crc32(raw[8:])) + payload)
    with caplog.at_level(logging.WARNING, logger="txnspec.impl.storage"), Cluster(data_dir=str(tmp_path)) as c:
        assert [r.value for r in c.read("out-0")] == ["kept"]
    assert "its checksum fails" in caplog.text


@pytest.mark.parametrize("payload", [b"\xff\xfe\x00", b"{not json", b'{"offset": 3}', b'{"offset": 3, "aborted": 5}',
                                     b"[1, 2]", b'{"offset": 3, "producers": [[1]], "aborted": []}'])
def test_an_unreadable_snapshot_never_raises(tmp_path: Path, payload: bytes,
                                             caplog: pytest.LogCaptureFixture) -> None:
    snap = _aborted_then_snapshot(tmp_path)
    offset = int(snap.name.split(".")[0])
    payload = payload.replace(b'"offset": 3', f'"offset": {offset}'.encode())
    snap.write_bytes(struct.pack(">II", len(payload), zlib.crc32(payload)) + payload)  # a valid checksum
    with caplog.at_level(logging.WARNING, logger="txnspec.impl.storage"), Cluster(data_dir=str(tmp_path)) as c:
        assert [r.value for r in c.read("out-0")] == ["kept"]
    assert "ignored" in caplog.text


# --- the OS layer ---

class Recording(FileOps):
    """Records the fsyncs of files and directories; optionally writes at most ``chunk`` bytes a call."""

    def __init__(self, chunk: int | None = None) -> None:
        self.dirs: list[str] = []
        self.files = 0
        self.chunk = chunk

    def write(self, fd: int, data: memoryview | bytes) -> int:
        return os.write(fd, data[:self.chunk] if self.chunk else data)

    def fsync(self, fd: int) -> None:
        self.files += 1
        os.fsync(fd)

    def fsync_dir(self, path: str) -> None:
        self.dirs.append(os.path.abspath(path))
        super().fsync_dir(path)


def test_every_created_or_renamed_file_has_its_directory_fsynced(tmp_path: Path) -> None:
    ops = Recording()
    policy = replace(DEFAULT, ops=ops)
    data_dir = tmp_path / "kafka"
    with Cluster(data_dir=str(data_dir), fsync=True, durability=policy) as c:
        assert str(data_dir / "out-0") not in ops.dirs
        c.produce_plain("out-0", ["a"])  # a new partition: its directory and its parent
        assert {str(data_dir / "out-0"), str(data_dir)} <= set(ops.dirs)
        ops.dirs.clear()
        p = c.producer("app")
        p.init_transactions()  # the producer-id block, renamed into place
        assert str(data_dir) in ops.dirs
        ops.dirs.clear()
        from txnspec.impl.snapshots import write_snapshot
        write_snapshot(str(data_dir), c.broker.partition("out-0"), policy)
        assert ops.dirs == [str(data_dir / "out-0")]


def test_short_writes_are_continued_until_the_frame_is_whole(tmp_path: Path) -> None:
    policy = replace(DEFAULT, ops=Recording(chunk=7))
    with Cluster(data_dir=str(tmp_path), durability=policy) as c:
        c.produce_plain("out-0", ["a" * 100, "b"])
        c.produce_plain("out-0", ["c"])
    with Cluster(data_dir=str(tmp_path)) as again:
        assert not again.broker.recovery_reports
        assert [r.value for r in again.read("out-0")] == ["a" * 100, "b", "c"]


class Refusing(FileOps):
    """Refuses opening a segment, or (once ``on`` is set to it) every write, with a real errno."""

    def __init__(self, code: int, on: str) -> None:
        self.code, self.on = code, on

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if self.on == "open" and path.endswith(SEGMENT):
            raise OSError(self.code, os.strerror(self.code), path)
        return super().open(path, flags, mode)

    def write(self, fd: int, data: memoryview | bytes) -> int:
        if self.on == "write":
            raise OSError(self.code, os.strerror(self.code))
        return super().write(fd, data)


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_storage_errors_become_kafka_storage_exceptions_naming_the_path(tmp_path: Path, code: int) -> None:
    with pytest.raises(KafkaStorageException, match=os.strerror(code)) as caught:
        Cluster(data_dir=str(tmp_path), durability=replace(DEFAULT, ops=Refusing(code, "open")))
    assert SEGMENT in str(caught.value) and str(tmp_path) in str(caught.value)
    ops = Refusing(code, "")
    with Cluster(data_dir=str(tmp_path / "w"), durability=replace(DEFAULT, ops=ops)) as c:
        c.produce_plain("out-0", ["created"])
        ops.on = "write"
        with pytest.raises(KafkaStorageException, match=os.strerror(code)) as caught:
            c.produce_plain("out-0", ["a"])
        assert str(tmp_path / "w" / "out-0" / SEGMENT) in str(caught.value)
        ops.on = ""


class NoCheckpoints(FileOps):
    """Once armed, refuses to create the checkpoints' temporary files (a disk that still takes appends)."""

    armed = False

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if self.armed and path.endswith("-checkpoint.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return super().open(path, flags, mode)


def test_a_checkpoint_that_cannot_follow_never_fails_a_durable_append(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    ops = NoCheckpoints()
    with caplog.at_level(logging.WARNING, logger="txnspec.impl.storage"), \
            Cluster(data_dir=str(tmp_path), fsync=True, durability=replace(DEFAULT, ops=ops)) as c:
        c.produce_plain("out-0", ["a"])
        ops.armed = True
        c.produce_plain("out-0", ["b"])  # fsync'd and acknowledged; its checkpoint could not be written
        assert "checkpoint not written" in caplog.text and "No space left on device" in caplog.text
        ops.armed = False
    with Cluster(data_dir=str(tmp_path)) as again:
        assert [r.value for r in again.read("out-0")] == ["a", "b"]
        assert not again.broker.recovery_reports
    ops.armed = True
    with pytest.raises(KafkaStorageException, match="-offset-checkpoint: writing it failed: No space left"):
        Cluster(data_dir=str(tmp_path), durability=replace(DEFAULT, ops=ops))  # on open it is an error


def test_a_data_directory_that_is_a_file_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(KafkaStorageException, match="file: opening the data directory failed"):
        Cluster(data_dir=str(tmp_path / "file"))


# --- resources ---

def test_opening_and_closing_a_durable_cluster_100_times_keeps_the_fd_count(tmp_path: Path) -> None:
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))
    with Cluster(data_dir=str(tmp_path)) as c:
        c.produce_plain("out-0", ["a"])
    before = fds()
    for i in range(100):
        with Cluster(data_dir=str(tmp_path)) as c:
            c.produce_plain("out-0", [str(i)])
    assert fds() == before
    c.close()  # idempotent
    leaky = [Cluster(data_dir=str(tmp_path)) for _ in range(2)]
    assert fds() > before  # an open durable cluster does hold files: the count above measured something
    for c in leaky:
        c.close()
    assert fds() == before
    assert isinstance(RecoveryReport, type)


# --- random damage ---

@pytest.mark.parametrize("fsync", [False, True])
def test_a_random_bit_flip_anywhere_is_reported_or_harmless(tmp_path: Path, fsync: bool) -> None:
    """After a clean close, one flipped bit in any file of the data directory either makes opening fail with
    a KafkaStorageException (CorruptDataError) or leaves every committed record visible as before."""
    if os.path.isdir("/dev/shm"):  # a hundred copies opened and closed: in memory when possible
        tmp_path = Path(tempfile.mkdtemp(dir="/dev/shm"))
    src = tmp_path / "src"
    c = _committed(src, fsync)
    p = c.producer("other")
    p.init_transactions()
    p.begin_transaction()
    p.send("out-1", "w")
    p.flush()
    p.abort_transaction()
    c.close()
    with Cluster(data_dir=str(src)) as clean:
        expected = {part: [r.value for r in clean.read(part)] for part in ("out-0", "out-1")}
    files = sorted(f for f in src.rglob("*") if f.is_file() and f.stat().st_size
                   and (f.suffix in (".log", ".snapshot") or "checkpoint" in f.name or f.name == "producer_ids")
                   and not (f.suffix == ".log" and "__consumer_offsets" in str(f) and f.stat().st_size == 0))
    rng = random.Random(33 + fsync)
    outcomes = {"reported": 0, "harmless": 0}
    logging.disable(logging.WARNING)
    try:
        for i in range(100):
            work = tmp_path / f"w{i}"
            shutil.copytree(src, work)
            target = work / rng.choice(files).relative_to(src)
            data = bytearray(target.read_bytes())
            bit = rng.randrange(len(data) * 8)
            data[bit // 8] ^= 1 << (bit % 8)
            target.write_bytes(bytes(data))
            try:
                with Cluster(data_dir=str(work)) as opened:
                    seen = {part: [r.value for r in opened.read(part)] for part in ("out-0", "out-1")}
            except KafkaStorageException:
                outcomes["reported"] += 1
            else:
                assert seen == expected, (target, bit)
                outcomes["harmless"] += 1
            shutil.rmtree(work)
    finally:
        logging.disable(logging.NOTSET)
        if str(tmp_path).startswith("/dev/shm/"):
            shutil.rmtree(tmp_path)
    # pinned (seeded): the harmless flips hit snapshots (ignored, the log replayed), a checkpoint number made
    # lower, or the producer-id block made higher
    assert outcomes == ({"reported": 77, "harmless": 23} if fsync else {"reported": 86, "harmless": 14})
