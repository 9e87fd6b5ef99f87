"""The producer client's responses (the Sender thread): one handler per transactional response, and Produce.

Models
    :func:`on_response` routes an answer to the handler of its request (``*Handler.handleResponse``), which acts
    on what the error rules (:mod:`txnspec.spec.client_errors`) say: done, look the coordinator up and retry,
    retry, abortable, abortable if possible, fatal. A Produce answer (:func:`handle_produce_response`) completes,
    retries or fails its batch (``Sender.completeBatch``); :func:`expire_batch` is ``delivery.timeout.ms``
    passing and :func:`retry_backoff_elapsed` ``retry.backoff.ms``; :func:`on_disconnect` is a request lost with its
    answer. After each the Sender runs until it settles.

Kafka classes followed (trunk, 4.5.0-SNAPSHOT, ``clients/.../producer/internals/``)
    ``TransactionManager.java`` (``FindCoordinatorHandler``, ``InitProducerIdHandler``,
    ``AddPartitionsToTxnHandler``, ``AddOffsetsToTxnHandler``, ``TxnOffsetCommitHandler``, ``EndTxnHandler``,
    ``handleFailedBatch``), ``Sender.java`` (``completeBatch``, ``failBatch``, ``sendProducerData``: expired
    batches, ``handleProduceResponse``), ``NetworkClient`` (a disconnect fails the request in flight).

Assumptions
    A batch expires only when :func:`expire_batch` says so; a late answer to an expired batch is ignored.

Not modelled
    Batch splitting (MESSAGE_TOO_LARGE), metadata refreshes on NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TypeAlias

from txnspec.spec.client_batches import (
    acknowledged,
    adjust_sequences_due_to_failed_batch,
    earlier_in_flight,
    reenqueue_batch,
)
from txnspec.spec.client_errors import (
    KAFKA_EXCEPTION,
    TOPIC_AUTHORIZATION,
    Reaction,
    classify_produce_error,
    classify_response,
    exception_of,
)
from txnspec.spec.client_sender import finish_step
from txnspec.spec.client_state import (
    DEFAULT_CONFIG,
    FATAL_ERROR,
    PREPARED_TRANSACTION,
    READY,
    ClientConfig,
    ClientOutcome,
    ClientState,
    Poisoned,
    Priority,
    Response,
    TxnRequestHandler,
)
from txnspec.spec.client_transitions import (
    abortable_error,
    abortable_error_if_possible,
    complete_result,
    enqueue,
    fatal_error,
    increment_sequence,
    lookup_coordinator,
    maybe_transition_to_error_state,
    maybe_update_transaction_v2_enabled,
    reenqueue,
    reset_sequence_numbers,
    reset_transaction_state,
    set_pair,
    transition_to,
)
from txnspec.spec.constants import NO_PRODUCER_ID
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    EndTxnResponse,
    FindCoordinator,
    InitProducerId,
    InitProducerIdResponse,
    Produce,
    ProduceResponse,
    TxnOffsetCommit,
)


def retry_backoff_elapsed(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG
                          ) -> tuple[ClientState, ClientOutcome]:
    """``retry.backoff.ms`` has elapsed for ``batch`` (re-enqueued with ``config.retry_backoff``): the Sender may
    drain it again."""
    return finish_step(replace(c, backing_off=c.backing_off - {batch}), config)


def on_response(c: ClientState, request_name: str, response: Response, request: Produce | None = None,
                config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """The response to the transactional request in flight (``request_name``: FindCoordinator,
    InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) or to a produce
    (``Produce``; ``request`` names the batch answered, by default the oldest in flight). The client
    handles it (``TxnRequestHandler.onComplete`` / ``Sender.completeBatch``), then the Sender runs."""
    if request_name == "Produce":
        if not isinstance(response, ProduceResponse):
            raise TypeError(f"a Produce response must be a ProduceResponse, got {response!r}")
        try:
            c = handle_produce_response(c, response, request, config)
        except Poisoned as poisoned:
            c = poisoned.state
        return finish_step(c, config)
    handler = c.in_flight
    if handler is None or handler.name != request_name:
        raise ValueError(f"no {request_name} in flight (in flight: {handler.name if handler else None})")
    c = replace(c, in_flight=None)
    try:
        c = _HANDLERS[request_name](c, handler, response, config)
    except Poisoned as poisoned:
        c = poisoned.state
    return finish_step(c, config)


def on_disconnect(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``onComplete`` with ``wasDisconnected``: the request in flight is retried, after a new lookup of its
    coordinator. (A produce lost this way is answered with NETWORK_EXCEPTION through :func:`on_response`.)"""
    handler = c.in_flight
    if handler is None:
        return c, ClientOutcome()
    c = replace(c, in_flight=None)
    if handler.coordinator_type is not None:
        c = lookup_coordinator(c, handler.coordinator_type, handler.coordinator_key)
    return finish_step(reenqueue(c, handler), config)


