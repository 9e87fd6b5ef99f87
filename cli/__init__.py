"""The ``txnspec`` command: one entry point and the table of its subcommands, one module each.

Every command module exports ``COMMAND`` (:class:`txnspec.cli.base.Command`); :data:`COMMANDS` lists them, so
a misspelt module is an import error here, never a command that silently goes missing. Exit statuses and
errors are :mod:`txnspec.cli.base`'s. Nothing imports this package: it sits on top of spec, checker, impl,
conformance and serve.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from txnspec.cli import audit, cases, chaos, check, compare, conform, diff, main_job, mutation, prove, replay, serve
from txnspec.cli.base import Command, execute

COMMANDS: tuple[Command, ...] = tuple(sorted(
    (m.COMMAND for m in (audit, cases, chaos, check, compare, conform, diff, main_job, mutation, prove, replay,
                         serve)),
    key=lambda c: c.name))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="txnspec",
        description="The executable, model-checked reference of Kafka's exactly-once protocol.")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error (anywhere on the command line)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(sub)
        sub.set_defaults(command_value=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    args = build_parser().parse_args(argv)
    return execute(args.command_value, args, debug)


if __name__ == "__main__":
    sys.exit(main())
