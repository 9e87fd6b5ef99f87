"""A TCP proxy on 127.0.0.1 in front of every node's listeners, for the chaos runs' network faults. Run as
``python -m txnspec.audit.chaos.proxy CONFIG.json`` (one process for all routes, its own session).

What it models
    One route per listener: ``listen`` (the port the node advertises, its broker port to clients and other
    brokers, its controller port in ``controller.quorum.voters``) forwards to ``target`` (the node's real
    port). Every byte between clients, brokers and controllers goes through it. The control port takes one
    JSON command per line and answers ``ok``:

    * ``{"cut": NODE}``: every open connection to the node's routes is closed, and new ones are accepted and
      closed at once (the node is unreachable; its own outgoing connections to the others still work: a
      one-way partition, which is what a proxy in front of each destination can do);
    * ``{"delay": NODE, "ms": N}``: every chunk forwarded to or from the node waits N ms;
    * ``{"heal": true}``: no fault.

Assumes
    Loopback only; the routes are given at start (Kafka's ports are chosen before it starts).

Leaves out
    Kafka's protocol (it forwards bytes; a "Kafka-aware" proxy that drops one request type is not built),
    dropping single packets (TCP would retransmit them anyway), a two-way isolation (the source of a
    connection is not known to the proxy).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import Any

CHUNK = 65536


class Proxy:
    def __init__(self, routes: list[dict[str, int]]) -> None:
        self.routes = routes
        self.cut: set[int] = set()
        self.delay: dict[int, float] = {}
        self.open: dict[int, set[asyncio.StreamWriter]] = {}

    async def serve(self, control_port: int) -> None:
        servers = []
        for route in self.routes:
            servers.append(await asyncio.start_server(functools.partial(self.connection, route=route), "127.0.0.1",
                                                      route["listen"]))
        servers.append(await asyncio.start_server(self.control, "127.0.0.1", control_port))
        print("ready", flush=True)
        await asyncio.gather(*(s.serve_forever() for s in servers))

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         route: dict[str, int]) -> None:
        node = route["node"]
        if node in self.cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", route["target"])
        except OSError:
            writer.close()
            return
        ends = self.open.setdefault(node, set())
        ends.update((writer, up_writer))
        try:
            await asyncio.gather(self.pump(reader, up_writer, node), self.pump(up_reader, writer, node))
        finally:
            for w in (writer, up_writer):
                ends.discard(w)
                with contextlib.suppress(Exception):
                    w.close()

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, node: int) -> None:
        with contextlib.suppress(ConnectionError, OSError, asyncio.IncompleteReadError):
            while True:
                data = await reader.read(CHUNK)
                if not data or node in self.cut:
                    break
                if self.delay.get(node):
                    await asyncio.sleep(self.delay[node])
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            command: dict[str, Any] = json.loads(line)
            if "cut" in command:
                node = int(command["cut"])
                self.cut.add(node)
                for w in list(self.open.get(node, ())):
                    with contextlib.suppress(Exception):
                        w.close()
            elif "delay" in command:
                self.delay[int(command["delay"])] = float(command["ms"]) / 1000
            elif command.get("heal"):
                self.cut.clear()
                self.delay.clear()
            writer.write(b"ok\n")
            await writer.drain()
        writer.close()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m txnspec.audit.chaos.proxy CONFIG.json", file=sys.stderr)
        return 2
    config = json.loads(Path(argv[0]).read_text())
    asyncio.run(Proxy(config["routes"]).serve(config["control"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


class Control:
    """The orchestrator's end of the control port: one command, one ``ok``."""

    def __init__(self, port: int) -> None:
        self.port = port

    def send(self, command: dict[str, Any]) -> None:
        import socket

        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall((json.dumps(command) + "\n").encode())
            if s.makefile().readline().strip() != "ok":
                raise RuntimeError(f"the proxy did not acknowledge {command}")
