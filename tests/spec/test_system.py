"""The system model's actions: when each is enabled, when it is not, and what it does."""

from __future__ import annotations

from dataclasses import replace

from txnspec.spec import system as sysm
from txnspec.spec.errors import Errors
from txnspec.spec.messages import EndTxn, EndTxnResponse, InitProducerId, Produce, WriteTxnMarkers
from txnspec.spec.model import build_system
from txnspec.spec.network import Envelope, producer_address, send
from txnspec.spec.scenarios import SCENARIOS
from txnspec.spec.txn_state import COMPLETE_COMMIT, ONGOING, PREPARE_COMMIT

TINY = build_system("tiny")


def steps(system: sysm.System, state: sysm.SystemState) -> dict[str, sysm.SystemState]:
    return {str(action): nxt for action, nxt in sysm.next_steps(system, state)}


def kinds(system: sysm.System, state: sysm.SystemState) -> set[str]:
    return {action.kind for action, _ in sysm.next_steps(system, state)}


def run(system: sysm.System, state: sysm.SystemState, *prefixes: str) -> sysm.SystemState:
    """Take, in order, the first enabled action whose text starts with each prefix."""
    for prefix in prefixes:
        options = [nxt for text, nxt in steps(system, state).items() if text.startswith(prefix)]
        assert options, f"no enabled action starts with {prefix!r}: {sorted(steps(system, state))}"
        state = options[0]
    return state


def committed_once(system: sysm.System = TINY) -> sysm.SystemState:
    return run(system, sysm.initial_state(system), "producer-0.initTransactions()",
               "deliver producer-0->coordinator: InitProducerId", "deliver coordinator->producer-0",
               "producer-0.beginTransaction()", "producer-0.send(p0)", "producer-0.commitTransaction()",
               "deliver producer-0->p0: Produce", "deliver p0->producer-0", "deliver producer-0->coordinator: EndTxn")


def test_initially_only_init_transactions_is_enabled() -> None:
    assert list(steps(TINY, sysm.initial_state(TINY))) == ["producer-0.initTransactions()"]


def test_init_transactions_sends_init_producer_id_and_its_answer_makes_the_producer_ready() -> None:
    state = run(TINY, sysm.initial_state(TINY), "producer-0.initTransactions()")
    assert [type(e.body) for e in state.network] == [InitProducerId]
    assert "producer-0.beginTransaction()" not in steps(TINY, state)  # not before the answer
    state = run(TINY, state, "deliver producer-0->coordinator", "deliver coordinator->producer-0")
    producer = state.producers[0]
    assert (producer.phase, producer.producer_id, producer.producer_epoch) == (sysm.READY, 0, 0)
    assert "producer-0.beginTransaction()" in steps(TINY, state)


def test_tv2_produce_adds_the_partition_at_the_coordinator_then_end_txn_prepares_and_sends_markers() -> None:
    state = run(TINY, sysm.initial_state(TINY), "producer-0.initTransactions()", "deliver", "deliver",
                "producer-0.beginTransaction()", "producer-0.send(p0)", "deliver producer-0->p0: Produce")
    md = state.coordinator.metadata("t1")
    assert md is not None and (md.state, md.partitions) == (ONGOING, frozenset({"p0"}))
    state = committed_once()
    md = state.coordinator.metadata("t1")
    assert md is not None and md.state is PREPARE_COMMIT
    markers = [e.body for e in state.network if isinstance(e.body, WriteTxnMarkers)]
    assert [(m.partition, m.producer_epoch) for m in markers] == [("p0", 1)]  # TV2: the bumped epoch
    state = run(TINY, state, "deliver coordinator->p0: WriteTxnMarkers", "deliver p0->coordinator")
    md = state.coordinator.metadata("t1")
    assert md is not None and md.state is COMPLETE_COMMIT


def test_faults_are_enabled_only_within_their_budget() -> None:
    state = committed_once()
    assert not kinds(TINY, state) & {"lose", "duplicate", "failover", "timeout", "crash", "expire batch"}
    faulty = build_system(SCENARIOS["tiny"].with_(faults={"loss": 1, "duplicate": 1, "failover": 1}))
    state = run(faulty, sysm.initial_state(faulty), "producer-0.initTransactions()")
    assert {"lose", "duplicate", "failover"} <= kinds(faulty, state)
    lost = run(faulty, state, "lose")
    assert lost.budget.loss == 0 and "lose" not in kinds(faulty, lost)


