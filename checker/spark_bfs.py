"""Breadth-first search on Spark: the partitioned search's workers as the tasks of one barrier stage.

What is modelled
    The search of :func:`txnspec.checker.partitioned.check_partitioned` (so of :func:`txnspec.checker.explicit.check`:
    the same distinct states, transitions and depth, the same verdicts and the same shortest counterexamples, step
    for step, the same stops under caps and on the first violation), with its workers run as Spark tasks. One
    barrier stage (``parallelize(range(P), P).barrier().mapPartitions``, as Horovod and XGBoost on Spark run their
    workers) starts every task at once; each task is one worker (:mod:`txnspec.checker.spark_tasks`) that owns the
    fingerprints ``f % P`` equal to its partition number and keeps its visited set and its part of the level in
    memory across levels. The coordinator runs here, in the driver: it listens on a
    :mod:`multiprocessing.connection` socket (TCP, a fresh authentication key), each task connects and says hello,
    and from there the coordinator sends the partitioned search's requests (expand, decide, accept, the cuts and
    rebalancing) as it sends them to forked workers. So a run costs one Spark job whatever its number of levels:
    Spark's own floor of about 0.7 s a job (one job a level, before) is paid once.

    Between tasks, the level's batches (fingerprints, path keys, which candidates won, states moved to even out the
    parts, as :mod:`.state_codec` bytes) go through files in a directory when every task runs on one host, and
    through sockets otherwise (:mod:`txnspec.checker.exchange`); the driver sees counts and a few keys a level.

Fingerprints
    ``hash()`` when the tasks agree on it: each task sends the ``hash()`` of a probe (``None``, strings, tuples, the
    model's initial states) and the coordinator compares them; if any differs (tasks in Python workers of several
    executors: ``None``'s address, another hash salt), every task uses :mod:`.stable_fingerprint`. The driver
    computes no fingerprint: it asks task 0 for the initial states'. A collision would hide a state: the result
    reports its chance.

Assumes
    The model is built by ``factory``, a picklable callable without arguments, in the driver and once in each task;
    its successor function is deterministic. Executors import this package, reach the driver's address
    (``spark.driver.host``) and each other's hosts; the master offers at least as many task slots as partitions (a
    barrier stage runs all its tasks at once, or not at all).

Left out
    ``leads_to`` properties and the state graph (``ValueError``: liveness needs every edge, so it stays with the
    exact engine, in one process); the coverage of a level where the search stopped within it is counted for the
    whole level. A task that fails fails the barrier stage: Spark runs the stage again, every task afresh, and the
    coordinator starts the search again from its first level when the new tasks say hello (up to
    :data:`ATTEMPTS` times); a worker's request that raises fails the search at once (the model is at fault, a
    retry would fail the same way).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import queue
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Listener
from typing import Any

from txnspec.checker import spark_tasks as tasks
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.partitioned import _Search
from txnspec.checker.report import CheckResult, check_bounds
from txnspec.checker.shards import run_without_gc
from txnspec.checker.spark_tasks import AUTO, FILES, HASH, SOCKETS, STABLE, ModelFactory

ProgressCallback = Callable[[int, int, float], None]
"""Called after each level with ``(distinct states, depth, states per second)``."""
ATTEMPTS = 3  # runs of the barrier stage the coordinator serves (Spark retries a failed one)
HELLO_WAIT = 600.0  # seconds to wait for the tasks (a loaded cluster may start them late)


class TaskLost(ConnectionError):
    """A task's connection broke: its barrier stage failed."""


