"""Pytest fixtures: a ``txnspec serve`` broker on a free port of 127.0.0.1 for each test.

Import them into a ``conftest.py`` (or a test module)::

    from txnspec.serve.testing import kafka_bootstrap, kafka_bootstrap_tv1, txnspec_server  # noqa: F401

    def test_my_pipeline(kafka_bootstrap):
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": "app"})
        ...

``kafka_bootstrap`` is the ``host:port`` of a fresh in-memory broker with transaction version 2,
``kafka_bootstrap_tv1`` the same with transaction version 1; ``txnspec_server`` yields the
:class:`~txnspec.serve.server.ServerThread` itself (``.bootstrap``, ``.call(fn)`` to look at the
implementation's state on the server's thread). Each server runs on a background thread of the test process
and is stopped when the test ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from txnspec.serve.server import ServerThread


@pytest.fixture
def txnspec_server() -> Iterator[ServerThread]:
    with ServerThread(transaction_version=2) as server:
        yield server


@pytest.fixture
def kafka_bootstrap(txnspec_server: ServerThread) -> Iterator[str]:
    yield txnspec_server.bootstrap


@pytest.fixture
def kafka_bootstrap_tv1() -> Iterator[str]:
    with ServerThread(transaction_version=1) as server:
        yield server.bootstrap


__all__ = ["kafka_bootstrap", "kafka_bootstrap_tv1", "txnspec_server"]
