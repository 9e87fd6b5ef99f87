"""Simulation (checker/simulate.py) and shrinking (checker/shrink.py, shrink_violation.py): violations found by
random walks, their paths shrunk and re-validated, the same walks for a seed whatever the number of workers,
nothing claimed on a clean model."""

from __future__ import annotations

from typing import Any

import pytest
import toys

from txnspec.checker import check
from txnspec.checker.model import Model, Property
from txnspec.checker.report import Counterexample
from txnspec.checker.shrink import shrink
from txnspec.checker.shrink_violation import shrink_violation
from txnspec.checker.simulate import simulate


def assert_behaviour(model: Model[Any], cex: Counterexample) -> None:
    """Every step of ``cex`` is a step of ``model`` from its state, starting at an initial state."""
    assert cex.steps[0][1] in list(model.init_states())
    for (_, state), (action, successor) in zip(cex.steps, cex.steps[1:], strict=False):
        assert (action, successor) in list(model.next_steps(state)), f"{action} is not a step from {state}"


def test_a_broken_two_phase_commit_is_caught_and_its_path_shrunk() -> None:
    model = toys.two_phase_commit(3, broken=True)
    result = simulate(model, seed=0, max_walks=1_000)
    verdict = result.verdict("consistent")
    assert verdict.holds is False and verdict.counterexample is not None
    cex = verdict.counterexample
    assert_behaviour(model, cex)
    assert not model.property("consistent").condition(cex.steps[-1][1])
    # pinned: walk 42 is the first that violates for seed 0; 5 steps, as short as breadth first finds
    stats = result.simulation
    assert (stats.walks, stats.found_length, stats.shrunk_length) == (43, 6, 5)
    assert len(check(model).verdict("consistent").counterexample) == 5
    assert result.store == "simulation" and not result.complete
    assert result.stop_reason == "the simulation stops at its first violation"
    assert "shrunk counterexample (5 steps)" in result.render()


def test_a_clean_model_holds_nothing_and_reports_what_it_saw() -> None:
    model = toys.two_phase_commit(3)
    result = simulate(model, seed=3, max_walks=200)
    assert result.ok and not result.complete and result.verdict_text == "incomplete"
    assert result.verdict("consistent").holds is None  # a simulation proves nothing
    assert result.verdict("some_commit").holds is True and result.verdict("all_abort").holds is True
    assert result.verdict("prepared_decides").holds is None
    assert result.simulation.walks == 200 and result.stop_reason == "the walk cap (200 walks) was reached"
    assert result.states <= 288  # TLC's count: a walk cannot see more than there is
    assert result.never_taken == ("RMCrash",) and result.coverage["TMCommit"] > 0
    assert result.to_json()["simulation"]["walks"] == 200


def test_deadlocks_and_unanswered_leads_to_triggers_are_found() -> None:
    result = simulate(toys.dining(), seed=0, max_walks=100)
    assert result.deadlock is not None and len(result.deadlock) == 2  # as breadth first finds it
    model = toys.dropped_request()
    result = simulate(model, seed=0, max_walks=100)
    cex = result.verdict("request_answered").counterexample
    assert cex is not None and cex.actions == ("request", "drop") and cex.stutter
    assert_behaviour(model, cex)
    # a leads-to property answered on every walk (finish is always taken in the end) is not reported
    assert simulate(toys.spinner(), seed=0, max_walks=100).ok


def test_a_leads_to_property_violated_by_a_fair_loop_is_found_as_a_lasso() -> None:
    """A walk that returns to one of its states through a loop that answers nothing and takes every fairness class
    enabled all along it violates the property, as the exact engine's fair cycle does; a loop that leaves a
    weakly fair step enabled throughout (the spinner's finish) does not."""
    for model in (toys.traffic_light(), toys.spinner(fair=False)):
        name = model.properties[0].name
        cex = simulate(model, seed=0, max_walks=100).verdict(name).counterexample
        exact = check(model).verdict(name).counterexample
        assert cex is not None and exact is not None
        assert_behaviour(model, cex)
        assert (cex.actions, cex.loop_start, cex.stutter) == (exact.actions, exact.loop_start, False)
        assert cex.steps[-1][1] == cex.steps[cex.loop_start][1]
    assert cex.actions == ("spin", "spin") and "back to step 0, forever" in cex.render()
    assert simulate(toys.spinner(), seed=0, max_walks=200).ok


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_walks_of_a_seed_are_the_same_for_any_number_of_workers(workers: int) -> None:
    model = toys.two_phase_commit(3, broken=True)
    alone = simulate(model, seed=7, max_walks=2_000)
    result = simulate(model, seed=7, max_walks=2_000, workers=workers)
    assert result.simulation.workers == workers
    assert result.verdict("consistent").counterexample == alone.verdict("consistent").counterexample
    for field in ("walks", "steps", "found_length", "shrunk_length"):
        assert getattr(result.simulation, field) == getattr(alone.simulation, field), field


