"""What a Spark barrier task runs for :mod:`txnspec.checker.spark_bfs`: one worker of the partitioned search.

What is modelled
    A task of the search's one barrier stage is one worker of :mod:`txnspec.checker.partitioned` (it owns the
    fingerprints ``f % partitions`` equal to its partition number, keeps its visited set and its part of the level
    in memory from the first level to the last, and exchanges fingerprints and path keys with the other tasks each
    level). :func:`run_worker`:

    1. builds the model (``plan.factory()``), opens a listener for the other tasks (used if they exchange through
       sockets), connects to the coordinator (:mod:`multiprocessing.connection`, TCP, the run's authentication key)
       and sends a :class:`Hello`: its partition, its host, its listener's address and :func:`probe`, the
       ``hash()`` of a few values (``None``, strings, tuples, a frozenset, the model's initial states);
    2. receives the coordinator's :class:`Setup`: ``hash()`` fingerprints if every task's probe was equal (they
       share the hash salt and ``None``'s address: PySpark sets ``PYTHONHASHSEED`` and forks a host's Python workers
       from one daemon), else :mod:`.stable_fingerprint`'s; the batches through files in a directory if every task
       runs on one host, else through sockets (:class:`~txnspec.checker.exchange.Sockets`);
    3. answers the coordinator's requests (:func:`txnspec.checker.shards._serve`, as a forked worker does) until it
       is told to stop.

Assumes
    ``plan.factory`` is picklable and builds the same model in every process (the same successors in the same
    order); a value ``hash()`` gives the same number in two tasks whose probes agree (the probe covers the kinds of
    values the spec's states hold: a value hashed by its address, other than ``None``, would not be seen).

Left out
    Everything the coordinator decides (:mod:`txnspec.checker.spark_bfs`).
"""

from __future__ import annotations

import gc
import inspect
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Client
from typing import Any

from txnspec.checker.exchange import Exchange, Files, Sockets
from txnspec.checker.model import Model
from txnspec.checker.partitioned import _Worker
from txnspec.checker.shards import _serve
from txnspec.checker.stable_fingerprint import Fingerprinter

ModelFactory = Callable[[], Model[Any]]
HASH, STABLE, AUTO = "hash", "stable", "auto"  # fingerprints
FILES, SOCKETS = "files", "sockets"  # transports (and AUTO)
PROBED = 256  # states hashed by the probe


@dataclass(frozen=True)
class Plan:
    """What every task is shipped: the model's recipe, the run's choices, where the coordinator listens."""

    factory: ModelFactory
    names: tuple[str, ...]  # the properties judged, in the coordinator's order
    symmetry: bool
    partitions: int
    coordinator: tuple[str, int]
    authkey: bytes


@dataclass(frozen=True)
class Hello:
    partition: int
    host: str
    address: tuple[str, int]  # this task's listener for the other tasks
    probe: tuple[int, ...]


@dataclass(frozen=True)
class Setup:
    fingerprints: str  # HASH or STABLE
    transport: str  # FILES or SOCKETS
    directory: str  # FILES: the directory, on the tasks' one host
    addresses: tuple[tuple[str, int], ...]  # SOCKETS: every task's listener, by partition


def probe(model: Model[Any], canonical: Callable[[Any], Any] | None) -> tuple[int, ...]:
    """``hash()`` of values whose hash depends on the process: strings (the salt), ``None`` (its address in
    Python 3.11), tuples and frozensets of them, the first :data:`PROBED` states breadth first (and their
    representatives), and every class and function of the modules that define them and of this package (a class
    hashes by its address, and a state may hold one: the spec's producer holds the request class it awaits; the
    address depends on what the process did before, so a reused Python worker and a fresh one disagree)."""
    values: list[Any] = [None, "txnspec", ("producer-0", None, 3), frozenset({"a", "b", None}), b"\x00", 1.5]
    level = list(model.init_states())
    while level and len(values) < PROBED:
        values.extend(level)
        if canonical is not None:
            values.extend(canonical(state) for state in level)
        level = [successor for state in level for _, successor in model.next_steps(state)][:PROBED]
    values = values[:PROBED]
    names = {type(value).__module__ for value in values} | {name for name in sys.modules if name.startswith("txnspec.")}
    for name in sorted(names):
        module = sys.modules.get(name)
        if module is not None:
            values.append((name, tuple(sorted((key, hash(value)) for key, value in vars(module).items()
                                              if isinstance(value, type) or inspect.isroutine(value)))))
    return tuple(hash(value) for value in values)


def run_worker(plan: Plan, partition: int, host: str, barrier: Callable[[], None] = lambda: None) -> int:
    """Serve as worker ``partition`` until the coordinator says stop; returns how many levels it answered for.
    ``barrier`` waits for every task (Spark's ``BarrierTaskContext.barrier``) before the files are removed."""
    model = plan.factory()
    canonical = model.symmetry if plan.symmetry else None
    by_name = {p.name: p for p in model.properties}
    properties = [by_name[name] for name in plan.names]
    sockets = Sockets(partition, host, plan.authkey)
    connection = Client(plan.coordinator, authkey=plan.authkey)
    setup: Setup | None = None
    try:
        connection.send(Hello(partition, host, sockets.address, probe(model, canonical)))
        setup = connection.recv()
        assert setup is not None
        exchange: Exchange
        if setup.transport == SOCKETS:
            sockets.connect(setup.addresses)
            exchange = sockets
        else:
            os.makedirs(setup.directory, exist_ok=True)
            exchange = Files(setup.directory)
        fingerprint = hash if setup.fingerprints == HASH else Fingerprinter().fingerprint
        worker = _Worker(model, canonical, properties, partition, plan.partitions, setup.directory,
                         exchange=exchange, fingerprint=fingerprint)
        collecting = gc.isenabled()
        try:
            _serve(worker, connection)  # type: ignore[arg-type]  # pauses the cyclic collector: states form no cycles
        finally:
            if collecting:
                gc.enable()
    finally:
        connection.close()
        sockets.close()
    barrier()
    if setup.transport == FILES and partition == 0:
        shutil.rmtree(setup.directory, ignore_errors=True)
    return partition


def barrier_task(plan: Plan, items: Iterable[Any]) -> Iterator[int]:
    """The function of the barrier stage's ``mapPartitions``: this task's worker."""
    from pyspark import BarrierTaskContext

    for _ in items:  # the partition's number: read, as PySpark expects its input read
        pass
    context = BarrierTaskContext.get()
    me = context.partitionId()
    host = context.getTaskInfos()[me].address.rsplit(":", 1)[0]
    yield run_worker(plan, me, host, context.barrier)
