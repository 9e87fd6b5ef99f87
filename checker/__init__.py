"""Generic model-checking engines: they know nothing of Kafka, only the contract in :mod:`.model`.

Public API
    :func:`check` explores a :class:`Model` breadth first and returns a :class:`CheckResult`;
    :func:`simulate` runs random walks on it instead (:mod:`.simulate`), with the same result type;
    :mod:`.traces` writes counterexamples as JSON Lines, ITF and Mermaid; :mod:`.graph` writes the
    state graph as GraphML or DOT.
"""

from txnspec.checker.explicit import ProgressCallback, check
from txnspec.checker.graph import export as export_graph
from txnspec.checker.graph import labelled_graph, to_dot
from txnspec.checker.liveness import Lasso, StateGraph, check_leads_to
from txnspec.checker.model import Expectation, Label, Model, Property
from txnspec.checker.report import CheckResult, Counterexample, PropertyVerdict, SimulationStats, action_kind
from txnspec.checker.simulate import simulate
from txnspec.checker.traces import (
    counterexample_to_itf,
    from_itf,
    jsonl_lines,
    mermaid,
    read_itf,
    to_itf,
    to_plain,
    write_itf,
    write_jsonl,
    write_mermaid,
)

__all__ = [
    "CheckResult", "Counterexample", "Expectation", "Label", "Lasso", "Model", "ProgressCallback", "Property",
    "PropertyVerdict", "SimulationStats", "StateGraph", "action_kind", "check", "check_leads_to",
    "counterexample_to_itf", "export_graph", "from_itf", "jsonl_lines", "labelled_graph", "mermaid", "read_itf",
    "simulate", "to_dot", "to_itf", "to_plain", "write_itf", "write_jsonl", "write_mermaid",
]
