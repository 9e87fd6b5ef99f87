"""The client's TransactionManager: its table, each call in each state, what the Sender sends, and how
every response is classified (fatal, abortable, retriable), for transaction versions 0 and 2."""

from __future__ import annotations

from dataclasses import replace

import pytest

from txnspec.spec import client as cl
from txnspec.spec import client_batches as cl_batches
from txnspec.spec import client_errors as cl_errors
from txnspec.spec import client_responses as cl_responses
from txnspec.spec import client_sender as cl_sender
from txnspec.spec import client_state as cl_state
from txnspec.spec import client_transitions as cl_transitions
from txnspec.spec.client_state import State as S
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    FindCoordinator,
    InitProducerId,
    InitProducerIdResponse,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
)

OK = ErrorResponse(Errors.NONE)


def names(out: cl_state.ClientOutcome) -> tuple[str, ...]:
    return tuple(type(r).__name__ for r in out.sends)


def ready(tv: int = 0) -> cl_state.ClientState:
    return cl_state.ClientState("t1", S.READY, 7, 1, tv, txn_coordinator_known=True)


def in_transaction(tv: int = 0) -> cl_state.ClientState:
    c, out = cl.begin_transaction(ready(tv))
    assert out == cl_state.ClientOutcome()
    return c


def respond(c: cl_state.ClientState, name: str, error: Errors = Errors.NONE, pid: int = -1,
            epoch: int = -1) -> tuple[cl_state.ClientState, cl_state.ClientOutcome]:
    response: cl_state.Response
    if name == "InitProducerId":
        response = InitProducerIdResponse(error, pid, epoch)
    elif name == "EndTxn":
        response = EndTxnResponse(error, pid, epoch)
    elif name == "Produce":
        response = ProduceResponse(error)
    else:
        response = ErrorResponse(error)
    result: tuple[cl_state.ClientState, cl_state.ClientOutcome] = cl_responses.on_response(c, name, response)
    return result


def produced(tv: int = 0) -> cl_state.ClientState:
    """A transaction with one record on p0, acknowledged."""
    c, _ = cl.send(in_transaction(tv), "p0")
    if tv < 2:
        c, _ = respond(c, "AddPartitionsToTxn")
    c, _ = respond(c, "Produce")
    return c


# --- the table -----------------------------------------------------------------------------------

