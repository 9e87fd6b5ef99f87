"""The plan of a wire-level trace audit: which spec traces a client can send, and what the spec answers.

What a client can send
    A spec trace mixes steps a client makes happen (an application call, a request or a response between a
    producer and a broker, a re-send), steps the broker takes by itself (the coordinator's
    ``WriteTxnMarkers`` and their answers) and faults no client can cause (a failed log append, a
    coordinator failover, a timeout, a lost message, a crash). :func:`client_walk` asks the conformance
    generator (:func:`txnspec.conformance.generate.walk`) for seeded random walks restricted to the first two
    kinds, taking the broker's own steps as soon as they are enabled: the broker is quiescent whenever a
    request reaches it, which is the only interleaving a client can rely on from a real broker (its markers
    are asynchronous). :func:`why_not_client_sendable` says why any other trace (a covering trace, a trace
    from a file) cannot be replayed this way. Steps are told apart by their action's kind and lifelines.

The plan
    :func:`wire_plan` runs a trace through the spec and keeps, in order, each request a producer delivers
    (``InitProducerId``, ``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``TxnOffsetCommit``, ``EndTxn``,
    ``Produce``) with the spec's answer, and the **checkpoints** after it: what ``Fetch`` at read_committed
    and read_uncommitted and ``OffsetFetch`` (with ``require_stable``, KIP-447) must return once the broker
    has done its own steps. :func:`plans` picks, per scenario, the client walks that add most coverage of
    (request, spec answer) pairs and read kinds.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from txnspec.conformance.generate import Successors, walk
from txnspec.conformance.traces import Trace
from txnspec.impl.topic_partition import TopicPartition
from txnspec.spec import group as spec_group
from txnspec.spec import partition as spec_partition
from txnspec.spec import system as sysm
from txnspec.spec.actions import APPLICATION_CALLS, Action, ActionKind
from txnspec.spec.messages import (
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerIdResponse,
    IsolationLevel,
    ProduceResponse,
)
from txnspec.spec.network import is_request, producer_index

# scenarios whose client-sendable walks the audit replays (each with ``walks_per_scenario`` seeds)
SCENARIOS = ("offsets", "multi-partition", "retry", "delayed-end-txn", "zombie", "default")


CLIENT_KINDS = APPLICATION_CALLS | {ActionKind.RETRY}


BROKER_KINDS = frozenset({ActionKind.DELIVER_WRITE_TXN_MARKERS, ActionKind.DELIVER_WRITE_TXN_MARKERS_RESPONSE,
                          ActionKind.RESEND_MARKER})


def _touches_producer(action: Action) -> bool:
    return producer_index(action.source) is not None or producer_index(action.target) is not None


def step_role(action: Action) -> str | None:
    """"client" for what a client does or receives, "broker" for the broker's own steps, None for a fault."""
    if action.kind in BROKER_KINDS:
        return "broker"
    if action.kind in CLIENT_KINDS:
        return "client"
    if action.is_delivery and _touches_producer(action):
        return "client"
    if action.kind is ActionKind.DUPLICATE and producer_index(action.source) is not None:
        return "client"  # a client sends a request again while the first copy is on its way
    return None


def client_walk(scenario: str, variant: str, seed: int) -> Trace:
    """A seeded random walk of ``scenario`` restricted to client steps, the broker's own steps taken first."""
    rng = random.Random(seed)

    def choose(i: int, state: sysm.SystemState, steps: Successors) -> int | None:
        roles = [step_role(action) for action, _ in steps]
        if "broker" in roles:
            return roles.index("broker")
        client = [k for k, role in enumerate(roles) if role == "client"]
        return rng.choice(client) if client else None

    return walk(scenario, variant, choose, trace_id=f"{scenario}/client/{seed}", seed=seed, strategy="random",
                max_steps=1_000)


