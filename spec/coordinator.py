"""The transaction coordinator's request handlers: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn.

System
    One transaction coordinator owning the transaction-log partition of every transactional id it serves. Each
    handler checks the request against the id's :class:`~txnspec.spec.coordinator_state.TxnMetadata`, prepares a
    transition, writes it to the transaction log and completes it (:mod:`txnspec.spec.txn_metadata`). EndTxn
    (transaction version 0/1 and 2 paths) hands a prepared transaction's markers to the channel
    (:mod:`txnspec.spec.txn_markers`). The coordinator's other concerns are modules of their own: its state
    (:mod:`txnspec.spec.coordinator_state`), the timeout scan and transactional-id expiration
    (:mod:`txnspec.spec.txn_expiry`), the load after a failover (:mod:`txnspec.spec.txn_loading`) and two-phase
    commit (:mod:`txnspec.spec.two_phase`).

Kafka sources followed (trunk, 4.x)
    ``core/.../transaction/TransactionCoordinator.scala`` (``handleInitProducerId``,
    ``prepareInitProducerIdTransit``, ``handleAddPartitionsToTransaction``, ``endTransaction``,
    ``endTransactionWithTV1``, ``sendTxnMarkersCallback``), ``KafkaApis.scala`` (``handleAddOffsetsToTxnRequest``,
    the request checks of ``handleInitProducerIdRequest``).

Assumptions
    * A request is handled atomically: Kafka holds the metadata lock while it checks and prepares, and
      the log append and its callback follow. The spec folds check, prepare, append and callback into
      one step; ``append_error`` says whether the append failed. So ``PrepareEpochFence`` is never
      visible between steps (as in Kafka, where it is set and consumed under one lock).
    * Epochs are bounded by ``CoordinatorConfig.max_epoch`` (Kafka: ``Short.MAX_VALUE`` = 32767) so the model
      checker can reach epoch exhaustion; "exhausted" is ``epoch >= max_epoch - 1`` as in Kafka.

Two-phase commit (KIP-939, as Kafka 4.4 ships it; docs/kip-939.md)
    ``Enable2Pc`` needs the broker config ``transaction.two.phase.commit.enable`` (else
    ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``) and lifts the timeout bound; ``KeepPreparedTxn`` is answered
    ``UNSUPPORTED_VERSION``. The KIP's design, which keeps the ongoing transaction, is the variant
    :func:`handle_init_producer_id_keeping_prepared` (its mechanics in :mod:`txnspec.spec.two_phase`).

Not modelled
    Authorization, ``DescribeTransactions`` and ``ListTransactions``.

Deliberate deviations
    Kafka throws ``IllegalStateException`` when a transition is not in the valid-previous-states table
    or fails ``completeTransitionTo``'s checks. The spec records the offending transition in
    ``CoordinatorState.illegal_transitions`` instead (and answers ``UNKNOWN_SERVER_ERROR``), so that the
    model checker reports it as a violation of ``valid_coordinator_transitions`` with a trace.

Long because the four handlers and EndTxn's two decision paths (transaction version 0/1 and 2) are one table
of ``TransactionCoordinator``'s branches, read side by side against Kafka's; its state, transitions, markers,
expiry, loading and two-phase commit already are modules of their own.
"""

from __future__ import annotations

from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, group_offsets_partition, is_epoch_exhausted
from txnspec.spec.coordinator_state import (
    DEFAULT_CONFIG,
    TV_0,
    TV_2,
    Appended,
    CoordinatorConfig,
    CoordinatorResult,
    CoordinatorState,
    TxnMetadata,
    TxnTransit,
    allocate_producer_id,
    ownership_error,
    record_illegal,
    supports_epoch_bump,
    with_metadata,
)
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerId,
    InitProducerIdResponse,
    TransactionResult,
    WriteTxnMarkers,
)
from txnspec.spec.two_phase import INT_MAX_TIMEOUT, keep_ongoing_transaction
from txnspec.spec.txn_markers import add_txn_markers_to_send
from txnspec.spec.txn_metadata import (
    append_transaction_to_log,
    prepare_abort_or_commit,
    prepare_add_partitions,
    prepare_complete,
    prepare_fence_producer_epoch,
    prepare_increment_producer_epoch,
    prepare_producer_id_rotation,
    prepare_transition_to,
)
from txnspec.spec.txn_state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_STATES,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARE_STATES,
    TxnState,
)
from txnspec.spec.values import replace, value

# --- InitProducerId ------------------------------------------------------------------------------

