"""``txnspec audit``: a real Kafka-protocol broker checked against the spec, on the wire and through a client.

Exit 0 when every rule held, 1 when something was violated, 2 when the broker could not be started or
reached (or on bad arguments). ``--out DIR`` keeps report.txt, report.json, the client history
(history.jsonl) and the logs of a broker txnspec started.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from txnspec.conformance.audit.report import AuditReport
from txnspec.conformance.cli import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, UsageError, subcommand


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", required=True, metavar="BOOTSTRAP|tansu|noida|librdkafka-mock|impl",
                   help="a bootstrap address (host:port[,host:port]), a broker txnspec starts on 127.0.0.1, or "
                        "impl: the reference implementation in process (wire level only)")
    p.add_argument("--level", choices=("wire", "client", "both"), default=None,
                   help="what to check (default both; wire for impl)")
    p.add_argument("--ops", type=int, default=20, help="transactions the client workload runs (default 20)")
    p.add_argument("--traces", type=int, default=2, metavar="N",
                   help="wire level: client traces of the conformance generator per scenario (default 2; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the workload's choices and of the traces")
    p.add_argument("--out", type=Path, help="folder for report.txt, report.json, history.jsonl and broker logs")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


@subcommand("audit", "audit a Kafka-protocol broker against the spec (wire level and client level)", _arguments)
def cmd_audit(args: argparse.Namespace) -> int:
    from txnspec.conformance.audit.report import BrokerUnavailable, Level
    from txnspec.conformance.audit.targets import open_target

    if args.ops < 1:
        raise UsageError("--ops must be at least 1")
    if args.traces < 0:
        raise UsageError("--traces must be at least 0")
    if args.out is not None:
        if args.out.exists() and not args.out.is_dir():
            raise UsageError(f"--out {str(args.out)!r} exists and is not a folder")
        args.out.mkdir(parents=True, exist_ok=True)
    level = args.level or ("wire" if args.broker == "impl" else "both")
    if args.broker == "impl" and level != "wire":
        raise UsageError("--broker impl is the reference implementation in process: it has no socket for a client, "
                         "use --level wire")
    levels: tuple[Level, ...] = ("wire", "client") if level == "both" else ("wire",) if level == "wire" \
        else ("client",)
    report = AuditReport(args.broker, levels, args.seed)
    started = time.monotonic()
    if args.broker == "impl":
        from txnspec.conformance.audit.wire_traces import run_impl_wire_audit

        report.facts.update({"bootstrap": "in process", "version": "txnspec.impl"})
        report.rules.extend(run_impl_wire_audit(args.seed, args.traces))
        return _finish(args, report, started)
    try:
        with open_target(args.broker, args.out) as target:
            report.facts.update({"bootstrap": target.bootstrap, **({"version": target.version} if target.version
                                                                    else {}), **target.facts})
            run = f"{args.seed}-{int(time.time() * 1000) % 10**8}"
            if "wire" in levels:
                from txnspec.conformance.audit.wire_traces import run_wire_audit

                report.rules.extend(run_wire_audit(target.bootstrap, run, args.seed, args.traces))
            if "client" in levels:
                from txnspec.conformance.audit.workload import run_client_audit

                report.rules.extend(run_client_audit(target.bootstrap, args.ops, args.seed, args.out))
    except BrokerUnavailable as exc:
        print(f"txnspec audit: broker {args.broker!r} unavailable: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _finish(args, report, started)


def _finish(args: argparse.Namespace, report: AuditReport, started: float) -> int:
    report.facts["seconds"] = round(time.monotonic() - started, 1)
    text = report.render()
    if args.out is not None:
        (args.out / "report.txt").write_text(text + "\n")
        (args.out / "report.json").write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    print(json.dumps(report.to_json(), indent=2, default=str) if args.json else text)
    return EXIT_OK if report.ok else EXIT_VIOLATION
