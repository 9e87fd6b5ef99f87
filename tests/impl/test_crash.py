"""Kill a transactional writer with SIGKILL; after each restart nothing is lost, leaked or torn apart.

Every other kill lands at a random moment; the others land while a large batch (1 MB records) is being
written to ``out-0``'s segment, so the file ends in a torn frame that recovery must cut. After every kill
the parent recovers the durable cluster in process, lets the network settle (recovery re-sends the markers
of prepared transactions), lets the transaction timeout pass (open transactions abort), and checks: every
transaction the writer saw committed is fully visible at read_committed, on both partitions; no aborted or
unfinished transaction is visible at all, although the aborted ones' records are on disk (seen at
read_uncommitted); every transaction is all-or-nothing with no duplicate; nothing is left prepared. The next
writer continues on the same directory. The run must have produced torn frames and aborted transactions
with records on disk, or it proved nothing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from txnspec.impl.cluster import Cluster
from txnspec.impl.storage import SEGMENT, RecoveryReport

WRITER = Path(__file__).with_name("crash_writer.py")
RECORDS = 4
GENERATION_MS = 10**9
LARGE = 1 << 20


@dataclass
class Seen:
    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    torn: list[RecoveryReport] = field(default_factory=list)
    aborted_on_disk: set[int] = field(default_factory=set)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _kill_during_a_write(proc: subprocess.Popen[str], segment: Path, rng: random.Random) -> None:
    """Kill ``proc`` as soon as ``segment`` grows for the n-th time (n random): mid-write if the write is long
    (the writer runs at the lowest priority, so on a busy machine its writes are slow and this poll is not)."""
    path = str(segment)
    size = _size(path)
    growths = rng.randrange(1, 4)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() is None:
        now = _size(path)
        if now != size:
            size = now
            growths -= 1
            if growths == 0:
                break
    os.kill(proc.pid, signal.SIGKILL)


def kill_and_check(data_dir: str, generation: int, rng: random.Random, seen: Seen) -> None:
    large = generation % 2 == 0
    proc = subprocess.Popen([sys.executable, str(WRITER), data_dir, str(generation * GENERATION_MS),
                             str(rng.randrange(10**6)), str(LARGE if large else 16)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: os.nice(19)) if large else None)
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready.strip() == "READY", proc.stderr.read() if proc.stderr else ready
    if large:
        _kill_during_a_write(proc, Path(data_dir) / "out-0" / SEGMENT, rng)
    else:
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    for line in out.splitlines():
        kind, _, n = line.partition(" ")
        if kind in ("C", "A"):
            (seen.committed if kind == "C" else seen.aborted).add(int(n))

    cluster = Cluster(data_dir=data_dir, now_ms=generation * GENERATION_MS + GENERATION_MS // 2)
    seen.torn.extend(r for r in cluster.broker.recovery_reports if isinstance(r, RecoveryReport) and not r.corrupt)
    cluster.run()
    cluster.advance(15 * 60_000)  # past any transaction timeout: open transactions abort
    state = cluster.transaction_state("writer")
    assert state not in ("PrepareCommit", "PrepareAbort", "Ongoing"), state
    visible: dict[str, Counter[int]] = {}
    for partition in ("out-0", "out-1"):
        p = cluster.broker.partition(partition)
        assert p.last_stable_offset == p.high_watermark, "a transaction is still open"
        visible[partition] = Counter(int(str(r.value).split(":")[0]) for r in cluster.read(partition))
        seen.aborted_on_disk |= seen.aborted & {int(str(r.value).split(":")[0])
                                                 for r in cluster.read(partition, "READ_UNCOMMITTED")}
    txns = set(visible["out-0"]) | set(visible["out-1"])
    torn_apart = {t: (visible["out-0"][t], visible["out-1"][t]) for t in txns
                  if (visible["out-0"][t], visible["out-1"][t]) != (RECORDS // 2, RECORDS // 2)}
    assert not torn_apart, torn_apart  # all or nothing on each partition, no duplicates
    assert seen.committed <= txns, sorted(seen.committed - txns)[:10]
    assert not (seen.aborted & txns), sorted(seen.aborted & txns)[:10]
    cluster.close()


def run_kills(tmp_path: Path, kills: int, seed: int) -> Seen:
    rng = random.Random(seed)
    data_dir = str(tmp_path / "kafka")
    seen = Seen()
    for generation in range(1, kills + 1):
        kill_and_check(data_dir, generation, rng, seen)
    extra = kills + 1
    while not seen.torn and extra <= kills + 30:  # a loaded machine may let a write finish before the kill
        kill_and_check(data_dir, extra + extra % 2, rng, seen)
        extra += 2
    assert seen.committed, "the writer never committed anything: the kill points were all too early"
    assert seen.aborted_on_disk, "no aborted transaction had records on disk: the abort check proved nothing"
    assert seen.torn, "no kill tore a frame: the torn-tail recovery was not exercised"
    return seen


def test_sigkill_at_ten_points_random_or_mid_write(tmp_path: Path) -> None:
    run_kills(tmp_path, 10, seed=1)


@pytest.mark.slow
def test_sigkill_at_two_hundred_points_random_or_mid_write(tmp_path: Path) -> None:
    run_kills(tmp_path, 200, seed=2)
