"""Simulation: random walks from the initial states, every invariant judged at every state, swarm-style.

What is modelled
    Where a state space is far too large to exhaust (TLC's ``-simulate``, Apalache's random traces), random
    behaviours still find the bugs that many behaviours reach. :func:`simulate` runs walks, each from an
    initial state, choosing one enabled step at a time, until a state has no successor or the walk's depth
    bound is reached. Every ``always`` property is judged on every state a walk visits (a state already judged
    in this process is skipped by its ``hash``), ``sometimes`` properties record that they were met, a
    state without successors that the model does not call final is a deadlock, and a ``leads_to`` property
    whose trigger held with no answer since is violated where the walk ends in a state without successors (the
    behaviour stutters there forever, weakly fair since nothing is enabled) or returns to a state it visited
    after the trigger, through a loop that answers nothing and takes every fairness class enabled all along it
    (the behaviour repeats the loop forever, weakly fair: the exact engine's fair cycles, met by one walk). The
    first violation stops the
    simulation; its path is then shrunk (:mod:`txnspec.checker.shrink`) and reported in a
    :class:`~txnspec.checker.report.CheckResult`, as the breadth-first engines report theirs.

    Swarm testing (Groce et al., ISSTA 2012): a walk with uniform choices spends its steps on whatever is
    enabled most often. Each walk instead draws its own weight for every action kind
    (:func:`~txnspec.checker.report.action_kind`): a kind is switched off with probability 1/4 (it is taken
    only when nothing else is enabled) or weighs a log-uniform factor between 1/16 and 16, and the kinds the
    model's ``fairness`` calls unfair (faults, client choices) draw on a scale twice as wide. Each walk also
    draws its depth bound, uniform up to ``max_depth``, so that short behaviours are tried as often as long.

    Coverage: the steps of each action kind, and, where ``model.metadata["transition_labels"]`` maps a step's
    ``(state, next state)`` to labels (the Kafka model's: the coordinator's transaction-state transitions), how
    often each label was met.

Determinism
    Walk ``k`` draws everything from ``random.Random(f"{seed}/{k}")``: the walks are the same whatever the
    number of workers. With ``workers`` processes, worker ``w`` runs walks ``w, w + workers, ...``; the
    violation reported is the one of the lowest-numbered violating walk (a worker that finds one lowers a
    shared bound, and every worker runs on until its next walk is past it), so for a seed the counterexample,
    the walks before it and the steps they took are the same for any number of workers, given the time to
    reach it. Distinct states and coverage count every walk the workers ran, which may be a few more.

Assumptions
    The model's successor order does not depend on the process's hash salt (the walks' choices follow it);
    forked workers inherit the model (POSIX ``fork``).

Left out
    ``leads_to`` violations whose fair cycle no single walk closes (a cycle is seen only where a walk returns to
    its own earlier state, and judged on that loop alone, not on the strongly connected component the exact
    engine judges). Symmetry and partial-order reduction (a walk explores one behaviour; they would only rename
    it).

Long because the walk (choices, the fair-loop and unanswered-trigger bookkeeping of ``leads_to``, deadlocks)
and the result it reports (the first violation shrunk, coverage, per-worker tallies) are one engine; shrinking
is :mod:`.shrink_violation`, and the workers only run walks.
"""

from __future__ import annotations

import gc
import multiprocessing
import random
import sys
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from txnspec.checker.fingerprints import FingerprintSet
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import CheckResult, Counterexample, PropertyVerdict, SimulationStats, action_kind
from txnspec.checker.shrink_violation import shrink_violation, still_unanswered

_NONE = sys.maxsize  # no violating walk yet


@dataclass(slots=True)
class _Tally:
    """One worker's counts; ``steps_of`` holds each walk's steps, in the worker's order."""

    steps_of: array[int]
    fingerprints: FingerprintSet | array[int]  # a worker's set; what it shipped, in the parent
    coverage: dict[str, int]
    witnessed: set[str]
    labels: dict[str, int] = field(default_factory=dict)  # the model's transition labels, counted
    longest: int = 0
    found: int = _NONE  # the number of this worker's first violating walk
    found_after: float | None = None


