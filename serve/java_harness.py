"""The Java client on a broker: ``TxnHarness.java`` (consume-transform-produce with a zombie and a restart) and
``TxnAdmin.java`` (the Admin client's transaction admin: list, describe, find and abort a hanging transaction),
compiled with the machine's ``javac`` against ``kafka-clients`` resolved by Maven into ``~/.cache/txnspec/``
(outside the repository), run against any bootstrap address.

``run_harness(bootstrap)`` returns the harness's RESULT line as a dict (``ok``, ``output``,
``committed_offset``, ``zombie_commit``: the exception class the zombie's commit raised);
``run_harness(bootstrap, main="TxnAdmin")`` the admin workflow's (``listed``, ``start_offset``, ``lso_after``...).
``run_two_phase_harness(bootstrap)`` runs ``java2pc/TwoPhaseHarness.java`` (KIP-939: prepare, complete, a crash,
``initTransactions(keepPreparedTxn)``, a fence) with Kafka 4.4's client, compiled apart (its own Maven project)
with ``java/Harness.java``, what the harnesses share.
A missing JDK or Maven raises :class:`JavaUnavailable` naming what is missing. Against any broker (a real Kafka
too)::

    python -m txnspec.serve.java_harness HOST:PORT [TxnAdmin]     # prints the RESULT, exit 0 when ok
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "java"
KAFKA_CLIENTS = "4.1.0"
TWO_PHASE_HERE = HERE.with_name("java2pc")  # KIP-939's harness: Kafka 4.4's client (the 2PC internals)
TWO_PHASE_CLIENTS = "4.4.0"
CACHE = Path(os.environ.get("TXNSPEC_CACHE", Path.home() / ".cache" / "txnspec"))
# a harness runs seconds: the client JIT only and the serial collector spare the CPU of C2 compilations it would
# not live to use (as the chaos run's Java clients)
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class JavaUnavailable(RuntimeError):
    """No JDK, no Maven, or the client could not be resolved."""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise JavaUnavailable(f"{name} is not installed (the Java harness needs a JDK 17+ and Maven)")
    return found


def classpath(here: Path = HERE, clients: str = KAFKA_CLIENTS, classes_name: str = "serve-harness-classes",
              shared: tuple[Path, ...] = ()) -> str:
    """The kafka-clients jars (resolved once with Maven into the cache) and the compiled harness: the sources of
    ``here`` and ``shared`` compiled together (they call one another) when any of them changed."""
    jars = CACHE / f"kafka-clients-{clients}"
    if not (jars / f"kafka-clients-{clients}.jar").is_file():
        mvn = _tool("mvn")
        done = subprocess.run([mvn, "-q", "-B", f"-Dmaven.repo.local={CACHE / 'm2'}", "dependency:copy-dependencies",
                               f"-DoutputDirectory={jars}"], cwd=here, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise JavaUnavailable(f"mvn could not resolve kafka-clients {clients}: "
                                  f"{(done.stdout + done.stderr)[-800:]}")
    classes = CACHE / classes_name
    libs = os.pathsep.join(str(p) for p in sorted(jars.glob("*.jar")))
    sources = [*sorted(here.glob("*.java")), *shared]
    stale = [source for source in sources if not (classes / f"{source.stem}.class").is_file()
             or (classes / f"{source.stem}.class").stat().st_mtime < source.stat().st_mtime]
    if stale:
        classes.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([_tool("javac"), "-cp", libs, "-d", str(classes), *map(str, sources)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise JavaUnavailable(f"javac failed on {', '.join(s.name for s in stale)}: {done.stderr[-800:]}")
    return libs + os.pathsep + str(classes)


def run_two_phase_harness(bootstrap: str, run: str | None = None, timeout: float = 180.0) -> dict[str, Any]:
    """KIP-939's harness on ``bootstrap`` (a broker with 2PC enabled and InitProducerId v6 served)."""
    cp = classpath(TWO_PHASE_HERE, TWO_PHASE_CLIENTS, "serve-two-phase-classes", shared=(HERE / "Harness.java",))
    return _run(cp, "TwoPhaseHarness", bootstrap, run, timeout)


def run_harness(bootstrap: str, run: str | None = None, timeout: float = 120.0, main: str = "TxnHarness"
                ) -> dict[str, Any]:
    return _run(classpath(), main, bootstrap, run, timeout)


def _run(cp: str, main: str, bootstrap: str, run: str | None, timeout: float) -> dict[str, Any]:
    argv = [_tool("java"), *JVM_FLAGS, "-cp", cp, main, bootstrap, run or uuid.uuid4().hex[:8]]
    return run_result(argv, "Java", timeout)


def run_result(argv: list[str], what: str, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a harness (every harness prints its outcome as a last line ``RESULT {json}``): that JSON, with ``exit``,
    the process's exit status; a ``RuntimeError`` with the output's tail when there is no such line."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the {what} harness printed no RESULT (exit {done.returncode}): "
                           f"{(done.stdout + done.stderr)[-1500:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    result["exit"] = done.returncode
    return result


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["TxnHarness"], ["TxnAdmin"], ["TwoPhaseHarness"]):
        print("usage: python -m txnspec.serve.java_harness HOST:PORT [TxnHarness|TxnAdmin|TwoPhaseHarness]",
              file=sys.stderr)
        sys.exit(2)
    main = sys.argv[2] if len(sys.argv) == 3 else "TxnHarness"
    outcome = run_two_phase_harness(sys.argv[1]) if main == "TwoPhaseHarness" else run_harness(sys.argv[1], main=main)
    print(json.dumps(outcome))
    sys.exit(0 if outcome["ok"] else 1)
