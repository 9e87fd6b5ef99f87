"""The Pulsar spec: coordinator and buffer handlers, properties against hand-built states, pinned state
counts and the shortest counterexamples of the failures its source leads us to expect."""

from __future__ import annotations

import functools

import pytest

from txnspec.checker import check
from txnspec.checker.report import CheckResult
from txnspec.spec.guarantees import GuaranteeCheck
from txnspec.spec.pulsar import buffer as buf
from txnspec.spec.pulsar import coordinator as tcm
from txnspec.spec.pulsar import properties as props
from txnspec.spec.pulsar import system as sysm
from txnspec.spec.pulsar.coordinator import TxnAction, TxnStatus
from txnspec.spec.pulsar.model import GUARANTEES, SCENARIOS, VARIANTS, build_model

# --- coordinator -----------------------------------------------------------------------------------------


def test_the_transition_table_is_can_transition_to() -> None:
    allowed = {(a, b) for a, targets in tcm.VALID_TRANSITIONS.items() for b in targets if a != b}
    assert allowed == {(TxnStatus.OPEN, TxnStatus.COMMITTING), (TxnStatus.OPEN, TxnStatus.ABORTING),
                       (TxnStatus.COMMITTING, TxnStatus.COMMITTED), (TxnStatus.ABORTING, TxnStatus.ABORTED)}


def test_commit_sends_markers_with_the_low_watermark_and_forgets_the_transaction_when_done() -> None:
    tc, txn = tcm.new_transaction(tcm.Coordinator())
    tc, error = tcm.add_partition(tc, txn, "p0")
    assert error is None
    ended = tcm.end_transaction(tc, txn, TxnAction.COMMIT)
    assert ended.markers == (tcm.EndMarker(txn, "p0", "COMMIT", -1),) and ended.answered == 0
    meta = ended.tc.meta(txn)
    assert meta is not None and meta.status is TxnStatus.COMMITTING
    done = tcm.participant_done(ended.tc, txn, "p0")
    assert done.answered == 1 and done.tc.meta(txn) is None  # outcome forgotten (#19629)
    assert tcm.end_transaction(done.tc, txn, TxnAction.COMMIT).error == "TransactionNotFound"


def test_an_end_that_disagrees_with_the_one_in_progress_is_invalid() -> None:
    tc, txn = tcm.new_transaction(tcm.Coordinator())
    tc, _ = tcm.add_partition(tc, txn, "p0")
    aborting = tcm.end_transaction(tc, txn, TxnAction.ABORT, waiter=False).tc
    assert tcm.end_transaction(aborting, txn, TxnAction.COMMIT).error == "InvalidTxnStatus"
    joined = tcm.end_transaction(aborting, txn, TxnAction.ABORT)
    assert joined.error is None and joined.markers == () and joined.tc.meta(txn).waiters == 1  # type: ignore[union-attr]


def test_partitions_are_added_only_while_open() -> None:
    tc, txn = tcm.new_transaction(tcm.Coordinator())
    tc, _ = tcm.add_partition(tc, txn, "p0")
    ending = tcm.end_transaction(tc, txn, TxnAction.COMMIT).tc
    assert tcm.add_partition(ending, txn, "p1")[1] == "InvalidTxnStatus"
    assert tcm.add_partition(tcm.Coordinator(), 5, "p1")[1] == "TransactionNotFound"


def test_recovery_re_drives_ending_transactions_and_drops_pending_answers() -> None:
    tc, txn = tcm.new_transaction(tcm.Coordinator())
    tc, _ = tcm.add_partition(tc, txn, "p0")
    committing = tcm.end_transaction(tc, txn, TxnAction.COMMIT).tc
    recovered, markers, lost = tcm.recover(committing)
    assert lost == 1 and markers == (tcm.EndMarker(txn, "p0", "COMMIT", -1),)
    assert recovered.meta(txn).waiters == 0  # type: ignore[union-attr]
    assert recovered.next_seq == 1  # MLTransactionSequenceIdGenerator: ids stay unique


# --- transaction buffer, pending acks, dedup ----------------------------------------------------------------

