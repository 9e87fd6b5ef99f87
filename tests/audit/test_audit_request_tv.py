"""audit/request_tv.py: one transaction version's requests sent to a broker of either level. The spec's
expected answers are pinned; the rules hold on ``txnspec serve`` at TV1 and TV2 and (``-m kafka``) on Kafka
4.4.0, and fail on a serve that takes a request's transaction version from the broker's level instead."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from txnspec.audit import request_tv
from txnspec.audit.socket_wire import socket_txn_wire
from txnspec.serve.broker import WireBroker
from txnspec.serve.server import ServerThread

RULES = ("txn.tv2_requests", "txn.tv2_end_txn_after_timeout", "txn.tv1_requests")


@pytest.mark.parametrize("tv", [1, 2])
def test_the_spec_answers_what_kafka_answered(tv: int) -> None:
    """Kafka 4.1.1 and 4.4.0 at either level: Produce v12 without AddPartitionsToTxn accepted, EndTxn v5 of a
    timed-out producer 48 (v4: 90), the TV1 path commits without an epoch bump."""
    tv2 = request_tv.expected_tv2_requests(tv)
    assert (tv2["produce"]["error"], tv2["end_txn"], tv2["read_committed"]["records"]) == (
        "NONE", {"error": "NONE", "epoch": 1}, [0])
    late = request_tv.expected_end_txn_after_timeout(tv)
    assert (late["end_txn_tv2"], late["end_txn_tv0"], late["read_committed"]["records"]) == (
        "INVALID_TXN_STATE", "PRODUCER_FENCED", [])
    tv1 = request_tv.expected_tv1_requests(tv)
    assert (tv1["end_commit"], tv1["second_add"], tv1["read_committed"]["records"], tv1["offset_fetch"]) == (
        {"error": "NONE"}, "NONE", [0], {"error": "NONE", "committed_offset": request_tv.COMMITTED_OFFSET})


def _outcomes(bootstrap: str, run: str) -> dict[str, tuple[str, int]]:
    with socket_txn_wire(bootstrap) as wire:
        return {r.rule: (r.outcome, r.checked) for r in request_tv.run_request_tv_rules(wire, run)}


@pytest.mark.parametrize("tv", [1, 2])
def test_the_rules_hold_on_serve(tv: int) -> None:
    with ServerThread(transaction_version=tv) as server:
        outcomes = _outcomes(server.bootstrap, f"serve{tv}")
    assert outcomes == {"txn.tv2_requests": ("held", 4), "txn.tv2_end_txn_after_timeout": ("held", 6),
                        "txn.tv1_requests": ("held", 11)}


def test_a_broker_that_takes_the_level_from_its_finalized_version_violates_them(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    """The sabotage: every request at the broker's TV1, whatever its version (what serve did before issue 32)."""
    monkeypatch.setattr(WireBroker, "request_tv", staticmethod(lambda request: 0))
    with ServerThread(transaction_version=1) as server:
        outcomes = _outcomes(server.bootstrap, "sabotage")
    assert {rule: outcome for rule, (outcome, _) in outcomes.items()} == {
        "txn.tv2_requests": "violated", "txn.tv2_end_txn_after_timeout": "violated", "txn.tv1_requests": "held"}


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("tv", [1, 2])
def test_the_rules_hold_on_kafka(tv: int, real_kafka: Callable[[int], Any]) -> None:
    """On the shared broker of tests/conftest.py (names made unique by the run id). ``-m slow``: the default tier's
    audit of Kafka at both levels pins the same outcomes (tests/audit/test_audit_kafka.py, PINNED_ON_KAFKA)."""
    outcomes = _outcomes(real_kafka(tv).bootstrap, f"kafka{tv}-{uuid.uuid4().hex[:8]}")
    assert outcomes == {"txn.tv2_requests": ("held", 4), "txn.tv2_end_txn_after_timeout": ("held", 6),
                        "txn.tv1_requests": ("held", 11)}