def test_only_requests_from_clients_are_duplicated() -> None:
    faulty = build_system(SCENARIOS["tiny"].with_(faults={"duplicate": 1}))
    requested = run(faulty, sysm.initial_state(faulty), "producer-0.initTransactions()")
    assert [t for t in steps(faulty, requested) if t.startswith("duplicate")] == [
        "duplicate producer-0->coordinator: InitProducerId(t1, pid=-1, epoch=-1)"]
    answered = run(faulty, requested, "deliver producer-0->coordinator")  # only the answer is in flight
    assert "duplicate" not in kinds(faulty, answered)
    prepared = committed_once(faulty)  # markers and the EndTxn answer in flight: none is a client request
    assert "duplicate" not in kinds(faulty, prepared)


def test_a_client_retries_only_when_its_request_and_answer_are_gone() -> None:
    faulty = build_system(SCENARIOS["tiny"].with_(faults={"loss": 1}))
    state = run(faulty, sysm.initial_state(faulty), "producer-0.initTransactions()")
    assert "retry" not in kinds(faulty, state)
    lost = run(faulty, state, "lose producer-0->coordinator: InitProducerId")
    assert "retry" in kinds(faulty, lost)
    retried = run(faulty, lost, "producer-0 times out waiting for InitProducerId")
    assert [type(e.body) for e in retried.network] == [InitProducerId]


def test_a_lost_produce_is_resent_only_once_no_transactional_request_is_in_flight() -> None:
    """Kafka's Sender.runOnce sends no produce data while a transactional request is in flight
    (maybeSendAndPollTransactionalRequest returns early), so a re-enqueued batch waits for its answer."""
    faulty = build_system(SCENARIOS["offsets"].with_(faults={"loss": 1}))
    state = run(faulty, sysm.initial_state(faulty), "producer-0.initTransactions()", "deliver", "deliver",
                "producer-0.beginTransaction()", "producer-0.send(p0)", "lose producer-0->p0: Produce")
    assert "retry" in kinds(faulty, state)  # nothing else in flight: the produce times out and is re-sent
    waiting = run(faulty, state, "producer-0.sendOffsetsToTransaction()")
    assert waiting.producers[0].awaiting is not None
    assert "retry" not in kinds(faulty, waiting)
    answered = run(faulty, waiting, "deliver producer-0->group", "deliver group->producer-0")
    assert "retry" in kinds(faulty, answered)


def test_the_coordinator_resends_a_marker_only_once_it_and_its_answer_are_gone() -> None:
    faulty = build_system(SCENARIOS["tiny"].with_(faults={"loss": 1}))
    state = committed_once(faulty)
    assert "resend marker" not in kinds(faulty, state)
    lost = run(faulty, state, "lose coordinator->p0: WriteTxnMarkers")
    assert "resend marker" in kinds(faulty, lost)


def test_a_stale_answer_is_ignored_by_the_producer() -> None:
    state = committed_once()
    stale = Envelope("coordinator", producer_address(0), EndTxnResponse(Errors.NONE, 0, 1), 99)
    with_stale = replace(state, network=send(state.network, stale))
    after = steps(TINY, with_stale)[f"deliver {stale}"]
    assert after.producers == state.producers


def test_produce_answers_correlate_by_partition_producer_epoch_and_sequence() -> None:
    state = run(TINY, sysm.initial_state(TINY), "producer-0.initTransactions()", "deliver", "deliver",
                "producer-0.beginTransaction()", "producer-0.send(p0)")
    (produce,) = [e for e in state.network if isinstance(e.body, Produce)]
    assert produce.context == ("p0", 0, 0, 0)
    assert state.producers[0].in_flight == frozenset({("p0", 0, 0, 0)})


def test_end_txn_waits_for_the_produce_in_flight() -> None:
    state = run(TINY, sysm.initial_state(TINY), "producer-0.initTransactions()", "deliver", "deliver",
                "producer-0.beginTransaction()", "producer-0.send(p0)", "producer-0.commitTransaction()")
    assert not any(isinstance(e.body, EndTxn) for e in state.network)
    state = run(TINY, state, "deliver producer-0->p0", "deliver p0->producer-0")
    assert any(isinstance(e.body, EndTxn) for e in state.network)
