"""Real Kafka bugs, each reproduced as a protocol variant the model checker must catch.

Each variant names the property whose violation it produces (``expected_violation``); the pinned tests
check the shortest counterexample and that the same scenario holds under the current protocol.

1. ``hanging-transaction`` (KAFKA-6119, KIP-890 motivation): the coordinator aborted a timed-out
   transaction without bumping the epoch, and leaders appended transactional batches without asking
   the coordinator: a produce delayed past the abort marker opens a transaction nobody will close.
2. ``late-produce-joins-next`` (KIP-890 motivation): with transaction version 1, a client that gives up
   on a produce and aborts keeps its epoch; the late produce is accepted into its next transaction.
3. ``kafka-17754``: with transaction version 1 a delayed EndTxn, retried by the network, commits or
   aborts the producer's next transaction (fixed by transaction version 2's epoch per transaction).
4. ``zombie-not-fenced``: the coordinator does not check the producer epoch on EndTxn, so a fenced
   instance commits the transaction of the instance that replaced it.
5. ``failover-without-markers``: a coordinator that loads the transaction log after a failover but does
   not complete PrepareCommit/PrepareAbort transactions (re-send their markers): they never complete.
6. ``no-duplicate-detection``: a leader that does not recognise a retried batch appends it twice.
7. ``zombie-offsets-not-fenced`` (KIP-447 motivation): a group coordinator that does not check the member and
   generation of a ``TxnOffsetCommit``: a consumer evicted by a rebalance commits its input position over the
   new owner's.
8. ``member-epoch-not-checked`` (KIP-848): a group coordinator that checks a consumer group's member but not
   the member epoch of a ``TxnOffsetCommit`` (no STALE_MEMBER_EPOCH): a member whose partition was reassigned
   while its transaction was open commits the position it no longer owns.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import partition as partition_mod
from txnspec.spec import txn_expiry
from txnspec.spec.constants import NO_PRODUCER_EPOCH
from txnspec.spec.coordinator_state import CoordinatorConfig, CoordinatorResult, CoordinatorState, TxnMetadata
from txnspec.spec.errors import Errors
from txnspec.spec.messages import EndTxn
from txnspec.spec.variants.registry import Variant, register


def _abort_timed_out_without_epoch_bump(cs: CoordinatorState, tid: str, **kw: Any) -> CoordinatorResult:
    """Before KAFKA-6119: abort with the producer's own epoch. (Starting the fence as if a failed fence had
    already bumped the epoch makes ``prepareFenceProducerEpoch`` keep it.)"""
    md = cs.metadata(tid)
    if md is not None:
        cs = coord_state.with_metadata(cs, replace(md, has_failed_epoch_fence=True), tid)
    return txn_expiry.abort_timed_out_transaction(cs, tid, **kw)


register(Variant(
    "hanging-transaction", "timeout aborts keep the epoch; leaders do not verify transactional produces",
    "KAFKA-6119, KIP-890",
    change_protocol=lambda p: p.but("hanging-transaction", "no epoch bump on timeout, no verification",
                                    abort_timed_out_transaction=_abort_timed_out_without_epoch_bump),
    change_scenario=lambda s: s.with_(transaction_version=0, partition_verification=False),
    expected_violation="no_hanging_transaction"))

register(Variant(
    "late-produce-joins-next", "TV1 client aborts without an epoch bump after giving up on a produce",
    "KIP-890 (motivation)",
    change_protocol=lambda p: p.but("late-produce-joins-next", "no client epoch bump",
                                    client_bumps_epoch_after_abortable_error=False),
    change_scenario=lambda s: s.with_(transaction_version=0),
    expected_violation="read_committed_only_committed"))

register(Variant(
    "kafka-17754", "transaction version 1: EndTxn carries no per-transaction epoch", "KAFKA-17754",
    change_scenario=lambda s: s.with_(transaction_version=0),
    expected_violation="end_txn_applies_to_its_transaction"))


def _end_txn_without_epoch_check(cs: CoordinatorState, request: EndTxn, **kw: Any) -> CoordinatorResult:
    md = cs.metadata(request.transactional_id)
    if md is not None and md.producer_id == request.producer_id:
        request = replace(request, producer_epoch=md.producer_epoch)
    return coord.handle_end_txn(cs, request, **kw)


register(Variant(
    "zombie-not-fenced", "the coordinator does not check the producer epoch on EndTxn", "KIP-98 zombie fencing",
    change_protocol=lambda p: p.but("zombie-not-fenced", "EndTxn without epoch check",
                                    handle_end_txn=_end_txn_without_epoch_check),
    expected_violation="fenced_producer_never_commits"))


def _failover_without_completion(cs: CoordinatorState, *, config: CoordinatorConfig,
                                 **_: Any) -> CoordinatorResult:
    cache = tuple(
        (tid, TxnMetadata(tid, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
                                      NO_PRODUCER_EPOCH, t.txn_timeout_ms, t.state, t.partitions, t.txn_start_ms,
                                      t.txn_last_update_ms, t.transaction_version))
        for tid, t in cs.txn_log)
    return CoordinatorResult(CoordinatorState(
        coordinator_epoch=cs.coordinator_epoch + 1, now_ms=cs.now_ms, next_producer_id=cs.next_producer_id,
        cache=cache, txn_log=cs.txn_log))


register(Variant(
    "failover-without-markers", "the new coordinator does not complete prepared transactions", "KIP-98 recovery",
    change_protocol=lambda p: p.but("failover-without-markers", "load without completing Prepare*",
                                    coordinator_failover=_failover_without_completion),
    expected_violation="prepared_transactions_complete"))


def _append_without_duplicate_detection(state: Any, *args: Any, **kw: Any) -> Any:
    # the offsets append of a TxnOffsetCommit already passes both flags (an offsets batch has no sequence)
    return partition_mod.append_data(state, *args, **{**kw, "detect_duplicates": False, "validate_sequence": False})


register(Variant(
    "no-duplicate-detection", "the leader neither recognises a retried batch nor checks sequences (idempotence off)",
    "KIP-98 idempotence",
    change_protocol=lambda p: p.but("no-duplicate-detection", "no duplicate detection",
                                    append_data=_append_without_duplicate_detection),
    expected_violation="no_duplicate_append"))


def _offset_commit_without_member_check(state: Any, group_id: str, member_id: str, group_instance_id: str | None,
                                        generation_id: int, transactional: bool) -> Errors:
    """Before KIP-447 a transactional offset commit carried no member: every one was accepted."""
    return Errors.NONE


register(Variant(
    "zombie-offsets-not-fenced", "the group coordinator does not check a TxnOffsetCommit's member and generation",
    "KIP-447 (motivation)",
    change_protocol=lambda p: p.but("zombie-offsets-not-fenced", "TxnOffsetCommit without the generation check",
                                    validate_offset_commit=_offset_commit_without_member_check),
    expected_violation="no_fenced_member_offsets_commit"))


def _offset_commit_without_member_epoch_check(group: Any, member_id: str, group_instance_id: str | None,
                                              member_epoch: int, transactional: bool, partitions: tuple[str, ...],
                                              version: int) -> Errors:
    """``ConsumerGroup.validateOffsetCommit`` without ``validateMemberEpoch`` and the assignment-epoch validator:
    the member must exist, any epoch is accepted."""
    if member_epoch < 0 and not group.members:
        return Errors.NONE
    if transactional and member_epoch == -1 and member_id == "" and group_instance_id is None:
        return Errors.NONE
    return Errors.NONE if group.member(member_id) is not None else Errors.UNKNOWN_MEMBER_ID


register(Variant(
    "member-epoch-not-checked", "the group coordinator checks a consumer group's member but not its member epoch",
    "KIP-848 (member epochs)",
    change_protocol=lambda p: p.but("member-epoch-not-checked", "TxnOffsetCommit without the member-epoch check",
                                    validate_consumer_offset_commit=_offset_commit_without_member_epoch_check),
    expected_violation="no_fenced_member_offsets_commit"))
