"""What the recovery-point checkpoint adds to a durable append (issue 33).

    python bench/checkpoint_bench.py [--appends N] [--rounds R]

Appends N one-record batches to a durable cluster in a temporary directory on the disk: without fsync,
with fsync (the checkpoint follows every append), and with fsync but the checkpoint step replaced by a no-op
(what the append cost before checkpoints existed). Prints appends per second, one row per round.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from txnspec.impl import checkpoint
from txnspec.impl.cluster import Cluster


def rate(fsync: bool, checkpointed: bool, appends: int) -> float:
    original = checkpoint.Checkpoints.advance
    if not checkpointed:
        checkpoint.Checkpoints.advance = lambda self, points: None  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory(dir="/tmp") as d, Cluster(data_dir=d, fsync=fsync) as c:
            c.produce_plain("t-0", ["warm-up"])
            start = time.perf_counter()
            for i in range(appends):
                c.produce_plain("t-0", [str(i)])
            return appends / (time.perf_counter() - start)
    finally:
        checkpoint.Checkpoints.advance = original  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print("| round | no fsync | fsync, checkpoint per append | fsync, no checkpoint |")
    print("|---|---|---|---|")
    for r in range(1, args.rounds + 1):
        row = [rate(False, True, args.appends), rate(True, True, args.appends), rate(True, False, args.appends)]
        print(f"| {r} | " + " | ".join(f"{x:,.0f}" for x in row) + " |")


if __name__ == "__main__":
    main()
