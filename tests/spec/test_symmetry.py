"""Symmetry reduction of the Kafka model (spec/symmetry.py): the renamings are automorphisms of the transition
system, the reduced search keeps one state per orbit, and every verdict and counterexample length is the one of the
full search, for the current protocol and every variant."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import pytest

from txnspec.checker import check
from txnspec.checker.model import Model
from txnspec.checker.report import CheckResult
from txnspec.cli import main
from txnspec.spec import symmetry as sym
from txnspec.spec.model import build_model
from txnspec.spec.scenarios import SCENARIOS, Scenario
from txnspec.spec.variants import VARIANTS, variant_named

variant_named("current")  # loads every variant module
ALL_VARIANTS = sorted(VARIANTS)

# scenarios whose transactional ids are interchangeable (no named scenario has two alike): plain, with a
# transaction timeout (the fault names an id), and KIP-447 group members without a rebalance (member ids move)
TWO_IDS = Scenario("two-ids", "two transactional ids, one instance each, one partition", transactional_ids=("t1", "t2"),
                   max_epoch=4, max_sequence=3)
TWO_IDS_TIMEOUT = TWO_IDS.with_(name="two-ids-timeout", faults={"timeout": 1})
TWO_IDS_GROUP = Scenario("two-ids-group", "two group members committing offsets", transactional_ids=("t1", "t2"),
                         records_per_transaction=0, commit_offsets=True, group_members=True, max_epoch=4,
                         max_sequence=3)
# the faults no named scenario with two partitions budgets: a duplicate, a batch the client gives up on
MP_DUPLICATE = SCENARIOS["multi-partition"].with_(name="mp-duplicate", faults={"duplicate": 1})
MP_EXPIRE = SCENARIOS["multi-partition"].with_(name="mp-expire", faults={"expire_batch": 1})
CUSTOM = {s.name: s for s in (TWO_IDS, TWO_IDS_TIMEOUT, TWO_IDS_GROUP, MP_DUPLICATE, MP_EXPIRE)}
# bigger: the zombie pair as group members (member ids move with instances), and 4 renamings with a crash
BIGGER = {s.name: s for s in (
    SCENARIOS["zombie"].with_(name="zombie-group", commit_offsets=True, group_members=True),
    SCENARIOS["zombie"].with_(name="zombie-crash-2p", partitions=("p0", "p1"), faults={"crash": 1}))}

# every scenario with a nontrivial group small enough to enumerate without symmetry in a second or two
SMALL = ("multi-partition", "failover", "zombie", "loss", "crash", "append-failure", *CUSTOM)

# the orbits of each small scenario's reachable states under the current protocol (the reduced count)
PINNED_REDUCED = {"multi-partition": 91, "failover": 110, "zombie": 983, "loss": 2_299, "crash": 3_578,
                  "append-failure": 2_539, "two-ids": 1_418, "two-ids-timeout": 5_690, "two-ids-group": 1_267,
                  "mp-duplicate": 1_706, "mp-expire": 233}


def _model(name: str, variant: str = "current") -> Model[Any]:
    return build_model(CUSTOM.get(name) or BIGGER.get(name) or SCENARIOS[name], variant)


def _safety(model: Model[Any]) -> list[str]:
    return [p.name for p in model.properties if p.expectation.value != "leads_to"]


@functools.cache
def _reachable(name: str, variant: str = "current") -> tuple[Model[Any], dict[Any, frozenset[Any]]]:
    """Every reachable state, with its successors, by a search without symmetry."""
    model = _model(name, variant)
    successors: dict[Any, frozenset[Any]] = {}
    todo = list(model.init_states())
    while todo:
        state = todo.pop()
        if state in successors:
            continue
        successors[state] = after = frozenset(t for _, t in model.next_steps(state))
        todo.extend(t for t in after if t not in successors)
    return model, successors


@functools.cache  # one search per (scenario, variant, properties, symmetry): the orbit counts, the verdict
def _search(name: str, variant: str, properties: tuple[str, ...], symmetry: bool) -> CheckResult:  # comparisons
    return check(_model(name, variant), properties=list(properties), symmetry=symmetry)


def _group(model: Model[Any]) -> sym.Group:
    group = model.metadata["symmetry_group"]
    assert group is not None and model.symmetry is not None
    return group  # type: ignore[no-any-return]


# --- the group of a scenario -------------------------------------------------------------------------------

def test_the_group_is_derived_from_the_scenario() -> None:
    sizes = {name: None if sym.group_of(s) is None else sym.group_of(s).size()  # type: ignore[union-attr]
             for name, s in {**SCENARIOS, **CUSTOM}.items()}
    # two data partitions swap; the instances of one id swap; ids with as many instances swap
    assert {n: k for n, k in sizes.items() if k} == {
        "default": 2, "zombie": 2, "failover": 2, "multi-partition": 2, "large": 2, "loss": 2, "append-failure": 2,
        "crash": 2, "full": 2, "two-ids": 2, "two-ids-timeout": 2, "two-ids-group": 2, "mp-duplicate": 2,
        "mp-expire": 2}
    # rebalance evicts the first producer's member: producer 0 and its id stay put, nothing else is alike
    assert SCENARIOS["rebalance"].budget("rebalance") and sizes["rebalance"] is None
    # full: t1 has two instances and t2 one, so the ids are not alike; its rebalance evicts the first instance's
    # member, so t1's instances are not alike either: only the partitions swap
    full = _group(build_model("full"))
    assert full.ids == () and full.fixed == frozenset({0}) and full.partitions == ("p0", "p1")
    assert build_model("tiny").symmetry is None and build_model("offsets").symmetry is None


def test_an_illegal_transition_is_renamed_by_its_transactional_id_field() -> None:
    """The coordinator's illegal-transition records are renamed as values (nothing parses their text)."""
    from dataclasses import replace

    from txnspec.spec.coordinator_state import IllegalTransition
    from txnspec.spec.model import build_system
    from txnspec.spec.system import initial_state

    group = sym.group_of(TWO_IDS)
    assert group is not None
    (swap,) = [r for r in group.renamings() if r.names.get("t1") == "t2"]
    state = initial_state(build_system(TWO_IDS))
    notes = (IllegalTransition("t1", "EndTxn found state Dead"), IllegalTransition("t2", "t1 is no reason"))
    renamed = swap(replace(state, coordinator=replace(state.coordinator, illegal_transitions=notes)))
    assert renamed.coordinator.illegal_transitions == (IllegalTransition("t2", "EndTxn found state Dead"),
                                                       IllegalTransition("t1", "t1 is no reason"))


