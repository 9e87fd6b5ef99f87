"""Issue 31: the paths only behaviour cases covered, model-checked. A partition expiring a producer id (with its
verification entries), the coordinator expiring a transactional id, and an admin's plain OffsetCommit, each in a
scenario that reaches it, under invariants with their ``sometimes`` partners; counts pinned, and for each
invariant a broken protocol that it catches."""

from __future__ import annotations

from typing import Any

import pytest

from txnspec.checker import check
from txnspec.checker.model import Model
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import faults, txn_expiry, values
from txnspec.spec import properties as props
from txnspec.spec import system as sysm
from txnspec.spec.model import build_model
from txnspec.spec.protocol import CURRENT, Protocol
from txnspec.spec.scenarios import scenario_named

# scenario -> (states, the new action kind it must take, the invariant and its partner)
PINNED = {
    "producer-expiry": (4_282, "expire producer ids", "no_duplicate_after_producer_expiry",
                        "appended_after_producer_expiry"),
    "id-expiry": (3_036, "expire transactional id", "expired_id_never_resurrects_epoch", "expired_id_reinitialised"),
    "plain-commit": (268, "plain OffsetCommit", "plain_commit_survives_marker",
                     "plain_commit_overtakes_pending_offsets"),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_property_holds_with_the_expiries_and_the_plain_commit(name: str) -> None:
    states, kind, invariant, partner = PINNED[name]
    result = check(build_model(name), symmetry=False)
    assert result.complete and result.ok, result.render()
    assert result.states == states
    assert result.deadlock_count == 0
    assert result.coverage.get(kind, 0) > 0  # the path is taken, not merely allowed
    verdicts = {v.name: v for v in result.verdicts}
    assert verdicts[invariant].holds and verdicts[partner].holds  # the partner was reached


def _model(name: str, protocol: Protocol) -> Model[Any]:
    system = sysm.System(scenario_named(name), protocol)
    return Model(name=f"broken {name}", init_states=lambda: (sysm.initial_state(system),),
                 next_steps=lambda state: sysm.next_steps(system, state), properties=props.properties(system))


def _expire_open_transactions_too(state: Any, producer_ids: frozenset[int]) -> Any:
    """A partition that forgets producers with an open transaction too: the duplicate of a produce in that
    transaction is no longer recognised."""
    kept = tuple((pid, e) for pid, e in state.producers if pid not in producer_ids)
    return values.replace(state, producers=kept)


def _reuse_the_expired_producer_id(cs: Any, tid: str, **kwargs: Any) -> Any:
    """An allocator that hands the expired id's producer id out again."""
    md = cs.metadata(tid)
    result = txn_expiry.expire_transactional_id(cs, tid, **kwargs)
    if md is None or result.state is cs:
        return result
    return coord_state.CoordinatorResult(values.replace(result.state, next_producer_id=md.producer_id), None,
                                         result.appended)


def _newest_transactional_offset_wins(state: Any, producer_id: int, commit: bool) -> Any:
    """``replayEndTransactionMarker`` without the record-offset comparison."""
    merged = dict(state.committed)
    for p in state.pending:
        if p.producer_id == producer_id and commit:
            merged.update(((p.group_id, partition), record) for partition, record in p.offsets)
    return values.replace(state, committed=tuple(sorted(merged.items())),
                          pending=tuple(p for p in state.pending if p.producer_id != producer_id))


@pytest.mark.parametrize(("name", "broken"), [
    ("producer-expiry", CURRENT.but("expire-open", "", expire_producer_ids=_expire_open_transactions_too)),
    ("id-expiry", CURRENT.but("reuse-pid", "", expire_transactional_id=_reuse_the_expired_producer_id)),
    ("plain-commit", CURRENT.but("newest-txn", "",
                                 complete_pending_txn_offset_commit=_newest_transactional_offset_wins)),
])
def test_each_new_invariant_catches_a_protocol_that_breaks_it(name: str, broken: Protocol,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    invariant = PINNED[name][2]
    if name == "producer-expiry":  # and the timing assumption dropped: an id may expire while a retry is on its way
        monkeypatch.setattr(faults, "_producer_idle", lambda *_: True)
    result = check(_model(name, broken), properties=[invariant], symmetry=False)
    verdict = next(v for v in result.verdicts if v.name == invariant)
    assert not verdict.holds and verdict.counterexample is not None


def test_at_transaction_version_2_an_expiry_during_a_retry_still_lets_no_duplicate_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the timing assumption (an id may expire while its retry is on the way) TV2 still holds: the epoch
    bump of every transaction fences the late copy at verification. The states grow, the verdicts do not move."""
    monkeypatch.setattr(faults, "_producer_idle", lambda *_: True)
    names = ["no_duplicate_append", "no_duplicate_after_producer_expiry", "appended_after_producer_expiry"]
    result = check(_model("producer-expiry", CURRENT), properties=names, symmetry=False)
    assert result.complete and result.states == 4_526
    assert all(v.holds for v in result.verdicts if v.name in names), result.render()
