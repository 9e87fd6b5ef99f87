"""Several batches in flight per partition (``Scenario.max_in_flight``): the client's sequence handling and the
broker's five-batch duplicate window, step by step on the scenarios in-flight-2 and in-flight-5."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from txnspec.spec import system as sysm
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.errors import Errors
from txnspec.spec.messages import Produce, ProduceResponse
from txnspec.spec.model import build_system
from txnspec.spec.producer import receive
from txnspec.spec.scenarios import SCENARIOS, Scenario
from txnspec.spec.system_state import replace_producer

K = ActionKind
Pick = Callable[[Action], bool]


def take(system: sysm.System, state: sysm.SystemState, *picks: Pick) -> sysm.SystemState:
    """Take, in order, the one enabled action each ``pick`` accepts."""
    for pick in picks:
        options = [nxt for action, nxt in sysm.next_steps(system, state) if pick(action)]
        enabled = [str(a) for a, _ in sysm.next_steps(system, state)]
        assert len(options) == 1, f"{len(options)} enabled actions match: {enabled}"
        state = options[0]
    return state


def kind(k: ActionKind) -> Pick:
    return lambda a: a.kind is k


def produce(seq: int, k: ActionKind = K.DELIVER_PRODUCE) -> Pick:
    """The delivery (or duplication, or retry) of the Produce with base sequence ``seq``."""
    return lambda a: a.kind is k and isinstance(a.body, Produce) and a.body.base_sequence == seq


def awaited_produce(seq: int) -> Pick:
    """The delivery of the Produce with base sequence ``seq`` the client waits for (not a duplicated copy)."""
    return lambda a: produce(seq)(a) and a.awaited is not False


def answer(seq: int) -> Pick:
    return lambda a: a.kind is K.DELIVER_PRODUCE_RESPONSE and a.message is not None and a.message.context[3] == seq


def in_transaction(system: sysm.System, sends: int) -> sysm.SystemState:
    state = take(system, sysm.initial_state(system), kind(K.INIT_TRANSACTIONS), kind(K.DELIVER_INIT_PRODUCER_ID),
                 kind(K.DELIVER_INIT_PRODUCER_ID_RESPONSE), kind(K.BEGIN_TRANSACTION))
    return take(system, state, *[kind(K.SEND)] * sends)


def produces(state: sysm.SystemState) -> list[int]:
    return sorted(e.body.base_sequence for e in state.network if isinstance(e.body, Produce))


def test_up_to_max_in_flight_batches_go_at_once_and_the_next_waits_for_an_answer() -> None:
    two = build_system("in-flight-2")
    state = in_transaction(two, 3)
    assert produces(state) == [0, 1]  # the third record waits: two batches are in flight
    state = take(two, state, produce(0), answer(0))
    assert produces(state) == [1, 2]


def test_five_in_flight_and_a_duplicate_older_than_the_last_batch_is_recognised() -> None:
    five = build_system("in-flight-5")
    state = take(five, in_transaction(five, 1), produce(0, K.DUPLICATE), *[kind(K.SEND)] * 4)
    assert produces(state) == [0, 0, 1, 2, 3, 4]
    for seq in range(5):
        state = take(five, state, awaited_produce(seq))
    # the copy of batch 0 arrives after batches 0 to 4 were appended: the fifth-newest batch of the window
    state = take(five, state, produce(0))
    answers = [e.body for e in state.network if isinstance(e.body, ProduceResponse) and e.context[3] == 0]
    assert [(r.error, r.duplicate, r.base_offset) for r in answers] == [
        (Errors.NONE, False, 0), (Errors.NONE, True, 0)]
    assert len(state.partition("p0").log) == 5  # nothing appended twice


def test_an_out_of_order_batch_is_retried_only_once_the_earlier_one_is_done() -> None:
    two = build_system("in-flight-2")
    state = take(two, in_transaction(two, 2), produce(1))  # batch 1 overtakes batch 0
    response = next(e.body for e in state.network if isinstance(e.body, ProduceResponse))
    assert response.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    state = take(two, state, answer(1))
    p = state.producers[0]
    assert p.phase is sysm.COMMITTING or p.phase is sysm.IN_TRANSACTION  # retriable: no error state
    assert len(p.in_flight) == 2  # batch 1 waits for its retry with its sequence
    assert not [a for a, _ in sysm.next_steps(two, state) if a.kind is K.RETRY]  # batch 0 is still in flight
    state = take(two, state, produce(0), answer(0))
    state = take(two, state, produce(1, K.RETRY), produce(1), answer(1))
    assert [b.base_sequence for b in state.partition("p0").log] == [0, 1]
    assert not state.producers[0].in_flight


def test_an_out_of_order_answer_to_the_first_batch_in_flight_fails_it() -> None:
    """``TransactionManager.canRetry``: the next batch answered OUT_OF_ORDER_SEQUENCE_NUMBER is a gap: abort."""
    two = build_system("in-flight-2")
    producer = in_transaction(two, 0).producers[0]
    config = two.client
    first, second = ("p0", 0, 0, 0), ("p0", 0, 0, 1)
    busy = replace(producer, in_flight=frozenset({first, second}))
    out_of_order = ProduceResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
    later = receive(config, busy, out_of_order, second)
    assert later is not None and later[0].phase is sysm.IN_TRANSACTION and later[0].in_flight == busy.in_flight
    earliest = receive(config, busy, out_of_order, first)
    assert earliest is not None and earliest[0].phase is sysm.ABORTABLE_ERROR


def test_no_abort_while_a_failed_commit_still_has_batches_in_flight() -> None:
    """commitTransaction's result completes only once no batch is incomplete (TransactionManager.nextRequest)."""
    two = build_system("in-flight-2")
    state = take(two, in_transaction(two, 3), kind(K.COMMIT_TRANSACTION), produce(1), answer(1))
    assert state.producers[0].phase is sysm.COMMITTING  # batch 0 still in flight: batch 1 retries
    failed = replace_producer(state, replace(state.producers[0], phase=sysm.ABORTABLE_ERROR))
    assert not [a for a, _ in sysm.next_steps(two, failed) if a.kind is K.ABORT_TRANSACTION]
    done = replace_producer(failed, replace(failed.producers[0], in_flight=frozenset()))
    assert [a for a, _ in sysm.next_steps(two, done) if a.kind is K.ABORT_TRANSACTION]


@pytest.mark.parametrize(("changes", "message"), [
    ({"max_in_flight": 0}, "max_in_flight must be 1 to 5"),
    ({"max_in_flight": 6, "max_sequence": 100}, "max_in_flight must be 1 to 5"),
    ({"max_in_flight": 3, "max_sequence": 3}, "needs max_sequence >= 4"),
])
def test_impossible_in_flight_settings_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scenario("bad", "a bad one", **changes)  # type: ignore[arg-type]


def test_every_scenario_before_in_flight_keeps_one_batch_in_flight() -> None:
    assert {name for name, s in SCENARIOS.items() if s.max_in_flight > 1} == {"in-flight-2", "in-flight-5"}
    assert (SCENARIOS["in-flight-2"].max_in_flight, SCENARIOS["in-flight-5"].max_in_flight) == (2, 5)
