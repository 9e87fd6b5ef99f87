"""The transaction coordinator's handlers: for each, when it acts, when it answers an error, and its effect.

Narrative tests in h11's style: build a coordinator, send it requests, look at replies and metadata.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import messages, txn_expiry, txn_loading, txn_markers
from txnspec.spec import txn_metadata as txn_md
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    InitProducerId,
    TransactionResult,
)
from txnspec.spec.txn_state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    VALID_PREVIOUS_STATES,
    TxnState,
)

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
TV1 = coord_state.CoordinatorConfig(transaction_version=0)
TV2 = coord_state.CoordinatorConfig(transaction_version=2)
SMALL_EPOCHS = coord_state.CoordinatorConfig(transaction_version=2, max_epoch=4)


def init(cs: coord_state.CoordinatorState, tid: str = "t1", config: coord_state.CoordinatorConfig = TV2,
         **kw: int) -> coord_state.CoordinatorResult:
    return coord.handle_init_producer_id(cs, InitProducerId(tid, 1000, kw.get("pid", -1), kw.get("epoch", -1)),
                                         config=config)


def ongoing(config: coord_state.CoordinatorConfig = TV2, partitions: frozenset[str] = frozenset({"p0"}),
            tv: int = 2) -> coord_state.CoordinatorState:
    cs = init(coord_state.CoordinatorState(), config=config).state
    md = cs.metadata("t1")
    assert md is not None
    return coord.handle_add_partitions_to_txn(
        cs, AddPartitionsToTxn("t1", md.producer_id, md.producer_epoch, partitions, tv), config=config).state


def meta(cs: coord_state.CoordinatorState, tid: str = "t1") -> coord_state.TxnMetadata:
    md = cs.metadata(tid)
    assert md is not None
    return md


# --- InitProducerId -------------------------------------------------------------------------------

def test_init_producer_id_without_transactional_id_allocates_and_keeps_nothing() -> None:
    first = coord.handle_init_producer_id(coord_state.CoordinatorState(), InitProducerId(None, 1000))
    second = coord.handle_init_producer_id(first.state, InitProducerId(None, 1000))
    assert (first.response, second.response) == (
        messages.InitProducerIdResponse(Errors.NONE, 0, 0), messages.InitProducerIdResponse(Errors.NONE, 1, 0))
    assert second.state.cache == () and second.appended == ()


def test_init_producer_id_new_id_gets_epoch_0_and_writes_empty() -> None:
    result = init(coord_state.CoordinatorState())
    assert result.response == messages.InitProducerIdResponse(Errors.NONE, 0, 0)
    assert [t.state for _, t in result.appended] == [EMPTY]
    assert meta(result.state).producer_epoch == 0


@pytest.mark.parametrize(("tid", "timeout", "pid", "epoch", "error"), [
    ("", 1000, -1, -1, Errors.INVALID_REQUEST),
    ("t1", 0, -1, -1, Errors.INVALID_TRANSACTION_TIMEOUT),
    ("t1", 900_001, -1, -1, Errors.INVALID_TRANSACTION_TIMEOUT),
    ("t1", 1000, 5, -1, Errors.INVALID_REQUEST),
])
def test_init_producer_id_rejects_bad_requests(tid: str, timeout: int, pid: int, epoch: int, error: Errors) -> None:
    result = coord.handle_init_producer_id(coord_state.CoordinatorState(), InitProducerId(tid, timeout, pid, epoch))
    assert result.response == messages.InitProducerIdResponse(error)
    assert result.appended == ()


def test_init_producer_id_bumps_the_epoch_of_an_idle_id() -> None:
    cs = init(coord_state.CoordinatorState()).state
    assert init(cs).response == messages.InitProducerIdResponse(Errors.NONE, 0, 1)


def test_init_producer_id_fences_an_ongoing_transaction_and_asks_to_retry() -> None:
    cs = ongoing()
    result = init(cs)
    assert result.response == messages.InitProducerIdResponse(Errors.CONCURRENT_TRANSACTIONS)
    assert [t.state for _, t in result.appended] == [PREPARE_ABORT]
    assert meta(result.state).producer_epoch == 1  # TV2: one bump, by the abort
    assert [(m.partition, m.producer_epoch, m.result) for _, m in result.markers] == [("p0", 1, ABORT)]
    # the retry waits until the markers are written, then bumps again
    assert init(result.state).response == messages.InitProducerIdResponse(Errors.CONCURRENT_TRANSACTIONS)
    done = txn_markers.handle_write_txn_markers_response(result.state, "t1", "p0", 0, Errors.NONE).state
    assert meta(done).state is COMPLETE_ABORT
    assert init(done).response == messages.InitProducerIdResponse(Errors.NONE, 0, 2)


def test_init_producer_id_tv1_fence_sets_the_epoch_before_the_append() -> None:
    cs = ongoing(TV1, tv=0)
    result = init(cs, config=TV1)
    assert result.appended[0][1].producer_epoch == 1
    assert result.appended[0][1].last_producer_epoch == -1


def test_failed_tv1_fence_does_not_bump_twice() -> None:
    cs = ongoing(TV1, tv=0)
    failed = coord.handle_init_producer_id(cs, InitProducerId("t1", 1000), config=TV1,
                                           append_error=Errors.NOT_ENOUGH_REPLICAS)
    assert failed.response == messages.InitProducerIdResponse(Errors.COORDINATOR_NOT_AVAILABLE)
    after = meta(failed.state)
    assert (after.producer_epoch, after.has_failed_epoch_fence, after.pending_state) == (1, True, None)
    retry = init(failed.state, config=TV1)
    assert retry.appended[0][1].producer_epoch == 1  # re-uses the epoch already bumped in memory


def test_init_producer_id_kip360_retry_with_last_epoch_returns_current() -> None:
    cs = init(coord_state.CoordinatorState()).state
    bumped = init(cs, pid=0, epoch=0)
    assert bumped.response == messages.InitProducerIdResponse(Errors.NONE, 0, 1)
    retry = init(bumped.state, pid=0, epoch=0)  # the first response was lost
    assert retry.response == messages.InitProducerIdResponse(Errors.NONE, 0, 1)
    assert init(retry.state, pid=0, epoch=7).response.error is Errors.PRODUCER_FENCED


def test_init_producer_id_rotates_the_producer_id_when_the_epoch_is_exhausted() -> None:
    cs = coord_state.CoordinatorState()
    for expected_epoch in range(3):  # epochs 0, 1, 2, 3: 3 >= max_epoch - 1 is exhausted
        cs = init(cs, config=SMALL_EPOCHS).state
        assert meta(cs).producer_epoch == expected_epoch
    cs = init(cs, config=SMALL_EPOCHS).state
    assert meta(cs).producer_epoch == 3
    rotated = init(cs, config=SMALL_EPOCHS)
    assert rotated.response == messages.InitProducerIdResponse(Errors.NONE, 1, 0)
    assert meta(rotated.state).prev_producer_id == 0


def test_init_producer_id_while_preparing_is_concurrent() -> None:
    cs = ongoing()
    ended = coord.handle_end_txn(cs, EndTxn("t1", 0, 0, COMMIT, 2), config=TV2)
    assert init(ended.state).response == messages.InitProducerIdResponse(Errors.CONCURRENT_TRANSACTIONS)


# --- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------------

def test_add_partitions_starts_a_transaction_and_is_idempotent() -> None:
    cs = ongoing()
    md = meta(cs)
    assert (md.state, md.partitions) == (ONGOING, frozenset({"p0"}))
    again = coord.handle_add_partitions_to_txn(cs, AddPartitionsToTxn("t1", 0, 0, frozenset({"p0"}), 2))
    assert again.response == messages.ErrorResponse(Errors.NONE) and again.appended == ()


@pytest.mark.parametrize(("pid", "epoch", "error"), [
    (9, 0, Errors.INVALID_PRODUCER_ID_MAPPING),
    (0, 5, Errors.PRODUCER_FENCED),
])
def test_add_partitions_checks_the_producer(pid: int, epoch: int, error: Errors) -> None:
    cs = init(coord_state.CoordinatorState()).state
    result = coord.handle_add_partitions_to_txn(cs, AddPartitionsToTxn("t1", pid, epoch, frozenset({"p0"}), 2))
    assert result.response == messages.ErrorResponse(error) and result.appended == ()


def test_add_partitions_unknown_id_and_while_preparing() -> None:
    unknown = coord.handle_add_partitions_to_txn(coord_state.CoordinatorState(),
                                                 AddPartitionsToTxn("t1", 0, 0, frozenset({"p0"})))
    assert unknown.response == messages.ErrorResponse(Errors.INVALID_PRODUCER_ID_MAPPING)
    prepared = coord.handle_end_txn(ongoing(TV1, tv=0), EndTxn("t1", 0, 0, COMMIT, 0), config=TV1).state
    late = coord.handle_add_partitions_to_txn(prepared, AddPartitionsToTxn("t1", 0, 0, frozenset({"p1"})))
    assert late.response == messages.ErrorResponse(Errors.CONCURRENT_TRANSACTIONS)


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    cs = init(coord_state.CoordinatorState()).state
    result = coord.handle_add_offsets_to_txn(cs, AddOffsetsToTxn("t1", 0, 0, "g"))
    assert meta(result.state).partitions == frozenset({"__consumer_offsets-3"})


# --- EndTxn ----------------------------------------------------------------------------------------

def test_tv1_commit_prepares_replies_and_sends_markers() -> None:
    cs = ongoing(TV1, frozenset({"p0", "p1"}), tv=0)
    result = coord.handle_end_txn(cs, EndTxn("t1", 0, 0, COMMIT, 0), config=TV1)
    assert result.response == messages.EndTxnResponse(Errors.NONE)
    assert [t.state for _, t in result.appended] == [PREPARE_COMMIT]
    md = meta(result.state)
    assert (md.state, md.pending_state, md.producer_epoch) == (PREPARE_COMMIT, COMPLETE_COMMIT, 0)
    assert [m.partition for _, m in result.markers] == ["p0", "p1"]
    cs = result.state
    for partition in ("p0", "p1"):
        cs = txn_markers.handle_write_txn_markers_response(cs, "t1", partition, 0, Errors.NONE, config=TV1).state
    assert (meta(cs).state, meta(cs).partitions) == (COMPLETE_COMMIT, frozenset())
    # an idempotent retry of the same commit, then the wrong result
    assert coord.handle_end_txn(cs, EndTxn("t1", 0, 0, COMMIT, 0), config=TV1).response.error is Errors.NONE
    assert coord.handle_end_txn(cs, EndTxn("t1", 0, 0, ABORT, 0), config=TV1).response.error \
        is Errors.INVALID_TXN_STATE


def test_tv2_end_bumps_the_epoch_and_returns_it() -> None:
    cs = ongoing()
    result = coord.handle_end_txn(cs, EndTxn("t1", 0, 0, COMMIT, 2), config=TV2)
    assert result.response == messages.EndTxnResponse(Errors.NONE, 0, 1)
    assert result.markers[0][1].producer_epoch == 1
    done = txn_markers.handle_write_txn_markers_response(result.state, "t1", "p0", 0, Errors.NONE).state
    retry = coord.handle_end_txn(done, EndTxn("t1", 0, 0, COMMIT, 2), config=TV2)
    assert retry.response == messages.EndTxnResponse(Errors.NONE, 0, 1)  # a retry with the epoch before the bump
    stale = coord.handle_end_txn(done, EndTxn("t1", 0, 1, COMMIT, 2), config=TV2)
    assert stale.response.error is Errors.INVALID_TXN_STATE


def test_tv2_overflow_rotates_the_producer_id_at_completion() -> None:
    cs = coord_state.CoordinatorState()
    for _ in range(4):
        cs = init(cs, config=SMALL_EPOCHS).state
    md = meta(cs)
    assert md.producer_epoch == 3
    cs = coord.handle_add_partitions_to_txn(cs, AddPartitionsToTxn("t1", 0, 3, frozenset({"p0"}), 2)).state
    ended = coord.handle_end_txn(cs, EndTxn("t1", 0, 3, COMMIT, 2), config=SMALL_EPOCHS)
    assert ended.response == messages.EndTxnResponse(Errors.NONE, 1, 0)
    assert (ended.markers[0][1].producer_id, ended.markers[0][1].producer_epoch) == (0, 4)
    done = txn_markers.handle_write_txn_markers_response(ended.state, "t1", "p0", 0, Errors.NONE,
                                                         config=SMALL_EPOCHS).state
    assert (meta(done).producer_id, meta(done).producer_epoch, meta(done).prev_producer_id) == (1, 0, 0)
    retry = coord.handle_end_txn(done, EndTxn("t1", 0, 3, COMMIT, 2), config=SMALL_EPOCHS)
    assert retry.response == messages.EndTxnResponse(Errors.NONE, 1, 0)


def test_end_txn_error_replies() -> None:
    cs = ongoing(TV1, tv=0)
    assert coord.handle_end_txn(cs, EndTxn("", 0, 0, COMMIT)).response.error is Errors.INVALID_REQUEST
    assert coord.handle_end_txn(cs, EndTxn("t2", 0, 0, COMMIT)).response.error is Errors.INVALID_PRODUCER_ID_MAPPING
    assert coord.handle_end_txn(cs, EndTxn("t1", 7, 0, COMMIT)).response.error is Errors.INVALID_PRODUCER_ID_MAPPING
    assert coord.handle_end_txn(cs, EndTxn("t1", 0, 1, COMMIT)).response.error is Errors.PRODUCER_FENCED
    empty = init(coord_state.CoordinatorState(), config=TV1).state
    assert coord.handle_end_txn(empty, EndTxn("t1", 0, 0, COMMIT)).response.error is Errors.INVALID_TXN_STATE


def test_failed_prepare_append_leaves_the_transaction_ongoing() -> None:
    cs = ongoing(TV1, tv=0)
    result = coord.handle_end_txn(cs, EndTxn("t1", 0, 0, COMMIT), config=TV1,
                                  append_error=Errors.NOT_LEADER_OR_FOLLOWER)
    assert result.response.error is Errors.NOT_COORDINATOR
    assert (meta(result.state).state, meta(result.state).pending_state) == (ONGOING, None)
    assert result.state.txn_log == cs.txn_log


# --- timeouts, expiration, failover ---------------------------------------------------------------

def test_timeout_aborts_with_an_epoch_bump() -> None:
    cs = ongoing(TV1, tv=0)
    assert txn_expiry.timed_out_transactions(cs, 1000) == ()
    result = txn_expiry.abort_timed_out_transactions(cs, 2000, config=TV1)
    assert [(t.state, t.producer_epoch) for _, t in result.appended] == [(PREPARE_ABORT, 1)]


def test_expiration_removes_only_idle_ids() -> None:
    cs = init(coord_state.CoordinatorState()).state
    kept = txn_expiry.expire_transactional_ids(cs, 10, 100)
    assert kept.appended == () and kept.state.metadata("t1") is not None
    gone = txn_expiry.expire_transactional_ids(cs, 1000, 100)
    assert gone.appended == (("t1", None),) and gone.state.metadata("t1") is None
    assert gone.state.txn_log == ()


def test_failover_completes_prepared_transactions_and_forgets_the_last_epoch() -> None:
    cs = ongoing(TV1, tv=0)
    cs = replace(cs, cache=tuple((t, replace(m, last_producer_epoch=5)) for t, m in cs.cache))
    prepared = coord.handle_end_txn(cs, EndTxn("t1", 0, 0, ABORT), config=TV1).state
    loaded = txn_loading.coordinator_failover(prepared, config=TV1)
    md = meta(loaded.state)
    assert (md.state, md.pending_state, md.last_producer_epoch) == (PREPARE_ABORT, COMPLETE_ABORT, -1)
    assert [(m.partition, m.coordinator_epoch) for _, m in loaded.markers] == [("p0", 1)]
    # an answer to the old coordinator's marker is ignored
    stale = txn_markers.handle_write_txn_markers_response(loaded.state, "t1", "p0", 0, Errors.NONE, config=TV1)
    assert meta(stale.state).state is PREPARE_ABORT
    done = txn_markers.handle_write_txn_markers_response(loaded.state, "t1", "p0", 1, Errors.NONE, config=TV1)
    assert meta(done.state).state is COMPLETE_ABORT


def test_marker_give_up_leaves_the_transaction_prepared() -> None:
    prepared = coord.handle_end_txn(ongoing(TV1, tv=0), EndTxn("t1", 0, 0, COMMIT), config=TV1).state
    result = txn_markers.handle_write_txn_markers_response(prepared, "t1", "p0", 0, Errors.INVALID_PRODUCER_EPOCH)
    assert meta(result.state).state is PREPARE_COMMIT and result.state.completion("t1") is None


# --- the transition table ---------------------------------------------------------------------------

def test_prepare_transition_records_an_illegal_transition() -> None:
    md = meta(init(coord_state.CoordinatorState()).state)
    transit = coord_state.TxnTransit(0, 0, -1, 0, -1, 1000, COMPLETE_COMMIT, frozenset(), 0, 0, 0)
    cs, pending = txn_md.prepare_transition_to(coord_state.CoordinatorState(), md, transit, TV2)
    assert pending is None
    reason = f"{md.state} -> CompleteCommit: CompleteCommit is not a valid successor of {md.state}"
    assert cs.illegal_transitions == (coord_state.IllegalTransition(md.transactional_id, reason),)
    assert str(cs.illegal_transitions[0]).startswith(f"{md.transactional_id}: ")


def test_valid_previous_states_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[TxnState.PREPARE_COMMIT] == frozenset({ONGOING})
    assert VALID_PREVIOUS_STATES[TxnState.PREPARE_ABORT] >= {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}
    assert TxnState.DEAD not in set().union(*VALID_PREVIOUS_STATES.values())
