"""Build the checker's :class:`~txnspec.checker.model.Model` for a scenario and a protocol variant.

This is the only place where the spec meets the checker's contract: initial states, labelled
successors, properties, what counts as a final state (not a deadlock), which actions are weakly fair
(the protocol's own: deliveries and marker retries; never the application's choices or the faults),
and a short rendering of a state for counterexamples.
"""

from __future__ import annotations

from collections.abc import Hashable

from txnspec.checker.model import Model
from txnspec.spec import partition as partition_mod
from txnspec.spec import properties as props
from txnspec.spec import system as sysm
from txnspec.spec.actions import ACTION_KINDS, FAIR_KINDS, Action
from txnspec.spec.reduction import ample_steps
from txnspec.spec.scenarios import Scenario, scenario_named
from txnspec.spec.symmetry import canonicaliser, group_of
from txnspec.spec.variants import variant_named


def fairness(action: Hashable) -> Hashable | None:
    """Weak fairness per action kind for the protocol's own steps; ``None`` for choices and faults."""
    kind = action.kind if isinstance(action, Action) else None
    return kind if kind in FAIR_KINDS else None


def _coordinator_lines(state: sysm.SystemState) -> list[str]:
    lines = []
    for tid, md in state.coordinator.cache:
        pending = f" pending={md.pending_state}" if md.pending_state else ""
        lines.append(f"coordinator[{tid}]: {md.state} pid={md.producer_id} epoch={md.producer_epoch} "
                     f"partitions={sorted(md.partitions)}{pending}")
    return lines


def _partition_lines(state: sysm.SystemState) -> list[str]:
    return [f"{name}: {partition_mod.describe(pstate)}" for name, pstate in state.partitions]


def state_notes(state: sysm.SystemState) -> tuple[str, ...]:
    """The lines of the coordinator and the partitions: what a sequence diagram notes beside a step that changed
    them (``Model.metadata["state_notes"]``; the producers' calls and the network are its arrows)."""
    return (*_coordinator_lines(state), *_partition_lines(state))


def describe_state(state: sysm.SystemState) -> str:
    lines = _coordinator_lines(state)
    for p in state.producers:
        lines.append(f"producer-{p.index}: {p.phase.value} pid={p.producer_id} epoch={p.producer_epoch} "
                     f"txn={p.txn_no}")
    lines.extend(_partition_lines(state))
    if state.network:
        lines.append("in flight: " + "; ".join(str(e) for e in state.network))
    return "\n".join(lines)


def coordinator_transitions(before: sysm.SystemState, after: sysm.SystemState) -> tuple[str, ...]:
    """The transaction-state transitions a step made the coordinator take, e.g. ``Ongoing -> PrepareCommit``
    (coverage for simulation: ``Model.metadata["transition_labels"]``)."""
    if before.coordinator is after.coordinator:
        return ()
    was = {tid: md.state for tid, md in before.coordinator.cache}
    return tuple(f"{was.get(tid, 'none')} -> {md.state}" for tid, md in after.coordinator.cache
                 if was.get(tid) != md.state)


def build_system(scenario: Scenario | str, variant: str = "current") -> sysm.System:
    s = scenario_named(scenario) if isinstance(scenario, str) else scenario
    v = variant_named(variant)
    return sysm.System(v.scenario(s), v.protocol)


def build_model(scenario: Scenario | str, variant: str = "current") -> Model[sysm.SystemState]:
    """The model of ``scenario`` under protocol ``variant`` (see ``spec/variants``)."""
    system = build_system(scenario, variant)
    group = group_of(system.scenario)
    return Model(
        name=f"kafka-eos[scenario={system.scenario.name}, variant={variant}]",
        init_states=lambda: (sysm.initial_state(system),),
        next_steps=lambda state: sysm.next_steps(system, state),
        properties=props.properties(system),
        symmetry=None if group is None else canonicaliser(group),
        is_final=props.is_final(system),
        fairness=fairness,
        describe_state=describe_state,
        metadata={"action_kinds": ACTION_KINDS,
                  "lifelines": ["producer-0", "producer-1", "coordinator", *system.scenario.partitions, "group"],
                  "system": system, "symmetry_group": group, "transition_labels": coordinator_transitions,
                  "state_notes": state_notes},
        ample=ample_steps,
    )
