"""One short chaos run on a real 3-node Kafka (marker ``kafka``, about two minutes): faults are injected, the
clients commit (the Java client's consume-transform-produce members too), the history has no anomaly and the
spec explains its partitions and both coordinators, and no JVM or client is left behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from txnspec.audit.chaos import faults, history, run

MISSING = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


@pytest.mark.kafka
def test_a_short_chaos_run_on_three_nodes_is_clean_and_explained(tmp_path: Path) -> None:
    if MISSING:
        pytest.skip(f"real Kafka needs {' and '.join(MISSING)} on PATH (Java 17 and Maven)")
    out = tmp_path / "chaos"
    # seed 6: a zombie, then a coordinator killed
    summary = run.chaos_run(None, 3, 2, 28.0, faults.DEFAULT_KINDS, 6, out)
    assert summary["nodes"] == 3 and summary["kafka"].startswith("4.")
    assert len(summary["faults_injected"]) == 2, summary["faults_injected"]
    assert summary["transactions"].get("committed", 0) >= 10, summary["transactions"]
    assert summary["anomalies"] == [], summary["anomalies"][:3]
    assert summary["validation"]["explained"], summary["validation"]
    assert summary["coordinator"]["explained"] and summary["groups"]["explained"], (summary["coordinator"],
                                                                                  summary["groups"])
    assert summary["checked"]["G0"] > 0  # ww and rt edges (no wr edges: the ctp input is not transactional)
    assert summary["validation"]["records"] >= 100
    assert run.verdict(summary) == 0
    events = history.load(out / "history.jsonl")
    assert {e.process for e in events} >= {history.NEMESIS, f"{history.NEMESIS}-clients", "producer-0#1", "ctp-0#0",
                                           "producer-2#0", "ctp-2#0", "ctp-3#0", "reader-read_committed"}
    assert (out / "node-1.log").stat().st_size > 0 and (out / "faults.json").exists()
    for spec in (out / "processes").glob("*.spec.json"):  # every client process has ended
        assert not _running(str(spec))


def _running(process: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "txnspec.audit.chaos.client" in cmdline and process in cmdline:
                return True
    return False
