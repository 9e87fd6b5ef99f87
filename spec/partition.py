"""A partition leader: its log of record batches, its producer state, and what a consumer can read.

System
    One partition leader: data batches (transactional or not) and control batches (transaction markers)
    appended at the log end; per producer id a :class:`ProducerStateEntry` with the last 5 batches
    (duplicate detection), the epoch and coordinator epoch (fencing) and the open transaction's first
    offset; the ongoing and not-yet-replicated transactions that define the first unstable offset and
    the last stable offset (LSO); the aborted-transaction index; fetch at read_uncommitted and
    read_committed including the consumer-side filtering of aborted batches and control records.

Kafka sources followed (trunk, ``storage/src/main/java/org/apache/kafka/storage/internals/log/``)
    ``UnifiedLog.analyzeAndValidateProducerState`` (duplicate check), ``ProducerAppendInfo``
    (``checkProducerEpoch``, ``checkSequence``, ``appendDataBatch``, ``appendEndTxnMarker``),
    ``ProducerStateEntry`` (``NUM_BATCHES_TO_RETAIN``, ``addBatch``, ``update``), ``ProducerStateManager``
    (``firstUnstableOffset``, ``lastStableOffset(completedTxn)``, ``onHighWatermarkUpdated``,
    ``removeExpiredProducers``), ``TransactionIndex.collectAbortedTxns`` and, in the client,
    ``CompletedFetch`` (the read_committed filter).

Assumptions
    * Appends come from clients (origin CLIENT) or the coordinator (markers); replication is not
      modelled: one replica, the high watermark is either given (behaviour cases) or follows the log end.
    * Transaction verification (KIP-890 part 1) is done by the caller before :func:`append_data`
      (the system model asks the coordinator); here, as with
      ``transaction.partition.verification.enable=false``, the handler appends what it is given.
    * One log segment: the aborted-transaction index is one list.
    * ``PartitionLimits`` maps ``Integer.MAX_VALUE`` (sequence wrap) and ``Short.MAX_VALUE`` (the TV2
      marker retry allowance) onto small bounds for the model checker.

Not modelled
    Log retention and ``log_start_offset`` moving, compaction, producer-state snapshots, record
    timestamps other than the producer entry's last timestamp, ``UNKNOWN_PRODUCER_ID`` (removed from
    the broker by KIP-360).

Long because it is one partition leader's whole rule set, as Kafka's log package holds it: the append checks,
the marker, verification state, expiry and the read side (LSO, aborted index, read_committed filter) all read and
write the same :class:`PartitionState` and :class:`ProducerStateEntry`; the ongoing-transaction bookkeeping that
appends change is what fetch reads, so the two halves apart would share every type.
"""

from __future__ import annotations

from txnspec.spec.constants import INT_MAX_VALUE, NUM_BATCHES_TO_RETAIN, SHORT_MAX_VALUE
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AbortedTransaction,
    FetchResponse,
    IsolationLevel,
    ProduceResponse,
    TransactionResult,
    WriteTxnMarkersResponse,
)
from txnspec.spec.values import replace, value

PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default


@value
class PartitionLimits:
    max_sequence: int = INT_MAX_VALUE
    max_epoch: int = SHORT_MAX_VALUE


DEFAULT_LIMITS = PartitionLimits()


@value
class RecordBatch:
    """A batch in the log. ``control`` is the marker's result for a control batch, None for data."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    transactional: bool
    control: TransactionResult | None = None
    coordinator_epoch: int = -1


@value
class BatchMetadata:
    """``BatchMetadata``: what the producer entry remembers of one of its last 5 batches."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@value
class ProducerStateEntry:
    producer_epoch: int = -1
    coordinator_epoch: int = -1
    batches: tuple[BatchMetadata, ...] = ()
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def add_batch(self, epoch: int, metadata: BatchMetadata, timestamp: int) -> ProducerStateEntry:
        """``ProducerStateEntry.addBatch``: a new epoch forgets the old epoch's batches; keep the last 5."""
        kept = self.batches if epoch == self.producer_epoch else ()
        return replace(self, producer_epoch=epoch, batches=(*kept, metadata)[-NUM_BATCHES_TO_RETAIN:],
                       last_timestamp=timestamp)