def _done(c: ClientState, handler: TxnRequestHandler) -> ClientState:
    return complete_result(c, handler)


def _react(c: ClientState, handler: TxnRequestHandler, reaction: Reaction, exception: str | None,
           config: ClientConfig) -> ClientState:
    """A failed or retried response, as ``RESPONSE_RULES`` says (``reenqueue``, ``lookupCoordinator``,
    ``abortableError``, ``abortableErrorIfPossible``, ``fatalError``)."""
    if reaction is Reaction.LOOKUP_AND_RETRY:
        kind = handler.coordinator_type or CoordinatorType.TRANSACTION
        key = handler.coordinator_key if kind is CoordinatorType.GROUP else c.transactional_id
        return reenqueue(lookup_coordinator(c, kind, key), handler)
    if reaction is Reaction.RETRY:
        return reenqueue(c, handler)
    assert exception is not None
    c = complete_result(c, handler)
    if reaction is Reaction.ABORTABLE:
        return abortable_error(c, exception)  # TxnRequestHandler.abortableError
    if reaction is Reaction.ABORTABLE_IF_POSSIBLE:
        return abortable_error_if_possible(c, exception, config)
    return fatal_error(c, exception)  # TxnRequestHandler.fatalError


def handle_find_coordinator_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                     config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``FindCoordinatorHandler.handleResponse``."""
    assert isinstance(handler.request, FindCoordinator)
    reaction, exception = classify_response("FindCoordinator", response.error)
    if reaction is Reaction.DONE:
        if handler.request.key_type is CoordinatorType.GROUP:
            c = replace(c, group_coordinator_known=True)
        else:
            c = replace(c, txn_coordinator_known=True)
        return _done(c, handler)
    return _react(c, handler, reaction, exception, config)


def handle_init_producer_id_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                     config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``InitProducerIdHandler.handleResponse``: NONE -> READY with the new id/epoch (an epoch bump also
    restarts every sequence); authorization errors and TRANSACTION_ABORTABLE are abortable; fencing and
    anything unexpected are fatal."""
    reaction, exception = classify_response("InitProducerId", response.error)
    if reaction is Reaction.DONE:
        assert isinstance(response, InitProducerIdResponse)
        c = replace(c, producer_id=response.producer_id, producer_epoch=response.producer_epoch)
        assert isinstance(handler.request, InitProducerId)
        if handler.request.keep_prepared_txn and response.ongoing_txn_producer_id != NO_PRODUCER_ID:
            # KIP-939: the kept transaction is prepared, its ongoing pair the state to complete against
            c = transition_to(c, PREPARED_TRANSACTION, sender=True)
            c = replace(c, prepared_txn_state=(response.ongoing_txn_producer_id, response.ongoing_txn_producer_epoch))
        else:
            c = transition_to(c, READY, sender=True)
        # an epoch bump restarts every sequence; a first init adopts the finalized transaction version
        # (KafkaProducer.initTransactions after its await)
        epoch_bump = handler.priority is Priority.EPOCH_BUMP
        c = reset_sequence_numbers(c) if epoch_bump else maybe_update_transaction_v2_enabled(c, True)
        return _done(c, handler)
    return _react(c, handler, reaction, exception, config)


