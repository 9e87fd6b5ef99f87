"""Per-partition producer state: sequence and epoch validation, duplicates, open transactions, LSO.

Follows Kafka's ``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo``, ``BatchMetadata``,
``TxnMetadata`` and ``CompletedTxn`` (``storage/src/main/java/org/apache/kafka/storage/internals/log/``),
trunk semantics.

What is modelled:

* an entry per producer id with its epoch, coordinator epoch, last timestamp, the first offset of its open
  transaction and the metadata of its last ``NUM_BATCHES_TO_RETAIN = 5`` batches;
* duplicate detection (``findDuplicateBatch``: same epoch, exact first and last sequence);
* ``checkProducerEpoch`` with the TV2 strict marker rule and the KAFKA-19999 retry allowance,
  ``checkSequence`` with ``inSequence`` wrapping at Integer.MAX_VALUE, ``checkCoordinatorEpoch``;
* ongoing and unreplicated transactions, the first unstable offset, ``lastStableOffset(completedTxn)``
  (the value stored in an aborted-transaction index entry), high-watermark updates;
* producer expiration (``producer.id.expiration.ms``) and snapshots holding only each entry's last batch.

* KIP-890 verification state (``VerificationStateEntry``): the lowest sequence seen while a producer's
  transactional batch is verified with its coordinator, and the TV2 rule that a producer with no state starts
  at sequence 0; created by the broker before it asks the coordinator, cleared by the producer's next
  transactional append or marker.

Assumed / left out: the verification guard's identity (the broker verifies and appends in one step). A check
failure raises :class:`ProducerStateError` carrying Kafka's error; the caller
(:class:`txnspec.impl.partition.Partition`) turns it into the produce response's error.

Long because it holds ``ProducerStateManager`` with the classes it owns (``ProducerStateEntry``,
``ProducerAppendInfo``, ``VerificationStateEntry``, ``BatchMetadata``, ``TxnMetadata``, ``CompletedTxn``),
one state machine over one entry a producer (the manager starts an append, the append checks and updates the
entry, the manager completes it), kept together as Kafka's log package keeps them.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from txnspec.impl.errors import Errors
from txnspec.impl.log import INT_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, SHORT_MAX, ControlType, decrement_sequence
from txnspec.impl.policy import KAFKA, NUM_BATCHES_TO_RETAIN, Rules

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


class AppendOrigin(enum.Enum):
    """``AppendOrigin``: who wrote the batch; only CLIENT appends get sequence checks."""

    CLIENT = "CLIENT"
    COORDINATOR = "COORDINATOR"
    REPLICATION = "REPLICATION"


class ProducerStateError(Exception):
    """A rejected append; ``error`` is the Kafka error the produce / marker response carries."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``ProducerAppendInfo.inSequence``: ``next == last + 1``, or the wrap from Integer.MAX_VALUE to 0."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """``BatchMetadata(lastSeq, lastOffset, offsetDelta, timestamp)``."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """``ProducerStateEntry``: what a partition remembers about one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    def maybe_update_producer_epoch(self, producer_epoch: int, rules: Rules = KAFKA) -> bool:
        if self.producer_epoch != producer_epoch:
            if rules.new_epoch_clears_batches:
                self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int, rules: Rules = KAFKA) -> None:
        self.maybe_update_producer_epoch(producer_epoch, rules)
        self.add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry, rules: Rules = KAFKA) -> None:
        self.maybe_update_producer_epoch(next_entry.producer_epoch, rules)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.last_timestamp = next_entry.last_timestamp
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        for b in next_entry.batch_metadata:
            self.add_batch_metadata(b)

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int, last_seq: int,
                             window: int = NUM_BATCHES_TO_RETAIN) -> BatchMetadata | None:
        """The cached batch with exactly this sequence range, if the epoch matches, among the last ``window``."""
        if producer_epoch != self.producer_epoch:
            return None
        searched: Iterable[BatchMetadata] = self.batch_metadata
        if window < NUM_BATCHES_TO_RETAIN:
            searched = list(self.batch_metadata)[-window:]
        for b in searched:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def copy_without_batches(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                                  self.current_txn_first_offset)


