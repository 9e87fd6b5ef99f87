"""The system model's producer (:mod:`txnspec.spec.producer`) as a named projection of the one client,
:mod:`txnspec.spec.client`.

What it projects
    ``spec/client.py`` (with its ``spec/client_*.py`` modules) is the client: Kafka's ``TransactionManager`` with
    the parts of ``Sender`` and ``RecordAccumulator`` that decide what goes out, and the error rules of both
    (``RESPONSE_RULES``, ``classify_produce_error``), which ``spec/producer.py`` imports. The model checker's
    :class:`Producer` keeps what of a :class:`ClientState` the protocol's state space needs: the state, producer id
    and epoch, the partitions added, waiting or being added, the transactional request in flight and the handlers
    queued (as ``Queued`` marks), the records not yet drained, the batches in flight with their sequences, the
    next sequence per partition, the consumer-offsets stage, whether the transaction started and whether an epoch
    bump is due.
    :func:`lift` rebuilds the :class:`ClientState` a producer stands for; :func:`client_step` runs
    ``spec/client.py`` on it for a step the system model takes; :func:`compare_step` says where the two disagree,
    as (step, aspect) pairs, over the :class:`View` both are seen through.

What is abstracted, and why (the state space)
    * ``FindCoordinator`` is answered at once by the one coordinator: the client's lookups are run to their
      answer inside the step (:func:`client_step`), and no coordinator is ever unknown in a lifted state.
    * One record per batch (``max_batch_records=1``, batch.size) and the in-flight limit per partition.
    * A batch without its Produce or answer on the network waits for the model's retry step: a lost Produce
      (request timeout) and a retriable answer (``retry.backoff.ms``) are both a retry batch backing off
      (``retry_backoff=True``); the model's produce retry step is
      :func:`~txnspec.spec.client_responses.retry_backoff_elapsed`.
    * Correlation ids, the application's progress (transaction number, records sent, the generation of its
      consumer) and the ghost are the system model's, not the client's: the view leaves them out.
    * Under TV2 the partitions of the transaction are implicit (the leader adds them, KIP-890): the producer
      keeps none, the lift counts those with a record undrained or in flight, the view compares none.
    * The blocking calls' results (``pendingTransition``) are seen only as "a call is pending"; the offsets to
      commit only while their TxnOffsetCommit, their one reader, is queued or sent; a fatal client only as fatal
      (its Sender sends nothing more, every call fails).
    * The last acknowledged sequence per partition is not kept: the lift infers it (a batch that left the flight
      before the first one still in it was acknowledged or gave its sequence back). Which batches were retried
      (``ProducerBatch.inRetry``) is kept only where a batch can expire, the one step that reads it.

    What still differs is data: :data:`txnspec.spec.client_agreement.KNOWN_DIFFERENCES`, each with its reason;
    ``tests/spec/test_client_agreement.py`` checks that exactly those differ on every reachable (state, step) pair
    of its scenarios (:func:`txnspec.spec.client_agreement.agreement`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any, NamedTuple

from txnspec.spec import client as cl
from txnspec.spec import client_errors as cl_errors
from txnspec.spec import client_responses as cl_responses
from txnspec.spec import client_sender as cl_sender
from txnspec.spec import client_state as cl_state
from txnspec.spec import producer_state as pr_state
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.constants import NO_PRODUCER_ID
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    ErrorResponse,
    FindCoordinator,
    InitProducerId,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
)
from txnspec.spec.producer_state import OffsetsStage, Phase, Producer, Queued

K = ActionKind


OFFSETS_PARTITION = "input-0"  # the input partition whose position the application commits (spec/producer.py)


# --- lift: the ClientState a producer stands for ----------------------------------------------------------

def _handler(request: cl_state.TxnRequest, priority: cl_state.Priority, completes_call: bool = False,
             offsets: tuple[tuple[str, int], ...] = (), member: tuple[str, int] = ("", -1)
             ) -> cl_state.TxnRequestHandler:
    return cl_state.TxnRequestHandler(request, priority, completes_call=completes_call, offsets=offsets, member=member)


def _offsets(p: Producer) -> tuple[tuple[str, int], ...]:
    return ((OFFSETS_PARTITION, p.txn_no),)


def _request_handler(config: pr_state.ClientConfig, p: Producer, request: type) -> cl_state.TxnRequestHandler:
    """The handler of a transactional request of ``p``'s, as ``dispatch`` builds the request."""
    tid, pid, epoch = p.transactional_id, p.producer_id, p.producer_epoch
    if request is InitProducerId:
        bump = pid != NO_PRODUCER_ID
        return _handler(InitProducerId(tid, pr_state.TXN_TIMEOUT_MS, pid if bump else -1, epoch if bump else -1),
                        cl_state.Priority.EPOCH_BUMP if bump else cl_state.Priority.INIT_PRODUCER_ID,
                        completes_call=True)
    if request is AddPartitionsToTxn:
        return _handler(AddPartitionsToTxn(tid, pid, epoch, p.adding or p.to_add, 0),
                        cl_state.Priority.ADD_PARTITIONS_OR_OFFSETS)
    member = (p.member_id, p.offsets_generation)
    if request is AddOffsetsToTxn:
        return _handler(AddOffsetsToTxn(tid, pid, epoch, config.group_id), cl_state.Priority.ADD_PARTITIONS_OR_OFFSETS,
                        offsets=_offsets(p), member=member)
    if request is TxnOffsetCommit:
        return _handler(TxnOffsetCommit(tid, config.group_id, pid, epoch, _offsets(p), *member),
                        cl_state.Priority.ADD_PARTITIONS_OR_OFFSETS)
    assert request is EndTxn and p.end_result is not None
    return _handler(EndTxn(tid, pid, epoch, p.end_result, 2 if config.tv2 else 0), cl_state.Priority.END_TXN,
                    completes_call=not p.bump_queued)


