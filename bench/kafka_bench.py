"""Real Apache Kafka in the audit: jar resolution (cold and cached), broker start, the audit's wall time per level,
and trace replay throughput on real Kafka against the implementation in process, side by side in one run.

    python bench/kafka_bench.py [--per-scenario 167] [--transaction-version 2]

Prints a Markdown table for bench/RESULTS.md. The cold resolution uses a fresh cache folder (it downloads the jars
from Maven Central); everything else uses the default cache.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

from txnspec.audit import wire_traces as wt
from txnspec.audit.kafka import kafka_broker, resolve
from txnspec.audit.report import RuleResult
from txnspec.cli import main


def _timed(fn):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    value = fn()
    return value, time.monotonic() - started


def run(per_scenario: int, transaction_version: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as cold:
        runtime, seconds = _timed(lambda: resolve(None, Path(cold)))
        jars = len(runtime.classpath)
        rows.append((f"jar resolution, cold (Kafka {runtime.version}, {jars} jars)", f"{seconds:.1f} s"))
        _, seconds = _timed(lambda: resolve(None, Path(cold)))
        rows.append(("jar resolution, cached", f"{seconds * 1000:.0f} ms"))
    variant = "current" if transaction_version >= 2 else "tv1"
    plans, seconds = _timed(lambda: wt.plans(0, per_scenario, variant, True))
    rows.append((f"planning {len(plans)} traces through the spec", f"{seconds:.1f} s"))
    with tempfile.TemporaryDirectory() as workdir:
        started = time.monotonic()
        with kafka_broker(Path(workdir), None, transaction_version) as running:
            rows.append((f"broker start (format + ready), TV{transaction_version}",
                         f"{time.monotonic() - started:.1f} s"))
            for level in ("wire", "client"):
                argv = ["audit", "--broker", running.bootstrap, "--level", level, "--traces", "9", "--ops", "20",
                        "--seed", "7", "--json"]
                with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                    _, seconds = _timed(lambda argv=argv: main(argv))
                rows.append((f"`txnspec audit --level {level}` (9 traces per scenario, 20 ops)", f"{seconds:.1f} s"))
            with wt.socket_txn_wire(running.bootstrap) as wire:
                results, seconds = _timed(lambda: wt.run_plans(wire, plans, f"bench{int(time.time())}"))
    violated = sum(r.violations for r in results)
    rows.append((f"{len(plans)} traces on real Kafka ({violated} violations)",
                 f"{seconds:.1f} s, {len(plans) / seconds:.2f} traces/s"))
    impl_rows = {rule: RuleResult("wire", rule, text) for rule, text in wt.RULE_DESCRIPTIONS.items()}
    started = time.monotonic()
    for i, plan in enumerate(plans):  # each trace on a fresh broker, as `txnspec audit --broker impl`
        wt.run_trace(wt.ImplTxnWire(2 if transaction_version >= 2 else 0), plan, f"impl-{i}", impl_rows)
    seconds = time.monotonic() - started
    violated = sum(r.violations for r in impl_rows.values())
    rows.append((f"the same traces on the implementation in process ({violated} violations)",
                 f"{seconds:.1f} s, {len(plans) / seconds:.1f} traces/s"))
    return rows


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-scenario", type=int, default=167)
    parser.add_argument("--transaction-version", type=int, choices=(1, 2), default=2)
    args = parser.parse_args()
    print("| measure | result |\n|---|---|")
    for name, value in run(args.per_scenario, args.transaction_version):
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main_()
