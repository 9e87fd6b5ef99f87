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
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod
from txnspec.spec import txn_markers
from txnspec.spec import txn_metadata as txn_md
from txnspec.spec.coordinator_state import CoordinatorResult, CoordinatorState
from txnspec.spec.errors import Errors
from txnspec.spec.messages import AddPartitionsToTxn, ErrorResponse, InitProducerIdResponse
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

def _add_partitions_while_preparing(cs: CoordinatorState, request: AddPartitionsToTxn, **kw: Any
                                    ) -> CoordinatorResult:
    """Forgets the ``PrepareCommit``/``PrepareAbort`` check: the table then refuses the transition."""
    md = cs.metadata(request.transactional_id)
    if md is not None and md.state in PREPARE_STATES and md.pending_state is not None:
        md2 = replace(md, pending_state=None)
        config = kw.get("config", coord_state.DEFAULT_CONFIG)
        transit = txn_md.prepare_add_partitions(md2, request.partitions, cs.now_ms, request.transaction_version)
        cs2, pending = txn_md.prepare_transition_to(coord_state.with_metadata(cs, md2, md.transactional_id), md2,
                                                    transit, config)
        error = Errors.NONE if pending else Errors.UNKNOWN_SERVER_ERROR
        return CoordinatorResult(cs2, ErrorResponse(error))
    return coord.handle_add_partitions_to_txn(cs, request, **kw)


def _init_without_bump(cs: CoordinatorState, request: Any, **kw: Any) -> CoordinatorResult:
    """InitProducerId hands out the current epoch again instead of bumping it."""
    before = cs.metadata(request.transactional_id) if request.transactional_id else None
    result = coord.handle_init_producer_id(cs, request, **kw)
    response = result.response
    if before is None or before.producer_epoch < 0 or not isinstance(response, InitProducerIdResponse) \
            or response.error is not Errors.NONE or response.producer_id != before.producer_id:
        return result
    md = result.state.metadata(request.transactional_id)
    assert md is not None
    state = coord_state.with_metadata(result.state, replace(md, producer_epoch=before.producer_epoch),
                                      md.transactional_id)
    return replace(result, state=state, response=InitProducerIdResponse(Errors.NONE, before.producer_id,
                                                                        before.producer_epoch))


def _complete_on_first_marker(cs: CoordinatorState, tid: str, partition: str, coordinator_epoch: int,
                              error: Errors, **kw: Any) -> CoordinatorResult:
    """Writes Complete* as soon as one partition acknowledged its marker."""
    md = cs.metadata(tid)
    if md is not None and error is Errors.NONE and partition in md.partitions:
        cs = coord_state.with_metadata(cs, replace(md, partitions=frozenset({partition})), tid)
    return txn_markers.handle_write_txn_markers_response(cs, tid, partition, coordinator_epoch, error, **kw)


def _add_partitions_forgets_earlier(cs: CoordinatorState, request: AddPartitionsToTxn, **kw: Any
                                    ) -> CoordinatorResult:
    """AddPartitionsToTxn replaces the transaction's partitions instead of adding to them."""
    md = cs.metadata(request.transactional_id)
    if md is not None and md.pending_state is None and md.producer_id == request.producer_id:
        cs = coord_state.with_metadata(cs, replace(md, partitions=frozenset()), md.transactional_id)
    return coord.handle_add_partitions_to_txn(cs, request, **kw)


def _end_txn_tv2_without_bump(cs: CoordinatorState, request: Any, **kw: Any) -> CoordinatorResult:
    """Transaction version 2 without the epoch bump at EndTxn (a TV1 coordinator answering a TV2 client)."""
    return coord.handle_end_txn(cs, replace(request, transaction_version=0), **kw)


# --- partition and group mutants -------------------------------------------------------------------

def _append_without_epoch_fencing(state: Any, producer_id: int, epoch: int, *args: Any, **kw: Any) -> Any:
    """Data appends ignore a lower producer epoch (``checkProducerEpoch`` forgotten for data)."""
    entry = state.entry(producer_id)
    if entry is not None and epoch < entry.producer_epoch:
        state = partition_mod._with_entry(state, producer_id, replace(entry, producer_epoch=epoch, batches=()))
    return partition_mod.append_data(state, producer_id, epoch, *args, **kw)


def _fetch_without_lso(state: Any, offset: int, isolation: Any) -> Any:
    """read_committed reads up to the high watermark: the LSO is not honoured."""
    unpinned = replace(state, ongoing=(), unreplicated=())
    return partition_mod.fetch(unpinned, offset, isolation)


