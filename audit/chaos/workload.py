"""The chaos run: the workload's client processes on a cluster, the fault schedule injected while they run, the
final reads after healing, and one merged history.

What it models
    :data:`SHAPE` transactional producers (``producer-N``, ``transactional.id`` ``chaos-pN``; the last of them with
    Kafka's Java client of the version under test, ``java/ChaosProducer.java``, when a JDK is there), consume-transform-
    produce members (``ctp-N``, ``transactional.id`` ``chaos-cN``): two librdkafka members in group ``chaos-group``
    and, with a JDK, two Java-client members (``java/ChaosCtp.java``) in group ``chaos-jgroup`` over the same
    input, an idempotent input writer and a read_committed poller, each a process of its own, from the start to
    ``seconds``. A producer or ctp process that ends early (fenced, killed, gave up) is replaced by a new instance
    of the same ``transactional.id`` while time remains. The faults of :mod:`.faults` are injected at their times by
    the ``nemesis`` (recorded in the history); node faults wait until every node is back and ready, so at
    most one node is ever down. After the workload the cluster heals (every node up and ready), the run
    waits until no partition holds an open transaction (at most ``transaction.timeout.ms`` plus the abort sweep),
    and a read_committed and a read_uncommitted reader read every partition to its end, with the groups'
    committed offsets.

Assumes
    The cluster of :mod:`.cluster` (``bootstrap`` lists every node); processes are started in their own
    session and signalled by PID.

Leaves out
    Mixed-client groups (librdkafka's and the Java client's members each have a group of their own), the
    ``client`` fault on a consume-transform-produce member (it kills and zombies producers; ``member`` stops
    members of both groups); a transaction open at the end with no record in any partition is not waited for
    (its markers land after the readers' ends).

Long because :class:`Run` is one supervisor: it spawns, replaces, faults and heals the same processes, and
each fault's injection reads the slots it keeps; the cluster, the faults and the clients are modules of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnspec.audit.chaos import history as hist
from txnspec.audit.chaos.cluster import ABORT_SWEEP_MS, TRANSACTION_TIMEOUT_MS, Cluster
from txnspec.audit.chaos.faults import DELAY_MS, Fault, find_role

SHAPE = {"producers": 2, "java_producers": 1, "ctp": 2, "java_ctp": 2, "output_partitions": 3, "input_partitions": 3,
         "input_rate": 15}
JAVA_DIR = Path(__file__).resolve().parent / "java"
JAVA_SOURCES = (JAVA_DIR / "ChaosClient.java", JAVA_DIR / "ChaosProducer.java", JAVA_DIR / "ChaosCtp.java")
JAVA_HEAP = "96m"
OUTPUT, INPUT, GROUP = "chaos-out", "chaos-in", "chaos-group"
JAVA_GROUP = "chaos-jgroup"  # the Java members' own group: the same input, consumed and transformed a second time
JOIN_SECONDS = 30.0
NEMESIS_JOIN_SECONDS = 90.0
NODE_FAULTS = ("kill", "pause", "network")
READ_SECONDS = 30.0


@dataclass
class Slot:
    """A client role that is kept running: its processes (the newest last)."""

    name: str
    role: str
    tid: str | None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    last_start: float = 0.0

    @property
    def current(self) -> subprocess.Popen[bytes] | None:
        return self.processes[-1] if self.processes and self.processes[-1].poll() is None else None


class Run:
    """One chaos run's processes and files."""

    def __init__(self, cluster: Cluster, out: Path, seed: int, seconds: float,
                 say: Callable[[str], None] = lambda text: None, java: list[str] | None = None) -> None:
        self.java = java  # the java command with the classpath (ChaosProducer, ChaosCtp), or None: no Java client
        self.cluster, self.out, self.seed, self.seconds, self.say = cluster, out, seed, seconds, say
        self.hist_dir = out / "processes"
        self.hist_dir.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.deadline = self.started + seconds
        self.rng = random.Random(seed)
        self.slots: dict[str, Slot] = {}
        from txnspec.audit.chaos.client import Log

        self.nemesis = Log(self.hist_dir / "nemesis.jsonl", hist.NEMESIS)
        self.nemesis_clients = Log(self.hist_dir / "nemesis-clients.jsonl", hist.NEMESIS_CLIENTS)
        self.spawned = 0
        self.lock = threading.Lock()  # the nemesis thread and the supervisor both start instances

    # --- processes ---
    def spawn(self, process: str, role: str, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
        self.spawned += 1
        spec = {"bootstrap": self.cluster.bootstrap, "process": process, "seed": self.rng.randrange(1 << 30),
                "log": str(self.hist_dir / f"{process}.jsonl"), "deadline": self.deadline,
                "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS, **spec}
        path = self.hist_dir / f"{process}.spec.json"
        path.write_text(json.dumps(spec))
        with (self.hist_dir / f"{process}.stderr").open("ab") as err:
            return subprocess.Popen([sys.executable, "-m", "txnspec.audit.chaos.client", role, str(path)],
                                    stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    def start_java(self, slot: Slot, process: str, instance: int) -> subprocess.Popen[bytes]:
        assert self.java is not None and slot.tid is not None
        self.spawned += 1
        if slot.role == "jctp":
            argv = [*self.java, "ChaosCtp", self.cluster.bootstrap, slot.tid, str(instance), INPUT, OUTPUT,
                    str(SHAPE["output_partitions"]), JAVA_GROUP, str(self.rng.randrange(1 << 30)), repr(self.deadline),
                    str(TRANSACTION_TIMEOUT_MS), process, str(self.hist_dir / f"{process}.jsonl")]
        else:
            argv = [*self.java, "ChaosProducer", self.cluster.bootstrap, slot.tid, str(instance), OUTPUT,
                    str(SHAPE["output_partitions"]), str(self.rng.randrange(1 << 30)), repr(self.deadline),
                    str(TRANSACTION_TIMEOUT_MS), str(self.stall_file(slot)), process,
                    str(self.hist_dir / f"{process}.jsonl")]
        (self.hist_dir / f"{process}.argv.json").write_text(json.dumps(argv))
        with (self.hist_dir / f"{process}.stderr").open("ab") as err:
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    def stall_file(self, slot: Slot) -> Path:
        return self.hist_dir / f"{slot.name}.stall"

    def start_instance(self, slot: Slot) -> None:
        instance = len(slot.processes)
        process = f"{slot.name}#{instance}"
        if slot.role in ("jproducer", "jctp"):
            slot.processes.append(self.start_java(slot, process, instance))
            slot.last_start = time.monotonic()
            return
        if slot.role == "producer":
            spec = {"tid": slot.tid, "instance": instance, "topic": OUTPUT, "partitions": SHAPE["output_partitions"]}
        elif slot.role == "ctp":
            spec = {"tid": slot.tid, "instance": instance, "topic": OUTPUT, "partitions": SHAPE["output_partitions"],
                    "input": INPUT, "group": GROUP}
        elif slot.role == "input":
            spec = {"topic": INPUT, "partitions": SHAPE["input_partitions"], "rate": SHAPE["input_rate"]}
        else:
            spec = {"topic": OUTPUT, "partitions": SHAPE["output_partitions"], "group": "chaos-poller"}
        slot.processes.append(self.spawn(process, slot.role, spec))
        slot.last_start = time.monotonic()

    def start_clients(self) -> None:
        for i in range(SHAPE["producers"]):
            self.slots[f"producer-{i}"] = Slot(f"producer-{i}", "producer", f"chaos-p{i}")
        for i in range(SHAPE["producers"], SHAPE["producers"] + (SHAPE["java_producers"] if self.java else 0)):
            self.slots[f"producer-{i}"] = Slot(f"producer-{i}", "jproducer", f"chaos-p{i}")
        for i in range(SHAPE["ctp"]):
            self.slots[f"ctp-{i}"] = Slot(f"ctp-{i}", "ctp", f"chaos-c{i}")
        for i in range(SHAPE["ctp"], SHAPE["ctp"] + (SHAPE["java_ctp"] if self.java else 0)):
            self.slots[f"ctp-{i}"] = Slot(f"ctp-{i}", "jctp", f"chaos-c{i}")
        self.slots["input"] = Slot("input", "input", None)
        self.slots["poller"] = Slot("poller", "poller", None)
        for slot in self.slots.values():
            self.start_instance(slot)

    def supervise(self) -> None:
        """Replace a producer or ctp process that ended while time remains (a new instance, same id)."""
        if time.monotonic() > self.deadline - 3:
            return
        with self.lock:
            self._supervise()

    def _supervise(self) -> None:
        for slot in self.slots.values():
            # at most one new instance a slot every 2 s: a client that cannot start does not spin
            if slot.role in ("producer", "jproducer", "ctp", "jctp") and slot.current is None \
                    and time.monotonic() - slot.last_start > 2:
                self.start_instance(slot)

    def join(self) -> None:
        end = time.monotonic() + JOIN_SECONDS
        for slot in self.slots.values():
            for p in slot.processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=max(0.1, end - time.monotonic()))
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=5)

    # --- faults ---
    def inject(self, fault: Fault) -> None:
        value: dict[str, Any] = {"fault": fault.describe(), "target": fault.target}
        log = self.nemesis if fault.kind in NODE_FAULTS else self.nemesis_clients
        call = log.invoke(fault.kind, value)
        try:
            result = self._inject(fault)
            log.done(call, "ok", fault.kind, result)
            self.say(f"fault {fault.describe()}: {result}")
        except Exception as exc:  # a fault that could not be injected is recorded, never fatal to the run
            log.done(call, "fail", fault.kind, {}, f"{type(exc).__name__}: {exc}")
            self.say(f"fault {fault.describe()}: not injected ({exc})")

    def _inject(self, fault: Fault) -> dict[str, Any]:
        cluster = self.cluster
        if fault.kind in NODE_FAULTS:
            waited = cluster.wait_ready(seconds=60.0)  # at most one node down: the last fault has healed
            tid = self.slots["producer-0"].tid or "chaos-p0"
            node_id, how = find_role([(n.node_id, n.direct) for n in cluster.up()], fault.target, tid, OUTPUT)
            if node_id is None or node_id not in {n.node_id for n in cluster.nodes}:  # a broker naming itself apart
                node_id, how = self.rng.choice(cluster.up()).node_id, f"role not found ({how}); a random node"
            node = cluster.node(node_id)
            if fault.kind == "network":
                if cluster.proxy is None:
                    raise RuntimeError("network faults need the nodes behind the proxy")
                command = {"cut": node_id} if fault.action == "cut" else {"delay": node_id, "ms": DELAY_MS}
                cluster.proxy.send(command)
                time.sleep(fault.duration)
                cluster.proxy.send({"heal": True})
                return {"node": node_id, "how": how, "network": command, "waited_for_healthy": round(waited, 2)}
            if fault.kind == "kill":
                # the restarted node catches up while the next faults go on; the next node fault waits for it
                cluster.kill(node)
                time.sleep(fault.duration)
                cluster.start(node)
                return {"node": node_id, "how": how, "waited_for_healthy": round(waited, 2)}
            cluster.pause(node)
            time.sleep(fault.duration)
            cluster.resume(node)
            return {"node": node_id, "how": how, "waited_for_healthy": round(waited, 2)}
        if fault.target not in self.slots:
            raise RuntimeError(f"{fault.target} is not a client of this run (no Java producer without javac)")
        with self.lock:
            return self._client_fault(fault)

    def _client_fault(self, fault: Fault) -> dict[str, Any]:
        slot = self.slots[fault.target]
        current = slot.current
        if current is None:  # between instances: start the next one and let it initialise first
            self.start_instance(slot)
            time.sleep(2.0)
            current = slot.current
        if current is None:
            raise RuntimeError(f"{fault.target} has no running process")
        if fault.kind == "member":
            name = f"{slot.name}#{len(slot.processes) - 1}"
            os.killpg(current.pid, signal.SIGSTOP)
            try:
                time.sleep(fault.duration)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(current.pid, signal.SIGCONT)
            return {"stopped": name, "seconds": fault.duration}
        if fault.kind == "timeout":
            if slot.role == "jproducer":  # the JVM keeps SIGUSR1 for itself: a file asks for the stall
                self.stall_file(slot).touch()
            else:
                os.kill(current.pid, signal.SIGUSR1)
            return {"process": f"{slot.name}#{len(slot.processes) - 1}"}
        if fault.action == "kill":
            os.killpg(current.pid, signal.SIGKILL)
            current.wait(timeout=5)
            killed = f"{slot.name}#{len(slot.processes) - 1}"
            self.start_instance(slot)
            return {"killed": killed, "successor": f"{slot.name}#{len(slot.processes) - 1}"}
        zombie = f"{slot.name}#{len(slot.processes) - 1}"
        self.start_instance(slot)  # the old instance keeps running: a zombie once the new one initialises
        return {"zombie": zombie, "successor": f"{slot.name}#{len(slot.processes) - 1}"}

    # --- the end ---
    def heal(self) -> float:
        if self.cluster.proxy is not None:
            self.cluster.proxy.send({"heal": True})
        for node in self.cluster.nodes:
            if node.paused:
                self.cluster.resume(node)
            if node.pid is None:
                self.cluster.start(node)
        return float(self.cluster.wait_ready(seconds=60.0))

    def final_reads(self) -> None:
        topics = {OUTPUT: SHAPE["output_partitions"], INPUT: SHAPE["input_partitions"]}
        readers = []
        for isolation in ("read_committed", "read_uncommitted"):
            readers.append(self.spawn(f"reader-{isolation}", "reader", {
                "deadline": time.monotonic() + READ_SECONDS + 10,
                "isolation": isolation, "topics": topics, "seconds": READ_SECONDS, "input": INPUT,
                "input_partitions": SHAPE["input_partitions"],
                "groups": [GROUP] + ([JAVA_GROUP] if self.java else []) if isolation == "read_committed" else []}))
        for p in readers:
            try:
                p.wait(timeout=READ_SECONDS + 30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)

    def history(self) -> list[hist.Event]:
        streams = [list(hist.read_lines(path)) for path in sorted(self.hist_dir.glob("*.jsonl"))]
        merged: list[hist.Event] = hist.merge(streams, self.started)
        return merged


def create_topics(bootstrap: str, replicas: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from txnspec.audit.report import BrokerUnavailable

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    isr = {"min.insync.replicas": "2"} if replicas >= 3 else {}
    topics = [NewTopic(OUTPUT, SHAPE["output_partitions"], replicas, config=isr),
              NewTopic(INPUT, SHAPE["input_partitions"], replicas, config=isr)]
    for name, future in admin.create_topics(topics, operation_timeout=20).items():
        try:
            future.result(30)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):  # a one-node broker creates them at its start
                raise BrokerUnavailable(f"could not create topic {name}: {exc}") from None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every partition has a leader before the clients start
        meta = admin.list_topics(timeout=5)
        ready = all(t in meta.topics and all(p.leader >= 0 for p in meta.topics[t].partitions.values())
                    and len(meta.topics[t].partitions) == n
                    for t, n in ((OUTPUT, SHAPE["output_partitions"]), (INPUT, SHAPE["input_partitions"])))
        if ready:
            return
        time.sleep(0.5)
    raise BrokerUnavailable("the workload's topics had no leaders within 30 s")


def wait_for_open_transactions(bootstrap: str, seconds: float) -> float:
    """Until no partition holds an open transaction (each one's last stable offset, read_committed's ListOffsets,
    is its high watermark): a killed client's transaction ends when its timeout and the coordinator's abort sweep
    have passed, at most ``seconds`` after healing; the time waited."""
    from confluent_kafka import Consumer, TopicPartition

    started = time.monotonic()
    ends = {iso: Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-settle-{iso}", "log_level": 0,
                           "isolation.level": iso}) for iso in ("read_committed", "read_uncommitted")}
    tps = [TopicPartition(t, p) for t, n in ((OUTPUT, SHAPE["output_partitions"]), (INPUT, SHAPE["input_partitions"]))
           for p in range(n)]
    try:
        while time.monotonic() - started < seconds:
            with contextlib.suppress(Exception):  # a broker still electing leaders: asked again
                if all(len({c.get_watermark_offsets(tp, timeout=2, cached=False)[1] for c in ends.values()}) == 1
                       for tp in tps):
                    break
            time.sleep(0.2)
    finally:
        for c in ends.values():
            c.close()
    return time.monotonic() - started


