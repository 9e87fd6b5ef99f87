"""A 3-node KRaft Kafka on 127.0.0.1, started by txnspec from the jars :mod:`~txnspec.audit.kafka`
resolves, for the chaos runs.

What it models
    ``n`` combined nodes (``process.roles=broker,controller``), all voters of a static quorum
    (``controller.quorum.voters``), each with a broker and a controller port on loopback. Every node's data
    directory is formatted by ``kafka.tools.StorageTool format`` with one cluster id and the feature
    ``transaction.version`` asked for. :data:`SETTINGS` are the only departures from Kafka's defaults, each
    with its reason: replication factor 3 and ``min.insync.replicas`` 2 for the internal topics and the
    workload's topics (so a node down leaves every partition writable and no acknowledged write on one
    replica only), several partitions of ``__transaction_state`` and ``__consumer_offsets`` (so transaction
    coordinators, group coordinators and partition leaders sit on different nodes), unclean leader election
    off (Kafka's default, written down because the runs depend on it), a 3 s broker session and a 500 ms
    heartbeat (Kafka's 9 s session makes a killed controller or coordinator stop commits for 13-14 s, and
    five faults in a minute then overlap), a 500 ms sweep of timed-out transactions (Kafka's 10 s would make
    the timeout fault slow to observe).

Start, restart, stop
    Each JVM runs with a small heap (:data:`HEAP`) in its own session (``setsid``: ``start_new_session``),
    so signals to the harness never reach it and it is signalled by PID (its process group). A node can be
    killed (SIGKILL), paused (SIGSTOP) and resumed (SIGCONT), and restarted on the same ports and data.
    The cluster is ready when every node answers ``ApiVersions`` with the ``transaction.version`` asked
    for and ``Metadata`` lists every broker (bounded by :data:`READY_SECONDS`). Data lives in a temporary
    directory removed afterwards; each node's log is kept in the run's folder (``node-N.log``).

Assumes
    Kafka 4.x (static voters formatted without ``--standalone``), Java 17+, free loopback ports.

Leaves out
    Separate controller and broker processes, TLS/SASL listeners, rack awareness, a TCP proxy in front of
    the nodes (network faults: not built, see docs/chaos.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnspec.audit.kafka import LOG4J2, KafkaRuntime, _tool, cluster_id, resolve
from txnspec.audit.processes import free_port, stop_process
from txnspec.audit.report import BrokerUnavailable

READY_SECONDS = 90.0
NODE_READY_SECONDS = 45.0
HEAP = "384m"
TRANSACTION_TIMEOUT_MS = 6000  # the workload's transaction.timeout.ms (a client setting, here for the docs)
ABORT_SWEEP_MS = 500

# Kafka's broker settings that differ from its defaults, in Kafka's names (reasons: the module docstring)
SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "6",
    "unclean.leader.election.enable": "false",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_SWEEP_MS),
    "num.partitions": "3",
    "auto.create.topics.enable": "false",
}


@dataclass
class Node:
    """One combined broker+controller: its id, ports, data, log, and the running JVM (None while down)."""

    node_id: int
    broker_port: int
    controller_port: int
    data: Path
    config: Path
    log: Path
    stdout: Path
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    starts: int = 0
    proxy_broker_port: int = 0  # the port it advertises when a proxy stands in front of it (0: none)
    proxy_controller_port: int = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.process.poll() is None else None

    @property
    def address(self) -> str:
        """The address clients and the other nodes use (the proxy's, when there is one)."""
        return f"127.0.0.1:{self.proxy_broker_port or self.broker_port}"

    @property
    def direct(self) -> str:
        """The node's own broker port: how the harness asks it things, past any network fault."""
        return f"127.0.0.1:{self.broker_port}"


@dataclass
class Cluster:
    """A running cluster; its nodes are started, killed, paused and resumed by PID."""

    runtime: KafkaRuntime
    transaction_version: int
    nodes: list[Node]
    log4j: Path
    start_seconds: float = 0.0
    events: list[dict[str, object]] = field(default_factory=list)
    command: Callable[[Node], list[str]] | None = None  # another broker's command line (serve); None: Kafka
    name: str = "kafka"
    proxy: Any = None  # the network-fault proxy's Control, when the nodes sit behind one
    foreign: bool = False  # a broker of its own kind (noida, tansu): ready once its Metadata names a broker

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes)

    def node(self, node_id: int) -> Node:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id}")

    def start(self, node: Node) -> None:
        if self.command is not None:
            argv = self.command(node)
        else:
            argv = [_tool("java", "install a Java 17 runtime"), f"-Xms{HEAP}", f"-Xmx{HEAP}", "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                    f"-Dkafka.logs.dir={node.log.parent}",
                    f"-Dlog4j2.configurationFile={node.log.with_suffix('.log4j2.properties')}",
                    "-cp", self.runtime.classpath_text, "kafka.Kafka", str(node.config)]
            node.log.with_suffix(".log4j2.properties").write_text(LOG4J2.format(log=node.log))
        with node.stdout.open("ab") as out:
            node.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=node.data, start_new_session=True)
        node.paused = False
        node.starts += 1

    def kill(self, node: Node) -> None:
        """SIGKILL to the node's process group (no clean shutdown), and reap it."""
        if node.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.process.wait(timeout=10)
        node.process = None
        node.paused = False

    def pause(self, node: Node) -> None:
        if node.pid is not None:
            os.killpg(node.pid, signal.SIGSTOP)
            node.paused = True

    def resume(self, node: Node) -> None:
        if node.pid is not None:
            os.killpg(node.pid, signal.SIGCONT)
        node.paused = False

    def stop_all(self) -> None:
        """SIGKILL every node at once: the data is thrown away, so a clean shutdown buys nothing."""
        for node in self.nodes:
            if node.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
        for node in self.nodes:
            if node.process is not None:
                stop_process(node.process, grace_seconds=5.0)  # reaps it (and kills it if it somehow lives)
                node.process = None

    def up(self) -> list[Node]:
        return [n for n in self.nodes if n.pid is not None and not n.paused]

    def wait_ready(self, seconds: float = READY_SECONDS, nodes: list[Node] | None = None) -> float:
        """Until each of ``nodes`` (all by default) answers with the transaction version and Metadata lists
        every broker that is up; the seconds it took."""
        from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

        from txnspec.audit.connection import BrokerConnection, WireError

        started = time.monotonic()
        deadline = started + seconds
        pending = list(nodes if nodes is not None else self.nodes)
        last = "no answer"
        while pending and time.monotonic() < deadline:
            node = pending[0]
            if node.process is None or node.process.poll() is not None:
                tail = node.log.read_text(errors="replace").strip().splitlines()[-4:] if node.log.exists() else []
                raise BrokerUnavailable(f"Kafka node {node.node_id} is not running while the cluster starts: "
                                        + " | ".join(tail))
            try:
                conn = BrokerConnection("127.0.0.1", node.broker_port, timeout=2.0)
            except (BrokerUnavailable, WireError, OSError) as exc:
                last = f"node {node.node_id}: {exc}"
                time.sleep(0.3)
                continue
            try:
                finalized = conn.features.get("transaction.version", 0)
                metadata = conn.call(MetadataRequest, MetadataResponse, 1, topics=[])
                wanted = {n.node_id for n in self.up()}
                listed = {b.node_id for b in metadata.brokers}
                if (self.foreign and listed) or (finalized == self.transaction_version and wanted <= listed):
                    pending.pop(0)
                    continue
                last = f"node {node.node_id}: transaction.version {finalized}, brokers {sorted(listed)}"
            except (WireError, OSError) as exc:
                last = f"node {node.node_id}: {exc}"
            finally:
                conn.close()
            time.sleep(0.3)
        if pending:
            raise BrokerUnavailable(f"the Kafka cluster was not ready within {seconds:.0f} s ({last})")
        return time.monotonic() - started


