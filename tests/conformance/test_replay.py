"""Replay: spec against spec passes; a mutated trace or a mutated adapter diverges and shrinks."""

from __future__ import annotations

import dataclasses

import pytest

from txnspec.conformance import generate as gen
from txnspec.conformance.adapters.spec_adapter import MUTATIONS, SpecAdapter
from txnspec.conformance.replay import replay, shrink
from txnspec.conformance.traces import Trace


@pytest.mark.parametrize("scenario", ["tiny", "offsets", "retry", "failover"])
def test_spec_against_spec_passes(scenario: str) -> None:
    traces = gen.covering_traces(scenario) + [gen.random_walk(scenario, s) for s in range(10)]
    for trace in traces:
        verdict = replay(trace, SpecAdapter())
        assert verdict.ok, verdict.detail
        assert verdict.steps_run == len(trace)


def _mutated(trace: Trace, index: int) -> Trace:
    steps = list(trace.steps)
    observation = dict(steps[index].observation, errors=["PRODUCER_FENCED"])
    steps[index] = dataclasses.replace(steps[index], observation=observation)
    return trace.with_steps(steps)


@pytest.mark.quick
def test_a_hand_mutated_trace_diverges_and_shrinks() -> None:
    trace = gen.random_walk("offsets", 4)
    index = len(trace) - 2
    mutated = _mutated(trace, index)
    verdict = replay(mutated, SpecAdapter())
    assert not verdict.ok and verdict.divergence_step == index
    assert "observation.errors" in verdict.detail and "PRODUCER_FENCED" in verdict.detail
    small, small_verdict = shrink(mutated, SpecAdapter, recompute=False)
    assert not small_verdict.ok
    assert len(small) <= index + 1
    assert small.steps[-1].observation["errors"] == ["PRODUCER_FENCED"]


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_mutated_adapter_diverges_and_shrinks_to_a_minimal_trace(mutation: str) -> None:
    found = None
    for seed in range(40):
        trace = gen.random_walk("offsets", seed)
        if not replay(trace, SpecAdapter(mutation)).ok:
            found = trace
            break
    assert found is not None
    small, verdict = shrink(found, lambda: SpecAdapter(mutation))
    assert not verdict.ok and len(small) <= len(found)
    assert verdict.divergence_step == len(small) - 1
    assert replay(small, SpecAdapter()).ok  # the shrunk trace is a genuine spec trace
    # 1-minimal: dropping any single step makes it disabled or no longer diverging
    for i in range(len(small)):
        kept = [s.action for k, s in enumerate(small.steps) if k != i]
        try:
            candidate = gen.realize(small.scenario, small.variant, kept, trace_id="c")
        except ValueError:
            continue
        assert replay(candidate, SpecAdapter(mutation)).ok


def test_shrink_of_a_passing_trace_returns_it() -> None:
    trace = gen.random_walk("tiny", 1)
    same, verdict = shrink(trace, SpecAdapter())
    assert verdict.ok and same == trace


@pytest.mark.parametrize("scenario", [pytest.param("tiny", marks=pytest.mark.quick), "failover"])
def test_the_implementation_conforms(scenario: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    traces = gen.covering_traces(scenario) + [gen.random_walk(scenario, s) for s in range(20)]
    for trace in traces:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


@pytest.mark.parametrize("variant", ["current", "tv1"])
@pytest.mark.parametrize(("scenario", "kinds"), [
    ("loss", {"lose", "retry", "resend marker"}), ("append-failure", {"append fails"}), ("crash", {"crash"}),
    ("faults", {"lose", "append fails", "crash"})])
def test_lost_messages_failed_appends_and_crashes_replay_on_the_implementation(scenario: str, kinds: set[str],
                                                                              variant: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    walks = [gen.random_walk(scenario, s, variant=variant) for s in range(80)]
    for kind in kinds:  # each fault (and the recovery it forces) is taken by some of the walks
        assert any(kind in t.kinds() for t in walks), kind
    for trace in walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


@pytest.mark.parametrize("variant", ["current", "tv1"])
def test_an_expired_batch_replays_on_the_implementation(variant: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    traces = [t for t in (gen.random_walk("delayed-produce", s, variant=variant) for s in range(60))
              if "expire batch" in t.kinds()]
    assert len(traces) >= 10
    for trace in traces:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


def test_the_worked_example_of_a_user_written_adapter_runs() -> None:
    """conformance/replay.py's example adapter (typed actions only) replays 20 traces of tiny."""
    import doctest

    from txnspec.conformance import replay as replay_module

    failures, attempted = doctest.testmod(replay_module, raise_on_error=False)
    assert attempted >= 8 and failures == 0


@pytest.mark.parametrize("variant", ["current", "tv1"])
@pytest.mark.parametrize("scenario", ["in-flight-2", "in-flight-5"])
def test_the_implementation_conforms_with_several_batches_in_flight(scenario: str, variant: str) -> None:
    """The implementation's client with the scenario's max.in.flight: batches overtaken, retried in sequence
    order, and answered from the broker's duplicate window."""
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    traces = [gen.random_walk(scenario, s, variant=variant, max_steps=80) for s in range(40)]
    kinds = set().union(*(t.kinds() for t in traces))
    assert {"retry", "duplicate"} <= kinds
    for trace in traces:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


@pytest.mark.parametrize("variant", ["current", "tv1"])
def test_an_expired_batch_among_several_in_flight_replays_on_the_implementation(
        variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter
    from txnspec.spec.scenarios import SCENARIOS

    expiring = SCENARIOS["in-flight-2"].with_(name="in-flight-2-expiring", faults={"expire_batch": 1})
    monkeypatch.setitem(SCENARIOS, expiring.name, expiring)
    traces = [t for t in (gen.random_walk(expiring.name, s, variant=variant) for s in range(80))
              if "expire batch" in t.kinds()]
    assert len(traces) >= 10
    for trace in traces:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail
