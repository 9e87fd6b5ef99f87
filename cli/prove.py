"""``txnspec prove``: prove the protocol's invariants with z3 (induction) and search for counterexamples (BMC).

Exit 0 when every requested proof succeeds (and the BMC, when asked for, finds nothing), 1 when a
property fails (the counterexample is printed: the induction step that breaks it, and the BMC path),
2 on bad arguments, 3 when z3 answers unknown or times out (with the check it was trying).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from txnspec.cli.base import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_VIOLATION,
    Command,
    UsageError,
)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="prove only this property (repeatable); default: all of them")
    p.add_argument("--bmc-depth", type=int, default=None, metavar="K",
                   help="also run bounded model checking to depth K")
    p.add_argument("--no-lemmas", action="store_true",
                   help="plain BMC: do not assume the proved strengthening invariants in the unrolling")
    p.add_argument("--partitions", type=int, default=2, choices=(1, 2), help="partitions in the encoding")
    p.add_argument("--buggy", default=None, metavar="BUG",
                   help="use a known-bad encoding: zombie-not-fenced or no-duplicate-detection")
    p.add_argument("--k", type=int, default=1, help="k-induction depth (default 1: plain induction)")
    p.add_argument("--timeout", type=float, default=60.0, help="z3 timeout per check, in seconds")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--list", action="store_true", help="list the properties and their strengthening, then exit")


def cmd_prove(args: argparse.Namespace) -> int:
    from txnspec.checker.symbolic import bmc, check_inductive
    from txnspec.spec import symbolic, symbolic_explicit, symbolic_properties

    if args.list:
        for name, proof in symbolic_properties.PROOFS.items():
            print(f"{name:32} strengthening: {', '.join(proof.helpers) or '-'}")
        return EXIT_OK
    names = args.properties or list(symbolic_properties.PROOFS)
    unknown = [n for n in names if n not in symbolic_properties.PROOFS]
    if unknown:
        raise UsageError(f"unknown property {unknown[0]!r} (known: {', '.join(symbolic_properties.PROOFS)})")
    if args.bmc_depth is not None and args.bmc_depth < 0:
        raise UsageError("--bmc-depth must be >= 0")
    if args.k < 1 or args.timeout <= 0:
        raise UsageError("--k must be >= 1 and --timeout positive")
    if args.buggy is not None and args.buggy not in symbolic.BUGS:
        raise UsageError(f"unknown bug {args.buggy!r} (known: {', '.join(symbolic.BUGS)})")
    n = args.partitions
    model = symbolic.build(n, buggy=args.buggy)
    timeout_ms = int(args.timeout * 1000)
    table = symbolic_properties.proofs(n)
    report: dict[str, Any] = {"partitions": n, "buggy": args.buggy, "proofs": [], "bmc": None}
    statuses: list[str] = []
    for name in names:
        prop, helpers = table[name]
        result = check_inductive(model, [prop], helpers, k=args.k, timeout_ms=timeout_ms)
        statuses.append(result.status)
        entry: dict[str, Any] = {
            "property": name, "status": result.status, "seconds": round(result.seconds, 3),
            "checks": result.checks, "strengthening": [h.name for h in helpers],
            "failures": [{"check": f.describe(), "transition": f.transition, "invariant": f.invariant,
                          "status": f.status, "reason": f.reason, "states": list(f.states)}
                         for f in result.failures],
        }
        report["proofs"].append(entry)
        if not args.json:
            print(f"{result.status:8} {name:32} {result.seconds:7.3f} s  ({result.checks} checks; "
                  f"strengthening: {', '.join(entry['strengthening']) or '-'})")
            for failure in result.failures:
                print(f"         {failure.describe()}")
                if len(failure.states) == 2:
                    pre, post = failure.states
                    print("         pre-state:  " + ", ".join(f"{k}={v}" for k, v in pre.items()))
                    changed = {k: v for k, v in post.items() if pre.get(k) != v}
                    print("         changed:    " + ", ".join(f"{k}={v}" for k, v in changed.items()))
    if args.bmc_depth is not None:
        props = [table[name][0] for name in names]
        # the strengthening lemmas are proved above for the correct encoding only
        lemmas = [] if args.buggy or args.no_lemmas or any(s != "proved" for s in statuses) else \
            list(symbolic_properties.strengthening(n).values())
        found = bmc(model, props, args.bmc_depth, timeout_ms=timeout_ms, logic="QF_LIA", lemmas=lemmas)
        statuses.append({"ok": "proved", "violated": "violated", "unknown": "unknown"}[found.status])
        report["bmc"] = {"depth": args.bmc_depth, "status": found.status, "violation_depth": found.depth
                         if found.status == "violated" else None, "invariant": found.invariant,
                         "seconds": round(found.seconds, 3), "lemmas": [lemma.name for lemma in lemmas],
                         "path": [{"action": a, "state": s, "params": found.params[j] if j < len(found.params) else {}}
                                  for j, (a, s) in enumerate(found.path)], "reason": found.reason}
        if not args.json:
            what = {"ok": f"no violation up to depth {args.bmc_depth}",
                    "violated": f"{found.invariant} violated at depth {found.depth}",
                    "unknown": f"z3 answered unknown at depth {found.depth} ({found.reason})"}[found.status]
            print(f"bmc      {what} in {found.seconds:.3f} s"
                  + (f" (assuming the proved strengthening as lemmas: {len(lemmas)})" if lemmas else ""))
            for line in symbolic_explicit.describe_path(found.path, found.params):
                print(f"         {line}")
    if args.json:
        print(json.dumps(report, indent=2))
    if "violated" in statuses:
        return EXIT_VIOLATION
    return EXIT_INCONCLUSIVE if "unknown" in statuses else EXIT_OK


COMMAND = Command("prove",
                  "prove invariants with z3 (induction per action and property) and run BMC",
                  _arguments, cmd_prove)
