"""Real Apache Kafka, resolved from Maven Central and started by txnspec on 127.0.0.1 as a single KRaft node.

``txnspec audit --broker kafka[:VERSION] [--transaction-version 1|2]`` runs the audit against Kafka itself:

Resolution
    Maven resolves ``org.apache.kafka:kafka_2.13`` (with ``log4j-slf4j-impl``, which Kafka's distribution
    ships beside it for logging) into a cache outside the repository: ``~/.cache/txnspec/kafka`` unless
    ``TXNSPEC_KAFKA_CACHE`` or ``--kafka-cache`` says otherwise. The jars live in that cache's own Maven
    repository (``m2/``); ``VERSION/classpath.txt`` remembers the class path, so a later start needs no
    Maven at all. Without a version, the newest 4.x Maven resolves (the range ``[4.0.0,5.0.0)``) is used and
    remembered for a day (``latest.txt``).

Start
    ``kafka.tools.StorageTool format --standalone`` formats a fresh data directory with the feature
    ``transaction.version`` set to the audited transaction version (1: the protocol before KIP-890 part 2,
    2: KIP-890's epoch bump on every EndTxn and implicit partition adds); then ``kafka.Kafka`` runs the node
    (``process.roles=broker,controller``) on two free loopback ports. :data:`SETTINGS` are the only
    departures from Kafka's defaults: replication factor and min ISR of 1 for the internal topics (one node),
    one partition each, no initial rebalance delay, and a 500 ms period for the coordinator's abort of timed
    out transactions (Kafka's default is 10 s), so that the timeout rule is quick. None of them changes a
    rule the audit checks.

Ready and stop
    The node is ready when it answers ``ApiVersions`` with the finalised ``transaction.version`` asked for
    and ``Metadata`` lists it as a broker (bounded: :data:`READY_SECONDS`). It is stopped by its process
    group (SIGTERM, then SIGKILL after 10 s) and its data directory is removed; its log is kept in the audit's
    ``--out`` folder as ``kafka.log``.

Left out: more than one node (leadership moves, replication), TLS/SASL listeners, Kafka 3.x (ZooKeeper or
KRaft without ``--standalone``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from txnspec.audit.processes import free_port, stop_process
from txnspec.audit.report import BrokerUnavailable

GROUP_ID, ARTIFACT_ID = "org.apache.kafka", "kafka_2.13"
LATEST_RANGE = "[4.0.0,5.0.0)"
LATEST_TTL_SECONDS = 24 * 3600
LOG4J_SLF4J = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3")
CACHE_ENV = "TXNSPEC_KAFKA_CACHE"
READY_SECONDS = 60.0
RESOLVE_SECONDS = 600.0
ABORT_CHECK_INTERVAL_MS = 500
# the client JIT only and the serial collector (as audit/chaos/cluster.py's nodes): a node that lives for one audit
# starts in about half the CPU seconds (15 -> 8 measured, StorageTool included, 2 loaded cores); no rule depends
# on the JVM's compilers or collector
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

# Kafka's broker settings that differ from its defaults, in Kafka's names (see the module docstring)
SETTINGS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_CHECK_INTERVAL_MS),
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
}

LOG4J2 = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


@dataclass(frozen=True)
class KafkaRuntime:
    """A resolved Kafka: its version and the jars to run it with."""

    version: str
    classpath: tuple[Path, ...]

    @property
    def classpath_text(self) -> str:
        return os.pathsep.join(str(p) for p in self.classpath)


def cache_root(override: Path | None = None) -> Path:
    if override is not None:
        return override
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "txnspec" / "kafka"


def parse_broker_name(name: str) -> str | None:
    """``kafka`` → None (the newest 4.x), ``kafka:4.1.1`` → "4.1.1"; anything else is not a Kafka name."""
    if name == "kafka":
        return None
    version = name.removeprefix("kafka:")
    if version == name or not version or not all(part.isdigit() for part in version.split(".")):
        raise BrokerUnavailable(f"{name!r}: write kafka or kafka:VERSION with a numeric version such as 4.1.1")
    return version


def _tool(name: str, how: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BrokerUnavailable(f"real Kafka needs {name}, which is not on PATH ({how})")
    return found


def _pom(version: str) -> str:
    group, artifact, log4j_version = LOG4J_SLF4J
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>txnspec</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>{GROUP_ID}</groupId><artifactId>{ARTIFACT_ID}</artifactId><version>{version}</version>
    </dependency>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{log4j_version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _maven_classpath(version: str, cache: Path) -> list[Path]:
    """Maven's runtime class path of Kafka ``version`` (a version or a range), jars in the cache's repository."""
    mvn = _tool("mvn", "install Maven, e.g. apt-get install maven")
    with tempfile.TemporaryDirectory(prefix="txnspec-kafka-pom-") as tmp:
        (Path(tmp) / "pom.xml").write_text(_pom(version))
        out = Path(tmp) / "classpath.txt"
        argv = [mvn, "-B", "-q", f"-Dmaven.repo.local={cache / 'm2'}", "dependency:build-classpath",
                f"-Dmdep.outputFile={out}", "-Dmdep.includeScope=runtime"]
        try:
            done = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=RESOLVE_SECONDS,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise BrokerUnavailable(f"Maven did not resolve Kafka {version} within {RESOLVE_SECONDS:.0f} s") from None
        if done.returncode != 0 or not out.exists():
            lines = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line][:3]
            raise BrokerUnavailable(f"Maven could not resolve {GROUP_ID}:{ARTIFACT_ID}:{version}: "
                                    + (" | ".join(lines) or f"mvn exited {done.returncode}"))
        return [Path(p) for p in out.read_text().strip().split(os.pathsep) if p]


def _version_of(classpath: list[Path]) -> str:
    for jar in classpath:
        if jar.name.startswith(f"{ARTIFACT_ID}-") and jar.suffix == ".jar":
            return jar.name.removeprefix(f"{ARTIFACT_ID}-").removesuffix(".jar")
    raise BrokerUnavailable(f"Maven's class path has no {ARTIFACT_ID} jar")


def resolve(version: str | None = None, cache: Path | None = None) -> KafkaRuntime:
    """Kafka ``version`` (None: the newest 4.x), resolved once into the cache."""
    root = cache_root(cache)
    if version is None:
        latest = root / "latest.txt"
        if latest.exists() and time.time() - latest.stat().st_mtime < LATEST_TTL_SECONDS:
            version = latest.read_text().strip()
        else:
            classpath = _maven_classpath(LATEST_RANGE, root)
            version = _version_of(classpath)
            _remember(root / version, classpath)
            latest.write_text(version + "\n")
    remembered = root / version / "classpath.txt"
    if remembered.exists():
        jars = tuple(Path(p) for p in remembered.read_text().split(os.pathsep) if p.strip())
        if jars and all(j.exists() for j in jars):
            return KafkaRuntime(version, jars)
    classpath = _maven_classpath(version, root)
    _remember(root / version, classpath)
    return KafkaRuntime(_version_of(classpath), tuple(classpath))


def _remember(folder: Path, classpath: list[Path]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "classpath.txt.tmp"
    tmp.write_text(os.pathsep.join(str(p) for p in classpath))
    tmp.replace(folder / "classpath.txt")


def server_properties(broker_port: int, controller_port: int, data: Path) -> dict[str, str]:
    """A combined broker and controller on two loopback ports, with :data:`SETTINGS`."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
        **SETTINGS,
    }


