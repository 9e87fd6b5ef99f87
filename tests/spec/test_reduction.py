"""Partial-order reduction of the Kafka model (spec/reduction.py): the producer steps it takes alone commute with
every other enabled step, no cycle is made of such steps only, and every verdict on invariants and 'sometimes'
properties is the one of the full search, for the current protocol and every variant."""

from __future__ import annotations

import functools
from typing import Any

import networkx as nx
import pytest

from txnspec.checker import check
from txnspec.checker.levels import check_levels
from txnspec.checker.model import Model
from txnspec.checker.report import CheckResult
from txnspec.cli import main
from txnspec.spec.model import build_model
from txnspec.spec.network import producer_index
from txnspec.spec.reduction import NOT_LOCAL, ample_steps
from txnspec.spec.scenarios import SCENARIOS, Scenario
from txnspec.spec.variants import VARIANTS, variant_named

variant_named("current")  # loads every variant module
ALL_VARIANTS = sorted(VARIANTS)

TWO_IDS = Scenario("two-ids", "two transactional ids, one partition", transactional_ids=("t1", "t2"),
                   max_epoch=4, max_sequence=3)
CUSTOM = {s.name: s for s in (
    TWO_IDS.with_(name="two-ids-timeout", faults={"timeout": 1}),
    TWO_IDS.with_(name="two-ids-duplicate", faults={"duplicate": 1}),
    # a network of two messages at most while a duplicate is left: steps that grow it disable the duplicate
    TWO_IDS.with_(name="two-ids-duplicate-2", faults={"duplicate": 1}, max_messages_in_flight=2),
    TWO_IDS.with_(name="two-ids-loss", faults={"loss": 1}),
    SCENARIOS["zombie"].with_(name="zombie-failover", faults={"failover": 1}),
    SCENARIOS["multi-partition"].with_(name="mp-duplicate-tv1", faults={"duplicate": 1}, transaction_version=1),
)}
# the two with a duplicate take about 10 s a variant: their verdicts for every variant are a slow test
BIGGER = ("two-ids-duplicate", "two-ids-duplicate-2")
# every named scenario small enough to search twice per variant in a fraction of a second, and the ones above
SMALL = ("tiny", "zombie", "delayed-produce", "delayed-end-txn", "failover", "retry", "multi-partition", "offsets",
         "epoch-exhaustion", "loss", "append-failure", "crash", "faults", "rebalance", "in-flight-2",
         *(name for name in CUSTOM if name not in BIGGER))
# the fault scenarios among them, whose verdict comparisons (about two thirds of this module's searches) run in
# tests/spec/test_reduction_faults.py: a module of their own, so that two workers share the work
FAULTY = ("loss", "append-failure", "crash", "faults")
# the scenarios whose verdicts the default tier compares for every variant: small, and where the variants' bugs
# show (tests/spec/test_variants.py); every other scenario is compared at the current protocol only there, and
# for every variant under `-m slow` (the whole product: about 8 CPU minutes)
# (multi-partition, offsets and epoch-exhaustion, where no variant's bug shows, at the current protocol only;
# multi-partition at four variants under symmetry as well below)
EVERY_VARIANT_ON = ("tiny", "zombie", "failover", "delayed-end-txn", "retry", "loss")
# the reduced counts of some of them (current protocol, no symmetry); the full counts are in test_scenarios.py
PINNED_REDUCED = {"zombie": 1_544, "failover": 207, "delayed-end-txn": 2_060, "two-ids": 2_327,
                  "two-ids-timeout": 6_091, "two-ids-loss": 23_797}


def verdict_cases(names: tuple[str, ...] | list[str]) -> list[Any]:
    """(scenario, variant) for every variant; slow but for the current protocol and ``EVERY_VARIANT_ON``."""
    return [pytest.param(n, v, marks=() if v == "current" or n in EVERY_VARIANT_ON else pytest.mark.slow)
            for n in names for v in ALL_VARIANTS]


def _model(name: str, variant: str = "current") -> Model[Any]:
    return build_model(CUSTOM.get(name) or (TWO_IDS if name == "two-ids" else SCENARIOS[name]), variant)


def _safety(model: Model[Any]) -> list[str]:
    return [p.name for p in model.properties if p.expectation.value != "leads_to"]


def _search(name: str, variant: str, *, reduced: bool, symmetry: bool = False) -> CheckResult:
    return _cached_search(name, variant, reduced, symmetry)  # one cache key however the flags are passed


