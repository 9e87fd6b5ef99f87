"""The compact encoding of states (checker/state_codec.py) and the Spark search's level protocol run without Spark
(checker/spark_tasks.py): a batch decodes to equal states, a selection to the chosen ones without decoding, Kafka
states take a fraction of their pickle; expanding and merging partitions in this process, with the shuffle done by
hand, gives the exact engine's levels."""

from __future__ import annotations

import itertools
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
import toys

from txnspec.checker import check
from txnspec.checker import spark_tasks as tasks
from txnspec.checker.model import Model
from txnspec.checker.state_codec import Batch, encode
from txnspec.conformance.model_factory import ModelFactory


@dataclass(frozen=True)
class Derived:
    a: int
    b: int = field(init=False, default=0)


def levels(model: Model[Any], depth: int) -> list[list[Any]]:
    """Breadth-first levels (distinct states by equality) up to ``depth``."""
    seen = set(model.init_states())
    found = [list(dict.fromkeys(model.init_states()))]
    for _ in range(depth):
        nxt = []
        for state in found[-1]:
            for _, successor in model.next_steps(state):
                if successor not in seen:
                    seen.add(successor)
                    nxt.append(successor)
        found.append(nxt)
    return found


@pytest.fixture(scope="module")
def kafka() -> Model[Any]:
    return ModelFactory("default")()


@pytest.fixture(scope="module")
def kafka_level(kafka: Model[Any]) -> list[Any]:
    return levels(kafka, 12)[-1]


def test_kafka_states_round_trip_and_take_a_fraction_of_their_pickle(kafka: Model[Any],
                                                                      kafka_level: list[Any]) -> None:
    successors = [s for state in kafka_level for _, s in kafka.next_steps(state)]
    batch = encode(successors)
    assert batch.decode() == successors and len(batch) == len(successors) and batch.width == 7
    chunked = len(pickle.dumps(successors, protocol=5))
    alone = sum(len(pickle.dumps(s, protocol=5)) for s in successors[:50]) / 50
    per_state = batch.size / len(successors)
    # measured (the 4,430 successors of level 12): 42 bytes a state (28 of tables with their representatives, 14
    # of 2-byte rows), 56.5 pickled in one chunk, 1,650 each pickled alone
    assert per_state < 50 and batch.size < 0.85 * chunked and alone > 20 * per_state, (per_state, chunked, alone)


def test_a_selection_keeps_the_tables_and_decodes_to_the_chosen_states(kafka_level: list[Any]) -> None:
    batch = encode(kafka_level)
    chosen = [5, 0, len(kafka_level) - 1]
    part = batch.select(chosen)
    assert part.tables is batch.tables and len(part) == 3
    assert part.decode() == [kafka_level[p] for p in chosen] == batch.decode(chosen)
    assert batch.select([]).decode() == []


@pytest.mark.parametrize("states", [
    [1, 2, 2, 300],  # not composite: whole
    [(1, "a"), (1, "b", 3)],  # tuples of two lengths: whole
    [(1, "a"), ("x", None)],  # tuples of one length: by item
    [Derived(1), Derived(2)],  # a field without init: whole
    [(1,), Derived(3)],  # two types: whole
    [toys.TwoPhaseState(("working",) * 3, "init", (), ())] * 300,  # a dataclass: by field, 1-byte rows
    list(range(70_000)),  # 4-byte rows
    [],
])
def test_every_shape_round_trips(states: list[Any]) -> None:
    batch = encode(states)
    assert batch.decode() == states and len(batch) == len(states)
    assert [type(s) for s in batch.decode()] == [type(s) for s in states]
    assert Batch(batch.tables, batch.code, batch.width, batch.rows).select(range(len(states))[::-1]).decode() \
        == states[::-1]


def in_process(model: Model[Any], partitions: int, route: Any = tasks.owner) -> list[int]:
    """The Spark search's level sizes with the executors' functions called here and the shuffle done by hand
    (``route`` names a record's partition, as ``partitionBy`` does)."""
    plan = tasks.Plan("test", lambda: model, tuple(p.name for p in model.properties
                                                   if p.expectation.value != "leads_to"), True, partitions)
    tasks._LOADED.clear()
    tasks._LOADED[plan.token] = tasks.Loaded(plan, model)
    fingerprint = tasks._LOADED[plan.token].fingerprint
    first: dict[int, list[Any]] = {i: [] for i in range(partitions)}
    seen: set[int] = set()
    for index, state in enumerate(model.init_states()):
        fp = fingerprint(state)
        if fp not in seen:
            seen.add(fp)
            first[route(fp) % partitions].append((fp, (tasks.key_of(index), state)))
    level = {i: list(tasks.first_level(first[i])) for i in range(partitions)}
    sizes = [len(seen)]
    while True:
        shuffled: dict[int, list[Any]] = {i: [] for i in range(partitions)}
        for i in range(partitions):
            for record in tasks.expand(plan, i, level[i]):
                shuffled[route(record[0]) % partitions].append(record)
        level = {i: list(tasks.merge(plan, plan.names, [*level[i], *shuffled[i]])) for i in range(partitions)}
        new = sum(value.new for part in level.values() for tag, value in part if tag == tasks.SUMMARY)
        if not new:
            return sizes
        sizes.append(new)


@pytest.mark.parametrize("partitions", [1, 3])
def test_the_level_protocol_without_spark_gives_the_exact_levels(partitions: int) -> None:
    model = ModelFactory("failover")()
    exact = check(model, properties=[p.name for p in model.properties if p.expectation.value != "leads_to"])
    assert in_process(model, partitions) == list(exact.level_sizes) and sum(exact.level_sizes) == 110


def test_candidates_routed_to_the_wrong_owner_are_counted_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: successors dealt to the partitions in turn, not by fingerprint, meet the wrong visited sets, so a
    state reached twice may be new twice."""
    model = toys.two_phase_commit(3)
    assert sum(in_process(model, 2)) == check(model).states == 80
    turns = itertools.count()
    monkeypatch.setattr(tasks, "owner", lambda key: next(turns) if type(key) is int else key[1])
    assert sum(in_process(model, 2)) > 80