def _is_valid_producer_id(md: TxnMetadata, producer_id: int, epoch: int, config: CoordinatorConfig) -> bool:
    """``isValidProducerId`` (KIP-360): whom an InitProducerId with an expected id and epoch may bump."""
    return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
            or (producer_id == md.prev_producer_id and is_epoch_exhausted(epoch, config.max_epoch)))


def handle_init_producer_id(cs: CoordinatorState, request: InitProducerId, *,
                            config: CoordinatorConfig = DEFAULT_CONFIG,
                            append_error: Errors = Errors.NONE, keeps_prepared: bool = False) -> CoordinatorResult:
    """``TransactionCoordinator.handleInitProducerId`` with ``prepareInitProducerIdTransit``.

    No transactional id: a fresh producer id at epoch 0 and no state kept. Otherwise: create the
    metadata on first use; ``CONCURRENT_TRANSACTIONS`` while a transition is pending or a transaction
    is being prepared; ``PRODUCER_FENCED`` for an expected (pid, epoch) that is neither current nor a
    retry; a bump (or a producer-id rotation once the epoch is exhausted) from Empty/Complete*; and for
    an Ongoing transaction, a fence: abort it with epoch + 1 and answer ``CONCURRENT_TRANSACTIONS`` so
    the client retries (the fenced epoch is never returned).
    """
    def fail(state: CoordinatorState, error: Errors, appended: tuple = ()) -> CoordinatorResult:  # type: ignore[type-arg]
        return CoordinatorResult(state, InitProducerIdResponse(error), appended)

    tid = request.transactional_id
    if tid is None:
        cs, producer_id = allocate_producer_id(cs)
        return CoordinatorResult(cs, InitProducerIdResponse(Errors.NONE, producer_id, 0))
    if tid == "":
        return fail(cs, Errors.INVALID_REQUEST)
    # KafkaApis: exactly one of producer id and epoch set is a malformed request.
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        return fail(cs, Errors.INVALID_REQUEST)
    # KIP-939 (4.4): 2PC only where the broker allows it; keepPreparedTxn is not implemented yet
    if request.enable_two_pc and not config.transaction_two_phase_commit_enable:
        return fail(cs, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.keep_prepared_txn and not keeps_prepared:
        return fail(cs, Errors.UNSUPPORTED_VERSION)
    if not (request.enable_two_pc or 0 < request.txn_timeout_ms <= config.txn_max_timeout_ms):
        return fail(cs, Errors.INVALID_TRANSACTION_TIMEOUT)  # validateTransactionTimeoutMs
    timeout_ms = INT_MAX_TIMEOUT if request.enable_two_pc else request.txn_timeout_ms
    expected = None if request.producer_id == NO_PRODUCER_ID else (request.producer_id, request.producer_epoch)
    unserved = ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        return fail(cs, unserved)

    md = cs.metadata(tid)
    if md is None:
        cs, producer_id = allocate_producer_id(cs)
        md = TxnMetadata(tid, producer_id, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                         timeout_ms, EMPTY, frozenset(), -1, cs.now_ms, TV_0)
        cs = with_metadata(cs, md, tid)

    if md.pending_state is not None:
        return fail(cs, Errors.CONCURRENT_TRANSACTIONS)
    if expected is not None and not _is_valid_producer_id(md, *expected, config):
        return fail(cs, Errors.PRODUCER_FENCED)
    if md.state in PREPARE_STATES:
        return fail(cs, Errors.CONCURRENT_TRANSACTIONS)
    if md.state is ONGOING and request.keep_prepared_txn:
        return keep_ongoing_transaction(cs, md, timeout_ms, append_error, config)
    if md.state is ONGOING:
        fence = prepare_fence_producer_epoch(md, config)
        cs, pending = prepare_transition_to(cs, md, fence, config)
        if pending is None:
            return fail(cs, Errors.UNKNOWN_SERVER_ERROR)
        cs = with_metadata(cs, pending, tid)
        ended = end_transaction(cs, tid, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT,
                                from_client=False, client_transaction_version=config.transaction_version,
                                config=config, append_error=append_error)
        error = Errors.CONCURRENT_TRANSACTIONS if ended.error is Errors.NONE else ended.error
        return CoordinatorResult(ended.state, InitProducerIdResponse(error), ended.appended, ended.markers)
    if md.state not in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT):  # Dead, PrepareEpochFence
        return fail(record_illegal(cs, tid, f"InitProducerId found state {md.state}"), Errors.UNKNOWN_SERVER_ERROR)

    transit: TxnTransit | Errors
    if is_epoch_exhausted(md.producer_epoch, config.max_epoch) and (
            expected is None or expected[1] == md.producer_epoch):
        cs, new_producer_id = allocate_producer_id(cs)
        transit = prepare_producer_id_rotation(md, new_producer_id, timeout_ms, cs.now_ms,
                                               record_last_epoch=expected is not None)
    else:
        transit = prepare_increment_producer_epoch(md, timeout_ms,
                                                   None if expected is None else expected[1], cs.now_ms,
                                                   config.max_epoch)
    if isinstance(transit, Errors):
        return fail(cs, transit)
    cs, pending = prepare_transition_to(cs, md, transit, config)
    if pending is None:
        return fail(cs, Errors.UNKNOWN_SERVER_ERROR)
    done = append_transaction_to_log(cs, pending, transit, append_error, config)
    if done.error is not Errors.NONE:
        return fail(done.state, done.error, done.appended)
    return CoordinatorResult(done.state, InitProducerIdResponse(Errors.NONE, transit.producer_id,
                                                                transit.producer_epoch), done.appended)


