"""The producer client's API calls (the application thread): ``KafkaProducer``'s transactional methods.

System
    One transactional producer (KIP-98, KIP-360, KIP-890 client side) as the application sees it: the
    ``KafkaProducer``/``TransactionManager`` API calls, each a pure function returning ``(new state,
    ClientOutcome)``: the exception thrown to the application (Kafka's simple class name) and the requests
    dispatched during the step. After each call the Sender runs until it can send nothing more without a further
    response (:func:`txnspec.spec.client_sender.run_sender`). An ``IllegalStateException`` on the application
    thread leaves the state unchanged.

    It is the one client, in modules by concern: its state and state table (:mod:`txnspec.spec.client_state`), its
    own state changes (:mod:`txnspec.spec.client_transitions`), the error rules as data
    (:mod:`txnspec.spec.client_errors`), the batches and sequences (:mod:`txnspec.spec.client_batches`), the Sender
    (:mod:`txnspec.spec.client_sender`) and the responses it handles (:mod:`txnspec.spec.client_responses`). The
    model checker's producer (:mod:`txnspec.spec.producer`) is a named projection of it
    (:mod:`txnspec.spec.projection`) and reads its error rules.

Kafka classes followed (trunk, 4.5.0-SNAPSHOT)
    ``clients/.../producer/internals/TransactionManager.java`` (``initializeTransactions``, ``beginTransaction``,
    ``prepareTransaction``, ``maybeAddPartition``, ``sendOffsetsToTransaction``, ``beginCommit``, ``beginAbort``,
    ``beginCompletingTransaction``, ``handleCachedTransactionRequestResult``); ``KafkaProducer.send`` (``doSend``:
    the record is appended before ``maybeAddPartition``; an ``ApiException`` goes into the future, not to the
    caller), ``KafkaProducer.completeTransaction``.

Assumptions
    The application awaits each blocking call (``initTransactions``, ``commitTransaction``, ``abortTransaction``)
    until its result completes; a result that has not completed is a call still pending (``pending_transition``,
    Kafka's ``PendingStateTransition`` of a timed-out call): calling the same operation again returns it, any
    other transactional operation throws IllegalStateException.

Not modelled
    Idempotent-only producers, ``flush``, ``close``, ``partitionsFor``, callbacks and record contents.

KIP-939 (two-phase commit, 4.4's client)
    ``prepareTransaction``, ``completeTransaction(state)`` (commit exactly when the state matches, else abort),
    ``initTransactions(keepPreparedTxn)`` and InitProducerId v6's ``Enable2Pc`` (``ClientConfig.enable_two_pc``).
    As in 4.4, a transaction kept by ``keepPreparedTxn`` leaves ``transactionStarted`` false, so its EndTxn is
    completed locally (docs/kip-939.md, finding 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from txnspec.spec.client_errors import API_EXCEPTIONS, ILLEGAL_STATE, INVALID_TXN_STATE
from txnspec.spec.client_sender import add_partitions_handler, finish_call, finish_step
from txnspec.spec.client_state import (
    ABORTABLE_ERROR,
    ABORTING_TRANSACTION,
    COMMITTING_TRANSACTION,
    DEFAULT_CONFIG,
    IN_TRANSACTION,
    INITIALIZING,
    PREPARED_TRANSACTION,
    ClientConfig,
    ClientOutcome,
    ClientState,
    Poisoned,
    Priority,
    State,
    Thrown,
    TxnRequest,
    TxnRequestHandler,
)
from txnspec.spec.client_transitions import (
    enqueue,
    fail_if_error,
    maybe_transition_to_error_state,
    maybe_update_transaction_v2_enabled,
    throw_if_in_prepared_state,
    throw_if_pending_state,
    transition_to,
)
from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txnspec.spec.messages import AddOffsetsToTxn, EndTxn, InitProducerId, TransactionResult, TxnOffsetCommit


def _cached_call(c: ClientState, target: State, operation: str) -> tuple[bool, ClientState | None]:
    """``handleCachedTransactionRequestResult``: (True, state) when the pending call's result is returned."""
    if c.pending_transition is None:
        return False, None
    if c.pending_transition[0] is not target:
        raise Thrown(ILLEGAL_STATE)  # the previous call timed out and must be retried
    return True, c


