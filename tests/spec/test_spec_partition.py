"""The partition leader's rules: duplicates, sequences, epochs, markers, LSO, the aborted index, fetch."""

from __future__ import annotations

import pytest

from txnspec.spec import partition as part
from txnspec.spec.errors import Errors
from txnspec.spec.messages import IsolationLevel, TransactionResult

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
RC, RU = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
SMALL = part.PartitionLimits(max_sequence=3, max_epoch=4)


def appended(state: part.PartitionState, *batches: tuple[int, int, int, int, bool],
             limits: part.PartitionLimits = part.DEFAULT_LIMITS) -> part.PartitionState:
    for pid, epoch, seq, count, txn in batches:
        state, reply = part.append_data(state, pid, epoch, seq, count, txn, limits=limits)
        assert reply.error is Errors.NONE, reply
    return state


def test_a_retry_of_one_of_the_last_five_batches_returns_the_original_offsets() -> None:
    state = appended(part.PartitionState(), *[(1, 0, seq, 1, False) for seq in range(6)])
    same, reply = part.append_data(state, 1, 0, 2, 1, False)
    assert (reply.error, reply.duplicate, reply.base_offset) == (Errors.NONE, True, 2)
    assert same == state
    _, too_old = part.append_data(state, 1, 0, 0, 1, False)  # beyond the 5 retained batches
    assert too_old.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize(("epoch", "seq", "error"), [
    (0, 2, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),  # a gap
    (0, 1, Errors.NONE),
    (1, 1, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),  # a new epoch must start at 0
    (1, 0, Errors.NONE),
])
def test_sequences_follow_within_an_epoch_and_restart_with_a_new_one(epoch: int, seq: int, error: Errors) -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 1, False))
    assert part.append_data(state, 1, epoch, seq, 1, False)[1].error is error


def test_older_epoch_is_fenced_and_unknown_producer_may_start_anywhere() -> None:
    state = appended(part.PartitionState(), (1, 3, 7, 1, False))  # no state: any sequence
    assert part.append_data(state, 1, 2, 8, 1, False)[1].error is Errors.INVALID_PRODUCER_EPOCH


def test_sequences_wrap_at_the_bound() -> None:
    state = appended(part.PartitionState(), (1, 0, 2, 2, False), limits=SMALL)  # 2, 3
    entry = state.entry(1)
    assert entry is not None and entry.last_seq == 3
    assert part.append_data(state, 1, 0, 0, 1, False, limits=SMALL)[1].error is Errors.NONE
    assert part.increment_sequence(3, 2, 3) == 1


def test_non_transactional_batch_inside_an_open_transaction_is_rejected() -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 1, True))
    assert part.append_data(state, 1, 0, 1, 1, False)[1].error is Errors.INVALID_TXN_STATE


def test_markers_close_the_transaction_and_fence_by_epoch() -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 2, True))
    assert part.open_transactions(state) == (1,) and state.last_stable_offset == 0
    state, reply = part.append_end_txn_marker(state, 1, 0, 0, COMMIT, 0)
    assert reply.error is Errors.NONE and part.open_transactions(state) == ()
    assert state.last_stable_offset == 3
    # TV0/1: an older epoch is rejected, the same accepted; TV2: the same epoch too, unless nothing is open
    assert part.append_end_txn_marker(state, 1, -1, 0, ABORT, 0)[1].error is Errors.INVALID_PRODUCER_EPOCH
    state2 = appended(state, (1, 0, 2, 1, True))
    assert part.append_end_txn_marker(state2, 1, 0, 0, COMMIT, 2)[1].error is Errors.INVALID_PRODUCER_EPOCH
    assert part.append_end_txn_marker(state, 1, 0, 0, COMMIT, 2)[1].error is Errors.NONE  # an idempotent retry
    assert part.append_end_txn_marker(state2, 1, 1, 0, COMMIT, 2)[1].error is Errors.NONE


def test_marker_from_an_older_coordinator_is_fenced() -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 1, True))
    state, _ = part.append_end_txn_marker(state, 1, 0, 5, ABORT, 0)
    assert part.append_end_txn_marker(state, 1, 0, 4, ABORT, 0)[1].error is Errors.TRANSACTION_COORDINATOR_FENCED


def test_marker_epoch_bump_forgets_the_sequence() -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 1, True))
    state, _ = part.append_end_txn_marker(state, 1, 1, 0, ABORT, 0)
    entry = state.entry(1)
    assert entry is not None and (entry.producer_epoch, entry.batches) == (1, ())
    assert part.append_data(state, 1, 1, 1, 1, True)[1].error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert part.append_data(state, 1, 1, 0, 1, True)[1].error is Errors.NONE


def test_lso_stays_pinned_until_the_high_watermark_passes_the_marker() -> None:
    state = part.PartitionState(high_watermark=0)
    state = appended(state, (1, 0, 0, 1, True), (2, 0, 0, 1, False))
    state, _ = part.append_end_txn_marker(state, 1, 0, 0, COMMIT, 0)
    assert state.first_unstable_offset == 0
    state = part.update_high_watermark(state, 2)
    assert state.first_unstable_offset == 0  # the marker at 2 is not below the high watermark yet
    state = part.update_high_watermark(state, 3)
    assert (state.first_unstable_offset, state.last_stable_offset) == (-1, 3)


def test_read_committed_skips_aborted_and_open_data_and_reports_the_aborted_index() -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 2, True))  # 0, 1: aborted below
    state = appended(state, (2, 0, 0, 1, True))  # 2: left open
    state, _ = part.append_end_txn_marker(state, 1, 0, 0, ABORT, 0)  # 3
    state = appended(state, (3, 0, 0, 1, False))  # 4: plain idempotent data
    assert state.aborted_index == (part.AbortedTxn(1, 0, 3, 2),)  # LSO at abort: producer 2's open txn
    committed = part.fetch(state, 0, RC)
    assert committed.last_stable_offset == 2 and committed.records == ()
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(1, 0)]
    assert part.fetch(state, 0, RU).records == (0, 1, 2, 4)
    state, _ = part.append_end_txn_marker(state, 2, 0, 0, COMMIT, 0)
    assert part.fetch(state, 0, RC).records == (2, 4)


def test_idle_producers_expire_unless_a_transaction_is_open() -> None:
    state = appended(part.PartitionState(), (1, 0, 0, 1, False), (2, 0, 0, 1, True))
    kept = part.expire_producers(state, now_ms=part.PRODUCER_ID_EXPIRATION_MS)
    assert [pid for pid, _ in kept.producers] == [2]
    assert part.expire_producers(state, now_ms=1).producers == state.producers
