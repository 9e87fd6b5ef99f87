"""Durable mode: segment files with per-batch CRC32, torn-tail truncation, snapshots, restart recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from txnspec.impl.cluster import Cluster
from txnspec.impl.log import Record
from txnspec.impl.network import named
from txnspec.impl.producer_id_block import ProducerIdBlockFile
from txnspec.impl.snapshots import write_snapshot
from txnspec.impl.storage import SEGMENT, CorruptDataError, SegmentStore, open_partition
from txnspec.impl.testing import restart

pytestmark = pytest.mark.quick  # the whole module is in the quick tier


def segment(data_dir: Path, partition: str) -> Path:
    return data_dir / partition / SEGMENT


def test_a_restart_keeps_committed_data_and_producer_state(tmp_path: Path) -> None:
    c = Cluster(data_dir=str(tmp_path))
    p = c.producer("app")
    p.init_transactions()
    p.begin_transaction()
    p.send("out-0", "v")
    p.commit_transaction()
    c2 = restart(c)
    assert [r.value for r in c2.read("out-0")] == ["v"]
    p2 = c2.producer("app")
    p2.init_transactions()  # the coordinator reloaded the id: same pid, next epoch
    assert (p2.producer_id, p2.producer_epoch) == (p.producer_id, p.producer_epoch + 1)
    assert c2.producer(None).producer is not None


def test_a_corrupt_last_frame_is_refused_and_truncated_only_when_asked(tmp_path: Path) -> None:
    store = SegmentStore(str(tmp_path / "t-0"))
    p = open_partition(str(tmp_path), "t-0", {})
    for v in ("a", "b", "c"):
        p.append_records(-1, -1, -1, [Record(value=v)])
    path = segment(tmp_path, "t-0")
    size = path.stat().st_size
    with open(path, "r+b") as f:  # flip a byte of the last batch, then add half a frame
        f.seek(size - 3)
        f.write(b"#")
        f.seek(0, os.SEEK_END)
        f.write(b"\x00\x00\x01")
    with pytest.raises(CorruptDataError, match="CRC mismatch"):  # a whole frame whose CRC fails: not a crash
        open_partition(str(tmp_path), "t-0", {})
    recovered = open_partition(str(tmp_path), "t-0", {}, recover_corruption=True)
    assert [b.records[0].value for b in recovered.log.batches] == ["a", "b"]
    assert recovered.log.store is not None and recovered.log_end_offset == 2
    assert recovered.append_records(-1, -1, -1, [Record(value="d")]).base_offset == 2
    again = open_partition(str(tmp_path), "t-0", {})
    assert [b.records[0].value for b in again.log.batches] == ["a", "b", "d"]
    for s in (store, recovered.log.store, again.log.store):
        s.close()  # type: ignore[union-attr]


def test_snapshots_are_used_and_a_stale_one_is_ignored(tmp_path: Path) -> None:
    p = open_partition(str(tmp_path), "t-0", {})
    p.append_records(1, 0, 0, [Record(value="a")], True)
    write_snapshot(str(tmp_path), p)
    p.append_records(1, 0, 1, [Record(value="b")], True)
    again = open_partition(str(tmp_path), "t-0", {})
    assert again.first_unstable_offset == 0 and again.append_records(1, 0, 2, [Record()], True).error.name == "NONE"
    os.truncate(segment(tmp_path, "t-0"), 0)  # the log lost everything: the snapshot is beyond it
    empty = open_partition(str(tmp_path), "t-0", {})
    assert empty.log_end_offset == 0 and empty.first_unstable_offset is None


def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    blocks = ProducerIdBlockFile(str(tmp_path / "producer_ids"))
    blocks.reserve(1)
    assert ProducerIdBlockFile(str(tmp_path / "producer_ids")).start() == 1000


def test_recovery_completes_a_transaction_prepared_before_the_crash(tmp_path: Path) -> None:
    c = Cluster(data_dir=str(tmp_path))
    p = c.producer("app")
    p.init_transactions()
    c.network.hold(named("TxnMarker"))
    p.begin_transaction()
    p.send("out-0", "v")
    p.commit_transaction()
    assert c.transaction_state("app") == "PrepareCommit"
    c2 = restart(c)  # the markers were never written
    c2.run()
    assert c2.transaction_state("app") == "CompleteCommit"
    assert [r.value for r in c2.read("out-0")] == ["v"]
