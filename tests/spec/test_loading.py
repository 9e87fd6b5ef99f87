"""Issue 31: coordinator failover twice, and a transaction log of several ``__transaction_state`` partitions with a
loading window (NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS, each partition's load finishing on its own),
model-checked. Counts pinned; the new invariant with its ``sometimes`` partners, and a coordinator that answers an
id of a partition still loading, which the invariant catches."""

from __future__ import annotations

from typing import Any

import pytest

from txnspec.checker import check
from txnspec.checker.model import Model
from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import properties as props
from txnspec.spec import system as sysm
from txnspec.spec import txn_loading, values
from txnspec.spec.errors import Errors
from txnspec.spec.model import build_model
from txnspec.spec.protocol import CURRENT
from txnspec.spec.scenarios import scenario_named

# scenario -> (states at TV2, states at TV1, the action kinds it must take)
PINNED = {
    "failover-twice": (5_018, 5_064, {"failover": 2}),
    "txn-log-loading": (2_873, 2_821, {"resign": 1, "elect": 1, "load transaction-log partition": 1}),
}


@pytest.mark.parametrize("variant", ["current", "tv1"])
@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_property_holds_through_two_failovers_and_the_loading_window(name: str, variant: str) -> None:
    tv2_states, tv1_states, kinds = PINNED[name]
    result = check(build_model(name, variant), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == (tv2_states if variant == "current" else tv1_states)
    assert result.deadlock_count == 0
    for kind in kinds:  # taken, not merely allowed
        assert result.coverage.get(kind, 0) > 0, kind
    if name == "txn-log-loading":
        verdicts = {v.name: v for v in result.verdicts}
        for reached in ("nothing_cached_while_unloaded", "answered_while_loading", "answered_not_coordinator"):
            assert verdicts[reached].holds, reached  # the invariant, and its partners reached


def test_failover_twice_reaches_a_second_new_coordinator_epoch() -> None:
    system = sysm.System(scenario_named("failover-twice"), CURRENT)
    frontier = [sysm.initial_state(system)]
    known, epochs = set(frontier), set()
    while frontier:
        state = frontier.pop()
        epochs.add(state.coordinator.coordinator_epoch)
        for _, successor in sysm.next_steps(system, state):
            if successor not in known:
                known.add(successor)
                frontier.append(successor)
    assert len(known) == PINNED["failover-twice"][0] and epochs == {0, 1, 2}


def test_an_id_lives_in_its_transaction_log_partition() -> None:
    config = coord_state.CoordinatorConfig(txn_log_partitions=2)
    assert coord_state.txn_log_partition("t1", config) == 1 and coord_state.txn_log_partition("t2", config) == 0
    cs = txn_loading.emigrate(coord_state.CoordinatorState(), 1, config=config).state
    assert coord_state.ownership_error(cs, "t1", config) is Errors.NOT_COORDINATOR
    assert coord_state.ownership_error(cs, "t2", config) is Errors.NONE
    loading = txn_loading.begin_load(cs, frozenset({1}), config=config).state
    assert loading.coordinator_epoch == 1
    assert coord_state.ownership_error(loading, "t1", config) is Errors.COORDINATOR_LOAD_IN_PROGRESS
    emigrated = txn_loading.emigrate(loading, 1, config=config).state  # a cancelled load leaves the partition unled
    assert txn_loading.finish_load(emigrated, 1, config=config).state.not_led == frozenset({1})


def _answers_while_loading(cs: Any, request: Any, **kwargs: Any) -> Any:
    """InitProducerId that does not look at the transaction-log partition's state: it creates (or bumps) the id's
    metadata while the partition is still loading, which the load then overwrites."""
    served = values.replace(cs, loading=frozenset(), not_led=frozenset())
    result = coord.handle_init_producer_id(served, request, **kwargs)
    return coord_state.CoordinatorResult(values.replace(result.state, loading=cs.loading, not_led=cs.not_led),
                                         result.response, result.appended, result.markers)


def test_a_coordinator_answering_during_the_load_breaks_nothing_cached_while_unloaded() -> None:
    """Sabotage: the broken handler is caught, with a counterexample through the loading window."""
    broken = CURRENT.but("answers-while-loading", "", handle_init_producer_id=_answers_while_loading)
    system = sysm.System(scenario_named("txn-log-loading"), broken)
    model: Model[Any] = Model(name="broken txn-log-loading", init_states=lambda: (sysm.initial_state(system),),
                              next_steps=lambda state: sysm.next_steps(system, state),
                              properties=props.properties(system))
    result = check(model, properties=["nothing_cached_while_unloaded"], symmetry=False)
    verdict = next(v for v in result.verdicts if v.name == "nothing_cached_while_unloaded")
    assert not verdict.holds and verdict.counterexample is not None
    assert any(action is not None and action.kind.value == "resign" for action, _ in verdict.counterexample.steps)
