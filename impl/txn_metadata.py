"""Transaction coordinator state: ``TransactionState``, ``TransactionMetadata`` and ``TxnTransitMetadata``.

Follows Kafka TRUNK ``transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/``
``TransactionState.java`` (states, ids, ``validPreviousStates``, ``isExpirationAllowed``),
``TransactionMetadata.java`` (every ``prepare*`` helper, ``prepareTransitionTo``, ``completeTransitionTo``
with its per-target validation) and ``TxnTransitMetadata.java``
(``transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/``).

Theory of operation (as in Kafka): a handler asks the metadata for a *transit* with a ``prepare*`` helper;
that sets ``pending_state`` and returns an immutable :class:`TxnTransitMetadata`; the transit is written
to the transaction log; only when the write succeeded does ``complete_transition_to`` copy the transit's
fields into the metadata and clear ``pending_state``. A failed write clears ``pending_state`` (done by
:class:`txnspec.impl.txn_state_manager.TransactionStateManager`).

The valid-previous-states table is data (:data:`VALID_PREVIOUS_STATES`), read by the transition gate and
by the tests. Violations raise :class:`CoordinatorIllegalState` (Kafka's ``IllegalStateException``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from txnspec.impl.log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX

TV_0, TV_1, TV_2 = 0, 1, 2
INT_MAX = 2_147_483_647


class CoordinatorIllegalState(RuntimeError):
    """An illegal coordinator transition (Kafka's ``IllegalStateException``): a bug, never a client error."""


class ProducerFenced(Exception):
    """``prepareIncrementProducerEpoch`` found a fenced expected epoch."""


class TransactionState(enum.Enum):
    """``TransactionState``; the value is Kafka's name, :attr:`id` its persisted ``TransactionStatus``."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def id(self) -> int:
        return _STATE_IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state, i in _STATE_IDS.items():
            if i == state_id:
                return state
        raise ValueError(f"transaction state unknown: {state_id}")

    @classmethod
    def named(cls, name: str) -> TransactionState:
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown transaction state {name!r} (expected one of "
                             f"{', '.join(s.value for s in cls)})") from None

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


S = TransactionState
_STATE_IDS = {S.EMPTY: 0, S.ONGOING: 1, S.PREPARE_COMMIT: 2, S.PREPARE_ABORT: 3, S.COMPLETE_COMMIT: 4,
              S.COMPLETE_ABORT: 5, S.DEAD: 6, S.PREPARE_EPOCH_FENCE: 7}

# trunk ``TransactionState.validPreviousStates`` (``TransactionState.java``).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int, max_epoch: int = SHORT_MAX) -> bool:
    """``TransactionMetadata.isEpochExhausted``: ``epoch >= Short.MAX_VALUE - 1`` (``max_epoch`` stands for
    ``Short.MAX_VALUE``: see ``CoordinatorConfig.max_producer_epoch``)."""
    return epoch >= max_epoch - 1


def supports_epoch_bump(transaction_version: int) -> bool:
    return transaction_version >= TV_2


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a transition will reach, handed to the transaction-log append."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[str]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass
class TransactionMetadata:
    """``TransactionMetadata`` of one transactional id (mutable, guarded by the coordinator)."""

    transactional_id: str
    producer_id: int
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[str] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = TV_0
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False
    max_epoch: int = field(default=SHORT_MAX, compare=False)  # Short.MAX_VALUE, or the coordinator's bound

    # --- predicates ---

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch, self.max_epoch)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    @property
    def is_distributed_two_phase_commit_txn(self) -> bool:
        return self.txn_timeout_ms == INT_MAX

    # --- the transition gate ---

    def prepare_transition_to(self, target: TransactionState, producer_id: int, next_producer_id: int,
                              producer_epoch: int, last_producer_epoch: int, txn_timeout_ms: int,
                              topic_partitions: frozenset[str], txn_start_timestamp: int,
                              update_timestamp: int, client_transaction_version: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise CoordinatorIllegalState(
                f"TransactionalId {self.transactional_id} failed to prepare transition to {target.value} state "
                f"since it is still in transit to {self.pending_state.value}")
        if producer_id < 0:
            raise CoordinatorIllegalState(f"Illegal new producer id {producer_id}")
        if target is not S.DEAD and producer_epoch < 0:
            raise CoordinatorIllegalState(f"Illegal new producer epoch {producer_epoch}")
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise CoordinatorIllegalState(
                f"TransactionalId {self.transactional_id} failed to prepare transition from {self.state.value} to "
                f"{target.value}")
        self.pending_state = target
        return TxnTransitMetadata(producer_id, self.producer_id, next_producer_id, producer_epoch,
                                  last_producer_epoch, txn_timeout_ms, target, frozenset(topic_partitions),
                                  txn_start_timestamp, update_timestamp, client_transaction_version)

    def _transit(self, target: TransactionState, **changes: object) -> TxnTransitMetadata:
        values: dict[str, object] = {
            "producer_id": self.producer_id, "next_producer_id": self.next_producer_id,
            "producer_epoch": self.producer_epoch, "last_producer_epoch": self.last_producer_epoch,
            "txn_timeout_ms": self.txn_timeout_ms, "topic_partitions": frozenset(self.topic_partitions),
            "txn_start_timestamp": self.txn_start_timestamp,
            "update_timestamp": self.txn_last_update_timestamp,
            "client_transaction_version": self.client_transaction_version}
        values.update(changes)
        return self.prepare_transition_to(target, **values)  # type: ignore[arg-type]

    # --- the prepare* helpers (``TransactionMetadata.java``) ---

    def prepare_no_transit(self) -> TxnTransitMetadata:
        return TxnTransitMetadata(self.producer_id, self.prev_producer_id, self.next_producer_id,
                                  self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp, self.client_transaction_version)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        bumped = self.producer_epoch if self.has_failed_epoch_fence or self.producer_epoch == self.max_epoch \
            else self.producer_epoch + 1
        return self._transit(S.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_epoch: int | None,
                                         update_timestamp: int) -> TxnTransitMetadata:
        if self.is_producer_epoch_exhausted:
            raise CoordinatorIllegalState(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFenced(f"expected epoch {expected_epoch} is neither the current epoch "
                                 f"{self.producer_epoch} nor the last epoch {self.last_producer_epoch}")
        return self._transit(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(),
                             txn_start_timestamp=-1, update_timestamp=update_timestamp)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.has_pending_transaction:
            raise CoordinatorIllegalState("Cannot rotate producer ids while a transaction is still pending")
        return self._transit(S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(),
                             txn_start_timestamp=-1, update_timestamp=update_timestamp)

    def prepare_add_partitions(self, added: frozenset[str], update_timestamp: int,
                               client_transaction_version: int) -> TxnTransitMetadata:
        start = update_timestamp if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) \
            else self.txn_start_timestamp
        return self._transit(S.ONGOING, topic_partitions=frozenset(self.topic_partitions | added),
                             txn_start_timestamp=start, update_timestamp=update_timestamp,
                             client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, new_state: TransactionState, client_transaction_version: int,
                                next_producer_id: int, update_timestamp: int,
                                no_partition_added: bool) -> TxnTransitMetadata:
        if supports_epoch_bump(client_transaction_version):
            if self.producer_epoch == self.max_epoch and new_state is S.PREPARE_ABORT:
                epoch = self.max_epoch
            else:
                epoch = self.producer_epoch + 1
            last = self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(new_state, next_producer_id=next_producer_id, producer_epoch=epoch,
                             last_producer_epoch=last,
                             txn_start_timestamp=update_timestamp if no_partition_added else self.txn_start_timestamp,
                             update_timestamp=update_timestamp, client_transaction_version=client_transaction_version)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        self.has_failed_epoch_fence = False
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            return self._transit(new_state, producer_id=self.next_producer_id, next_producer_id=NO_PRODUCER_ID,
                                 producer_epoch=0, topic_partitions=frozenset(),
                                 update_timestamp=update_timestamp)
        return self._transit(new_state, topic_partitions=frozenset(), update_timestamp=update_timestamp)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._transit(S.DEAD, topic_partitions=frozenset())

    def remove_partition(self, partition: str) -> None:
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise CoordinatorIllegalState(f"Transaction metadata {self} with an unexpected state {self.state.value} "
                                          f"when removing partition {partition}")
        self.topic_partitions.discard(partition)

    # --- completion ---

    def _valid_producer_epoch(self, t: TxnTransitMetadata) -> bool:
        if supports_epoch_bump(t.client_transaction_version):
            if t.txn_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0:
                return t.last_producer_epoch == self.last_producer_epoch and t.prev_producer_id == self.producer_id
            if t.txn_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == (self.producer_epoch + 1) or (t.producer_epoch == 0
                                                                  and t.producer_id != self.producer_id)

    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply a transit whose log append succeeded (``completeTransitionTo``)."""
        if self.pending_state is None or self.pending_state is not t.txn_state:
            raise CoordinatorIllegalState(
                f"TransactionalId {self.transactional_id} completing transaction state transition to "
                f"{t.txn_state.value} while it does not have a matching pending state ({self.pending_state})")
        target = t.txn_state
        ok: bool
        if target is S.EMPTY:
            ok = (self.producer_epoch == t.producer_epoch or self._valid_producer_epoch_bump(t)) \
                and not t.topic_partitions and t.txn_start_timestamp == -1
        elif target is S.ONGOING:
            ok = self._valid_producer_epoch(t) and t.topic_partitions >= self.topic_partitions \
                and self.txn_timeout_ms == t.txn_timeout_ms
        elif target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            allowed_empty_abort = target is S.PREPARE_ABORT and supports_epoch_bump(t.client_transaction_version) \
                and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            ok = self._valid_producer_epoch(t) and self.topic_partitions == set(t.topic_partitions) \
                and self.txn_timeout_ms == t.txn_timeout_ms \
                and (self.txn_start_timestamp == t.txn_start_timestamp or allowed_empty_abort)
        elif target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            ok = self._valid_producer_epoch(t) and self.txn_timeout_ms == t.txn_timeout_ms \
                and t.txn_start_timestamp != -1
        else:
            ok = False
        if not ok:
            raise CoordinatorIllegalState(
                f"TransactionalId {self.transactional_id} failed transition to state {t} from {self.state.value}")
        self.producer_id = t.producer_id
        self.prev_producer_id = t.prev_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.topic_partitions = set(t.topic_partitions)
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.client_transaction_version = t.client_transaction_version
        self.pending_state = None
        self.state = target


__all__ = ["INT_MAX", "TV_0", "TV_1", "TV_2", "VALID_PREVIOUS_STATES", "CoordinatorIllegalState", "ProducerFenced",
           "TransactionMetadata", "TransactionState", "TxnTransitMetadata", "is_epoch_exhausted",
           "supports_epoch_bump"]
