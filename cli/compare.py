"""``txnspec compare``: the guarantees of Kafka, RocketMQ and Pulsar, model-checked side by side.

Exit 0 when every cell has the verdict its system's source leads us to expect, 1 when one differs, 2 on
bad arguments. ``--markdown-out docs/comparison.md`` regenerates the documented table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from txnspec.cli.base import EXIT_OK, EXIT_VIOLATION, Command, UsageError, write_output


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", action="append", dest="systems", metavar="NAME",
                   help="compare only this system (kafka, rocketmq, pulsar; repeatable); default: all")
    p.add_argument("--jobs", type=int, default=1, help="model checks run in parallel (processes); default 1")
    p.add_argument("--json", action="store_true", help="print the table and every cell's evidence as JSON")
    p.add_argument("--markdown-out", type=Path, help="write the table as Markdown (docs/comparison.md)")


def cmd_compare(args: argparse.Namespace) -> int:
    from txnspec.conformance.compare import ScenarioRun, compare, dumps

    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.markdown_out is not None and not args.markdown_out.parent.is_dir():
        raise UsageError(f"the folder of --markdown-out {str(args.markdown_out)!r} does not exist")

    def progress(run: ScenarioRun) -> None:
        if not args.json:
            variant = f" [{run.variant}]" if run.variant != "current" else ""
            print(f"  checked {run.system} {run.scenario}{variant}: {run.states:,} states, {run.seconds:.1f} s",
                  file=sys.stderr)

    try:
        comparison = compare(args.systems, jobs=args.jobs, on_run=progress)
    except KeyError as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    print(dumps(comparison) if args.json else comparison.render_text(), flush=True)
    if args.markdown_out is not None:
        write_output(args.markdown_out, "--markdown-out", lambda p: p.write_text(comparison.render_markdown()))
    return EXIT_OK if comparison.ok else EXIT_VIOLATION


COMMAND = Command("compare", "model-check the guarantees of Kafka, RocketMQ and Pulsar and print them side by side",
                  _arguments, cmd_compare)
