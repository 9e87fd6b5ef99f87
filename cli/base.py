"""What every ``txnspec`` command shares: exit statuses, the two errors that exit 2, output files, and
:class:`Command`, the value a command module exports as ``COMMAND``.

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
from typing import NamedTuple

from txnspec.conformance.environment import EnvironmentProblem
from txnspec.spec.variants.user import VariantFileError

__all__ = ["EXIT_INCONCLUSIVE", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "EXIT_VIOLATION", "Command",
           "EnvironmentProblem", "UsageError", "check_input_file", "check_output_path", "execute", "write_output"]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERNAL = 0, 1, 2, 3, 4

Handler = Callable[[argparse.Namespace], int]


class Command(NamedTuple):
    """One subcommand: its name, its one-line help, the function that adds its arguments, and its handler."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


class UsageError(Exception):
    """Bad arguments or unreadable input; printed as ``txnspec: error: ...`` with exit status 2."""




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


def check_input_file(path: Path, what: str) -> None:
    """Refuse, before any work, an input file that is missing, a folder, or unreadable."""
    if path.is_dir():
        raise UsageError(f"{what} {str(path)!r} is a directory, not a file")
    if not path.exists():
        raise UsageError(f"{what} {str(path)!r} does not exist")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{what} {str(path)!r} cannot be read (permission denied)")


def write_output(path: Path, option: str, write: Callable[[Path], object]) -> None:
    """Run ``write(path)``; an OS failure becomes an :class:`EnvironmentProblem` naming the option."""
    try:
        write(path)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {option} {str(path)!r}: {exc.strerror or exc}") from exc


def execute(command: Command, args: argparse.Namespace, debug: bool = False) -> int:
    """Run ``command`` on parsed ``args``: its exit status, errors turned into one line on stderr."""
    try:
        return int(command.run(args))
    except (UsageError, EnvironmentProblem, VariantFileError) as exc:
        return _fail(command.name, str(exc), EXIT_USAGE, debug)
    except OSError as exc:  # an input or output the handler did not name itself
        where = f" {exc.filename!r}" if exc.filename else ""
        return _fail(command.name, f"{exc.strerror or exc}{where}", EXIT_USAGE, debug)
    except KeyboardInterrupt:
        print("txnspec: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return _fail(command.name, f"internal error (a bug in txnspec): {type(exc).__name__}: {first_line}; "
                     "--debug shows the traceback", EXIT_INTERNAL, debug)


def run_alone(command: Command, argv: Sequence[str]) -> int:
    """Parse ``argv`` for ``command`` alone and run it (how ``txnspec main`` runs its stages)."""
    parser = argparse.ArgumentParser(prog=f"txnspec {command.name}", description=command.help)
    command.arguments(parser)
    return execute(command, parser.parse_args(list(argv)))


def _fail(command: str, message: str, status: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"txnspec {command}: error: {message}", file=sys.stderr)
    return status
