"""The ``txnspec`` command: one entry point, one function per subcommand.

Exit statuses are the same for every subcommand: 0 everything held, 1 a check failed (a violation, a
failing case, a divergence), 2 bad arguments or unreadable input (with a message naming what was
wrong), 3 inconclusive (z3 answered unknown, a state cap was hit where completeness was required).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3

Handler = Callable[[argparse.Namespace], int]
_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


class UsageError(Exception):
    """Bad arguments or unreadable input; printed as ``txnspec: error: ...`` with exit status 2."""


def subcommand(name: str, help_text: str,
               arguments: Callable[[argparse.ArgumentParser], None]) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _SUBCOMMANDS[name] = (help_text, arguments, handler)
        return handler
    return register


# --- cases ---------------------------------------------------------------------------------------

def _cases_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="a txn-case/1 JSON Lines file")
    p.add_argument("--target", choices=("spec", "impl"), default="spec",
                   help="run the cases on the spec's component handlers or on the implementation")
    p.add_argument("--quiet", action="store_true", help="print only failures and the last line")


@subcommand("cases", "run Kafka behaviour cases (txn-case/1) against the spec or the implementation",
            _cases_arguments)
def cmd_cases(args: argparse.Namespace) -> int:
    from txnspec.conformance.cases import run_cases, target_named

    if not args.file.is_file():
        raise UsageError(f"case file {str(args.file)!r} does not exist")
    report = run_cases(args.file, target_named(args.target))
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
    print(f"{report.passed} passed, {report.failed} failed")
    return EXIT_OK if report.failed == 0 else EXIT_VIOLATION


# --- main ----------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="txnspec",
        description="The executable, model-checked reference of Kafka's exactly-once protocol.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, (help_text, arguments, handler) in sorted(_SUBCOMMANDS.items()):
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        arguments(sub)
        sub.set_defaults(handler=handler)
    return parser


def _load_subcommands() -> None:
    """Import the modules that register further subcommands (check, prove, conform, main ...)."""
    import importlib

    for module in ("txnspec.conformance.cli_check", "txnspec.conformance.cli_conform",
                   "txnspec.conformance.cli_prove", "txnspec.conformance.cli_main",
                   "txnspec.conformance.cli_audit", "txnspec.conformance.cli_compare",
                   "txnspec.conformance.cli_mutation", "txnspec.conformance.cli_serve"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    _load_subcommands()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except UsageError as exc:
        print(f"txnspec {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("txnspec: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
