"""The TCP server of ``txnspec serve``: asyncio, one event loop, one :class:`WireBroker`, one listening port per
node (``--nodes``: each connection's requests carry its node id, :mod:`.nodes` decides what a node answers;
tests stop and start a node).

Each connection reads size-prefixed frames and answers them in order, one at a time (as Kafka mutes a
channel while its request is processed). The implementation is single-threaded and sans-I/O, so every
request is handled on the loop thread with no lock; a request that has to wait (:class:`Pending`: a Fetch
below ``min_bytes``, a JoinGroup or SyncGroup in a rebalance) waits on a condition notified after every
change, bounded by its deadline. A ticker lets wall time reach the implementation every
:data:`TICK_SECONDS` (transaction timeouts, session timeouts, id expiration).

Memory: the bytes of the requests being read or handled are bounded across connections by
``queued_max_request_bytes`` (Kafka's ``queued.max.request.bytes`` with its non-strict ``SimpleMemoryPool``: a
frame takes its declared size from the pool as soon as its prefix is read, while any is left, and gives it back
once answered); a connection whose frame cannot take its size is not read from until bytes come back, so its
client waits on TCP's flow control. A frame is read chunk by chunk into a buffer that grows as it arrives.

Robustness: a frame larger than ``max_request_bytes``, a negative size, an unknown API key, a version we
do not advertise or a body that does not decode closes that connection (but ApiVersions of an unknown
version is answered and the connection kept, KIP-511); a client that vanishes mid-frame only ends its own
connection; an exception inside a handler is logged with the request's name and closes the connection, never the server.

:class:`ServerThread` runs a server on a background thread for tests and the pytest fixture
(:mod:`.testing`); :func:`serve_forever` is the command's foreground loop (SIGTERM/SIGINT stop it; in
durable mode the logs are flushed first).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import socket
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from txnspec.serve.broker import Pending, ServeConfig, WireBroker
from txnspec.serve.dispatch import HANDLERS
from txnspec.serve.protocol import FrameError, decode_request, encode_response, frame_size

TICK_SECONDS = 0.1
READ_CHUNK = 1 << 20
log = logging.getLogger("txnspec.serve")


class MemoryPool:
    """``SimpleMemoryPool`` (non-strict): ``allocate`` waits while nothing is left, then takes the whole size
    (the pool may go below zero by one frame); ``release`` gives it back. ``None`` capacity: unbounded."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.available = capacity if capacity is not None else 0
        self.lowest = self.available  # the least ever available (tests)
        self._changed: asyncio.Condition | None = None

    async def allocate(self, size: int) -> None:
        if self.capacity is None:
            return
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            await self._changed.wait_for(lambda: self.available > 0 or size == 0)
            self.available -= size
            self.lowest = min(self.lowest, self.available)

    async def release(self, size: int) -> None:
        if self.capacity is None:
            return
        assert self._changed is not None
        async with self._changed:
            self.available += size
            self._changed.notify_all()


async def read_frame(reader: asyncio.StreamReader, size: int) -> bytearray:
    """The ``size`` bytes of a frame's payload, as they arrive (``asyncio.IncompleteReadError`` if the client
    closes first): memory grows with the bytes received, not the size declared; the stream's own buffer never
    holds more than a chunk."""
    payload = bytearray()
    while len(payload) < size:
        chunk = await reader.read(min(size - len(payload), READ_CHUNK))
        if not chunk:
            raise asyncio.IncompleteReadError(bytes(payload), size)
        payload += chunk
    return payload


class PortInUse(OSError):
    """The port is taken (``txnspec serve`` exits 2 naming it)."""


