"""Results of a check as plain data: verdicts, counterexamples, counts, coverage; text and JSON renderings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Counterexample:
    """A path from an initial state: ``steps[0]`` is ``(None, initial state)``, then ``(action, state)``.

    ``loop_start``: for a liveness violation, the index of the step the last state loops back to.
    ``witness``: True when this is a ``sometimes`` property's example rather than a violation.
    """

    property: str
    steps: tuple[tuple[Any, Any], ...]
    loop_start: int | None = None
    witness: bool = False

    @property
    def actions(self) -> tuple[str, ...]:
        return tuple(str(a) for a, _ in self.steps[1:])

    def __len__(self) -> int:
        return len(self.steps) - 1

    def render(self, describe_state: Callable[[Any], str] | None = None) -> str:
        lines = []
        for i, (action, _state) in enumerate(self.steps):
            if i == 0:
                lines.append("  0. initial state")
            else:
                lines.append(f"  {i}. {action}")
            if self.loop_start is not None and i == self.loop_start:
                lines[-1] += "   <- the behaviour loops back here"
        if self.loop_start is not None:
            lines.append(f"  ... and back to step {self.loop_start}, forever (a weakly fair behaviour)")
        last = self.steps[-1][1]
        text = describe_state(last) if describe_state else repr(last)
        lines.append("  final state:")
        lines.extend("    " + line for line in text.splitlines())
        return "\n".join(lines)


@dataclass(frozen=True)
class PropertyVerdict:
    """``holds``: True, False, or None when the run was incomplete (nothing is claimed)."""

    name: str
    expectation: str
    holds: bool | None
    counterexample: Counterexample | None = None
    description: str = ""


@dataclass(frozen=True)
class CheckResult:
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

    @property
    def ok(self) -> bool:
        return self.deadlock is None and all(v.holds is not False for v in self.verdicts)

    @property
    def violated(self) -> tuple[PropertyVerdict, ...]:
        return tuple(v for v in self.verdicts if v.holds is False)

    @property
    def counterexamples(self) -> tuple[Counterexample, ...]:
        found = [v.counterexample for v in self.violated if v.counterexample is not None]
        if self.deadlock is not None:
            found.append(self.deadlock)
        return tuple(found)

    def verdict(self, name: str) -> PropertyVerdict:
        for v in self.verdicts:
            if v.name == name:
                return v
        raise KeyError(f"no verdict for {name!r}")

    @property
    def rate(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for v in self.verdicts:
            counts[v.expectation] = counts.get(v.expectation, 0) + 1
        kinds = ", ".join(f"{n} {k}" for k, n in counts.items())
        where = f"{self.states:,} distinct states, {self.transitions:,} transitions (depth {self.depth}, " \
                f"{self.seconds:.1f} s, {self.rate:,.0f} states/s)"
        if not self.complete:
            return f"INCOMPLETE: stopped by a cap after {where}; nothing is claimed to hold"
        if self.ok:
            return f"all {len(self.verdicts)} properties ({kinds}) hold on {where}"
        return f"{len(self.violated) + (self.deadlock is not None)} of {len(self.verdicts)} properties violated " \
               f"on {where}"

    def render(self) -> str:
        lines = [f"{self.model_name}", self.summary()]
        for v in self.verdicts:
            mark = {True: "holds", False: "VIOLATED", None: "unknown"}[v.holds]
            lines.append(f"  {mark:9} {v.expectation:9} {v.name}")
        for v in self.violated:
            lines.append("")
            if v.counterexample is None:
                lines.append(f"{v.name}: never satisfied in {self.states:,} states: the scenario explores too little "
                             "for this property to mean anything")
                continue
            kind = "liveness counterexample" if v.counterexample.loop_start is not None or v.expectation == "leads_to" \
                else "shortest counterexample"
            lines.append(f"{v.name}: {kind} ({len(v.counterexample)} steps): {v.description}")
            lines.append(v.counterexample.render(self.describe_state))
        if self.deadlock is not None:
            lines.append("")
            lines.append(f"deadlock: {self.deadlock_count} state(s) without successors that are not final; shortest:")
            lines.append(self.deadlock.render(self.describe_state))
        if self.never_taken:
            lines.append("")
            lines.append("actions never taken: " + ", ".join(self.never_taken))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model_name, "ok": self.ok, "complete": self.complete, "states": self.states,
            "transitions": self.transitions, "depth": self.depth, "seconds": round(self.seconds, 3),
            "states_per_second": round(self.rate) if self.seconds > 0 else None,
            "properties": [{
                "name": v.name, "expectation": v.expectation, "holds": v.holds,
                "counterexample": None if v.counterexample is None or v.holds else {
                    "length": len(v.counterexample), "actions": list(v.counterexample.actions),
                    "loop_start": v.counterexample.loop_start},
            } for v in self.verdicts],
            "deadlocks": self.deadlock_count,
            "coverage": self.coverage, "never_taken": list(self.never_taken),
        }
