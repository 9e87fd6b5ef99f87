"""Wire-level audit of the transactional protocol: traces of the conformance generator replayed over Kafka's
binary protocol, every answer compared with the spec's.

The parts, one concern each: :mod:`.trace_plan` (which spec traces a client can send, the requests with the
spec's answers and the reads after them), :mod:`.trace_replay` (the replay against a broker behind the
``TxnWire`` interface, rule by rule), :mod:`.socket_wire` (a broker over a socket), :mod:`.impl_wire` (the
reference implementation in process), :mod:`.wire_fixtures` (recorded answers for the tests). This module
composes them: :func:`run_txn_wire_audit` audits a broker at ``host:port`` with the generator's traces,
:func:`run_wire_audit` adds the hand-chosen rules of :mod:`.wire`.
"""

from __future__ import annotations

from typing import Any

from txnspec.audit.impl_wire import ImplTransport, ImplTxnWire, run_impl_wire_audit
from txnspec.audit.report import RuleResult
from txnspec.audit.request_tv import run_request_tv_rules
from txnspec.audit.socket_rules import socket_transport
from txnspec.audit.socket_wire import SocketTxnWire, consumer_view, socket_txn_wire
from txnspec.audit.timeout import run_timeout_rule
from txnspec.audit.trace_plan import (
    SCENARIOS,
    WirePlan,
    client_walk,
    coverage_items,
    describe_plans,
    expected_answer,
    plans,
    step_role,
    why_not_client_sendable,
    wire_plan,
)
from txnspec.audit.trace_replay import (
    RULE_DESCRIPTIONS,
    RecordedWire,
    RecordingWire,
    TxnWire,
    consumer_records,
    run_plans,
    run_trace,
)
from txnspec.audit.wire import run_init_rules, run_rules

__all__ = [
    "RULE_DESCRIPTIONS", "SCENARIOS", "ImplTransport", "ImplTxnWire", "RecordedWire", "RecordingWire",
    "SocketTxnWire", "TxnWire", "WirePlan", "client_walk", "consumer_records", "consumer_view", "coverage_items",
    "describe_plans", "expected_answer", "plans", "run_impl_wire_audit", "run_plans", "run_trace",
    "run_txn_wire_audit", "run_wire_audit", "step_role", "why_not_client_sendable", "wire_plan",
]


def run_txn_wire_audit(bootstrap: str, run: str, seed: int, walks_per_scenario: int = 2,
                       record: list[list[Any]] | None = None) -> list[RuleResult]:
    """The transactional wire audit of a broker; ``record`` collects its answers (for fixtures)."""
    with socket_txn_wire(bootstrap) as socket_wire:
        variant = "current" if socket_wire.transaction_version >= 2 else "tv1"
        selected = plans(seed, walks_per_scenario, variant, socket_wire.versions["OffsetFetch"] >= 7)
        wire: Any = socket_wire if record is None else RecordingWire(socket_wire)
        results = run_plans(wire, selected, run)
        if record is not None:
            record.extend(wire.calls)
        versions = ", ".join(f"{k} v{v}" for k, v in socket_wire.versions.items())
        results.insert(0, RuleResult("wire", "txn.traces", describe_plans(selected, variant) + f"; {versions}",
                                     checked=len(selected)))
        return results


def run_wire_audit(bootstrap: str, run: str, seed: int = 0, traces: int = 2) -> list[RuleResult]:
    """The hand-chosen rules of :mod:`.wire`, then ``traces`` client traces per scenario of the conformance
    generator, then the transaction timeout rule (:mod:`.timeout`) and the request transaction version rules
    (:mod:`.request_tv`)."""
    with socket_transport(bootstrap, run) as transport:
        results = run_rules(transport) + run_init_rules(transport, run)
        conn = transport.conn
        assert conn is not None
        results.insert(0, RuleResult("wire", "wire.versions", "API versions used: "
                                     f"Produce v{transport.produce_version}, InitProducerId v{transport.init_version}",
                                     checked=1))
    if traces:
        results.extend(run_txn_wire_audit(bootstrap, run, seed, traces))
    with socket_txn_wire(bootstrap) as wire:
        results.append(run_timeout_rule(wire, wire.transaction_version, run))
        results.extend(run_request_tv_rules(wire, run))
    return results
