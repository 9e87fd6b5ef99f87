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

from txnspec.audit.report import AuditReport, RuleResult
from txnspec.cli.base import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, Command, UsageError, write_output


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", required=True,
                   metavar="BOOTSTRAP|kafka[:VERSION]|serve|tansu|noida|librdkafka-mock|impl",
                   help="a bootstrap address (host:port[,host:port]) of a broker you run, real Apache Kafka "
                        "(kafka: the newest 4.x, or kafka:4.1.1), txnspec serve, or another broker txnspec starts on "
                        "127.0.0.1, "
                        "or impl: the reference implementation in process (wire level only)")
    p.add_argument("--transaction-version", type=int, choices=(1, 2), default=2,
                   help="kafka and serve: the transaction.version they run with (default 2, KIP-890)")
    p.add_argument("--kafka-cache", type=Path, default=None,
                   help="real Kafka: where its jars are resolved and kept (default $TXNSPEC_KAFKA_CACHE or "
                        "~/.cache/txnspec/kafka)")
    p.add_argument("--level", choices=("wire", "client", "both"), default=None,
                   help="what to check (default both; wire for impl)")
    p.add_argument("--ops", type=int, default=20, help="transactions the client workload runs (default 20)")
    p.add_argument("--traces", type=int, default=2, metavar="N",
                   help="wire level: client traces of the conformance generator per scenario (default 2; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the workload's choices and of the traces")
    p.add_argument("--out", type=Path, help="folder for report.txt, report.json, history.jsonl and broker logs")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--html-out", type=Path, help="write a self-contained HTML report (violations as diagrams)")
    p.add_argument("--two-phase-commit", action="store_true",
                   help="KIP-939: start kafka or serve with transaction.two.phase.commit.enable and "
                        "unstable.api.versions.enable (another broker must have both) and check the 2PC rule")


def cmd_audit(args: argparse.Namespace) -> int:
    from txnspec.audit.connection import WireError
    from txnspec.audit.report import BrokerUnavailable, Level
    from txnspec.audit.targets import open_target, takes_transaction_version

    if args.ops < 1:
        raise UsageError("--ops must be at least 1")
    if args.traces < 0:
        raise UsageError("--traces must be at least 0")
    if args.out is not None:
        if args.out.exists() and not args.out.is_dir():
            raise UsageError(f"--out {str(args.out)!r} exists and is not a folder")
        args.out.mkdir(parents=True, exist_ok=True)
    if args.transaction_version != 2 and not takes_transaction_version(args.broker):
        raise UsageError("--transaction-version applies to --broker kafka[:VERSION] and serve; other brokers are "
                         "audited at the transaction version they finalise")
    if args.two_phase_commit and args.broker == "impl":
        raise UsageError("--two-phase-commit checks a broker on the wire (kafka, serve or an address), not impl")
    level = args.level or ("wire" if args.broker == "impl" else "both")
    if args.broker == "impl" and level != "wire":
        raise UsageError("--broker impl is the reference implementation in process: it has no socket for a client, "
                         "use --level wire")
    levels: tuple[Level, ...] = ("wire", "client") if level == "both" else ("wire",) if level == "wire" \
        else ("client",)
    report = AuditReport(args.broker, levels, args.seed)
    started = time.monotonic()
    from txnspec.cli.progress import progress_line

    with progress_line(sys.stderr.isatty() and not args.json) as line:
        def stage(what: str) -> None:
            line(f"{sum(r.checked for r in report.rules):,} checks of {len(report.rules)} rules done; {what}")

        if args.broker == "impl":
            from txnspec.audit.wire_traces import run_impl_wire_audit

            report.facts.update({"bootstrap": "in process", "version": "txnspec.impl"})
            stage("wire level")
            report.rules.extend(run_impl_wire_audit(args.seed, args.traces))
            stage("transaction timeout")
            report.rules.append(_impl_timeout_rule())
            return _finish(args, report, started)
        try:
            stage(f"starting or reaching {args.broker}")
            with open_target(args.broker, args.out, args.transaction_version, args.kafka_cache,
                             args.two_phase_commit) as target:
                report.facts.update({"bootstrap": target.bootstrap, **({"version": target.version}
                                                                        if target.version else {}), **target.facts})
                run = f"{args.seed}-{int(time.time() * 1000) % 10**8}"
                if "wire" in levels:
                    from txnspec.audit.wire_traces import run_wire_audit

                    stage("wire level")
                    report.rules.extend(run_wire_audit(target.bootstrap, run, args.seed, args.traces))
                    if args.two_phase_commit:
                        from txnspec.audit.two_phase import run_two_phase_rule

                        stage("KIP-939 two-phase commit")
                        report.rules.append(run_two_phase_rule(target.bootstrap, run))
                if "client" in levels:
                    from txnspec.audit.workload import run_client_audit

                    stage(f"client level ({args.ops} transactions)")
                    report.rules.extend(run_client_audit(target.bootstrap, args.ops, args.seed, args.out))
                    from txnspec.audit.member_epoch import run_member_epoch_rule

                    stage("KIP-848 member epochs")
                    report.rules.append(run_member_epoch_rule(target.bootstrap, run))
        except BrokerUnavailable as exc:
            print(f"txnspec audit: broker {args.broker!r} unavailable: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except WireError as exc:  # the connection broke, or the answers stopped being Kafka's
            print(f"txnspec audit: broker {args.broker!r} stopped answering in Kafka's protocol: {exc}",
                  file=sys.stderr)
            return EXIT_USAGE
    return _finish(args, report, started)


def _impl_timeout_rule() -> RuleResult:
    """The timeout rule on the implementation at transaction versions 1 and 2, as one row."""
    from txnspec.audit.timeout import ImplTimeoutWire, run_timeout_rule

    rows = [run_timeout_rule(ImplTimeoutWire(wire_tv), spec_tv, f"impl-tv{spec_tv}", sleep=lambda _: None)
            for wire_tv, spec_tv in ((0, 1), (2, 2))]
    merged = rows[0]
    merged.checked += rows[1].checked
    merged.violations += rows[1].violations
    merged.examples += rows[1].examples
    merged.note = "; ".join(r.note for r in rows if r.note)
    return merged


def _finish(args: argparse.Namespace, report: AuditReport, started: float) -> int:
    report.facts["seconds"] = round(time.monotonic() - started, 1)
    text = report.render()
    print(json.dumps(report.to_json(), indent=2, default=str) if args.json else text, flush=True)
    if args.out is not None:  # after the verdict, so that a file that cannot be written never hides it
        write_output(args.out / "report.txt", "--out", lambda p: p.write_text(text + "\n"))
        write_output(args.out / "report.json", "--out",
                     lambda p: p.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n"))
    if args.html_out is not None:
        from txnspec.cli.html_report import audit_page, write_page

        write_output(args.html_out, "--html-out", lambda p: write_page(p, audit_page(report)))
    return EXIT_OK if report.ok else EXIT_VIOLATION


COMMAND = Command("audit",
                  "audit a Kafka-protocol broker against the spec (wire level and client level)",
                  _arguments, cmd_audit)
