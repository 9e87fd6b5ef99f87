"""Seeded bugs of the implementation, for the conformance suite's mutation score: named overrides of its rules.

Each mutant is a realistic mistake a Kafka-like implementation could make, named with the Kafka rule it
breaks, and made as the spec makes its mutants (``spec/mutants.py``): Kafka's rules
(:data:`txnspec.impl.policy.KAFKA`) with one field replaced. A cluster, broker or client built with a
mutant's :attr:`Mutant.rules` makes that mistake; nothing else changes, and no component knows the mutants
(nothing in the implementation imports this module). The conformance suite's ``impl-mutant:NAME`` adapter
and the tests build with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from txnspec.impl.log import ControlType
from txnspec.impl.policy import KAFKA, NUM_BATCHES_TO_RETAIN, Rules, marker_partitions


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    rule: str  # the Kafka rule it breaks, with the class that enforces it
    rules: Rules  # Kafka's rules with this mistake


def lso_is_high_watermark(first_unstable_offset: int | None, high_watermark: int) -> int:
    return high_watermark


def markers_skip_last_partition(partitions: Iterable[str]) -> list[str]:
    targets = marker_partitions(partitions)
    return targets[:-1] if len(targets) > 1 else targets


def off(rule: str) -> dict[str, Any]:
    """The override that switches off one of Kafka's rules (a field of Rules that is True in KAFKA)."""
    return {rule: False}


# mutant name -> (its override of Kafka's rules, what goes wrong, the Kafka rule it breaks with the class enforcing it)
MISTAKES: dict[str, tuple[dict[str, Any], str, str]] = {
    "no-duplicate-check": (
        off("detects_duplicates"), "a retried batch is appended again",
        "UnifiedLog.analyzeAndValidateProducerState: a duplicate of the last 5 batches is answered, not appended"),
    "duplicate-check-last-batch-only": (
        {"duplicate_window": 1}, "only the last batch is searched for duplicates",
        "ProducerStateEntry.findDuplicateBatch searches all NUM_BATCHES_TO_RETAIN (5) batches"),
    "no-epoch-fencing": (
        off("fences_stale_epochs"),
        "a stale producer epoch is accepted by the partition leader and by transaction verification "
        "(AddPartitionsToTxn)",
        "ProducerAppendInfo.checkProducerEpoch and TransactionCoordinator.handleAddPartitionsToTransaction: "
        "INVALID_PRODUCER_EPOCH / PRODUCER_FENCED for an older epoch"),
    "lso-is-high-watermark": (
        {"last_stable_offset": lso_is_high_watermark}, "read_committed reads up to the high watermark",
        "UnifiedLog.lastStableOffset: the first unstable offset bounds read_committed"),
    "no-aborted-filter": (
        off("skips_aborted_batches"), "the consumer returns records of aborted transactions at read_committed",
        "CompletedFetch: batches of aborted transactions are skipped at READ_COMMITTED"),
    "offsets-visible-before-marker": (
        off("txn_offsets_wait_for_marker"), "TxnOffsetCommit offsets are committed at once",
        "GroupMetadata: transactional offsets stay pending until the commit marker"),
    "abort-keeps-offsets": (
        off("abort_drops_txn_offsets"), "an ABORT marker commits the pending transactional offsets",
        "GroupMetadata.completePendingTxnOffsetCommit: an abort drops them"),
    "timeout-commits": (
        {"timed_out_result": ControlType.COMMIT}, "a timed-out transaction is committed instead of aborted",
        "TransactionCoordinator.abortTimedOutTransactions: PrepareAbort"),
    "markers-skip-a-partition": (
        {"marker_partitions": markers_skip_last_partition},
        "the markers of a transaction are not sent to its last partition",
        "TransactionMarkerChannelManager: a marker to every partition of the transaction"),
    # only several batches in flight per partition reveal these two (the scenarios in-flight-2 and in-flight-5)
    "out-of-order-never-retried": (
        off("retries_out_of_order_behind_earlier"), "an OUT_OF_ORDER_SEQUENCE_NUMBER always fails the batch",
        "TransactionManager.canRetry: a batch that is not the next one (an earlier batch is still in flight) is "
        "retried after OUT_OF_ORDER_SEQUENCE_NUMBER"),
    "duplicate-window-of-four": (
        {"duplicate_window": NUM_BATCHES_TO_RETAIN - 1},
        "the producer state keeps the last 4 batches for duplicate detection",
        "ProducerStateEntry.NUM_BATCHES_TO_RETAIN: 5 batches, one per request a client may have in flight"),
    "init-does-not-fence-ongoing": (
        off("init_fences_ongoing"), "InitProducerId leaves an ongoing transaction open",
        "TransactionCoordinator.handleInitProducerId: an Ongoing transaction is aborted (PrepareEpochFence)"),
    # revealed only by the faults of issue 20 (a failed transaction-log append, a lost request or answer)
    "acts-on-failed-log-append": (
        off("waits_for_log_append"), "the coordinator moves to the state whose log append failed",
        "TransactionStateManager.appendTransactionToLog: the cached metadata changes only after a successful "
        "append; a failed one resets the pending state"),
    "end-txn-response-stale-epoch": (
        off("end_txn_answers_bumped_epoch"), "a TV2 EndTxn response carries the epoch before the bump",
        "TransactionCoordinator.handleEndTransaction (endTxnV2): the response carries the bumped producer epoch "
        "the client must use next (KIP-890)"),
    "marker-coordinator-epoch-ahead": (
        off("markers_carry_own_coordinator_epoch"), "the markers carry a coordinator epoch one above the coordinator's",
        "TransactionMarkerChannelManager.addTxnMarkersToSend: a WritableTxnMarker carries the coordinator epoch of "
        "the coordinator that sends it"),
    "stale-sequence-kept": (
        off("new_epoch_clears_batches"), "a producer's last batches are kept when its epoch changes",
        "ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch clears the batch metadata"),
    "lost-request-not-retried": (
        off("reenqueues_lost_requests"), "a transactional request lost with its answer is never sent again",
        "Sender / TransactionManager: a request whose connection failed or timed out is re-enqueued "
        "(TxnRequestHandler.reenqueue)"),
}

MUTANTS: dict[str, Mutant] = {name: Mutant(name, what, rule, KAFKA.but(**overrides))
                            for name, (overrides, what, rule) in MISTAKES.items()}


def rules_of(name: str) -> Rules:
    """The rules of mutant ``name``; ``ValueError`` naming the known ones."""
    if name not in MUTANTS:
        raise ValueError(f"unknown implementation mutant {name!r}; known: {', '.join(MUTANTS)}")
    return MUTANTS[name].rules


__all__ = ["MUTANTS", "Mutant", "rules_of"]
