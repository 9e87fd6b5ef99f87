"""The fingerprint search (checker/levels.py), in one process and in several, against the exact search: the same
states, transitions, depth, verdicts and counterexamples (step for step), on toy models and on the Kafka spec."""

from __future__ import annotations

import random
from typing import Any

import pytest
from toys import counter, fan, tokens, two_phase_commit

from txnspec.checker import check, fingerprints
from txnspec.checker.fingerprints import FingerprintSet, Level, Spool, collision_probability
from txnspec.checker.levels import check_levels
from txnspec.checker.model import Model, Property
from txnspec.checker.report import CheckResult
from txnspec.spec.model import build_model


def signature(result: CheckResult) -> tuple[Any, ...]:
    """Everything both searches must agree on, counterexamples step by step."""
    paths = tuple((v.name, v.holds, None if v.counterexample is None else v.counterexample.steps)
                  for v in result.verdicts)
    deadlock = None if result.deadlock is None else result.deadlock.steps
    return (result.states, result.transitions, result.depth, result.complete, result.stop_reason, paths,
            result.deadlock_count, deadlock, result.level_sizes)


def safety(model: Model[Any]) -> list[str]:
    return [p.name for p in model.properties if p.expectation.value != "leads_to"]


TOYS = {
    "counter": lambda: counter(30, bad_at=17, wish=9),
    "two-phase": lambda: two_phase_commit(3),
    "two-phase-broken": lambda: two_phase_commit(3, broken=True),
    "tokens": lambda: tokens(4),
    "fan": lambda: fan(10),  # both invariants fail, the first late in level 1: the stop is early in level 2
}


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("toy", sorted(TOYS))
def test_toys_agree_with_the_exact_search(toy: str, workers: int) -> None:
    model = TOYS[toy]()
    names = safety(model)
    exact = check(model, properties=names, symmetry=False)
    levels = check_levels(model, properties=names, workers=workers, symmetry=False)
    assert signature(levels) == signature(exact)
    if exact.complete:  # a search stopped within a level counts the coverage of the whole level (module doc)
        assert levels.coverage == exact.coverage


@pytest.mark.parametrize("workers", [1, 2])
def test_symmetry_reduction_agrees(workers: int) -> None:
    model = two_phase_commit(4)
    exact = check(model, properties=safety(model))
    assert exact.symmetry
    assert signature(check_levels(model, properties=safety(model), workers=workers)) == signature(exact)


# (scenario, variant): the exact search's counts are pinned elsewhere (test_scenarios.py, test_variants.py)
SPEC_RUNS = [("zombie", "current"), ("zombie", "zombie-not-fenced"), ("delayed-end-txn", "kafka-17754"),
             ("retry", "no-duplicate-detection"), ("failover", "tv1"), ("delayed-produce", "hanging-transaction"),
             ("rebalance", "zombie-offsets-not-fenced"), ("in-flight-2", "current")]


@pytest.mark.parametrize(("scenario", "variant"), SPEC_RUNS)
def test_the_kafka_spec_agrees_in_one_process_and_in_two(scenario: str, variant: str) -> None:
    model = build_model(scenario, variant)
    names = safety(model)
    exact = signature(check(model, properties=names))
    assert signature(check_levels(model, properties=names)) == exact
    assert signature(check_levels(model, properties=names, workers=2)) == exact


@pytest.mark.parametrize("caps", [{"max_states": 700}, {"max_depth": 9}, {"max_states": 1}])
@pytest.mark.parametrize("workers", [1, 2])
def test_caps_stop_where_the_exact_search_stops(caps: dict[str, int], workers: int) -> None:
    model = build_model("zombie", "current")
    exact = check(model, properties=safety(model), **caps)
    assert not exact.complete
    assert signature(check_levels(model, properties=safety(model), workers=workers, **caps)) == signature(exact)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_early_stop_cuts_the_level_where_the_exact_search_stops(workers: int) -> None:
    # every invariant fails (at 5) and the witness exists (at 3): the exact search stops there
    model = Model("early", lambda: [0], lambda n: [("inc", n + 1), ("jump", n + 2)] if n < 40 else [],
                  properties=[Property.always("small", lambda n: n < 5), Property.sometimes("three", lambda n: n == 3)])
    exact = check(model)
    assert exact.stop_reason is not None and "stopped early" in exact.stop_reason
    assert signature(check_levels(model, workers=workers)) == signature(exact)


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize(("toy", "depth"), [("counter", 9), ("counter", 17), ("two-phase-broken", 5), ("fan", 1),
                                            ("fan", 2), ("tokens", 5)])
def test_the_last_level_of_a_depth_bound_is_judged_as_any_other(toy: str, depth: int, workers: int) -> None:
    """That level is not kept (nothing expands it), but its violations and witnesses are found where the
    exact search finds them: ``counter`` fails at 17 and wishes at 9, ``fan`` fails in levels 1 and 2."""
    model = TOYS[toy]()
    exact = check(model, properties=safety(model), symmetry=False, max_depth=depth)
    assert exact.depth == depth
    assert signature(check_levels(model, properties=safety(model), workers=workers, symmetry=False,
                                  max_depth=depth)) == signature(exact)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(("scenario", "variant"), [("zombie", "zombie-not-fenced"), ("delayed-end-txn", "kafka-17754"),
                                                   ("rebalance", "zombie-offsets-not-fenced")])
