"""Fixtures shared across the test folders.

``real_kafka``: Apache Kafka (single node, KRaft) at a transaction version, started on first use by the
project's own starter (:func:`txnspec.audit.kafka.kafka_broker`, 127.0.0.1, bounded wait, stopped by PID) and
kept for the rest of the run: the audit's and serve's comparisons with Kafka (``tests/audit/test_audit_kafka.py``,
``tests/serve/test_serve_vs_kafka.py``) share one broker per transaction version in a worker. Tests name their
own topics, groups and transactional ids (uuid suffixes), so they do not see each other's data. Skipped, saying
why, where Java or Maven is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack

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
