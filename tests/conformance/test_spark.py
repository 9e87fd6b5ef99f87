"""The Spark conformance job: local mode, and a real standalone master and worker on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txnspec.cli import main as cli_main
from txnspec.conformance.adapters.spec_adapter import SpecAdapter
from txnspec.conformance.environment import java_problem
from txnspec.conformance.replay import replay
from txnspec.conformance.spark_cluster import standalone_cluster
from txnspec.conformance.spark_job import JobConfig, run_job
from txnspec.conformance.traces import Trace

needs_spark = [pytest.mark.spark, pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))]


def spark_test(f: Any) -> Any:
    for mark in needs_spark:
        f = mark(f)
    return f


def test_conform_without_java_exits_2_with_a_clear_message(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from txnspec.conformance import environment

    monkeypatch.setattr(environment, "java_problem", lambda: "Spark needs Java 17 (or 21) and none was found")
    assert cli_main(["conform", "--scenario", "tiny", "--traces", "5"]) == 2
    assert "needs Java" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--scenario", "nope"], ["--traces", "0"], ["--adapter", "bogus"],
                                  ["--adapter", "spec-mutant:bogus"]])
def test_conform_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["conform", *argv]) == 2
    assert "txnspec conform: error:" in capsys.readouterr().err


@pytest.fixture
def spark(local_spark: Any) -> Any:
    return local_spark  # the shared local[2] session (tests/conftest.py)


def _read_results(spark: Any, path: Path) -> list[dict[str, Any]]:
    rows = [r.asDict() for r in spark.read.parquet(str(path)).collect()]
    return sorted(rows, key=lambda r: str(r["trace_id"]))


@spark_test
def test_local_mode_twenty_traces(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    status = cli_main(["conform", "--scenario", "tiny", "--traces", "20", "--master", "local[2]",
                       "--out", str(out), "--seed", "7", "--json"])
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["traces"] == 20 and summary["passed"] == 20 and summary["diverged"] == 0
    assert summary["by_strategy"]["covering"] == 3
    assert summary["graph"]["missed_kinds"] == [] and summary["graph"]["missed_transitions"] == []
    assert json.loads((out / "summary.json").read_text())["traces"] == 20
    first = _read_results(spark, out / "results")
    assert len(first) == 20 and {r["verdict"] for r in first} == {"pass"}
    # the summary's coverage is the union of the traces' (one distinct over the three columns, read by field)
    assert summary["coverage"] == {"kinds": sorted({k for r in first for k in r["kinds"]}),
                                   "transitions": sorted({t for r in first for t in r["transitions"]}),
                                   "error_codes": sorted({e for r in first for e in r["errors"]})}
    assert summary["coverage"]["kinds"] and summary["coverage"]["transitions"]
    # deterministic for a seed; the output is overwritten, not appended
    again = run_job(JobConfig("tiny", 20, seed=7), out=out, session=spark)
    assert again.summary["traces"] == 20
    assert _read_results(spark, out / "results") == first


@spark_test
def test_a_mutant_diverges_with_shrunk_traces(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "mutant"
    result = run_job(JobConfig("offsets", 12, adapter="spec-mutant:lost-offsets"), out=out, session=spark)
    assert result.summary["diverged"] >= 1
    rows = [r for r in _read_results(spark, out / "results") if r["verdict"] == "diverge"]
    assert rows and all(r["shrunk_trace"] and r["shrunk_length"] <= r["length"] for r in rows)
    shrunk = Trace.from_line(rows[0]["shrunk_trace"])
    assert not replay(shrunk, SpecAdapter("lost-offsets")).ok and replay(shrunk, SpecAdapter()).ok


@spark_test
def test_the_implementation_on_spark(spark: Any, tmp_path: Path) -> None:
    result = run_job(JobConfig("tiny", 20, adapter="impl", seed=3), out=tmp_path / "impl", session=spark)
    assert result.summary["traces"] == 20 and result.summary["passed"] == 20
    assert result.summary["graph"]["missed_transitions"] == []


@pytest.fixture()
def standalone(tmp_path: Path) -> Iterator[str]:
    with standalone_cluster(tmp_path, workers=1, cores=2, memory="1g") as cluster:
        yield cluster.master


@spark_test
def test_standalone_cluster(standalone: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # the local session of the tests above: the job must start its own
        active.stop()
    out = tmp_path / "cluster"
    status = cli_main(["conform", "--scenario", "tiny", "--traces", "10", "--master", standalone,
                       "--out", str(out), "--json"])
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["master"] == standalone and summary["passed"] == 10
