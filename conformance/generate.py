"""Trace generation from the spec: transition-covering traces, seeded random walks, hypothesis strategies.

Covering traces
    The checker explores the scenario and records its state graph (``check(model, build_graph=True)``).
    Coverage items are every action kind and every coordinator transition (``"Ongoing->PrepareCommit"``,
    see :func:`~txnspec.conformance.adapters.spec_adapter.coordinator_transitions`) that some edge of
    the graph takes. For each item the edge taking it nearest to an initial state is chosen; items are
    handled deepest first and each yields the shortest path (breadth-first tree) to its edge, which also
    covers every item taken on the way; items already covered yield nothing. The result is a small
    set of shortest paths that together cover every item of the graph.

Random walks
    From the initial state, a uniformly random enabled action at each step, with ``random.Random(seed)``
    (so the walk is a pure function of scenario, variant, seed and length), until ``max_steps`` or a
    state without successors. Faults are actions of the spec, enabled within the scenario's budget, so
    the walks take them as the scenario allows.

Hypothesis
    :func:`traces` is a public strategy: ``@given(traces("tiny"))`` hands a user's test a spec trace
    whose steps carry the observations their implementation must produce (see
    :mod:`txnspec.conformance.replay` for the adapter to write).
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from txnspec.conformance.adapters import spec_adapter as sa
from txnspec.conformance.traces import Step, Trace, TraceError
from txnspec.spec import system as sysm
from txnspec.spec.actions import Action, ActionKind

Successors = list[tuple[Action, sysm.SystemState]]
# chooses the index of the next successor, or None to stop
Chooser = Callable[[int, sysm.SystemState, Successors], int | None]


def _make_step(steps: Successors, index: int, prev: sysm.SystemState) -> Step:
    action, nxt = steps[index]
    return Step(action, sa.observation(prev, nxt), cast(dict[str, Any], sa.abstract_state(nxt)))


def walk(scenario: str, variant: str, choose: Chooser, *, trace_id: str, seed: int | None = None,
         strategy: str = "manual", max_steps: int = 10_000) -> Trace:
    """Run the spec from its initial state, ``choose`` picking each successor; the trace it took."""
    from txnspec.spec.model import build_system

    system = build_system(scenario, variant)
    state = sysm.initial_state(system)
    out: list[Step] = []
    for i in range(max_steps):
        steps = sa.successors(system, state)
        if not steps:
            break
        index = choose(i, state, steps)
        if index is None:
            break
        out.append(_make_step(steps, index, state))
        state = steps[index][1]
    return Trace(trace_id, scenario, variant, seed, strategy, tuple(out))


def realize(scenario: str, variant: str, actions: Sequence[Action], *, trace_id: str,
            seed: int | None = None, strategy: str = "manual") -> Trace:
    """The spec trace of a sequence of actions, with its observations.

    Raises :class:`TraceError` naming the step when an action is not enabled."""
    plan = list(actions)

    def choose(i: int, state: sysm.SystemState, steps: Successors) -> int | None:
        if i >= len(plan):
            return None
        for k, (a, _) in enumerate(steps):
            if a == plan[i]:
                return k
        raise TraceError(trace_id, str(sa.StepNotEnabledError(plan[i], [a for a, _ in steps])), i)

    return walk(scenario, variant, choose, trace_id=trace_id, seed=seed, strategy=strategy,
                max_steps=len(plan))


# --- random walks ----------------------------------------------------------------------------------

def random_walk(scenario: str, seed: int, *, variant: str = "current", max_steps: int = 200,
                trace_id: str | None = None) -> Trace:
    """A seeded random walk (deterministic for ``(scenario, variant, seed, max_steps)``)."""
    rng = random.Random(seed)

    def choose(i: int, state: sysm.SystemState, steps: Successors) -> int:
        return rng.randrange(len(steps))

    return walk(scenario, variant, choose, trace_id=trace_id or f"{scenario}/random/{seed}", seed=seed,
                strategy="random", max_steps=max_steps)


# --- covering traces -------------------------------------------------------------------------------

@dataclass(frozen=True)
class CoveringPlan:
    """Paths (the actions of each step) that together cover every item of the explored graph."""

    scenario: str
    variant: str
    paths: tuple[tuple[Action, ...], ...]
    kinds: frozenset[ActionKind]  # every action kind the graph takes
    transitions: frozenset[str]  # every coordinator transition the graph takes
    states: int
    complete: bool  # the whole bounded state space was explored


Item = tuple[str, str]  # ("kind", action kind) or ("coordinator", transition)


@functools.lru_cache(maxsize=8)
def covering_plan(scenario: str, variant: str = "current", max_states: int | None = None) -> CoveringPlan:
    """Shortest paths covering every action kind and coordinator transition of the scenario's graph."""
    from txnspec.checker import check
    from txnspec.spec.model import build_model

    # every state: under symmetry an edge leads to its class's stored member, and a path of edges is no trace
    result = check(build_model(scenario, variant), properties=[], build_graph=True, max_states=max_states,
                   symmetry=False)
    graph = result.graph
    if graph is None:
        raise RuntimeError("the checker recorded no state graph")
    states, src, dst, actions = graph.states, graph.source, graph.target, graph.actions
    n = len(states)
    # breadth-first tree from the initial states
    parent_edge = [-1] * n
    depth = [-1] * n
    offsets = graph.offsets()
    queue: deque[int] = deque()
    for i in range(graph.initial_count):
        depth[i] = 0
        queue.append(i)
    while queue:
        u = queue.popleft()
        for e in range(offsets[u], offsets[u + 1]):
            v = dst[e]
            if depth[v] < 0:
                depth[v], parent_edge[v] = depth[u] + 1, e
                queue.append(v)
    # the shallowest edge taking each item
    best: dict[Item, int] = {}
    transition_cache: dict[tuple[int, int], list[str]] = {}

    def items_of(e: int) -> list[Item]:
        key = (src[e], dst[e])
        if key not in transition_cache:
            transition_cache[key] = sa.coordinator_transitions(states[src[e]], states[dst[e]])
        return [("kind", actions[e].kind), *(("coordinator", t) for t in transition_cache[key])]

    for e in range(len(src)):
        if depth[src[e]] < 0:
            continue
        for item in items_of(e):
            if item not in best or depth[src[e]] < depth[src[best[item]]]:
                best[item] = e
        if len(transition_cache) > 100_000:
            transition_cache.clear()

    def path_to(e: int) -> list[int]:
        edges = [e]
        u = src[e]
        while parent_edge[u] >= 0:
            edges.append(parent_edge[u])
            u = src[parent_edge[u]]
        return edges[::-1]

    covered: set[Item] = set()
    paths: list[tuple[Action, ...]] = []
    for item in sorted(best, key=lambda it: (-depth[src[best[it]]], it)):
        if item in covered:
            continue
        edges = path_to(best[item])
        for e in edges:
            covered.update(items_of(e))
        paths.append(tuple(actions[e] for e in edges))
    kinds = frozenset(ActionKind(value) for what, value in best if what == "kind")
    transitions = frozenset(value for what, value in best if what == "coordinator")
    return CoveringPlan(scenario, variant, tuple(paths), kinds, transitions, n, bool(result.complete))