@dataclass
class TxnMetadata:
    """An open (``last_offset is None``) or decided-but-unreplicated transaction on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class VerificationStateEntry:
    """``VerificationStateEntry``: the lowest sequence (and its epoch) seen while verifying a producer."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class ProducerAppendInfo:
    """Validation and staged update for one producer within one append (``ProducerAppendInfo``)."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin,
                 verification: VerificationStateEntry | None = None, max_epoch: int = SHORT_MAX,
                 rules: Rules = KAFKA) -> None:
        self.producer_id = producer_id
        self.rules = rules
        self.max_epoch = max_epoch  # Short.MAX_VALUE, or the broker's bound (BrokerConfig.max_producer_epoch)
        self.current = current
        self.origin = origin
        self.verification = verification
        self.updated = current.copy_without_batches()
        self.started_transactions: list[TxnMetadata] = []

    def check_producer_epoch(self, producer_epoch: int, offset: int, transaction_version: int = -1) -> None:
        current = self.updated.producer_epoch
        if transaction_version >= 2:
            invalid = producer_epoch <= current
            if invalid and producer_epoch == current and (
                    self.updated.current_txn_first_offset is None or producer_epoch == self.max_epoch):
                return  # KAFKA-19999: an idempotent retry of a marker already written
        else:
            invalid = producer_epoch < current
        if invalid and self.origin is not AppendOrigin.REPLICATION and self.rules.fences_stale_epochs:
            raise ProducerStateError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, which is "
                f"{'smaller than or equal to' if transaction_version >= 2 else 'smaller than'} the last seen epoch "
                f"{current}")

    def check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        v = self.verification
        if v is not None and v.supports_epoch_bump and first_seq != 0 and self.current.is_empty:
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"invalid sequence number for producer {self.producer_id} at offset {offset}: {first_seq} "
                "(incoming seq. number); a transactions v2 producer with no state starts at sequence 0")
        if v is not None and first_seq > v.lowest_sequence:
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {self.producer_id} at offset {offset}: {first_seq} "
                f"(incoming seq. number), {v.lowest_sequence} (earliest seen sequence)")
        if producer_epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence number for new epoch of producer {self.producer_id} at offset {offset}: "
                    f"{producer_epoch} (request epoch), {first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)")
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif producer_epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last_seq, first_seq)):
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)")

    def append_data_batch(self, producer_epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        self.check_producer_epoch(producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self.check_sequence(producer_epoch, first_seq, first_offset)
        self.updated.add_batch(producer_epoch, last_seq, last_offset, last_offset - first_offset, timestamp,
                               self.rules)
        if self.updated.current_txn_first_offset is not None and not is_transactional:
            raise ProducerStateError(
                Errors.INVALID_TXN_STATE,
                f"expected transactional write from producer {self.producer_id} at offset {first_offset}")
        if self.updated.current_txn_first_offset is None and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, control_type: ControlType, coordinator_epoch: int, producer_epoch: int,
                              offset: int, timestamp: int, transaction_version: int) -> CompletedTxn | None:
        self.check_producer_epoch(producer_epoch, offset, transaction_version)
        if self.updated.coordinator_epoch > coordinator_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise ProducerStateError(
                Errors.TRANSACTION_COORDINATOR_FENCED,
                f"invalid coordinator epoch for producer {self.producer_id} at offset {offset}: {coordinator_epoch} "
                f"(zombie), {self.updated.coordinator_epoch} (current)")
        completed = None
        if self.updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, self.updated.current_txn_first_offset, offset,
                                     control_type is ControlType.ABORT)
        self.updated.maybe_update_producer_epoch(producer_epoch, self.rules)
        self.updated.coordinator_epoch = coordinator_epoch
        self.updated.last_timestamp = timestamp
        self.updated.current_txn_first_offset = None
        return completed


class ProducerStateManager:
    """The producer state of one partition (``ProducerStateManager``)."""

    def __init__(self, partition: str = "", producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 log_start_offset: int = 0, max_epoch: int = SHORT_MAX, rules: Rules = KAFKA) -> None:
        self.partition = partition
        self.rules = rules
        self.max_epoch = max_epoch
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        self.verification_states: dict[int, VerificationStateEntry] = {}  # in memory only, as in Kafka
        self.map_end_offset = log_start_offset
        self.log_start_offset = log_start_offset

    # --- appends ---

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.verification_states.get(producer_id),
                                  self.max_epoch, self.rules)

    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              supports_epoch_bump: bool, now_ms: int = 0) -> VerificationStateEntry:
        entry = self.verification_states.setdefault(
            producer_id, VerificationStateEntry(now_ms, sequence, epoch, supports_epoch_bump))
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def update(self, info: ProducerAppendInfo) -> None:
        current = self.producers.get(info.producer_id)
        if current is None:
            self.producers[info.producer_id] = info.updated
        else:
            current.update(info.updated, self.rules)
        for txn in info.started_transactions:
            self.ongoing_txns[txn.first_offset] = txn

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None \
            and entry.producer_epoch == producer_epoch

    # --- transactions and the last stable offset ---

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO an aborted-index entry records: first offset of another producer's open txn, else last+1."""
        for first in sorted(self.ongoing_txns):
            if self.ongoing_txns[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"attempted to complete transaction {completed} on partition {self.partition} "
                             "which was not started")
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        for first in [f for f, t in self.unreplicated_txns.items()
                      if t.last_offset is not None and t.last_offset < high_watermark]:
            del self.unreplicated_txns[first]

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """``onLogStartOffsetIncremented``: transactions completed wholly below the new start are forgotten;
        producer entries stay (their ids and epochs still fence)."""
        for first in [f for f, t in self.unreplicated_txns.items()
                      if t.last_offset is not None and t.last_offset < log_start_offset]:
            del self.unreplicated_txns[first]
        self.log_start_offset = log_start_offset
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    def first_unstable_offset(self) -> int | None:
        candidates = [*self.ongoing_txns, *self.unreplicated_txns]
        if not candidates:
            return None
        return max(min(candidates), self.log_start_offset)

    def first_undecided_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    # --- expiration and snapshots ---

    def is_producer_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return entry.current_txn_first_offset is None \
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        expired = [pid for pid, e in self.producers.items() if self.is_producer_expired(now_ms, e)]
        for pid in expired:
            del self.producers[pid]
        for pid in [pid for pid, v in self.verification_states.items()
                    if now_ms - v.timestamp >= self.producer_id_expiration_ms]:
            del self.verification_states[pid]
        return expired

    def snapshot(self) -> dict[str, Any]:
        """What Kafka's ``.snapshot`` file holds: per producer only the last batch, plus the map end offset."""
        return {"offset": self.map_end_offset, "producers": [
            {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
             "coordinator_epoch": e.coordinator_epoch, "last_timestamp": e.last_timestamp,
             "current_txn_first_offset": -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
             "last_batch": None if not e.batch_metadata else [
                 e.batch_metadata[-1].last_seq, e.batch_metadata[-1].last_offset,
                 e.batch_metadata[-1].offset_delta, e.batch_metadata[-1].timestamp]}
            for e in self.producers.values()]}

    def load_snapshot(self, snap: dict[str, Any]) -> None:
        """Replace the state with a snapshot's; open transactions are rebuilt from the entries."""
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for p in snap["producers"]:
            first = p["current_txn_first_offset"]
            entry = ProducerStateEntry(p["producer_id"], p["producer_epoch"], p["coordinator_epoch"],
                                       p["last_timestamp"], None if first < 0 else first)
            if p["last_batch"] is not None:
                entry.batch_metadata.append(BatchMetadata(*p["last_batch"]))
            self.producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                self.ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(entry.producer_id,
                                                                               entry.current_txn_first_offset)
        self.map_end_offset = snap["offset"]

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.map_end_offset = offset
        self.log_start_offset = offset


__all__ = ["DEFAULT_PRODUCER_ID_EXPIRATION_MS", "NUM_BATCHES_TO_RETAIN", "AppendOrigin", "BatchMetadata",
           "CompletedTxn", "ProducerAppendInfo", "ProducerStateEntry", "ProducerStateError", "ProducerStateManager",
           "TxnMetadata", "in_sequence"]
