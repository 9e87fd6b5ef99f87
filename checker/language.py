"""The observable-language difference of two labelled transition systems: what one allows that the other does not.

What is modelled
    Two models (:class:`~txnspec.checker.model.Model`) and one :class:`Projection` of their steps onto what an
    observer sees. A step is *observable* when the projection labels its action or when the observer's
    view of the state changes across it; every other step is *silent*. The observable language of a
    model is the set of label sequences of its behaviours with the silent steps left out (weak traces).
    :func:`language_difference` finds a shortest label sequence in each direction that one model allows
    and the other does not, or shows that the two languages are equal on the bounded spaces.

How
    An on-the-fly subset construction. A *macro-state* of a model is the set of its states reachable by
    one observable prefix, closed under silent steps (so the observer cannot tell them apart); the
    initial macro-state is the silent closure of the initial states. Pairs of macro-states, one per
    model, are explored breadth first: a label enabled in one macro-state of a pair and not in the other
    is a difference, and breadth first makes it a shortest one (in labels). Concrete states are
    explored only as far as the pairs reach them; each gets an integer id, its silent and labelled
    successors are computed once, and macro-states are frozensets of ids, interned per model, each
    with its moves (label -> successor macro-state) computed once. Labels carry the new view when the
    view changed, so every state of a macro-state shows the same view and the labels mean the same in
    both models. A concrete behaviour of the model that allows a difference is found afterwards by a
    breadth-first search over (state, labels consumed) pairs.

Assumptions
    The projection is the same for both models, labels and views are hashable, and states follow the
    model contract (frozen, hashable). The view of the initial states must be one value per model (a
    view that tells initial states apart is an observation in itself: use an action label instead).

Left out
    Refusals, divergence and deadlock (this is trace equivalence, not failures or bisimulation); the
    models' properties are not judged here (``check`` does that).
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from txnspec.checker.model import Model, Projection

__all__ = ["Projection", "language_difference"]

Label = tuple[Hashable | None, Hashable | None]
"""An observable step: ``(action label or None, the new view or None when the view did not change)``."""

LanguageProgress = Callable[[int, int, float], None]
"""Called about once a second with ``(concrete states of both models, macro-state pairs, states per second)``."""




@dataclass(frozen=True, slots=True)
class ObservableTrace:
    """A shortest observable difference: ``labels`` is allowed by model ``allowed_by`` (0 or 1) only.

    ``labels[:-1]`` is allowed by both; the other model cannot make the last one. ``steps`` is a
    shortest concrete behaviour of the allowing model with these observations (``(None, initial)`` then
    ``(action, state)``), ``other_steps`` one of the other model up to the common prefix."""

    allowed_by: int
    labels: tuple[Label, ...]
    steps: tuple[tuple[Any, Any], ...]
    other_steps: tuple[tuple[Any, Any], ...]
    start_view: Hashable | None


@dataclass(frozen=True, slots=True)
class LanguageDifference:
    """The outcome of :func:`language_difference`.

    ``only`` holds the shortest difference allowed only by model 0 and by model 1 (``None`` when there is
    none). ``complete`` is False when the state cap stopped the search: then a missing difference proves
    nothing."""

    names: tuple[str, str]
    only: tuple[ObservableTrace | None, ObservableTrace | None]
    states: tuple[int, int]
    macro_states: tuple[int, int]
    pairs: int
    complete: bool
    stop_reason: str | None
    seconds: float

    @property
    def equal(self) -> bool:
        return self.complete and self.only == (None, None)


class _Side:
    """One model's concrete states (ids), their observable moves, and its interned macro-states."""

    def __init__(self, model: Model[Any], projection: Projection, labels: dict[Label, int],
                 counter: list[int], cap: int) -> None:
        self.model = model
        self.projection = projection
        self.labels = labels  # shared by both sides, so label ids mean the same on both
        self.counter = counter  # [states of both sides]: the cap is on the total
        self.cap = cap
        self.ids: dict[Any, int] = {}
        self.states: list[Any] = []
        self.views: list[Hashable | None] = []
        self.silent: list[tuple[int, ...] | None] = []
        self.moves: list[tuple[tuple[int, int], ...] | None] = []  # (label id, target id)
        self.macro_ids: dict[frozenset[int], int] = {}
        self.macros: list[frozenset[int]] = []
        self.macro_moves: list[dict[int, int] | None] = []

    def state_id(self, state: Any) -> int:
        known = self.ids.get(state)
        if known is not None:
            return known
        if self.counter[0] >= self.cap:
            raise _CapReached(f"state cap of {self.cap} reached")
        self.counter[0] += 1
        new = len(self.states)
        self.ids[state] = new
        self.states.append(state)
        view = self.projection.state_view
        self.views.append(view(state) if view is not None else None)
        self.silent.append(None)
        self.moves.append(None)
        return new

    def expand(self, sid: int) -> None:
        if self.silent[sid] is not None:
            return
        silent: list[int] = []
        moves: list[tuple[int, int]] = []
        view = self.views[sid]
        for action, target in self.model.next_steps(self.states[sid]):
            tid = self.state_id(target)
            label = self.projection.action_label(action)
            new_view = self.views[tid]
            changed = new_view != view
            if label is None and not changed:
                silent.append(tid)
                continue
            key: Label = (label, new_view if changed else None)
            lid = self.labels.setdefault(key, len(self.labels))
            moves.append((lid, tid))
        self.silent[sid] = tuple(silent)
        self.moves[sid] = tuple(moves)

    def closure(self, seeds: Sequence[int]) -> int:
        """The interned macro-state of the silent closure of ``seeds``."""
        found = set(seeds)
        stack = list(found)
        while stack:
            sid = stack.pop()
            self.expand(sid)
            for nxt in self.silent[sid] or ():
                if nxt not in found:
                    found.add(nxt)
                    stack.append(nxt)
        key = frozenset(found)
        mid = self.macro_ids.get(key)
        if mid is None:
            mid = len(self.macros)
            self.macro_ids[key] = mid
            self.macros.append(key)
            self.macro_moves.append(None)
        return mid

    def macro_step(self, mid: int) -> dict[int, int]:
        """Label id -> successor macro-state, for every label some state of ``mid`` enables."""
        known = self.macro_moves[mid]
        if known is not None:
            return known
        targets: dict[int, list[int]] = {}
        for sid in self.macros[mid]:
            self.expand(sid)
            for lid, tid in self.moves[sid] or ():
                targets.setdefault(lid, []).append(tid)
        result = {lid: self.closure(tids) for lid, tids in targets.items()}
        self.macro_moves[mid] = result
        return result

    def path(self, labels: Sequence[int]) -> tuple[tuple[Any, Any], ...]:
        """A shortest concrete behaviour whose observations are ``labels`` (states already explored)."""
        start = [self.ids[s] for s in self.model.init_states()]
        parent: dict[tuple[int, int], tuple[int, int] | None] = {(sid, 0): None for sid in start}
        queue = deque(parent)
        goal: tuple[int, int] | None = None
        while queue:
            node = queue.popleft()
            sid, done = node
            if done == len(labels):
                goal = node
                break
            self.expand(sid)
            successors = [(t, done) for t in self.silent[sid] or ()]
            successors += [(t, done + 1) for lid, t in self.moves[sid] or () if lid == labels[done]]
            for nxt in successors:
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        if goal is None:  # cannot happen: the labels came from this side's macro-states
            raise AssertionError("no concrete behaviour has the observed labels")
        chain: list[int] = []
        cursor: tuple[int, int] | None = goal
        while cursor is not None:
            chain.append(cursor[0])
            cursor = parent[cursor]
        chain.reverse()
        steps: list[tuple[Any, Any]] = [(None, self.states[chain[0]])]
        for before, after in pairwise(chain):
            steps.append((self._action(before, after), self.states[after]))
        return tuple(steps)

    def _action(self, source: int, target: int) -> Any:
        """An action from ``source`` to ``target`` (recomputed: paths are short, and storing one per edge is not)."""
        wanted = self.states[target]
        return next(action for action, state in self.model.next_steps(self.states[source]) if state == wanted)


