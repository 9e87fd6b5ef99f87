"""The Cluster oracle end to end: transactions, zombies, and faults injected on the explicit network."""

from __future__ import annotations

import pytest

from txnspec.impl.broker import BrokerConfig
from txnspec.impl.client_states import State
from txnspec.impl.cluster import Cluster
from txnspec.impl.errors import Errors, KafkaException, ProducerFencedException, TimeoutException
from txnspec.impl.network import named
from txnspec.impl.testing import cluster, cluster_tv1  # noqa: F401 — the fixtures users import

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

TVS = [1, 2]


def values(c: Cluster, partition: str, isolation: str = "READ_COMMITTED") -> list[str]:
    return [str(r.value) for r in c.read(partition, isolation)]


@pytest.mark.parametrize("tv", TVS)
def test_commit_and_abort_are_seen_only_at_read_committed(tv: int) -> None:
    c = Cluster(transaction_version=tv)
    p = c.producer("app")
    p.init_transactions()
    p.begin_transaction()
    p.send("out-0", "kept")
    p.commit_transaction()
    p.begin_transaction()
    p.send("out-0", "dropped")
    p.flush()  # abort_transaction does not flush: unsent records would simply be discarded
    p.abort_transaction()
    assert values(c, "out-0") == ["kept"]
    assert values(c, "out-0", "READ_UNCOMMITTED") == ["kept", "dropped"]


def test_fixture_gives_a_fresh_cluster(cluster: Cluster) -> None:  # noqa: F811
    assert cluster.broker.partitions.keys() >= {"__transaction_state-0"} and cluster.now_ms == 0


def test_consume_transform_produce_commits_offsets_atomically(cluster_tv1: Cluster) -> None:  # noqa: F811
    c = cluster_tv1
    c.produce_plain("in-0", ["x", "y"])
    p = c.producer("etl")
    p.init_transactions()
    consumer = c.consumer(group_id="g", isolation="READ_COMMITTED")
    consumer.assign(["in-0"])
    p.begin_transaction()
    for r in consumer.poll():
        p.send("out-0", str(r.value) * 2)
    p.send_offsets_to_transaction({"in-0": consumer.position("in-0")}, "g")
    p.abort_transaction()
    assert c.committed_offsets("g", ["in-0"]) == {} and values(c, "out-0") == []
    p.begin_transaction()
    p.send("out-0", "xx")
    p.send_offsets_to_transaction({"in-0": 2}, "g")
    p.commit_transaction()
    assert c.committed_offsets("g", ["in-0"]) == {"in-0": 2} and values(c, "out-0") == ["xx"]


def test_a_new_instance_fences_the_zombie_and_aborts_its_transaction(cluster: Cluster) -> None:  # noqa: F811
    old = cluster.producer("app")
    old.init_transactions()
    old.begin_transaction()
    old.send("out-0", "zombie-data")
    old.flush()
    new = cluster.producer("app")
    new.init_transactions()
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, old.producer_epoch + 2)
    with pytest.raises(KafkaException):
        old.commit_transaction()
    with pytest.raises(ProducerFencedException):
        old.abort_transaction()
    assert old.state is State.FATAL_ERROR
    assert values(cluster, "out-0") == []


