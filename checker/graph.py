"""Export of an explored state graph: GraphML (through networkx) and DOT (written here, no pydot needed).

What is modelled
    The graph recorded by a check with ``build_graph=True`` (or with a ``leads_to`` property): integer
    nodes with attributes ``state`` (the model's ``describe_state`` or ``repr``) and ``initial``, edges
    with attribute ``action``: the label text of the edge's actions (:meth:`StateGraph.to_networkx` keeps them
    as values; the text, several actions between the same two states joined by ``" | "``, is only written out).

Left out
    Layout, clustering and size limits: a graph of a million states is written as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx


def labelled_graph(result: Any) -> nx.DiGraph:
    """A copy of ``result.graph`` as a networkx DiGraph whose nodes carry the state and edges the actions as text."""
    graph = getattr(result, "graph", None)
    if graph is None:
        raise ValueError("this check recorded no state graph (run it with build_graph=True)")
    describe: Callable[[Any], str] = getattr(result, "describe_state", None) or repr
    g = graph.to_networkx().copy()
    for node in g.nodes:
        g.nodes[node]["state"] = describe(graph.states[node])
    for _, _, data in g.edges(data=True):
        data["action"] = " | ".join(str(a) for a in data.pop("actions"))
    return g


def to_dot(g: nx.DiGraph) -> str:
    """DOT text of a labelled graph; initial states are drawn with a double border."""
    lines = ["digraph states {", "  node [shape=box, fontsize=9];", "  edge [fontsize=8];"]
    for node, data in g.nodes(data=True):
        extra = ", peripheries=2" if data.get("initial") else ""
        lines.append(f"  {node} [label={_quote(data.get('state', node))}{extra}];")
    for a, b, data in g.edges(data=True):
        lines.append(f"  {a} -> {b} [label={_quote(data.get('action', ''))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quote(text: Any) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def export(result: Any, path: Path) -> None:
    """Write ``result``'s state graph to ``path``: DOT for a ``.dot`` or ``.gv`` suffix, GraphML otherwise."""
    g = labelled_graph(result)
    if path.suffix in (".dot", ".gv"):
        path.write_text(to_dot(g), encoding="utf-8")
    else:
        import networkx as nx  # imported on demand, as in liveness

        nx.write_graphml(g, path)
