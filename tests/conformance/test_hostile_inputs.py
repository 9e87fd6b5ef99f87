"""Hostile inputs and failing environments through the ``txnspec`` command: exit status and message.

0 holds, 1 a violation or divergence, 2 bad input or a failing environment (one line on stderr, no
traceback unless ``--debug``), 3 incomplete, 4 an internal error. The verdict is printed before output
files are written, so an output that cannot be written never hides it.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import txnspec.cli as cli_package
from txnspec.cli import check as check_command
from txnspec.cli import main
from txnspec.conformance.generate import random_walk
from txnspec.conformance.traces import write_itf, write_jsonl

DATA = Path(__file__).resolve().parents[2] / "conformance" / "data" / "public.jsonl"
VIOLATION = ["check", "--scenario", "retry", "--variant", "no-duplicate-detection", "--property",
             "no_duplicate_append"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("txnspec")]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith(f"txnspec {command}: "), lines[0]
    return lines[0]


# --- outputs that cannot be written -------------------------------------------------------------

@pytest.mark.parametrize("option", ["--trace-out", "--itf-out", "--mermaid-out", "--graph-out"])
def test_an_output_the_disk_refuses_is_exit_2_after_the_verdict(option: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run([*VIOLATION, option, "/dev/full"], capsys)
    assert status == 2
    assert "no_duplicate_append: shortest counterexample (8 steps)" in out  # the verdict is not lost
    assert f"cannot write {option} '/dev/full': No space left on device" in one_error_line(err, "check")


def test_an_output_in_a_missing_folder_is_refused_before_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run([*VIOLATION, "--trace-out", "/no/such/folder/cex.jsonl"], capsys)
    assert status == 2 and out == ""
    assert "the folder of --trace-out '/no/such/folder/cex.jsonl' does not exist" in one_error_line(err, "check")


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["--debug", *VIOLATION, "--trace-out", "/dev/full"], capsys)
    assert status == 2 and "Traceback" in err and "No space left on device" in err


def test_an_internal_error_is_exit_4_in_one_line(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: argparse.Namespace) -> int:
        raise ZeroDivisionError("division by zero\nsecond line")
    broken_check = check_command.COMMAND._replace(run=broken)
    monkeypatch.setattr(cli_package, "COMMANDS",
                        tuple(broken_check if c.name == "check" else c for c in cli_package.COMMANDS))
    status, _, err = run(["check"], capsys)
    assert status == 4
    line = one_error_line(err, "check")
    assert "internal error (a bug in txnspec): ZeroDivisionError: division by zero;" in line


# --- invalid option values ----------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["check", "--max-depth", "0"], "--max-depth must be a positive number"),
    (["check", "--max-states", "-1"], "--max-states must be a positive number"),
    (["conform", "--max-states", "0"], "--max-states must be a positive number"),
    (["conform", "--master", "bogus"], "--master 'bogus' is not a Spark master URL"),
    (["conform", "--master", "spark://127.0.0.1:notaport"], "is not HOST:PORT"),
    (["conform", "--out", "/proc/version/out"], "--out '/proc/version/out'"),
    (["replay", "/no/such/traces.jsonl"], "trace file '/no/such/traces.jsonl' does not exist"),
])
def test_an_invalid_option_value_is_exit_2(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(argv, capsys)
    assert status == 2
    assert message in one_error_line(err, argv[0])


# --- unreachable services -----------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listener(request: pytest.FixtureRequest) -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that is not what the client expects: it answers HTTP, or stays silent."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)
            if request.param == "http":
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_an_unreachable_spark_master_is_exit_2_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    port = _free_port()
    status, _, err = run(["conform", "--master", f"spark://127.0.0.1:{port}", "--traces", "1"], capsys)
    assert status == 2 and time.monotonic() - started < 30
    assert f"Spark master spark://127.0.0.1:{port} cannot be reached" in one_error_line(err, "conform")


@pytest.mark.parametrize(("listener", "message"), [
    ("silent", "accepts connections but does not answer as a Spark master"),
    ("http", "answers, but not as a Spark master (b'HTTP/1.1 400 Bad')"),
], indirect=["listener"])
def test_a_spark_master_that_is_not_one_is_exit_2_within_seconds(listener: int, message: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    status, _, err = run(["conform", "--master", f"spark://127.0.0.1:{listener}", "--traces", "1"], capsys)
    assert status == 2 and time.monotonic() - started < 15
    assert message in one_error_line(err, "conform")


def test_an_unreachable_broker_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    status, _, err = run(["audit", "--broker", f"127.0.0.1:{port}", "--ops", "1", "--traces", "0"], capsys)
    assert status == 2
    assert "no bootstrap broker could be reached" in one_error_line(err, "audit")


@pytest.mark.parametrize("listener", ["http"], indirect=True)
def test_a_listener_that_is_not_kafka_is_exit_2(listener: int, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["audit", "--broker", f"127.0.0.1:{listener}", "--ops", "1", "--traces", "0"], capsys)
    assert status == 2
    assert "does not speak the Kafka protocol" in one_error_line(err, "audit")


# --- case files ---------------------------------------------------------------------------------

def test_bad_lines_of_a_case_file_are_errors_each_and_the_other_cases_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = DATA.read_text(encoding="utf-8").splitlines()[0]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join([
        good.encode(),
        b'{"id": "latin-1", "component": "caf\xe9"}',   # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,                # nested too deeply
        b'{"id": "cut", ',                              # not JSON
        good.encode(),
    ]) + b"\n")
    status, out, _ = run(["cases", str(path), "--target", "impl"], capsys)
    assert status == 2
    assert "line 2: not UTF-8 (byte 0xe9 at column 36)" in out
    assert "line 3: JSON nested too deeply" in out
    assert "line 4: not valid JSON" in out
    assert out.splitlines()[-1] == "2 passed, 3 failed (3 malformed)"


def test_a_failing_case_beside_a_malformed_line_is_exit_1(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    case = json.loads(DATA.read_text(encoding="utf-8").splitlines()[0])
    case["steps"][-1]["then"]["error"] = "SURELY_NOT_THIS"
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(case) + "\n{oops\n", encoding="utf-8")
    status, out, _ = run(["cases", str(path)], capsys)
    assert status == 1 and out.splitlines()[-1] == "0 passed, 2 failed (1 malformed)"


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_a_case_file_with_no_cases_is_an_error(tmp_path: Path, content: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    status, _, err = run(["cases", str(path)], capsys)
    assert status == 2
    assert "holds no cases" in one_error_line(err, "cases")


# --- user traces --------------------------------------------------------------------------------

@pytest.fixture
def traces(tmp_path: Path) -> Path:
    write_jsonl([random_walk("tiny", seed=s) for s in range(3)], tmp_path / "good.jsonl")
    write_itf(random_walk("tiny", seed=2), tmp_path / "good.itf.json")
    flying = json.loads(random_walk("tiny", seed=1).to_line())
    flying["id"] = "tiny/fly"
    flying["steps"][2]["action"]["kind"] = "fly"  # a kind of action no adapter knows
    (tmp_path / "fly.jsonl").write_text(json.dumps(flying) + "\n")
    forged = json.loads(random_walk("tiny", seed=1).to_line())
    forged["id"] = "tiny/forged"  # a well-formed step the system never offers: an answer nobody sent
    forged["steps"][2]["action"]["message"]["body"]["error"] = "PRODUCER_FENCED"
    (tmp_path / "forged.jsonl").write_text(json.dumps(forged) + "\n")
    return tmp_path


@pytest.mark.parametrize("adapter", ["spec", "impl"])
def test_replay_of_good_traces_passes(traces: Path, adapter: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["replay", str(traces / "good.jsonl"), "--adapter", adapter], capsys)
    assert status == 0 and out.splitlines()[-1] == f"3 passed, 0 diverged, 0 unreadable (adapter {adapter})"
    status, out, _ = run(["replay", str(traces / "good.itf.json"), "--adapter", adapter], capsys)
    assert status == 0 and "PASS      tiny/random/2 (12 steps)" in out


@pytest.mark.parametrize("adapter", ["spec", "impl"])
def test_a_step_of_an_unknown_kind_is_unreadable_never_a_pass(traces: Path, adapter: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["replay", str(traces / "fly.jsonl"), "--adapter", adapter], capsys)
    assert status == 2
    assert "UNREADABLE trace 'tiny/fly', step 2: bad action: unknown action kind 'fly'" in out
    assert out.splitlines()[-1] == f"0 passed, 0 diverged, 1 unreadable (adapter {adapter})"


@pytest.mark.parametrize("adapter", ["spec", "impl"])
def test_a_step_the_adapter_cannot_match_is_a_divergence(traces: Path, adapter: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A well-formed answer nobody gave (the trace says PRODUCER_FENCED where the broker answered NONE)."""
    status, out, _ = run(["replay", str(traces / "forged.jsonl"), "--adapter", adapter], capsys)
    assert status == 1
    assert "DIVERGED  tiny/forged at step 2: deliver coordinator->producer-0: InitProducerIdResponse(PRODUCER_FENCED" \
        in out
    assert out.splitlines()[-1] == f"0 passed, 1 diverged, 0 unreadable (adapter {adapter})"


