"""``txnspec mutation-score``: does the conformance suite catch each seeded bug of the implementation?

Replays the spec's random walks (kept only when the unmutated implementation replays them) against the
implementation with each mutant of :mod:`txnspec.impl._mutants` switched on, and reports after how many
traces each was detected. Exit 0 when every mutant was detected, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json

from txnspec.cli.base import EXIT_OK, EXIT_VIOLATION, Command, UsageError


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                   help="scenarios whose random walks make the pool (repeatable; default: "
                        "default, zombie, retry, multi-partition, offsets)")
    p.add_argument("--traces", type=int, default=40, help="random walks per scenario in the pool (default 40)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first random walk")
    p.add_argument("--mutant", action="append", dest="mutants", metavar="NAME", help="only this mutant (repeatable)")
    p.add_argument("--json", action="store_true", help="print the score as JSON")


def cmd_mutation_score(args: argparse.Namespace) -> int:
    from txnspec.conformance.mutation import SCENARIOS, MutantResult, mutation_score, summary, trace_pool
    from txnspec.impl._mutants import MUTANTS
    from txnspec.spec.scenarios import SCENARIOS as KNOWN

    if args.traces < 1:
        raise UsageError("--traces must be at least 1")
    scenarios = args.scenarios or list(SCENARIOS)
    for name in scenarios:
        if name not in KNOWN:
            raise UsageError(f"unknown scenario {name!r}; known: {', '.join(KNOWN)}")
    for name in args.mutants or ():
        if name not in MUTANTS:
            raise UsageError(f"unknown implementation mutant {name!r}; known: {', '.join(MUTANTS)}")

    def show(r: MutantResult) -> None:
        if not args.json:
            found = f"detected after {r.traces_needed} trace(s) ({r.trace_id})" if r.detected else "NOT detected"
            print(f"  {r.mutant:34} {found}")

    pool = len(list(trace_pool(scenarios, args.traces, args.seed)))
    if not args.json:
        print(f"pool: {pool} random walks of {', '.join(scenarios)} that the implementation replays")
    results = mutation_score(scenarios, args.traces, args.seed, args.mutants, on_result=show)
    report = summary(results, pool)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"mutation score {report['score']}; every detection within {report['max_traces_needed']} traces")
    return EXIT_OK if report["detected"] == report["mutants"] else EXIT_VIOLATION


COMMAND = Command("mutation-score", "replay spec traces against seeded bugs of the implementation: the suite's score",
                  _arguments, cmd_mutation_score)
