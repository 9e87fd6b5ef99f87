"""The conformance matrix (``txnspec conform --matrix``): every Kafka scenario at TV2 and TV1, one table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.cli import main as cli_main
from txnspec.conformance.environment import java_problem
from txnspec.conformance.matrix import Cell, all_kinds, all_transitions, render
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


@pytest.mark.spark
@pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))
def test_a_small_matrix_of_every_kafka_scenario_at_both_versions(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """CI's small matrix: 4 traces per cell against the implementation, every cell at 0 divergences."""
    out = tmp_path / "matrix"
    status = cli_main(["conform", "--matrix", "--adapter", "impl", "--traces", "4", "--master", "local[2]",
                       "--out", str(out)])
    table = capsys.readouterr().out
    assert status == 0, table
    rows = json.loads((out / "matrix.json").read_text())
    assert {(r["scenario"], r["transaction_version"]) for r in rows} == {(s, v) for s in SCENARIOS for v in (1, 2)}
    assert all(r["traces"] == 4 and r["passed"] == 4 and r["diverged"] == 0 for r in rows)
    assert all(r["all_kinds"] == len(ActionKind) for r in rows)
    for scenario in SCENARIOS:
        assert any(line.split()[:2] == [scenario, "1"] for line in table.splitlines()), scenario