def covering_trace(scenario: str, index: int, *, variant: str = "current", max_states: int | None = None) -> Trace:
    """The ``index``-th covering trace of the scenario, realized on the spec."""
    plan = covering_plan(scenario, variant, max_states)
    return realize(scenario, variant, plan.paths[index], trace_id=f"{scenario}/covering/{index}", seed=index,
                   strategy="covering")


def covering_traces(scenario: str, *, variant: str = "current", max_states: int | None = None) -> list[Trace]:
    plan = covering_plan(scenario, variant, max_states)
    return [covering_trace(scenario, i, variant=variant, max_states=max_states) for i in range(len(plan.paths))]


def coverage(trace: Trace) -> dict[str, list[str]]:
    """Action kinds, coordinator transitions and error codes a trace exercises (from its observations)."""
    transitions: set[str] = set()
    errors: set[str] = set()
    before: dict[str, Any] = {}
    for step in trace.steps:
        after = (step.abstract or {}).get("coordinator", {})
        if step.abstract is not None:
            transitions.update(sa.transitions_between(before, after))
            before = after
        errors.update(step.observation.get("errors", ()))
    return {"kinds": sorted(k.value for k in trace.kinds()), "transitions": sorted(transitions),
            "errors": sorted(errors)}


# --- hypothesis --------------------------------------------------------------------------------------

def traces(scenario: str, variant: str = "current", *, max_steps: int = 100) -> Any:
    """A hypothesis strategy of spec traces of ``scenario`` (each step picked among the enabled actions).

    Example::

        from hypothesis import given
        from txnspec.conformance.generate import traces
        from txnspec.conformance.replay import replay

        @given(traces("tiny"))
        def test_my_kafka(trace):
            assert replay(trace, MyAdapter()).ok
    """
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw: Any) -> Trace:
        def choose(i: int, state: sysm.SystemState, steps: Successors) -> int | None:
            if i > 0 and draw(st.integers(0, 19)) == 0:
                return None  # stop here (1 in 20); shrinking moves towards stopping early
            return int(draw(st.integers(0, len(steps) - 1)))

        return walk(scenario, variant, choose, trace_id=f"{scenario}/hypothesis", strategy="hypothesis",
                    max_steps=max_steps)

    return strategy()
