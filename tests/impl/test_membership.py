"""Classic group membership (impl/membership.py): joins, rebalances, timeouts, static members, and the
KIP-447 checks of (Txn)OffsetCommit that fence a transactional producer after a rebalance."""

from __future__ import annotations

import pytest

from txnspec.impl.broker import Broker
from txnspec.impl.errors import Errors
from txnspec.impl.membership import GroupState, JoinPending, JoinResult, MemberIdentity, Membership, SyncResult
from txnspec.impl.messages import InitProducerId, OffsetFetch, TxnOffsetCommit

PROTOCOLS = (("range", b"meta"),)


def synced(r: SyncResult | None) -> bytes:
    assert r is not None, "still waiting for the leader's SyncGroup"
    return r.assignment


def join(m: Membership, member_id: str = "", instance: str | None = None, now: int = 0,
         group: str = "g") -> tuple[str, JoinResult | None]:
    """Join (asking for a member id first, as JoinGroup v4+); the member id and the answer (None: pending)."""
    r = m.join(group, member_id, instance, "consumer", PROTOCOLS, 10_000, 5_000, now, require_member_id=True)
    if isinstance(r, JoinResult) and r.error is Errors.MEMBER_ID_REQUIRED:
        r = m.join(group, r.member_id, instance, "consumer", PROTOCOLS, 10_000, 5_000, now, require_member_id=True)
    if isinstance(r, JoinPending):
        return r.member_id, None
    assert r.error in (Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID), r
    return r.member_id, r


def test_a_first_member_joins_leads_and_syncs_its_assignment() -> None:
    m = Membership()
    a, r = join(m)
    assert r is not None and r.error is Errors.NONE and r.generation_id == 1 and r.leader == a
    assert [x[0] for x in r.members] == [a]
    assert synced(m.sync("g", a, 1, None, {a: b"all"}, 0)) == b"all"
    assert m.groups["g"].state is GroupState.STABLE
    assert m.heartbeat("g", a, 1, None, 100) is Errors.NONE


def test_a_second_member_starts_a_rebalance_the_first_learns_of_it_and_rejoins() -> None:
    m = Membership()
    a, _ = join(m)
    m.sync("g", a, 1, None, {a: b"all"}, 0)
    b, pending = join(m, now=10)
    assert pending is None and m.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert m.heartbeat("g", a, 1, None, 20) is Errors.REBALANCE_IN_PROGRESS
    _, leader = join(m, a, now=30)
    assert leader is not None and leader.generation_id == 2 and {x[0] for x in leader.members} == {a, b}
    follower = m.join_result("g", b)
    assert follower is not None and follower.generation_id == 2 and follower.members == ()
    assert m.sync("g", b, 2, None, {}, 40) is None  # the follower waits for the leader's assignment
    m.sync("g", a, 2, None, {a: b"p0", b: b"p1"}, 50)
    assert synced(m.sync_result("g", b, 2)) == b"p1"


def test_a_member_that_does_not_rejoin_in_time_is_removed_at_the_rebalance_deadline() -> None:
    m = Membership()
    a, _ = join(m)
    m.sync("g", a, 1, None, {a: b"all"}, 0)
    b, _ = join(m, now=10)
    m.tick(10 + 4_999)
    assert m.groups["g"].state is GroupState.PREPARING_REBALANCE
    m.tick(10 + 5_000)
    result = m.join_result("g", b)
    assert result is not None and result.generation_id == 2 and list(m.groups["g"].members) == [b]
    assert m.heartbeat("g", a, 1, None, 6_000) is Errors.UNKNOWN_MEMBER_ID


def test_a_member_without_heartbeats_expires_after_its_session_timeout() -> None:
    m = Membership()
    a, _ = join(m)
    m.sync("g", a, 1, None, {a: b"all"}, 0)
    m.tick(10_000)
    assert a in m.groups["g"].members
    m.tick(10_001)
    assert m.groups["g"].state is GroupState.EMPTY and m.groups["g"].generation_id == 2


def test_members_joining_without_member_ids_get_their_own_ids_while_they_wait() -> None:
    """JoinGroup v0-3 has no MEMBER_ID_REQUIRED: each waiting join still names the member it made."""
    m = Membership()
    first = m.join("g", "", None, "consumer", PROTOCOLS, 10_000, 5_000, 0)
    assert isinstance(first, JoinResult) and first.generation_id == 1
    m.sync("g", first.member_id, 1, None, {}, 0)
    waiting = [m.join("g", "", None, "consumer", PROTOCOLS, 10_000, 5_000, 1) for _ in range(2)]
    ids = [w.member_id for w in waiting if isinstance(w, JoinPending)]
    assert len(set(ids)) == 2 and first.member_id not in ids


