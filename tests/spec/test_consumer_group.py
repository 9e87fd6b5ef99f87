"""KIP-848 in the spec: the member checks of ``ConsumerGroup.validateOffsetCommit`` per request version, the
heartbeat's reconciliation, and the ``consumer-rebalance`` scenario with its pinned counts and the variant that
drops the member-epoch check."""

from __future__ import annotations

import pytest

from txnspec.checker import check
from txnspec.spec import consumer_group as cg
from txnspec.spec.errors import Errors
from txnspec.spec.model import build_model
from txnspec.spec.variants import variant_named

E = Errors
STATES = 24_612  # consumer-rebalance, current protocol, no symmetry (two transactional ids, the first fixed)
STATES_TV1 = 28_372  # ... with transaction version 1 (AddOffsetsToTxn first; TxnOffsetCommit v4: ILLEGAL_GENERATION)
CEX = 11  # member-epoch-not-checked: the shortest counterexample to no_fenced_member_offsets_commit


def _group() -> cg.ConsumerGroup:
    """member-a at epoch 3 holding foo-0 since epoch 1 and foo-1 since 3, foo-2 pending revocation since 2;
    member-b at epoch 3 with nothing."""
    a = cg.ConsumerMember("member-a", 3, 2, assigned=(("foo-0", 1), ("foo-1", 3)), revoking=(("foo-2", 2),),
                          state=cg.MemberState.UNREVOKED_PARTITIONS)
    return cg.ConsumerGroup("g", 3, (a, cg.ConsumerMember("member-b", 3, 2)),
                            (("foo-0", "member-a"), ("foo-1", "member-a"), ("foo-2", "member-b")),
                            ("foo-0", "foo-1", "foo-2"))


# (member id, instance id, epoch, transactional, partitions, version) -> error; ConsumerGroupTest
# testValidateTransactionalOffsetCommit / testValidateOffsetCommit and the assignment-epoch validator (KIP-1251)
CHECKS = [
    (("member-a", None, 3, True, ("foo-9",), 6), E.NONE),  # the member's epoch: whatever the partitions
    (("member-a", None, 4, True, ("foo-0",), 6), E.STALE_MEMBER_EPOCH),  # newer than the member's
    (("member-a", None, 4, True, ("foo-0",), 5), E.ILLEGAL_GENERATION),  # ... before v6
    (("member-a", None, 1, True, ("foo-0",), 6), E.NONE),  # older, but foo-0 held since 1
    (("member-a", None, 2, True, ("foo-0", "foo-2"), 6), E.NONE),  # pending revocation counts
    (("member-a", None, 2, True, ("foo-1",), 6), E.STALE_MEMBER_EPOCH),  # foo-1 received at 3 > 2
    (("member-a", None, 2, True, ("foo-1",), 4), E.ILLEGAL_GENERATION),
    (("member-a", None, 0, True, ("foo-0",), 6), E.STALE_MEMBER_EPOCH),  # epoch 0: older than every assignment
    (("member-b", None, 2, True, ("foo-0",), 6), E.STALE_MEMBER_EPOCH),  # not assigned to member-b
    (("member-x", None, 3, True, ("foo-0",), 6), E.UNKNOWN_MEMBER_ID),
    (("member-x", None, 0, True, ("foo-0",), 6), E.UNKNOWN_MEMBER_ID),
    (("", None, -1, True, ("foo-0",), 6), E.NONE),  # a producer without group metadata
    (("", "i", -1, True, ("foo-0",), 6), E.UNKNOWN_MEMBER_ID),  # ... but an instance id makes it a member check
    (("", None, -1, False, ("foo-0",), 9), E.UNKNOWN_MEMBER_ID),  # a plain commit from outside: group not empty
    (("member-a", None, 3, False, ("foo-0",), 8), E.UNSUPPORTED_VERSION),  # OffsetCommit < v9 from a member
    (("member-a", None, 2, False, ("foo-1",), 9), E.STALE_MEMBER_EPOCH),  # OffsetCommit passes it as it is
]


@pytest.mark.quick
@pytest.mark.parametrize(("args", "error"), CHECKS)
def test_validate_offset_commit_follows_consumer_group(args: tuple, error: Errors) -> None:
    member_id, instance, epoch, transactional, partitions, version = args
    assert cg.validate_offset_commit(_group(), member_id, instance, epoch, transactional, partitions,
                                     version) is error


@pytest.mark.quick
def test_an_empty_group_accepts_a_negative_epoch_from_anyone() -> None:
    empty = cg.ConsumerGroup("g", 4)
    assert cg.validate_offset_commit(empty, "whoever", None, -1, False, ("foo-0",), 9) is E.NONE
    assert cg.validate_offset_commit(empty, "whoever", None, 0, True, ("foo-0",), 6) is E.UNKNOWN_MEMBER_ID
    assert cg.missing_group_error(True, 6) is E.GROUP_ID_NOT_FOUND and cg.missing_group_error(True, 5) \
        is E.ILLEGAL_GENERATION
    assert cg.missing_group_error(False, 9) is E.GROUP_ID_NOT_FOUND and cg.missing_group_error(False, 8) \
        is E.ILLEGAL_GENERATION


