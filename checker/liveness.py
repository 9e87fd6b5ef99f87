"""The explored state graph, and ``leads_to`` properties judged on it under weak fairness.

What is modelled
    ``P ~> Q`` ("whenever P holds, Q eventually holds") over every behaviour that is *weakly fair*
    for each fairness class of the model (``model.fairness(action)``; ``None`` marks actions that
    need not happen, such as faults and client choices). A behaviour keeps taking steps while any
    action is enabled (a progressing system, as in stateright), so it *stutters*, staying in one state
    forever, only in a state without successors. With ``stutter_where_unfair=True`` the TLA+ reading
    applies instead: a behaviour may also stop in a state where no fair class is enabled (an
    application that never commits is then a counterexample).

    ``P ~> Q`` fails iff some reachable state satisfies ``P and not Q`` and, from it, a fair behaviour
    stays in ``not Q`` forever. Within the ``not Q`` subgraph that means reaching either

    * a *stuttering* state: one without successors (a deadlocked trigger-without-goal state), or,
      with ``stutter_where_unfair``, any state without an enabled fair class, or
    * a strongly connected component ``C`` (with at least one edge) that holds a fair cycle. This is
      exact for weak fairness: ``C`` holds a fair cycle iff every class enabled in *all* states of ``C``
      has an edge inside ``C``. (A cycle through every edge of ``C`` is then fair; conversely, any cycle
      inside ``C`` keeps such a class enabled throughout, so it must take one of its edges inside ``C``.)

    The counterexample is a lasso: the shortest path to a ``P and not Q`` state, a shortest path inside
    ``not Q`` from the nearest such state to the stuttering state or fair component, and, for a
    component, a cycle back to its entry that takes an edge of every class the component keeps enabled.

Assumptions
    The graph is complete (the caller judges liveness only after a complete search). With symmetry
    reduction the graph is the quotient graph: a lasso's states are the stored members of their
    classes, so the cycle closes up to a permutation of the interchangeable ids; fairness classes must
    then not name those ids.

Left out
    Strong fairness, fairness per property, and general LTL.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from txnspec.checker.model import Property

if TYPE_CHECKING:
    import networkx as nx


class StateGraph:
    """The explored state graph as integer arrays, with a networkx view built on demand.

    Node ``i`` is ``states[i]``; nodes below ``initial_count`` are the initial states. Edge ``e`` goes
    from ``source[e]`` to ``target[e]`` under ``actions[e]``; edges are stored grouped by source in
    increasing order (the order of a breadth-first search), which is what :meth:`offsets` relies on.
    """

    def __init__(self, states: Sequence[Any], initial_count: int, source: array[int], target: array[int],
                 actions: Sequence[Any], terminal: Sequence[int],
                 fairness: Callable[[Any], Hashable | None] | None) -> None:
        self.states = states
        self.initial_count = initial_count
        self.source, self.target, self.actions = source, target, actions
        self.terminal = frozenset(terminal)
        self.fairness = fairness
        self._offsets: array[int] | None = None
        self._classes: list[Hashable | None] | None = None
        self._graph: nx.DiGraph | None = None

    def __len__(self) -> int:
        return len(self.states)

    @property
    def edge_count(self) -> int:
        return len(self.source)

    def offsets(self) -> array[int]:
        """``offsets[i]:offsets[i + 1]`` are the indices of the edges leaving state ``i``."""
        if self._offsets is None:
            counts = array("i", bytes(4 * (len(self.states) + 1)))
            for s in self.source:
                counts[s + 1] += 1
            for i in range(1, len(counts)):
                counts[i] += counts[i - 1]
            self._offsets = counts
        return self._offsets

    def classes(self) -> list[Hashable | None]:
        """The fairness class of each edge (``None``: the action need not happen)."""
        if self._classes is None:
            fairness = self.fairness
            if fairness is None:
                self._classes = [None] * len(self.actions)
            else:
                cache: dict[Any, Hashable | None] = {}
                classes: list[Hashable | None] = []
                for action in self.actions:
                    if action not in cache:
                        cache[action] = fairness(action)
                    classes.append(cache[action])
                self._classes = classes
        return self._classes

    def to_networkx(self) -> nx.DiGraph:
        """Integer nodes (attribute ``initial``), edges with attribute ``actions``: the tuple of the model's
        action values that lead from one state to the other (a DiGraph keeps one edge per pair of states;
        several actions may take the same step), in the order the search found them.
        """
        if self._graph is None:
            import networkx as nx  # imported on demand: a plain safety check never needs it

            g = nx.DiGraph()
            g.add_nodes_from((i, {"initial": i < self.initial_count}) for i in range(len(self.states)))
            for s, d, a in zip(self.source, self.target, self.actions, strict=True):
                if g.has_edge(s, d):
                    if a not in g[s][d]["actions"]:
                        g[s][d]["actions"] += (a,)
                else:
                    g.add_edge(s, d, actions=(a,))
            self._graph = g
        return self._graph


@dataclass(frozen=True, slots=True)
class Lasso:
    """A behaviour refuting ``P ~> Q``, from the trigger state on.

    Attributes
    ----------
    trigger_state:
        The id of a state satisfying ``P and not Q`` (reached by a shortest path from an initial state).
    steps:
        ``(action, state)`` steps after the trigger state, all in ``not Q``.
    loop_offset:
        How many of ``steps`` lead to the state the loop returns to (``None`` when the behaviour stutters).
    stutter:
        True when the behaviour stays in the last state forever (no successor, or no fair class enabled).
    """

    trigger_state: int
    steps: tuple[tuple[Any, Any], ...]
    loop_offset: int | None
    stutter: bool


def check_leads_to(graph: StateGraph, prop: Property[Any], *, stutter_where_unfair: bool = False) -> Lasso | None:
    """``None`` when ``prop`` (a ``leads_to`` property) holds on ``graph`` under weak fairness, else a lasso.

    ``stutter_where_unfair``: a behaviour may stop in any state without an enabled fair class, not only
    in a state without successors (see the module docstring).
    """
    if prop.trigger is None:
        raise ValueError(f"{prop.name!r} is not a leads_to property")
    states, trigger, condition = graph.states, prop.trigger, prop.condition
    outside = bytearray(0 if condition(s) else 1 for s in states)  # the "not Q" subgraph
    roots = [i for i, s in enumerate(states) if outside[i] and trigger(s)]
    if not roots:
        return None
    offsets, target_of, classes = graph.offsets(), graph.target, graph.classes()
    if stutter_where_unfair:
        stuttering = {i for i in range(len(states)) if outside[i]
                      and all(classes[e] is None for e in range(offsets[i], offsets[i + 1]))}
    else:
        stuttering = {i for i in graph.terminal if outside[i]}
    component_of: dict[int, list[int]] = {}
    for component in _components(outside, offsets, target_of):
        if _has_fair_cycle(component, offsets, target_of, classes):
            for member in component:
                component_of[member] = component
    # Breadth first inside "not Q" from every trigger state at once: the first bad state is the nearest.
    came_from: dict[int, tuple[int, int]] = {r: (-1, -1) for r in roots}
    queue = deque(roots)
    end = -1
    while queue:
        node = queue.popleft()
        if node in stuttering or node in component_of:
            end = node
            break
        for e in range(offsets[node], offsets[node + 1]):
            nxt = target_of[e]
            if outside[nxt] and nxt not in came_from:
                came_from[nxt] = (node, e)
                queue.append(nxt)
    if end < 0:
        return None
    walk: list[int] = []
    node = end
    while came_from[node][0] != -1:
        node, edge = came_from[node]
        walk.append(edge)
    walk.reverse()
    steps = [(graph.actions[e], states[target_of[e]]) for e in walk]
    if end in stuttering:
        return Lasso(node, tuple(steps), None, True)
    cycle = _fair_cycle(graph, frozenset(component_of[end]), end)
    steps += [(graph.actions[e], states[target_of[e]]) for e in cycle]
    return Lasso(node, tuple(steps), len(walk), False)


def _components(allowed: bytearray, offsets: array[int], target_of: array[int]) -> list[list[int]]:
    """Strongly connected components of the subgraph on ``allowed`` nodes that hold an edge (Tarjan, iterative)."""
    n = len(allowed)
    index = array("i", [-1]) * n
    low = array("i", [0]) * n
    on_stack = bytearray(n)
    stack: list[int] = []
    found: list[list[int]] = []
    counter = 0
    for root in range(n):
        if not allowed[root] or index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        work = [(root, offsets[root])]
        while work:
            v, e = work[-1]
            end = offsets[v + 1]
            descended = False
            while e < end:
                w = target_of[e]
                e += 1
                if not allowed[w]:
                    continue
                if index[w] == -1:
                    work[-1] = (v, e)
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work.append((w, offsets[w]))
                    descended = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                component: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1 or any(target_of[x] == v for x in range(offsets[v], offsets[v + 1])):
                    found.append(component)
    return found


def _has_fair_cycle(component: list[int], offsets: array[int], target_of: array[int],
                    classes: list[Hashable | None]) -> bool:
    members = set(component)
    enabled_everywhere: set[Hashable] | None = None
    taken_inside: set[Hashable] = set()
    for m in component:
        enabled: set[Hashable] = set()
        for e in range(offsets[m], offsets[m + 1]):
            k = classes[e]
            if k is None:
                continue
            enabled.add(k)
            if target_of[e] in members:
                taken_inside.add(k)
        enabled_everywhere = enabled if enabled_everywhere is None else enabled_everywhere & enabled
    return not (enabled_everywhere or set()) - taken_inside


def _fair_cycle(graph: StateGraph, members: frozenset[int], start: int) -> list[int]:
    """Edges of a cycle from ``start`` back to it inside ``members``, taking every class enabled throughout."""
    offsets, target_of, classes = graph.offsets(), graph.target, graph.classes()
    enabled_everywhere: set[Hashable] | None = None
    for m in members:
        enabled = {classes[e] for e in range(offsets[m], offsets[m + 1])} - {None}
        enabled_everywhere = enabled if enabled_everywhere is None else enabled_everywhere & enabled
    path: list[int] = []
    node = start
    for k in sorted(enabled_everywhere or (), key=repr):
        if any(classes[e] == k for e in path):
            continue  # already taken on the way to an earlier class
        edge = min((e for m in members for e in range(offsets[m], offsets[m + 1])
                    if classes[e] == k and target_of[e] in members), default=None)
        if edge is None:  # cannot happen in a fair component; keep the cycle valid anyway
            continue
        path += _path_inside(graph, members, node, graph.source[edge])
        path.append(edge)
        node = target_of[edge]
    path += _path_inside(graph, members, node, start, nonempty=not path)
    return path


def _path_inside(graph: StateGraph, members: frozenset[int], a: int, b: int, nonempty: bool = False) -> list[int]:
    """Edges of a shortest path from ``a`` to ``b`` inside ``members`` (at least one edge if ``nonempty``)."""
    if a == b and not nonempty:
        return []
    offsets, target_of = graph.offsets(), graph.target
    came: dict[int, tuple[int, int]] = {}
    queue = deque([a])
    while queue:
        node = queue.popleft()
        for e in range(offsets[node], offsets[node + 1]):
            nxt = target_of[e]
            if nxt not in members or nxt in came:
                continue
            came[nxt] = (node, e)
            if nxt == b:
                walk = [e]
                cur = node
                while cur != a:
                    cur, edge = came[cur]
                    walk.append(edge)
                walk.reverse()
                return walk
            queue.append(nxt)
    raise AssertionError("the states of a strongly connected component are mutually reachable")
