"""The RocketMQ spec: broker handlers, properties against hand-built states, pinned state counts and the
shortest counterexamples of the failures its source leads us to expect (each citing the upstream issue)."""

from __future__ import annotations

import pytest

from txnspec.checker import check
from txnspec.spec.guarantees import GuaranteeCheck
from txnspec.spec.rocketmq import broker as b
from txnspec.spec.rocketmq import properties as props
from txnspec.spec.rocketmq import system as sysm
from txnspec.spec.rocketmq.model import GUARANTEES, SCENARIOS, VARIANTS, build_model

# --- broker handlers -----------------------------------------------------------------------------------


def test_a_half_is_stored_in_the_half_queue_not_the_real_topic() -> None:
    broker, offset = b.put_half(b.Broker(), key=7)
    assert offset == 0 and broker.half_queue == (b.HalfEntry(7),) and broker.real_queue == ()


def test_commit_puts_the_real_message_then_queues_the_op_record_in_memory() -> None:
    broker, offset = b.put_half(b.Broker(), 0)
    out = b.end_transaction(broker, 0, offset, b.EndType.COMMIT)
    assert out.put_real and out.broker.real_queue == (0,)
    assert out.broker.op_batch == {0} and out.broker.op_durable == frozenset()
    assert b.flush_op_batch(out.broker).op_durable == {0}


def test_commit_is_not_idempotent() -> None:
    """#5574: nothing on the END path asks whether the half was already resolved."""
    broker, offset = b.put_half(b.Broker(), 0)
    once = b.end_transaction(broker, 0, offset, b.EndType.COMMIT).broker
    twice = b.end_transaction(b.flush_op_batch(once), 0, offset, b.EndType.COMMIT).broker
    assert twice.real_queue == (0, 0)


def test_rollback_only_queues_the_op_record() -> None:
    broker, offset = b.put_half(b.Broker(), 0)
    out = b.end_transaction(broker, 0, offset, b.EndType.ROLLBACK)
    assert not out.put_real and out.broker.real_queue == () and out.broker.op_batch == {0}


def test_an_end_for_a_missing_half_answers_system_error() -> None:
    out = b.end_transaction(b.Broker(), 0, 3, b.EndType.COMMIT)
    assert out.error is not None and "Find prepared transaction message failed" in out.error
    assert out.broker == b.Broker()


def test_a_crash_loses_the_op_batch_but_not_the_real_message() -> None:
    broker, offset = b.put_half(b.Broker(), 0)
    crashed = b.crash(b.end_transaction(broker, 0, offset, b.EndType.COMMIT).broker)
    assert crashed.op_batch == frozenset() and crashed.real_queue == (0,)


def test_check_step_re_puts_a_copy_then_discards_at_the_maximum() -> None:
    broker, _ = b.put_half(b.Broker(), 0)
    first = b.check_step(broker, check_max=1)
    assert first is not None and first.step is b.CheckStep.CHECKED and first.copy_offset == 1
    assert first.broker.half_queue[1] == b.HalfEntry(0, 1) and first.broker.half_offset == 1
    second = b.check_step(first.broker, check_max=1)
    assert second is not None and second.step is b.CheckStep.DISCARDED and second.broker.discarded == (1,)
    assert b.check_step(second.broker, check_max=1) is None  # NO_NEW_MSG


def test_check_step_skips_an_entry_named_by_a_written_op_record_only() -> None:
    broker, offset = b.put_half(b.Broker(), 0)
    ended = b.end_transaction(broker, 0, offset, b.EndType.ROLLBACK).broker
    in_memory = b.check_step(ended, check_max=2)
    assert in_memory is not None and in_memory.step is b.CheckStep.CHECKED  # the op is not written yet
    written = b.check_step(b.flush_op_batch(ended), check_max=2)
    assert written is not None and written.step is b.CheckStep.RESOLVED


def test_an_op_record_below_the_consume_offset_does_not_resolve_a_later_copy() -> None:
    """fillOpRemoveMap ignores op offsets below halfOffset: #8158 (3)."""
    broker, offset = b.put_half(b.Broker(), 0)
    checked = b.check_step(broker, check_max=3)
    assert checked is not None
    late_end = b.flush_op_batch(b.end_transaction(checked.broker, 0, offset, b.EndType.COMMIT).broker)
    again = b.check_step(late_end, check_max=3)
    assert again is not None and again.step is b.CheckStep.CHECKED and again.offset == 1


# --- the listener ------------------------------------------------------------------------------------------

def test_the_consistent_listener_answers_unknow_until_the_local_transaction_decides() -> None:
    consistent = sysm.RocketConfig()
    assert sysm.check_answer(consistent, sysm.Local.PENDING) == ("UNKNOW",)
    assert sysm.check_answer(consistent, sysm.Local.COMMITTED) == ("COMMIT_MESSAGE",)
    inconsistent = sysm.RocketConfig(consistent_listener=False)
    assert set(sysm.check_answer(inconsistent, sysm.Local.PENDING)) == {"COMMIT_MESSAGE", "ROLLBACK_MESSAGE"}


# --- properties against hand-built states ------------------------------------------------------------------

def _state(real: tuple[int, ...] = (), local: sysm.Local = sysm.Local.COMMITTED, **ghost: frozenset[int]
           ) -> sysm.RocketState:
    broker = b.Broker(half_queue=(b.HalfEntry(0),), real_queue=real)
    return sysm.RocketState(broker, (sysm.Txn(0, sysm.Phase.ENDED, 0, local),), ghost=sysm.Ghost(**ghost))


