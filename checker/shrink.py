"""Shrinking a counterexample: a shorter behaviour of the same model that still reaches a bad state.

What is modelled
    A random walk that reaches a violation is a genuine behaviour, but a long one: it wanders through steps
    that have nothing to do with the bug. :func:`shrink` takes such a path (``[(None, s0), (a1, s1), ...]``)
    and a predicate ``bad`` that its last state satisfies, and returns a path, never longer, whose last state
    satisfies ``bad`` and whose every step is a step of the model (re-validated on ``model.next_steps`` at
    every try, as Hypothesis re-runs a shrunk test case and Elle re-checks a reduced history). Three moves,
    repeated until none shortens the path:

    * **shortcuts**: from each state, one of its successors that is a later state of the path (or satisfies
      ``bad``) replaces the steps in between (a loop, where the successor is the state itself, is cut);
    * **deletions**: a run of consecutive steps is left out and the rest re-played from the state before it,
      action by action; an action the shorter past no longer enables is skipped (so removing a client's first
      call removes the calls that depended on it), and the path ends at the first state that is bad. Runs are
      tried from half the path's length down to single steps (delta debugging's coarse-to-fine order), then
      every step of one action kind, or of one lifeline (an action's ``source``), at once;
    * **substitutions**, once nothing can be deleted: a step replaced by another enabled step of its kind (a
      fault on another message), the rest re-played, kept if the path gets shorter; then, one move ahead, a step
      replaced by any other enabled step and kept if one deletion then shortens the path (a commit turned into an
      abort no longer needs the offsets it would have committed).

    :mod:`txnspec.checker.shrink_violation` says what ``bad`` is for each kind of violation.

Assumptions
    Actions are hashable values, and an action identifies its step among those enabled in a state (the model
    contract); where equality fails after a change of the past (an action whose fields carry a counter), the
    enabled action with the same text is taken instead, else the first with the same kind and lifelines. A
    path that no longer reaches a bad state by its own steps may go on by the model's first enabled steps
    (weakly fair ones first), as long as it stays shorter. The search is deterministic: same path, same result.

Left out
    Reordering steps (beyond what substitutions and the re-play's skipping do), and any guarantee of a shortest
    path (that is the breadth-first search's job): the result is locally minimal for the three moves, or
    whatever was reached when ``deadline`` passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from txnspec.checker.model import Model
from txnspec.checker.report import action_kind

Step = tuple[Any, Any]


@dataclass(frozen=True, slots=True)
class ShrinkOutcome:
    """The shrunk path and what it took: ``tries`` candidate paths re-played on the model."""

    steps: tuple[Step, ...]
    before: int  # actions in the path given
    after: int  # actions in the shrunk path
    tries: int
    seconds: float
    finished: bool  # False when the deadline cut the shrinking short
    loop_start: int | None = None  # a lasso: the index of the state the last one returns to


def _shape(action: Any) -> tuple[str, Any, Any]:
    """What an action is up to its data: its kind and, where it has them, the lifelines it goes between."""
    return action_kind(action), getattr(action, "source", None), getattr(action, "target", None)


class _Replayer:
    """Successor maps of states, remembered (a candidate path re-plays mostly states met before)."""

    def __init__(self, model: Model[Any], limit: int = 200_000) -> None:
        self.next_steps = model.next_steps
        self.fairness = model.fairness
        self.memory: dict[Any, dict[Any, Any]] = {}
        self.limit = limit

    def successors(self, state: Any) -> dict[Any, Any]:
        found = self.memory.get(state)
        if found is None:
            found = {}
            for action, successor in self.next_steps(state):
                found.setdefault(action, successor)
            if len(self.memory) >= self.limit:
                self.memory.clear()
            self.memory[state] = found
        return found

    def step(self, state: Any, action: Any) -> tuple[Any, Any] | None:
        """The step ``action`` takes from ``state``; where a changed past changed its data, the first enabled
        action with its text, else with its shape (kind and lifelines); None if there is none."""
        successors = self.successors(state)
        successor = successors.get(action)
        if successor is not None:
            return action, successor
        text = str(action)
        for other, successor in successors.items():
            if str(other) == text:
                return other, successor
        shape = _shape(action)
        for other, successor in successors.items():
            if _shape(other) == shape:
                return other, successor
        return None

    def replay(self, state: Any, actions: Sequence[Any], bad: Callable[[Any], bool],
               within: int) -> list[Step] | None:
        """The steps ``actions`` take from ``state``, skipping those not enabled, up to the first bad state; if
        none is, the path goes on by the model's first enabled step (a weakly fair one where there is one) while
        it stays shorter than ``within`` steps. None if no state on the way is bad."""
        taken: list[Step] = []
        for action in actions:
            step = self.step(state, action)
            if step is None:
                continue
            taken.append(step)
            state = step[1]
            if bad(state):
                return taken
        fairness = self.fairness
        while len(taken) < within - 1:
            successors = self.successors(state)
            if not successors:
                return None
            step = next(((a, t) for a, t in successors.items() if fairness is not None and fairness(a) is not None),
                        None) or next(iter(successors.items()))
            taken.append(step)
            state = step[1]
            if bad(state):
                return taken
        return None


def shrink(model: Model[Any], steps: Sequence[Step], bad: Callable[[Any], bool], *,
           deadline: float | None = None) -> ShrinkOutcome:
    """A path no longer than ``steps`` from the same initial state to a state where ``bad`` holds.

    ``steps[0]`` is ``(None, initial state)``; ``bad`` must hold on the last state (a ``ValueError`` otherwise).
    ``deadline`` is a ``time.perf_counter()`` value after which the best path so far is returned.

    >>> from txnspec.checker.model import Expectation, Model, Property
    >>> line = Model("line", lambda: [0], lambda n: [("inc", n + 1), ("dec", n - 1)] if abs(n) < 9 else [])
    >>> path = [(None, 0), ("inc", 1), ("dec", 0), ("inc", 1), ("inc", 2), ("dec", 1), ("inc", 2), ("inc", 3)]
    >>> outcome = shrink(line, path, lambda n: n == 3)
    >>> [str(a) for a, _ in outcome.steps[1:]], outcome.before, outcome.after
    (['inc', 'inc', 'inc'], 7, 3)
    """
    started = time.perf_counter()
    path = list(steps)
    if not path or not bad(path[-1][1]):
        raise ValueError("shrink needs a path whose last state is bad")
    before = len(path) - 1
    replayer = _Replayer(model)
    tries = 0
    finished = True

    def out_of_time() -> bool:
        return deadline is not None and time.perf_counter() >= deadline

    path = _first_bad(path, bad)
    changed = True
    while changed:
        changed = False
        shorter = _shortcuts(path, bad, replayer)
        tries += 1
        if len(shorter) < len(path):
            path, changed = shorter, True
        size = max((len(path) - 1) // 2, 1)
        while size >= 1:
            position = 0
            while position + size <= len(path) - 1:
                if out_of_time():
                    return ShrinkOutcome(tuple(path), before, len(path) - 1, tries,
                                         time.perf_counter() - started, False)
                tries += 1
                rest = [action for action, _ in path[position + 1 + size:]]
                taken = replayer.replay(path[position][1], rest, bad, len(path) - 1 - position - size + 1)
                if taken is not None:
                    path = [*path[:position + 1], *taken]
                    changed = True
                else:
                    position += 1
            size //= 2
        for group in _groups(path):
            if out_of_time():
                return ShrinkOutcome(tuple(path), before, len(path) - 1, tries, time.perf_counter() - started, False)
            tries += 1
            first = min(group)
            rest = [action for index, (action, _) in enumerate(path) if index > first and index not in group]
            taken = replayer.replay(path[first - 1][1], rest, bad, len(path) - first)
            if taken is not None and first + len(taken) < len(path):
                path = [*path[:first], *taken]
                changed = True
        if changed:
            continue
        # nothing left to delete: another step of the same kind in a step's place (a fault on another message)
        position = 1
        while position < len(path) and not changed:
            if out_of_time():
                return ShrinkOutcome(tuple(path), before, len(path) - 1, tries, time.perf_counter() - started, False)
            action = path[position][0]
            kind = action_kind(action)
            rest = [a for a, _ in path[position + 1:]]
            for other, successor in replayer.successors(path[position - 1][1]).items():
                if other == action or action_kind(other) != kind:
                    continue
                tries += 1
                taken = [] if bad(successor) else replayer.replay(successor, rest, bad, len(path) - position - 1)
                if taken is not None and position + 1 + len(taken) < len(path):
                    path = [*path[:position], (other, successor), *taken]
                    changed = True
                    break
            position += 1
        if changed:
            continue
        # one move ahead: any other enabled step in a step's place, kept if a deletion then shortens the path (a
        # commit turned into an abort no longer needs the offsets sent before it)
        for position in range(1, len(path)):
            action = path[position][0]
            rest = [a for a, _ in path[position + 1:]]
            for other, successor in replayer.successors(path[position - 1][1]).items():
                if out_of_time():
                    return ShrinkOutcome(tuple(path), before, len(path) - 1, tries, time.perf_counter() - started,
                                         False)
                if other == action:
                    continue
                tries += 1
                taken = [] if bad(successor) else replayer.replay(successor, rest, bad, len(path) - position)
                if taken is None:
                    continue
                swapped = [*path[:position], (other, successor), *taken]
                shorter = _one_deletion(swapped, len(path), bad, replayer)
                tries += len(swapped) - 1
                if shorter is not None:
                    path, changed = shorter, True
                    break
            if changed:
                break
    return ShrinkOutcome(tuple(path), before, len(path) - 1, tries, time.perf_counter() - started, finished)


def _one_deletion(path: list[Step], bound: int, bad: Callable[[Any], bool], replayer: _Replayer) -> list[Step] | None:
    """``path`` with one step left out (the rest re-played), if that makes it shorter than ``bound`` states."""
    for position in range(1, len(path)):
        rest = [action for action, _ in path[position + 1:]]
        taken = replayer.replay(path[position - 1][1], rest, bad, bound - position)
        if taken is not None and position + len(taken) < bound:
            return [*path[:position], *taken]
    return None


def _groups(path: list[Step]) -> list[set[int]]:
    """The positions of the steps of each action kind, and of each lifeline's steps (an action's ``source``):
    a fault, or an actor, that the bug does not need goes in one try."""
    groups: dict[Any, set[int]] = {}
    for index, (action, _) in enumerate(path[1:], start=1):
        groups.setdefault(("kind", action_kind(action)), set()).add(index)
        source = getattr(action, "source", None)
        if source is not None:
            groups.setdefault(("source", source), set()).add(index)
    return [positions for _, positions in sorted(groups.items(), key=lambda item: (min(item[1]), str(item[0])))]


def _first_bad(path: list[Step], bad: Callable[[Any], bool]) -> list[Step]:
    """The path up to its first bad state."""
    for index, (_, state) in enumerate(path):
        if bad(state):
            return path[:index + 1]
    return path


def _shortcuts(path: list[Step], bad: Callable[[Any], bool], replayer: _Replayer) -> list[Step]:
    """The path with every shortcut taken, from the first state on: a successor of a state that is a later state
    of the path jumps there (a loop back to the state itself is cut), a bad successor ends the path."""
    result = list(path)
    index = 0
    while index < len(result) - 1:
        last = {state: position for position, (_, state) in enumerate(result)}
        state = result[index][1]
        repeat = last[state]
        if repeat > index:  # the path returns to this state: the loop is cut
            result = [*result[:index + 1], *result[repeat + 1:]]
            continue
        best: tuple[int, Step] | None = None
        for action, successor in replayer.successors(state).items():
            if bad(successor):
                best = (len(result), (action, successor))
                break
            target = last.get(successor, -1)
            if target > index + 1 and (best is None or target > best[0]):
                best = (target, (action, successor))
        if best is not None:
            target, step = best
            result = [*result[:index + 1], step, *result[target + 1:]]
        index += 1
    return result
