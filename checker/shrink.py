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

    :func:`shrink_violation` says what ``bad`` is for a property's violation: a state that fails the invariant;
    for a ``leads_to`` property, a state without successors reached after its trigger held with no answer since
    (the path is shrunk on the model whose states carry that flag, :func:`still_unanswered`), or, for a lasso,
    a state with the trigger unanswered from which the loop's actions close a weakly fair loop again (the loop is
    then cut to the fewest of its actions that still close it); for a deadlock, a state without successors that
    the model does not call final. A ``leads_to`` path to a state without successors must wait for every actor
    to finish; a fair loop met earlier (a request answered "try again" forever) is often a much shorter violation,
    so the states of the path are searched for one of at most :data:`LOOP_STEPS` weakly fair steps, closing at
    once or after one step of any kind, and the lasso is kept where it is shorter.

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
from dataclasses import dataclass, replace
from typing import Any

from txnspec.checker.model import Expectation, Model, Property
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


def shrink_violation(model: Model[Any], path: Sequence[Step], violated: Property[Any] | None, *,
                     deadline: float | None = None, loop_start: int | None = None) -> ShrinkOutcome:
    """``path`` shrunk to a shorter one to the same violation: a state failing the invariant; a state without
    successors after the ``leads_to`` property's trigger held unanswered (shrunk on the model whose states
    carry that flag); a deadlock. With ``loop_start`` the path is a lasso (its last state is
    ``path[loop_start]``'s, the loop a weakly fair one where the property stays unanswered): the part before the
    loop is shrunk to a shorter path reaching any state of the loop with the trigger unanswered, and the loop,
    turned to start there, follows it."""
    is_final = model.is_final

    def terminal(state: Any) -> bool:
        return not any(True for _ in model.next_steps(state))

    if violated is None:
        return shrink(model, path, lambda s: (is_final is None or not is_final(s)) and terminal(s), deadline=deadline)
    if violated.expectation is Expectation.ALWAYS:
        condition = violated.condition
        return shrink(model, path, lambda s: not condition(s), deadline=deadline)
    prop, next_steps = violated, model.next_steps

    def flagged(state: Any, before: bool) -> tuple[Any, bool]:
        return state, still_unanswered(prop, before, state)

    def monitored_steps(pair: tuple[Any, bool]) -> list[tuple[Any, tuple[Any, bool]]]:
        return [(action, flagged(successor, pair[1])) for action, successor in next_steps(pair[0])]

    monitored = replace(model, init_states=lambda: [flagged(s, False) for s in model.init_states()],
                        next_steps=monitored_steps, properties=(), symmetry=None, ample=None)
    pairs = [(None, flagged(path[0][1], False))]
    for action, state in path[1:]:
        pairs.append((action, flagged(state, pairs[-1][1][1])))
    if loop_start is None:
        outcome = shrink(monitored, pairs, lambda pair: pair[1] and terminal(pair[0]), deadline=deadline)
        outcome = replace(outcome, steps=tuple((action, pair[0]) for action, pair in outcome.steps))
        lasso = _shorter_lasso(model, monitored, prop, (pairs, _flags(prop, outcome.steps)), outcome.after,
                               deadline)
        if lasso is None:
            return outcome
        return replace(lasso, before=outcome.before, tries=outcome.tries + lasso.tries,
                       seconds=outcome.seconds + lasso.seconds, finished=outcome.finished and lasso.finished)
    entry = next(i for i in range(loop_start, len(pairs)) if pairs[i][1][1])  # the trigger unanswered from here
    around = _Loop(model, prop, [action for action, _ in path[entry + 1:]] + [action for action, _ in
                                                                              path[loop_start + 1:entry + 1]])
    prefix = shrink(monitored, pairs[:entry + 1], lambda pair: pair[1] and around.closes(pair[0]) is not None,
                    deadline=deadline)
    steps = [(action, pair[0]) for action, pair in prefix.steps]
    steps += around.shortest(steps[-1][1])
    return replace(prefix, steps=tuple(steps), before=len(path) - 1, after=len(steps) - 1,
                   loop_start=len(prefix.steps) - 1)


LOOP_STEPS = 3  # the longest fair loop looked for at a state of a path ending in a terminal state


def _flags(prop: Property[Any], steps: Sequence[Step]) -> list[tuple[Any, tuple[Any, bool]]]:
    """``steps`` with each state flagged by :func:`still_unanswered`."""
    pairs = [(None, (steps[0][1], still_unanswered(prop, False, steps[0][1])))]
    for action, state in steps[1:]:
        pairs.append((action, (state, still_unanswered(prop, pairs[-1][1][1], state))))
    return pairs


