"""``txnspec diff``: the client-observable differences of the built-in variants, pinned; exit codes.

Each row: scenario, variants A and B, then for "only A" and "only B" the number of observations of the
shortest difference and its last observation (None: no difference that way), and the states explored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.checker.language import language_difference
from txnspec.cli import main
from txnspec.spec.model import build_model
from txnspec.spec.observe import client_view, projection, render_labels
from txnspec.spec.variants.user import load_variant_file

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "end_txn_keeps_epoch.py"

Direction = tuple[int, str] | None
FAST: dict[tuple[str, str, str], tuple[Direction, Direction, int]] = {
    ("tiny", "current", "tv1"): (None, None, 58),
    ("offsets", "current", "tv1"): (None, None, 220),
    ("offsets", "current", "kafka-3.9"): (None, None, 220),
    ("multi-partition", "current", "tv1"): (None, None, 362),
    ("zombie", "current", "tv1"): ((7, "producer-0 is ABORTABLE_ERROR"), (6, "producer-0 is FATAL_ERROR"), 1014),
    # a fenced zombie's abort fails; without the epoch check on EndTxn it succeeds
    ("zombie", "current", "zombie-not-fenced"): ((7, "producer-0 is FATAL_ERROR; P0t1 told fatal"),
                                                 (7, "producer-0 is READY; P0t1 told aborted"), 730),
    # a retried produce appended twice is read twice
    ("retry", "current", "no-duplicate-detection"): (None, (6, "read_uncommitted p0: [P0t1 P0t1]"), 1730),
    ("delayed-end-txn", "current", "kafka-17754"): (
        (10, "producer-0.abortTransaction(); producer-0 is ABORTING_TRANSACTION"), (5, "producer-0 is FATAL_ERROR"),
        3940),
    # a TV1 client that gives up on a produce on its first attempt while aborting keeps its epoch (no unresolved
    # sequence): the late record shows up uncommitted
    ("delayed-produce", "current", "hanging-transaction"): (
        (7, "producer-0 is READY; P0t1 told aborted"), (7, "read_uncommitted p0: [P0t1]"), 471),
    # against its own transaction version, the hanging transaction shows: an aborted record read as committed
    ("delayed-produce", "tv1-no-verification", "hanging-transaction"): (
        (6, "producer-0 is FATAL_ERROR; P0t1 told fatal"), (12, "read_committed p0: [P0t1 P0t2]"), 5439),
    ("delayed-produce", "current", "late-produce-joins-next"): (
        (9, "read_uncommitted p0: [P0t2]"), (6, "producer-0 is FATAL_ERROR; P0t1 told fatal"), 1537),
    # the KIP-360 bump after a produce given up on before the transaction completes: only the client with it bumps
    ("delayed-produce", "tv1", "late-produce-joins-next"): (
        (7, "producer-0 is INITIALIZING; P0t1 told aborted"), (7, "producer-0 is READY; P0t1 told aborted"), 765),
    # the new coordinator leaves the transaction in PrepareCommit: a refusal (the failover is silent, and every
    # observation after it can also be made by failing over at a harmless moment), which traces do not show
    ("failover", "current", "failover-without-markers"): (None, None, 336),
}
SLOW: dict[tuple[str, str, str], tuple[Direction, Direction, int]] = {
    ("delayed-end-txn", "tv1", "kafka-17754"): (None, None, 8800),  # the same protocol under two names
    ("default", "current", "tv1"): (
        (8, "producer-0 is READY; P0t1 told aborted"), (5, "producer-0 is FATAL_ERROR"), 67857),
    ("default", "current", "kafka-3.9"): (
        (8, "producer-0 is READY; P0t1 told aborted"), (5, "producer-0 is FATAL_ERROR"), 67857),
}


def _run(scenario: str, a: str, b: str) -> tuple[Direction, Direction, int]:
    models = build_model(scenario, a), build_model(scenario, b)
    result = language_difference(*models, projection(models[0].metadata["system"]))
    assert result.complete
    directions: list[Direction] = []
    for trace in result.only:
        if trace is None:
            directions.append(None)
            continue
        directions.append((len(trace.labels), render_labels(trace.labels, trace.start_view)[-1]))
        # the behaviour is one of the allowing variant's, and shows what the labels say
        system = models[trace.allowed_by].metadata["system"]
        assert trace.labels[-1][1] in (None, client_view(system, trace.steps[-1][1]))
    return directions[0], directions[1], sum(result.states)


@pytest.mark.parametrize("pair", sorted(FAST), ids="/".join)
def test_pinned_differences(pair: tuple[str, str, str]) -> None:
    assert _run(*pair) == FAST[pair]


@pytest.mark.slow
@pytest.mark.parametrize("pair", sorted(SLOW), ids="/".join)
def test_pinned_differences_on_bigger_scenarios(pair: tuple[str, str, str]) -> None:
    assert _run(*pair) == SLOW[pair]


def test_the_example_variant_file_against_current() -> None:
    name = load_variant_file(EXAMPLE).name
    assert _run("delayed-end-txn", "current", name) == (None, (7, "producer-0 is FATAL_ERROR; P0t1 told fatal"), 5509)


def test_wire_level_sees_the_requests() -> None:
    models = build_model("tiny", "current"), build_model("tiny", "tv1")
    result = language_difference(*models, projection(models[0].metadata["system"], "wire"))
    only_current, only_tv1 = result.only
    assert only_current is not None and only_tv1 is not None
    # TV1 first adds the partition to the transaction, and the application cannot abort while that request is
    # in flight; TV2 produces at once (at the application level the two cannot be told apart on tiny)
    assert render_labels(only_current.labels, only_current.start_view)[-1] == \
        "producer-0.abortTransaction(); producer-0 is ABORTING_TRANSACTION"
    assert render_labels(only_tv1.labels, only_tv1.start_view)[-1] == "producer-0->coordinator: AddPartitionsToTxn"


# --- the command ----------------------------------------------------------------------------------

def test_cli_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--scenario", "tiny", "--variant", "current", "--variant", "tv1"]) == 0
    assert "no observable difference on 58 states" in capsys.readouterr().out
    assert main(["diff", "--scenario", "zombie", "--variant", "current", "--variant", "zombie-not-fenced"]) == 1
    out = capsys.readouterr().out
    assert "7. producer-0 is READY; P0t1 told aborted   <- current cannot" in out
    assert main(["diff", "--scenario", "tiny", "--variant", "current", "--variant", "tv1", "--max-states", "40"]) == 3
    assert "inconclusive" in capsys.readouterr().out
    # one --variant: against current
    assert main(["diff", "--scenario", "retry", "--variant", "no-duplicate-detection", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["variants"] == ["current", "no-duplicate-detection"]
    assert summary["directions"][1]["observations"][-1] == "read_uncommitted p0: [P0t1 P0t1]"


@pytest.mark.parametrize(("argv", "message"), [
    ([], "diff compares two variants; got 0"),
    (["--variant", "a", "--variant", "b", "--variant", "c"], "got 3"),
    (["--variant", "current", "--variant", "nope"], "unknown variant 'nope'"),
    (["--scenario", "rocketmq-default", "--variant", "tv1"], "unknown Kafka scenario 'rocketmq-default'"),
    (["--variant", "tv1", "--max-states", "0"], "--max-states must be a positive number"),
    (["--variant-file", "/nonexistent/v.py"], "variant file '/nonexistent/v.py' does not exist"),
])
def test_cli_bad_arguments(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_variant_file_against_current_with_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "diff.html"
    assert main(["diff", "--scenario", "delayed-end-txn", "--variant-file", str(EXAMPLE), "--html-out", str(page)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("diff of scenario delayed-end-txn: current vs end-txn-keeps-epoch")
    assert "7. producer-0 is FATAL_ERROR; P0t1 told fatal   <- current cannot" in out
    html = page.read_text()
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="sequence"') == 1


def test_the_wire_name_of_a_message_is_its_type_the_end_txn_result_or_the_answers_error() -> None:
    from txnspec.spec.actions import deliver
    from txnspec.spec.errors import Errors
    from txnspec.spec.messages import EndTxn, EndTxnResponse, ErrorResponse, Produce, TransactionResult
    from txnspec.spec.network import Envelope, ProducerAddress
    from txnspec.spec.observe import wire_name

    p0 = ProducerAddress(0)
    names = [wire_name(deliver(Envelope(source, target, body), None)) for source, target, body in (
        (p0, "coordinator", EndTxn("t", 1, 0, TransactionResult.COMMIT)),
        (p0, "p0", Produce("p0", 1, 0, 0, 1, True, "t")),
        ("coordinator", p0, EndTxnResponse(Errors.PRODUCER_FENCED)),
        ("coordinator", p0, ErrorResponse(Errors.NONE)))]
    assert names == ["EndTxn(COMMIT)", "Produce", "EndTxnResponse(PRODUCER_FENCED)", "ErrorResponse(NONE)"]


def test_a_record_names_its_producer_incarnation_and_transaction() -> None:
    from txnspec.spec.observe import record_name

    assert (record_name((0, 0, 1)), record_name((1, 2, 3)), record_name(None)) == ("P0t1", "P1''t3", "?")
