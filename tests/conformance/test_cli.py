"""The ``txnspec`` command: subcommands, exit statuses and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.cli import main


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in ("cases", "check", "main"):
        assert name in out


def test_check_holds_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "tiny"]) == 0
    assert "hold on 27 distinct states" in capsys.readouterr().out


def test_check_violation_exit_1_with_trace_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, itf, mmd = tmp_path / "cex.jsonl", tmp_path / "cex.itf.json", tmp_path / "cex.mmd"
    status = main(["check", "--scenario", "retry", "--variant", "no-duplicate-detection",
                   "--property", "no_duplicate_append", "--trace-out", str(trace), "--itf-out", str(itf),
                   "--mermaid-out", str(mmd)])
    assert status == 1
    assert "no_duplicate_append: shortest counterexample (8 steps)" in capsys.readouterr().out
    steps = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(steps) == 9 and steps[0]["action"] is None
    document = json.loads(itf.read_text())
    assert len(document["states"]) == 9 and "mbt::actionTaken" in document["vars"]
    assert mmd.read_text().startswith("sequenceDiagram")


def test_check_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "tiny", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] and result["complete"] and result["states"] == 27


@pytest.mark.parametrize(("argv", "message"), [
    (["check", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["check", "--variant", "nope"], "unknown variant 'nope'"),
    (["check", "--property", "nope"], "unknown property 'nope'"),
    (["check", "--max-states", "0"], "--max-states must be a positive number"),
])
def test_bad_arguments_exit_2_with_a_message(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_state_cap_is_inconclusive_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--scenario", "zombie", "--max-states", "50"]) == 3
    assert "INCOMPLETE" in capsys.readouterr().out


@pytest.mark.parametrize("engine", [[], ["--workers", "2"], ["--partial-order"]])
def test_a_counterexample_replays_against_the_implementation(engine: list[str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``--replay-out``: the counterexample of a bug variant as a conformance trace. The spec follows it; the
    implementation, which fences the zombie, diverges where the zombie's EndTxn(COMMIT) is accepted."""
    trace = tmp_path / "cex.jsonl"
    assert main(["check", "--scenario", "zombie", "--variant", "zombie-not-fenced", "--property",
                 "fenced_producer_never_commits", "--replay-out", str(trace), *engine]) == 1
    capsys.readouterr()
    assert main(["replay", str(trace), "--adapter", "spec"]) == 0
    assert "1 passed, 0 diverged" in capsys.readouterr().out
    assert main(["replay", str(trace), "--adapter", "impl"]) == 1
    out = capsys.readouterr().out
    assert "EndTxn(COMMIT" in out and 'got ["PRODUCER_FENCED"]' in out


def test_replay_out_needs_a_counterexample_and_a_kafka_scenario(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "cex.jsonl"
    assert main(["check", "--scenario", "tiny", "--replay-out", str(trace)]) == 0
    assert "no counterexample to write" in capsys.readouterr().err and not trace.exists()
    assert main(["check", "--scenario", "rocketmq-default", "--replay-out", str(trace)]) == 2
    assert "--replay-out writes Kafka conformance traces" in capsys.readouterr().err


def test_replay_names_a_counterexample_dump_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The files of ``--trace-out`` and ``--itf-out`` are for reading: replay says so, once a file, and points to
    ``--replay-out``."""
    dump, itf = tmp_path / "cex.jsonl", tmp_path / "cex.itf.json"
    assert main(["check", "--scenario", "zombie", "--variant", "zombie-not-fenced", "--trace-out", str(dump),
                 "--itf-out", str(itf)]) == 1
    capsys.readouterr()
    for path in (dump, itf):
        assert main(["replay", str(path), "--adapter", "spec"]) == 2
        captured = capsys.readouterr()
        said = captured.err + captured.out
        assert said.count("a counterexample as `txnspec check --trace-out`") == 1 and "--replay-out" in said
