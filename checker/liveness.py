"""Liveness: ``leads_to`` properties under weak fairness, through strongly connected components.

``P ~> Q`` fails iff some reachable state satisfies ``P and not Q`` and, from it, a behaviour can stay
in ``not Q`` forever while being weakly fair. Staying forever means either reaching a state with no
successor (the system halts there; halting counts as stuttering forever) or entering a cycle. A cycle
is weakly fair iff every fairness class enabled in all of its states is taken on it. For a strongly
connected component ``C`` of the ``not Q`` subgraph this is exact: ``C`` contains a fair cycle iff for
every class ``k`` enabled in every state of ``C``, some edge of class ``k`` stays inside ``C`` (a cycle
through all of ``C`` then takes each such edge; if the edges all leave ``C``, no cycle in ``C`` can take
them while the class stays enabled).

The counterexample is a lasso: the shortest path to the ``P and not Q`` state, a path inside ``not Q``
to the component (or to the halting state), and for a component a cycle through it.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import networkx as nx

from txnspec.checker.model import Property


class StateGraph:
    """The explored state graph as integer arrays, with a networkx view built on demand."""

    def __init__(self, states: Sequence[Any], src: array, dst: array, actions: Sequence[Any],  # type: ignore[type-arg]
                 terminal: Sequence[int], fairness: Callable[[Any], Hashable | None] | None) -> None:
        self.states = states
        self.src, self.dst, self.actions = src, dst, actions
        self.terminal = frozenset(terminal)
        self.fairness = fairness
        self._out: list[list[int]] | None = None
        self._graph: nx.DiGraph | None = None

    def out_edges(self) -> list[list[int]]:
        """Edge indices leaving each state."""
        if self._out is None:
            out: list[list[int]] = [[] for _ in self.states]
            for i, s in enumerate(self.src):
                out[s].append(i)
            self._out = out
        return self._out

    def to_networkx(self) -> nx.DiGraph:
        """Integer nodes (``initial`` attribute on the roots), edges labelled with ``action`` text."""
        if self._graph is None:
            g = nx.DiGraph()
            g.add_nodes_from(range(len(self.states)))
            for s, d, a in zip(self.src, self.dst, self.actions, strict=True):
                g.add_edge(s, d, action=str(a))
            self._graph = g
        return self._graph

    def fairness_class(self, edge: int) -> Hashable | None:
        return self.fairness(self.actions[edge]) if self.fairness is not None else None


def check_leads_to(graph: StateGraph, prop: Property[Any]
                   ) -> tuple[int, list[tuple[Any, Any]], bool] | None:
    """None if ``prop`` holds; else ``(state reached by the shortest prefix, further steps, is a loop)``."""
    assert prop.trigger is not None
    states = graph.states
    goal = [prop.condition(s) for s in states]
    out = graph.out_edges()
    bad = _fair_components(graph, goal)
    roots = [i for i, s in enumerate(states) if not goal[i] and prop.trigger(s)]
    if not roots:
        return None
    # Breadth-first inside "not Q" from every root at once: the first bad state reached is the nearest.
    came_from: dict[int, tuple[int, int]] = {r: (-1, -1) for r in roots}
    queue = deque(roots)
    target = -1
    while queue:
        node = queue.popleft()
        if node in bad or node in graph.terminal:
            target = node
            break
        for e in out[node]:
            nxt = graph.dst[e]
            if not goal[nxt] and nxt not in came_from:
                came_from[nxt] = (node, e)
                queue.append(nxt)
    if target < 0:
        return None
    walk: list[tuple[int, int]] = []
    node = target
    while came_from[node][0] != -1:
        prev, e = came_from[node]
        walk.append((e, node))
        node = prev
    walk.reverse()
    root = node
    steps = [(graph.actions[e], states[n]) for e, n in walk]
    if target in graph.terminal:
        return root, steps, False
    cycle = _cycle_through(graph, bad[target], target, goal)
    return root, steps + [(graph.actions[e], states[n]) for e, n in cycle], True


def _fair_components(graph: StateGraph, goal: list[bool]) -> dict[int, frozenset[int]]:
    """State -> its component, for states in a fair non-trivial SCC of the ``not goal`` subgraph."""
    g = graph.to_networkx()
    sub = g.subgraph(i for i, ok in enumerate(goal) if not ok)
    out = graph.out_edges()
    result: dict[int, frozenset[int]] = {}
    for component in nx.strongly_connected_components(sub):
        members = frozenset(component)
        if len(members) == 1:
            (only,) = members
            if not any(graph.dst[e] == only for e in out[only]):
                continue
        if _is_fair(graph, members, out):
            for m in members:
                result[m] = members
    return result


def _is_fair(graph: StateGraph, members: frozenset[int], out: list[list[int]]) -> bool:
    enabled_everywhere: set[Hashable] | None = None
    taken_inside: set[Hashable] = set()
    for m in members:
        classes: set[Hashable] = set()
        for e in out[m]:
            k = graph.fairness_class(e)
            if k is None:
                continue
            classes.add(k)
            if graph.dst[e] in members:
                taken_inside.add(k)
        enabled_everywhere = classes if enabled_everywhere is None else enabled_everywhere & classes
    return not (enabled_everywhere or set()) - taken_inside


def _cycle_through(graph: StateGraph, members: frozenset[int], start: int, goal: list[bool]
                   ) -> list[tuple[int, int]]:
    """A cycle from ``start`` back to itself inside ``members`` that takes every fairness class it must."""
    out = graph.out_edges()
    needed: set[Hashable] = set()
    for e in (e for m in members for e in out[m] if graph.dst[e] in members):
        k = graph.fairness_class(e)
        if k is not None:
            needed.add(k)
    path: list[tuple[int, int]] = []
    node = start
    for k in sorted(needed, key=repr):
        edge = next((e for m in members for e in out[m] if graph.dst[e] in members and graph.fairness_class(e) == k),
                    None)
        if edge is None:
            continue
        path += _path_inside(graph, members, node, graph.src[edge])
        path.append((edge, graph.dst[edge]))
        node = graph.dst[edge]
    path += _path_inside(graph, members, node, start, nonempty=not path)
    return path


def _path_inside(graph: StateGraph, members: frozenset[int], a: int, b: int, nonempty: bool = False
                 ) -> list[tuple[int, int]]:
    if a == b and not nonempty:
        return []
    out = graph.out_edges()
    came: dict[int, tuple[int, int]] = {}
    queue = deque([a])
    while queue:
        node = queue.popleft()
        for e in out[node]:
            nxt = graph.dst[e]
            if nxt not in members or nxt in came:
                continue
            came[nxt] = (node, e)
            if nxt == b:
                walk: list[tuple[int, int]] = []
                cur = b
                while True:
                    prev, edge = came[cur]
                    walk.append((edge, cur))
                    if prev == a:
                        break
                    cur = prev
                walk.reverse()
                return walk
            queue.append(nxt)
    raise AssertionError("states of one strongly connected component are mutually reachable")