@value
class AbortedTxn:
    """An entry of the aborted-transaction index (``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@value
class VerificationEntry:
    """``VerificationStateEntry``: a producer's transactional batch is being verified with the coordinator
    (KIP-890). It keeps the lowest sequence seen while verifying, so that a higher sequence cannot be written
    before a lower one that still needs a retry, and whether the producer speaks TV2 (``supportsEpochBump``)."""

    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool
    timestamp: int = 0  # when it was created; it expires with the producer ids (removeExpiredProducers)


@value
class PartitionState:
    log: tuple[RecordBatch, ...] = ()
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int | None = None  # None: follows the log end offset (one replica)
    producers: tuple[tuple[int, ProducerStateEntry], ...] = ()
    ongoing: tuple[tuple[int, int], ...] = ()  # (first offset, producer id) of undecided transactions
    unreplicated: tuple[tuple[int, int, int], ...] = ()  # (first offset, producer id, marker offset)
    aborted_index: tuple[AbortedTxn, ...] = ()
    verifying: tuple[tuple[int, VerificationEntry], ...] = ()  # ProducerStateManager.verificationStates

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        for pid, entry in self.producers:
            if pid == producer_id:
                return entry
        return None

    def verification(self, producer_id: int) -> VerificationEntry | None:
        for pid, entry in self.verifying:
            if pid == producer_id:
                return entry
        return None

    @property
    def hw(self) -> int:
        return self.log_end_offset if self.high_watermark is None else self.high_watermark

    @property
    def first_unstable_offset(self) -> int:
        """``ProducerStateManager.firstUnstableOffset``: -1 when nothing is unstable."""
        firsts = [first for first, _ in self.ongoing] + [first for first, _, _ in self.unreplicated]
        return max(min(firsts), self.log_start_offset) if firsts else -1

    @property
    def last_stable_offset(self) -> int:
        """``UnifiedLog.lastStableOffset``: the first unstable offset if below the high watermark, else it."""
        fuo = self.first_unstable_offset
        return fuo if fuo != -1 and fuo < self.hw else self.hw


# --- sequence and epoch rules (ProducerAppendInfo) ----------------------------------------------------

def in_sequence(last_seq: int, next_seq: int, max_sequence: int = INT_MAX_VALUE) -> bool:
    """``inSequence``: the next sequence follows the last one, wrapping from the maximum to 0."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == max_sequence)


def increment_sequence(seq: int, delta: int, max_sequence: int = INT_MAX_VALUE) -> int:
    """``DefaultRecordBatch.incrementSequence``: ``seq + delta`` with wrap-around after ``max_sequence``."""
    return seq + delta if seq <= max_sequence - delta else delta - (max_sequence - seq) - 1


def check_producer_epoch(entry: ProducerStateEntry, epoch: int, *, marker: bool, transaction_version: int = 0,
                         limits: PartitionLimits = DEFAULT_LIMITS) -> Errors:
    """``checkProducerEpoch``: data and TV0/1 markers may not go back; a TV2 marker must move forward
    (KIP-890), except an idempotent retry with no open transaction or at the last epoch (KAFKA-19999)."""
    if marker and transaction_version >= 2:
        retry = epoch == entry.producer_epoch and (
            entry.current_txn_first_offset == -1 or epoch == limits.max_epoch)
        invalid = epoch <= entry.producer_epoch and not retry
    else:
        invalid = epoch < entry.producer_epoch
    return Errors.INVALID_PRODUCER_EPOCH if invalid else Errors.NONE


