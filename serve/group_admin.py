"""Group admin as ``GroupCoordinatorService`` answers it for classic groups: ListGroups (states and types
filters), DescribeGroups, DeleteGroups and OffsetDelete, on :mod:`txnspec.impl.membership` (members) and
:mod:`txnspec.impl.group` (committed offsets, deleted with tombstones in the offsets log).

A group exists while it has members or committed offsets (a group only committed to, by a transaction or an
admin, is Empty with no protocol type). DeleteGroups refuses a group with members (NON_EMPTY_GROUP);
OffsetDelete refuses the partitions of a topic a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC: the
subscription is read from the members' ``consumer`` protocol metadata). DescribeGroups v6 answers an unknown
group GROUP_ID_NOT_FOUND (KIP-1043), older versions the Dead state. Left out: KIP-848 consumer groups (the
types filter knows ``classic`` only). A member's client id and host are the ones its JoinGroup came with
(``ClassicGroupMember.describe``: the request header's client id, the peer address as ``"/127.0.0.1"``).
"""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer.group import OffsetDeleteResponse

from txnspec.impl.membership import ClassicGroup, GroupState
from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve.broker import Handler, WireBroker
from txnspec.serve.codes import Code
from txnspec.serve.protocol import Request

CLASSIC = "classic"
DEAD = "Dead"


def _groups(wb: WireBroker) -> dict[str, tuple[ClassicGroup | None, bool]]:
    """Every group the coordinator knows: (its membership, whether it has committed offsets)."""
    members = {g: group for g, group in wb.broker.membership.groups.items()
               if group.members or group.state is not GroupState.EMPTY}
    committed = {g for (g, _) in wb.broker.group_coordinator.committed}
    return {g: (members.get(g), g in committed) for g in sorted(set(members) | committed)}


def _state(group: ClassicGroup | None) -> str:
    return GroupState.EMPTY.value if group is None else group.state.value


def handle_list_groups(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = ListGroupsResponse
    states = {s.lower() for s in body.states_filter or ()} if v >= 4 else set()
    types = {t.lower() for t in body.types_filter or ()} if v >= 5 else set()
    listed = []
    if not types or CLASSIC in types:
        for group_id, (group, _) in _groups(wb).items():
            if (states and _state(group).lower() not in states) or not wb.coordinates_group(request, group_id):
                continue
            listed.append(R.ListedGroup(group_id=group_id, protocol_type=(group.protocol_type if group else "") or "",
                                        group_state=_state(group), group_type=CLASSIC))
    return R(version=v, throttle_time_ms=0, error_code=0, groups=listed)


def subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a ``ConsumerProtocolSubscription`` (every version starts: version, topics)."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(max(count, 0)):
            (n,) = struct.unpack_from(">h", metadata, pos)
            topics.add(metadata[pos + 2:pos + 2 + n].decode())
            pos += 2 + n
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def handle_describe_groups(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DescribeGroupsResponse.DescribedGroup
    known = _groups(wb)
    described = []
    for group_id in body.groups:
        if not wb.coordinates_group(request, group_id):
            described.append(R(error_code=Code.NOT_COORDINATOR, error_message=None, group_id=group_id, group_state="",
                               protocol_type="", protocol_data="", members=[], authorized_operations=None))
            continue
        if group_id not in known:
            if v >= 6:
                described.append(R(error_code=Code.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                                   group_id=group_id, group_state=DEAD, protocol_type="", protocol_data="",
                                   members=[], authorized_operations=None))
            else:
                described.append(R(error_code=0, error_message=None, group_id=group_id, group_state=DEAD,
                                   protocol_type="", protocol_data="", members=[], authorized_operations=None))
            continue
        group, _ = known[group_id]
        stable = group is not None and group.state is GroupState.STABLE
        members = []
        for member in (group.members.values() if group else ()):
            metadata = dict(member.protocols).get(group.protocol_name or "", b"") if stable and group else b""
            members.append(R.DescribedGroupMember(
                member_id=member.member_id, group_instance_id=member.group_instance_id,
                client_id=member.client_id, client_host=member.client_host, member_metadata=metadata,
                member_assignment=member.assignment if stable else b""))
        described.append(R(error_code=0, error_message=None, group_id=group_id, group_state=_state(group),
                           protocol_type=(group.protocol_type if group else "") or "",
                           protocol_data=(group.protocol_name or "") if stable and group else "", members=members,
                           authorized_operations=None))
    return DescribeGroupsResponse(version=v, throttle_time_ms=0, groups=described)


def handle_delete_groups(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DeleteGroupsResponse
    known = _groups(wb)
    gc = wb.broker.group_coordinator
    results = []
    for group_id in body.groups_names:
        if not wb.coordinates_group(request, group_id):
            code = Code.NOT_COORDINATOR
        elif group_id not in known:
            code = Code.GROUP_ID_NOT_FOUND
        elif known[group_id][0] is not None and known[group_id][0].members:  # type: ignore[union-attr]
            code = Code.NON_EMPTY_GROUP
        else:
            error = gc.delete_offsets(group_id, [tp for (g, tp) in gc.committed if g == group_id], wb.now())
            code = Code(error.code)
            if code is Code.NONE:
                wb.broker.membership.groups.pop(group_id, None)
        results.append(R.DeletableGroupResult(group_id=group_id, error_code=int(code)))
    return R(version=v, throttle_time_ms=0, results=results)


def handle_offset_delete(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = OffsetDeleteResponse
    known = _groups(wb)
    if not wb.coordinates_group(request, body.group_id):
        return R(version=v, error_code=Code.NOT_COORDINATOR, throttle_time_ms=0, topics=[])
    if body.group_id not in known:
        return R(version=v, error_code=Code.GROUP_ID_NOT_FOUND, throttle_time_ms=0, topics=[])
    group, _ = known[body.group_id]
    subscribed: set[str] = set()
    if group is not None and group.protocol_type == "consumer":
        for member in group.members.values():
            subscribed |= subscribed_topics(dict(member.protocols).get(group.protocol_name or "", b""))
    gc = wb.broker.group_coordinator
    topics = []
    for t in body.topics:
        parts = []
        deletable = []
        for p in t.partitions:
            index = int(p.partition_index)
            if t.name in subscribed:
                code = Code.GROUP_SUBSCRIBED_TO_TOPIC
            elif wb.partition(t.name, index) is None:
                code = Code.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = Code.NONE
                deletable.append(TopicPartition(t.name, index))
            parts.append([index, code])
        error = gc.delete_offsets(body.group_id, deletable, wb.now())
        for entry in parts:
            if entry[1] is Code.NONE:
                entry[1] = Code(error.code)
        topics.append(R.OffsetDeleteResponseTopic(name=t.name, partitions=[
            R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(partition_index=i, error_code=int(c))
            for i, c in parts]))
    return R(version=v, error_code=0, throttle_time_ms=0, topics=topics)


HANDLERS: dict[str, Handler] = {"ListGroups": handle_list_groups, "DescribeGroups": handle_describe_groups,
                                "DeleteGroups": handle_delete_groups, "OffsetDelete": handle_offset_delete}

__all__ = ["HANDLERS", "subscribed_topics"]
