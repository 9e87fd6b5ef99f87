"""Trace format: JSON Lines and ITF round trips, and clear errors for malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.conformance import traces as tr
from txnspec.conformance.action_codec import action_from_json, action_to_json
from txnspec.conformance.adapters.spec_adapter import SpecAdapter
from txnspec.conformance.generate import random_walk
from txnspec.conformance.replay import replay
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.network import producer_address


@pytest.fixture(scope="module")
def sample() -> list[tr.Trace]:
    return [random_walk("tiny", seed) for seed in range(3)] + [random_walk("offsets", 5)]


@pytest.mark.quick
def test_jsonl_round_trip(sample: list[tr.Trace], tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    assert tr.write_jsonl(sample, path) == len(sample)
    loaded = tr.load_jsonl(path)
    assert loaded.errors == ()
    assert list(loaded.traces) == sample
    # canonical: writing again gives the same bytes
    assert tr.dumps_jsonl(loaded.traces) == path.read_text(encoding="utf-8")
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first["format"] == "txnspec-trace/2"
    assert first["steps"][0]["action"] == {"kind": "initTransactions", "actor": "producer-0"}
    assert first["steps"][0]["label"] == "producer-0.initTransactions()"


def test_actions_are_stored_as_data_with_every_field_of_their_message(sample: list[tr.Trace]) -> None:
    produce = next(s for t in sample for s in t.steps if s.kind is ActionKind.DELIVER_PRODUCE)
    stored = produce.to_json()["action"]
    assert stored["kind"] == "deliver Produce" and stored["actor"] == "p0" and stored["awaited"] is True
    message = stored["message"]
    assert (message["source"], message["target"], message["context"]) == ("producer-0", "p0", ["p0", 0, 0, 0])
    assert message["body"] == {"type": "Produce", "partition": "p0", "producer_id": 0, "producer_epoch": 0,
                               "base_sequence": 0, "record_count": 1, "transactional": True,
                               "transactional_id": "t1"}
    assert action_from_json(stored) == produce.action  # equal to the spec's own action, hence found by equality
    for trace in sample:  # every action of every kind taken comes back equal
        assert [action_from_json(action_to_json(s.action)) for s in trace.steps] == [s.action for s in trace.steps]


def test_a_version_1_trace_is_refused_naming_its_version(sample: list[tr.Trace], tmp_path: Path) -> None:
    old = {**sample[0].to_json(), "format": "txnspec-trace/1",
           "steps": [{"action": "producer-0.initTransactions()", "kind": "initTransactions", "observation": {}}]}
    loaded = tr.loads_jsonl(json.dumps(old), "old.jsonl")
    assert loaded.traces == ()
    (error,) = loaded.errors
    assert "'txnspec-trace/1'" in str(error) and "no longer read" in str(error) and sample[0].id in str(error)
    document = tr.to_itf(sample[0])
    document["#meta"]["txnspec-format"] = "txnspec-trace/1"
    with pytest.raises(tr.TraceError, match="'txnspec-trace/1' is no longer read"):
        tr.from_itf(document)


@pytest.mark.quick
def test_a_malformed_action_names_the_field(sample: list[tr.Trace]) -> None:
    for mangle, expected in ((lambda a: a.update(kind="deliver Gossip"), "unknown action kind 'deliver Gossip'"),
                             (lambda a: a["message"]["body"].update(type="Gossip"), "unknown message type 'Gossip'"),
                             (lambda a: a["message"]["body"].pop("partition"), "bad Produce message")):
        data = next(t.to_json() for t in sample if ActionKind.DELIVER_PRODUCE in t.kinds())
        step = next(s for s in data["steps"] if s["action"]["kind"] == "deliver Produce")
        mangle(step["action"])
        loaded = tr.loads_jsonl(json.dumps(data))
        assert expected in str(loaded.errors[0])


def test_itf_round_trip(sample: list[tr.Trace], tmp_path: Path) -> None:
    for trace in sample:
        path = tmp_path / "t.itf.json"
        tr.write_itf(trace, path)
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["states"][0]["mbt::actionTaken"] == "init"
        assert [s["mbt::actionTaken"] for s in document["states"][1:]] == [s.kind for s in trace.steps]
        assert tr.read_itf(path) == trace


def test_malformed_lines_are_reported_and_the_others_load(sample: list[tr.Trace]) -> None:
    good = sample[0].to_line()
    unknown_version = json.dumps({**sample[1].to_json(), "format": "txnspec-trace/9"})
    missing_kind = sample[2].to_json()
    del missing_kind["steps"][3]["action"]["kind"]
    text = "\n".join([good, "{not json", unknown_version, json.dumps(missing_kind), '{"format": "x"}'])
    loaded = tr.loads_jsonl(text, "in.jsonl")
    assert loaded.traces == (sample[0],)
    messages = [str(e) for e in loaded.errors]
    assert len(messages) == 4
    assert "in.jsonl:2" in messages[0] and "bad JSON" in messages[0]
    assert sample[1].id in messages[1] and "unknown format version" in messages[1]
    assert sample[2].id in messages[2] and "step 3" in messages[2] and "kind" in messages[2]
    assert loaded.errors[2].step == 3
    assert "missing or empty 'id'" in messages[3]


def test_a_step_that_is_not_enabled_names_trace_and_step(sample: list[tr.Trace]) -> None:
    trace = sample[0]
    steps = list(trace.steps)
    steps[2] = tr.Step(Action(ActionKind.COMMIT_TRANSACTION, producer_address(0)), observation={})
    verdict = replay(trace.with_steps(steps), SpecAdapter())
    assert not verdict.ok and verdict.divergence_step == 2
    assert trace.id in verdict.detail and "step 2" in verdict.detail and "not enabled" in verdict.detail


def test_every_kind_of_action_round_trips_through_json() -> None:
    """Every action of a small scenario with every fault (and of TV1 with offsets, of a rebalance, the fault
    that needs group members, of a plain commit, which needs offsets, of KIP-939's two-phase commit and of
    KIP-848's fences and heartbeats) comes back equal."""
    from collections import deque

    from txnspec.spec import system as sysm
    from txnspec.spec.model import build_system
    from txnspec.spec.scenarios import FAULTS, SCENARIOS

    kinds: set[ActionKind] = set()
    every_fault = dict.fromkeys((f for f in FAULTS if f not in ("rebalance", "plain_commit")), 1)
    for scenario, variant in ((SCENARIOS["tiny"].with_(faults=every_fault), "current"),
                              (SCENARIOS["offsets"], "tv1"), (SCENARIOS["rebalance"], "current"),
                              (SCENARIOS["plain-commit"], "current"), (SCENARIOS["two-phase-commit"], "current"),
                              (SCENARIOS["consumer-rebalance"], "current"), (SCENARIOS["producer-expiry"], "current")):
        system = build_system(scenario, variant)
        seen = {sysm.initial_state(system)}
        queue = deque(seen)
        while queue and len(seen) < 4_000:
            for action, nxt in sysm.next_steps(system, queue.popleft()):
                kinds.add(action.kind)
                assert action_from_json(json.loads(json.dumps(action_to_json(action)))) == action, str(action)
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
    assert kinds == set(ActionKind)