def test_an_open_transaction_hides_everything_after_its_first_entry() -> None:
    tb = buf.append(buf.TransactionBuffer(), 0, 0, producer=0, sequence_id=0, dedup=False).buffer
    assert tb.max_read_position == -1 and buf.readable(tb) == ()
    committed = buf.end_on_partition(tb, 0, "COMMIT", -1)
    assert buf.readable(committed) == ((0, 0, 0),)


def test_an_abort_adds_to_the_aborted_set_and_hides_the_entries() -> None:
    tb = buf.append(buf.TransactionBuffer(), 0, 0, producer=0, sequence_id=0, dedup=False).buffer
    aborted = buf.end_on_partition(tb, 0, "ABORT", -1)
    assert aborted.aborted == {0} and buf.readable(aborted) == () and aborted.max_read_position == 1


def test_an_abort_on_a_partition_without_transactional_data_writes_nothing() -> None:
    assert buf.end_on_partition(buf.TransactionBuffer(), 0, "ABORT", 0) == buf.TransactionBuffer()


def test_a_send_at_or_below_the_low_watermark_is_refused() -> None:
    tb = buf.TransactionBuffer(low_watermark=3, had_transactions=True)
    assert buf.append(tb, 3, 0, producer=0, sequence_id=0, dedup=False).error is not None
    assert buf.append(tb, 4, 0, producer=0, sequence_id=0, dedup=False).error is None


def test_a_late_send_reopens_a_committed_transaction_and_the_watermark_aborts_it() -> None:
    """RULES §2.9 item 4: the committed entry at position 0 is no longer delivered."""
    tb = buf.append(buf.TransactionBuffer(), 0, 0, producer=0, sequence_id=0, dedup=False).buffer
    tb = buf.end_on_partition(tb, 0, "COMMIT", -1)
    tb = buf.append(tb, 0, 0, producer=0, sequence_id=0, dedup=False).buffer
    assert tb.ongoing == ((0, 2),)
    tb = buf.end_on_partition(tb, 1, "ABORT", 0)
    assert tb.aborted == {0, 1} and buf.readable(tb) == ()


def test_deduplication_answers_a_retransmission_without_writing() -> None:
    first = buf.append(buf.TransactionBuffer(), 0, 0, producer=0, sequence_id=0, dedup=True).buffer
    again = buf.append(first, 0, 0, producer=0, sequence_id=0, dedup=True)
    assert again.duplicate and again.buffer == first


def test_pending_acks_conflict_and_apply_on_commit_only() -> None:
    sub, error = buf.ack(buf.Subscription(), 0)
    assert error is None and buf.ack(sub, 1)[1] == "TransactionConflict: in pending ack status"
    assert buf.end_on_subscription(sub, 0, "ABORT") == buf.Subscription()
    committed = buf.end_on_subscription(sub, 0, "COMMIT")
    assert committed.deleted and buf.ack(committed, 1)[1] == "TransactionConflict: already acked before"


# --- properties against hand-built states -------------------------------------------------------------------

def _state(buffer: buf.TransactionBuffer, decisions: tuple[tuple[int, str], ...] = (),
           client: sysm.ClientState = sysm.ClientState.OPEN) -> sysm.PulsarState:
    return sysm.PulsarState(tcm.Coordinator(), (("p0", buffer),), buf.Subscription(),
                            (sysm.Client(0, client, 0),), ghost=sysm.Ghost(decisions))


def test_each_invariant_rejects_a_state_that_breaks_it() -> None:
    readable = buf.TransactionBuffer(entries=(("data", 0, 0), ("data", 0, 0)), had_transactions=True)
    assert not props.delivered_only_if_committed(_state(readable, (( 0, "ABORT"),)))
    assert props.delivered_only_if_committed(_state(readable, ((0, "COMMIT"),)))
    assert not props.no_duplicate_committed(_state(readable, ((0, "COMMIT"),)))
    revoked = buf.TransactionBuffer(entries=(("data", 0, 0), ("commit", 0, -1)), aborted=frozenset({0}))
    assert not props.decision_never_revoked(_state(revoked))
    assert not props.client_error_only_if_not_committed(_state(buf.TransactionBuffer(), ((0, "COMMIT"),),
                                                                sysm.ClientState.ERROR))
    assert not props.client_outcome_matches_decision(_state(buf.TransactionBuffer(), ((0, "ABORT"),),
                                                            sysm.ClientState.COMMITTED))
    acked = replace_subscription(_state(buf.TransactionBuffer(), ((0, "ABORT"),)), buf.Subscription(True, None, 0))
    assert not props.acks_only_with_commit(acked)


