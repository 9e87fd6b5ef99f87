"""Breadth-first search on Spark, level by level, with the result of the one-process engines.

What is modelled
    The search of :func:`txnspec.checker.explicit.check` (and :func:`txnspec.checker.levels.check_levels`):
    the same distinct states, transitions and depth, the same verdicts and the same shortest counterexamples,
    step for step, with the states of a level spread over Spark partitions by fingerprint. Each level is a
    single Spark job:

    1. every partition of the frontier expands its states (``mapPartitionsWithIndex``) and keeps, per
       successor fingerprint, the first occurrence; the records are shuffled by fingerprint (``partitionBy``
       with the fingerprint as partition function), with each partition's counts (transitions, action
       kinds, states without successors);
    2. partition ``i`` of the frontier, which holds the visited set of its fingerprints, and partition ``i``
       of the candidates meet (a partitioner-aware ``union``: no second shuffle); the candidates not visited
       are the level's new states, sorted, judged on the pending ``always`` and ``sometimes`` properties,
       and added to the set. The new partition holds the set (an ``array('q')`` as bytes), a summary, then
       the new states pickled in chunks; it is persisted and is the next level's frontier.

    The driver collects the summaries only (counts and each property's first hit); states never come back.
    A reader that wants the set or the summary passes the states over as bytes: PySpark reuses a Python
    worker only when its task read all of its input, so every task reads every record, and states are
    unpickled once a level. The cyclic garbage collector is paused in the tasks (see :func:`_task`).

Order, and shortest counterexamples
    A state carries its *path key*: the successor indices (4 bytes each, big-endian) from an initial state,
    the first of them the initial state's index. Of the paths that reach a state first, the one-process
    search records the one whose parent comes first in its level, then the lowest successor index; by
    induction that is the least key, and byte order on keys of one level is the one-process search's order.
    So every partition keeps the least key per fingerprint, the first hit of a property is the least key that
    hits it, a counterexample is rebuilt by re-executing its key from the initial state (the typed actions,
    checked against the fingerprint), and where the one-process search stops within a level (a state cap,
    or every invariant violated), the level is cut at the same state by counting keys: the counts agree.

Fingerprints
    :mod:`txnspec.checker.stable_fingerprint`: equal in the driver and every executor whatever their string
    hash seeds (``hash()`` is not). A collision would hide a state: the result reports its chance.

Assumes
    The model is built by ``factory``, a picklable callable without arguments (a top-level function or an
    instance of a top-level class), in the driver and once in each executor's Python worker; its successor
    function is deterministic (the same successors in the same order in every process). Executors import
    this package.

Left out
    ``leads_to`` properties and the state graph (``ValueError``: liveness needs every edge, so it stays with
    the exact engine, in one process); the coverage of a level where the search stopped within it is
    counted for the whole level, as with ``check_levels``; states without successors are counted for each
    level expanded.
"""

from __future__ import annotations

import functools
import gc
import pickle
import sys
import time
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from txnspec.checker.fingerprints import collision_probability
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import CheckResult, Counterexample, PropertyVerdict, action_kind
from txnspec.checker.stable_fingerprint import Fingerprinter

ModelFactory = Callable[[], Model[Any]]
ProgressCallback = Callable[[int, int, float], None]
"""Called after each level with ``(distinct states, depth, states per second)``."""

_INDEX = 4  # bytes of one successor index in a path key
_CHUNK = 2048  # states pickled together in a level's partition
_VISITED, _SUMMARY, _STATES, _STATS = "visited", "summary", "states", "stats"  # tags of a partition's records
Hit = tuple[bytes, int]  # (path key, fingerprint) of a state


@dataclass(frozen=True)
class _Plan:
    """What every task needs: the model's factory and the run's choices (shipped with each task)."""

    token: str  # names this run, so that an executor's Python worker builds the model once
    factory: ModelFactory
    names: tuple[str, ...]
    symmetry: bool


