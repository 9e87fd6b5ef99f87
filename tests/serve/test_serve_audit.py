"""``txnspec audit`` over the socket of ``txnspec serve``: every rule holds at both levels under both
transaction versions, and the implementation's seeded broker bugs are found over the wire at least as in
process (plus the transaction timeout, which a real clock lets a client cause)."""

from __future__ import annotations

import json
import time

import pytest

from txnspec.audit.wire_traces import run_wire_audit
from txnspec.cli import main
from txnspec.impl.mutants import rules_of
from txnspec.serve.server import ServerThread

# as tests/conformance/test_audit_wire_traces.py finds them in process, with the rule that catches each
KILLED_IN_PROCESS = {"no-duplicate-check": "txn.Produce", "no-epoch-fencing": "txn.Produce",
                     "lso-is-high-watermark": "fetch.read_committed", "offsets-visible-before-marker": "offset_fetch",
                     "abort-keeps-offsets": "offset_fetch", "markers-skip-a-partition": "fetch.read_committed",
                     "init-does-not-fence-ongoing": "txn.InitProducerId",
                     "duplicate-check-last-batch-only": "produce.duplicate_within_last_5"}


# TV1 with -m slow: tests/audit/test_audit_cli.py audits `--broker serve --transaction-version 1` in the default tier
@pytest.mark.parametrize("tv", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_the_audit_holds_on_serve_at_both_levels(tv: int, capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread(transaction_version=tv) as server:
        status = main(["audit", "--broker", server.bootstrap, "--ops", "4", "--traces", "1", "--seed", "3",
                       "--json"])
    report = json.loads(capsys.readouterr().out)
    violated = [r["rule"] for r in report["rules"] if r["outcome"] == "violated"]
    assert status == 0 and violated == []
    rules = {r["rule"]: r for r in report["rules"]}
    assert {r["level"] for r in rules.values()} == {"wire", "client"}
    assert rules["client.zombie_commit_refused"]["checked"] == 1 and rules["history.aborted_read"]["checked"] > 0
    assert f"EndTxn v{5 if tv == 2 else 4}" in rules["txn.traces"]["description"]
    # the other level's requests (audit/request_tv.py): held and exercised, not skipped
    assert [rules[r]["outcome"] for r in ("txn.tv2_requests", "txn.tv2_end_txn_after_timeout", "txn.tv1_requests")
            ] == ["held"] * 3


def _violated_over_the_socket(mutant: str) -> set[str]:
    with ServerThread(transaction_version=2, rules=rules_of(mutant)) as server:
        results = run_wire_audit(server.bootstrap, f"m-{mutant}", seed=0, traces=2)
    return {r.rule for r in results if r.violations}


@pytest.mark.parametrize("mutant", ["lso-is-high-watermark"])  # every one of them: -m slow, below
def test_a_seeded_broker_bug_is_found_over_the_socket(mutant: str) -> None:
    assert KILLED_IN_PROCESS[mutant] in _violated_over_the_socket(mutant)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(KILLED_IN_PROCESS))
def test_every_bug_found_in_process_is_found_over_the_socket(mutant: str) -> None:
    assert KILLED_IN_PROCESS[mutant] in _violated_over_the_socket(mutant)


def _open_transaction_after_its_timeout(mutant: str | None = None) -> tuple[bool, list[bytes]]:
    """A producer leaves a transaction open past its 1 s timeout: wall time reaches the coordinator, which
    aborts it (``abortTimedOutTransactions``). Was it completed within 5 s, and what does a read_committed
    reader see?"""
    from confluent_kafka import Consumer, Producer, TopicPartition

    quiet = {"log_level": 0, "broker.address.family": "v4"}
    rules = {} if mutant is None else {"rules": rules_of(mutant)}
    with ServerThread(transaction_version=2, topics=("slow",), **rules) as server:
        p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "slow", "transaction.timeout.ms": 1000,
                      **quiet})
        p.init_transactions(10)
        p.begin_transaction()
        p.produce("slow", b"left-open", partition=0)
        p.flush(10)
        partition = server.server.broker.broker.partition("slow-0")
        deadline = time.monotonic() + 5
        completed = False
        while not completed and time.monotonic() < deadline:
            time.sleep(0.1)
            completed = server.call(lambda: partition.first_unstable_offset) is None
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "r", "isolation.level":
                             "read_committed", **quiet})
        consumer.assign([TopicPartition("slow", 0, 0)])
        values = []
        for _ in range(4):
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                values.append(bytes(msg.value() or b""))
        consumer.close()
        return completed, values


def test_a_transaction_open_past_its_timeout_is_aborted_by_wall_time() -> None:
    assert _open_transaction_after_its_timeout() == (True, [])


@pytest.mark.slow
def test_the_timeout_bug_no_client_can_cause_in_process_is_found_over_the_socket() -> None:
    # the transaction is committed (or wedged) instead of aborted
    assert _open_transaction_after_its_timeout("timeout-commits") != (True, [])