def _commit_pending(config: pr_state.ClientConfig, p: Producer) -> bool:
    """A failed commit's EndTxn handler still waits in the queue: a transactional request in flight or a batch
    not completed keeps ``nextRequest`` from terminating it (the model lets the application abort only after)."""
    return p.phase is Phase.ABORTABLE_ERROR and p.end_result is TransactionResult.COMMIT \
        and (p.awaiting is not None or (bool(p.in_flight) and config.waits_for_produce_before_end_txn))


def _pending_requests(config: pr_state.ClientConfig, p: Producer) -> tuple[cl_state.TxnRequestHandler, ...]:
    """``pendingRequests``, by priority: the first InitProducerId, the queued adds, EndTxn, the epoch bump."""
    queue: list[cl_state.TxnRequestHandler] = []
    waiting = p.awaiting[0] if p.awaiting is not None else None
    if p.phase is Phase.INITIALIZING and waiting is None and (p.producer_id == NO_PRODUCER_ID or p.bump_queued):
        queue.append(_request_handler(config, p, InitProducerId))
    for kind in p.queued:
        if kind is Queued.PARTITIONS:
            queue.append(_request_handler(config, replace(p, adding=frozenset()), AddPartitionsToTxn))
        elif p.offsets is OffsetsStage.ADD:
            queue.append(_request_handler(config, p, AddOffsetsToTxn))
        elif p.offsets is OffsetsStage.COMMIT:
            queue.append(_request_handler(config, p, TxnOffsetCommit))
    completing = p.phase in (Phase.COMMITTING_TRANSACTION, Phase.ABORTING_TRANSACTION) and p.end_result is not None
    if (completing or _commit_pending(config, p)) and waiting is not EndTxn:
        queue.append(_request_handler(config, p, EndTxn))
    if (completing or _commit_pending(config, p)) and p.bump_queued and waiting is not InitProducerId:
        queue.append(_request_handler(config, replace(p, phase=Phase.INITIALIZING), InitProducerId))
    return tuple(queue)


def _pending_call(config: pr_state.ClientConfig, p: Producer) -> tuple[cl_state.State, str] | None:
    """The blocking call whose result is pending (``pendingTransition``)."""
    if p.phase is Phase.INITIALIZING:
        if p.producer_id == NO_PRODUCER_ID:
            return cl_state.INITIALIZING, "initTransactions"
        # the epoch bump an abort queued completes the abort (a bump due but not queued completes nothing)
        return (cl_state.ABORTING_TRANSACTION, "abortTransaction") if p.bump_queued else None
    if p.phase is Phase.COMMITTING_TRANSACTION or _commit_pending(config, p):
        return cl_state.COMMITTING_TRANSACTION, "commitTransaction"
    if p.phase is Phase.ABORTING_TRANSACTION:
        return cl_state.ABORTING_TRANSACTION, "abortTransaction"
    return None


