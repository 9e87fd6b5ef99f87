"""Bad input: every request and API call is validated; the answer is an error code or a documented
exception (InvalidRequestError / Kafka's client exceptions), and the cluster keeps working afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txnspec.impl.broker import Broker, BrokerConfig
from txnspec.impl.client import Producer
from txnspec.impl.cluster import Cluster
from txnspec.impl.errors import Errors, IllegalStateException, InvalidRequestError
from txnspec.impl.log import ControlType, Record
from txnspec.impl.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    CoordinatorType,
    EndTxn,
    Fetch,
    FindCoordinator,
    InitProducerId,
    OffsetFetch,
    Produce,
    TxnOffsetCommit,
)
from txnspec.impl.partition import IsolationLevel, Partition

WEIRD: list[Any] = [None, True, "x", 1.5, -2, -1, 0, 1, 2, 100, 32766, 32767, 32768, 2**31, 2**63, -(2**63) - 1]
tids = st.sampled_from([None, "", "a", "b", 7])
pids = st.sampled_from([-1, 0, 1, 2, 3, *WEIRD])
epochs = st.sampled_from([-1, 0, 1, 2, 32766, 32767, *WEIRD])
parts = st.sampled_from(["t-0", "t-1", "u-0", "bad", "", "-1", 5, "__consumer_offsets-3"])
records = st.one_of(st.lists(st.builds(Record, st.sampled_from([None, "k", b"k"]),
                                       st.sampled_from([None, "v", b"\x00" * 3])), min_size=0, max_size=3)
                    .map(tuple), st.sampled_from([(), ("x",), (Record(value=5),), None]))  # type: ignore[arg-type]

requests = st.one_of(
    st.builds(FindCoordinator, st.sampled_from(list(CoordinatorType)), st.sampled_from(["a", 3])),
    st.builds(InitProducerId, tids, st.sampled_from([1, 1000, 0, -5, 10**12, "1"]), pids, epochs),
    st.builds(AddPartitionsToTxn, tids, pids, epochs, st.lists(parts, max_size=3).map(tuple)),
    st.builds(AddOffsetsToTxn, tids, pids, epochs, st.sampled_from(["g", "", 1])),
    st.builds(TxnOffsetCommit, tids, st.sampled_from(["g", ""]), pids, epochs,
              st.lists(st.tuples(parts, st.sampled_from([0, 5, -1, "x"])), max_size=2).map(tuple)),
    st.builds(EndTxn, tids, pids, epochs, st.sampled_from([ControlType.COMMIT, ControlType.ABORT, "COMMIT"]),
              st.sampled_from([0, 1, 2, 3, -1])),
    st.builds(Produce, parts, pids, epochs, st.sampled_from([-1, 0, 1, 5, 2**31 - 1, 2**31, "0"]), records,
              st.sampled_from([True, False, 1]), tids, st.sampled_from([0, 2, 9])),
    st.builds(Fetch, parts, st.sampled_from([0, 1, 10**6, -1, "0"]),
              st.sampled_from([IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED, "RC"])),
    st.builds(OffsetFetch, st.sampled_from(["g", ""]), st.lists(parts, max_size=2).map(tuple)),
    st.sampled_from([object(), "InitProducerId", None]),
)


def committed_view(broker: Broker) -> dict[str, list[int]]:
    return {name: [b.base_offset for b in p.read(0, IsolationLevel.READ_COMMITTED).batches]
            for name, p in broker.partitions.items() if not name.startswith("__")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(requests, st.booleans(), st.integers(0, 70_000)), max_size=25),
       st.sampled_from([0, 2]))
def test_fuzzed_requests_get_error_codes_and_lose_nothing(steps: list[tuple[Any, bool, int]], tv: int) -> None:
    cluster = Cluster(transaction_version=tv)
    broker = cluster.broker
    now = 0
    for request, deliver, dt in steps:
        before = committed_view(broker)
        response = broker.handle(request, now)
        assert isinstance(response.error, Errors)
        if deliver:
            broker.deliver_markers(now)
        now += dt
        broker.tick(now)
        after = committed_view(broker)
        for name, offsets in before.items():
            assert after[name][:len(offsets)] == offsets, f"{name} lost committed data"
    # and the cluster still works
    cluster.now_ms = now
    p = cluster.producer("fresh-app")
    p.init_transactions()
    p.begin_transaction()
    p.send("fresh-0", "ok")
    p.commit_transaction()
    assert [r.value for r in cluster.read("fresh-0")] == ["ok"]


def test_malformed_requests_are_answered_invalid_request_with_a_reason() -> None:
    broker = Broker(BrokerConfig())
    r = broker.handle(InitProducerId("a", 1000, -7, 0), 0)
    assert r.error is Errors.INVALID_REQUEST and "producer_id" in str(r.extra["message"])
    r = broker.handle(Produce("t-0", 1, 40000, 0, (Record(value="v"),), False), 0)
    assert r.error is Errors.INVALID_REQUEST and "producer_epoch" in str(r.extra["message"])
    assert broker.handle(Produce("t-0", 1, 0, 0, (), False), 0).error is Errors.INVALID_REQUEST


def test_an_oversize_batch_is_message_too_large_and_nothing_is_written() -> None:
    p = Partition("t-0", max_message_bytes=100)
    assert p.append_records(-1, -1, -1, [Record(value="x" * 200)]).error is Errors.MESSAGE_TOO_LARGE
    assert p.log_end_offset == 0
    assert p.append_records(-1, -1, -1, [Record(value="x")]).error is Errors.NONE


@pytest.mark.parametrize("bad", [
    lambda p: p.send("", "v"), lambda p: p.send("t-0", 5), lambda p: p.send_offsets_to_transaction({"t-0": -1}, "g"),
    lambda p: p.send_offsets_to_transaction({"t-0": 1}, ""),
])
def test_bad_api_arguments_raise_invalid_request_error(bad: Any) -> None:
    p = Producer("app")
    with pytest.raises(InvalidRequestError):
        bad(p)


def test_api_calls_in_the_wrong_state_raise_illegal_state_and_change_nothing() -> None:
    p = Producer("app")
    for call in (p.begin_transaction, p.commit_transaction, p.abort_transaction):
        with pytest.raises(IllegalStateException):
            call()
    assert p.state.value == "UNINITIALIZED"
    with pytest.raises(InvalidRequestError):
        Producer("")
    with pytest.raises(InvalidRequestError):
        Cluster().advance(-1)
