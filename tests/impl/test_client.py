"""The producer's TransactionManager, sans-I/O: requests out of poll(), responses in, states as Kafka's."""

from __future__ import annotations

import pytest

from txnspec.impl.client import Producer
from txnspec.impl.client_states import VALID_PREVIOUS_STATES, State
from txnspec.impl.errors import Errors, IllegalStateException, KafkaException, ProducerFencedException
from txnspec.impl.messages import Response, request_name

pytestmark = pytest.mark.quick  # the whole module is in the quick tier


def ready(tv: int = 0) -> Producer:
    p = Producer("tx", transaction_version=tv)
    result = p.init_transactions()
    [lookup] = p.poll()
    p.on_response(lookup, Response(Errors.NONE))
    [init] = p.poll()
    p.on_response(init, Response(Errors.NONE, 5, 0))
    result.result()  # Kafka's await: acknowledges the completed call
    assert p.state is State.READY
    return p


def test_the_state_table_is_kafkas() -> None:
    # Kafka 4.4's TransactionManager.State.isTransitionValid: a prepared (KIP-939) transaction may be aborted
    assert VALID_PREVIOUS_STATES[State.ABORTING_TRANSACTION] == {State.IN_TRANSACTION, State.PREPARED_TRANSACTION,
                                                                 State.ABORTABLE_ERROR}
    assert VALID_PREVIOUS_STATES[State.FATAL_ERROR] == set(State)


def test_tv1_adds_partitions_before_producing_and_commits() -> None:
    p = ready(0)
    p.begin_transaction()
    p.send("t-0", "v")
    [add] = p.poll()
    assert request_name(add) == "AddPartitionsToTxn"
    p.on_response(add, Response(Errors.NONE))
    [produce] = p.poll()
    assert request_name(produce) == "Produce"
    commit = p.commit_transaction()
    assert p.poll() == []  # EndTxn waits for the batch
    p.on_response(produce, Response(Errors.NONE, base_offset=0))
    [end] = p.poll()
    p.on_response(end, Response(Errors.NONE))
    assert commit.is_successful and p.state is State.READY


def test_tv2_sends_no_add_partitions_and_adopts_the_bumped_epoch() -> None:
    p = ready(2)
    p.begin_transaction()
    p.send("t-0", "v")
    [produce] = p.poll()
    p.on_response(produce, Response(Errors.NONE, base_offset=0))
    p.commit_transaction()
    [end] = p.poll()
    p.on_response(end, Response(Errors.NONE, 5, 1))
    assert (p.state, p.producer_epoch) == (State.READY, 1)


def test_a_fenced_coordinator_answer_is_fatal_and_every_later_call_says_so() -> None:
    p = ready(0)
    p.begin_transaction()
    p.send("t-0")
    [add] = p.poll()
    p.on_response(add, Response(Errors.PRODUCER_FENCED))
    assert p.state is State.FATAL_ERROR
    with pytest.raises(ProducerFencedException):
        p.abort_transaction()


def test_an_abortable_produce_error_forbids_commit_and_abort_recovers_with_an_epoch_bump() -> None:
    p = ready(0)
    p.begin_transaction()
    p.send("t-0")
    [add] = p.poll()
    p.on_response(add, Response(Errors.NONE))
    [produce] = p.poll()
    p.on_response(produce, Response(Errors.INVALID_PRODUCER_EPOCH))
    assert p.state is State.ABORTABLE_ERROR
    with pytest.raises(KafkaException):
        p.commit_transaction()
    p.abort_transaction()
    [end] = p.poll()
    p.on_response(end, Response(Errors.NONE))
    [bump] = p.poll()
    assert request_name(bump) == "InitProducerId" and (bump.producer_id, bump.producer_epoch) == (5, 0)
    p.on_response(bump, Response(Errors.NONE, 5, 1))
    assert (p.state, p.producer_epoch) == (State.READY, 1)


def test_an_invalid_call_raises_without_changing_state() -> None:
    p = ready(0)
    with pytest.raises(IllegalStateException):
        p.commit_transaction()
    assert p.state is State.READY


def test_an_expired_batch_makes_the_transaction_abortable_and_tv1_bumps_the_epoch_after_the_abort() -> None:
    from txnspec.impl.errors import InvalidRequestError

    p = ready(0)
    p.begin_transaction()
    future = p.send("t-0", "v")
    [add] = p.poll()
    p.on_response(add, Response(Errors.NONE))
    [produce] = p.poll()
    p.expire_batch("t-0")
    assert p.state is State.ABORTABLE_ERROR
    with pytest.raises(KafkaException, match="delivery timeout"):
        future.get()
    with pytest.raises(InvalidRequestError, match="no Produce to t-0 is in flight"):
        p.expire_batch("t-0")
    with pytest.raises(InvalidRequestError, match="is in flight"):  # no longer awaited (the Cluster drops it)
        p.on_response(produce, Response(Errors.NONE, base_offset=0))
    p.abort_transaction()
    [end] = p.poll()
    p.on_response(end, Response(Errors.NONE))
    [bump] = p.poll()
    assert request_name(bump) == "InitProducerId" and (bump.producer_id, bump.producer_epoch) == (5, 0)


def _expiring_during_the_abort(retried: bool) -> tuple[str, State]:
    """TV1: a batch in flight expires once the application is aborting; ``retried``: it was answered with a
    retriable error first. What the client sends after EndTxn, and its state."""
    p = ready(0)
    p.begin_transaction()
    p.send("t-0", "v")
    [add] = p.poll()
    p.on_response(add, Response(Errors.NONE))
    [produce] = p.poll()
    if retried:
        p.on_response(produce, Response(Errors.NOT_ENOUGH_REPLICAS))
        [produce] = p.poll()
    p.abort_transaction()
    p.expire_batch("t-0")
    [end] = p.poll()
    p.on_response(end, Response(Errors.NONE))
    return ",".join(request_name(r) for r in p.poll()), p.state


def test_a_batch_expiring_on_its_first_attempt_while_aborting_leaves_no_epoch_bump() -> None:
    """Sender.sendProducerData marks an expired batch's sequence unresolved only if it was retried (inRetry);
    maybeTransitionToErrorState bumps only outside completion: the next transaction keeps the epoch."""
    assert _expiring_during_the_abort(retried=False) == ("", State.READY)


def test_a_retried_batch_expiring_while_aborting_requires_the_bump_nobody_queued() -> None:
    """Its sequence is unresolved: maybeResolveSequences requires an epoch bump, which beginCompletingTransaction
    did not queue: after EndTxn the client waits in INITIALIZING with nothing to send."""
    assert _expiring_during_the_abort(retried=True) == ("", State.INITIALIZING)