class _CapReached(Exception):
    pass


def language_difference(left: Model[Any], right: Model[Any], projection: Projection, *,
                        max_states: int | None = None, progress: LanguageProgress | None = None,
                        ) -> LanguageDifference:
    """Shortest observable behaviours ``left`` allows and ``right`` does not, and the other way round.

    Parameters
    ----------
    left, right:
        The two models (their properties are ignored).
    projection:
        What an observer sees of a step (:class:`Projection`).
    max_states:
        Stop once this many concrete states (of both models together) are stored; the result is then
        incomplete.
    progress:
        Called about once a second with ``(states, pairs, states per second)``.

    Examples
    --------
    >>> from txnspec.checker.model import Model, Projection

__all__ = ["Projection", "language_difference"]
    >>> def counter(limit: int) -> Model[int]:
    ...     return Model(f"up-to-{limit}", lambda: [0], lambda n: [("tick", n + 1)] if n < limit else [])
    >>> d = language_difference(counter(2), counter(3), Projection(lambda a: a))
    >>> d.only[0] is None, [label for label, _ in d.only[1].labels]
    (True, ['tick', 'tick', 'tick'])
    """
    if max_states is not None and max_states <= 0:
        raise ValueError(f"max_states must be positive, got {max_states}")
    started = time.perf_counter()
    labels: dict[Label, int] = {}
    counter = [0]
    cap = max_states if max_states is not None else 1 << 62
    sides = (_Side(left, projection, labels, counter, cap), _Side(right, projection, labels, counter, cap))
    found: list[tuple[int, ...] | None] = [None, None]
    parents: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {}
    stop_reason: str | None = None
    paused = gc.isenabled()
    gc.disable()
    try:
        roots = (sides[0].closure([sides[0].state_id(s) for s in left.init_states()]),
                 sides[1].closure([sides[1].state_id(s) for s in right.init_states()]))
        start_views = {sides[k].views[sid] for k in (0, 1) for sid in sides[k].macros[roots[k]]}
        if len(start_views) > 1:
            raise ValueError("the initial states show different views; the projection must not tell them apart")
        parents[roots] = None
        queue = deque([roots])
        last_report = time.perf_counter()
        while queue and (found[0] is None or found[1] is None):
            pair = queue.popleft()
            moves = (sides[0].macro_step(pair[0]), sides[1].macro_step(pair[1]))
            for k in (0, 1):
                if found[k] is None:
                    extra = sorted(lid for lid in moves[k] if lid not in moves[1 - k])
                    if extra:
                        found[k] = (*_labels_to(parents, pair), extra[0])
            for lid in sorted(moves[0].keys() & moves[1].keys()):
                nxt = (moves[0][lid], moves[1][lid])
                if nxt not in parents:
                    parents[nxt] = (pair, lid)
                    queue.append(nxt)
            if progress is not None and time.perf_counter() - last_report >= 1.0:
                last_report = time.perf_counter()
                progress(counter[0], len(parents), counter[0] / (last_report - started))
        if progress is not None:  # the last word, as the explicit checker gives: the final counts
            progress(counter[0], len(parents), counter[0] / max(time.perf_counter() - started, 1e-9))
    except _CapReached as stop:
        stop_reason = str(stop)
    finally:
        if paused:
            gc.enable()
    by_id = {lid: label for label, lid in labels.items()}
    only: list[ObservableTrace | None] = [None, None]
    for k in (0, 1):
        trace = found[k]
        if trace is None:
            continue
        own, other = sides[k], sides[1 - k]
        start = own.views[own.ids[next(iter(own.model.init_states()))]]
        only[k] = ObservableTrace(k, tuple(by_id[lid] for lid in trace), own.path(trace), other.path(trace[:-1]),
                                  start)
    return LanguageDifference(
        names=(left.name, right.name), only=(only[0], only[1]), states=(len(sides[0].states), len(sides[1].states)),
        macro_states=(len(sides[0].macros), len(sides[1].macros)), pairs=len(parents),
        complete=stop_reason is None, stop_reason=stop_reason, seconds=time.perf_counter() - started)


def _labels_to(parents: dict[tuple[int, int], tuple[tuple[int, int], int] | None], pair: tuple[int, int],
               ) -> tuple[int, ...]:
    chain: list[int] = []
    link = parents[pair]
    while link is not None:
        previous, lid = link
        chain.append(lid)
        link = parents[previous]
    return tuple(reversed(chain))
