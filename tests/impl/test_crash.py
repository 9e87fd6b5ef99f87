"""Kill a transactional writer with SIGKILL at random points; after each restart nothing is lost or leaked.

After every kill the parent recovers the durable cluster in process, lets the network settle (recovery
re-sends the markers of prepared transactions), lets the transaction timeout pass (open transactions
abort), and checks: every transaction the writer saw committed is fully visible at read_committed, no
aborted or unfinished transaction is visible at all, every transaction is all-or-nothing with no
duplicate, and no transaction is left prepared. The next writer continues on the same directory.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from txnspec.impl.cluster import Cluster

WRITER = Path(__file__).with_name("crash_writer.py")
RECORDS = 4
GENERATION_MS = 10**9


def kill_and_check(data_dir: str, generation: int, rng: random.Random, committed: set[int],
                   aborted: set[int]) -> None:
    proc = subprocess.Popen([sys.executable, str(WRITER), data_dir, str(generation * GENERATION_MS),
                             str(rng.randrange(10**6))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready.strip() == "READY", proc.stderr.read() if proc.stderr else ready
    time.sleep(rng.uniform(0.0, 0.15))
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    for line in out.splitlines():
        kind, _, n = line.partition(" ")
        (committed if kind == "C" else aborted).add(int(n))

    cluster = Cluster(data_dir=data_dir, now_ms=generation * GENERATION_MS + GENERATION_MS // 2)
    cluster.run()
    cluster.advance(15 * 60_000)  # past any transaction timeout: open transactions abort
    state = cluster.transaction_state("writer")
    assert state not in ("PrepareCommit", "PrepareAbort", "Ongoing"), state
    visible: Counter[int] = Counter()
    for partition in ("out-0", "out-1"):
        p = cluster.broker.partition(partition)
        assert p.last_stable_offset == p.high_watermark, "a transaction is still open"
        for r in cluster.read(partition, "READ_COMMITTED"):
            visible[int(str(r.value).split(":")[0])] += 1
    assert all(n == RECORDS for n in visible.values()), {t: n for t, n in visible.items() if n != RECORDS}
    assert committed <= set(visible), sorted(committed - set(visible))[:10]
    assert not (aborted & set(visible)), sorted(aborted & set(visible))[:10]
    cluster.broker.flush()


def run_kills(tmp_path: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    data_dir = str(tmp_path / "kafka")
    committed: set[int] = set()
    aborted: set[int] = set()
    for generation in range(1, kills + 1):
        kill_and_check(data_dir, generation, rng, committed, aborted)
    assert committed, "the writer never committed anything: the kill points were all too early"


def test_sigkill_at_ten_random_points(tmp_path: Path) -> None:
    run_kills(tmp_path, 10, seed=1)


@pytest.mark.slow
def test_sigkill_at_two_hundred_random_points(tmp_path: Path) -> None:
    run_kills(tmp_path, 200, seed=2)