def _initialize_transactions(c: ClientState, epoch_bump: bool, config: ClientConfig,
                             keep_prepared_txn: bool = False) -> ClientState:
    """``initializeTransactions(producerIdAndEpoch)``; an epoch bump keeps the state (EndTxn moves it)."""
    fail_if_error(c)
    cached, same = _cached_call(c, INITIALIZING, "initTransactions")
    if cached and same is not None:
        return same
    if not epoch_bump:
        c = transition_to(c, INITIALIZING, sender=False)
    pid, epoch = (c.producer_id, c.producer_epoch) if epoch_bump else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    request = InitProducerId(c.transactional_id, config.txn_timeout_ms, pid, epoch, config.enable_two_pc,
                             keep_prepared_txn)
    c = enqueue(c, TxnRequestHandler(request, Priority.EPOCH_BUMP if epoch_bump else Priority.INIT_PRODUCER_ID,
                                     completes_call=True))
    return replace(c, pending_transition=(INITIALIZING, "initTransactions"))


def init_transactions(c: ClientState, config: ClientConfig = DEFAULT_CONFIG, keep_prepared_txn: bool = False
                      ) -> tuple[ClientState, ClientOutcome]:
    """``initTransactions(keepPreparedTxn)``: INITIALIZING, then InitProducerId (after a coordinator lookup).

    Throws IllegalStateException once initialized (READY -> INITIALIZING is not in the table)."""
    try:
        throw_if_in_prepared_state(c)
        effect: ClientState | Thrown = _initialize_transactions(c, False, config, keep_prepared_txn)
    except Thrown as thrown:
        effect = thrown
    return finish_call(c, effect, config)


def begin_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``beginTransaction``: READY -> IN_TRANSACTION; nothing is sent."""
    try:
        throw_if_in_prepared_state(c)
        throw_if_pending_state(c)
        fail_if_error(c)
        effect: ClientState | Thrown = transition_to(c, IN_TRANSACTION, sender=False)
    except Thrown as thrown:
        effect = thrown
    return finish_call(c, effect, config)


def prepare_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG
                        ) -> tuple[ClientState, ClientOutcome]:
    """``prepareTransaction`` (KIP-939): IN_TRANSACTION -> PREPARED_TRANSACTION, remembering (pid, epoch).
    ``KafkaProducer.prepareTransaction`` first refuses a prepared client and one without 2PC."""
    try:
        throw_if_in_prepared_state(c)
        if not config.enable_two_pc:
            raise Thrown(INVALID_TXN_STATE)
        throw_if_pending_state(c)
        fail_if_error(c)
        moved = transition_to(c, PREPARED_TRANSACTION, sender=False)
        effect: ClientState | Thrown = replace(moved, prepared_txn_state=(c.producer_id, c.producer_epoch))
    except Thrown as thrown:
        effect = thrown
    return finish_call(c, effect, config)


def _maybe_add_partition(c: ClientState, partition: str) -> ClientState:
    """``maybeAddPartition``: TV2 counts the partition at once; TV < 2 queues an AddPartitionsToTxn."""
    fail_if_error(c)
    throw_if_pending_state(c)
    if not c.has_producer_id or c.state is not IN_TRANSACTION:
        raise Thrown(ILLEGAL_STATE)
    if c.tv2:
        return replace(c, partitions=c.partitions | {partition}, transaction_started=True)
    if partition in c.partitions or partition in c.new_partitions or partition in c.pending_partitions:
        return c
    return replace(c, new_partitions=c.new_partitions | {partition})


def send(c: ClientState, partition: str, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``KafkaProducer.send`` of one record to ``partition``.

    The record is appended to the accumulator, then ``maybeAddPartition`` runs: an ``ApiException`` it
    throws (ProducerFencedException, InvalidProducerEpochException) goes into the returned future and to
    ``maybeTransitionToErrorState``; other exceptions (KafkaException, IllegalStateException) are thrown.
    """
    try:
        throw_if_in_prepared_state(c)
    except Thrown as thrown:
        return c, ClientOutcome(thrown.name)
    accumulator = list(c.accumulator)
    if accumulator and accumulator[-1][0] == partition:
        accumulator[-1] = (partition, accumulator[-1][1] + 1)
    elif any(p == partition for p, _ in accumulator):
        i = max(i for i, (p, _) in enumerate(accumulator) if p == partition)
        accumulator[i] = (partition, accumulator[i][1] + 1)
    else:
        accumulator.append((partition, 1))
    appended = replace(c, accumulator=tuple(accumulator))
    try:
        added = _maybe_add_partition(appended, partition)
    except Thrown as thrown:
        if thrown.name in API_EXCEPTIONS:
            try:
                failed = maybe_transition_to_error_state(appended, thrown.name, config)
            except Poisoned as poisoned:
                failed = poisoned.state
            return finish_step(failed, config)
        return finish_step(appended, config, thrown.name)
    return finish_step(added, config)