def test_a_duplicated_produce_request_is_written_once(cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app")
    p.init_transactions()
    cluster.network.duplicate_next(named("Produce"))
    p.begin_transaction()
    p.send("out-0", "once")
    p.commit_transaction()
    assert values(cluster, "out-0") == ["once"]


def test_a_lost_end_txn_response_is_retried_and_answered_as_a_retry(cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app")
    p.init_transactions()
    p.begin_transaction()
    p.send("out-0", "v")
    cluster.network.drop_next(lambda m: m.name == "EndTxn" and m.kind == "response")
    p.commit_transaction()
    assert values(cluster, "out-0") == ["v"] and p.state is State.READY


def test_held_markers_keep_the_lso_until_released(cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app")
    p.init_transactions()
    cluster.network.hold(named("TxnMarker"))
    p.begin_transaction()
    p.send("out-0", "v")
    p.commit_transaction()  # the client is answered before markers are written
    part = cluster.broker.partition("out-0")
    assert part.last_stable_offset == 0 and cluster.transaction_state("app") == "PrepareCommit"
    cluster.network.release()
    assert values(cluster, "out-0") == ["v"] and cluster.transaction_state("app") == "CompleteCommit"


def test_coordinator_failover_completes_a_prepared_commit(cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app")
    p.init_transactions()
    cluster.network.hold(named("TxnMarker"))
    p.begin_transaction()
    p.send("out-0", "v")
    p.commit_transaction()
    cluster.crash_coordinator()
    cluster.network.release()
    cluster.restart_coordinator()
    assert values(cluster, "out-0") == ["v"] and cluster.transaction_state("app") == "CompleteCommit"


def test_an_abandoned_transaction_times_out(cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app", txn_timeout_ms=1000)
    p.init_transactions()
    p.begin_transaction()
    p.send("out-0", "v")
    p.flush()
    cluster.crash_producer(p)
    cluster.advance(1001)
    assert cluster.transaction_state("app") == "CompleteAbort"
    assert cluster.broker.partition("out-0").last_stable_offset == cluster.broker.partition("out-0").high_watermark


def test_a_call_that_cannot_complete_times_out_and_must_be_retried(cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app")
    cluster.network.hold(named("InitProducerId"))
    with pytest.raises(TimeoutException):
        p.init_transactions()
    cluster.network.release()
    p.init_transactions()  # the same call again returns the cached result
    assert p.state is State.READY


def test_reordered_delivery_of_two_produce_batches_is_resolved_by_sequence_numbers(
        cluster: Cluster) -> None:  # noqa: F811
    p = cluster.producer("app")
    p.init_transactions()
    p.begin_transaction()
    p.send("out-0", "a")
    cluster.step()  # first batch goes out
    p.send("out-0", "b")
    cluster.network.hold(named("Produce"))
    cluster.step()
    first, second = cluster.network.pending(named("Produce"))
    cluster.network.release()
    cluster.deliver(second)  # out of order: rejected, retried after the first
    cluster.deliver(first)
    p.commit_transaction()
    assert values(cluster, "out-0") == ["a", "b"]


def test_a_lost_request_is_retried_only_when_it_times_out() -> None:
    c = Cluster()
    p = c.producer("t1")
    p.producer.init_transactions()
    c.run(until=lambda: bool(c.network.pending(named("InitProducerId"))))  # the coordinator lookup first
    (init,) = c.network.pending(named("InitProducerId"))
    c.network.lose(init)
    c._dispatch()
    assert c.network.pending(named("InitProducerId")) == []  # nobody knows yet
    c.time_out(init)
    c._dispatch()
    assert [m.name for m in c.network.messages] == ["FindCoordinator"]  # the client looks the coordinator up again
    c.run(until=lambda: bool(c.network.pending(named("InitProducerId"))))
    assert len(c.network.pending(named("InitProducerId"))) == 1


def test_a_failed_transaction_log_append_answers_coordinator_not_available_and_keeps_the_state() -> None:
    c = Cluster()
    p = c.producer("t1")
    p.init_transactions()
    log = c.broker.txn_coordinator.txn_manager.partition_for("t1")
    end = log.log_end_offset
    p.begin_transaction()
    p.send("out-0", "v")
    log.refuse_next_append(Errors.NOT_ENOUGH_REPLICAS)
    p.commit_transaction()  # the client retries COORDINATOR_NOT_AVAILABLE; the second append succeeds
    c.run()
    assert c.transaction_state("t1") == "CompleteCommit" and log.log_end_offset > end
    assert values(c, "out-0") == ["v"]


@pytest.mark.parametrize(("max_producer_epoch", "rotated_after"), [(4, 3), (6, 5)])
def test_an_exhausted_epoch_rotates_the_producer_id_at_the_configured_bound(max_producer_epoch: int,
                                                                            rotated_after: int) -> None:
    """TV2 bumps the epoch at every EndTxn; at ``max - 1`` (Kafka: Short.MAX_VALUE - 1) the coordinator hands
    out a new producer id at epoch 0 instead (TransactionCoordinator.handleEndTransaction, KIP-890)."""
    c = Cluster(transaction_version=2, config=BrokerConfig(max_producer_epoch=max_producer_epoch))
    p = c.producer("app")
    p.init_transactions()
    first = p.producer_id
    seen = []
    for i in range(rotated_after + 1):
        p.begin_transaction()
        p.send("out-0", f"r{i}")
        p.commit_transaction()
        seen.append((p.producer_id == first, p.producer_epoch))
    assert seen[-2:] == [(True, rotated_after), (False, 0)]
    assert values(c, "out-0") == [f"r{i}" for i in range(rotated_after + 1)]


def test_the_default_epoch_bound_is_short_max() -> None:
    c = Cluster(transaction_version=2)
    p = c.producer("app")
    p.init_transactions()
    first = p.producer_id
    for _ in range(6):
        p.begin_transaction()
        p.send("out-0", "r")
        p.commit_transaction()
    assert (p.producer_id, p.producer_epoch) == (first, 6)


@pytest.mark.parametrize("bound", [1, 0, -3, 32_768])
def test_an_impossible_epoch_bound_is_refused_by_name(bound: int) -> None:
    with pytest.raises(ValueError, match="max_producer_epoch must be 2 to 32767"):
        Cluster(config=BrokerConfig(max_producer_epoch=bound))
