"""KIP-848's consumer-rebalance scenario replays on the implementation in lock step: random walks that take the
session-timeout fence, the reassignment and the heir's heartbeat, with no divergence; and an implementation
without the member-epoch check diverges on them."""

from __future__ import annotations

import pytest

from txnspec.conformance import generate as gen
from txnspec.conformance.replay import replay

WALKS = 40


def _walks() -> list:
    return [gen.random_walk("consumer-rebalance", seed) for seed in range(WALKS)]


@pytest.fixture(scope="module")
def walks() -> list:
    return _walks()


def test_the_consumer_rebalance_walks_replay_without_divergence(walks: list) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    for kind in ("rebalance", "reassign", "heartbeat"):  # each step is taken, not merely allowed
        assert sum(kind in t.kinds() for t in walks) >= 10, kind
    for trace in walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


def test_at_transaction_version_1_a_stale_epoch_is_illegal_generation_on_both() -> None:
    """A TV1 client's TxnOffsetCommit is v4: the stale epoch is answered ILLEGAL_GENERATION, by the spec and by
    the implementation alike (a TV2 client's v6 gets STALE_MEMBER_EPOCH)."""
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    walks = [gen.random_walk("consumer-rebalance", seed, variant="tv1") for seed in range(WALKS)]
    assert sum("reassign" in t.kinds() for t in walks) >= 10
    for trace in walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail


def test_an_implementation_without_the_member_epoch_check_diverges(walks: list,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The sabotage the lock step must catch: the implementation accepts any epoch of a known member."""
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter
    from txnspec.impl.consumer_groups import ConsumerGroups
    from txnspec.impl.errors import Errors

    def known_member(self: ConsumerGroups, group_id: str, member_id: str, *args: object, **kw: object) -> Errors:
        return Errors.NONE if member_id in self.groups[group_id].members else Errors.UNKNOWN_MEMBER_ID

    monkeypatch.setattr(ConsumerGroups, "validate_offset_commit", known_member)
    diverged = [t for t in walks if not replay(t, ImplAdapter()).ok]
    # the reassigned zombie's commit, or the heir's commit of an epoch older than its new partition
    assert any("reassign" in t.kinds() for t in diverged) and len(diverged) < len(walks)
