"""KIP-848's member-epoch fencing of TxnOffsetCommit through real clients (audit/member_epoch.py): the spec's
expected answers, the rule on ``txnspec serve`` (and on serve with the member-epoch check sabotaged), and on
real Kafka 4.4."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from txnspec.audit.member_epoch import RULE, Expected, expected, run_member_epoch_rule
from txnspec.spec.errors import Errors

pytest.importorskip("confluent_kafka")


@pytest.mark.quick
@pytest.mark.parametrize("kept", [0, 1])
def test_the_spec_expects_kip_848s_answers(kept: int) -> None:
    """librdkafka's TxnOffsetCommit is below v6: a stale epoch is ILLEGAL_GENERATION; KIP-1251 accepts the old
    epoch for the partition kept; the member that left is unknown."""
    assert expected(kept, 1 - kept, "t") == Expected(Errors.NONE, Errors.ILLEGAL_GENERATION, Errors.NONE,
                                                     Errors.UNKNOWN_MEMBER_ID)


def test_the_rule_holds_on_serve() -> None:
    from txnspec.serve.server import ServerThread

    with ServerThread(transaction_version=2) as server:
        result = run_member_epoch_rule(server.bootstrap, "serve")
    assert (result.rule, result.checked, result.violations, result.note) == (RULE, 5, 0, "")


def test_the_rule_catches_a_serve_without_the_member_epoch_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sabotage: serve's group coordinator checks the member but not its epoch (the in-process server runs
    the patched implementation): the lost partition's commit is accepted and lands."""
    from txnspec.impl.consumer_groups import ConsumerGroups
    from txnspec.impl.errors import Errors as ImplErrors
    from txnspec.serve.server import ServerThread

    def known_member(self: ConsumerGroups, group_id: str, member_id: str, *args: object, **kw: object) -> ImplErrors:
        return ImplErrors.NONE if member_id in self.groups[group_id].members else ImplErrors.UNKNOWN_MEMBER_ID

    monkeypatch.setattr(ConsumerGroups, "validate_offset_commit", known_member)
    with ServerThread(transaction_version=2) as server:
        result = run_member_epoch_rule(server.bootstrap, "sabotaged")
    assert result.violations == 2  # the lost partition's answer, and the committed offsets
    assert {e["step"] for e in result.examples} == {"lost", "committed"}


@pytest.mark.kafka
@pytest.mark.slow
def test_the_rule_holds_on_real_kafka(real_kafka: Callable[[int], Any]) -> None:
    """``-m slow``: the default tier's audit of Kafka pins the same (tests/audit/test_audit_kafka.py)."""
    broker = real_kafka(2)
    result = run_member_epoch_rule(broker.bootstrap, "kafka")
    assert (result.checked, result.violations, result.note) == (5, 0, ""), result.examples