def _in_sequence_order(config: pr_state.ClientConfig, batches: Iterable[pr_state.Batch]) -> list[pr_state.Batch]:
    """Batches in ``inflightBatchesBySequence`` order within each partition, producer id and epoch."""
    batches = list(batches)
    return sorted(batches, key=lambda b: (b[:3], sum(config.earlier(o, b) for o in batches)))


def lift(config: pr_state.ClientConfig, p: Producer, in_transit: frozenset[Any] = frozenset()) -> cl_state.ClientState:
    """The :class:`ClientState` that ``p`` projects. ``in_transit``: the contexts of ``p``'s messages on the
    network (a batch in flight without its Produce or answer there waits for its retry)."""
    tv2 = config.tv2
    waiting = p.awaiting[0] if p.awaiting is not None else None
    in_flight = _request_handler(config, p, waiting) if waiting is not None else None
    queued_adds = Queued.PARTITIONS in p.queued
    sent = _in_sequence_order(config, p.in_flight)
    batches = {b: pr_state.as_produce(b, p.transactional_id) for b in sent}
    retrying = [b for b in sent if b not in in_transit]
    accumulator: dict[str, int] = {}
    for partition in p.unsent:
        accumulator[partition] = accumulator.get(partition, 0) + 1
    implicit = frozenset(p.unsent) | {b[0] for b in p.in_flight}  # TV2: the partitions the leader adds
    error = cl_errors.KAFKA_EXCEPTION if p.phase in (Phase.ABORTABLE_ERROR, Phase.FATAL_ERROR) else None
    return cl_state.ClientState(
        p.transactional_id, cl_state.State[p.phase.name], p.producer_id, p.producer_epoch, config.transaction_version,
        last_error=error,
        new_partitions=p.to_add if not queued_adds else frozenset(),
        pending_partitions=p.adding | (p.to_add if queued_adds else frozenset()),
        partitions=implicit if tv2 else p.added,
        pending_offsets=_offsets(p) if p.offsets is OffsetsStage.COMMIT else (),
        transaction_started=p.started,
        client_side_epoch_bump_required=p.bump_required and p.phase is not Phase.INITIALIZING,
        pending_requests=_pending_requests(config, p),
        in_flight=in_flight,
        txn_coordinator_known=p.phase is not Phase.UNINITIALIZED,
        group_coordinator_known=p.group_found,
        pending_transition=_pending_call(config, p),
        sequences=tuple(sorted(p.sequences)),
        accumulator=tuple(accumulator.items()),
        retry_batches=tuple(batches[b] for b in retrying),
        in_flight_batches=tuple(batches[b] for b in sent if b in in_transit),
        backing_off=frozenset(batches[b] for b in retrying),
        retried=frozenset(batches[b] for b in (*retrying, *p.retried)),
        last_acked=_last_acked(p),
    )


def _last_acked(p: Producer) -> tuple[tuple[str, int], ...]:
    """``lastAckedSequence`` per partition, which the producer does not keep: every batch of the current epoch that
    left the flight before the first one still in it was acknowledged or gave its sequence back, so the last
    acknowledged one precedes the batches in flight (sequences taken as not wrapped since the epoch began)."""
    acked = []
    for partition, next_sequence in p.sequences:
        flying = sum(1 for b in p.in_flight if b[0] == partition and b[1:3] == (p.producer_id, p.producer_epoch))
        if next_sequence - flying - 1 >= 0:
            acked.append((partition, next_sequence - flying - 1))
    return tuple(sorted(acked))


# --- the client's step for a step of the system model --------------------------------------------------------

