"""Transaction coordinator: InitProducerId branches, EndTxn TV1/TV2, markers, timeouts, failover, log failures."""

from __future__ import annotations

import pytest

from txnspec.impl.coordinator import TransactionCoordinator
from txnspec.impl.errors import Errors
from txnspec.impl.internal_topics import java_string_hash, offsets_partition_for
from txnspec.impl.log import ControlType
from txnspec.impl.partition import Partition
from txnspec.impl.producer_id_manager import ProducerIdManager
from txnspec.impl.txn_metadata import (
    TV_0,
    TV_2,
    VALID_PREVIOUS_STATES,
    CoordinatorIllegalState,
    TransactionMetadata,
    TransactionState,
)
from txnspec.impl.txn_state_manager import CoordinatorConfig

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

S = TransactionState
COMMIT, ABORT = ControlType.COMMIT, ControlType.ABORT


def coordinator(tv: int = TV_2, manual: bool = False) -> tuple[TransactionCoordinator, Partition]:
    log = Partition("__transaction_state-0")
    tc = TransactionCoordinator([log], ProducerIdManager(100),
                                CoordinatorConfig(transaction_version=tv, manual_marker_completion=manual))
    return tc, log


def deliver(tc: TransactionCoordinator, now: int = 0) -> None:
    for m in tc.marker_channel.drain_markers():
        tc.marker_channel.on_marker_response(m, Errors.NONE, now)


