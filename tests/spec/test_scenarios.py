"""Pinned state counts: a change in a count means the spec changed (say why in the commit)."""

from __future__ import annotations

import pytest

from txnspec.checker import check
from txnspec.spec.model import build_model
from txnspec.spec.scenarios import SCENARIOS, Scenario

PINNED = {
    "tiny": 27,
    "zombie": 1_964,
    "delayed-produce": 819,
    "delayed-end-txn": 2_172,
    "failover": 208,
    "retry": 841,
    "epoch-exhaustion": 403,
    "rebalance": 9_048,
    "in-flight-2": 3_684,
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.quick) if n == "tiny" else n
                                  for n in sorted(PINNED)])
def test_every_property_holds_on_the_pinned_number_of_states(name: str) -> None:
    result = check(build_model(name), symmetry=False)  # the spec's count (reduced: tests/spec/test_symmetry.py)
    assert result.complete and result.ok, result.render()
    assert result.states == PINNED[name]
    assert result.deadlock_count == 0

# the scenarios of the faults loss, append_failure and crash (issue 20), at both transaction versions
PINNED_FAULTS = {
    ("loss", "current"): 4352, ("loss", "tv1"): 5625,
    ("append-failure", "current"): 4977, ("append-failure", "tv1"): 6935,
    ("crash", "current"): 7104, ("crash", "tv1"): 9785,
    ("faults", "current"): 31130, ("faults", "tv1"): 44426,
    ("admin-abort", "current"): 2401, ("admin-abort", "tv1"): 3292,  # issue 32: Admin.abortTransaction
}
FAULT_KINDS = {"loss": ("lose",), "append-failure": ("append fails",), "crash": ("crash",),
               "faults": ("lose", "append fails", "crash"), "admin-abort": ("crash", "admin abort")}


