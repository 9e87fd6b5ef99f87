"""The transaction coordinator's states and Kafka's table of valid transitions, kept as data.

Kafka: ``org.apache.kafka.coordinator.transaction.TransactionState`` (trunk; before 4.0 the Scala
``kafka.coordinator.transaction.TransactionState``). The names and ids are Kafka's; the ids are what
the transaction log stores (``TransactionStatus`` int8).

The table is what ``TransactionMetadata.prepareTransitionTo`` consults before every transition. Trunk
(transaction version 2, KIP-890) lets ``PrepareAbort`` follow ``Empty``, ``CompleteCommit`` and
``CompleteAbort`` (an abort with no partitions still bumps the epoch); Kafka 3.9 and before allowed it
only from ``Ongoing`` and ``PrepareEpochFence``: that older table is :data:`VALID_PREVIOUS_STATES_3_9`,
used by the ``kafka-3.9`` variant.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def named(cls, name: str) -> TxnState:
        """The state with Kafka's name ``name`` (``"PrepareCommit"``)."""
        try:
            return cls(name)
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown transaction state {name!r} (expected one of {known})") from None


EMPTY, ONGOING = TxnState.EMPTY, TxnState.ONGOING
PREPARE_COMMIT, PREPARE_ABORT = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
DEAD, PREPARE_EPOCH_FENCE = TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE

STATE_IDS: Mapping[TxnState, int] = MappingProxyType({
    EMPTY: 0, ONGOING: 1, PREPARE_COMMIT: 2, PREPARE_ABORT: 3,
    COMPLETE_COMMIT: 4, COMPLETE_ABORT: 5, DEAD: 6, PREPARE_EPOCH_FENCE: 7,
})

# TransactionState.validPreviousStates (trunk): target state -> the states it may follow.
VALID_PREVIOUS_STATES: Mapping[TxnState, frozenset[TxnState]] = MappingProxyType({
    EMPTY: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    ONGOING: frozenset({ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    DEAD: frozenset({EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT}),
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
})

# Kafka 3.9 and before: no abort from Empty or Complete* (there was no transaction version 2).
VALID_PREVIOUS_STATES_3_9: Mapping[TxnState, frozenset[TxnState]] = MappingProxyType({
    **VALID_PREVIOUS_STATES,
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}),
})

# TransactionState.isExpirationAllowed: the transactional id may be expired only when idle.
EXPIRATION_ALLOWED: frozenset[TxnState] = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})

# TransactionMetadata.hasPendingTransaction: producer-id rotation is illegal in these.
PENDING_TRANSACTION_STATES: frozenset[TxnState] = frozenset({ONGOING, PREPARE_ABORT, PREPARE_COMMIT})

PREPARE_STATES: frozenset[TxnState] = frozenset({PREPARE_COMMIT, PREPARE_ABORT})
COMPLETE_STATES: frozenset[TxnState] = frozenset({COMPLETE_COMMIT, COMPLETE_ABORT})


def is_valid_transition(source: TxnState, target: TxnState,
                        table: Mapping[TxnState, frozenset[TxnState]] = VALID_PREVIOUS_STATES) -> bool:
    return source in table[target]
