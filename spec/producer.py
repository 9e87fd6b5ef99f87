"""The producer client of the system model: the application's progress and a projection of its client.

System
    The steps of one producer of the system model, whose state (:class:`~txnspec.spec.producer_state.Producer`:
    the phase of ``TransactionManager.State``, its producer id and epoch, the transactional request in flight, the
    queued handlers, the records not yet sent, the batches in flight with their sequences) is
    :mod:`txnspec.spec.producer_state`. It is a named projection of the one client, :mod:`txnspec.spec.client`
    (:mod:`txnspec.spec.projection` says what it keeps, what it abstracts and why, and lifts a producer back
    into the client's state; ``tests/spec/test_client_agreement.py`` shows both take the same steps). All
    functions here are pure functions of a producer (and the ``ClientConfig``): the system model
    (:mod:`txnspec.spec.system`) composes them with the network.

    * :func:`dispatch` is ``Sender.runOnce``: it sends every request the client can send now (one
      transactional request in flight; EndTxn only once no produce is in flight, as ``KafkaProducer``
      flushes before committing; TV1 adds partitions before producing; TV2 produces directly; requests of
      equal priority, AddPartitionsToTxn, AddOffsetsToTxn and TxnOffsetCommit, in the order
      ``TransactionManager.pendingRequests`` holds them, a retried one at the back and the first
      TxnOffsetCommit behind its group-coordinator lookup). In an abortable error it aborts the records not
      drained and drops the queued handlers (``abortUndrainedBatches``, ``maybeTerminateRequestWithError``); in
      a fatal error it fails every batch and record and sends nothing (``maybeAbortBatches``).
    * :func:`receive` is the client's response handling (``TxnRequestHandler.handleResponse``,
      ``Sender.completeBatch``) with the error rules of :mod:`txnspec.spec.client_errors` (``classify_response``,
      ``classify_produce_error``): retry (re-enqueue), abortable (``ABORTABLE_ERROR``: the application must
      abort; for TV < 2 the abort is followed by an InitProducerId epoch bump, KIP-360), fatal
      (``FATAL_ERROR``).

    * Produce sequences follow ``RecordAccumulator.drain`` and ``TransactionManager``: up to
      ``max_in_flight`` batches per partition (``inFlightBatchesBySequence``); a batch answered with a
      retriable error, or lost, waits to be sent again with its sequence and goes only when it is the first
      in flight (``shouldStopDrainBatchesForPartition``: ``firstInFlightSequence``); no new batch goes while one
      waits for its retry, nor while a batch of an older producer id or epoch is in flight; an
      OUT_OF_ORDER_SEQUENCE_NUMBER is retried when an earlier batch is still in flight (``canRetry``:
      ``!isNextSequence``); a batch failing for good gives its sequence back
      (``adjustSequencesDueToFailedBatch``); a batch the client gives up on leaves its sequence unresolved
      (``maybeResolveSequences``): the transaction aborts and a TV1 client bumps its epoch, which resets the
      sequences (TV2 gets a new epoch with every EndTxn, KIP-890).

Assumptions
    One record per batch; the in-flight limit is per partition (Kafka's is per broker connection; one leader
    per partition here); ``FindCoordinator`` always finds the one coordinator.

Left out
    Idempotent-only producers, batching of several records, a partition's sequence resolved without an epoch
    bump (``maybeResolveSequences`` finding the last acknowledged sequence equal to the expired batch's: the
    transaction aborts anyway), the renumbering of later batches in flight when one fails for good.
"""

from __future__ import annotations

from typing import Any

from txnspec.spec import client_errors as cl_errors
from txnspec.spec import client_state as cl_state
from txnspec.spec import client_transitions as cl_transitions
from txnspec.spec.client_errors import Reaction, classify_produce_error, classify_response
from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    InitProducerId,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
)
from txnspec.spec.network import COORDINATOR, GROUP, Envelope
from txnspec.spec.producer_state import (
    ABORTABLE_ERROR,
    ABORTING,
    COMMITTING,
    FATAL_ERROR,
    IN_TRANSACTION,
    INITIALIZING,
    PREPARED,
    READY,
    TXN_TIMEOUT_MS,
    Batch,
    ClientConfig,
    OffsetsStage,
    Producer,
    Queued,
    set_entry,
)
from txnspec.spec.values import replace