@functools.cache  # one search per (scenario, variant, reduction, symmetry): several tests compare the same ones
def _cached_search(name: str, variant: str, reduced: bool, symmetry: bool) -> CheckResult:
    model = _model(name, variant)
    result = check(model.partial_order() if reduced else model, properties=_safety(model), symmetry=symmetry)
    assert result.complete, result.render()
    return result


def _verdicts(name: str, variant: str, *, reduced: bool, symmetry: bool = False) -> dict[str, str]:
    result = _search(name, variant, reduced=reduced, symmetry=symmetry)
    return {v.name: v.status for v in result.verdicts} | {"deadlock": str(result.deadlock is not None)}


@functools.cache
def _graph(name: str) -> tuple[Model[Any], dict[Any, list[tuple[Any, Any]]]]:
    """Every reachable state of the full search with its labelled steps."""
    model = _model(name)
    steps: dict[Any, list[tuple[Any, Any]]] = {}
    todo = list(model.init_states())
    while todo:
        state = todo.pop()
        if state in steps:
            continue
        steps[state] = out = list(model.next_steps(state))
        todo.extend(t for _, t in out if t not in steps)
    return model, steps


def _is_own_step(action: Any) -> bool:
    return producer_index(action.actor) is not None and action.kind not in NOT_LOCAL


# --- the ample sets --------------------------------------------------------------------------------------

COMMUTING = ("zombie", "two-ids-timeout", "two-ids-duplicate-2", "two-ids-loss", "zombie-failover", "delayed-end-txn",
             "mp-duplicate-tv1", "crash", "faults")


@pytest.mark.parametrize("name", COMMUTING)
def test_a_reduced_set_commutes_with_every_other_enabled_step(name: str) -> None:
    """Wherever the reduction takes one producer's steps alone, each of them and each step left for later can
    be taken in either order, each stays enabled after the other, and both orders end in the same state."""
    _, graph = _graph(name)
    reduced = 0
    for state, steps in graph.items():
        chosen = ample_steps(state, steps)
        if len(chosen) == len(steps):
            continue
        reduced += 1
        assert chosen and all(step in steps for step in chosen)
        assert len({producer_index(a.actor) for a, _ in chosen}) == 1 and all(_is_own_step(a) for a, _ in chosen)
        later = [step for step in steps if step not in chosen]
        for t, after_t in chosen:
            from_t = dict(graph[after_t])
            for a, after_a in later:
                from_a = dict(graph[after_a])
                assert t in from_a, f"{a} disables {t}"
                assert a in from_t, f"{t} disables {a}"
                assert from_a[t] == from_t[a], f"{t} and {a} do not commute"
    assert reduced > len(graph) // 10  # the test exercises the reduction


@pytest.mark.parametrize("name", COMMUTING)
def test_no_step_taken_alone_changes_a_property(name: str) -> None:
    """C2: wherever the reduction takes one producer's steps alone, no invariant's or 'sometimes' property's
    verdict on the state changes across any of them."""
    model, graph = _graph(name)
    predicates = [p.condition for p in model.properties if p.expectation.value != "leads_to"]
    for state, steps in graph.items():
        chosen = ample_steps(state, steps)
        if len(chosen) < len(steps):
            before = [bool(p(state)) for p in predicates]
            for _, after in chosen:
                assert [bool(p(after)) for p in predicates] == before


@pytest.mark.parametrize("name", SMALL)
def test_no_cycle_is_made_of_producer_steps_only(name: str) -> None:
    """C3 by construction (spec/reduction.py): every cycle of the graph has a step that is not a producer's own,
    so every cycle of the reduced graph passes through a fully expanded state."""
    _, graph = _graph(name)
    own = nx.DiGraph((s, t) for s, steps in graph.items() for a, t in steps if _is_own_step(a))
    assert nx.is_directed_acyclic_graph(own)


def test_the_graph_has_cycles_so_the_proviso_matters() -> None:
    _, graph = _graph("loss")
    assert not nx.is_directed_acyclic_graph(nx.DiGraph((s, t) for s, steps in graph.items() for _, t in steps))


def test_shared_budgets_turn_the_reduction_off() -> None:
    """A crash, an expired batch or a rebalance left in the budget: every step is explored."""
    for name in ("crash", "rebalance"):
        _, graph = _graph(name)
        budgeted = [s for s in graph if s.budget.crash or s.budget.rebalance]
        assert budgeted and all(ample_steps(s, graph[s]) == graph[s] for s in budgeted)


