"""Group RPCs of ``txnspec serve`` on the wire: a member joins (MEMBER_ID_REQUIRED first, JoinGroup v5),
syncs, and a transactional producer's TxnOffsetCommit is fenced by the group generation (KIP-447); the
offsets stay unstable until the commit marker; a member that left is unknown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.producer.transaction import (
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from txnspec.audit.connection import BrokerConnection
from txnspec.serve.server import ServerThread

ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED, UNSTABLE_OFFSET_COMMIT = 22, 25, 79, 88


@pytest.fixture
def conn() -> Iterator[BrokerConnection]:
    with ServerThread(transaction_version=2, topics=("in",)) as server:
        c = BrokerConnection(server.config.host, server.config.port, timeout=5)
        try:
            yield c
        finally:
            c.close()


def join(conn: BrokerConnection, member_id: str) -> Any:
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")
    return conn.call(JoinGroupRequest, JoinGroupResponse, 5, group_id="g", session_timeout_ms=10_000,
                     rebalance_timeout_ms=10_000, member_id=member_id, group_instance_id=None,
                     protocol_type="consumer", protocols=[protocol])


def txn_offset_commit(conn: BrokerConnection, pid: int, epoch: int, member: str, generation: int) -> int:
    R = TxnOffsetCommitRequest
    topic = R.TxnOffsetCommitRequestTopic(name="in", partitions=[R.TxnOffsetCommitRequestTopic.
                                          TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                                          committed_leader_epoch=-1,
                                                                          committed_metadata="")])
    r = conn.call(R, TxnOffsetCommitResponse, 5, transactional_id="t", group_id="g", producer_id=pid,
                  producer_epoch=epoch, generation_id=generation, member_id=member, group_instance_id=None,
                  topics=[topic])
    return int(r.topics[0].partitions[0].error_code)


def committed(conn: BrokerConnection) -> tuple[int, int]:
    r = conn.call(OffsetFetchRequest, OffsetFetchResponse, 7, group_id="g", require_stable=True,
                  topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="in", partition_indexes=[0])])
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)


def test_a_zombie_generation_is_fenced_and_offsets_wait_for_the_marker(conn: BrokerConnection) -> None:
    first = join(conn, "")
    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id
    member = first.member_id
    joined = join(conn, member)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, member)
    assignment = SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"in-0")
    synced = conn.call(SyncGroupRequest, SyncGroupResponse, 5, group_id="g", generation_id=1, member_id=member,
                       group_instance_id=None, protocol_type="consumer", protocol_name="range",
                       assignments=[assignment])
    assert (synced.error_code, synced.assignment) == (0, b"in-0")

    init = conn.call(InitProducerIdRequest, InitProducerIdResponse, 5, transactional_id="t",
                     transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    assert txn_offset_commit(conn, pid, epoch, member, 0) == ILLEGAL_GENERATION
    assert txn_offset_commit(conn, pid, epoch, "someone-else", 1) == UNKNOWN_MEMBER_ID
    assert committed(conn) == (0, -1)
    assert txn_offset_commit(conn, pid, epoch, member, 1) == 0
    assert committed(conn) == (UNSTABLE_OFFSET_COMMIT, -1)
    end = conn.call(EndTxnRequest, EndTxnResponse, 5, transactional_id="t", producer_id=pid, producer_epoch=epoch,
                    committed=True)
    assert end.error_code == 0 and end.producer_epoch == epoch + 1  # TV2: every transaction bumps the epoch
    assert committed(conn) == (0, 7)

    left = conn.call(LeaveGroupRequest, LeaveGroupResponse, 4, group_id="g", members=[
        LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)])
    assert left.error_code == 0 and left.members[0].error_code == 0
    beat = conn.call(HeartbeatRequest, HeartbeatResponse, 4, group_id="g", generation_id=1, member_id=member,
                     group_instance_id=None)
    assert beat.error_code == UNKNOWN_MEMBER_ID