# --- the Sender: what a producer sends after each step -------------------------------------------------

def _next_correlation(p: Producer, request: type, used: frozenset[object]) -> Producer:
    """A correlation id no message in flight uses. Kafka's ids only grow; reusing the smallest free one is
    equivalent (a response can only be confused with a request still in flight) and keeps the space finite."""
    correlation = next(c for c in range(len(used) + 1) if c not in used)
    return replace(p, awaiting=(request, correlation))


def _awaited(p: Producer) -> int:
    assert p.awaiting is not None
    return p.awaiting[1]


def dispatch(config: ClientConfig, p: Producer, used: frozenset[object] = frozenset()
             ) -> tuple[Producer, tuple[Envelope, ...]]:
    """``Sender.runOnce``: send every request the client can send now (see module doc).

    ``used``: the contexts of this producer's messages in flight (correlation ids, and the batches whose
    request or answer is on its way: a batch in flight without one waits for its retry)."""
    out: list[Envelope] = []
    src = p.address
    tid = p.transactional_id
    tv2 = config.tv2
    if p.phase is FATAL_ERROR:
        # Sender.runOnce: a fatal error fails every incomplete batch (maybeAbortBatches) and sends nothing more
        return replace(p, unsent=(), in_flight=frozenset(), retried=frozenset()), ()
    if not p.retried <= p.in_flight:
        p = replace(p, retried=p.retried & p.in_flight)  # a completed batch is no longer in retry
    if p.phase is ABORTABLE_ERROR and p.awaiting is None:
        # maybeSendAndPollTransactionalRequest: records not yet drained are aborted (abortUndrainedBatches), and
        # nextRequest terminates every handler queued before EndTxn (maybeTerminateRequestWithError)
        p = replace(p, unsent=(), queued=())
    if p.awaiting is None:
        if p.phase is INITIALIZING and (p.producer_id == NO_PRODUCER_ID or p.bump_queued):
            bump = p.producer_id != NO_PRODUCER_ID
            p = _next_correlation(p, InitProducerId, used)
            out.append(Envelope(src, COORDINATOR, InitProducerId(
                tid, TXN_TIMEOUT_MS, p.producer_id if bump else -1, p.producer_epoch if bump else -1,
                config.two_phase_commit and config.sends_two_phase_fields,
                p.keep_prepared and config.sends_two_phase_fields), _awaited(p), p.tag))
        elif p.phase in (IN_TRANSACTION, COMMITTING) and (p.queued or p.to_add):
            # nextRequest: new partitions become an AddPartitionsToTxn queued behind the handlers already
            # waiting (equal priority, first come first served); the oldest is sent
            if p.to_add and Queued.PARTITIONS not in p.queued:
                p = replace(p, queued=(*p.queued, Queued.PARTITIONS))
            head, p = p.queued[0], replace(p, queued=p.queued[1:])
            committing_offsets = head is Queued.OFFSETS and p.offsets is OffsetsStage.COMMIT and not tv2
            if committing_offsets and not p.group_found and p.queued:
                # Sender: no coordinator for the handler -> lookupCoordinator(GROUP) and reenqueue(); the
                # FindCoordinator (answered at once here) goes first, then the oldest handler
                head, p = p.queued[0], replace(p, queued=(*p.queued[1:], Queued.OFFSETS), group_found=True)
            elif committing_offsets:
                p = replace(p, group_found=True)
            if head is Queued.PARTITIONS:
                # newPartitionsInTransaction move to pendingPartitionsInTransaction: a partition sent while
                # this request is in flight waits for the next one
                p = replace(_next_correlation(p, AddPartitionsToTxn, used), adding=p.to_add, to_add=frozenset())
                out.append(Envelope(src, COORDINATOR, AddPartitionsToTxn(
                    tid, p.producer_id, p.producer_epoch, p.adding, 0), _awaited(p), p.tag))
            elif p.offsets is OffsetsStage.ADD:
                p = _next_correlation(p, AddOffsetsToTxn, used)
                out.append(Envelope(src, COORDINATOR, AddOffsetsToTxn(
                    tid, p.producer_id, p.producer_epoch, config.group_id), _awaited(p), p.tag))
            elif p.offsets is OffsetsStage.COMMIT:
                p = _next_correlation(p, TxnOffsetCommit, used)
                offsets = (("input-0", p.txn_no),)
                out.append(Envelope(src, GROUP, TxnOffsetCommit(
                    tid, config.group_id, p.producer_id, p.producer_epoch, offsets, p.member_id, p.offsets_generation),
                    _awaited(p), p.tag))
    # Produce: records whose partition is in the transaction (TV2: every partition is, implicitly). Kafka's
    # Sender sends no produce while a transactional request is in flight (Sender.runOnce waits for it).
    unsent = list(p.unsent)
    for partition in p.unsent if p.awaiting is None else ():
        ready = tv2 or partition in p.added
        if not ready or p.phase not in (IN_TRANSACTION, COMMITTING) \
                or not _drains_new_batch(config, p, partition, used):
            continue
        seq = p.next_sequence(partition)
        nxt = 0 if seq >= config.max_sequence else seq + 1
        unsent.remove(partition)
        key = (partition, p.producer_id, p.producer_epoch, seq)
        used = used | {key}  # its Produce is on its way
        p = replace(p, in_flight=p.in_flight | {key}, sequences=set_entry(p.sequences, partition, nxt),
                    started=True, unsent=tuple(unsent))
        out.append(Envelope(src, partition, Produce(partition, p.producer_id, p.producer_epoch, seq, 1, True, tid),
                            key, p.tag))
    # EndTxn once everything before it is done (KafkaProducer flushes before committing).
    if p.awaiting is None and p.phase in (COMMITTING, ABORTING) and p.end_result is not None:
        produce_pending = bool(p.in_flight) and config.waits_for_produce_before_end_txn
        offsets_pending = p.offsets in (OffsetsStage.ADD, OffsetsStage.COMMIT) and p.phase is COMMITTING
        if not p.to_add and not p.unsent and not produce_pending and not offsets_pending:
            result = p.end_result
            if p.started or p.offsets is OffsetsStage.DONE:
                p = _next_correlation(p, EndTxn, used)
                out.append(Envelope(src, COORDINATOR, EndTxn(
                    tid, p.producer_id, p.producer_epoch, result, config.transaction_version),
                    _awaited(p), p.tag))
            else:  # nothing was added: the transaction completes locally (no EndTxn)
                p = transaction_completed(config, p, result)
                p, more = dispatch(config, p, used)
                return p, (*out, *more)
    return p, tuple(out)


