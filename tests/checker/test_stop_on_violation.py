"""``stop_on_violation``: every breadth-first engine ends at the first state that violates an invariant and reports
it with its shortest counterexample; the exact engine, the fingerprint search and its workers agree on the state
where they stop, the counts and the verdicts."""

from __future__ import annotations

from typing import Any

import pytest
from toys import crowded, fan, tokens, two_phase_commit

from txnspec.checker import check
from txnspec.checker.levels import check_levels
from txnspec.checker.model import Model
from txnspec.checker.report import STOPPED_ON_VIOLATION, CheckResult
from txnspec.spec.model import build_model


def outline(result: CheckResult) -> tuple[Any, ...]:
    return (result.states, result.transitions, result.stop_reason,
            tuple((v.name, v.holds, None if v.counterexample is None else v.counterexample.actions)
                  for v in result.verdicts))


def test_the_first_violation_ends_the_search() -> None:
    """``last_branch`` fails on the last state of level 1, ``first_line`` on the first of level 2: a search that
    stops at its first violation stores the initial state and the ten branches, and leaves the other unknown."""
    result = check(fan(10, 3), stop_on_violation=True)
    assert result.stop_reason == STOPPED_ON_VIOLATION and not result.complete
    assert result.states == 11
    assert result.verdict("last_branch").holds is False
    assert result.verdict("last_branch").counterexample.actions == ("branch(9)",)
    assert result.verdict("first_line").holds is None
    assert check(fan(10, 3)).verdict("first_line").holds is False  # without it, the search went on


def test_a_crowded_level_stops_at_its_first_violation() -> None:
    result = check(crowded(), stop_on_violation=True)
    assert result.states == 1 + 10 + 4
    assert [v.holds for v in result.verdicts] == [False, None, None]


@pytest.mark.parametrize("model", [fan(10, 3), fan(7, 4), two_phase_commit(3, broken=True), tokens(3),
                                   crowded()],
                         ids=lambda m: m.name)
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_engine_stops_at_the_same_state(model: Model[Any], workers: int) -> None:
    safety = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    exact = check(model, stop_on_violation=True, check_deadlock=False, properties=safety)
    levels = check_levels(model, stop_on_violation=True, check_deadlock=False, workers=workers, properties=safety)
    assert exact.stop_reason == STOPPED_ON_VIOLATION
    assert outline(levels) == outline(exact)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_kafka_bug_stops_at_its_shortest_counterexample(workers: int) -> None:
    """zombie-not-fenced breaks four invariants on ``zombie``; the shallowest (15 steps) ends the search, after
    363 of the 1,102 states the search visits to find all four."""
    model = build_model("zombie", "zombie-not-fenced")
    safety = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    exact = check(model, stop_on_violation=True, properties=safety)
    levels = check_levels(model, stop_on_violation=True, workers=workers, properties=safety)
    assert outline(levels) == outline(exact)
    assert [(v.name, len(v.counterexample)) for v in exact.violated] == [("end_txn_applies_to_its_transaction", 15)]
    assert (exact.states, exact.transitions) == (363, 799)
    everything = check(model, properties=safety)
    assert everything.states == 1_102 and len(everything.violated) == 4
    assert len(everything.verdict("end_txn_applies_to_its_transaction").counterexample) == 15
