"""Induction and k-induction, one (transition, invariant) pair per solver scope.

``init => inv`` for every invariant; then, for each transition ``T`` and each invariant ``inv``,
``inv_all(s) and T(s, s') => inv(s')`` in its own ``push``/``pop`` scope, so that a failure names the
transition that breaks the invariant (mypyvy's ``check_transitions``). ``inv_all`` is the conjunction
of the invariants and their strengthening: the set must be inductive *together*. A two-state
:class:`StepInvariant` is checked as ``inv_all(s) and T(s, s') => P(s, s')``.

With ``k > 1`` the step assumes the invariants on a path of ``k`` states and the base case is a BMC
to depth ``k - 1``. z3's ``unknown`` is reported as such (``status == "unknown"``), never as a proof.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from txnspec.checker.symbolic.transition import AnyInvariant, Invariant, StepInvariant, SymbolicModel


@dataclass(frozen=True)
class Failure:
    """A check that failed (``sat``: a counterexample to induction) or that z3 could not decide."""

    kind: str  # "init" | "step" | "base"
    invariant: str
    transition: str | None
    status: str  # "violated" | "unknown"
    states: tuple[dict[str, Any], ...] = ()  # the pre- and post-state (or the path) in the counterexample
    reason: str = ""

    def describe(self) -> str:
        where = "the initial states" if self.transition is None else f"transition {self.transition}"
        verb = "is not preserved by" if self.kind == "step" else "does not hold in"
        if self.status == "unknown":
            return f"z3 answered unknown for invariant {self.invariant} and {where} ({self.reason})"
        return f"invariant {self.invariant} {verb} {where}"


@dataclass
class ProofResult:
    invariants: tuple[str, ...]
    failures: list[Failure] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # "inv" and "inv/transition" -> seconds
    seconds: float = 0.0
    checks: int = 0

    @property
    def status(self) -> str:
        if any(f.status == "violated" for f in self.failures):
            return "violated"
        return "unknown" if self.failures else "proved"

    @property
    def ok(self) -> bool:
        return not self.failures


def _holds(inv: AnyInvariant, frame: dict[str, Any]) -> Any:
    return inv.formula(frame) if isinstance(inv, Invariant) else z3.BoolVal(True)


def check_inductive(model: SymbolicModel, invariants: Sequence[AnyInvariant],
                    strengthening: Sequence[Invariant] = (), *, k: int = 1, timeout_ms: int = 60_000,
                    stop_at_first: bool = False) -> ProofResult:
    """Prove ``invariants`` (with the ``strengthening`` assumed and proved alongside) by k-induction."""
    if k < 1:
        raise ValueError("k must be at least 1")
    goals: list[AnyInvariant] = [*invariants, *strengthening]
    state_invs = [i for i in goals if isinstance(i, Invariant)]
    result = ProofResult(tuple(i.name for i in invariants))
    started = time.perf_counter()
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)

    # base case: init => inv, or no violation on any path of length < k
    if k == 1:
        s0 = model.frame(0)
        solver.push()
        solver.add(model.init(s0), model.domain(s0))
        for inv in state_invs:
            t0 = time.perf_counter()
            solver.push()
            solver.add(z3.Not(inv.formula(s0)))
            answer = solver.check()
            result.checks += 1
            if answer != z3.unsat:
                states = (model.decoder(solver.model(), s0),) if answer == z3.sat else ()
                result.failures.append(Failure("init", inv.name, None, _status(answer), states,
                                               solver.reason_unknown() if answer == z3.unknown else ""))
            solver.pop()
            result.timings[f"{inv.name}/init"] = time.perf_counter() - t0
        solver.pop()
    else:
        from txnspec.checker.symbolic.bmc import bmc

        base = bmc(model, goals, k - 1, timeout_ms=timeout_ms)
        result.checks += 1
        if not base.ok:
            path = tuple(state for _, state in base.path)
            result.failures.append(Failure("base", base.invariant or "?", None, base.status, path, base.reason))

    # inductive step, per (transition, invariant)
    frames = [model.frame(j) for j in range(k + 1)]
    solver.push()
    for j in range(k):
        solver.add(model.domain(frames[j]), *(inv.formula(frames[j]) for inv in state_invs))
    solver.add(model.domain(frames[k]))
    for j in range(k - 1):  # the path before the last step takes any transition
        choices = [model.step(t, frames[j], frames[j + 1], model.params(t, f"{j}")) for t in model.transitions]
        solver.add(z3.Or(*choices))
    for t in model.transitions:
        if stop_at_first and result.failures:
            break
        params = model.params(t, "step")
        solver.push()
        solver.add(model.step(t, frames[k - 1], frames[k], params))
        for goal in goals:
            t0 = time.perf_counter()
            solver.push()
            if isinstance(goal, StepInvariant):
                solver.add(z3.Not(goal.formula(frames[k - 1], frames[k])))
            else:
                solver.add(z3.Not(goal.formula(frames[k])))
            answer = solver.check()
            result.checks += 1
            if answer != z3.unsat:
                pair: tuple[dict[str, Any], ...] = ()
                if answer == z3.sat:
                    m = solver.model()
                    pair = tuple(model.decoder(m, f) for f in frames[-2:])
                result.failures.append(Failure("step", goal.name, t.name, _status(answer), pair,
                                               solver.reason_unknown() if answer == z3.unknown else ""))
            solver.pop()
            result.timings[f"{goal.name}/{t.name}"] = time.perf_counter() - t0
        solver.pop()
    solver.pop()
    result.seconds = time.perf_counter() - started
    return result


def _status(answer: Any) -> str:
    return "violated" if answer == z3.sat else "unknown"
