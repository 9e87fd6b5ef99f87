"""The transactional producer's states, which state may follow which (as data), and its requests' priorities.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/internals/TransactionManager.java``:
the nested ``State`` enum with ``isTransitionValid`` (here :data:`VALID_PREVIOUS_STATES`, target -> its valid
sources; FATAL_ERROR is reachable from any state) and ``TransactionManager.Priority`` (the order of the pending
transactional requests: FindCoordinator first, the epoch bump last).

Assumed: Kafka 4.4's table, with KIP-939's ``PREPARED_TRANSACTION``. Left out: nothing of the two enums.
"""

from __future__ import annotations

import enum


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


St = State
# TRUNK ``TransactionManager.State.isTransitionValid``: target -> valid sources (FATAL_ERROR from any).
VALID_PREVIOUS_STATES: dict[State, frozenset[State]] = {
    St.UNINITIALIZED: frozenset({St.READY, St.ABORTABLE_ERROR}),
    St.INITIALIZING: frozenset({St.UNINITIALIZED, St.COMMITTING_TRANSACTION, St.ABORTING_TRANSACTION}),
    St.READY: frozenset({St.INITIALIZING, St.COMMITTING_TRANSACTION, St.ABORTING_TRANSACTION}),
    St.IN_TRANSACTION: frozenset({St.READY}),
    St.PREPARED_TRANSACTION: frozenset({St.IN_TRANSACTION, St.INITIALIZING}),
    St.COMMITTING_TRANSACTION: frozenset({St.IN_TRANSACTION, St.PREPARED_TRANSACTION}),
    St.ABORTING_TRANSACTION: frozenset({St.IN_TRANSACTION, St.PREPARED_TRANSACTION, St.ABORTABLE_ERROR}),
    St.ABORTABLE_ERROR: frozenset({St.IN_TRANSACTION, St.COMMITTING_TRANSACTION, St.ABORTABLE_ERROR,
                                   St.INITIALIZING}),
    St.FATAL_ERROR: frozenset(State),
}


class Priority(enum.IntEnum):
    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


__all__ = ["VALID_PREVIOUS_STATES", "Priority", "St", "State"]