class _Walker:
    """Runs walks by number; the same walk for the same seed and number in any process."""

    def __init__(self, model: Model[Any], always: Sequence[Property[Any]], sometimes: Sequence[Property[Any]],
                 leads_to: Sequence[Property[Any]], seed: int, max_depth: int, check_deadlock: bool) -> None:
        self.model = model
        self.always = tuple(always)
        self.sometimes = tuple(sometimes)
        self.leads_to = tuple(leads_to)
        self.seed = seed
        self.max_depth = max_depth
        self.check_deadlock = check_deadlock
        self.initial = list(model.init_states())
        if not self.initial:
            raise ValueError(f"{model.name} has no initial state")
        self.declared = [str(k) for k in (model.metadata or {}).get("action_kinds", ())]
        self.transition_labels: Callable[[Any, Any], Any] | None = (model.metadata or {}).get("transition_labels")
        self.fairness = model.fairness
        self.report: Callable[[str], None] | None = None  # progress, about once a second

    def _weight_of(self, kind: str, action: Any, weights: dict[str, float], rng: random.Random) -> float:
        """A kind met for the first time in this walk draws its weight now (unfair kinds on a wider scale)."""
        unfair = self.fairness is not None and self.fairness(action) is None
        weight = weights[kind] = _weight(rng, 8.0 if unfair else 4.0)
        return weight

    def walk(self, number: int, tally: _Tally | None) -> list[tuple[Any, Any]] | None:
        """Run walk ``number``; its path if it reaches a violation (or a deadlock), else None."""
        rng = random.Random(f"{self.seed}/{number}")
        weights: dict[str, float] = {}
        depth_bound = rng.randint(1, self.max_depth)
        state = self.initial[rng.randrange(len(self.initial))]
        path: list[tuple[Any, Any]] = [(None, state)]
        seen = tally.fingerprints if tally is not None and isinstance(tally.fingerprints, FingerprintSet) \
            else FingerprintSet(64)
        coverage = tally.coverage if tally is not None else {}
        labels = tally.labels if tally is not None else {}
        label = self.transition_labels
        if self._bad(state, seen, tally):
            return path
        leads_to = self.leads_to
        unanswered = [still_unanswered(p, False, state) for p in leads_to]
        next_steps, is_final = self.model.next_steps, self.model.is_final
        # with leads-to properties: where each state of the walk last stood, and the fair classes enabled there
        last_at: dict[Any, int] = {state: 0} if leads_to else {}
        enabled: list[frozenset[Any]] = []
        for _ in range(depth_bound):
            successors = next_steps(state)
            if type(successors) is not list:
                successors = list(successors)
            if not successors:
                if (self.check_deadlock and (is_final is None or not is_final(state))) or any(unanswered):
                    return path
                break
            if leads_to:
                enabled.append(self._fair_classes(successors))
            chosen = self._choose(successors, weights, rng)
            before = state
            action, state = successors[chosen]
            path.append((action, state))
            kind = action_kind(action)
            coverage[kind] = coverage.get(kind, 0) + 1
            if label is not None:
                for text in label(before, state):
                    labels[text] = labels.get(text, 0) + 1
            if self._bad(state, seen, tally):
                return path
            if leads_to:
                unanswered = [still_unanswered(p, u, state) for p, u in zip(leads_to, unanswered, strict=True)]
                earlier = last_at.get(state)
                if earlier is not None and any(unanswered) and any(
                        u and _fair_unanswered_loop(path, earlier, enabled, self.fairness, p)
                        for p, u in zip(leads_to, unanswered, strict=True)):
                    return path
                last_at[state] = len(path) - 1
        return None

    def _fair_classes(self, successors: Sequence[tuple[Any, Any]]) -> frozenset[Any]:
        fairness = self.fairness
        if fairness is None:
            return frozenset()
        return frozenset(c for c in (fairness(action) for action, _ in successors) if c is not None)

    def _choose(self, successors: list[tuple[Any, Any]], weights: dict[str, float], rng: random.Random) -> int:
        scores = []
        for action, _ in successors:
            kind = action_kind(action)
            weight = weights.get(kind)
            if weight is None:
                weight = self._weight_of(kind, action, weights, rng)
            scores.append(weight)
        total = sum(scores)
        if total <= 0.0:  # every enabled kind is switched off in this walk: any of them
            return rng.randrange(len(successors))
        point = rng.random() * total
        for index, score in enumerate(scores):
            point -= score
            if point < 0.0:
                return index
        return len(successors) - 1

    def _bad(self, state: Any, seen: FingerprintSet, tally: _Tally | None) -> bool:
        """Judge ``state`` unless this process judged it before: True if an invariant fails."""
        if not seen.add(hash(state)):
            return False
        if tally is not None:
            for prop in self.sometimes:
                if prop.name not in tally.witnessed and prop.condition(state):
                    tally.witnessed.add(prop.name)
        return any(not prop.condition(state) for prop in self.always)

    def violated(self, path: Sequence[tuple[Any, Any]]) -> tuple[Property[Any] | None, int | None]:
        """What the violating ``path`` violates: an invariant its last state fails; else a ``leads_to`` property
        whose trigger held with no answer since, where the path ends in a state without successors or closes a
        weakly fair loop (then the loop's start: the index of the last state's previous visit); else None (a
        deadlock)."""
        last = path[-1][1]
        for prop in self.always:
            if not prop.condition(last):
                return prop, None
        earlier = next((i for i in range(len(path) - 2, -1, -1) if path[i][1] == last), None)
        enabled = [] if earlier is None else [frozenset() for _ in range(earlier)] + [
            self._fair_classes(list(self.model.next_steps(state))) for _, state in path[earlier:-1]]
        for prop in self.leads_to:
            unanswered = False
            for _, state in path:
                unanswered = still_unanswered(prop, unanswered, state)
            if unanswered:
                if earlier is not None and _fair_unanswered_loop(path, earlier, enabled, self.fairness, prop):
                    return prop, earlier
                if not any(True for _ in self.model.next_steps(last)):
                    return prop, None
        return None, None


