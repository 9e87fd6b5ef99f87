"""Each invariant against a hand-built state that violates it (and the initial state, which satisfies all)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from txnspec.checker.model import Expectation
from txnspec.spec import partition as part
from txnspec.spec import properties as props
from txnspec.spec import system as sysm
from txnspec.spec.coordinator_state import IllegalTransition
from txnspec.spec.group import GroupState, OffsetRecord
from txnspec.spec.messages import TransactionResult
from txnspec.spec.model import build_system
from txnspec.spec.scenarios import SCENARIOS
from txnspec.spec.system_state import set_partition

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
SYSTEM = build_system(SCENARIOS["tiny"].with_(partitions=("p0", "p1")))
T1, T2 = (0, 0, 1), (0, 0, 2)


def initial() -> sysm.SystemState:
    return sysm.initial_state(SYSTEM)


def batch(partition: str = "p0", offset: int = 0, seq: int = 0, tag: sysm.Tag | None = T1, epoch: int = 0,
          fenced: bool = False) -> sysm.AppendedBatch:
    return sysm.AppendedBatch(partition, offset, 0, epoch, seq, seq, True, tag, fenced)


def with_ghost(state: sysm.SystemState, **changes: object) -> sysm.SystemState:
    return replace(state, ghost=replace(state.ghost, **changes))  # type: ignore[arg-type]


def closed_transaction(state: sysm.SystemState, partition: str, result: TransactionResult) -> sysm.SystemState:
    """One transactional record of producer 0 at offset 0 of ``partition``, closed by a ``result`` marker."""
    pstate, _ = part.append_data(state.partition(partition), 0, 0, 0, 1, True)
    pstate, _ = part.append_end_txn_marker(pstate, 0, 0, 0, result, 0)
    return set_partition(state, partition, pstate)


def violating_states() -> dict[str, sysm.SystemState]:
    s = initial()
    return {
        "valid_coordinator_transitions": replace(s, coordinator=replace(
            s.coordinator, illegal_transitions=(IllegalTransition("t1", "Empty -> PrepareCommit"),))),
        "no_duplicate_append": with_ghost(s, batches=(batch(offset=0), batch(offset=1))),
        "sequences_contiguous": with_ghost(s, batches=(batch(offset=0, seq=0), batch(offset=1, seq=2))),
        "fenced_appends_never_commit": with_ghost(closed_transaction(s, "p0", COMMIT), batches=(batch(fenced=True),)),
        "fenced_producer_never_commits": with_ghost(s, fenced_commit=True),
        "unique_producer_epochs": replace(s, producers=(
            replace(s.producers[0], producer_id=0, producer_epoch=0),
            replace(s.producers[0], index=1, producer_id=0, producer_epoch=0))),
        "read_committed_only_committed": with_ghost(closed_transaction(s, "p0", COMMIT), batches=(batch(),),
                                                    decisions=(("t1", T1, ABORT, None),)),
        "committed_data_never_lost": with_ghost(closed_transaction(s, "p0", ABORT), batches=(batch(),),
                                                told=((T1, "committed"),)),
        "atomic_outcome": with_ghost(closed_transaction(closed_transaction(s, "p0", COMMIT), "p1", ABORT),
                                     batches=(batch("p0"), batch("p1"))),
        "end_txn_applies_to_its_transaction": with_ghost(s, decisions=(("t1", T2, COMMIT, T1),)),
        "offsets_only_with_committed_output": replace(s, group=GroupState(
            committed=((("g", "input-0"), OffsetRecord(1, 0)),))),
        "no_hanging_transaction": set_partition(s, "p0", part.append_data(
            s.partition("p0"), 0, 0, 0, 1, True)[0]),
    }


INVARIANTS = [p for p in props.properties(SYSTEM) if p.expectation is Expectation.ALWAYS]


def test_every_invariant_has_a_violating_state_here() -> None:
    assert sorted(p.name for p in INVARIANTS) == sorted(violating_states())


@pytest.mark.parametrize("prop", INVARIANTS, ids=lambda p: p.name)
def test_the_invariant_rejects_its_violating_state(prop: object) -> None:
    name = prop.name  # type: ignore[attr-defined]
    assert prop.condition(initial())  # type: ignore[attr-defined]
    assert not prop.condition(violating_states()[name])  # type: ignore[attr-defined]


@pytest.mark.parametrize("prop", INVARIANTS, ids=lambda p: p.name)
def test_every_invariant_has_a_sometimes_partner(prop: object) -> None:
    partner = prop.partner  # type: ignore[attr-defined]
    names = {p.name: p for p in props.properties(SYSTEM)}
    assert partner in names and names[partner].expectation is Expectation.SOMETIMES
