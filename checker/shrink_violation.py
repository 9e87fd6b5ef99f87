"""Shrinking a property's violation: what ``bad`` is for each kind, and the lassos of ``leads_to`` properties.

What is modelled
    :func:`shrink_violation` gives :func:`~txnspec.checker.shrink.shrink` the predicate for a violation: a state
    that fails the invariant; for a ``leads_to`` property, a state without successors reached after its trigger
    held with no answer since (the path is shrunk on the model whose states carry that flag,
    :func:`still_unanswered`), or, for a lasso, a state with the trigger unanswered from which the loop's actions
    close a weakly fair loop again (the loop is then cut to the fewest of its actions that still close it); for a
    deadlock, a state without successors that the model does not call final. A ``leads_to`` path to a state
    without successors must wait for every actor to finish; a fair loop met earlier (a request answered "try
    again" forever) is often a much shorter violation, so the states of the path are searched for one of at most
    :data:`LOOP_STEPS` weakly fair steps, closing at once or after one step of any kind, and the lasso is kept
    where it is shorter.

Assumptions
    A loop is weakly fair when no state on it answers the property and every fairness class enabled all along it
    is taken on it (the exact engine's fair cycles, judged on the loop alone).

Left out
    Fair loops longer than :data:`LOOP_STEPS`, or entered by more than one step off the path, when a path ends in a
    state without successors; the strongly connected components the exact engine judges.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.shrink import ShrinkOutcome, Step, _Replayer, shrink


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
