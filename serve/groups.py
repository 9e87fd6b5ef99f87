"""The group coordinator's requests: classic membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) on
:mod:`txnspec.impl.membership`, and offsets (OffsetCommit, OffsetFetch) on :mod:`txnspec.impl.group`.

As ``KafkaApis`` / ``GroupCoordinatorService``: commits to topics the broker does not have are answered
UNKNOWN_TOPIC_OR_PARTITION per partition; an OffsetCommit naming a member is checked against the group's
generation (``ClassicGroup.validateOffsetCommit``); OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for a partition with a pending transactional offset (``OffsetMetadataManager``), and
-1 for a partition without a committed offset. A JoinGroup answers when the rebalance completes and a
follower's SyncGroup when the leader's arrives (a :class:`~txnspec.serve.broker.Pending`).

Left out: offset metadata strings and leader epochs (answered "" and -1), the KIP-848 consumer protocol.
ListGroups, DescribeGroups, DeleteGroups and OffsetDelete are in :mod:`.group_admin`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

from txnspec.impl.errors import Errors
from txnspec.impl.membership import JoinResult, MemberIdentity, SyncResult
from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve.broker import Handler, Pending, WireBroker
from txnspec.serve.protocol import Request


def _join_response(v: int, r: JoinResult) -> Any:
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
               for m, i, meta in r.members]
    return JoinGroupResponse(version=v, throttle_time_ms=0, error_code=r.error.code, generation_id=r.generation_id,
                             protocol_type=r.protocol_type, protocol_name=r.protocol_name or ("" if v < 7 else None),
                             leader=r.leader, skip_assignment=False, member_id=r.member_id, members=members)


def handle_join_group(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    membership = wb.broker.membership
    rebalance_timeout = int(body.rebalance_timeout_ms) if v >= 1 else int(body.session_timeout_ms)
    protocols = tuple((p.name, bytes(p.metadata or b"")) for p in body.protocols)
    r = membership.join(body.group_id, body.member_id or "", body.group_instance_id if v >= 5 else None,
                        body.protocol_type, protocols, int(body.session_timeout_ms), rebalance_timeout, wb.now(),
                        require_member_id=v >= 4, client_id=request.client_id or "",
                        client_host=request.client_host)
    if isinstance(r, JoinResult):
        return _join_response(v, r)
    group, member_id = membership.groups[body.group_id], r.member_id

    def poll() -> Any | None:
        result = membership.join_result(body.group_id, member_id)
        return None if result is None else _join_response(v, result)

    def expire() -> Any:
        membership.tick(wb.now())
        result = membership.join_result(body.group_id, member_id)
        return _join_response(v, result or JoinResult(Errors.REBALANCE_IN_PROGRESS, member_id=member_id))

    return Pending(poll, expire, group.rebalance_deadline_ms + 1)


def _sync_response(v: int, r: SyncResult) -> Any:
    return SyncGroupResponse(version=v, throttle_time_ms=0, error_code=r.error.code, protocol_type=r.protocol_type,
                             protocol_name=r.protocol_name, assignment=r.assignment)


def handle_sync_group(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    membership = wb.broker.membership
    assignments = {a.member_id: bytes(a.assignment or b"") for a in body.assignments}
    instance = body.group_instance_id if v >= 3 else None
    r = membership.sync(body.group_id, body.member_id, int(body.generation_id), instance, assignments, wb.now())
    if r is not None:
        return _sync_response(v, r)
    member = membership.groups[body.group_id].members[body.member_id]

    def poll() -> Any | None:
        result = membership.sync_result(body.group_id, body.member_id, int(body.generation_id))
        return None if result is None else _sync_response(v, result)

    def expire() -> Any:
        return _sync_response(v, SyncResult(Errors.REBALANCE_IN_PROGRESS))

    return Pending(poll, expire, wb.now() + member.session_timeout_ms)


def handle_heartbeat(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    error = wb.broker.membership.heartbeat(body.group_id, body.member_id, int(body.generation_id),
                                           body.group_instance_id if v >= 3 else None, wb.now())
    return HeartbeatResponse(version=v, throttle_time_ms=0, error_code=error.code)


def handle_leave_group(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    membership = wb.broker.membership
    if v < 3:
        error = membership.leave(body.group_id, body.member_id, None, wb.now())
        return LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=error.code)
    answers = []
    for m in body.members:
        error = membership.leave(body.group_id, m.member_id or "", m.group_instance_id, wb.now())
        answers.append(LeaveGroupResponse.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                                         error_code=error.code))
    return LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=0, members=answers)


def handle_offset_commit(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = OffsetCommitResponse
    codes: dict[tuple[str, int], int] = {}
    offsets: dict[str, int] = {}
    for t in body.topics:
        for p in t.partitions:
            index = int(p.partition_index)
            if wb.partition(t.name, index) is None:
                codes[(t.name, index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION.code
            else:
                offsets[TopicPartition(t.name, index)] = int(p.committed_offset)
    member = MemberIdentity(body.member_id or "", body.group_instance_id if v >= 7 else None,
                            int(body.generation_id_or_member_epoch))
    if offsets:
        errors = wb.broker.group_coordinator.handle_offset_commit(body.group_id, offsets, now_ms=wb.now(),
                                                                  member=member, api_version=v)
        for name, error in errors.items():
            tp = TopicPartition.of(name)
            codes[(tp.topic, tp.partition)] = error.code
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append(R.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
            partition_index=p, error_code=code))
    return R(version=v, throttle_time_ms=0, topics=[R.OffsetCommitResponseTopic(name=t, partitions=ps)
                                                   for t, ps in by_topic.items()])


def _group_offsets(wb: WireBroker, request: Request, group_id: str, topics: Any, require_stable: bool
                   ) -> tuple[int, dict[str, list[tuple[int, int, int]]]]:
    """(group error, topic -> [(partition, offset, error)]) of one group; ``topics`` None: all committed."""
    coordinator = wb.broker.group_coordinator
    if not wb.coordinates_group(request, group_id):
        return Errors.NOT_COORDINATOR.code, {}
    if not coordinator.active:
        return Errors.COORDINATOR_NOT_AVAILABLE.code, {}
    if topics is None:
        names = sorted({tp for (g, tp) in coordinator.committed if g == group_id})
        wanted = [(tp.topic, tp.partition) for tp in map(TopicPartition.of, names)]
    else:
        wanted = [(t.name, int(p)) for t in topics for p in t.partition_indexes]
    out: dict[str, list[tuple[int, int, int]]] = {}
    for topic, index in wanted:
        tp = TopicPartition(topic, index)
        error, offsets = coordinator.fetch_offsets(group_id, [tp], require_stable)
        offset = offsets.get(tp, -1)
        out.setdefault(topic, []).append((index, offset if error is Errors.NONE else -1, error.code))
    return 0, out


def handle_offset_fetch(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = OffsetFetchResponse
    require_stable = v >= 7 and bool(body.require_stable)
    if v < 8:
        error, found = _group_offsets(wb, request, body.group_id, body.topics, require_stable)
        P = R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
        topics = [R.OffsetFetchResponseTopic(name=t, partitions=[
            P(partition_index=i, committed_offset=o, committed_leader_epoch=-1, metadata="", error_code=e)
            for i, o, e in parts]) for t, parts in found.items()]
        return R(version=v, throttle_time_ms=0, topics=topics, error_code=error)
    groups = []
    G = R.OffsetFetchResponseGroup
    for g in body.groups:
        error, found = _group_offsets(wb, request, g.group_id, g.topics, require_stable)
        P2 = G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
        topics = [G.OffsetFetchResponseTopics(name=t, partitions=[
            P2(partition_index=i, committed_offset=o, committed_leader_epoch=-1, metadata="", error_code=e)
            for i, o, e in parts]) for t, parts in found.items()]
        groups.append(G(group_id=g.group_id, topics=topics, error_code=error))
    return R(version=v, throttle_time_ms=0, groups=groups)


def _offset_commit_refused(request: Request) -> Any:
    R = OffsetCommitResponse
    return R(version=request.version, throttle_time_ms=0, topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
        R.OffsetCommitResponseTopic.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                                  error_code=Errors.NOT_COORDINATOR.code)
        for p in t.partitions]) for t in request.body.topics])


# the answer of each group request sent to a node that does not coordinate its group (serve.nodes)
NOT_COORDINATOR_ANSWERS: dict[str, Callable[[Request], Any]] = {
    "JoinGroup": lambda r: _join_response(r.version, JoinResult(Errors.NOT_COORDINATOR)),
    "SyncGroup": lambda r: _sync_response(r.version, SyncResult(Errors.NOT_COORDINATOR)),
    "Heartbeat": lambda r: HeartbeatResponse(version=r.version, throttle_time_ms=0,
                                             error_code=Errors.NOT_COORDINATOR.code),
    "LeaveGroup": lambda r: LeaveGroupResponse(version=r.version, throttle_time_ms=0,
                                               error_code=Errors.NOT_COORDINATOR.code, members=[]),
    "OffsetCommit": _offset_commit_refused,
}


def coordinated(handler: Handler) -> Handler:
    """``handler`` on the group's coordinator; elsewhere NOT_COORDINATOR in the request's own answer."""
    def route(wb: WireBroker, request: Request) -> Any:
        if not wb.coordinates_group(request, request.body.group_id):
            return NOT_COORDINATOR_ANSWERS[request.api.name](request)
        return handler(wb, request)
    return route


HANDLERS: dict[str, Handler] = {
    "JoinGroup": coordinated(handle_join_group), "SyncGroup": coordinated(handle_sync_group),
    "Heartbeat": coordinated(handle_heartbeat), "LeaveGroup": coordinated(handle_leave_group),
    "OffsetCommit": coordinated(handle_offset_commit), "OffsetFetch": handle_offset_fetch,
}
