"""Memory bounded across connections (``queued.max.request.bytes``): 8 clients each half-way through a declared
100 MiB frame; the server (its own process, ``txnspec serve``) reads at most what the pool lets it, the others
wait unread, and its resident memory stays near its start. With ``--queued-max-request-bytes -1`` (unbounded,
Kafka's default) the same clients make it grow by hundreds of MiB: the bound is what keeps it small."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from txnspec.audit.connection import BrokerConnection
from txnspec.serve.server import MemoryPool, read_frame

CLI = "import sys; from txnspec.cli import main; sys.exit(main())"
FRAME = 100 * 1024 * 1024
HALF = FRAME // 2
CLIENTS = 8
MIB = 1024 * 1024


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def serve(*args: str) -> Iterator[tuple[int, int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--port", str(port), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening" in line, (line, process.stderr.read() if process.poll() is not None else "")
        yield process.pid, port
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def half_frames(port: int) -> tuple[list[socket.socket], list[int]]:
    """8 connections, each declaring a 100 MiB frame and sending half of it (as far as the server reads)."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(CLIENTS)]
    sent = [0] * CLIENTS
    chunk = b"\0" * MIB

    def push(i: int) -> None:
        s = sockets[i]
        s.settimeout(3)  # a connection the server does not read blocks here: stop after 3 s of no progress
        try:
            s.sendall(struct.pack(">i", FRAME))
            while sent[i] < HALF:
                s.sendall(chunk)
                sent[i] += len(chunk)
        except (TimeoutError, OSError):
            pass

    threads = [threading.Thread(target=push, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return sockets, sent


def test_eight_half_sent_100_mib_frames_keep_the_server_small() -> None:
    with serve("--queued-max-request-bytes", str(FRAME)) as (pid, port):
        time.sleep(0.5)
        before = rss_mib(pid)
        sockets, sent = half_frames(port)
        time.sleep(1)
        during = rss_mib(pid)
        print(f"bounded: RSS {before:.0f} -> {during:.0f} MiB, sent {[s // MIB for s in sent]} MiB")
        # one frame takes the pool: its client sends its half; the others are not read beyond socket buffers
        assert sum(1 for s in sent if s >= HALF) == 1
        assert during - before < 100, (before, during)  # one half frame (50 MiB) and slack, not 8 of them
        # the server still answers a new client once the big frames are gone
        for s in sockets:
            s.close()
        time.sleep(0.5)
        conn = BrokerConnection("127.0.0.1", port, timeout=10)
        assert conn.versions
        conn.close()


def test_unbounded_the_same_clients_grow_it_by_hundreds_of_mib() -> None:
    """The control: Kafka's default (-1) reads every frame as it comes."""
    with serve("--queued-max-request-bytes", "-1") as (pid, port):
        time.sleep(0.5)
        before = rss_mib(pid)
        sockets, sent = half_frames(port)
        time.sleep(1)
        during = rss_mib(pid)
        print(f"unbounded: RSS {before:.0f} -> {during:.0f} MiB, sent {[s // MIB for s in sent]} MiB")
        for s in sockets:
            s.close()
    assert all(s >= HALF for s in sent)
    assert during - before > 300  # 8 half frames: 400 MiB


def test_the_pool_lets_one_frame_go_below_zero_and_waits_while_nothing_is_left() -> None:
    async def run() -> list[str]:
        pool, order = MemoryPool(100), []

        async def take(name: str, size: int) -> None:
            await pool.allocate(size)
            order.append(name)

        await pool.allocate(150)  # non-strict: more than the capacity while any is left
        assert pool.available == -50
        waiting = asyncio.ensure_future(take("second", 10))
        await asyncio.sleep(0.05)
        assert order == []  # nothing left: it waits
        await pool.release(150)
        await asyncio.wait_for(waiting, 1)
        assert pool.available == 90
        return order

    assert asyncio.run(run()) == ["second"]


def test_read_frame_reads_a_frame_in_chunks_and_reports_a_short_one() -> None:
    async def run() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"a" * 3_000_000)
        reader.feed_eof()
        assert bytes(await read_frame(reader, 3_000_000)) == b"a" * 3_000_000
        short = asyncio.StreamReader()
        short.feed_data(b"b" * 10)
        short.feed_eof()
        with pytest.raises(asyncio.IncompleteReadError):
            await read_frame(short, 11)

    asyncio.run(run())


def test_bad_memory_options_exit_2() -> None:
    for option, value in (("--queued-max-request-bytes", "0"), ("--socket-request-max-bytes", "-5")):
        done = subprocess.run([sys.executable, "-c", CLI, "serve", "--port", "0", option, value],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and option in done.stderr and "Traceback" not in done.stderr
