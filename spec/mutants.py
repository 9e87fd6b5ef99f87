"""Seeded mutants of the spec: small, plausible mistakes the properties must catch.

Each mutant is a protocol (:class:`~txnspec.spec.protocol.Protocol`) with one handler wrapped so that
it makes one mistake, a scenario in which the mistake matters, and the property expected to kill it.
``tests/spec/test_mutants.py`` model-checks each and asserts which property kills it: a mutant no
property kills means the properties are too weak (or the mistake is harmless, which must be argued).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from txnspec.spec import coordinator as coord
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod
from txnspec.spec.errors import Errors
from txnspec.spec.messages import AddPartitionsToTxn, InitProducerIdResponse
from txnspec.spec.protocol import CURRENT, Protocol
from txnspec.spec.scenarios import SCENARIOS, Scenario
from txnspec.spec.txn_state import PREPARE_STATES


@dataclass(frozen=True)
class Mutant:
    name: str
    mistake: str
    protocol: Protocol
    scenario: Scenario
    killed_by: str


def _mutant(name: str, mistake: str, scenario: str, killed_by: str, **overrides: Any) -> Mutant:
    return Mutant(name, mistake, CURRENT.but(f"mutant:{name}", mistake, **overrides), SCENARIOS[scenario], killed_by)


# --- coordinator mutants -----------------------------------------------------------------------------

def _add_partitions_while_preparing(cs: coord.CoordinatorState, request: AddPartitionsToTxn, **kw: Any
                                    ) -> coord.CoordinatorResult:
    """Forgets the ``PrepareCommit``/``PrepareAbort`` check: the table then refuses the transition."""
    md = cs.metadata(request.transactional_id)
    if md is not None and md.state in PREPARE_STATES and md.pending_state is not None:
        md2 = replace(md, pending_state=None)
        config = kw.get("config", coord.DEFAULT_CONFIG)
        transit = coord.prepare_add_partitions(md2, request.partitions, cs.now_ms, request.transaction_version)
        cs2, pending = coord.prepare_transition_to(coord.with_metadata(cs, md2, md.transactional_id), md2,
                                                   transit, config)
        error = Errors.NONE if pending else Errors.UNKNOWN_SERVER_ERROR
        return coord.CoordinatorResult(cs2, coord.ErrorResponse(error))
    return coord.handle_add_partitions_to_txn(cs, request, **kw)


def _init_without_bump(cs: coord.CoordinatorState, request: Any, **kw: Any) -> coord.CoordinatorResult:
    """InitProducerId hands out the current epoch again instead of bumping it."""
    before = cs.metadata(request.transactional_id) if request.transactional_id else None
    result = coord.handle_init_producer_id(cs, request, **kw)
    response = result.response
    if before is None or before.producer_epoch < 0 or not isinstance(response, InitProducerIdResponse) \
            or response.error is not Errors.NONE or response.producer_id != before.producer_id:
        return result
    md = result.state.metadata(request.transactional_id)
    assert md is not None
    state = coord.with_metadata(result.state, replace(md, producer_epoch=before.producer_epoch), md.transactional_id)
    return replace(result, state=state, response=InitProducerIdResponse(Errors.NONE, before.producer_id,
                                                                        before.producer_epoch))


def _complete_on_first_marker(cs: coord.CoordinatorState, tid: str, partition: str, coordinator_epoch: int,
                              error: Errors, **kw: Any) -> coord.CoordinatorResult:
    """Writes Complete* as soon as one partition acknowledged its marker."""
    md = cs.metadata(tid)
    if md is not None and error is Errors.NONE and partition in md.partitions:
        cs = coord.with_metadata(cs, replace(md, partitions=frozenset({partition})), tid)
    return coord.handle_write_txn_markers_response(cs, tid, partition, coordinator_epoch, error, **kw)


def _timeout_without_fence(cs: coord.CoordinatorState, tid: str, **kw: Any) -> coord.CoordinatorResult:
    """Aborts a timed-out transaction with the producer's own epoch (no fencing bump)."""
    md = cs.metadata(tid)
    if md is not None:
        cs = coord.with_metadata(cs, replace(md, has_failed_epoch_fence=True), tid)
    return coord.abort_timed_out_transaction(cs, tid, **kw)


def _end_txn_tv2_without_bump(cs: coord.CoordinatorState, request: Any, **kw: Any) -> coord.CoordinatorResult:
    """Transaction version 2 without the epoch bump at EndTxn (a TV1 coordinator answering a TV2 client)."""
    return coord.handle_end_txn(cs, replace(request, transaction_version=0), **kw)


MUTANT_BUILDERS: tuple[Callable[[], Mutant], ...] = (
    lambda: _mutant("add-partitions-while-preparing", "AddPartitionsToTxn accepted in PrepareCommit/PrepareAbort",
                    "default", "valid_coordinator_transitions",
                    handle_add_partitions_to_txn=_add_partitions_while_preparing),
    lambda: _mutant("init-without-epoch-bump", "InitProducerId does not bump the epoch", "zombie",
                    "unique_producer_epochs", handle_init_producer_id=_init_without_bump),
    lambda: _mutant("complete-on-first-marker", "Complete* written after the first marker acknowledgement",
                    "failover", "no_hanging_transaction",
                    handle_write_txn_markers_response=_complete_on_first_marker),
    lambda: _mutant("timeout-without-fence", "a timed-out transaction is aborted without an epoch bump",
                    "delayed-produce", "no_hanging_transaction", abort_timed_out_transaction=_timeout_without_fence),
    lambda: _mutant("tv2-end-txn-without-bump", "EndTxn of transaction version 2 does not bump the epoch",
                    "delayed-end-txn", "end_txn_applies_to_its_transaction", handle_end_txn=_end_txn_tv2_without_bump),
)


def mutants() -> tuple[Mutant, ...]:
    return tuple(build() for build in MUTANT_BUILDERS)


_ = (group_mod, partition_mod)