def test_no_step_that_grows_the_network_is_taken_alone_while_a_duplicate_is_left() -> None:
    """On the graph with a network of two messages at most, where such a step would disable the duplicate."""
    _, graph = _graph("two-ids-duplicate-2")
    for state, steps in graph.items():
        chosen = ample_steps(state, steps)
        if len(chosen) < len(steps) and state.budget.duplicate:
            assert all(len(after.network) <= len(state.network) for _, after in chosen)


# --- verdicts --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "variant"), verdict_cases([n for n in SMALL if n not in FAULTY]))
def test_verdicts_are_those_of_the_full_search(name: str, variant: str) -> None:
    assert _verdicts(name, variant, reduced=True) == _verdicts(name, variant, reduced=False)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ALL_VARIANTS)
@pytest.mark.parametrize("name", BIGGER)
def test_verdicts_are_those_of_the_full_search_with_a_duplicate(name: str, variant: str) -> None:
    """About 4 minutes on two cores."""
    assert _verdicts(name, variant, reduced=True) == _verdicts(name, variant, reduced=False)


@pytest.mark.parametrize("variant", ["current", "zombie-not-fenced", "hanging-transaction", "tv1"])
@pytest.mark.parametrize("name", ["zombie", "two-ids-timeout", "zombie-failover", "multi-partition"])
def test_verdicts_agree_with_symmetry_as_well(name: str, variant: str) -> None:
    assert _verdicts(name, variant, reduced=True, symmetry=True) == _verdicts(name, variant, reduced=False)


def test_some_variant_is_caught_under_the_reduction() -> None:
    """The verdict comparison above is not all 'holds': bugs are found through the reduced graph too."""
    caught = {(n, v) for n in ("zombie", "failover", "delayed-end-txn") for v in ALL_VARIANTS
              if "violated" in _verdicts(n, v, reduced=True).values()}
    assert len(caught) >= 3


@pytest.mark.parametrize("name", sorted(PINNED_REDUCED))
def test_reduced_counts_are_pinned(name: str) -> None:
    full = _search(name, "current", reduced=False)
    result = _search(name, "current", reduced=True)
    assert result.complete and result.ok, result.render()
    assert result.states == PINNED_REDUCED[name] < full.states


def test_engines_agree_on_the_reduced_graph() -> None:
    model = _model("two-ids-timeout").partial_order()
    exact = check(model, symmetry=False)
    for workers in (1, 2):
        levels = check_levels(model, workers=workers, symmetry=False)
        assert (levels.states, levels.transitions, levels.ok) == (exact.states, exact.transitions, exact.ok)


def test_the_reduced_model_has_no_leads_to_property_and_says_so() -> None:
    model = build_model("zombie")
    reduced = model.partial_order()
    assert "partial-order reduced" in reduced.name
    assert all(p.expectation.value != "leads_to" for p in reduced.properties)
    assert {p.name for p in reduced.properties} == set(_safety(model))
    with pytest.raises(ValueError, match="no partial-order reduction"):
        reduced.partial_order()


# --- the command line ------------------------------------------------------------------------------------

def test_check_partial_order_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "zombie", "--partial-order", "--no-symmetry"]) == 0
    out = capsys.readouterr().out
    assert "partial-order reduced" in out and "1,544 distinct states" in out


@pytest.mark.parametrize("extra, message", [
    (["--graph-out", "g.dot"], "--partial-order cannot be used with --graph-out"),
    (["--property", "init_producer_id_completes"], "leads-to properties need: init_producer_id_completes"),
])
def test_check_partial_order_refuses_what_it_cannot_do(extra: list[str], message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "zombie", "--partial-order", *extra]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_full_is_pinned_with_symmetry_and_partial_order_to_depth_10_and_12() -> None:
    """About a minute: the exact engine and the fingerprint workers agree on the reduced graph to depth 10; the
    workers reach 133,704 states at depth 12 (141,225 with symmetry alone, tests/spec/test_symmetry.py: on full's
    first levels nearly every pair of steps is dependent, each touching what an invariant reads)."""
    model = build_model("full").partial_order()
    exact = check(model, max_depth=10)
    by_workers = check_levels(model, max_depth=10, workers=2)
    assert (exact.states, exact.transitions) == (by_workers.states, by_workers.transitions) == (23_219, 58_632)
    assert exact.ok and by_workers.ok and exact.symmetry
    deeper = check_levels(model, max_depth=12, workers=2)
    assert deeper.ok and not deeper.complete and (deeper.states, deeper.transitions) == (133_704, 357_125)
    assert deeper.level_sizes[:11] == exact.level_sizes
