"""Spec traces that once diverged on the implementation, one per class of difference that was settled,
and the trace field that settled the last one."""

from __future__ import annotations

import pytest

from txnspec.conformance.adapters.impl_adapter import ImplAdapter
from txnspec.conformance.generate import random_walk
from txnspec.conformance.replay import replay
from txnspec.conformance.traces import Step, Trace, from_itf, to_itf
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.messages import AddOffsetsToTxn, AddPartitionsToTxn
from txnspec.spec.network import producer_address, producer_index
from txnspec.spec.scenarios import SCENARIOS

REGRESSIONS = [
    ("retry", 3, "the client batched two records in one Produce and had two in flight per partition"),
    ("zombie", 8, "the coordinator completed a transaction when the marker was written, not answered"),
    ("retry", 32, "among duplicated Produce copies the adapter delivered another sequence"),
    ("default", 3, "a stale TxnOffsetCommit response stood in for the one the client awaited"),
    ("default", 1025, "a TV2 TxnOffsetCommit was verified although the offsets partition had the transaction open"),
    ("default", 1617, "a stale EndTxn copy was delivered where the spec delivered the retry, or the reverse"),
    ("default", 2624, "the first TxnOffsetCommit of a transaction duplicated during PrepareAbort"),
    ("default", 5543, "two answers to copies of one Produce: the adapter matched the error, not the epoch text"),
    ("large", 15, "the adapter dropped the markers the old coordinator had sent when it failed over"),
    ("loss", 32, "the spec re-sent a lost Produce while a TxnOffsetCommit was in flight (Kafka's Sender waits)"),
    ("faults", 46, "InitProducerId copies of a crashed and a new instance: the adapter matched the other one"),
    ("full-1", 207, "a transaction timeout of t2 aborted t1's open transaction too (the adapter timed out every id)"),
    ("full-1", 19, "the same, seen by t1's next Produce (NOT_ENOUGH_REPLICAS: its transaction was being aborted)"),
    ("full-1", 608, "the broker's epoch bound was Short.MAX_VALUE while the scenario's is 4: no producer-id rotation"),
    ("full-1", 906, "the same, seen by the other instance's TxnOffsetCommit (INVALID_PRODUCER_EPOCH, not _ID_MAPPING)"),
    ("full-1", 1000389, "after a failover the old and the new coordinator's markers to p0 were both answered: the "
                        "adapter delivered the new one's answer for the old one's (it did not match coordinator "
                        "epochs)"),
    ("full-1", 2000536, "the same, seen by the zombie's Produce (the transaction completed early in the "
                        "implementation)"),
]
# transaction version 1: the client's queue of AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit
TV1_REGRESSIONS = [
    ("multi-partition", 1000, "the spec's client marked a partition sent during an AddPartitionsToTxn as added"),
    ("default", 110, "the spec's client sent AddPartitionsToTxn before a TxnOffsetCommit queued earlier"),
    ("default", 109, "a re-enqueued AddPartitionsToTxn went ahead of the AddOffsetsToTxn queued before it"),
    ("default", 23, "commitTransaction queues the AddPartitionsToTxn of new partitions at once"),
    ("default", 35, "the first TxnOffsetCommit looks up the group coordinator and goes behind the queue"),
    ("default", 161, "two answers to copies of one AddPartitionsToTxn: the adapter matched the epoch text"),
    ("delayed-end-txn", 237, "the coordinator's abort of an abandoned transaction was not mapped"),
]


# "full-1": full as it was when those traces were found (one transaction per instance, no group members; issue 34
# widened it), so that each seed walks the same trace
FULL_1 = SCENARIOS["full"].with_(name="full-1", transactions_per_producer=1, group_members=False,
                                 faults={"duplicate": 1, "timeout": 1, "failover": 1})


@pytest.mark.parametrize(("scenario", "seed", "why"), REGRESSIONS)
def test_the_trace_replays_on_the_implementation(scenario: str, seed: int, why: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SCENARIOS, FULL_1.name, FULL_1)
    verdict = replay(random_walk(scenario, seed, max_steps=200), ImplAdapter())
    assert verdict.ok, f"{why}: {verdict.detail}"


@pytest.mark.parametrize(("scenario", "seed", "why"), TV1_REGRESSIONS)
def test_the_tv1_trace_replays_on_the_implementation(scenario: str, seed: int, why: str) -> None:
    verdict = replay(random_walk(scenario, seed, variant="tv1"), ImplAdapter())
    assert verdict.ok, f"{why}: {verdict.detail}"


def test_the_tv1_client_sends_the_oldest_queued_request_first() -> None:
    steps = [s.action for s in random_walk("default", 23, variant="tv1").steps]
    after_commit = steps[steps.index(Action(ActionKind.COMMIT_TRANSACTION, producer_address(0))):]
    sent = [type(a.body) for a in after_commit if a.is_delivery and a.source == producer_address(0)]
    # AddOffsetsToTxn was in flight at commitTransaction, which queued p1's AddPartitionsToTxn; the
    # TxnOffsetCommit queued by AddOffsetsToTxn's answer waits behind it
    assert next(r for r in sent if r is not AddOffsetsToTxn) is AddPartitionsToTxn


def test_deliveries_say_which_copy_was_delivered() -> None:
    trace = random_walk("default", 1617, max_steps=200)
    deliveries = [s for s in trace.steps if s.action.is_delivery and producer_index(s.source) is not None]
    assert deliveries and all(s.awaited is not None for s in deliveries)
    assert any(s.awaited is False for s in trace.steps)  # this trace delivers a stale duplicate
    assert all(s.awaited is None for s in trace.steps if not s.action.is_delivery)


def test_the_hint_survives_json_lines_and_itf() -> None:
    trace = random_walk("default", 1617, max_steps=200)
    assert Trace.from_json(trace.to_json()) == trace
    assert from_itf(to_itf(trace)) == trace
    with pytest.raises(Exception, match="'awaited' must be true, false or absent"):
        Step.from_json({"action": {"kind": "send", "actor": "producer-0", "partition": "p0", "awaited": "yes"},
                        "observation": {}}, "t", 0)
