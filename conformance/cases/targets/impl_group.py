"""Group cases on the implementation: a :class:`~txnspec.impl.group.GroupCoordinator` over one
``__consumer_offsets`` partition, with its :class:`~txnspec.impl.membership.Membership` attached.

How ``given`` becomes a coordinator: the given offsets are written first, as plain offset commits in given
order; a given group with members (a txnspec extension) is installed Stable at its generation with those
members (Empty without members), as a completed JoinGroup/SyncGroup round would leave it. A ``Rebalance``
event installs the next generation the same way. Every group of a case hashes to its own
``__consumer_offsets`` partition in Kafka; the case puts them all in one (FORMAT.md), so the coordinator here
has a single offsets partition. Steps run at time 0 (CONVENTIONS.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.steps import group as steps
from txnspec.impl.consumer_groups import ConsumerGroups
from txnspec.impl.errors import Errors
from txnspec.impl.group import GroupCoordinator, txn_offset_commit_verification_error
from txnspec.impl.log import ControlType
from txnspec.impl.membership import ClassicGroup, GroupState, Member, MemberIdentity, Membership
from txnspec.impl.partition import Partition
from txnspec.impl.topic_partition import TopicPartition

_OFFSETS = "__consumer_offsets-0"
TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR = 4  # GENERIC_ERROR_SUPPORTED from TxnOffsetCommit v4
_PROTOCOLS = (("range", b""),)


def _install(membership: Membership, group_id: str, generation_id: int,
             members: tuple[tuple[str, str | None], ...]) -> None:
    group = ClassicGroup(group_id, GroupState.STABLE if members else GroupState.EMPTY, generation_id,
                         "consumer" if members else None, "range" if members else None,
                         members[0][0] if members else None)
    for member_id, instance_id in members:
        group.members[member_id] = Member(member_id, instance_id, _PROTOCOLS, 45_000, 300_000, 0)
        if instance_id is not None:
            group.static_members[instance_id] = member_id
    group.synced = bool(members)
    membership.groups[group_id] = group


def _request_error(errors: Mapping[str, Errors]) -> str:
    return next(iter(errors.values()), Errors.NONE).name


class GroupSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        g = steps.GroupGiven.parse(given)
        self.membership = Membership()
        self.consumer_groups = ConsumerGroups()
        self.coordinator = GroupCoordinator({_OFFSETS: Partition(_OFFSETS)}, num_partitions=1,
                                            membership=self.membership, consumer_groups=self.consumer_groups)
        for group_id, offsets in g.offsets:
            self.coordinator.handle_offset_commit(group_id, dict(offsets), member=MemberIdentity())
        for m in g.groups:
            _install(self.membership, m.group_id, m.generation_id, m.members)

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_group_step(when)
        c = self.coordinator
        if isinstance(step, steps.HeartbeatStep | steps.FenceMemberStep):
            return self._consumer_group(step)
        if isinstance(step, steps.OffsetCommitStep):
            errors = c.handle_offset_commit(step.group_id, dict(step.offsets),
                                            member=MemberIdentity(step.member_id, step.group_instance_id,
                                                                  step.generation_id), api_version=step.version)
            return steps.GroupObservation(error=_request_error(errors)).as_json()
        if isinstance(step, steps.TxnOffsetCommitStep):
            refused = self._verification_refusal(step)
            if refused is not None:
                return steps.GroupObservation(error=refused.name).as_json()
            member = MemberIdentity(step.member_id, step.group_instance_id, step.generation_id)
            errors = c.handle_txn_offset_commit(step.group_id, step.producer_id, step.producer_epoch,
                                                dict(step.offsets), member=member, api_version=step.version)
            return steps.GroupObservation(error=_request_error(errors)).as_json()
        if isinstance(step, steps.GroupMarkerStep):
            error = c.write_txn_marker(_OFFSETS, step.producer_id, step.producer_epoch, 0, ControlType[step.result])
            return steps.GroupObservation(error=error.name).as_json()
        if isinstance(step, steps.RebalanceStep):
            group = self.membership.groups.get(step.group_id)
            _install(self.membership, step.group_id, (group.generation_id if group else 0) + 1, step.members)
            return steps.GroupObservation().as_json()
        partitions = {}
        for partition in step.partitions:
            error, offsets = c.fetch_offsets(step.group_id, [partition], step.require_stable)
            partitions[partition] = steps.fetched_partition(error.name, offsets.get(partition))
        return steps.GroupObservation(error=Errors.NONE.name, partitions=partitions).as_json()


    def _consumer_group(self, step: steps.HeartbeatStep | steps.FenceMemberStep) -> dict[str, Any]:
        """A ConsumerGroupHeartbeat (the partitions' topics are the subscription) or a fence."""
        if isinstance(step, steps.FenceMemberStep):
            self.consumer_groups.fence(step.group_id, step.member_id)
            return steps.GroupObservation().as_json()
        by_topic: dict[str, list[str]] = {}
        for p in step.partitions or ():
            tp = TopicPartition.of(p)
            by_topic.setdefault(tp.topic, []).append(tp)
        result = self.consumer_groups.heartbeat(
            step.group_id, step.member_id, step.member_epoch,
            tuple(by_topic) if step.partitions is not None else None, step.owned, 0,
            subscribed_partitions={t: tuple(ps) for t, ps in by_topic.items()} if step.partitions is not None else None)
        if result.error is not Errors.NONE:
            return steps.GroupObservation(error=result.error.name).as_json()
        member = self.consumer_groups.groups[step.group_id].members.get(result.member_id)
        return steps.GroupObservation(error=Errors.NONE.name, member_epoch=result.member_epoch,
                                      assignment=sorted(member.assigned) if member is not None else []).as_json()

    def _verification_refusal(self, step: steps.TxnOffsetCommitStep) -> Errors | None:
        """A verified commit (the ``verification`` extension): the coordinator's answer as the group coordinator
        maps it for the client."""
        v = step.verification
        if v is None:
            return None
        if v.coordinator_error == "NONE":
            return None
        return txn_offset_commit_verification_error(Errors[v.coordinator_error],
                                                    v.version >= TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR)


def session(given: Mapping[str, Any]) -> GroupSession:
    return GroupSession(given)
