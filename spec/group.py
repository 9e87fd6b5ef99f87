"""The group coordinator's offsets and the member checks of offset commits (KIP-98, KIP-447).

System
    Committed offsets per (group, partition), each with the offset of its record in the group's
    ``__consumer_offsets`` partition; transactional offset commits (``TxnOffsetCommit``) kept pending per
    producer, then per group, until the transaction marker on that partition arrives: ABORT drops them all,
    COMMIT makes each the committed offset unless the committed one's record is newer (a plain commit
    written after the transactional one wins). Classic groups: a generation and its members; a
    ``TxnOffsetCommit`` that names a member is refused unless the member is in the group and its generation
    is current, which fences a zombie from before a rebalance (KIP-447).

Kafka sources followed
    ``group-coordinator/.../OffsetMetadataManager`` (``commitTransactionalOffset``,
    ``validateTransactionalOffsetCommit``, ``replay``, ``replayEndTransactionMarker`` and its test
    ``testReplayTransactionEndMarkerKeepsTheMostRecentCommittedOffset``, ``fetchOffsets`` with
    ``requireStable``; pending offsets in ``Offsets.offsetsByGroup``), ``classic/ClassicGroup``
    (``validateOffsetCommit``, ``validateMember``).

Assumptions
    A group is Empty (no members) or Stable; a rebalance is atomic (:func:`complete_rebalance`): JoinGroup,
    SyncGroup and the states between them are :mod:`txnspec.impl.membership`'s. The producer epoch of a
    ``TxnOffsetCommit`` is validated by the offsets partition's producer state, as in Kafka: the caller
    appends the commit's records there first (origin COORDINATOR) and a stale epoch never reaches here.

    Consumer groups (KIP-848) are :mod:`txnspec.spec.consumer_group`'s; their member checks are called by the
    broker (``spec/brokers.py``) for a group of that protocol.

Not modelled
    Offset retention and expiry, offset deletion tombstones, a DEAD group.
"""

from __future__ import annotations

from types import MappingProxyType

from txnspec.spec.consumer_group import ConsumerGroup
from txnspec.spec.errors import Errors
from txnspec.spec.messages import ErrorResponse, TxnOffsetCommit
from txnspec.spec.values import replace, value
from txnspec.spec.verification import add_partitions_manager_error

Offsets = tuple[tuple[str, "OffsetRecord"], ...]  # (partition, offset record), sorted by partition


@value(order=True)
class OffsetRecord:
    """An offset as its commit record holds it: the offset and where the record is in ``__consumer_offsets``
    (``OffsetAndMetadata.recordOffset``)."""

    offset: int
    record_offset: int


@value
class PendingOffsets:
    """One producer's pending transactional offsets for one group: keyed by the producer id alone, whatever
    epoch wrote them (``pendingTransactionalOffsets``: the epoch is the offsets partition's to check)."""

    producer_id: int
    group_id: str
    offsets: Offsets


@value
class ClassicGroup:
    """A classic group's generation and members: ``(member id, group instance id or None)``, sorted; no
    members: the group is Empty."""

    group_id: str
    generation_id: int = 0
    members: tuple[tuple[str, str | None], ...] = ()


@value
class GroupState:
    committed: tuple[tuple[tuple[str, str], OffsetRecord], ...] = ()  # ((group, partition), record), sorted
    pending: tuple[PendingOffsets, ...] = ()  # one per (producer id, group), sorted
    groups: tuple[ClassicGroup, ...] = ()  # the classic groups that exist, sorted by id
    consumer_groups: tuple[ConsumerGroup, ...] = ()  # KIP-848's groups (spec/consumer_group.py), sorted by id

    def committed_offset(self, group_id: str, partition: str) -> int | None:
        for (group, p), record in self.committed:
            if group == group_id and p == partition:
                return record.offset
        return None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        for g in self.consumer_groups:
            if g.group_id == group_id:
                return g
        return None

    def with_consumer_group(self, group: ConsumerGroup) -> GroupState:
        kept = [g for g in self.consumer_groups if g.group_id != group.group_id]
        return replace(self, consumer_groups=tuple(sorted((*kept, group), key=lambda g: g.group_id)))

    def group(self, group_id: str) -> ClassicGroup | None:
        for g in self.groups:
            if g.group_id == group_id:
                return g
        return None


# CoordinatorOperationExceptionHelper.handleOperationException: how GroupCoordinatorService answers a
# TxnOffsetCommit whose operation failed, its transaction verification included; any other error as it is
OPERATION_ERRORS = MappingProxyType({
    Errors.NETWORK_EXCEPTION: Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
})


def txn_offset_commit_verification_error(coordinator_error: Errors, generic_error_supported: bool) -> Errors:
    """The error a ``TxnOffsetCommit`` gets when the transaction coordinator answers the verification (TV2: the
    add) of the group's offsets partition with ``coordinator_error``: ``CoordinatorPartitionWriter
    .maybeStartTransactionVerification`` fails with ``AddPartitionsToTxnManager``'s answer as it is (no
    broker-side retry, no Produce mapping: CONCURRENT_TRANSACTIONS reaches the client, which retries), then
    ``GroupCoordinatorService.commitTransactionalOffsets`` maps it with ``handleOperationException``."""
    error = add_partitions_manager_error(coordinator_error, generic_error_supported)
    return OPERATION_ERRORS.get(error, error)


def _with_group(state: GroupState, group: ClassicGroup) -> GroupState:
    kept = [g for g in state.groups if g.group_id != group.group_id]
    return replace(state, groups=tuple(sorted((*kept, group), key=lambda g: g.group_id)))


