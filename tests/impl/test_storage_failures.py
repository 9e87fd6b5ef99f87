"""Writes the disk refuses, damaged files, and the fsync policy of the durable implementation.

The file-size limit is real (``RLIMIT_FSIZE`` in a subprocess, see ``full_disk_writer.py``): the kernel
writes part of a frame and then refuses, as a full disk does.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from txnspec.impl.cluster import Cluster
from txnspec.impl.errors import KafkaStorageException
from txnspec.impl.log import Record
from txnspec.impl.storage import SEGMENT, CorruptDataError, RecoveryReport, open_partition

WRITER = Path(__file__).with_name("full_disk_writer.py")


def committed_txns(data_dir: str) -> Counter[tuple[str, int]]:
    """(partition, txn) of every record visible at read_committed after a restart and recovery."""
    cluster = Cluster(data_dir=data_dir, now_ms=10**9)
    cluster.run()
    cluster.advance(15 * 60_000)
    seen: Counter[tuple[str, int]] = Counter()
    for partition in ("out-0", "out-1"):
        p = cluster.broker.partition(partition)
        assert p.last_stable_offset == p.high_watermark, f"a transaction on {partition} is still open"
        for r in cluster.read(partition, "READ_COMMITTED"):
            seen[(partition, int(str(r.value).split(":")[0]))] += 1
    return seen


@pytest.mark.parametrize(("target", "limited"), [("data", "out-0"), ("txnlog", "__transaction_state-0"),
                                                 ("marker", "out-0"), ("completion", "__transaction_state-0")])
def test_a_write_cut_short_by_a_file_size_limit_fails_the_request_and_loses_nothing(
        tmp_path: Path, target: str, limited: str) -> None:
    data_dir = str(tmp_path / "kafka")
    out = subprocess.run([sys.executable, str(WRITER), data_dir, target], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    errors = [line for line in lines if line.startswith("E ")]
    assert len(errors) == 1 and "NO ERROR" not in lines, lines
    assert f"{limited}/{SEGMENT}" in errors[0] and "File too large" in errors[0], errors[0]
    assert lines[-1] == "OK"
    assert [int(line.split()[1]) for line in lines if line.startswith("C ")] == list(range(7))
    # after a restart: every commit whole on both partitions, exactly once, nothing else
    assert committed_txns(data_dir) == Counter({(p, t): 1 for p in ("out-0", "out-1") for t in range(7)})


def _segment_with_three_transactions(tmp_path: Path) -> tuple[str, Path, list[int]]:
    data_dir = str(tmp_path / "kafka")
    c = Cluster(data_dir=data_dir)
    p = c.producer("app")
    p.init_transactions()
    for txn in range(3):
        p.begin_transaction()
        p.send("out-0", f"{txn}:a")
        p.send("out-1", f"{txn}:b")
        p.commit_transaction()
    c.run()
    c.broker.flush()
    path = tmp_path / "kafka" / "out-0" / SEGMENT
    starts, pos, data = [], 0, path.read_bytes()
    while pos < len(data):
        starts.append(pos)
        pos += 8 + int.from_bytes(data[pos:pos + 4], "big")
    return data_dir, path, starts


def _flip(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x55]))


def test_a_damaged_frame_followed_by_valid_frames_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    data_dir, path, starts = _segment_with_three_transactions(tmp_path)
    size = path.stat().st_size
    _flip(path, starts[2] + 20)  # inside the second transaction's data batch
    with pytest.raises(CorruptDataError) as caught:
        Cluster(data_dir=data_dir)
    assert caught.value.path == str(path) and caught.value.position == starts[2]
    assert f"{path}: CRC mismatch followed by 3 valid frames" in str(caught.value)
    assert f"at byte {starts[2]}" in str(caught.value)
    assert path.stat().st_size == size  # refusing to open changed nothing


def test_a_flipped_byte_inside_a_record_value_is_caught_by_the_crc(tmp_path: Path) -> None:
    data_dir, path, starts = _segment_with_three_transactions(tmp_path)
    value_at = path.read_bytes().index(b'"1:a"') + 3
    _flip(path, value_at)  # "1:a" becomes "1:4": still a well-formed batch, only the CRC tells
    with pytest.raises(CorruptDataError, match="CRC mismatch followed by 3 valid frames") as caught:
        Cluster(data_dir=data_dir)
    assert caught.value.position == starts[2]


def test_recovery_asked_for_truncates_at_the_damage_and_names_what_it_dropped(tmp_path: Path) -> None:
    data_dir, path, starts = _segment_with_three_transactions(tmp_path)
    _flip(path, starts[2] + 20)
    c = Cluster(data_dir=data_dir, recover_corruption=True)
    [report] = c.broker.recovery_reports
    assert isinstance(report, RecoveryReport) and report.corrupt and report.position == starts[2]
    assert path.stat().st_size == starts[2]
    assert report.dropped_frames == 3 and report.first_dropped_offset == 3
    # frames: data e0, COMMIT e1, [damaged: data e1], COMMIT e2, data e2, COMMIT e3 (TV2 bumps at each end)
    assert report.transactions == ((0, 2),) and report.markers == ((0, 2, "COMMIT"), (0, 3, "COMMIT"))
    assert "dropped 352 bytes, 3 valid frames" in str(report) and "[(0, 2)]" in str(report)
    assert [str(r.value) for r in c.read("out-0")] == ["0:a"]


def test_a_torn_tail_is_truncated_and_logged_with_its_size(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = open_partition(str(tmp_path), "t-0", {})
    for v in ("a", "b"):
        p.append_records(-1, -1, -1, [Record(value=v * 1000)])
    path = tmp_path / "t-0" / SEGMENT
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x10\x00\x12\x34\x56\x78" + b'{"o":2,"p":-1')  # a frame cut short by a crash
    with caplog.at_level(logging.WARNING, logger="txnspec.impl.storage"):
        again = open_partition(str(tmp_path), "t-0", {})
    assert again.log_end_offset == 2 and path.stat().st_size == whole
    assert f"truncated a torn tail of 21 bytes at byte {whole}" in caplog.text


def test_a_damaged_transaction_log_is_an_error(tmp_path: Path) -> None:
    data_dir, _, _ = _segment_with_three_transactions(tmp_path)
    txn_log = tmp_path / "kafka" / "__transaction_state-0" / SEGMENT
    _flip(txn_log, 30)
    with pytest.raises(CorruptDataError, match=r"__transaction_state-0.*CRC mismatch followed by"):
        Cluster(data_dir=data_dir)


@pytest.mark.parametrize("content", [b"", b"garbage", b"\xff\xfe", b"0", None])
def test_a_damaged_producer_id_block_is_an_error_not_a_reset(tmp_path: Path, content: bytes | None) -> None:
    data_dir, _, _ = _segment_with_three_transactions(tmp_path)  # producer id 0 is in the logs
    block = tmp_path / "kafka" / "producer_ids"
    if content is None:
        block.unlink()
    else:
        block.write_bytes(content)
    with pytest.raises(CorruptDataError, match="producer_ids: producer-id block"):
        Cluster(data_dir=data_dir)


def test_producer_ids_are_not_reused_after_a_restart(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "kafka")
    c = Cluster(data_dir=data_dir)
    first = {c.producer(f"app-{i}") for i in range(3)}
    for h in first:
        h.init_transactions()
    c2 = Cluster(data_dir=data_dir)
    again = c2.producer("other")
    again.init_transactions()
    assert again.producer_id not in {h.producer_id for h in first}


def test_fsync_is_a_cluster_setting_and_fsyncs_every_append(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fsync

    def counting_fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(SEGMENT):  # the segments' own, not their directories'
            calls.append(fd)
        real(fd)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    for fsync, grows in ((False, False), (True, True)):
        c = Cluster(data_dir=str(tmp_path / str(fsync)), fsync=fsync)
        c.produce_plain("t-0", ["warm-up"])
        before = len(calls)
        c.produce_plain("t-0", ["a"])
        c.produce_plain("t-0", ["b"])
        assert (len(calls) - before >= 2) is grows, (fsync, len(calls) - before)


def test_a_producer_id_block_that_cannot_be_written_fails_init_and_hands_out_no_id(tmp_path: Path) -> None:
    data_dir = tmp_path / "kafka"
    c = Cluster(data_dir=str(data_dir))
    (data_dir / "producer_ids.tmp").mkdir()  # the block's temporary file cannot be created: a real OS error
    p = c.producer("app")
    with pytest.raises(KafkaStorageException, match="producer_ids: writing it failed: Is a directory"):
        p.init_transactions()
    assert not (data_dir / "producer_ids").exists()
    (data_dir / "producer_ids.tmp").rmdir()
    p.init_transactions()  # the same call, retried
    assert p.producer_id == 0 and (data_dir / "producer_ids").read_text() == "1000"
    other = Cluster(data_dir=str(data_dir)).producer("other")
    other.init_transactions()
    assert other.producer_id == 1000  # a restart starts past the whole reserved block
