"""A partition leader: its log, producer state, aborted-transaction index and fetch at both isolations.

Follows Kafka's ``UnifiedLog`` (``appendAsLeader``, ``analyzeAndValidateProducerState``,
``lastStableOffset``, ``read`` / ``addAbortedTransactions``, ``maybeIncrementHighWatermark``),
``TransactionIndex`` / ``AbortedTxn`` (``storage/.../log/``) and ``ReplicaManager.appendRecords``' answer
(``storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java``).

What is modelled: client appends of data batches (plain, idempotent or transactional) with duplicate
detection answering the original offsets; coordinator appends of ``COMMIT`` / ``ABORT`` markers
(``WriteTxnMarkers``); the aborted-transaction index with each entry's last stable offset; the first
unstable offset and ``LSO = min(FUO, HW)``; ``FetchIsolation.HIGH_WATERMARK`` (READ_UNCOMMITTED) and
``TXN_COMMITTED`` (READ_COMMITTED) reads answering the aborted transactions overlapping the fetched range;
producer expiration; recovery of producer state by replaying the log (after a snapshot, if any).

Assumed / left out: one replica, so by default the high watermark follows the log end offset (tests and
cases may pin it and move it with :meth:`Partition.update_high_watermark`); one segment (the index scan
still stops early as ``collectAbortedTxns`` does); no KIP-890 verification guard; no retention.

Sans-I/O: every method takes the inputs it needs (including ``now_ms``) and returns a result value.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from txnspec.impl.errors import Errors, KafkaStorageException
from txnspec.impl.log import (
    INT_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    SHORT_MAX,
    BatchStore,
    ControlType,
    Log,
    Record,
    RecordBatch,
    increment_sequence,
)
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateError,
    ProducerStateManager,
)

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


class IsolationLevel(enum.Enum):
    READ_UNCOMMITTED = "READ_UNCOMMITTED"
    READ_COMMITTED = "READ_COMMITTED"


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An entry of the aborted-transaction index (``AbortedTxn``; ``last_offset`` is the ABORT marker's)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """The per-partition produce response. ``duplicate``: a retry; the offsets are the original batch's."""

    error: Errors
    base_offset: int = -1
    last_offset: int = -1
    duplicate: bool = False
    log_start_offset: int = -1
    message: str = ""


@dataclass(frozen=True, slots=True)
class FetchResult:
    """The per-partition fetch response (``FetchResponseData.PartitionData``)."""

    error: Errors
    batches: tuple[RecordBatch, ...] = ()
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


@dataclass
class TransactionIndex:
    """``TransactionIndex``: aborted transactions in order of their ABORT marker offset."""

    entries: list[AbortedTxn] = field(default_factory=list)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and self.entries[-1].last_offset >= txn.last_offset:
            raise ValueError(f"the last offset of appended log entry must increase sequentially, but "
                             f"{txn.last_offset} is not greater than current last offset "
                             f"{self.entries[-1].last_offset} of index")
        self.entries.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                break
        return out

    def truncate_to(self, offset: int) -> None:
        self.entries = [t for t in self.entries if t.last_offset < offset]


