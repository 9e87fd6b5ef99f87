"""Group cases on the spec: ``given`` becomes a :class:`~txnspec.spec.group.GroupState`, each step a handler of
:mod:`txnspec.spec.group`.

The case's ``__consumer_offsets`` partition is a :class:`~txnspec.spec.partition.PartitionState`, as in the
system model (:mod:`txnspec.spec.brokers`): the given offsets are its first records, then each commit writes
one record per partition and each marker one (FORMAT.md), with the producer's id and epoch (origin
COORDINATOR: the epoch is checked, not the sequence). A ``TxnOffsetCommit`` is checked for its member first,
then written (``commitTransactionalOffset``'s order); the group's view follows the appends that succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.steps import group as steps
from txnspec.spec import consumer_group as cg
from txnspec.spec import group as group_mod
from txnspec.spec import partition as part
from txnspec.spec import verification as spec_verification
from txnspec.spec.errors import Errors
from txnspec.spec.messages import TransactionResult, TxnOffsetCommit

LATEST_TXN_OFFSET_COMMIT, LATEST_OFFSET_COMMIT = 6, 10  # Kafka 4.4's newest versions


class GroupSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        g = steps.GroupGiven.parse(given)
        self.log = part.PartitionState()
        committed: dict[tuple[str, str], group_mod.OffsetRecord] = {}
        for group_id, offsets in g.offsets:
            for partition, offset in offsets:
                committed[(group_id, partition)] = group_mod.OffsetRecord(offset, self._append(-1, -1, 1))
        groups = {gid: group_mod.ClassicGroup(gid) for gid, _ in g.offsets}
        groups.update({m.group_id: group_mod.ClassicGroup(m.group_id, m.generation_id, m.members) for m in g.groups})
        self.error = Errors.NONE
        self.state = group_mod.GroupState(committed=tuple(sorted(committed.items())),
                                          groups=tuple(groups[k] for k in sorted(groups)))

    def _append(self, producer_id: int, producer_epoch: int, count: int) -> int:
        """Append ``count`` offset records; their first record offset, or -1 when the append failed."""
        self.log, reply = part.append_data(self.log, producer_id, producer_epoch, -1, count, producer_id >= 0,
                                           detect_duplicates=False, validate_sequence=False)
        self.error = reply.error
        return reply.base_offset if reply.error is Errors.NONE else -1

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_group_step(when)
        if isinstance(step, steps.HeartbeatStep | steps.FenceMemberStep):
            return self._consumer_group(step)
        if isinstance(step, steps.OffsetCommitStep):
            error = self._validate(step, transactional=False)
            if error is Errors.NONE and step.offsets:
                first = self._append(-1, -1, len(step.offsets))
                self.state, response = group_mod.handle_offset_commit(self.state, step.group_id, step.offsets,
                                                                      record_offset=first)
                error = response.error
            return steps.GroupObservation(error=error.value).as_json()
        if isinstance(step, steps.TxnOffsetCommitStep):
            refused = self._verification_refusal(step)
            if refused is not None:
                return steps.GroupObservation(error=refused.value).as_json()
            error = self._validate(step, transactional=True)
            if error is Errors.NONE and step.offsets:
                first = self._append(step.producer_id, step.producer_epoch, len(step.offsets))
                error = self.error
                if error is Errors.NONE:
                    request = TxnOffsetCommit(f"txn-{step.producer_id}", step.group_id, step.producer_id,
                                              step.producer_epoch, step.offsets, step.member_id, step.generation_id,
                                              step.group_instance_id)
                    self.state, response = group_mod.handle_txn_offset_commit(self.state, request,
                                                                              record_offset=first)
                    error = response.error
            return steps.GroupObservation(error=error.value).as_json()
        if isinstance(step, steps.GroupMarkerStep):
            self.log, reply = part.append_end_txn_marker(self.log, step.producer_id, step.producer_epoch, 0,
                                                         TransactionResult(step.result), 0)
            if reply.error is Errors.NONE:  # GroupCoordinatorShard.replayEndTransactionMarker
                self.state = group_mod.complete_pending_txn_offset_commit(self.state, step.producer_id,
                                                                          step.result == "COMMIT")
            return steps.GroupObservation(error=reply.error.value).as_json()
        if isinstance(step, steps.RebalanceStep):
            self.state = group_mod.complete_rebalance(self.state, step.group_id, step.members)
            return steps.GroupObservation().as_json()
        partitions = {}
        for partition in step.partitions:
            error, offset = group_mod.fetch_offsets(self.state, step.group_id, partition, step.require_stable)
            partitions[partition] = steps.fetched_partition(error.value, offset)
        return steps.GroupObservation(error=Errors.NONE.value, partitions=partitions).as_json()


    def _validate(self, step: steps.OffsetCommitStep | steps.TxnOffsetCommitStep, transactional: bool) -> Errors:
        """The member check of the group's protocol: a consumer group's (KIP-848) at the step's version (the
        newest by default), else a classic group's."""
        consumer = self.state.consumer_group(step.group_id)
        if consumer is not None:
            version = step.version if step.version is not None else (LATEST_TXN_OFFSET_COMMIT if transactional
                                                                     else LATEST_OFFSET_COMMIT)
            return cg.validate_offset_commit(consumer, step.member_id, step.group_instance_id, step.generation_id,
                                             transactional, tuple(p for p, _ in step.offsets), version)
        return group_mod.validate_offset_commit(self.state, step.group_id, step.member_id, step.group_instance_id,
                                                step.generation_id, transactional=transactional)

    def _consumer_group(self, step: steps.HeartbeatStep | steps.FenceMemberStep) -> dict[str, Any]:
        """A heartbeat (creating the consumer group at a join) or a fence."""
        group = self.state.consumer_group(step.group_id)
        if isinstance(step, steps.FenceMemberStep):
            if group is not None and group.member(step.member_id) is not None:
                self.state = self.state.with_consumer_group(cg.fence_member(group, step.member_id))
            return steps.GroupObservation().as_json()
        if group is None:
            group = cg.ConsumerGroup(step.group_id)
        group, result = cg.heartbeat(group, step.member_id, step.member_epoch, step.owned, step.partitions)
        if result.error is not Errors.NONE:
            return steps.GroupObservation(error=result.error.value).as_json()
        self.state = self.state.with_consumer_group(group)
        member = group.member(step.member_id)
        assigned = sorted(p for p, _ in member.assigned) if member is not None else []
        return steps.GroupObservation(error=Errors.NONE.value, member_epoch=result.member_epoch,
                                      assignment=assigned).as_json()

    def _verification_refusal(self, step: steps.TxnOffsetCommitStep) -> Errors | None:
        """A verified commit (the ``verification`` extension): the coordinator's answer as the group coordinator
        maps it for the client."""
        v = step.verification
        if v is None:
            return None
        if v.coordinator_error == "NONE":
            return None
        return group_mod.txn_offset_commit_verification_error(
            Errors(v.coordinator_error), v.version >= spec_verification.TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR)


def session(given: Mapping[str, Any]) -> GroupSession:
    return GroupSession(given)
