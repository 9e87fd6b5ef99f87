"""Generation: covering traces cover every action kind and coordinator transition; walks are seeded."""

from __future__ import annotations

from hypothesis import given, settings

from txnspec.checker import check
from txnspec.conformance import generate as gen
from txnspec.conformance.adapters.spec_adapter import SpecAdapter
from txnspec.conformance.replay import replay
from txnspec.conformance.traces import Trace
from txnspec.spec.model import build_model


def test_covering_traces_cover_every_action_kind_of_tiny() -> None:
    graph = check(build_model("tiny"), properties=[], build_graph=True).graph
    assert graph is not None
    kinds_in_graph = {a.kind for a in graph.actions}
    plan = gen.covering_plan("tiny")
    assert plan.kinds == kinds_in_graph
    traces = gen.covering_traces("tiny")
    covered_kinds: set[str] = set()
    covered_transitions: set[str] = set()
    for trace in traces:
        covered_kinds |= trace.kinds()
        covered_transitions |= set(gen.coverage(trace)["transitions"])
    assert covered_kinds == kinds_in_graph
    assert covered_transitions == plan.transitions
    assert {"Ongoing->PrepareCommit", "PrepareCommit->CompleteCommit", "Ongoing->PrepareAbort"} <= plan.transitions
    assert len(traces) <= len(kinds_in_graph)


def test_covering_traces_of_a_scenario_with_faults() -> None:
    plan = gen.covering_plan("retry")
    covered: set[str] = set()
    for trace in gen.covering_traces("retry"):
        covered |= trace.kinds()
    assert "duplicate" in plan.kinds and covered == plan.kinds


def test_random_walks_are_deterministic_per_seed() -> None:
    a, b = gen.random_walk("default", 11), gen.random_walk("default", 11)
    assert a == b and a.to_line() == b.to_line()
    others = {gen.random_walk("default", s).to_line() for s in range(12, 20)}
    assert len(others) > 1
    assert len(gen.random_walk("default", 11, max_steps=5)) == 5
    assert all(replay(gen.random_walk("default", s), SpecAdapter()).ok for s in range(5))


@settings(max_examples=15, deadline=None)
@given(gen.traces("tiny"))
def test_hypothesis_strategy_yields_spec_traces(trace: Trace) -> None:
    assert trace.scenario == "tiny"
    assert replay(trace, SpecAdapter()).ok