def node_properties(node: Node, voters: str, data: Path) -> dict[str, str]:
    return {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{node.address}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
        **SETTINGS,
    }


def _ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _format(runtime: KafkaRuntime, node: Node, cluster: str, transaction_version: int, log4j: Path) -> None:
    argv = [_tool("java", "install a Java 17 runtime"), "-Xmx256m", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", runtime.classpath_text, "kafka.tools.StorageTool",
            "format", "-t", cluster, "-c", str(node.config), "--feature", f"transaction.version={transaction_version}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise BrokerUnavailable(f"Kafka {runtime.version}'s StorageTool could not format node {node.node_id}: "
                                + " | ".join(tail))


@contextlib.contextmanager
def kafka_cluster(out: Path, version: str | None = None, transaction_version: int = 2, nodes: int = 3,
                  cache: Path | None = None, proxied: bool = False) -> Iterator[Cluster]:
    """A fresh ``nodes``-node Kafka for the block: formatted, started, ready; every JVM stopped and the data
    removed afterwards, the logs kept in ``out``. ``proxied``: every listener behind the TCP proxy of
    :mod:`.proxy` (the nodes advertise its ports, the voters are its ports), for network faults."""
    if transaction_version not in (1, 2):
        raise BrokerUnavailable(f"transaction version {transaction_version}: Kafka's transaction.version is 1 or 2")
    if not 1 <= nodes <= 5:
        raise BrokerUnavailable(f"--nodes {nodes}: between 1 and 5 nodes (every node is a voter)")
    _tool("java", "install a Java 17 runtime, e.g. apt-get install openjdk-17-jre-headless")
    runtime = resolve(version, cache)
    out.mkdir(parents=True, exist_ok=True)
    log4j = out / "kafka-tools-log4j2.properties"
    log4j.write_text(LOG4J2.format(log=out / "kafka-tools.log"))
    with tempfile.TemporaryDirectory(prefix="txnspec-chaos-data-") as tmp, contextlib.ExitStack() as stack:
        ports = _ports(4 * nodes + 1)
        members = []
        for i in range(nodes):
            data = Path(tmp) / f"node-{i + 1}"
            data.mkdir()
            members.append(Node(i + 1, ports[2 * i], ports[2 * i + 1], data, data / "server.properties",
                                out / f"node-{i + 1}.log", out / f"node-{i + 1}.stdout"))
            if proxied:
                members[-1].proxy_broker_port = ports[2 * nodes + 2 * i]
                members[-1].proxy_controller_port = ports[2 * nodes + 2 * i + 1]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.proxy_controller_port or n.controller_port}" for n in members)
        for n in members:
            n.config.write_text("".join(f"{k}={v}\n" for k, v in node_properties(n, voters, n.data / "log").items()))
        cluster = Cluster(runtime, transaction_version, members, log4j)
        if proxied:
            cluster.proxy = stack.enter_context(_proxy(members, ports[-1], out))
        started = time.monotonic()
        try:
            ident = cluster_id()
            with ThreadPoolExecutor(len(members)) as pool:  # the nodes' StorageTool JVMs at once (each one's data)
                list(pool.map(lambda n: _format(runtime, n, ident, transaction_version, log4j), members))
            for n in members:
                cluster.start(n)
            cluster.wait_ready()
            cluster.start_seconds = round(time.monotonic() - started, 2)
            yield cluster
        finally:
            cluster.stop_all()