def test_replay_finds_a_seeded_implementation_bug(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from txnspec.impl.mutants import MUTANTS

    write_jsonl([random_walk("default", seed=s) for s in range(40)], tmp_path / "walks.jsonl")
    status, out, _ = run(["replay", str(tmp_path / "walks.jsonl"), "--adapter", "impl"], capsys)
    assert status == 0, out
    # some mutant diverges (any() stops at the first: the mutation score's own tests replay every one)
    assert any(run(["replay", str(tmp_path / "walks.jsonl"), "--adapter", f"impl-mutant:{mutant}"], capsys)[0] == 1
               for mutant in MUTANTS)


def test_bad_trace_lines_are_reported_and_the_others_replay(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = (traces / "good.jsonl").read_bytes().splitlines()[0]
    unknown = json.loads(good)
    unknown["scenario"] = "no-such-scenario"
    path = traces / "mixed.jsonl"
    path.write_bytes(b"\n".join([good, b"\xff\xfe", b"[" * 100_000, b"{", json.dumps(unknown).encode()]) + b"\n")
    status, out, _ = run(["replay", str(path), "--adapter", "impl"], capsys)
    assert status == 2
    assert f"{path}:2': not UTF-8" in out and f"{path}:3': JSON nested too deeply" in out
    assert f"{path}:4': bad JSON" in out and "cannot reset to scenario 'no-such-scenario'" in out
    assert out.splitlines()[-1] == "1 passed, 0 diverged, 4 unreadable (adapter impl)"


def test_a_trace_file_with_no_traces_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    status, _, err = run(["replay", str(tmp_path / "empty.jsonl")], capsys)
    assert status == 2 and "holds no traces" in one_error_line(err, "replay")


def test_an_unknown_adapter_is_exit_2(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["replay", str(traces / "good.jsonl"), "--adapter", "kafka"], capsys)
    assert status == 2 and "unknown adapter 'kafka'" in one_error_line(err, "replay")


# --- every command refuses a bad argument at once ------------------------------------------------------------

BAD_ARGUMENTS = [
    (["main", "--traces", "-1"], "--traces must be a positive number"),
    (["main", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["check", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["check", "--variant", "nope"], "unknown variant 'nope'"),
    (["check", "--workers", "0"], "--workers must be at least 1"),
    (["conform", "--traces", "0"], "--traces must be a positive number"),
    (["conform", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["conform", "--max-steps", "0"], "--max-steps must be a positive number"),
    (["diff", "--variant", "nope"], "unknown variant 'nope'"),
    (["diff", "--max-states", "0"], "--max-states must be a positive number"),
    (["replay", "{folder}"], "is a directory, not a file"),
    (["cases", "{folder}"], "is a directory, not a file"),
    (["audit", "--broker", "serve", "--ops", "0"], "--ops must be at least 1"),
    (["audit", "--broker", "serve", "--traces", "-1"], "--traces must be at least 0"),
    (["serve", "--port", "70000"], "--port must be in 0..65535"),
    (["mutation-score", "--traces", "0"], "--traces must be at least 1"),
    (["prove", "--bmc-depth", "-1"], "--bmc-depth must be >= 0"),
    (["chaos", "--broker", "kafka", "--seconds", "0"], "--seconds 0: between 10 and 3600"),
    (["chaos", "--broker", "kafka", "--faults", "bogus"], "unknown fault kind(s) bogus"),
    (["chaos", "--broker", "nope"], "--broker 'nope'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_every_command_refuses_a_bad_argument_within_two_seconds(
        argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.replace("{folder}", str(tmp_path)) for a in argv]
    started = time.process_time()  # the work done before refusing, not a loaded machine's waiting
    status, _, err = run(argv, capsys)
    elapsed = time.process_time() - started
    assert status == 2 and message in one_error_line(err, argv[0])
    assert elapsed < 2.0, f"txnspec {' '.join(argv)} took {elapsed:.1f} s to refuse"
