"""KIP-939 on the wire: Kafka 4.4's two-phase-commit rules of ``InitProducerId`` v6, checked against the spec.

What it checks (``run_two_phase_rule``)
    On a fresh transactional id, InitProducerId v6 with ``Enable2Pc`` and a timeout beyond
    ``transaction.max.timeout.ms``; again with ``KeepPreparedTxn``; without ``Enable2Pc`` and the same timeout; with
    ``Enable2Pc`` and an ordinary timeout (a bump). The expected answers come from the spec's coordinator
    (:func:`txnspec.spec.coordinator.handle_init_producer_id`) configured as the broker is
    (``transaction.two.phase.commit.enable``), never from a table written here. Then ``DescribeTransactions``: the
    stored timeout must be the spec's (``Int.MaxValue`` for a 2PC transaction: it never times out).

Assumes
    The broker serves InitProducerId v6 (Kafka 4.4: only with ``unstable.api.versions.enable=true``; txnspec serve:
    ``--unstable-api-versions-enable``); otherwise the rule is reported as not checked, saying why. The caller says
    whether the broker has ``transaction.two.phase.commit.enable`` (:data:`TWO_PHASE_SETTINGS` starts Kafka so).

Left out
    The ``TWO_PHASE_COMMIT`` ACL (no authorizer), the Java client's prepare/complete flow (``TwoPhaseHarness.java``,
    run by ``txnspec.serve.java_harness.run_two_phase_harness``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from txnspec.audit.connection import BrokerConnection, WireError, error_name
from txnspec.audit.report import RuleResult

# Kafka's broker settings for KIP-939 as 4.4 ships it: 2PC allowed, and InitProducerId v6 (an unstable version)
TWO_PHASE_SETTINGS = {"transaction.two.phase.commit.enable": "true", "unstable.api.versions.enable": "true"}
RETRIES, PAUSE_SECONDS = 80, 0.25
RETRIABLE = frozenset({"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                       "CONCURRENT_TRANSACTIONS"})


@dataclass(frozen=True)
class TwoPhaseStep:
    enable_two_pc: bool
    keep_prepared_txn: bool = False
    timeout_ms: int = 60_000

    def describe(self) -> str:
        return (f"InitProducerId v6(enable2Pc={self.enable_two_pc}, keepPreparedTxn={self.keep_prepared_txn}, "
                f"timeout_ms={self.timeout_ms})")


BEYOND_MAX = 1_000_000_000  # above transaction.max.timeout.ms (900000)
STEPS = (TwoPhaseStep(True, timeout_ms=BEYOND_MAX), TwoPhaseStep(True, keep_prepared_txn=True),
         TwoPhaseStep(False, timeout_ms=BEYOND_MAX), TwoPhaseStep(True))
RULE = "init_producer_id.two_phase_commit"
DESCRIPTION = ("KIP-939 (4.4): Enable2Pc lifts the timeout bound and stores Int.MaxValue (never timed out), "
               "keepPreparedTxn is UNSUPPORTED_VERSION, without 2PC the bound holds")


def expected_answers(enabled: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The spec coordinator's answers to :data:`STEPS` (error and epoch) and what DescribeTransactions then
    shows: the stored timeout, or TRANSACTIONAL_ID_NOT_FOUND when no step created the id."""
    from txnspec.spec import coordinator as coord
    from txnspec.spec import coordinator_state as coord_state
    from txnspec.spec.messages import InitProducerId

    config = coord_state.CoordinatorConfig(transaction_two_phase_commit_enable=enabled)
    state = coord_state.CoordinatorState()
    answers = []
    for step in STEPS:
        result = coord.handle_init_producer_id(state, InitProducerId("t", step.timeout_ms, -1, -1, step.enable_two_pc,
                                                                     step.keep_prepared_txn), config=config)
        state, r = result.state, result.response
        assert r is not None
        answers.append({"error": r.error.name, **({"epoch": r.producer_epoch} if r.error.name == "NONE" else {})})
    md = state.metadata("t")
    described = {"error": "TRANSACTIONAL_ID_NOT_FOUND"} if md is None else {"error": "NONE",
                                                                            "transaction_timeout_ms": md.txn_timeout_ms}
    return answers, described


def _coordinator(conn: BrokerConnection, tid: str) -> BrokerConnection:
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    version = conn.version(FindCoordinatorRequest, 1, 3)
    for _ in range(RETRIES):
        r = conn.call(FindCoordinatorRequest, FindCoordinatorResponse, version, key=tid, key_type=1)
        if int(r.error_code) == 0:
            return BrokerConnection(r.host, int(r.port))
        time.sleep(PAUSE_SECONDS)
    raise WireError(f"FindCoordinator({tid}) answered {error_name(int(r.error_code))}")


def _init(conn: BrokerConnection, tid: str, step: TwoPhaseStep) -> dict[str, Any]:
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    for _ in range(RETRIES):
        r = conn.call(InitProducerIdRequest, InitProducerIdResponse, 6, transactional_id=tid,
                      transaction_timeout_ms=step.timeout_ms, producer_id=-1, producer_epoch=-1,
                      enable2_pc=step.enable_two_pc, keep_prepared_txn=step.keep_prepared_txn)
        name = error_name(int(r.error_code))
        if name not in RETRIABLE:
            break
        time.sleep(PAUSE_SECONDS)
    return {"error": name, **({"epoch": int(r.producer_epoch)} if name == "NONE" else {})}


def _described(conn: BrokerConnection, tid: str) -> dict[str, Any]:
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest, DescribeTransactionsResponse

    r = conn.call(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, transactional_ids=[tid])
    state = r.transaction_states[0]
    name = error_name(int(state.error_code))
    return {"error": name, **({"transaction_timeout_ms": int(state.transaction_timeout_ms)} if name == "NONE" else {})}


def run_two_phase_rule(bootstrap: str, run: str, enabled: bool = True) -> RuleResult:
    """The rule on the broker at ``bootstrap`` (``enabled``: its ``transaction.two.phase.commit.enable``)."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    result = RuleResult("wire", RULE, DESCRIPTION)
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    conn = BrokerConnection(host, int(port))
    try:
        if conn.versions.get(InitProducerIdRequest.API_KEY, (0, -1))[1] < 6:
            result.note = ("the broker does not serve InitProducerId v6 (Kafka 4.4: unstable.api.versions.enable; "
                           "txnspec serve: --unstable-api-versions-enable)")
            return result
        tid = f"txnspec-2pc-{run}"
        coordinator = _coordinator(conn, tid)
        expected, described = expected_answers(enabled)
        sent: list[dict[str, Any]] = []
        for step, want in zip(STEPS, expected, strict=True):
            got = _init(coordinator, tid, step)
            sent.append({"request": step.describe(), "expected": want, "actual": got})
            result.checked += 1
            if got != want:
                result.violations += 1
                result.examples.append({"sequence": sent})
                return result
        got = _described(coordinator, tid)
        sent.append({"request": "DescribeTransactions", "expected": described, "actual": got})
        result.checked += 1
        if got != described:
            result.violations += 1
            result.examples.append({"sequence": sent})
        coordinator.close()
    except (OSError, WireError) as exc:
        result.note = f"step {result.checked + 1} failed: {exc}"
    finally:
        conn.close()
    return result


__all__ = ["DESCRIPTION", "RULE", "STEPS", "TWO_PHASE_SETTINGS", "TwoPhaseStep", "expected_answers",
           "run_two_phase_rule"]