KAFKA_TABLE = {  # TransactionManager.State.isTransitionValid, trunk
    S.UNINITIALIZED: {S.READY, S.ABORTABLE_ERROR},
    S.INITIALIZING: {S.UNINITIALIZED, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
    S.READY: {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
    S.IN_TRANSACTION: {S.READY},
    S.PREPARED_TRANSACTION: {S.IN_TRANSACTION, S.INITIALIZING},
    S.COMMITTING_TRANSACTION: {S.IN_TRANSACTION, S.PREPARED_TRANSACTION},
    S.ABORTING_TRANSACTION: {S.IN_TRANSACTION, S.PREPARED_TRANSACTION, S.ABORTABLE_ERROR},
    S.ABORTABLE_ERROR: {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING},
    S.FATAL_ERROR: set(S),
}


def test_the_transition_table_is_kafkas() -> None:
    assert {t: set(s) for t, s in cl_state.VALID_PREVIOUS_STATES.items()} == KAFKA_TABLE


CALLS = {
    "initTransactions": (cl.init_transactions, S.INITIALIZING),
    "beginTransaction": (cl.begin_transaction, S.IN_TRANSACTION),
    # KafkaProducer.prepareTransaction needs transaction.two.phase.commit.enable (else InvalidTxnStateException)
    "prepareTransaction": (lambda c: cl.prepare_transaction(c, cl_state.ClientConfig(enable_two_pc=True)),
                           S.PREPARED_TRANSACTION),
    "commitTransaction": (cl.commit_transaction, S.COMMITTING_TRANSACTION),
    "abortTransaction": (cl.abort_transaction, S.ABORTING_TRANSACTION),
}


@pytest.mark.parametrize("source", [s for s in S if s not in (S.ABORTABLE_ERROR, S.FATAL_ERROR)])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_each_call_follows_the_table_and_an_invalid_one_throws_leaving_the_state(source: S, call: str) -> None:
    fn, target = CALLS[call]
    c = cl_state.ClientState("t1", source, 7, 1, txn_coordinator_known=True)
    after, out = fn(c)
    blocked_by_prepared = source is S.PREPARED_TRANSACTION and call in ("initTransactions", "beginTransaction")
    if cl_state.is_transition_valid(source, target) and not blocked_by_prepared:
        assert out.throws is None
        assert after.state is target or (after.state is S.READY and target in (
            S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION))  # an empty transaction completes locally
    else:
        assert (after, out) == (c, cl_state.ClientOutcome(cl_errors.ILLEGAL_STATE))


@pytest.mark.parametrize(("last_error", "thrown"), [
    ("ProducerFencedException", "ProducerFencedException"),
    ("InvalidProducerEpochException", "InvalidProducerEpochException"),
    ("IllegalStateException", "IllegalStateException"),
    ("TopicAuthorizationException", "KafkaException"),
])
def test_an_error_state_makes_every_call_throw_maybe_fail_with_error(last_error: str, thrown: str) -> None:
    fatal = cl_state.ClientState("t1", S.FATAL_ERROR, 7, 1, last_error=last_error, txn_coordinator_known=True)
    for fn in (cl.init_transactions, cl.begin_transaction, cl.commit_transaction, cl.abort_transaction):
        assert fn(fatal) == (fatal, cl_state.ClientOutcome(thrown))
    assert cl.send_offsets_to_transaction(fatal, "g", {})[1].throws == thrown
    abortable = replace(fatal, state=S.ABORTABLE_ERROR)
    assert cl.commit_transaction(abortable)[1].throws == thrown
    assert cl.abort_transaction(abortable)[1].throws is None  # beginAbort skips the check when abortable


def test_send_throws_kafka_exceptions_but_returns_api_exceptions_in_the_future() -> None:
    fenced = cl_state.ClientState("t1", S.FATAL_ERROR, 7, 1, last_error="ProducerFencedException")
    c, out = cl.send(fenced, "p0")
    assert (out.throws, c.state, c.accumulator) == (None, S.FATAL_ERROR, ())  # the Sender aborts the batch
    failed = replace(fenced, last_error="KafkaException")
    assert cl.send(failed, "p0")[1].throws == "KafkaException"
    assert cl.send(ready(), "p0")[1].throws == "IllegalStateException"  # no transaction
    assert cl.send(cl_state.ClientState("t1"), "p0")[1].throws == "IllegalStateException"  # no producer id


# --- the Sender ------------------------------------------------------------------------------------

def test_init_looks_up_the_coordinator_then_sends_init_producer_id_once() -> None:
    c, out = cl.init_transactions(cl_state.ClientState("t1"))
    assert c.state is S.INITIALIZING
    assert out.sends == (FindCoordinator(CoordinatorType.TRANSACTION, "t1"),)
    c, out = respond(c, "FindCoordinator")
    assert out.sends == (InitProducerId("t1", 60_000, -1, -1),)
    assert cl.init_transactions(c) == (c, cl_state.ClientOutcome())  # the pending call's result is returned
    assert cl.begin_transaction(c)[1].throws == "IllegalStateException"  # init has not completed
    c, out = respond(c, "InitProducerId", Errors.NONE, 7, 0)
    assert (c.state, c.producer_id, c.producer_epoch, out.sends, c.pending_transition) == (S.READY, 7, 0, (), None)
    assert cl.init_transactions(c)[1].throws == "IllegalStateException"  # READY -> INITIALIZING is not valid


def test_tv1_adds_the_partition_before_producing_and_commits_after_the_batches() -> None:
    c, out = cl.send(in_transaction(), "p0")
    assert out.sends == (AddPartitionsToTxn("t1", 7, 1, frozenset({"p0"}), 0),)
    c, out = cl.send(c, "p0")  # batched with the first record: the partition is not added yet
    c, out = cl.commit_transaction(c)
    assert (c.state, out.sends) == (S.COMMITTING_TRANSACTION, ())
    c, out = respond(c, "AddPartitionsToTxn")
    assert out.sends == (Produce("p0", 7, 1, 0, 2, True, "t1"),)
    c, out = respond(c, "Produce")
    assert out.sends == (EndTxn("t1", 7, 1, TransactionResult.COMMIT, 0),)
    c, out = respond(c, "EndTxn")
    assert (c.state, c.partitions, c.pending_transition, c.next_sequence("p0")) == (S.READY, frozenset(), None, 2)


def test_no_produce_goes_out_while_a_transactional_request_is_in_flight() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = respond(c, "AddPartitionsToTxn")
    c, _ = respond(c, "Produce")
    c, out = cl.send_offsets_to_transaction(c, "g", {"in-0": 5})
    assert names(out) == ("AddOffsetsToTxn",)
    c, out = cl.send(c, "p0")
    assert out.sends == ()  # Sender.runOnce only polls while AddOffsetsToTxn is outstanding
    c, out = respond(c, "AddOffsetsToTxn")
    assert names(out) == ("FindCoordinator",)  # the group coordinator is not known yet
    c, out = respond(c, "FindCoordinator")
    assert out.sends == (TxnOffsetCommit("t1", "g", 7, 1, (("in-0", 5),)),)
    c, out = respond(c, "TxnOffsetCommit")
    assert names(out) == ("Produce",) and c.pending_offsets == ()


def test_tv2_produces_at_once_commits_offsets_directly_and_adopts_the_epoch_from_end_txn() -> None:
    c, out = cl.send(in_transaction(tv=2), "p0")
    assert names(out) == ("Produce",) and c.transaction_started
    c, _ = respond(c, "Produce")
    c, out = cl.send_offsets_to_transaction(c, "g", {"in-0": 1})
    assert names(out) == ("FindCoordinator",)  # no AddOffsetsToTxn
    c, out = respond(c, "FindCoordinator")
    assert names(out) == ("TxnOffsetCommit",)
    c, _ = respond(c, "TxnOffsetCommit")
    c, out = cl.commit_transaction(c)
    assert out.sends == (EndTxn("t1", 7, 1, TransactionResult.COMMIT, 2),)
    c, _ = respond(c, "EndTxn", Errors.NONE, 7, 2)
    assert (c.state, c.producer_epoch, c.sequences) == (S.READY, 2, ())  # sequences restart with the epoch


def test_an_empty_transaction_completes_without_end_txn() -> None:
    c, out = cl.commit_transaction(in_transaction())
    assert (c.state, out.sends, c.pending_transition) == (S.READY, (), None)
    c, out = cl.abort_transaction(in_transaction(tv=2))
    assert (c.state, out.sends) == (S.READY, ())


def test_abort_drops_unsent_records_and_partition_adds() -> None:
    c, out = cl.send(in_transaction(), "p0")
    c, out = cl.send(c, "p1")  # waits behind the AddPartitionsToTxn in flight
    c, out = cl.abort_transaction(c)
    assert (c.new_partitions, out.sends) == (frozenset(), ())
    c, out = respond(c, "AddPartitionsToTxn")
    assert names(out) == ("EndTxn",) and c.accumulator == ()


def test_a_moved_coordinator_is_looked_up_again_and_retriable_errors_resend() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, out = respond(c, "AddPartitionsToTxn", Errors.CONCURRENT_TRANSACTIONS)
    assert names(out) == ("AddPartitionsToTxn",)
    c, out = respond(c, "AddPartitionsToTxn", Errors.NOT_COORDINATOR)
    assert names(out) == ("FindCoordinator",) and not c.txn_coordinator_known
    c, out = respond(c, "FindCoordinator", Errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert names(out) == ("FindCoordinator",)
    c, out = respond(c, "FindCoordinator")
    assert names(out) == ("AddPartitionsToTxn",)
    c, out = cl_responses.on_disconnect(c)
    assert names(out) == ("FindCoordinator",)


# --- error classification ------------------------------------------------------------------------

FATAL, ABORTABLE, RETRY = "fatal", "abortable", "retry"


@pytest.mark.parametrize(("error", "kind", "exception"), [
    (Errors.PRODUCER_FENCED, FATAL, "ProducerFencedException"),
    (Errors.INVALID_PRODUCER_EPOCH, FATAL, "ProducerFencedException"),
    (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, FATAL, "TransactionalIdAuthorizationException"),
    (Errors.INVALID_TXN_STATE, FATAL, "InvalidTxnStateException"),
    (Errors.INVALID_PRODUCER_ID_MAPPING, FATAL, "InvalidPidMappingException"),
    (Errors.UNKNOWN_PRODUCER_ID, ABORTABLE, "UnknownProducerIdException"),
    (Errors.TRANSACTION_ABORTABLE, ABORTABLE, "TransactionAbortableException"),
    (Errors.TOPIC_AUTHORIZATION_FAILED, ABORTABLE, "TopicAuthorizationException"),
    (Errors.OPERATION_NOT_ATTEMPTED, ABORTABLE, "KafkaException"),
    (Errors.UNKNOWN_SERVER_ERROR, ABORTABLE, "KafkaException"),
    (Errors.CONCURRENT_TRANSACTIONS, RETRY, None),
    (Errors.COORDINATOR_LOAD_IN_PROGRESS, RETRY, None),
])
def test_add_partitions_errors(error: Errors, kind: str, exception: str | None) -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, out = respond(c, "AddPartitionsToTxn", error)
    expected = {FATAL: S.FATAL_ERROR, ABORTABLE: S.ABORTABLE_ERROR, RETRY: S.IN_TRANSACTION}[kind]
    assert (c.state, c.last_error) == (expected, exception)
    assert (names(out) == ("AddPartitionsToTxn",)) == (kind == RETRY)


@pytest.mark.parametrize(("error", "state", "exception"), [
    (Errors.PRODUCER_FENCED, S.FATAL_ERROR, "ProducerFencedException"),
    (Errors.INVALID_PRODUCER_EPOCH, S.FATAL_ERROR, "ProducerFencedException"),
    (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, S.ABORTABLE_ERROR, "TransactionalIdAuthorizationException"),
    (Errors.CLUSTER_AUTHORIZATION_FAILED, S.ABORTABLE_ERROR, "ClusterAuthorizationException"),
    (Errors.TRANSACTION_ABORTABLE, S.ABORTABLE_ERROR, "TransactionAbortableException"),
    (Errors.UNSUPPORTED_VERSION, S.FATAL_ERROR, "KafkaException"),
    (Errors.INVALID_TXN_STATE, S.FATAL_ERROR, "KafkaException"),
])
def test_init_producer_id_errors(error: Errors, state: S, exception: str) -> None:
    c, _ = cl.init_transactions(cl_state.ClientState("t1"))
    c, _ = respond(c, "FindCoordinator")
    c, out = respond(c, "InitProducerId", error)
    assert (c.state, c.last_error, out.sends) == (state, exception, ())


def test_an_authorization_error_resets_the_client_on_the_senders_next_iteration() -> None:
    c, _ = cl.init_transactions(cl_state.ClientState("t1"))
    c, _ = respond(c, "FindCoordinator")
    c, _ = respond(c, "InitProducerId", Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert cl_sender.awaiting_authorization_reset(c)
    c, _ = cl_sender.sender_handle_authorization_error(c)
    assert (c.state, c.last_error) == (S.UNINITIALIZED, None)
    assert cl.init_transactions(c)[0].state is S.INITIALIZING


@pytest.mark.parametrize(("error", "state", "exception"), [
    (Errors.GROUP_AUTHORIZATION_FAILED, S.ABORTABLE_ERROR, "GroupAuthorizationException"),
    (Errors.UNKNOWN_MEMBER_ID, S.ABORTABLE_ERROR, "CommitFailedException"),
    (Errors.ILLEGAL_GENERATION, S.ABORTABLE_ERROR, "CommitFailedException"),
    (Errors.FENCED_INSTANCE_ID, S.ABORTABLE_ERROR, "FencedInstanceIdException"),
    (Errors.PRODUCER_FENCED, S.FATAL_ERROR, "ProducerFencedException"),
    (Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, S.FATAL_ERROR, "UnsupportedForMessageFormatException"),
    (Errors.INVALID_TXN_STATE, S.FATAL_ERROR, "KafkaException"),
])
def test_txn_offset_commit_errors(error: Errors, state: S, exception: str) -> None:
    c, _ = cl.send_offsets_to_transaction(in_transaction(tv=2), "g", {"in-0": 1})
    c, _ = respond(c, "FindCoordinator")
    c, _ = respond(c, "TxnOffsetCommit", error)
    assert (c.state, c.last_error, c.pending_offsets) == (state, exception, ())


def test_txn_offset_commit_looks_up_the_group_coordinator_again_on_a_timeout() -> None:
    c, _ = cl.send_offsets_to_transaction(in_transaction(tv=2), "g", {"in-0": 1})
    c, _ = respond(c, "FindCoordinator")
    c, out = respond(c, "TxnOffsetCommit", Errors.REQUEST_TIMED_OUT)
    assert out.sends == (FindCoordinator(CoordinatorType.GROUP, "g"),)


@pytest.mark.parametrize(("result", "error", "state", "exception"), [
    ("commit", Errors.TRANSACTION_ABORTABLE, S.ABORTABLE_ERROR, "TransactionAbortableException"),
    ("abort", Errors.TRANSACTION_ABORTABLE, S.FATAL_ERROR, "KafkaException"),
    ("commit", Errors.INVALID_PRODUCER_ID_MAPPING, S.FATAL_ERROR, "InvalidPidMappingException"),
    ("commit", Errors.INVALID_TXN_STATE, S.FATAL_ERROR, "InvalidTxnStateException"),
    ("abort", Errors.PRODUCER_FENCED, S.FATAL_ERROR, "ProducerFencedException"),
    ("commit", Errors.UNKNOWN_PRODUCER_ID, S.ABORTABLE_ERROR, "UnknownProducerIdException"),
])
def test_end_txn_errors(result: str, error: Errors, state: S, exception: str) -> None:
    c = produced()
    c, _ = cl.commit_transaction(c) if result == "commit" else cl.abort_transaction(c)
    c, _ = respond(c, "EndTxn", error)
    assert (c.state, c.last_error) == (state, exception)


@pytest.mark.parametrize(("error", "state", "exception"), [
    (Errors.PRODUCER_FENCED, S.FATAL_ERROR, "ProducerFencedException"),
    (Errors.CLUSTER_AUTHORIZATION_FAILED, S.FATAL_ERROR, "ClusterAuthorizationException"),
    (Errors.UNSUPPORTED_VERSION, S.FATAL_ERROR, "UnsupportedVersionException"),
    (Errors.INVALID_PRODUCER_ID_MAPPING, S.FATAL_ERROR, "InvalidPidMappingException"),
    (Errors.INVALID_PRODUCER_EPOCH, S.ABORTABLE_ERROR, "InvalidProducerEpochException"),
    (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, S.ABORTABLE_ERROR, "OutOfOrderSequenceException"),
    (Errors.INVALID_TXN_STATE, S.ABORTABLE_ERROR, "TransactionAbortableException"),
    (Errors.TOPIC_AUTHORIZATION_FAILED, S.ABORTABLE_ERROR, "TopicAuthorizationException"),
])
def test_produce_errors_follow_maybe_transition_to_error_state(error: Errors, state: S, exception: str) -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = respond(c, "AddPartitionsToTxn")
    c, _ = respond(c, "Produce", error)
    assert (c.state, c.last_error) == (state, exception)
    assert c.client_side_epoch_bump_required == (state is S.ABORTABLE_ERROR)


def test_a_retriable_produce_error_resends_the_same_batch() -> None:
    c, _ = cl.send(in_transaction(tv=2), "p0")
    batch = c.in_flight_batches[0]
    c, out = respond(c, "Produce", Errors.NOT_LEADER_OR_FOLLOWER)
    assert out.sends == (batch,) and c.state is S.IN_TRANSACTION


# --- epoch bumps (KIP-360) -------------------------------------------------------------------------

def test_tv1_abort_after_an_abortable_error_bumps_the_epoch_and_restarts_sequences() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = respond(c, "AddPartitionsToTxn")
    c, _ = respond(c, "Produce", Errors.TOPIC_AUTHORIZATION_FAILED)
    assert c.client_side_epoch_bump_required
    c, out = cl.abort_transaction(c)
    assert names(out) == ("EndTxn",)
    c, out = respond(c, "EndTxn")
    assert (c.state, out.sends) == (S.INITIALIZING, (InitProducerId("t1", 60_000, 7, 1),))
    c, _ = respond(c, "InitProducerId", Errors.NONE, 7, 2)
    assert (c.state, c.producer_epoch, c.sequences, c.pending_transition) == (S.READY, 2, (), None)


def test_tv2_never_bumps_from_the_client() -> None:
    c, _ = cl.send(in_transaction(tv=2), "p0")
    c, _ = respond(c, "Produce", Errors.TOPIC_AUTHORIZATION_FAILED)
    assert c.state is S.ABORTABLE_ERROR and not c.client_side_epoch_bump_required
    c, out = cl.abort_transaction(c)
    c, out = respond(c, "EndTxn", Errors.NONE, 7, 2)
    assert (c.state, c.producer_epoch, out.sends) == (S.READY, 2, ())


def test_a_produce_failing_while_committing_needs_no_bump() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = cl.commit_transaction(c)
    c, _ = respond(c, "AddPartitionsToTxn")
    c, out = respond(c, "Produce", Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert (c.state, c.client_side_epoch_bump_required, out.sends) == (S.ABORTABLE_ERROR, False, ())
    c, out = cl.abort_transaction(c)
    assert out.sends == (EndTxn("t1", 7, 1, TransactionResult.ABORT, 0),)


def _expired_while_aborting(retried: bool) -> tuple[cl_state.ClientState, cl_state.ClientOutcome]:
    """TV1: the batch in flight expires once the abort is under way (``retried``: after a retriable answer)."""
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = respond(c, "AddPartitionsToTxn")
    batch = c.in_flight_batches[0]
    if retried:
        c, _ = respond(c, "Produce", Errors.NOT_ENOUGH_REPLICAS)
        assert c.in_flight_batches == (batch,) and batch in c.retried
    c, _ = cl.abort_transaction(c)
    c, _ = cl_responses.expire_batch(c, batch)
    assert c.state is S.ABORTING_TRANSACTION and not c.in_flight_batches
    c, _ = respond(c, "EndTxn")
    return c, cl_responses.expire_batch(c, batch)[1]


def test_a_batch_expiring_on_its_first_attempt_while_completing_needs_no_bump() -> None:
    """Sender.sendProducerData: failBatch(TimeoutException); the sequence is unresolved only for a batch in retry."""
    c, again = _expired_while_aborting(retried=False)
    assert (c.state, c.producer_epoch, c.unresolved, again) == (S.READY, 1, (), cl_state.ClientOutcome())


def test_a_retried_batch_expiring_while_aborting_requires_a_bump_nobody_queued() -> None:
    """markSequenceUnresolved, then maybeResolveSequences finds it unacknowledged: the bump is required, but only
    beginCompletingTransaction queues its InitProducerId, so after EndTxn the client waits in INITIALIZING."""
    c, _ = _expired_while_aborting(retried=True)
    assert (c.state, c.client_side_epoch_bump_required, c.pending_requests, c.in_flight) == (
        S.INITIALIZING, False, (), None)


def test_an_expired_batch_whose_later_batch_is_acknowledged_is_resolved_without_a_bump() -> None:
    """maybeResolveSequences waits for the partition's batches in flight, then finds "a batch was expired, but
    subsequent batches succeeded": no bump (TV1, committing: maybeTransitionToErrorState bumps none either)."""
    config = replace(cl_state.DEFAULT_CONFIG, max_in_flight_per_partition=2, max_batch_records=1)
    c, _ = cl.send(in_transaction(), "p0", config)
    c, _ = cl.send(c, "p0", config)
    c, _ = cl.commit_transaction(c, config)
    c, _ = cl_responses.on_response(c, "AddPartitionsToTxn", OK, None, config)
    first, second = c.in_flight_batches
    c, _ = cl_responses.on_response(c, "Produce", ProduceResponse(Errors.NOT_ENOUGH_REPLICAS), first, config)
    c, _ = cl_responses.expire_batch(c, first, config)
    assert (c.state, c.unresolved, c.client_side_epoch_bump_required) == (S.ABORTABLE_ERROR, (("p0", 1),), False)
    c, _ = cl_responses.on_response(c, "Produce", ProduceResponse(Errors.NONE), second, config)
    assert (c.unresolved, c.last_acked, c.client_side_epoch_bump_required) == ((), (("p0", 1),), False)


def test_without_coordinator_epoch_bumps_unknown_producer_id_is_fatal() -> None:
    old = cl_state.ClientConfig(coordinator_supports_bumping_epoch=False)
    c, _ = cl.send(in_transaction(), "p0", old)
    c, _ = cl_responses.on_response(c, "AddPartitionsToTxn", ErrorResponse(Errors.UNKNOWN_PRODUCER_ID), config=old)
    assert (c.state, c.last_error) == (S.FATAL_ERROR, "UnknownProducerIdException")


def test_an_upgrade_to_tv2_bumps_the_epoch_after_the_last_tv1_transaction() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    c, _ = respond(c, "AddPartitionsToTxn")
    c, _ = respond(c, "Produce")
    c = cl_transitions.finalized_features_changed(c, 2)
    c, out = cl.commit_transaction(c)
    assert out.sends == (EndTxn("t1", 7, 1, TransactionResult.COMMIT, 0),)  # the version it started with
    assert c.tv2 and c.client_side_epoch_bump_required
    c, out = respond(c, "EndTxn")
    assert (c.state, names(out)) == (S.INITIALIZING, ("InitProducerId",))


# --- sequences, pending calls, poisoning ------------------------------------------------------------

def test_sequences_advance_per_partition_and_wrap() -> None:
    assert cl_transitions.increment_sequence(2147483647, 1) == 0
    assert cl_transitions.increment_sequence(5, 3, max_sequence=6) == 1
    assert cl_transitions.decrement_sequence(0, 1, max_sequence=6) == 6
    small = cl_state.ClientConfig(max_sequence=1)
    c = replace(in_transaction(tv=2), accumulator=(("p0", 1),), partitions=frozenset({"p0"}))
    for expected in (0, 1, 0):
        c = replace(c, accumulator=(("p0", 1),))
        c, batch = cl_batches.next_produce(c, "p0", small)
        assert batch is not None and batch.base_sequence == expected
        c, _ = cl_responses.on_response(c, "Produce", ProduceResponse(Errors.NONE), batch, small)


def test_a_failed_batch_gives_its_sequence_back_and_unknown_producer_id_restarts_at_zero() -> None:
    c = produced(tv=2)
    c, _ = cl.send(c, "p0")
    assert c.in_flight_batches[0].base_sequence == 1
    c, _ = respond(c, "Produce", Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert c.next_sequence("p0") == 1
    c2, _ = cl.send(in_transaction(tv=2), "p0")
    c2, _ = respond(c2, "Produce", Errors.UNKNOWN_PRODUCER_ID)
    assert c2.sequences == ()


def test_a_timed_out_commit_must_be_retried_before_anything_else() -> None:
    c = produced()
    c, _ = cl.commit_transaction(c)  # EndTxn in flight: the result is still pending
    assert cl.commit_transaction(c) == (c, cl_state.ClientOutcome())
    assert cl.abort_transaction(c)[1].throws == "IllegalStateException"
    assert cl.send(c, "p0")[1].throws == "IllegalStateException"


def test_an_invalid_transition_on_the_sender_thread_poisons_the_manager() -> None:
    c = replace(ready(), in_flight_batches=(Produce("p0", 7, 1, 0, 1, True, "t1"),))
    c, _ = respond(c, "Produce", Errors.TOPIC_AUTHORIZATION_FAILED)  # READY -> ABORTABLE_ERROR is invalid
    assert (c.state, c.last_error) == (S.FATAL_ERROR, "IllegalStateException")
    assert cl.begin_transaction(c)[1].throws == "IllegalStateException"


def test_states_are_hashable_values() -> None:
    c, _ = cl.send(in_transaction(), "p0")
    assert len({c, cl.send(in_transaction(), "p0")[0], in_transaction()}) == 2
