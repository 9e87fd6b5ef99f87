"""Spec traces that once diverged on the implementation, one per class of difference that was settled,
and the trace field that settled the last one."""

from __future__ import annotations

import pytest

from txnspec.conformance.adapters.impl_adapter import ImplAdapter
from txnspec.conformance.generate import random_walk
from txnspec.conformance.replay import replay
from txnspec.conformance.traces import Step, Trace, from_itf, to_itf

REGRESSIONS = [
    ("retry", 3, "the client batched two records in one Produce and had two in flight per partition"),
    ("zombie", 8, "the coordinator completed a transaction when the marker was written, not answered"),
    ("retry", 32, "among duplicated Produce copies the adapter delivered another sequence"),
    ("default", 3, "a stale TxnOffsetCommit response stood in for the one the client awaited"),
    ("default", 1025, "a TV2 TxnOffsetCommit was verified although the offsets partition had the transaction open"),
    ("default", 1617, "a stale EndTxn copy was delivered where the spec delivered the retry, or the reverse"),
    ("default", 2624, "the first TxnOffsetCommit of a transaction duplicated during PrepareAbort"),
    ("default", 5543, "two answers to copies of one Produce: the adapter matched the error, not the epoch text"),
]


@pytest.mark.parametrize(("scenario", "seed", "why"), REGRESSIONS)
def test_the_trace_replays_on_the_implementation(scenario: str, seed: int, why: str) -> None:
    verdict = replay(random_walk(scenario, seed, max_steps=200), ImplAdapter())
    assert verdict.ok, f"{why}: {verdict.detail}"


def test_deliveries_say_which_copy_was_delivered() -> None:
    trace = random_walk("default", 1617, max_steps=200)
    deliveries = [s for s in trace.steps if s.kind.startswith("deliver ") and "->producer-" not in s.action
                  and s.source.startswith("producer-")]
    assert deliveries and all(s.awaited is not None for s in deliveries)
    assert any(s.awaited is False for s in trace.steps)  # this trace delivers a stale duplicate
    assert all(s.awaited is None for s in trace.steps if not s.kind.startswith("deliver "))


def test_the_hint_survives_json_lines_and_itf() -> None:
    trace = random_walk("default", 1617, max_steps=200)
    assert Trace.from_json(trace.to_json()) == trace
    assert from_itf(to_itf(trace)) == trace
    with pytest.raises(Exception, match="'awaited' must be true, false or absent"):
        Step.from_json({"action": "a", "kind": "k", "observation": {}, "awaited": "yes"}, "t", 0)