def _java(runtime: KafkaRuntime, main: str, args: list[str], log4j: Path) -> list[str]:
    java = _tool("java", "install a Java 17 runtime, e.g. apt-get install openjdk-17-jre-headless")
    return [java, "-Xms256m", "-Xmx1g", *JVM_FLAGS, "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", runtime.classpath_text, main, *args]


def cluster_id() -> str:
    """A random KRaft cluster id: 16 bytes, URL-safe base64 without padding (Kafka's ``Uuid.toString``), never
    starting with "-" (``Uuid.randomUuid`` draws again then: a leading dash reads as an option to StorageTool)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def format_storage(runtime: KafkaRuntime, config: Path, transaction_version: int, log4j: Path) -> None:
    argv = _java(runtime, "kafka.tools.StorageTool", ["format", "-t", cluster_id(), "-c", str(config),
                                                      "--standalone", "--feature",
                                                      f"transaction.version={transaction_version}"], log4j)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise BrokerUnavailable(f"Kafka {runtime.version}'s StorageTool could not format the data directory: "
                                + " | ".join(tail))


def wait_ready(port: int, transaction_version: int, process: subprocess.Popen[bytes], log: Path,
               seconds: float = READY_SECONDS) -> None:
    """Until the node answers ApiVersions with the transaction version asked for and Metadata lists it."""
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

    from txnspec.audit.connection import BrokerConnection, WireError

    deadline = time.monotonic() + seconds
    last = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
            raise BrokerUnavailable(f"Kafka exited with status {process.returncode} while starting: "
                                    + " | ".join(tail))
        try:
            conn = BrokerConnection("127.0.0.1", port, timeout=2.0)
        except (BrokerUnavailable, WireError, OSError) as exc:
            last = str(exc)
            time.sleep(0.2)
            continue
        try:
            finalized = conn.features.get("transaction.version", 0)
            metadata = conn.call(MetadataRequest, MetadataResponse, 1, topics=[])
            if finalized == transaction_version and metadata.brokers:
                return
            last = f"transaction.version {finalized}, {len(metadata.brokers)} brokers in Metadata"
        except (WireError, OSError) as exc:
            last = str(exc)
        finally:
            conn.close()
        time.sleep(0.2)
    raise BrokerUnavailable(f"Kafka did not become ready on 127.0.0.1:{port} within {seconds:.0f} s ({last})")


@dataclass(frozen=True)
class RunningKafka:
    bootstrap: str
    version: str
    transaction_version: int
    pid: int
    log: Path
    start_seconds: float


@contextlib.contextmanager
def kafka_broker(workdir: Path, version: str | None = None, transaction_version: int = 2,
                 cache: Path | None = None, settings: Mapping[str, str] | None = None) -> Iterator[RunningKafka]:
    """A fresh single-node Kafka for the block: formatted, started, ready; stopped and its data removed after.
    ``settings``: broker settings beyond :data:`SETTINGS` (KIP-939's: ``audit.two_phase.TWO_PHASE_SETTINGS``)."""
    if transaction_version not in (1, 2):
        raise BrokerUnavailable(f"transaction version {transaction_version}: Kafka's transaction.version is 1 or 2 "
                                "here (0 behaves as 1 for every rule the audit checks)")
    _tool("java", "install a Java 17 runtime, e.g. apt-get install openjdk-17-jre-headless")
    runtime = resolve(version, cache)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "kafka.log"
    log4j = workdir / "kafka-log4j2.properties"
    log4j.write_text(LOG4J2.format(log=log))
    with tempfile.TemporaryDirectory(prefix="txnspec-kafka-data-") as data:
        broker_port, controller_port = free_port(), free_port()
        while controller_port == broker_port:
            controller_port = free_port()
        config = Path(data) / "server.properties"
        properties = {**server_properties(broker_port, controller_port, Path(data) / "log"), **(settings or {})}
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        started = time.monotonic()
        format_storage(runtime, config, transaction_version, log4j)
        with (workdir / "kafka.stdout").open("wb") as out:
            process = subprocess.Popen(_java(runtime, "kafka.Kafka", [str(config)], log4j), stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=data,
                                       start_new_session=True)
        try:
            wait_ready(broker_port, transaction_version, process, log)
            yield RunningKafka(f"127.0.0.1:{broker_port}", runtime.version, transaction_version, process.pid, log,
                               round(time.monotonic() - started, 2))
        finally:
            stop_process(process, grace_seconds=10.0)


RECORDING = "tests/audit/fixtures/kafka_answers.json"


def record_answers(path: str = RECORDING, version: str | None = None, seed: int = 0, traces: int = 9) -> None:
    """Start real Kafka at transaction versions 2 and 1, replay the audit's traces against each and keep its
    answers: the fixture that tests the comparison on machines without Java
    (``tests/conformance/test_audit_kafka.py``)."""
    import json

    from txnspec.audit.wire_traces import RecordingWire, plans, run_plans, socket_txn_wire

    out: dict[str, object] = {}
    for transaction_version, variant in ((2, "current"), (1, "tv1")):
        with tempfile.TemporaryDirectory() as workdir, \
                kafka_broker(Path(workdir), version, transaction_version) as running, \
                socket_txn_wire(running.bootstrap) as socket_wire:
            wire = RecordingWire(socket_wire)
            run_plans(wire, plans(seed, traces, variant, True), f"fixture-{int(time.time())}")
            out[f"tv{transaction_version}"] = {"kafka": running.version, "variant": variant, "seed": seed,
                                               "traces": traces, "calls": wire.calls}
    Path(path).write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
