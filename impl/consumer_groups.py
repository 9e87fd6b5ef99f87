"""KIP-848 consumer groups (``group.protocol=consumer``): ConsumerGroupHeartbeat, member epochs, reconciliation,
session timeouts, and the member checks of offset commits by member epoch.

Follows the group coordinator of Kafka 4.4 (``group-coordinator/src/main/java/org/apache/kafka/coordinator/
group/``): ``GroupMetadataManager.consumerGroupHeartbeat`` (a member id chosen by the client, KIP-1082; epoch
0 joins, -1 leaves, -2 leaves a static member; ``throwIfConsumerGroupMemberEpochIsInvalid``: a newer epoch, or an
older one that is not the previous epoch with a subset of the assignment owned, is FENCED_MEMBER_EPOCH; the
group epoch is bumped when membership or subscriptions change, and the target assignment is computed at it;
``consumerGroupFenceMember`` when the session timeout passes), ``modern/consumer/CurrentAssignmentBuilder``
(a member keeps its epoch until it has revoked what it loses; a partition another member still owns is not
assigned yet; a kept partition keeps its assignment epoch, a new one gets the target epoch: KIP-1251), and
``modern/consumer/ConsumerGroup.validateOffsetCommit`` with ``createAssignmentEpochValidator``, answered per
request version as ``OffsetMetadataManager.validateTransactionalOffsetCommit`` / ``commitTransactionalOffset``
do (STALE_MEMBER_EPOCH is ILLEGAL_GENERATION for a TxnOffsetCommit before v6).

Sans-I/O: every call takes ``now_ms``; partitions are names (``topic-N``); the caller resolves a subscription's
topics to partitions (:meth:`ConsumerGroups.heartbeat`'s ``subscribed``).

Left out: server-side assignors other than a uniform round robin over members in member-id order, regular
expression subscriptions, rack awareness, classic-protocol members in a consumer group and the migration
between protocols, the rebalance timeout of a member that does not revoke (its session timeout still fences
it), group size limits, persistence (a restarted coordinator forgets its consumer groups: members rejoin).
"""

from __future__ import annotations

import enum
import itertools
import uuid
from dataclasses import dataclass, field

