"""``txnspec chaos``: a 3-node real Kafka under a seeded schedule of faults, the clients' history checked for
anomalies and validated against the spec (docs/chaos.md).

Exit 0 when the history has no anomaly and is explained by the spec, 1 when it has an anomaly or is
unexplained, 2 on bad arguments or a cluster that could not be started, 3 when the validation's search ran
out of budget. ``--check-history FILE`` judges a saved history without starting Kafka.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from txnspec.cli.base import Command, UsageError, check_input_file, check_output_path, write_output


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", default="kafka", metavar="kafka[:VERSION]|serve|serve:durable|noida|tansu",
                   help="real Apache Kafka resolved from Maven Central (kafka: the newest 4.x, or kafka:4.4.0), or "
                        "txnspec serve as one node, in memory (serve: a restart loses everything) or with its logs "
                        "on disk (serve:durable), or noida-db (its data kept across restarts) or Tansu (memory only) "
                        "as one node")
    p.add_argument("--nodes", type=int, default=3, help="KRaft nodes, each broker and voter (default 3)")
    p.add_argument("--transaction-version", type=int, choices=(1, 2), default=2,
                   help="the cluster's transaction.version (default 2, KIP-890)")
    p.add_argument("--seconds", type=float, default=60.0, help="how long the workload runs (default 60)")
    p.add_argument("--faults", default="kill,pause,client,timeout",
                   help="fault kinds, comma separated: kill,pause,network,client,timeout,member (or none); network "
                        "puts a TCP proxy in front of every node; member stops a consumer-group member past its "
                        "session timeout")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault schedule and the workload's choices")
    p.add_argument("--out", type=Path, default=None,
                   help="folder for faults.json, history.jsonl, summary.json and the nodes' logs "
                        "(default ./chaos-out/seed-S)")
    p.add_argument("--kafka-cache", type=Path, default=None, help="where Kafka's jars are resolved and kept")
    p.add_argument("--check-history", type=Path, default=None, metavar="FILE",
                   help="judge a saved history.jsonl instead of running (with its --transaction-version)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--html-out", type=Path, help="write a self-contained HTML page with the timeline")


def cmd_chaos(args: argparse.Namespace) -> int:
    from txnspec.audit.chaos import faults, history, run
    from txnspec.audit.kafka import parse_broker_name
    from txnspec.audit.report import BrokerUnavailable
    from txnspec.cli.progress import progress_line
    from txnspec.conformance.environment import EnvironmentProblem

    check_output_path(args.html_out, "--html-out")
    if args.check_history is not None:
        check_input_file(args.check_history, "--check-history")
        try:
            events = history.load(args.check_history)
            judged = run.judge(events, args.transaction_version)  # refuses a history that predates a field
        except history.HistoryError as exc:
            raise UsageError(str(exc)) from None
        summary = {"history": str(args.check_history), "transaction_version": args.transaction_version, **judged}
    else:
        from txnspec.audit.chaos.cluster import FOREIGN

        serve = args.broker in run.SERVE_BROKERS or args.broker in FOREIGN  # one node, not Kafka
        if not args.broker.startswith("kafka") and not serve:
            raise UsageError(f"--broker {args.broker!r}: chaos runs a multi-node real Kafka (kafka or kafka:VERSION), "
                             "txnspec serve as one node (serve: in memory, serve:durable: logs on disk), or noida or "
                             "tansu as one node")
        if args.seconds < 10 or args.seconds > 3600:
            raise UsageError(f"--seconds {args.seconds:g}: between 10 and 3600")
        if not 1 <= args.nodes <= 5:
            raise UsageError(f"--nodes {args.nodes}: between 1 and 5")
        try:
            kinds = faults.parse_kinds(args.faults)
            version = None if serve else parse_broker_name(args.broker)
        except (faults.ScheduleError, BrokerUnavailable) as exc:
            raise UsageError(str(exc)) from None
        if serve and "network" in kinds:
            raise UsageError(f"network faults need the proxy in front of a Kafka cluster; {args.broker} has none")
        if args.nodes < 3 and not serve and any(k in ("kill", "pause", "network") for k in kinds):
            raise UsageError("node faults need at least 3 nodes (a node down must leave a quorum and the min ISR)")
        out = args.out or Path("chaos-out") / f"seed-{args.seed}"
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {str(out)!r} exists and is not a folder")
        if args.kafka_cache is not None:
            import os

            os.environ["TXNSPEC_KAFKA_CACHE"] = str(args.kafka_cache)
        show = sys.stderr.isatty() and not args.json
        with progress_line(show) as line:
            try:
                summary = run.chaos_run(version, args.nodes, args.transaction_version, args.seconds, kinds,
                                        args.seed, out, say=line if show else (lambda text: None), broker=args.broker)
            except BrokerUnavailable as exc:
                raise EnvironmentProblem(str(exc)) from None
        events = history.load(out / "history.jsonl")
    print(json.dumps(summary, indent=1) if args.json else run.render(summary))
    if args.html_out is not None:
        page = run.html_page(summary, events)
        write_output(args.html_out, "--html-out", lambda path: path.write_text(page))
    return int(run.verdict(summary))


COMMAND = Command("chaos", "real Kafka (3 nodes) under faults: the clients' history checked for anomalies and "
                  "validated against the spec", _arguments, cmd_chaos)
