"""Pulsar's participants: a topic partition's transaction buffer (what a consumer may read), a
subscription's pending acks, and the broker's message deduplication, as pure functions.

Follows (apache/pulsar 3.x/4.x)
    * ``TopicTransactionBuffer`` (its methods named here were read in apache/pulsar through the code
      index): ``appendBufferToTxn`` refuses a transaction at or below the partition's low watermark
      (PIP-163) and otherwise appends **without asking the TC whether the transaction is still open**;
      ``handleTransactionMessage`` adds a transaction that is neither ongoing nor aborted to
      ``ongoingTxns``; ``commitTxn`` appends a commit marker without checking anything; ``abortTxn``
      appends an abort marker and puts the transaction in the aborted set (no marker, and no watermark
      handling, in ``NoSnapshot``: a partition that never had transactional data); ``handleLowWaterMark``
      raises the watermark and aborts the oldest ongoing transaction of the TC if it is at or below it;
      ``maxReadPosition`` is the position before the first entry of the oldest ongoing transaction, else
      the last entry.
    * ``AbstractBaseDispatcher.filterEntriesForConsumer``: below ``maxReadPosition``, markers and entries
      of aborted transactions (``isTxnAborted``, which ignores the position) are dropped, every other
      entry is delivered (:func:`readable`).
    * ``PendingAckHandleImpl.internalIndividualAcknowledgeMessage``: an ack of a position already deleted
      or pending in any transaction is a ``TransactionConflict``; commit applies it to the cursor, abort
      makes the position deliverable again (:func:`ack`, :func:`end_on_subscription`).
    * ``MessageDeduplication.isDuplicateNormal`` (when enabled): a sequence id at or below the producer's
      highest persisted one is a duplicate, answered without writing (:func:`append`).

Assumes
    One producer per transaction with its own producer name; sequence ids per send as the Java client
    gives them; deduplication's pushed and persisted maps agree (no ``Unknown`` answer).

Leaves out
    Batch and cumulative acks, snapshots and buffer recovery (the buffer does not crash here), the
    ``EARLIEST`` answer during recovery, compaction and offload.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

Entry = tuple[str, int, int]  # ("data", txn, client message number) or ("commit"|"abort", txn, -1)


@dataclass(frozen=True, slots=True)
class TransactionBuffer:
    entries: tuple[Entry, ...] = ()
    ongoing: tuple[tuple[int, int], ...] = ()  # (txn, first position), in insertion order
    aborted: frozenset[int] = frozenset()
    low_watermark: int = -1
    had_transactions: bool = False              # not NoSnapshot
    dedup_highest: tuple[tuple[int, int], ...] = ()  # producer (= txn's client) -> highest persisted sequence id

    @property
    def max_read_position(self) -> int:
        """``maxReadPosition``: the last readable position (-1 when nothing is)."""
        if self.ongoing:
            return self.ongoing[0][1] - 1
        return len(self.entries) - 1


@dataclass(frozen=True, slots=True)
class AppendResult:
    buffer: TransactionBuffer
    error: str | None = None
    duplicate: bool = False


def append(tb: TransactionBuffer, txn: int, message: int, *, producer: int, sequence_id: int,
           dedup: bool) -> AppendResult:
    """``publishTxnMessage``: deduplication first (when enabled), then ``appendBufferToTxn``."""
    highest = dict(tb.dedup_highest)
    if dedup and sequence_id <= highest.get(producer, -1):
        return AppendResult(tb, duplicate=True)
    if tb.low_watermark >= txn:
        return AppendResult(tb, error="NotAllowed: transaction has been ended")
    position = len(tb.entries)
    ongoing = tb.ongoing
    if txn not in dict(ongoing) and txn not in tb.aborted:
        ongoing = (*ongoing, (txn, position))
    if dedup:
        highest[producer] = max(sequence_id, highest.get(producer, -1))
    return AppendResult(replace(tb, entries=(*tb.entries, ("data", txn, message)), ongoing=ongoing,
                                had_transactions=True, dedup_highest=tuple(sorted(highest.items()))))


def _without_ongoing(tb: TransactionBuffer, txn: int) -> tuple[tuple[int, int], ...]:
    return tuple((t, pos) for t, pos in tb.ongoing if t != txn)


def _abort(tb: TransactionBuffer, txn: int) -> TransactionBuffer:
    if not tb.had_transactions:  # NoSnapshot: nothing to mark
        return tb
    return replace(tb, entries=(*tb.entries, ("abort", txn, -1)), aborted=tb.aborted | {txn},
                   ongoing=_without_ongoing(tb, txn))


def _handle_low_watermark(tb: TransactionBuffer, low_watermark: int) -> TransactionBuffer:
    tb = replace(tb, low_watermark=max(tb.low_watermark, low_watermark))
    if tb.ongoing and tb.ongoing[0][0] <= tb.low_watermark:  # only the oldest, once per call
        tb = _abort(tb, tb.ongoing[0][0])
    return tb


def end_on_partition(tb: TransactionBuffer, txn: int, action: str, low_watermark: int) -> TransactionBuffer:
    """``handleEndTxnOnPartition`` → ``commitTxn`` / ``abortTxn``, then the low-watermark handling."""
    if action == "COMMIT":
        tb = replace(tb, entries=(*tb.entries, ("commit", txn, -1)), ongoing=_without_ongoing(tb, txn))
    elif not tb.had_transactions:  # abortTxn when not Ready: complete at once, no marker, no watermark
        return tb
    else:
        tb = _abort(tb, txn)
    return _handle_low_watermark(tb, low_watermark)


def readable(tb: TransactionBuffer) -> tuple[tuple[int, int, int], ...]:
    """What a consumer is delivered: (position, txn, message) of data entries up to ``maxReadPosition``
    whose transaction is not in the aborted set."""
    return tuple((pos, txn, msg) for pos, (kind, txn, msg) in enumerate(tb.entries[:tb.max_read_position + 1])
                 if kind == "data" and txn not in tb.aborted)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscription's cursor on the input position 0 and its pending ack."""

    deleted: bool = False          # acked for good (normally or by a committed transaction)
    pending: int | None = None     # the transaction holding a pending ack of it
    acked_by: int | None = None    # ghost: the transaction whose commit deleted it


def ack(sub: Subscription, txn: int) -> tuple[Subscription, str | None]:
    if sub.deleted:
        return sub, "TransactionConflict: already acked before"
    if sub.pending is not None:
        return sub, "TransactionConflict: in pending ack status"
    return replace(sub, pending=txn), None


def end_on_subscription(sub: Subscription, txn: int, action: str) -> Subscription:
    """``handleEndTxnOnSubscription`` → ``PendingAckHandle.commitTxn`` / ``abortTxn``."""
    if sub.pending != txn:
        return sub  # no pending state for this transaction: success
    if action == "COMMIT":
        return Subscription(deleted=True, pending=None, acked_by=txn)
    return replace(sub, pending=None)  # redelivered
