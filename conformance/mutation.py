"""The conformance suite's mutation score: does replaying spec traces catch each seeded bug of the
implementation (:mod:`txnspec.impl.mutants`), and after how many traces?

The pool of traces is the spec's seeded random walks of several scenarios, interleaved (one trace of each
scenario in turn), keeping only the traces the unmutated implementation replays without divergence, so
that a divergence under a mutant is the mutant's doing. For each mutant the pool is replayed in order with
the ``impl-mutant:NAME`` adapter until the first divergence: its index is the number of traces the suite
needed. A mutant that survives the whole pool is reported as not detected.

Trace mutants (:mod:`.trace_mutants`) measure the other direction: the same pool's traces, each changed in one
place (a step dropped, duplicated, swapped, a foreign step, a delivered body's field, an observation or an abstract
state edited), must diverge on every adapter; :func:`trace_score` replays them on the spec and the implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from txnspec.conformance.adapters.impl_adapter import ImplAdapter
from txnspec.conformance.adapters.impl_mutant import ImplMutantAdapter
from txnspec.conformance.generate import random_walk
from txnspec.conformance.replay import replay
from txnspec.conformance.traces import Trace
from txnspec.impl.mutants import MUTANTS

SCENARIOS = ("default", "zombie", "retry", "multi-partition", "offsets", "in-flight-2", "in-flight-5", "loss",
             "append-failure", "crash", "faults")
__all__ = ["SCENARIOS", "ImplMutantAdapter", "MutantResult", "mutation_score", "summary", "trace_pool", "trace_score"]


@dataclass(frozen=True)
class MutantResult:
    mutant: str
    rule: str
    detected: bool
    traces_needed: int | None   # 1-based index in the pool of the first trace that diverged
    trace_id: str = ""
    detail: str = ""


def trace_pool(scenarios: Sequence[str], per_scenario: int, seed: int = 0, max_steps: int = 60) -> Iterator[Trace]:
    """Random walks, one scenario after the other in turn, that the unmutated implementation replays."""
    for i in range(per_scenario):
        for scenario in scenarios:
            trace = random_walk(scenario, seed + i, max_steps=max_steps)
            if replay(trace, ImplAdapter()).ok:
                yield trace


def mutation_score(scenarios: Sequence[str] = SCENARIOS, per_scenario: int = 20, seed: int = 0,
                   mutants: Sequence[str] | None = None,
                   on_result: Callable[[MutantResult], None] | None = None,
                   pool: Sequence[Trace] | None = None) -> list[MutantResult]:
    """Each mutant against the pool of ``trace_pool(scenarios, per_scenario, seed)``, or against ``pool`` when
    given (a pool built once and shared by several scores: building it replays every walk unmutated)."""
    pool = list(trace_pool(scenarios, per_scenario, seed)) if pool is None else list(pool)
    results = []
    for name in mutants or list(MUTANTS):
        adapter = ImplMutantAdapter(name)
        result = MutantResult(name, MUTANTS[name].rule, False, None)
        for index, trace in enumerate(pool, start=1):
            verdict = replay(trace, adapter)
            if not verdict.ok:
                result = MutantResult(name, MUTANTS[name].rule, True, index, trace.id, verdict.detail)
                break
        results.append(result)
        if on_result:
            on_result(result)
    return results


def summary(results: Sequence[MutantResult], pool_size: int | None = None) -> dict[str, Any]:
    detected = [r for r in results if r.detected]
    return {"mutants": len(results), "detected": len(detected),
            "score": f"{len(detected)}/{len(results)}",
            "max_traces_needed": max((r.traces_needed or 0 for r in detected), default=0),
            "pool": pool_size, "results": [asdict(r) for r in results]}


def trace_score(scenarios: Sequence[str] = SCENARIOS, per_scenario: int = 2, seed: int = 0, per_operator: int = 3,
                on_result: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """The trace mutants of the pool's first ``per_scenario`` walks of each scenario, on the spec and the
    implementation (:func:`txnspec.conformance.trace_mutants.trace_mutation_score`)."""
    from txnspec.conformance.adapters.spec_adapter import SpecAdapter
    from txnspec.conformance.trace_mutants import trace_mutation_score

    pool = list(trace_pool(scenarios, per_scenario, seed))
    out = trace_mutation_score(pool, {"spec": SpecAdapter, "impl": ImplAdapter}, seed=seed, per_operator=per_operator,
                               on_result=on_result)
    return {**out, "pool": len(pool)}
