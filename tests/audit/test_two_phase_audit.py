"""KIP-939 on the wire and through Kafka 4.4's Java client: the audit's 2PC rule on txnspec serve (its expectations
from the spec's coordinator; a broker configured otherwise than the rule expects is caught), and, marked ``kafka``,
the rule and ``TwoPhaseHarness.java`` on real Kafka 4.4 (started by the project with KIP-939's settings) and on
serve: the same outcome."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from txnspec.audit.two_phase import TWO_PHASE_SETTINGS, expected_answers, run_two_phase_rule
from txnspec.serve.server import ServerThread


def test_the_expected_answers_are_the_spec_coordinators() -> None:
    answers, described = expected_answers(True)
    assert answers == [{"error": "NONE", "epoch": 0}, {"error": "UNSUPPORTED_VERSION"},
                       {"error": "INVALID_TRANSACTION_TIMEOUT"}, {"error": "NONE", "epoch": 1}]
    assert described == {"error": "NONE", "transaction_timeout_ms": 2147483647}
    off, described_off = expected_answers(False)
    assert [a["error"] for a in off] == ["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"] * 2 + [
        "INVALID_TRANSACTION_TIMEOUT", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]
    assert described_off == {"error": "TRANSACTIONAL_ID_NOT_FOUND"}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_rule_holds_on_serve(enabled: bool) -> None:
    with ServerThread(transaction_two_phase_commit_enable=enabled, unstable_api_versions_enable=True) as server:
        result = run_two_phase_rule(server.bootstrap, "t", enabled)
    assert (result.outcome, result.checked, result.note) == ("held", 5, "")


def test_a_broker_that_refuses_2pc_is_caught_when_the_rule_expects_it() -> None:
    with ServerThread(transaction_two_phase_commit_enable=False, unstable_api_versions_enable=True) as server:
        result = run_two_phase_rule(server.bootstrap, "t", True)
    assert result.outcome == "violated"
    step = result.examples[0]["sequence"][0]
    assert step["actual"] == {"error": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}


def test_without_init_producer_id_v6_the_rule_is_not_checked() -> None:
    with ServerThread(transaction_two_phase_commit_enable=True) as server:
        result = run_two_phase_rule(server.bootstrap, "t")
    assert result.outcome == "not checked" and "unstable.api.versions.enable" in result.note


@pytest.fixture(scope="module")
def kafka_two_phase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Kafka 4.4 (the newest 4.x) with transaction.two.phase.commit.enable and unstable.api.versions.enable."""
    from txnspec.audit import kafka

    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"real Kafka needs {' and '.join(missing)} on PATH (Java 17 and Maven)")
    with kafka.kafka_broker(Path(tmp_path_factory.mktemp("kafka-2pc")), None, 2, None, TWO_PHASE_SETTINGS) as running:
        yield running.bootstrap


@pytest.mark.kafka
def test_the_rule_holds_on_real_kafka(kafka_two_phase: str) -> None:
    result = run_two_phase_rule(kafka_two_phase, "k")
    assert (result.outcome, result.checked, result.note) == ("held", 5, "")


@pytest.mark.kafka
def test_the_java_client_sees_the_same_two_phase_outcome_on_real_kafka_and_on_serve(kafka_two_phase: str) -> None:
    """``TwoPhaseHarness.java`` with Kafka 4.4's client: prepare and complete (matching: commit; another state:
    abort), no send while prepared, a crash, initTransactions(keepPreparedTxn) (4.4.0's client does not send it:
    the in-doubt transaction is fenced and aborted), the crashed instance fenced; the same on both."""
    if shutil.which("javac") is None:
        pytest.skip("the Java harness needs javac (a JDK)")
    from txnspec.serve.java_harness import run_two_phase_harness

    on_kafka = run_two_phase_harness(kafka_two_phase)
    with ServerThread(transaction_two_phase_commit_enable=True, unstable_api_versions_enable=True) as server:
        on_serve = run_two_phase_harness(server.bootstrap)
    assert on_kafka == on_serve
    assert on_kafka["ok"] and on_kafka["output"] == ["committed"]
    assert on_kafka["crashed_complete"] == "ProducerFencedException"
