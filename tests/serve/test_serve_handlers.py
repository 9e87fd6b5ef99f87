"""Well-formed requests with arbitrary field values (ids, epochs, offsets, names, timeouts) are answered with
Kafka's error codes by the broker side, never with an exception (which would close the client's connection)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from txnspec.serve.broker import Pending, ServeConfig, WireBroker
from txnspec.serve.dispatch import HANDLERS
from txnspec.serve.protocol import decode_request, encode_response

int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
small = st.integers(-2, 3)
names = st.sampled_from(["t", "", "other", "t.x", "a" * 300, "__consumer_offsets"])


def requests() -> st.SearchStrategy[Any]:
    add = AddPartitionsToTxnRequest
    commit = TxnOffsetCommitRequest
    fetch = FetchRequest
    return st.one_of(
        st.builds(lambda tid, t, p, e: InitProducerIdRequest(version=5, transactional_id=tid, transaction_timeout_ms=t,
                                                             producer_id=p, producer_epoch=e),
                  st.one_of(st.none(), names), int32, st.one_of(small, int64), st.one_of(small, int16)),
        st.builds(lambda tid, p, e, topic, part: add(version=3, v3_and_below_transactional_id=tid,
                                                     v3_and_below_producer_id=p, v3_and_below_producer_epoch=e,
                                                     v3_and_below_topics=[add.AddPartitionsToTxnTopic(
                                                         name=topic, partitions=[part])]),
                  names, st.one_of(small, int64), st.one_of(small, int16), names, st.one_of(small, int32)),
        st.builds(lambda tid, p, e, g: AddOffsetsToTxnRequest(version=3, transactional_id=tid, producer_id=p,
                                                              producer_epoch=e, group_id=g),
                  names, st.one_of(small, int64), st.one_of(small, int16), names),
        st.builds(lambda tid, p, e, c, v: EndTxnRequest(version=v, transactional_id=tid, producer_id=p,
                                                        producer_epoch=e, committed=c),
                  names, st.one_of(small, int64), st.one_of(small, int16), st.booleans(), st.sampled_from([1, 4, 5])),
        st.builds(lambda tid, g, p, e, gen, member, off, part: commit(
            version=5, transactional_id=tid, group_id=g, producer_id=p, producer_epoch=e, generation_id=gen,
            member_id=member, group_instance_id=None, topics=[commit.TxnOffsetCommitRequestTopic(
                name="t", partitions=[commit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=part, committed_offset=off, committed_leader_epoch=-1,
                    committed_metadata=None)])]),
            names, names, st.one_of(small, int64), st.one_of(small, int16), small, names, int64, small),
        st.builds(lambda off, part, iso, wait: fetch(
            version=12, replica_id=-1, max_wait_ms=wait, min_bytes=0, max_bytes=1 << 20, isolation_level=iso,
            session_id=0, session_epoch=-1, topics=[fetch.FetchTopic(topic="t", partitions=[
                fetch.FetchTopic.FetchPartition(partition=part, current_leader_epoch=-1, fetch_offset=off,
                                                log_start_offset=-1, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id=""),
            st.one_of(small, int64), small, st.integers(0, 1), st.integers(-5, 0)),
        st.builds(lambda ts, part: ListOffsetsRequest(version=7, replica_id=-1, isolation_level=1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[ListOffsetsRequest.ListOffsetsTopic.
                                                ListOffsetsPartition(partition_index=part, current_leader_epoch=-1,
                                                                     timestamp=ts)])]),
            st.one_of(small, int64), small),
        st.builds(lambda g: OffsetFetchRequest(version=7, group_id=g, topics=None, require_stable=True), names),
        st.builds(lambda g, gen, m: HeartbeatRequest(version=4, group_id=g, generation_id=gen, member_id=m,
                                                     group_instance_id=None), names, small, names),
        st.builds(lambda g, gen, m: SyncGroupRequest(version=5, group_id=g, generation_id=gen, member_id=m,
                                                     group_instance_id=None, protocol_type="consumer",
                                                     protocol_name="range", assignments=[]), names, small, names),
        st.builds(lambda g, s, r, m: JoinGroupRequest(version=5, group_id=g, session_timeout_ms=s,
                                                      rebalance_timeout_ms=r, member_id=m, group_instance_id=None,
                                                      protocol_type="consumer", protocols=[]),
                  names, small, small, names),
    )


BROKER = WireBroker(ServeConfig(port=9092, topics=("t:2",)), HANDLERS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_any_field_values_get_an_answer_not_an_exception(message: Any) -> None:
    message.with_header(correlation_id=3, client_id="fuzz")
    request = decode_request(bytes(message.encode(header=True)))
    response = BROKER.handle(request)
    if isinstance(response, Pending):
        response = response.poll() or response.expire()
    assert encode_response(request, response)
