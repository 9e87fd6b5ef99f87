"""Pytest fixtures for using the implementation as an oracle in your own tests.

Import them into a ``conftest.py`` (or a test module)::

    from txnspec.impl.testing import cluster, cluster_tv1, durable_cluster  # noqa: F401

    def test_my_pipeline(cluster):
        p = cluster.producer("my-app")
        p.init_transactions()
        ...

``cluster`` is a fresh in-memory :class:`~txnspec.impl.cluster.Cluster` with transaction version 2;
``cluster_tv1`` the same with transaction version 1 (clients send AddPartitionsToTxn / AddOffsetsToTxn);
``durable_cluster`` keeps its logs in a temporary directory (restart it with :func:`restart`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from txnspec.impl.cluster import Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    yield Cluster(transaction_version=2)


@pytest.fixture
def cluster_tv1() -> Iterator[Cluster]:
    yield Cluster(transaction_version=1)


@pytest.fixture
def durable_cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield Cluster(transaction_version=2, data_dir=str(tmp_path / "kafka"))


def restart(cluster: Cluster) -> Cluster:
    """A new cluster on the same data directory (a broker restart: recovery runs), clock carried over. The old
    one is shut down cleanly (flushed, checkpointed, its files closed) and must not be used after."""
    if cluster.data_dir is None:
        raise ValueError("only a durable cluster (data_dir=...) can be restarted")
    cluster.close()
    return Cluster(transaction_version=cluster.config.transaction_version, data_dir=cluster.data_dir,
                   config=cluster.config, now_ms=cluster.now_ms, fsync=cluster.fsync)


__all__ = ["cluster", "cluster_tv1", "durable_cluster", "restart"]