class Server:
    """One listening socket and its connections (see the module docstring)."""

    def __init__(self, config: ServeConfig, clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self.broker = WireBroker(config, HANDLERS, clock) if clock is not None else WireBroker(config, HANDLERS)
        self.changed: asyncio.Condition | None = None
        self.connections: set[asyncio.StreamWriter] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.requests: Counter[tuple[str, int]] = Counter()  # (API name, version) of every request answered
        self.pool = MemoryPool(config.queued_max_request_bytes if config.queued_max_request_bytes > 0 else None)
        self._servers: dict[int, asyncio.base_events.Server] = {}  # by node id (serve.nodes)
        self._node_connections: dict[int, set[asyncio.StreamWriter]] = {}
        self._ticker: asyncio.Task[None] | None = None

    @staticmethod
    def bind(host: str, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise PortInUse(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
        sock.listen(128)
        sock.setblocking(False)
        return sock

    @staticmethod
    def bind_all(config: ServeConfig) -> list[socket.socket]:
        """One listening socket per node: ``port``, ``port + 1``... (any free ports when ``port`` is 0)."""
        socks: list[socket.socket] = []
        try:
            for node in range(max(1, config.nodes)):
                socks.append(Server.bind(config.host, config.port + node if config.port else 0))
        except PortInUse:
            for s in socks:
                s.close()
            raise
        return socks

    async def start(self, socks: list[socket.socket]) -> None:
        self.config.ports = [int(s.getsockname()[1]) for s in socks]
        self.config.port = self.config.ports[0]
        self.changed = asyncio.Condition()
        for node, sock in enumerate(socks):
            await self._listen(node, sock)
        self._ticker = asyncio.create_task(self._tick())

    async def _listen(self, node: int, sock: socket.socket) -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._connection(reader, writer, node)
        self._node_connections.setdefault(node, set())
        self._servers[node] = await asyncio.start_server(accept, sock=sock, limit=1 << 16)

    async def stop_node(self, node: int) -> None:
        """A node goes down (tests): its port closes, its connections drop, its partitions and coordinators
        move to the next live node (``Nodes.stop``)."""
        self.broker.nodes.stop(node)
        server = self._servers.pop(node, None)
        if server is not None:
            server.close()
        for writer in list(self._node_connections.get(node, ())):
            writer.close()
        await self._notify()

    async def start_node(self, node: int) -> None:
        """The node comes back on its port and takes back what it leads first."""
        await self._listen(node, Server.bind(self.config.host, self.config.ports[node]))
        self.broker.nodes.start(node)
        await self._notify()

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for server in self._servers.values():
            server.close()
        for writer in list(self.connections):
            writer.close()
        if self.tasks:  # closed connections end their tasks; a waiting Fetch ends within a second
            await asyncio.wait(list(self.tasks), timeout=3)
        for task in list(self.tasks):
            task.cancel()
        for server in self._servers.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        self.broker.close()  # durable: flush, checkpoint, close every file

    async def _notify(self) -> None:
        assert self.changed is not None
        async with self.changed:
            self.changed.notify_all()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.broker.tick()
            except Exception:
                log.exception("periodic work of the implementation failed")
            await self._notify()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, node: int = 0) -> None:
        self.connections.add(writer)
        self._node_connections.setdefault(node, set()).add(writer)
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        peer = writer.get_extra_info("peername")
        host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""  # InetAddress.toString of an unresolved peer
        try:
            while True:
                try:
                    prefix = await reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return  # the client closed between frames
                size = frame_size(prefix, self.config.max_request_bytes)
                await self.pool.allocate(size)
                try:
                    try:
                        payload = await read_frame(reader, size)
                    except asyncio.IncompleteReadError:
                        return  # the client closed mid-frame: nothing to answer
                    answer = await self._answer(payload, node, host)
                    del payload
                    if answer:
                        writer.write(answer)
                        await writer.drain()
                finally:
                    await self.pool.release(size)
        except FrameError as exc:
            log.info("closing connection from %s: %s", peer, exc)
        except (ConnectionError, OSError):
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self.connections.discard(writer)
            self._node_connections.get(node, set()).discard(writer)
            if task is not None:
                self.tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, payload: bytes | bytearray, node: int = 0, host: str = "") -> bytes | None:
        request = dataclasses.replace(decode_request(payload, self.config.unstable_api_versions_enable), node_id=node,
                                      client_host=host)
        self.requests[(request.api.name, request.version)] += 1
        try:
            response = self.broker.handle(request)
        except Exception as exc:
            log.exception("%s v%d failed", request.api.name, request.version)
            raise FrameError(f"internal error in {request.api.name}: {exc}") from None
        await self._notify()
        if isinstance(response, Pending):
            response = await self._wait(response)
        if response is None:
            return None
        framed: bytes = encode_response(request, response)
        return framed

    async def _wait(self, pending: Pending) -> Any:
        assert self.changed is not None
        while True:
            remaining = (pending.deadline_ms - self.broker.now()) / 1000
            if remaining <= 0:
                return pending.expire()
            async with self.changed:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), min(remaining, 1.0))
            answer = pending.poll()
            if answer is not None:
                return answer


class ServerThread:
    """A server on a background thread (tests, the pytest fixture): ``bootstrap`` is its address."""

    def __init__(self, config: ServeConfig | None = None, **overrides: Any) -> None:
        self.config = config or ServeConfig(**{"port": 0, **overrides})
        self.socks = Server.bind_all(self.config)
        self.server = Server(self.config)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="txnspec-serve", daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"{self.config.host}:{self.config.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start(self.socks))
        self._ready.set()
        self.loop.run_forever()

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the txnspec server did not start within 10 s")
        return self

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop thread (the implementation is not thread-safe) and return its result."""
        async def run() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop_node(self, node: int) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop_node(node), self.loop).result(10)

    def start_node(self, node: int) -> None:
        asyncio.run_coroutine_threadsafe(self.server.start_node(node), self.loop).result(10)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(config: ServeConfig, announce: Callable[[str], None] = print) -> None:
    """Bind (``PortInUse`` if taken), serve until SIGTERM or SIGINT, then stop cleanly."""
    socks = Server.bind_all(config)

    async def main() -> None:
        server = Server(config)
        await server.start(socks)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        where = f"durable in {config.data_dir}" if config.data_dir else "in memory"
        where_nodes = f"{config.host}:{config.port}" if len(config.ports) == 1 else ", ".join(
            f"node {n} on {config.host}:{p}" for n, p in enumerate(config.ports))
        announce(f"txnspec serve: listening on {where_nodes} (transaction version "
                 f"{config.transaction_version}, {where})")
        await stop.wait()
        await server.stop()

    asyncio.run(main())


__all__ = ["MemoryPool", "PortInUse", "Server", "ServerThread", "read_frame", "serve_forever"]
