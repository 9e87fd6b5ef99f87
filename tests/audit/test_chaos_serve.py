"""The chaos run can fail: ``txnspec serve`` in memory loses every record when the nemesis kills and restarts it,
and the anomaly checker says so (lost writes, offsets that disagree); with ``--durable`` the same schedule leaves
a clean, explained history. No Kafka needed: serve is txnspec's own broker, one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnspec.audit.chaos import run


# the durable run with -m slow: the default tier's clean, explained chaos run is Kafka's (test_chaos_kafka.py) and
# serve's durability across restarts is tests/serve/test_serve_durable.py's
@pytest.mark.parametrize("broker", ["serve", pytest.param("serve:durable", marks=pytest.mark.slow)])
def test_a_restart_of_serve_loses_everything_in_memory_and_nothing_durable(tmp_path: Path, broker: str) -> None:
    summary = run.chaos_run(None, 1, 2, 16.0, ("kill",), 1, tmp_path / broker, broker=broker)
    assert len(summary["faults_injected"]) == 1 and summary["faults_injected"][0].startswith("t+")
    assert summary["transactions"].get("committed", 0) >= 5
    if broker == "serve":
        assert {"lost_write", "inconsistent_offsets"} <= set(summary["anomaly_counts"]), summary["anomaly_counts"]
        assert run.verdict(summary) == 1
    else:
        assert summary["anomalies"] == [], summary["anomalies"][:3]
        assert summary["validation"]["explained"]
        assert run.verdict(summary) == 0
