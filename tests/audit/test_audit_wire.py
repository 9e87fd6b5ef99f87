"""Wire-level audit on recorded broker answers: the spec's expectations, conforming and non-conforming
answers (recorded from noida-db 0.2.2, Tansu 0.6.0 and the librdkafka 2.16 mock cluster by replaying
the rules against them; see docs/audit.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.audit import wire
from txnspec.audit.wire import (
    Answer,
    InitAnswer,
    RecordedTransport,
    expected_answers,
    expected_init_answers,
    run_init_rules,
    run_rules,
)

FIXTURE = Path(__file__).parent / "fixtures" / "wire_answers.json"
RECORDED = json.loads(FIXTURE.read_text())


def _transport(broker: str) -> RecordedTransport:
    answers = {rule: [Answer(a["error"], a["base_offset"]) for a in steps]
               for rule, steps in RECORDED[broker]["answers"].items()}
    inits = {rule: [InitAnswer(a["error"], a["producer_id"], a["epoch"]) for a in steps]
             for rule, steps in RECORDED[broker]["init_answers"].items()}
    return RecordedTransport(answers, inits)


def test_the_expected_answers_come_from_the_spec_partition_handler() -> None:
    by_rule = {r.name: [a.to_json() for a in expected_answers(r)] for r in wire.RULES}
    assert by_rule["produce.duplicate_of_last_batch"][1] == {"error": "NONE", "base_offset": 0}
    assert by_rule["produce.duplicate_beyond_last_5"][-1] == {"error": "OUT_OF_ORDER_SEQUENCE_NUMBER"}
    assert by_rule["produce.lower_epoch"][-1] == {"error": "INVALID_PRODUCER_EPOCH"}
    assert by_rule["produce.unknown_producer_id"] == [{"error": "NONE", "base_offset": 0},
                                                      {"error": "OUT_OF_ORDER_SEQUENCE_NUMBER"}]


def test_answers_that_conform_are_held() -> None:
    conforming = {r.name: expected_answers(r) for r in wire.RULES}
    shifted = {name: [Answer(a.error, a.base_offset + 40 if a.error == "NONE" else -1) for a in answers]
               for name, answers in conforming.items()}  # a partition that does not start at 0
    results = run_rules(RecordedTransport(shifted))
    assert all(r.outcome == "held" for r in results), [r for r in results if r.outcome != "held"]
    assert sum(r.checked for r in results) == sum(len(r.steps) for r in wire.RULES)


@pytest.mark.parametrize(("broker", "violated"), [
    ("noida", {"produce.duplicate_within_last_5", "produce.duplicate_beyond_last_5", "produce.lower_epoch",
               "produce.unknown_producer_id"}),
    ("tansu", {"produce.duplicate_of_last_batch", "produce.duplicate_within_last_5",
               "produce.duplicate_beyond_last_5", "produce.lower_epoch", "produce.higher_epoch_seq0",
               "produce.higher_epoch_nonzero_seq", "produce.unknown_producer_id"}),
    ("librdkafka-mock", {"produce.duplicate_of_last_batch", "produce.duplicate_within_last_5",
                         "produce.duplicate_beyond_last_5", "produce.sequence_gap", "produce.lower_epoch",
                         "produce.higher_epoch_nonzero_seq", "produce.unknown_producer_id"}),
])
def test_recorded_answers_of_each_broker(broker: str, violated: set[str]) -> None:
    results = run_rules(_transport(broker))
    assert {r.rule for r in results if r.outcome == "violated"} == violated
    for r in results:
        if r.outcome == "violated":
            sequence = r.examples[0]["sequence"]
            assert sequence[-1]["expected"] != sequence[-1]["actual"]  # the minimal sequence ends at the mismatch
            assert all(s["expected"] == s["actual"] for s in sequence[:-1])


def test_tansu_answers_a_retried_batch_with_duplicate_sequence_number() -> None:
    result = next(r for r in run_rules(_transport("tansu")) if r.rule == "produce.duplicate_of_last_batch")
    assert result.examples[0]["sequence"][-1]["actual"] == {"error": "DUPLICATE_SEQUENCE_NUMBER"}


def test_error_names_are_kafkas() -> None:
    assert wire.error_name(0) == "NONE" and wire.error_name(45) == "OUT_OF_ORDER_SEQUENCE_NUMBER"


def test_init_producer_id_expectations_come_from_the_spec_coordinator() -> None:
    by_rule = {r.name: [a.relative_to(0) for a in expected_init_answers(r)] for r in wire.INIT_RULES}
    assert by_rule["init_producer_id.first_and_bump"] == [{"error": "NONE", "epoch": 0, "producer_id": "first"},
                                                          {"error": "NONE", "epoch": 1, "producer_id": "first"}]
    assert by_rule["init_producer_id.expected_stale_epoch"][-1] == {"error": "PRODUCER_FENCED"}


def test_an_idempotent_producer_gets_a_new_producer_id_each_time() -> None:
    rule = next(r for r in wire.INIT_RULES if r.name == "init_producer_id.idempotent")
    first, second = expected_init_answers(rule)
    assert first.error == second.error == "NONE" and first.epoch == second.epoch == 0
    assert second.relative_to(first.producer_id)["producer_id"] == "other"
    same = RecordedTransport({}, {rule.name: [InitAnswer("NONE", 7, 0), InitAnswer("NONE", 7, 0)]})
    assert run_init_rules(same, "t", (rule,))[0].outcome == "violated"


def test_malformed_init_producer_id_requests_are_refused_by_the_spec() -> None:
    by_rule = {r.name: [a.error for a in expected_init_answers(r)] for r in wire.INIT_RULES}
    assert by_rule["init_producer_id.empty_transactional_id"] == ["INVALID_REQUEST"]
    assert by_rule["init_producer_id.producer_id_without_epoch"] == ["NONE", "INVALID_REQUEST"]
    assert by_rule["init_producer_id.transaction_timeout"] == ["INVALID_TRANSACTION_TIMEOUT"] * 2 + ["NONE"]


def test_conforming_init_answers_are_held() -> None:
    answers = {r.name: [InitAnswer(a.error, a.producer_id + 1000 if a.producer_id >= 0 else -1, a.epoch)
                        for a in expected_init_answers(r)] for r in wire.INIT_RULES}
    results = run_init_rules(RecordedTransport({}, answers), "t")
    assert all(r.outcome == "held" for r in results), [r for r in results if r.outcome != "held"]


@pytest.mark.parametrize(("broker", "violated"), [
    ("noida", {"init_producer_id.expected_stale_epoch", "init_producer_id.expected_other_producer_id"}),
    ("tansu", {"init_producer_id.expected_current_epoch", "init_producer_id.expected_stale_epoch",
               "init_producer_id.expected_other_producer_id", "init_producer_id.empty_transactional_id",
               "init_producer_id.producer_id_without_epoch", "init_producer_id.transaction_timeout"}),
    ("librdkafka-mock", {"init_producer_id.first_and_bump", "init_producer_id.expected_stale_epoch",
                         "init_producer_id.expected_other_producer_id", "init_producer_id.producer_id_without_epoch",
                         "init_producer_id.transaction_timeout"}),
])
def test_recorded_init_answers_of_each_broker(broker: str, violated: set[str]) -> None:
    results = run_init_rules(_transport(broker), "fx")
    assert {r.rule for r in results if r.outcome == "violated"} == violated


def test_tansu_answers_an_expected_epoch_with_unknown_server_error() -> None:
    result = next(r for r in run_init_rules(_transport("tansu"), "fx")
                  if r.rule == "init_producer_id.expected_current_epoch")
    assert result.examples[0]["sequence"][-1]["actual"] == {"error": "UNKNOWN_SERVER_ERROR"}
