"""Explicit-state model checking: breadth-first exploration with shortest counterexamples.

What is modelled
    Every state reachable from a :class:`~txnspec.checker.model.Model`'s initial states, explored
    breadth first, so that the first violation found of each ``always`` property is a shortest one.
    ``always`` properties are judged on each new state (each stops at its first violation; the search
    goes on for the others and stops once all are violated and nothing else is left to learn);
    ``sometimes`` properties record their first (shortest) witness, and their absence after a complete
    run is a failure; states without successors that the model does not call final are deadlocks;
    ``leads_to`` properties are judged under weak fairness on the state graph
    (:mod:`txnspec.checker.liveness`).

How
    Visited states (or, with symmetry, their canonical representatives) live in a ``set``; a new
    state's id is its position in the list of stored states, which doubles as the breadth-first
    queue. A dict from state to id replaces the set only when edges to already-visited states must be
    recorded. Parents are an ``array('i')`` and the action of each parent edge a list, both indexed by
    id, which is all a shortest path needs. The hot loop is a plain set-and-list BFS with the
    invariants checked inline; it is specialised for the common case (no symmetry, no edges), so a
    safety check costs little more than the successor function itself. The cyclic garbage collector
    is paused during the search (states are immutable and form no cycles; a model whose successor
    function makes cyclic garbage gets it collected after the search). The state graph's edges are
    recorded (compact integer arrays) only when a ``leads_to`` property or ``build_graph=True`` needs
    them; the networkx graph is built from those after the search, never inside it.

Assumptions
    States are hashable and never mutated (the model contract). With symmetry, the stored state of a
    class is the first member reached (a concrete successor), keyed by its representative: exploring
    any member of a class is equivalent to exploring the representative, and it keeps every
    counterexample a genuine behaviour of the model. The properties must give the same verdict on all
    members of a class (the contract says so for ``model.symmetry``).

Left out
    Parallel exploration, disk-backed or hash-compacted visited sets, partial-order reduction.

Long because the search keeps two expansion loops on purpose (:meth:`_Search._expand_plain` for the common
case without symmetry or edges, :meth:`_Search._expand_general` otherwise: the plain one is the speed of a safety
check), and the result assembly that reads what both store.
"""

from __future__ import annotations

import gc
import itertools
import os
import sys
import time
from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from txnspec.checker.liveness import StateGraph, check_leads_to
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import STOPPED_ON_VIOLATION, CheckResult, Counterexample, PropertyVerdict, action_kind

ProgressCallback = Callable[[int, int, float], None]
"""Called about once a second with ``(distinct states, depth, states per second)``."""

_CHUNK = 1024  # states expanded between two looks at the clock, the caps and the stop conditions
_NO_LIMIT = sys.maxsize