@pytest.mark.parametrize(("name", "variant"), sorted(PINNED_FAULTS))
def test_every_property_holds_under_loss_append_failure_and_crash(name: str, variant: str) -> None:
    result = check(build_model(name, variant), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == PINNED_FAULTS[(name, variant)]
    assert result.deadlock_count == 0
    for kind in FAULT_KINDS[name]:  # the budgeted fault is taken, not merely allowed
        assert result.coverage.get(kind, 0) > 0, kind


def test_every_fault_of_the_model_is_budgeted_by_some_pinned_scenario() -> None:
    from txnspec.spec.scenarios import FAULTS

    pinned = set(PINNED) | {name for name, _ in PINNED_FAULTS} | {"default"}
    pinned |= {"producer-expiry", "id-expiry", "plain-commit"}  # pinned in tests/spec/test_expiry.py
    pinned |= {"failover-twice", "txn-log-loading"}  # pinned in tests/spec/test_loading.py
    budgeted = {fault for name in pinned for fault, budget in SCENARIOS[name].faults.items() if budget > 0}
    assert budgeted == set(FAULTS)


@pytest.mark.slow
def test_default_scenario_is_pinned_too() -> None:
    """About 30 CPU seconds, so slow: the one scenario the README's main job checks (200,342 states, pinned again
    with the client's agreement under -m slow). Its faults, a duplicate and a timeout, are budgeted by the pinned
    scenarios above (retry, delayed-produce), which the default tier checks exhaustively, every property included."""
    result = check(build_model("default"), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == SCENARIOS["default"].expected_states


@pytest.mark.slow
def test_five_batches_in_flight_are_pinned_too() -> None:
    """About 10 CPU seconds, so slow: Kafka's default max.in.flight.requests.per.connection and the broker's
    five-batch window (97,978 states). The default tier pins in-flight-2 above, which takes the same out-of-order
    retries (tests/spec/test_client_agreement.py); in-flight-5 alone holds five batches of one epoch, which the
    replay of its walks on the implementation checks in the default tier (tests/conformance/test_replay.py)."""
    result = check(build_model("in-flight-5"))
    assert result.complete and result.ok, result.render()
    assert result.states == SCENARIOS["in-flight-5"].expected_states
    assert result.deadlock_count == 0


@pytest.mark.quick
def test_tiny_takes_every_protocol_step_it_can() -> None:
    result = check(build_model("tiny"))
    for kind in ("initTransactions", "deliver InitProducerId", "deliver EndTxn", "deliver Produce",
                 "deliver WriteTxnMarkers", "deliver WriteTxnMarkersResponse", "abortTransaction"):
        assert result.coverage.get(kind, 0) > 0, kind


def test_a_state_cap_gives_an_incomplete_verdict_not_a_pass() -> None:
    result = check(build_model("zombie"), max_states=100)
    assert not result.complete
    assert all(v.holds is not True or v.expectation == "sometimes" for v in result.verdicts)
    assert "INCOMPLETE" in result.summary()


@pytest.mark.parametrize(("changes", "message"), [
    ({"partitions": ()}, "at least one partition"),
    ({"transaction_version": 3}, "transaction_version"),
    ({"faults": {"meteor": 1}}, "unknown fault"),
    ({"max_epoch": 1}, "max_epoch"),
    ({"records_per_transaction": 0}, "records_per_transaction"),
    ({"group_members": True}, "group_members needs commit_offsets"),
    ({"faults": {"rebalance": 1}, "commit_offsets": True}, "needs group_members"),
])
@pytest.mark.quick
def test_impossible_scenarios_are_refused_with_a_clear_message(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scenario("bad", "a bad one", **changes)  # type: ignore[arg-type]


def test_instances_per_id_gives_each_transactional_id_its_own_count_of_producer_instances() -> None:
    full = SCENARIOS["full"]
    assert full.producer_transactional_ids == ("t1", "t1", "t2") and full.has_zombies
    assert not SCENARIOS["rebalance"].has_zombies and SCENARIOS["zombie"].has_zombies
    (state,) = build_model("full").init_states()
    assert [(p.index, p.transactional_id) for p in state.producers] == [(0, "t1"), (1, "t1"), (2, "t2")]
    assert "producer_fenced" in {p.name for p in build_model("full").properties}  # a zombie's sometimes partner
    with pytest.raises(ValueError, match="instances_per_id"):
        Scenario("bad", "", transactional_ids=("t1", "t2"), instances_per_id=(2,))
    with pytest.raises(ValueError, match="instances_per_id"):
        Scenario("bad", "", instances_per_id=(0,))


# full's level sizes to depth 12 (no symmetry): still growing about 2.5x a level, far from complete
FULL_LEVELS = (1, 5, 16, 40, 86, 184, 431, 1_108, 3_004, 8_226, 22_000, 56_543, 139_062)


@pytest.mark.slow
def test_full_is_checked_to_depth_12_on_pinned_level_sizes() -> None:
    """About a minute with two workers on a quiet machine: the scenario bugs live in (two ids, a zombie, two
    transactions each with offsets as group members, a duplicate, a timeout, a failover, a rebalance) is beyond an
    exhaustive search, so its level sizes are pinned at a depth bound, and the exact engine must agree with the
    fingerprint workers there."""
    from txnspec.checker.levels import check_levels

    model = build_model("full")
    safety = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    by_workers = check_levels(model, properties=safety, max_depth=12, workers=2, symmetry=False)
    assert by_workers.ok and not by_workers.complete, by_workers.render()
    assert (by_workers.states, by_workers.transitions, by_workers.level_sizes) == (230_706, 644_634, FULL_LEVELS)
    assert sum(FULL_LEVELS) == by_workers.states
    exact = check(model, properties=safety, max_depth=12, symmetry=False)
    assert (exact.states, exact.transitions, exact.level_sizes, exact.verdict_text) == \
        (230_706, 644_634, FULL_LEVELS, by_workers.verdict_text)


@pytest.mark.slow
def test_large_is_checked_exhaustively_by_two_workers() -> None:
    """About 4 to 8 minutes: default with a coordinator failover as well, every safety property holding."""
    from txnspec.checker.levels import check_levels

    model = build_model("large")
    safety = [p.name for p in model.properties if p.expectation.value != "leads_to"]
    result = check_levels(model, properties=safety, workers=2, symmetry=False)
    assert result.complete and result.ok, result.render()
    assert (result.states, result.transitions) == (5_176_988, 20_342_089)
