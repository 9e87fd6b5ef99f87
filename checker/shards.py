"""The shards of the level-by-level search: a contiguous part of a level, expanded in this process or a worker.

What is modelled
    A :class:`_Shard` holds a contiguous part of the current level (on disk with ``spill``), expands it into the
    fingerprints of its successors (first occurrences, with the parent's position: :class:`_Expansion`), keeps the
    successors the coordinator says are new and judges the properties on them (:class:`_Judgement`), and gives or
    takes states at its ends when the coordinator rebalances. :class:`_Remote` runs a shard in a forked worker
    process (:func:`_serve` answers its requests over a pipe), :class:`_Local` in this process; :func:`_call_all`
    sends one request to every shard and collects the answers in shard order. The coordinator's side is
    :mod:`txnspec.checker.levels`; :mod:`txnspec.checker.partitioned` drives the same shards.

Assumptions
    Forked workers share the coordinator's string-hash salt, so a state's fingerprint is the same in every process.
    States form no reference cycles: the cyclic garbage collector is paused while a search runs
    (:func:`run_without_gc`).

Left out
    Workers on other machines (Spark: :mod:`txnspec.checker.spark_bfs`); a worker that dies fails the search.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import resource
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from txnspec.checker.fingerprints import Level, Spool
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import action_kind


@dataclass
class _Expansion:
    """A shard's answer to "expand": its successors' fingerprints (first occurrences) and their parents."""

    fingerprints: array[int]
    parents: array[int]
    successor_counts: array[int]
    kinds: dict[str, int]
    terminal: list[int]  # positions of expanded states without successors that are not final
    # on the last level a depth bound lets the search reach (nothing is kept): property name -> the first
    # candidate, by its index among ``fingerprints``, where that property is hit
    hits: dict[str, int] = field(default_factory=dict)


@dataclass
class _Judgement:
    """A shard's answer to "accept": how many new states it kept, and its first hit of each property."""

    kept: int
    first_hits: dict[str, int]  # property name -> position among the shard's kept states


class _Shard:
    """A contiguous part of the current level, and what it expands into (on disk with ``spill``)."""

    def __init__(self, model: Model[Any], canonical: Callable[[Any], Any] | None,
                 properties: Sequence[Property[Any]], directory: str, spill: bool) -> None:
        self.model = model
        self.canonical = canonical
        self.properties = {p.name: p for p in properties}
        self.directory = directory
        self.spill = spill
        self.started_with = _resident_bytes()
        self.level: Spool | Level = self._queue()
        self.candidates: Spool | Level | None = None

    def _queue(self) -> Spool | Level:
        return Spool(self.directory) if self.spill else Level(self.directory)

    def load(self, states: list[Any]) -> None:
        self.level.close()
        self.level = self._queue()
        self.level.extend(states)

    def size(self) -> int:
        return len(self.level)

    def expand(self, last: Sequence[str] | None = None) -> _Expansion:
        """Expand the level into candidates; with ``last`` (the pending properties) the new level is the last one
        the search reaches, so its candidates are judged here on ``last`` and not kept (a depth-bounded run
        never holds its widest level)."""
        next_steps, canonical, is_final = self.model.next_steps, self.canonical, self.model.is_final
        fingerprints, parents, counts = array("q"), array("i"), array("i")
        kinds: dict[str, int] = {}
        terminal: list[int] = []
        local: set[int] = set()
        candidates = self._queue() if last is None else None
        judged = [self.properties[name] for name in last or ()]
        hits: dict[str, int] = {}
        level = self.level
        for position, state in enumerate(level.drain() if isinstance(level, Level) else level):
            successors = list(next_steps(state))
            counts.append(len(successors))
            if not successors and (is_final is None or not is_final(state)):
                terminal.append(position)
            for action, successor in successors:
                kind = action_kind(action)
                kinds[kind] = kinds.get(kind, 0) + 1
                fingerprint = hash(canonical(successor) if canonical is not None else successor)
                if fingerprint in local:
                    continue
                local.add(fingerprint)
                fingerprints.append(fingerprint)
                parents.append(position)
                if candidates is not None:
                    candidates.append(successor)
                    continue
                for prop in judged:
                    if prop.name not in hits and _hit(prop, successor):
                        hits[prop.name] = len(fingerprints) - 1
        self.candidates = candidates
        return _Expansion(fingerprints, parents, counts, kinds, terminal, hits)

    def accept(self, new: bytes, pending: Sequence[str]) -> _Judgement:
        """Keep the candidates marked in ``new`` as the next level; judge the pending properties on them."""
        assert self.candidates is not None
        kept = self._queue()
        checks = [self.properties[name] for name in pending]
        hits: dict[str, int] = {}
        for is_new, state in zip(new, self.candidates, strict=True):
            if not is_new:
                continue
            for prop in checks:
                if prop.name not in hits and _hit(prop, state):
                    hits[prop.name] = len(kept)
            kept.append(state)
        self.candidates.close()
        self.candidates = None
        self.level.close()
        self.level = kept
        return _Judgement(len(kept), hits)

    def give(self, head: int, tail: int) -> tuple[list[Any], list[Any]]:
        """Hand over the first ``head`` and the last ``tail`` states of the next level (rebalancing)."""
        states = self.level
        size = len(states)
        given_head: list[Any] = []
        given_tail: list[Any] = []
        kept = self._queue()
        for position, state in enumerate(states):
            if position < head:
                given_head.append(state)
            elif position >= size - tail:
                given_tail.append(state)
            else:
                kept.append(state)
        states.close()
        self.level = kept
        return given_head, given_tail

    def take(self, head: list[Any], tail: list[Any]) -> None:
        """Receive states before and after this shard's own (rebalancing)."""
        merged = self._queue()
        merged.extend(head)
        merged.extend(self.level)
        merged.extend(tail)
        self.level.close()
        self.level = merged

    def memory(self) -> int:
        """This shard's process: how far its peak resident memory rose above what it had when it started."""
        return max(0, _resident_bytes() - self.started_with)

    def close(self) -> None:
        self.level.close()
        if self.candidates is not None:
            self.candidates.close()


