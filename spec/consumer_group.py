"""KIP-848's consumer groups (protocol ``consumer``): member epochs, the heartbeat's reconciliation, and the member
checks of (transactional) offset commits.

System
    A consumer group has a group epoch, a target assignment (partition -> member) computed at that epoch, and
    members, each with its member epoch and its current assignment: every partition with its *assignment epoch*
    (the member epoch at which the member received it, KIP-1251) and the partitions pending revocation. The
    coordinator bumps the group epoch when membership or the target changes (a member fenced by its session or
    rebalance timeout, a member joining or leaving, a new target); a member's epoch moves to the group epoch when
    its ``ConsumerGroupHeartbeat`` reconciles it (``CurrentAssignmentBuilder``): at once when it keeps or only
    gains partitions (a gained partition still owned by another member waits, UNRELEASED_PARTITIONS), only after
    it acknowledged the revocation of partitions it loses (UNREVOKED_PARTITIONS: its epoch stays until then).
    An offset commit names the member and its epoch (``TxnOffsetCommit.generation_id`` is the member epoch for
    a member of a consumer group); it is validated as ``ConsumerGroup.validateOffsetCommit`` does, with the
    errors ``OffsetMetadataManager`` answers per request version.

Kafka sources followed (4.4: ``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/``)
    ``modern/consumer/ConsumerGroup.validateOffsetCommit`` and ``createAssignmentEpochValidator``;
    ``OffsetMetadataManager.validateOffsetCommit`` / ``validateTransactionalOffsetCommit`` (a missing group, the
    StaleMemberEpochException of TxnOffsetCommit before v6 answered ILLEGAL_GENERATION:
    ``TxnOffsetCommitRequest.supportsStaleMemberEpochError`` / ``supportsGroupIdNotFoundError``) and
    ``commitOffset`` / ``commitTransactionalOffset`` (the per-partition validator); ``GroupMetadataManager
    .consumerGroupHeartbeat`` (``throwIfConsumerGroupMemberEpochIsInvalid``, member epoch 0 joins, -1 leaves,
    ``consumerGroupFenceMember`` on a session timeout); ``modern/consumer/CurrentAssignmentBuilder``
    (``build``, ``computeNextAssignment``: a kept partition keeps its assignment epoch, a new one gets the
    target epoch).

Assumptions
    One subscribed topic set, all input partitions; the target assignment is given (the model's steps name it:
    the uniform assignor's choice is not modelled) or, for a join, leave or fence, the partitions spread over
    the members in member-id order. A member's owned partitions in a heartbeat are what it last received.

Not modelled
    Static membership (``group.instance.id``) beyond the commit check's shortcut, regular-expression
    subscriptions, rack-aware assignment, classic members in a consumer group (``useClassicProtocol``: the
    classic-protocol errors ILLEGAL_GENERATION are answered for them), the migration between protocols, group
    size limits, offset retention.
"""

from __future__ import annotations

import enum

from txnspec.spec.errors import Errors
from txnspec.spec.values import replace, value

Epochs = tuple[tuple[str, int], ...]  # (partition, assignment epoch), sorted by partition

# the request versions that answer STALE_MEMBER_EPOCH / GROUP_ID_NOT_FOUND themselves (TxnOffsetCommitRequest
# .supportsStaleMemberEpochError, supportsGroupIdNotFoundError); older ones get ILLEGAL_GENERATION
TXN_OFFSET_COMMIT_STALE_MEMBER_EPOCH_VERSION = 6
# OffsetCommit: a member of the consumer protocol must send v9+ (ConsumerGroup.validateOffsetCommit); v9+ answers
# GROUP_ID_NOT_FOUND for a missing group (OffsetMetadataManager.validateOffsetCommit)
OFFSET_COMMIT_CONSUMER_VERSION = 9
# the versions the modelled clients (Kafka 4.4's TransactionManager) send: TxnOffsetCommitRequest.Builder caps a
# TV1 producer at LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 (4); a TV2 producer sends the latest (6)
TXN_OFFSET_COMMIT_VERSION = {1: 4, 2: 6}

LEAVE_GROUP_MEMBER_EPOCH = -1  # ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH
JOIN_GROUP_MEMBER_EPOCH = 0  # a member epoch of 0 asks to join


