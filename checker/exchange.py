"""How the workers of the partitioned search hand each other their batches: files in a shared directory, or sockets.

What is modelled
    :mod:`.partitioned`'s workers exchange a level's batches (fingerprints, path keys, the owners' answers, states
    moved to even out the parts) as named blobs: ``open(level, a, b, what, mode)`` names the blob ``a-b.what`` of
    ``level`` between workers ``a`` and ``b``, written by one of them and read by the other (the writer also reads
    back its own ``key`` blobs). The coordinator orders the steps (every write of a step is done before a read of
    the next is asked for), so a blob is always complete when it is read.

    * :class:`Files`: one file a blob in a directory every worker sees (forked workers, or Spark tasks that all
      run on one host);
    * :class:`Sockets`: each worker sends a blob to the other worker it concerns over a
      :mod:`multiprocessing.connection` (TCP, an authentication key), where a reader thread keeps it until read.
      For Spark tasks on several hosts, which share no directory.

    States moved between workers travel as :mod:`.state_codec` bytes (:func:`pack_states`), not pickled one by one.

Assumes
    The workers' addresses are reachable from each other; a blob is read at most once by each of its two workers
    (a socket exchange forgets it then, and drops the copies of its own writes two levels on).

Leaves out
    Encryption (the authentication key keeps strangers out, it does not hide the bytes) and reconnecting: a
    broken connection fails the search.
"""

from __future__ import annotations

import io
import os
import pickle
import threading
from collections.abc import Sequence
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, BinaryIO, Protocol, cast

from txnspec.checker.state_codec import Batch, encode

WAIT = 600.0  # seconds a read waits for its blob: a peer that sent nothing by then is gone


class Exchange(Protocol):
    def open(self, level: int, a: int, b: int, what: str, mode: str) -> BinaryIO: ...

    def close(self) -> None: ...


class Files:
    """Blobs as files in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, level: int, a: int, b: int, what: str, mode: str) -> BinaryIO:
        return cast(BinaryIO, open(os.path.join(self.directory, f"{level}-{a}-{b}.{what}"), mode))

    def close(self) -> None:
        pass


class _Outgoing(io.BytesIO):
    """A blob being written: sent when its ``with`` block ends."""

    def __init__(self, exchange: Sockets, name: tuple[int, int, int, str]) -> None:
        super().__init__()
        self.exchange, self.name = exchange, name

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.exchange.put(self.name, self.getvalue())
        super().__exit__(kind, value, traceback)


class Sockets:
    """Blobs sent to the other worker over TCP. Built in two steps: :meth:`listen` (the address to tell the
    others), then :meth:`connect` once every worker's address is known."""

    def __init__(self, me: int, host: str, authkey: bytes) -> None:
        self.me, self.authkey = me, authkey
        self.listener = Listener((host, 0), authkey=authkey)
        self.address: tuple[str, int] = self.listener.address
        self.outgoing: dict[int, Connection] = {}
        self.blobs: dict[tuple[int, int, int, str], bytes] = {}
        self.arrived = threading.Condition()
        self.readers: list[threading.Thread] = []
        self.failure: BaseException | None = None

    def connect(self, addresses: Sequence[tuple[str, int]]) -> None:
        """Connect to every other worker and accept their connections (each worker sends on its own)."""
        others = len(addresses) - 1
        accepting = threading.Thread(target=self._accept, args=(others,), daemon=True)
        accepting.start()
        for peer, address in enumerate(addresses):
            if peer != self.me:
                connection = Client(address, authkey=self.authkey)
                connection.send(self.me)
                self.outgoing[peer] = connection
        accepting.join(WAIT)
        if accepting.is_alive() or self.failure is not None:
            raise RuntimeError(f"worker {self.me}: the other workers did not all connect ({self.failure})")

    def _accept(self, others: int) -> None:
        try:
            for _ in range(others):
                connection = self.listener.accept()
                peer = connection.recv()
                reader = threading.Thread(target=self._read, args=(peer, connection), daemon=True)
                reader.start()
                self.readers.append(reader)
        except BaseException as exc:  # reported by connect
            self.failure = exc

    def _read(self, peer: int, connection: Connection) -> None:
        try:
            while True:
                name = connection.recv()
                data = connection.recv_bytes()
                with self.arrived:
                    self.blobs[name] = data
                    self.arrived.notify_all()
        except (EOFError, OSError) as exc:
            with self.arrived:
                self.failure = self.failure or exc
                self.arrived.notify_all()

    def put(self, name: tuple[int, int, int, str], data: bytes) -> None:
        level, a, b, _ = name
        with self.arrived:  # this worker's own blobs of two levels back are read by now
            for old in [n for n in self.blobs if n[0] < level - 1 and self.me in (n[1], n[2])]:
                del self.blobs[old]
            self.blobs[name] = data  # the writer may read its blob back (the path keys it sent)
        connection = self.outgoing[b if a == self.me else a]
        connection.send(name)
        connection.send_bytes(data)

    def open(self, level: int, a: int, b: int, what: str, mode: str) -> BinaryIO:
        name = (level, a, b, what)
        if "w" in mode:
            return _Outgoing(self, name)
        with self.arrived:
            if not self.arrived.wait_for(lambda: name in self.blobs or self.failure is not None, WAIT) \
                    or name not in self.blobs:
                raise RuntimeError(f"worker {self.me}: blob {name} never came ({self.failure or 'timed out'})")
            return io.BytesIO(self.blobs.pop(name))

    def close(self) -> None:
        for connection in self.outgoing.values():
            connection.close()
        self.listener.close()


def pack_states(items: Sequence[tuple[bytes, Any]]) -> bytes:
    """``(path key, state)`` pairs (keys of one length) as bytes: the keys joined and the states'
    :class:`~txnspec.checker.state_codec.Batch` (its parts are bytes, so the pickle below copies bytes only)."""
    batch = encode([state for _, state in items])
    return pickle.dumps((b"".join(key for key, _ in items), batch.tables, batch.code, batch.width, batch.rows),
                        protocol=5)


def unpack_states(data: bytes) -> list[tuple[bytes, Any]]:
    keys, tables, code, width, rows = pickle.loads(data)
    states = Batch(tables, code, width, rows).decode()
    size = len(keys) // len(states) if states else 0
    return [(keys[i * size:(i + 1) * size], state) for i, state in enumerate(states)]
