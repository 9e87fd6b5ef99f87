"""The client matrix's KafkaJS and sarama columns on ``txnspec serve`` (one node and ``--nodes 3``, TV1 and TV2):
each client, with its stock settings, runs the consume-transform-produce with a zombie and a restart over an
input its idempotent producer wrote (``serve/client_harness.py``). The same harnesses on Kafka 4.4 give the same
RESULT (tests/serve/test_serve_vs_kafka.py). A client's registry out of reach is a printed skip; so is a
feature the client documents it lacks (KafkaJS and KIP-447), never a pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from txnspec.serve.client_harness import UNSUPPORTED_PREFIX, ClientUnavailable, run_client
from txnspec.serve.server import ServerThread

Run = tuple[dict[str, Any], dict[str, int]]

# what each client answers a zombie's commit with: KafkaJS names INVALID_PRODUCER_EPOCH (EndTxn v1 predates
# PRODUCER_FENCED, Kafka answers the old code); sarama's EndTxn v3 gets PRODUCER_FENCED (90), which sarama
# does not name
ZOMBIE = {"kafkajs": "INVALID_PRODUCER_EPOCH", "sarama": "Unknown error, how did this happen? Error code = 90"}
# the newest versions each client sends (its own newest, negotiated with ApiVersions); both take the TV1 path
VERSIONS = {"kafkajs": {"ApiVersions": 2, "Produce": 7, "InitProducerId": 1, "AddPartitionsToTxn": 1, "EndTxn": 1,
                        "TxnOffsetCommit": 1, "Fetch": 11},
            "sarama": {"ApiVersions": 4, "Produce": 10, "InitProducerId": 4, "AddPartitionsToTxn": 3, "EndTxn": 3,
                       "TxnOffsetCommit": 3, "Fetch": 12}}


@pytest.fixture(scope="module")
def matrix() -> Callable[[str, int, int], Run]:
    done: dict[tuple[str, int, int], Run] = {}

    def get(client: str, tv: int, nodes: int) -> Run:
        if (client, tv, nodes) not in done:
            try:
                with ServerThread(transaction_version=tv, nodes=nodes) as server:
                    result = run_client(client, server.bootstrap, timeout=150)
                    served = server.call(lambda: {n: v for n, v in sorted(server.server.requests)})  # newest
            except ClientUnavailable as exc:
                pytest.skip(f"{client} unavailable: {exc}")
            done[client, tv, nodes] = (result, served)
        return done[client, tv, nodes]

    return get


# the default tier runs each client on three nodes (routing to the coordinators' and leaders' nodes), the single
# node at TV2 and TV1 with -m slow (tests/serve/test_serve_vs_kafka.py compares serve's single node with Kafka)
CASES = [pytest.param(c, tv, n, id=f"{c}-tv{tv}-nodes{n}", marks=() if n == 3 else pytest.mark.slow)
         for c in ("kafkajs", "sarama") for tv, n in ((2, 1), (1, 1), (2, 3))]


@pytest.mark.parametrize(("client", "tv", "nodes"), CASES)
def test_consume_transform_produce_with_a_zombie_and_a_restart(matrix: Callable[[str, int, int], Run], client: str,
                                                               tv: int, nodes: int) -> None:
    result, served = matrix(client, tv, nodes)
    assert result["ok"], result
    assert result["output"] == [f"V{i}" for i in range(10)]  # each input once, in order, no zombie record
    assert result["committed_offset"] == 10 and result["processed"] == 10
    assert result["zombie_commit"] == ZOMBIE[client]
    assert {api: served.get(api) for api in VERSIONS[client]} == VERSIONS[client]


@pytest.mark.parametrize(("client", "tv", "nodes"), CASES)
def test_kip447_group_metadata_of_an_older_generation_refused(matrix: Callable[[str, int, int], Run], client: str,
                                                              tv: int, nodes: int) -> None:
    result, _ = matrix(client, tv, nodes)
    stale, current = result["stale_generation_commit"], result["current_generation_commit"]
    if stale.startswith(UNSUPPORTED_PREFIX):
        assert current == stale
        pytest.skip(f"{client}: {stale}")
    assert (stale, current) == ("kafka server: The provided generation id is not the current generation", "committed")


@pytest.mark.parametrize("client", ["sarama", pytest.param("kafkajs", marks=pytest.mark.slow)])
def test_the_workload_continues_while_its_coordinators_node_is_stopped_and_started(client: str) -> None:
    """``--nodes 3``: the node that coordinates the run's transactional id and group (node 1) stops 2 s into the
    run (its coordinators move to node 2, with their state: no reload) and comes back 3 s later; the client
    re-routes (NOT_COORDINATOR, FindCoordinator) and the outcome is the single node's. (KafkaJS's reconnect
    back-off makes its run take about 40 s: ``-m slow``.)"""
    import threading
    import time

    from txnspec.serve.nodes import Nodes

    nodes = Nodes(3)
    run = next(f"n{i}" for i in range(1000)
               if nodes.txn_coordinator(f"ctp-n{i}") == 1 and nodes.group_coordinator(f"g-n{i}") == 1)
    with ServerThread(transaction_version=2, nodes=3) as server:
        moved: list[int | None] = []

        def stop_and_start() -> None:
            time.sleep(2)
            server.stop_node(1)
            moved.append(server.call(lambda: server.server.broker.nodes.txn_coordinator(f"ctp-{run}")))
            time.sleep(3)
            server.start_node(1)

        chaos = threading.Thread(target=stop_and_start)
        chaos.start()
        try:
            result = run_client(client, server.bootstrap, run=run, timeout=150)
        except ClientUnavailable as exc:
            pytest.skip(f"{client} unavailable: {exc}")
        finally:
            chaos.join()
    assert moved == [2]
    assert result["ok"], result
    assert result["output"] == [f"V{i}" for i in range(10)] and result["committed_offset"] == 10
    assert result["zombie_commit"] == ZOMBIE[client]