def test_seeds_give_different_walks() -> None:
    model = toys.two_phase_commit(3)
    runs = {simulate(model, seed=seed, max_walks=20).simulation.steps for seed in range(4)}
    assert len(runs) > 1


def test_shrinking_cuts_loops_and_needless_steps_and_keeps_a_behaviour() -> None:
    model = toys.counter(12, bad_at=4)
    wander = Model("wander", lambda: [0], lambda n: [("inc", n + 1), ("dec", n - 1), ("stay", n)]
                   if abs(n) < 9 else [])
    path = [(None, 0), ("inc", 1), ("stay", 1), ("dec", 0), ("dec", -1), ("inc", 0), ("inc", 1), ("inc", 2),
            ("stay", 2), ("inc", 3), ("inc", 4)]
    outcome = shrink(wander, path, lambda n: n == 4)
    assert [a for a, _ in outcome.steps[1:]] == ["inc"] * 4
    assert (outcome.before, outcome.after) == (10, 4)
    with pytest.raises(ValueError, match="last state is bad"):
        shrink(model, [(None, 0), ("inc(0)", 1)], lambda n: n == 4)


def busy_coordinator() -> Model[tuple[bool, str, int]]:
    """(prepared, client, work): once prepared, nothing completes it. Every actor finishing takes eight steps of
    work and the client's quit; the client may instead ask, and be answered "try again" forever (a fair loop)."""

    def next_steps(s: tuple[bool, str, int]) -> list[tuple[str, tuple[bool, str, int]]]:
        prepared, client, work = s
        moves = [] if prepared else [("prepare", (True, client, work))]
        if work < 8:
            moves.append(("work", (prepared, client, work + 1)))
        moves += {"idle": [("ask", (prepared, "asked", work)), ("quit", (prepared, "gone", work))],
                  "asked": [("deliver", (prepared, "answered", work))],
                  "answered": [("retry", (prepared, "asked", work))], "gone": []}[client]
        return moves

    return Model("busy-coordinator", lambda: [(False, "idle", 0)], next_steps,
                 properties=[Property.leads_to("prepared_completes", lambda s: s[0], lambda s: False)],
                 fairness=lambda a: a if a in ("prepare", "deliver", "retry") else None)


def test_a_path_to_a_terminal_state_shrinks_to_a_shorter_fair_loop() -> None:
    """A walk that waits for every actor to finish (10 steps) violates the leads-to property as a stutter; the
    retry loop a client's call opens right after the prepare is a shorter violation (4 steps, as breadth first
    finds it), and the shrinker reports that lasso."""
    model = busy_coordinator()
    path = [(None, (False, "idle", 0)), ("prepare", (True, "idle", 0))]
    path += [("work", (True, "idle", w)) for w in range(1, 9)] + [("quit", (True, "gone", 8))]
    outcome = shrink_violation(model, path, model.properties[0])
    assert [a for a, _ in outcome.steps[1:]] == ["prepare", "ask", "deliver", "retry"]
    assert (outcome.before, outcome.after, outcome.loop_start) == (10, 4, 2)
    assert outcome.steps[-1][1] == outcome.steps[outcome.loop_start][1]
    exact = check(model).verdict("prepared_completes").counterexample
    assert exact is not None and len(exact) == outcome.after
    # without fairness there is no fair loop to prefer: the stutter at the end stays (nothing else is shorter)
    unfair = Model("busy-unfair", model.init_states, model.next_steps, properties=model.properties)
    assert shrink_violation(unfair, path, unfair.properties[0]).loop_start is None


