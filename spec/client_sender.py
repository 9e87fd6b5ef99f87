"""The producer client's Sender: which transactional request goes out next, and running until it settles.

Models
    ``TransactionManager.nextRequest`` (:func:`next_request`: the priority queue of transactional requests, at
    most one in flight, an EndTxn preceded by the AddPartitionsToTxn of partitions not yet added) and
    ``Sender.runOnce`` (``maybeSendAndPollTransactionalRequest``, then ``sendProducerData``): after each call or
    response the Sender runs until it can send nothing more without a further response (:func:`run_sender`).
    An authorization error waits for the application's reset (:func:`sender_handle_authorization_error`).

Kafka classes followed (trunk, 4.5.0-SNAPSHOT, ``clients/.../producer/internals/``)
    ``Sender.java`` (``runOnce``, ``maybeSendAndPollTransactionalRequest``, ``sendProducerData``,
    ``maybeAbortBatches``), ``TransactionManager.java`` (``nextRequest``, ``hasInFlightRequest``,
    ``maybeTerminateRequestWithError``, ``addPartitionsToTransactionHandler``).

Assumptions
    The priority queue is FIFO among equal priorities (Java's heap leaves that order unspecified); a
    ``FindCoordinator`` is answered by the one coordinator the system model has.

Not modelled
    Metadata requests, connection management, back-off timing (a back-off is one step).
"""

from __future__ import annotations

from dataclasses import replace

from txnspec.spec.client_batches import abort_batches, abort_undrained_batches, maybe_resolve_sequences, next_produce
from txnspec.spec.client_errors import AUTHENTICATION, CLUSTER_AUTHORIZATION, TRANSACTIONAL_ID_AUTHORIZATION
from txnspec.spec.client_state import (
    ABORTABLE_ERROR,
    ABORTING_TRANSACTION,
    DEFAULT_CONFIG,
    FATAL_ERROR,
    UNINITIALIZED,
    ClientConfig,
    ClientOutcome,
    ClientState,
    Poisoned,
    Priority,
    Thrown,
    TxnRequest,
    TxnRequestHandler,
)
from txnspec.spec.client_transitions import (
    complete_result,
    enqueue,
    lookup_coordinator,
    reenqueue,
    reset_transaction_state,
    transition_to,
)
from txnspec.spec.messages import AddPartitionsToTxn, CoordinatorType, EndTxn, FindCoordinator, Produce


def add_partitions_handler(c: ClientState) -> tuple[ClientState, TxnRequestHandler]:
    """``addPartitionsToTransactionHandler``: every pending partition, the new ones included."""
    pending = c.pending_partitions | c.new_partitions
    c = replace(c, pending_partitions=pending, new_partitions=frozenset())
    request = AddPartitionsToTxn(c.transactional_id, c.producer_id, c.producer_epoch, pending, 0)
    return c, TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS)


def next_request(c: ClientState) -> tuple[ClientState, TxnRequestHandler | None]:
    """``TransactionManager.nextRequest(accumulator.hasIncomplete())``."""
    if c.new_partitions:
        c, handler = add_partitions_handler(c)
        c = enqueue(c, handler)
    if not c.pending_requests:
        return c, None
    head = c.pending_requests[0]
    if isinstance(head.request, EndTxn) and c.has_incomplete_batches:
        return c, None  # EndTxn waits until every batch is flushed
    c = replace(c, pending_requests=c.pending_requests[1:])
    # maybeTerminateRequestWithError: in an error state only a lookup may go out (while abortable)
    if c.has_error and not (c.state is ABORTABLE_ERROR and isinstance(head.request, FindCoordinator)):
        return complete_result(c, head), None
    nxt: TxnRequestHandler | None = head
    if isinstance(head.request, EndTxn) and not c.transaction_started:
        # nothing was added to the transaction: it completes without an EndTxn
        c = complete_result(c, head)
        if c.state is not FATAL_ERROR:
            c = reset_transaction_state(c)
        nxt = c.pending_requests[0] if c.pending_requests else None
        c = replace(c, pending_requests=c.pending_requests[1:])
    return c, nxt


