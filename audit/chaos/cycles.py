"""Write and read cycles (Adya's G0 and G1c) between the committed transactions of a chaos history, as Elle's Kafka
workload finds them: a dependency graph, its strongly connected components, a shortest cycle in each.

What it models
    The vertices are committed transactions. The edges, each with the events that show it:

    * ``ww`` (write dependency): on a partition, a record of ``T1`` lies before a record of ``T2`` in the log
      (the final read_committed read's offsets: Elle's version order);
    * ``wr`` (read dependency): ``T2``'s consumer polled a record ``T1`` wrote, before ``T2`` began (the
      consume-transform-produce member's poll that feeds its next transaction);
    * ``rt`` (real time): ``T1``'s commit returned before ``T2`` began.

    Kafka does not isolate concurrent writers: two transactions open at once may interleave their records on
    several partitions in opposite orders, a G0 cycle Kafka allows (Jepsen's Kafka analysis infers ww edges only
    on request for that reason). So ``ww`` and ``rt`` edges are drawn only between transactions Kafka orders,
    those that did not overlap in time (``T1`` committed before ``T2`` began, the same instance's transactions
    included); ``wr`` edges always (a read_committed read of ``T1`` follows ``T1``'s commit, and ``T2`` writes
    after it read). A cycle then means the log contradicts the order Kafka promised: ``G0`` when it has only
    ``ww`` and ``rt`` edges, ``G1c`` when it has a ``wr`` edge. Tarjan's algorithm finds the components; in
    each, a breadth-first search from its vertices finds a shortest cycle, the witness.

Assumes
    Transactions and their records as :mod:`.anomalies` reads them; offsets agree across reads (else
    ``inconsistent_offsets`` is reported there).

Leaves out
    Anti-dependencies (``rw``, G2 and G-single: Kafka's transactions promise no snapshot of their reads), ww edges
    between overlapping transactions, realtime edges between transactions with no partition in common.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from txnspec.audit.chaos.history import Op

WINDOW = 64  # earlier writers of a partition compared with each transaction: bounds the graph at O(n * WINDOW)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str  # ww, wr or rt
    why: str
    ops: tuple[Op, ...] = ()


@dataclass
class Graph:
    edges: dict[str, dict[str, Edge]] = field(default_factory=dict)

    def link(self, edge: Edge) -> None:
        if edge.source == edge.target:
            return
        out = self.edges.setdefault(edge.source, {})
        # one edge per pair: a wr edge names the read, the likelier mistake; ww before rt
        rank = {"wr": 0, "ww": 1, "rt": 2}
        if edge.target not in out or rank[edge.kind] < rank[out[edge.target].kind]:
            out[edge.target] = edge
        self.edges.setdefault(edge.target, {})


@dataclass
class Span:
    """A committed transaction as the graph sees it: when it began and when its commit returned, its records on
    each partition (offset and the send), and the records its consumer polled before it began."""

    name: str
    begin: float
    end: float
    records: dict[str, list[tuple[int, Op]]] = field(default_factory=dict)
    reads: list[tuple[str, Op]] = field(default_factory=list)  # (value, the poll)


def ordered(a: Span, b: Span) -> bool:
    """``a`` committed before ``b`` began: Kafka orders their writes."""
    return a.end < b.begin


def graph(spans: dict[str, Span], writer: dict[str, str], sends: dict[str, Op]) -> Graph:
    """The ww, wr and rt edges between ``spans`` (``writer``: a value's transaction; ``sends``: its send)."""
    g = Graph()
    for name in spans:
        g.edges.setdefault(name, {})
    by_partition: dict[str, list[tuple[int, int, str]]] = {}
    for s in spans.values():
        for tp, recs in s.records.items():
            offsets = [o for o, _ in recs]
            by_partition.setdefault(tp, []).append((min(offsets), max(offsets), s.name))
    for tp, blocks in by_partition.items():
        blocks.sort()
        for i, (first, last, name) in enumerate(blocks):
            b = spans[name]
            for first_a, last_a, other in blocks[max(0, i - WINDOW):i]:
                a = spans[other]
                for x, y, x_first, y_last in ((a, b, first_a, last), (b, a, first, last_a)):
                    if x_first < y_last and (ordered(x, y) or ordered(y, x)):
                        # a record of x lies before a record of y on tp
                        g.link(Edge(x.name, y.name, "ww", f"{x.name} wrote {tp} offset {x_first}, before "
                                    f"{y.name}'s offset {y_last}", (_at(x, tp, x_first), _at(y, tp, y_last))))
                for x, y in ((a, b), (b, a)):
                    if ordered(x, y):
                        g.link(Edge(x.name, y.name, "rt", f"{x.name}'s commit returned at t={x.end:.3f}, before "
                                    f"{y.name} began at t={y.begin:.3f}"))
    for s in spans.values():
        for value, poll in s.reads:
            source = writer.get(value)
            if source in spans and source != s.name:
                g.link(Edge(source, s.name, "wr", f"{s.name} read {value!r}, written by {source}",
                            tuple(o for o in (sends.get(value), poll) if o is not None)))
    return g


def _at(s: Span, tp: str, offset: int) -> Op:
    return next(op for o, op in s.records[tp] if o == offset)


def components(g: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one vertex (iterative: histories are long)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in g.edges:
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(g.edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(g.edges[w])))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def shortest_cycle(g: Graph, component: list[str], starts: int = 16) -> list[Edge]:
    """A shortest cycle inside ``component`` through one of its first ``starts`` vertices (breadth-first)."""
    inside = set(component)
    best: list[Edge] = []
    for start in component[:starts]:
        parent: dict[str, Edge] = {}
        queue = deque([start])
        seen = {start}
        found: Edge | None = None
        while queue and found is None:
            v = queue.popleft()
            for w, edge in g.edges[v].items():
                if w == start:
                    found = edge
                    break
                if w in inside and w not in seen:
                    seen.add(w)
                    parent[w] = edge
                    queue.append(w)
        if found is None:
            continue
        path = [found]
        while path[-1].source != start:
            path.append(parent[path[-1].source])
        path.reverse()
        if not best or len(path) < len(best):
            best = path
    return best


def cycles(spans: dict[str, Span], writer: dict[str, str], sends: dict[str, Op]
           ) -> tuple[list[list[Edge]], dict[str, int]]:
    """A shortest cycle of each strongly connected component of the dependency graph, and its edges by kind."""
    g = graph(spans, writer, sends)
    counts = {"ww": 0, "wr": 0, "rt": 0}
    for out in g.edges.values():
        for edge in out.values():
            counts[edge.kind] += 1
    return [c for c in (shortest_cycle(g, comp) for comp in components(g)) if c], counts