def _requests(sends: Iterable[object]) -> tuple[object, ...]:
    """Requests as both sides are compared: no FindCoordinator (answered at once), EndTxn's version as "TV2 or
    not" (the producer writes the transaction version, the client the request version's meaning)."""
    out = []
    for r in sends:
        if isinstance(r, FindCoordinator):
            continue
        if isinstance(r, EndTxn):
            r = replace(r, transaction_version=2 if r.transaction_version >= 2 else 0)
        out.append(r)
    return tuple(out)


def find_coordinators_at_once(c: cl_state.ClientState, tm: cl_state.ClientConfig, sends: tuple[object, ...] = ()
                              ) -> tuple[cl_state.ClientState, tuple[object, ...]]:
    """Answer every coordinator lookup the client sends, at once (the one coordinator is always found)."""
    while c.in_flight is not None and isinstance(c.in_flight.request, FindCoordinator):
        c, outcome = cl_responses.on_response(c, "FindCoordinator", ErrorResponse(Errors.NONE), None, tm)
        sends = (*sends, *outcome.sends)
    return c, sends


class ClientStep(NamedTuple):
    """What ``spec/client.py`` does for one step: the state after, the requests sent, the exception thrown."""

    state: cl_state.ClientState
    sends: tuple[object, ...]
    throws: str | None = None


def client_step(config: pr_state.ClientConfig, p: Producer, in_transit: frozenset[Any], action: Action
                ) -> ClientStep | None:
    """``spec/client.py``'s step for ``action`` of producer ``p`` (None: the client takes no step: a message
    no request of the client's waits for, which Kafka's NetworkClient never delivers)."""
    tm = config.transaction_manager
    c = lift(config, p, in_transit)
    kind = action.kind
    if kind is K.CRASH:  # a new KafkaProducer with the same configuration
        return ClientStep(cl_state.ClientState(p.transactional_id, transaction_version=config.transaction_version), ())
    if kind is K.INIT_TRANSACTIONS:
        c, outcome = cl.init_transactions(c, tm)
    elif kind is K.BEGIN_TRANSACTION:
        c, outcome = cl.begin_transaction(c, tm)
    elif kind is K.SEND:
        assert action.partition is not None
        c, outcome = cl.send(c, action.partition, tm)
    elif kind is K.SEND_OFFSETS_TO_TRANSACTION:
        c, outcome = cl.send_offsets_to_transaction(c, config.group_id, dict(_offsets(p)), tm,
                                                    (p.member_id, p.generation))
    elif kind is K.COMMIT_TRANSACTION:
        c, outcome = cl.commit_transaction(c, tm)
    elif kind is K.ABORT_TRANSACTION:
        c, outcome = cl.abort_transaction(c, tm)
    elif kind is K.EXPIRE_BATCH:  # delivery.timeout.ms
        assert action.batch is not None
        c, outcome = cl_responses.expire_batch(c, pr_state.as_produce(action.batch, p.transactional_id), tm)
    elif kind is K.RETRY and action.message is not None:  # a produce's retry back-off ends
        batch = pr_state.as_produce(action.message.context, p.transactional_id)
        c, outcome = cl_responses.retry_backoff_elapsed(c, batch, tm)
    elif kind is K.RETRY:  # the request timed out with its answer: NetworkClient disconnects
        c, outcome = cl_responses.on_disconnect(c, tm)
    elif action.is_delivery:
        if not action.awaited:
            return None
        assert action.message is not None
        body, context = action.message.body, action.message.context
        if isinstance(body, ProduceResponse):
            batch = pr_state.as_produce(context, p.transactional_id)
            c, outcome = cl_responses.on_response(c, "Produce", body, batch, tm)
        else:
            assert c.in_flight is not None
            c, outcome = cl_responses.on_response(c, c.in_flight.name, body, None, tm)
    else:
        raise ValueError(f"no client step for {action}")
    c, sends = find_coordinators_at_once(c, tm, outcome.sends)
    return ClientStep(c, _requests(sends), outcome.throws)


# --- what both are compared on ----------------------------------------------------------------------------

def _batch(b: Produce) -> pr_state.Batch:
    return b.partition, b.producer_id, b.producer_epoch, b.base_sequence