def test_a_bug_found_on_the_last_level_of_a_depth_bound(scenario: str, variant: str, workers: int) -> None:
    model = build_model(scenario, variant)
    names = safety(model)
    shortest = min(len(v.counterexample.steps) - 1 for v in check(model, properties=names).verdicts
                   if v.holds is False and v.counterexample is not None)
    exact = check(model, properties=names, max_depth=shortest)
    assert any(v.holds is False for v in exact.verdicts)
    assert signature(check_levels(model, properties=names, workers=workers, max_depth=shortest)) == signature(exact)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bounded_run_says_how_its_last_level_grew(workers: int) -> None:
    """The levels a search finished, and the last one's growth, in the summary of a run a bound stopped."""
    model = build_model("zombie", "current")
    names = safety(model)
    complete = check_levels(model, properties=names, workers=workers)
    assert sum(complete.level_sizes) == complete.states == 983 and len(complete.level_sizes) == complete.depth + 1
    bounded = check_levels(model, properties=names, workers=workers, max_depth=9)
    assert bounded.level_sizes == complete.level_sizes[:10] and sum(bounded.level_sizes) == bounded.states == 76
    assert bounded.growth == 25 / 17 and "the last level was 1.47x the one before (still growing)" in bounded.summary()
    cut = check_levels(model, properties=names, workers=workers, max_states=700)  # the level it cut is left out
    assert cut.level_sizes == complete.level_sizes[:20] and cut.states == 700 > sum(cut.level_sizes) == 669
    assert bounded.to_json()["level_sizes"] == list(bounded.level_sizes)
    shrinking = check_levels(model, properties=names, workers=workers, max_depth=24)
    assert shrinking.growth is not None and shrinking.growth < 1 and "still growing" not in shrinking.summary()


def test_leads_to_properties_are_refused_by_name() -> None:
    model = build_model("tiny", "current")
    with pytest.raises(ValueError, match="init_producer_id_completes"):
        check_levels(model)


def test_the_result_reports_the_store_and_the_chance_of_a_collision() -> None:
    model = build_model("zombie", "current")
    result = check_levels(model, properties=safety(model), workers=2, symmetry=False)
    assert result.store == "fingerprints, 2 workers"
    assert result.collision_probability == collision_probability(1_964) == pytest.approx(1.045e-13, rel=0.01)
    assert "chance that a collision hid a state: 1.0e-13" in result.render()
    assert result.to_json()["store"] == "fingerprints, 2 workers"


def test_the_fingerprint_set_is_a_set() -> None:
    rng = random.Random(7)
    values = [rng.getrandbits(64) - 2**63 for _ in range(20_000)] + [0, 1, -1, 0, 1]
    table, reference = FingerprintSet(capacity=8), set()
    for v in values:
        assert table.add(v) == (v not in reference)
        reference.add(v)
    assert len(table) == len(reference)
    assert all(v in table for v in reference)
    assert not any(rng.getrandbits(64) - 2**63 in table for _ in range(1000))
    assert table.nbytes <= 22 * len(reference)  # at most 3/4 full: 8 bytes a slot, 11 to 21 bytes a value


def test_a_spool_gives_back_its_states_in_order(tmp_path: Any) -> None:
    spool = Spool(str(tmp_path), chunk=7)
    spool.extend(range(100))
    assert len(spool) == 100
    assert list(spool) == list(range(100)) == list(spool)
    spool.close()
    assert list(tmp_path.iterdir()) == []


def test_a_worker_lets_go_of_its_level_as_it_expands_it(tmp_path: Any) -> None:
    states = [frozenset({i}) for i in range(5)]
    level = Level(str(tmp_path), limit=3)
    level.extend(states)
    assert len(level) == 5 and level.tail is not None and len(level.tail) == 2  # the rest on disk
    drained = level.drain()
    assert next(drained) is states[0]
    assert level.head[0] is None and level.head[1] is states[1]  # the first state is no longer held by the level
    assert list(drained) == states[1:]
    level.close()
    assert len(level) == 0 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("scenario", "variant"), [("zombie", "current"), ("zombie", "zombie-not-fenced"),
                                                   ("delayed-end-txn", "kafka-17754")])
def test_workers_agree_when_their_levels_overflow_to_disk(scenario: str, variant: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker holds at most ``IN_MEMORY`` states a queue, the rest on disk: the same search (here 7)."""
    model = build_model(scenario, variant)
    names = safety(model)
    exact = signature(check(model, properties=names))
    monkeypatch.setattr(fingerprints, "IN_MEMORY", 7)
    assert signature(check_levels(model, properties=names, workers=2)) == exact