def _drains_new_batch(config: ClientConfig, p: Producer, partition: str, used: frozenset[object]) -> bool:
    """``RecordAccumulator.drain`` takes a new batch for ``partition``: fewer than ``max_in_flight`` are in flight,
    none waits for its retry (retries stand first in the partition's deque, in sequence order), none is of an
    older producer id or epoch (``shouldStopDrainBatchesForPartition``)."""
    mine = [b for b in p.in_flight if b[0] == partition]
    if len(mine) >= config.max_in_flight:
        return False
    current = (p.producer_id, p.producer_epoch)
    return all(b[1:3] == current and b in used for b in mine)


def first_in_flight(config: ClientConfig, p: Producer, batch: Batch) -> bool:
    """No batch sent before ``batch`` is still in flight: ``batch.baseSequence() == firstInFlightSequence``, the
    condition for a retried batch to be drained again (and for an OUT_OF_ORDER_SEQUENCE_NUMBER not to be
    retried: ``TransactionManager.canRetry``'s ``isNextSequence``)."""
    return not any(config.earlier(other, batch) for other in p.in_flight)


def transaction_completed(config: ClientConfig, p: Producer, result: TransactionResult) -> Producer:
    phase = INITIALIZING if p.bump_required and not config.tv2 else READY
    return replace(p, phase=phase, added=frozenset(), to_add=frozenset(), queued=(), unsent=(),
                   offsets=OffsetsStage.NONE, offsets_generation=-1, started=False, end_result=None,
                   bump_required=False if phase is READY else p.bump_required, records_sent=0,
                   prepared=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH), kept=False)


