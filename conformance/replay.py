"""Replay a trace against a system under test, report the first divergence, shrink it.

The adapter contract
    An adapter drives one system under test (the spec, the reference implementation, your own
    Kafka-compatible broker) in lock step with a trace:

    ``reset(scenario, variant="current")``
        Start afresh in the initial state of the named scenario (``txnspec.spec.scenarios``).
    ``apply(step) -> dict``
        Perform ``step.action``, a :class:`txnspec.spec.actions.Action`: data, never text to parse.
        ``action.kind`` is an :class:`~txnspec.spec.actions.ActionKind`; ``action.actor`` is who acts
        (``producer-0``, ``coordinator``, a partition, ``group``); an application call of
        :data:`~txnspec.spec.actions.APPLICATION_CALLS` names its partition in ``action.partition`` (``send``);
        a delivery (``action.is_delivery``), a loss, a duplicate or a re-send carries ``action.message``, an
        :class:`~txnspec.spec.network.Envelope` with ``source``, ``target`` and ``body``, the request or
        response of :mod:`txnspec.spec.messages` with every field (``body.partition``,
        ``body.producer_epoch``, ``body.base_sequence``, ``body.error`` ...); ``action.awaited`` says whether a
        delivered copy is the one the client waits for or a stale duplicate. Return the observation the step
        produced, in the shape of :func:`txnspec.conformance.adapters.spec_adapter.observation` (``sent``,
        ``errors``, ``visible``, ``offsets``). Raise :class:`StepNotEnabledError` if the system cannot take it
        now. ``str(action)`` is the text reports show; do not parse it.
    ``abstract_state() -> AbstractState`` (required)
        The system's state mapped onto the spec's abstraction, component by component
        (:class:`txnspec.conformance.abstraction.AbstractState`: the coordinator's metadata and transaction log,
        every partition's log, offsets and producer state, the group's offsets, each client's state), compared
        with the trace's after every step; the first difference is the divergence
        (``coordinator[t1].producer_epoch: spec 3, impl 2``). What the system holds otherwise, or does not
        expose, goes in the adapter's ``abstraction_differences`` table (a path pattern such as
        ``coordinator.*.state``, ``*`` for any key, to the reason): a component the adapter neither returns nor
        names there is a divergence.
    ``project(observation) -> dict`` (optional)
        An adapter that observes less than the spec (say, no message texts) returns the part of the
        spec's observation it reports; only that part is compared.

Writing an adapter for your implementation (a worked example, run by the tests)
    A broker whose network the test controls; here txnspec's own implementation stands in for yours,
    reached only through its public API, for the fault-free ``tiny`` scenario. Every message is held, so
    nothing moves unless the trace delivers it; the client's ``FindCoordinator``, which the spec abstracts
    away, is answered at once; the broker answers its markers itself, so the spec's
    ``WriteTxnMarkersResponse`` needs nothing, and its coordinator completes a transaction when the markers are
    written (the spec's when their answers arrive): the table says so and leaves the coordinator out. Its
    abstraction is txnspec's own mapping of a ``Cluster`` (yours maps your broker's state the same way)::

    >>> from txnspec.conformance.adapters.impl_abstraction import of_cluster
    >>> from txnspec.conformance.adapters.impl_messages import Names
    >>> from txnspec.conformance.generate import random_walk
    >>> from txnspec.conformance.replay import StepNotEnabledError, replay
    >>> from txnspec.impl.cluster import Cluster
    >>> from txnspec.impl.network import named
    >>> from txnspec.spec.actions import ActionKind as K
    >>> from txnspec.spec.messages import WriteTxnMarkers, WriteTxnMarkersResponse
    >>> from txnspec.spec.network import producer_address, producer_index
    >>> class MyBrokerAdapter:
    ...     def reset(self, scenario, variant="current"):
    ...         self.cluster = Cluster()
    ...         self.cluster.network.hold(lambda m: True)
    ...         self.client = self.cluster.producer("t1").producer
    ...         self.client.batch_records = self.client.max_in_flight = 1   # one record per Produce, as the spec
    ...         self.outcome, self.transactions = None, 0  # the last blocking call's result; beginTransaction calls
    ...     def apply(self, step):
    ...         action, client = step.action, self.client
    ...         if self.outcome is not None and self.outcome.completed:
    ...             self.outcome = self.outcome.result()  # the application learns it (result.await())
    ...         if action.kind is K.INIT_TRANSACTIONS:
    ...             self.outcome = client.init_transactions()
    ...         elif action.kind is K.BEGIN_TRANSACTION:
    ...             client.begin_transaction()
    ...             self.transactions += 1
    ...         elif action.kind is K.SEND:
    ...             client.send(action.partition + "-0", b"v")
    ...         elif action.kind is K.COMMIT_TRANSACTION:
    ...             self.outcome = client.commit_transaction()
    ...         elif action.kind is K.ABORT_TRANSACTION:
    ...             self.outcome = client.abort_transaction()
    ...         elif action.is_delivery and not isinstance(action.body, WriteTxnMarkersResponse):
    ...             self.cluster.deliver(self.message_for(action))
    ...         elif not action.is_delivery:
    ...             raise StepNotEnabledError(action, ["(faults are not mapped in this example)"])
    ...         self.cluster.run()                                    # the client sends what it can
    ...         while self.cluster.network.pending(named("FindCoordinator")):   # its request, then its answer
    ...             self.cluster.deliver(self.cluster.network.pending(named("FindCoordinator"))[0])
    ...         return {"visible": {"p0": {level: [r.offset for r in self.cluster.read("p0-0", level.upper())]
    ...                                    for level in ("read_committed", "read_uncommitted")}}}
    ...     def message_for(self, action):
    ...         body = action.body
    ...         for m in self.cluster.network.pending():
    ...             if isinstance(body, WriteTxnMarkers):
    ...                 found = m.name == "TxnMarker" and m.request.partition == body.partition + "-0"
    ...             elif producer_index(action.target) is not None:           # an answer to the client
    ...                 found = m.response is not None
    ...             else:                                                     # a request, by its Kafka RPC name
    ...                 found = m.response is None and m.name == type(body).__name__
    ...             if found:
    ...                 return m
    ...         raise StepNotEnabledError(action, self.cluster.network.pending())
    ...     def project(self, expected):
    ...         return {"visible": expected["visible"]}
    ...     abstraction_differences = {
    ...         "coordinator": "completes a transaction when its markers are written, not when answered",
    ...         "txn_log": "the same: its completion record is written earlier"}
    ...     def abstract_state(self):
    ...         names = Names({"producer-1": producer_address(0)}.get, {"p0-0": "p0"}, {}, "")
    ...         return of_cluster(self.cluster, names, {producer_address(0): self.client}, {"p0": "p0-0"},
    ...                           {producer_address(0): self.transactions})
    >>> verdicts = [replay(random_walk("tiny", seed), MyBrokerAdapter()) for seed in range(20)]
    >>> [v.detail for v in verdicts if not v.ok]
    []

Divergence
    Step ``i`` diverges when the adapter cannot take it, when its observation differs from the trace's
    (the differing keys are reported), or when its abstract state (if the adapter returns one and the
    trace records one) differs. :func:`shrink` reduces a diverging trace by delta debugging over its
    steps: first the prefix up to the divergence, then removal of chunks of steps, keeping only
    candidates the spec enables (their expected observations recomputed on the spec, or, with
    ``recompute=False``, the trace's own) that still diverge.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from txnspec.conformance.abstraction import AbstractState, compare
from txnspec.conformance.adapters.spec_adapter import StepNotEnabledError
from txnspec.conformance.envelope_diff import sent_difference
from txnspec.conformance.traces import Step, Trace, TraceError

__all__ = ["Adapter", "StepNotEnabledError", "Verdict", "replay", "shrink"]


class Adapter(Protocol):
    def reset(self, scenario: str, variant: str = "current") -> None: ...

    def apply(self, step: Step) -> dict[str, Any]: ...

    def abstract_state(self) -> AbstractState: ...


@dataclass(frozen=True)
class Verdict:
    ok: bool
    divergence_step: int | None = None
    detail: str = ""
    steps_run: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "divergence_step": self.divergence_step, "detail": self.detail,
                "steps_run": self.steps_run}


def _abstract_difference(expected: dict[str, Any], adapter: Adapter) -> str | None:
    """The first difference between the trace's abstract state and the adapter's, outside the adapter's table of
    legitimate differences (``abstraction_differences``); a component the adapter does not return is one."""
    actual = adapter.abstract_state()
    if not isinstance(actual, Mapping):
        return f"abstract: abstract_state() returned {type(actual).__name__}, not an AbstractState"
    table = getattr(adapter, "abstraction_differences", None) or {}
    found = compare(expected, actual, table, system=getattr(adapter, "name", "impl"))
    return None if found is None else f"abstract.{found}"


def _diff(expected: dict[str, Any], actual: dict[str, Any], what: str) -> str | None:
    if expected == actual:
        return None
    keys = sorted(set(expected) | set(actual))
    parts = []
    for k in keys:
        if k == "sent" and isinstance(expected.get(k), list) and isinstance(actual.get(k), list):
            sent = sent_difference(expected[k], actual[k])
            if sent is not None:
                parts.append(f"{what}.{sent}")
            continue
        if expected.get(k) != actual.get(k):
            parts.append(f"{what}.{k}: expected {json.dumps(expected.get(k), sort_keys=True)}, "
                         f"got {json.dumps(actual.get(k), sort_keys=True)}")
    return "; ".join(parts)


def replay(trace: Trace, adapter: Adapter, *, compare_abstract: bool = True) -> Verdict:
    """Replay ``trace`` on ``adapter``; the first mismatch is the divergence."""
    try:
        adapter.reset(trace.scenario, trace.variant)
    except (KeyError, ValueError) as exc:
        return Verdict(False, None, f"trace {trace.id!r}: cannot reset to scenario {trace.scenario!r}: {exc}")
    for i, step in enumerate(trace.steps):
        try:
            observed = adapter.apply(step)
        except StepNotEnabledError as exc:
            return Verdict(False, i, f"trace {trace.id!r}, step {i}: {exc}", i)
        project = getattr(adapter, "project", None)
        expected = project(step.observation) if callable(project) else step.observation
        problem = _diff(expected, observed, "observation")
        if problem is None and compare_abstract and step.abstract is not None:
            problem = _abstract_difference(step.abstract, adapter)
        if problem is not None:
            return Verdict(False, i, f"trace {trace.id!r}, step {i} ({step.action}): {problem}", i + 1)
    return Verdict(True, None, "", len(trace.steps))


def _spec_realize(trace: Trace, steps: list[Step]) -> Trace | None:
    """The spec's own trace of these actions, or None if the spec does not enable them in this order."""
    from txnspec.conformance.generate import realize

    try:
        return realize(trace.scenario, trace.variant, [s.action for s in steps],
                       trace_id=trace.id + "/shrunk", seed=trace.seed, strategy="shrunk")
    except TraceError:
        return None


