"""The spec as a replay adapter, and what an observation and an abstract state are.

Observation (after one step; every implementation adapter must produce the same shape)
    ``sent``
        The messages the step put in flight, as data (:func:`txnspec.conformance.action_codec.envelope_to_json`:
        source, target, body with its fields, context), in a canonical order. A delivery that answers shows
        the response here, with its error code.
    ``errors``
        The error codes (other than ``NONE``) of the responses in ``sent``, sorted.
    ``visible``
        Per partition, the offsets of the records a consumer application sees from offset 0 at
        ``read_committed`` and at ``read_uncommitted`` (:func:`txnspec.spec.partition.fetch`).
    ``offsets``
        The committed consumer-group offsets, ``{"group/partition": offset}``.

Abstract state
    :class:`txnspec.conformance.abstraction.AbstractState`: the coordinator's metadata and transaction log,
    every partition's log, offsets and producer state, the group's offsets and generations, each producer's
    client, component by component.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from txnspec.conformance.abstraction import AbstractState, of_spec
from txnspec.conformance.action_codec import envelope_to_json
from txnspec.spec import partition as partition_mod
from txnspec.spec import system as sysm
from txnspec.spec.actions import Action
from txnspec.spec.messages import IsolationLevel
from txnspec.spec.network import is_request

MUTATIONS = ("read-committed-leak", "lost-offsets", "stale-lso")


def observation(prev: sysm.SystemState, state: sysm.SystemState) -> dict[str, Any]:
    """What an outside observer sees after the step from ``prev`` to ``state``."""
    added = Counter(state.network)
    added.subtract(Counter(prev.network))
    sent = [env for env, n in added.items() if n > 0 for _ in range(n)]
    errors = sorted(str(env.body.error) for env in sent if not is_request(env.body) and str(env.body.error) != "NONE")
    sent_json = sorted((envelope_to_json(e) for e in sent), key=lambda e: json.dumps(e, sort_keys=True))
    visible: dict[str, Any] = {}
    for name, pstate in state.partitions:
        visible[name] = {
            "read_committed": list(partition_mod.fetch(pstate, 0, IsolationLevel.READ_COMMITTED).records),
            "read_uncommitted": list(partition_mod.fetch(pstate, 0, IsolationLevel.READ_UNCOMMITTED).records)}
    offsets = {f"{group}/{p}": record.offset for (group, p), record in state.group.committed}
    return {"sent": sent_json, "errors": errors, "visible": visible, "offsets": offsets}


def abstract_state(state: sysm.SystemState) -> AbstractState:
    """The spec's abstract state (:func:`txnspec.conformance.abstraction.of_spec`)."""
    return of_spec(state)


def coordinator_transitions(prev: sysm.SystemState, state: sysm.SystemState) -> list[str]:
    """The coordinator transitions of one step: ``"Empty->Ongoing"`` per transactional id whose metadata
    changed (``"-"`` for an id the coordinator does not know)."""
    before = {tid: _coordinator_view(md) for tid, md in prev.coordinator.cache}
    after = {tid: _coordinator_view(md) for tid, md in state.coordinator.cache}
    return transitions_between(before, after)


def _coordinator_view(md: Any) -> dict[str, Any]:
    return {"state": str(md.state), "pending": None if md.pending_state is None else str(md.pending_state),
            "producer_id": md.producer_id, "epoch": md.producer_epoch, "partitions": sorted(md.partitions)}


_TRANSITION_KEYS = ("state", "pending", "producer_id", "epoch", "producer_epoch", "partitions")


def _transition_view(entry: dict[str, Any] | None) -> tuple[Any, ...] | None:
    return None if entry is None else tuple(entry.get(k) for k in _TRANSITION_KEYS)


def transitions_between(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Coordinator transitions between two ``abstract_state()["coordinator"]`` views: ``"Empty->Ongoing"``
    for each transactional id whose state, pending state, producer id, epoch or partitions changed (``"-"`` for
    an id the coordinator does not know)."""
    out = []
    for tid in sorted(set(before) | set(after)):
        a, b = before.get(tid), after.get(tid)
        if _transition_view(a) != _transition_view(b):
            out.append(f"{'-' if a is None else a['state']}->{'-' if b is None else b['state']}")
    return out


class StepNotEnabledError(Exception):
    """The step's action is not enabled in the current state (``enabled`` lists what is)."""

    def __init__(self, action: object, enabled: Sequence[object]) -> None:
        self.action, self.enabled = action, enabled
        shown = "; ".join(str(a) for a in enabled[:8]) + (" ..." if len(enabled) > 8 else "")
        super().__init__(f"action {str(action)!r} is not enabled (enabled: {shown or 'nothing'})")


def successors(system: sysm.System, state: sysm.SystemState) -> list[tuple[Action, sysm.SystemState]]:
    return list(sysm.next_steps(system, state))


def pick(steps: list[tuple[Action, sysm.SystemState]], action: Action) -> tuple[Action, sysm.SystemState]:
    """The enabled step whose action equals ``action`` (an action is unique among those enabled)."""
    for a, s in steps:
        if a == action:
            return a, s
    raise StepNotEnabledError(action, [a for a, _ in steps])


class SpecAdapter:
    """Replays a trace on the spec's system model.

    ``mutation`` (one of :data:`MUTATIONS`) makes the adapter misreport on purpose, to show that replay
    catches a wrong implementation and shrinks its trace: ``read-committed-leak`` reports uncommitted
    records at ``read_committed``, ``lost-offsets`` never reports committed offsets, ``stale-lso`` reports
    the last stable offset as the high watermark.
    """

    def __init__(self, mutation: str | None = None) -> None:
        if mutation is not None and mutation not in MUTATIONS:
            raise ValueError(f"unknown mutation {mutation!r}; known: {', '.join(MUTATIONS)}")
        self.mutation = mutation
        self.system: sysm.System | None = None
        self.state: sysm.SystemState | None = None

    def reset(self, scenario: str, variant: str = "current") -> None:
        from txnspec.spec.model import build_system

        self.system = build_system(scenario, variant)
        self.state = sysm.initial_state(self.system)

    def _require(self) -> tuple[sysm.System, sysm.SystemState]:
        if self.system is None or self.state is None:
            raise RuntimeError("reset() the adapter before applying steps")
        return self.system, self.state

    def enabled(self) -> list[Action]:
        system, state = self._require()
        return [a for a, _ in successors(system, state)]

    def apply(self, step: Any) -> dict[str, Any]:
        system, state = self._require()
        _, nxt = pick(successors(system, state), step.action)
        self.state = nxt
        obs = observation(state, nxt)
        if self.mutation == "read-committed-leak":
            for view in obs["visible"].values():
                view["read_committed"] = list(view["read_uncommitted"])
        elif self.mutation == "lost-offsets":
            obs["offsets"] = {}
        return obs

    def abstract_state(self) -> AbstractState:
        _, state = self._require()
        out = abstract_state(state)
        if self.mutation == "stale-lso":  # the views are shared (memoised): change copies
            out = {**out, "partitions": {name: {**view, "lso": view["hw"]}
                                         for name, view in out["partitions"].items()}}
        return out
