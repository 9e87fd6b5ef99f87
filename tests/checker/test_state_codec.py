"""The compact encoding of states (checker/state_codec.py) and the Spark search's protocol run without Spark
(checker/spark_bfs.py, spark_tasks.py, exchange.py): a batch decodes to equal states, a selection to the chosen ones
without decoding, Kafka states take a fraction of their pickle; the barrier stage's tasks run as local processes
(forked: one hash salt; spawned with other salts: stable fingerprints) give the exact engine's result through files
and through sockets, and a task lost mid-search is served again from the start, as Spark reruns a barrier stage."""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import toys
from test_levels import signature

from txnspec.checker import check
from txnspec.checker import spark_tasks as tasks
from txnspec.checker.exchange import pack_states, unpack_states
from txnspec.checker.model import Model
from txnspec.checker.report import STOPPED_ON_VIOLATION
from txnspec.checker.spark_bfs import check_spark
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


def test_moved_states_travel_as_their_keys_and_encoded_batch(kafka_level: list[Any]) -> None:
    items = [(i.to_bytes(4, "big"), state) for i, state in enumerate(kafka_level)]
    data = pack_states(items)
    assert unpack_states(data) == items and unpack_states(pack_states([])) == []
    # a level's states (not siblings): about the size of one pickle of them all (measured 116,506 against 111,387
    # bytes), a fraction of pickling each alone, and decoded from tables of distinct fields
    assert len(data) < 1.1 * len(pickle.dumps(items, protocol=5))


class LocalTasks:
    """Spark's context as check_spark uses it, the barrier stage's tasks run as local processes (``method``: fork
    shares the hash salt; spawn with a PYTHONHASHSEED of its own per task does not), each reporting its host from
    ``hosts``; a stage whose task fails is run again, every task afresh, as Spark does (``attempts`` times)."""

    master = "local-processes"

    def __init__(self, slots: int = 2, method: str = "fork", hosts: tuple[str, ...] = ("127.0.0.1",),
                 attempts: int = 1) -> None:
        self.defaultParallelism, self.method, self.hosts, self.attempts = slots, method, hosts, attempts
        self.runs = 0
        self.processes: list[Any] = []

    def getConf(self) -> dict[str, str]:
        return {"spark.driver.host": "127.0.0.1"}

    def setJobGroup(self, *args: Any, **kwargs: Any) -> None:
        pass

    def cancelJobGroup(self, group: str) -> None:
        for process in self.processes:
            process.kill()

    def parallelize(self, items: Any, slices: int) -> LocalTasks:
        self.slices = slices
        return self

    def barrier(self) -> LocalTasks:
        return self

    def mapPartitions(self, function: functools.partial[Any]) -> LocalTasks:
        self.plan = function.args[0]  # barrier_task's plan: run_worker here, without BarrierTaskContext
        return self

    def collect(self) -> list[int]:
        context = multiprocessing.get_context(self.method)
        for _ in range(self.attempts):
            self.runs += 1
            self.processes = []
            for partition in range(self.slices):
                os.environ["PYTHONHASHSEED"] = str(100 + partition)  # spawn: a salt of its own; fork: ignored
                host = self.hosts[partition % len(self.hosts)]
                self.processes.append(context.Process(target=tasks.run_worker, args=(self.plan, partition, host)))
                self.processes[-1].start()
            for process in self.processes:
                process.join(300)
            if all(p.exitcode == 0 for p in self.processes):
                return list(range(self.slices))
        raise RuntimeError("the stage failed")


@pytest.fixture(autouse=True)
def _hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)  # LocalTasks sets it per task; restored after the test


def safety(model: Model[Any]) -> list[str]:
    return [p.name for p in model.properties if p.expectation.value != "leads_to"]


