"""Seven real Kafka bugs rediscovered, and KIP-848's member-epoch check dropped: each buggy variant yields a
pinned shortest counterexample to the named property, and the same scenario under the current protocol (TV2,
with every fix) holds."""

from __future__ import annotations

import pytest
from test_scenarios import PINNED

from txnspec.checker import check
from txnspec.spec.model import build_model
from txnspec.spec.scenarios import scenario_named
from txnspec.spec.variants import variant_named

# variant -> (scenario, property violated, length of the shortest counterexample)
BUGS = {
    "hanging-transaction": ("delayed-produce", "no_hanging_transaction", 11),
    "late-produce-joins-next": ("delayed-produce", "read_committed_only_committed", 23),
    "kafka-17754": ("delayed-end-txn", "end_txn_applies_to_its_transaction", 19),
    "zombie-not-fenced": ("zombie", "fenced_producer_never_commits", 19),
    "failover-without-markers": ("failover", "prepared_transactions_complete", 13),
    "no-duplicate-detection": ("retry", "no_duplicate_append", 8),
    "zombie-offsets-not-fenced": ("rebalance", "no_fenced_member_offsets_commit", 11),
    "member-epoch-not-checked": ("consumer-rebalance", "no_fenced_member_offsets_commit", 11),  # KIP-848
}


@pytest.mark.parametrize("variant", sorted(BUGS))
def test_the_checker_finds_the_bug(variant: str) -> None:
    scenario, prop, length = BUGS[variant]
    assert variant_named(variant).expected_violation == prop
    result = check(build_model(scenario, variant))
    verdict = result.verdict(prop)
    assert verdict.holds is False
    assert verdict.counterexample is not None and len(verdict.counterexample) == length


@pytest.mark.parametrize("variant", sorted(BUGS))
def test_every_bug_variant_runs_with_consumer_offsets(variant: str) -> None:
    """A variant replaces one handler of the protocol; it must still run where other handlers call it
    differently (the offsets append of a TxnOffsetCommit passes no sequence checks of its own)."""
    result = check(build_model(scenario_named("offsets").with_(faults={"duplicate": 1}), variant),
                   max_states=20_000)
    assert result.states > 100, result.render()


@pytest.mark.parametrize("scenario", sorted({s for s, _, _ in BUGS.values()} - set(PINNED)))
def test_the_current_protocol_holds_on_the_same_scenario(scenario: str) -> None:
    """The others are among tests/spec/test_scenarios.py's pinned scenarios, where every property holds."""
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


def test_transaction_version_1_has_kafka_17754_and_the_late_produce_of_kip_890() -> None:
    delayed_produce = check(build_model("delayed-produce", "tv1"))
    # no hanging transaction (partition verification); but a produce the client gives up on while the abort is under
    # way, on its first attempt, is no unresolved sequence (Sender.sendProducerData marks only a batch in retry) and
    # maybeTransitionToErrorState bumps no epoch while completing: the next transaction keeps the epoch and the late
    # produce joins it (KIP-890 part 2's motivation; TV2 bumps the epoch at every EndTxn)
    failed = {v.name: len(v.counterexample or ()) for v in delayed_produce.verdicts if v.holds is False}
    assert failed == {"read_committed_only_committed": 23, "atomic_outcome": 23}
    cex = delayed_produce.verdict("atomic_outcome").counterexample
    assert cex is not None
    actions = cex.actions
    assert actions.index("producer-0.abortTransaction()") < actions.index("producer-0 gives up on its produce to p0")
    assert not any("InitProducerId(t1, pid=0" in a for a in actions)  # no epoch bump
    assert actions[-1] == "deliver coordinator->p0: WriteTxnMarkers(p0, COMMIT, pid=0, epoch=0, coordinatorEpoch=0)"
    assert not check(build_model("delayed-end-txn", "tv1")).ok


def test_a_tv1_client_whose_retried_batch_expires_during_the_abort_is_wedged() -> None:
    """TransactionManager: a batch given up on while waiting for its retry (here: its Produce was lost) leaves its
    sequence unresolved; maybeResolveSequences requires the epoch bump while the abort is under way, but only
    beginCompletingTransaction queues the bump's InitProducerId; after EndTxn the client is INITIALIZING with
    nothing to send (beginTransaction and initTransactions are then invalid transitions)."""
    lossy = scenario_named("delayed-produce").with_(faults={"timeout": 1, "expire_batch": 1, "loss": 1})
    result = check(build_model(lossy, "tv1"))
    assert result.deadlock is not None and len(result.deadlock) == 14
    actions = result.deadlock.actions
    lost = "lose producer-0->p0: Produce(p0, pid=0, epoch=0, seq=0)"
    assert actions.index("producer-0.abortTransaction()") < actions.index(lost) \
        < actions.index("producer-0 gives up on its produce to p0")
    answer = "deliver coordinator->producer-0: EndTxnResponse(NONE"
    answered = [i for i, a in enumerate(actions) if a.startswith(answer)]
    assert answered and answered[0] > actions.index("producer-0 gives up on its produce to p0")
    assert not any("InitProducerId(t1, pid=0" in a for a in actions)  # the bump is never sent
    assert not check(build_model("delayed-produce", "tv1")).deadlock_count  # no retry there: no wedge
    assert check(build_model(lossy, "current")).ok  # TV2 bumps the epoch at every EndTxn


def test_zombie_offsets_counterexample_reads_as_kip_447() -> None:
    """Without the generation check, the member evicted by the rebalance commits its input position."""
    result = check(build_model("rebalance", "zombie-offsets-not-fenced"),
                   properties=["no_fenced_member_offsets_commit"])
    cex = result.verdict("no_fenced_member_offsets_commit").counterexample
    assert cex is not None
    actions = cex.actions
    rebalance = actions.index("the group rebalances without producer-0's member (a zombie from now on)")
    commit = next(i for i, a in enumerate(actions) if a.startswith("deliver producer-0->group: TxnOffsetCommit"))
    assert rebalance < commit  # the commit reaches the group after the rebalance evicted its member
    assert actions[-1].startswith("deliver coordinator->group: WriteTxnMarkers(__consumer_offsets-3, COMMIT")


def test_the_rebalance_scenario_fences_the_zombie_and_the_new_owner_commits() -> None:
    result = check(build_model("rebalance"), properties=["no_fenced_member_offsets_commit",
                                                         "offsets_committed_after_rebalance"])
    assert result.complete and result.ok, result.render()
    assert result.coverage.get("rebalance", 0) > 0