def java_command(cluster: Cluster) -> tuple[list[str] | None, str]:
    """The java command (the class to run follows) with the Kafka under test's own client jars (compiled once into the
    cache), or None and why not (no javac, or a broker that is not Kafka)."""
    import shutil

    if not cluster.runtime.classpath:
        return None, "not Kafka: no client jars"
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        return None, "no javac (a JDK is needed for the Java producer)"
    classes = Path.home() / ".cache" / "txnspec" / f"chaos-classes-{cluster.runtime.version}"
    stale = [src for src in JAVA_SOURCES if not (classes / f"{src.stem}.class").is_file()
             or (classes / f"{src.stem}.class").stat().st_mtime < src.stat().st_mtime]
    if stale:
        classes.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([javac, "-nowarn", "-cp", cluster.runtime.classpath_text, "-d", str(classes),
                               *map(str, JAVA_SOURCES)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return None, f"javac failed: {done.stderr[-300:]}"
    return [java, f"-Xmx{JAVA_HEAP}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dlog4j2.level=error", "-cp", f"{cluster.runtime.classpath_text}{os.pathsep}{classes}"], \
        f"Java client {cluster.runtime.version}"


def run(cluster: Cluster, out: Path, faults: list[Fault], seed: int, seconds: float,
        say: Callable[[str], None] = lambda text: None) -> tuple[list[hist.Event], dict[str, Any]]:
    """The workload with ``faults`` on ``cluster``; the merged history and facts about the run."""
    create_topics(cluster.bootstrap, min(3, len(cluster.nodes)))
    java, java_note = java_command(cluster)
    run_ = Run(cluster, out, seed, seconds, say, java)
    facts: dict[str, Any] = {"shape": SHAPE, "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
                             "java_producer": java_note}
    queues = [sorted((f for f in faults if f.kind in NODE_FAULTS), key=lambda f: f.at),
              sorted((f for f in faults if f.kind not in NODE_FAULTS), key=lambda f: f.at)]

    def nemesis(pending: list[Fault]) -> None:
        """Faults one after another at their times, in a thread of their own: a node restart that takes 20 s
        never stops the supervisor from replacing a client, and node faults (which wait until every node is
        healthy) never delay the client faults, which have a thread of their own."""
        while pending and time.monotonic() < run_.deadline:
            wait = run_.started + pending[0].at - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, 0.2))
                continue
            run_.inject(pending.pop(0))

    injectors = [threading.Thread(target=nemesis, args=(q,), name=f"chaos-nemesis-{i}", daemon=True)
                 for i, q in enumerate(queues)]
    try:
        run_.start_clients()
        for injector in injectors:
            injector.start()
        while time.monotonic() < run_.deadline:
            run_.supervise()
            time.sleep(0.2)
        for injector in injectors:  # a fault under way ends (a node restart is waited for)
            injector.join(timeout=NEMESIS_JOIN_SECONDS)
        facts["faults_not_reached"] = [f.describe() for q in queues for f in q]
        run_.join()
        facts["heal_seconds"] = round(run_.heal(), 2)
        facts["open_transactions_seconds"] = round(wait_for_open_transactions(
            cluster.bootstrap, (TRANSACTION_TIMEOUT_MS + 2 * ABORT_SWEEP_MS) / 1000 + 2), 2)
        run_.final_reads()
    finally:
        run_.join()
    facts["processes"] = run_.spawned
    return run_.history(), facts
