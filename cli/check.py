"""``txnspec check``: model-check a scenario under a protocol variant.

Exit 0 when every requested property holds on the full bounded state space, 1 on a violation (the
shortest counterexample is printed and optionally written as JSON Lines, ITF and a Mermaid diagram),
2 on bad arguments, 3 when a state cap stopped the run before the space was explored.

``--simulate`` runs random walks instead (:mod:`txnspec.checker.simulate`) for ``--seconds``: exit 1 with a
shrunk counterexample at the first violation, 0 when none was met in the time (which proves nothing).
``--stop-on-violation`` ends a breadth-first search at its first violated invariant.

``--master URL`` runs the breadth-first search on Spark (:mod:`txnspec.checker.spark_bfs`): same counts,
verdicts and counterexamples, without the leads-to properties (liveness needs the state graph: it stays local).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

from txnspec.cli.base import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_VIOLATION,
    Command,
    UsageError,
    check_output_path,
    write_output,
)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="tiny", help="a named scenario (see --list)")
    p.add_argument("--variant", default=None, help="a protocol variant (see --list; default current, or the "
                   "--variant-file's)")
    p.add_argument("--variant-file", type=Path, metavar="FILE.py",
                   help="load a user-written variant (a module defining VARIANT, see docs/variants.md)")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only this property (repeatable); default: all of them")
    p.add_argument("--max-states", type=int, default=None, help="stop after this many distinct states")
    p.add_argument("--max-depth", type=int, default=None, help="stop exploring below this depth")
    p.add_argument("--no-liveness", action="store_true", help="skip the leads-to properties (no state graph)")
    p.add_argument("--no-symmetry", action="store_true",
                   help="explore every state, not one per class of states that differ only by a renaming of "
                        "interchangeable partitions, producer instances or transactional ids (spec/symmetry.py; "
                        "on by default where the scenario has such names: the report says 'symmetry reduced'; off with "
                        "--graph-out, which writes every state, and with --variant-file unless --symmetry)")
    p.add_argument("--symmetry", action="store_true",
                   help="keep the symmetry reduction with --variant-file: only sound if the variant treats every "
                        "partition, producer instance and transactional id alike (none by its name)")
    p.add_argument("--partial-order", action="store_true",
                   help="explore a producer's own steps alone where nothing else can touch them (partial-order "
                        "reduction, spec/reduction.py): fewer states, the same verdicts on invariants and "
                        "'sometimes' properties, but other counts and possibly longer counterexamples; leads-to "
                        "properties are skipped; not with --graph-out or --variant-file")
    p.add_argument("--store", choices=("exact", "fingerprints", "partitioned"), default="exact",
                   help="exact (default): every state kept, leads-to judged; fingerprints: 64-bit fingerprints "
                        "as TLC keeps them, levels on disk, parents in files (about 100 bytes a state; the "
                        "chance of a collision is reported; leads-to properties are skipped); partitioned: "
                        "fingerprints split among the --workers processes by value, each deduplicating its own "
                        "(no merge in the coordinating process: its share of the time is reported); with --master "
                        "the search runs on Spark and this does not apply")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="expand each level in N processes (implies --store fingerprints; same states, "
                        "verdicts and counterexamples as one process)")
    p.add_argument("--master", metavar="URL",
                   help="search breadth first on Spark (local[2], spark://HOST:PORT): each level's states are "
                        "spread over the executors by a stable 64-bit fingerprint; same states, verdicts and "
                        "shortest counterexamples as without it. --store and --workers do not apply; leads-to "
                        "properties are skipped (liveness stays local: run without --master), and --graph-out "
                        "cannot be used")
    p.add_argument("--stop-on-violation", action="store_true",
                   help="end the search at the first state that violates an invariant, reported with its shortest "
                        "counterexample (every engine; the other properties are then unknown)")
    p.add_argument("--simulate", action="store_true",
                   help="random walks from the initial state instead of an exhaustive search (for scenarios too "
                        "large to exhaust, such as full): every invariant judged at every state, each walk with its "
                        "own weights over action kinds (swarm testing); the first violation stops the run and its "
                        "path is shrunk. Exit 1 on a violation, 0 when none was met in --seconds (nothing is "
                        "claimed to hold); --workers N runs N walkers")
    p.add_argument("--seconds", type=float, default=None, metavar="N",
                   help="with --simulate: the time budget (default 60)")
    p.add_argument("--depth", type=int, default=None, metavar="D",
                   help="with --simulate: the longest walk (default 100; each walk draws its own bound up to it)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="with --simulate: the seed (default 0); a seed gives the same walks for any --workers")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    p.add_argument("--trace-out", type=Path, help="write the first counterexample as JSON Lines")
    p.add_argument("--itf-out", type=Path, help="write the first counterexample as ITF (Apalache ADR-015)")
    p.add_argument("--mermaid-out", type=Path, help="write the first counterexample as a Mermaid sequence diagram")
    p.add_argument("--replay-out", type=Path,
                   help="write the first counterexample as a conformance trace (JSON Lines) that `txnspec replay "
                        "FILE --adapter impl` (or any adapter) replays: does the implementation follow it? "
                        "(Kafka scenarios)")
    p.add_argument("--graph-out", type=Path, help="write the state graph (.graphml or .dot)")
    p.add_argument("--html-out", type=Path, help="write a self-contained HTML report with sequence diagrams")
    p.add_argument("--progress", action="store_true",
                   help="accepted for compatibility: states, depth and states/s are shown on a terminal anyway "
                        "(never with --json or when stderr is not a terminal)")
    p.add_argument("--list", action="store_true", help="list scenarios, variants and properties, then exit")


def _list() -> int:
    from txnspec.spec.catalog import systems
    from txnspec.spec.model import build_model

    for system in systems():
        print(f"{system.title} scenarios:")
        for s in system.scenarios.values():
            print(f"  {s.name:26} {s.description}")
        print(f"{system.title} variants:")
        for v in system.variants.values():
            bug = f"  [breaks {v.expected_violation}]" if v.expected_violation else ""
            print(f"  {v.name:26} {v.description} ({v.reference}){bug}")
    print("Kafka properties:")
    for prop in build_model("tiny").properties:
        first_line = prop.description.splitlines()[0] if prop.description else ""
        print(f"  {prop.name:36} {prop.expectation.value:9} {first_line}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    from txnspec.checker import check
    from txnspec.spec.catalog import build_model

    if args.max_states is not None and args.max_states <= 0:
        raise UsageError("--max-states must be a positive number")
    if args.variant_file is not None:
        from txnspec.spec.variants.user import load_variant_files

        if args.variant is not None:
            raise UsageError(f"--variant {args.variant} and --variant-file each name the variant to check: "
                             "give one (a variant file can start from a built-in one, docs/variants.md)")
        (args.variant,) = load_variant_files([args.variant_file])
        # a user's variant may single out a name ("p0"): the renamings would then not be symmetries
        args.no_symmetry = args.no_symmetry or not args.symmetry
    if args.symmetry and args.no_symmetry and args.variant_file is None:
        raise UsageError("--symmetry and --no-symmetry exclude each other")
    args.variant = args.variant or "current"
    if args.max_depth is not None and args.max_depth <= 0:
        raise UsageError("--max-depth must be a positive number")
    for path, option in ((args.trace_out, "--trace-out"), (args.itf_out, "--itf-out"),
                         (args.mermaid_out, "--mermaid-out"), (args.replay_out, "--replay-out"),
                         (args.graph_out, "--graph-out"),
                         (args.html_out, "--html-out")):
        check_output_path(path, option)
    try:
        model = build_model(args.scenario, args.variant)
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    if args.replay_out is not None:
        from txnspec.spec.catalog import system_of

        owner = system_of(args.scenario)
        if owner.name != "kafka":
            raise UsageError(f"--replay-out writes Kafka conformance traces; {args.scenario!r} is {owner.title}'s")
    names = args.properties
    if names:
        for name in names:
            try:
                model.property(name)
            except KeyError as exc:
                raise UsageError(str(exc).strip("'\"")) from None
        # a property's partner is checked with it, so that it cannot pass on nothing
        partners = [p.partner for p in model.properties if p.name in names and p.partner]
        names = list(dict.fromkeys([*names, *partners]))
    if args.partial_order:
        for option, given in (("--graph-out", args.graph_out), ("--variant-file", args.variant_file)):
            if given is not None:
                raise UsageError(f"--partial-order cannot be used with {option}" + (
                    ": a user's variant may add properties that read what the reduction assumes no property "
                    "reads" if option == "--variant-file" else ""))
        liveness = [n for n in args.properties or () if model.property(n).expectation.value == "leads_to"]
        if liveness:
            raise UsageError(f"--partial-order drops interleavings that leads-to properties need: "
                             f"{', '.join(liveness)}")
        try:
            model = model.partial_order()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.no_liveness:
        names = [p.name for p in model.properties
                 if p.expectation.value != "leads_to" and (not names or p.name in names)]
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    _check_simulation_options(args)
    fingerprints = not args.simulate and (args.store != "exact" or args.workers > 1)
    if args.master is not None and args.graph_out is not None:
        raise UsageError("--graph-out needs every state and edge, which the Spark search (--master) does not "
                         "keep: run without --master")
    if args.master is not None and args.workers > 1:
        raise UsageError("--workers does not apply with --master (Spark's executors expand the levels)")
    if fingerprints and args.graph_out is not None:
        raise UsageError("--graph-out needs every state and edge: use --store exact with one worker")
    show_progress = sys.stderr.isatty() and not args.json
    if args.simulate:
        from txnspec.checker.simulate import simulate

        def line(text: str) -> None:
            print(f"\r  {text}   ", end="", file=sys.stderr, flush=True)

        result = simulate(model, properties=names, seconds=args.seconds or 60.0, max_depth=args.depth or 100,
                          seed=args.seed or 0, workers=args.workers, progress=line if show_progress else None)
        if show_progress:
            print(file=sys.stderr)
    elif args.master is not None:
        result = _check_on_spark(args, model, _without_liveness(model, names), show_progress)
    elif args.store == "partitioned":
        from txnspec.checker.partitioned import check_partitioned

        names = _without_liveness(model, names)
        result = check_partitioned(model, properties=names, max_states=args.max_states, max_depth=args.max_depth,
                                   workers=args.workers, symmetry=not args.no_symmetry,
                                   stop_on_violation=args.stop_on_violation)
    elif fingerprints:
        from txnspec.checker.levels import check_levels

        names = _without_liveness(model, names)
        result = check_levels(model, properties=names, max_states=args.max_states, max_depth=args.max_depth,
                              workers=args.workers, progress=show_progress, symmetry=not args.no_symmetry,
                              stop_on_violation=args.stop_on_violation)
    else:
        result = check(model, properties=names, max_states=args.max_states, max_depth=args.max_depth,
                       progress=show_progress, build_graph=args.graph_out is not None,
                       symmetry=not args.no_symmetry and args.graph_out is None,
                       stop_on_violation=args.stop_on_violation)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(result.render())
    sys.stdout.flush()  # the verdict is out before any file is written
    _write_outputs(args, model, result)
    if args.html_out is not None:
        from txnspec.cli.html_report import check_page, write_page

        command = f"txnspec check --scenario {args.scenario} --variant {args.variant}" + (
            " --partial-order" if args.partial_order else "") + (
            f" --simulate --seconds {args.seconds or 60:g} --seed {args.seed or 0} --workers {args.workers}"
            if args.simulate else "")
        write_output(args.html_out, "--html-out", lambda p: write_page(p, check_page(model, result, command)))
    if args.simulate:  # a simulation is never complete: clean for its time budget is all it can say
        return EXIT_OK if result.ok else EXIT_VIOLATION
    if not result.complete:
        return EXIT_INCONCLUSIVE if result.ok else EXIT_VIOLATION
    return EXIT_OK if result.ok else EXIT_VIOLATION


def _check_simulation_options(args: argparse.Namespace) -> None:
    """--seconds, --depth and --seed belong to --simulate, which has no use for the exhaustive search's options."""
    if not args.simulate:
        given = [o for o, v in (("--seconds", args.seconds), ("--depth", args.depth), ("--seed", args.seed))
                 if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --simulate")
        return
    for option, value in (("--seconds", args.seconds), ("--depth", args.depth)):
        if value is not None and value <= 0:
            raise UsageError(f"{option} must be a positive number, not {value:g}")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed must be zero or more, not {args.seed}")
    for option, given in (("--master", args.master is not None), (f"--store {args.store}", args.store != "exact"),
                          ("--graph-out", args.graph_out is not None), ("--max-states", args.max_states is not None),
                          ("--max-depth", args.max_depth is not None)):
        if given:
            hint = " (the longest walk is --depth)" if option == "--max-depth" else ""
            raise UsageError(f"--simulate cannot be used with {option}{hint}")


def _check_on_spark(args: argparse.Namespace, model: Any, names: list[str], show_progress: bool) -> Any:
    """The search on Spark: a session on ``--master`` (refused within seconds when it cannot be reached), the
    model shipped as its scenario and variant names (:class:`~txnspec.conformance.model_factory.ModelFactory`)."""
    from txnspec.checker.spark_bfs import check_spark
    from txnspec.cli.base import EnvironmentProblem
    from txnspec.conformance.environment import (
        check_reachable,
        java_problem,
        standalone_masters,
        start_standalone_session,
    )
    from txnspec.conformance.model_factory import ModelFactory

    standalone = standalone_masters(args.master)
    check_reachable(args.master, standalone)
    problem = java_problem()
    if problem:
        raise EnvironmentProblem(problem)
    from pyspark.sql import SparkSession

    from txnspec.conformance.spark_job import spark_session

    def session_on(master: str) -> Any:
        return spark_session(master, app_name="txnspec-check")

    session = start_standalone_session(args.master, session_on) if standalone else None
    if session is None:
        session = SparkSession.getActiveSession()  # e.g. under spark-submit: not ours to stop
        own = session is None
        session = session or session_on(args.master)
    else:
        own = True
    factory = ModelFactory(args.scenario, args.variant,
                           str(args.variant_file.resolve()) if args.variant_file is not None else None,
                           partial_order=args.partial_order)

    def report(states: int, depth: int, rate: float) -> None:
        print(f"\r  {states:,} states, depth {depth}, {rate:,.0f} states/s", end="", file=sys.stderr, flush=True)

    try:
        result = check_spark(factory, session.sparkContext, properties=names, max_states=args.max_states,
                             max_depth=args.max_depth, progress=report if show_progress else None,
                             symmetry=not args.no_symmetry, stop_on_violation=args.stop_on_violation)
    finally:
        if show_progress:
            print(file=sys.stderr)
        if own:
            session.stop()
    return result


def _without_liveness(model: Any, names: list[str] | None) -> list[str]:
    """The properties a fingerprint search judges: leads-to needs the state graph, so it is left out (said)."""
    judged = [p for p in model.properties if not names or p.name in names]
    skipped = [p.name for p in judged if p.expectation.value == "leads_to"]
    if skipped:
        print(f"note: leads-to properties are not judged without the state graph (--store exact): "
              f"{', '.join(skipped)}", file=sys.stderr)
    return [p.name for p in judged if p.expectation.value != "leads_to"]


def _write_trace(writer: Any, counterexample: object, model: object, path: Path) -> None:
    writer(counterexample, path, model)


def _write_replay(args: argparse.Namespace, counterexample: Any, path: Path) -> None:
    """The counterexample's actions run again in the spec (:func:`~txnspec.conformance.generate.realize`), with
    what each step lets the clients observe: a trace any adapter replays."""
    from txnspec.conformance import traces
    from txnspec.conformance.generate import realize

    actions = [action for action, _ in counterexample.steps[1:]]
    trace = realize(args.scenario, args.variant, actions, strategy="counterexample",
                    trace_id=f"{args.scenario}/{args.variant}/{counterexample.property}")
    traces.write_jsonl([trace], path)


def _write_outputs(args: argparse.Namespace, model: object, result: object) -> None:
    from txnspec.checker import traces

    counterexample = next(iter(getattr(result, "counterexamples", ())), None)
    for path, option, writer in ((args.trace_out, "--trace-out", traces.write_jsonl),
                                 (args.itf_out, "--itf-out", traces.write_itf),
                                 (args.mermaid_out, "--mermaid-out", traces.write_mermaid)):
        if path is None:
            continue
        if counterexample is None:
            print(f"txnspec check: no counterexample to write to {path}", file=sys.stderr)
            continue
        write_output(path, option, functools.partial(_write_trace, writer, counterexample, model))
    if args.replay_out is not None:
        if counterexample is None:
            print(f"txnspec check: no counterexample to write to {args.replay_out}", file=sys.stderr)
        else:
            write_output(args.replay_out, "--replay-out", functools.partial(_write_replay, args, counterexample))
    if args.graph_out is not None:
        from txnspec.checker import graph

        write_output(args.graph_out, "--graph-out", lambda p: graph.export(result, p))


COMMAND = Command("check", "model-check a scenario: every invariant holds on N states, or a shortest counterexample",
                  _arguments, cmd_check)