class MemberState(enum.Enum):
    """``modern/MemberState``: where a member's reconciliation stands."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@value(order=True)
class ConsumerMember:
    member_id: str
    member_epoch: int
    previous_member_epoch: int = -1
    assigned: Epochs = ()  # ConsumerGroupMember.assignedPartitions: partition -> assignment epoch
    revoking: Epochs = ()  # partitionsPendingRevocation: partition -> the epoch it was assigned at
    state: MemberState = MemberState.STABLE

    def assignment_epoch(self, partition: str) -> int | None:
        """``assignmentEpoch`` then ``pendingRevocationEpoch``: the epoch the member received ``partition`` at."""
        for p, epoch in (*self.assigned, *self.revoking):
            if p == partition:
                return epoch
        return None

    @property
    def owned(self) -> tuple[str, ...]:
        """The partitions the member owns: assigned or not yet revoked."""
        return tuple(sorted(p for p, _ in (*self.assigned, *self.revoking)))


@value
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    members: tuple[ConsumerMember, ...] = ()  # sorted by member id
    target: tuple[tuple[str, str], ...] = ()  # the target assignment at group_epoch: (partition, member id), sorted
    partitions: tuple[str, ...] = ()  # the subscribed input partitions

    def member(self, member_id: str) -> ConsumerMember | None:
        for m in self.members:
            if m.member_id == member_id:
                return m
        return None

    def target_of(self, member_id: str) -> tuple[str, ...]:
        return tuple(p for p, m in self.target if m == member_id)

    def owner(self, partition: str) -> str | None:
        """The member that owns ``partition`` now (assigned or pending revocation): ``currentPartitionEpoch``."""
        for m in self.members:
            if partition in m.owned:
                return m.member_id
        return None


@value
class HeartbeatResult:
    """``ConsumerGroupHeartbeatResponse``: the error, the member id and epoch, the assignment (None: unchanged is
    not modelled, the whole assignment is always given)."""

    error: Errors
    member_id: str = ""
    member_epoch: int = -1
    assignment: tuple[str, ...] = ()


def with_member(group: ConsumerGroup, member: ConsumerMember) -> ConsumerGroup:
    kept = [m for m in group.members if m.member_id != member.member_id]
    return replace(group, members=tuple(sorted((*kept, member), key=lambda m: m.member_id)))


def _without_member(group: ConsumerGroup, member_id: str) -> ConsumerGroup:
    return replace(group, members=tuple(m for m in group.members if m.member_id != member_id))


def spread(partitions: tuple[str, ...], member_ids: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """A target assignment: the partitions dealt over the members in member-id order (the model's assignor)."""
    members = sorted(member_ids)
    if not members:
        return ()
    return tuple(sorted((p, members[i % len(members)]) for i, p in enumerate(sorted(partitions))))


def new_target(group: ConsumerGroup, target: tuple[tuple[str, str], ...]) -> ConsumerGroup:
    """A new target assignment: the group epoch moves on (``consumerGroupHeartbeat`` bumps it when the
    subscription or the membership changed, and the target is computed at the new epoch)."""
    return replace(group, group_epoch=group.group_epoch + 1, target=tuple(sorted(target)))


def fence_member(group: ConsumerGroup, member_id: str) -> ConsumerGroup:
    """``consumerGroupFenceMember`` (session or rebalance timeout) and a leave: the member and its assignment are
    removed, the group epoch bumped and the target recomputed over the members left."""
    group = _without_member(group, member_id)
    return new_target(group, spread(group.partitions, tuple(m.member_id for m in group.members)))


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: tuple[str, ...] | None) -> ConsumerMember:
    """``CurrentAssignmentBuilder.build``: the member's next assignment towards the target at the group epoch;
    ``owned`` the partitions its heartbeat says it still owns (None: not sent, treated as owning everything)."""
    def still_owns(revoking: Epochs) -> bool:  # ownsRevokedPartitions
        return owned is None or any(p in owned for p, _ in revoking)

    if member.state is MemberState.UNREVOKED_PARTITIONS and still_owns(member.revoking):
        return member
    if member.state is MemberState.STABLE and member.member_epoch == group.group_epoch:
        return member
    # computeNextAssignment
    target = set(group.target_of(member.member_id))
    assigned = tuple((p, e) for p, e in member.assigned if p in target)
    revoking = tuple((p, e) for p, e in member.assigned if p not in target)
    kept = {p for p, _ in assigned}
    others = {p for m in group.members if m.member_id != member.member_id for p in m.owned}
    pending = sorted(target - kept)
    unreleased = any(p in others for p in pending)
    pending = [p for p in pending if p not in others]
    if revoking and still_owns(revoking):
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, revoking=revoking)
    gained = tuple((p, group.group_epoch) for p in pending)
    return replace(member, state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
                   previous_member_epoch=member.member_epoch, member_epoch=group.group_epoch,
                   assigned=tuple(sorted((*assigned, *gained))), revoking=())