# --- responses ----------------------------------------------------------------------------------------

Outcome = str  # what the application is told: "committed", "aborted" or "fatal" (ghost, spec/ghost.py)


def receive(config: ClientConfig, p: Producer, body: Any, context: Any
            ) -> tuple[Producer, Outcome | None] | None:
    """The client handles an answer: the producer after it and what the application learns of its
    transaction's outcome, or None when the answer changes nothing (a stale or duplicated answer, or one to
    a produce the client gave up on). Errors are classified by :mod:`txnspec.spec.client_errors`' rules
    (``classify_produce_error``, ``classify_response``)."""
    if isinstance(body, ProduceResponse):
        if context not in p.in_flight:
            return None
        reaction = classify_produce_error(body.error, not first_in_flight(config, p, context))
        if reaction is Reaction.RETRY:
            # Sender.canRetry -> TransactionManager.canRetry: the batch keeps its sequence and stays in flight until
            # the client's retry step sends it again
            return p, None
        p = replace(p, in_flight=p.in_flight - {context})
        if reaction is not Reaction.DONE:
            p = produce_failed(config, p, body.error, context)
        return p, None
    if p.awaiting is None or p.awaiting[1] != context:
        return None  # no request with that correlation is waiting
    request = p.awaiting[0]
    adding = p.adding
    p = replace(p, awaiting=None, adding=frozenset(), to_add=p.to_add | adding)  # re-enqueued unless added
    reaction, _ = classify_response(request.__name__, body.error, p.end_result if request is EndTxn else None)
    if reaction.retries:
        return reenqueue(p, request), None  # the Sender re-enqueues the request
    if reaction is Reaction.FATAL:
        told = "fatal" if p.phase in (COMMITTING, ABORTING) else None
        return replace(p, phase=FATAL_ERROR), told
    if reaction is Reaction.ABORTABLE_IF_POSSIBLE:
        # abortableErrorIfPossible: the coordinator bumps epochs (InitProducerId v3+): a TV1 client bumps its own
        return abortable(replace(p, bump_required=p.bump_required or _bumps_epoch(config))), None
    if reaction is Reaction.ABORTABLE:
        return abortable(p), None
    told = None
    if request is InitProducerId:
        keep = p.keep_prepared and config.sends_two_phase_fields  # builder.data.keepPreparedTxn()
        p = replace(p, phase=READY, producer_id=body.producer_id,
                    producer_epoch=body.producer_epoch, sequences=(), bump_required=False,
                    bump_queued=False, keep_prepared=False)
        if keep and body.ongoing_txn_producer_id != NO_PRODUCER_ID:
            # InitProducerIdHandler: keepPreparedTxn and an ongoing transaction -> PREPARED_TRANSACTION, the
            # preparedTxnState the ongoing pair. 4.4 leaves transactionStarted false: completeTransaction's EndTxn
            # is then completed locally, without an RPC (the protocol's switch)
            p = replace(p, phase=PREPARED, prepared=(body.ongoing_txn_producer_id, body.ongoing_txn_producer_epoch),
                        kept=True, started=config.kept_transaction_started)
    elif request is AddPartitionsToTxn:
        p = replace(p, added=p.added | adding, to_add=p.to_add - adding, started=True)
    elif request is AddOffsetsToTxn:
        p = replace(p, offsets=OffsetsStage.COMMIT, started=True, queued=(*p.queued, Queued.OFFSETS))
    elif request is TxnOffsetCommit:
        p = replace(p, offsets=OffsetsStage.DONE, started=True)
    elif request is EndTxn:
        result = p.end_result
        assert result is not None
        told = "committed" if result is TransactionResult.COMMIT else "aborted"
        if config.tv2 and isinstance(body, EndTxnResponse) and body.producer_id != NO_PRODUCER_ID:
            p = replace(p, producer_id=body.producer_id, producer_epoch=body.producer_epoch, sequences=())
        p = transaction_completed(config, p, result)
    return p, told


