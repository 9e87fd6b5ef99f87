"""Six real Kafka bugs, rediscovered: each buggy variant yields a pinned shortest counterexample to the
named property, and the same scenario under the current protocol (TV2, with every fix) holds."""

from __future__ import annotations

import pytest

from txnspec.checker import check
from txnspec.spec.model import build_model
from txnspec.spec.variants import variant_named

# variant -> (scenario, property violated, length of the shortest counterexample)
BUGS = {
    "hanging-transaction": ("delayed-produce", "no_hanging_transaction", 11),
    "late-produce-joins-next": ("delayed-produce", "read_committed_only_committed", 23),
    "kafka-17754": ("delayed-end-txn", "end_txn_applies_to_its_transaction", 19),
    "zombie-not-fenced": ("zombie", "fenced_producer_never_commits", 19),
    "failover-without-markers": ("failover", "prepared_transactions_complete", 13),
    "no-duplicate-detection": ("retry", "no_duplicate_append", 8),
}


@pytest.mark.parametrize("variant", sorted(BUGS))
def test_the_checker_finds_the_bug(variant: str) -> None:
    scenario, prop, length = BUGS[variant]
    assert variant_named(variant).expected_violation == prop
    result = check(build_model(scenario, variant))
    verdict = result.verdict(prop)
    assert verdict.holds is False
    assert verdict.counterexample is not None and len(verdict.counterexample) == length


@pytest.mark.parametrize("scenario", sorted({s for s, _, _ in BUGS.values()}))
def test_the_current_protocol_holds_on_the_same_scenario(scenario: str) -> None:
    result = check(build_model(scenario, "current"))
    assert result.complete and result.ok, result.render()


def test_kafka_17754_counterexample_reads_as_the_bug() -> None:
    """The delayed EndTxn of the first transaction decides the second one."""
    result = check(build_model("delayed-end-txn", "kafka-17754"),
                   properties=["end_txn_applies_to_its_transaction"])
    cex = result.verdict("end_txn_applies_to_its_transaction").counterexample
    assert cex is not None
    actions = cex.actions
    assert actions[0] == "producer-0.initTransactions()"
    duplicated = [a for a in actions if a.startswith("duplicate producer-0->coordinator: EndTxn(COMMIT")]
    assert duplicated, actions
    begins = [i for i, a in enumerate(actions) if a == "producer-0.beginTransaction()"]
    assert len(begins) == 2  # the late EndTxn arrives once the second transaction has begun
    assert actions[-1].startswith("deliver producer-0->coordinator: EndTxn(COMMIT, pid=0, epoch=0)")


def test_transaction_version_1_has_kafka_17754_but_not_the_other_bugs() -> None:
    assert check(build_model("delayed-produce", "tv1")).ok
    assert not check(build_model("delayed-end-txn", "tv1")).ok