def handle_add_partitions_to_txn_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                          config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``AddPartitionsToTxnHandler.handleResponse`` (one error for every partition of the request)."""
    assert isinstance(handler.request, AddPartitionsToTxn)
    reaction, exception = classify_response("AddPartitionsToTxn", response.error)
    partitions = handler.request.partitions
    if reaction is Reaction.DONE or exception in (TOPIC_AUTHORIZATION, KAFKA_EXCEPTION):
        # the handler's loop ran to its end: the partitions leave the pending set whatever the result
        c = replace(c, pending_partitions=c.pending_partitions - partitions)
    if reaction is Reaction.DONE:
        c = replace(c, partitions=c.partitions | partitions, transaction_started=True)
        return _done(c, handler)
    return _react(c, handler, reaction, exception, config)


def handle_add_offsets_to_txn_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                       config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``AddOffsetsToTxnHandler.handleResponse``: NONE enqueues the TxnOffsetCommit (same result)."""
    assert isinstance(handler.request, AddOffsetsToTxn)
    reaction, exception = classify_response("AddOffsetsToTxn", response.error)
    if reaction is Reaction.DONE:
        request = TxnOffsetCommit(c.transactional_id, handler.request.group_id, c.producer_id, c.producer_epoch,
                                  handler.offsets, *handler.member)
        c = replace(c, pending_offsets=tuple(sorted(dict((*c.pending_offsets, *handler.offsets)).items())),
                    transaction_started=True)
        return enqueue(c, TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS,
                                            completes_call=handler.completes_call))
    return _react(c, handler, reaction, exception, config)


def handle_txn_offset_commit_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                                      config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``TxnOffsetCommitHandler.handleResponse`` (one error for every partition): the group coordinator is
    looked up again on COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / REQUEST_TIMED_OUT; other retriable
    errors retry; group-membership errors are abortable (CommitFailedException); fencing is fatal."""
    assert isinstance(handler.request, TxnOffsetCommit)
    reaction, exception = classify_response("TxnOffsetCommit", response.error)
    if reaction is Reaction.DONE:
        committed = {p for p, _ in handler.request.offsets}
        c = replace(c, pending_offsets=tuple((p, o) for p, o in c.pending_offsets if p not in committed))
        if not c.pending_offsets:
            return _done(c, handler)
        return reenqueue(c, handler)
    if not reaction.retries:
        c = replace(c, pending_offsets=())  # the result completed exceptionally
    return _react(c, handler, reaction, exception, config)


def handle_end_txn_response(c: ClientState, handler: TxnRequestHandler, response: Response,
                            config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``EndTxnHandler.handleResponse``: NONE adopts the (pid, epoch) an EndTxn v5+ (TV2) response carries,
    restarting sequences, and resets the transaction (READY, or INITIALIZING before a client epoch bump).
    TRANSACTION_ABORTABLE is abortable on a commit but fatal (KafkaException) on an abort."""
    assert isinstance(handler.request, EndTxn)
    reaction, exception = classify_response("EndTxn", response.error, handler.request.result)
    if reaction is Reaction.DONE:
        if isinstance(response, EndTxnResponse) and response.producer_id != NO_PRODUCER_ID:
            c = reset_sequence_numbers(replace(c, producer_id=response.producer_id,
                                               producer_epoch=response.producer_epoch))
        return _done(reset_transaction_state(c), handler)
    return _react(c, handler, reaction, exception, config)


