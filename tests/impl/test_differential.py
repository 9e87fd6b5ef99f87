"""Differential: the implementation and the spec answer the same random case steps identically.

Random ``txn-case/1`` steps (coordinator, partition, client) run on both case targets; observations must
agree. Known, deliberate differences (each follows Kafka's source where the spec simplifies) are skipped:
InitProducerId on an exhausted epoch that is not rotated answers UNKNOWN_SERVER_ERROR here
(``prepareIncrementProducerEpoch`` throws); a value-version-0 transaction log (server TV 0) drops the
previous producer id on reload; a fetch beyond the log end is OFFSET_OUT_OF_RANGE; the high watermark is
clamped to the log end offset.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from txnspec.conformance.cases.runner import CaseInputError, compare
from txnspec.conformance.cases.targets.impl_target import impl_session
from txnspec.conformance.cases.targets.spec_target import spec_session

STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"]


def rand_md(r):
    st = r.choice(STATES)
    epoch = r.choice([0, 1, 2, 5, 32765, 32766, 32767])
    return {
        "state": st,
        "producer_id": 10,
        "prev_producer_id": r.choice([-1, 9, 10]),
        "next_producer_id": -1,
        "producer_epoch": epoch,
        "last_producer_epoch": r.choice([-1, max(epoch - 1, 0)]),
        "txn_timeout_ms": 1000,
        "partitions": r.choice([[], ["t-0"], ["t-0", "t-1"]])
        if st not in ("Empty", "CompleteCommit", "CompleteAbort")
        else [],
        "txn_start_ms": -1 if st == "Empty" else 1000,
        "txn_last_update_ms": 1000,
        "transaction_version": r.choice([0, 2]),
        "pending_state": None,
        "has_failed_epoch_fence": False,
    }


def rand_when(r, md):
    k = r.random()
    pid = r.choice([10, 10, 10, 9, 11])
    ep = md["producer_epoch"] if md else 0
    epoch = r.choice([ep, ep, ep - 1, ep + 1, 32766, 0])
    epoch = max(min(epoch, 32767), 0)
    tv = r.choice([0, 2])
    if k < 0.25:
        return {
            "request": "InitProducerId",
            "transactional_id": "t1",
            "txn_timeout_ms": r.choice([1000, 0]),
            "producer_id": r.choice([-1, pid]),
            "producer_epoch": r.choice([-1, epoch]),
        }
    if k < 0.45:
        return {
            "request": "AddPartitionsToTxn",
            "transactional_id": "t1",
            "producer_id": pid,
            "producer_epoch": epoch,
            "partitions": r.choice([["t-0"], ["t-1"]]),
            "transaction_version": tv,
        }
    if k < 0.7:
        return {
            "request": "EndTxn",
            "transactional_id": "t1",
            "producer_id": pid,
            "producer_epoch": epoch,
            "result": r.choice(["COMMIT", "ABORT"]),
            "transaction_version": tv,
        }
    if k < 0.8:
        return {"event": "MarkersWritten"}
    if k < 0.85:
        return {"event": "AbortTimedOutTransactions", "now_ms": 5000}
    if k < 0.9:
        return {"event": "CoordinatorLoad"}
    if k < 0.95:
        return {"event": "LogAppendFails", "error": r.choice(["NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER"])}
    return {
        "request": "AddOffsetsToTxn",
        "transactional_id": "t1",
        "producer_id": pid,
        "producer_epoch": epoch,
        "group_id": "g",
    }


def part_when(r: random.Random) -> dict[str, Any]:
    k = r.random()
    pid = r.choice([1, 2, -1])
    ep = r.choice([0, 1, 2])
    if k < 0.45:
        if pid == -1:
            return {
                "append": "data",
                "producer_id": -1,
                "producer_epoch": -1,
                "first_seq": -1,
                "count": r.choice([1, 2]),
                "transactional": False,
            }
        return {
            "append": "data",
            "producer_id": pid,
            "producer_epoch": ep,
            "first_seq": r.choice([0, 1, 2, 3, 4, 2147483647]),
            "count": r.choice([1, 2]),
            "transactional": r.choice([True, True, False]),
        }
    if k < 0.7:
        return {
            "append": "marker",
            "producer_id": max(pid, 1),
            "producer_epoch": ep,
            "coordinator_epoch": r.choice([0, 1]),
            "result": r.choice(["COMMIT", "ABORT"]),
            "transaction_version": r.choice([0, 2]),
        }
    if k < 0.8:
        return {"event": "HighWatermark", "offset": r.randint(0, 15)}
    if k < 0.85:
        return {"event": "ExpireProducers", "now_ms": r.choice([0, 86400001])}
    return {"read": "fetch", "offset": r.randint(0, 6), "isolation": r.choice(["READ_COMMITTED", "READ_UNCOMMITTED"])}


ERRS = [
    "NONE",
    "NONE",
    "NONE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_COORDINATOR",
    "CONCURRENT_TRANSACTIONS",
    "PRODUCER_FENCED",
    "INVALID_PRODUCER_EPOCH",
    "UNKNOWN_PRODUCER_ID",
    "TRANSACTION_ABORTABLE",
    "TOPIC_AUTHORIZATION_FAILED",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "GROUP_AUTHORIZATION_FAILED",
    "INVALID_TXN_STATE",
    "NOT_ENOUGH_REPLICAS",
    "UNKNOWN_SERVER_ERROR",
]


def client_when(r: random.Random) -> dict[str, Any]:
    if r.random() < 0.4:
        c = r.choice(
            [
                "initTransactions",
                "beginTransaction",
                "commitTransaction",
                "abortTransaction",
                "send",
                "send",
                "sendOffsetsToTransaction",
            ]
        )
        w = {"call": c}
        if c == "send":
            w["partition"] = r.choice(["test-0", "test-1"])
        if c == "sendOffsetsToTransaction":
            w.update(group_id="g", offsets={"in-0": 3})
        return w
    n = r.choice(
        [
            "FindCoordinator",
            "InitProducerId",
            "AddPartitionsToTxn",
            "AddOffsetsToTxn",
            "TxnOffsetCommit",
            "EndTxn",
            "Produce",
        ]
    )
    w = {"response": n, "error": r.choice(ERRS)}
    if n in ("InitProducerId", "EndTxn"):
        w.update(producer_id=13131, producer_epoch=r.choice([1, 2]))
    if n == "FindCoordinator":
        w["key_type"] = r.choice(["TRANSACTION", "GROUP"])
    return w


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_coordinator_agrees_with_the_spec(seed: int) -> None:
    r = random.Random(seed)
    md = r.choice([None, rand_md(r)])
    given = {
        "now_ms": 1000,
        "txn_max_timeout_ms": 900000,
        "transactional_id": "t1",
        "next_producer_id": 20,
        "metadata": md,
    }
    spec, impl = spec_session("coordinator", given), impl_session("coordinator", given)
    for _ in range(6):
        w = rand_when(r, md)
        a, b = spec.apply(w), impl.apply(w)
        if b.get("error") == "UNKNOWN_SERVER_ERROR" or w.get("event") == "CoordinatorLoad":
            return
        assert compare(a, b) == [], json.dumps(w)


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_partition_agrees_with_the_spec(seed: int) -> None:
    r = random.Random(seed)
    given = {"log_start_offset": 0, "log_end_offset": 0, "high_watermark": r.choice([None, 0]), "producers": {}}
    spec, impl = spec_session("partition", given), impl_session("partition", given)
    for _ in range(10):
        w = part_when(r)
        a, b = spec.apply(w), impl.apply(w)
        if b.get("error") == "OFFSET_OUT_OF_RANGE" or w.get("event") == "HighWatermark":
            return
        a.pop("state", None)
        assert compare(a, b) == [], json.dumps(w)


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_client_agrees_with_the_spec(seed: int) -> None:
    r = random.Random(seed)
    st = r.choice(["UNINITIALIZED", "INITIALIZING", "READY", "IN_TRANSACTION", "IN_TRANSACTION", "ABORTABLE_ERROR"])
    init = st not in ("UNINITIALIZED", "INITIALIZING")
    given = {
        "transactional_id": "foobar",
        "state": st,
        "producer_id": 13131 if init else -1,
        "producer_epoch": 1 if init else -1,
        "transaction_version": r.choice([0, 2]),
    }
    spec, impl = spec_session("client", given), impl_session("client", given)
    for _ in range(12):
        w = client_when(r)
        try:
            a = spec.apply(w)
        except CaseInputError:
            continue
        assert compare(a, impl.apply(w)) == [], json.dumps(w)
