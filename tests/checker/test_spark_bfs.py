"""The breadth-first search on Spark (checker/spark_bfs.py: the partitioned search's workers as the tasks of one
barrier stage) against the one-process engines: the same states, transitions, depth, verdicts and counterexamples
(step for step), on toy models and on the Kafka spec, in local mode (whose tasks share the hash salt: ``hash()``
fingerprints and files, or the stable fingerprints and sockets when asked) and on a standalone master with two
workers on 127.0.0.1 (two executors: their probes differ, stable fingerprints). The protocol without Spark, and a
task lost mid-search: tests/checker/test_state_codec.py."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import toys
from test_levels import signature

from txnspec.checker import check
from txnspec.checker.levels import check_levels
from txnspec.checker.model import Model
from txnspec.checker.report import STOPPED_ON_VIOLATION
from txnspec.checker.spark_bfs import check_spark
from txnspec.cli import main as cli_main
from txnspec.conformance.environment import java_problem
from txnspec.conformance.model_factory import ModelFactory


def spark_test(test: Any) -> Any:
    """Marked ``spark`` (run with -m spark), skipped without Java."""
    test = pytest.mark.spark(test)
    return pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))(test)


def safety(model: Model[Any]) -> list[str]:
    return [p.name for p in model.properties if p.expectation.value != "leads_to"]


@pytest.fixture
def context(local_spark: Any) -> Any:
    """The shared local[2] session's context (tests/conftest.py), shipping the toy models' module once."""
    sc = local_spark.sparkContext
    if not getattr(sc, "txnspec_toys_shipped", False):
        sc.addPyFile(toys.__file__)  # the executors import the toy models' states from it
        sc.txnspec_toys_shipped = True
    return sc


TOYS = {
    "counter": functools.partial(toys.counter, 20, bad_at=17, wish=9),
    "two-phase": functools.partial(toys.two_phase_commit, 3),
    "two-phase-broken": functools.partial(toys.two_phase_commit, 3, broken=True),
    "tokens": functools.partial(toys.tokens, 4),  # symmetry
    "fan": functools.partial(toys.fan, 10),  # an early stop within level 2
    "dining": toys.dining,  # a deadlock
}


@spark_test
# the counter's 20 levels cost Spark's per-level overhead 20 times: it runs with -m slow, the others stand for it
@pytest.mark.parametrize("toy", [pytest.param(t, marks=pytest.mark.slow) if t == "counter" else t
                                 for t in sorted(TOYS)])
def test_toys_agree_with_the_exact_search(context: Any, toy: str) -> None:
    model = TOYS[toy]()
    names = safety(model)
    exact = check(model, properties=names)
    result = check_spark(TOYS[toy], context, properties=names)
    assert signature(result) == signature(exact)
    assert result.symmetry == exact.symmetry
    # hash() or stable fingerprints: a Python worker reused from an earlier search holds its classes at other
    # addresses than a fresh one, and the probe sees it (test_state_codec.py pins both ways)
    assert result.store in {f"spark (local[2], 2 partitions, {how} fingerprints, files)" for how in ("hash", "stable")}
    if exact.complete:
        assert result.coverage == exact.coverage


@spark_test
@pytest.mark.parametrize(("caps", "partitions", "symmetry"),
                         [({"max_states": 50}, 1, True), ({"max_states": 51}, 2, True), ({"max_depth": 5}, 2, True),
                          ({"max_states": 1}, 2, True), ({"max_states": 200}, 2, False)])
def test_caps_cut_where_the_exact_search_stops(context: Any, caps: dict[str, int], partitions: int,
                                               symmetry: bool) -> None:
    names = safety(TOYS["two-phase"]())
    max_states, max_depth = caps.get("max_states"), caps.get("max_depth")
    exact = check(TOYS["two-phase"](), properties=names, symmetry=symmetry, max_states=max_states,
                  max_depth=max_depth)
    result = check_spark(TOYS["two-phase"], context, properties=names, partitions=partitions, symmetry=symmetry,
                         max_states=max_states, max_depth=max_depth)
    assert not exact.complete and signature(result) == signature(exact)


@spark_test
@pytest.mark.parametrize("toy", ["crowded", "two-phase-broken"])
def test_the_first_violation_stops_spark_where_it_stops_the_exact_search(context: Any, toy: str) -> None:
    factory = toys.crowded if toy == "crowded" else TOYS[toy]
    names = safety(factory())
    exact = check(factory(), properties=names, stop_on_violation=True)
    result = check_spark(factory, context, properties=names, stop_on_violation=True)
    assert exact.stop_reason == result.stop_reason == STOPPED_ON_VIOLATION
    assert signature(result) == signature(exact)


# scenario, variant, (states, transitions, depth) pinned from `txnspec check`: failover and zombie symmetry reduced
# (208 and 1,964 states without), the executors, whose string hashes differ, agreeing on each class's representative
KAFKA = [("tiny", "current", (27, 34, 12)), ("failover", "current", (110, 189, 15)),
         ("zombie", "current", (983, 2_293, 26))]


@spark_test
@pytest.mark.parametrize(("scenario", "variant", "counts"),
                         [pytest.param(*k, marks=pytest.mark.slow) if k[0] == "zombie" else k for k in KAFKA])
def test_kafka_scenarios_agree_with_the_one_process_search(context: Any, scenario: str, variant: str,
                                                          counts: tuple[int, int, int]) -> None:
    factory = ModelFactory(scenario, variant)
    model = factory()
    names = safety(model)
    local = check_levels(model, properties=names)
    result = check_spark(factory, context, properties=names)
    assert (result.states, result.transitions, result.depth) == counts
    assert signature(result) == signature(local) and result.ok and result.complete
    assert result.coverage == local.coverage
    # the stable fingerprints through sockets, as tasks on several hosts would run
    stable = check_spark(factory, context, properties=names, fingerprints="stable", transport="sockets")
    assert signature(stable) == signature(local)
    assert stable.store == "spark (local[2], 2 partitions, stable fingerprints, sockets)"


@spark_test
def test_a_barrier_stage_needs_a_slot_for_every_partition(context: Any) -> None:
    with pytest.raises(ValueError, match="3 partitions need 3 task slots, and local\\[2\\] offers 2"):
        check_spark(TOYS["two-phase"], context, properties=safety(TOYS["two-phase"]()), partitions=3)


@spark_test
def test_the_partial_order_reduction_gives_the_same_counts_on_spark(context: Any) -> None:
    """``txnspec check --partial-order --master``: the executors build the reduced model from its recipe."""
    factory = ModelFactory("zombie", partial_order=True)
    local = check_levels(factory())
    result = check_spark(factory, context)
    assert (result.states, result.transitions, result.depth) == (local.states, local.transitions, local.depth)
    assert result.states == 773 and signature(result) == signature(local) and result.ok


# variant -> scenario, the property it breaks, the shortest counterexample's length (tests/spec/test_variants.py)
BUGS = {"zombie-not-fenced": ("zombie", "fenced_producer_never_commits", 19),
        "no-duplicate-detection": ("retry", "no_duplicate_append", 8)}


@spark_test
@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.slow) if v == "zombie-not-fenced" else v
                                     for v in sorted(BUGS)])  # zombie's 19 levels twice: -m slow
def test_bug_variants_give_the_same_shortest_counterexample(context: Any, variant: str) -> None:
    scenario, prop, length = BUGS[variant]
    factory = ModelFactory(scenario, variant)
    model = factory()
    exact = check(model, properties=safety(model))
    result = check_spark(factory, context, properties=safety(model))
    counterexample = result.verdict(prop).counterexample
    assert counterexample is not None and len(counterexample) == length
    assert signature(result) == signature(exact)
    # the invariant and its partner only: the search stops within a level once both are found
    partner = model.property(prop).partner
    assert partner is not None
    exact = check(model, properties=[prop, partner])
    early = check_spark(factory, context, properties=[prop, partner])
    assert not early.complete and signature(early) == signature(exact)


@spark_test
def test_leads_to_is_refused(context: Any) -> None:
    model = ModelFactory("tiny")()
    liveness = next(p.name for p in model.properties if p.expectation.value == "leads_to")
    with pytest.raises(ValueError, match="liveness stays local"):
        check_spark(ModelFactory("tiny"), context, properties=[liveness])


@spark_test
def test_the_command_line(context: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # the module's session is active: `txnspec check --master` uses it and leaves it running
    assert cli_main(["check", "--scenario", "failover", "--master", "local[2]", "--json", "--no-symmetry"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["states"], answer["transitions"], answer["depth"]) == (208, 358, 15)
    # with symmetry (the default) the executors, whose string hashes differ, agree on each class's representative
    assert cli_main(["check", "--scenario", "failover", "--master", "local[2]", "--json"]) == 0
    reduced = json.loads(capsys.readouterr().out)
    assert (reduced["states"], reduced["symmetry"]) == (110, True)
    assert answer["store"].startswith("spark (local[2], 2 partitions, ") and answer["store"].endswith(" files)")
    assert answer["verdict"] == "holds"
    assert all(p["expectation"] != "leads_to" for p in answer["properties"])
    assert context.master == "local[2]"
    assert cli_main(["check", "--scenario", "zombie", "--variant", "zombie-not-fenced", "--master", "local[2]",
                     "--property", "fenced_producer_never_commits"]) == 1
    assert "shortest counterexample (19 steps)" in capsys.readouterr().out


@pytest.mark.slow
@spark_test
def test_standalone_master_with_two_workers(context: Any, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Slow: a master, two workers and their executors start (the default tier starts a standalone cluster once,
    for the conformance job: tests/conformance/test_spark.py); local[2]'s executors above already differ in their
    string hashes."""
    from txnspec.conformance.spark_cluster import standalone_cluster

    context.stop()  # the command starts its own session on the cluster
    with standalone_cluster(tmp_path, workers=2, cores=1, memory="1g") as cluster:
        assert cluster.alive_workers() == 2
        status = cli_main(["check", "--scenario", "failover", "--master", cluster.master, "--json"])
    assert status == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["states"], answer["transitions"], answer["depth"]) == (110, 189, 15)  # symmetry reduced
    # two executors, each its own Python daemon: None's address differs, so the probes do
    assert answer["store"] == f"spark ({cluster.master}, 2 partitions, stable fingerprints, files)"


@pytest.mark.parametrize("argv", [["--graph-out", "g.graphml"], ["--workers", "2"], ["--master", "nonsense"]])
def test_master_refuses_what_it_cannot_do(argv: list[str], capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    argv = [str(tmp_path / a) if a.endswith(".graphml") else a for a in argv]
    master = [] if "--master" in argv else ["--master", "local[2]"]
    assert cli_main(["check", "--scenario", "tiny", *master, *argv]) == 2
    assert "txnspec check: error:" in capsys.readouterr().err