def replace_subscription(state: sysm.PulsarState, sub: buf.Subscription) -> sysm.PulsarState:
    from dataclasses import replace

    return replace(state, subscription=sub)


# --- model checking ------------------------------------------------------------------------------------------

STATES = {"pulsar-happy": 1_714, "pulsar-default": 22_944, "pulsar-two": 81_631, "pulsar-tc-crash": 334,
          "pulsar-client-timeout": 42}

EXPECTED_FAILURES = {
    "pulsar-happy": {"max_read_position_passes_ended": 10},
    "pulsar-default": {"client_error_only_if_not_committed": 15, "end_txn_answers_its_outcome": 14,
                       "no_duplicate_committed": 14, "max_read_position_passes_ended": 10},
    "pulsar-tc-crash": {"max_read_position_passes_ended": 10},
    "pulsar-client-timeout": {"max_read_position_passes_ended": 6},
}


@functools.cache  # one search per (scenario, variant, properties): the tests below share them
def _checked(scenario: str, variant: str = "current", properties: tuple[str, ...] | None = None) -> CheckResult:
    """Every property (None), or only the ones named: a search of violated invariants alone stops early."""
    return check(build_model(scenario, variant), properties=None if properties is None else list(properties))


def test_the_scenarios_are_the_pinned_ones() -> None:
    assert set(STATES) == set(SCENARIOS) and set(VARIANTS) == {"current", "dedup"}


@pytest.mark.parametrize("scenario", sorted(EXPECTED_FAILURES))
def test_exactly_the_expected_properties_fail_with_pinned_counterexamples(scenario: str) -> None:
    result = _checked(scenario)
    assert result.complete and result.states == STATES[scenario]
    found = {v.name: len(v.counterexample) for v in result.violated if v.counterexample is not None}
    assert found == EXPECTED_FAILURES[scenario], result.render()


def test_a_retried_commit_finds_the_transaction_forgotten() -> None:
    """apache/pulsar#19629: the duplicated END_TXN answers TransactionNotFound and the client is in ERROR
    although the coordinator committed."""
    cex = _checked("pulsar-two", "current", ("client_error_only_if_not_committed",)).verdict(
        "client_error_only_if_not_committed").counterexample
    assert cex is not None and len(cex) == 9
    assert cex.actions[5] == "duplicate END_TXN(txn 0, COMMIT)"
    assert cex.actions[-1] == "deliver END_TXN_RESPONSE(client 0, TransactionNotFound)"


def test_a_late_send_revokes_a_commit() -> None:
    """RULES §2.9 item 4 [derived]: found by the checker in 11 steps; deduplication closes it."""
    cex = _checked("pulsar-two", "current", ("decision_never_revoked",)).verdict(
        "decision_never_revoked").counterexample
    assert cex is not None and len(cex) == 11
    assert "duplicate SEND(txn 0, p0, message 0)" in cex.actions
    assert cex.actions.index("deliver END_TXN(txn 0, COMMIT)") < len(cex) - 2  # the late send comes after it
    assert check(build_model("pulsar-two", "dedup"), properties=["decision_never_revoked"]).verdict(
        "decision_never_revoked").holds


def test_deduplication_removes_the_duplicate() -> None:
    result = _checked("pulsar-default", "dedup")
    assert result.complete and result.states == 18_390
    assert result.verdict("no_duplicate_committed").holds


def test_each_guarantee_row_has_the_expected_verdict() -> None:
    for row in GUARANTEES:
        if not isinstance(row, GuaranteeCheck):
            continue
        # the rows on pulsar-two search their properties alone (all of them: the module's longest search); the
        # others read the search of every property the pinned-failures test made
        result = _checked(row.scenario, row.variant, tuple(row.properties) if row.scenario == "pulsar-two" else None)
        assert set(row.properties) <= {v.name for v in result.verdicts}
        found = "violated" if {v.name for v in result.violated} & set(row.properties) else "holds"
        assert found == row.expected, row