def test_names_that_collide_with_other_strings_of_the_state_give_no_symmetry() -> None:
    assert sym.group_of(SCENARIOS["multi-partition"].with_(partitions=("p0", "coordinator"))) is None
    assert sym.group_of(SCENARIOS["multi-partition"].with_(partitions=("p0", "t1"))) is None


# --- automorphism ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "variant"), [
    *((n, v) if (n, v) != ("two-ids-timeout", "tv1") else pytest.param(n, v, marks=pytest.mark.slow)
      for n in SMALL for v in ("current", "tv1")),
    *(pytest.param(n, v, marks=pytest.mark.slow) for n in BIGGER for v in ("current", "tv1"))])
def test_every_renaming_maps_the_reachable_states_onto_themselves_and_commutes_with_successors(
        name: str, variant: str) -> None:
    """Slow for the bigger ones: about 2 minutes (zombie-crash-2p: 608,476 states at TV1); and for two-ids-timeout
    at TV1 (about 4 CPU seconds: the ids' swap is checked at TV1 on two-ids, the timeout's at TV2)."""
    model, successors = _reachable(name, variant)
    (initial,) = model.init_states()
    for r in _group(model).renamings():
        assert r(initial) == initial
        for state, after in successors.items():
            image = r(state)
            assert image in successors, (r, model.describe_state(state))
            assert successors[image] == {r(t) for t in after}, (r, model.describe_state(state))