from txnspec.impl.errors import Errors

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
TXN_OFFSET_COMMIT_STALE_MEMBER_EPOCH_VERSION = 6  # TxnOffsetCommitRequest.supportsStaleMemberEpochError
OFFSET_COMMIT_CONSUMER_VERSION = 9  # OffsetCommit v9+: the member epoch of the consumer protocol
HEARTBEAT_INTERVAL_MS = 5_000  # group.consumer.heartbeat.interval.ms
SESSION_TIMEOUT_MS = 45_000  # group.consumer.session.timeout.ms


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: dict[str, int] = field(default_factory=dict)  # partition -> assignment epoch
    revoking: dict[str, int] = field(default_factory=dict)  # partitions pending revocation -> their epoch
    state: MemberState = MemberState.STABLE
    subscribed: tuple[str, ...] = ()  # topic names
    last_heartbeat_ms: int = 0

    def epoch_of(self, partition: str) -> int | None:
        """``assignmentEpoch`` or else ``pendingRevocationEpoch``."""
        epoch = self.assigned.get(partition)
        return epoch if epoch is not None else self.revoking.get(partition)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, str] = field(default_factory=dict)  # partition -> member id, at group_epoch
    partitions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # topic -> its partitions

    @property
    def state(self) -> str:
        """``ConsumerGroupState``'s name as DescribeGroups / ListGroups give it."""
        if not self.members:
            return "Empty"
        if any(m.member_epoch != self.group_epoch or m.state is not MemberState.STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def owner(self, partition: str, but: str) -> bool:
        """Another member than ``but`` owns ``partition`` (assigned or pending revocation)."""
        return any(m.member_id != but and m.epoch_of(partition) is not None for m in self.members.values())


@dataclass(frozen=True)
class HeartbeatResult:
    error: Errors
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    assignment: tuple[str, ...] | None = None  # the partitions assigned; None: no assignment to send


class ConsumerGroups:
    """Every consumer group of one coordinator.

    >>> groups = ConsumerGroups()
    >>> r = groups.heartbeat("g", "m1", 0, ("in",), None, 0, subscribed_partitions={"in": ("in-0", "in-1")})
    >>> (r.error.name, r.member_epoch, r.assignment)
    ('NONE', 1, ('in-0', 'in-1'))
    >>> groups.validate_offset_commit("g", "m1", None, 1, transactional=True, partitions=("in-0",), version=6).name
    'NONE'
    >>> groups.validate_offset_commit("g", "m1", None, 2, transactional=True, partitions=("in-0",), version=6).name
    'STALE_MEMBER_EPOCH'
    """

    def __init__(self, session_timeout_ms: int = SESSION_TIMEOUT_MS) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        self.session_timeout_ms = session_timeout_ms
        self._ids = itertools.count(1)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self.groups

    # --- membership ---

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, subscribed: tuple[str, ...] | None,
                  owned: tuple[str, ...] | None, now_ms: int, *, instance_id: str | None = None,
                  subscribed_partitions: dict[str, tuple[str, ...]] | None = None) -> HeartbeatResult:
        """``ConsumerGroupHeartbeat``. ``subscribed``: the topics (None: unchanged); ``owned``: the partitions
        the member owns (None: unchanged); ``subscribed_partitions``: the partitions of the subscribed topics as
        the metadata has them now."""
        if not member_id:  # KIP-1082: the client chooses its member id; an older client's gets one
            member_id = str(uuid.UUID(int=next(self._ids)))  # deterministic, as the classic membership's ids
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            if group is None or member is None:
                return HeartbeatResult(Errors.UNKNOWN_MEMBER_ID, member_id)
            self._remove(group, member_id)
            return HeartbeatResult(Errors.NONE, member_id, member_epoch)
        if member is None:
            if member_epoch != 0:
                return HeartbeatResult(Errors.UNKNOWN_MEMBER_ID, member_id)
            if group is None:
                group = self.groups[group_id] = ConsumerGroup(group_id)
            member = group.members[member_id] = ConsumerMember(member_id, instance_id, last_heartbeat_ms=now_ms)
            changed = True
        else:
            if member_epoch != 0:
                lost_response = member_epoch == member.previous_member_epoch and owned is not None \
                    and set(owned) <= set(member.assigned)
                if member_epoch > member.member_epoch or (member_epoch < member.member_epoch and not lost_response):
                    return HeartbeatResult(Errors.FENCED_MEMBER_EPOCH, member_id)
            changed = False
        assert group is not None
        member.last_heartbeat_ms = now_ms
        if subscribed is not None and tuple(sorted(subscribed)) != member.subscribed:
            member.subscribed = tuple(sorted(subscribed))
            changed = True
        if subscribed_partitions is not None:
            known = {t: tuple(sorted(ps)) for t, ps in subscribed_partitions.items()}
            if any(group.partitions.get(t) != ps for t, ps in known.items()):
                group.partitions.update(known)
                changed = True
        if changed:
            self._new_target(group)
        before = (member.member_epoch, dict(member.assigned))
        self._reconcile(group, member, owned)
        send = member_epoch != member.member_epoch or before[1] != member.assigned or member_epoch == 0 \
            or owned is None or set(owned) != set(member.assigned)
        return HeartbeatResult(Errors.NONE, member_id, member.member_epoch,
                               assignment=tuple(sorted(member.assigned)) if send else None)

    def _new_target(self, group: ConsumerGroup) -> None:
        """The group epoch moves on and the target is recomputed: each subscribed partition dealt round robin
        over the members subscribed to its topic, in member-id order."""
        group.group_epoch += 1
        target: dict[str, str] = {}
        for topic, partitions in sorted(group.partitions.items()):
            takers = sorted(m for m, member in group.members.items() if topic in member.subscribed)
            for i, p in enumerate(partitions):
                if takers:
                    target[p] = takers[i % len(takers)]
        group.target = target

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: tuple[str, ...] | None) -> None:
        """``CurrentAssignmentBuilder.build``."""
        def owns_revoked(revoking: dict[str, int]) -> bool:  # ownsRevokedPartitions: None owns everything
            return owned is None or any(p in revoking for p in owned)

        if member.state is MemberState.UNREVOKED_PARTITIONS and owns_revoked(member.revoking):
            return
        if member.state is MemberState.STABLE and member.member_epoch == group.group_epoch:
            return
        target = {p for p, m in group.target.items() if m == member.member_id}
        assigned = {p: e for p, e in member.assigned.items() if p in target}
        revoking = {p: e for p, e in member.assigned.items() if p not in target}
        pending = sorted(target - set(assigned))
        unreleased = [p for p in pending if group.owner(p, member.member_id)]
        if revoking and owns_revoked(revoking):
            member.state, member.assigned, member.revoking = MemberState.UNREVOKED_PARTITIONS, assigned, revoking
            return
        for p in pending:
            if p not in unreleased:
                assigned[p] = group.group_epoch
        member.previous_member_epoch, member.member_epoch = member.member_epoch, group.group_epoch
        member.assigned, member.revoking = assigned, {}
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    def _remove(self, group: ConsumerGroup, member_id: str) -> None:
        """A member leaves or is fenced (``consumerGroupFenceMember``): the group epoch is bumped and the
        target recomputed; what it owned is free for the others' next heartbeats."""
        group.members.pop(member_id, None)
        self._new_target(group)

    def fence(self, group_id: str, member_id: str) -> bool:
        """Fence one member now (its session timed out). False if there is no such member."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return False
        self._remove(group, member_id)
        return True

    def reassign(self, group_id: str, partition: str, member_id: str) -> None:
        """A new target moving ``partition`` to ``member_id`` (what an assignor may decide; here on request):
        the group epoch moves on, the members reconcile at their next heartbeats."""
        group = self.groups[group_id]
        group.group_epoch += 1
        group.target[partition] = member_id

    def tick(self, now_ms: int) -> list[tuple[str, str]]:
        """Session timeouts: every member silent for longer is fenced. The (group, member) fenced."""
        fenced = []
        for group_id, group in sorted(self.groups.items()):
            for member_id, member in sorted(group.members.items()):
                if now_ms - member.last_heartbeat_ms > self.session_timeout_ms:
                    self._remove(group, member_id)
                    fenced.append((group_id, member_id))
        return fenced

    # --- offset commits ---

    def validate_offset_commit(self, group_id: str, member_id: str, group_instance_id: str | None,
                               member_epoch: int, *, transactional: bool, partitions: tuple[str, ...],
                               version: int) -> Errors:
        """``ConsumerGroup.validateOffsetCommit`` and the assignment-epoch validator of each partition, with
        the errors of ``version`` (the group must exist: :meth:`__contains__`)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return Errors.NONE
        if transactional and member_epoch == -1 and member_id == "" and group_instance_id is None:
            return Errors.NONE
        member = group.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if not transactional and version < OFFSET_COMMIT_CONSUMER_VERSION:
            return Errors.UNSUPPORTED_VERSION
        stale = Errors.ILLEGAL_GENERATION if transactional and version < TXN_OFFSET_COMMIT_STALE_MEMBER_EPOCH_VERSION \
            else Errors.STALE_MEMBER_EPOCH
        if member_epoch == member.member_epoch:
            return Errors.NONE
        if member_epoch > member.member_epoch:
            return stale
        for partition in partitions:
            epoch = member.epoch_of(partition)
            if epoch is None or member_epoch < epoch:
                return stale
        return Errors.NONE


__all__ = ["ConsumerGroup", "ConsumerGroups", "ConsumerMember", "HeartbeatResult", "MemberState"]
