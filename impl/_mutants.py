"""Seeded bugs of the implementation, for the conformance suite's mutation score. Test-only.

Each mutant is a realistic mistake a Kafka-like implementation could make, named here with the Kafka rule
it breaks; a hook in the module that owns the rule checks :func:`active` (one comparison of a module global
when no mutant is on). Nothing in the oracle API (``Cluster``, the clients, the pytest fixtures) can turn a
mutant on: only :func:`activated` (tests) and the conformance suite's ``impl-mutant:NAME`` adapter, which
sets :data:`ACTIVE` in the process that replays.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    rule: str  # the Kafka rule it breaks, with the class that enforces it


MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    Mutant("no-duplicate-check", "a retried batch is appended again",
           "UnifiedLog.analyzeAndValidateProducerState: a duplicate of the last 5 batches is answered, not appended"),
    Mutant("duplicate-check-last-batch-only", "only the last batch is searched for duplicates",
           "ProducerStateEntry.findDuplicateBatch searches all NUM_BATCHES_TO_RETAIN (5) batches"),
    Mutant("no-epoch-fencing", "a stale producer epoch is accepted by the partition leader and by transaction "
           "verification (AddPartitionsToTxn)",
           "ProducerAppendInfo.checkProducerEpoch and TransactionCoordinator.handleAddPartitionsToTransaction: "
           "INVALID_PRODUCER_EPOCH / PRODUCER_FENCED for an older epoch"),
    Mutant("lso-is-high-watermark", "read_committed reads up to the high watermark",
           "UnifiedLog.lastStableOffset: the first unstable offset bounds read_committed"),
    Mutant("no-aborted-filter", "the consumer returns records of aborted transactions at read_committed",
           "CompletedFetch: batches of aborted transactions are skipped at READ_COMMITTED"),
    Mutant("offsets-visible-before-marker", "TxnOffsetCommit offsets are committed at once",
           "GroupMetadata: transactional offsets stay pending until the commit marker"),
    Mutant("abort-keeps-offsets", "an ABORT marker commits the pending transactional offsets",
           "GroupMetadata.completePendingTxnOffsetCommit: an abort drops them"),
    Mutant("timeout-commits", "a timed-out transaction is committed instead of aborted",
           "TransactionCoordinator.abortTimedOutTransactions: PrepareAbort"),
    Mutant("markers-skip-a-partition", "the markers of a transaction are not sent to its last partition",
           "TransactionMarkerChannelManager: a marker to every partition of the transaction"),
    # only several batches in flight per partition reveal these two (the scenarios in-flight-2 and in-flight-5)
    Mutant("out-of-order-never-retried", "an OUT_OF_ORDER_SEQUENCE_NUMBER always fails the batch",
           "TransactionManager.canRetry: a batch that is not the next one (an earlier batch is still in flight) "
           "is retried after OUT_OF_ORDER_SEQUENCE_NUMBER"),
    Mutant("duplicate-window-of-four", "the producer state keeps the last 4 batches for duplicate detection",
           "ProducerStateEntry.NUM_BATCHES_TO_RETAIN: 5 batches, one per request a client may have in flight"),
    Mutant("init-does-not-fence-ongoing", "InitProducerId leaves an ongoing transaction open",
           "TransactionCoordinator.handleInitProducerId: an Ongoing transaction is aborted (PrepareEpochFence)"),
    # revealed only by the faults of issue 20 (a failed transaction-log append, a lost request or answer)
    Mutant("acts-on-failed-log-append", "the coordinator moves to the state whose log append failed",
           "TransactionStateManager.appendTransactionToLog: the cached metadata changes only after a successful "
           "append; a failed one resets the pending state"),
    # they change only what is sent or held, not what a consumer reads: only the lock-step comparison of messages
    # and abstract states (conformance/adapters/impl_messages.py, impl_abstraction.py) can kill them
    Mutant("end-txn-response-stale-epoch", "a TV2 EndTxn response carries the epoch before the bump",
           "TransactionCoordinator.handleEndTransaction (endTxnV2): the response carries the bumped producer epoch "
           "the client must use next (KIP-890)"),
    Mutant("marker-coordinator-epoch-ahead", "the markers carry a coordinator epoch one above the coordinator's",
           "TransactionMarkerChannelManager.addTxnMarkersToSend: a WritableTxnMarker carries the coordinator epoch "
           "of the coordinator that sends it"),
    Mutant("stale-sequence-kept", "a producer's last batches are kept when its epoch changes",
           "ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch clears the batch metadata"),
    Mutant("lost-request-not-retried", "a transactional request lost with its answer is never sent again",
           "Sender / TransactionManager: a request whose connection failed or timed out is re-enqueued "
           "(TxnRequestHandler.reenqueue)"),
)}

ACTIVE: str | None = None


def active(name: str) -> bool:
    return name == ACTIVE


def activate(name: str | None) -> None:
    """Turn mutant ``name`` on for this process (None: off); ``ValueError`` naming the known ones."""
    global ACTIVE
    if name is not None and name not in MUTANTS:
        raise ValueError(f"unknown implementation mutant {name!r}; known: {', '.join(MUTANTS)}")
    ACTIVE = name


@contextlib.contextmanager
def activated(name: str) -> Iterator[None]:
    previous = ACTIVE
    activate(name)
    try:
        yield
    finally:
        activate(previous)
