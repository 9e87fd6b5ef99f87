"""Issue 31's failover paths replay on the implementation in lock step: two failovers, and a slow failover through
a transaction log of two partitions (NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS, each partition loaded on
its own), random walks of their scenarios at both transaction versions, every answer compared."""

from __future__ import annotations

import pytest

from txnspec.conformance import generate as gen
from txnspec.conformance.replay import replay


@pytest.mark.parametrize("variant", ["current", "tv1"])
@pytest.mark.parametrize(("scenario", "kind"), [("failover-twice", "failover"),
                                                ("txn-log-loading", "load transaction-log partition")])
def test_two_failovers_and_the_loading_window_replay_on_the_implementation(scenario: str, kind: str,
                                                                           variant: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    walks = [t for t in (gen.random_walk(scenario, s, variant=variant) for s in range(30)) if kind in t.kinds()]
    assert len(walks) >= 10  # the step is taken, not merely allowed
    answered = set()
    for trace in walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail
        answered |= {e for step in trace.steps for e in (step.observation or {}).get("errors", [])}
    if scenario == "txn-log-loading":  # the windows were answered, and the implementation answered alike
        assert {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"} <= answered