def _records(offsets: tuple[tuple[str, int], ...], first_record_offset: int) -> Offsets:
    """One record per partition, written in partition order from ``first_record_offset`` on."""
    return tuple((p, OffsetRecord(o, first_record_offset + i)) for i, (p, o) in enumerate(sorted(offsets)))


def validate_offset_commit(state: GroupState, group_id: str, member_id: str, group_instance_id: str | None,
                           generation_id: int, transactional: bool) -> Errors:
    """May this offset commit be written? ``ClassicGroup.validateOffsetCommit`` after
    ``validateTransactionalOffsetCommit`` / ``validateOffsetCommit`` looked the group up (an unknown group
    accepts only a commit from outside group management: generation -1)."""
    group = state.group(group_id)
    if group is None:
        return Errors.NONE if generation_id < 0 else Errors.ILLEGAL_GENERATION
    empty = not group.members
    if generation_id < 0 and empty:
        return Errors.NONE
    if generation_id >= 0 or member_id or group_instance_id is not None:
        if group_instance_id is not None:  # ClassicGroup.validateMember: a static member first by instance id
            owner = next((m for m, i in group.members if i == group_instance_id), None)
            if owner is None:
                return Errors.UNKNOWN_MEMBER_ID
            if owner != member_id:
                return Errors.FENCED_INSTANCE_ID
        if all(m != member_id for m, _ in group.members):
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
    elif not transactional and not empty:
        return Errors.UNKNOWN_MEMBER_ID
    return Errors.NONE


def _ensure_group(state: GroupState, group_id: str) -> GroupState:
    """``getOrMaybeCreateClassicGroup(groupId, true)``: a commit to an unknown group creates it, Empty (a
    consumer group of that id is the group: nothing is created)."""
    if state.group(group_id) is not None or state.consumer_group(group_id) is not None:
        return state
    return _with_group(state, ClassicGroup(group_id))


def handle_offset_commit(state: GroupState, group_id: str, offsets: tuple[tuple[str, int], ...], *,
                         record_offset: int = 0) -> tuple[GroupState, ErrorResponse]:
    """A plain ``OffsetCommit``'s records, written from ``record_offset`` on: visible at once. The caller has
    checked the member first with :func:`validate_offset_commit`."""
    merged = dict(state.committed)
    for partition, record in _records(offsets, record_offset):
        merged[(group_id, partition)] = record
    state = _ensure_group(state, group_id)
    return replace(state, committed=tuple(sorted(merged.items()))), ErrorResponse(Errors.NONE)


def handle_txn_offset_commit(state: GroupState, request: TxnOffsetCommit, *, record_offset: int = 0
                             ) -> tuple[GroupState, ErrorResponse]:
    """``TxnOffsetCommit``'s records, written from ``record_offset`` on: held pending for the producer and group
    until its transaction's marker. The caller has checked the member first with :func:`validate_offset_commit`
    (``commitTransactionalOffset`` validates before it writes)."""
    if not request.group_id or not request.transactional_id:
        return state, ErrorResponse(Errors.INVALID_REQUEST)
    # OffsetMetadataManager.replay: merged into the producer's pending offsets whatever their epoch
    merged = dict(o for p in state.pending if p.producer_id == request.producer_id and p.group_id == request.group_id
                  for o in p.offsets)
    merged.update(_records(request.offsets, record_offset))
    kept = tuple(p for p in state.pending
                 if not (p.producer_id == request.producer_id and p.group_id == request.group_id))
    entry = PendingOffsets(request.producer_id, request.group_id, tuple(sorted(merged.items())))
    pending = tuple(sorted((*kept, entry), key=lambda p: (p.producer_id, p.group_id)))
    return replace(_ensure_group(state, request.group_id), pending=pending), ErrorResponse(Errors.NONE)


def complete_pending_txn_offset_commit(state: GroupState, producer_id: int, commit: bool) -> GroupState:
    """The marker on the offsets partition settles every group's pending offsets of the producer
    (``replayEndTransactionMarker``): ABORT drops them; COMMIT materialises each one whose record is newer
    than the committed offset's record ("we always keep the most recent committed offset")."""
    merged = dict(state.committed)
    for p in state.pending:
        if p.producer_id != producer_id or not commit:
            continue
        for partition, record in p.offsets:
            existing = merged.get((p.group_id, partition))
            if existing is None or record.record_offset > existing.record_offset:
                merged[(p.group_id, partition)] = record
    return replace(state, committed=tuple(sorted(merged.items())),
                   pending=tuple(p for p in state.pending if p.producer_id != producer_id))


def complete_rebalance(state: GroupState, group_id: str, members: tuple[tuple[str, str | None], ...]) -> GroupState:
    """A rebalance of ``group_id`` completed with ``members`` (``initNextGeneration``): the generation moves
    on; a member left out is gone, so its commits are refused from now on."""
    group = state.group(group_id) or ClassicGroup(group_id)
    return _with_group(state, ClassicGroup(group_id, group.generation_id + 1, tuple(sorted(members))))


def fetch_offsets(state: GroupState, group_id: str, partition: str, require_stable: bool
                  ) -> tuple[Errors, int | None]:
    """``OffsetFetch``: with ``requireStable`` (KIP-447) a partition with pending transactional offsets
    answers ``UNSTABLE_OFFSET_COMMIT`` so the consumer waits instead of reading an offset about to change."""
    if require_stable and any(p.group_id == group_id and any(q == partition for q, _ in p.offsets)
                              for p in state.pending):
        return Errors.UNSTABLE_OFFSET_COMMIT, None
    return Errors.NONE, state.committed_offset(group_id, partition)
