"""A standalone Spark cluster on 127.0.0.1: a master and N workers, for the tests and the benchmarks.

What is modelled
    What an operator does with Spark's ``sbin/spark-daemon.sh`` (the one that ships in the pyspark wheel): start
    ``org.apache.spark.deploy.master.Master`` on a free port, start ``workers`` instances of
    ``org.apache.spark.deploy.worker.Worker`` registered with it, wait until the master's status page
    (``/json/``) lists them all alive, and stop them again. Each worker offers ``cores`` cores, so an
    application gets one executor per worker.

Assumes
    Java 17 or 21 (see :func:`txnspec.conformance.environment.java_problem`); every address is 127.0.0.1 and every
    port is picked free. Logs, PID files and the workers' folders stay under ``directory``.

Bounds
    Each daemon start is given ``START_TIMEOUT_S``; registration is waited for at most ``wait_s`` (then
    :class:`ClusterError`, with the cluster stopped). Stopping sends SIGTERM to the PID in each daemon's PID
    file (what ``spark-daemon.sh stop`` does), waits at most ``STOP_WAIT_S`` for the process to end, then
    sends SIGKILL to that PID: nothing is stopped by name.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120.0
STOP_WAIT_S = 15.0
_IDENT = "txnspec"


class ClusterError(RuntimeError):
    """The cluster did not come up in time (the message says which part)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running cluster: its master URL, and what stopping it needs."""

    master: str
    web_url: str
    directory: Path
    env: dict[str, str]
    daemons: list[tuple[str, int]]  # (class, instance number) of every daemon started

    def alive_workers(self) -> int:
        """How many workers the master lists alive (0 when its status page does not answer)."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
                return int(json.loads(response.read()).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def pid_file(self, cls: str, instance: int) -> Path:
        return self.directory / "pids" / f"spark-{_IDENT}-{cls}-{instance}.pid"

    def stop(self) -> None:
        """Workers first, then the master: SIGTERM to each PID, a bounded wait, then SIGKILL to the same PID."""
        for cls, instance in reversed(self.daemons):
            path = self.pid_file(cls, instance)
            try:
                pid = int(path.read_text().strip())
            except (OSError, ValueError):
                continue
            _end(pid)
            with suppress(OSError):
                path.unlink()
        self.daemons.clear()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with suppress(OSError):  # a zombie (ended, not yet reaped) is not alive
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def _end(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start_cluster(directory: Path, *, workers: int = 1, cores: int = 2, memory: str = "2g",
                  wait_s: float = 120.0) -> Cluster:
    """Start a master and ``workers`` workers of ``cores`` cores and ``memory`` each; return once all are
    registered (or raise :class:`ClusterError`, having stopped what was started)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    daemon = home / "sbin" / "spark-daemon.sh"
    port, web = free_port(), free_port()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(directory / "logs"),
               SPARK_PID_DIR=str(directory / "pids"), SPARK_IDENT_STRING=_IDENT,
               SPARK_WORKER_DIR=str(directory / "work"))
    env.pop("SPARK_NO_DAEMONIZE", None)
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", directory, env, [])

    def start(cls: str, instance: int, *args: str) -> None:
        cluster.daemons.append((cls, instance))
        subprocess.run(["bash", str(daemon), "start", cls, str(instance), *args], env=env, check=True,
                       capture_output=True, timeout=START_TIMEOUT_S)

    try:
        start(MASTER_CLASS, 1, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web))
        for instance in range(1, workers + 1):
            start(WORKER_CLASS, instance, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                  "--webui-port", str(free_port()), cluster.master)
        deadline = time.monotonic() + wait_s
        while cluster.alive_workers() < workers:
            if time.monotonic() > deadline:
                raise ClusterError(f"{workers} standalone worker(s) did not register with the master within "
                                   f"{wait_s:.0f} s (logs: {directory / 'logs'})")
            time.sleep(1)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def standalone_cluster(directory: Path, *, workers: int = 1, cores: int = 2, memory: str = "2g",
                       wait_s: float = 120.0) -> Iterator[Cluster]:
    """:func:`start_cluster`, stopped on the way out."""
    cluster = start_cluster(directory, workers=workers, cores=cores, memory=memory, wait_s=wait_s)
    try:
        yield cluster
    finally:
        cluster.stop()
