"""One client: the model checker's producer (spec/producer.py) is a named projection of spec/client.py.

For every reachable state of each scenario below, at transaction version 2 and 1, every step a producer takes
(the application's calls, the answers it is delivered, its retries, a crash, a batch given up on) is replayed on
spec/client.py's ``TransactionManager``, lifted from the producer by ``spec.projection.lift``: the requests sent,
the exception thrown and the client after the step, seen through ``spec.projection.View``, must be the model's;
the lift of every reachable producer must have sent what it can (spec/client.py's Sender sends nothing more).
Where they differ, the difference is one of ``KNOWN_DIFFERENCES``, with the number of (state, step) pairs
pinned: a new difference, or a listed one that disappears, fails the test. The number of states and of
(state, step) pairs compared is pinned per scenario.
"""

from __future__ import annotations

import pytest

from txnspec.spec import client_errors as cl_errors
from txnspec.spec import client_state as cl_state
from txnspec.spec import producer as pr
from txnspec.spec import projection as pj
from txnspec.spec import system as sysm
from txnspec.spec.client_agreement import KNOWN_DIFFERENCES, agreement
from txnspec.spec.errors import Errors
from txnspec.spec.scenarios import scenario_named
from txnspec.spec.system_state import System
from txnspec.spec.values import clear_caches

OOO_RETRY = ("Produce answered OUT_OF_ORDER_SEQUENCE_NUMBER", "retrying")
LOSSY = "+loss"  # the scenario with a lost message as well: a batch given up on while waiting for its retry

# (scenario, transaction version) -> (states, (state, step) pairs compared, {difference: pairs})
FAST: dict[tuple[str, int], tuple[int, int, dict[pj.Difference, int]]] = {
    ("tiny", 2): (27, 20, {}), ("tiny", 1): (31, 24, {}),
    ("zombie", 2): (1_964, 3_116, {}), ("zombie", 1): (2_824, 4_472, {}),
    ("delayed-produce", 2): (819, 1_008, {}), ("delayed-produce", 1): (3_349, 4_251, {}),
    ("delayed-produce" + LOSSY, 2): (5_557, 7_338, {}), ("delayed-produce" + LOSSY, 1): (23_126, 30_651, {}),
    ("delayed-end-txn", 2): (2_172, 2_690, {}), ("delayed-end-txn", 1): (4_400, 5_732, {}),
    ("failover", 2): (208, 128, {}), ("failover", 1): (208, 136, {}),
    ("retry", 2): (841, 1_029, {}), ("retry", 1): (1_334, 1_610, {}),
    ("multi-partition", 2): (155, 138, {}), ("multi-partition", 1): (207, 204, {}),
    ("offsets", 2): (89, 72, {}), ("offsets", 1): (131, 119, {}),
    ("epoch-exhaustion", 2): (403, 336, {}), ("epoch-exhaustion", 1): (495, 458, {}),
    ("in-flight-2", 2): (3_684, 6_478, {OOO_RETRY: 46}), ("in-flight-2", 1): (7_320, 11_242, {OOO_RETRY: 15}),
    ("crash", 2): (7_104, 8_296, {}), ("crash", 1): (9_785, 11_469, {}),
    ("loss", 2): (4_352, 3_259, {}), ("loss", 1): (5_625, 4_795, {}),
    # issue 31: NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS answered to the client, two failovers
    ("failover-twice", 2): (5_018, 3_466, {}), ("failover-twice", 1): (4_750, 3_632, {}),
    ("txn-log-loading", 2): (2_873, 2_651, {}), ("txn-log-loading", 1): (2_657, 2_529, {}),
}
SLOW: dict[tuple[str, int], tuple[int, int, dict[pj.Difference, int]]] = {
    ("append-failure", 2): (4_977, 5_157, {}), ("append-failure", 1): (6_935, 7_737, {}),
    ("faults", 2): (31_130, 38_317, {}), ("faults", 1): (44_426, 54_698, {}),
    ("rebalance", 2): (9_048, 11_855, {}), ("rebalance", 1): (10_568, 14_467, {}),
    ("in-flight-5", 2): (97_978, 284_690, {OOO_RETRY: 3_578}),
    ("default", 2): (200_342, 322_049, {}),
}


def _system(name: str, transaction_version: int) -> System:
    scenario = scenario_named(name.removesuffix(LOSSY))
    if name.endswith(LOSSY):
        scenario = scenario.with_(faults={**scenario.faults, "loss": 1})
    return System(scenario.with_(transaction_version=transaction_version))


def _agrees(name: str, transaction_version: int, pinned: tuple[int, int, dict[pj.Difference, int]]) -> None:
    found = agreement(_system(name, transaction_version))
    assert found.unsettled == 0
    assert (found.states, found.pairs, found.differences) == pinned
    assert set(found.differences) <= set(KNOWN_DIFFERENCES)


@pytest.mark.parametrize(("name", "transaction_version"), sorted(FAST))
def test_the_projected_client_agrees_on_every_reachable_step(name: str, transaction_version: int) -> None:
    _agrees(name, transaction_version, FAST[(name, transaction_version)])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "transaction_version"), sorted(SLOW))
def test_the_projected_client_agrees_on_the_bigger_scenarios(name: str, transaction_version: int) -> None:
    _agrees(name, transaction_version, SLOW[(name, transaction_version)])


def test_every_known_difference_shows_in_a_fast_scenario_and_says_why() -> None:
    shown = {d for _, _, differences in FAST.values() for d in differences}
    assert shown == set(KNOWN_DIFFERENCES)
    assert all(len(reason) > 40 for reason in KNOWN_DIFFERENCES.values())


def test_the_states_compared_are_the_pinned_ones() -> None:
    for (name, version), (states, _, _) in {**FAST, **SLOW}.items():
        expected = _system(name, version).scenario.expected_states if not name.endswith(LOSSY) else None
        if version == 2 and expected is not None:
            assert states == expected, name


def test_the_lift_of_a_new_producer_is_a_new_client() -> None:
    system = _system("tiny", 1)
    p = sysm.initial_state(system).producers[0]
    lifted = pj.lift(system.client, p)
    assert lifted == cl_state.ClientState("t1", transaction_version=1)
    assert pj.settled(system.client, p, frozenset())


@pytest.fixture
def fresh_caches() -> object:
    """The model memoises its client's steps: a patched rule must not meet results of the real one."""
    clear_caches()
    yield None
    clear_caches()


def test_a_producer_that_breaks_a_rule_is_caught(monkeypatch: pytest.MonkeyPatch, fresh_caches: object) -> None:
    """The bug this comparison first found: a Produce answered NOT_ENOUGH_REPLICAS (the TV1 leader's answer while
    the transaction is being prepared) failing its batch, where Kafka's Sender retries it."""
    real = cl_errors.classify_produce_error

    def failing(error: Errors, earlier_in_flight: bool) -> cl_errors.Reaction:
        if error is Errors.NOT_ENOUGH_REPLICAS:
            return cl_errors.Reaction.ABORTABLE
        return real(error, earlier_in_flight)

    monkeypatch.setattr(pr, "classify_produce_error", failing)
    found = agreement(_system("delayed-end-txn", 1))
    answered = "Produce answered NOT_ENOUGH_REPLICAS"
    assert {aspect for step, aspect in found.differences if step == answered} >= {"state", "batches"}
