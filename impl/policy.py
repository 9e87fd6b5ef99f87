"""The implementation's replaceable rules: one frozen value each component is built with.

System: a :class:`Rules` names the few behaviours of the broker and the producer that a plausible
implementation could get wrong, each as one field: a switch where Kafka's code has one check, a number or
a function where it computes something. :data:`KAFKA` is Kafka's behaviour and every component's
default; :class:`~txnspec.impl.cluster.Cluster` and :class:`~txnspec.impl.broker.Broker` hand their value
to the partitions, the coordinators, the consumers and the producers they make. Like the spec's
``Protocol`` (``spec/protocol.py``), a different implementation is ``KAFKA.but(...)`` with fields replaced;
the seeded bugs of the conformance suite's mutation score are such overrides (:mod:`txnspec.impl.mutants`),
and nothing in the components asks which one is running.

Kafka sources: each field names the class and method whose rule it is.

Assumptions: a function field is pure and module-level (so a value can be pickled to a worker process).
Not modelled: rules no mutant replaces stay plain code in their component.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from txnspec.impl.log import ControlType

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN


def last_stable_offset(first_unstable_offset: int | None, high_watermark: int) -> int:
    """``UnifiedLog.lastStableOffset``: the first unstable offset bounds read_committed, else the high watermark."""
    fuo = first_unstable_offset
    return fuo if fuo is not None and fuo < high_watermark else high_watermark


def marker_partitions(partitions: Iterable[str]) -> list[str]:
    """``TransactionMarkerChannelManager.addTxnMarkersToSend``: a marker to every partition of the transaction."""
    return sorted(partitions)


@dataclass(frozen=True)
class Rules:
    # partition leader (UnifiedLog, ProducerStateEntry, ProducerAppendInfo)
    detects_duplicates: bool = True  # UnifiedLog.analyzeAndValidateProducerState: a duplicate is answered
    duplicate_window: int = NUM_BATCHES_TO_RETAIN  # ProducerStateEntry.findDuplicateBatch: batches searched
    new_epoch_clears_batches: bool = True  # ProducerStateEntry.maybeUpdateProducerEpoch
    # ProducerAppendInfo.checkProducerEpoch, TransactionCoordinator.handleAddPartitionsToTransaction
    fences_stale_epochs: bool = True
    last_stable_offset: Callable[[int | None, int], int] = last_stable_offset
    # consumer (CompletedFetch): batches of aborted transactions are skipped at READ_COMMITTED
    skips_aborted_batches: bool = True
    # group coordinator (GroupMetadata)
    txn_offsets_wait_for_marker: bool = True  # pendingTransactionalOffsetCommits until the marker
    abort_drops_txn_offsets: bool = True  # completePendingTxnOffsetCommit(isCommit = false)
    # transaction coordinator
    timed_out_result: ControlType = ControlType.ABORT  # TransactionCoordinator.abortTimedOutTransactions
    marker_partitions: Callable[[Iterable[str]], list[str]] = marker_partitions
    init_fences_ongoing: bool = True  # handleInitProducerId: an Ongoing transaction -> PrepareEpochFence
    # TransactionMarkerChannelManager.addTxnMarkersToSend: a marker carries its sender's coordinator epoch
    markers_carry_own_coordinator_epoch: bool = True
    end_txn_answers_bumped_epoch: bool = True  # handleEndTransaction (endTxnV2): the bumped epoch (KIP-890)
    # TransactionStateManager.appendTransactionToLog: the cache changes only after a successful append
    waits_for_log_append: bool = True
    # producer (TransactionManager, Sender)
    retries_out_of_order_behind_earlier: bool = True  # TransactionManager.canRetry
    reenqueues_lost_requests: bool = True  # TxnRequestHandler.reenqueue after a disconnect

    def but(self, **overrides: Any) -> Rules:
        """These rules with some fields replaced."""
        return replace(self, **overrides)


KAFKA = Rules()

__all__ = ["KAFKA", "NUM_BATCHES_TO_RETAIN", "Rules", "last_stable_offset", "marker_partitions"]
