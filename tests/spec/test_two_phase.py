"""KIP-939 model-checked: Kafka 4.4's two-phase commit (``current``) and the KIP's design of ``keepPreparedTxn``
(the variant ``kip-939-keep-prepared``); each 2PC invariant with its partner, counts pinned, and for each invariant
a broken protocol that it catches with a pinned shortest counterexample (docs/kip-939.md)."""

from __future__ import annotations

import pytest

from txnspec.checker import check
from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import two_phase, txn_expiry, txn_state, values
from txnspec.spec.errors import Errors
from txnspec.spec.messages import InitProducerId
from txnspec.spec.model import build_model
from txnspec.spec.scenarios import scenario_named
from txnspec.spec.variants import variant_named

TWO_PC = ("prepared_never_timed_out", "prepared_transaction_open", "prepared_outcome_follows_external_decision",
          "prepared_transaction_committed")
KEPT = ("no_write_under_kept_epoch", "prepared_transaction_kept")

# (scenario, variant) -> states
PINNED = {("two-phase-commit", "current"): 173, ("two-phase-commit", "tv1"): 182,
          ("two-phase-recovery", "kip-939-keep-prepared"): 481}


@pytest.mark.parametrize(("name", "variant"), sorted(PINNED))
def test_every_property_holds_with_two_phase_commit(name: str, variant: str) -> None:
    result = check(build_model(name, variant), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == PINNED[(name, variant)]
    assert result.deadlock_count == 0
    verdicts = {v.name: v for v in result.verdicts}
    for prop in TWO_PC + (KEPT if name == "two-phase-recovery" else ()):
        assert verdicts[prop].holds, prop  # every invariant holds and every partner was reached
    for kind in ("prepareTransaction", "completeTransaction", "external coordinator decides commit",
                 "external coordinator decides abort"):
        assert result.coverage.get(kind, 0) > 0, kind
    if name == "two-phase-recovery":
        assert result.coverage.get("crash", 0) > 0


def test_kafka_4_4_cannot_recover_a_prepared_transaction() -> None:
    """4.4 answers keepPreparedTxn with UNSUPPORTED_VERSION (fatal for the client) and never times a 2PC
    transaction out: a crashed 2PC producer's transaction stays open (the last stable offset never advances),
    and no transaction is ever kept."""
    result = check(build_model("two-phase-recovery"), symmetry=False)
    assert result.complete and result.states == 279
    failed = {v.name: len(v.counterexample or ()) for v in result.verdicts if v.holds is False}
    assert failed == {"prepared_transaction_kept": 0, "last_stable_offset_advances": 11}
    assert all(v.holds for v in result.verdicts if v.name in TWO_PC[::2] + KEPT[:1])


def test_a_late_init_producer_id_aborts_a_prepared_transaction() -> None:
    """A copy of InitProducerId (without keepPreparedTxn) delivered after the prepare fences and aborts the
    prepared transaction although the external coordinator decided commit: 2PC protects a prepared transaction
    from timeouts, not from InitProducerId (why two-phase-commit budgets a loss, not a duplicate)."""
    result = check(build_model(scenario_named("two-phase-commit").with_(faults={"duplicate": 1})), symmetry=False)
    verdict = result.verdict("prepared_outcome_follows_external_decision")
    assert verdict.holds is False and verdict.counterexample is not None
    steps = [str(a) for a in verdict.counterexample.actions]
    assert len(steps) == 11 and steps[-1].startswith("deliver producer-0->coordinator: InitProducerId")
    assert any(step.startswith("duplicate") for step in steps)


# variant -> (scenario, property violated, length of the shortest counterexample)
BROKEN = {
    "kafka-4.4.0-client": ("two-phase-commit", "prepared_outcome_follows_external_decision", 10),
    "kip-939-keep-prepared-4.4-client": ("two-phase-recovery", "last_stable_offset_advances", 13),
    "two-phase-commit-times-out": ("two-phase-commit", "prepared_never_timed_out", 7),
    "complete-ignores-prepared-state": ("two-phase-commit", "prepared_outcome_follows_external_decision", 11),
    "keep-prepared-without-fence": ("two-phase-recovery", "fenced_producer_never_commits", 17),
    "keep-prepared-complete-ignores-state": ("two-phase-recovery", "no_write_under_kept_epoch", 17),
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_each_two_phase_invariant_catches_its_broken_protocol(variant: str) -> None:
    scenario, prop, length = BROKEN[variant]
    assert variant_named(variant).expected_violation == prop
    result = check(build_model(scenario, variant), symmetry=False)
    verdict = result.verdict(prop)
    assert verdict.holds is False
    assert verdict.counterexample is not None and len(verdict.counterexample) == length


def _init(tid: str = "t1", **kw: object) -> InitProducerId:
    return InitProducerId(tid, 60_000, -1, -1, **kw)  # type: ignore[arg-type]


def test_init_producer_id_follows_kafka_4_4() -> None:
    """``TransactionCoordinator.handleInitProducerId`` (4.4): 2PC needs the broker config; keepPreparedTxn is
    UNSUPPORTED_VERSION; 2PC lifts the timeout bound and stores Int.MaxValue, which the timeout scan skips."""
    on = coord_state.CoordinatorConfig(transaction_two_phase_commit_enable=True)
    cs = coord_state.CoordinatorState()
    assert coord.handle_init_producer_id(cs, _init(enable_two_pc=True)).response.error \
        is Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert coord.handle_init_producer_id(cs, _init(keep_prepared_txn=True), config=on).response.error \
        is Errors.UNSUPPORTED_VERSION
    huge = InitProducerId("t1", 10**9, -1, -1, True)
    result = coord.handle_init_producer_id(cs, huge, config=on)
    assert result.response.error is Errors.NONE
    md = result.state.metadata("t1")
    assert md is not None and md.txn_timeout_ms == two_phase.INT_MAX_TIMEOUT
    ongoing = values.replace(md, state=txn_state.ONGOING, partitions=frozenset({"p0"}), txn_start_ms=0)
    assert not two_phase.is_timeout_candidate(ongoing)
    assert txn_expiry.timed_out_transactions(coord_state.with_metadata(result.state, ongoing, "t1"), 10**12) == ()
    assert InitProducerId("t1", 10**9).txn_timeout_ms > on.txn_max_timeout_ms
    assert coord.handle_init_producer_id(cs, InitProducerId("t1", 10**9), config=on).response.error \
        is Errors.INVALID_TRANSACTION_TIMEOUT


def test_the_kips_keep_prepared_txn_keeps_the_ongoing_transaction() -> None:
    on = coord_state.CoordinatorConfig(transaction_two_phase_commit_enable=True)
    cs = coord.handle_init_producer_id(coord_state.CoordinatorState(), _init(enable_two_pc=True), config=on).state
    md = cs.metadata("t1")
    assert md is not None
    ongoing = values.replace(md, state=txn_state.ONGOING, partitions=frozenset({"p0"}), txn_start_ms=0)
    cs = coord_state.with_metadata(cs, ongoing, "t1")
    result = coord.handle_init_producer_id_keeping_prepared(cs, _init(enable_two_pc=True, keep_prepared_txn=True),
                                                            config=on)
    response = result.response
    assert response.error is Errors.NONE
    assert (response.producer_id, response.producer_epoch) == (md.producer_id, md.producer_epoch + 1)
    assert (response.ongoing_txn_producer_id, response.ongoing_txn_producer_epoch) == (md.producer_id,
                                                                                       md.producer_epoch)
    kept = result.state.metadata("t1")
    assert kept is not None and kept.state is txn_state.ONGOING and kept.partitions == frozenset({"p0"})
    # without keepPreparedTxn the same request fences and aborts it (CONCURRENT_TRANSACTIONS)
    fenced = coord.handle_init_producer_id_keeping_prepared(cs, _init(enable_two_pc=True), config=on)
    assert fenced.response.error is Errors.CONCURRENT_TRANSACTIONS
