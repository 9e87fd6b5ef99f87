"""The client's transaction manager: its table, what each call sends, how responses are classified."""

from __future__ import annotations

import pytest

from txnspec.spec import client as cl
from txnspec.spec.errors import Errors

S = cl.State


def ready(tv: int = 0) -> cl.ClientState:
    return cl.ClientState("t1", S.READY, 7, 1, tv, txn_coordinator_known=True)


def in_transaction(tv: int = 0) -> cl.ClientState:
    c, _ = cl.begin_transaction(ready(tv))
    return c


def test_init_looks_up_the_coordinator_first_then_sends_init_producer_id() -> None:
    c, out = cl.init_transactions(cl.ClientState("t1"))
    assert (c.state, out.sends) == (S.INITIALIZING, ("FindCoordinator:TRANSACTION",))
    c, out = cl.on_response(c, "FindCoordinator", Errors.NONE)
    assert out.sends == ("InitProducerId",)
    c, out = cl.on_response(c, "InitProducerId", Errors.NONE, 7, 0)
    assert (c.state, c.producer_id, c.producer_epoch, out.sends) == (S.READY, 7, 0, ())
    assert cl.init_transactions(c)[1].throws == "IllegalStateException"  # READY -> INITIALIZING is not valid


def test_tv1_adds_the_partition_before_producing_and_commits_after() -> None:
    c, out = cl.send(in_transaction(), "p0")
    assert out.sends == ("AddPartitionsToTxn",)
    c, out = cl.commit_transaction(c)
    assert (c.state, out.sends) == (S.COMMITTING_TRANSACTION, ())  # EndTxn waits for the add and the produce
    c, out = cl.on_response(c, "AddPartitionsToTxn", Errors.NONE)
    assert out.sends == ("Produce",)
    c, out = cl.on_response(c, "Produce", Errors.NONE, partition="p0")
    assert out.sends == ("EndTxn",)
    c, _ = cl.on_response(c, "EndTxn", Errors.NONE)
    assert c.state is S.READY and c.partitions == frozenset()


def test_tv2_produces_at_once_and_adopts_the_epoch_from_end_txn() -> None:
    c, out = cl.send(in_transaction(tv=2), "p0")
    assert out.sends == ("Produce",)
    c, _ = cl.on_response(c, "Produce", Errors.NONE, partition="p0")
    c, out = cl.commit_transaction(c)
    assert out.sends == ("EndTxn",)
    c, _ = cl.on_response(c, "EndTxn", Errors.NONE, 7, 2)
    assert (c.state, c.producer_epoch) == (S.READY, 2)


def test_an_empty_transaction_completes_without_end_txn() -> None:
    c, out = cl.commit_transaction(in_transaction())
    assert (c.state, out.sends) == (S.READY, ())


@pytest.mark.parametrize(("error", "state", "throws"), [
    (Errors.PRODUCER_FENCED, S.FATAL_ERROR, "ProducerFencedException"),
    (Errors.INVALID_PRODUCER_EPOCH, S.FATAL_ERROR, "ProducerFencedException"),
    (Errors.INVALID_TXN_STATE, S.FATAL_ERROR, "KafkaException"),
    (Errors.TRANSACTION_ABORTABLE, S.ABORTABLE_ERROR, "KafkaException"),
    (Errors.TOPIC_AUTHORIZATION_FAILED, S.ABORTABLE_ERROR, "KafkaException"),
])
def test_add_partitions_errors_are_fatal_or_abortable(error: Errors, state: S, throws: str) -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = cl.on_response(c, "AddPartitionsToTxn", error)
    assert c.state is state
    assert cl.commit_transaction(c)[1].throws == throws  # commit from an error state throws


def test_retriable_errors_resend_and_a_moved_coordinator_is_looked_up_again() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, out = cl.on_response(c, "AddPartitionsToTxn", Errors.CONCURRENT_TRANSACTIONS)
    assert out.sends == ("AddPartitionsToTxn",)
    c, out = cl.on_response(c, "AddPartitionsToTxn", Errors.NOT_COORDINATOR)
    assert out.sends == ("FindCoordinator:TRANSACTION",)


def test_a_produce_error_in_a_tv1_transaction_bumps_the_epoch_after_the_abort() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = cl.on_response(c, "AddPartitionsToTxn", Errors.NONE)
    c, _ = cl.on_response(c, "Produce", Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, partition="p0")
    assert c.state is S.ABORTABLE_ERROR and c.epoch_bump_required
    c, out = cl.abort_transaction(c)
    assert out.sends == ("EndTxn",)
    c, out = cl.on_response(c, "EndTxn", Errors.NONE)
    assert (c.state, out.sends) == (S.INITIALIZING, ("InitProducerId",))


def test_the_transition_table_is_kafkas() -> None:
    assert cl.VALID_TRANSITIONS[S.IN_TRANSACTION] == frozenset({S.READY})
    assert S.ABORTABLE_ERROR in cl.VALID_TRANSITIONS[S.ABORTING_TRANSACTION]
    assert cl.transition_to(ready(), S.COMMITTING_TRANSACTION) is None
