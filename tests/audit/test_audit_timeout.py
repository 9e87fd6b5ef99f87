"""The transaction timeout rule (audit/timeout.py): the spec's answers pinned, the implementation
holding it at both transaction versions, and a broker that never aborts violating it."""

from __future__ import annotations

import pytest

from txnspec.audit.timeout import ImplTimeoutWire, expected, run_timeout_rule
from txnspec.audit.wire_traces import ImplTxnWire


def test_the_spec_fences_and_aborts_a_timed_out_transaction() -> None:
    tv2, tv1 = expected(2), expected(1)
    for want in (tv1, tv2):
        assert want.read_committed == {"high_watermark": 2, "last_stable_offset": 2,
                                       "aborted_transactions": [(0, 0)], "records": []}
        assert want.read_uncommitted["records"] == [0]
        assert want.late_produce == {"error": "INVALID_PRODUCER_EPOCH"}
        assert want.init_again == {"error": "NONE", "epoch": 2}  # the fence's bump, then the new instance's
    # TV1: the old epoch is fenced; TV2: the old epoch is the one before the fence, a retry window that an
    # EndTxn(COMMIT) after an abort does not match (Kafka 4.4 answers the same, docs/audit.md)
    assert tv1.end_txn == {"error": "PRODUCER_FENCED"}
    assert tv2.end_txn == {"error": "INVALID_TXN_STATE"}


@pytest.mark.parametrize(("wire_tv", "spec_tv", "checks"), [(0, 1, 8), (2, 2, 7)])
def test_the_implementation_holds_the_rule(wire_tv: int, spec_tv: int, checks: int) -> None:
    row = run_timeout_rule(ImplTimeoutWire(wire_tv), spec_tv, "t", sleep=lambda _: None)
    assert (row.outcome, row.checked, row.note) == ("held", checks, "")


class NeverAborts(ImplTxnWire):
    """A broker whose coordinator never runs its timeout scan (as Tansu, noida-db and the librdkafka mock)."""


def test_a_broker_that_never_aborts_violates_it() -> None:
    row = run_timeout_rule(NeverAborts(2), 2, "t", grace_seconds=0.05, sleep=lambda _: None)
    assert row.outcome == "violated" and row.checked == 3  # InitProducerId, Produce, then the read
    assert "had not aborted the transaction" in row.note
    last = row.examples[0]["sequence"][-1]
    assert last["actual"]["last_stable_offset"] == 0 and last["expected"]["last_stable_offset"] == 2