def test_a_member_keeps_the_client_id_and_host_of_the_join_that_created_it() -> None:
    """``ClassicGroupMember.clientId``/``clientHost`` are final: set by the join that creates the member (here the
    second, which carries the member id MEMBER_ID_REQUIRED handed out), unchanged by a rejoin."""
    m = Membership()
    asked = m.join("g", "", None, "consumer", PROTOCOLS, 10_000, 5_000, 0, require_member_id=True,
                   client_id="first", client_host="/10.0.0.1")
    assert isinstance(asked, JoinResult) and asked.error is Errors.MEMBER_ID_REQUIRED
    assert asked.member_id not in m.groups["g"].members  # pending: no member yet
    m.join("g", asked.member_id, None, "consumer", PROTOCOLS, 10_000, 5_000, 0, require_member_id=True,
           client_id="app", client_host="/127.0.0.1")
    m.join("g", asked.member_id, None, "consumer", PROTOCOLS, 10_000, 5_000, 1, client_id="other",
           client_host="/10.0.0.2")
    member = m.groups["g"].members[asked.member_id]
    assert (member.client_id, member.client_host) == ("app", "/127.0.0.1")


def test_a_static_member_rejoining_fences_its_previous_instance() -> None:
    m = Membership()
    old, _ = join(m, instance="i-1")
    m.sync("g", old, 1, "i-1", {old: b"all"}, 0)
    new, r = join(m, instance="i-1", now=10)
    assert new != old and r is not None and r.generation_id == 2
    assert m.heartbeat("g", old, 2, "i-1", 20) is Errors.FENCED_INSTANCE_ID
    assert m.validate_offset_commit("g", old, "i-1", 2, transactional=True) is Errors.FENCED_INSTANCE_ID
    assert m.validate_offset_commit("g", new, "i-1", 2, transactional=True) is Errors.NONE


@pytest.mark.parametrize(("member", "generation", "instance", "transactional", "expected"), [
    ("", -1, None, True, "NONE"),  # outside group management (assign + sendOffsetsToTransaction)
    ("A", 1, None, True, "NONE"),  # the current generation
    ("A", 0, None, True, "ILLEGAL_GENERATION"),  # a zombie of the previous generation (KIP-447)
    ("stranger", 1, None, True, "UNKNOWN_MEMBER_ID"),
    ("", -1, None, False, "UNKNOWN_MEMBER_ID"),  # a plain commit without a member into an active group
])
def test_offset_commits_are_checked_against_the_group_generation(member: str, generation: int,
                                                                 instance: str | None, transactional: bool,
                                                                 expected: str) -> None:
    m = Membership()
    a, _ = join(m)
    m.sync("g", a, 1, None, {a: b"all"}, 0)
    member = a if member == "A" else member
    assert m.validate_offset_commit("g", member, instance, generation, transactional=transactional).name == expected


def test_commits_to_a_group_that_does_not_exist() -> None:
    m = Membership()
    assert m.validate_offset_commit("new", "", None, -1, transactional=True) is Errors.NONE  # a simple group
    assert m.validate_offset_commit("other", "x", None, 3, transactional=True) is Errors.ILLEGAL_GENERATION


def test_a_txn_offset_commit_of_a_stale_generation_is_refused_before_anything_is_written() -> None:
    broker = Broker()
    pid = broker.handle(InitProducerId("t", 60_000), 0).producer_id
    a, _ = join(broker.membership)
    broker.membership.sync("g", a, 1, None, {a: b"all"}, 0)
    stale = broker.handle(TxnOffsetCommit("t", "g", pid, 0, (("in-0", 5),), member=MemberIdentity(a, None, 0)), 0)
    assert stale.error is Errors.ILLEGAL_GENERATION
    broker.deliver_markers(0)
    assert broker.handle(OffsetFetch("g", ("in-0",)), 0).error is Errors.NONE  # nothing pending
    current = broker.handle(TxnOffsetCommit("t", "g", pid, 0, (("in-0", 5),), member=MemberIdentity(a, None, 1)), 0)
    assert current.error is Errors.NONE
    assert broker.handle(OffsetFetch("g", ("in-0",)), 0).error is Errors.UNSTABLE_OFFSET_COMMIT
