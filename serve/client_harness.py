"""KafkaJS (npm) and sarama (Go module) on a broker: ``kafkajs/harness.js`` and ``sarama/harness.go`` run the
client matrix's workload (a consume-transform-produce with a zombie and a restart, its input written by an
idempotent producer with the client's default compression) with each client's stock settings, against any
bootstrap address, and print the RESULT of ``java/TxnHarness.java``.

The clients are not vendored: KafkaJS is installed with ``npm install`` and sarama downloaded with ``go mod
download`` (the module proxy) into the cache (``~/.cache/txnspec`` or ``TXNSPEC_CACHE``) at the first run, with
bounded waits; sarama's harness is then built offline (``GOPROXY=off``) and rebuilt when its source changes.
:class:`ClientUnavailable` names what is missing (no ``node``/``go``, or the registry did not answer: the only
reasons a test skips); a harness that does not build or run is an error.

``run_client(client, bootstrap)`` returns the RESULT as a dict (``ok``, ``output``, ``committed_offset``,
``zombie_commit``, ``stale_generation_commit``/``current_generation_commit``: KafkaJS cannot send a member's
group metadata, so both say ``unsupported: ...``, its documented lack of KIP-447). Against any broker::

    python -m txnspec.serve.client_harness kafkajs|sarama HOST:PORT     # prints the RESULT, exit 0 when ok
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

from txnspec.serve.java_harness import run_result

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("TXNSPEC_CACHE", Path.home() / ".cache" / "txnspec"))
KAFKAJS = "2.2.4"  # the newest release on npm (2023); KafkaJS is no longer developed
SARAMA = "v1.61.1"  # pinned in sarama/go.mod and go.sum
CLIENTS = ("kafkajs", "sarama")
INSTALL_SECONDS = 600.0
UNSUPPORTED_PREFIX = "unsupported: "


class ClientUnavailable(RuntimeError):
    """The client's tool chain is missing or its registry did not answer."""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ClientUnavailable(f"{name} is not installed")
    return found


def _run(args: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = INSTALL_SECONDS) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ClientUnavailable(f"{what} did not finish within {timeout:.0f} s") from exc


def kafkajs_modules() -> Path:
    """``node_modules`` holding KafkaJS, installed once from npm into the cache."""
    prefix = CACHE / f"kafkajs-{KAFKAJS}"
    modules = prefix / "node_modules"
    if not (modules / "kafkajs" / "package.json").is_file():
        _tool("node")
        prefix.mkdir(parents=True, exist_ok=True)
        done = _run([_tool("npm"), "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(prefix),
                     f"kafkajs@{KAFKAJS}"], f"npm install kafkajs@{KAFKAJS}")
        if done.returncode != 0:
            raise ClientUnavailable(f"npm could not install kafkajs@{KAFKAJS}: {(done.stdout + done.stderr)[-800:]}")
    return modules


def _go_env() -> dict[str, str]:
    return {**os.environ, "GOMODCACHE": str(CACHE / "go" / "mod"), "GOCACHE": str(CACHE / "go" / "build"),
            "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local"}


def sarama_binary() -> Path:
    """The sarama harness, built into the cache after its modules are downloaded (the only network step)."""
    source = HERE / "sarama"
    binary = CACHE / f"sarama-harness-{SARAMA}" / "harness"
    newest = max(p.stat().st_mtime for p in source.iterdir())
    if binary.is_file() and binary.stat().st_mtime >= newest:
        return binary
    go = _tool("go")
    env = _go_env()
    done = _run([go, "mod", "download"], "go mod download (sarama)", cwd=source, env=env)
    if done.returncode != 0:
        raise ClientUnavailable(f"the Go module proxy did not give sarama {SARAMA}: {done.stderr[-800:]}")
    done = _run([go, "build", "-o", str(binary), "."], "go build (the sarama harness)", cwd=source,
                env={**env, "GOPROXY": "off"})
    if done.returncode != 0:
        raise RuntimeError(f"the sarama harness does not build: {done.stderr[-1500:]}")
    return binary


def command(client: str) -> tuple[list[str], dict[str, str]]:
    """The harness's command line (without bootstrap and run id) and its environment."""
    if client == "kafkajs":
        env = {**os.environ, "NODE_PATH": str(kafkajs_modules()), "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
        return [_tool("node"), str(HERE / "kafkajs" / "harness.js")], env
    if client == "sarama":
        return [str(sarama_binary())], dict(os.environ)
    raise ValueError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")


def run_client(client: str, bootstrap: str, run: str | None = None, timeout: float = 120.0) -> dict[str, Any]:
    args, env = command(client)
    result: dict[str, Any] = run_result([*args, bootstrap, run or uuid.uuid4().hex[:8]], client, timeout, env)
    return result


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in CLIENTS:
        print(f"usage: python -m txnspec.serve.client_harness {'|'.join(CLIENTS)} HOST:PORT", file=sys.stderr)
        sys.exit(2)
    try:
        outcome = run_client(sys.argv[1], sys.argv[2])
    except ClientUnavailable as exc:
        print(f"{sys.argv[1]} unavailable: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(outcome))
    sys.exit(0 if outcome["ok"] else 1)
