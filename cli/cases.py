"""``txnspec cases``: Kafka behaviour cases (``txn-case/1``) on the spec's handlers or on the implementation."""

from __future__ import annotations

import argparse
from pathlib import Path

from txnspec.cli.base import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, Command, UsageError, check_input_file


def _cases_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="a txn-case/1 JSON Lines file")
    p.add_argument("--target", choices=("spec", "impl"), default="spec",
                   help="run the cases on the spec's component handlers or on the implementation")
    p.add_argument("--quiet", action="store_true", help="print only failures and the last line")


def cmd_cases(args: argparse.Namespace) -> int:
    from txnspec.conformance.cases.runner import run_cases, target_named

    check_input_file(args.file, "case file")
    report = run_cases(args.file, target_named(args.target))
    if not report.results:
        raise UsageError(f"case file {str(args.file)!r} holds no cases")
    for result in report.results:
        if result.verdict == "pass":
            if not args.quiet:
                print(f"PASS  {result.case_id}")
            continue
        print(f"{result.verdict.upper():5} {result.case_id}")
        if result.error:
            print(f"      {result.error}")
        for mismatch in result.mismatches:
            print(f"      {mismatch}")
    malformed = sum(r.malformed for r in report.results)
    print(f"{report.passed} passed, {report.failed} failed" + (f" ({malformed} malformed)" if malformed else ""))
    if report.failed > malformed:
        return EXIT_VIOLATION
    return EXIT_USAGE if malformed else EXIT_OK


COMMAND = Command("cases", "run Kafka behaviour cases (txn-case/1) against the spec or the implementation",
                  _cases_arguments, cmd_cases)