def check_sequence(entry: ProducerStateEntry, epoch: int, first_seq: int,
                   limits: PartitionLimits = DEFAULT_LIMITS, verification: VerificationEntry | None = None,
                   has_state: bool = True) -> Errors:
    """``checkSequence`` (origin CLIENT): while the producer is being verified, a TV2 producer with no state must
    start at 0 and no sequence above the lowest one seen while verifying is written; a new epoch starts at 0
    unless the producer has no state; in the same epoch the batch must follow the last one."""
    if verification is not None:
        if verification.supports_epoch_bump and first_seq != 0 and not has_state:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        if first_seq > verification.lowest_sequence:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    if epoch != entry.producer_epoch:
        if first_seq != 0 and entry.producer_epoch != -1:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        return Errors.NONE
    if entry.producer_epoch == -1 or in_sequence(entry.last_seq, first_seq, limits.max_sequence):
        return Errors.NONE
    return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def find_duplicate(entry: ProducerStateEntry | None, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
    """``ProducerStateEntry.findDuplicateBatch``: the same epoch and exactly the same sequence range."""
    if entry is None or entry.producer_epoch != epoch:
        return None
    for batch in entry.batches:
        if batch.first_seq == first_seq and batch.last_seq == last_seq:
            return batch
    return None


# --- appends ---------------------------------------------------------------------------------------

def _with_entry(state: PartitionState, producer_id: int, entry: ProducerStateEntry) -> PartitionState:
    producers = [(pid, e) for pid, e in state.producers if pid != producer_id]
    producers.append((producer_id, entry))
    producers.sort(key=lambda pe: pe[0])
    return replace(state, producers=tuple(producers))


def append_data(state: PartitionState, producer_id: int, producer_epoch: int, first_seq: int, count: int,
                transactional: bool, *, limits: PartitionLimits = DEFAULT_LIMITS, now_ms: int = 0,
                detect_duplicates: bool = True, validate_sequence: bool = True
                ) -> tuple[PartitionState, ProduceResponse]:
    """A leader append of one data batch from a client (``UnifiedLog.append`` with origin CLIENT).

    A retry of one of the producer's last 5 batches answers NONE with the original offsets and appends
    nothing. Otherwise the epoch and sequence are checked; a transactional batch opens a transaction on
    this partition if none is open. ``detect_duplicates``/``validate_sequence`` exist for variants.
    """
    if count < 1:
        return state, ProduceResponse(Errors.INVALID_REQUEST)
    base = state.log_end_offset
    last_offset = base + count - 1
    if producer_id < 0:  # a plain, non-idempotent batch
        batch = RecordBatch(base, last_offset, -1, -1, -1, -1, False)
        return replace(state, log=(*state.log, batch), log_end_offset=last_offset + 1), \
            ProduceResponse(Errors.NONE, base, last_offset)
    last_seq = increment_sequence(first_seq, count - 1, limits.max_sequence)
    current = state.entry(producer_id)
    if detect_duplicates:
        duplicate = find_duplicate(current, producer_epoch, first_seq, last_seq)
        if duplicate is not None:
            return state, ProduceResponse(Errors.NONE, duplicate.first_offset, duplicate.last_offset, duplicate=True)
    entry = current or ProducerStateEntry()
    error = check_producer_epoch(entry, producer_epoch, marker=False, limits=limits)
    if error is Errors.NONE and validate_sequence:
        has_state = current is not None and bool(current.batches)
        error = check_sequence(entry, producer_epoch, first_seq, limits, state.verification(producer_id), has_state)
    if error is Errors.NONE and entry.current_txn_first_offset != -1 and not transactional:
        error = Errors.INVALID_TXN_STATE  # a non-transactional batch inside an open transaction
    if error is not Errors.NONE:
        return state, ProduceResponse(error)
    entry = entry.add_batch(producer_epoch, BatchMetadata(first_seq, last_seq, base, last_offset), now_ms)
    ongoing = state.ongoing
    if transactional and entry.current_txn_first_offset == -1:
        entry = replace(entry, current_txn_first_offset=base)
        ongoing = tuple(sorted((*ongoing, (base, producer_id))))
    batch = RecordBatch(base, last_offset, producer_id, producer_epoch, first_seq, last_seq, transactional)
    state = replace(state, log=(*state.log, batch), log_end_offset=last_offset + 1, ongoing=ongoing)
    if transactional:
        state = _clear_verification(state, producer_id)  # the transaction has its first offset now
    state = _drop_replicated(_with_entry(state, producer_id, entry))
    return state, ProduceResponse(Errors.NONE, base, last_offset)


def append_end_txn_marker(state: PartitionState, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          result: TransactionResult, transaction_version: int, *,
                          limits: PartitionLimits = DEFAULT_LIMITS, now_ms: int = 0
                          ) -> tuple[PartitionState, WriteTxnMarkersResponse]:
    """``ProducerAppendInfo.appendEndTxnMarker`` and the log append of the control batch.

    Checks the epoch (marker rules) and the coordinator epoch (``TRANSACTION_COORDINATOR_FENCED``);
    closes the producer's open transaction (an aborted one goes to the index with the LSO of the
    moment); the marker's epoch becomes the producer's (an epoch bump forgets its batches).
    """
    entry = state.entry(producer_id) or ProducerStateEntry()
    error = check_producer_epoch(entry, producer_epoch, marker=True, transaction_version=transaction_version,
                                 limits=limits)
    if error is Errors.NONE and entry.coordinator_epoch > coordinator_epoch:
        error = Errors.TRANSACTION_COORDINATOR_FENCED
    if error is not Errors.NONE:
        return state, WriteTxnMarkersResponse(error)
    offset = state.log_end_offset
    ongoing, unreplicated, index = state.ongoing, state.unreplicated, state.aborted_index
    first = entry.current_txn_first_offset
    if first != -1:
        others = [f for f, pid in ongoing if pid != producer_id]
        lso_at_abort = min(others) if others else offset + 1  # ProducerStateManager.lastStableOffset(txn)
        ongoing = tuple(t for t in ongoing if t != (first, producer_id))
        unreplicated = tuple(sorted((*unreplicated, (first, producer_id, offset))))
        if result is TransactionResult.ABORT:
            index = (*index, AbortedTxn(producer_id, first, offset, lso_at_abort))
    bumped = producer_epoch != entry.producer_epoch
    entry = replace(entry, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                    batches=() if bumped else entry.batches, current_txn_first_offset=-1, last_timestamp=now_ms)
    batch = RecordBatch(offset, offset, producer_id, producer_epoch, -1, -1, True, result, coordinator_epoch)
    state = replace(state, log=(*state.log, batch), log_end_offset=offset + 1, ongoing=ongoing,
                    unreplicated=unreplicated, aborted_index=index)
    verifying = state.verification(producer_id)
    # UnifiedLog.updateProducers: a marker ends what was being verified, unless a TV2 producer already verifies
    # its next transaction at the marker's (bumped) epoch
    if verifying is not None and not (verifying.supports_epoch_bump and producer_epoch == verifying.epoch):
        state = _clear_verification(state, producer_id)
    return _drop_replicated(_with_entry(state, producer_id, entry)), WriteTxnMarkersResponse(Errors.NONE)


def start_verification(state: PartitionState, producer_id: int, sequence: int, epoch: int,
                       supports_epoch_bump: bool, now_ms: int = 0) -> tuple[PartitionState, Errors]:
    """``UnifiedLog.maybeStartTransactionVerification``: an epoch older than the producer's entry is refused
    at once with INVALID_PRODUCER_EPOCH (before the coordinator is asked); otherwise, unless the producer's
    transaction is already open here, create its verification entry (``maybeCreateVerificationStateEntry``, at
    ``now_ms``) or lower its sequence (``maybeUpdateLowestSequenceAndEpoch``: a lower sequence in the same
    epoch, or any sequence of a higher epoch)."""
    current = state.entry(producer_id)
    if current is not None and epoch < current.producer_epoch:
        return state, Errors.INVALID_PRODUCER_EPOCH
    if has_ongoing_transaction(state, producer_id, epoch):
        return state, Errors.NONE
    entry = state.verification(producer_id)
    if entry is None:
        entry = VerificationEntry(sequence, epoch, supports_epoch_bump, now_ms)
    elif epoch == entry.epoch and sequence < entry.lowest_sequence:
        entry = replace(entry, lowest_sequence=sequence)
    elif epoch > entry.epoch:
        entry = replace(entry, lowest_sequence=sequence, epoch=epoch)
    else:
        return state, Errors.NONE
    others = tuple((pid, e) for pid, e in state.verifying if pid != producer_id)
    return replace(state, verifying=tuple(sorted((*others, (producer_id, entry)), key=lambda pe: pe[0]))), Errors.NONE


def _clear_verification(state: PartitionState, producer_id: int) -> PartitionState:
    """``ProducerStateManager.clearVerificationStateEntry``."""
    if state.verification(producer_id) is None:
        return state
    return replace(state, verifying=tuple((pid, e) for pid, e in state.verifying if pid != producer_id))


def _drop_replicated(state: PartitionState) -> PartitionState:
    """``onHighWatermarkUpdated``: decided transactions whose marker is below the high watermark are stable."""
    hw = state.hw
    kept = tuple(t for t in state.unreplicated if t[2] >= hw)
    return state if kept == state.unreplicated else replace(state, unreplicated=kept)


def update_high_watermark(state: PartitionState, offset: int) -> PartitionState:
    return _drop_replicated(replace(state, high_watermark=offset))


def expire_producers(state: PartitionState, now_ms: int,
                     expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> PartitionState:
    """``removeExpiredProducers``: an entry with no open transaction, idle for ``expiration_ms``, goes; so does
    a verification entry created ``expiration_ms`` ago or earlier (one whose verification never finished)."""
    kept = tuple((pid, e) for pid, e in state.producers
                 if e.current_txn_first_offset != -1 or now_ms - e.last_timestamp < expiration_ms)
    verifying = tuple((pid, v) for pid, v in state.verifying if now_ms - v.timestamp < expiration_ms)
    return replace(state, producers=kept, verifying=verifying)


def expire_producer_ids(state: PartitionState, producer_ids: frozenset[int]) -> PartitionState:
    """``removeExpiredProducers`` at a moment when exactly ``producer_ids`` have been idle for
    ``producer.id.expiration.ms`` (the system model's abstract time): their entries go unless a transaction of
    theirs is open here, and their verification entries go."""
    kept = tuple((pid, e) for pid, e in state.producers
                 if pid not in producer_ids or e.current_txn_first_offset != -1)
    verifying = tuple((pid, v) for pid, v in state.verifying if pid not in producer_ids)
    return replace(state, producers=kept, verifying=verifying)


# --- reading ----------------------------------------------------------------------------------------

def collect_aborted_transactions(state: PartitionState, fetch_offset: int, upper_bound: int
                                 ) -> tuple[AbortedTransaction, ...]:
    """``TransactionIndex.collectAbortedTxns``: index entries overlapping ``[fetch_offset, upper_bound)``."""
    return tuple(AbortedTransaction(t.producer_id, t.first_offset) for t in state.aborted_index
                 if t.last_offset >= fetch_offset and t.first_offset < upper_bound)


def fetch(state: PartitionState, offset: int, isolation: IsolationLevel) -> FetchResponse:
    """A fetch from ``offset``, and what the consumer application then sees (``CompletedFetch``).

    read_uncommitted reads up to the high watermark; read_committed up to the LSO, with the aborted
    transactions of that range, which the consumer uses to skip aborted batches. Control records are
    never returned to the application.
    """
    committed = isolation is IsolationLevel.READ_COMMITTED
    upper = state.last_stable_offset if committed else state.hw
    batches = [b for b in state.log if b.last_offset >= offset and b.base_offset < upper]
    aborted = collect_aborted_transactions(state, offset, upper) if committed else ()
    pending = sorted(aborted, key=lambda a: a.first_offset)
    aborted_pids: set[int] = set()
    records: list[int] = []
    for batch in batches:
        while pending and pending[0].first_offset <= batch.last_offset:
            aborted_pids.add(pending.pop(0).producer_id)
        if batch.control is not None:
            if batch.control is TransactionResult.ABORT:
                aborted_pids.discard(batch.producer_id)
            continue
        if committed and batch.transactional and batch.producer_id in aborted_pids:
            continue
        records.extend(o for o in range(batch.base_offset, batch.last_offset + 1) if offset <= o < upper)
    return FetchResponse(Errors.NONE, state.hw, state.last_stable_offset, tuple(records), aborted)


# --- queries the system model and the properties use ----------------------------------------------

def has_ongoing_transaction(state: PartitionState, producer_id: int, producer_epoch: int) -> bool:
    """``ProducerStateManager.hasOngoingTransaction(pid, epoch)`` (trunk: the epoch must match)."""
    entry = state.entry(producer_id)
    return entry is not None and entry.current_txn_first_offset != -1 and entry.producer_epoch == producer_epoch


def open_transactions(state: PartitionState) -> tuple[int, ...]:
    """Producer ids with a transaction open on this partition."""
    return tuple(pid for pid, e in state.producers if e.current_txn_first_offset != -1)


def transaction_result_at(state: PartitionState, producer_id: int, offset: int) -> TransactionResult | None:
    """The result of the first marker of ``producer_id`` after ``offset``: how its batch there ended."""
    for batch in state.log:
        if batch.base_offset > offset and batch.producer_id == producer_id and batch.control is not None:
            return batch.control
    return None


def describe(state: PartitionState) -> str:
    parts = []
    for b in state.log:
        if b.control is not None:
            parts.append(f"{b.base_offset}:{b.control}(pid={b.producer_id},e={b.producer_epoch})")
        else:
            parts.append(f"{b.base_offset}:data(pid={b.producer_id},e={b.producer_epoch},seq={b.base_sequence})")
    return f"[{' '.join(parts)}] lso={state.last_stable_offset}"