def handle_init_producer_id_keeping_prepared(cs: CoordinatorState, request: InitProducerId, *,
                                             config: CoordinatorConfig = DEFAULT_CONFIG,
                                             append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """KIP-939's design of ``handleInitProducerId`` (neither 4.4 nor trunk has it yet): ``keepPreparedTxn`` keeps
    an ongoing transaction (:func:`keep_ongoing_transaction`) instead of answering UNSUPPORTED_VERSION."""
    return handle_init_producer_id(cs, request, config=config, append_error=append_error, keeps_prepared=True)


# --- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------

def handle_add_partitions_to_txn(cs: CoordinatorState, request: AddPartitionsToTxn, *,
                                 config: CoordinatorConfig = DEFAULT_CONFIG,
                                 append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``TransactionCoordinator.handleAddPartitionsToTransaction`` (trunk check order).

    Pending transition first (``CONCURRENT_TRANSACTIONS``), then producer id, then epoch, then a
    transaction being prepared; partitions already in an Ongoing transaction answer ``NONE`` with no
    log write; otherwise Empty/Complete*/Ongoing -> Ongoing.
    """
    tid = request.transactional_id
    if not tid:
        return CoordinatorResult(cs, ErrorResponse(Errors.INVALID_REQUEST))
    md = cs.metadata(tid)
    unserved = ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        error = unserved
    elif md is None:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif md.pending_state is not None:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif md.producer_id != request.producer_id:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif md.producer_epoch != request.producer_epoch:
        error = Errors.PRODUCER_FENCED
    elif md.state in PREPARE_STATES:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif md.state is ONGOING and request.partitions <= md.partitions:
        error = Errors.NONE
    else:
        transit = prepare_add_partitions(md, request.partitions, cs.now_ms, request.transaction_version)
        cs, pending = prepare_transition_to(cs, md, transit, config)
        if pending is None:
            return CoordinatorResult(cs, ErrorResponse(Errors.UNKNOWN_SERVER_ERROR))
        done = append_transaction_to_log(cs, pending, transit, append_error, config)
        return CoordinatorResult(done.state, ErrorResponse(done.error), done.appended)
    return CoordinatorResult(cs, ErrorResponse(error))


def handle_add_offsets_to_txn(cs: CoordinatorState, request: AddOffsetsToTxn, *,
                              config: CoordinatorConfig = DEFAULT_CONFIG,
                              append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``KafkaApis.handleAddOffsetsToTxnRequest``: add the group's ``__consumer_offsets`` partition (TV 0)."""
    add = AddPartitionsToTxn(request.transactional_id, request.producer_id, request.producer_epoch,
                             frozenset({group_offsets_partition(request.group_id)}), TV_0)
    return handle_add_partitions_to_txn(cs, add, config=config, append_error=append_error)


# --- EndTxn ----------------------------------------------------------------------------------------

@value
class _Ended:
    state: CoordinatorState
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    appended: Appended = ()
    markers: tuple[tuple[str, WriteTxnMarkers], ...] = ()


def handle_end_txn(cs: CoordinatorState, request: EndTxn, *, config: CoordinatorConfig = DEFAULT_CONFIG,
                   append_error: Errors = Errors.NONE) -> CoordinatorResult:
    """``TransactionCoordinator.handleEndTransaction``: the TV2 path for transaction version 2 clients,
    the TV1 path (``endTransactionWithTV1``) otherwise."""
    ended = end_transaction(cs, request.transactional_id, request.producer_id, request.producer_epoch,
                            request.result, from_client=True,
                            client_transaction_version=request.transaction_version,
                            config=config, append_error=append_error)
    return CoordinatorResult(ended.state, EndTxnResponse(ended.error, ended.producer_id, ended.producer_epoch),
                             ended.appended, ended.markers)


def end_transaction(cs: CoordinatorState, tid: str, producer_id: int, epoch: int, result: TransactionResult, *,
                    from_client: bool, client_transaction_version: int, config: CoordinatorConfig,
                    append_error: Errors) -> _Ended:
    if not tid:
        return _Ended(cs, Errors.INVALID_REQUEST)
    unserved = ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        return _Ended(cs, unserved)
    md = cs.metadata(tid)
    if md is None:
        return _Ended(cs, Errors.INVALID_PRODUCER_ID_MAPPING)
    tv2 = supports_epoch_bump(client_transaction_version)
    decision = (_decide_end_txn_v2 if tv2 else _decide_end_txn_v1)(
        cs, md, producer_id, epoch, result, from_client, config)
    if isinstance(decision, _Ended):
        return decision
    cs, md, transit, is_fence = decision
    cs, pending = prepare_transition_to(cs, md, transit, config)
    if pending is None:
        return _Ended(cs, Errors.UNKNOWN_SERVER_ERROR)
    done = append_transaction_to_log(cs, pending, transit, append_error, config)
    if done.error is not Errors.NONE:
        cs = done.state
        if is_fence and not tv2:
            # TV1: the fenced epoch is already in memory; a retried fence must not bump it again.
            failed = cs.metadata(tid)
            if failed is not None:
                cs = with_metadata(cs, replace(failed, has_failed_epoch_fence=True), tid)
        return _Ended(cs, done.error, appended=done.appended)
    return _send_txn_markers(done.state, tid, producer_id, epoch, result, tv2, done.appended, config)


_Decision = tuple[CoordinatorState, TxnMetadata, TxnTransit, bool]


def _invalid_txn_state(cs: CoordinatorState) -> _Ended:
    return _Ended(cs, Errors.INVALID_TXN_STATE)


def _decide_end_txn_v1(cs: CoordinatorState, md: TxnMetadata, producer_id: int, epoch: int,
                       result: TransactionResult, from_client: bool, config: CoordinatorConfig
                       ) -> _Ended | _Decision:
    """``endTransactionWithTV1``: strict epoch equality for clients; idempotent retries of a Complete."""
    if md.producer_id != producer_id:
        return _Ended(cs, Errors.INVALID_PRODUCER_ID_MAPPING)
    if (from_client and epoch != md.producer_epoch) or epoch < md.producer_epoch:
        return _Ended(cs, Errors.PRODUCER_FENCED)
    is_fence = md.pending_state is PREPARE_EPOCH_FENCE
    if md.pending_state is not None and not is_fence:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS)
    commit = result is TransactionResult.COMMIT
    if md.state is ONGOING:
        target = PREPARE_COMMIT if commit else PREPARE_ABORT
        fencing = target is PREPARE_ABORT and is_fence
        if fencing:
            # Kafka sets the fenced epoch in memory before the append and never rolls it back.
            md = replace(md, pending_state=None, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)
            cs = with_metadata(cs, md, md.transactional_id)
        transit = prepare_abort_or_commit(md, target, TV_0, NO_PRODUCER_ID, cs.now_ms, False, config)
        return cs, md, transit, fencing
    if md.state is COMPLETE_COMMIT:
        return _Ended(cs, Errors.NONE) if commit else _invalid_txn_state(cs)
    if md.state is COMPLETE_ABORT:
        return _Ended(cs, Errors.NONE) if not commit else _invalid_txn_state(cs)
    if md.state is PREPARE_COMMIT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if commit else _invalid_txn_state(cs)
    if md.state is PREPARE_ABORT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if not commit else _invalid_txn_state(cs)
    if md.state is EMPTY:
        return _invalid_txn_state(cs)
    return _Ended(record_illegal(cs, md.transactional_id, f"EndTxn found state {md.state}"),
                  Errors.UNKNOWN_SERVER_ERROR)


def _decide_end_txn_v2(cs: CoordinatorState, md: TxnMetadata, producer_id: int, epoch: int,
                       result: TransactionResult, from_client: bool, config: CoordinatorConfig
                       ) -> _Ended | _Decision:
    """``endTransaction`` for transaction version 2 (KIP-890): every end bumps the epoch; a retry
    carries the epoch before the bump (or, after an overflow, the old producer id at ``max_epoch - 1``)."""
    is_fence = md.pending_state is PREPARE_EPOCH_FENCE
    retry_on_overflow = (not is_fence and md.prev_producer_id == producer_id
                         and epoch == config.max_epoch - 1 and md.producer_epoch == 0)
    retry_on_epoch_bump = not is_fence and md.producer_epoch == epoch + 1
    if not is_fence:
        if md.state in PREPARE_STATES:
            valid_epoch = retry_on_epoch_bump
        elif md.state in COMPLETE_STATES:
            valid_epoch = retry_on_epoch_bump or retry_on_overflow or epoch == md.producer_epoch
        else:  # Ongoing, Empty, Dead, PrepareEpochFence
            valid_epoch = epoch == md.producer_epoch
    else:
        valid_epoch = (not from_client or epoch == md.producer_epoch) and epoch >= md.producer_epoch
    is_retry = retry_on_epoch_bump or retry_on_overflow

    if md.pending_state is not None and not is_fence:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS)
    if md.producer_id != producer_id and not retry_on_overflow:
        return _Ended(cs, Errors.INVALID_PRODUCER_ID_MAPPING)
    if not valid_epoch:
        return _Ended(cs, Errors.PRODUCER_FENCED)

    def prepare(target: TxnState, no_partition_added: bool) -> _Decision:
        state, meta = cs, md
        next_producer_id = NO_PRODUCER_ID
        if is_epoch_exhausted(meta.producer_epoch, config.max_epoch):
            state, next_producer_id = allocate_producer_id(state)
        if target is PREPARE_ABORT and is_fence:
            meta = replace(meta, pending_state=None)  # one bump only, by prepareAbortOrCommit
            state = with_metadata(state, meta, meta.transactional_id)
        transit = prepare_abort_or_commit(meta, target, TV_2, next_producer_id, state.now_ms,
                                          no_partition_added, config)
        return state, meta, transit, is_fence

    commit = result is TransactionResult.COMMIT
    current = _Ended(cs, Errors.NONE, md.producer_id, md.producer_epoch)
    if md.state is ONGOING:
        return prepare(PREPARE_COMMIT if commit else PREPARE_ABORT, False)
    if md.state is COMPLETE_COMMIT:
        if commit:
            return current if is_retry else _invalid_txn_state(cs)
        return _invalid_txn_state(cs) if is_retry else prepare(PREPARE_ABORT, True)
    if md.state is COMPLETE_ABORT:
        if not commit:
            return current if is_retry else prepare(PREPARE_ABORT, True)
        return _invalid_txn_state(cs)
    if md.state is PREPARE_COMMIT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if commit else _invalid_txn_state(cs)
    if md.state is PREPARE_ABORT:
        return _Ended(cs, Errors.CONCURRENT_TRANSACTIONS) if not commit else _invalid_txn_state(cs)
    if md.state is EMPTY:
        return prepare(PREPARE_ABORT, True) if not commit else _invalid_txn_state(cs)
    return _Ended(record_illegal(cs, md.transactional_id, f"EndTxn found state {md.state}"),
                  Errors.UNKNOWN_SERVER_ERROR)