class View(NamedTuple):
    """A client as both sides are compared (see the module doc for what is left out)."""

    state: cl_state.State
    producer_id: int
    producer_epoch: int
    partitions: frozenset[str] | None  # TV1: added to the transaction (TV2: implicit, not compared)
    partitions_to_add: frozenset[str] | None  # TV1: new or pending
    in_flight: object  # the transactional request awaiting its answer
    queued: tuple[str, ...]  # the handlers queued, in order (lookups left out)
    transaction_started: bool
    epoch_bump_due: bool
    sequences: tuple[tuple[str, int], ...]
    batches: frozenset[pr_state.Batch]  # sent and not completed
    retrying: frozenset[pr_state.Batch]  # of those, waiting for their retry
    undrained: tuple[tuple[str, int], ...]
    pending_offsets: tuple[tuple[str, int], ...]  # while their TxnOffsetCommit, their only reader, is queued or sent
    call_pending: bool


def view(c: cl_state.ClientState) -> View:
    if c.state is cl_state.FATAL_ERROR:
        # the Sender sends nothing more (Sender.runOnce) and every call fails: only who the client was is left
        return View(c.state, c.producer_id, c.producer_epoch, None, None, None, (), False, False, (), frozenset(),
                    frozenset(), (), (), False)
    tv1 = not c.tv2
    handlers = (*c.pending_requests, *((c.in_flight,) if c.in_flight is not None else ()))
    bump = c.client_side_epoch_bump_required or any(h.priority is cl_state.Priority.EPOCH_BUMP for h in handlers)
    return View(
        c.state, c.producer_id, c.producer_epoch,
        c.partitions if tv1 else None, c.new_partitions | c.pending_partitions if tv1 else None,
        _requests((c.in_flight.request,))[0] if c.in_flight is not None else None,
        tuple(h.name for h in c.pending_requests if not isinstance(h.request, FindCoordinator)),
        c.transaction_started, bump, tuple(sorted(c.sequences)),
        frozenset(_batch(b) for b in (*c.in_flight_batches, *c.retry_batches)),
        frozenset(_batch(b) for b in c.retry_batches),
        tuple(sorted(c.accumulator)),
        c.pending_offsets if any(isinstance(h.request, TxnOffsetCommit) for h in handlers) else (),
        c.pending_transition is not None)


Difference = tuple[str, str]  # (the step, the aspect of the view, "sends" or "throws" on which they differ)


def step_name(action: Action, p: Producer) -> str:
    """A step as differences are keyed: its kind, and for an answer the request it answers and its error."""
    if action.is_delivery and action.message is not None and action.awaited:
        body = action.message.body
        request = "Produce" if isinstance(body, ProduceResponse) or p.awaiting is None else p.awaiting[0].__name__
        return f"{request} answered {body.error}"
    return str(action.kind.value)


def compare_step(config: pr_state.ClientConfig, p: Producer, in_transit: frozenset[Any], action: Action,
                 after: Producer, after_in_transit: frozenset[Any], sent: Iterable[object]) -> frozenset[Difference]:
    """Where ``spec/client.py`` and the model's producer disagree on ``action``: the model took ``p`` to ``after``
    and sent ``sent``."""
    step = step_name(action, p)
    theirs = client_step(config, p, in_transit, action)
    if theirs is None:  # a stale answer: the model's producer must ignore it too
        return frozenset() if (after, tuple(sent)) == (p, ()) else frozenset({(step, "stale answer")})
    differences = set()
    if theirs.throws is not None:
        differences.add((step, "throws"))
    if sorted(map(repr, theirs.sends)) != sorted(map(repr, _requests(sent))):
        differences.add((step, "sends"))
    ours = view(lift(config, after, after_in_transit))
    differences.update((step, aspect) for aspect, a, b in zip(View._fields, ours, view(theirs.state), strict=True)
                       if a != b)
    return frozenset(differences)


def settled(config: pr_state.ClientConfig, p: Producer, in_transit: frozenset[Any]) -> bool:
    """The producer's client has sent what it can: ``spec/client.py``'s Sender, run on the lift, sends nothing."""
    c = lift(config, p, in_transit)
    tm = config.transaction_manager
    after, sent = cl_sender.run_sender(c, tm)
    after, sends = find_coordinators_at_once(after, tm, sent)
    return not _requests(sends) and view(after) == view(c)
