"""The chaos runs of docs/chaos.md: ``txnspec chaos`` on Kafka, one run after another, seeds 1.., alternating the
transaction versions, each run's summary appended to ``OUT/results.jsonl``; ``--table`` prints the table.

    python bench/chaos_runs.py --out /tmp/chaos-batch --runs 10 --seconds 60 [--broker kafka:4.4.0]
    python bench/chaos_runs.py --out /tmp/chaos-batch [/tmp/chaos-batch2 ...] --table [--rejudge]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path


def run(out: Path, runs: int, seconds: float, broker: str, first_seed: int, versions: list[int],
        faults: str = "kill,pause,client,timeout") -> None:
    out.mkdir(parents=True, exist_ok=True)
    for i in range(runs):
        tv = versions[i % len(versions)]
        seed = first_seed + i // len(versions)
        folder = out / f"tv{tv}-seed{seed}"
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "txnspec.cli", "chaos", "--broker", broker, "--seconds",
                               str(seconds), "--seed", str(seed), "--transaction-version", str(tv), "--out",
                               str(folder), "--faults", faults, "--json"], capture_output=True, text=True,
                              timeout=seconds * 6 + 300)
        wall = time.monotonic() - started
        try:
            summary = json.loads(done.stdout)
        except json.JSONDecodeError:
            summary = {"error": (done.stderr or done.stdout)[-500:]}
        row = {"tv": tv, "seed": seed, "exit": done.returncode, "wall_seconds": round(wall, 1),
               "faults": len(summary.get("faults_injected", [])), "anomalies": summary.get("anomaly_counts", {}),
               "validation": summary.get("validation", {}), "transactions": summary.get("transactions", {}),
               "coordinator": summary.get("coordinator", {}), "groups": summary.get("groups", {}),
               "kafka": summary.get("kafka"), "error": summary.get("error"),
               "seconds_anomalies": summary.get("seconds_anomalies")}
        with (out / "results.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def rejudge(out: Path) -> list[dict]:
    """Every saved run of ``out`` judged again by the current checkers (a checker fixed after a run was made)."""
    from txnspec.audit.chaos import history
    from txnspec.audit.chaos.run import judge, verdict

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    for r in rows:
        folder = out / f"tv{r['tv']}-seed{r['seed']}"
        if not (folder / "history.jsonl").exists():
            continue
        summary = judge(history.load(folder / "history.jsonl"), r["tv"])
        r.update(exit=verdict(summary), anomalies=summary["anomaly_counts"], validation=summary["validation"],
                 coordinator=summary["coordinator"], groups=summary["groups"],
                 seconds_anomalies=summary["seconds_anomalies"], seconds_coordination=summary["seconds_coordination"])
    return rows


CHECKS = ("validation", "coordinator", "groups")  # unexplained: any of the three (older rows lack the last two)


def table(outs: list[Path], again: bool = False) -> str:
    """One table over the runs of every folder in ``outs`` (several batches together)."""
    rows = [r for out in outs for r in (rejudge(out) if again else [
        json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()])]
    by_tv: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_tv[r["tv"]].append(r)
    lines = ["| TV | runs | exit 0 | faults injected (min-max, total) | runs with >= 5 faults | anomalies | "
             "unexplained | committed txns (mean) | records validated (mean) | validation s (mean, max) | "
             "anomaly check s (mean) | coordinators s (mean) | wall s per run (mean) | histories per minute |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for tv, rs in sorted(by_tv.items()):
        faults = [r["faults"] for r in rs]
        val = [r["validation"].get("seconds", 0) for r in rs]
        wall = sum(r["wall_seconds"] for r in rs) / len(rs)
        lines.append(
            f"| {tv} | {len(rs)} | {sum(r['exit'] == 0 for r in rs)} | {min(faults)}-{max(faults)}, {sum(faults)} | "
            f"{sum(f >= 5 for f in faults)} | "
            f"{sum(sum(r['anomalies'].values()) for r in rs)} | "
            f"{sum(not all(r.get(k, {}).get('explained', k != 'validation') for k in CHECKS) for r in rs)} | "
            f"{sum(r['transactions'].get('committed', 0) for r in rs) / len(rs):.0f} | "
            f"{sum(r['validation'].get('records', 0) for r in rs) / len(rs):.0f} | "
            f"{sum(val) / len(val):.2f}, {max(val):.2f} | "
            f"{sum(r.get('seconds_anomalies') or 0 for r in rs) / len(rs):.2f} | "
            f"{sum(r.get('seconds_coordination') or 0 for r in rs) / len(rs):.2f} | {wall:.0f} | {60 / wall:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, nargs="+", help="the batch's folder (--table: one or more)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--broker", default="kafka:4.4.0")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--versions", default="2,1")
    parser.add_argument("--faults", default="kill,pause,client,timeout")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--rejudge", action="store_true", help="with --table: judge the saved histories again")
    args = parser.parse_args()
    if args.table:
        print(table(args.out, args.rejudge))
    elif len(args.out) != 1:
        parser.error("runs go into one --out folder")
    else:
        run(args.out[0], args.runs, args.seconds, args.broker, args.first_seed,
            [int(v) for v in args.versions.split(",")], args.faults)
