"""The outcome of a check as plain data, with text and JSON renderings.

What is modelled
    :class:`CheckResult` holds one :class:`PropertyVerdict` per judged property, the shortest
    :class:`Counterexample` (or ``sometimes`` witness) of each, the shortest deadlock, the counts
    (distinct states, transitions, depth), timings and transition coverage per action kind; a simulation's
    counts and shrinking in :class:`SimulationStats`.

Assumptions
    A run stopped by a cap (or stopped early once every invariant failed) is *incomplete*: properties
    not yet violated get ``holds=None``, never ``True``. The kind of an action, for coverage, is its
    ``kind`` attribute when it has one (:class:`~txnspec.checker.model.Label`), else a ``str`` label itself,
    else its type's name (:func:`action_kind`).

Left out
    Any knowledge of what the states mean: a state is shown by the model's ``describe_state`` (or
    ``repr``), and a step of a counterexample shows only the lines of that rendering that changed.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from txnspec.checker.model import Expectation, Model, Property

STOPPED_ON_VIOLATION = "the first violation stopped the search (stop on violation)"
"""The stop reason of a breadth-first search asked to stop at its first violated invariant."""

Step = tuple[Any, Any]
"""One step of a path: ``(action, state)``; the first step of a path is ``(None, initial state)``."""


def action_kind(action: Any) -> str:
    """The coverage class of an action: its ``kind`` attribute, else a plain text label itself (the engines never
    read structure out of text: a model that wants ``send(p0, 3)`` counted as ``send`` says so with a
    :class:`~txnspec.checker.model.Label`), else its type's name.

    Examples
    --------
    >>> from txnspec.checker.model import Label
    >>> action_kind(Label("send", ("p0", 3))), action_kind("tick"), action_kind(("deliver", 1))
    ('send', 'tick', 'tuple')
    """
    kind = getattr(action, "kind", None)
    if isinstance(kind, str) and kind:
        return kind
    if isinstance(action, str):
        return action
    return type(action).__name__


@dataclass(frozen=True, slots=True)
class Counterexample:
    """A path from an initial state: ``steps[0]`` is ``(None, initial state)``, then ``(action, state)``.

    Attributes
    ----------
    property:
        The property it refutes (or, with ``witness=True``, illustrates); ``"deadlock"`` for a deadlock.
    steps:
        The behaviour, step by step.
    loop_start:
        For a liveness violation that loops: the index of the step the last state returns to (the last
        state equals ``steps[loop_start]``'s state), and the behaviour repeats the loop forever.
    witness:
        True for a ``sometimes`` property's example rather than a violation.
    stutter:
        For a liveness violation: the behaviour stays in the last state forever, because no weakly fair
        action is enabled there (a deadlock is the special case with nothing enabled at all).
    """

    property: str
    steps: tuple[Step, ...]
    loop_start: int | None = None
    witness: bool = False
    stutter: bool = False

    @builtins.property  # the field ``property`` shadows the builtin inside this class body
    def actions(self) -> tuple[str, ...]:
        """The action labels, as text, without the initial step."""
        return tuple(str(a) for a, _ in self.steps[1:])

    @builtins.property
    def states(self) -> tuple[Any, ...]:
        return tuple(s for _, s in self.steps)

    def __len__(self) -> int:
        """The number of actions (steps after the initial state)."""
        return len(self.steps) - 1

    def render(self, describe_state: Callable[[Any], str] | None = None) -> str:
        """Step by step: each action, then the lines of the state's rendering that it changed."""
        describe = describe_state or repr
        lines: list[str] = []
        previous: set[str] = set()
        for i, (action, state) in enumerate(self.steps):
            head = "initial state" if i == 0 else str(action)
            if self.loop_start is not None and i == self.loop_start:
                head += "   <- the loop starts here"
            lines.append(f"  {i:>3}. {head}")
            text = describe(state).splitlines() or [""]
            changed = [line for line in text if line not in previous] if i else text
            lines.extend(f"         {line}" for line in changed)
            previous = set(text)
        if self.loop_start is not None:
            lines.append(f"       ... back to step {self.loop_start}, forever (a weakly fair behaviour)")
        elif self.stutter:
            lines.append("       ... and nothing more happens, forever: no weakly fair action is enabled")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class PropertyVerdict:
    """The judgement of one property.

    Attributes
    ----------
    holds:
        True, False, or None when the run was incomplete and the property was not refuted.
    counterexample:
        The shortest violation; for a ``sometimes`` property that holds, its shortest witness.
    never_satisfied:
        A ``sometimes`` property that no state of a complete run satisfied.
    """

    name: str
    expectation: str
    holds: bool | None
    counterexample: Counterexample | None = None
    description: str = ""
    never_satisfied: bool = False

    @property
    def status(self) -> str:
        """``"holds"``, ``"violated"`` or ``"unknown"`` (incomplete run)."""
        return {True: "holds", False: "violated", None: "unknown"}[self.holds]


_EXPECTATION_NOUNS = {"always": "invariant", "sometimes": "sometimes", "leads_to": "leads-to"}


def finished_levels(sizes: Sequence[int], last_is_whole: bool) -> tuple[int, ...]:
    """``CheckResult.level_sizes`` from an engine's sizes of every level it wrote (the last one cut unless
    ``last_is_whole``; an empty level ends a complete search)."""
    finished = list(sizes if last_is_whole else sizes[:-1])
    while finished and not finished[-1]:
        finished.pop()
    return tuple(finished)


def check_bounds(**bounds: int | None) -> None:
    """The breadth-first engines' arguments: each of ``bounds`` (workers, max_states, ...) positive or None."""
    for name, value in bounds.items():
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be at least 1, got {value}" if name == "workers"
                             else f"{name} must be positive, got {value}")