class _Stop(Exception):
    """Leaves the nested search loops: a cap was reached or there is nothing left to learn."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _Judge:
    """The per-state predicates of a run and what happens when one of them fires."""

    always: tuple[Property[Any], ...]
    sometimes: tuple[Property[Any], ...]
    violations: dict[str, int]
    witnesses: dict[str, int]
    keep_going: bool  # True when liveness or a graph export needs the whole space whatever the invariants say
    stop_on_violation: bool = False  # the first violated invariant ends the search

    def on_violation(self, state_id: int, state: Any) -> tuple[Callable[[Any], bool], ...]:
        """Record every pending invariant ``state`` violates; the conditions still pending."""
        for prop in self.always:
            if prop.name not in self.violations and not prop.condition(state):
                self.violations[prop.name] = state_id
        if self.stop_on_violation:
            raise _Stop(STOPPED_ON_VIOLATION)
        remaining = tuple(p.condition for p in self.always if p.name not in self.violations)
        self._stop_if_nothing_left()
        return remaining

    def on_witness(self, state_id: int, state: Any) -> tuple[Callable[[Any], bool], ...]:
        """Record every pending ``sometimes`` property ``state`` satisfies; the conditions still pending."""
        for prop in self.sometimes:
            if prop.name not in self.witnesses and prop.condition(state):
                self.witnesses[prop.name] = state_id
        remaining = tuple(p.condition for p in self.sometimes if p.name not in self.witnesses)
        self._stop_if_nothing_left()
        return remaining

    def _stop_if_nothing_left(self) -> None:
        """Every invariant violated and every witness found: the rest of the space cannot change the verdicts."""
        if (self.always and not self.keep_going and len(self.violations) == len(self.always)
                and len(self.witnesses) == len(self.sometimes)):
            raise _Stop("every invariant is violated (the search stopped early)")


def check(model: Model[Any], *, properties: Sequence[str] | None = None, max_states: int | None = None,
          max_depth: int | None = None, progress: bool | ProgressCallback = False, build_graph: bool = False,
          symmetry: bool = True, check_deadlock: bool = True, stutter_where_unfair: bool = False,
          stop_on_violation: bool = False) -> CheckResult:
    """Explore ``model`` breadth first and judge its properties.

    Parameters
    ----------
    model:
        The transition system and its properties.
    properties:
        Names of the properties to judge (default: all of the model's).
    max_states:
        Stop before storing more than this many distinct states; the verdict is then "incomplete".
    max_depth:
        Do not expand states at this distance from an initial state; "incomplete" if any were left.
    progress:
        ``True`` prints states, depth and states/s to stderr about once a second; a callable receives
        ``(states, depth, states_per_second)`` instead.
    build_graph:
        Record the state graph (``result.graph``) for export or coverage queries, even without liveness.
    symmetry:
        Use ``model.symmetry`` (when the model has one) to store one state per symmetry class.
    check_deadlock:
        Report states without successors that ``model.is_final`` does not accept.
    stutter_where_unfair:
        For ``leads_to``: let a behaviour stop in any state where no fair class is enabled (the TLA+
        reading), not only in states without successors (see :mod:`txnspec.checker.liveness`).
    stop_on_violation:
        End the search at the first state that violates an invariant (every invariant it violates is
        reported, each with its shortest counterexample; the rest are unknown).

    Returns
    -------
    CheckResult
        Verdicts with shortest counterexamples, counts, timings and coverage. ``result.ok`` is True
        when no judged property is violated and no deadlock was found; ``result.complete`` is False
        when a cap or an early stop ended the search (then nothing is claimed to hold).

    Examples
    --------
    >>> from txnspec.checker.model import Model, Property
    >>> counter = Model("counter", lambda: [0], lambda n: [("inc", n + 1)] if n < 3 else [],
    ...                 properties=[Property.always("small", lambda n: n < 10)], is_final=lambda n: n == 3)
    >>> result = check(counter)
    >>> (result.verdict_text, result.states, result.depth)
    ('holds', 4, 3)
    """
    for name, value in (("max_states", max_states), ("max_depth", max_depth)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    selected = _select(model, properties)
    always = tuple(p for p in selected if p.expectation is Expectation.ALWAYS)
    sometimes = tuple(p for p in selected if p.expectation is Expectation.SOMETIMES)
    leads_to = tuple(p for p in selected if p.expectation is Expectation.LEADS_TO)
    for prop in leads_to:
        if prop.trigger is None:
            raise ValueError(f"leads_to property {prop.name!r} has no trigger")
    record_edges = build_graph or bool(leads_to)
    canonical = model.symmetry if symmetry else None
    judge = _Judge(always, sometimes, {}, {}, keep_going=record_edges, stop_on_violation=stop_on_violation)
    report = progress if callable(progress) else (_print_progress if progress else None)

    search = _Search(model, canonical, judge, record_edges,
                     max_states if max_states is not None else _NO_LIMIT,
                     max_depth if max_depth is not None else _NO_LIMIT, report)
    search.run()
    if report is _print_progress:
        print(file=sys.stderr)
    return _result(model, search, judge, leads_to, check_deadlock, stutter_where_unfair)


class _Search:
    """One breadth-first exploration; its fields are the raw outcome the result is built from."""

    def __init__(self, model: Model[Any], canonical: Callable[[Any], Any] | None, judge: _Judge,
                 record_edges: bool, state_cap: int, depth_cap: int, report: ProgressCallback | None) -> None:
        self.model = model
        self.canonical = canonical
        self.judge = judge
        self.record_edges = record_edges
        self.state_cap = state_cap
        self.depth_cap = depth_cap
        self.report = report
        # visited keys: a set when only new states need ids (their id is their position in ``states``),
        # a dict from key to id when edges to already-visited states must be recorded as well
        self.seen: set[Hashable] = set()
        self.ids: dict[Hashable, int] = {}
        self.states: list[Any] = []
        self.parents = array("i")
        self.via: list[Any] = []
        self.initial_count = 0
        self.edge_source = array("i")
        self.edge_target = array("i")
        self.edge_action: list[Any] = []
        self.terminal: list[int] = []
        self.label_counts: dict[Any, int] = {}
        self.transitions = 0
        self.expanded = 0
        self.level = 0
        self.level_ends: list[int] = []  # where each whole level ends among ``states``
        self.stop_reason: str | None = None
        self.seconds = 0.0

    def run(self) -> None:
        # The cyclic garbage collector would repeatedly traverse every stored state (immutable values
        # that form no cycles) as the search allocates; it is paused for the search and restored after.
        collecting = gc.isenabled()
        gc.disable()
        started = time.perf_counter()
        try:
            self._add_initial_states()
            self._explore(started)
        except _Stop as stop:
            self.stop_reason = stop.reason
        finally:
            self.seconds = time.perf_counter() - started
            if collecting:
                gc.enable()

    def _add_initial_states(self) -> None:
        judge = self.judge
        always_conds = tuple(p.condition for p in judge.always)
        sometimes_conds = tuple(p.condition for p in judge.sometimes)
        for state in self.model.init_states():
            key = self.canonical(state) if self.canonical is not None else state
            if key in self.ids or key in self.seen:
                continue
            if len(self.states) >= self.state_cap:
                raise _Stop(f"the state cap ({self.state_cap:,}) was reached")
            new_id = len(self.states)
            if self.canonical is None and not self.record_edges:
                self.seen.add(key)
            else:
                self.ids[key] = new_id
            self.states.append(state)
            self.parents.append(-1)
            self.via.append(None)
            if any(not cond(state) for cond in always_conds):
                always_conds = judge.on_violation(new_id, state)
            if any(cond(state) for cond in sometimes_conds):
                sometimes_conds = judge.on_witness(new_id, state)
        self.initial_count = len(self.states)

    def _explore(self, started: float) -> None:
        """Expand the stored states in order, one chunk at a time (the list of states is the queue)."""
        states = self.states
        level_end = len(states)
        self.level_ends.append(level_end)
        next_look = started + 1.0
        while self.expanded < len(states):
            if self.expanded == level_end:
                self.level += 1
                level_end = len(states)
                self.level_ends.append(level_end)  # the level before is expanded: this one is whole
            if self.level >= self.depth_cap:
                raise _Stop(f"the depth cap ({self.depth_cap}) was reached")
            stop = min(level_end, self.expanded + _CHUNK)
            if self.canonical is None and not self.record_edges:
                self._expand_plain(self.expanded, stop)
            else:
                self._expand_general(self.expanded, stop)
            self.expanded = stop
            if self.report is not None and time.perf_counter() >= next_look:
                now = time.perf_counter()
                next_look = now + 1.0
                self.report(len(states), self.level, len(states) / max(now - started, 1e-9))
        if self.report is not None:  # the last word: the final counts
            self.report(len(states), self.level, len(states) / max(time.perf_counter() - started, 1e-9))

    def _expand_plain(self, start: int, stop: int) -> None:
        """The hot loop without symmetry or edges: as close to a bare set-and-list BFS as Python allows."""
        seen = self.seen
        mark_seen = seen.add
        states = self.states
        add_state = states.append
        add_parent = self.parents.append
        add_via = self.via.append
        labels = self.label_counts
        count_of = labels.get
        next_steps = self.model.next_steps
        judge = self.judge
        always_conds = tuple(p.condition for p in judge.always if p.name not in judge.violations)
        sometimes_conds = tuple(p.condition for p in judge.sometimes if p.name not in judge.witnesses)
        next_id = len(states)
        state_cap = self.state_cap
        transitions = 0
        state_id = start - 1
        try:
            for state in states[start:stop]:
                state_id += 1
                successors = next_steps(state)
                if type(successors) is not list:
                    successors = list(successors)
                if not successors:
                    self.terminal.append(state_id)
                    continue
                transitions += len(successors)
                for action, successor in successors:
                    labels[action] = count_of(action, 0) + 1
                    if successor in seen:
                        continue
                    if next_id >= state_cap:
                        raise _Stop(f"the state cap ({state_cap:,}) was reached")
                    mark_seen(successor)
                    add_state(successor)
                    add_parent(state_id)
                    add_via(action)
                    for cond in always_conds:
                        if not cond(successor):
                            always_conds = judge.on_violation(next_id, successor)
                            break
                    for cond in sometimes_conds:
                        if cond(successor):
                            sometimes_conds = judge.on_witness(next_id, successor)
                            break
                    next_id += 1
        finally:
            self.transitions += transitions

    def _expand_general(self, start: int, stop: int) -> None:
        """The loop with symmetry and/or edge recording (for liveness and graph export)."""
        ids = self.ids
        states = self.states
        labels = self.label_counts
        count_of = labels.get
        next_steps = self.model.next_steps
        canonical = self.canonical
        record_edges = self.record_edges
        edge_source, edge_target, edge_action = self.edge_source, self.edge_target, self.edge_action
        judge = self.judge
        always_conds = tuple(p.condition for p in judge.always if p.name not in judge.violations)
        sometimes_conds = tuple(p.condition for p in judge.sometimes if p.name not in judge.witnesses)
        state_cap = self.state_cap
        transitions = 0
        state_id = start - 1
        try:
            for state in states[start:stop]:
                state_id += 1
                successors = next_steps(state)
                if type(successors) is not list:
                    successors = list(successors)
                if not successors:
                    self.terminal.append(state_id)
                    continue
                transitions += len(successors)
                for action, successor in successors:
                    labels[action] = count_of(action, 0) + 1
                    key = canonical(successor) if canonical is not None else successor
                    target = ids.get(key)
                    if target is None:
                        target = len(states)
                        if target >= state_cap:
                            raise _Stop(f"the state cap ({state_cap:,}) was reached")
                        ids[key] = target
                        states.append(successor)
                        self.parents.append(state_id)
                        self.via.append(action)
                        for cond in always_conds:
                            if not cond(successor):
                                always_conds = judge.on_violation(target, successor)
                                break
                        for cond in sometimes_conds:
                            if cond(successor):
                                sometimes_conds = judge.on_witness(target, successor)
                                break
                    if record_edges:
                        edge_source.append(state_id)
                        edge_target.append(target)
                        edge_action.append(action)
        finally:
            self.transitions += transitions

    def path_to(self, state_id: int) -> list[tuple[Any, Any]]:
        """The shortest path from an initial state: ``[(None, initial), (action, state), ...]``."""
        steps: list[tuple[Any, Any]] = []
        while state_id != -1:
            steps.append((self.via[state_id], self.states[state_id]))
            state_id = self.parents[state_id]
        steps.reverse()
        return steps

    def depth_of(self, state_id: int) -> int:
        depth = 0
        while self.parents[state_id] != -1:
            state_id = self.parents[state_id]
            depth += 1
        return depth


def _result(model: Model[Any], search: _Search, judge: _Judge, leads_to: tuple[Property[Any], ...],
            check_deadlock: bool, stutter_where_unfair: bool) -> CheckResult:
    complete = search.stop_reason is None
    verdicts: list[PropertyVerdict] = []
    for prop in judge.always:
        violation = judge.violations.get(prop.name)
        if violation is not None:
            cex = Counterexample(prop.name, tuple(search.path_to(violation)))
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False, cex, prop.description))
        else:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, True if complete else None, None,
                                            prop.description))
    for prop in judge.sometimes:
        witness = judge.witnesses.get(prop.name)
        if witness is not None:
            example = Counterexample(prop.name, tuple(search.path_to(witness)), witness=True)
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, True, example, prop.description))
        else:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False if complete else None, None,
                                            prop.description, never_satisfied=complete))
    liveness_started = time.perf_counter()
    graph: StateGraph | None = None
    if search.record_edges:
        graph = StateGraph(search.states, search.initial_count, search.edge_source, search.edge_target,
                           search.edge_action, search.terminal, model.fairness)
    for prop in leads_to:
        if not complete or graph is None:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, None, None, prop.description))
            continue
        lasso = check_leads_to(graph, prop, stutter_where_unfair=stutter_where_unfair)
        if lasso is None:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, True, None, prop.description))
            continue
        prefix = search.path_to(lasso.trigger_state)
        steps = [*prefix, *lasso.steps]
        loop_start = None if lasso.loop_offset is None else len(prefix) - 1 + lasso.loop_offset
        cex = Counterexample(prop.name, tuple(steps), loop_start=loop_start, stutter=lasso.stutter)
        verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False, cex, prop.description))

    liveness_seconds = time.perf_counter() - liveness_started
    deadlocks: list[int] = []
    if check_deadlock:
        is_final = model.is_final
        deadlocks = [t for t in search.terminal if is_final is None or not is_final(search.states[t])]
    kinds: dict[str, int] = {}
    for label, count in search.label_counts.items():
        kind = action_kind(label)
        kinds[kind] = kinds.get(kind, 0) + count
    declared = list((model.metadata or {}).get("action_kinds", ()))
    for kind in declared:
        kinds.setdefault(kind, 0)
    never = tuple(kind for kind in declared if kinds[kind] == 0)
    depth = search.depth_of(len(search.states) - 1) if search.states else 0
    return CheckResult(
        model_name=model.name, states=len(search.states), transitions=search.transitions, depth=depth,
        seconds=search.seconds, complete=complete, verdicts=tuple(verdicts),
        deadlock=Counterexample("deadlock", tuple(search.path_to(deadlocks[0]))) if deadlocks else None,
        deadlock_count=len(deadlocks), coverage=dict(sorted(kinds.items())), never_taken=never, graph=graph,
        describe_state=model.describe_state, stop_reason=search.stop_reason,
        symmetry=search.canonical is not None, liveness_seconds=liveness_seconds,
        level_sizes=tuple(end - start for start, end in itertools.pairwise([0, *search.level_ends])))


def _select(model: Model[Any], names: Iterable[str] | None) -> list[Property[Any]]:
    if names is None:
        return list(model.properties)
    return [model.property(name) for name in dict.fromkeys(names)]


def resident_bytes() -> int:
    """This process's resident memory now (Linux's /proc; its peak where that is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _print_progress(states: int, depth: int, rate: float) -> None:
    print(f"\r  {states:,} states, depth {depth}, {rate:,.0f} states/s, {resident_bytes() / 2**20:,.0f} MB",
          end="", file=sys.stderr, flush=True)
