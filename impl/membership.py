"""Classic consumer-group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the member checks of
offset commits (KIP-447).

Follows Kafka's classic group protocol as the group coordinator runs it (``group-coordinator/.../classic/
ClassicGroup`` and ``GroupMetadataManager.classicGroupJoin`` / ``classicGroupSync`` / ``classicGroupHeartbeat``
/ ``classicGroupLeave``): states Empty, PreparingRebalance, CompletingRebalance, Stable; a join with an empty
member id (JoinGroup v4+) answered MEMBER_ID_REQUIRED with a new id; a rebalance completes once every member
has rejoined or the rebalance timeout passed (members that did not rejoin are removed); the first member
to join is the leader and receives every member's metadata; SyncGroup from the leader hands out the
assignment; heartbeats and session timeouts; static members (``group.instance.id``) replace their previous
member id, which is then fenced (FENCED_INSTANCE_ID).

:meth:`Membership.validate_offset_commit` is ``ClassicGroup.validateOffsetCommit`` (with
``OffsetMetadataManager.validateTransactionalOffsetCommit``'s simple-group creation): a commit with a
negative generation is accepted from an empty group (or creates it); otherwise the member must be known
(UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and its generation current (ILLEGAL_GENERATION). This is what lets
a transactional producer's ``sendOffsetsToTransaction(offsets, groupMetadata)`` be fenced after a
rebalance.

Sans-I/O: every call takes ``now_ms``; a JoinGroup or SyncGroup that must wait answers ``None`` and the
caller asks again (:meth:`join_result`, :meth:`sync_result`) after :meth:`tick` or another member's call.

Left out: persistence of group metadata (after a broker restart members rejoin: their next heartbeat is
UNKNOWN_MEMBER_ID), the initial rebalance delay (``group.initial.rebalance.delay.ms`` is 0 here), a static
member rejoining a stable group without a rebalance, protocol selection by vote (the first protocol of
the leader's list that every member supports), the consumer protocol of KIP-848, group size limits.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

from txnspec.impl.errors import Errors


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heartbeat_ms: int
    joined: bool = False  # has (re)joined the rebalance in progress
    awaiting_join: bool = False  # its JoinGroup is not answered yet
    assignment: bytes = b""
    # ClassicGroupMember.clientId / clientHost: from the JoinGroup that created the member, kept while it lives
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class MemberIdentity:
    """Who sends an offset commit (``TxnOffsetCommit`` v3+ / ``OffsetCommit``): defaults are a client outside
    group management (``generation -1``)."""

    member_id: str = ""
    group_instance_id: str | None = None
    generation_id: int = -1


@dataclass(frozen=True)
class JoinResult:
    error: Errors
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata): the leader's


@dataclass(frozen=True)
class JoinPending:
    """A JoinGroup that waits for the rebalance to complete; ``member_id`` is the member it made or found."""

    member_id: str


@dataclass(frozen=True)
class SyncResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group instance id -> member id
    pending_member_ids: set[str] = field(default_factory=set)  # handed out with MEMBER_ID_REQUIRED
    rebalance_deadline_ms: int = 0
    synced: bool = False  # the leader's SyncGroup of this generation arrived

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Errors:
        """``ClassicGroup.validateMember``."""
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is None:
                return Errors.UNKNOWN_MEMBER_ID
            return Errors.NONE if known == member_id else Errors.FENCED_INSTANCE_ID
        return Errors.NONE if member_id in self.members else Errors.UNKNOWN_MEMBER_ID


class Membership:
    """Every classic group of one coordinator (see the module docstring).

    >>> m = Membership()
    >>> m.join("g", "", None, "consumer", (("range", b"sub"),), 10_000, 10_000, 0, require_member_id=True).error
    <Errors.MEMBER_ID_REQUIRED: (79, False)>
    >>> mid = m.groups["g"].pending_member_ids.copy().pop()
    >>> r = m.join("g", mid, None, "consumer", (("range", b"sub"),), 10_000, 10_000, 0)
    >>> (r.error.name, r.generation_id, r.leader == mid, len(r.members))
    ('NONE', 1, True, 1)
    >>> m.sync("g", mid, 1, None, {mid: b"assigned"}, 0)
    SyncResult(error=<Errors.NONE: (0, False)>, protocol_type='consumer', protocol_name='range', assignment=b'assigned')
    >>> m.validate_offset_commit("g", mid, None, 0, transactional=True).name
    'ILLEGAL_GENERATION'
    """

    def __init__(self, initial_member_ids: int = 1) -> None:
        self.groups: dict[str, ClassicGroup] = {}
        self._ids = itertools.count(initial_member_ids)

    def _group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id)
        return group

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id or 'member'}-{next(self._ids):08d}"

    # --- JoinGroup ---

    def join(self, group_id: str, member_id: str, group_instance_id: str | None, protocol_type: str,
             protocols: tuple[tuple[str, bytes], ...], session_timeout_ms: int, rebalance_timeout_ms: int,
             now_ms: int, *, require_member_id: bool = False, client_id: str = "", client_host: str = ""
             ) -> JoinResult | JoinPending:
        """A JoinGroup: its answer, or :class:`JoinPending` (naming the member) while the rebalance is in
        progress (then ask :meth:`join_result`). ``client_id`` (the request header's) and ``client_host`` (the
        connection's peer) are kept by the member the join creates, as ``classicGroupJoin`` does, for
        DescribeGroups."""
        if not group_id:
            return JoinResult(Errors.INVALID_REQUEST, member_id=member_id)
        if session_timeout_ms <= 0 or rebalance_timeout_ms <= 0:
            return JoinResult(Errors.INVALID_SESSION_TIMEOUT, member_id=member_id)
        group = self._group(group_id)
        if not protocols or (group.members and group.protocol_type not in (None, protocol_type)):
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if group.members and not any(all(any(n == name for n, _ in m.protocols) for m in group.members.values()
                                          if m.member_id != member_id) for name, _ in protocols):
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id:
            new_id = self._new_member_id(client_id)
            if group_instance_id is not None:
                old = group.static_members.get(group_instance_id)
                if old is not None:
                    group.members.pop(old, None)  # the previous instance is fenced from now on
                    if group.leader_id == old:
                        group.leader_id = None
                group.static_members[group_instance_id] = new_id
            elif require_member_id:
                group.pending_member_ids.add(new_id)
                return JoinResult(Errors.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        elif member_id in group.pending_member_ids:
            group.pending_member_ids.discard(member_id)
        elif member_id not in group.members:
            return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=member_id)
        elif group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return JoinResult(Errors.FENCED_INSTANCE_ID, member_id=member_id)
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = Member(member_id, group_instance_id, protocols, session_timeout_ms,
                                                       rebalance_timeout_ms, now_ms, client_id=client_id,
                                                       client_host=client_host)
        member.protocols, member.session_timeout_ms = protocols, session_timeout_ms
        member.rebalance_timeout_ms, member.last_heartbeat_ms = rebalance_timeout_ms, now_ms
        member.joined = member.awaiting_join = True
        group.protocol_type = protocol_type
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = member_id
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)
        return self.join_result(group_id, member_id) or JoinPending(member_id)

    def join_result(self, group_id: str, member_id: str) -> JoinResult | None:
        """The answer to a member's pending JoinGroup, once the rebalance completed (else ``None``)."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            return None
        group.members[member_id].awaiting_join = False
        leader = member_id == group.leader_id
        members = tuple((m.member_id, m.group_instance_id, dict(m.protocols)[group.protocol_name or ""])
                        for m in group.members.values()) if leader else ()
        return JoinResult(Errors.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", member_id, members)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        group.state = GroupState.PREPARING_REBALANCE
        group.synced = False
        for m in group.members.values():
            m.joined = m.awaiting_join  # a member still waiting for its JoinGroup answer is in already
        group.rebalance_deadline_ms = now_ms + max((m.rebalance_timeout_ms for m in group.members.values()),
                                                   default=0)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if not all(m.joined for m in group.members.values()) and now_ms < group.rebalance_deadline_ms:
            return
        for gone in [m for m in group.members.values() if not m.joined]:
            self._remove(group, gone.member_id)
        group.generation_id += 1
        if not group.members:
            group.state, group.protocol_name, group.protocol_type, group.leader_id = GroupState.EMPTY, None, None, None
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        leader = group.members[group.leader_id or ""]
        group.protocol_name = next(name for name, _ in leader.protocols
                                   if all(any(n == name for n, _ in m.protocols) for m in group.members.values()))
        for m in group.members.values():
            m.joined = False
            m.assignment = b""
            m.last_heartbeat_ms = now_ms
        group.state = GroupState.COMPLETING_REBALANCE

    def _remove(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None \
                and group.static_members.get(member.group_instance_id) == member_id:
            del group.static_members[member.group_instance_id]
        if group.leader_id == member_id:
            group.leader_id = next(iter(group.members), None)

    # --- SyncGroup, Heartbeat, LeaveGroup ---

    def _check(self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
               ) -> tuple[ClassicGroup | None, Errors]:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.EMPTY:
            return None, Errors.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return None, error
        if generation_id != group.generation_id:
            return None, Errors.ILLEGAL_GENERATION
        return group, Errors.NONE

    def sync(self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None,
             assignments: dict[str, bytes], now_ms: int) -> SyncResult | None:
        """A SyncGroup: the member's assignment, an error, or ``None`` until the leader's arrives."""
        group, error = self._check(group_id, member_id, generation_id, group_instance_id)
        if group is None:
            return SyncResult(error)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(Errors.REBALANCE_IN_PROGRESS)
        group.members[member_id].last_heartbeat_ms = now_ms
        if group.state is GroupState.COMPLETING_REBALANCE and member_id == group.leader_id:
            for mid, assignment in assignments.items():
                if mid in group.members:
                    group.members[mid].assignment = assignment
            group.state, group.synced = GroupState.STABLE, True
        return self.sync_result(group_id, member_id, generation_id)

    def sync_result(self, group_id: str, member_id: str, generation_id: int) -> SyncResult | None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return SyncResult(Errors.UNKNOWN_MEMBER_ID)
        if group.generation_id != generation_id or group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(Errors.REBALANCE_IN_PROGRESS)
        if not group.synced:
            return None
        return SyncResult(Errors.NONE, group.protocol_type, group.protocol_name, group.members[member_id].assignment)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None,
                  now_ms: int) -> Errors:
        group, error = self._check(group_id, member_id, generation_id, group_instance_id)
        if group is None:
            return error
        group.members[member_id].last_heartbeat_ms = now_ms
        return Errors.REBALANCE_IN_PROGRESS if group.state is GroupState.PREPARING_REBALANCE else Errors.NONE

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None, now_ms: int) -> Errors:
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is None:
                return Errors.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return Errors.FENCED_INSTANCE_ID
            member_id = known
        if member_id not in group.members:
            return Errors.UNKNOWN_MEMBER_ID
        self._remove(group, member_id)
        self._member_gone(group, now_ms)
        return Errors.NONE

    def _member_gone(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)
        elif not group.members:
            group.generation_id += 1
            group.state, group.protocol_name, group.protocol_type, group.leader_id = GroupState.EMPTY, None, None, None
        else:
            self._prepare_rebalance(group, now_ms)

    def tick(self, now_ms: int) -> None:
        """Session timeouts expire members; a rebalance past its deadline completes without the laggards."""
        for group in self.groups.values():
            expired = [m.member_id for m in group.members.values()
                       if not (group.state is GroupState.PREPARING_REBALANCE and m.joined)
                       and now_ms - m.last_heartbeat_ms > m.session_timeout_ms]
            for member_id in expired:
                self._remove(group, member_id)
            if expired:
                self._member_gone(group, now_ms)
            self._maybe_complete_join(group, now_ms)

    # --- offset commits (KIP-447) ---

    def validate_offset_commit(self, group_id: str, member_id: str, group_instance_id: str | None,
                               generation_id: int, *, transactional: bool) -> Errors:
        """May this (Txn)OffsetCommit be written? (``ClassicGroup.validateOffsetCommit``)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self._group(group_id)  # a simple group, as getOrMaybeCreateClassicGroup(groupId, true)
                return Errors.NONE
            return Errors.ILLEGAL_GENERATION
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return Errors.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not Errors.NONE:
                return error
            if generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif not transactional and group.state is not GroupState.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE


__all__ = ["ClassicGroup", "GroupState", "JoinPending", "JoinResult", "Member", "MemberIdentity", "Membership",
           "SyncResult"]
