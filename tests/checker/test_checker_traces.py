"""Counterexample export (JSON Lines, ITF, Mermaid) and state-graph export (GraphML, DOT)."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest
import toys

from txnspec.checker import (
    Counterexample,
    check,
    counterexample_to_itf,
    export_graph,
    from_itf,
    mermaid,
    read_itf,
    to_itf,
    to_plain,
    write_itf,
    write_jsonl,
    write_mermaid,
)


class Colour(enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    n: int
    tags: frozenset[str]


def broken_two_phase_counterexample() -> Counterexample:
    cex = check(toys.two_phase_commit(3, broken=True), symmetry=False).verdict("consistent").counterexample
    assert cex is not None
    return cex


@pytest.mark.parametrize("value", [
    0, -7, 2**70, "text", True, False, None, (), (1, "a", (2, None)), frozenset({1, 2, 3}),
    frozenset({(1, "x"), (2, "y")}), {"a": 1, (1, 2): frozenset({"z"})}, {1: {2: (3,)}},
])
def test_itf_round_trips_plain_values(value: object) -> None:
    assert from_itf(json.loads(json.dumps(to_itf(value)))) == value


def test_itf_encodes_as_adr_015_says() -> None:
    assert to_itf(5) == {"#bigint": "5"}
    assert to_itf((1, "a")) == {"#tup": [{"#bigint": "1"}, "a"]}
    assert to_itf(frozenset({"b", "a"})) == {"#set": ["a", "b"]}
    assert to_itf({"k": True}) == {"#map": [["k", True]]}
    assert to_itf(Inner(1, frozenset())) == {"n": {"#bigint": "1"}, "tags": {"#set": []}}
    assert to_itf(Colour.RED) == "RED"
    assert to_itf(None) == {"tag": "None", "value": {"#tup": []}}
    assert from_itf(to_itf(Inner(2, frozenset({"t"})))) == {"n": 2, "tags": frozenset({"t"})}
    assert from_itf(3) == 3  # plain JSON numbers are accepted too


def test_an_itf_file_has_vars_states_indices_and_the_action_taken(tmp_path: Path) -> None:
    cex = broken_two_phase_counterexample()
    path = tmp_path / "cex.itf.json"
    write_itf(cex, path, toys.two_phase_commit(3, broken=True))
    document = json.loads(path.read_text())
    assert document["vars"] == ["rm_state", "tm_state", "tm_prepared", "msgs", "mbt::actionTaken", "mbt::actionLabel"]
    assert [s["#meta"]["index"] for s in document["states"]] == list(range(6))
    assert [s["mbt::actionTaken"] for s in document["states"]] == \
        ["init", "RMPrepare", "TMRcvPrepared", "RMChooseToAbort", "TMCommit", "RMRcvCommitMsg"]
    assert document["#meta"]["format"] == "ITF" and "consistent" in document["#meta"]["description"]
    states = read_itf(path)
    final = cex.steps[-1][1]
    assert states[-1]["rm_state"] == final.rm_state and states[-1]["msgs"] == final.msgs
    assert states[-1]["mbt::actionLabel"] == "RMRcvCommitMsg(0)"


def test_a_looping_counterexample_records_its_loop_in_itf() -> None:
    cex = check(toys.traffic_light()).verdict("waiting_car_crosses").counterexample
    assert cex is not None
    assert counterexample_to_itf(cex)["#meta"]["loop"] == 1


def test_json_lines_have_one_object_per_step(tmp_path: Path) -> None:
    cex = broken_two_phase_counterexample()
    path = tmp_path / "cex.jsonl"
    write_jsonl(cex, path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(6))
    assert lines[0]["action"] is None and lines[1]["action"] == "RMPrepare(0)" and lines[1]["kind"] == "RMPrepare"
    assert lines[-1]["state"]["rm_state"] == ["committed", "aborted", "working"]
    assert to_plain((Colour.RED, frozenset({2, 1}), None)) == ["RED", [1, 2], None]


def test_mermaid_draws_arrows_between_lifelines_and_notes_otherwise(tmp_path: Path) -> None:
    model = toys.two_phase_commit(3, broken=True)
    text = mermaid(broken_two_phase_counterexample(), model)
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    assert [line.strip() for line in lines if "participant" in line] == \
        ["participant tm as tm", "participant rm0 as rm0", "participant rm1 as rm1", "participant rm2 as rm2"]
    assert "    rm0->>tm: 2. TMRcvPrepared(0)" in lines
    assert "    tm->>rm0: 5. RMRcvCommitMsg(0)" in lines
    assert "    Note over rm0: 1. RMPrepare(0)" in lines
    path = tmp_path / "cex.mmd"
    write_mermaid(broken_two_phase_counterexample(), path, model)
    assert path.read_text() == text


def test_mermaid_wraps_a_liveness_loop() -> None:
    cex = check(toys.traffic_light()).verdict("waiting_car_crosses").counterexample
    assert cex is not None
    text = mermaid(cex)
    assert "    loop forever (a weakly fair behaviour)" in text and text.rstrip().endswith("end")
    assert "participant system" in text


def test_graphml_is_written_and_read_back(tmp_path: Path) -> None:
    result = check(toys.two_phase_commit(3), symmetry=False, build_graph=True, properties=["consistent"])
    path = tmp_path / "states.graphml"
    export_graph(result, path)
    g = nx.read_graphml(path)
    assert g.number_of_nodes() == 288
    initial = [n for n, d in g.nodes(data=True) if d["initial"]]
    assert len(initial) == 1 and "rm0: working" in g.nodes[initial[0]]["state"]
    assert all("action" in d for _, _, d in g.edges(data=True))


def test_the_networkx_view_has_integer_nodes_and_action_labels() -> None:
    result = check(toys.counter(3), build_graph=True)
    g = result.graph.to_networkx()
    assert list(g.nodes) == [0, 1, 2, 3] and g.nodes[0]["initial"] and not g.nodes[1]["initial"]
    assert g.edges[0, 1]["actions"] == (result.graph.actions[0],) and str(result.graph.actions[0]) == "inc(0)"


def test_parallel_actions_stay_values_on_the_edge_and_become_text_only_in_the_export() -> None:
    from array import array

    from txnspec.checker.graph import labelled_graph, to_dot
    from txnspec.checker.liveness import StateGraph

    actions = [("inc", 0), ("bump", 0), ("inc", 0), ("inc", 1)]  # two actions take the step 0 -> 1, one twice
    graph = StateGraph(["a", "b"], 1, array("q", [0, 0, 0, 1]), array("q", [1, 1, 1, 1]), actions, [], None)
    assert graph.to_networkx().edges[0, 1]["actions"] == (("inc", 0), ("bump", 0))

    class Result:
        describe_state = None

    result = Result()
    result.graph = graph  # type: ignore[attr-defined]
    g = labelled_graph(result)
    assert g.edges[0, 1]["action"] == "('inc', 0) | ('bump', 0)" and "actions" not in g.edges[0, 1]
    assert "('inc', 0) | ('bump', 0)" in to_dot(g)


def test_dot_is_written_by_hand_and_well_formed(tmp_path: Path) -> None:
    result = check(toys.counter(3), build_graph=True)
    path = tmp_path / "states.dot"
    export_graph(result, path)
    text = path.read_text()
    assert text.startswith("digraph states {") and text.rstrip().endswith("}")
    nodes = re.findall(r'^  (\d+) \[label="([^"]*)"(, peripheries=2)?\];$', text, re.M)
    edges = re.findall(r'^  (\d+) -> (\d+) \[label="([^"]*)"\];$', text, re.M)
    assert [(n, label) for n, label, _ in nodes] == [("0", "n=0"), ("1", "n=1"), ("2", "n=2"), ("3", "n=3")]
    assert nodes[0][2] and not nodes[1][2]
    assert edges == [("0", "1", "inc(0)"), ("1", "2", "inc(1)"), ("2", "3", "inc(2)")]


def test_exporting_without_a_recorded_graph_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="build_graph=True"):
        export_graph(check(toys.counter(3)), tmp_path / "x.dot")