@pytest.mark.parametrize("name", SMALL)
def test_the_reduced_search_keeps_one_state_per_orbit(name: str) -> None:
    model, successors = _reachable(name)
    renamings = _group(model).renamings()
    orbits = {frozenset({state, *(r(state) for r in renamings)}) for state in successors}
    reduced = _search(name, "current", tuple(_safety(model)), True)
    assert reduced.symmetry and reduced.complete
    assert reduced.states == len(orbits) == PINNED_REDUCED[name]
    assert _search(name, "current", tuple(_safety(model)), False).states == len(successors)
    for orbit in list(orbits)[:500]:  # the representative is a member, the same for every member, its own
        representatives = {model.symmetry(state) for state in orbit}  # type: ignore[misc]
        assert len(representatives) == 1 and representatives <= orbit
        (representative,) = representatives
        assert model.symmetry(representative) == representative  # type: ignore[misc]


def test_the_order_key_tells_every_state_apart() -> None:
    _, successors = _reachable("zombie")
    keys = {tuple(sym._component_key(n, getattr(s, n)) for n in sym._COMPONENTS) for s in successors}
    assert len(keys) == len(successors)


# --- equal verdicts ----------------------------------------------------------------------------------------

def _outcome(result: CheckResult) -> tuple[Any, ...]:
    """What a search concludes: each verdict with the length of its counterexample or witness (shortest, as
    breadth first finds them), and the deadlocks' shortest path."""
    verdicts = {v.name: (v.holds, None if v.counterexample is None else len(v.counterexample.steps))
                for v in result.verdicts}
    return verdicts, result.deadlock_count > 0, None if result.deadlock is None else len(result.deadlock.steps)


def _replays(model: Model[Any], steps: Iterable[tuple[Any, Any]]) -> bool:
    """A counterexample is a behaviour of the model: each step is a successor of the one before."""
    (_, first), *rest = steps
    if first not in set(model.init_states()):
        return False
    for action, state in rest:
        if (action, state) not in set(model.next_steps(first)):
            return False
        first = state
    return True


def _agree(name: str, variant: str, properties: list[str] | None = None) -> CheckResult:
    model = _model(name, variant)
    names = tuple(properties or _safety(model))
    full = _search(name, variant, names, False)
    reduced = _search(name, variant, names, True)
    assert reduced.symmetry and not full.symmetry
    assert _outcome(reduced) == _outcome(full)
    for verdict in reduced.verdicts:  # a lasso's steps past its prefix follow the quotient graph (up to renaming)
        if verdict.counterexample is not None and verdict.expectation != "leads_to":
            assert _replays(model, verdict.counterexample.steps), verdict.name
    return reduced


def _cases(names: Iterable[str]) -> list[Any]:
    return [(n, v) for n in names for v in ALL_VARIANTS]


# compared for every variant in the default tier: small, with both kinds of renaming (partitions, instances);
# every other small scenario at the current protocol and TV1 there, and for every variant under `-m slow`
EVERY_VARIANT_ON = ("multi-partition", "failover", "zombie", "mp-expire")


def _verdict_cases(names: Iterable[str]) -> list[Any]:
    return [pytest.param(n, v, marks=() if v in ("current", "tv1") or n in EVERY_VARIANT_ON else pytest.mark.slow)
            for n, v in _cases(names)]


@pytest.mark.parametrize(("name", "variant"), _verdict_cases(n for n in SMALL if n != "two-ids-timeout"))
def test_verdicts_and_counterexample_lengths_agree_with_and_without_symmetry(name: str, variant: str) -> None:
    _agree(name, variant)


def test_a_bug_is_found_as_short_and_as_real_under_symmetry() -> None:
    reduced = _agree("zombie", "zombie-not-fenced")
    assert not reduced.ok and not reduced.verdict("fenced_producer_never_commits").holds