def run_without_gc(search: Any) -> None:
    """``search.run()`` with the cyclic garbage collector paused (states form no cycles), then ``search.close()``
    (its workers stopped) whatever happened."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        search.run()
    finally:
        search.close()
        if collecting:
            gc.enable()


def _hit(prop: Property[Any], state: Any) -> bool:
    """An ``always`` property is hit where it fails, a ``sometimes`` property where it holds."""
    holds = prop.condition(state)
    return not holds if prop.expectation is Expectation.ALWAYS else bool(holds)


def _serve(shard: _Shard, connection: Connection) -> None:
    """A worker process: run the coordinator's requests on its shard until told to stop."""
    gc.disable()  # states form no cycles (see explicit.py)
    shard.started_with = _current_resident_bytes()
    try:
        while True:
            request, args = connection.recv()
            if request == "stop":
                return
            try:
                connection.send((True, getattr(shard, request)(*args)))
            except BaseException as exc:
                connection.send((False, f"{type(exc).__name__}: {exc}"))
    finally:
        shard.close()
        connection.close()


class _Remote:
    """The coordinator's handle on a shard in a forked worker process."""

    def __init__(self, shard: _Shard, context: Any) -> None:
        self.connection, theirs = multiprocessing.Pipe()
        self.process = context.Process(target=_serve, args=(shard, theirs), daemon=True)
        self.process.start()
        theirs.close()

    def send(self, request: str, *args: Any) -> None:
        self.connection.send((request, args))

    def receive(self) -> Any:
        ok, answer = self.connection.recv()
        if not ok:
            raise RuntimeError(f"a worker failed: {answer}")
        return answer

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.connection.send(("stop", ()))
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class _Local:
    """The same handle on a shard in this process."""

    def __init__(self, shard: _Shard) -> None:
        self.shard = shard
        self._answer: Any = None

    def send(self, request: str, *args: Any) -> None:
        self._answer = getattr(self.shard, request)(*args)

    def receive(self) -> Any:
        return self._answer

    def close(self) -> None:
        self.shard.close()


def _call_all(shards: Sequence[_Remote | _Local], request: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
    for shard, arguments in zip(shards, args, strict=True):
        shard.send(request, *arguments)
    return [shard.receive() for shard in shards]


def _resident_bytes() -> int:
    """Peak resident memory of this process (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _current_resident_bytes() -> int:
    """Resident memory now (Linux's /proc; the peak where that is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return _resident_bytes()