def test_each_invariant_rejects_a_state_that_breaks_it() -> None:
    assert not props.at_most_one_committed_copy(_state(real=(0, 0)))
    assert props.at_most_one_committed_copy(_state(real=(0,)))
    assert not props.visible_implies_locally_committed(_state(real=(0,), local=sysm.Local.PENDING))
    assert not props.rolled_back_never_visible(_state(real=(0,), local=sysm.Local.ROLLED_BACK))
    assert not props.no_commit_and_rollback(_state(real=(0,), rolled_back=frozenset({0})))
    assert props.no_commit_and_rollback(_state(real=(), rolled_back=frozenset({0})))
    assert not props.no_check_after_resolution(_state(late_checks=frozenset({0})))
    lost = sysm.RocketState(b.Broker(half_queue=(b.HalfEntry(0),), op_durable=frozenset({0})),
                            (sysm.Txn(0),), ghost=sysm.Ghost(committed=frozenset({0})))
    assert not props.op_record_implies_decision_durable(lost)
    copies = sysm.RocketState(b.Broker(half_queue=(b.HalfEntry(0), b.HalfEntry(0, 1), b.HalfEntry(0, 1))),
                              (sysm.Txn(0),))
    assert not props.make_checks_bounded(1)(copies) and props.make_checks_bounded(2)(copies)


# --- model checking: pinned counts and counterexamples -----------------------------------------------------

STATES = {"rocketmq-default": 7_841, "rocketmq-happy": 139, "rocketmq-two": 48_857, "rocketmq-crash": 1_383,
          "rocketmq-half-retry": 1_387}

# property -> length of the shortest counterexample under the current protocol, per scenario
EXPECTED_FAILURES = {
    "rocketmq-happy": {"at_most_one_committed_copy": 6, "no_check_after_resolution": 4,
                       "committed_eventually_visible": 6},
    "rocketmq-default": {"at_most_one_committed_copy": 5, "no_check_after_resolution": 4,
                         "committed_eventually_visible": 8},
    "rocketmq-crash": {"at_most_one_committed_copy": 6, "no_check_after_resolution": 4,
                       "committed_eventually_visible": 8},
    "rocketmq-half-retry": {"at_most_one_committed_copy": 6, "checks_bounded": 3, "no_check_after_resolution": 4,
                            "committed_eventually_visible": 6},
}


def test_the_scenarios_are_the_pinned_ones() -> None:
    assert set(STATES) == set(SCENARIOS)
    assert set(VARIANTS) == {"current", "inconsistent-listener"}


@pytest.mark.parametrize("scenario", sorted(EXPECTED_FAILURES))
def test_exactly_the_expected_properties_fail_with_pinned_counterexamples(scenario: str) -> None:
    result = check(build_model(scenario))
    assert result.complete and result.states == STATES[scenario]
    found = {v.name: len(v.counterexample) for v in result.violated if v.counterexample is not None}
    assert found == EXPECTED_FAILURES[scenario], result.render()
    assert all(v.holds for v in result.verdicts if v.expectation == "sometimes")


@pytest.mark.slow
def test_two_transactions_fail_the_same_way() -> None:
    result = check(build_model("rocketmq-two"))
    assert result.complete and result.states == STATES["rocketmq-two"]
    assert {v.name for v in result.violated} == {"at_most_one_committed_copy", "no_check_after_resolution",
                                                 "committed_eventually_visible"}


def test_a_duplicated_commit_is_stored_twice() -> None:
    """apache/rocketmq#5574: the shortest double commit in rocketmq-default duplicates the END."""
    cex = check(build_model("rocketmq-default"), properties=["at_most_one_committed_copy"]).verdict(
        "at_most_one_committed_copy").counterexample
    assert cex is not None
    assert [a.split(" ")[0] for a in cex.actions] == ["sendMessageInTransaction(k0)", "executeLocalTransaction(k0)",
                                                      "duplicate", "deliver", "deliver"]


def test_the_end_and_a_check_reply_both_commit() -> None:
    """apache/rocketmq#8158 (1), #7933: with no fault, the check loop reaches the half while the END's op
    record is still in memory, and the check's COMMIT puts a second copy."""
    cex = check(build_model("rocketmq-happy"), properties=["at_most_one_committed_copy"]).verdict(
        "at_most_one_committed_copy").counterexample
    assert cex is not None and len(cex) == 6
    assert "check half 0" in cex.actions[3] and "fromTransactionCheck" in cex.actions[5]


def test_the_inconsistent_listener_commits_and_rolls_back_the_same_transaction() -> None:
    """apache/rocketmq#8158 (2): a check answered ROLLBACK before the local transaction committed."""
    variant = VARIANTS["inconsistent-listener"]
    result = check(build_model("rocketmq-happy", variant.name))
    assert variant.expected_violation is not None
    verdict = result.verdict(variant.expected_violation)
    assert verdict.holds is False and verdict.counterexample is not None and len(verdict.counterexample) == 6
    assert {v.name for v in result.violated} >= {"visible_implies_locally_committed", "rolled_back_never_visible"}


def test_each_guarantee_row_has_the_expected_verdict() -> None:
    by_run: dict[str, set[str]] = {}
    for row in GUARANTEES:
        if not isinstance(row, GuaranteeCheck):
            continue
        if row.scenario not in by_run:
            by_run[row.scenario] = {v.name for v in check(build_model(row.scenario, row.variant)).violated}
        found = "violated" if set(row.properties) & by_run[row.scenario] else "holds"
        assert found == row.expected, row