@dataclass
class _Counts:
    """A partition's expansion: successors generated, per action kind, and states without successors."""

    transitions: int = 0
    kinds: dict[str, int] | None = None
    deadlocks: int = 0
    first_deadlock: Hit | None = None

    def add(self, other: _Counts) -> None:
        self.transitions += other.transitions
        kinds = self.kinds if self.kinds is not None else {}
        for kind, n in (other.kinds or {}).items():
            kinds[kind] = kinds.get(kind, 0) + n
        self.kinds = kinds
        self.deadlocks += other.deadlocks
        if other.first_deadlock is not None and (self.first_deadlock is None
                                                 or other.first_deadlock < self.first_deadlock):
            self.first_deadlock = other.first_deadlock


@dataclass
class _Summary:
    """A partition's part of a new level: how many new states, the first hit of each property, the counts."""

    new: int
    hits: dict[str, Hit]
    counts: _Counts


class _Loaded:
    """The model as an executor (or the driver) uses it."""

    def __init__(self, plan: _Plan, model: Model[Any] | None = None) -> None:
        self.model = model if model is not None else plan.factory()
        self.properties = {p.name: p for p in self.model.properties if p.name in plan.names}
        canonical = self.model.symmetry if plan.symmetry else None
        fingerprint = Fingerprinter().fingerprint
        self.fingerprint: Callable[[Any], int] = fingerprint if canonical is None \
            else (lambda state: fingerprint(canonical(state)))


_LOADED: dict[str, _Loaded] = {}


def _load(plan: _Plan) -> _Loaded:
    found = _LOADED.get(plan.token)
    if found is None:
        _LOADED.clear()  # one run at a time in a Python worker
        found = _LOADED[plan.token] = _Loaded(plan)
    return found


def _owner(key: Any) -> int:
    """The partition function: a state's fingerprint, or for a partition's counts its source partition."""
    return key if type(key) is int else key[1]


def _hit(prop: Property[Any], state: Any) -> bool:
    """An ``always`` property is hit where it fails, a ``sometimes`` property where it holds."""
    holds = prop.condition(state)
    return not holds if prop.expectation is Expectation.ALWAYS else bool(holds)


def _key(index: int) -> bytes:
    return index.to_bytes(_INDEX, "big")


def _task(function: Callable[..., Iterator[Any]], *args: Any) -> Iterator[Any]:
    """Run a partition's function with the cyclic garbage collector paused, as explicit.py does: states form
    no cycles, and a collection would walk every object the Python worker holds (the fingerprint memory, the
    spec's memos) each time unpickling allocates enough: a level ran ten times slower with it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield from function(*args)
    finally:
        if collecting:
            gc.enable()


def _states(items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[int, bytes, Any]]:
    """The ``(fingerprint, key, state)`` records of a level's partition (reading every record, see _tagged)."""
    for tag, value in items:
        if tag == _STATES:
            yield from pickle.loads(value)


def _pack(records: list[tuple[int, bytes, Any]]) -> Iterator[tuple[str, bytes]]:
    """States as pickled chunks: sub-states shared within a chunk are written once, and a reader that wants
    only the set or the summary skips them as bytes."""
    for start in range(0, len(records), _CHUNK):
        yield _STATES, pickle.dumps(records[start:start + _CHUNK], protocol=pickle.HIGHEST_PROTOCOL)