def _fair_unanswered_loop(path: Sequence[tuple[Any, Any]], start: int, enabled: Sequence[frozenset[Any]],
                          fairness: Callable[[Any], Any] | None, prop: Property[Any]) -> bool:
    """Whether the steps after ``path[start]`` back to its state (the path's last) make a loop that a behaviour may
    repeat forever with ``prop`` unanswered: no state of it answers ``prop``, and every fairness class enabled in
    all of its states (``enabled[i]``: the classes enabled in ``path[i]``) is taken by one of its steps (weak
    fairness, as the exact engine's fair cycles)."""
    loop = path[start:]
    if any(prop.condition(state) for _, state in loop):
        return False
    always_enabled = frozenset.intersection(*enabled[start:len(path) - 1])
    if not always_enabled:
        return True
    taken = {fairness(action) for action, _ in loop[1:]} if fairness is not None else set()
    return always_enabled <= taken


def _weight(rng: random.Random, scale: float) -> float:
    """Swarm weight: off with probability 1/4, else log-uniform in [1/scale, scale]."""
    if rng.random() < 0.25:
        return 0.0
    return float(scale ** rng.uniform(-1.0, 1.0))


def _run(walker: _Walker, worker: int, workers: int, deadline: float, max_walks: int | None,
         bound: Any, started: float) -> _Tally:
    """Worker ``worker``'s walks ``worker, worker + workers, ...`` until one violates, a walk past ``bound`` (the
    lowest violating walk any worker found) is next, the deadline passes or ``max_walks`` walks are numbered."""
    tally = _Tally(array("q"), FingerprintSet(), {}, set())
    number = worker
    report = walker.report if worker == 0 else None  # the first worker speaks for all (its own counts)
    next_report = started + 1.0
    while (max_walks is None or number < max_walks) and time.perf_counter() < deadline:
        if bound is not None and number > bound.value:
            break
        if report is not None and time.perf_counter() >= next_report:
            next_report = time.perf_counter() + 1.0
            report(f"{len(tally.steps_of):,} walks, {sum(tally.steps_of):,} steps, {len(tally.fingerprints):,} "
                   f"distinct states" + (f" (worker 1 of {workers})" if workers > 1 else "")
                   + f", {time.perf_counter() - started:.0f} s")
        before = sum(tally.coverage.values())
        path = walker.walk(number, tally)
        steps = sum(tally.coverage.values()) - before
        tally.steps_of.append(steps)
        tally.longest = max(tally.longest, steps)
        if path is not None:
            tally.found, tally.found_after = number, time.perf_counter() - started
            if bound is not None:
                with bound.get_lock():
                    bound.value = min(bound.value, number)
            break
        number += workers
    return tally