class Partition:
    """One partition leader.

    >>> p = Partition("t-0")
    >>> p.append_records(7, 0, 0, [Record(value="a")], is_transactional=True).base_offset
    0
    >>> p.last_stable_offset, p.first_unstable_offset
    (0, 0)
    >>> p.write_txn_marker(7, 0, 0, ControlType.COMMIT).error
    <Errors.NONE: (0, False)>
    >>> p.last_stable_offset
    2
    """

    def __init__(self, name: str, *, log_start_offset: int = 0, store: BatchStore | None = None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, max_producer_epoch: int = SHORT_MAX,
                 rules: Rules = KAFKA) -> None:
        self.name = name
        self.rules = rules
        self.log = Log(name, log_start_offset, store)
        self.producer_state = ProducerStateManager(name, producer_id_expiration_ms, log_start_offset,
                                                   max_producer_epoch, rules)
        self.txn_index = TransactionIndex()
        self.max_message_bytes = max_message_bytes
        self.hw_follows_leo = True
        self._high_watermark = log_start_offset
        self.refused_appends: list[Errors] = []  # errors the next appends are refused with (refuse_next_append)

    # --- offsets ---

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset if self.hw_follows_leo else self._high_watermark

    def update_high_watermark(self, offset: int) -> None:
        """Pin the high watermark at ``offset`` (clamped to the log) and let producer state see it."""
        self.hw_follows_leo = False
        self._high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        return self.rules.last_stable_offset(self.first_unstable_offset, self.high_watermark)

    def _after_append(self) -> None:
        self.producer_state.update_map_end_offset(self.log_end_offset)
        if self.hw_follows_leo:
            self.producer_state.on_high_watermark_updated(self.log_end_offset)

    # --- appends ---

    def refuse_next_append(self, error: Errors) -> None:
        """Refuse the next client append (data or a coordinator's log record) with ``error`` before anything is
        written: ``Partition.appendRecordsToLeader`` answers ``NOT_ENOUGH_REPLICAS`` so when the in-sync
        replicas are fewer than ``min.insync.replicas`` (a fault injected by tests and conformance)."""
        self.refused_appends.append(error)

    def append_records(self, producer_id: int, producer_epoch: int, base_sequence: int, records: Sequence[Record],
                       is_transactional: bool = False, *, now_ms: int = 0,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> ProduceResult:
        """A produce of one batch (``appendAsLeader``; origin CLIENT, or COORDINATOR for group offsets)."""
        if self.refused_appends:
            return ProduceResult(self.refused_appends.pop(0), log_start_offset=self.log_start_offset,
                                 message="refused before writing: fewer in-sync replicas than min.insync.replicas")
        bad = _validate_batch(producer_id, producer_epoch, base_sequence, records, is_transactional)
        if bad:
            return ProduceResult(Errors.INVALID_RECORD, message=bad, log_start_offset=self.log_start_offset)
        batch = RecordBatch(-1, tuple(records), producer_id, producer_epoch, base_sequence, is_transactional,
                            timestamp=now_ms)
        if batch.size_in_bytes() > self.max_message_bytes:
            return ProduceResult(Errors.MESSAGE_TOO_LARGE, log_start_offset=self.log_start_offset,
                                 message=f"batch of {batch.size_in_bytes()} bytes is larger than max.message.bytes "
                                         f"{self.max_message_bytes}")
        info: ProducerAppendInfo | None = None
        if batch.has_producer_id:
            entry = self.producer_state.last_entry(producer_id)
            if entry is not None and origin is AppendOrigin.CLIENT and self.rules.detects_duplicates:
                dup = entry.find_duplicate_batch(producer_epoch, base_sequence, batch.last_sequence,
                                                 self.rules.duplicate_window)
                if dup is not None:
                    return ProduceResult(Errors.NONE, dup.first_offset, dup.last_offset, True, self.log_start_offset)
            if is_transactional and not self.producer_state.has_ongoing_transaction(producer_id, producer_epoch) \
                    and entry is not None and producer_epoch < entry.producer_epoch \
                    and self.rules.fences_stale_epochs:
                return ProduceResult(Errors.INVALID_PRODUCER_EPOCH, log_start_offset=self.log_start_offset,
                                     message=f"epoch {producer_epoch} is older than {entry.producer_epoch}")
            info = self.producer_state.prepare_update(producer_id, origin)
            first = self.log_end_offset
            try:
                info.append_data_batch(producer_epoch, base_sequence, batch.last_sequence, now_ms, first,
                                       first + len(records) - 1, is_transactional)
            except ProducerStateError as exc:
                return ProduceResult(exc.error, log_start_offset=self.log_start_offset, message=str(exc))
        try:
            stored = self.log.append(batch)
        except KafkaStorageException as exc:  # nothing was written: producer state stays as it was
            return ProduceResult(Errors.KAFKA_STORAGE_ERROR, log_start_offset=self.log_start_offset, message=str(exc))
        if info is not None:
            self.producer_state.update(info)
        if is_transactional:  # UnifiedLog.updateProducers: the transaction has its first offset now
            self.producer_state.clear_verification_state_entry(producer_id)
        self._after_append()
        return ProduceResult(Errors.NONE, stored.base_offset, stored.last_offset, False, self.log_start_offset)

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, producer_epoch: int,
                                             supports_epoch_bump: bool, now_ms: int = 0) -> Errors:
        """``UnifiedLog.maybeStartTransactionVerification``: an epoch older than the producer's entry is refused
        (INVALID_PRODUCER_EPOCH, before the coordinator is asked); otherwise, unless the producer's transaction
        is already open here, create (or lower) its verification state before the broker asks the coordinator."""
        entry = self.producer_state.last_entry(producer_id)
        if entry is not None and producer_epoch < entry.producer_epoch:
            return Errors.INVALID_PRODUCER_EPOCH
        if not self.producer_state.has_ongoing_transaction(producer_id, producer_epoch):
            self.producer_state.maybe_create_verification_state_entry(producer_id, sequence, producer_epoch,
                                                                      supports_epoch_bump, now_ms)
        return Errors.NONE

    def write_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         result: ControlType, transaction_version: int = 0, *, now_ms: int = 0) -> ProduceResult:
        """A coordinator's transaction marker (``WriteTxnMarkers`` → ``appendAsLeader`` origin COORDINATOR)."""
        if producer_id < 0 or not 0 <= producer_epoch <= SHORT_MAX or coordinator_epoch < -1:
            return ProduceResult(Errors.INVALID_REQUEST, log_start_offset=self.log_start_offset,
                                 message=f"invalid marker for producer {producer_id} epoch {producer_epoch}")
        info = self.producer_state.prepare_update(producer_id, AppendOrigin.COORDINATOR)
        offset = self.log_end_offset
        try:
            completed = info.append_end_txn_marker(result, coordinator_epoch, producer_epoch, offset, now_ms,
                                                   transaction_version)
        except ProducerStateError as exc:
            return ProduceResult(exc.error, log_start_offset=self.log_start_offset, message=str(exc))
        try:
            stored = self.log.append(RecordBatch(-1, (Record(timestamp=now_ms),), producer_id, producer_epoch,
                                                 NO_SEQUENCE, True, result, coordinator_epoch, now_ms))
        except KafkaStorageException as exc:  # the coordinator retries the marker
            return ProduceResult(Errors.KAFKA_STORAGE_ERROR, log_start_offset=self.log_start_offset, message=str(exc))
        self.producer_state.update(info)
        verifying = self.producer_state.verification_states.get(producer_id)
        # a marker ends what was being verified, unless a TV2 producer already verifies its next transaction
        if verifying is None or not (verifying.supports_epoch_bump and producer_epoch == verifying.epoch):
            self.producer_state.clear_verification_state_entry(producer_id)
        if completed is not None:
            self._complete(completed)
        self._after_append()
        return ProduceResult(Errors.NONE, stored.base_offset, stored.last_offset, False, self.log_start_offset)

    def _complete(self, completed: CompletedTxn) -> None:
        lso = self.producer_state.last_stable_offset(completed)
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                             lso))
        self.producer_state.complete_txn(completed)

    # --- reads ---

    def read(self, fetch_offset: int, isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
             max_batches: int | None = None) -> FetchResult:
        """A fetch (``UnifiedLog.read``): batches below the HW (or the LSO), with aborted txns if committed."""
        if isinstance(fetch_offset, bool) or not isinstance(fetch_offset, int) \
                or not self.log_start_offset <= fetch_offset <= self.log_end_offset:
            return FetchResult(Errors.OFFSET_OUT_OF_RANGE, high_watermark=self.high_watermark,
                               last_stable_offset=self.last_stable_offset, log_start_offset=self.log_start_offset)
        committed = isolation is IsolationLevel.READ_COMMITTED
        max_offset = self.last_stable_offset if committed else self.high_watermark
        batches = self.log.read(fetch_offset, max_offset, max_batches)
        aborted = None
        if committed:
            # Nothing readable (fetch offset at or past the LSO): an empty list, as LocalLog.emptyFetchDataInfo.
            aborted = tuple(self.txn_index.collect_aborted_txns(
                fetch_offset, self.log.batch_after(batches[-1].next_offset))) if batches else ()
        return FetchResult(Errors.NONE, tuple(batches), self.high_watermark, self.last_stable_offset,
                           self.log_start_offset, aborted)

    # --- maintenance ---

    def delete_records_before(self, offset: int) -> tuple[Errors, int]:
        """DeleteRecords at the leader (``Partition.deleteRecordsOnLeader``, ``UnifiedLog.
        maybeIncrementLogStartOffset``): -1 means the high watermark; an offset below 0 or above the high
        watermark is OFFSET_OUT_OF_RANGE; the log start offset only moves up. Returns the error and the low
        watermark (the log start offset after)."""
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            return Errors.OFFSET_OUT_OF_RANGE, -1
        if target > self.log_start_offset:
            self.log.advance_start(target)
            self.producer_state.on_log_start_offset_incremented(target)
            self.txn_index.entries = [a for a in self.txn_index.entries if a.last_offset >= target]
        return Errors.NONE, self.log_start_offset

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        return self.producer_state.remove_expired_producers(now_ms)

    def rebuild_producer_state(self, snapshot: dict[str, object] | None = None) -> None:
        """Recovery (``UnifiedLog.rebuildProducerState``): load a snapshot, then replay the later batches.

        Replay uses origin REPLICATION (no validation), recomputes completed transactions and the
        aborted-transaction index, as Kafka's log loading does.
        """
        start = self.log_start_offset
        self.producer_state.truncate_fully_and_start_at(start)
        self.txn_index = TransactionIndex()
        replay_from = start
        if snapshot is not None and int(snapshot["offset"]) <= self.log_end_offset:  # type: ignore[call-overload]
            self.producer_state.load_snapshot(snapshot)
            replay_from = int(snapshot["offset"])  # type: ignore[call-overload]
            self.txn_index.entries = [AbortedTxn(*t) for t in snapshot.get("aborted", [])]  # type: ignore[attr-defined]
        for batch in self.log.read(replay_from, INT_MAX + self.log_end_offset):
            if not batch.has_producer_id:
                continue
            info = self.producer_state.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            if batch.control_type is not None:
                completed = info.append_end_txn_marker(batch.control_type, batch.coordinator_epoch,
                                                       batch.producer_epoch, batch.base_offset, batch.timestamp, 0)
                self.producer_state.update(info)
                if completed is not None:
                    self._complete(completed)
            else:
                info.append_data_batch(batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                                       batch.timestamp, batch.base_offset, batch.last_offset, batch.is_transactional)
                self.producer_state.update(info)
        self._after_append()
        if not self.hw_follows_leo:
            self.producer_state.on_high_watermark_updated(self._high_watermark)

    def snapshot(self) -> dict[str, object]:
        """Producer state plus the aborted index as of the log end (a ``.snapshot`` and ``.txnindex``)."""
        snap: dict[str, object] = dict(self.producer_state.snapshot())
        snap["aborted"] = [[t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset]
                           for t in self.txn_index.entries]
        return snap