def send_offsets_to_transaction(c: ClientState, group_id: str, offsets: Mapping[str, int] | None = None,
                                config: ClientConfig = DEFAULT_CONFIG, member: tuple[str, int] = ("", -1)
                                ) -> tuple[ClientState, ClientOutcome]:
    """``sendOffsetsToTransaction``: TV2 sends TxnOffsetCommit directly (the transaction has started);
    TV < 2 sends AddOffsetsToTxn first, then TxnOffsetCommit. ``member``: the member id and generation of the
    ``ConsumerGroupMetadata`` (KIP-447; the default: outside group management)."""
    commit = tuple(sorted((offsets or {}).items()))
    try:
        throw_if_pending_state(c)
        fail_if_error(c)
        if c.state is not IN_TRANSACTION:
            raise Thrown(ILLEGAL_STATE)
    except Thrown as thrown:
        return c, ClientOutcome(thrown.name)
    if c.tv2:
        request: TxnRequest = TxnOffsetCommit(c.transactional_id, group_id, c.producer_id, c.producer_epoch, commit,
                                              *member)
        c = replace(c, pending_offsets=tuple(sorted(dict((*c.pending_offsets, *commit)).items())),
                    transaction_started=True)
        handler = TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS)
    else:
        request = AddOffsetsToTxn(c.transactional_id, c.producer_id, c.producer_epoch, group_id)
        handler = TxnRequestHandler(request, Priority.ADD_PARTITIONS_OR_OFFSETS, offsets=commit, member=member)
    return finish_step(enqueue(c, handler), config)


def _begin_completing_transaction(c: ClientState, result: TransactionResult, config: ClientConfig) -> ClientState:
    """``beginCompletingTransaction``: flush partition adds, enqueue EndTxn (with the version the transaction
    started with), then an epoch bump if the client must bump (its result is then the call's)."""
    if c.new_partitions:
        c, handler = add_partitions_handler(c)
        c = enqueue(c, handler)
    end_txn = EndTxn(c.transactional_id, c.producer_id, c.producer_epoch, result, 2 if c.tv2 else 0)
    c = maybe_update_transaction_v2_enabled(c, on_initialization=False)
    if c.client_side_epoch_bump_required:
        c = enqueue(c, TxnRequestHandler(end_txn, Priority.END_TXN))
        return _initialize_transactions(c, True, config)
    return enqueue(c, TxnRequestHandler(end_txn, Priority.END_TXN, completes_call=True))


def commit_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``beginCommit``: an error state throws; EndTxn(COMMIT) once every batch and add is done."""
    try:
        cached, same = _cached_call(c, COMMITTING_TRANSACTION, "commitTransaction")
        if cached and same is not None:
            return finish_step(same, config)
        fail_if_error(c)
        moved = transition_to(c, COMMITTING_TRANSACTION, sender=False)
        effect: ClientState | Thrown = _begin_completing_transaction(moved, TransactionResult.COMMIT, config)
    except Thrown as thrown:
        effect = thrown
    if isinstance(effect, ClientState):
        effect = replace(effect, pending_transition=(COMMITTING_TRANSACTION, "commitTransaction"))
    return finish_call(c, effect, config)


def complete_transaction(c: ClientState, prepared_txn_state: tuple[int, int], config: ClientConfig = DEFAULT_CONFIG
                         ) -> tuple[ClientState, ClientOutcome]:
    """``KafkaProducer.completeTransaction`` (KIP-939): InvalidTxnStateException unless prepared; then
    ``commitTransaction`` exactly when ``prepared_txn_state`` is the client's, else ``abortTransaction``."""
    if c.state is not PREPARED_TRANSACTION:
        return finish_call(c, Thrown(INVALID_TXN_STATE), config)
    if tuple(prepared_txn_state) == c.prepared_txn_state:
        return commit_transaction(c, config)
    return abort_transaction(c, config)


def abort_transaction(c: ClientState, config: ClientConfig = DEFAULT_CONFIG) -> tuple[ClientState, ClientOutcome]:
    """``beginAbort``: allowed from ABORTABLE_ERROR; partitions not yet added are dropped."""
    try:
        cached, same = _cached_call(c, ABORTING_TRANSACTION, "abortTransaction")
        if cached and same is not None:
            return finish_step(same, config)
        if c.state is not ABORTABLE_ERROR:
            fail_if_error(c)
        moved = replace(transition_to(c, ABORTING_TRANSACTION, sender=False), new_partitions=frozenset())
        effect: ClientState | Thrown = _begin_completing_transaction(moved, TransactionResult.ABORT, config)
    except Thrown as thrown:
        effect = thrown
    if isinstance(effect, ClientState):
        effect = replace(effect, pending_transition=(ABORTING_TRANSACTION, "abortTransaction"))
    return finish_call(c, effect, config)


__all__ = [
    "abort_transaction", "begin_transaction", "commit_transaction", "complete_transaction", "init_transactions",
    "prepare_transaction", "send", "send_offsets_to_transaction",
]