def _serve(walker: _Walker, worker: int, workers: int, deadline: float, max_walks: int | None, bound: Any,
           started: float, connection: Any) -> None:
    gc.disable()
    try:
        tally = _run(walker, worker, workers, deadline, max_walks, bound, started)
    except Exception as exc:  # the model failed in this worker: the parent says so, with what failed
        connection.send(f"{type(exc).__name__}: {exc}")
        connection.close()
        return
    members = tally.fingerprints.members() if isinstance(tally.fingerprints, FingerprintSet) else tally.fingerprints
    connection.send((tally.steps_of.tobytes(), members.tobytes(), tally.coverage,
                     tally.witnessed, tally.labels, tally.longest, tally.found, tally.found_after))
    connection.close()


def simulate(model: Model[Any], *, properties: Sequence[str] | None = None, seconds: float = 60.0,
             max_depth: int = 100, seed: int = 0, workers: int = 1, max_walks: int | None = None,
             check_deadlock: bool = True, shrink_seconds: float = 60.0,
             progress: Callable[[str], None] | None = None) -> CheckResult:
    """Random walks on ``model`` for ``seconds`` (or ``max_walks`` walks), stopping at the first violation.

    The result is a :class:`CheckResult` like the breadth-first engines' (``store`` is "simulation", its
    ``simulation`` field has the :class:`SimulationStats`): the violated invariant (or the deadlock) with its
    shrunk counterexample; every other invariant unknown (a simulation proves nothing); a ``sometimes``
    property holds if a walk met it, else unknown. ``progress`` is called about once a second with a line of
    counts (the first worker's), and once with the walk found violating.

    >>> from txnspec.checker.model import Model, Property
    >>> walk = Model("walk", lambda: [0], lambda n: [("up", n + 1), ("down", n - 1)] if abs(n) < 20 else [],
    ...              properties=[Property.always("below_5", lambda n: n < 5)], is_final=lambda n: True)
    >>> result = simulate(walk, seed=1, max_walks=1_000)
    >>> result.verdict("below_5").holds, len(result.verdict("below_5").counterexample)
    (False, 5)
    """
    for name, value in (("seconds", seconds), ("max_depth", max_depth), ("workers", workers)):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if max_walks is not None and max_walks <= 0:
        raise ValueError(f"max_walks must be positive, got {max_walks}")
    selected = [model.property(n) for n in dict.fromkeys(properties)] if properties is not None \
        else list(model.properties)
    always = [p for p in selected if p.expectation is Expectation.ALWAYS]
    sometimes = [p for p in selected if p.expectation is Expectation.SOMETIMES]
    leads_to = [p for p in selected if p.expectation is Expectation.LEADS_TO]
    walker = _Walker(model, always, sometimes, leads_to, seed, max_depth, check_deadlock)
    walker.report = progress
    started = time.perf_counter()
    deadline = started + seconds
    collecting = gc.isenabled()
    gc.disable()
    try:
        tallies = _in_workers(walker, workers, deadline, max_walks, started) if workers > 1 \
            else [_run(walker, 0, 1, deadline, max_walks, None, started)]
    finally:
        if collecting:
            gc.enable()
    searched = time.perf_counter() - started
    found = min(t.found for t in tallies)
    if progress is not None and found != _NONE:
        progress(f"walk {found} violates; shrinking its path")
    return _result(model, walker, tallies, found, selected, seed, max_walks, searched, shrink_seconds)


def _in_workers(walker: _Walker, workers: int, deadline: float, max_walks: int | None,
                started: float) -> list[_Tally]:
    context = multiprocessing.get_context("fork")
    bound = context.Value("q", _NONE)
    pipes, processes = [], []
    for worker in range(workers):
        mine, theirs = context.Pipe(duplex=False)
        process = context.Process(target=_serve, daemon=True,
                                  args=(walker, worker, workers, deadline, max_walks, bound, started, theirs))
        process.start()
        theirs.close()
        pipes.append(mine)
        processes.append(process)
    tallies = []
    try:
        for worker, pipe in enumerate(pipes):
            try:
                answer = pipe.recv()
            except EOFError:
                raise RuntimeError(f"simulation worker {worker} died without an answer") from None
            if isinstance(answer, str):
                raise RuntimeError(f"simulation worker {worker} failed: {answer}")
            steps, fingerprints, coverage, witnessed, labels, longest, found, after = answer
            held = array("q")
            held.frombytes(fingerprints)
            tally = _Tally(array("q"), held, coverage, witnessed, labels, longest, found, after)
            tally.steps_of.frombytes(steps)
            tallies.append(tally)
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return tallies


