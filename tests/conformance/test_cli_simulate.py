"""``txnspec check --simulate`` and ``--stop-on-violation``: exit statuses, what is printed, what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.cli import main


def test_simulation_finds_a_bug_on_full_and_shrinks_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The done-when of issue 34 for one variant, pinned: walk 4 of seed 0 is the first to violate; the path
    of 20 steps shrinks to 8, the length of the shortest counterexample on ``retry``."""
    trace = tmp_path / "cex.jsonl"
    status = main(["check", "--scenario", "full", "--variant", "no-duplicate-detection", "--simulate",
                   "--seconds", "60", "--workers", "2", "--trace-out", str(trace)])
    out = capsys.readouterr().out
    assert status == 1
    assert "no_duplicate_append: shrunk counterexample (8 steps)" in out
    assert "worker(s): 5 walks," in out and "counterexample of 20 steps shrunk to 8" in out
    assert len(trace.read_text().splitlines()) == 9


def test_a_clean_simulation_exits_0_and_claims_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["check", "--scenario", "tiny", "--simulate", "--seconds", "1", "--seed", "3", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["verdict"] == "incomplete" and report["store"] == "simulation"
    assert report["simulation"]["walks"] > 0 and report["simulation"]["seed"] == 3
    assert all(p["holds"] is None for p in report["properties"] if p["expectation"] == "always")


@pytest.mark.parametrize("engine", [[], ["--workers", "2"], ["--store", "fingerprints"],
                                    ["--store", "partitioned", "--workers", "2"]])
def test_stop_on_violation_exits_1_at_the_first_violation(engine: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["check", "--scenario", "zombie", "--variant", "zombie-not-fenced", "--no-liveness",
                   "--stop-on-violation", *engine])
    out = capsys.readouterr().out
    assert status == 1
    assert "end_txn_applies_to_its_transaction: shortest counterexample (15 steps)" in out
    assert "363 distinct states" in out and "stop on violation" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--seconds", "5"], "--seconds only apply with --simulate"),
    (["--seed", "1", "--depth", "3"], "--depth, --seed only apply with --simulate"),
    (["--simulate", "--seconds", "0"], "--seconds must be a positive number"),
    (["--simulate", "--depth", "-1"], "--depth must be a positive number"),
    (["--simulate", "--seed", "-1"], "--seed must be zero or more"),
    (["--simulate", "--max-depth", "5"], "--simulate cannot be used with --max-depth (the longest walk is --depth)"),
    (["--simulate", "--master", "local[2]"], "--simulate cannot be used with --master"),
    (["--simulate", "--store", "fingerprints"], "--simulate cannot be used with --store fingerprints"),
    (["--simulate", "--store", "partitioned"], "--simulate cannot be used with --store partitioned"),
])
def test_bad_simulation_options_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "tiny", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_seed_gives_the_same_walks_whatever_the_hash_salt() -> None:
    """The walks follow the spec's successor order, which does not depend on PYTHONHASHSEED (two salts, two
    processes: the same walks and the same shrunk counterexample)."""
    import os
    import subprocess
    import sys

    reports = []
    for salt in ("1", "2"):
        done = subprocess.run([sys.executable, "-m", "txnspec.cli", "check", "--scenario", "zombie", "--variant",
                               "zombie-not-fenced", "--simulate", "--property", "fenced_producer_never_commits",
                               "--json"], capture_output=True, text=True, timeout=300, check=False,
                              env={**os.environ, "PYTHONHASHSEED": salt})
        assert done.returncode == 1, done.stderr
        reports.append(json.loads(done.stdout))
    first, second = ({"walks": r["simulation"]["walks"], "steps": r["simulation"]["steps"],
                      "path": [p["counterexample"] for p in r["properties"] if p["status"] == "violated"]}
                     for r in reports)
    assert first == second and first["walks"] == 152 and first["path"][0]["length"] == 19


def test_the_partitioned_store_reports_its_coordinator(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "zombie", "--store", "partitioned", "--workers", "2", "--no-liveness"]) == 0
    out = capsys.readouterr().out
    assert "983 distinct states" in out and "partitioned over 2 workers" in out
    assert "of the search's wall time (its serial part)" in out