def handle_produce_response(c: ClientState, response: ProduceResponse, request: Produce | None = None,
                            config: ClientConfig = DEFAULT_CONFIG) -> ClientState:
    """``Sender.completeBatch``: success (or DUPLICATE_SEQUENCE_NUMBER) completes the batch; a retriable
    error re-enqueues it with its sequence (:func:`classify_produce_error`); any other error fails it
    (``handleFailedBatch``): the manager's error state follows ``maybeTransitionToErrorState``;
    UNKNOWN_PRODUCER_ID restarts the partition's sequence at 0, other errors give the batch's sequence numbers
    back (``adjustSequencesDueToFailedBatch``)."""
    batch = request if request is not None else (c.in_flight_batches[0] if c.in_flight_batches else None)
    if batch is None or batch not in c.in_flight_batches:
        return c  # the batch was already aborted or answered: nothing to complete
    remaining = list(c.in_flight_batches)
    remaining.remove(batch)
    c = replace(c, in_flight_batches=tuple(remaining))
    error = response.error
    # canRetry: an OUT_OF_ORDER_SEQUENCE_NUMBER is retried only while the partition's sequences are resolved
    unresolved = any(p == batch.partition for p, _ in c.unresolved)
    reaction = classify_produce_error(error, earlier_in_flight(c, batch, config) and not unresolved)
    if reaction is Reaction.RETRY:
        return reenqueue_batch(c, batch, config)
    c = replace(c, retried=c.retried - {batch})
    if reaction is Reaction.DONE:
        return acknowledged(c, batch, config)  # handleCompletedBatch
    # failBatch -> handleFailedBatch(batch, exception, adjustSequenceNumbers=True)
    c = maybe_transition_to_error_state(c, exception_of(error), config)
    if c.state is FATAL_ERROR:
        return c
    if error is Errors.UNKNOWN_PRODUCER_ID:  # resetSequenceForPartition
        return replace(c, sequences=set_pair(c.sequences, batch.partition, None),
                       last_acked=set_pair(c.last_acked, batch.partition, None))
    return adjust_sequences_due_to_failed_batch(c, batch, config)


def expire_batch(c: ClientState, batch: Produce, config: ClientConfig = DEFAULT_CONFIG
                 ) -> tuple[ClientState, ClientOutcome]:
    """``delivery.timeout.ms`` has passed for ``batch``, in flight or waiting for its retry
    (``Sender.sendProducerData``): ``failBatch`` with a TimeoutException and ``adjustSequenceNumbers`` false (nobody
    knows whether it was written), and a batch that was retried leaves its partition's sequence unresolved
    (``markSequenceUnresolved``) until :func:`maybe_resolve_sequences` settles it. An answer that comes later is
    ignored."""
    if batch not in c.in_flight_batches and batch not in c.retry_batches:
        return c, ClientOutcome()
    in_retry = batch in c.retried
    c = replace(c, in_flight_batches=tuple(b for b in c.in_flight_batches if b != batch),
                retry_batches=tuple(b for b in c.retry_batches if b != batch), backing_off=c.backing_off - {batch},
                retried=c.retried - {batch})
    try:
        c = maybe_transition_to_error_state(c, exception_of(Errors.REQUEST_TIMED_OUT), config)
    except Poisoned as poisoned:
        c = poisoned.state
    if in_retry:
        after = increment_sequence(batch.base_sequence, batch.record_count, config.max_sequence)
        known = [seq for p, seq in c.unresolved if p == batch.partition]
        c = replace(c, unresolved=set_pair(c.unresolved, batch.partition, known[0] if known else after))
    return finish_step(c, config)


_Handler: TypeAlias = Callable[[ClientState, TxnRequestHandler, Response, ClientConfig], ClientState]


_HANDLERS: Mapping[str, _Handler] = {
    "FindCoordinator": handle_find_coordinator_response,
    "InitProducerId": handle_init_producer_id_response,
    "AddPartitionsToTxn": handle_add_partitions_to_txn_response,
    "AddOffsetsToTxn": handle_add_offsets_to_txn_response,
    "TxnOffsetCommit": handle_txn_offset_commit_response,
    "EndTxn": handle_end_txn_response,
}


__all__ = [
    "expire_batch", "handle_add_offsets_to_txn_response", "handle_add_partitions_to_txn_response",
    "handle_end_txn_response", "handle_find_coordinator_response", "handle_init_producer_id_response",
    "handle_produce_response", "handle_txn_offset_commit_response", "on_disconnect", "on_response",
    "retry_backoff_elapsed",
]