def why_not_client_sendable(trace: Trace) -> str | None:
    """None when the trace can be replayed on a broker by a client; else the first step that cannot."""
    from txnspec.conformance.adapters import spec_adapter as sa
    from txnspec.spec.model import build_system

    system = build_system(trace.scenario, trace.variant)
    state = sysm.initial_state(system)
    for i, step in enumerate(trace.steps):
        steps = sa.successors(system, state)
        action, nxt = sa.pick(steps, step.action)
        role = step_role(action)
        if role is None:
            return f"step {i} ({action}) is a fault no client can cause"
        if _is_request_delivery(action) and any(step_role(a) == "broker" for a, _ in steps):
            return f"step {i} ({action}) reaches the broker before it has finished its own steps"
        state = nxt
    return None


def _is_request_delivery(action: Action) -> bool:
    return action.is_delivery and producer_index(action.source) is not None and is_request(action.body)


@dataclass(frozen=True)
class Checkpoint:
    """What reads must return once the broker is quiescent: per partition and isolation, the fetch; per
    offsets partition, the OffsetFetch answer."""

    fetches: tuple[tuple[str, str, dict[str, Any]], ...]  # (partition, isolation, expected)
    offsets: tuple[tuple[str, dict[str, Any]], ...]  # (offsets partition, expected)


@dataclass(frozen=True)
class Exchange:
    step: int  # index of the delivery in the trace
    request: Any  # the spec's request body
    response: Any  # the spec's answer (None: the spec answers nothing)
    after: Checkpoint  # the reads that changed once the broker finished what this request started


@dataclass(frozen=True)
class WirePlan:
    trace: Trace
    exchanges: tuple[Exchange, ...]
    partitions: tuple[str, ...]
    group_id: str
    transaction_version: int


def _fetch_view(pstate: Any, isolation: IsolationLevel) -> dict[str, Any]:
    r = spec_partition.fetch(pstate, 0, isolation)
    return {"high_watermark": r.high_watermark, "last_stable_offset": r.last_stable_offset,
            "records": list(r.records),
            "aborted_transactions": sorted([a.producer_id, a.first_offset] for a in r.aborted_transactions)}


def _offset_view(group: Any, group_id: str, partition: str, require_stable: bool) -> dict[str, Any]:
    error, offset = spec_group.fetch_offsets(group, group_id, partition, require_stable)
    return {"error": error.name, "committed_offset": -1 if offset is None else offset}


# what the spec's producers send to their transaction (system.dispatch): the consumed input partition
OFFSET_PARTITIONS = (TopicPartition("input", 0),)


def _reads(system: sysm.System, state: sysm.SystemState, require_stable: bool) -> dict[tuple[str, str], Any]:
    reads: dict[tuple[str, str], Any] = {}
    for name, pstate in state.partitions:
        if name not in system.scenario.partitions:
            continue  # the group's __consumer_offsets partition: read through OffsetFetch
        for isolation in IsolationLevel:
            reads[(name, isolation.value)] = _fetch_view(pstate, isolation)
    if system.scenario.commit_offsets:
        for partition in OFFSET_PARTITIONS:
            reads[(partition, "offsets")] = _offset_view(state.group, system.scenario.group_id, partition,
                                                         require_stable)
    return reads


def wire_plan(trace: Trace, require_stable: bool = True) -> WirePlan:
    """The requests of a client-sendable trace with the spec's answers and the reads after each."""
    from txnspec.conformance.adapters import spec_adapter as sa
    from txnspec.spec.model import build_system

    reason = why_not_client_sendable(trace)
    if reason is not None:
        raise ValueError(f"trace {trace.id!r} cannot be sent by a client: {reason}")
    system = build_system(trace.scenario, trace.variant)
    state = sysm.initial_state(system)
    pending: list[tuple[int, Any, Any]] = []
    exchanges: list[Exchange] = []
    seen = _reads(system, state, require_stable)

    def close_pending() -> None:
        nonlocal seen
        if not pending:
            return
        now = _reads(system, state, require_stable)
        changed = {k: v for k, v in now.items() if seen.get(k) != v}
        seen = now
        step, request, response = pending.pop()
        fetches = tuple((p, iso, v) for (p, iso), v in sorted(changed.items()) if iso != "offsets")
        offsets = tuple((p, v) for (p, iso), v in sorted(changed.items()) if iso == "offsets")
        exchanges.append(Exchange(step, request, response, Checkpoint(fetches, offsets)))

    for i, step in enumerate(trace.steps):
        action, nxt = sa.pick(sa.successors(system, state), step.action)
        if _is_request_delivery(action):
            close_pending()  # the broker was quiescent: the previous request's effects are complete
            envelope = action.message
            assert envelope is not None
            added = Counter(nxt.network) - Counter(state.network)
            answers = [e.body for e in added.elements()
                       if e.target == envelope.source and e.context == envelope.context]
            pending.append((i, envelope.body, answers[0] if answers else None))
        state = nxt
    close_pending()
    return WirePlan(trace, tuple(exchanges), system.scenario.partitions, system.scenario.group_id,
                    system.scenario.transaction_version)