def _shorter_lasso(model: Model[Any], monitored: Model[Any], prop: Property[Any],
                   paths: Sequence[Sequence[tuple[Any, tuple[Any, bool]]]], bound: int,
                   deadline: float | None) -> ShrinkOutcome | None:
    """A lasso shorter than ``bound`` steps violating the ``leads_to`` property ``prop``, from one of ``paths``
    (flagged, ending in a terminal state with the trigger unanswered): the earliest state with the trigger
    unanswered from which weakly fair steps close a fair loop of at most :data:`LOOP_STEPS` (a request answered
    "try again" forever), at once or after one step of any kind (a client's call that sends the request), its
    prefix then shrunk as a lasso's is. A path to a terminal state must wait for every actor to finish; a retry
    loop is often met much earlier. None if there is none shorter."""
    if model.fairness is None:
        return None
    started = time.perf_counter()
    replayer = _Replayer(model)
    best: ShrinkOutcome | None = None
    tries = 0
    for stem in (0, 1):
        for path in paths:
            for index in range(len(path)):
                limit = bound if best is None else best.after
                if index + stem + 1 >= limit:
                    break
                if deadline is not None and time.perf_counter() >= deadline:
                    return best
                state, unanswered = path[index][1]
                if not unanswered:
                    continue
                entries = [(list(path[:index + 1]), state)] if stem == 0 else [
                    ([*path[:index + 1], (action, (successor, still_unanswered(prop, True, successor)))], successor)
                    for action, successor in replayer.successors(state).items()]
                for entry, start in entries:
                    if not entry[-1][1][1]:
                        continue
                    tries += 1
                    actions = _fair_loop(model, replayer, prop, start, min(LOOP_STEPS, limit - len(entry)))
                    if actions is None:
                        continue
                    around = _Loop(model, prop, actions)
                    prefix = shrink(monitored, entry, around.closes_unanswered, deadline=deadline)
                    steps = [(action, pair[0]) for action, pair in prefix.steps]
                    steps += around.shortest(steps[-1][1])
                    if len(steps) - 1 < limit:
                        best = ShrinkOutcome(tuple(steps), len(path) - 1, len(steps) - 1, tries + prefix.tries,
                                             time.perf_counter() - started, prefix.finished,
                                             loop_start=len(prefix.steps) - 1)
                    break
                if best is not None and best.after <= index + 1 + stem + LOOP_STEPS:
                    break  # no later state of this path gives a shorter one
    return best


def _fair_loop(model: Model[Any], replayer: _Replayer, prop: Property[Any], state: Any,
               longest: int) -> list[Any] | None:
    """The actions of a shortest loop of weakly fair steps from ``state`` back to it, at most ``longest`` of them,
    that answers ``prop`` nowhere and takes every fairness class enabled all along it (:class:`_Loop`)."""
    fairness = model.fairness
    assert fairness is not None

    def search(current: Any, actions: list[Any], left: int) -> list[Any] | None:
        for action, successor in replayer.successors(current).items():
            if fairness(action) is None:
                continue
            if left == 1:
                if successor == state and _Loop(model, prop, [*actions, action]).closes(state) is not None:
                    return [*actions, action]
            elif successor != state and not prop.condition(successor):
                found = search(successor, [*actions, action], left - 1)
                if found is not None:
                    return found
        return None

    for length in range(1, longest + 1):
        found = search(state, [], length)
        if found is not None:
            return found
    return None


class _Loop:
    """The actions of a lasso's loop: from which states they close a loop that a weakly fair behaviour may repeat
    forever with ``prop`` unanswered (each action enabled in turn, the last step back at the first state, no
    state answering ``prop``, every fairness class enabled throughout taken)."""

    def __init__(self, model: Model[Any], prop: Property[Any], actions: list[Any]) -> None:
        self.model, self.prop, self.actions = model, prop, actions
        self.known: dict[Any, list[Step] | None] = {}

    def closes(self, state: Any, actions: Sequence[Any] | None = None) -> list[Step] | None:
        if actions is None and state in self.known:
            return self.known[state]
        steps: list[Step] | None = []
        current = state
        fairness = self.model.fairness
        always: set[Any] | None = None
        for action in self.actions if actions is None else actions:
            if self.prop.condition(current):
                steps = None
                break
            successors = list(self.model.next_steps(current))
            enabled = {fairness(a) for a, _ in successors} - {None} if fairness is not None else set()
            always = enabled if always is None else always & enabled
            step = next(((a, t) for a, t in successors if a == action), None) \
                or next(((a, t) for a, t in successors if str(a) == str(action)), None)
            if step is None:
                steps = None
                break
            steps.append(step)
            current = step[1]
        if steps is not None and (not steps or current != state or (
                fairness is not None and not (always or set()) <= {fairness(a) for a, _ in steps} - {None})):
            steps = None
        if actions is None:
            self.known[state] = steps
        return steps

    def closes_unanswered(self, pair: tuple[Any, bool]) -> bool:
        """A state flagged by :func:`still_unanswered` is unanswered and closes the loop."""
        return pair[1] and self.closes(pair[0]) is not None

    def shortest(self, state: Any) -> list[Step]:
        """The loop from ``state`` with as many of its actions left out as still close it (runs, coarse to fine)."""
        actions = list(self.actions)
        size = max(len(actions) // 2, 1)
        while size >= 1:
            position = 0
            while position + size <= len(actions):
                fewer = actions[:position] + actions[position + size:]
                if fewer and self.closes(state, fewer) is not None:
                    actions = fewer
                else:
                    position += 1
            size //= 2
        steps = self.closes(state, actions)
        assert steps is not None  # the state closes the whole loop, and each removal kept it closed
        return steps


def still_unanswered(prop: Property[Any], before: bool, state: Any) -> bool:
    """Whether ``prop``'s trigger has held with no answer since, after ``state`` (``before``: up to the state
    before it)."""
    if prop.condition(state):
        return False
    return before or (prop.trigger is not None and prop.trigger(state))
