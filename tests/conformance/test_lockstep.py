"""Lock-step conformance on --adapter impl: a wrong trace diverges, naming the message field or the abstract
component and field that differ (issue 29)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from txnspec.conformance.abstraction import compare, of_spec
from txnspec.conformance.adapters.impl_adapter import ImplAdapter
from txnspec.conformance.adapters.spec_adapter import SpecAdapter
from txnspec.conformance.generate import random_walk
from txnspec.conformance.mutation import mutation_score
from txnspec.conformance.replay import replay
from txnspec.conformance.trace_mutants import _body_mutants, trace_mutation_score
from txnspec.conformance.traces import Step, Trace
from txnspec.spec.values import replace


def _with_step(trace: Trace, i: int, step: Step) -> Trace:
    steps = list(trace.steps)
    steps[i] = step
    return trace.with_steps(steps)


def _first_delivery(trace: Trace, body_type: str) -> int:
    return next(i for i, s in enumerate(trace.steps)
                if s.action.is_delivery and type(s.action.body).__name__ == body_type)


def test_the_walks_used_here_pass_on_both_adapters() -> None:
    for scenario, seed in (("zombie", 3), ("default", 5), ("offsets", 1)):
        trace = random_walk(scenario, seed)
        assert replay(trace, ImplAdapter()).ok and replay(trace, SpecAdapter()).ok


def test_a_delivery_of_a_message_nobody_sent_names_the_field() -> None:
    trace = random_walk("zombie", 3)
    i = _first_delivery(trace, "InitProducerId")
    step = trace.steps[i]
    body = replace(step.action.body, transactional_id="zz")
    mutated = _with_step(trace, i, Step(step.action._replace(message=replace(step.action.message, body=body)),
                                        step.observation, step.abstract))
    verdict = replay(mutated, ImplAdapter())
    assert not verdict.ok and verdict.divergence_step == i
    assert "InitProducerId.transactional_id: trace 'zz', impl 't1'" in verdict.detail


def test_a_delivery_of_a_type_nothing_in_flight_has_says_none_in_flight() -> None:
    trace = random_walk("zombie", 3)
    i = _first_delivery(trace, "InitProducerId")
    early = trace.with_steps([trace.steps[i]])  # delivered before any initTransactions
    verdict = replay(early, ImplAdapter())
    assert not verdict.ok
    assert "InitProducerId.transactional_id: trace 't1', impl has none in flight" in verdict.detail


def test_a_reordered_trace_diverges_on_the_implementation() -> None:
    trace = random_walk("zombie", 3)
    for i in (3, 12):
        steps = list(trace.steps)
        steps[i], steps[i + 1] = steps[i + 1], steps[i]
        verdict = replay(trace.with_steps(steps), ImplAdapter())
        assert not verdict.ok and verdict.divergence_step == i, (i, verdict.detail)


def test_deleted_sent_messages_diverge_naming_the_message() -> None:
    trace = random_walk("zombie", 3)
    step = trace.steps[0]
    verdict = replay(_with_step(trace, 0, Step(step.action, {**step.observation, "sent": []}, step.abstract)),
                     ImplAdapter())
    assert not verdict.ok and verdict.divergence_step == 0
    assert "observation.sent producer-0->coordinator: InitProducerId(t1, pid=-1, epoch=-1): the trace has no such " \
           "message in this step (impl sent it)" in verdict.detail


def test_an_edited_abstract_state_names_component_and_field() -> None:
    trace = random_walk("zombie", 3)
    i = next(i for i, s in enumerate(trace.steps) if s.abstract and s.abstract["coordinator"])
    step = trace.steps[i]
    assert step.abstract is not None
    entry = step.abstract["coordinator"]["t1"]
    abstract = {**step.abstract, "coordinator": {"t1": {**entry, "producer_epoch": entry["producer_epoch"] + 7}}}
    verdict = replay(_with_step(trace, i, Step(step.action, step.observation, abstract)), ImplAdapter())
    assert not verdict.ok and verdict.divergence_step == i
    assert f"abstract.coordinator[t1].producer_epoch: spec {entry['producer_epoch'] + 7}, impl " \
           f"{entry['producer_epoch']}" in verdict.detail


@pytest.mark.parametrize(("scenario", "seed"), [("zombie", 3), ("default", 5), ("offsets", 1), ("loss", 2)])
def test_every_single_field_body_mutation_diverges_naming_the_field(scenario: str, seed: int) -> None:
    trace = random_walk(scenario, seed, max_steps=60)
    rng = random.Random(0)
    mutants = [m for i, s in enumerate(trace.steps) if s.action.message is not None
               for m in _body_mutants(trace, i, rng)]
    assert len(mutants) >= 30
    named = 0
    for mutant in mutants:
        verdict = replay(mutant.trace, ImplAdapter())
        _, index, field = mutant.where.split(" ")  # "step 4 InitProducerId.producer_epoch"
        assert not verdict.ok and verdict.divergence_step == int(index), (mutant.where, verdict.detail)
        # the changed field, unless the changed body is another message in flight (a duplicate's answer with the
        # other epoch): then that one is delivered and the step's effect differs, named by component and field
        assert field in verdict.detail or "abstract." in verdict.detail, (mutant.where, verdict.detail)
        named += field in verdict.detail
    assert named >= len(mutants) - 2


def test_a_component_the_adapter_does_not_return_is_a_divergence_unless_its_table_names_it() -> None:
    trace = random_walk("tiny", 0)

    class Partial(ImplAdapter):
        def abstract_state(self):  # type: ignore[no-untyped-def]
            return {k: v for k, v in super().abstract_state().items() if k != "group"}

    verdict = replay(trace, Partial())
    assert not verdict.ok and verdict.divergence_step == 0
    assert "abstract.group: spec (present), impl (not returned by the adapter)" in verdict.detail

    class Declared(Partial):
        abstraction_differences = {"group": "this system has no group coordinator"}  # noqa: RUF012

    assert replay(trace, Declared()).ok


def test_the_abstraction_compares_every_component_of_the_spec() -> None:
    from txnspec.spec import system as sysm
    from txnspec.spec.model import build_system

    state = sysm.initial_state(build_system("offsets"))
    abstract = of_spec(state)
    assert set(abstract) == {"coordinator", "txn_log", "partitions", "group", "producers"}
    assert set(abstract["partitions"]) == {"p0", "__consumer_offsets-3"}
    edited = {**abstract, "partitions": {**abstract["partitions"],
                                         "p0": {**abstract["partitions"]["p0"], "lso": 4}}}
    assert compare(abstract, edited) == "partitions[p0].lso: spec 0, impl 4"
    assert compare(abstract, edited, {"partitions.*.lso": "reason"}) is None


def test_trace_mutants_are_all_killed_on_both_adapters() -> None:
    pool = [random_walk(s, 0, max_steps=40) for s in ("zombie", "offsets", "retry", "in-flight-2")]
    out = trace_mutation_score(pool, {"spec": SpecAdapter, "impl": ImplAdapter}, per_operator=2)
    assert out["mutants"] == 117 and out["equivalent"] == 3
    assert out["equivalent_reasons"] == ["drop: the rest is itself a trace of the spec (a prefix, or a step nothing "
                                         "after it depends on)"]
    for name in ("spec", "impl"):
        assert out["adapters"][name]["score"] == "114/114", out["adapters"][name]["survivors"]
    assert out["false_alarms"] == {"spec": [], "impl": []}


def test_the_impl_mutants_of_what_is_sent_or_held_are_killed_naming_what_differs() -> None:
    results = {r.mutant: r for r in mutation_score(("default",), 3, mutants=(
        "end-txn-response-stale-epoch", "marker-coordinator-epoch-ahead", "stale-sequence-kept"))}
    assert all(r.detected for r in results.values())
    assert "EndTxnResponse.producer_epoch" in results["end-txn-response-stale-epoch"].detail
    assert "coordinator_epoch" in results["marker-coordinator-epoch-ahead"].detail \
        or "context:" in results["marker-coordinator-epoch-ahead"].detail
    assert "abstract.partitions[p1].producers[0].batches" in results["stale-sequence-kept"].detail


def test_messages_map_field_by_field() -> None:
    """The typed mapping of impl messages onto the spec's: every field of every request type is mapped."""
    from txnspec.conformance.adapters import impl_messages
    from txnspec.impl import messages as implm
    from txnspec.impl.txn_markers import TxnMarker

    assert set(impl_messages.REQUESTS) == {implm.InitProducerId, implm.AddPartitionsToTxn, implm.AddOffsetsToTxn,
                                           implm.TxnOffsetCommit, implm.EndTxn, implm.Produce, TxnMarker}
    assert set(impl_messages.RESPONSES) == set(impl_messages.REQUESTS) - {TxnMarker}
    assert all(dataclasses.is_dataclass(t) for t in impl_messages.REQUESTS)


def test_the_group_coordinators_transactional_offsets_batch_starts_at_sequence_0() -> None:
    """Found by the lock-step abstraction: the spec wrote the TxnOffsetCommit batch of __consumer_offsets with base
    sequence -1, the implementation (as Kafka's CoordinatorRuntime.maybeAllocateNewBatch, which builds the batch
    with baseSequence 0) with 0. Pinned on both sides."""
    trace = random_walk("offsets", 1)
    i = _first_delivery(trace, "TxnOffsetCommit")
    assert replay(trace, ImplAdapter()).ok
    abstract = trace.steps[i].abstract
    assert abstract is not None
    batch = abstract["partitions"]["__consumer_offsets-3"]["log"][0]
    # [base offset, last offset, pid, epoch, base seq, last seq, transactional, control, coordinator epoch]
    assert batch[4:7] == [0, 0, True]
    impl = ImplAdapter()
    impl.reset(trace.scenario, trace.variant)
    for step in trace.steps[:i + 1]:
        impl.apply(step)
    assert impl.abstract_state()["partitions"]["__consumer_offsets-3"]["log"][0][4:7] == [0, 0, True]
