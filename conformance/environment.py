"""The environment the Spark stages need: a Java runtime, a reachable Spark master, a session that really
started. Shared by ``txnspec check --master``, ``txnspec conform`` and the main job; every failure is an
:class:`EnvironmentProblem` naming what is missing (the CLI exits 2 on it).

Assumes
    Spark 3.5+ from the pyspark wheel, Java 17 or 21. A standalone master is probed with 8 zero bytes before
    Spark is started, so a wrong address is refused in seconds, not after Spark's own three 20-second attempts.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any


class EnvironmentProblem(Exception):
    """The environment failed (an unwritable output, an unreachable service, no Java); exit status 2."""


def java_problem() -> str | None:
    """Why Spark cannot start here, or None. Spark needs a Java runtime (17 or 21) on PATH or JAVA_HOME."""
    java = shutil.which("java")
    if java is None:
        return ("Spark needs Java 17 (or 21) and none was found: install a JDK (e.g. `apt-get install "
                "openjdk-17-jre-headless`) or set JAVA_HOME; the other stages do not need it")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`java -version` failed ({exc}); Spark needs a working Java 17 runtime"
    if out.returncode != 0:
        return f"`java -version` failed: {out.stderr.strip()[:200]}"
    return None


REACH_TIMEOUT_S = 5.0
JVM_WAIT_S = 120.0  # the driver's JVM starting (not the master's fault)
REGISTRATION_WAIT_S = 90.0  # beyond Spark's own three 20-second attempts: its failure is reported, not a hang
EXECUTOR_WAIT_S = 60.0  # a master that registered the application gives an executor in this time


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """The (host, port) of each master of a ``spark://`` URL; [] for ``local``/``yarn``; bad URLs refused."""
    if master == "yarn" or re.fullmatch(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]", master):
        return []
    if not master.startswith("spark://"):
        raise EnvironmentProblem(f"--master {master!r} is not a Spark master URL "
                                 "(local[N], local[*], spark://HOST:PORT, yarn)")
    found = []
    for part in master.removeprefix("spark://").split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise EnvironmentProblem(f"--master {master!r}: {part!r} is not HOST:PORT")
        found.append((host, int(port)))
    return found


def check_reachable(master: str, masters: list[tuple[str, int]]) -> None:
    """At least one standalone master accepts a connection and behaves as a Spark RPC port, within seconds.

    Spark's ``TransportFrameDecoder`` closes a connection whose first frame length is not positive, so a
    master answers 8 zero bytes by closing at once; a listener that sends something back, or nothing at all,
    is not a Spark master (Spark itself would wait three times 20 s for it before failing).
    """
    if not masters:
        return
    reasons = []
    for host, port in masters:
        try:
            with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S) as conn:
                conn.sendall(b"\0" * 8)
                answer = conn.recv(64)
        except (ConnectionResetError, BrokenPipeError):
            return  # closed on us: what a Spark master does
        except TimeoutError:
            reasons.append(f"{host}:{port} accepts connections but does not answer as a Spark master "
                           f"(nothing within {REACH_TIMEOUT_S:.0f} s)")
            continue
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
            continue
        if answer == b"":
            return
        reasons.append(f"{host}:{port} answers, but not as a Spark master ({answer[:16]!r})")
    raise EnvironmentProblem(f"Spark master {master} cannot be reached ({'; '.join(reasons)})")


def start_standalone_session(master: str, spark_session: Callable[[str], Any]) -> Any:
    """A session on a standalone master that registered the application within ``REGISTRATION_WAIT_S`` of
    the driver's JVM being up and then gave an executor within ``EXECUTOR_WAIT_S``; otherwise
    :class:`EnvironmentProblem` (Spark itself would try three times 20 s before giving up)."""
    from pyspark import SparkContext

    box: dict[str, Any] = {}

    def start() -> None:
        try:
            box["session"] = spark_session(master)
        except Exception as exc:  # reported below, in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=start, name="spark-session", daemon=True)
    thread.start()
    jvm_deadline = time.monotonic() + JVM_WAIT_S  # a loaded machine may take long to start the driver's JVM:
    while SparkContext._gateway is None and thread.is_alive() and time.monotonic() < jvm_deadline:
        time.sleep(0.1)  # only the master's answer is timed, from when the JVM is up
    thread.join(REGISTRATION_WAIT_S)
    if "session" not in box:
        why = f": {str(box['error']).splitlines()[0]}" if "error" in box else ""
        raise EnvironmentProblem(f"Spark master {master} did not take the application within "
                                 f"{REGISTRATION_WAIT_S:.0f} s (not a Spark master, or it is not answering){why}")
    session = box["session"]
    deadline = time.monotonic() + EXECUTOR_WAIT_S
    while session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() <= 1:  # the driver counts as one
        if time.monotonic() > deadline:
            session.stop()
            raise EnvironmentProblem(f"Spark master {master} took the application but gave no executor within "
                                     f"{EXECUTOR_WAIT_S:.0f} s (no worker with free cores?)")
        time.sleep(0.5)
    return session
