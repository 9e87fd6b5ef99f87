"""The fixture writer of the wire-level trace audit: each self-started broker's recorded answers, replayed by
``tests/conformance/test_audit_wire_traces.py`` through :class:`~.trace_replay.RecordedWire`."""

from __future__ import annotations

import time
from typing import Any

from txnspec.audit.socket_wire import socket_txn_wire
from txnspec.audit.wire_traces import run_txn_wire_audit


def record_fixture(path: str = "tests/audit/fixtures/wire_trace_answers.json",
                   brokers: tuple[str, ...] = ("librdkafka-mock", "noida", "tansu"), seed: int = 0,
                   traces: int = 2) -> None:
    """Start each self-started broker, replay the audit's traces against it and keep its answers (the test
    fixture of ``tests/conformance/test_audit_wire_traces.py``)."""
    import json
    import tempfile
    from pathlib import Path

    from txnspec.audit.targets import open_target

    out: dict[str, Any] = {}
    for broker in brokers:
        with tempfile.TemporaryDirectory() as workdir, open_target(broker, Path(workdir)) as target:
            calls: list[list[Any]] = []
            run_txn_wire_audit(target.bootstrap, f"fixture-{int(time.time())}", seed, traces, record=calls)
            with socket_txn_wire(target.bootstrap) as wire:
                variant = "current" if wire.transaction_version >= 2 else "tv1"
                require_stable = wire.versions["OffsetFetch"] >= 7
            out[broker] = {"variant": variant, "require_stable": require_stable, "seed": seed, "traces": traces,
                           "calls": calls}
    Path(path).write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