def _expand(plan: _Plan, partition: int, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Step 1: the successors of a partition's states, the least key per fingerprint, and the counts."""
    loaded = _load(plan)
    next_steps, is_final, fingerprint = loaded.model.next_steps, loaded.model.is_final, loaded.fingerprint
    best: dict[int, tuple[bytes, Any]] = {}
    labels: dict[Any, int] = {}
    counts = _Counts()
    for fp, key, state in _states(items):
        successors = next_steps(state)
        if type(successors) is not list:
            successors = list(successors)
        counts.transitions += len(successors)
        if not successors:
            if is_final is None or not is_final(state):
                counts.add(_Counts(deadlocks=1, first_deadlock=(key, fp)))
            continue
        for index, (action, successor) in enumerate(successors):
            labels[action] = labels.get(action, 0) + 1
            target = fingerprint(successor)
            path = key + _key(index)
            held = best.get(target)
            if held is None or path < held[0]:
                best[target] = (path, successor)
    kinds: dict[str, int] = {}
    for label, n in labels.items():
        kind = action_kind(label)
        kinds[kind] = kinds.get(kind, 0) + n
    counts.kinds = kinds
    yield (_STATS, partition), counts
    yield from best.items()


def _merge(plan: _Plan, pending: tuple[str, ...], items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Step 2: a partition's visited set meets its candidates; the new states, judged, make the next level."""
    loaded = _load(plan)
    visited: set[int] | None = None
    best: dict[int, tuple[bytes, Any]] = {}
    counts = _Counts()
    for tag, value in items:
        if type(tag) is int:
            held = best.get(tag)
            if held is None or value[0] < held[0]:
                best[tag] = value
        elif tag == _VISITED:
            visited = set(array("q", value))
        elif type(tag) is tuple:
            counts.add(value)
    if visited is None:
        raise RuntimeError("a partition of the candidates met no partition of the visited set: Spark did not "
                           "co-partition them")
    new = sorted(((key, fp, state) for fp, (key, state) in best.items() if fp not in visited),
                 key=lambda r: r[0])
    checks = [loaded.properties[name] for name in pending]
    hits: dict[str, Hit] = {}
    for key, fp, state in new:
        visited.add(fp)
        if checks and any(_hit(p, state) for p in checks):
            hits.update((p.name, (key, fp)) for p in checks if _hit(p, state))
            checks = [p for p in checks if p.name not in hits]
    yield _VISITED, array("q", visited).tobytes()
    yield _SUMMARY, _Summary(len(new), hits, counts)
    yield from _pack([(fp, key, state) for key, fp, state in new])


def _first_level(items: Iterable[tuple[int, tuple[bytes, Any]]]) -> Iterator[tuple[Any, Any]]:
    kept = sorted(((fp, key, state) for fp, (key, state) in items), key=lambda r: r[1])
    yield _VISITED, array("q", (fp for fp, _, _ in kept)).tobytes()
    yield _SUMMARY, None
    yield from _pack(kept)


def _tagged(tag: str, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """The records tagged ``tag``. Every record is read: a Python worker that leaves input unread is not
    reused (PySpark), and the next task would start a new one and build the model again."""
    return (item for item in items if item[0] == tag)


def _keys(items: Iterable[tuple[Any, Any]]) -> Iterator[bytes]:
    return (key for _, key, _ in _states(items))


def _successor_counts(plan: _Plan, last: bytes, items: Iterable[tuple[Any, Any]]) -> Iterator[int]:
    """How many successors the states up to key ``last`` have (the transitions before a stop within a level)."""
    next_steps = _load(plan).model.next_steps
    for _, key, state in _states(items):
        if key <= last:
            yield sum(1 for _ in next_steps(state))


def check_spark(factory: ModelFactory, context: Any, *, properties: Sequence[str] | None = None,
                max_states: int | None = None, max_depth: int | None = None, symmetry: bool = True,
                check_deadlock: bool = True, partitions: int | None = None,
                progress: ProgressCallback | None = None) -> CheckResult:
    """Explore the model ``factory()`` builds breadth first on the Spark context ``context``.

    Same parameters and result as :func:`txnspec.checker.explicit.check` (``partitions``: how many Spark
    partitions hold the states, default the context's parallelism, at least 2), without ``leads_to`` properties:
    they need the whole state graph, so liveness is checked locally, and naming one is a ``ValueError``. The
    result's ``store`` names the master; ``collision_probability`` is the chance a fingerprint collision hid
    a state.
    """
    for name, value in (("max_states", max_states), ("max_depth", max_depth), ("partitions", partitions)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    model = factory()
    selected = [model.property(n) for n in dict.fromkeys(properties)] if properties is not None \
        else list(model.properties)
    liveness = [p.name for p in selected if p.expectation is Expectation.LEADS_TO]
    if liveness:
        raise ValueError("leads-to properties need the whole state graph, which the Spark search does not keep: "
                         f"{', '.join(liveness)} (liveness stays local: use the exact engine)")
    # in explicit.py's order: the invariants, then the sometimes properties
    selected.sort(key=lambda p: p.expectation is not Expectation.ALWAYS)
    plan = _Plan(uuid.uuid4().hex, factory, tuple(p.name for p in selected), symmetry and model.symmetry is not None)
    search = _SparkSearch(plan, model, selected, context, partitions or max(2, context.defaultParallelism),
                          max_states or sys.maxsize, max_depth or sys.maxsize, progress)
    search.run()
    return search.result(check_deadlock)


class _SparkSearch:
    def __init__(self, plan: _Plan, model: Model[Any], selected: list[Property[Any]], context: Any,
                 partitions: int, state_cap: int, depth_cap: int, progress: ProgressCallback | None) -> None:
        self.plan, self.model, self.properties, self.context = plan, model, selected, context
        self.partitions, self.state_cap, self.depth_cap, self.progress = partitions, state_cap, depth_cap, progress
        self.loaded = _Loaded(plan, model)
        self.first_hits: dict[str, tuple[int, bytes, int]] = {}  # property -> (level, key, fingerprint)
        self.counts = _Counts(kinds={})
        self.first_deadlock: tuple[int, bytes, int] | None = None
        self.sizes: list[int] = []
        self.states = 0
        self.stop_reason: str | None = None
        self.seconds = 0.0

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.properties if p.name not in self.first_hits)

    def _all_found(self) -> bool:
        """As explicit.py's judge: every invariant violated and every witness found ends the search."""
        return any(p.expectation is Expectation.ALWAYS for p in self.properties) and not self.pending

    def run(self) -> None:
        from pyspark import StorageLevel

        started = time.perf_counter()
        frontier = self.context.parallelize(self._initial_level(), self.partitions) \
            .partitionBy(self.partitions, _owner).mapPartitions(_first_level, preservesPartitioning=True) \
            .persist(StorageLevel.MEMORY_AND_DISK)
        try:
            depth = 0
            while self.sizes[-1] and self.stop_reason is None:
                if depth >= self.depth_cap:
                    self.stop_reason = f"the depth cap ({self.depth_cap}) was reached"
                    break
                level = self._next_level(frontier, depth).persist(StorageLevel.MEMORY_AND_DISK)
                self._judge_level(frontier, level, depth)
                frontier.unpersist()
                frontier = level
                depth += 1
                if self.progress is not None:
                    self.progress(self.states, depth, self.states / max(time.perf_counter() - started, 1e-9))
        finally:
            frontier.unpersist()
            self.seconds = time.perf_counter() - started

    def _initial_level(self) -> list[tuple[int, tuple[bytes, Any]]]:
        """Level 0, in the driver, in explicit.py's order (which also stops within it)."""
        kept: list[tuple[int, tuple[bytes, Any]]] = []
        seen: set[int] = set()
        for index, state in enumerate(self.model.init_states()):
            fp = self.loaded.fingerprint(state)
            if fp in seen:
                continue
            if len(kept) >= self.state_cap:
                self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
                break
            seen.add(fp)
            kept.append((fp, (_key(index), state)))
            for prop in self.properties:
                if prop.name not in self.first_hits and _hit(prop, state):
                    self.first_hits[prop.name] = (0, _key(index), fp)
            if self._all_found():
                self.stop_reason = "every invariant is violated (the search stopped early)"
                break
        self.sizes.append(len(kept))
        self.states = len(kept)
        return kept

    def _next_level(self, frontier: Any, depth: int) -> Any:
        """The RDD of level ``depth + 1`` (set, summary, new states per partition), not yet computed."""
        candidates = frontier.mapPartitionsWithIndex(functools.partial(_task, _expand, self.plan)) \
            .partitionBy(self.partitions, _owner)
        joined = frontier.union(candidates)  # the frontier's cached bytes, straight to _merge: it reads the set
        if joined.getNumPartitions() != self.partitions:
            raise RuntimeError(f"Spark did not co-partition the visited set and the candidates of level {depth + 1} "
                               f"({joined.getNumPartitions()} partitions, not {self.partitions})")
        return joined.mapPartitions(functools.partial(_task, _merge, self.plan, self.pending),
                                    preservesPartitioning=True)

    def _judge_level(self, frontier: Any, level: Any, depth: int) -> None:
        """Collect the summaries of the new level; cut it where the one-process search would have stopped."""
        summaries: list[_Summary] = [s for _, s in level.mapPartitions(functools.partial(_tagged, _SUMMARY))
                                     .collect()]
        counts = _Counts(kinds={})
        hits: dict[str, Hit] = {}
        for summary in summaries:
            counts.add(summary.counts)
            for name, hit in summary.hits.items():
                if name not in hits or hit < hits[name]:
                    hits[name] = hit
        new = sum(s.new for s in summaries)
        room = self.state_cap - self.states
        cut: bytes | None = None  # the first state the one-process search would not have stored
        if new > room:
            cut = level.mapPartitions(_keys).sortBy(lambda k: k, numPartitions=self.partitions) \
                .zipWithIndex().filter(lambda pair: pair[1] == room).keys().first()
            hits = {name: hit for name, hit in hits.items() if hit[0] < cut}
            self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
        for name, (key, fp) in hits.items():
            self.first_hits[name] = (depth + 1, key, fp)
        stored, last_parent = new, None
        if hits and self._all_found():
            stop = max(key for key, _ in hits.values())
            self.stop_reason = "every invariant is violated (the search stopped early)"
            stored = level.mapPartitions(_keys).filter(lambda k: k <= stop).count()
            last_parent = stop[:-_INDEX]
        elif cut is not None:
            stored, last_parent = room, cut[:-_INDEX]
        if last_parent is None:
            self.counts.transitions += counts.transitions
        else:
            self.counts.transitions += frontier.mapPartitions(
                functools.partial(_task, _successor_counts, self.plan, last_parent)).sum()
        self.counts.add(_Counts(kinds=counts.kinds, deadlocks=counts.deadlocks))
        if counts.first_deadlock is not None and self.first_deadlock is None:
            self.first_deadlock = (depth, *counts.first_deadlock)
        self.sizes.append(stored)
        self.states += stored

    def _path(self, key: bytes, fp: int) -> tuple[tuple[Any, Any], ...]:
        """Re-execute a path key from its initial state: the typed actions and states of the path."""
        indices = [int.from_bytes(key[i:i + _INDEX], "big") for i in range(0, len(key), _INDEX)]
        state = list(self.model.init_states())[indices[0]]
        steps: list[tuple[Any, Any]] = [(None, state)]
        for index in indices[1:]:
            action, state = list(self.model.next_steps(state))[index]
            steps.append((action, state))
        if self.loaded.fingerprint(state) != fp:
            raise RuntimeError("re-executing a path did not reach the state it was recorded for: the model's "
                               "successors differ between processes (not deterministic?)")
        return tuple(steps)

    def result(self, check_deadlock: bool) -> CheckResult:
        complete = self.stop_reason is None
        verdicts = []
        for prop in self.properties:
            hit = self.first_hits.get(prop.name)
            sometimes = prop.expectation is Expectation.SOMETIMES
            path = Counterexample(prop.name, self._path(*hit[1:]), witness=sometimes) if hit is not None else None
            if not sometimes:
                holds = False if hit is not None else (True if complete else None)
            else:
                holds = True if hit is not None else (False if complete else None)
            verdicts.append(PropertyVerdict(prop.name, prop.expectation.value, holds, path, prop.description,
                                            never_satisfied=hit is None and complete and sometimes))
        deadlock = self.first_deadlock if check_deadlock else None
        declared = list((self.model.metadata or {}).get("action_kinds", ()))
        kinds = dict(self.counts.kinds or {})
        for kind in declared:
            kinds.setdefault(kind, 0)
        depth = max((level for level, size in enumerate(self.sizes) if size), default=0)
        return CheckResult(
            model_name=self.model.name, states=self.states, transitions=self.counts.transitions, depth=depth,
            seconds=self.seconds, complete=complete, verdicts=tuple(verdicts),
            deadlock=Counterexample("deadlock", self._path(*deadlock[1:])) if deadlock else None,
            deadlock_count=self.counts.deadlocks if check_deadlock else 0, coverage=dict(sorted(kinds.items())),
            never_taken=tuple(k for k in declared if kinds[k] == 0), describe_state=self.model.describe_state,
            stop_reason=self.stop_reason, symmetry=self.plan.symmetry,
            store=f"spark ({self.context.master}, {self.partitions} partitions)",
            collision_probability=collision_probability(self.states))
