"""Fixtures shared across the test folders.

``real_kafka``: Apache Kafka (single node, KRaft) at a transaction version, started on first use by the
project's own starter (:func:`txnspec.audit.kafka.kafka_broker`, 127.0.0.1, bounded wait, stopped by PID) and
kept for the rest of the run: the audit's and serve's comparisons with Kafka (``tests/audit/test_audit_kafka.py``,
``tests/serve/test_serve_vs_kafka.py``) share one broker per transaction version in a worker. Tests name their
own topics, groups and transactional ids (uuid suffixes), so they do not see each other's data. Skipped, saying
why, where Java or Maven is missing.

``local_spark``: the local[2] Spark session, started on first use in a worker and kept for the worker's later
Spark tests (a test that needs another master stops it; the next user starts it again), stopped at the end.

Both JVMs start once per run, not once per module, because the modules that share one run on one worker: under
``--dist loadfile`` a custom scheduler (:class:`SharedScopeScheduling`) hands out the Spark modules as one unit
and the shared broker's modules as another (:data:`SHARED_SCOPES`).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from txnspec.audit import kafka

MISSING_FOR_KAFKA = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


@pytest.fixture(scope="session")
def real_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], kafka.RunningKafka]]:
    """Kafka at a transaction version (1 or 2), started once per worker on first use and stopped at its end."""
    if MISSING_FOR_KAFKA:
        pytest.skip(f"real Kafka needs {' and '.join(MISSING_FOR_KAFKA)} on PATH (Java 17 and Maven)")
    started: dict[int, kafka.RunningKafka] = {}
    with ExitStack() as stack:
        def get(transaction_version: int) -> kafka.RunningKafka:
            if transaction_version not in started:
                workdir = tmp_path_factory.mktemp(f"kafka-tv{transaction_version}")
                started[transaction_version] = stack.enter_context(
                    kafka.kafka_broker(workdir, None, transaction_version))
            return started[transaction_version]

        yield get


LOCAL_MASTER = "local[2]"


@pytest.fixture
def local_spark(_spark_stopped_at_end: None) -> Any:
    """The worker's local[2] Spark session (a pyspark ``SparkSession``), started if none is running."""
    from pyspark.sql import SparkSession

    from txnspec.conformance.spark_job import spark_session

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master != LOCAL_MASTER:  # e.g. local[2,4], left by a test
        active.stop()
    return spark_session(LOCAL_MASTER)


@pytest.fixture(scope="session")
def _spark_stopped_at_end() -> Iterator[None]:
    yield
    if "pyspark.sql" in sys.modules:
        active = sys.modules["pyspark.sql"].SparkSession.getActiveSession()
        if active is not None:
            active.stop()


# --- which modules run together: one unit per shared JVM --------------------------------------------------------
#
# Modules named here are handed to a worker as one unit (xdist's loadfile scope, widened), so the session-scoped
# JVM they share starts once. Within a unit they run in the order named: test_spark_retries first (its local[2,4]
# session comes before the shared local[2] one, which it then starts and leaves), test_spark last (its standalone
# cluster's test stops the shared session), so the shared session starts once.

SHARED_SCOPES: dict[str, tuple[str, ...]] = {
    "spark": ("tests/conformance/test_spark_retries.py", "tests/checker/test_spark_bfs.py",
              "tests/conformance/test_matrix.py", "tests/conformance/test_conform_report.py",
              "tests/conformance/test_spark.py"),
    "kafka": ("tests/audit/test_audit_kafka.py", "tests/serve/test_serve_vs_kafka.py",
              "tests/audit/test_audit_member_epoch.py", "tests/audit/test_audit_request_tv.py"),
}
_SCOPE_OF = {module: scope for scope, modules in SHARED_SCOPES.items() for module in modules}


def scope_of(module: str) -> str:
    """The unit a module is scheduled in: its shared scope's name, or the module itself."""
    return _SCOPE_OF.get(module, module)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which answers for every mode
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler for the other modes
    from xdist.scheduler import LoadFileScheduling

    class SharedScopeScheduling(LoadFileScheduling):  # type: ignore[misc]
        """``--dist loadfile``, with each of :data:`SHARED_SCOPES` as one unit."""

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid.split("::", 1)[0])

    return SharedScopeScheduling(config, log)


# --- the order modules run in: the longest first ---------------------------------------------------------
#
# `bash run.sh test` runs modules whole on each worker (`--dist loadfile`, a shared scope's modules as one unit)
# and hands the units out in collection order
# (`--no-loadscope-reorder`; xdist's default order is by number of tests, which puts a few long tests last).
# Ordered by their measured cost, longest first, the workers finish together (the longest-processing-time-first
# rule: the slowest worker ends at most a third above the best schedule). MODULE_COSTS.json holds each
# module's seconds as last measured: TXNSPEC_RECORD_COSTS=FILE records every test's seconds (JSON lines, one per
# test and worker) and `python tests/module_costs.py FILE` writes the table. A module the table lacks is
# estimated: a second a test, and JVM_SECONDS more if it starts a JVM (a test marked kafka or spark: the broker
# or the Spark session takes that long to start, and such modules hold few tests, so xdist's own order, by
# number of tests, hands them out last, where one of them alone keeps a worker busy while the other idles).

COSTS_FILE = Path(__file__).with_name("MODULE_COSTS.json")
JVM_SECONDS = 60.0


def _module_costs() -> dict[str, float]:
    try:
        table = json.loads(COSTS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in table.get("seconds", {}).items()}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    costs = _module_costs()
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(_module_of(item), []).append(item)

    def estimate(module: str) -> float:
        tests = by_module[module]
        jvm = any(t.get_closest_marker("kafka") or t.get_closest_marker("spark") for t in tests)
        return float(len(tests)) + (JVM_SECONDS if jvm else 0.0)

    cost = {module: costs.get(module, estimate(module)) for module in by_module}
    by_scope: dict[str, list[str]] = {}
    for module in sorted(by_module, key=lambda m: -cost[m]):
        by_scope.setdefault(scope_of(module), []).append(module)
    for scope, modules in by_scope.items():
        if scope in SHARED_SCOPES:  # the scope's own order (see SHARED_SCOPES)
            modules.sort(key=SHARED_SCOPES[scope].index)
    order = sorted(by_scope, key=lambda scope: -sum(cost[m] for m in by_scope[scope]))
    items[:] = [item for scope in order for module in by_scope[scope] for item in by_module[module]]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With TXNSPEC_RECORD_COSTS set: each test's wall and CPU seconds (its process and the children it waited
    for), setup and teardown included, appended as one JSON line."""
    path = os.environ.get("TXNSPEC_RECORD_COSTS")
    if not path:
        yield
        return
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    row = {"test": item.nodeid, "module": _module_of(item), "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
           "wall": round(time.monotonic() - wall, 3), "cpu": round(_cpu_seconds() - cpu, 3)}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def _module_of(item: pytest.Item) -> str:
    """The test's module as xdist's loadfile scope names it: its path from the root directory."""
    return item.path.relative_to(item.config.rootpath).as_posix()


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