def reenqueue(p: Producer, request: type) -> Producer:
    """``TxnRequestHandler.reenqueue``: the handler goes back to the end of the queue."""
    kind = _QUEUED_BY_REQUEST.get(request)
    return replace(p, queued=(*p.queued, kind)) if kind is not None and kind not in p.queued else p


_QUEUED_BY_REQUEST = {AddPartitionsToTxn: Queued.PARTITIONS, AddOffsetsToTxn: Queued.OFFSETS,
                      TxnOffsetCommit: Queued.OFFSETS}


def _bumps_epoch(config: ClientConfig) -> bool:
    """``needToTriggerEpochBumpFromClient`` (KIP-360: TV < 2; the protocol's switch for clients before it)."""
    return not config.tv2 and config.bumps_epoch_after_abortable_error


def abortable(p: Producer) -> Producer:
    """``transitionToAbortableError``: a no-op while aborting; an invalid transition (the Sender thread) is fatal."""
    if p.phase in (ABORTING, ABORTABLE_ERROR, FATAL_ERROR):
        return p
    if cl_state.is_transition_valid(cl_state.State[p.phase.name], cl_state.ABORTABLE_ERROR):
        return replace(p, phase=ABORTABLE_ERROR)
    return replace(p, phase=FATAL_ERROR)


def produce_failed(config: ClientConfig, p: Producer, error: Errors, batch: Batch | None = None,
                   unresolved: bool = False, adjust: bool = True) -> Producer:
    """A produce failed (``handleFailedBatch``): ``maybeTransitionToErrorState`` bumps the epoch (TV1) only outside
    completion; an error answer gives the batch's sequence back (``adjust``: ``adjustSequencesDueToFailedBatch``);
    ``unresolved``: the client gave up on a batch in retry, so it cannot know whether it was written:
    ``maybeResolveSequences`` then requires an epoch bump even while completing."""
    if error in cl_errors.PRODUCE_FATAL_ERRORS:
        return replace(p, phase=FATAL_ERROR)
    completing = p.phase in (COMMITTING, ABORTING)
    bump = _bumps_epoch(config) and (unresolved or not completing)
    p = replace(abortable(p), bump_required=p.bump_required or bump)
    if batch is not None and adjust and batch[1:3] == (p.producer_id, p.producer_epoch) \
            and any(partition == batch[0] for partition, _ in p.sequences):
        seq = cl_transitions.decrement_sequence(p.next_sequence(batch[0]), 1, config.max_sequence)
        p = replace(p, sequences=set_entry(p.sequences, batch[0], seq))
    return p


def expire_batch(config: ClientConfig, p: Producer, batch: Batch, waiting: bool) -> Producer:
    """The client gives up on a batch in flight (``delivery.timeout.ms``; ``waiting``: it waits for its retry):
    ``Sender.sendProducerData`` fails it with a TimeoutException without giving its sequence back, and a batch in
    retry (``ProducerBatch.inRetry``) leaves its sequence unresolved (``markSequenceUnresolved``): with one batch
    in flight per partition ``maybeResolveSequences`` then finds it unacknowledged."""
    in_retry = waiting or batch in p.retried
    return produce_failed(config, replace(p, in_flight=p.in_flight - {batch}, retried=p.retried - {batch}),
                          Errors.REQUEST_TIMED_OUT, batch, unresolved=in_retry, adjust=False)


def request_timed_out(p: Producer) -> Producer:
    """The transactional request in flight is lost with its answer: the client re-enqueues it."""
    assert p.awaiting is not None
    return reenqueue(replace(p, awaiting=None, adding=frozenset(), to_add=p.to_add | p.adding), p.awaiting[0])


def restarted(p: Producer) -> Producer:
    """The process crashed and a new instance with the same transactional id starts (ghost: next incarnation)."""
    return Producer(index=p.index, transactional_id=p.transactional_id, incarnation=p.incarnation + 1,
                    txn_no=p.txn_no, generation=p.generation, decision=p.decision, recorded=p.recorded)
