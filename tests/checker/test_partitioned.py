"""The partitioned search (checker/partitioned.py) against the exact engine: the same states, transitions,
depth, verdicts, counterexamples step for step, deadlocks and level sizes, for 1 to 3 workers, complete and under
every stop (a state cap, a depth bound, the first violation, every invariant violated)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import toys
from test_levels import signature

from txnspec.checker import check, partitioned
from txnspec.checker.model import Model, Property
from txnspec.checker.partitioned import check_partitioned
from txnspec.spec.model import build_model

MODELS: dict[str, Callable[[], Model[Any]]] = {
    "counter": functools.partial(toys.counter, 20, bad_at=17, wish=9),
    "two-phase": functools.partial(toys.two_phase_commit, 3),
    "two-phase-broken": functools.partial(toys.two_phase_commit, 3, broken=True),
    "tokens": functools.partial(toys.tokens, 4),  # symmetry
    "fan": functools.partial(toys.fan, 10),  # every invariant violated within level 2
    "dining": toys.dining,  # a deadlock
    "crowded": toys.crowded,  # two violations and a witness in one level
    "zombie-not-fenced": functools.partial(build_model, "zombie", "zombie-not-fenced"),
}
STOPS = {"complete": {}, "first violation": {"stop_on_violation": True}, "cap 50": {"max_states": 50},
         "cap 1": {"max_states": 1}, "depth 5": {"max_depth": 5}}


def safety(model: Model[Any]) -> list[str]:
    return [p.name for p in model.properties if p.expectation.value != "leads_to"]


@pytest.fixture(params=[64, 0], ids=["rebalanced-when-uneven", "rebalanced-always"])
def uneven(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The threshold of rebalancing: the default, and 0 (states move between workers at every level)."""
    monkeypatch.setattr(partitioned, "UNEVEN", request.param)
    return int(request.param)


@pytest.mark.parametrize("stop", sorted(STOPS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_partitioned_search_is_the_exact_search(name: str, stop: str, uneven: int) -> None:
    model = MODELS[name]()
    exact = check(model, properties=safety(model), **STOPS[stop])  # type: ignore[arg-type]
    for workers in (1, 2, 3):
        result = check_partitioned(model, properties=safety(model), workers=workers, **STOPS[stop])  # type: ignore[arg-type]
        assert signature(result) == signature(exact), workers
        assert result.store == f"fingerprints, partitioned over {workers} workers"
        if exact.complete:
            assert result.coverage == exact.coverage


@pytest.mark.parametrize(("scenario", "counts"), [("zombie", (983, 2_293, 26)), ("failover", (110, 189, 15))])
def test_kafka_scenarios_are_counted_alike(scenario: str, counts: tuple[int, int, int]) -> None:
    """Pinned as in tests/checker/test_spark_bfs.py (symmetry reduced)."""
    model = build_model(scenario)
    result = check_partitioned(model, properties=safety(model), workers=2)
    assert (result.states, result.transitions, result.depth) == counts and result.ok and result.complete
    assert result.coordinator_seconds is not None and 0 <= result.coordinator_seconds <= result.seconds * 2


def diamond() -> Model[int]:
    """0 -> 2 and 3 (integers hash to themselves: two workers own one each), both -> 5, which is bad: the
    violation's shortest path goes through 2, the parent the one-process search expands first."""
    moves = {0: [("left", 2), ("right", 3)], 2: [("from-left", 5)], 3: [("from-right", 5)], 5: []}
    return Model("diamond", lambda: [0], lambda n: moves[n],
                 properties=[Property.always("not_five", lambda n: n != 5)], is_final=lambda n: n == 5)


@pytest.mark.parametrize("workers", [2, 3])
def test_a_state_met_by_two_workers_keeps_the_first_path(workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitioned, "UNEVEN", 0)  # 2 and 3 end up in two workers, each generating 5
    result = check_partitioned(diamond(), workers=workers)
    assert result.verdict("not_five").counterexample.actions == ("left", "from-left")
    assert signature(result) == signature(check(diamond()))


def test_bad_arguments_are_refused() -> None:
    model = toys.counter(3)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        check_partitioned(model, workers=0)
    with pytest.raises(ValueError, match="max_states must be positive"):
        check_partitioned(model, max_states=0)
    with pytest.raises(ValueError, match="leads-to properties need the whole state graph"):
        check_partitioned(toys.spinner())