SERVE_TOPICS = ("chaos-out:3", "chaos-in:3")


@contextlib.contextmanager
def serve_cluster(out: Path, transaction_version: int = 2, durable: bool = False) -> Iterator[Cluster]:
    """``txnspec serve`` as a one-node cluster (the reference implementation behind Kafka's protocol): in memory,
    so a restart loses every record (a broker known to break exactly-once under restart), or ``--durable``
    (its logs on disk, recovered on restart). Killed and restarted like a Kafka node."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="txnspec-chaos-serve-") as tmp:
        # serve is broker 0 in its Metadata
        node = Node(0, free_port(), 0, Path(tmp), Path(tmp) / "none", out / "node-0.log", out / "node-0.stdout")

        def command(n: Node) -> list[str]:
            argv = [sys.executable, "-c", "from txnspec.cli import main; raise SystemExit(main())", "serve",
                    "--port", str(n.broker_port), "--transaction-version", str(transaction_version),
                    "--topics", *SERVE_TOPICS]
            return argv + (["--durable", str(n.data / "logs")] if durable else [])

        cluster = Cluster(KafkaRuntime("serve", ()), transaction_version, [node], out / "none", command=command,
                          name="serve" + (" --durable" if durable else ""))
        started = time.monotonic()
        try:
            cluster.start(node)
            cluster.wait_ready(seconds=30.0)
            cluster.start_seconds = round(time.monotonic() - started, 2)
            yield cluster
        finally:
            cluster.stop_all()


FOREIGN = ("noida", "tansu")  # brokers the audit starts (audit/targets.py) that chaos restarts as one node


@contextlib.contextmanager
def foreign_cluster(out: Path, name: str) -> Iterator[Cluster]:
    """noida-db (its data directory kept across restarts) or Tansu (memory only: a restart loses everything) as a
    one-node cluster, killed and restarted like a Kafka node: brokers the audit knows, under restart faults."""
    from txnspec.audit.targets import noida_binary, tansu_binary

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"txnspec-chaos-{name}-") as tmp:
        node = Node(0, free_port(), 0, Path(tmp), Path(tmp) / "none", out / "node-0.log", out / "node-0.stdout")

        def command(n: Node) -> list[str]:
            if name == "noida":
                (n.data / "noida-data").mkdir(exist_ok=True)
                return [str(noida_binary()), "start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port",
                        str(n.broker_port), "--data-dir", str(n.data / "noida-data")]
            url = f"tcp://127.0.0.1:{n.broker_port}"
            return [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                    "--storage-engine", "memory://tansu/"]

        cluster = Cluster(KafkaRuntime(name, ()), 0, [node], out / "none", command=command, name=name, foreign=True)
        started = time.monotonic()
        try:
            cluster.start(node)
            cluster.wait_ready(seconds=30.0)
            cluster.start_seconds = round(time.monotonic() - started, 2)
            yield cluster
        finally:
            cluster.stop_all()


@contextlib.contextmanager
def _proxy(members: list[Node], control_port: int, out: Path) -> Iterator[Any]:
    """The proxy process of :mod:`.proxy` for every node's two listeners, until the block ends."""
    from txnspec.audit.chaos.proxy import Control

    routes = [{"node": n.node_id, "listen": n.proxy_broker_port, "target": n.broker_port} for n in members]
    routes += [{"node": n.node_id, "listen": n.proxy_controller_port, "target": n.controller_port} for n in members]
    config = out / "proxy.json"
    config.write_text(json.dumps({"routes": routes, "control": control_port}))
    with (out / "proxy.log").open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "txnspec.audit.chaos.proxy", str(config)],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        control = Control(control_port)
        while True:
            try:
                control.send({"heal": True})
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise BrokerUnavailable("the network-fault proxy did not start (see proxy.log)") from None
                time.sleep(0.2)
        yield control
    finally:
        stop_process(process, grace_seconds=2.0)
