"""Explicit-state model checking: breadth-first exploration with shortest counterexamples.

What it does
    Explores every state reachable from a :class:`~txnspec.checker.model.Model`'s initial states, breadth
    first, so that the first violation found of each ``always`` property is a shortest one. Checks
    ``always`` properties on each new state, records a witness for each ``sometimes`` property (its
    absence after a complete run is a failure), reports deadlocks (states without successors that the
    model does not call final), and judges ``leads_to`` properties under weak fairness on the state graph
    (:mod:`txnspec.checker.liveness`).

How
    Visited states live in one dict from state to a dense integer id; parents and the action taken are
    kept in arrays indexed by id, which is all a shortest path needs. The state graph (edges) is recorded
    only when a liveness property or a graph export needs it, in compact integer arrays; the networkx
    graph is built from those after the search, never inside it.

What it leaves out
    Parallel exploration, disk-backed visited sets, partial-order reduction.
"""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import CheckResult, Counterexample, PropertyVerdict


class ExplorationLimits:
    def __init__(self, max_states: int | None, max_depth: int | None) -> None:
        for name, value in (("max_states", max_states), ("max_depth", max_depth)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.max_states = max_states
        self.max_depth = max_depth


def action_kind(action: Any) -> str:
    """The coverage class of an action: its ``kind`` attribute, else the text before a parenthesis."""
    kind = getattr(action, "kind", None)
    if isinstance(kind, str):
        return kind
    if isinstance(action, str):
        return action.split("(", 1)[0]
    return type(action).__name__


def check(model: Model[Any], *, properties: Sequence[str] | None = None, max_states: int | None = None,
          max_depth: int | None = None, progress: bool | Callable[[int, int, float], None] = False,
          build_graph: bool = False, check_deadlock: bool = True) -> CheckResult:
    """Explore ``model`` and judge its properties (all, or the ones named in ``properties``).

    Returns a :class:`CheckResult`; ``result.ok`` is True when every judged property holds and no
    deadlock was found; ``result.complete`` is False when a state or depth cap stopped the search (then
    nothing is claimed to hold).
    """
    limits = ExplorationLimits(max_states, max_depth)
    selected = _select(model, properties)
    always = [p for p in selected if p.expectation is Expectation.ALWAYS]
    sometimes = [p for p in selected if p.expectation is Expectation.SOMETIMES]
    leads_to = [p for p in selected if p.expectation is Expectation.LEADS_TO]
    need_edges = build_graph or bool(leads_to)
    canonical = model.symmetry
    is_final = model.is_final

    started = time.perf_counter()
    ids: dict[Hashable, int] = {}
    states: list[Any] = []
    parent = array("q")
    via: list[Any] = []
    edge_src, edge_dst = array("q"), array("q")
    edge_action: list[Any] = []
    coverage: dict[str, int] = {}
    violations: dict[str, int] = {}
    witnesses: dict[str, int] = {}
    deadlocks: list[int] = []
    terminal: list[int] = []

    def add(state: Any, from_id: int, action: Any) -> int:
        key = canonical(state) if canonical is not None else state
        known = ids.get(key)
        if known is not None:
            return known
        new_id = len(states)
        ids[key] = new_id
        states.append(key)
        parent.append(from_id)
        via.append(action)
        for prop in always:
            if prop.name not in violations and not prop.condition(key):
                violations[prop.name] = new_id
        for prop in sometimes:
            if prop.name not in witnesses and prop.condition(key):
                witnesses[prop.name] = new_id
        return new_id

    for init in model.init_states():
        add(init, -1, None)
    frontier = list(range(len(states)))
    depth = 0
    complete = True
    last_report = started
    transitions = 0
    next_steps = model.next_steps
    report = progress if callable(progress) else (_print_progress if progress else None)

    while frontier:
        if limits.max_depth is not None and depth >= limits.max_depth:
            complete = False
            break
        next_frontier: list[int] = []
        for sid in frontier:
            successors = 0
            for action, nxt in next_steps(states[sid]):
                successors += 1
                before = len(states)
                tid = add(nxt, sid, action)
                kind = action_kind(action)
                coverage[kind] = coverage.get(kind, 0) + 1
                if need_edges:
                    edge_src.append(sid)
                    edge_dst.append(tid)
                    edge_action.append(action)
                if tid == before:
                    next_frontier.append(tid)
            transitions += successors
            if successors == 0:
                terminal.append(sid)
                if check_deadlock and not (is_final is not None and is_final(states[sid])):
                    deadlocks.append(sid)
            if limits.max_states is not None and len(states) >= limits.max_states:
                complete = False
                break
            if report is not None and time.perf_counter() - last_report >= 1.0:
                last_report = time.perf_counter()
                report(len(states), depth, len(states) / max(last_report - started, 1e-9))
            if len(violations) == len(always) and always and not sometimes and not leads_to and not need_edges:
                break  # every invariant already has its shortest counterexample
        if not complete:
            break
        frontier = next_frontier
        depth += 1 if frontier else 0

    elapsed = time.perf_counter() - started

    def path_to(sid: int) -> list[tuple[Any, Any]]:
        steps: list[tuple[Any, Any]] = []
        while sid != -1:
            steps.append((via[sid], states[sid]))
            sid = parent[sid]
        steps.reverse()
        return steps

    verdicts: list[PropertyVerdict] = []
    for prop in always:
        if prop.name in violations:
            cex = Counterexample(prop.name, tuple(path_to(violations[prop.name])))
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False, cex, prop.description))
        else:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, True if complete else None, None,
                                            prop.description))
    for prop in sometimes:
        if prop.name in witnesses:
            example = Counterexample(prop.name, tuple(path_to(witnesses[prop.name])), witness=True)
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, True, example, prop.description))
        else:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False if complete else None, None,
                                            prop.description + " (never satisfied)" if complete else prop.description))
    graph = None
    if need_edges:
        from txnspec.checker.liveness import StateGraph, check_leads_to

        graph = StateGraph(states, edge_src, edge_dst, edge_action, terminal, model.fairness)
        for prop in leads_to:
            if not complete:
                verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, None, None, prop.description))
                continue
            lasso = check_leads_to(graph, prop)
            if lasso is None:
                verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, True, None, prop.description))
            else:
                prefix_to, cycle_steps, loops = lasso
                steps = path_to(prefix_to) + cycle_steps
                cex = Counterexample(prop.name, tuple(steps), loop_start=len(path_to(prefix_to)) - 1 if loops else None)
                verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False, cex, prop.description))
    deadlock = Counterexample("deadlock", tuple(path_to(deadlocks[0]))) if deadlocks else None
    all_kinds = list(model.metadata.get("action_kinds", ())) if model.metadata else []
    never = tuple(k for k in all_kinds if k not in coverage)
    return CheckResult(
        model_name=model.name, states=len(states), transitions=transitions, depth=depth, seconds=elapsed,
        complete=complete, verdicts=tuple(verdicts), deadlock=deadlock, deadlock_count=len(deadlocks),
        coverage=dict(sorted(coverage.items())), never_taken=never, graph=graph,
        describe_state=model.describe_state)


def _select(model: Model[Any], names: Iterable[str] | None) -> list[Property[Any]]:
    if names is None:
        return list(model.properties)
    wanted = list(dict.fromkeys(names))
    return [model.property(name) for name in wanted]


def _print_progress(states: int, depth: int, rate: float) -> None:
    print(f"\r  {states:,} states, depth {depth}, {rate:,.0f} states/s", end="", file=sys.stderr, flush=True)