def safety_verdicts(properties: Sequence[Property[Any]], first_hit: Callable[[str], Any],
                    path_to: Callable[[Any], tuple[Step, ...]], complete: bool) -> tuple[PropertyVerdict, ...]:
    """The verdicts of a breadth-first search on ``always`` and ``sometimes`` properties, in the order given:
    ``first_hit(name)`` is where the search first met a state violating (``always``) or meeting (``sometimes``)
    the property, None if nowhere, and ``path_to`` turns it into the path there. A miss means holds (``always``) or
    never met (``sometimes``) only if the search was ``complete``."""
    verdicts = []
    for prop in properties:
        hit = first_hit(prop.name)
        sometimes = prop.expectation is Expectation.SOMETIMES
        path = Counterexample(prop.name, path_to(hit), witness=sometimes) if hit is not None else None
        if sometimes:
            holds = True if hit is not None else (False if complete else None)
        else:
            holds = False if hit is not None else (True if complete else None)
        verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, holds, path, prop.description,
                                        never_satisfied=hit is None and complete and sometimes))
    return tuple(verdicts)


def kinds_coverage(model: Model[Any], kinds: dict[str, int]) -> tuple[dict[str, int], tuple[str, ...]]:
    """The steps of each action kind a search took, with the model's declared kinds it never took at 0, and those
    kinds (``CheckResult.coverage`` and ``never_taken``)."""
    declared = list((model.metadata or {}).get("action_kinds", ()))
    counted = dict(kinds)
    for kind in declared:
        counted.setdefault(kind, 0)
    return dict(sorted(counted.items())), tuple(k for k in declared if counted[k] == 0)