def _validate_batch(producer_id: object, producer_epoch: object, base_sequence: object, records: object,
                    is_transactional: object) -> str:
    """Why a client batch is malformed (``LogValidator``'s checks), or ``""``."""
    for name, value in (("producer_id", producer_id), ("producer_epoch", producer_epoch),
                        ("base_sequence", base_sequence)):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} must be an integer, got {value!r}"
    assert isinstance(producer_id, int) and isinstance(producer_epoch, int) and isinstance(base_sequence, int)
    if not isinstance(is_transactional, bool):
        return f"is_transactional must be a bool, got {is_transactional!r}"
    if not isinstance(records, Sequence) or isinstance(records, str | bytes) or not records:
        return "a batch needs a non-empty sequence of records"
    if not all(isinstance(r, Record) for r in records):
        return "records must be Record values"
    if producer_id == NO_PRODUCER_ID:
        if is_transactional:
            return "a transactional batch needs a producer id"
        if producer_epoch != NO_PRODUCER_EPOCH or base_sequence != NO_SEQUENCE:
            return "a batch without producer id must have epoch -1 and sequence -1"
        return ""
    if producer_id < 0:
        return f"producer_id must be >= 0 or -1, got {producer_id}"
    if not 0 <= producer_epoch <= SHORT_MAX:
        return f"producer_epoch must be in [0, {SHORT_MAX}], got {producer_epoch}"
    if not 0 <= base_sequence <= INT_MAX:
        return f"base_sequence must be in [0, {INT_MAX}], got {base_sequence}"
    if len(records) > INT_MAX:
        return "too many records"
    return ""


def last_sequence_of(base_sequence: int, count: int) -> int:
    return increment_sequence(base_sequence, count - 1)


__all__ = ["AbortedTxn", "FetchResult", "IsolationLevel", "Partition", "ProduceResult", "TransactionIndex",
           "last_sequence_of"]
