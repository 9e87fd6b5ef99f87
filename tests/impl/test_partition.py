"""Partition leader: producer-state rules, duplicates, LSO, aborted index and both isolation levels."""

from __future__ import annotations

import pytest

from txnspec.impl.consumer import visible_records
from txnspec.impl.errors import Errors
from txnspec.impl.log import INT_MAX, ControlType, Record
from txnspec.impl.partition import IsolationLevel, Partition
from txnspec.impl.producer_state import NUM_BATCHES_TO_RETAIN, in_sequence

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

RC, RU = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED


def recs(n: int, tag: str = "v") -> list[Record]:
    return [Record(value=f"{tag}{i}") for i in range(n)]


def visible(p: Partition, isolation: IsolationLevel) -> list[str]:
    f = p.read(0, isolation)
    return [str(r.value) for r in visible_records(p.name, f.batches, 0, isolation, f.aborted_transactions)[0]]


def test_idempotent_retry_is_answered_with_the_original_offsets() -> None:
    p = Partition("t-0")
    first = p.append_records(1, 0, 0, recs(3))
    assert (first.error, first.base_offset, first.last_offset, first.duplicate) == (Errors.NONE, 0, 2, False)
    again = p.append_records(1, 0, 0, recs(3))
    assert (again.error, again.base_offset, again.last_offset, again.duplicate) == (Errors.NONE, 0, 2, True)
    assert p.log_end_offset == 3  # nothing written twice


def test_only_the_last_five_batches_are_recognised_as_duplicates() -> None:
    p = Partition("t-0")
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        assert p.append_records(1, 0, i, recs(1)).error is Errors.NONE
    assert p.append_records(1, 0, 1, recs(1)).duplicate
    assert p.append_records(1, 0, 0, recs(1)).error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_gaps_and_old_epochs_are_rejected_and_nothing_is_written() -> None:
    p = Partition("t-0")
    p.append_records(1, 1, 0, recs(1))
    assert p.append_records(1, 1, 5, recs(1)).error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.append_records(1, 0, 1, recs(1)).error is Errors.INVALID_PRODUCER_EPOCH
    assert p.append_records(1, 2, 3, recs(1)).error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch: seq 0
    assert p.append_records(1, 2, 0, recs(1)).error is Errors.NONE
    assert p.log_end_offset == 2


def test_sequence_wraps_at_integer_max() -> None:
    assert in_sequence(INT_MAX, 0) and not in_sequence(INT_MAX, 1)
    p = Partition("t-0")
    assert p.append_records(1, 0, INT_MAX - 1, recs(2)).error is Errors.NONE  # no state: any sequence
    assert p.append_records(1, 0, 0, recs(1)).error is Errors.NONE


def test_a_transaction_pins_the_lso_until_its_marker_and_the_hw_pass() -> None:
    p = Partition("t-0")
    p.update_high_watermark(0)
    p.append_records(7, 0, 0, recs(2), True)
    p.update_high_watermark(2)
    assert (p.first_unstable_offset, p.last_stable_offset) == (0, 0)
    assert p.write_txn_marker(7, 0, 0, ControlType.COMMIT).error is Errors.NONE
    assert p.last_stable_offset == 0  # decided, but the marker is not below the HW yet
    p.update_high_watermark(3)
    assert (p.first_unstable_offset, p.last_stable_offset) == (None, 3)


def test_read_committed_hides_aborted_and_open_transactions() -> None:
    p = Partition("t-0")
    p.append_records(1, 0, 0, recs(2, "a"), True)
    p.append_records(2, 0, 0, recs(2, "b"), True)
    p.write_txn_marker(1, 0, 0, ControlType.ABORT)
    assert visible(p, RC) == []  # pid 2 is open at offset 2: LSO = 2, and pid 1 aborted
    p.write_txn_marker(2, 0, 0, ControlType.COMMIT)
    assert visible(p, RC) == ["b0", "b1"]
    assert visible(p, RU) == ["a0", "a1", "b0", "b1"]
    [entry] = p.txn_index.entries
    assert (entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset) == (1, 0, 4, 2)


def test_markers_follow_the_tv2_strict_epoch_rule_and_fence_old_coordinators() -> None:
    p = Partition("t-0")
    p.append_records(1, 5, 0, recs(1), True)
    assert p.write_txn_marker(1, 5, 3, ControlType.COMMIT, 2).error is Errors.INVALID_PRODUCER_EPOCH
    assert p.write_txn_marker(1, 6, 3, ControlType.COMMIT, 2).error is Errors.NONE
    assert p.write_txn_marker(1, 6, 3, ControlType.COMMIT, 2).error is Errors.NONE  # KAFKA-19999 retry
    assert p.write_txn_marker(1, 7, 2, ControlType.ABORT, 2).error is Errors.TRANSACTION_COORDINATOR_FENCED
    assert p.append_records(1, 5, 1, recs(1), True).error is Errors.INVALID_PRODUCER_EPOCH


def test_non_transactional_write_inside_a_transaction_is_invalid_txn_state() -> None:
    p = Partition("t-0")
    p.append_records(1, 0, 0, recs(1), True)
    assert p.append_records(1, 0, 1, recs(1), False).error is Errors.INVALID_TXN_STATE


def test_producers_expire_only_without_an_open_transaction() -> None:
    p = Partition("t-0", producer_id_expiration_ms=100)
    p.append_records(1, 0, 0, recs(1), now_ms=0)
    p.append_records(2, 0, 0, recs(1), True, now_ms=0)
    assert p.remove_expired_producers(100) == [1]
    assert p.append_records(1, 0, 42, recs(1)).error is Errors.NONE  # forgotten: any sequence


def test_rebuilding_producer_state_from_the_log_gives_the_same_answers() -> None:
    p = Partition("t-0")
    p.append_records(1, 0, 0, recs(2), True)
    p.append_records(2, 0, 0, recs(1), True)
    p.write_txn_marker(1, 0, 0, ControlType.ABORT)
    before = (p.first_unstable_offset, p.last_stable_offset, list(p.txn_index.entries))
    snap = p.snapshot()
    p.rebuild_producer_state()
    assert (p.first_unstable_offset, p.last_stable_offset, list(p.txn_index.entries)) == before
    p.rebuild_producer_state(snap)
    assert (p.first_unstable_offset, p.last_stable_offset, list(p.txn_index.entries)) == before
    assert p.append_records(2, 0, 1, recs(1), True).error is Errors.NONE


def test_a_refused_append_writes_nothing_and_leaves_producer_state_as_it_was() -> None:
    p = Partition("t-0")
    p.refuse_next_append(Errors.NOT_ENOUGH_REPLICAS)
    refused = p.append_records(7, 0, 0, [Record(value="a")], is_transactional=True)
    assert refused.error is Errors.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 0 and p.producer_state.last_entry(7) is None
    assert p.append_records(7, 0, 0, [Record(value="a")], is_transactional=True).error is Errors.NONE  # once only