@dataclass(frozen=True, slots=True)
class SimulationStats:
    """What a simulation did: counts, and the counterexample's length before and after shrinking."""

    seed: int
    workers: int
    walks: int  # walks run up to and including the violating one (all of them without a violation)
    steps: int  # steps those walks took (states visited after the initial ones)
    distinct: int  # distinct states visited (by hash, across the workers)
    longest: int  # the longest walk
    seconds: float  # until every worker stopped
    seconds_to_violation: float | None  # until the first violating walk was found
    found_length: int | None  # the counterexample as the walk took it
    shrunk_length: int | None
    shrink_tries: int = 0
    shrink_seconds: float = 0.0
    transitions: dict[str, int] = field(default_factory=dict)  # the model's transition labels met, counted

    def render(self) -> str:
        line = (f"  simulation: seed {self.seed}, {self.workers} worker(s): {self.walks:,} walks, {self.steps:,} "
                f"steps, {self.distinct:,} distinct states, longest walk {self.longest}, {self.seconds:.1f} s")
        if self.transitions:
            line += "\n  transitions met: " + ", ".join(f"{t} {n:,}" for t, n in self.transitions.items())
        if self.seconds_to_violation is not None:
            line += (f"\n  violation found after {self.seconds_to_violation:.2f} s; counterexample of "
                     f"{self.found_length} steps shrunk to {self.shrunk_length} ({self.shrink_tries} tries, "
                     f"{self.shrink_seconds:.1f} s)")
        return line

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class CheckResult:
    """Everything a check found; see :func:`txnspec.checker.explicit.check`.

    Attributes
    ----------
    states, transitions, depth:
        Distinct states stored, successor steps generated, and the largest distance from an initial state.
    complete:
        False when a cap or an early stop ended the search (``stop_reason`` says which).
    coverage:
        Transitions per action kind; kinds listed in ``model.metadata["action_kinds"]`` appear with 0
        when never taken, and are also listed in ``never_taken``.
    graph:
        The recorded :class:`~txnspec.checker.liveness.StateGraph` (with ``build_graph=True`` or liveness).
    seconds, liveness_seconds:
        Time of the search, and of the ``leads_to`` analysis on the graph after it.
    """

    model_name: str
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    verdicts: tuple[PropertyVerdict, ...]
    deadlock: Counterexample | None = None
    deadlock_count: int = 0
    coverage: dict[str, int] = field(default_factory=dict)
    never_taken: tuple[str, ...] = ()
    graph: Any = None
    describe_state: Callable[[Any], str] | None = None
    stop_reason: str | None = None
    symmetry: bool = False
    liveness_seconds: float = 0.0
    store: str = "exact"  # how visited states were kept: "exact", "fingerprints" (and workers), "spark ..."
    collision_probability: float | None = None  # with fingerprints: the chance a collision hid a state
    memory_bytes: int | None = None  # peak memory the search added (engines that measure it)
    # states first found at each distance from an initial state, for the levels the search finished (a level a
    # state cap or an early stop cut is left out; the level a depth bound reached is finished)
    level_sizes: tuple[int, ...] = ()
    simulation: SimulationStats | None = None  # a simulation's (checker/simulate.py): walks, steps, shrinking
    coordinator_seconds: float | None = None  # the partitioned search: CPU time of the coordinating process

    @property
    def ok(self) -> bool:
        """No judged property is violated and no deadlock was found (True also for incomplete runs)."""
        return self.deadlock is None and all(v.holds is not False for v in self.verdicts)

    @property
    def verdict_text(self) -> str:
        """``"violated"`` on any violation or deadlock, else ``"incomplete"`` or ``"holds"``."""
        if not self.ok:
            return "violated"
        return "holds" if self.complete else "incomplete"

    @property
    def violated(self) -> tuple[PropertyVerdict, ...]:
        return tuple(v for v in self.verdicts if v.holds is False)

    @property
    def counterexamples(self) -> tuple[Counterexample, ...]:
        """The counterexamples of violated properties, then the deadlock's, in verdict order."""
        found = [v.counterexample for v in self.violated if v.counterexample is not None]
        if self.deadlock is not None:
            found.append(self.deadlock)
        return tuple(found)

    def verdict(self, name: str) -> PropertyVerdict:
        for v in self.verdicts:
            if v.name == name:
                return v
        raise KeyError(f"no verdict for {name!r}; judged: {', '.join(v.name for v in self.verdicts)}")

    @property
    def growth(self) -> float | None:
        """The last finished level's size over the one before: above 1, a search cut by a bound had not yet
        passed its widest level."""
        sizes = self.level_sizes
        return sizes[-1] / sizes[-2] if len(sizes) >= 2 and sizes[-2] else None

    @property
    def rate(self) -> float:
        """Distinct states per second."""
        return self.states / self.seconds if self.seconds > 0 else float("inf")

    def _where(self) -> str:
        return (f"{self.states:,} distinct states, {self.transitions:,} transitions (depth {self.depth}, "
                f"{self.seconds:.1f} s, {self.rate:,.0f} states/s)")

    def summary(self) -> str:
        """One line, e.g. ``all 7 invariants hold on 12,345 distinct states, ... (depth 17, 3.2 s, ...)``."""
        counts: dict[str, int] = {}
        for v in self.verdicts:
            counts[v.expectation] = counts.get(v.expectation, 0) + 1
        if not self.ok:
            broken = len(self.violated) + (self.deadlock is not None)
            what = f"{len(self.verdicts)} properties" + (" and deadlock freedom" if self.deadlock else "")
            tail = "" if self.complete else f"; stopped early: {self.stop_reason}"
            return f"VIOLATED: {broken} of {what} fail on {self._where()}{tail}"
        if not self.complete:
            growth = self.growth
            level = "" if growth is None else \
                f"; the last level was {growth:.2f}x the one before" + (" (still growing)" if growth > 1 else "")
            return f"INCOMPLETE: {self.stop_reason} after {self._where()}{level}; nothing is claimed to hold"
        if set(counts) <= {"always"}:
            return f"all {len(self.verdicts)} invariants hold on {self._where()}"
        kinds = ", ".join(f"{n} {_EXPECTATION_NOUNS.get(k, k)}" for k, n in counts.items())
        return f"all {len(self.verdicts)} properties ({kinds}) hold on {self._where()}"

    def render(self) -> str:
        """The summary, one line per verdict, then each counterexample step by step."""
        lines = [self.model_name + (" (symmetry reduced)" if self.symmetry else ""), self.summary()]
        if self.simulation is not None:
            lines.append(self.simulation.render())
        if self.collision_probability is not None:
            memory = f", {self.memory_bytes / max(self.states, 1):,.0f} bytes a state" \
                if self.memory_bytes is not None else ""
            lines.append(f"  store: {self.store} (64-bit; chance that a collision hid a state: "
                         f"{self.collision_probability:.1e}{memory})")
        if self.coordinator_seconds is not None and self.seconds > 0:
            lines.append(f"  coordinator: {self.coordinator_seconds:.2f} s of CPU, "
                         f"{self.coordinator_seconds / self.seconds:.1%} of the search's wall time (its serial part)")
        for v in self.verdicts:
            lines.append(f"  {v.status.upper() if v.holds is False else v.status:9} {v.expectation:9} {v.name}")
        for v in self.violated:
            lines.append("")
            if v.counterexample is None:
                lines.append(f"{v.name}: never satisfied in {self.states:,} states: the scenario explores too little "
                             "for this property to mean anything")
                continue
            kind = "liveness counterexample" if v.expectation == "leads_to" else \
                "shrunk counterexample" if self.simulation is not None else "shortest counterexample"
            lines.append(f"{v.name}: {kind} ({len(v.counterexample)} steps){': ' if v.description else ''}"
                         f"{v.description}")
            lines.append(v.counterexample.render(self.describe_state))
        if self.deadlock is not None:
            lines.append("")
            lines.append(f"deadlock: {self.deadlock_count:,} state(s) without successors that are not final; "
                         f"the {'shrunk' if self.simulation is not None else 'shortest'} ({len(self.deadlock)} steps):")
            lines.append(self.deadlock.render(self.describe_state))
        if self.never_taken:
            lines.append("")
            lines.append("action kinds never taken: " + ", ".join(self.never_taken))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Verdicts, counts, timings and coverage as JSON-ready data (counterexamples as action lists)."""
        def path(cex: Counterexample | None) -> dict[str, Any] | None:
            if cex is None:
                return None
            return {"length": len(cex), "actions": list(cex.actions), "loop_start": cex.loop_start,
                    "stutter": cex.stutter}

        return {
            "model": self.model_name, "verdict": self.verdict_text, "ok": self.ok, "complete": self.complete,
            "stop_reason": self.stop_reason, "symmetry": self.symmetry, "store": self.store,
            "collision_probability": self.collision_probability, "memory_bytes": self.memory_bytes,
            "states": self.states, "transitions": self.transitions, "depth": self.depth,
            "level_sizes": list(self.level_sizes),
            "seconds": round(self.seconds, 3), "liveness_seconds": round(self.liveness_seconds, 3),
            "states_per_second": round(self.rate) if self.seconds > 0 else None,
            "properties": [{
                "name": v.name, "expectation": v.expectation, "holds": v.holds, "status": v.status,
                "never_satisfied": v.never_satisfied,
                "counterexample": path(v.counterexample) if v.holds is False else None,
                "witness": path(v.counterexample) if v.holds is True else None,
            } for v in self.verdicts],
            "deadlocks": self.deadlock_count, "deadlock": path(self.deadlock),
            "coverage": self.coverage, "never_taken": list(self.never_taken),
            "simulation": self.simulation.to_json() if self.simulation is not None else None,
            "coordinator_seconds": None if self.coordinator_seconds is None else round(self.coordinator_seconds, 3),
        }