def _marker_keeps_transaction_open(state: Any, producer_id: int, *args: Any, **kw: Any) -> Any:
    """The marker is written but the producer's open transaction is not closed."""
    entry = state.entry(producer_id)
    new_state, reply = partition_mod.append_end_txn_marker(state, producer_id, *args, **kw)
    closed = new_state.entry(producer_id)
    if entry is not None and closed is not None and entry.current_txn_first_offset != -1 \
            and reply.error is Errors.NONE:
        reopened = replace(closed, current_txn_first_offset=entry.current_txn_first_offset)
        new_state = replace(partition_mod._with_entry(new_state, producer_id, reopened),
                            ongoing=tuple(sorted((*new_state.ongoing, (entry.current_txn_first_offset, producer_id)))))
    return new_state, reply


def _commit_offsets_at_once(state: Any, request: Any, **kw: Any) -> Any:
    """A transactional offset commit is visible at once instead of at its marker."""
    state, response = group_mod.handle_txn_offset_commit(state, request, **kw)
    return group_mod.complete_pending_txn_offset_commit(state, request.producer_id, True), response


def _abort_marker_commits_offsets(state: Any, producer_id: int, commit: bool) -> Any:
    """The ABORT marker commits the pending offsets too."""
    return group_mod.complete_pending_txn_offset_commit(state, producer_id, True)


TV1_UNVERIFIED = {"transaction_version": 0, "partition_verification": False}


def _on(scenario: str, **changes: Any) -> Scenario:
    return SCENARIOS[scenario].with_(**changes)


def _mutant_on(name: str, mistake: str, scenario: Scenario, killed_by: str, **overrides: Any) -> Mutant:
    return Mutant(name, mistake, CURRENT.but(f"mutant:{name}", mistake, **overrides), scenario, killed_by)


MUTANT_BUILDERS: tuple[Callable[[], Mutant], ...] = (
    lambda: _mutant("add-partitions-while-preparing", "AddPartitionsToTxn accepted in PrepareCommit/PrepareAbort",
                    "delayed-end-txn", "valid_coordinator_transitions",
                    handle_add_partitions_to_txn=_add_partitions_while_preparing),
    lambda: _mutant("init-without-epoch-bump", "InitProducerId does not bump the epoch", "zombie",
                    "unique_producer_epochs", handle_init_producer_id=_init_without_bump),
    lambda: _mutant("complete-on-first-marker", "Complete* written after the first marker acknowledgement",
                    "multi-partition", "no_hanging_transaction",
                    handle_write_txn_markers_response=_complete_on_first_marker),
    lambda: _mutant_on("add-partitions-forgets-earlier", "AddPartitionsToTxn replaces the partition set",
                       _on("multi-partition", transaction_version=0), "no_hanging_transaction",
                       handle_add_partitions_to_txn=_add_partitions_forgets_earlier),
    lambda: _mutant("tv2-end-txn-without-bump", "EndTxn of transaction version 2 does not bump the epoch",
                    "delayed-end-txn", "end_txn_applies_to_its_transaction", handle_end_txn=_end_txn_tv2_without_bump),
    lambda: _mutant_on("data-append-ignores-epoch", "a data batch with an older epoch is appended",
                       _on("zombie", **TV1_UNVERIFIED), "fenced_appends_never_commit",
                       append_data=_append_without_epoch_fencing),
    lambda: _mutant("lso-not-pinned", "read_committed reads past the last stable offset", "tiny",
                    "read_committed_only_committed", fetch=_fetch_without_lso),
    lambda: _mutant("marker-keeps-transaction-open", "a marker does not close the producer's transaction", "tiny",
                    "no_hanging_transaction", append_end_txn_marker=_marker_keeps_transaction_open),
    lambda: _mutant("offsets-visible-before-marker", "transactional offsets are visible before the commit marker",
                    "offsets", "offsets_only_with_committed_output", handle_txn_offset_commit=_commit_offsets_at_once),
    lambda: _mutant("abort-commits-offsets", "an ABORT marker makes the pending offsets visible", "offsets",
                    "offsets_only_with_committed_output",
                    complete_pending_txn_offset_commit=_abort_marker_commits_offsets),
)


def mutants() -> tuple[Mutant, ...]:
    return tuple(build() for build in MUTANT_BUILDERS)


def build_mutant_model(mutant: Mutant) -> Any:
    """The checker model of a mutant (its protocol on its scenario)."""
    from txnspec.checker.model import Model
    from txnspec.spec import properties as props
    from txnspec.spec import system as sysm
    from txnspec.spec.model import describe_state, fairness

    system = sysm.System(mutant.scenario, mutant.protocol)
    return Model(f"kafka-eos[scenario={mutant.scenario.name}, mutant={mutant.name}]",
                 lambda: (sysm.initial_state(system),), lambda state: sysm.next_steps(system, state),
                 props.properties(system), is_final=props.is_final(system), fairness=fairness,
                 describe_state=describe_state)
