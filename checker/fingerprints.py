"""Compact storage for large searches: a set of 64-bit fingerprints, and queues of states kept on disk.

What is modelled
    What TLC keeps for a state it has seen: a 64-bit fingerprint in a hash table, not the state
    (:class:`FingerprintSet`: open addressing over an ``array('q')``, 8 bytes a slot, at most three quarters
    full, so 11 to 21 bytes a state, and half as much again for a moment while the table grows), and what it
    keeps of a breadth-first queue: states on disk, read back in order (:class:`Spool`: pickled in chunks, so
    that sub-states shared by neighbouring states are written once), or in memory up to a bound and on disk
    beyond it (:class:`Level`, the workers' queue).

Assumptions
    A fingerprint is the state's ``hash()``: 64 bits on the platforms we run on, equal for equal states in
    one process and in processes forked from it (string hashes are salted per process tree). Two different
    states with one fingerprint would be taken for one (a collision): :func:`collision_probability` gives
    the chance, as TLC reports it.

Left out
    Fingerprint tables on disk (TLC's ``DiskFPSet``): the table stays in memory, which bounds a search to
    some hundred million states per 4 GB.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

_EMPTY = 0  # the table's free slot; the fingerprint 0 is kept beside the table
_MIX = 0x9E3779B97F4A7C15  # Fibonacci hashing spreads fingerprints whose low bits are alike
_MASK64 = (1 << 64) - 1


class FingerprintSet:
    """A set of 64-bit fingerprints in one ``array('q')`` (open addressing with linear probing).

    >>> seen = FingerprintSet()
    >>> seen.add(42), seen.add(42), 42 in seen, 7 in seen, len(seen)
    (True, False, True, False, 1)
    """

    __slots__ = ("_bits", "_count", "_has_zero", "_slots")

    def __init__(self, capacity: int = 1 << 16) -> None:
        bits = max(4, (max(capacity, 8) * 4 // 3).bit_length())
        self._bits = bits
        self._slots = array("q", bytes(8 << bits))
        self._count = 0
        self._has_zero = False

    def __len__(self) -> int:
        return self._count

    def _probe(self, key: int) -> int:
        slots, shift, mask = self._slots, 64 - self._bits, (1 << self._bits) - 1
        i = ((key * _MIX) & _MASK64) >> shift
        while True:
            held = slots[i]
            if held in (key, _EMPTY):
                return i
            i = (i + 1) & mask

    def __contains__(self, fingerprint: int) -> bool:
        if fingerprint == _EMPTY:
            return self._has_zero
        return self._slots[self._probe(fingerprint)] == fingerprint

    def add(self, fingerprint: int) -> bool:
        """Add ``fingerprint``; True when it was new (one probe: the searches call this, not ``in``, per
        successor)."""
        if fingerprint == _EMPTY:
            new, self._has_zero = not self._has_zero, True
            self._count += new
            return new
        slots, mask = self._slots, (1 << self._bits) - 1
        i = ((fingerprint * _MIX) & _MASK64) >> (64 - self._bits)
        while True:  # _probe, inlined: this is the search's innermost loop
            held = slots[i]
            if held == fingerprint:
                return False
            if held == _EMPTY:
                break
            i = (i + 1) & mask
        slots[i] = fingerprint
        self._count += 1
        if self._count * 4 > len(self._slots) * 3:  # linear probing stays short up to 3/4 full (Knuth 6.4)
            self._grow()
        return True

    def _grow(self) -> None:
        old = self._slots
        self._bits += 1
        self._slots = array("q", bytes(8 << self._bits))
        for key in old:
            if key != _EMPTY:
                self._slots[self._probe(key)] = key

    @property
    def nbytes(self) -> int:
        return self._slots.itemsize * len(self._slots)

    def members(self) -> array[int]:
        """The fingerprints held, in slot order (as one array, to ship between processes).

        >>> seen = FingerprintSet()
        >>> for fp in (0, 5, -3): _ = seen.add(fp)
        >>> sorted(seen.members())
        [-3, 0, 5]
        """
        held = array("q", (key for key in self._slots if key != _EMPTY))
        if self._has_zero:
            held.append(_EMPTY)
        return held


def collision_probability(states: int) -> float:
    """The chance that two of ``states`` distinct states share a 64-bit fingerprint (TLC's "calculated,
    optimistic" figure: n(n-1)/2 pairs, each colliding with probability 2^-64)."""
    return states * (states - 1) / 2 / 2.0 ** 64


class Spool:
    """States appended in order, kept in memory up to ``chunk`` at a time and otherwise on disk, read back in
    the same order (a breadth-first queue that does not live in memory)."""

    def __init__(self, directory: str | None = None, chunk: int = 512) -> None:
        fd, self.path = tempfile.mkstemp(prefix="txnspec-level-", suffix=".pickle", dir=directory)
        self._file = os.fdopen(fd, "w+b")
        self._chunk = chunk
        self._pending: list[Any] = []
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, state: Any) -> None:
        self._pending.append(state)
        self._length += 1
        if len(self._pending) >= self._chunk:
            self._flush()

    def extend(self, states: Iterable[Any]) -> None:
        for state in states:
            self.append(state)

    def _flush(self) -> None:
        if self._pending:
            pickle.dump(self._pending, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._pending = []

    def __iter__(self) -> Iterator[Any]:
        """The states in order (the spool may not be appended to while it is read)."""
        self._flush()
        self._file.flush()
        with open(self.path, "rb") as reader:
            while True:
                try:
                    chunk = pickle.load(reader)
                except EOFError:
                    return
                yield from chunk

    def close(self) -> None:
        self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


IN_MEMORY = 1_000_000
"""States a worker holds in memory per queue (its part of a level, or of the successors it found); the rest go to
a :class:`Spool` on disk, so a search far wider than the benchmarks' does not run out of memory (a state held is
some hundreds of bytes, shared parts aside). A state spooled costs its pickling: `full` to depth 16 with two
workers and a limit of 100,000 took 70 s instead of 41 for 191 bytes a state instead of 285, so the limit is
kept well above the levels of the runs that fit anyway."""


class Level:
    """A level in memory (workers trade memory for speed) up to ``limit`` states, the rest spooled to disk;
    it closes like a :class:`Spool`."""

    def __init__(self, directory: str | None = None, limit: int | None = None) -> None:
        self.directory, self.limit = directory, IN_MEMORY if limit is None else limit
        self.head: list[Any] = []
        self.tail: Spool | None = None

    def __len__(self) -> int:
        return len(self.head) + (len(self.tail) if self.tail is not None else 0)

    def append(self, state: Any) -> None:
        if len(self.head) < self.limit:
            self.head.append(state)
            return
        if self.tail is None:
            self.tail = Spool(self.directory)
        self.tail.append(state)

    def extend(self, states: Iterable[Any]) -> None:
        for state in states:
            self.append(state)

    def __iter__(self) -> Iterator[Any]:
        yield from self.head
        if self.tail is not None:
            yield from self.tail

    def drain(self) -> Iterator[Any]:
        """The states in order, each let go as it is handed out: a level expanded is not read again, and its
        states' memory goes to their successors (the level and the next one are not both held whole)."""
        head = self.head
        for position in range(len(head)):
            state, head[position] = head[position], None
            yield state
        head.clear()
        if self.tail is not None:
            yield from self.tail

    def close(self) -> None:
        self.head.clear()
        if self.tail is not None:
            self.tail.close()
            self.tail = None
