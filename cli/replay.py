"""``txnspec replay FILE``: replay a user's traces (JSON Lines or ITF) against an adapter, first divergence each.

A thin layer over :func:`txnspec.conformance.replay.replay` and the trace formats of
:mod:`txnspec.conformance.traces`: the file is read (one trace per JSON Lines line, or one ITF document),
each trace is replayed from its scenario's initial state on a fresh adapter, and the first step whose
observation differs, or that the adapter cannot take or cannot interpret, is reported. An exception the
adapter raises on a step counts as that step's divergence, never as a pass.

Exit 0 when every trace replayed without divergence, 1 when one diverged, 2 when the file holds no trace,
cannot be read, or holds a line that is not a trace (that line is reported, the others still run) or a
trace whose scenario or variant does not exist.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from txnspec.cli.base import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, Command, UsageError, check_input_file


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="a txnspec-trace/1 JSON Lines file, or an ITF document (.itf.json)")
    p.add_argument("--adapter", default="spec",
                   help="system under test: spec, impl, spec-mutant:NAME or impl-mutant:NAME (default spec)")
    p.add_argument("--format", choices=("auto", "jsonl", "itf"), default="auto",
                   help="the file's format (default: an ITF document if the file is one, else JSON Lines)")
    p.add_argument("--no-abstract", action="store_true", help="compare observations only, not abstract states")
    p.add_argument("--json", action="store_true", help="print one JSON object per trace and a summary")


class _Strict:
    """An adapter whose unexpected exceptions on a step become that step's divergence."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        project = getattr(adapter, "project", None)
        if callable(project):
            self.project = project

    def reset(self, scenario: str, variant: str = "current") -> None:
        self.adapter.reset(scenario, variant)

    def apply(self, step: Any) -> dict[str, Any]:
        from txnspec.conformance.replay import StepNotEnabledError

        try:
            observed: dict[str, Any] = self.adapter.apply(step)
        except StepNotEnabledError:
            raise
        except Exception as exc:
            raise StepNotEnabledError(f"{step.action} (the adapter could not take it: {type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0] if str(exc) else ''})", []) from None
        return observed

    def abstract_state(self) -> Any:
        return self.adapter.abstract_state()

    @property
    def abstraction_differences(self) -> Any:
        """The wrapped adapter's table of legitimate differences (set by its reset)."""
        return getattr(self.adapter, "abstraction_differences", {})


def read_traces(path: Path, fmt: str) -> Iterator[Any]:
    """Each trace of the file, or the TraceError of a part that is not one (the others still come)."""
    from txnspec.conformance.traces import CounterexampleDump, Trace, TraceError, from_itf

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if fmt == "auto":
        fmt = "jsonl"
        if raw.lstrip().startswith(b"{"):
            try:
                document = json.loads(raw)
            except (ValueError, RecursionError):
                document = None
            if isinstance(document, dict) and "states" in document:
                fmt = "itf"
    if fmt == "itf":
        try:
            document = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
        except ValueError as exc:
            raise UsageError(f"{path}: not a JSON document: {exc}") from None
        except RecursionError:
            raise UsageError(f"{path}: JSON nested too deeply") from None
        try:
            yield from_itf(document, str(path))
        except (TraceError, RecursionError) as exc:
            yield exc if isinstance(exc, TraceError) else TraceError(str(path), "nested too deeply")
        return
    for number, line in enumerate(raw.split(b"\n"), start=1):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield TraceError(where, f"not UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1})")
            continue
        try:
            yield Trace.from_line(text, where)
        except CounterexampleDump as exc:
            yield exc
            return  # every line of it is a state: one error says it
        except TraceError as exc:
            yield exc
        except RecursionError:
            yield TraceError(where, "JSON nested too deeply")


def cmd_replay(args: argparse.Namespace) -> int:
    from txnspec.conformance.adapters import make_adapter
    from txnspec.conformance.replay import replay
    from txnspec.conformance.traces import TraceError

    check_input_file(args.file, "trace file")
    try:
        make_adapter(args.adapter)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    passed = diverged = unreadable = 0
    for item in read_traces(args.file, args.format):
        if isinstance(item, TraceError):
            unreadable += 1
            _report(args, {"trace": item.trace_id, "verdict": "unreadable", "detail": str(item)})
            continue
        verdict = replay(item, _Strict(make_adapter(args.adapter)), compare_abstract=not args.no_abstract)
        if verdict.ok:
            passed += 1
            _report(args, {"trace": item.id, "verdict": "pass", "steps": len(item.steps)})
        elif verdict.divergence_step is None:  # the trace names a scenario or variant that does not exist
            unreadable += 1
            _report(args, {"trace": item.id, "verdict": "unreadable", "detail": verdict.detail})
        else:
            diverged += 1
            _report(args, {"trace": item.id, "verdict": "diverged", "step": verdict.divergence_step,
                           "action": item.steps[verdict.divergence_step].action, "detail": verdict.detail})
    if passed + diverged + unreadable == 0:
        raise UsageError(f"trace file {str(args.file)!r} holds no traces")
    summary = f"{passed} passed, {diverged} diverged, {unreadable} unreadable (adapter {args.adapter})"
    print(json.dumps({"passed": passed, "diverged": diverged, "unreadable": unreadable,
                      "adapter": args.adapter}) if args.json else summary)
    if diverged:
        return EXIT_VIOLATION
    return EXIT_USAGE if unreadable else EXIT_OK


def _report(args: argparse.Namespace, entry: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(entry, sort_keys=True))
    elif entry["verdict"] == "pass":
        print(f"PASS      {entry['trace']} ({entry['steps']} steps)")
    elif entry["verdict"] == "diverged":
        print(f"DIVERGED  {entry['trace']} at step {entry['step']}: {entry['action']}\n          {entry['detail']}")
    else:
        print(f"UNREADABLE {entry['detail']}")


COMMAND = Command("replay", "replay trace files (JSON Lines or ITF) against an adapter and report the first divergence",
                  _arguments, cmd_replay)