def check_spark(factory: ModelFactory, context: Any, *, properties: Sequence[str] | None = None,
                max_states: int | None = None, max_depth: int | None = None, symmetry: bool = True,
                check_deadlock: bool = True, partitions: int | None = None,
                progress: ProgressCallback | None = None, stop_on_violation: bool = False,
                fingerprints: str = AUTO, transport: str = AUTO) -> CheckResult:
    """Explore the model ``factory()`` builds breadth first on the Spark context ``context``.

    Same parameters and result as :func:`txnspec.checker.explicit.check` (``partitions``: how many tasks hold the
    states, default the context's parallelism), without ``leads_to`` properties: they need the whole state graph,
    so liveness is checked locally, and naming one is a ``ValueError``. ``fingerprints``: ``"auto"`` (``hash()``
    when the tasks' probes agree) or ``"stable"``; ``transport``: ``"auto"`` (files when the tasks share a host),
    ``"files"`` or ``"sockets"``. The result's ``store`` names the master and how the tasks worked.
    """
    check_bounds(max_states=max_states, max_depth=max_depth, partitions=partitions)
    if fingerprints not in (AUTO, STABLE):
        raise ValueError(f"fingerprints must be 'auto' or 'stable', not {fingerprints!r}")
    if transport not in (AUTO, FILES, SOCKETS):
        raise ValueError(f"transport must be 'auto', 'files' or 'sockets', not {transport!r}")
    model = factory()
    selected = model.safety_properties(properties, "the Spark search")
    selected.sort(key=lambda p: p.expectation is not Expectation.ALWAYS)  # explicit.py's order
    slots = context.defaultParallelism
    partitions = partitions or slots
    if partitions > slots:
        raise ValueError(f"a barrier stage runs all its tasks at once: {partitions} partitions need {partitions} "
                         f"task slots, and {context.master} offers {slots}")
    host = context.getConf().get("spark.driver.host", "127.0.0.1")
    coordinator = _Coordinator(context, host, partitions, fingerprints, transport)
    plan = tasks.Plan(factory, tuple(p.name for p in selected), symmetry and model.symmetry is not None,
                      partitions, coordinator.address, coordinator.authkey)
    started = time.perf_counter()
    with coordinator:
        coordinator.start(plan)
        for attempt in range(1, ATTEMPTS + 1):
            handles, setup = coordinator.connect()
            search = _SparkSearch(model, selected, model.symmetry if plan.symmetry else None, partitions,
                                  max_states or sys.maxsize, max_depth or sys.maxsize, stop_on_violation, handles,
                                  progress)
            try:
                run_without_gc(search)
            except TaskLost:
                if attempt == ATTEMPTS:
                    raise
                continue
            coordinator.finish()
            result = search.result(check_deadlock)
            how = f"{setup.fingerprints} fingerprints, {setup.transport}"
            # the seconds from the job's start: the tasks' start and their model's build are the search's cost
            return dataclasses.replace(result, store=f"spark ({context.master}, {partitions} partitions, {how})",
                                       seconds=time.perf_counter() - started)
    raise AssertionError("unreachable")


