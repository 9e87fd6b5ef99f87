"""``txnspec diff``: the client-observable difference of two protocol variants on one scenario.

Both variants' models are projected onto what clients observe (:mod:`txnspec.spec.observe`) and
compared by :func:`txnspec.checker.language.language_difference`: the shortest observable behaviour each
allows and the other does not. Exit 0 when there is no observable difference on the bounded spaces, 1
when there is one (in either direction), 2 on bad arguments, 3 when the state cap stopped the search
before a difference was found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from txnspec.cli.base import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_VIOLATION, Command, UsageError
from txnspec.spec.observe import projection
from txnspec.spec.variants.user import load_variant_files


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="tiny", help="a named Kafka scenario (txnspec check --list)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME",
                   help="a variant to compare (twice: A then B; once: against a --variant-file's or, without "
                        "one, against current)")
    p.add_argument("--variant-file", action="append", default=[], type=Path, metavar="FILE.py",
                   help="load a user-written variant (a module defining VARIANT); it is compared when fewer "
                        "than two --variant are given")
    p.add_argument("--observe", choices=("application", "wire"), default="application",
                   help="application: calls, outcomes, reads, committed offsets; wire: also the requests and "
                        "answers between producers and brokers")
    p.add_argument("--max-states", type=int, default=None, help="stop after this many states of both variants")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--html-out", type=Path, help="write a self-contained HTML report with sequence diagrams")


def chosen_variants(named: list[str], from_files: list[str]) -> tuple[str, str]:
    chosen = [*named, *from_files]
    if len(chosen) == 1:
        chosen = ["current", *chosen]
    if len(chosen) != 2:
        raise UsageError(f"diff compares two variants; got {len(chosen)} ({', '.join(chosen) or 'none'}): give "
                         "--variant A --variant B, or --variant A with a --variant-file")
    return chosen[0], chosen[1]


def cmd_diff(args: argparse.Namespace) -> int:
    from txnspec.checker.language import language_difference
    from txnspec.cli.progress import progress_line
    from txnspec.spec.model import build_model
    from txnspec.spec.scenarios import SCENARIOS
    from txnspec.spec.variants import variant_named

    if args.max_states is not None and args.max_states <= 0:
        raise UsageError("--max-states must be a positive number")
    a, b = chosen_variants(args.variant, load_variant_files(args.variant_file))
    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown Kafka scenario {args.scenario!r}; known: {', '.join(SCENARIOS)} (diff compares "
                         "Kafka variants)")
    for name in (a, b):
        try:
            variant_named(name)
        except KeyError as exc:
            raise UsageError(str(exc).strip("'\"")) from None
    models = build_model(args.scenario, a), build_model(args.scenario, b)
    show = sys.stderr.isatty() and not args.json
    with progress_line(show) as line:
        result = language_difference(
            models[0], models[1], projection(models[0].metadata["system"], args.observe), max_states=args.max_states,
            progress=(lambda states, pairs, rate: line(f"{states:,} states, {pairs:,} macro-state pairs, "
                                                       f"{rate:,.0f} states/s")) if show else None)
    summary = summarise(args.scenario, (a, b), args.observe, result)
    if args.html_out is not None:
        from txnspec.cli.html_report import diff_page, write_page

        write_page(args.html_out, diff_page(summary, result, models))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(render(summary))
    if result.only != (None, None):
        return EXIT_VIOLATION
    return EXIT_OK if result.complete else EXIT_INCONCLUSIVE


def summarise(scenario: str, names: tuple[str, str], observe: str, result: Any) -> dict[str, Any]:
    """The result as plain data (what ``--json`` prints and the HTML report shows)."""
    from txnspec.spec.observe import render_labels

    directions = []
    for k, trace in enumerate(result.only):
        entry: dict[str, Any] = {"allowed_by": names[k], "not_by": names[1 - k], "difference": trace is not None}
        if trace is not None:
            entry.update(observations=render_labels(trace.labels, trace.start_view),
                         steps=[str(action) for action, _ in trace.steps[1:]])
        directions.append(entry)
    if result.only != (None, None):
        verdict = "observable difference"
    elif result.complete:
        verdict = f"no observable difference on {sum(result.states):,} states"
    else:
        verdict = "no difference found before the state cap (inconclusive)"
    return {"scenario": scenario, "variants": list(names), "observe": observe, "verdict": verdict,
            "directions": directions, "states": list(result.states), "macro_states": list(result.macro_states),
            "pairs": result.pairs, "complete": result.complete, "stop_reason": result.stop_reason,
            "seconds": round(result.seconds, 3)}


def render(summary: dict[str, Any]) -> str:
    a, b = summary["variants"]
    lines = [f"diff of scenario {summary['scenario']}: {a} vs {b}, observing the {summary['observe']}",
             summary["verdict"]]
    for entry in summary["directions"]:
        if not entry["difference"]:
            if summary["complete"] or summary["verdict"] == "observable difference":
                lines.append(f"  everything {entry['allowed_by']} shows, {entry['not_by']} can show too"
                             + ("" if summary["complete"] else " (up to the state cap)"))
            continue
        observations = entry["observations"]
        lines.append(f"only {entry['allowed_by']} (shortest: {len(observations)} observations, "
                     f"{len(entry['steps'])} steps):")
        for i, text in enumerate(observations, start=1):
            marker = f"   <- {entry['not_by']} cannot" if i == len(observations) else ""
            lines.append(f"  {i:3}. {text}{marker}")
    lines.append(f"explored {summary['states'][0]:,} + {summary['states'][1]:,} states, "
                 f"{summary['macro_states'][0]:,} + {summary['macro_states'][1]:,} macro-states, "
                 f"{summary['pairs']:,} pairs in {summary['seconds']:.1f} s"
                 + (f" ({summary['stop_reason']})" if summary["stop_reason"] else ""))
    return "\n".join(lines)


COMMAND = Command("diff",
                  "the client-observable difference of two variants: shortest behaviours one allows, the other not",
                  _arguments, cmd_diff)
