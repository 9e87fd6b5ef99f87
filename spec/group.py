"""The group coordinator's offsets: plain commits, and transactional commits held until their marker.

System
    Committed offsets per (group, partition); transactional offset commits (``TxnOffsetCommit``) kept
    pending per producer id until the transaction marker on the group's ``__consumer_offsets``
    partition arrives: COMMIT makes them the committed offsets, ABORT drops them (KIP-98, KIP-447).

Kafka sources followed
    ``group-coordinator/.../OffsetMetadataManager`` (``commitTransactionalOffset``,
    ``replayEndTransactionMarker``, ``fetchOffsets`` with ``requireStable``); the older
    ``GroupMetadata.prepareTxnOffsetCommit`` / ``completePendingTxnOffsetCommit``.

Assumptions
    Group membership and generations are not checked (a transactional producer commits for a group it
    is not a member of, as ``sendOffsetsToTransaction`` with group metadata would be accepted). The
    producer epoch of a ``TxnOffsetCommit`` is validated by the offsets partition's producer state in
    Kafka; here a commit with an epoch older than the pending one for the same producer is fenced.

Not modelled
    Offset retention and expiry, consumer-group rebalances, the log of ``__consumer_offsets`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from txnspec.spec.errors import Errors
from txnspec.spec.messages import ErrorResponse, TxnOffsetCommit


@dataclass(frozen=True, slots=True)
class PendingOffsets:
    producer_id: int
    producer_epoch: int
    group_id: str
    offsets: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class GroupState:
    committed: tuple[tuple[tuple[str, str], int], ...] = ()  # ((group, partition), offset), sorted
    pending: tuple[PendingOffsets, ...] = ()

    def committed_offset(self, group_id: str, partition: str) -> int | None:
        for (group, p), offset in self.committed:
            if group == group_id and p == partition:
                return offset
        return None


def _commit(committed: tuple[tuple[tuple[str, str], int], ...], group_id: str,
            offsets: tuple[tuple[str, int], ...]) -> tuple[tuple[tuple[str, str], int], ...]:
    merged = dict(committed)
    for partition, offset in offsets:
        merged[(group_id, partition)] = offset
    return tuple(sorted(merged.items()))


def handle_offset_commit(state: GroupState, group_id: str, offsets: tuple[tuple[str, int], ...]
                         ) -> tuple[GroupState, ErrorResponse]:
    """A plain (non-transactional) ``OffsetCommit``: visible at once."""
    return replace(state, committed=_commit(state.committed, group_id, offsets)), ErrorResponse(Errors.NONE)


def handle_txn_offset_commit(state: GroupState, request: TxnOffsetCommit) -> tuple[GroupState, ErrorResponse]:
    """``TxnOffsetCommit``: held pending for the producer until its transaction's marker."""
    if not request.group_id or not request.transactional_id:
        return state, ErrorResponse(Errors.INVALID_REQUEST)
    mine = [p for p in state.pending if p.producer_id == request.producer_id]
    if any(p.producer_epoch > request.producer_epoch for p in mine):
        return state, ErrorResponse(Errors.INVALID_PRODUCER_EPOCH)
    merged = dict(o for p in mine if p.group_id == request.group_id and p.producer_epoch == request.producer_epoch
                  for o in p.offsets)
    merged.update(request.offsets)
    kept = tuple(p for p in state.pending if p.producer_id != request.producer_id)
    entry = PendingOffsets(request.producer_id, request.producer_epoch, request.group_id, tuple(sorted(merged.items())))
    return replace(state, pending=(*kept, entry)), ErrorResponse(Errors.NONE)


def complete_pending_txn_offset_commit(state: GroupState, producer_id: int, commit: bool) -> GroupState:
    """The marker on the offsets partition: COMMIT makes the producer's pending offsets committed, ABORT
    drops them (``replayEndTransactionMarker``)."""
    committed = state.committed
    for p in state.pending:
        if p.producer_id == producer_id and commit:
            committed = _commit(committed, p.group_id, p.offsets)
    return replace(state, committed=committed, pending=tuple(p for p in state.pending if p.producer_id != producer_id))


def has_pending_txn_offsets(state: GroupState, producer_id: int, producer_epoch: int) -> bool:
    """Whether the producer has a transaction open on the offsets partition with this epoch."""
    return any(p.producer_id == producer_id and p.producer_epoch == producer_epoch for p in state.pending)


def fetch_offsets(state: GroupState, group_id: str, partition: str, require_stable: bool
                  ) -> tuple[Errors, int | None]:
    """``OffsetFetch``: with ``requireStable`` (KIP-447) a partition with pending transactional offsets
    answers ``UNSTABLE_OFFSET_COMMIT`` so the consumer waits instead of reading an offset about to change."""
    if require_stable and any(p.group_id == group_id and any(q == partition for q, _ in p.offsets)
                              for p in state.pending):
        return Errors.UNSTABLE_OFFSET_COMMIT, None
    return Errors.NONE, state.committed_offset(group_id, partition)
