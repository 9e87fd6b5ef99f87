"""KIP-939 in lock step: the 2PC scenarios' covering traces (every action kind and coordinator transition) and
random walks through prepareTransaction replay on the implementation with no divergence, at both transaction
versions; an implementation whose completeTransaction ignores the prepared state diverges."""

from __future__ import annotations

import pytest

from txnspec.conformance import generate as gen
from txnspec.conformance.replay import replay

TWO_PC_CALLS = {"prepareTransaction", "completeTransaction", "external coordinator decides commit",
                "external coordinator decides abort"}


@pytest.mark.parametrize("variant", ["current", "tv1"])
@pytest.mark.parametrize("scenario", ["two-phase-commit", "two-phase-recovery"])
def test_the_two_phase_scenarios_replay_on_the_implementation(scenario: str, variant: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    covering = gen.covering_traces(scenario, variant=variant)
    assert {k.value for t in covering for k in t.kinds()} >= TWO_PC_CALLS
    walks = [t for t in (gen.random_walk(scenario, s, variant=variant) for s in range(40))
             if "crash" in {k.value for k in t.kinds()} or scenario == "two-phase-commit"]
    assert len(walks) >= 10
    for trace in covering + walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


def test_a_complete_transaction_that_ignores_the_prepared_state_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter
    from txnspec.impl import client

    walks = [t for t in (gen.random_walk("two-phase-commit", s) for s in range(300))
             if {"external coordinator decides abort", "completeTransaction"} <= {k.value for k in t.kinds()}]
    assert walks
    monkeypatch.setattr(client.Producer, "complete_transaction", lambda self, state: self.tm.begin_commit())
    assert all(not replay(t, ImplAdapter()).ok for t in walks)