def test_the_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] >= {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    md = TransactionMetadata("t", 1, producer_epoch=0, state=S.EMPTY)
    with pytest.raises(CoordinatorIllegalState):
        md.prepare_transition_to(S.PREPARE_COMMIT, 1, -1, 0, -1, 1000, frozenset(), -1, 0, 0)
    md.prepare_dead()
    with pytest.raises(CoordinatorIllegalState):  # a pending transition blocks the next one
        md.prepare_dead()


def test_java_hash_partitioning_matches_kafka() -> None:
    assert java_string_hash("hello") == 99162322
    assert offsets_partition_for("myConsumerGroup").startswith("__consumer_offsets-")


def test_init_bumps_the_epoch_and_writes_the_transaction_log() -> None:
    tc, log = coordinator()
    assert tc.handle_init_producer_id("t", 1000, now_ms=0).producer_epoch == 0
    r = tc.handle_init_producer_id("t", 1000, now_ms=0)
    assert (r.error, r.producer_id, r.producer_epoch) == (Errors.NONE, 100, 1)
    assert log.log_end_offset == 2
    assert tc.handle_init_producer_id("t", 0, now_ms=0).error is Errors.INVALID_TRANSACTION_TIMEOUT
    assert tc.handle_init_producer_id("", 1000, now_ms=0).error is Errors.INVALID_REQUEST
    assert tc.handle_init_producer_id("t", 1000, 100, -1, now_ms=0).error is Errors.INVALID_REQUEST


def test_kip_360_retry_with_the_last_epoch_returns_the_current_epoch() -> None:
    tc, _ = coordinator()
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    bumped = tc.handle_init_producer_id("t", 1000, 100, 0, now_ms=0)
    assert bumped.producer_epoch == 1
    retry = tc.handle_init_producer_id("t", 1000, 100, 0, now_ms=0)
    assert (retry.error, retry.producer_epoch) == (Errors.NONE, 1)
    assert tc.handle_init_producer_id("t", 1000, 100, 7, now_ms=0).error is Errors.PRODUCER_FENCED


@pytest.mark.parametrize("tv", [TV_0, TV_2])
def test_init_on_an_ongoing_transaction_aborts_it_and_answers_concurrent(tv: int) -> None:
    tc, _ = coordinator(tv)
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    assert tc.handle_add_partitions_to_txn("t", 100, 0, ["a-0"], tv, now_ms=1) is Errors.NONE
    assert tc.handle_init_producer_id("t", 1000, now_ms=2).error is Errors.CONCURRENT_TRANSACTIONS
    md = tc.metadata("t")
    assert md is not None and md.state is S.PREPARE_ABORT and md.producer_epoch == 1
    [marker] = tc.marker_channel.drain_markers()
    assert (marker.partition, marker.producer_epoch, marker.result) == ("a-0", 1, ABORT)
    tc.marker_channel.on_marker_response(marker, Errors.NONE, 3)
    assert tc.handle_init_producer_id("t", 1000, now_ms=4).producer_epoch == 2  # epoch + 2 in total


def test_tv1_end_txn_is_idempotent_and_checks_the_result() -> None:
    tc, _ = coordinator(TV_0)
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    tc.handle_add_partitions_to_txn("t", 100, 0, ["a-0"], TV_0, now_ms=0)
    assert tc.handle_end_txn("t", 100, 0, COMMIT, TV_0, now_ms=1).error is Errors.NONE
    assert tc.handle_end_txn("t", 100, 0, COMMIT, TV_0, now_ms=1).error is Errors.CONCURRENT_TRANSACTIONS
    deliver(tc, 2)
    assert tc.metadata("t").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert tc.handle_end_txn("t", 100, 0, COMMIT, TV_0, now_ms=3).error is Errors.NONE
    assert tc.handle_end_txn("t", 100, 0, ABORT, TV_0, now_ms=3).error is Errors.INVALID_TXN_STATE
    assert tc.handle_end_txn("t", 99, 0, ABORT, TV_0, now_ms=3).error is Errors.INVALID_PRODUCER_ID_MAPPING


def test_tv2_end_txn_bumps_the_epoch_and_rotates_the_producer_id_on_overflow() -> None:
    tc, _ = coordinator(TV_2)
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    md = tc.metadata("t")
    assert md is not None
    md.producer_epoch = 32766  # as if many transactions ran
    tc.handle_add_partitions_to_txn("t", 100, 32766, ["a-0"], TV_2, now_ms=1)
    r = tc.handle_end_txn("t", 100, 32766, COMMIT, TV_2, now_ms=2)
    assert (r.error, r.producer_id, r.producer_epoch) == (Errors.NONE, 101, 0)
    [marker] = tc.marker_channel.drain_markers()
    assert (marker.producer_id, marker.producer_epoch) == (100, 32767)  # old pid, bumped epoch
    tc.marker_channel.on_marker_response(marker, Errors.NONE, 3)
    assert (md.state, md.producer_id, md.producer_epoch, md.prev_producer_id) == (S.COMPLETE_COMMIT, 101, 0, 100)
    retry = tc.handle_end_txn("t", 100, 32766, COMMIT, TV_2, now_ms=4)  # the response was lost: a retry
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (Errors.NONE, 101, 0)


def test_timed_out_transactions_are_aborted_with_a_fenced_epoch() -> None:
    tc, _ = coordinator(TV_0)
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    tc.handle_add_partitions_to_txn("t", 100, 0, ["a-0"], TV_0, now_ms=0)
    assert tc.abort_timed_out_transactions(1000) == []  # strict: start + timeout < now
    [(tid, result)] = tc.abort_timed_out_transactions(1001)
    assert (tid, result.error, tc.metadata("t").producer_epoch) == ("t", Errors.NONE, 1)  # type: ignore[union-attr]
    assert tc.handle_end_txn("t", 100, 0, COMMIT, TV_0, now_ms=1002).error is Errors.PRODUCER_FENCED


def test_failover_reloads_the_log_and_completes_prepared_transactions() -> None:
    tc, log = coordinator(TV_2)
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    tc.handle_add_partitions_to_txn("t", 100, 0, ["a-0", "b-0"], TV_2, now_ms=0)
    tc.handle_end_txn("t", 100, 0, ABORT, TV_2, now_ms=1)
    tc.marker_channel.drain_markers()  # lost with the old coordinator
    successor = TransactionCoordinator([log], ProducerIdManager(200), CoordinatorConfig(transaction_version=TV_2),
                                       coordinator_epoch=1, now_ms=5)
    md = successor.metadata("t")
    assert md is not None and md.state is S.PREPARE_ABORT and md.last_producer_epoch == -1
    markers = successor.marker_channel.drain_markers()
    assert sorted(m.partition for m in markers) == ["a-0", "b-0"] and {m.coordinator_epoch for m in markers} == {1}
    for m in markers:
        successor.marker_channel.on_marker_response(m, Errors.NONE, 6)
    assert md.state is S.COMPLETE_ABORT


@pytest.mark.parametrize(("append_error", "answer"), [
    (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
    (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
    (Errors.RECORD_LIST_TOO_LARGE, Errors.UNKNOWN_SERVER_ERROR),
])
def test_a_failed_log_append_maps_the_error_and_resets_the_pending_state(append_error: Errors,
                                                                          answer: Errors) -> None:
    tc, log = coordinator()
    tc.handle_init_producer_id("t", 1000, now_ms=0)
    end = log.log_end_offset
    tc.txn_manager.fail_next_append(append_error)
    assert tc.handle_add_partitions_to_txn("t", 100, 0, ["a-0"], TV_2, now_ms=1) is answer
    md = tc.metadata("t")
    assert md is not None and md.state is S.EMPTY and md.pending_state is None and log.log_end_offset == end


def test_idle_ids_expire_with_a_tombstone_and_ongoing_ones_stay() -> None:
    tc, log = coordinator()
    tc.handle_init_producer_id("idle", 1000, now_ms=0)
    tc.handle_init_producer_id("busy", 1000, now_ms=0)
    tc.handle_add_partitions_to_txn("busy", 101, 0, ["a-0"], TV_2, now_ms=0)
    assert tc.expire_transactional_ids(10, expiration_ms=10) == ["idle"]
    assert tc.metadata("idle") is None and tc.metadata("busy") is not None
    assert log.log.batches[-1].records[0].value is None  # the tombstone