@pytest.mark.parametrize(("name", "variant"), [("multi-partition", "current"), ("zombie", "current"),
                                               ("failover", "hanging-transaction"), ("two-ids", "current"),
                                               ("zombie", "zombie-not-fenced"), ("crash", "tv1"),
                                               ("failover", "failover-without-markers")])
def test_leads_to_verdicts_agree_on_the_quotient_graph(name: str, variant: str) -> None:
    """Fairness classes are action kinds, which name no actor: the quotient graph gives the same verdicts (a lasso
    found on it closes up to a renaming; failover-without-markers leaves a prepared transaction for ever)."""
    reduced = _agree(name, variant, properties=[p.name for p in _model(name, variant).properties])
    assert reduced.verdict("prepared_transactions_complete").holds is (variant != "failover-without-markers")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), [*_cases(["two-ids-timeout"]), *(
    ("default", v) for v in ("current", "failover-without-markers", "zombie-not-fenced", "zombie-offsets-not-fenced"))])
def test_verdicts_agree_on_the_bigger_scenarios(name: str, variant: str) -> None:
    """About 40 s. The other variants explore a million states or more on default (8 minutes in all, the
    same verdicts and lengths: docs/spec.md, Symmetry)."""
    _agree(name, variant)


# --- pinned counts and the command line -------------------------------------------------------------------

@pytest.mark.slow
def test_default_is_pinned_with_symmetry() -> None:
    """About 15 CPU seconds, so slow: the small scenarios' orbit counts above are the default tier's pins (the
    unreduced 200,342 states: tests/spec/test_scenarios.py)."""
    result = check(build_model("default"), properties=_safety(build_model("default")))
    assert result.complete and result.ok and result.symmetry
    assert result.states == 101_173


def test_check_turns_symmetry_off_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["check", "--scenario", "multi-partition", "--json", "--no-liveness"]) == 0
    on = json.loads(capsys.readouterr().out)
    assert main(["check", "--scenario", "multi-partition", "--json", "--no-liveness", "--no-symmetry"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert (on["symmetry"], on["states"]) == (True, 91) and (off["symmetry"], off["states"]) == (False, 155)


@pytest.mark.slow
def test_full_is_pinned_with_symmetry_to_depth_12_and_14() -> None:
    """A few minutes: 141,225 classes to depth 12 (230,706 states without symmetry: full's rebalance fixes producer 0,
    so only its partitions swap), the exact engine and the fingerprint workers agreeing; then the workers alone to
    depth 14 (757,004 classes: the deepest the suite affords of a scenario whose states grow about 2.2x a level)."""
    from txnspec.checker.levels import check_levels

    model = build_model("full")
    exact = check(model, properties=_safety(model), max_depth=12)
    by_workers = check_levels(model, properties=_safety(model), max_depth=12, workers=2)
    assert (exact.states, exact.transitions) == (by_workers.states, by_workers.transitions) == (141_225, 410_412)
    assert exact.ok and by_workers.ok and exact.symmetry and by_workers.symmetry
    deeper = check_levels(model, properties=_safety(model), max_depth=14, workers=2)
    assert deeper.ok and not deeper.complete and (deeper.states, deeper.transitions) == (757_004, 2_379_397)
    assert deeper.level_sizes[-3:] == (82_689, 190_389, 425_390)


@pytest.mark.slow
def test_large_is_pinned_with_symmetry() -> None:
    """About 3 minutes with two workers: 2,596,830 classes of the 5,176,988 states (by Burnside's lemma, 16,672
    states are their own image under the swap of p0 and p1)."""
    from txnspec.checker.levels import check_levels

    model = build_model("large")
    result = check_levels(model, properties=_safety(model), workers=2)
    assert result.complete and result.ok and result.symmetry, result.render()
    assert (result.states, result.transitions) == (2_596_830, 10_195_966)