class _Connected:
    """The coordinator's handle on a task (as :class:`~txnspec.checker.shards._Remote` on a forked worker)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def send(self, request: str, *args: Any) -> None:
        try:
            self.connection.send((request, args))
        except OSError as exc:
            raise TaskLost(f"a Spark task's connection broke: {exc}") from exc

    def receive(self) -> Any:
        try:
            ok, answer = self.connection.recv()
        except (EOFError, OSError) as exc:
            raise TaskLost(f"a Spark task's connection broke: {exc!r}") from exc
        if not ok:
            raise RuntimeError(f"a Spark task failed: {answer}")
        return answer

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.send(("stop", ()))
        self.connection.close()


class _SparkSearch(_Search):
    """The partitioned search with its workers in Spark tasks (connected before it starts)."""

    def __init__(self, model: Model[Any], selected: list[Property[Any]], canonical: Callable[[Any], Any] | None,
                 partitions: int, state_cap: int, depth_cap: int, stop_on_violation: bool,
                 handles: list[_Connected], progress: ProgressCallback | None) -> None:
        self.handles, self.progress = handles, progress
        super().__init__(model, selected, canonical, partitions, "", state_cap, depth_cap, stop_on_violation)
        self.started = time.perf_counter()

    def _start_workers(self, scratch: str) -> list[Any]:
        return list(self.handles)

    def _fingerprint(self, state: Any) -> int:
        """The tasks' fingerprint of an initial state (the driver's ``hash()`` salt is not theirs)."""
        self.workers[0].send("fingerprint_of", state)
        return int(self.workers[0].receive())

    def _next_level(self, depth: int) -> None:
        super()._next_level(depth)
        if self.progress is not None:
            self.progress(self.states, depth + 1, self.states / max(time.perf_counter() - self.started, 1e-9))


class _Coordinator:
    """The driver's side of the barrier stage: the job (run in a thread), the listener the tasks connect to."""

    def __init__(self, context: Any, host: str, partitions: int, fingerprints: str, transport: str) -> None:
        self.context, self.partitions = context, partitions
        self.fingerprints, self.transport = fingerprints, transport
        self.authkey = os.urandom(32)
        self.listener = Listener((host, 0), authkey=self.authkey)
        self.address: tuple[str, int] = self.listener.address
        self.group = f"txnspec-check-{uuid.uuid4().hex}"
        self.arrivals: queue.Queue[Connection] = queue.Queue()
        self.job: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.directory = os.path.join(tempfile.gettempdir(), self.group)

    def __enter__(self) -> _Coordinator:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.job is not None and self.job.is_alive():
            self.context.cancelJobGroup(self.group)
            self.job.join(60)
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                self.arrivals.put(self.listener.accept())
            except OSError:  # closed
                return
            except Exception:
                continue

    def start(self, plan: tasks.Plan) -> None:
        def job() -> None:
            self.context.setJobGroup(self.group, "txnspec check: the partitioned search", interruptOnCancel=True)
            try:
                self.context.parallelize(range(self.partitions), self.partitions).barrier() \
                    .mapPartitions(functools.partial(tasks.barrier_task, plan)).collect()
            except BaseException as exc:
                self.failure = exc

        self.job = threading.Thread(target=job, daemon=True)
        self.job.start()

    def connect(self) -> tuple[list[_Connected], tasks.Setup]:
        """Wait for every task's hello (a stage's attempt), decide fingerprints and transport, tell the tasks."""
        hellos: dict[int, tuple[tasks.Hello, Connection]] = {}
        deadline = time.monotonic() + HELLO_WAIT
        while len(hellos) < self.partitions:
            if self.job is not None and not self.job.is_alive():
                raise RuntimeError(f"the Spark job ended before its tasks connected: {self.failure!r}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.partitions - len(hellos)} Spark tasks did not connect within "
                                   f"{HELLO_WAIT:.0f} s")
            try:
                connection = self.arrivals.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                hello: tasks.Hello | None = connection.recv() if connection.poll(60) else None
            except (EOFError, OSError):  # a task lost before its hello: Spark runs its stage again
                hello = None
            if hello is None:
                connection.close()
                continue
            stale = hellos.get(hello.partition)
            if stale is not None:  # a task of an earlier attempt of the stage
                stale[1].close()
            hellos[hello.partition] = (hello, connection)
        ordered = [hellos[i] for i in range(self.partitions)]
        agreed = self.fingerprints == AUTO and len({hello.probe for hello, _ in ordered}) == 1
        one_host = len({hello.host for hello, _ in ordered}) == 1
        transport = self.transport if self.transport != AUTO else (FILES if one_host else SOCKETS)
        if transport == FILES and not one_host:
            raise ValueError("transport 'files' needs every task on one host: the tasks run on "
                             + ", ".join(sorted({hello.host for hello, _ in ordered})))
        setup = tasks.Setup(HASH if agreed else STABLE, transport, self.directory,
                            tuple(hello.address for hello, _ in ordered))
        for _, connection in ordered:
            connection.send(setup)
        return [_Connected(connection) for _, connection in ordered], setup

    def finish(self) -> None:
        """The tasks were told to stop: wait for the job to end."""
        assert self.job is not None
        self.job.join(HELLO_WAIT)
        if self.failure is not None:
            raise RuntimeError(f"the Spark job of the search failed after it: {self.failure!r}")