def heartbeat(group: ConsumerGroup, member_id: str, member_epoch: int, owned: tuple[str, ...] | None = None,
              partitions: tuple[str, ...] | None = None) -> tuple[ConsumerGroup, HeartbeatResult]:
    """``GroupMetadataManager.consumerGroupHeartbeat`` for one member of ``group``: epoch 0 joins (the member id
    chosen by the client, KIP-1082), -1 leaves, any other epoch must be the member's (or its previous one with a
    subset of its partitions owned, a lost response: ``throwIfConsumerGroupMemberEpochIsInvalid``; 0 from a known
    member passes); a join (every member subscribes to the group's partitions) or a change of the subscribed
    ``partitions`` (None: unchanged) bumps the group epoch once and computes the target; the member is then
    reconciled towards it."""
    member = group.member(member_id)
    if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if member is None:
            return group, HeartbeatResult(Errors.UNKNOWN_MEMBER_ID, member_id)
        return fence_member(group, member_id), HeartbeatResult(Errors.NONE, member_id, LEAVE_GROUP_MEMBER_EPOCH)
    changed = False
    if member is None:
        if member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            return group, HeartbeatResult(Errors.UNKNOWN_MEMBER_ID, member_id)
        member = ConsumerMember(member_id, JOIN_GROUP_MEMBER_EPOCH)
        group, changed = with_member(group, member), True
    elif member_epoch != JOIN_GROUP_MEMBER_EPOCH:
        lost_response = member_epoch == member.previous_member_epoch \
            and owned is not None and set(owned) <= {p for p, _ in member.assigned}
        if member_epoch > member.member_epoch or (member_epoch < member.member_epoch and not lost_response):
            return group, HeartbeatResult(Errors.FENCED_MEMBER_EPOCH, member_id)
    if partitions is not None and tuple(sorted(partitions)) != group.partitions:
        group, changed = replace(group, partitions=tuple(sorted(partitions))), True
    if changed:
        group = new_target(group, spread(group.partitions, tuple(m.member_id for m in group.members)))
    after = reconcile(group, member, owned)
    group = with_member(group, after)
    return group, HeartbeatResult(Errors.NONE, member_id, after.member_epoch, tuple(p for p, _ in after.assigned))


def stale_error(transactional: bool, version: int) -> Errors:
    """StaleMemberEpochException as the request's version answers it: TxnOffsetCommit before v6 gets
    ILLEGAL_GENERATION (``OffsetMetadataManager.validateTransactionalOffsetCommit`` and
    ``commitTransactionalOffset`` catch and rethrow)."""
    if transactional and version < TXN_OFFSET_COMMIT_STALE_MEMBER_EPOCH_VERSION:
        return Errors.ILLEGAL_GENERATION
    return Errors.STALE_MEMBER_EPOCH


def missing_group_error(transactional: bool, version: int) -> Errors:
    """A commit naming a group that does not exist with an epoch >= 0 (``GroupIdNotFoundException``), as the
    version answers it: TxnOffsetCommit v6+ and OffsetCommit v9+ pass it on, older ones get ILLEGAL_GENERATION."""
    supported = version >= (TXN_OFFSET_COMMIT_STALE_MEMBER_EPOCH_VERSION if transactional
                            else OFFSET_COMMIT_CONSUMER_VERSION)
    return Errors.GROUP_ID_NOT_FOUND if supported else Errors.ILLEGAL_GENERATION


def validate_offset_commit(group: ConsumerGroup, member_id: str, group_instance_id: str | None, member_epoch: int,
                           transactional: bool, partitions: tuple[str, ...], version: int) -> Errors:
    """May this commit of ``partitions`` be written? ``ConsumerGroup.validateOffsetCommit`` and then, for an
    epoch older than the member's, ``createAssignmentEpochValidator`` on every partition (KIP-1251: a member may
    commit with an older epoch the partitions it has held since that epoch), with the errors of ``version``.

    * epoch < 0 and no members: accepted (the admin client, or a consumer outside group management);
    * a TxnOffsetCommit with epoch -1, member id "" and no instance id: accepted (a producer that sends no group
      metadata: the member fields of TxnOffsetCommit are optional);
    * an unknown member: UNKNOWN_MEMBER_ID (``getOrMaybeCreateMember(memberId, false)``), so an epoch of 0 or -1
      from a member id the group does not know is refused too;
    * a plain OffsetCommit below v9 from a consumer-protocol member: UNSUPPORTED_VERSION;
    * the member's epoch: accepted, whatever the partitions; a newer one: STALE_MEMBER_EPOCH;
    * an older one (0 included): each partition must be assigned or pending revocation with an assignment epoch
      <= the received epoch, else STALE_MEMBER_EPOCH.

    STALE_MEMBER_EPOCH is ILLEGAL_GENERATION for a TxnOffsetCommit before v6 (:func:`stale_error`)."""
    if member_epoch < 0 and not group.members:
        return Errors.NONE
    if transactional and member_epoch == -1 and member_id == "" and group_instance_id is None:
        return Errors.NONE
    member = group.member(member_id)
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID
    if not transactional and version < OFFSET_COMMIT_CONSUMER_VERSION:
        return Errors.UNSUPPORTED_VERSION
    if member_epoch == member.member_epoch:
        return Errors.NONE
    if member_epoch > member.member_epoch:
        return stale_error(transactional, version)
    for partition in partitions:
        epoch = member.assignment_epoch(partition)
        if epoch is None or member_epoch < epoch:
            return stale_error(transactional, version)
    return Errors.NONE


def legitimate_commit(group: ConsumerGroup, member_id: str, member_epoch: int, partitions: tuple[str, ...]) -> bool:
    """The ghost's notion of a commit by a member that was not fenced, written apart from the validator: the
    member is in the group, and its request names its current epoch (a current member's commit is its own,
    whatever the partitions) or it has held every partition since the epoch its request names."""
    member = group.member(member_id)
    if member is None:
        return False
    if member_epoch == member.member_epoch:
        return True
    return member_epoch < member.member_epoch and all(
        (epoch := member.assignment_epoch(p)) is not None and epoch <= member_epoch for p in partitions)
