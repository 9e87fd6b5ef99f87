"""Export of an explored state graph: GraphML (networkx) and DOT (written directly, no pydot needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx


def export(result: Any, path: Path) -> None:
    """Write ``result.graph`` (a check run with ``build_graph=True`` or liveness) to ``.graphml`` or ``.dot``."""
    graph = getattr(result, "graph", None)
    if graph is None:
        raise ValueError("this check recorded no state graph (run it with build_graph=True)")
    g = graph.to_networkx().copy()
    describe = getattr(result, "describe_state", None)
    for node in g.nodes:
        state = graph.states[node]
        g.nodes[node]["label"] = describe(state) if describe else repr(state)
    if path.suffix == ".dot":
        path.write_text(to_dot(g), encoding="utf-8")
    else:
        nx.write_graphml(g, path)


def to_dot(g: nx.DiGraph) -> str:
    def quote(text: Any) -> str:
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    lines = ["digraph states {", "  node [shape=box, fontsize=9];"]
    for node, data in g.nodes(data=True):
        lines.append(f"  {node} [label={quote(data.get('label', node))}];")
    for a, b, data in g.edges(data=True):
        lines.append(f"  {a} -> {b} [label={quote(data.get('action', ''))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
