"""The consumer group of KIP-848 under the implementation adapter: the spec's group steps mapped onto
:class:`txnspec.impl.consumer_groups.ConsumerGroups` through its own ConsumerGroupHeartbeat.

* formation: every producer's consumer joins with member epoch 0 and the member id the spec names (KIP-1082:
  the client chooses it), subscribed to the input topic before its partition is known; the members heartbeat
  until all are at the group epoch, then the input partition appears in the metadata and the members reconcile
  once more: every member at one epoch, ``input-0`` assigned at that epoch to the first member, as the spec
  starts the group (its epoch 1: the difference is the adapter's ``generation_offset``);
* ``rebalance``: the first producer's member is fenced (``ConsumerGroups.fence``, the session timeout);
* ``reassign``: a new target moves ``input-0`` to the next member, and the first member's heartbeat releases
  it (owned partitions none);
* ``heartbeat``: the member's heartbeat with its epoch and the partitions it owns; its application learns the
  epoch (the adapter's ``members``), which its next ``sendOffsetsToTransaction`` carries.

The applications of a fenced member keep what they learned before (their process is stalled), as in the spec.
"""

from __future__ import annotations

from typing import Any

from txnspec.impl.errors import Errors
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.topic_partition import TopicPartition

INPUT_PARTITION = TopicPartition("input", 0)  # spec/constants.py INPUT_PARTITION, as the implementation names it
INPUT_TOPIC = INPUT_PARTITION.topic


def _heartbeat(adapter: Any, member_id: str, epoch: int, owned: tuple[str, ...] | None,
               partitions: dict[str, tuple[str, ...]] | None = None) -> Any:
    result = adapter.cluster.broker.consumer_groups.heartbeat(
        adapter.group, member_id, epoch, (INPUT_TOPIC,), owned, adapter.cluster.now_ms,
        subscribed_partitions=partitions)
    if result.error is not Errors.NONE:
        raise RuntimeError(f"{member_id}'s ConsumerGroupHeartbeat failed: {result.error.name}")
    return result


def _catch_up(adapter: Any) -> None:
    group = adapter.cluster.broker.consumer_groups.groups[adapter.group]
    for member_id, member in sorted(group.members.items()):
        _heartbeat(adapter, member_id, member.member_epoch, tuple(sorted(member.assigned)))


def form(adapter: Any, members: dict[Any, str]) -> int:
    """Form the group of ``members`` (spec producer -> member id); the group epoch the spec's epoch 1 is."""
    for member_id in members.values():
        _heartbeat(adapter, member_id, 0, ())
    _catch_up(adapter)
    first = min(members.values())
    group = adapter.cluster.broker.consumer_groups.groups[adapter.group]
    _heartbeat(adapter, first, group.members[first].member_epoch, (), {INPUT_TOPIC: (INPUT_PARTITION,)})
    _catch_up(adapter)
    epoch = group.group_epoch
    for who, member_id in members.items():
        adapter.members[who] = MemberIdentity(member_id, None, group.members[member_id].member_epoch)
    return epoch


def fence(adapter: Any, zombie: str) -> None:
    adapter.cluster.broker.consumer_groups.fence(adapter.group, adapter.members[zombie].member_id)


def reassign(adapter: Any, zombie: str) -> None:
    groups = adapter.cluster.broker.consumer_groups
    group = groups.groups[adapter.group]
    member_id = adapter.members[zombie].member_id
    heir = min(m for m in group.members if m != member_id)
    groups.reassign(adapter.group, INPUT_PARTITION, heir)
    _heartbeat(adapter, member_id, group.members[member_id].member_epoch, ())


def heartbeat(adapter: Any, who: str) -> None:
    member_id = adapter.members[who].member_id
    member = adapter.cluster.broker.consumer_groups.groups[adapter.group].members[member_id]
    result = _heartbeat(adapter, member_id, member.member_epoch, tuple(sorted({*member.assigned, *member.revoking})))
    adapter.members[who] = MemberIdentity(member_id, None, result.member_epoch)