def expected_answer(response: Any) -> dict[str, Any]:
    if isinstance(response, InitProducerIdResponse):
        if response.error.name != "NONE":
            return {"error": response.error.name}
        return {"error": "NONE", "producer_id": response.producer_id, "epoch": response.producer_epoch}
    if isinstance(response, EndTxnResponse):
        if response.error.name == "NONE" and response.producer_id >= 0:
            return {"error": "NONE", "producer_id": response.producer_id, "epoch": response.producer_epoch}
        return {"error": response.error.name}
    if isinstance(response, ProduceResponse):
        out: dict[str, Any] = {"error": response.error.name}
        if response.error.name == "NONE":
            out["base_offset"] = response.base_offset
        return out
    assert isinstance(response, ErrorResponse), response
    return {"error": response.error.name}


CANDIDATES = 32  # client walks tried per scenario, of which the most covering are replayed


def coverage_items(plan: WirePlan) -> set[str]:
    """What a plan exercises: each request with each answer the spec gives it, and the kinds of reads."""
    items: set[str] = set()
    for i, x in enumerate(plan.exchanges):
        name = f"EndTxn({x.request.result})" if isinstance(x.request, EndTxn) else type(x.request).__name__
        again = ":again" if any(y.request == x.request for y in plan.exchanges[:i]) else ""
        items.add(f"{name}{again}:{expected_answer(x.response)['error'] if x.response else '-'}")
    for x in plan.exchanges:
        for _, isolation, view in x.after.fetches:
            if view["last_stable_offset"] < view["high_watermark"]:
                items.add(f"fetch:{isolation}:open transaction")
            if view["aborted_transactions"]:
                items.add(f"fetch:{isolation}:aborted")
        items.update(f"offset_fetch:{view['error']}" for _, view in x.after.offsets)
    return items


@functools.lru_cache(maxsize=16)
def plans(seed: int, walks_per_scenario: int, variant: str, require_stable: bool,
          scenarios: tuple[str, ...] = SCENARIOS) -> tuple[WirePlan, ...]:
    """The audit's traces: per scenario, ``walks_per_scenario`` client walks chosen among ``CANDIDATES`` (or as many
    as asked for, when more) seeded
    ones (seeds from ``seed``), greedily by what they add to the coverage of the ones already chosen."""
    chosen: list[WirePlan] = []
    covered: set[str] = set()
    for scenario in scenarios:
        candidates = [wire_plan(client_walk(scenario, variant, seed * 1000 + k), require_stable)
                      for k in range(max(CANDIDATES, walks_per_scenario))]
        for _ in range(min(walks_per_scenario, len(candidates))):
            best = max(candidates, key=lambda p: (len(coverage_items(p) - covered), len(p.exchanges)))
            candidates.remove(best)
            chosen.append(best)
            covered |= coverage_items(best)
    return tuple(chosen)


def describe_plans(selected: tuple[WirePlan, ...], variant: str) -> str:
    return (f"{len(selected)} client traces of the conformance generator ({', '.join(SCENARIOS)}; "
            f"variant {variant}), {sum(len(p.exchanges) for p in selected)} requests")