def _send_txn_markers(cs: CoordinatorState, tid: str, producer_id: int, epoch: int, result: TransactionResult,
                      tv2: bool, appended: Appended, config: CoordinatorConfig
                      ) -> _Ended:
    """``sendTxnMarkersCallback``: re-check, ``prepareComplete``, reply, hand the markers to the channel."""
    md = cs.metadata(tid)
    assert md is not None  # the append just completed on this coordinator
    expected_state = PREPARE_COMMIT if result is TransactionResult.COMMIT else PREPARE_ABORT
    if md.producer_id != producer_id:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif (md.producer_epoch not in (epoch, epoch + 1)) if tv2 else (md.producer_epoch != epoch):
        error = Errors.PRODUCER_FENCED
    elif md.pending_state is not None:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif md.state is not expected_state:
        error = Errors.INVALID_TXN_STATE
    else:
        error = Errors.NONE
    if error is not Errors.NONE:
        return _Ended(cs, error, appended=appended)
    complete = prepare_complete(md, cs.now_ms)
    cs, pending = prepare_transition_to(cs, replace(md, has_failed_epoch_fence=False), complete, config)
    if pending is None:
        return _Ended(cs, Errors.UNKNOWN_SERVER_ERROR, appended=appended)
    cs = with_metadata(cs, pending, tid)
    cs, markers, more = add_txn_markers_to_send(cs, pending, result, complete, config)
    return _Ended(cs, Errors.NONE, complete.producer_id if tv2 else NO_PRODUCER_ID,
                  complete.producer_epoch if tv2 else NO_PRODUCER_EPOCH, appended + more, markers)


__all__ = [
    "handle_add_offsets_to_txn", "handle_add_partitions_to_txn", "handle_end_txn", "handle_init_producer_id",
]
