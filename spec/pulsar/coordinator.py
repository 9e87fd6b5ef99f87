"""Pulsar's transaction coordinator (TC): transaction ids, statuses and their valid transitions, and the
end-transaction path, as pure functions over a frozen :class:`Coordinator`.

Follows (apache/pulsar 3.x/4.x)
    * ``TxnStatus`` and ``TransactionUtil.canTransitionTo``: :data:`VALID_TRANSITIONS`, the table as data.
    * ``MLTransactionMetadataStore.newTransaction``: a NEW entry, the TxnID's least bits from
      ``MLTransactionSequenceIdGenerator`` (monotonic across restarts) (:func:`new_transaction`).
    * ``addProducedPartitions`` / ``addAckedPartitions``: only while OPEN (:func:`add_partition`).
    * ``TransactionMetadataStoreService.endTransaction`` (:func:`end_transaction`): OPEN moves to
      COMMITTING/ABORTING and the markers go to every participant with the low watermark
      ``txnMetaMap.firstKey() - 1``; COMMITTING + COMMIT (or ABORTING + ABORT) waits for the same end;
      any other status answers ``InvalidTxnStatus``; an unknown transaction ``TransactionNotFound``.
    * ``endTxnInTransactionMetadataStore`` (:func:`participant_done`): when every participant answered,
      COMMITTED/ABORTED is logged and **the transaction is removed from the map and its log**: its
      outcome is forgotten (#19629).
    * ``TransactionTimeoutTrackerImpl`` → ``endTransactionForTimeout``: an OPEN transaction is aborted.
    * Recovery (``replayAsync`` + ``handleCommittingAndAbortingTransaction``): the map is rebuilt from the
      log, and transactions left COMMITTING/ABORTING are ended again (:func:`recover`).

Assumes
    The TC's log append never fails (``ManagedLedgerFencedException`` and TC unload are left out); an
    END that finds the transaction COMMITTING/ABORTING joins the end in progress instead of re-sending
    the markers (the re-sent markers are idempotent for visibility). Ownership checks pass (one client
    principal).

Leaves out
    Several TCs, batched log writes, ``maxActiveTransactionsPerCoordinator``, the store's Initializing
    state (a crash and its recovery are one step).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class TxnStatus(enum.Enum):
    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"

    def __str__(self) -> str:
        return self.value


class TxnAction(enum.Enum):
    COMMIT = "COMMIT"
    ABORT = "ABORT"

    def __str__(self) -> str:
        return self.value


OPEN, COMMITTING, COMMITTED, ABORTING, ABORTED = TxnStatus

# TransactionUtil.canTransitionTo: current -> the statuses it may move to (staying is always allowed)
VALID_TRANSITIONS: dict[TxnStatus, frozenset[TxnStatus]] = {
    OPEN: frozenset({OPEN, COMMITTING, ABORTING}),
    COMMITTING: frozenset({COMMITTING, COMMITTED}),
    COMMITTED: frozenset({COMMITTED}),
    ABORTING: frozenset({ABORTING, ABORTED}),
    ABORTED: frozenset({ABORTED}),
}

ENDING = {TxnAction.COMMIT: COMMITTING, TxnAction.ABORT: ABORTING}

SUBSCRIPTION = "sub"  # the one acked subscription's participant name


@dataclass(frozen=True, slots=True)
class TxnMeta:
    """``TxnMetaImpl``: status, produced partitions and acked subscriptions; ``waiting`` participants have
    not answered the end yet; ``waiters`` END requests are answered when they all have."""

    status: TxnStatus = OPEN
    partitions: frozenset[str] = frozenset()
    waiting: frozenset[str] = frozenset()
    waiters: int = 0


@dataclass(frozen=True, slots=True)
class Coordinator:
    txns: tuple[tuple[int, TxnMeta], ...] = ()  # txnMetaMap, by sequence id
    next_seq: int = 0

    def meta(self, seq: int) -> TxnMeta | None:
        return dict(self.txns).get(seq)

    def with_meta(self, seq: int, meta: TxnMeta | None) -> Coordinator:
        txns = dict(self.txns)
        if meta is None:
            txns.pop(seq, None)
        else:
            txns[seq] = meta
        return replace(self, txns=tuple(sorted(txns.items())))

    def low_watermark(self) -> int:
        """``getLowWaterMark``: the smallest unfinished sequence id - 1."""
        return self.txns[0][0] - 1 if self.txns else self.next_seq - 1


@dataclass(frozen=True, slots=True)
class EndMarker:
    """``END_TXN_ON_PARTITION`` / ``END_TXN_ON_SUBSCRIPTION`` sent by the TC's TransactionBufferClient."""

    txn: int
    participant: str
    action: str
    low_watermark: int