@pytest.mark.parametrize(("method", "hosts", "options", "how"), [
    ("fork", ("127.0.0.1",), {}, "hash fingerprints, files"),
    ("fork", ("127.0.0.1", "localhost"), {}, "hash fingerprints, sockets"),  # two hosts: no shared directory
    ("fork", ("127.0.0.1",), {"fingerprints": "stable", "transport": "sockets"}, "stable fingerprints, sockets"),
    ("spawn", ("127.0.0.1",), {}, "stable fingerprints, files"),  # other salts: the probes differ
])
def test_the_barrier_protocol_gives_the_exact_result(method: str, hosts: tuple[str, ...], options: dict[str, str],
                                                     how: str) -> None:
    # default to depth 10 (562 states): its levels grow past the rebalancing threshold, so states move between
    # tasks and each task fingerprints states the other one generated (failover's 110 stay where they start)
    factory = ModelFactory("default")
    model = factory()
    exact = check(model, properties=safety(model), max_depth=10)
    result = check_spark(factory, LocalTasks(2, method, hosts), properties=safety(model), max_depth=10, **options)
    assert signature(result) == signature(exact) and result.states == 562
    assert result.store == f"spark (local-processes, 2 partitions, {how})"


PROBES = """
import os, sys
sys.path.insert(0, {toys!r})
read, write = os.pipe()
for history in ("none", "none", "a search"):  # forks of one process that has not loaded the spec, as PySpark's
    if os.fork() == 0:                          # daemon forks its Python workers
        if history == "a search":  # a reused Python worker: another model searched before
            import toys
            from txnspec.checker import check
            check(toys.two_phase_commit(3))
        from txnspec.checker.spark_tasks import probe
        from txnspec.conformance.model_factory import ModelFactory
        model = ModelFactory("retry", "no-duplicate-detection")()
        os.write(write, b"%d\\n" % hash(probe(model, model.symmetry)))
        os._exit(0)
    os.wait()
print(os.read(read, 1000).decode())
"""


def test_the_probe_tells_a_reused_python_worker_from_a_fresh_one() -> None:
    """Forks of one process with one hash seed: a task that searched another model before holds the spec's classes
    at other addresses, and a producer's state holds the request class it awaits (hashed by address), so hash()
    would count states twice (968, not 909, on Spark's local[2] before the probe hashed the classes)."""
    script = PROBES.format(toys=str(Path(toys.__file__).parent))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300,
                         env={**os.environ, "PYTHONHASHSEED": "0"}).stdout.split()
    assert len(out) == 3 and out[0] == out[1] != out[2], out


@pytest.mark.parametrize("caps", [{"max_states": 50}, {"max_depth": 5}, {"stop_on_violation": True}])
def test_stops_cut_where_the_exact_search_stops(caps: dict[str, Any]) -> None:
    factory = functools.partial(toys.two_phase_commit, 3, broken=True)
    exact = check(factory(), properties=safety(factory()), **caps)
    result = check_spark(factory, LocalTasks(2, "fork", ("127.0.0.1", "localhost")), properties=safety(factory()),
                         **caps)
    assert not exact.complete and signature(result) == signature(exact)
    assert (exact.stop_reason == STOPPED_ON_VIOLATION) == ("stop_on_violation" in caps)


def test_more_partitions_than_task_slots_are_refused() -> None:
    with pytest.raises(ValueError, match="3 partitions need 3 task slots"):
        check_spark(functools.partial(toys.counter, 3), LocalTasks(2), partitions=3)


@dataclass(frozen=True)
class DiesOnce:
    """The counter toy, whose successor function ends its process the first time a task's search expands ``at``."""

    marker: str
    at: int = 4
    driver: int = field(default_factory=os.getpid)  # the process that built the recipe: the coordinator's

    def __call__(self) -> Model[Any]:
        model = toys.counter(12, bad_at=9)
        driver, marker, at = self.driver, Path(self.marker), self.at
        calls = [0]

        def next_steps(n: int) -> Any:
            calls[0] += n == at  # the first time is the task's probe, before the search
            if calls[0] == 2 and os.getpid() != driver and not marker.exists():
                marker.touch()
                os._exit(3)
            return model.next_steps(n)

        return Model(model.name, model.init_states, next_steps, properties=model.properties,
                     is_final=model.is_final, describe_state=model.describe_state, metadata=model.metadata)


def test_a_task_lost_mid_search_is_served_again_from_the_start(tmp_path: Path) -> None:
    factory = DiesOnce(str(tmp_path / "died"))
    exact = check(factory(), properties=safety(factory()))
    stage = LocalTasks(2, attempts=2)
    result = check_spark(factory, stage, properties=safety(factory()))
    assert (tmp_path / "died").exists() and stage.runs == 2
    assert signature(result) == signature(exact) and result.states == 13
