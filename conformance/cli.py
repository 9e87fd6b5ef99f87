"""The ``txnspec`` command: one entry point, one function per subcommand.

Exit statuses are the same for every subcommand: 0 everything held, 1 a check failed (a violation, a
failing case, a divergence), 2 bad arguments, unreadable input or a failing environment (an output file
that cannot be written, a Spark master or broker that cannot be reached), with one line on stderr naming
what was wrong, 3 inconclusive (z3 answered unknown, a state cap was hit where completeness was required),
4 an internal error (a bug in txnspec). No traceback is printed unless ``--debug`` is given. A verdict is
printed before any output file is written, so a file that cannot be written never hides it.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERNAL = 0, 1, 2, 3, 4

Handler = Callable[[argparse.Namespace], int]
_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


class UsageError(Exception):
    """Bad arguments or unreadable input; printed as ``txnspec: error: ...`` with exit status 2."""


class EnvironmentProblem(Exception):
    """The environment failed (an unwritable output, an unreachable service); exit status 2."""


def check_output_path(path: Path | None, option: str) -> None:
    """Refuse, before any work, an output file whose folder is missing or not writable."""
    if path is None:
        return
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{option} {str(path)!r} is a folder, not a file")
    if not folder.is_dir():
        raise UsageError(f"the folder of {option} {str(path)!r} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {str(path)!r} cannot be written (permission denied)")


def write_output(path: Path, option: str, write: Callable[[Path], object]) -> None:
    """Run ``write(path)``; an OS failure becomes an :class:`EnvironmentProblem` naming the option."""
    try:
        write(path)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {option} {str(path)!r}: {exc.strerror or exc}") from exc


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


# --- main ----------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="txnspec",
        description="The executable, model-checked reference of Kafka's exactly-once protocol.")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error (anywhere on the command line)")
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
                   "txnspec.conformance.cli_mutation", "txnspec.conformance.cli_diff",
                   "txnspec.conformance.cli_replay", "txnspec.conformance.cli_serve"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    _load_subcommands()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except (UsageError, EnvironmentProblem) as exc:
        return _fail(args.command, str(exc), EXIT_USAGE, debug)
    except OSError as exc:  # an input or output the handler did not name itself
        where = f" {exc.filename!r}" if exc.filename else ""
        return _fail(args.command, f"{exc.strerror or exc}{where}", EXIT_USAGE, debug)
    except KeyboardInterrupt:
        print("txnspec: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return _fail(args.command, f"internal error (a bug in txnspec): {type(exc).__name__}: {first_line}; "
                     "--debug shows the traceback", EXIT_INTERNAL, debug)


def _fail(command: str, message: str, status: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"txnspec {command}: error: {message}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