def new_transaction(tc: Coordinator) -> tuple[Coordinator, int]:
    seq = tc.next_seq
    return replace(tc.with_meta(seq, TxnMeta()), next_seq=seq + 1), seq


def add_partition(tc: Coordinator, seq: int, participant: str) -> tuple[Coordinator, str | None]:
    """``ADD_PARTITION_TO_TXN`` / ``ADD_SUBSCRIPTION_TO_TXN``: the error name, or None."""
    meta = tc.meta(seq)
    if meta is None:
        return tc, "TransactionNotFound"
    if meta.status is not OPEN:
        return tc, "InvalidTxnStatus"
    return tc.with_meta(seq, replace(meta, partitions=meta.partitions | {participant})), None


@dataclass(frozen=True, slots=True)
class EndResult:
    tc: Coordinator
    markers: tuple[EndMarker, ...] = ()
    error: str | None = None       # answered at once with this error
    answered: int = 0              # END requests answered with success now (the end completed at once)


def end_transaction(tc: Coordinator, seq: int, action: TxnAction, *, waiter: bool = True) -> EndResult:
    """``endTransaction`` for an END_TXN from the client (``waiter``) or the TC's own timeout/recovery."""
    meta = tc.meta(seq)
    if meta is None:
        return EndResult(tc, error="TransactionNotFound")
    if meta.status is OPEN:
        ending = replace(meta, status=ENDING[action], waiting=meta.partitions, waiters=int(waiter))
        lwm = tc.low_watermark()
        markers = tuple(EndMarker(seq, p, action.value, lwm) for p in sorted(meta.partitions))
        return _complete_if_done(tc.with_meta(seq, ending), seq, markers)
    if meta.status is ENDING[action]:  # fakeAsyncCheckTxnStatus: the same end again
        return EndResult(tc.with_meta(seq, replace(meta, waiters=meta.waiters + int(waiter))))
    return EndResult(tc, error="InvalidTxnStatus")


def _complete_if_done(tc: Coordinator, seq: int, markers: tuple[EndMarker, ...] = ()) -> EndResult:
    meta = tc.meta(seq)
    assert meta is not None
    if meta.waiting:
        return EndResult(tc, markers)
    # COMMITTED/ABORTED: logged, then the meta and its log positions are deleted
    return EndResult(tc.with_meta(seq, None), markers, answered=meta.waiters)


def participant_done(tc: Coordinator, seq: int, participant: str) -> EndResult:
    """A participant answered its end marker; the transaction completes when all have."""
    meta = tc.meta(seq)
    if meta is None or participant not in meta.waiting:
        return EndResult(tc)
    return _complete_if_done(tc.with_meta(seq, replace(meta, waiting=meta.waiting - {participant})), seq)


def recover(tc: Coordinator) -> tuple[Coordinator, tuple[EndMarker, ...], int]:
    """A TC crash and its recovery from the log: pending END requests are lost (returned as a count, so
    the clients can be told to retry), and COMMITTING/ABORTING transactions are ended again."""
    lost = sum(meta.waiters for _, meta in tc.txns)
    lwm = tc.low_watermark()
    markers: list[EndMarker] = []
    txns = []
    for seq, meta in tc.txns:
        if meta.status is OPEN:
            txns.append((seq, replace(meta, waiting=frozenset(), waiters=0)))
            continue
        action = TxnAction.COMMIT if meta.status is COMMITTING else TxnAction.ABORT
        if not meta.partitions:  # nothing to wait for: the end completes during recovery
            continue
        txns.append((seq, replace(meta, waiting=meta.partitions, waiters=0)))
        markers.extend(EndMarker(seq, p, action.value, lwm) for p in sorted(meta.partitions))
    return replace(tc, txns=tuple(txns)), tuple(markers), lost
