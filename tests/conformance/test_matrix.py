"""The conformance matrix (``txnspec conform --matrix``): every Kafka scenario at TV2 and TV1, one table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.cli import main as cli_main
from txnspec.conformance import matrix
from txnspec.conformance.environment import java_problem
from txnspec.conformance.matrix import VERSIONS, Cell, all_kinds, all_transitions, render
from txnspec.conformance.spark_job import JobConfig, plan_tasks, run_task
from txnspec.spec.actions import ActionKind
from txnspec.spec.scenarios import SCENARIOS


def test_coverage_is_counted_against_every_kind_and_every_allowed_transition() -> None:
    assert all_kinds() == tuple(k.value for k in ActionKind)
    transitions = set(all_transitions())
    assert {"-->Empty", "Empty->Ongoing", "Ongoing->PrepareCommit", "PrepareAbort->CompleteAbort"} <= transitions
    assert "Empty->PrepareCommit" not in transitions and "CompleteCommit->Ongoing" in transitions


def test_an_untaken_kind_shows_as_a_gap_not_as_full_coverage() -> None:
    taken = tuple(k for k in all_kinds() if k != "crash")
    cell = Cell("tiny", "current", 2, 10, 10, 0, 0, taken, ("-->Empty",))
    assert cell.missing_kinds == ("crash",)
    table = render([cell], "impl")
    assert f"{len(all_kinds()) - 1}/{len(all_kinds())}" in table and f"1/{len(all_transitions())}" in table
    assert "kinds never taken: crash" in table and "never taken by any cell: crash" in table
    assert "kinds never taken" not in render([cell], "impl", short=True)


def test_matrix_refuses_options_that_do_not_apply(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["conform", "--matrix", "--html-out", "x.html"]) == 2
    assert "--matrix takes neither" in capsys.readouterr().err


def test_every_cell_of_the_small_matrix_passes_without_spark() -> None:
    """The cells of CI's small matrix (4 random walks per cell against the implementation, as the Spark job plans
    them) replayed in this process: every Kafka scenario at both versions passes (a few seconds; Spark's
    overhead, a job per cell, is what makes the matrix on Spark slow)."""
    assert [v for v, _ in VERSIONS] == ["current", "tv1"] and matrix.kafka_scenarios() == tuple(SCENARIOS)
    for scenario in SCENARIOS:
        for variant, _ in VERSIONS:
            config = JobConfig(scenario=scenario, traces=4, strategy="random", variant=variant, adapter="impl")
            tasks = plan_tasks(config)
            rows = [run_task(config, *task) for task in tasks]
            assert len(rows) == 4 and all(r["verdict"] == "pass" for r in rows), (scenario, variant, rows)
            assert all(r["length"] > 0 and r["kinds"] for r in rows), (scenario, variant)


def _run_matrix_command(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, object]], str]:
    status = cli_main(["conform", "--matrix", "--adapter", "impl", "--traces", "4", "--master", "local[2]",
                       "--out", str(out)])
    table = capsys.readouterr().out
    assert status == 0, table
    return json.loads((out / "matrix.json").read_text()), table


@pytest.mark.spark
@pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))
def test_the_matrix_command_on_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, local_spark: object) -> None:
    """``conform --matrix`` end to end on Spark, on two scenarios (one with every fault budget) at both versions;
    the whole matrix on Spark is the slow test below. The command runs in the shared local session
    (tests/conftest.py), as it would in a notebook's."""
    monkeypatch.setattr(matrix, "kafka_scenarios", lambda: ("tiny", "faults"))
    rows, table = _run_matrix_command(tmp_path / "matrix", capsys)
    assert [(r["scenario"], r["transaction_version"]) for r in rows] == [
        ("tiny", 2), ("tiny", 1), ("faults", 2), ("faults", 1)]
    assert all(r["traces"] == 4 and r["passed"] == 4 and r["diverged"] == 0 for r in rows)
    assert all(r["all_kinds"] == len(ActionKind) and r["kinds"] for r in rows)
    assert "conformance matrix against impl: 4 runs, 16 traces, 0 failed" in table
    for scenario in ("tiny", "faults"):
        assert any(line.split()[:2] == [scenario, "1"] for line in table.splitlines()), scenario


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))
def test_a_small_matrix_of_every_kafka_scenario_at_both_versions(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """CI's small matrix: 4 traces per cell against the implementation, every cell at 0 divergences (about two
    minutes: a Spark job per cell)."""
    rows, table = _run_matrix_command(tmp_path / "matrix", capsys)
    assert {(r["scenario"], r["transaction_version"]) for r in rows} == {(s, v) for s in SCENARIOS for v in (1, 2)}
    assert all(r["traces"] == 4 and r["passed"] == 4 and r["diverged"] == 0 for r in rows)
    assert all(r["all_kinds"] == len(ActionKind) for r in rows)
    for scenario in SCENARIOS:
        assert any(line.split()[:2] == [scenario, "1"] for line in table.splitlines()), scenario
