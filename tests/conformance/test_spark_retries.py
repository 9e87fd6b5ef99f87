"""Spark task retries: a run whose tasks fail on their first attempt writes the same results as one without."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from txnspec.conformance.environment import java_problem
from txnspec.conformance.spark_job import JobConfig, run_job, spark_session

pytestmark = [pytest.mark.spark, pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))]


@pytest.fixture
def retrying_spark() -> Any:
    """local[2,4]: stopped by the test, or else by the next user of the shared local[2] session (conftest.py)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # a session without task retries (local mode retries only with local[N,F])
        active.stop()
    return spark_session("local[2,4]")


def _parquet_parts(results: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(results.glob("part-*.parquet"), key=lambda p: p.name.split("-")[1])]


def _summary(out: Path) -> bytes:
    summary = json.loads((out / "summary.json").read_text())
    summary["seconds"] = None  # wall-clock time: the one field that cannot repeat
    summary["results"] = None  # the output folder's name
    return json.dumps(summary, indent=2, sort_keys=True).encode()


def test_first_attempts_that_fail_change_nothing_in_the_results(retrying_spark: Any, tmp_path: Path,
                                                                request: pytest.FixtureRequest) -> None:
    config = JobConfig("faults", 16, strategy="random", adapter="impl", seed=5)
    clean = run_job(config, out=tmp_path / "clean", session=retrying_spark)
    sc = retrying_spark.sparkContext
    failing = JobConfig(**{**config.__dict__, "fail_first_attempt_of": (0, 2, 5)})
    retried = run_job(failing, out=tmp_path / "retried", session=retrying_spark)
    assert sc.getConf().get("spark.master") == "local[2,4]"  # four attempts per task
    assert clean.summary["traces"] == retried.summary["traces"] == 16 and clean.summary["passed"] == 16
    clean_parts = _parquet_parts(tmp_path / "clean" / "results")
    assert clean_parts and clean_parts == _parquet_parts(tmp_path / "retried" / "results")
    assert _summary(tmp_path / "clean") == _summary(tmp_path / "retried")
    # the hook really fails first attempts: with one attempt allowed (local[2]: no retries) the job fails
    retrying_spark.stop()
    once = request.getfixturevalue("local_spark")  # the shared session, kept for the Spark modules after this one
    assert once.sparkContext.master == "local[2]"
    with pytest.raises(Exception, match="first attempt of this partition fails"):
        run_job(JobConfig("tiny", 8, strategy="random", fail_first_attempt_of=(1,)), out=tmp_path / "once",
                session=once)