def awaiting_authorization_reset(c: ClientState) -> bool:
    """``Sender.shouldHandleAuthorizationError`` applies: the Sender's next iteration resets the client."""
    return c.state is ABORTABLE_ERROR and c.last_error in (TRANSACTIONAL_ID_AUTHORIZATION, CLUSTER_AUTHORIZATION)


def sender_handle_authorization_error(c: ClientState) -> tuple[ClientState, ClientOutcome]:
    """``Sender.shouldHandleAuthorizationError``: after an abortable authorization error the queued requests
    fail, every batch is aborted and the manager goes back to UNINITIALIZED (``transitionToUninitialized``),
    so that ``initTransactions`` can be called again. Returns the state unchanged if it does not apply."""
    if not awaiting_authorization_reset(c):
        return c, ClientOutcome()
    c = replace(c, last_error=AUTHENTICATION)  # failPendingRequests: abortableError(AuthenticationException)
    c = abort_batches(c)
    try:
        c = transition_to(c, UNINITIALIZED, sender=True)
    except Poisoned as poisoned:
        return poisoned.state, ClientOutcome()
    return replace(c, pending_transition=None, last_error=None), ClientOutcome()


def _run_once(c: ClientState, config: ClientConfig) -> tuple[ClientState, tuple[TxnRequest | Produce, ...]]:
    """``Sender.runOnce``: one iteration (see :func:`run_sender`)."""
    if c.unresolved:
        c = maybe_resolve_sequences(c, config)
    if c.state is FATAL_ERROR:
        return abort_batches(c), ()
    if awaiting_authorization_reset(c):
        return c, ()
    if c.in_flight is not None:
        return c, ()  # while a transactional request is outstanding the Sender only polls
    if c.state is ABORTABLE_ERROR or c.state is ABORTING_TRANSACTION:
        c = abort_undrained_batches(c)
    c, handler = next_request(c)
    if handler is not None:
        kind = handler.coordinator_type
        known = kind is None or (c.group_coordinator_known if kind is CoordinatorType.GROUP
                                 else c.txn_coordinator_known)
        if not known:
            assert kind is not None
            c = lookup_coordinator(c, kind, handler.coordinator_key)  # maybeFindCoordinatorAndRetry
            return reenqueue(c, handler), ()
        return replace(c, in_flight=handler), (handler.request,)
    sent: list[TxnRequest | Produce] = []
    for partition in dict.fromkeys([*(p for p, _ in c.accumulator), *(b.partition for b in c.retry_batches)]):
        while True:
            c, batch = next_produce(c, partition, config)
            if batch is None:
                break
            sent.append(batch)
    return c, tuple(sent)


def run_sender(c: ClientState, config: ClientConfig = DEFAULT_CONFIG
               ) -> tuple[ClientState, tuple[TxnRequest | Produce, ...]]:
    """Run the Sender until it can send nothing more without a further response."""
    sent: list[TxnRequest | Produce] = []
    for _ in range(64):
        try:
            after, out = _run_once(c, config)
        except Poisoned as poisoned:
            after, out = poisoned.state, ()
        sent.extend(out)
        if after == c:
            return c, tuple(sent)
        c = after
    raise AssertionError("the Sender did not settle")  # pragma: no cover


def finish_step(c: ClientState, config: ClientConfig, throws: str | None = None) -> tuple[ClientState, ClientOutcome]:
    c, sent = run_sender(c, config)
    return c, ClientOutcome(throws, sent)


def finish_call(c: ClientState, effect: ClientState | Thrown, config: ClientConfig
                ) -> tuple[ClientState, ClientOutcome]:
    if isinstance(effect, Thrown):
        return c, ClientOutcome(effect.name)
    return finish_step(effect, config)


__all__ = [
    "add_partitions_handler", "awaiting_authorization_reset", "finish_call", "finish_step", "next_request",
    "run_sender", "sender_handle_authorization_error",
]
