"""Bounded model checking: unroll the transition relation from the initial states to depth k.

Depth by depth, ask whether some invariant fails in the last state (or, for
a :class:`StepInvariant`, on the last step); the first depth that answers ``sat`` gives the shortest
violating path, decoded with the model's decoder as ``[("init", s0), (transition, s1), ...]``. A
per-step integer ``action@j`` records which transition was taken.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from txnspec.checker.symbolic.transition import AnyInvariant, Invariant, StepInvariant, SymbolicModel, decode_frame


@dataclass
class BmcResult:
    depth: int  # the depth explored (the violation's depth when one was found)
    status: str  # "ok" | "violated" | "unknown"
    invariant: str | None = None
    path: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seconds: float = 0.0
    reason: str = ""
    params: list[dict[str, Any]] = field(default_factory=list)  # the parameters of each step's transition

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def bmc(model: SymbolicModel, invariants: Sequence[AnyInvariant], depth: int, *,
        timeout_ms: int = 60_000, logic: str | None = None, lemmas: Sequence[Invariant] = (),
        trace: bool = False) -> BmcResult:
    """The shortest path (at most ``depth`` steps) from an initial state to a violation, or ``ok``.

    Each depth is one fresh solver over the unrolling (``logic``, e.g. ``"QF_LIA"``, picks z3's solver
    for that logic: on these problems a fresh non-incremental solver is much faster than push/pop).
    ``lemmas`` are invariants already *proved* for this model (by :func:`check_inductive`); they are
    assumed in every state of the unrolling, which prunes paths through unreachable states. Passing an
    unproved lemma makes the answer unsound.
    """
    started = time.perf_counter()
    frames = [model.frame(0)]
    actions: list[Any] = []
    unrolling: list[Any] = [model.init(frames[0]), model.domain(frames[0]),
                            *(lemma.formula(frames[0]) for lemma in lemmas)]
    for d in range(depth + 1):
        bad = [z3.Not(i.formula(frames[d])) for i in invariants if isinstance(i, Invariant)]
        if d > 0:
            bad += [z3.Not(i.formula(frames[d - 1], frames[d])) for i in invariants if isinstance(i, StepInvariant)]
        solver = z3.SolverFor(logic) if logic else z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(*unrolling)
        solver.add(z3.Or(*bad) if bad else z3.BoolVal(False))
        answer = solver.check()
        if trace:
            print(f"bmc depth {d}: {answer} at {time.perf_counter() - started:.2f}s")
        if answer == z3.sat:
            m = solver.model()
            states = [model.decoder(m, f) for f in frames]
            taken = [model.transitions[m.eval(a, model_completion=True).as_long()] for a in actions]
            names = ["init"] + [t.name for t in taken]
            params: list[dict[str, Any]] = [{}] + [decode_frame(m, model.params(t, j)) for j, t in enumerate(taken)]
            failed = next(i.name for i in invariants if _violated(m, i, frames, d))
            return BmcResult(d, "violated", failed, list(zip(names, states, strict=True)),
                             time.perf_counter() - started, params=params)
        if answer == z3.unknown:
            return BmcResult(d, "unknown", None, [], time.perf_counter() - started, solver.reason_unknown())
        if d == depth:
            break
        nxt = model.frame(d + 1)
        act = z3.Int(f"action@{d}")
        choices = [z3.And(act == j, model.step(t, frames[d], nxt, model.params(t, d)))
                   for j, t in enumerate(model.transitions)]
        unrolling += [z3.Or(*choices), model.domain(nxt), *(lemma.formula(nxt) for lemma in lemmas)]
        frames.append(nxt)
        actions.append(act)
    return BmcResult(depth, "ok", seconds=time.perf_counter() - started)


def _violated(m: z3.ModelRef, inv: AnyInvariant, frames: list[dict[str, Any]], d: int) -> bool:
    if isinstance(inv, Invariant):
        return bool(z3.is_false(m.eval(inv.formula(frames[d]), model_completion=True)))
    if d == 0:
        return False
    return bool(z3.is_false(m.eval(inv.formula(frames[d - 1], frames[d]), model_completion=True)))
