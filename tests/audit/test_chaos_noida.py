"""A broker known to break exactly-once under restart, caught: noida-db (the audit's pinned 0.2.2, one node, its
data directory kept) killed and restarted once by the nemesis loses acknowledged records and hands out offsets
that disagree; the anomaly checker reports both and the run exits 1. (``txnspec serve --durable`` under the same
kind of fault is clean: tests/audit/test_chaos_serve.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from txnspec.audit.chaos import run
from txnspec.audit.report import BrokerUnavailable


@pytest.mark.slow  # about 35 s; the default tier's chaos run that must fail is serve's in memory (test_chaos_serve)
def test_noida_loses_acknowledged_writes_across_a_restart(tmp_path: Path) -> None:
    try:
        summary = run.chaos_run(None, 1, 2, 20.0, ("kill",), 1, tmp_path / "noida", broker="noida")
    except BrokerUnavailable as exc:
        pytest.skip(f"noida-db cannot run here: {exc}")
    assert summary["faults_injected"] == ["t+  6.3s kill coordinator for 2.2s"]
    assert summary["transactions"].get("committed", 0) >= 20
    assert {"lost_write", "inconsistent_offsets"} <= set(summary["anomaly_counts"]), summary["anomaly_counts"]
    lost = next(a for a in summary["anomalies"] if a["kind"] == "lost_write")
    assert "is not in the final read_committed read" in lost["detail"]
    assert {w["f"] for w in lost["witness"]} >= {"send", "read"}
    assert run.verdict(summary) == 1