@pytest.mark.quick
def test_the_legitimacy_judgement_is_the_validator_on_every_check() -> None:
    """The ghost's verdict (written apart) agrees with Kafka's check on the transactional commits above with a
    member id: a sabotaged validator cannot hide behind the ghost."""
    for (member_id, instance, epoch, transactional, partitions, _version), error in CHECKS:
        if transactional and member_id and instance is None:
            legitimate = cg.legitimate_commit(_group(), member_id, epoch, partitions)
            assert legitimate is (error is E.NONE), (member_id, epoch, partitions)


@pytest.mark.quick
def test_heartbeat_joins_reconciles_and_fences() -> None:
    group = cg.ConsumerGroup("g", partitions=("p0", "p1"))
    group, a = cg.heartbeat(group, "a", 0)
    assert (a.error, a.member_epoch, a.assignment, group.group_epoch) == (E.NONE, 1, ("p0", "p1"), 1)
    group, b = cg.heartbeat(group, "b", 0)  # joins at epoch 2: p1 still a's, unreleased
    assert (b.member_epoch, b.assignment, group.member("b").state) == (2, (), cg.MemberState.UNRELEASED_PARTITIONS)
    group, a2 = cg.heartbeat(group, "a", 1, owned=("p0", "p1"))  # a must revoke p1 first: its epoch stays
    assert (a2.member_epoch, a2.assignment, group.member("a").revoking) == (1, ("p0",), (("p1", 1),))
    assert cg.validate_offset_commit(group, "a", None, 1, True, ("p1",), 6) is E.NONE  # pending revocation
    group, a3 = cg.heartbeat(group, "a", 1, owned=("p0",))  # revoked: epoch 2, p0 kept at its epoch 1
    assert (a3.member_epoch, group.member("a").assigned) == (2, (("p0", 1),))
    group, b2 = cg.heartbeat(group, "b", 2, owned=())
    assert (b2.member_epoch, group.member("b").assigned) == (2, (("p1", 2),))
    assert cg.validate_offset_commit(group, "a", None, 1, True, ("p0",), 6) is E.NONE  # KIP-1251: held since 1
    assert cg.validate_offset_commit(group, "a", None, 1, True, ("p1",), 6) is E.STALE_MEMBER_EPOCH
    assert cg.heartbeat(group, "a", 3)[1].error is E.FENCED_MEMBER_EPOCH  # newer than the member's
    assert cg.heartbeat(group, "a", 1, owned=("p0",))[1].error is E.NONE  # the previous epoch, a lost response
    assert cg.heartbeat(group, "a", 1, owned=("p1",))[1].error is E.FENCED_MEMBER_EPOCH  # ... not a subset
    assert cg.heartbeat(group, "z", 2)[1].error is E.UNKNOWN_MEMBER_ID
    left, bye = cg.heartbeat(group, "b", cg.LEAVE_GROUP_MEMBER_EPOCH)
    assert (bye.member_epoch, left.group_epoch, left.target) == (-1, 3, (("p0", "a"), ("p1", "a")))
    assert cg.validate_offset_commit(left, "b", None, 2, True, ("p1",), 6) is E.UNKNOWN_MEMBER_ID


def test_the_consumer_rebalance_scenario_holds_on_its_pinned_states() -> None:
    result = check(build_model("consumer-rebalance"), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == STATES and result.deadlock_count == 0
    for kind in ("rebalance", "reassign", "heartbeat"):  # both fences and the heir's reconciliation are taken
        assert result.coverage.get(kind, 0) > 0, kind
    assert result.verdict("offsets_committed_after_rebalance").holds


def test_the_consumer_rebalance_scenario_holds_at_transaction_version_1() -> None:
    result = check(build_model("consumer-rebalance", "tv1"), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == STATES_TV1 and result.coverage.get("reassign", 0) > 0


def test_without_the_member_epoch_check_the_reassigned_member_commits() -> None:
    assert variant_named("member-epoch-not-checked").expected_violation == "no_fenced_member_offsets_commit"
    result = check(build_model("consumer-rebalance", "member-epoch-not-checked"),
                   properties=["no_fenced_member_offsets_commit"])
    cex = result.verdict("no_fenced_member_offsets_commit").counterexample
    assert cex is not None and len(cex) == CEX
    actions = cex.actions
    moved = actions.index("the group's target moves producer-0's partition away; its member releases it at the "
                          "next epoch")
    commit = next(i for i, a in enumerate(actions) if a.startswith("deliver producer-0->group: TxnOffsetCommit"))
    assert moved < commit  # the commit with the old epoch reaches the group after the reassignment
    assert actions[-1].startswith("deliver coordinator->group: WriteTxnMarkers(__consumer_offsets-3, COMMIT")


def test_the_classic_variant_does_not_reach_the_consumer_check() -> None:
    """zombie-offsets-not-fenced replaces the classic check only: the consumer group still fences."""
    result = check(build_model("consumer-rebalance", "zombie-offsets-not-fenced"),
                   properties=["no_fenced_member_offsets_commit"])
    assert result.complete and result.verdict("no_fenced_member_offsets_commit").holds
