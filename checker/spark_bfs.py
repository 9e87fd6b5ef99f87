"""Breadth-first search on Spark, level by level, with the result of the one-process engines.

What is modelled
    The search of :func:`txnspec.checker.explicit.check` (and :func:`txnspec.checker.levels.check_levels`):
    the same distinct states, transitions and depth, the same verdicts and the same shortest counterexamples,
    step for step, with the states of a level spread over Spark partitions by fingerprint. Each level is a
    single Spark job:

    1. every partition of the frontier expands its states (``mapPartitionsWithIndex``) and keeps, per
       successor fingerprint, the least path key; the candidates are encoded in groups for the partition that
       owns their fingerprints (:mod:`txnspec.checker.state_codec`: per-field tables of distinct values and
       rows of indices, 20 to 30 bytes a Kafka state) and shuffled there (``partitionBy``), with each
       partition's counts (transitions, action kinds, states without successors);
    2. partition ``i`` of the frontier, which holds the visited set of its fingerprints, and partition ``i``
       of the candidates meet (a partitioner-aware ``union``: no second shuffle); the candidates not visited
       are the level's new states, decided from fingerprints and keys alone; only they are decoded, judged on
       the pending ``always`` and ``sometimes`` properties and encoded afresh. The new partition holds the set
       (an ``array('q')`` as bytes, the new fingerprints appended), a summary, then the new states' groups; it
       is persisted and is the next level's frontier.

    So the visited set of a partition stays with it across levels (as cached bytes), a state crosses the
    shuffle once, as encoded bytes, and is decoded twice (judged by its owner, expanded a level later).

    The driver collects the summaries only (counts and each property's first hit); states never come back.
    What the executors run, and how a partition is laid out, is :mod:`txnspec.checker.spark_tasks`.

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
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from txnspec.checker import spark_tasks as tasks
from txnspec.checker.fingerprints import collision_probability
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import (
    STOPPED_ON_VIOLATION,
    CheckResult,
    Counterexample,
    check_bounds,
    finished_levels,
    kinds_coverage,
    safety_verdicts,
)
from txnspec.checker.spark_tasks import ModelFactory

ProgressCallback = Callable[[int, int, float], None]
"""Called after each level with ``(distinct states, depth, states per second)``."""


def check_spark(factory: ModelFactory, context: Any, *, properties: Sequence[str] | None = None,
                max_states: int | None = None, max_depth: int | None = None, symmetry: bool = True,
                check_deadlock: bool = True, partitions: int | None = None,
                progress: ProgressCallback | None = None, stop_on_violation: bool = False) -> CheckResult:
    """Explore the model ``factory()`` builds breadth first on the Spark context ``context``.

    Same parameters and result as :func:`txnspec.checker.explicit.check` (``partitions``: how many Spark
    partitions hold the states, default the context's parallelism, at least 2), without ``leads_to`` properties:
    they need the whole state graph, so liveness is checked locally, and naming one is a ``ValueError``. The
    result's ``store`` names the master; ``collision_probability`` is the chance a fingerprint collision hid
    a state.
    """
    check_bounds(max_states=max_states, max_depth=max_depth, partitions=partitions)
    model = factory()
    selected = model.safety_properties(properties, "the Spark search")
    # in explicit.py's order: the invariants, then the sometimes properties
    selected.sort(key=lambda p: p.expectation is not Expectation.ALWAYS)
    partitions = partitions or max(2, context.defaultParallelism)
    plan = tasks.Plan(uuid.uuid4().hex, factory, tuple(p.name for p in selected),
                      symmetry and model.symmetry is not None, partitions)
    search = _SparkSearch(plan, model, selected, context, partitions, max_states or sys.maxsize,
                          max_depth or sys.maxsize, progress)
    search.stop_on_violation = stop_on_violation
    search.run()
    return search.result(check_deadlock)


class _SparkSearch:
    def __init__(self, plan: tasks.Plan, model: Model[Any], selected: list[Property[Any]], context: Any,
                 partitions: int, state_cap: int, depth_cap: int, progress: ProgressCallback | None) -> None:
        self.plan, self.model, self.properties, self.context = plan, model, selected, context
        self.partitions, self.state_cap, self.depth_cap, self.progress = partitions, state_cap, depth_cap, progress
        self.loaded = tasks.Loaded(plan, model)
        self.first_hits: dict[str, tuple[int, bytes, int]] = {}  # property -> (level, key, fingerprint)
        self.counts = tasks.Counts(kinds={})
        self.first_deadlock: tuple[int, bytes, int] | None = None
        self.sizes: list[int] = []
        self.depth_capped = False  # the depth bound stopped the search: its last level is whole
        self.states = 0
        self.stop_reason: str | None = None
        self.seconds = 0.0
        self.stop_on_violation = False  # the first violated invariant ends the search

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
            .partitionBy(self.partitions, tasks.owner).mapPartitions(tasks.first_level, preservesPartitioning=True) \
            .persist(StorageLevel.MEMORY_AND_DISK)
        try:
            depth = 0
            while self.sizes[-1] and self.stop_reason is None:
                if depth >= self.depth_cap:
                    self.stop_reason = f"the depth cap ({self.depth_cap}) was reached"
                    self.depth_capped = True
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
            kept.append((fp, (tasks.key_of(index), state)))
            for prop in self.properties:
                if prop.name not in self.first_hits and tasks.hit(prop, state):
                    self.first_hits[prop.name] = (0, tasks.key_of(index), fp)
            if self._all_found():
                self.stop_reason = "every invariant is violated (the search stopped early)"
                break
            if self.stop_on_violation and any(p.expectation is Expectation.ALWAYS and p.name in self.first_hits
                                              for p in self.properties):
                self.stop_reason = STOPPED_ON_VIOLATION
                break
        self.sizes.append(len(kept))
        self.states = len(kept)
        return kept

    def _next_level(self, frontier: Any, depth: int) -> Any:
        """The RDD of level ``depth + 1`` (set, summary, new states per partition), not yet computed."""
        candidates = frontier.mapPartitionsWithIndex(functools.partial(tasks.task, tasks.expand, self.plan)) \
            .partitionBy(self.partitions, tasks.owner)
        joined = frontier.union(candidates)  # the frontier's cached bytes, straight to tasks.merge: it reads the set
        if joined.getNumPartitions() != self.partitions:
            raise RuntimeError(f"Spark did not co-partition the visited set and the candidates of level {depth + 1} "
                               f"({joined.getNumPartitions()} partitions, not {self.partitions})")
        return joined.mapPartitions(functools.partial(tasks.task, tasks.merge, self.plan, self.pending),
                                    preservesPartitioning=True)

    def _judge_level(self, frontier: Any, level: Any, depth: int) -> None:
        """Collect the summaries of the new level; cut it where the one-process search would have stopped."""
        summaries: list[tasks.Summary] = [
            s for _, s in level.mapPartitions(functools.partial(tasks.tagged, tasks.SUMMARY)).collect()]
        counts = tasks.Counts(kinds={})
        hits: dict[str, tasks.Hit] = {}
        for summary in summaries:
            counts.add(summary.counts)
            for name, found in summary.hits.items():
                if name not in hits or found < hits[name]:
                    hits[name] = found
        new = sum(s.new for s in summaries)
        room = self.state_cap - self.states
        cut: bytes | None = None  # the first state the one-process search would not have stored
        if new > room:
            cut = level.mapPartitions(tasks.keys).sortBy(lambda k: k, numPartitions=self.partitions) \
                .zipWithIndex().filter(lambda pair: pair[1] == room).keys().first()
            hits = {name: found for name, found in hits.items() if found[0] < cut}
            self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
        violations = [hits[p.name][0] for p in self.properties
                      if p.expectation is Expectation.ALWAYS and p.name in hits]
        if self.stop_on_violation and violations:  # cut at the first violation: hits after it are not reached
            first = min(violations)
            hits = {name: found for name, found in hits.items() if found[0] <= first}
        for name, (key, fp) in hits.items():
            self.first_hits[name] = (depth + 1, key, fp)
        stored, last_parent = new, None
        if self.stop_on_violation and violations:
            stop = min(violations)
            self.stop_reason = STOPPED_ON_VIOLATION
            stored = level.mapPartitions(tasks.keys).filter(lambda k: k <= stop).count()
            last_parent = stop[:-tasks.INDEX]
        elif hits and self._all_found():
            stop = max(key for key, _ in hits.values())
            self.stop_reason = "every invariant is violated (the search stopped early)"
            stored = level.mapPartitions(tasks.keys).filter(lambda k: k <= stop).count()
            last_parent = stop[:-tasks.INDEX]
        elif cut is not None:
            stored, last_parent = room, cut[:-tasks.INDEX]
        if last_parent is None:
            self.counts.transitions += counts.transitions
        else:
            self.counts.transitions += frontier.mapPartitions(
                functools.partial(tasks.task, tasks.successor_counts, self.plan, last_parent)).sum()
        self.counts.add(tasks.Counts(kinds=counts.kinds, deadlocks=counts.deadlocks))
        if counts.first_deadlock is not None and self.first_deadlock is None:
            self.first_deadlock = (depth, *counts.first_deadlock)
        self.sizes.append(stored)
        self.states += stored

    def _path(self, key: bytes, fp: int) -> tuple[tuple[Any, Any], ...]:
        """Re-execute a path key from its initial state: the typed actions and states of the path."""
        indices = [int.from_bytes(key[i:i + tasks.INDEX], "big") for i in range(0, len(key), tasks.INDEX)]
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
        verdicts = safety_verdicts(self.properties, self.first_hits.get, lambda found: self._path(*found[1:]),
                                   complete)
        deadlock = self.first_deadlock if check_deadlock else None
        coverage, never_taken = kinds_coverage(self.model, self.counts.kinds or {})
        depth = max((level for level, size in enumerate(self.sizes) if size), default=0)
        return CheckResult(
            model_name=self.model.name, states=self.states, transitions=self.counts.transitions, depth=depth,
            seconds=self.seconds, complete=complete, verdicts=verdicts,
            deadlock=Counterexample("deadlock", self._path(*deadlock[1:])) if deadlock else None,
            deadlock_count=self.counts.deadlocks if check_deadlock else 0, coverage=coverage,
            never_taken=never_taken, describe_state=self.model.describe_state,
            stop_reason=self.stop_reason, symmetry=self.plan.symmetry,
            store=f"spark ({self.context.master}, {self.partitions} partitions)",
            collision_probability=collision_probability(self.states),
            level_sizes=finished_levels(self.sizes, self.stop_reason is None or self.depth_capped))