def test_shrinking_rejects_a_path_that_no_longer_reaches_the_violation() -> None:
    """Only ``inc`` reaches 3; ``skip`` jumps to 2 but then only ``dead`` is enabled: a shorter path by ``skip``
    must be rejected because it no longer reaches the bad state."""
    def next_steps(n: int) -> list[tuple[str, int]]:
        if n == 0:
            return [("inc", 1), ("skip", 20)]
        if n == 20:
            return [("dead", 21)]
        return [("inc", n + 1)] if n < 3 else []

    model = Model("trap", lambda: [0], next_steps)
    outcome = shrink(model, [(None, 0), ("inc", 1), ("inc", 2), ("inc", 3)], lambda n: n == 3)
    assert [a for a, _ in outcome.steps[1:]] == ["inc", "inc", "inc"]


def test_bad_arguments_are_refused() -> None:
    model = toys.counter(3)
    for option in ({"seconds": 0}, {"max_depth": 0}, {"workers": 0}, {"max_walks": 0}):
        with pytest.raises(ValueError, match="must be positive"):
            simulate(model, **option)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="unknown property"):
        simulate(model, properties=["nope"], max_walks=1)


def test_a_property_that_holds_initially_false_is_reported_at_once() -> None:
    model = Model("bad-start", lambda: [0], lambda n: [], properties=[Property.always("positive", lambda n: n > 0)],
                  is_final=lambda n: True)
    result = simulate(model, max_walks=5)
    cex = result.verdict("positive").counterexample
    assert cex is not None and len(cex) == 0 and result.simulation.walks == 1


# variant -> small scenario, its property, (walks, length found, shrunk length) for seed 0; the shortest
# counterexamples breadth first finds there (tests/spec/test_variants.py) are 19, 19, 11, 23, 8, 13 and 11
KAFKA_BUGS = {
    "zombie-not-fenced": ("zombie", "fenced_producer_never_commits", (152, 20, 19)),
    "kafka-17754": ("delayed-end-txn", "end_txn_applies_to_its_transaction", (43, 25, 24)),
    "hanging-transaction": ("delayed-produce", "no_hanging_transaction", (6, 12, 11)),
    "late-produce-joins-next": ("delayed-produce", "read_committed_only_committed", (1_371, 24, 23)),
    "no-duplicate-detection": ("retry", "no_duplicate_append", (4, 10, 8)),
    "failover-without-markers": ("failover", "prepared_transactions_complete", (76, 13, 13)),
    "zombie-offsets-not-fenced": ("rebalance", "no_fenced_member_offsets_commit", (1, 14, 11)),
}


@pytest.mark.parametrize("variant", sorted(KAFKA_BUGS))
def test_every_kafka_bug_is_found_by_simulation_on_its_scenario(variant: str) -> None:
    from txnspec.spec.model import build_model

    scenario, prop, pinned = KAFKA_BUGS[variant]
    model = build_model(scenario, variant)
    result = simulate(model, seed=0, properties=[prop], max_walks=20_000, seconds=600)
    cex = result.verdict(prop).counterexample
    assert result.verdict(prop).holds is False and cex is not None
    assert_behaviour(model, cex)
    stats = result.simulation
    assert (stats.walks, stats.found_length, stats.shrunk_length) == pinned
    if variant == "failover-without-markers":  # a leads-to: the path ends where nothing more can happen
        assert cex.stutter and not list(model.next_steps(cex.steps[-1][1]))


def test_the_models_transition_labels_are_counted() -> None:
    """The Kafka model labels a step by the coordinator transitions it makes: on ``tiny`` (one transaction, no
    faults) every walk that commits goes Empty -> Ongoing -> PrepareCommit -> CompleteCommit."""
    from txnspec.spec.model import build_model

    result = simulate(build_model("tiny"), seed=0, max_walks=30)
    met = result.simulation.transitions
    assert {"none -> Empty", "Empty -> Ongoing", "Ongoing -> PrepareCommit", "PrepareCommit -> CompleteCommit"} \
        <= set(met)
    assert met["Ongoing -> PrepareCommit"] == met["PrepareCommit -> CompleteCommit"] > 0
    assert "transitions met: " in result.render() and result.to_json()["simulation"]["transitions"] == met
    counted = simulate(Model("parity", lambda: [0], lambda n: [("inc", n + 1)] if n < 5 else [],
                             is_final=lambda n: True, metadata={"transition_labels": lambda a, b: [f"{b % 2}"]}),
                       max_walks=1, max_depth=100, seed=0)
    assert sum(counted.simulation.transitions.values()) == counted.simulation.steps


def test_progress_is_reported_while_walking() -> None:
    lines: list[str] = []
    simulate(toys.two_phase_commit(3), seed=0, seconds=2.5, progress=lines.append)
    assert lines and all("walks" in line and "distinct states" in line for line in lines)