def _result(model: Model[Any], walker: _Walker, tallies: list[_Tally], found: int, selected: list[Property[Any]],
            seed: int, max_walks: int | None, searched: float, shrink_budget: float) -> CheckResult:
    workers_count = len(tallies)
    # the walks numbered up to the violating one (all walks without one), and the steps they took
    walks = steps = 0
    for worker, tally in enumerate(tallies):
        for index, count in enumerate(tally.steps_of):
            if worker + index * workers_count <= found:
                walks += 1
                steps += count
    if len(tallies) == 1:
        distinct = len(tallies[0].fingerprints)
    else:
        union = FingerprintSet(sum(len(t.fingerprints) for t in tallies))
        for tally in tallies:
            held = tally.fingerprints
            for fingerprint in held.members() if isinstance(held, FingerprintSet) else held:
                union.add(fingerprint)
        distinct = len(union)
    coverage: dict[str, int] = {}
    for tally in tallies:
        for kind, count in tally.coverage.items():
            coverage[str(kind)] = coverage.get(str(kind), 0) + count
    for kind in walker.declared:
        coverage.setdefault(kind, 0)
    labels: dict[str, int] = {}
    for tally in tallies:
        for text, count in tally.labels.items():
            labels[text] = labels.get(text, 0) + count
    witnessed = set().union(*(t.witnessed for t in tallies))
    violated: Property[Any] | None = None
    cex: Counterexample | None = None
    deadlock: Counterexample | None = None
    found_after = found_length = shrunk_length = None
    tries, shrink_time = 0, 0.0
    if found != _NONE:
        found_after = min(t.found_after for t in tallies if t.found == found and t.found_after is not None)
        path = walker.walk(found, None)  # the same walk again, in this process
        if path is None:
            raise RuntimeError(f"walk {found} violated in a worker but not when re-run: the model's successor "
                               "order depends on something other than its state (a hash salt?)")
        violated, loop_start = walker.violated(path)
        outcome = shrink_violation(model, path, violated, deadline=time.perf_counter() + shrink_budget,
                                   loop_start=loop_start)
        found_length, shrunk_length = len(path) - 1, outcome.after
        tries, shrink_time = outcome.tries, outcome.seconds
        if violated is None:
            deadlock = Counterexample("deadlock", outcome.steps)
        else:
            cex = Counterexample(violated.name, outcome.steps, loop_start=outcome.loop_start,
                                 stutter=violated.expectation is Expectation.LEADS_TO and outcome.loop_start is None)
    verdicts = []
    for prop in sorted(selected, key=lambda p: p.expectation is not Expectation.ALWAYS):
        if prop.expectation is Expectation.SOMETIMES:
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value,
                                            True if prop.name in witnessed else None, None, prop.description))
        else:
            hit = violated is not None and prop.name == violated.name
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, False if hit else None,
                                            cex if hit else None, prop.description))
    if found != _NONE:
        reason = "the simulation stops at its first violation"
    elif max_walks is not None and walks >= max_walks:
        reason = f"the walk cap ({walks:,} walks) was reached"
    else:
        reason = f"the time budget ran out ({walks:,} walks)"
    stats = SimulationStats(seed, workers_count, walks, steps, distinct, max(t.longest for t in tallies),
                            searched, found_after, found_length, shrunk_length, tries, shrink_time,
                            dict(sorted(labels.items())))
    return CheckResult(
        model_name=model.name, states=distinct, transitions=steps, depth=stats.longest, seconds=searched,
        complete=False, verdicts=tuple(verdicts), deadlock=deadlock, deadlock_count=int(deadlock is not None),
        coverage=dict(sorted(coverage.items())),
        never_taken=tuple(k for k in walker.declared if coverage[k] == 0),
        describe_state=model.describe_state, stop_reason=reason, store="simulation", simulation=stats)

