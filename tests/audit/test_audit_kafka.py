"""Real Apache Kafka in the audit (audit/kafka.py).

Tests marked ``kafka`` start real Kafka (the session fixture's TV2 broker, and at TV1 the audit's own start);
``bash run.sh test`` runs them, and they skip with the reason when java or mvn is missing (the full audit and the
Java client at TV1, on the session fixture's TV1 broker, run with ``-m slow``). The others run
everywhere: Kafka's recorded answers (``fixtures/kafka_answers.json``, re-recorded with ``python -c "from
txnspec.audit.kafka import record_answers; record_answers()"``) replayed through the comparison,
the launcher's settings and its errors.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from txnspec.audit import kafka
from txnspec.audit import wire_traces as wt
from txnspec.audit.report import BrokerUnavailable
from txnspec.cli import main

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "kafka_answers.json").read_text())
MISSING = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


# --- without a broker -------------------------------------------------------------------------------------

@pytest.mark.parametrize("tv", ["tv2", "tv1"])
def test_every_recorded_answer_of_real_kafka_is_the_specs(tv: str) -> None:
    fixture = RECORDED[tv]
    wire = wt.RecordedWire(fixture["calls"])
    selected = wt.plans(fixture["seed"], fixture["traces"], fixture["variant"], True)
    results = {r.rule: r for r in wt.run_plans(wire, selected, "fx")}
    assert wire.calls == [], "the recording was not replayed to its end: re-record it (see the module doc)"
    assert len(selected) == 6 * fixture["traces"] >= 50
    assert {name: (r.violations, r.note) for name, r in results.items() if r.violations or r.note} == {}
    # TV2 clients never send AddPartitionsToTxn or AddOffsetsToTxn (KIP-890); every other rule is exercised
    never_sent = {"txn.AddPartitionsToTxn", "txn.AddOffsetsToTxn"} if tv == "tv2" else set()
    assert all(r.checked > 0 for name, r in results.items() if name not in never_sent)


def test_the_recorded_answers_are_judged_not_trusted() -> None:
    """A recorded answer changed by hand (a Produce appended one offset later) is a violation."""
    calls = json.loads(json.dumps(RECORDED["tv1"]["calls"]))
    produce = next(answer for name, answer in calls if name == "produce" and answer["error"] == "NONE")
    produce["base_offset"] += 1
    fixture = RECORDED["tv1"]
    results = {r.rule: r for r in wt.run_plans(wt.RecordedWire(calls), wt.plans(
        fixture["seed"], fixture["traces"], fixture["variant"], True), "fx")}
    assert results["txn.Produce"].violations == 1


def test_the_node_keeps_kafkas_semantics_on_loopback(tmp_path: Path) -> None:
    props = kafka.server_properties(9092, 9093, tmp_path)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["process.roles"] == "broker,controller" and props["log.dirs"] == str(tmp_path)
    # only replication, partition counts and timings depart from Kafka's defaults
    assert set(kafka.SETTINGS) == {"offsets.topic.replication.factor", "offsets.topic.num.partitions",
                                   "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
                                   "transaction.state.log.num.partitions", "group.initial.rebalance.delay.ms",
                                   "transaction.abort.timed.out.transaction.cleanup.interval.ms", "num.partitions",
                                   "auto.create.topics.enable"}


def test_broker_names() -> None:
    assert kafka.parse_broker_name("kafka") is None
    assert kafka.parse_broker_name("kafka:4.1.1") == "4.1.1"
    for bad in ("kafka:", "kafka:latest", "kafka:4.x"):
        with pytest.raises(BrokerUnavailable, match="kafka:VERSION"):
            kafka.parse_broker_name(bad)


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # StorageTool's argument parser reads "-t -xyz" as a missing value (a fresh-machine run failed so, one in 64)
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(drawn))
    assert kafka.cluster_id() == "AQEBAQEBAQEBAQEBAQEBAQ"
    assert base64.urlsafe_b64encode(b"\xf8" + bytes(15)).startswith(b"-")


def test_a_cached_class_path_needs_no_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "kafka_2.13-4.9.9.jar"
    jar.write_bytes(b"")
    (tmp_path / "4.9.9").mkdir()
    (tmp_path / "4.9.9" / "classpath.txt").write_text(str(jar))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert kafka.resolve("4.9.9", tmp_path) == kafka.KafkaRuntime("4.9.9", (jar,))
    with pytest.raises(BrokerUnavailable, match="needs mvn"):
        kafka.resolve("4.9.8", tmp_path)


def test_without_java_the_audit_exits_2_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert main(["audit", "--broker", "kafka", "--kafka-cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "real Kafka needs java" in err and "openjdk-17" in err


def test_a_transaction_version_is_for_real_kafka_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--broker", "tansu", "--transaction-version", "1"]) == 2
    assert "--transaction-version applies to --broker kafka[:VERSION] and serve" in capsys.readouterr().err


# --- with real Kafka ----------------------------------------------------------------------------------------

# real_kafka: the shared fixture of tests/conftest.py

# audit/request_tv.py's rules and KIP-848's (audit/member_epoch.py) as measured on Kafka 4.4.0: held, each request
# of each rule checked (tests/audit/test_audit_request_tv.py and test_audit_member_epoch.py pin the same, -m slow)
PINNED_ON_KAFKA = {"txn.tv2_requests": ("held", 4), "txn.tv2_end_txn_after_timeout": ("held", 6),
                   "txn.tv1_requests": ("held", 11), "group.member_epoch_fencing": ("held", 5)}


@pytest.mark.kafka
@pytest.mark.parametrize("transaction_version", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_every_audit_rule_holds_on_real_kafka(transaction_version: int, real_kafka: Callable[[int], Any],
                                              tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both levels at TV2 on the shared broker. At TV1 with -m slow: the default tier audits Kafka at TV1 on the
    wire (below; its 54 traces through the recorded answers above) and serve at TV1 at both levels
    (tests/audit/test_audit_cli.py)."""
    broker = real_kafka(transaction_version)
    status = main(["audit", "--broker", broker.bootstrap, "--traces", "9", "--ops", "8", "--seed", "5",
                   "--out", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    rules = {r["rule"]: r for r in report["rules"]}
    assert {name: r["examples"][:1] for name, r in rules.items() if r["outcome"] == "violated"} == {}
    assert status == 0
    assert rules["txn.traces"]["checked"] == 54
    assert rules["txn.timeout_abort"]["outcome"] == "held"
    assert rules["workload.completed"]["checked"] > 8 and rules["history.fenced_write_accepted"]["outcome"] == "held"
    assert {name: (rules[name]["outcome"], rules[name]["checked"]) for name in PINNED_ON_KAFKA} == PINNED_ON_KAFKA
    if transaction_version == 1:
        assert rules["txn.AddPartitionsToTxn"]["checked"] > 0  # TV1 clients add partitions themselves
    assert {r["outcome"] for r in rules.values()} <= {"held", "not checked"}
    assert {name: r["note"] for name, r in rules.items() if r["level"] == "wire" and r["note"]} == {}


@pytest.mark.kafka
def test_txnspec_starts_and_stops_kafka_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At TV1, the default tier's Kafka at that level: the wire level's hand-chosen, timeout and request-version
    rules hold (the same pins as the full audit's), the broker's log is kept and its process is gone after."""
    if MISSING:
        pytest.skip(f"real Kafka needs {' and '.join(MISSING)} on PATH (Java 17 and Maven)")
    status = main(["audit", "--broker", "kafka", "--transaction-version", "1", "--level", "wire", "--traces", "0",
                   "--out", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    rules = {r["rule"]: r for r in report["rules"]}
    assert {name: r["examples"][:1] for name, r in rules.items() if r["outcome"] == "violated"} == {}
    assert status == 0 and report["facts"]["transaction.version"] == 1
    wire_pins = {name: pin for name, pin in PINNED_ON_KAFKA.items() if name.startswith("txn.")}
    assert {name: (rules[name]["outcome"], rules[name]["checked"]) for name in wire_pins} == wire_pins
    assert rules["txn.timeout_abort"]["outcome"] == "held"
    assert {name: r["note"] for name, r in rules.items() if r["note"]} == {}
    assert report["facts"]["version"].startswith("Apache Kafka 4.")
    assert "Kafka Server started" in (tmp_path / "kafka.log").read_text()  # the broker's log is kept
    with pytest.raises(ProcessLookupError):
        os.kill(report["facts"]["pid"], 0)  # and the broker is gone


@pytest.mark.kafka
@pytest.mark.parametrize("transaction_version", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_the_java_client_sees_the_same_outcome_on_real_kafka_and_on_txnspec_serve(
        transaction_version: int, real_kafka: Callable[[int], Any]) -> None:
    """The consume-transform-produce loop of ``TxnHarness.java`` (a zombie, a restart, a stale group generation)
    on Apache Kafka and on ``txnspec serve``: the same output, offsets and exceptions (issue 17's oracle claim)."""
    if shutil.which("javac") is None:
        pytest.skip("the Java harness needs javac (a JDK)")
    from txnspec.serve.java_harness import run_harness
    from txnspec.serve.server import ServerThread

    on_kafka = run_harness(real_kafka(transaction_version).bootstrap)
    with ServerThread(transaction_version=transaction_version) as server:
        on_serve = run_harness(server.bootstrap)
    outcome = ("ok", "output", "committed_offset", "zombie_commit", "stale_generation_commit",
               "current_generation_commit")
    assert {k: on_kafka.get(k) for k in outcome} == {k: on_serve.get(k) for k in outcome}
    assert on_kafka["ok"] and on_kafka["zombie_commit"] == "ProducerFencedException"