def shrink(trace: Trace, adapter: Adapter | Callable[[], Adapter], *, recompute: bool = True,
           max_replays: int = 2_000) -> tuple[Trace, Verdict]:
    """A minimal diverging trace (1-minimal under removal of steps) and its verdict.

    ``adapter`` may be a factory (called once per replay) or one adapter (reset before each replay).
    With ``recompute`` the expected observations of each candidate are recomputed on the spec (for a
    system under test that misbehaves); without, the trace's own expectations are kept (for a trace
    whose expectations are wrong; a candidate then counts only if it diverges at the originally failing
    step, the usual "same failure" rule of delta debugging).
    """
    def make() -> Adapter:
        if isinstance(adapter, type) or not hasattr(adapter, "apply"):
            return cast(Callable[[], Adapter], adapter)()
        return cast(Adapter, adapter)

    budget = [max_replays]
    failing: Step | None = None

    def candidate(steps: list[Step]) -> tuple[Trace, Verdict] | None:
        if not steps or budget[0] <= 0:
            return None
        budget[0] -= 1
        if recompute:
            realized = _spec_realize(trace, steps)
            if realized is None:
                return None
        else:
            if _spec_realize(trace, steps) is None:
                return None
            realized = trace.with_steps(steps, id=trace.id + "/shrunk", strategy="shrunk")
        verdict = replay(realized, make())
        if verdict.ok:
            return None
        if not recompute and (verdict.divergence_step is None or failing is None
                              or steps[verdict.divergence_step] is not failing):
            return None  # a different failure: the kept expectations no longer fit the shortened context
        return realized, verdict

    verdict = replay(trace, make())
    if verdict.ok:
        return trace, verdict
    failing = trace.steps[verdict.divergence_step] if verdict.divergence_step is not None else None
    steps = list(trace.steps)
    if verdict.divergence_step is not None:
        steps = steps[:verdict.divergence_step + 1]
    best = candidate(steps)
    if best is None:  # the prefix alone no longer diverges (or is not enabled): keep the whole trace
        best = (trace, verdict)
        steps = list(trace.steps)
    else:
        steps = list(best[0].steps)
        best = (best[0].with_steps(steps), best[1])
    n = 2
    while len(steps) >= 2:
        chunk = max(1, len(steps) // n)
        reduced = False
        for start in range(0, len(steps), chunk):
            kept = steps[:start] + steps[start + chunk:]
            found = candidate(kept)
            if found is not None:
                steps = list(found[0].steps)
                if found[1].divergence_step is not None:
                    steps = steps[:found[1].divergence_step + 1]
                best = (found[0].with_steps(steps), found[1])
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(n * 2, len(steps))
        if budget[0] <= 0:
            break
    return best
